//! The RD Gateway's cost, against the RDP front door and against direct
//! TCP to the same host, in one run
//! (`cargo bench -p gateway --bench rd_gateway`):
//!
//! - `relay/…`: 8 MiB from the host to the client per iteration, over one
//!   connection kept open: directly, through the RDP front door, and
//!   through the gateway (WebSocket and the legacy pair; plain TCP to the
//!   gateway, no TLS, so the figure is the gateway's own framing and relay,
//!   not TLS).
//! - `open/…`: one connection opened, its first byte answered, closed:
//!   directly (TCP connect); through the front door (the X.224 Connection
//!   Request with the user's cookie, the broker placing the user, the host
//!   dialled); through the gateway (HTTP head, MS-TSGU handshake, tunnel,
//!   tunnel auth, channel create, the broker placing the user, the host
//!   dialled); a new user each time, whose session ends when the
//!   connection closes (no logon: rule S9).
//! - `open_32_at_once/…`: the same opens from 32 clients at once (a logon
//!   storm), reported as connections per second.
//!
//! The broker is the real one (`broker::front_door::InProcess` on a
//! durable SQLite store in a temporary directory), shared by both doors;
//! the host is a task that answers each 8-byte request for N bytes with N
//! bytes (after skipping the front door's Connection Request). Both doors
//! run with their per-source bounds lifted: every connection comes from
//! 127.0.0.1, which the bounds would otherwise refuse after a few hundred.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures_util::{SinkExt, StreamExt};
use gateway::rd_gateway::GatewayConfig;
use gateway::tsgu::packet::*;
use gateway::tsgu::{Decoder, Packet};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Bytes, Message};

const TOKEN: &str = "rd-gateway-bench-admin-token-0123456789";
const RELAY_BYTES: u64 = 8 * 1024 * 1024;

/// A host that answers every 8-byte big-endian N with N bytes.
async fn host() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("addr").to_string();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let _ = s.set_nodelay(true);
            tokio::spawn(async move {
                let block = vec![7u8; 64 * 1024];
                if skip_connection_request(&mut s).await.is_err() {
                    return;
                }
                let mut n = [0u8; 8];
                while s.read_exact(&mut n).await.is_ok() {
                    let mut left = u64::from_be_bytes(n);
                    while left > 0 {
                        let take = left.min(block.len() as u64) as usize;
                        if s.write_all(&block[..take]).await.is_err() {
                            return;
                        }
                        left -= take as u64;
                    }
                }
            });
        }
    });
    address
}

/// Reads the front door's X.224 Connection Request (TPKT, version 3) when
/// the stream starts with one; a request for N bytes starts with 0 (N is
/// far below 2^56).
async fn skip_connection_request(s: &mut TcpStream) -> std::io::Result<()> {
    let mut first = [0u8; 1];
    if s.peek(&mut first).await? == 0 || first[0] != 3 {
        return Ok(());
    }
    let mut header = [0u8; 4];
    s.read_exact(&mut header).await?;
    let length = usize::from(u16::from_be_bytes([header[2], header[3]]));
    let mut rest = vec![0u8; length.saturating_sub(4)];
    s.read_exact(&mut rest).await.map(|_| ())
}

/// The client's first PDU at the front door: TPKT, X.224 Connection
/// Request with `Cookie: mstshash=<user>`, RDP_NEG_REQ for TLS.
fn connection_request(user: &str) -> Vec<u8> {
    let cookie = format!("Cookie: mstshash={user}\r\n");
    let length = 4 + 7 + cookie.len() + 8;
    let mut pdu = vec![3, 0];
    pdu.extend_from_slice(&(length as u16).to_be_bytes());
    pdu.extend_from_slice(&[(length - 5) as u8, 0xE0, 0, 0, 0, 0, 0]);
    pdu.extend_from_slice(cookie.as_bytes());
    pdu.extend_from_slice(&[1, 0, 8, 0, 3, 0, 0, 0]);
    pdu
}

/// A connection through the front door as `user`, its first PDU sent.
async fn through_front_door(s: &Setup, user: &str) -> TcpStream {
    let mut tcp = TcpStream::connect(&s.front_door).await.expect("connect");
    let _ = tcp.set_nodelay(true);
    tcp.write_all(&connection_request(user))
        .await
        .expect("first pdu");
    tcp
}

/// Per-source bounds that a benchmark from one address never reaches.
fn unbounded_sources() -> gateway::sources::Limits {
    gateway::sources::Limits {
        max_connections: usize::MAX,
        max_handshakes: usize::MAX,
        handshakes_per_minute: u32::MAX,
        new_sessions_per_minute: u32::MAX,
        max_waiting: usize::MAX,
    }
}

struct Setup {
    gateway: String,
    front_door: String,
    host: String,
    key: api::ticket::TicketKey,
    _dir: tempfile::TempDir,
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store::SqliteStore::open(dir.path()).expect("store");
    let broker = broker::open(Arc::new(store), broker::Settings::new(TOKEN))
        .await
        .expect("broker");
    // Tickets are signed with the broker's own key, made in its store.
    let ticket_key = broker.keys().ticket_signer();
    let api = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", api.local_addr().expect("addr"));
    tokio::spawn(broker::serve(
        broker.clone(),
        api,
        std::future::pending::<()>(),
    ));
    api::tls::install_default_provider();
    let host = host().await;
    let http = reqwest::Client::new();
    for (path, body) in [
        (
            "/hostPools/p".to_string(),
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                   "allowFrontDoor": true, "allowedAddressRanges": ["127.0.0.0/8"]}),
        ),
        (
            "/hostPools/p/sessionHosts/h1".to_string(),
            json!({"address": host}),
        ),
    ] {
        let status = http
            .put(format!("{url}/api/v1{path}"))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await
            .expect("request")
            .status();
        assert!(status.is_success(), "PUT {path}: {status}");
    }
    let placer = Arc::new(broker::front_door::InProcess::new(broker));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let gateway = listener.local_addr().expect("addr").to_string();
    tokio::spawn(gateway::https::serve(
        listener,
        None,
        placer.clone(),
        {
            let mut config = GatewayConfig::default();
            config.bounds.source_limits = unbounded_sources();
            config
        },
        std::future::pending::<()>(),
    ));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let front_door = listener.local_addr().expect("addr").to_string();
    tokio::spawn(gateway::serve(
        listener,
        placer,
        {
            let mut config = gateway::Config::new(Some("p".into()));
            config.bounds.source_limits = unbounded_sources();
            config
        },
        std::future::pending::<()>(),
    ));
    Setup {
        gateway,
        front_door,
        host,
        key: ticket_key,
        _dir: dir,
    }
}

const WS_HEAD: &str = "RDG_OUT_DATA /remoteDesktopGateway/ HTTP/1.1\r\nHost: x\r\n\
    Connection: Upgrade\r\nUpgrade: websocket\r\nSec-Websocket-Version: 13\r\n\
    Sec-Websocket-Key: XLOBMLOP]WANSWR\r\nRDG-Auth-Scheme: PAA\r\nContent-Length: 0\r\n\r\n";

enum Wire {
    Ws(Box<WebSocketStream<TcpStream>>),
    Legacy { out: TcpStream, input: TcpStream },
}

/// A tunnel client with its channel open.
struct Tunnel {
    wire: Wire,
    decoder: Decoder,
    buf: Vec<u8>,
    pending: std::collections::VecDeque<Packet>,
}

async fn read_head(tcp: &mut TcpStream) {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        assert_eq!(tcp.read(&mut b).await.expect("read"), 1, "closed");
        head.push(b[0]);
    }
}

impl Tunnel {
    async fn open(s: &Setup, legacy: bool, user: &str) -> Tunnel {
        let wire = if legacy {
            let id = uuid::Uuid::new_v4();
            let head = |method: &str, tail: &str| {
                format!(
                    "{method} /remoteDesktopGateway/ HTTP/1.1\r\nHost: x\r\n\
                     RDG-Connection-Id: {{{id}}}\r\nRDG-Auth-Scheme: PAA\r\n{tail}\r\n"
                )
            };
            let mut out = TcpStream::connect(&s.gateway).await.expect("connect");
            out.write_all(head("RDG_OUT_DATA", "Content-Length: 0\r\n").as_bytes())
                .await
                .expect("out");
            read_head(&mut out).await;
            let mut seed = [0u8; 10];
            out.read_exact(&mut seed).await.expect("seed");
            let mut input = TcpStream::connect(&s.gateway).await.expect("connect");
            input
                .write_all(head("RDG_IN_DATA", "Content-Length: 0\r\n").as_bytes())
                .await
                .expect("in");
            read_head(&mut input).await;
            input
                .write_all(head("RDG_IN_DATA", "Transfer-Encoding: chunked\r\n").as_bytes())
                .await
                .expect("in");
            let _ = out.set_nodelay(true);
            let _ = input.set_nodelay(true);
            Wire::Legacy { out, input }
        } else {
            let mut tcp = TcpStream::connect(&s.gateway).await.expect("connect");
            let _ = tcp.set_nodelay(true);
            tcp.write_all(WS_HEAD.as_bytes()).await.expect("head");
            read_head(&mut tcp).await;
            Wire::Ws(Box::new(
                // A 16 KiB read buffer, as the gateway's: tungstenite
                // zero-fills its whole read buffer before every read, and
                // with its default (128 KiB) this client's own cost would
                // hide the gateway's.
                WebSocketStream::from_raw_socket(
                    tcp,
                    Role::Client,
                    Some(WebSocketConfig::default().read_buffer_size(16 * 1024)),
                )
                .await,
            ))
        };
        let mut t = Tunnel {
            wire,
            decoder: Decoder::new(),
            buf: Vec::new(),
            pending: Default::default(),
        };
        let ticket = s.key.issue("p", user, 4_000_000_000).expect("ticket");
        for p in [
            Packet::HandshakeRequest(HandshakeRequest {
                version_major: 1,
                version_minor: 0,
                client_version: 0,
                extended_auth: HTTP_EXTENDED_AUTH_PAA,
            }),
            Packet::TunnelCreate(TunnelCreate {
                capabilities: 0,
                reauth_context: None,
                paa_cookie: Some(ticket),
            }),
            Packet::TunnelAuth(TunnelAuth {
                client_name: "bench".into(),
                statement_of_health: None,
            }),
            Packet::ChannelCreate(ChannelCreate {
                resources: vec!["p".into()],
                alternate_resources: vec![],
                port: 3389,
                protocol: CHANNEL_PROTOCOL_RDP,
            }),
        ] {
            t.send(&p.to_bytes().expect("encodes")).await;
            let answer = t.recv().await;
            assert!(
                !matches!(answer, Packet::ChannelResponse(ref r) if r.error_code != 0),
                "{answer:?}"
            );
        }
        t
    }

    async fn send(&mut self, bytes: &[u8]) {
        match &mut self.wire {
            Wire::Ws(ws) => ws
                .send(Message::Binary(Bytes::copy_from_slice(bytes)))
                .await
                .expect("send"),
            Wire::Legacy { input, .. } => {
                let mut chunk = format!("{:X}\r\n", bytes.len()).into_bytes();
                chunk.extend_from_slice(bytes);
                chunk.extend_from_slice(b"\r\n");
                input.write_all(&chunk).await.expect("send");
            }
        }
    }

    async fn recv(&mut self) -> Packet {
        loop {
            if let Some(p) = self.pending.pop_front() {
                return p;
            }
            let bytes = match &mut self.wire {
                Wire::Ws(ws) => match ws.next().await {
                    Some(Ok(Message::Binary(b))) => b.to_vec(),
                    Some(Ok(_)) => continue,
                    other => panic!("tunnel closed: {other:?}"),
                },
                Wire::Legacy { out, .. } => {
                    self.buf.resize(128 * 1024, 0);
                    let n = out.read(&mut self.buf).await.expect("read");
                    assert!(n > 0, "tunnel closed");
                    self.buf[..n].to_vec()
                }
            };
            let mut input = &bytes[..];
            while let Some(p) = self.decoder.decode(&mut input).expect("packet") {
                self.pending.push_back(p);
            }
        }
    }

    /// Asks the host for `n` bytes and reads them.
    async fn pull(&mut self, n: u64) {
        let mut request = Vec::new();
        encode_data(&n.to_be_bytes(), &mut request);
        self.send(&request).await;
        let mut got = 0u64;
        while got < n {
            match self.recv().await {
                Packet::Data(d) => got += d.len() as u64,
                other => panic!("{other:?}"),
            }
        }
    }

    async fn close(mut self) {
        self.send(
            &Packet::CloseChannel { status_code: 0 }
                .to_bytes()
                .expect("encodes"),
        )
        .await;
        let _ = self.recv().await;
    }
}

/// Direct: asks the host for `n` bytes on `tcp` and reads them.
async fn pull_direct(tcp: &mut TcpStream, n: u64, buf: &mut [u8]) {
    tcp.write_all(&n.to_be_bytes()).await.expect("write");
    let mut got = 0u64;
    while got < n {
        let r = tcp.read(buf).await.expect("read");
        assert!(r > 0, "closed");
        got += r as u64;
    }
}

fn bench(c: &mut Criterion) {
    let rt = Runtime::new().expect("runtime");
    let s = Arc::new(rt.block_on(setup()));

    let mut relay = c.benchmark_group("relay");
    relay.throughput(Throughput::Bytes(RELAY_BYTES));
    relay.sample_size(20);
    relay.measurement_time(Duration::from_secs(10));
    relay.bench_function("direct", |b| {
        let mut tcp = rt.block_on(TcpStream::connect(&s.host)).expect("connect");
        let _ = tcp.set_nodelay(true);
        let mut buf = vec![0u8; 128 * 1024];
        b.iter(|| rt.block_on(pull_direct(&mut tcp, RELAY_BYTES, &mut buf)));
    });
    relay.bench_function("front_door", |b| {
        let mut tcp = rt.block_on(through_front_door(&s, "relay-front-door"));
        let mut buf = vec![0u8; 128 * 1024];
        b.iter(|| rt.block_on(pull_direct(&mut tcp, RELAY_BYTES, &mut buf)));
    });
    for (name, legacy) in [("rd_gateway_websocket", false), ("rd_gateway_legacy", true)] {
        relay.bench_function(name, |b| {
            let mut t = rt.block_on(Tunnel::open(&s, legacy, &format!("relay-{name}")));
            b.iter(|| rt.block_on(t.pull(RELAY_BYTES)));
            rt.block_on(t.close());
        });
    }
    relay.finish();

    let mut open = c.benchmark_group("open");
    open.sample_size(20);
    open.measurement_time(Duration::from_secs(10));
    for door in Door::ALL {
        open.bench_function(door.name(), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut buf = vec![0u8; 16];
                    let start = Instant::now();
                    for _ in 0..iters {
                        open_once(&s, door, &mut buf).await;
                    }
                    start.elapsed()
                })
            })
        });
    }
    open.finish();

    // Tunnels per second with OPENERS clients opening at once (a logon
    // storm): each opens, pulls 1 byte and closes, again and again.
    let mut storm = c.benchmark_group(format!("open_{OPENERS}_at_once"));
    storm.throughput(Throughput::Elements(1));
    storm.sample_size(10);
    storm.measurement_time(Duration::from_secs(10));
    for door in Door::ALL {
        storm.bench_function(door.name(), |b| {
            b.iter_custom(|iters| rt.block_on(open_at_once(&s, door, iters)))
        });
    }
    storm.finish();
}

/// Clients opening at once in the `open_…_at_once` group.
const OPENERS: u64 = 32;

#[derive(Clone, Copy)]
enum Door {
    Direct,
    Rdp,
    WebSocket,
    Legacy,
}

impl Door {
    const ALL: [Door; 4] = [Door::Direct, Door::Rdp, Door::WebSocket, Door::Legacy];

    fn name(self) -> &'static str {
        match self {
            Door::Direct => "direct",
            Door::Rdp => "front_door",
            Door::WebSocket => "rd_gateway_websocket",
            Door::Legacy => "rd_gateway_legacy",
        }
    }
}

/// One connection through `door` as a new user: opened, its first byte
/// pulled, closed.
async fn open_once(s: &Setup, door: Door, buf: &mut [u8]) {
    static USERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let user = format!(
        "{}-{}",
        door.name(),
        USERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    match door {
        Door::Direct => {
            let mut tcp = TcpStream::connect(&s.host).await.expect("connect");
            pull_direct(&mut tcp, 1, buf).await;
        }
        Door::Rdp => {
            let mut tcp = through_front_door(s, &user).await;
            pull_direct(&mut tcp, 1, buf).await;
        }
        Door::WebSocket | Door::Legacy => {
            let mut t = Tunnel::open(s, matches!(door, Door::Legacy), &user).await;
            t.pull(1).await;
            t.close().await;
        }
    }
}

/// `iters` connections through `door` ([`open_once`]), opened by
/// [`OPENERS`] clients at once; answers the time they all took.
async fn open_at_once(s: &Arc<Setup>, door: Door, iters: u64) -> Duration {
    let start = Instant::now();
    let mut clients = tokio::task::JoinSet::new();
    for c in 0..OPENERS {
        let share = iters / OPENERS + u64::from(c < iters % OPENERS);
        let s = s.clone();
        clients.spawn(async move {
            let mut buf = vec![0u8; 16];
            for _ in 0..share {
                open_once(&s, door, &mut buf).await;
            }
        });
    }
    while let Some(done) = clients.join_next().await {
        done.expect("client");
    }
    start.elapsed()
}

criterion_group!(benches, bench);
criterion_main!(benches);
