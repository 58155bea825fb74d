//! The front door's bounds on its clients: a client held while its host
//! starts (rule A8), waiting clients bounded per source and in total,
//! refusals that tell a client nothing it should not learn, and sources
//! keyed by address family.

use std::time::Duration;

use gateway::Config;
use placement::SessionState;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use crate::front_door::*;
use crate::{build_pdu, fixture};

/// A front door that asks again at once and waits `wait` for a host.
fn waiting_config(wait: Duration) -> Config {
    let mut c = config(Some("farm"));
    c.bounds.host_start_retry_interval = Duration::from_millis(10);
    c.bounds.host_start_wait = wait;
    c
}

fn start_for(placer: &Recorder, connects: u32) {
    placer
        .starting
        .store(connects, std::sync::atomic::Ordering::SeqCst);
}

#[tokio::test]
async fn a8_a_client_is_held_while_its_host_starts_then_placed_and_relayed() {
    let (h1, mut seen1) = fake_host("h1").await;
    let placer = Recorder::new(&[("h1", &h1)]);
    start_for(&placer, 3);
    let door = door(placer.clone(), waiting_config(Duration::from_secs(60))).await;
    let first = fixture("xfreerdp-2.11.7-user.bin");
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&first).await.expect("write");
    // Three 503s, then the fourth connect places alice: the same client,
    // never closed, is relayed.
    assert_eq!(read_n(&mut c, 2).await, b"h1");
    assert_eq!(seen1.recv().await.expect("pdu"), first, "R4: byte for byte");
    c.write_all(b"ping").await.expect("write");
    assert_eq!(read_n(&mut c, 4).await, b"ping");
    let events = placer.wait_events(5).await;
    assert_eq!(
        events[..5],
        [
            connect("farm", "alice", &[]),
            connect("farm", "alice", &[]),
            connect("farm", "alice", &[]),
            connect("farm", "alice", &[]),
            Event::State("s1".into(), SessionState::Active),
        ]
    );
}

#[tokio::test]
async fn a8_a_client_whose_host_does_not_come_within_the_bound_is_closed_with_no_session() {
    let (h1, _seen1) = fake_host("h1").await;
    let placer = Recorder::new(&[("h1", &h1)]);
    start_for(&placer, u32::MAX);
    let door = door(placer.clone(), waiting_config(Duration::from_millis(50))).await;
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&fixture("xfreerdp-2.11.7-user.bin"))
        .await
        .expect("write");
    assert_refused(&mut c, gateway::pdu::failure::UNAVAILABLE).await;
    let events = placer.events();
    assert!(events.len() >= 2, "asked again while waiting: {events:?}");
    assert!(
        events.iter().all(|e| *e == connect("farm", "alice", &[])),
        "only connects, nothing placed: {events:?}"
    );
}

/// Opens a client of `user` whose first PDU names it.
async fn client_of(door: &Door, user: &str) -> TcpStream {
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    let line = format!("Cookie: mstshash={user}");
    c.write_all(&build_pdu(Some(line.as_bytes()), None, None))
        .await
        .expect("write");
    c
}

/// Waits until `placer` was asked to connect `user`.
async fn asked(placer: &Recorder, user: &str) {
    let deadline = tokio::time::Instant::now() + PROMPTLY;
    while !placer
        .events()
        .iter()
        .any(|e| matches!(e, Event::Connect { user: u, .. } if u == user))
    {
        assert!(tokio::time::Instant::now() < deadline, "{user} never asked");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a8_waiting_clients_are_bounded_per_source_and_in_total() {
    let (h1, _seen1) = fake_host("h1").await;
    // Per source: 2 may wait; the third is closed, the two are relayed
    // once the host is available.
    let placer = Recorder::new(&[("h1", &h1)]);
    start_for(&placer, u32::MAX);
    let mut cfg = waiting_config(Duration::from_secs(60));
    cfg.bounds.source_limits.max_waiting = 2;
    let d = door(placer.clone(), cfg).await;
    let mut a = client_of(&d, "a").await;
    asked(&placer, "a").await;
    let mut b = client_of(&d, "b").await;
    asked(&placer, "b").await;
    let mut c = client_of(&d, "c").await;
    assert_refused(&mut c, gateway::pdu::failure::UNAVAILABLE).await;
    start_for(&placer, 0);
    assert_eq!(read_n(&mut a, 2).await, b"h1");
    assert_eq!(read_n(&mut b, 2).await, b"h1");

    // In total: 1 may wait.
    let placer = Recorder::new(&[("h1", &h1)]);
    start_for(&placer, u32::MAX);
    let mut cfg = waiting_config(Duration::from_secs(60));
    cfg.bounds.max_waiting_connections = 1;
    let d = door(placer.clone(), cfg).await;
    let mut a = client_of(&d, "a").await;
    asked(&placer, "a").await;
    let mut b = client_of(&d, "b").await;
    assert_refused(&mut b, gateway::pdu::failure::UNAVAILABLE).await;
    start_for(&placer, 0);
    assert_eq!(read_n(&mut a, 2).await, b"h1");
}

/// What a client sees of a refusal: the bytes before the close, and how
/// the connection ended.
async fn refusal_seen(door: &Door, line: &[u8]) -> String {
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&build_pdu(Some(line), None, None))
        .await
        .expect("write");
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        match tokio::time::timeout(PROMPTLY, c.read(&mut buf)).await {
            Ok(Ok(0)) => return format!("{got:?} then closed"),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Ok(Err(e)) => return format!("{got:?} then {:?}", e.kind()),
            Err(_) => panic!("the front door did not close the connection"),
        }
    }
}

#[tokio::test]
async fn an_unknown_pool_and_a_pool_closed_to_the_front_door_look_alike_to_the_client() {
    let (h1, mut seen1) = fake_host("h1").await;
    let placer = Recorder::new(&[("h1", &h1)]);
    let door = door(placer.clone(), config(None)).await;
    let key = api::ticket::TicketKey::derive("the broker's secret");
    let ticket = |pool: &str| key.issue(pool, "alice", 4_000_000_000).expect("fits");
    // Routing tokens: an unknown pool, one closed to the front door, and
    // one that requires a ticket all get the same answer (access refused).
    let unknown = refusal_seen(&door, b"tsv://MS Terminal Services Plugin.1.missing1").await;
    for line in [
        &b"tsv://MS Terminal Services Plugin.1.private1"[..],
        &b"tsv://MS Terminal Services Plugin.1.ticketed1"[..],
    ] {
        assert_eq!(
            refusal_seen(&door, line).await,
            unknown,
            "{}",
            String::from_utf8_lossy(line)
        );
    }
    let told = |code: u32| {
        let mut answer = vec![3u8, 0, 0, 19, 14, 0xD0, 0, 0, 0, 0, 0, 3, 0, 8, 0];
        answer.extend_from_slice(&code.to_le_bytes());
        format!("{answer:?} then closed")
    };
    assert_eq!(unknown, told(gateway::pdu::failure::ACCESS_REFUSED));
    // Tickets: one for an unknown pool and one for a closed pool are told
    // what any refused ticket is told.
    let missing = refusal_seen(&door, ticket("missing2").as_bytes()).await;
    assert_eq!(
        refusal_seen(&door, ticket("private2").as_bytes()).await,
        missing
    );
    assert_eq!(missing, told(gateway::pdu::failure::TICKET_REFUSED));
    assert_eq!(placer.events(), vec![], "nobody was asked to place");
    assert!(seen1.try_recv().is_err(), "no host was dialled");
}

#[test]
fn door_tables_key_ipv4_mapped_sources_by_their_ipv4_address_and_ipv6_by_its_64() {
    use gateway::sources::{Limits, SourceRefusal, Sources};
    let sources = Sources::new(Limits {
        max_connections: 1,
        ..Limits::default()
    });
    let ip = |s: &str| s.parse::<std::net::IpAddr>().expect("address");
    // Two addresses of one /64 share one budget; the next /64 has its own.
    let _a = sources
        .admit(ip("2001:db8:1:2::1"))
        .expect("first of the /64");
    assert_eq!(
        sources.admit(ip("2001:db8:1:2:ffff:ffff:ffff:fffe")).err(),
        Some(SourceRefusal::Connections)
    );
    let _b = sources.admit(ip("2001:db8:1:3::1")).expect("another /64");
    // An IPv4 client arriving mapped on a dual-stack listener is its IPv4
    // address: the same source as that address, and not one for all of IPv4.
    let _c = sources.admit(ip("::ffff:192.0.2.7")).expect("mapped");
    assert_eq!(
        sources.admit(ip("192.0.2.7")).err(),
        Some(SourceRefusal::Connections)
    );
    let _d = sources
        .admit(ip("::ffff:198.51.100.9"))
        .expect("another IPv4 address, mapped");
    let _e = sources
        .admit(ip("203.0.113.1"))
        .expect("another IPv4 address");
}

#[tokio::test]
async fn on_a_dual_stack_listener_each_ipv4_client_is_a_source_of_its_own() {
    let (h1, _seen1) = fake_host("h1").await;
    let placer = Recorder::new(&[("h1", &h1)]);
    let mut cfg = config(Some("farm"));
    cfg.bounds.source_limits.max_connections = 1;
    let listener = TcpListener::bind("[::]:0").await.expect("bind [::]");
    let port = listener.local_addr().expect("addr").port();
    let (_stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(gateway::serve(listener, placer.clone(), cfg, async move {
        let _ = stopped.await;
    }));
    let connect_from = async |from: &str| {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(format!("{from}:0").parse().expect("address"))
            .expect("bind");
        socket
            .connect(format!("127.0.0.1:{port}").parse().expect("address"))
            .await
            .expect("connect")
    };
    // 127.0.0.2 holds its one connection (it arrives as ::ffff:127.0.0.2).
    let mut first = connect_from("127.0.0.2").await;
    first
        .write_all(&build_pdu(Some(b"Cookie: mstshash=u1"), None, None))
        .await
        .expect("write");
    assert_eq!(read_n(&mut first, 2).await, b"h1");
    // Another IPv4 client is served all the same.
    let mut second = connect_from("127.0.0.3").await;
    second
        .write_all(&build_pdu(Some(b"Cookie: mstshash=u2"), None, None))
        .await
        .expect("write");
    assert_eq!(read_n(&mut second, 2).await, b"h1");
    // 127.0.0.2's second connection is over its bound.
    let mut again = connect_from("127.0.0.2").await;
    assert_closed(&mut again).await;
}
