//! What the browser's door costs the broker, against the RDP front door, in
//! one run (`cargo bench -p deskbroker --bench web_rdp`): the real
//! `deskbroker serve --rdp-listen --gateway-listen` as a child process,
//! whose CPU time (`/proc/PID/stat`) and resident memory
//! (`/proc/PID/status`) are read around each step, so that the clients and
//! the host in this process are not counted.
//!
//! - CPU per MiB relayed: one connection pulls [`RELAY_MIB`] MiB from the
//!   host, [`ROUNDS`] times each way in turn. Through the front door the
//!   broker copies TLS records it cannot read (the client does TLS with
//!   the host); through `/web/rdp` it decrypts the host's TLS, frames the
//!   plaintext as WebSocket messages and encrypts them again for the
//!   browser's HTTPS.
//! - The floor under the second figure: what the two TLS layers alone
//!   cost per MiB on this CPU (one side seals, the other opens, in memory,
//!   in this process, with the cipher suite the broker's legs negotiated).
//! - Memory per open session: [`WARM_SESSIONS`] sessions opened through
//!   each door first (the code's pages and the broker's one-time
//!   allocations), then [`OPEN_SESSIONS`] more held idle, the broker's
//!   resident memory before and after them, divided; then again once each
//!   has carried [`BURST_KIB`] KiB and is idle again (what a session keeps
//!   after a burst).
//!
//! The host is a task here: it answers the X.224 Connection Request with a
//! Connection Confirm selecting TLS, does TLS with a self-signed
//! certificate, then answers every 8-byte big-endian N with N bytes.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use ironrdp_rdcleanpath::{RDCleanPathMessage, RDCleanPathPdu};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::{Bytes, Message};

const TOKEN: &str = "3b9e4f0d7a2c61e85f1a9d3c07b6e42f8a5d1c9e0b7f36a2d4e8c1f05a9b7d3e";
/// MiB pulled through one connection per measurement.
const RELAY_MIB: u64 = 1024;
/// Measurements each way, alternating.
const ROUNDS: usize = 5;
/// Sessions opened through each door before the memory figure's first
/// reading, and held with the others.
const WARM_SESSIONS: usize = 20;
/// Sessions held open through each door for the memory figure.
const OPEN_SESSIONS: usize = 200;
/// KiB each held session then carries from the host, after which it is
/// idle again.
const BURST_KIB: u64 = 256;
const MIB: u64 = 1024 * 1024;
/// The Connection Confirm of a host that selects PROTOCOL_SSL.
const CONFIRM_SSL: [u8; 19] = [
    0x03, 0x00, 0x00, 0x13, 0x0e, 0xd0, 0x00, 0x00, 0x12, 0x34, 0x00, 0x02, 0x00, 0x08, 0x00, 0x01,
    0x00, 0x00, 0x00,
];

/// `deskbroker serve` with both doors, per-source bounds lifted (every
/// connection here comes from 127.0.0.1).
struct Broker {
    child: Child,
    url: String,
    rdp: String,
    gateway: String,
    http: reqwest::Client,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Broker {
    fn start(data: &std::path::Path) -> Broker {
        let mut command = Command::new(env!("CARGO_BIN_EXE_deskbroker"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data)
            .args(["--rdp-listen", "127.0.0.1:0", "--rdp-default-pool", "farm"])
            .args(["--gateway-listen", "127.0.0.1:0"])
            .args(["--api-rate-limit", "100000"])
            .args(deskbroker::benchkit::broker::unbounded_source_args());
        let mut child = command
            .env("DESKBROKER_ADMIN_TOKEN", TOKEN)
            .env("RUST_LOG", "error")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start deskbroker serve");
        let (ready, _) = deskbroker::ready::Ready::wait(
            child.stdout.take().expect("stdout"),
            Duration::from_secs(120),
        )
        .unwrap_or_else(|e| panic!("deskbroker serve {e}"));
        let url = ready.api_url().to_string();
        let rdp = ready.rdp_addr().to_string();
        let gateway = ready.gateway_addr().to_string();
        Broker {
            child,
            url,
            rdp,
            gateway,
            http: reqwest::Client::new(),
        }
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> String {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(TOKEN);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer = request.send().await.expect("the API answers");
        assert!(answer.status().is_success(), "{path}: {}", answer.status());
        answer.text().await.expect("a body")
    }

    /// The RD Gateway connection file's ticket for `user`.
    async fn ticket(&self, user: &str) -> String {
        let file = self
            .call(
                reqwest::Method::GET,
                &format!("/api/v1/hostPools/farm/rdpFile?user={user}&gateway=true"),
                None,
            )
            .await;
        file.split("\r\n")
            .find_map(|l| l.strip_prefix("gatewayaccesstoken:s:"))
            .expect("a ticket")
            .to_string()
    }

    /// utime + stime, in milliseconds (USER_HZ is 100).
    fn cpu_ms(&self) -> u64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).expect("stat");
        let rest = stat.rsplit_once(')').expect("stat").1;
        let f: Vec<&str> = rest.split_whitespace().collect();
        (f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime")) * 10
    }

    /// VmRSS, in KiB.
    fn rss_kib(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).expect("status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .expect("VmRSS")
    }
}

/// A TLS client configuration that takes any certificate (the host's and
/// the gateway's are self-signed).
fn any_certificate() -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = api::tls::SignatureChecked::new(provider.clone(), |_, _, _, _, _| {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    });
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth(),
    )
}

/// The host's TLS: a self-signed certificate, ring, rustls' defaults.
fn host_tls() -> Arc<rustls::ServerConfig> {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(vec![certified.cert.der().clone()], key)
    .expect("server config");
    Arc::new(config)
}

/// The cipher suite the host's last TLS client (the broker, through
/// `/web/rdp`) negotiated.
static HOST_SUITE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// The host: Connection Confirm, TLS, then N bytes for every N asked.
async fn host() -> String {
    let acceptor = tokio_rustls::TlsAcceptor::from(host_tls());
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("addr").to_string();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let _ = s.set_nodelay(true);
            tokio::spawn(async move {
                let mut header = [0u8; 4];
                if s.read_exact(&mut header).await.is_err() {
                    return;
                }
                let length = usize::from(u16::from_be_bytes([header[2], header[3]]));
                let mut rest = vec![0u8; length.saturating_sub(4)];
                if s.read_exact(&mut rest).await.is_err()
                    || s.write_all(&CONFIRM_SSL).await.is_err()
                {
                    return;
                }
                let Ok(mut tls) = acceptor.accept(s).await else {
                    return;
                };
                if let Some(suite) = tls.get_ref().1.negotiated_cipher_suite() {
                    *HOST_SUITE.lock().expect("lock") = Some(format!("{:?}", suite.suite()));
                }
                let block = vec![7u8; 64 * 1024];
                let mut n = [0u8; 8];
                while tls.read_exact(&mut n).await.is_ok() {
                    let mut left = u64::from_be_bytes(n);
                    while left > 0 {
                        let take = left.min(block.len() as u64) as usize;
                        if tls.write_all(&block[..take]).await.is_err() {
                            return;
                        }
                        left -= take as u64;
                    }
                    let _ = tls.flush().await;
                }
            });
        }
    });
    address
}

/// An X.224 Connection Request naming `user` and asking for TLS.
fn connection_request(user: &str) -> Vec<u8> {
    let mut body = vec![0u8, 0xe0, 0, 0, 0, 0, 0];
    body.extend_from_slice(format!("Cookie: mstshash={user}\r\n").as_bytes());
    body.extend_from_slice(&[0x01, 0x00, 0x08, 0x00, 0x01, 0x00, 0x00, 0x00]);
    body[0] = (body.len() - 1) as u8;
    let length = (4 + body.len()) as u16;
    let mut pdu = vec![0x03, 0x00];
    pdu.extend_from_slice(&length.to_be_bytes());
    pdu.extend_from_slice(&body);
    pdu
}

/// A connection through the front door: its Connection Request, the
/// host's Confirm, then TLS with the host end to end.
async fn through_front_door(
    broker: &Broker,
    user: &str,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let mut tcp = TcpStream::connect(&broker.rdp).await.expect("front door");
    let _ = tcp.set_nodelay(true);
    tcp.write_all(&connection_request(user))
        .await
        .expect("request");
    let mut confirm = [0u8; CONFIRM_SSL.len()];
    tcp.read_exact(&mut confirm).await.expect("confirm");
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    tokio_rustls::TlsConnector::from(any_certificate())
        .connect(name, tcp)
        .await
        .expect("TLS with the host")
}

type Socket = WebSocketStream<tokio_rustls::client::TlsStream<TcpStream>>;

/// A connection through `/web/rdp`: the RDCleanPath exchange, after which
/// the socket carries the session's plaintext.
async fn through_web(broker: &Broker, user: &str) -> Socket {
    let ticket = broker.ticket(user).await;
    let tcp = TcpStream::connect(&broker.gateway).await.expect("gateway");
    let _ = tcp.set_nodelay(true);
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let tls = tokio_rustls::TlsConnector::from(any_certificate())
        .connect(name, tcp)
        .await
        .expect("TLS with the gateway");
    let (mut ws, _) =
        tokio_tungstenite::client_async(format!("wss://{}/web/rdp", broker.gateway), tls)
            .await
            .expect("websocket");
    let request = RDCleanPathPdu::new_request(connection_request(user), "h".into(), ticket, None)
        .expect("request");
    ws.send(Message::Binary(Bytes::from(request.to_der().expect("der"))))
        .await
        .expect("send");
    let Some(Ok(Message::Binary(answer))) = ws.next().await else {
        panic!("no answer");
    };
    let answer = RDCleanPathPdu::from_der(&answer)
        .expect("der")
        .into_message()
        .expect("message");
    assert!(
        matches!(answer, RDCleanPathMessage::Response { .. }),
        "{answer:?}"
    );
    ws
}

/// Pulls `bytes` through the front door's (TLS) stream.
async fn pull_front_door(s: &mut (impl AsyncRead + AsyncWrite + Unpin), bytes: u64) {
    s.write_all(&bytes.to_be_bytes()).await.expect("ask");
    s.flush().await.expect("flush");
    let mut left = bytes;
    let mut buffer = vec![0u8; 64 * 1024];
    while left > 0 {
        let n = s.read(&mut buffer).await.expect("read");
        assert!(n > 0, "closed early");
        left -= n as u64;
    }
}

/// Pulls `bytes` through the browser's socket.
async fn pull_web(ws: &mut Socket, bytes: u64) {
    ws.send(Message::Binary(Bytes::copy_from_slice(
        &bytes.to_be_bytes(),
    )))
    .await
    .expect("ask");
    let mut left = bytes;
    while left > 0 {
        match ws.next().await {
            Some(Ok(Message::Binary(b))) => left -= b.len() as u64,
            Some(Ok(_)) => {}
            other => panic!("the socket ended: {other:?}"),
        }
    }
}

/// This thread's CPU time so far, in nanoseconds (`/proc/thread-self/schedstat`).
fn thread_cpu_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    stat.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("schedstat")
}

/// Moves what `from` has to send into `to`.
fn transfer(
    from: &mut impl std::ops::DerefMut<Target = rustls::ConnectionCommon<impl Sized>>,
    to: &mut impl std::ops::DerefMut<Target = rustls::ConnectionCommon<impl Sized>>,
    wire: &mut Vec<u8>,
) {
    wire.clear();
    while from.wants_write() {
        from.write_tls(wire).expect("write_tls");
    }
    let mut rest = &wire[..];
    while !rest.is_empty() {
        to.read_tls(&mut rest).expect("read_tls");
        to.process_new_packets().expect("process");
    }
}

/// The two TLS layers alone: `mib` MiB sealed by one rustls connection and
/// opened by another, in memory, in 16 KiB writes (a TLS record's worth,
/// as the relay's are); CPU ms per MiB, and the suite negotiated.
fn crypto_floor(mib: u64) -> (f64, String) {
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let mut client = rustls::ClientConnection::new(any_certificate(), name).expect("client");
    let mut server = rustls::ServerConnection::new(host_tls()).expect("server");
    let mut wire = Vec::new();
    while client.is_handshaking() || server.is_handshaking() {
        transfer(&mut client, &mut server, &mut wire);
        transfer(&mut server, &mut client, &mut wire);
    }
    let suite = format!(
        "{:?}",
        server.negotiated_cipher_suite().expect("a suite").suite()
    );
    let block = vec![7u8; 16 * 1024];
    let mut plain = vec![0u8; 64 * 1024];
    let started = thread_cpu_ns();
    for _ in 0..mib * MIB / block.len() as u64 {
        std::io::Write::write_all(&mut server.writer(), &block).expect("write");
        transfer(&mut server, &mut client, &mut wire);
        let mut left = block.len();
        while left > 0 {
            left -= std::io::Read::read(&mut client.reader(), &mut plain).expect("read");
        }
    }
    let ns = thread_cpu_ns() - started;
    (ns as f64 / 1e6 / mib as f64, suite)
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(run());
}

/// A broker in a fresh data dir, with pool `farm` on one host.
async fn farm() -> (Broker, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(&dir.path().join("data"));
    let host = host().await;
    broker
        .call(
            reqwest::Method::PUT,
            "/api/v1/hostPools/farm",
            Some(
                serde_json::json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst",
                "maxSessionLimit": 100000, "allowFrontDoor": true,
                "allowedAddressRanges": ["127.0.0.0/8"]}),
            ),
        )
        .await;
    broker
        .call(
            reqwest::Method::PUT,
            "/api/v1/hostPools/farm/sessionHosts/h1",
            Some(serde_json::json!({"address": host})),
        )
        .await;
    (broker, dir)
}

async fn run() {
    api::tls::install_default_provider();
    let (broker, _dir) = farm().await;
    println!("CPU of the broker per MiB relayed, {RELAY_MIB} MiB a connection:");
    let (mut front, mut web) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let mut s = through_front_door(&broker, &format!("fd{round}")).await;
        let (c0, t0) = (broker.cpu_ms(), Instant::now());
        pull_front_door(&mut s, RELAY_MIB * MIB).await;
        let (ms, secs) = (broker.cpu_ms() - c0, t0.elapsed().as_secs_f64());
        front.push(ms as f64 / RELAY_MIB as f64);
        println!(
            "  front door: {:.2} ms/MiB ({:.0} MiB/s)",
            ms as f64 / RELAY_MIB as f64,
            RELAY_MIB as f64 / secs
        );
        drop(s);
        let mut ws = through_web(&broker, &format!("web{round}")).await;
        let (c0, t0) = (broker.cpu_ms(), Instant::now());
        pull_web(&mut ws, RELAY_MIB * MIB).await;
        let (ms, secs) = (broker.cpu_ms() - c0, t0.elapsed().as_secs_f64());
        web.push(ms as f64 / RELAY_MIB as f64);
        println!(
            "  /web/rdp:   {:.2} ms/MiB ({:.0} MiB/s)",
            ms as f64 / RELAY_MIB as f64,
            RELAY_MIB as f64 / secs
        );
        if round == 0 {
            let suite = ws.get_ref().get_ref().1.negotiated_cipher_suite();
            println!(
                "  cipher suites: browser to broker {:?}, broker to host {}",
                suite.map(|s| s.suite()),
                HOST_SUITE.lock().expect("lock").as_deref().unwrap_or("?")
            );
        }
        let _ = ws.close(None).await;
    }
    drop(broker);
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (f, w) = (median(&mut front), median(&mut web));
    println!(
        "  median: front door {f:.2} ms/MiB, /web/rdp {w:.2} ms/MiB: {:.2}x",
        w / f
    );
    let mut floor: Vec<f64> = (0..ROUNDS).map(|_| crypto_floor(256).0).collect();
    let (_, suite) = crypto_floor(1);
    let c = median(&mut floor);
    println!(
        "  the two TLS layers alone ({suite}, one seals, one opens, in memory): {c:.2} ms/MiB; \
         front door + that: {:.2} ms/MiB, {:.2}x the front door",
        f + c,
        (f + c) / f
    );

    // Each door in a broker of its own, so that neither inherits the
    // other's memory.
    println!(
        "Broker memory per open session, {OPEN_SESSIONS} held idle after {WARM_SESSIONS} \
         (each door its own broker), then again once each has carried {BURST_KIB} KiB:"
    );
    let (broker, _dir) = farm().await;
    let mut held = Vec::new();
    for i in 0..WARM_SESSIONS {
        held.push(through_front_door(&broker, &format!("fdw{i}")).await);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = broker.rss_kib();
    for i in 0..OPEN_SESSIONS {
        held.push(through_front_door(&broker, &format!("fdm{i}")).await);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = broker.rss_kib();
    for s in &mut held {
        pull_front_door(s, BURST_KIB * 1024).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let burst = broker.rss_kib();
    let front = per_session(before, after, burst);
    println!("  front door: {front}");
    drop(held);
    drop(broker);
    let (broker, _dir) = farm().await;
    let mut held = Vec::new();
    for i in 0..WARM_SESSIONS {
        held.push(through_web(&broker, &format!("webw{i}")).await);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = broker.rss_kib();
    for i in 0..OPEN_SESSIONS {
        held.push(through_web(&broker, &format!("webm{i}")).await);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = broker.rss_kib();
    for ws in &mut held {
        pull_web(ws, BURST_KIB * 1024).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let burst = broker.rss_kib();
    let web = per_session(before, after, burst);
    println!("  /web/rdp:   {web}");
    println!(
        "  /web/rdp / front door: idle {:.2}x, after a burst {:.2}x",
        web.idle / front.idle,
        web.burst / front.burst
    );
    drop(held);
}

/// KiB of resident memory per session: held idle, then idle again after a
/// burst.
struct PerSession {
    idle: f64,
    burst: f64,
    readings: (u64, u64, u64),
}

fn per_session(before: u64, after: u64, burst: u64) -> PerSession {
    let per = |kib: u64| kib.saturating_sub(before) as f64 / OPEN_SESSIONS as f64;
    PerSession {
        idle: per(after),
        burst: per(burst),
        readings: (before, after, burst),
    }
}

impl std::fmt::Display for PerSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (before, after, burst) = self.readings;
        write!(
            f,
            "{:.1} KiB idle, {:.1} KiB after a burst ({before} -> {after} -> {burst} KiB)",
            self.idle, self.burst
        )
    }
}
