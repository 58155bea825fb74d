//! The RD Gateway's bounds on its clients: new sessions per source,
//! connections per source, the legacy channels' waiting slots, idle
//! connections at every step and idle channels, and refusals that tell a
//! client nothing it should not learn.

use std::time::Duration;

use gateway::rd_gateway::{self, GatewayConfig};
use gateway::tsgu::Packet;
use gateway::tsgu::hresult::*;
use gateway::tsgu::packet::*;
use placement::SessionState;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::rd_gateway::*;

#[tokio::test]
async fn a_source_over_its_share_of_new_sessions_is_refused_at_channel_create() {
    let mut config = GatewayConfig::default();
    config.bounds.source_limits.new_sessions_per_minute = 1;
    let farm = farm_with(vec![Some(host("h1").await)], config).await;
    let mut first = Client::open(&farm.gateway).await;
    assert_eq!(
        first.setup(&farm.ticket("p", "dave", 60), "p").await,
        (PKT_TYPE_CHANNEL_RESPONSE, S_OK)
    );
    assert_eq!(first.exchange(b"hi", 5).await, b"h1:hi");
    // A second new session from the same address within the minute.
    let mut second = Client::open(&farm.gateway).await;
    assert_eq!(
        second.setup(&farm.ticket("p", "erin", 60), "p").await,
        (PKT_TYPE_CHANNEL_RESPONSE, E_PROXY_MAXCONNECTIONSREACHED)
    );
    farm.wait_sessions("p", vec![s("dave", "h1", SessionState::Active)])
        .await;
    // A reconnect is not a new session: dave may come back.
    let mut again = Client::open(&farm.gateway).await;
    assert_eq!(
        again.setup(&farm.ticket("p", "dave", 60), "p").await,
        (PKT_TYPE_CHANNEL_RESPONSE, S_OK)
    );
}

#[tokio::test]
async fn a_source_over_its_connections_is_closed_before_anything_is_read() {
    let mut config = GatewayConfig::default();
    config.bounds.source_limits.max_connections = 1;
    let farm = farm_with(vec![Some(host("h1").await)], config).await;
    let _first = Client::open(&farm.gateway).await;
    let mut second = TcpStream::connect(&farm.gateway).await.expect("connect");
    let mut b = [0u8; 1];
    let n = tokio::time::timeout(PROMPTLY, second.read(&mut b))
        .await
        .expect("closed in time")
        .unwrap_or(0);
    assert_eq!(n, 0, "the second connection was closed unanswered");
}

/// A TCP connection to `to` from the loopback address `from` (all of
/// 127.0.0.0/8 is loopback: each address is a source of its own).
async fn connect_from(from: &str, to: &str) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind(format!("{from}:0").parse().expect("address"))
        .expect("bind");
    socket
        .connect(to.parse().expect("address"))
        .await
        .expect("connect")
}

/// Waits until the gateway closes `tcp` (reading and dropping what it sends).
async fn closed_by_gateway(tcp: &mut TcpStream, what: &str) {
    let deadline = tokio::time::Instant::now() + PROMPTLY;
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout_at(deadline, tcp.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(_)) => {}
            Err(_) => panic!("{what}: the gateway did not close the connection"),
        }
    }
}

#[tokio::test]
async fn many_sources_cannot_fill_the_legacy_out_channels_waiting_slots() {
    // Long idle and setup bounds: what frees the slots here is not time.
    let mut config = GatewayConfig {
        setup_timeout: Duration::from_secs(600),
        ..GatewayConfig::default()
    };
    config.bounds.handshake_timeout = Duration::from_secs(300);
    let farm = farm_with(vec![Some(host("h1").await)], config).await;
    // 32 sources, each with as many RDG_OUT_DATA as its handshakes allow
    // (8), none followed by its RDG_IN_DATA: 256, the whole table before
    // sources had a share of it.
    let per_source = gateway::sources::MAX_HANDSHAKES_PER_SOURCE;
    let mut held = Vec::new();
    for source in 2..34 {
        let from = format!("127.0.0.{source}");
        let mut waiting = 0;
        for _ in 0..per_source {
            let mut out = connect_from(&from, &farm.gateway).await;
            let id = format!("{{{}}}", uuid::Uuid::new_v4());
            out.write_all(&head("xfreerdp-2.11.7-legacy-out-head.txt", &id))
                .await
                .expect("out head");
            let answer = read_head(&mut out).await;
            if answer == "HTTP/1.1 200 OK\r\n\r\n" {
                waiting += 1;
                held.push(out);
            } else {
                assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
            }
        }
        assert_eq!(
            waiting,
            rd_gateway::MAX_WAITING_OUT_CHANNELS_PER_SOURCE,
            "{from}'s share of the waiting slots"
        );
    }
    // A genuine client from another source still opens its legacy tunnel.
    let mut client = Client::open_with(&farm.gateway, Transport::Legacy).await;
    assert_eq!(
        client.setup(&farm.ticket("p", "alice", 60), "p").await,
        (PKT_TYPE_CHANNEL_RESPONSE, S_OK)
    );
    assert_eq!(client.exchange(b"hi", 5).await, b"h1:hi");
    drop(held);
}

#[tokio::test]
async fn a_connection_idle_at_any_step_before_its_tunnel_is_closed_after_the_idle_bound() {
    // The whole setup may take far longer than the test waits: only the
    // idle bound can close these connections in time.
    let mut config = GatewayConfig {
        setup_timeout: Duration::from_secs(600),
        ..GatewayConfig::default()
    };
    config.bounds.handshake_timeout = Duration::from_millis(300);
    let farm = farm_with(vec![Some(host("h1").await)], config).await;
    let id = || format!("{{{}}}", uuid::Uuid::new_v4());

    // Says nothing at all.
    let mut tcp = TcpStream::connect(&farm.gateway).await.expect("connect");
    closed_by_gateway(&mut tcp, "silent").await;

    // Half a request head, then nothing.
    let mut tcp = TcpStream::connect(&farm.gateway).await.expect("connect");
    let whole = head("xfreerdp-2.11.7-websocket-head.txt", &id());
    tcp.write_all(&whole[..whole.len() / 2])
        .await
        .expect("write");
    closed_by_gateway(&mut tcp, "half a head").await;

    // An RDG_OUT_DATA whose RDG_IN_DATA never comes.
    let mut out = TcpStream::connect(&farm.gateway).await.expect("connect");
    out.write_all(&head("xfreerdp-2.11.7-legacy-out-head.txt", &id()))
        .await
        .expect("out head");
    assert_eq!(read_head(&mut out).await, "HTTP/1.1 200 OK\r\n\r\n");
    closed_by_gateway(&mut out, "OUT without IN").await;

    // FreeRDP's empty RDG_IN_DATA, then not its second request.
    let connection = id();
    let mut out = TcpStream::connect(&farm.gateway).await.expect("connect");
    out.write_all(&head("xfreerdp-2.11.7-legacy-out-head.txt", &connection))
        .await
        .expect("out head");
    assert_eq!(read_head(&mut out).await, "HTTP/1.1 200 OK\r\n\r\n");
    let mut input = TcpStream::connect(&farm.gateway).await.expect("connect");
    input
        .write_all(&head("xfreerdp-2.11.7-legacy-in-head-1.txt", &connection))
        .await
        .expect("in head");
    closed_by_gateway(&mut input, "IN without its second request").await;

    // Upgraded to WebSocket, then no handshake.
    let mut client = Client::open(&farm.gateway).await;
    assert_eq!(client.recv().await, None, "closed before the handshake");

    // Handshake, tunnel and tunnel auth, then no channel request.
    let mut client = Client::open(&farm.gateway).await;
    client
        .send(Packet::HandshakeRequest(HandshakeRequest {
            version_major: 1,
            version_minor: 0,
            client_version: 0,
            extended_auth: HTTP_EXTENDED_AUTH_PAA,
        }))
        .await;
    assert!(matches!(
        client.recv().await,
        Some(Packet::HandshakeResponse(_))
    ));
    client
        .send(Packet::TunnelCreate(TunnelCreate {
            capabilities: 0,
            reauth_context: None,
            paa_cookie: Some(farm.ticket("p", "alice", 60)),
        }))
        .await;
    assert!(matches!(
        client.recv().await,
        Some(Packet::TunnelResponse(_))
    ));
    client
        .send(Packet::TunnelAuth(TunnelAuth {
            client_name: "laptop".into(),
            statement_of_health: None,
        }))
        .await;
    assert!(matches!(
        client.recv().await,
        Some(Packet::TunnelAuthResponse(_))
    ));
    assert_eq!(
        client.recv().await,
        None,
        "closed before the channel request"
    );
    assert_eq!(farm.host_connections(), 0, "nothing reached a host");
    assert!(farm.sessions("p").await.is_empty());

    // A client that answers each step at once is served as usual.
    let mut client = Client::open(&farm.gateway).await;
    assert_eq!(
        client.setup(&farm.ticket("p", "bob", 60), "p").await,
        (PKT_TYPE_CHANNEL_RESPONSE, S_OK)
    );
}

#[tokio::test]
async fn an_unknown_pool_and_a_pool_closed_to_the_gateway_are_refused_as_a_forged_ticket() {
    let farm = farm(vec![Some(host("h1").await)]).await;
    // A ticket not signed by this broker (the client has none).
    let forged = |pool: &str| {
        api::ticket::TicketKey::derive("a key of the client's own")
            .issue(pool, "mallory", 4_000_000_000)
            .expect("fits")
    };
    let refused = (
        PKT_TYPE_CHANNEL_RESPONSE,
        E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED,
    );
    for (token, pool) in [
        // The pool exists and allows the gateway: the broker refuses the ticket.
        (forged("p"), "p"),
        // No such pool.
        (forged("nowhere"), "nowhere"),
        // A pool that does not allow the front door.
        (forged("closed"), "closed"),
        // Even with a ticket the broker signed.
        (farm.ticket("closed", "carol", 60), "closed"),
        (farm.ticket("nowhere", "carol", 60), "nowhere"),
    ] {
        for transport in [Transport::WebSocket, Transport::Legacy] {
            let mut client = Client::open_with(&farm.gateway, transport).await;
            assert_eq!(
                client.setup(&token, pool).await,
                refused,
                "{pool} over {transport:?}"
            );
            assert_eq!(client.recv().await, None, "closed after the refusal");
        }
    }
    assert_eq!(farm.host_connections(), 0);
}

/// Rule R4's idle bounds on an open channel, as at the front door: a
/// channel that carries no data either way is closed, soon while it shows
/// no evidence of a logon (its new session then ends, S9), later once it
/// has (its session then Disconnected).
#[tokio::test]
async fn an_idle_channel_is_closed_after_its_bound() {
    let mut config = GatewayConfig::default();
    config.bounds.idle_timeout_without_logon = Duration::from_millis(300);
    config.bounds.relay_idle_timeout = Duration::from_millis(600);
    let farm = farm_with(vec![Some(host("h1").await)], config).await;
    let mut client = Client::open(&farm.gateway).await;
    assert_eq!(
        client.setup(&farm.ticket("p", "alice", 60), "p").await,
        (PKT_TYPE_CHANNEL_RESPONSE, S_OK)
    );
    assert_eq!(client.exchange(b"hello", 8).await, b"h1:hello");
    // Then nothing: the gateway closes the tunnel.
    while client.recv().await.is_some() {}
    farm.wait_sessions("p", vec![]).await;

    let mut client = Client::open(&farm.gateway).await;
    assert_eq!(
        client.setup(&farm.ticket("p", "bob", 60), "p").await,
        (PKT_TYPE_CHANNEL_RESPONSE, S_OK)
    );
    assert_eq!(client.exchange(b"big", 2003).await.len(), 2003);
    client.exchange(&[1; 600], 600).await;
    while client.recv().await.is_some() {}
    farm.wait_sessions("p", vec![s("bob", "h1", SessionState::Disconnected)])
        .await;
}
