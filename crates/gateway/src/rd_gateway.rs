//! The RD Gateway (MS-TSGU over HTTPS): RDP clients outside the
//! farm reach it through one HTTPS port, and the broker places each one at
//! the moment it opens its channel.
//!
//! One connection, start to end:
//!
//! ```text
//! accept (≤ max_connections) ─► TLS ─► HTTP request head (httparse, ≤ 8 KiB)
//!   ─► RDG_OUT_DATA + Upgrade: websocket ─► 101, WebSocket frames carry MS-TSGU packets
//!      (or RDG_OUT_DATA ─► 200 + seed, paired with RDG_IN_DATA's chunked body)
//!   ─► handshake (PAA) ─► tunnel create: the access token, a ticket (T3), read (not verified)
//!   ─► tunnel auth ─► channel create: the resource must be the ticket's pool
//!   ─► Placer::connect (the broker verifies the ticket, places or reconnects: S1;
//!      503 SessionHostStarting: held and asked again while the host boots, A8)
//!   ─► dial (≤ 3 s; R5: a new session on an unreachable host is ended, the next host tried)
//!   ─► channel response ─► Active ─► DATA relayed both ways, untouched ─► Disconnected
//! ```
//!
//! Everything up to the channel request is bounded by
//! [`GatewayConfig::setup_timeout`], and each step of it (the TLS
//! handshake, each read of a request head, the WebSocket upgrade, an OUT
//! channel's wait for its IN channel, each packet) by
//! [`GatewayConfig::setup_idle_timeout`], so idle connections cannot hold
//! the gateway's slots (T4); the placement is bounded by the hold and the
//! dials. Every refusal is answered with the protocol's HRESULT in the
//! packet the client awaits (a tampered, expired or foreign token, and a
//! pool that is unknown or does not allow the front door, alike:
//! E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED, so a client without a
//! ticket cannot tell which pools exist; a resource other than the
//! ticket's pool: E_PROXY_RAP_ACCESSDENIED; no host:
//! E_PROXY_TS_CONNECTFAILED), and no refused connection ever reaches a host.
//!
//! Both HTTP transports: WebSocket (one connection), and the legacy pair,
//! `RDG_OUT_DATA` (answered 200 and a 10-byte seed, then the gateway's
//! packets unframed) and `RDG_IN_DATA` (the client's packets in a chunked
//! body; FreeRDP 2 first sends an empty request on the same connection),
//! matched by their `RDG-Connection-Id`: at most
//! [`GatewayConfig::max_waiting_out_channels`] OUT channels wait for theirs,
//! [`GatewayConfig::max_waiting_out_channels_per_source`] of one source
//! (so that a few sources cannot fill the table), each for at most the idle
//! timeout; one over either bound is answered 503.
//!
//! Sources are bounded as at the front door (`sources.rs`, the same
//! flags, the same keys: an IPv4 address, also IPv4-mapped, or an IPv6
//! /64): a connection over its source's bounds is closed before TLS, and
//! a new session over its share per minute is refused at channel create
//! with E_PROXY_MAXCONNECTIONSREACHED.
//!
//! When the broker answers 503 `SessionHostStarting` (rule A8: the pool
//! starts a host for this user), the channel request is held, as the front
//! door holds a connection (`hold.rs`, the same bounds: per source and
//! [`crate::front_door::MAX_WAITING_CONNECTIONS`] in total, asked again
//! every [`crate::HOST_START_RETRY_INTERVAL`] for up to
//! [`crate::HOST_START_WAIT`]), then answered: the channel opens on the
//! started host, or is refused with E_PROXY_TS_CONNECTFAILED. The setup
//! timeout stops at the channel request; placing it is bounded by the hold
//! and by each dial. The client's tunnel is read while it is held, so a
//! client that leaves (or whose link breaks) ends the hold at once and
//! frees its waiting slot (outcome `client_left`); a packet it sends
//! meanwhile is kept and judged once the channel is answered.
//!
//! Not yet:
//! sharing the front door's table of live sessions (a reconnect to a
//! session Active elsewhere is relayed, its state left alone, as there).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use placement::SessionState;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, oneshot};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Bytes, Message};

use crate::door::{Client, Door, NoHost, Report, logon_evidence, release};
use crate::front_door::RELAY_BUFFER_BYTES;
use crate::hold::{Hold, WaitEnd};
use crate::placer::{ConnectInput, Placer, PlacerError};
use crate::sources::{self, Limits, SourceGuard, Sources};
use crate::tsgu::hresult::{
    E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED, E_PROXY_INTERNALERROR,
    E_PROXY_MAXCONNECTIONSREACHED, E_PROXY_RAP_ACCESSDENIED, E_PROXY_TS_CONNECTFAILED, S_OK,
};
use crate::tsgu::packet::{self, MAX_PACKET_BYTES};
use crate::tsgu::{Action, Decoder, Packet, Server, ServerConfig};

/// Tunnels open at once; at the limit the gateway stops accepting.
pub const MAX_CONNECTIONS: usize = 1024;
/// From accept to the channel response: TLS, the request head, the
/// tunnel's setup and the placement (the client waits for each answer).
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the client may leave each step before its tunnel is up
/// without a word: the TLS handshake, each read of a request head, the
/// WebSocket upgrade, an OUT channel's wait for its IN channel, and each
/// packet up to the channel request. A genuine client answers each step at
/// once (mstsc and FreeRDP send the next request as soon as the answer
/// comes); a connection that says nothing is closed after this, well
/// within [`SETUP_TIMEOUT`], so an idle connection holds one of the
/// gateway's slots for seconds, and a source that keeps opening new ones
/// is held by its handshakes at once and per minute (`sources.rs`, T4).
pub const SETUP_IDLE_TIMEOUT: Duration = Duration::from_secs(5);
/// Legacy OUT channels waiting at once for their IN channel, over all
/// sources. Each is one of the gateway's connections as well.
pub const MAX_WAITING_OUT_CHANNELS: usize = 256;
/// Legacy OUT channels of one source waiting at once for their IN channel.
/// A genuine client's IN channel follows its OUT channel at once, so a
/// source rarely has more than one waiting; with 4, it takes 64 sources to
/// fill [`MAX_WAITING_OUT_CHANNELS`] (and each waits at most
/// [`SETUP_IDLE_TIMEOUT`]).
pub const MAX_WAITING_OUT_CHANNELS_PER_SOURCE: usize = 4;
/// The longest HTTP request head read (FreeRDP's is about 350 bytes).
pub const MAX_HEAD_BYTES: usize = 8 * 1024;
/// The path every client asks for (MS-TSGU 2.2.3.1).
pub const GATEWAY_PATH: &str = "/remoteDesktopGateway/";

/// The gateway's settings; [`GatewayConfig::default`] gives the named defaults.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    pub max_connections: usize,
    /// See [`SETUP_TIMEOUT`].
    pub setup_timeout: Duration,
    /// See [`SETUP_IDLE_TIMEOUT`].
    pub setup_idle_timeout: Duration,
    /// See [`MAX_WAITING_OUT_CHANNELS`].
    pub max_waiting_out_channels: usize,
    /// See [`MAX_WAITING_OUT_CHANNELS_PER_SOURCE`].
    pub max_waiting_out_channels_per_source: usize,
    pub host_connect_timeout: Duration,
    pub max_placement_attempts: usize,
    /// What the protocol tells every client (idle timeout, redirection).
    pub tsgu: ServerConfig,
    /// Per-source bounds, as at the front door (`sources.rs`): connections
    /// (a legacy tunnel is two), tunnels not yet open, connections and new
    /// sessions per minute.
    pub source_limits: Limits,
    /// Rule A8's hold, as at the front door: see [`crate::HOST_START_WAIT`].
    pub host_start_wait: Duration,
    /// See [`crate::HOST_START_RETRY_INTERVAL`].
    pub host_start_retry_interval: Duration,
    /// See [`crate::front_door::MAX_WAITING_CONNECTIONS`].
    pub max_waiting_connections: usize,
    /// An open channel carrying no data either way this long is closed,
    /// as at the front door: [`crate::front_door::RELAY_IDLE_TIMEOUT`].
    pub relay_idle_timeout: Duration,
    /// The same until the channel shows evidence of a logon:
    /// [`crate::front_door::IDLE_TIMEOUT_WITHOUT_LOGON`].
    pub idle_timeout_without_logon: Duration,
}

impl Default for GatewayConfig {
    fn default() -> GatewayConfig {
        GatewayConfig {
            max_connections: MAX_CONNECTIONS,
            setup_timeout: SETUP_TIMEOUT,
            setup_idle_timeout: SETUP_IDLE_TIMEOUT,
            max_waiting_out_channels: MAX_WAITING_OUT_CHANNELS,
            max_waiting_out_channels_per_source: MAX_WAITING_OUT_CHANNELS_PER_SOURCE,
            host_connect_timeout: crate::front_door::HOST_CONNECT_TIMEOUT,
            max_placement_attempts: crate::front_door::MAX_PLACEMENT_ATTEMPTS,
            tsgu: ServerConfig::default(),
            source_limits: Limits::default(),
            host_start_wait: crate::front_door::HOST_START_WAIT,
            host_start_retry_interval: crate::front_door::HOST_START_RETRY_INTERVAL,
            max_waiting_connections: crate::front_door::MAX_WAITING_CONNECTIONS,
            relay_idle_timeout: crate::front_door::RELAY_IDLE_TIMEOUT,
            idle_timeout_without_logon: crate::front_door::IDLE_TIMEOUT_WITHOUT_LOGON,
        }
    }
}

/// Describes the gateway's metrics to the installed recorder.
pub fn describe_metrics() {
    metrics::describe_counter!(
        "deskbroker_rdg_tunnels_total",
        "RD Gateway connections by outcome: relayed, paired (a legacy IN channel), bad_request, protocol, token_refused, \
         resource_refused, pool_not_allowed, unknown_pool, refused, host_unreachable, broker_unreachable, timeout, idle, \
         source_limit, host_start_timeout, waiting_limit, out_channel_limit, client_left."
    );
    metrics::describe_gauge!(
        "deskbroker_rdg_waiting_channels",
        "RD Gateway channel requests held while a session host starts (rule A8)."
    );
    metrics::describe_counter!(
        "deskbroker_rdg_bytes_total",
        "Bytes relayed by the RD Gateway, by direction: client_to_host or host_to_client."
    );
}

/// Serves RD Gateway clients on `listener` until `shutdown` resolves,
/// each connection on its own task. `tls`: the HTTPS certificate (clients
/// require one; `None` serves plain HTTP, for tests behind a TLS proxy).
pub async fn serve<P: Placer>(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    placer: Arc<P>,
    config: GatewayConfig,
    shutdown: impl Future<Output = ()>,
) {
    describe_metrics();
    let sources = Sources::new(config.source_limits);
    let slots = Arc::new(Semaphore::new(config.max_connections));
    let shared = Arc::new(Shared {
        placer,
        waiting: Arc::new(Semaphore::new(config.max_waiting_connections)),
        pairing: Pairing::default(),
        config,
    });
    tokio::pin!(shutdown);
    // A connection over its source's bounds is closed at once, before TLS:
    // no task, no placement.
    while let Some(sources::Admitted {
        stream,
        peer,
        permit,
        source,
    }) = sources::accept(
        &listener,
        &slots,
        &sources,
        shutdown.as_mut(),
        "deskbroker_rdg_tunnels_total",
        "rd gateway",
    )
    .await
    {
        let shared = shared.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let _ = stream.set_nodelay(true);
            let started = Instant::now();
            let mut report = Report::default();
            // TLS first, bounded by the setup timeout (without an acceptor,
            // as the tests and the benchmark run it, plain TCP).
            let stream: Result<BoxIo, Outcome> = match tls {
                Some(tls) => {
                    let deadline = started + shared.config.setup_timeout;
                    let idle = shared.config.setup_idle_timeout;
                    match within(
                        idle,
                        deadline,
                        "the TLS handshake",
                        &mut report,
                        tls.accept(stream),
                    )
                    .await
                    {
                        Ok(Ok(stream)) => Ok(Box::new(stream)),
                        Ok(Err(e)) => {
                            report.detail = Some(format!("TLS: {e}"));
                            Err(Outcome::BadRequest)
                        }
                        Err(outcome) => Err(outcome),
                    }
                }
                None => Ok(Box::new(stream)),
            };
            let outcome = match stream {
                Ok(stream) => connection(stream, started, &shared, source, &mut report).await,
                Err(outcome) => outcome,
            };
            metrics::counter!("deskbroker_rdg_tunnels_total", "outcome" => outcome.as_str())
                .increment(1);
            report.log(
                "rd gateway connection",
                peer,
                outcome.as_str(),
                started.elapsed(),
            );
        });
    }
    tracing::info!("rd gateway stopped accepting");
}

/// What every connection of one [`serve`] shares.
struct Shared<P> {
    placer: Arc<P>,
    config: GatewayConfig,
    /// Legacy OUT channels waiting for their IN channel.
    pairing: Pairing,
    /// Rule A8: the channels held while a host starts, gateway-wide.
    waiting: Arc<Semaphore>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Relayed,
    /// A legacy IN channel, handed to its OUT channel (whose connection
    /// reports the tunnel).
    Paired,
    /// Not an RD Gateway request (or TLS failed).
    BadRequest,
    /// A packet out of order, or bytes that are no packet.
    Protocol,
    TokenRefused,
    /// The channel asked for another resource than its ticket's pool.
    ResourceRefused,
    /// The ticket's pool does not allow the front door (answered as a
    /// refused ticket).
    PoolNotAllowed,
    /// The ticket's pool does not exist (answered as a refused ticket).
    UnknownPool,
    /// The broker refused the placement.
    Refused,
    HostUnreachable,
    BrokerUnreachable,
    Timeout,
    /// The client left a step before its tunnel was up idle for
    /// [`GatewayConfig::setup_idle_timeout`].
    Idle,
    /// A legacy OUT channel over [`GatewayConfig::max_waiting_out_channels`]
    /// (or its source's share) waiting for its IN channel: answered 503.
    OutChannelLimit,
    /// A per-source bound (new sessions per minute).
    SourceLimit,
    /// Rule A8: the host started for the user did not come within the hold.
    HostStartTimeout,
    /// Rule A8: too many channels held already (per source or in total).
    WaitingLimit(&'static str),
    /// Rule A8: the client left while its channel was held.
    ClientLeft,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Relayed => "relayed",
            Outcome::Paired => "paired",
            Outcome::BadRequest => "bad_request",
            Outcome::Protocol => "protocol",
            Outcome::TokenRefused => "token_refused",
            Outcome::ResourceRefused => "resource_refused",
            Outcome::PoolNotAllowed => "pool_not_allowed",
            Outcome::UnknownPool => "unknown_pool",
            Outcome::Refused => "refused",
            Outcome::HostUnreachable => "host_unreachable",
            Outcome::BrokerUnreachable => "broker_unreachable",
            Outcome::Timeout => "timeout",
            Outcome::Idle => "idle",
            Outcome::OutChannelLimit => "out_channel_limit",
            Outcome::SourceLimit => "source_limit",
            Outcome::HostStartTimeout => "host_start_timeout",
            Outcome::WaitingLimit(_) => "waiting_limit",
            Outcome::ClientLeft => "client_left",
        }
    }
}

/// What an RD Gateway request head asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// `RDG_OUT_DATA` with `Upgrade: websocket`: the whole tunnel on this
    /// connection. The key is taken as sent (FreeRDP 2's is 15 characters
    /// and not base64: it is only ever hashed).
    WebSocket { key: String },
    /// Legacy `RDG_OUT_DATA`: the gateway's half of a tunnel (answered 200,
    /// a 10-byte seed, then the gateway's packets with no framing).
    Out { connection_id: String },
    /// Legacy `RDG_IN_DATA`: the client's half, its packets in the body.
    In { connection_id: String, body: InBody },
}

/// How an `RDG_IN_DATA` request's body is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InBody {
    /// `Transfer-Encoding: chunked`: the packets, in chunks.
    Chunked,
    /// `Content-Length`: that many bytes of packets. FreeRDP 2 first sends
    /// an empty one (answered 200), then the chunked request on the same
    /// connection.
    Length(u64),
}

/// Why a request head is not an RD Gateway request.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("the request head is longer than {MAX_HEAD_BYTES} bytes")]
    TooLong,
    #[error("not an HTTP request head: {0}")]
    Malformed(String),
    #[error("{0} {1} is not an RD Gateway request")]
    NotGateway(String, String),
    #[error("a legacy request without a usable RDG-Connection-Id")]
    NoConnectionId,
    #[error("no byte of the request head for {} s", .0.as_secs_f32())]
    Idle(Duration),
}

/// The longest `RDG-Connection-Id` taken (a GUID in braces is 38).
pub const MAX_CONNECTION_ID_BYTES: usize = 64;

/// Reads an HTTP request head from `bytes`: `Ok(None)` while incomplete,
/// else the request and how many bytes the head took.
pub fn parse_head(bytes: &[u8]) -> Result<Option<(Request, usize)>, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut request = httparse::Request::new(&mut headers);
    let taken = match request.parse(bytes) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if bytes.len() >= MAX_HEAD_BYTES => {
            return Err(HeadError::TooLong);
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(HeadError::Malformed(e.to_string())),
    };
    if taken > MAX_HEAD_BYTES {
        return Err(HeadError::TooLong);
    }
    let method = request.method.unwrap_or_default();
    let path = request.path.unwrap_or_default();
    let not_gateway = || HeadError::NotGateway(method.to_string(), path.to_string());
    if !path.eq_ignore_ascii_case(GATEWAY_PATH) {
        return Err(not_gateway());
    }
    let header = |name: &str| {
        request
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .and_then(|h| std::str::from_utf8(h.value).ok())
            .map(str::trim)
    };
    let connection_id = || {
        header("RDG-Connection-Id")
            .filter(|id| {
                !id.is_empty()
                    && id.len() <= MAX_CONNECTION_ID_BYTES
                    && id.bytes().all(|b| b.is_ascii_graphic())
            })
            .map(str::to_string)
            .ok_or(HeadError::NoConnectionId)
    };
    let request = match method {
        "RDG_OUT_DATA" => {
            let upgrade = header("Upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
            match header("Sec-WebSocket-Key").filter(|k| !k.is_empty() && k.len() <= 64) {
                Some(key) if upgrade => Request::WebSocket {
                    key: key.to_string(),
                },
                _ => Request::Out {
                    connection_id: connection_id()?,
                },
            }
        }
        "RDG_IN_DATA" => {
            let chunked =
                header("Transfer-Encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked"));
            let body = if chunked {
                InBody::Chunked
            } else {
                let length = header("Content-Length").unwrap_or("0");
                InBody::Length(
                    length
                        .parse()
                        .map_err(|_| HeadError::Malformed(format!("Content-Length {length}")))?,
                )
            };
            Request::In {
                connection_id: connection_id()?,
                body,
            }
        }
        _ => return Err(not_gateway()),
    };
    Ok(Some((request, taken)))
}

/// Reads a request head off `stream`, after the bytes already read
/// (`buf`), within [`MAX_HEAD_BYTES`], each read within `idle`. Returns the
/// request and whatever bytes came after the head.
async fn read_head<S: AsyncRead + Unpin + ?Sized>(
    stream: &mut S,
    mut buf: Vec<u8>,
    idle: Duration,
) -> Result<(Request, Vec<u8>), HeadError> {
    loop {
        if let Some((request, taken)) = parse_head(&buf)? {
            return Ok((request, buf.split_off(taken)));
        }
        if buf.len() >= MAX_HEAD_BYTES {
            return Err(HeadError::TooLong);
        }
        let n = tokio::time::timeout(idle, stream.read_buf(&mut buf))
            .await
            .map_err(|_| HeadError::Idle(idle))?
            .map_err(|e| HeadError::Malformed(e.to_string()))?;
        if n == 0 {
            return Err(HeadError::Malformed("closed before the head ended".into()));
        }
    }
}

/// How much tungstenite reads at once from a WebSocket tunnel.
const WEBSOCKET_READ_BUFFER_BYTES: usize = 16 * 1024;

/// The WebSocket frames' bounds: a message holds at most a few packets.
fn websocket_config() -> WebSocketConfig {
    WebSocketConfig::default()
        // tungstenite zero-fills up to its read buffer size before every
        // read: with its default of 128 KiB, each small RDP packet from the
        // client cost a 128 KiB memset (15 % of a storm's CPU, measured).
        // 16 KiB is one TLS record; a larger frame still grows the buffer.
        .read_buffer_size(WEBSOCKET_READ_BUFFER_BYTES)
        .max_message_size(Some(4 * MAX_PACKET_BYTES))
        .max_frame_size(Some(4 * MAX_PACKET_BYTES))
}

/// A connection's byte stream, TLS or not.
pub trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}
type BoxIo = Box<dyn Io>;

/// Legacy OUT channels waiting for their IN channel, by connection id,
/// bounded in total and per source (see [`MAX_WAITING_OUT_CHANNELS`]).
#[derive(Default)]
pub struct Pairing {
    waiting: std::sync::Mutex<PairingTable>,
}

#[derive(Default)]
struct PairingTable {
    /// Each waiting OUT channel: its source, its own number (so that it
    /// removes only itself), and where its IN channel is to be sent.
    channels: HashMap<String, (IpAddr, u64, oneshot::Sender<InHalf>)>,
    /// How many OUT channels each source has waiting.
    per_source: HashMap<IpAddr, usize>,
    next: u64,
}

impl PairingTable {
    fn forget(&mut self, source: IpAddr) {
        if let Some(n) = self.per_source.get_mut(&source) {
            *n -= 1;
            if *n == 0 {
                self.per_source.remove(&source);
            }
        }
    }
}

/// An IN channel handed to its OUT channel: the stream, the body bytes
/// already read, and the body's framing.
struct InHalf {
    stream: BoxIo,
    rest: Vec<u8>,
    body: InBody,
    /// The IN connection's own per-source count, kept while it lives.
    source: SourceGuard,
}

impl Pairing {
    fn lock(&self) -> std::sync::MutexGuard<'_, PairingTable> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers an OUT channel of `source` under `id`: its number, or why
    /// it may not wait (`deskbroker_rdg_tunnels_total`'s detail).
    fn register(
        &self,
        id: &str,
        source: IpAddr,
        sender: oneshot::Sender<InHalf>,
        config: &GatewayConfig,
    ) -> Result<u64, &'static str> {
        let mut table = self.lock();
        if table.channels.contains_key(id) {
            return Err("an RDG-Connection-Id already waiting");
        }
        if table.channels.len() >= config.max_waiting_out_channels {
            return Err("too many OUT channels waiting");
        }
        let mine = table.per_source.get(&source).copied().unwrap_or(0);
        if mine >= config.max_waiting_out_channels_per_source {
            return Err("too many OUT channels of this source waiting");
        }
        table.next += 1;
        let number = table.next;
        table
            .channels
            .insert(id.to_string(), (source, number, sender));
        *table.per_source.entry(source).or_insert(0) += 1;
        Ok(number)
    }

    /// Takes the OUT channel waiting under `id`, for its IN channel.
    fn take(&self, id: &str) -> Option<oneshot::Sender<InHalf>> {
        let mut table = self.lock();
        let (source, _, sender) = table.channels.remove(id)?;
        table.forget(source);
        Some(sender)
    }

    /// Removes OUT channel `number` under `id` if it still waits.
    fn cancel(&self, id: &str, number: u64) {
        let mut table = self.lock();
        if table.channels.get(id).is_some_and(|(_, n, _)| *n == number)
            && let Some((source, _, _)) = table.channels.remove(id)
        {
            table.forget(source);
        }
    }
}

/// How the tunnel's packets travel.
enum Link {
    /// Both ways in binary WebSocket messages on one connection.
    Ws(Box<WebSocketStream<BoxIo>>),
    /// The client's packets in the body of `RDG_IN_DATA`, the gateway's raw
    /// on the `RDG_OUT_DATA` connection.
    Legacy {
        out: BoxIo,
        input: BoxIo,
        body: BodyReader,
        buf: Vec<u8>,
        _in_source: SourceGuard,
    },
}

impl Link {
    /// The client's next bytes of packets; `None` when it has gone.
    async fn recv(&mut self) -> Result<Option<Vec<u8>>, String> {
        match self {
            Link::Ws(ws) => loop {
                match ws.next().await {
                    None | Some(Ok(Message::Close(_))) => return Ok(None),
                    Some(Err(e)) => return Err(format!("websocket: {e}")),
                    Some(Ok(Message::Binary(bytes))) => return Ok(Some(bytes.to_vec())),
                    Some(Ok(_)) => {} // ping (answered by the library), pong, text
                }
            },
            Link::Legacy {
                input, body, buf, ..
            } => loop {
                if !buf.is_empty() {
                    let mut out = Vec::new();
                    body.feed(buf, &mut out)?;
                    buf.clear();
                    if !out.is_empty() {
                        return Ok(Some(out));
                    }
                }
                if body.done() {
                    return Ok(None);
                }
                buf.reserve(RELAY_BUFFER_BYTES);
                match input.read_buf(buf).await {
                    Ok(0) => return Ok(None),
                    Ok(_) => {}
                    Err(e) => return Err(format!("in channel: {e}")),
                }
            },
        }
    }

    async fn send(&mut self, bytes: Vec<u8>) -> Result<(), String> {
        match self {
            Link::Ws(ws) => ws
                .send(Message::Binary(Bytes::from(bytes)))
                .await
                .map_err(|e| format!("websocket: {e}")),
            Link::Legacy { out, .. } => out
                .write_all(&bytes)
                .await
                .map_err(|e| format!("out channel: {e}")),
        }
    }

    async fn close(&mut self) {
        match self {
            Link::Ws(ws) => {
                let _ = WebSocketStream::close(ws, None).await;
            }
            Link::Legacy { out, input, .. } => {
                let _ = out.shutdown().await;
                let _ = input.shutdown().await;
            }
        }
    }
}

/// Reads an `RDG_IN_DATA` body: HTTP/1.1 chunks (RFC 9112 §7.1; sizes of
/// at most 8 hex digits, lines of at most 64 bytes, extensions ignored,
/// trailers not read: the last chunk ends the tunnel), or a length.
#[derive(Debug)]
pub struct BodyReader {
    state: BodyState,
    line: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyState {
    Size,
    Data(u64),
    DataEnd(u8),
    Identity(u64),
    Done,
}

impl BodyReader {
    pub fn new(body: InBody) -> BodyReader {
        BodyReader {
            state: match body {
                InBody::Chunked => BodyState::Size,
                InBody::Length(0) => BodyState::Done,
                InBody::Length(n) => BodyState::Identity(n),
            },
            line: Vec::new(),
        }
    }

    /// Whether the body has ended.
    pub fn done(&self) -> bool {
        self.state == BodyState::Done
    }

    /// Takes the body's next bytes; appends the payload to `out`. Bytes
    /// after the end are refused.
    pub fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        while !input.is_empty() {
            match self.state {
                BodyState::Done => return Err("bytes after the end of the body".into()),
                BodyState::Identity(n) | BodyState::Data(n) => {
                    let take = (n.min(input.len() as u64)) as usize;
                    out.extend_from_slice(&input[..take]);
                    input = &input[take..];
                    let left = n - take as u64;
                    self.state = match (self.state, left) {
                        (BodyState::Identity(_), 0) => BodyState::Done,
                        (BodyState::Identity(_), n) => BodyState::Identity(n),
                        (_, 0) => BodyState::DataEnd(0),
                        (_, n) => BodyState::Data(n),
                    };
                }
                BodyState::DataEnd(seen) => {
                    let want = if seen == 0 { b'\r' } else { b'\n' };
                    if input[0] != want {
                        return Err("a chunk not followed by CR LF".into());
                    }
                    input = &input[1..];
                    self.state = if seen == 0 {
                        BodyState::DataEnd(1)
                    } else {
                        BodyState::Size
                    };
                }
                BodyState::Size => {
                    let b = input[0];
                    input = &input[1..];
                    self.line.push(b);
                    if self.line.len() > 64 {
                        return Err("a chunk size line longer than 64 bytes".into());
                    }
                    if !self.line.ends_with(b"\r\n") {
                        continue;
                    }
                    let line = &self.line[..self.line.len() - 2];
                    let hex = line.split(|&c| c == b';').next().unwrap_or_default();
                    let size = std::str::from_utf8(hex)
                        .ok()
                        .map(str::trim)
                        .filter(|h| !h.is_empty() && h.len() <= 8)
                        .and_then(|h| u64::from_str_radix(h, 16).ok())
                        .ok_or_else(|| {
                            format!("a bad chunk size {:?}", String::from_utf8_lossy(line))
                        })?;
                    self.line.clear();
                    self.state = if size == 0 {
                        BodyState::Done
                    } else {
                        BodyState::Data(size)
                    };
                }
            }
        }
        Ok(())
    }
}

/// One step of a connection before its tunnel is up: `step`'s result,
/// unless the client leaves it for `idle` ([`Outcome::Idle`]) or the
/// setup's `deadline` passes first ([`Outcome::Timeout`]).
async fn within<T>(
    idle: Duration,
    deadline: Instant,
    what: &str,
    report: &mut Report,
    step: impl Future<Output = T>,
) -> Result<T, Outcome> {
    let idle_at = Instant::now() + idle;
    let (at, outcome) = if idle_at < deadline {
        (idle_at, Outcome::Idle)
    } else {
        (deadline, Outcome::Timeout)
    };
    tokio::time::timeout_at(at.into(), step).await.map_err(|_| {
        report.detail = Some(format!(
            "{what}: no progress within {} s",
            idle.as_secs_f32()
        ));
        outcome
    })
}

/// Answers a request that is not served, and closes.
async fn answer_status(stream: &mut BoxIo, status: &str) {
    let _ = stream
        .write_all(
            format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await;
    let _ = stream.shutdown().await;
}

async fn connection<P: Placer>(
    mut stream: BoxIo,
    started: Instant,
    shared: &Shared<P>,
    source: SourceGuard,
    report: &mut Report,
) -> Outcome {
    let pairing = &shared.pairing;
    let deadline = started + shared.config.setup_timeout;
    let idle = shared.config.setup_idle_timeout;
    let head =
        tokio::time::timeout_at(deadline.into(), read_head(&mut stream, Vec::new(), idle)).await;
    let (request, rest) = match head {
        Ok(Ok(h)) => h,
        Ok(Err(e @ HeadError::Idle(_))) => {
            report.detail = Some(e.to_string());
            return Outcome::Idle;
        }
        Ok(Err(e)) => {
            answer_status(&mut stream, "400 Bad Request").await;
            report.detail = Some(e.to_string());
            return Outcome::BadRequest;
        }
        Err(_) => return Outcome::Timeout,
    };
    let link = match request {
        Request::WebSocket { key } => {
            let accept =
                tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
            let response = format!(
                "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
                 Sec-WebSocket-Accept: {accept}\r\n\r\n"
            );
            let upgrade = within(
                idle,
                deadline,
                "the WebSocket upgrade",
                report,
                stream.write_all(response.as_bytes()),
            );
            match upgrade.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    report.detail = Some(e.to_string());
                    return Outcome::BadRequest;
                }
                Err(outcome) => return outcome,
            }
            Link::Ws(Box::new(
                WebSocketStream::from_partially_read(
                    stream,
                    rest,
                    Role::Server,
                    Some(websocket_config()),
                )
                .await,
            ))
        }
        Request::In {
            connection_id,
            body,
        } => {
            return in_channel(
                stream,
                rest,
                connection_id,
                body,
                (deadline, idle),
                pairing,
                source,
                report,
            )
            .await;
        }
        Request::Out { connection_id } => {
            let (tx, rx) = oneshot::channel();
            let number = match pairing.register(&connection_id, source.key(), tx, &shared.config) {
                Ok(number) => number,
                Err(why) => {
                    answer_status(&mut stream, "503 Service Unavailable").await;
                    report.detail = Some(why.into());
                    return Outcome::OutChannelLimit;
                }
            };
            // 200 and a seed of 10 random bytes, no length (MS-TSGU
            // 3.3.5.1; what FreeRDP 2 reads), then packets unframed.
            let seed = uuid::Uuid::new_v4();
            let mut answer = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
            answer.extend_from_slice(&seed.as_bytes()[..10]);
            let paired = async {
                stream.write_all(&answer).await.map_err(|e| e.to_string())?;
                rx.await
                    .map_err(|_| "the IN channel never came".to_string())
            };
            let step = "waiting for the RDG_IN_DATA of this RDG_OUT_DATA";
            let paired = within(idle, deadline, step, report, paired).await;
            pairing.cancel(&connection_id, number);
            let half = match paired {
                Ok(Ok(half)) => half,
                Ok(Err(e)) => {
                    report.detail = Some(e);
                    return Outcome::BadRequest;
                }
                Err(outcome) => return outcome,
            };
            Link::Legacy {
                out: stream,
                input: half.stream,
                body: BodyReader::new(half.body),
                buf: half.rest,
                _in_source: half.source,
            }
        }
    };
    tunnel(link, deadline, shared, &source, report).await
}

/// An `RDG_IN_DATA` connection: after FreeRDP's empty request (answered
/// 200), its chunked one; then handed to its OUT channel's task.
#[allow(clippy::too_many_arguments)]
async fn in_channel(
    mut stream: BoxIo,
    mut rest: Vec<u8>,
    connection_id: String,
    mut body: InBody,
    (deadline, idle): (Instant, Duration),
    pairing: &Pairing,
    source: SourceGuard,
    report: &mut Report,
) -> Outcome {
    if body == InBody::Length(0) {
        let answer = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        match within(idle, deadline, "answering RDG_IN_DATA", report, answer).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                report.detail = Some(e.to_string());
                return Outcome::BadRequest;
            }
            Err(outcome) => return outcome,
        }
        let next =
            tokio::time::timeout_at(deadline.into(), read_head(&mut stream, rest, idle)).await;
        match next {
            Ok(Ok((
                Request::In {
                    connection_id: again,
                    body: b,
                },
                r,
            ))) if again == connection_id => {
                body = b;
                rest = r;
            }
            Ok(Ok(_)) => {
                answer_status(&mut stream, "400 Bad Request").await;
                report.detail = Some("the second RDG_IN_DATA is not the first's".into());
                return Outcome::BadRequest;
            }
            Ok(Err(e @ HeadError::Idle(_))) => {
                report.detail = Some(e.to_string());
                return Outcome::Idle;
            }
            Ok(Err(e)) => {
                answer_status(&mut stream, "400 Bad Request").await;
                report.detail = Some(e.to_string());
                return Outcome::BadRequest;
            }
            Err(_) => return Outcome::Timeout,
        }
    }
    let Some(out) = pairing.take(&connection_id) else {
        answer_status(&mut stream, "404 Not Found").await;
        report.detail = Some(format!("no RDG_OUT_DATA waits for {connection_id}"));
        return Outcome::BadRequest;
    };
    // The IN channel is never answered by a host: not a handshake to count.
    source.answered();
    match out.send(InHalf {
        stream,
        rest,
        body,
        source,
    }) {
        Ok(()) => Outcome::Paired,
        Err(_) => Outcome::Timeout,
    }
}

/// The tunnel on its link: setup to the channel response, then the relay.
async fn tunnel<P: Placer>(
    mut link: Link,
    deadline: Instant,
    shared: &Shared<P>,
    source: &SourceGuard,
    report: &mut Report,
) -> Outcome {
    let placer = shared.placer.as_ref();
    let mut tunnel = Tunnel {
        server: Server::new(shared.config.tsgu.clone()),
        decoder: Decoder::new(),
        pending: VecDeque::new(),
    };
    let idle = shared.config.setup_idle_timeout;
    let setup =
        tokio::time::timeout_at(deadline.into(), setup(&mut link, &mut tunnel, idle, report)).await;
    let asked = match setup {
        Ok(Ok(asked)) => asked,
        Ok(Err(outcome)) => {
            link.close().await;
            return outcome;
        }
        Err(_) => return Outcome::Timeout,
    };
    // Past the setup timeout: a channel may be held while its host starts
    // (A8, bounded by the hold); every dial has its own timeout.
    let opened = open_channel(&mut link, &mut tunnel, asked, shared, source, report).await;
    let (host, placed, pool) = match opened {
        Ok(opened) => opened,
        Err(outcome) => {
            link.close().await;
            return outcome;
        }
    };
    // The channel is open: no longer a handshake of its source's.
    source.answered();
    // Rule R4, as at the front door: Active while relayed, then
    // Disconnected, or ended when no logon can have begun (S9).
    let owned = !placed.reconnect || placed.state == SessionState::Disconnected;
    if owned
        && let Err(e) = placer
            .set_session_state(&pool, &placed.session_id, SessionState::Active)
            .await
    {
        tracing::warn!(pool, session = placed.session_id, error = %e,
            "rd gateway: could not mark the session Active");
    }
    let idle = (
        shared.config.relay_idle_timeout,
        shared.config.idle_timeout_without_logon,
    );
    let outcome = relay(link, host, &mut tunnel, idle, report).await;
    if owned {
        let logon_seen = logon_evidence(report, 0);
        let ended = if !placed.reconnect && !logon_seen {
            placer.logoff(&pool, &placed.session_id).await
        } else {
            placer
                .set_session_state(&pool, &placed.session_id, SessionState::Disconnected)
                .await
        };
        if let Err(e) = ended {
            tracing::warn!(pool, session = placed.session_id, error = %e,
                "rd gateway: could not record the end of the session");
        }
    }
    outcome
}

/// One tunnel's protocol state and undelivered packets.
struct Tunnel {
    server: Server,
    decoder: Decoder,
    /// Packets decoded but not yet handled (a message may hold several).
    pending: VecDeque<Packet>,
}

impl Tunnel {
    /// The client's next packet, reading as needed; `None` when the client
    /// has gone.
    async fn next(&mut self, link: &mut Link) -> Result<Option<Packet>, String> {
        loop {
            if let Some(p) = self.pending.pop_front() {
                return Ok(Some(p));
            }
            let Some(bytes) = link.recv().await? else {
                return Ok(None);
            };
            let mut input = &bytes[..];
            while let Some(p) = self.decoder.decode(&mut input).map_err(|e| e.to_string())? {
                self.pending.push_back(p);
            }
        }
    }
}

async fn send(link: &mut Link, packet: &Packet) -> Result<(), String> {
    let bytes = packet.to_bytes().map_err(|e| e.to_string())?;
    link.send(bytes).await
}

/// A channel request, with the ticket of its tunnel.
struct ChannelAsked {
    resource: String,
    ticket: api::ticket::Ticket,
    raw: String,
}

/// From the handshake to the channel request, or the outcome of a refusal
/// (answered).
/// Each packet must come within `idle` of the previous answer.
async fn setup(
    ws: &mut Link,
    tunnel: &mut Tunnel,
    idle: Duration,
    report: &mut Report,
) -> Result<ChannelAsked, Outcome> {
    let mut ticket: Option<(api::ticket::Ticket, String)> = None;
    loop {
        let packet = match tokio::time::timeout(idle, tunnel.next(ws)).await {
            Ok(Ok(Some(p))) => p,
            Ok(Ok(None)) => {
                report.detail = Some("the client left during setup".into());
                return Err(Outcome::Protocol);
            }
            Ok(Err(e)) => {
                report.detail = Some(e);
                return Err(Outcome::Protocol);
            }
            Err(_) => {
                report.detail = Some(format!(
                    "no packet for {} s during the tunnel's setup ({:?})",
                    idle.as_secs_f32(),
                    tunnel.server.state()
                ));
                return Err(Outcome::Idle);
            }
        };
        let action = match tunnel.server.receive(packet) {
            Ok(a) => a,
            Err(refusal) => {
                if let Some(reply) = &refusal.reply {
                    let _ = send(ws, reply).await;
                }
                report.detail = Some(refusal.to_string());
                return Err(Outcome::Protocol);
            }
        };
        match action {
            Action::Send(p) => send(ws, &p).await.map_err(|e| fail(report, e))?,
            Action::Nothing => {}
            Action::Relay(_) | Action::Close { .. } => {
                report.detail = Some("closed during setup".into());
                return Err(Outcome::Protocol);
            }
            Action::CheckToken { token } => match api::ticket::Ticket::parse(&token) {
                // Read here, verified by the broker at placement (T3): the
                // gateway holds no key that mints tickets.
                Ok(t) => {
                    report.user = Some(t.user.clone());
                    report.pool = Some(t.pool.clone());
                    ticket = Some((t, token));
                    let answer = tunnel
                        .server
                        .accept_token(1)
                        .map_err(|e| fail(report, e.to_string()))?;
                    send(ws, &answer).await.map_err(|e| fail(report, e))?;
                }
                Err(e) => {
                    let answer = tunnel
                        .server
                        .refuse_token(E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED)
                        .map_err(|e| fail(report, e.to_string()))?;
                    let _ = send(ws, &answer).await;
                    report.detail = Some(format!("access token: {e}"));
                    return Err(Outcome::TokenRefused);
                }
            },
            Action::OpenChannel { resource, .. } => {
                let Some((t, raw)) = ticket.take() else {
                    return Err(fail(report, "channel without a token".into()));
                };
                return Ok(ChannelAsked {
                    resource,
                    ticket: t,
                    raw,
                });
            }
        }
    }
}

fn fail(report: &mut Report, detail: String) -> Outcome {
    report.detail = Some(detail);
    Outcome::Protocol
}

/// Channel create: places the ticket's user in the ticket's pool (the
/// resource must name it) and dials the host, trying the next one when a
/// new session's host cannot be reached (R5); answers the client either way.
async fn open_channel<P>(
    ws: &mut Link,
    tunnel: &mut Tunnel,
    asked: ChannelAsked,
    shared: &Shared<P>,
    source: &SourceGuard,
    report: &mut Report,
) -> Result<(TcpStream, placement::Placement, String), Outcome>
where
    P: Placer,
{
    let (placer, config) = (shared.placer.as_ref(), &shared.config);
    let ChannelAsked {
        resource,
        ticket,
        raw,
    } = asked;
    let pool = ticket.pool;
    let refuse = async |ws: &mut Link, tunnel: &mut Tunnel, code: u32| {
        if let Ok(answer) = tunnel.server.refuse_channel(code) {
            let _ = send(ws, &answer).await;
        }
    };
    if !resource.eq_ignore_ascii_case(&pool) {
        report.detail = Some(format!(
            "resource {resource:?} is not the ticket's pool {pool}"
        ));
        refuse(ws, tunnel, E_PROXY_RAP_ACCESSDENIED).await;
        return Err(Outcome::ResourceRefused);
    }
    // A pool that does not allow the front door is refused as an unknown
    // pool is, and both as a ticket the broker refuses: the gateway cannot
    // tell a genuine ticket from a forged one, so a client without one
    // must not learn which pools exist (the log and the outcome say which).
    match placer.front_door_policy(&pool).await {
        Ok(policy) if policy.allowed => {}
        Ok(_) => {
            report.detail = Some(format!("host pool {pool} does not allow the front door"));
            refuse(ws, tunnel, E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED).await;
            return Err(Outcome::PoolNotAllowed);
        }
        Err(e) => {
            report.detail = Some(e.to_string());
            let (code, outcome) = placer_refusal(&e);
            refuse(ws, tunnel, code).await;
            return Err(outcome);
        }
    }
    let request = ConnectInput {
        user: ticket.user,
        ticket: Some(raw),
        ..ConnectInput::default()
    };
    let door = Door {
        placer,
        pool: &pool,
        hold: Hold {
            wait: config.host_start_wait,
            retry_interval: config.host_start_retry_interval,
            max_waiting: config.max_waiting_connections,
            waiting: &shared.waiting,
            gauge: "deskbroker_rdg_waiting_channels",
            door: "rd gateway",
        },
        source,
        attempts: config.max_placement_attempts,
        dial_timeout: config.host_connect_timeout,
    };
    let client = &mut Held {
        link: &mut *ws,
        tunnel: &mut *tunnel,
    };
    let (code, outcome) = match door.place_and_dial(request, client, report).await {
        Ok((host, placed)) => {
            let answer = tunnel
                .server
                .accept_channel(1)
                .map_err(|e| fail(report, e.to_string()))?;
            if let Err(e) = send(ws, &answer).await {
                report.detail = Some(e);
                if !placed.reconnect {
                    release(placer, "rd gateway", &pool, &placed.session_id).await;
                }
                return Err(Outcome::Protocol);
            }
            return Ok((host, placed, pool));
        }
        Err(NoHost::Waited(WaitEnd::Limit(reason))) => {
            (E_PROXY_MAXCONNECTIONSREACHED, Outcome::WaitingLimit(reason))
        }
        Err(NoHost::Waited(WaitEnd::Timeout)) => {
            (E_PROXY_TS_CONNECTFAILED, Outcome::HostStartTimeout)
        }
        Err(NoHost::Waited(WaitEnd::ClientLeft)) => return Err(Outcome::ClientLeft),
        Err(NoHost::Refused(e)) => placer_refusal(&e),
        Err(NoHost::SourceLimit) => (E_PROXY_MAXCONNECTIONSREACHED, Outcome::SourceLimit),
        Err(NoHost::Unreachable) => (E_PROXY_TS_CONNECTFAILED, Outcome::HostUnreachable),
    };
    refuse(ws, tunnel, code).await;
    Err(outcome)
}

/// A tunnel's client while its channel is held: its next packet is read
/// (and kept, to be judged once the channel is answered); the tunnel's end
/// or a broken link means it has gone.
struct Held<'a> {
    link: &'a mut Link,
    tunnel: &'a mut Tunnel,
}

impl Client for Held<'_> {
    async fn gone(&mut self) -> bool {
        match self.tunnel.next(self.link).await {
            Ok(Some(packet)) => {
                self.tunnel.pending.push_front(packet);
                false
            }
            Ok(None) | Err(_) => true,
        }
    }
}

/// The HRESULT and outcome of a placer's refusal.
fn placer_refusal(e: &PlacerError) -> (u32, Outcome) {
    match e {
        PlacerError::Refused {
            code: api::ErrorCode::InvalidConnectionTicket,
            ..
        } => (
            E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED,
            Outcome::TokenRefused,
        ),
        // Answered as a refused ticket (see `open_channel`).
        PlacerError::Refused {
            code: api::ErrorCode::HostPoolNotFound,
            ..
        } => (
            E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED,
            Outcome::UnknownPool,
        ),
        PlacerError::Refused { .. } => (E_PROXY_TS_CONNECTFAILED, Outcome::Refused),
        PlacerError::Unreachable(_) => (E_PROXY_INTERNALERROR, Outcome::BrokerUnreachable),
    }
}

/// DATA payloads to the host, the host's bytes back as DATA packets, until
/// either side closes: the client with CLOSE_CHANNEL (answered) or by
/// leaving, the host by closing (the gateway then sends CLOSE_CHANNEL).
async fn relay(
    mut ws: Link,
    host: TcpStream,
    tunnel: &mut Tunnel,
    (idle, idle_without_logon): (Duration, Duration),
    report: &mut Report,
) -> Outcome {
    let (mut host_read, mut host_write) = host.into_split();
    let mut buffer = Vec::with_capacity(RELAY_BUFFER_BYTES);
    let mut out = Vec::with_capacity(RELAY_BUFFER_BYTES + 64);
    // Rule R4's idle bound: only data counts (a tunnel's keepalives carry
    // no session), the shorter bound until the channel shows a logon.
    let mut seen = (0u64, 0u64);
    let mut last = Instant::now();
    let ended: Result<(), String> = loop {
        buffer.clear();
        let carried = (report.client_to_host_bytes, report.host_to_client_bytes);
        if carried != seen {
            seen = carried;
            last = Instant::now();
        }
        let logon_seen = logon_evidence(report, 0);
        let limit = if logon_seen { idle } else { idle_without_logon };
        tokio::select! {
            () = tokio::time::sleep_until((last + limit).into()) => {
                let what = if logon_seen { "" } else { " without evidence of a logon" };
                break Err(format!("no data either way for {limit:?}{what}"));
            }
            packet = tunnel.next(&mut ws) => {
                let packet = match packet {
                    Ok(Some(p)) => p,
                    Ok(None) => break Ok(()),
                    Err(e) => break Err(e),
                };
                match tunnel.server.receive(packet) {
                    Ok(Action::Relay(data)) => {
                        report.client_to_host_bytes += data.len() as u64;
                        metrics::counter!("deskbroker_rdg_bytes_total", "direction" => "client_to_host")
                            .increment(data.len() as u64);
                        if let Err(e) = host_write.write_all(&data).await {
                            break Err(format!("host: {e}"));
                        }
                    }
                    Ok(Action::Send(p)) => {
                        if let Err(e) = send(&mut ws, &p).await {
                            break Err(e);
                        }
                    }
                    Ok(Action::Close { send: reply }) => {
                        if let Some(p) = reply {
                            let _ = send(&mut ws, &p).await;
                        }
                        break Ok(());
                    }
                    Ok(_) => {}
                    Err(refusal) => {
                        if let Some(p) = &refusal.reply {
                            let _ = send(&mut ws, p).await;
                        }
                        break Err(refusal.to_string());
                    }
                }
            }
            read = host_read.read_buf(&mut buffer) => match read {
                Ok(0) | Err(_) => {
                    // The host closed: tell the client, and stop.
                    if let Ok(p) = tunnel.server.close(S_OK) {
                        let _ = send(&mut ws, &p).await;
                    }
                    break Ok(());
                }
                Ok(n) => {
                    report.host_to_client_bytes += n as u64;
                    metrics::counter!("deskbroker_rdg_bytes_total", "direction" => "host_to_client")
                        .increment(n as u64);
                    out.clear();
                    packet::encode_data(&buffer, &mut out);
                    if let Err(e) = ws.send(std::mem::take(&mut out)).await {
                        break Err(e);
                    }
                }
            },
        }
    };
    let _ = host_write.shutdown().await;
    ws.close().await;
    if let Err(e) = ended {
        report.detail = Some(format!("relay ended: {e}"));
    }
    Outcome::Relayed
}
