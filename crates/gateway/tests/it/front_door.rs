//! The front door over real sockets (rules R1–R6), with a recording
//! placer that follows rule S1 and fake session hosts that record what
//! they receive. The real broker and real RDP programs are driven by the
//! end-to-end test in `crates/deskbroker/tests/it/rdp.rs`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gateway::ConnectInput as Connect;
use gateway::{Config, Placer, PlacerError};
use placement::{Placement, SessionState};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

use crate::{DeadAddress, build_pdu, fixture};

/// How long a test waits for something that should happen at once.
pub(crate) const PROMPTLY: Duration = Duration::from_secs(5);

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    Connect {
        pool: String,
        user: String,
        exclude: Vec<String>,
    },
    State(String, SessionState),
    Logoff(String),
    HostAt(String, String),
}

struct Session {
    pool: String,
    user: String,
    host: String,
    state: SessionState,
}

/// A placer with hosts in query order that places each new user on the
/// first host not excluded, and sends a user with a session back (S1).
#[derive(Default)]
pub(crate) struct Recorder {
    hosts: Vec<(String, String)>,
    sessions: Mutex<HashMap<String, Session>>,
    events: Mutex<Vec<Event>>,
    /// The ticket of each connect request, in order.
    tickets: Mutex<Vec<Option<String>>>,
    next_id: Mutex<u32>,
    /// How many more connects are answered 503 `SessionHostStarting`
    /// (rule A8: the broker is starting a host for the user).
    pub(crate) starting: std::sync::atomic::AtomicU32,
    /// The broker's time of day, in seconds since the Unix epoch, when a
    /// test sets it (0: the system's).
    pub(crate) now: std::sync::atomic::AtomicU64,
}

impl Recorder {
    pub(crate) fn new(hosts: &[(&str, &str)]) -> Arc<Recorder> {
        Arc::new(Recorder {
            hosts: hosts
                .iter()
                .map(|(n, a)| (n.to_string(), a.to_string()))
                .collect(),
            ..Recorder::default()
        })
    }

    pub(crate) fn events(&self) -> Vec<Event> {
        self.events.lock().expect("lock").clone()
    }

    fn record(&self, e: Event) {
        self.events.lock().expect("lock").push(e);
    }

    /// Waits until `n` events were recorded (the front door reports a
    /// close asynchronously).
    pub(crate) async fn wait_events(&self, n: usize) -> Vec<Event> {
        let deadline = tokio::time::Instant::now() + PROMPTLY;
        loop {
            let events = self.events();
            if events.len() >= n || tokio::time::Instant::now() > deadline {
                return events;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn address_of(&self, host: &str) -> String {
        self.hosts
            .iter()
            .find(|(n, _)| n == host)
            .map(|(_, a)| a.clone())
            .unwrap_or_default()
    }
}

impl Placer for Recorder {
    async fn connect(&self, pool: &str, request: &Connect) -> Result<Placement, PlacerError> {
        self.record(Event::Connect {
            pool: pool.into(),
            user: request.user.clone(),
            exclude: request.exclude.clone(),
        });
        self.tickets
            .lock()
            .expect("lock")
            .push(request.ticket.clone());
        if self
            .starting
            .fetch_update(
                std::sync::atomic::Ordering::SeqCst,
                std::sync::atomic::Ordering::SeqCst,
                |n| n.checked_sub(1),
            )
            .is_ok()
        {
            return Err(PlacerError::Refused {
                code: api::ErrorCode::SessionHostStarting,
                message: "session host h1 is starting".into(),
            });
        }
        let mut sessions = self.sessions.lock().expect("lock");
        if let Some((id, s)) = sessions
            .iter()
            .find(|(_, s)| s.pool == pool && s.user == request.user)
        {
            return Ok(Placement {
                session_id: id.clone(),
                host: s.host.clone(),
                address: self.address_of(&s.host),
                reconnect: true,
                state: s.state,
            });
        }
        let Some((host, address)) = self
            .hosts
            .iter()
            .find(|(n, _)| !request.exclude.contains(n))
        else {
            return Err(PlacerError::Refused {
                code: api::ErrorCode::NoSessionHostAvailable,
                message: "no session host is available".into(),
            });
        };
        let mut next = self.next_id.lock().expect("lock");
        *next += 1;
        let id = format!("s{next}");
        sessions.insert(
            id.clone(),
            Session {
                pool: pool.into(),
                user: request.user.clone(),
                host: host.clone(),
                state: SessionState::Pending,
            },
        );
        Ok(Placement {
            session_id: id,
            host: host.clone(),
            address: address.clone(),
            reconnect: false,
            state: SessionState::Pending,
        })
    }

    async fn set_session_state(
        &self,
        _pool: &str,
        session_id: &str,
        state: SessionState,
    ) -> Result<(), PlacerError> {
        self.record(Event::State(session_id.into(), state));
        if let Some(s) = self.sessions.lock().expect("lock").get_mut(session_id) {
            s.state = state;
        }
        Ok(())
    }

    async fn logoff(&self, _pool: &str, session_id: &str) -> Result<(), PlacerError> {
        self.record(Event::Logoff(session_id.into()));
        self.sessions.lock().expect("lock").remove(session_id);
        Ok(())
    }

    /// Pools whose name starts with `private` do not allow the front door;
    /// those starting with `ticketed` require a connection ticket; those
    /// starting with `missing` do not exist.
    async fn front_door_policy(&self, pool: &str) -> Result<gateway::FrontDoorPolicy, PlacerError> {
        if pool.starts_with("missing") {
            return Err(PlacerError::Refused {
                code: api::ErrorCode::HostPoolNotFound,
                message: format!("host pool {pool} does not exist"),
            });
        }
        Ok(gateway::FrontDoorPolicy {
            allowed: !pool.starts_with("private"),
            require_ticket: pool.starts_with("ticketed"),
            windows_sign_in: false,
        })
    }

    async fn sign_in_refused(&self, _source: std::net::IpAddr, _user: Option<&str>, _reason: &str) {
    }

    /// The recorder's clock: the system's, or the time a test set.
    fn now_unix_seconds(&self) -> u64 {
        match self.now.load(std::sync::atomic::Ordering::SeqCst) {
            0 => gateway::placer::system_unix_seconds(),
            set => set,
        }
    }

    async fn host_at(&self, pool: &str, address: &str) -> Result<Option<String>, PlacerError> {
        self.record(Event::HostAt(pool.into(), address.into()));
        Ok(self
            .hosts
            .iter()
            .find(|(_, a)| a == address)
            .map(|(n, _)| n.clone()))
    }
}

/// A fake session host: for each connection, sends what it received
/// first (up to the first PDU's length) on `seen`, writes its name, then
/// echoes until the client closes.
pub(crate) async fn fake_host(name: &'static str) -> (String, mpsc::UnboundedReceiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("addr").to_string();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut header = [0u8; 4];
                if s.read_exact(&mut header).await.is_err() {
                    return;
                }
                let len = usize::from(u16::from_be_bytes([header[2], header[3]]));
                let mut pdu = header.to_vec();
                pdu.resize(len.max(4), 0);
                if s.read_exact(&mut pdu[4..]).await.is_err() {
                    return;
                }
                let _ = tx.send(pdu);
                let _ = s.write_all(name.as_bytes()).await;
                let mut buf = [0u8; 1024];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (address, rx)
}

/// A running front door; dropping it stops it.
pub(crate) struct Door {
    pub(crate) address: String,
    _stop: oneshot::Sender<()>,
}

pub(crate) async fn door(placer: Arc<Recorder>, config: Config) -> Door {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("addr").to_string();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(gateway::serve(listener, placer, config, async move {
        let _ = stopped.await;
    }));
    Door {
        address,
        _stop: stop,
    }
}

pub(crate) fn config(default_pool: Option<&str>) -> Config {
    let mut c = Config::new(default_pool.map(String::from));
    c.bounds.host_connect_timeout = Duration::from_secs(1);
    c
}

/// Reads exactly `n` bytes, or fails the test.
pub(crate) async fn read_n(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    tokio::time::timeout(PROMPTLY, s.read_exact(&mut buf))
        .await
        .expect("in time")
        .expect("read");
    buf
}

/// Asserts that the front door closes the connection without a byte.
pub(crate) async fn assert_closed(s: &mut TcpStream) {
    let mut buf = [0u8; 16];
    match tokio::time::timeout(PROMPTLY, s.read(&mut buf)).await {
        Ok(Ok(0)) | Ok(Err(_)) => {}
        Ok(Ok(n)) => panic!("expected a close, got {n} bytes"),
        Err(_) => panic!("the front door did not close the connection"),
    }
}

/// Asserts that the front door refuses the connection as RDP allows: an
/// X.224 Connection Confirm with an RDP Negotiation Failure carrying
/// `code` (`gateway::pdu::failure`), then the close.
pub(crate) async fn assert_refused(s: &mut TcpStream, code: u32) {
    let answer = read_n(s, gateway::pdu::NEGOTIATION_FAILURE_BYTES).await;
    assert_eq!(answer[..4], [3, 0, 0, 19], "TPKT: {answer:?}");
    assert_eq!(
        answer[4..6],
        [14, 0xD0],
        "X.224 Connection Confirm: {answer:?}"
    );
    assert_eq!(answer[11..15], [3, 0, 8, 0], "RDP_NEG_FAILURE: {answer:?}");
    let got = u32::from_le_bytes([answer[15], answer[16], answer[17], answer[18]]);
    assert_eq!(
        got,
        code,
        "told {} instead of {}",
        gateway::pdu::failure::name(got),
        gateway::pdu::failure::name(code)
    );
    assert_closed(s).await;
}

/// Plays a logon as far as the front door can tell (rule S9's evidence):
/// enough bytes both ways through the echoing fake host.
async fn log_on(c: &mut TcpStream) {
    let n = gateway::front_door::LOGON_EVIDENCE_HOST_BYTES as usize;
    let bytes = vec![0x5a; n];
    c.write_all(&bytes).await.expect("write");
    assert_eq!(read_n(c, n).await, bytes);
}

pub(crate) fn connect(pool: &str, user: &str, exclude: &[&str]) -> Event {
    Event::Connect {
        pool: pool.into(),
        user: user.into(),
        exclude: exclude.iter().map(|s| s.to_string()).collect(),
    }
}

#[tokio::test]
async fn a_user_is_placed_and_relayed_and_reconnects_to_the_same_host() {
    let (h1, mut seen1) = fake_host("h1").await;
    let (h2, _seen2) = fake_host("h2").await;
    let placer = Recorder::new(&[("h1", &h1), ("h2", &h2)]);
    let door = door(placer.clone(), config(Some("farm"))).await;
    let first = fixture("xfreerdp-2.11.7-user.bin");

    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&first).await.expect("write");
    assert_eq!(read_n(&mut c, 2).await, b"h1");
    assert_eq!(seen1.recv().await.expect("pdu"), first, "R4: byte for byte");
    c.write_all(b"ping").await.expect("write");
    assert_eq!(read_n(&mut c, 4).await, b"ping", "relayed both ways");
    log_on(&mut c).await;
    drop(c);
    assert_eq!(
        placer.wait_events(3).await,
        vec![
            connect("farm", "alice", &[]),
            Event::State("s1".into(), SessionState::Active),
            Event::State("s1".into(), SessionState::Disconnected),
        ]
    );

    // S1: the same user again goes to the same session. A cookie is only
    // a claim (R2): the connection is relayed to alice's host, which
    // authenticates her, but the session's state is not this connection's
    // to change (R4): it stays Disconnected.
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&first).await.expect("write");
    assert_eq!(read_n(&mut c, 2).await, b"h1");
    log_on(&mut c).await;
    drop(c);
    // A third connection (bob's), to know the second one's close was handled.
    let bob = build_pdu(Some(b"Cookie: mstshash=bob"), None, None);
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&bob).await.expect("write");
    assert_eq!(read_n(&mut c, 2).await, b"h1");
    drop(c);
    let events = placer.wait_events(7).await;
    assert_eq!(
        events[3..],
        [
            connect("farm", "alice", &[]),
            connect("farm", "bob", &[]),
            Event::State("s2".into(), SessionState::Active),
            Event::Logoff("s2".into()),
        ]
    );
    assert_eq!(
        placer.sessions.lock().expect("lock")["s1"].state,
        SessionState::Disconnected
    );

    // With a ticket naming alice (T3), the reconnect is hers: Active while
    // relayed, Disconnected again after.
    let key = api::ticket::TicketKey::derive("the broker's secret");
    let ticket = key.issue("farm", "alice", 4_000_000_000).expect("fits");
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&build_pdu(Some(ticket.as_bytes()), None, None))
        .await
        .expect("write");
    assert_eq!(read_n(&mut c, 2).await, b"h1");
    drop(c);
    let events = placer.wait_events(10).await;
    assert_eq!(
        events[7..],
        [
            connect("farm", "alice", &[]),
            Event::State("s1".into(), SessionState::Active),
            Event::State("s1".into(), SessionState::Disconnected),
        ]
    );
}

/// R4's idle bounds: a connection that carries nothing either way is
/// closed, soon while it has shown no evidence of a logon (S9), later once
/// it has; its session then ends (anonymous, or no logon) or is
/// Disconnected, as on any close.
#[tokio::test]
async fn an_idle_connection_is_closed_after_its_bound() {
    let (h1, _seen1) = fake_host("h1").await;
    let placer = Recorder::new(&[("h1", &h1)]);
    let mut config = config(Some("farm"));
    config.bounds.idle_timeout_without_logon = Duration::from_millis(300);
    config.bounds.relay_idle_timeout = Duration::from_millis(600);
    let door = door(placer.clone(), config).await;

    // An anonymous client (a routing token only) that says nothing more.
    let first = fixture("xfreerdp-2.11.7-loadbalanceinfo.bin");
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&first).await.expect("write");
    assert_eq!(read_n(&mut c, 2).await, b"h1");
    assert_closed(&mut c).await;
    let events = placer.wait_events(3).await;
    assert_eq!(
        events[1..],
        [
            Event::State("s1".into(), SessionState::Active),
            Event::Logoff("s1".into())
        ]
    );

    // A client that shows a logon, then goes quiet: the longer bound.
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&fixture("xfreerdp-2.11.7-user.bin"))
        .await
        .expect("write");
    assert_eq!(read_n(&mut c, 2).await, b"h1");
    log_on(&mut c).await;
    assert_closed(&mut c).await;
    let events = placer.wait_events(6).await;
    assert_eq!(
        events[3..],
        [
            connect("farm", "alice", &[]),
            Event::State("s2".into(), SessionState::Active),
            Event::State("s2".into(), SessionState::Disconnected),
        ]
    );
}

#[tokio::test]
async fn a_routing_token_names_the_pool_and_an_anonymous_session_ends_with_its_connection() {
    let (h1, mut seen1) = fake_host("h1").await;
    let placer = Recorder::new(&[("h1", &h1)]);
    let door = door(placer.clone(), config(None)).await;
    let first = fixture("xfreerdp-2.11.7-loadbalanceinfo.bin");

    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&first).await.expect("write");
    assert_eq!(read_n(&mut c, 2).await, b"h1");
    assert_eq!(seen1.recv().await.expect("pdu"), first);
    drop(c);
    let events = placer.wait_events(3).await;
    let Event::Connect { pool, user, .. } = &events[0] else {
        panic!("{events:?}")
    };
    assert_eq!(pool, "farm");
    assert!(user.starts_with("anonymous-"), "{user}");
    assert_eq!(
        events[1..],
        [
            Event::State("s1".into(), SessionState::Active),
            Event::Logoff("s1".into())
        ]
    );
}

#[tokio::test]
async fn without_a_routing_token_or_default_pool_the_connection_is_refused() {
    let placer = Recorder::new(&[]);
    let door = door(placer.clone(), config(None)).await;
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&fixture("xfreerdp-2.11.7-user.bin"))
        .await
        .expect("write");
    assert_refused(&mut c, gateway::pdu::failure::ACCESS_REFUSED).await;
    assert_eq!(placer.events(), vec![]);
}

#[tokio::test]
async fn an_unreachable_new_host_is_released_and_the_next_one_tried() {
    let dead = DeadAddress::hold();
    let (h2, mut seen2) = fake_host("h2").await;
    let placer = Recorder::new(&[("h1", &dead.address), ("h2", &h2)]);
    let door = door(placer.clone(), config(Some("farm"))).await;
    let first = fixture("rdesktop-1.9.0-user.bin");

    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&first).await.expect("write");
    assert_eq!(read_n(&mut c, 2).await, b"h2");
    assert_eq!(seen2.recv().await.expect("pdu"), first);
    log_on(&mut c).await;
    drop(c);
    assert_eq!(
        placer.wait_events(5).await,
        vec![
            connect("farm", "alice", &[]),
            Event::Logoff("s1".into()),
            connect("farm", "alice", &["h1"]),
            Event::State("s2".into(), SessionState::Active),
            Event::State("s2".into(), SessionState::Disconnected),
        ]
    );
}

#[tokio::test]
async fn placement_attempts_are_bounded() {
    let dead: Vec<DeadAddress> = (0..5).map(|_| DeadAddress::hold()).collect();
    let hosts: Vec<(String, String)> = dead
        .iter()
        .enumerate()
        .map(|(i, a)| (format!("h{}", i + 1), a.address.clone()))
        .collect();
    let refs: Vec<(&str, &str)> = hosts
        .iter()
        .map(|(n, a)| (n.as_str(), a.as_str()))
        .collect();
    let placer = Recorder::new(&refs);
    let door = door(placer.clone(), config(Some("farm"))).await;
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&fixture("xfreerdp-2.11.7-user.bin"))
        .await
        .expect("write");
    assert_refused(&mut c, gateway::pdu::failure::UNAVAILABLE).await;
    let events = placer
        .wait_events(2 * gateway::front_door::MAX_PLACEMENT_ATTEMPTS)
        .await;
    let connects = events
        .iter()
        .filter(|e| matches!(e, Event::Connect { .. }))
        .count();
    let logoffs = events
        .iter()
        .filter(|e| matches!(e, Event::Logoff(_)))
        .count();
    assert_eq!(connects, gateway::front_door::MAX_PLACEMENT_ATTEMPTS);
    assert_eq!(logoffs, connects, "every Pending session was released");
}

#[tokio::test]
async fn a_reconnect_to_an_unreachable_host_is_closed_never_placed_elsewhere() {
    let (h1, _seen1) = fake_host("h1").await;
    let (h2, _seen2) = fake_host("h2").await;
    let dead = DeadAddress::hold();
    let placer = Recorder::new(&[("h1", &h1), ("h2", &h2), ("gone", &dead.address)]);
    // alice already has a session on a host that is now unreachable.
    placer.sessions.lock().expect("lock").insert(
        "old".into(),
        Session {
            pool: "farm".into(),
            user: "alice".into(),
            host: "gone".into(),
            state: SessionState::Disconnected,
        },
    );
    let door = door(placer.clone(), config(Some("farm"))).await;
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&fixture("xfreerdp-2.11.7-user.bin"))
        .await
        .expect("write");
    assert_refused(&mut c, gateway::pdu::failure::UNAVAILABLE).await;
    assert_eq!(
        placer.wait_events(1).await,
        vec![connect("farm", "alice", &[])]
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(placer.events().len(), 1, "no logoff, no second placement");
}

#[tokio::test]
async fn only_a_signed_msts_cookie_goes_straight_to_the_registered_host() {
    let (h1, _seen1) = fake_host("h1").await;
    let (h2, mut seen2) = fake_host("h2").await;
    let placer = Recorder::new(&[("h1", &h1), ("h2", &h2)]);
    let key = gateway::redirect::RedirectKey::derive("the broker's secret");
    let mut cfg = config(Some("farm"));
    cfg.redirect_keys = gateway::redirect::RedirectKeys::of(key.clone());
    let door = door(placer.clone(), cfg).await;
    let addr: std::net::SocketAddrV4 = h2.parse().expect("v4");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();

    // Refused without a look-up or a dial: the plain form anyone can
    // write, a token signed with another key, an expired one, and a
    // signed one whose address was changed.
    let other = gateway::redirect::RedirectKey::derive("someone else's secret");
    let signed = key.issue(addr, now);
    // The same signature on h1's address (same IP, h1's port).
    let (ip, port) = gateway::pdu::msts_parts(addr);
    let (_, h1_port) = gateway::pdu::msts_parts(h1.parse().expect("v4"));
    let elsewhere = signed.replacen(&format!("{ip}.{port}."), &format!("{ip}.{h1_port}."), 1);
    assert_ne!(elsewhere, signed);
    for forged in [
        gateway::pdu::msts_cookie(addr),
        other.issue(addr, now),
        key.issue_until(addr, now - 1),
        elsewhere,
    ] {
        let mut c = TcpStream::connect(&door.address).await.expect("connect");
        c.write_all(&build_pdu(Some(forged.as_bytes()), None, None))
            .await
            .expect("write");
        assert_refused(&mut c, gateway::pdu::failure::ACCESS_REFUSED).await;
    }
    assert_eq!(placer.events(), vec![], "no host was looked up");
    assert!(seen2.try_recv().is_err(), "no host was dialled");

    // The broker's own token goes through.
    let first = build_pdu(Some(signed.as_bytes()), Some((0, 3)), None);
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&first).await.expect("write");
    assert_eq!(read_n(&mut c, 2).await, b"h2");
    assert_eq!(seen2.recv().await.expect("pdu"), first);
    drop(c);
    assert_eq!(
        placer.wait_events(1).await,
        vec![Event::HostAt("farm".into(), h2.clone())]
    );

    // A signed token for an address no host has.
    let unknown = key.issue("127.0.0.1:9".parse().expect("addr"), now);
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&build_pdu(Some(unknown.as_bytes()), None, None))
        .await
        .expect("write");
    assert_refused(&mut c, gateway::pdu::failure::ACCESS_REFUSED).await;
    assert_eq!(placer.events().len(), 2);
    assert!(
        placer
            .events()
            .iter()
            .all(|e| matches!(e, Event::HostAt(..)))
    );
}

#[tokio::test]
async fn a_new_session_without_evidence_of_a_logon_ends_with_its_connection() {
    let (h1, _seen1) = fake_host("h1").await;
    let placer = Recorder::new(&[("h1", &h1)]);
    let door = door(placer.clone(), config(Some("farm"))).await;
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&fixture("xfreerdp-2.11.7-user.bin"))
        .await
        .expect("write");
    assert_eq!(read_n(&mut c, 2).await, b"h1");
    drop(c);
    assert_eq!(
        placer.wait_events(3).await,
        vec![
            connect("farm", "alice", &[]),
            Event::State("s1".into(), SessionState::Active),
            Event::Logoff("s1".into()),
        ]
    );
}

#[tokio::test]
async fn a_reconnect_to_a_session_live_elsewhere_never_changes_its_state() {
    let (h1, mut seen1) = fake_host("h1").await;
    let placer = Recorder::new(&[("h1", &h1)]);
    // alice is Active on h1 through a connection that is not this front
    // door's (her own client, another front door).
    placer.sessions.lock().expect("lock").insert(
        "alice-live".into(),
        Session {
            pool: "farm".into(),
            user: "alice".into(),
            host: "h1".into(),
            state: SessionState::Active,
        },
    );
    let door = door(placer.clone(), config(Some("farm"))).await;
    // An impostor names alice, even gets through a "logon" worth of bytes.
    let first = fixture("xfreerdp-2.11.7-user.bin");
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&first).await.expect("write");
    assert_eq!(read_n(&mut c, 2).await, b"h1");
    assert_eq!(seen1.recv().await.expect("pdu"), first);
    log_on(&mut c).await;
    drop(c);
    // A second connection as bob, to know the first one's close was handled.
    let other = build_pdu(Some(b"Cookie: mstshash=bob"), None, None);
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&other).await.expect("write");
    assert_eq!(read_n(&mut c, 2).await, b"h1");
    drop(c);
    let events = placer.wait_events(4).await;
    assert_eq!(events[0], connect("farm", "alice", &[]));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::State(id, _) | Event::Logoff(id) if id == "alice-live")),
        "alice's live session was not touched: {events:?}"
    );
    assert_eq!(
        placer.sessions.lock().expect("lock")["alice-live"].state,
        SessionState::Active
    );
}

#[tokio::test]
async fn a_pool_that_does_not_allow_the_front_door_cannot_be_named() {
    let (h1, mut seen1) = fake_host("h1").await;
    let placer = Recorder::new(&[("h1", &h1)]);
    let door = door(placer.clone(), config(None)).await;
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&build_pdu(
        Some(b"tsv://MS Terminal Services Plugin.1.private1"),
        None,
        None,
    ))
    .await
    .expect("write");
    assert_refused(&mut c, gateway::pdu::failure::ACCESS_REFUSED).await;
    // A ticket the broker signed does not open such a pool either (R3):
    // the front door asks nobody to place.
    let ticket = api::ticket::TicketKey::derive("the broker's secret")
        .issue("private1", "alice", 4_000_000_000)
        .expect("fits");
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&build_pdu(Some(ticket.as_bytes()), None, None))
        .await
        .expect("write");
    assert_refused(&mut c, gateway::pdu::failure::TICKET_REFUSED).await;
    assert_eq!(placer.events(), vec![]);
    assert!(seen1.try_recv().is_err());
}

#[tokio::test]
async fn a_pool_that_requires_a_ticket_is_reached_only_with_one_and_the_ticket_goes_to_the_broker()
{
    let (h1, mut seen1) = fake_host("h1").await;
    let placer = Recorder::new(&[("h1", &h1)]);
    // The default pool requires tickets: a cookie alone or nothing at all
    // is refused before the broker is asked to place (rule T3).
    let door = door(placer.clone(), config(Some("ticketed"))).await;
    for line in [
        Some(&b"Cookie: mstshash=alice"[..]),
        Some(&b"tsv://MS Terminal Services Plugin.1.ticketed-2"[..]),
        None,
    ] {
        let mut c = TcpStream::connect(&door.address).await.expect("connect");
        c.write_all(&build_pdu(line, None, None))
            .await
            .expect("write");
        assert_refused(&mut c, gateway::pdu::failure::ACCESS_REFUSED).await;
    }
    assert_eq!(placer.events(), vec![]);
    assert!(seen1.try_recv().is_err(), "no host was dialled");

    // A ticket names its pool and user; the front door hands it to the
    // broker with the connect request (the broker checks the signature)
    // and forwards the first PDU byte for byte (R4).
    let key = api::ticket::TicketKey::derive("the broker's secret");
    let ticket = key
        .issue("ticketed-2", "alice@contoso.com", 4_000_000_000)
        .expect("fits");
    let pdu = build_pdu(Some(ticket.as_bytes()), None, None);
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&pdu).await.expect("write");
    assert_eq!(read_n(&mut c, 2).await, b"h1");
    assert_eq!(seen1.recv().await.expect("pdu"), pdu, "R4: byte for byte");
    assert_eq!(
        placer.events()[0],
        connect("ticketed-2", "alice@contoso.com", &[])
    );
    assert_eq!(*placer.tickets.lock().expect("lock"), vec![Some(ticket)]);

    // A malformed ticket is a junk first PDU: refused, nobody asked.
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&build_pdu(Some(b"dbt1:ticketed:1:short:alice"), None, None))
        .await
        .expect("write");
    assert_closed(&mut c).await;
    assert_eq!(placer.tickets.lock().expect("lock").len(), 1);
}

#[tokio::test]
async fn a_source_gets_its_share_of_new_sessions_per_minute() {
    let (h1, _seen1) = fake_host("h1").await;
    let placer = Recorder::new(&[("h1", &h1)]);
    let mut cfg = config(Some("farm"));
    cfg.bounds.source_limits.new_sessions_per_minute = 2;
    let door = door(placer.clone(), cfg).await;
    for user in ["u1", "u2"] {
        let line = format!("Cookie: mstshash={user}");
        let mut c = TcpStream::connect(&door.address).await.expect("connect");
        c.write_all(&build_pdu(Some(line.as_bytes()), None, None))
            .await
            .expect("write");
        assert_eq!(read_n(&mut c, 2).await, b"h1");
        log_on(&mut c).await;
        drop(c);
    }
    // The third new user from the same address: placed, released, closed.
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&build_pdu(Some(b"Cookie: mstshash=u3"), None, None))
        .await
        .expect("write");
    assert_refused(&mut c, gateway::pdu::failure::UNAVAILABLE).await;
    let events = placer.wait_events(8).await;
    assert_eq!(events[6], connect("farm", "u3", &[]));
    assert_eq!(events[7], Event::Logoff("s3".into()));
    // A reconnect is not a new session: u1 comes back.
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&build_pdu(Some(b"Cookie: mstshash=u1"), None, None))
        .await
        .expect("write");
    assert_eq!(read_n(&mut c, 2).await, b"h1");
}

#[tokio::test]
async fn junk_oversized_and_slow_clients_never_reach_a_host_nor_disturb_others() {
    let (h1, mut seen1) = fake_host("h1").await;
    let placer = Recorder::new(&[("h1", &h1)]);
    let mut cfg = config(Some("farm"));
    cfg.bounds.handshake_timeout = Duration::from_millis(500);
    let door = door(placer.clone(), cfg).await;

    // A slow client holds its connection open, sending half a PDU.
    let first = fixture("xfreerdp-2.11.7-user.bin");
    let mut slow = TcpStream::connect(&door.address).await.expect("connect");
    slow.write_all(&first[..10]).await.expect("write");

    // Junk and an oversized header are refused at once.
    for junk in [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        vec![3, 0, 0xff, 0xff],
        vec![0x16, 3, 1, 2, 0, 1, 0, 1, 0xfc, 3, 3],
    ] {
        let mut c = TcpStream::connect(&door.address).await.expect("connect");
        c.write_all(&junk).await.expect("write");
        assert_closed(&mut c).await;
    }

    // Meanwhile a good client goes through.
    let mut good = TcpStream::connect(&door.address).await.expect("connect");
    good.write_all(&first).await.expect("write");
    assert_eq!(read_n(&mut good, 2).await, b"h1");
    assert_eq!(seen1.recv().await.expect("pdu"), first);

    // The slow one is cut off after the handshake timeout.
    assert_closed(&mut slow).await;
    drop(good);
    let events = placer.wait_events(3).await;
    assert_eq!(
        events.len(),
        3,
        "only the good client was placed: {events:?}"
    );
    assert!(seen1.try_recv().is_err(), "no junk reached the host");
}

#[tokio::test]
async fn at_the_connection_limit_new_clients_wait() {
    let (h1, _seen1) = fake_host("h1").await;
    let placer = Recorder::new(&[("h1", &h1)]);
    let mut cfg = config(Some("farm"));
    cfg.bounds.max_connections = 1;
    let door = door(placer.clone(), cfg).await;
    let first = fixture("xfreerdp-2.11.7-user.bin");

    let mut a = TcpStream::connect(&door.address).await.expect("connect");
    a.write_all(&first).await.expect("write");
    assert_eq!(read_n(&mut a, 2).await, b"h1");
    // The kernel accepts the second, but the front door does not read it yet.
    let mut b = TcpStream::connect(&door.address).await.expect("connect");
    b.write_all(&first).await.expect("write");
    let mut buf = [0u8; 2];
    assert!(
        tokio::time::timeout(Duration::from_millis(300), b.read_exact(&mut buf))
            .await
            .is_err(),
        "served beyond the limit"
    );
    drop(a);
    assert_eq!(read_n(&mut b, 2).await, b"h1", "served once a slot is free");
}

#[tokio::test]
async fn shutdown_stops_accepting() {
    let placer = Recorder::new(&[]);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let served = tokio::spawn(gateway::serve(listener, placer, config(None), async move {
        let _ = stopped.await;
    }));
    stop.send(()).expect("send");
    tokio::time::timeout(PROMPTLY, served)
        .await
        .expect("stops promptly")
        .expect("no panic");
    assert!(
        TcpStream::connect(address).await.is_err(),
        "listener closed"
    );
}

/// Rule R3 on the broker's clock: a redirection token's lifetime is read
/// from the placer's time of day, not the machine's.
#[tokio::test]
async fn a_redirection_token_expires_by_the_brokers_clock() {
    let (h2, mut seen2) = fake_host("h2").await;
    let placer = Recorder::new(&[("h2", &h2)]);
    let key = gateway::redirect::RedirectKey::derive("the broker's secret");
    let mut cfg = config(Some("farm"));
    cfg.redirect_keys = gateway::redirect::RedirectKeys::of(key.clone());
    let door = door(placer.clone(), cfg).await;
    let addr: std::net::SocketAddrV4 = h2.parse().expect("v4");
    // Signed at a time of day of the broker's, long before the machine's.
    let then = 1_000_000_000;
    placer.now.store(then, std::sync::atomic::Ordering::SeqCst);
    let token = key.issue(addr, then);
    let first = build_pdu(Some(token.as_bytes()), None, None);
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&first).await.expect("write");
    assert_eq!(read_n(&mut c, 2).await, b"h2", "good on the broker's clock");
    drop(c);
    assert_eq!(seen2.recv().await.expect("pdu"), first);

    // The broker's clock moves past the token's lifetime: refused.
    let later = then + gateway::redirect::REDIRECT_TOKEN_LIFETIME.as_secs() + 1;
    placer.now.store(later, std::sync::atomic::Ordering::SeqCst);
    let mut c = TcpStream::connect(&door.address).await.expect("connect");
    c.write_all(&first).await.expect("write");
    assert_refused(&mut c, gateway::pdu::failure::ACCESS_REFUSED).await;
    assert_eq!(
        placer.events(),
        vec![Event::HostAt("farm".into(), h2.clone())],
        "looked up once, for the good token only"
    );
}
