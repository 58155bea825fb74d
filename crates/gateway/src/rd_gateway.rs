//! The RD Gateway (MS-TSGU over HTTPS, issue 17): RDP clients outside the
//! farm reach it through one HTTPS port, and the broker places each one at
//! the moment it opens its channel.
//!
//! One connection, start to end:
//!
//! ```text
//! accept (≤ max_connections) ─► TLS ─► HTTP request head (httparse, ≤ 8 KiB)
//!   ─► RDG_OUT_DATA + Upgrade: websocket ─► 101, WebSocket frames carry MS-TSGU packets
//!   ─► handshake (PAA) ─► tunnel create: the access token, a ticket (T3), read (not verified)
//!   ─► tunnel auth ─► channel create: the resource must be the ticket's pool
//!   ─► Placer::connect (the broker verifies the ticket, places or reconnects: S1)
//!   ─► dial (≤ 3 s; R5: a new session on an unreachable host is ended, the next host tried)
//!   ─► channel response ─► Active ─► DATA relayed both ways, untouched ─► Disconnected
//! ```
//!
//! Everything up to the channel response is bounded by
//! [`GatewayConfig::setup_timeout`]; every refusal is answered with the
//! protocol's HRESULT in the packet the client awaits (a tampered,
//! expired or foreign token: E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED;
//! another pool: E_PROXY_RAP_ACCESSDENIED; no host: E_PROXY_TS_CONNECTFAILED),
//! and no refused connection ever reaches a host.
//!
//! Not yet: the legacy `RDG_OUT_DATA`/`RDG_IN_DATA` transport (answered
//! 404, which FreeRDP takes as "no HTTP transport"), per-source limits,
//! holding a channel while a host starts (A8: refused as unreachable), and
//! sharing the front door's table of live sessions (a reconnect to a
//! session Active elsewhere is relayed, its state left alone, as there).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use placement::SessionState;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Bytes, Message};

use crate::front_door::{
    LOGON_EVIDENCE_CLIENT_BYTES, LOGON_EVIDENCE_HOST_BYTES, RELAY_BUFFER_BYTES,
};
use crate::placer::{ConnectInput, Placer, PlacerError};
use crate::tsgu::hresult::{
    E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED, E_PROXY_INTERNALERROR, E_PROXY_RAP_ACCESSDENIED,
    E_PROXY_TS_CONNECTFAILED, S_OK,
};
use crate::tsgu::packet::{self, MAX_PACKET_BYTES};
use crate::tsgu::{Action, Decoder, Packet, Server, ServerConfig};

/// Tunnels open at once; at the limit the gateway stops accepting.
pub const MAX_CONNECTIONS: usize = 1024;
/// From accept to the channel response: TLS, the request head, the
/// tunnel's setup and the placement (the client waits for each answer).
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(20);
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
    pub host_connect_timeout: Duration,
    pub max_placement_attempts: usize,
    /// What the protocol tells every client (idle timeout, redirection).
    pub tsgu: ServerConfig,
}

impl Default for GatewayConfig {
    fn default() -> GatewayConfig {
        GatewayConfig {
            max_connections: MAX_CONNECTIONS,
            setup_timeout: SETUP_TIMEOUT,
            host_connect_timeout: crate::front_door::HOST_CONNECT_TIMEOUT,
            max_placement_attempts: crate::front_door::MAX_PLACEMENT_ATTEMPTS,
            tsgu: ServerConfig::default(),
        }
    }
}

/// Describes the gateway's metrics to the installed recorder.
pub fn describe_metrics() {
    metrics::describe_counter!(
        "deskbroker_rdg_tunnels_total",
        "RD Gateway connections by outcome: relayed, bad_request, protocol, token_refused, \
         resource_refused, refused, host_unreachable, broker_unreachable, timeout."
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
    let config = Arc::new(config);
    let slots = Arc::new(Semaphore::new(config.max_connections));
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            biased;
            () = &mut shutdown => break,
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            biased;
            () = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "rd gateway: accept failed");
                    tokio::time::sleep(crate::front_door::ACCEPT_ERROR_BACKOFF).await;
                    continue;
                }
            },
        };
        let placer = placer.clone();
        let config = config.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let _ = stream.set_nodelay(true);
            let started = Instant::now();
            let mut report = Report::default();
            let outcome = match tls {
                Some(tls) => {
                    match tokio::time::timeout(config.setup_timeout, tls.accept(stream)).await {
                        Ok(Ok(stream)) => {
                            connection(stream, started, placer.as_ref(), &config, &mut report).await
                        }
                        Ok(Err(e)) => {
                            report.detail = Some(format!("TLS: {e}"));
                            Outcome::BadRequest
                        }
                        Err(_) => Outcome::Timeout,
                    }
                }
                None => connection(stream, started, placer.as_ref(), &config, &mut report).await,
            };
            metrics::counter!("deskbroker_rdg_tunnels_total", "outcome" => outcome.as_str())
                .increment(1);
            log(peer, outcome, started.elapsed(), &report);
        });
    }
    tracing::info!("rd gateway stopped accepting");
}

/// What happened to one connection, for its log line.
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Relayed,
    /// Not an RD Gateway request (or TLS failed).
    BadRequest,
    /// A packet out of order, or bytes that are no packet.
    Protocol,
    TokenRefused,
    ResourceRefused,
    /// The broker refused the placement.
    Refused,
    HostUnreachable,
    BrokerUnreachable,
    Timeout,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Relayed => "relayed",
            Outcome::BadRequest => "bad_request",
            Outcome::Protocol => "protocol",
            Outcome::TokenRefused => "token_refused",
            Outcome::ResourceRefused => "resource_refused",
            Outcome::Refused => "refused",
            Outcome::HostUnreachable => "host_unreachable",
            Outcome::BrokerUnreachable => "broker_unreachable",
            Outcome::Timeout => "timeout",
        }
    }
}

fn log(peer: SocketAddr, outcome: Outcome, duration: Duration, report: &Report) {
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
        "rd gateway connection"
    );
}

/// A WebSocket upgrade request for the gateway, read from its head.
#[derive(Debug, PartialEq, Eq)]
pub struct Upgrade {
    /// `Sec-WebSocket-Key`, as sent (FreeRDP 2's is 15 characters and not
    /// base64: it is only ever hashed, so any token is taken).
    pub key: String,
}

/// Why a request head is not an RD Gateway WebSocket upgrade.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("the request head is longer than {MAX_HEAD_BYTES} bytes")]
    TooLong,
    #[error("not an HTTP request head: {0}")]
    Malformed(String),
    #[error("{0} {1} is not an RD Gateway request")]
    NotGateway(String, String),
    #[error("the legacy RDG_OUT_DATA/RDG_IN_DATA transport is not served (WebSocket only)")]
    Legacy,
}

/// Reads an HTTP request head from `bytes`: `Ok(None)` while incomplete,
/// else the upgrade and how many bytes the head took.
pub fn parse_head(bytes: &[u8]) -> Result<Option<(Upgrade, usize)>, HeadError> {
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
    match method {
        "RDG_OUT_DATA" => {}
        "RDG_IN_DATA" => return Err(HeadError::Legacy),
        _ => return Err(not_gateway()),
    }
    let upgrade = header("Upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
    let key = header("Sec-WebSocket-Key").filter(|k| !k.is_empty() && k.len() <= 64);
    match (upgrade, key) {
        (true, Some(key)) => Ok(Some((
            Upgrade {
                key: key.to_string(),
            },
            taken,
        ))),
        _ => Err(HeadError::Legacy),
    }
}

/// Reads the request head off `stream`, within [`MAX_HEAD_BYTES`].
/// Returns the upgrade and whatever bytes came after the head.
async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> Result<(Upgrade, Vec<u8>), HeadError> {
    let mut buf = Vec::with_capacity(1024);
    loop {
        let n = stream
            .read_buf(&mut buf)
            .await
            .map_err(|e| HeadError::Malformed(e.to_string()))?;
        if n == 0 {
            return Err(HeadError::Malformed("closed before the head ended".into()));
        }
        if let Some((upgrade, taken)) = parse_head(&buf)? {
            return Ok((upgrade, buf.split_off(taken)));
        }
        if buf.len() >= MAX_HEAD_BYTES {
            return Err(HeadError::TooLong);
        }
    }
}

/// The WebSocket frames' bounds: a message holds at most a few packets.
fn websocket_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(4 * MAX_PACKET_BYTES))
        .max_frame_size(Some(4 * MAX_PACKET_BYTES))
}

type Ws<S> = WebSocketStream<S>;

async fn connection<S, P>(
    mut stream: S,
    started: Instant,
    placer: &P,
    config: &GatewayConfig,
    report: &mut Report,
) -> Outcome
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
    P: Placer,
{
    let deadline = started + config.setup_timeout;
    let head = tokio::time::timeout_at(deadline.into(), read_head(&mut stream)).await;
    let (upgrade, rest) = match head {
        Ok(Ok(h)) => h,
        Ok(Err(e)) => {
            let status = match e {
                HeadError::Legacy => "404 Not Found",
                _ => "400 Bad Request",
            };
            let _ = stream
                .write_all(
                    format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                        .as_bytes(),
                )
                .await;
            report.detail = Some(e.to_string());
            return Outcome::BadRequest;
        }
        Err(_) => return Outcome::Timeout,
    };
    let accept =
        tokio_tungstenite::tungstenite::handshake::derive_accept_key(upgrade.key.as_bytes());
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    if let Err(e) = stream.write_all(response.as_bytes()).await {
        report.detail = Some(e.to_string());
        return Outcome::BadRequest;
    }
    let mut ws =
        WebSocketStream::from_partially_read(stream, rest, Role::Server, Some(websocket_config()))
            .await;
    let mut tunnel = Tunnel {
        server: Server::new(config.tsgu.clone()),
        decoder: Decoder::new(),
        pending: Vec::new(),
    };
    let setup = tokio::time::timeout_at(
        deadline.into(),
        setup(&mut ws, &mut tunnel, placer, config, report),
    )
    .await;
    let (host, placed, pool) = match setup {
        Ok(Ok(opened)) => opened,
        Ok(Err(outcome)) => {
            let _ = ws.close(None).await;
            return outcome;
        }
        Err(_) => return Outcome::Timeout,
    };
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
    let outcome = relay(ws, host, &mut tunnel, report).await;
    if owned {
        let logon_seen = report.host_to_client_bytes >= LOGON_EVIDENCE_HOST_BYTES
            && report.client_to_host_bytes >= LOGON_EVIDENCE_CLIENT_BYTES;
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
    pending: Vec<Packet>,
}

impl Tunnel {
    /// The client's next packet, reading messages as needed; `None` when
    /// the client has gone.
    async fn next<S>(&mut self, ws: &mut Ws<S>) -> Result<Option<Packet>, String>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        loop {
            if !self.pending.is_empty() {
                return Ok(Some(self.pending.remove(0)));
            }
            match ws.next().await {
                None | Some(Ok(Message::Close(_))) => return Ok(None),
                Some(Err(e)) => return Err(format!("websocket: {e}")),
                Some(Ok(Message::Binary(bytes))) => self.take(&bytes)?,
                Some(Ok(_)) => {} // ping (answered by the library), pong, text: nothing to relay
            }
        }
    }

    fn take(&mut self, mut bytes: &[u8]) -> Result<(), String> {
        while let Some(p) = self.decoder.decode(&mut bytes).map_err(|e| e.to_string())? {
            self.pending.push(p);
        }
        Ok(())
    }
}

async fn send<S>(ws: &mut Ws<S>, packet: &Packet) -> Result<(), String>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let bytes = packet.to_bytes().map_err(|e| e.to_string())?;
    ws.send(Message::Binary(Bytes::from(bytes)))
        .await
        .map_err(|e| format!("websocket: {e}"))
}

/// From the handshake to the channel response: the host dialled, the
/// session placed, and the pool, or the outcome of a refusal (answered).
async fn setup<S, P>(
    ws: &mut Ws<S>,
    tunnel: &mut Tunnel,
    placer: &P,
    config: &GatewayConfig,
    report: &mut Report,
) -> Result<(TcpStream, placement::Placement, String), Outcome>
where
    S: AsyncRead + AsyncWrite + Unpin,
    P: Placer,
{
    let mut ticket: Option<(api::ticket::Ticket, String)> = None;
    loop {
        let packet = match tunnel.next(ws).await {
            Ok(Some(p)) => p,
            Ok(None) => {
                report.detail = Some("the client left during setup".into());
                return Err(Outcome::Protocol);
            }
            Err(e) => {
                report.detail = Some(e);
                return Err(Outcome::Protocol);
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
                return open_channel(ws, tunnel, &resource, t, raw, placer, config, report).await;
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
#[allow(clippy::too_many_arguments)]
async fn open_channel<S, P>(
    ws: &mut Ws<S>,
    tunnel: &mut Tunnel,
    resource: &str,
    ticket: api::ticket::Ticket,
    raw: String,
    placer: &P,
    config: &GatewayConfig,
    report: &mut Report,
) -> Result<(TcpStream, placement::Placement, String), Outcome>
where
    S: AsyncRead + AsyncWrite + Unpin,
    P: Placer,
{
    let pool = ticket.pool;
    let refuse = async |ws: &mut Ws<S>, tunnel: &mut Tunnel, code: u32| {
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
    match placer.front_door_policy(&pool).await {
        Ok(policy) if policy.allowed => {}
        Ok(_) => {
            report.detail = Some(format!("host pool {pool} does not allow the front door"));
            refuse(ws, tunnel, E_PROXY_RAP_ACCESSDENIED).await;
            return Err(Outcome::ResourceRefused);
        }
        Err(e) => {
            report.detail = Some(e.to_string());
            let (code, outcome) = placer_refusal(&e);
            refuse(ws, tunnel, code).await;
            return Err(outcome);
        }
    }
    let mut request = ConnectInput {
        user: ticket.user,
        ticket: Some(raw),
        ..ConnectInput::default()
    };
    for _ in 0..config.max_placement_attempts {
        let placed = match placer.connect(&pool, &request).await {
            Ok(p) => p,
            Err(e) => {
                report.detail = Some(e.to_string());
                let (code, outcome) = placer_refusal(&e);
                refuse(ws, tunnel, code).await;
                return Err(outcome);
            }
        };
        report.host = Some(placed.host.clone());
        report.session_id = Some(placed.session_id.clone());
        report.reconnect = placed.reconnect;
        match dial(&placed.address, config.host_connect_timeout).await {
            Ok(host) => {
                let answer = tunnel
                    .server
                    .accept_channel(1)
                    .map_err(|e| fail(report, e.to_string()))?;
                if let Err(e) = send(ws, &answer).await {
                    report.detail = Some(e);
                    if !placed.reconnect {
                        let _ = placer.logoff(&pool, &placed.session_id).await;
                    }
                    return Err(Outcome::Protocol);
                }
                return Ok((host, placed, pool));
            }
            Err(e) => {
                report.detail = Some(format!("{} ({}): {e}", placed.host, placed.address));
                if placed.reconnect {
                    // R5: a user's session is never replaced by a new one elsewhere.
                    break;
                }
                if let Err(e) = placer.logoff(&pool, &placed.session_id).await {
                    tracing::warn!(pool, session = placed.session_id, error = %e,
                        "rd gateway: could not log off the session");
                }
                report.session_id = None;
                request.exclude.push(placed.host);
            }
        }
    }
    refuse(ws, tunnel, E_PROXY_TS_CONNECTFAILED).await;
    Err(Outcome::HostUnreachable)
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
        PlacerError::Refused {
            code: api::ErrorCode::HostPoolNotFound,
            ..
        } => (E_PROXY_RAP_ACCESSDENIED, Outcome::ResourceRefused),
        PlacerError::Refused { .. } => (E_PROXY_TS_CONNECTFAILED, Outcome::Refused),
        PlacerError::Unreachable(_) => (E_PROXY_INTERNALERROR, Outcome::BrokerUnreachable),
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

/// DATA payloads to the host, the host's bytes back as DATA packets, until
/// either side closes: the client with CLOSE_CHANNEL (answered) or by
/// leaving, the host by closing (the gateway then sends CLOSE_CHANNEL).
async fn relay<S>(
    mut ws: Ws<S>,
    host: TcpStream,
    tunnel: &mut Tunnel,
    report: &mut Report,
) -> Outcome
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (mut host_read, mut host_write) = host.into_split();
    let mut buffer = Vec::with_capacity(RELAY_BUFFER_BYTES);
    let mut out = Vec::with_capacity(RELAY_BUFFER_BYTES + 64);
    let ended: Result<(), String> = loop {
        buffer.clear();
        tokio::select! {
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
                    if let Err(e) = ws.send(Message::Binary(Bytes::copy_from_slice(&out))).await {
                        break Err(format!("websocket: {e}"));
                    }
                }
            },
        }
    };
    let _ = host_write.shutdown().await;
    let _ = ws.close(None).await;
    if let Err(e) = ended {
        report.detail = Some(format!("relay ended: {e}"));
    }
    Outcome::Relayed
}
