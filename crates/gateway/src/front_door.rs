//! The RDP front door (rules R1–R6): accepts RDP clients, reads their first
//! PDU, asks a [`Placer`] where each one goes, and relays the connection to
//! that host untouched.
//!
//! One connection, start to end:
//!
//! ```text
//! accept (≤ max_connections open) ─► read first PDU (≤ 259 bytes, ≤ 5 s) ─► pool, user
//!   ─► Placer::connect ─► dial host (≤ 3 s) ─┬─► forward PDU, Active, relay both ways ─► Disconnected / logoff
//!                 ▲                           └─► unreachable: new session → logoff, exclude host, try again (R5)
//!                 └────────────────────────────────  reconnect (S1) → close
//! ```
//!
//! Each connection runs on its own task, so a slow or hostile client holds
//! one slot for at most the handshake timeout and disturbs no other (R6).
//! Every connection ends in one log line and one `outcome` in metrics.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use placement::SessionState;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::pdu::{self, HANDSHAKE_TIMEOUT, Routing};
use crate::placer::{ConnectInput, Placer};

/// Connections open at once (in handshake or relayed). At the limit the
/// front door stops accepting; the kernel's backlog holds the next ones.
pub const MAX_CONNECTIONS: usize = 4096;
/// How long dialling a session host may take before it counts as unreachable.
pub const HOST_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Placements tried for one new connection when hosts are unreachable (R5).
pub const MAX_PLACEMENT_ATTEMPTS: usize = 3;
/// Pause after a failed `accept` (for example out of file descriptors),
/// so the loop does not spin.
pub const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);
/// Bytes one relayed direction reads at once. Measured against 8 KiB
/// (`tokio::io::copy`), 16 and 64 KiB with `deskbroker bench rdp`: 32 KiB
/// relays the most per CPU second (`docs/benchmarks.md`). Two buffers per
/// connection: at most 2 × 32 KiB × `MAX_CONNECTIONS` = 256 MiB.
pub const RELAY_BUFFER_BYTES: usize = 32 * 1024;
/// Prefix of the user name of a connection that names no user (R2).
pub const ANONYMOUS_USER_PREFIX: &str = "anonymous-";

/// The front door's settings; [`Config::new`] gives the named defaults.
#[derive(Clone, Debug)]
pub struct Config {
    /// The pool of connections without a pool routing token (R1); none
    /// means such connections are refused.
    pub default_pool: Option<String>,
    pub max_connections: usize,
    pub handshake_timeout: Duration,
    pub host_connect_timeout: Duration,
    pub max_placement_attempts: usize,
}

impl Config {
    pub fn new(default_pool: Option<String>) -> Config {
        Config {
            default_pool,
            max_connections: MAX_CONNECTIONS,
            handshake_timeout: HANDSHAKE_TIMEOUT,
            host_connect_timeout: HOST_CONNECT_TIMEOUT,
            max_placement_attempts: MAX_PLACEMENT_ATTEMPTS,
        }
    }
}

/// Describes the front door's metrics to the installed recorder.
pub fn describe_metrics() {
    metrics::describe_counter!(
        "deskbroker_rdp_connections_total",
        "RDP front door connections by outcome: relayed, handshake_failed, no_pool, refused, \
         host_unreachable, unknown_redirect, broker_unreachable."
    );
    metrics::describe_counter!(
        "deskbroker_rdp_handshake_failures_total",
        "First PDUs refused, by reason (truncated, oversized, timeout, unknown_token, …)."
    );
    metrics::describe_counter!(
        "deskbroker_rdp_bytes_total",
        "Bytes relayed, by direction: client_to_host or host_to_client."
    );
    metrics::describe_gauge!(
        "deskbroker_rdp_open_connections",
        "RDP front door connections open now (in handshake or relayed)."
    );
    metrics::describe_histogram!(
        "deskbroker_rdp_connection_seconds",
        "How long RDP front door connections lasted, from accept to close."
    );
}

/// Accepts RDP clients on `listener` until `shutdown` resolves. Then it
/// stops accepting and returns; connections being relayed are not waited for.
pub async fn serve<P: Placer>(
    listener: TcpListener,
    placer: Arc<P>,
    config: Config,
    shutdown: impl Future<Output = ()>,
) {
    describe_metrics();
    let config = Arc::new(config);
    let slots = Arc::new(Semaphore::new(config.max_connections));
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            biased;
            () = &mut shutdown => break,
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break, // never closed
            },
        };
        let (stream, peer) = tokio::select! {
            biased;
            () = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "rdp front door: accept failed");
                    tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
                    continue;
                }
            },
        };
        let placer = placer.clone();
        let config = config.clone();
        tokio::spawn(async move {
            let _permit = permit;
            handle(stream, peer, placer.as_ref(), &config).await;
        });
    }
    tracing::info!("rdp front door stopped accepting");
}

/// What happened to one connection: its log line and metrics.
#[derive(Default)]
struct Report {
    user: Option<String>,
    pool: Option<String>,
    host: Option<String>,
    session_id: Option<String>,
    reconnect: bool,
    client_to_host_bytes: u64,
    host_to_client_bytes: u64,
    detail: Option<String>,
}

/// How a connection ended, as the `outcome` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// Relayed to a host until one side closed.
    Relayed,
    /// The first PDU was junk, oversized, truncated or slow (R6).
    HandshakeFailed,
    /// No routing token and no default pool (R1).
    NoPool,
    /// The broker refused the placement (no capacity, unknown pool, …).
    Refused,
    /// The host (or every host tried) could not be reached (R5).
    HostUnreachable,
    /// An msts cookie named no registered host (R3).
    UnknownRedirect,
    /// The broker did not answer.
    BrokerUnreachable,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Relayed => "relayed",
            Outcome::HandshakeFailed => "handshake_failed",
            Outcome::NoPool => "no_pool",
            Outcome::Refused => "refused",
            Outcome::HostUnreachable => "host_unreachable",
            Outcome::UnknownRedirect => "unknown_redirect",
            Outcome::BrokerUnreachable => "broker_unreachable",
        }
    }
}

/// Counts the connection in the open-connections gauge while it lives.
struct OpenGauge;

impl OpenGauge {
    fn new() -> OpenGauge {
        metrics::gauge!("deskbroker_rdp_open_connections").increment(1.0);
        OpenGauge
    }
}

impl Drop for OpenGauge {
    fn drop(&mut self) {
        metrics::gauge!("deskbroker_rdp_open_connections").decrement(1.0);
    }
}

async fn handle<P: Placer>(client: TcpStream, peer: SocketAddr, placer: &P, config: &Config) {
    let _open = OpenGauge::new();
    let started = Instant::now();
    let mut report = Report::default();
    let outcome = connection(client, placer, config, &mut report).await;
    let duration = started.elapsed();
    metrics::counter!("deskbroker_rdp_connections_total", "outcome" => outcome.as_str())
        .increment(1);
    metrics::histogram!("deskbroker_rdp_connection_seconds").record(duration);
    tracing::info!(
        %peer,
        user = report.user.as_deref().unwrap_or("-"),
        pool = report.pool.as_deref().unwrap_or("-"),
        host = report.host.as_deref().unwrap_or("-"),
        session = report.session_id.as_deref().unwrap_or("-"),
        reconnect = report.reconnect,
        outcome = outcome.as_str(),
        duration_ms = duration.as_millis() as u64,
        client_to_host_bytes = report.client_to_host_bytes,
        host_to_client_bytes = report.host_to_client_bytes,
        detail = report.detail.as_deref().unwrap_or(""),
        "rdp connection"
    );
}

/// Runs one connection to its end and says how it ended.
async fn connection<P: Placer>(
    mut client: TcpStream,
    placer: &P,
    config: &Config,
    report: &mut Report,
) -> Outcome {
    let (first_pdu, request) =
        match pdu::read_first_pdu(&mut client, config.handshake_timeout).await {
            Ok(r) => r,
            Err(e) => {
                metrics::counter!("deskbroker_rdp_handshake_failures_total", "reason" => e.reason())
                    .increment(1);
                report.detail = Some(e.to_string());
                return Outcome::HandshakeFailed;
            }
        };
    let _ = client.set_nodelay(true);

    let (pool, user) = match request.routing {
        Some(Routing::Pool(pool)) => (Some(pool), None),
        Some(Routing::User(user)) => (config.default_pool.clone(), Some(user)),
        Some(Routing::Redirect(addr)) => {
            // A redirection cookie names no pool: it is looked up in the
            // default pool, the only one such a client can have come from.
            let Some(pool) = config.default_pool.clone() else {
                report.detail = Some(format!("redirect to {addr} without a default pool"));
                return Outcome::NoPool;
            };
            report.pool = Some(pool.clone());
            return redirect(client, &first_pdu, addr, &pool, placer, config, report).await;
        }
        None => (config.default_pool.clone(), None),
    };
    let Some(pool) = pool else {
        report.detail = Some("no routing token and no --rdp-default-pool".into());
        return Outcome::NoPool;
    };
    report.pool = Some(pool.clone());
    let anonymous = user.is_none();
    let user = user.unwrap_or_else(|| format!("{ANONYMOUS_USER_PREFIX}{}", uuid::Uuid::new_v4()));
    report.user = Some(user.clone());

    let mut request = ConnectInput {
        user,
        ..ConnectInput::default()
    };
    for _ in 0..config.max_placement_attempts {
        let placed = match placer.connect(&pool, &request).await {
            Ok(p) => p,
            Err(e) => {
                report.detail = Some(e.to_string());
                return match e {
                    crate::PlacerError::Refused { .. } => Outcome::Refused,
                    crate::PlacerError::Unreachable(_) => Outcome::BrokerUnreachable,
                };
            }
        };
        report.host = Some(placed.host.clone());
        report.session_id = Some(placed.session_id.clone());
        report.reconnect = placed.reconnect;
        match dial(&placed.address, config.host_connect_timeout).await {
            Ok(host) => {
                let end_state = if anonymous {
                    None
                } else {
                    Some(SessionState::Disconnected)
                };
                let outcome = relay(
                    client,
                    host,
                    &first_pdu,
                    Some((&pool, &placed.session_id)),
                    placer,
                    report,
                )
                .await;
                match end_state {
                    Some(state) => {
                        if let Err(e) = placer
                            .set_session_state(&pool, &placed.session_id, state)
                            .await
                        {
                            tracing::warn!(pool, session = placed.session_id, error = %e,
                                "rdp: could not mark the session Disconnected");
                        }
                    }
                    None => release(placer, &pool, &placed.session_id).await,
                }
                return outcome;
            }
            Err(e) => {
                report.detail = Some(format!("{} ({}): {e}", placed.host, placed.address));
                if placed.reconnect {
                    // Rule R5: a user's existing session is never replaced
                    // by a new one elsewhere.
                    return Outcome::HostUnreachable;
                }
                release(placer, &pool, &placed.session_id).await;
                report.session_id = None;
                request.exclude.push(placed.host);
            }
        }
    }
    Outcome::HostUnreachable
}

/// Rule R3: straight to the registered host at `addr`, or refused. The
/// session on that host is the host's (and its agent's) to report.
async fn redirect<P: Placer>(
    client: TcpStream,
    first_pdu: &[u8],
    addr: std::net::SocketAddrV4,
    pool: &str,
    placer: &P,
    config: &Config,
    report: &mut Report,
) -> Outcome {
    let address = addr.to_string();
    match placer.host_at(pool, &address).await {
        Ok(Some(host)) => report.host = Some(host),
        Ok(None) => {
            report.detail = Some(format!("no host of {pool} is registered at {address}"));
            return Outcome::UnknownRedirect;
        }
        Err(e) => {
            report.detail = Some(e.to_string());
            return Outcome::BrokerUnreachable;
        }
    }
    match dial(&address, config.host_connect_timeout).await {
        Ok(host) => relay(client, host, first_pdu, None, placer, report).await,
        Err(e) => {
            report.detail = Some(format!("{address}: {e}"));
            Outcome::HostUnreachable
        }
    }
}

/// Ends a session the front door made, logging (not failing) if the broker refuses.
async fn release<P: Placer>(placer: &P, pool: &str, session_id: &str) {
    if let Err(e) = placer.logoff(pool, session_id).await {
        tracing::warn!(pool, session = session_id, error = %e, "rdp: could not log off the session");
    }
}

async fn dial(address: &str, timeout: Duration) -> io::Result<TcpStream> {
    match tokio::time::timeout(timeout, TcpStream::connect(address)).await {
        Ok(Ok(stream)) => {
            let _ = stream.set_nodelay(true);
            Ok(stream)
        }
        Ok(Err(e)) => Err(e),
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no connection within {timeout:?}"),
        )),
    }
}

/// Rule R4: forwards the first PDU byte for byte, marks the session Active,
/// and copies both ways until either side closes (or fails): RDP has no
/// use for a half-open connection, and the session is Disconnected as soon
/// as one side is gone.
///
/// The copying starts while the session is being marked Active, so the
/// host's first answer does not wait for that commit (one durable write
/// fewer before the client's first byte: `deskbroker bench rdp`, see
/// `docs/benchmarks.md`). Both are done before this returns, so the
/// caller's Disconnected (or logoff) always comes after Active.
async fn relay<P: Placer>(
    client: TcpStream,
    mut host: TcpStream,
    first_pdu: &[u8],
    session: Option<(&str, &str)>,
    placer: &P,
    report: &mut Report,
) -> Outcome {
    if let Err(e) = host.write_all(first_pdu).await {
        report.detail = Some(format!("forwarding the first PDU: {e}"));
        return Outcome::HostUnreachable;
    }
    report.client_to_host_bytes = first_pdu.len() as u64;
    metrics::counter!("deskbroker_rdp_bytes_total", "direction" => "client_to_host")
        .increment(first_pdu.len() as u64);
    let mark_active = async {
        if let Some((pool, id)) = session
            && let Err(e) = placer
                .set_session_state(pool, id, SessionState::Active)
                .await
        {
            tracing::warn!(pool, session = id, error = %e, "rdp: could not mark the session Active");
        }
    };
    let (client_read, mut client_write) = client.into_split();
    let (host_read, mut host_write) = host.into_split();
    let mut from_client = Counted::new(client_read, "client_to_host");
    let mut from_host = Counted::new(host_read, "host_to_client");
    let copy = async {
        tokio::select! {
            r = pump(&mut from_client, &mut host_write) => r,
            r = pump(&mut from_host, &mut client_write) => r,
        }
    };
    let ((), ended) = tokio::join!(mark_active, copy);
    if let Err(e) = ended {
        report.detail = Some(format!("relay ended: {e}"));
    }
    let _ = host_write.shutdown().await;
    let _ = client_write.shutdown().await;
    report.client_to_host_bytes += from_client.read_bytes;
    report.host_to_client_bytes = from_host.read_bytes;
    Outcome::Relayed
}

/// Copies `from` to `to` until `from` ends, through one buffer of
/// [`RELAY_BUFFER_BYTES`] that is allocated but never zeroed (reads fill its
/// spare capacity), so a connection that only handshakes costs no memset.
async fn pump<R, W>(from: &mut R, to: &mut W) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buffer = Vec::with_capacity(RELAY_BUFFER_BYTES);
    loop {
        // Empty, so the read fills the spare capacity and never grows it.
        buffer.clear();
        if from.read_buf(&mut buffer).await? == 0 {
            return Ok(());
        }
        to.write_all(&buffer).await?;
    }
}

/// A stream that counts what is read from it, live in metrics and in total
/// for the connection's log line (copy_bidirectional's own counts are lost
/// when a side resets).
struct Counted<S> {
    inner: S,
    read_bytes: u64,
    counter: metrics::Counter,
}

impl<S> Counted<S> {
    fn new(inner: S, direction: &'static str) -> Counted<S> {
        Counted {
            inner,
            read_bytes: 0,
            counter: metrics::counter!("deskbroker_rdp_bytes_total", "direction" => direction),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let n = (buf.filled().len() - before) as u64;
            self.read_bytes += n;
            self.counter.increment(n);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
