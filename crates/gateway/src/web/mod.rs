//! The browser's door (rule WEB2): `GET /web/rdp`, a WebSocket that speaks
//! IronRDP's RDCleanPath, the protocol of IronRDP's web client.
//!
//! One connection, start to end:
//!
//! ```text
//! WebSocket upgrade ─► one binary message (≤ 8 KiB, within the handshake timeout):
//!   RDCleanPath request: [2] destination (ignored), [3] a connection ticket (T3),
//!   [6] the client's X.224 Connection Request
//!   ─► ticket read; its pool must allow the front door
//!   ─► Placer::connect (the broker verifies the ticket and places: S1, A8's hold, R5's retries)
//!   ─► the X.224 request to the host, its Connection Confirm back ─► TLS with the host
//!   ─► RDCleanPath response: [6] the host's Connection Confirm, [7] its certificate chain,
//!      [9] the host's name
//!   ─► Active ─► plaintext RDP relayed, WebSocket binary messages ⇄ the host's TLS ─► Disconnected
//! ```
//!
//! Why the broker does the TLS with the host: a browser cannot open a TCP
//! connection, nor run TLS inside a WebSocket with the page's own code at
//! the speed a desktop needs. RDCleanPath therefore has the proxy
//! terminate the host's TLS and hand the browser the host's certificate
//! chain, from which the browser's RDP client takes the host's public key
//! for CredSSP (NLA): the user's credentials are still bound to the host's
//! key, and travel encrypted browser to broker (HTTPS) and broker to host
//! (TLS). The broker sees the session's plaintext, as any RDCleanPath proxy
//! does.
//!
//! What is checked, and what is refused (an RDCleanPath error carrying an
//! HTTP status, then the socket closed; nothing reaches a host):
//!
//! - The request: one binary message within
//!   the handshake timeout ([`Bounds::handshake_timeout`]), at most
//!   [`WebConfig::max_request_bytes`] (413 beyond), version 3390,
//!   an X.224 Connection Request the front door's parser accepts (rule R6)
//!   that asks for a TLS-based protocol, no preconnection blob (400).
//!   A client that sends nothing is closed at the timeout, unanswered.
//! - The ticket (T3), as at the front door: the broker checks its
//!   signature, expiry and pool when asked to place (403); none is 401. A
//!   pool that does not allow the front door, or does not exist, is
//!   answered as a refused ticket, so a client cannot learn which pools
//!   exist.
//! - The destination the client names is ignored: the broker places the
//!   ticket's user in the ticket's pool under every rule, as it does for
//!   the other doors. The X.224 request is passed on as the client sent it
//!   (any routing token in it is ignored too).
//! - The broker's refusals carry the status of its answer
//!   (`NoSessionHostAvailable` 503, …); too many new sessions from one
//!   source 429; a host that cannot be reached after R5's retries 502.
//! - One ticket opens at most [`MAX_RELAYS_PER_TICKET`] connections at
//!   once (429 beyond, before the broker is asked): a ticket copied out of
//!   a tab cannot hold a host's sessions open many times over for its
//!   lifetime.
//! - A host that refuses the negotiation, or chooses Standard RDP
//!   Security: RDCleanPath's negotiation error, with the host's Connection
//!   Confirm. A TLS handshake with the host that fails: RDCleanPath's TLS
//!   error (the host's alert, when it sent one). The new session placed
//!   for that connection is ended.
//!
//! Sessions are left as at every door (`door/session.rs`, R4, S9): a new
//! session, or a reconnect to a Disconnected one or to one another
//! connection of this listener owns, is Active while the socket is open
//! and Disconnected when its last connection closes, or ended when none
//! of them showed evidence of a logon; a reconnect to a session live
//! elsewhere is relayed and its state left alone. The relay is closed after
//! [`Bounds::relay_idle_timeout`] without a byte either way
//! ([`Bounds::idle_timeout_without_logon`] before that evidence).
//!
//! The endpoint is served on the HTTPS front (`crate::https`,
//! `--gateway-listen`, `deskbroker serve` and `deskbroker gateway`), whose
//! accept loop bounds connections per source (T4) before TLS, and which
//! routes `GET /web/rdp` with `Upgrade: websocket` here; its hold (A8) and
//! its bound on held connections are the front's, shared with the RD
//! Gateway. Authority is
//! the ticket alone: no cookie is read, so a page of another origin that
//! opens this socket gains nothing.

mod host;
pub mod page;
mod relay;
mod request;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::SinkExt;
use ironrdp_rdcleanpath::{RDCleanPathErr, RDCleanPathPdu};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::Semaphore;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Bytes, Message};

use crate::door::{
    Bounds, Client, Door, Live, NoHost, Outcome, Report, Session, WEB, logon_evidence, release,
};
use crate::https::{Exchange, HeadError, Served};
use crate::placer::{ConnectInput, Placer, PlacerError};
use crate::sources::SourceGuard;

pub use host::{MAX_CONFIRM_BYTES, selects_tls};

/// The path of the endpoint.
pub const PATH: &str = "/web/rdp";
/// The connections one ticket may have open at once, from its request to
/// the relay's end. A tab has one; a tab that reconnects opens its next
/// before the gateway has seen the last one close, so two. More are
/// refused (429) before the broker is asked.
pub const MAX_RELAYS_PER_TICKET: usize = 2;
/// The longest RDCleanPath request taken. IronRDP's is a few hundred
/// bytes: a ticket (at most [`api::ticket::MAX_TICKET_BYTES`]), a
/// destination, and an X.224 request of at most 259 bytes.
pub const MAX_REQUEST_BYTES: usize = 8 * 1024;
/// The longest WebSocket message or frame taken during the relay. A
/// browser's RDP client sends one PDU per message (input events, channel
/// chunks of at most 1,600 bytes); the largest a client sends is far
/// below this.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;
/// How long the host may take to send its Connection Confirm, and then to
/// finish the TLS handshake (each).
pub const HOST_ANSWER_TIMEOUT: Duration = crate::front_door::HOST_ANSWER_TIMEOUT;
/// How much tungstenite reads at once. It zero-fills this much of its
/// buffer before each read, so every open session keeps it resident: a
/// browser's messages are small (input events, channel chunks of at most
/// 1,600 bytes), and a longer frame still grows the buffer, up to
/// [`MAX_MESSAGE_BYTES`].
const READ_BUFFER_BYTES: usize = 4 * 1024;
/// The most tungstenite holds to write to the browser: one message to the
/// browser (at most [`relay::MAX_MESSAGE_OUT_BYTES`]) not yet taken by the
/// socket, and the control frames queued behind it.
const MAX_WRITE_BUFFER_BYTES: usize = 2 * 64 * 1024;

/// The endpoint's settings.
#[derive(Clone, Debug)]
pub struct WebConfig {
    /// The bounds every door shares; `handshake_timeout` bounds the
    /// upgrade and the whole request.
    pub bounds: Bounds,
    /// See [`MAX_REQUEST_BYTES`].
    pub max_request_bytes: usize,
    /// See [`MAX_MESSAGE_BYTES`].
    pub max_message_bytes: usize,
    /// See [`MAX_RELAYS_PER_TICKET`].
    pub max_relays_per_ticket: usize,
    /// The tickets whose connections are counted at once: the listener's
    /// bound on connections, as each counted ticket has one open.
    pub max_tickets: usize,
}

impl WebConfig {
    /// The endpoint as the HTTPS front's `config` serves it: its bounds.
    pub fn of(config: &crate::rd_gateway::GatewayConfig) -> WebConfig {
        WebConfig {
            bounds: config.bounds.clone(),
            max_request_bytes: MAX_REQUEST_BYTES,
            max_message_bytes: MAX_MESSAGE_BYTES,
            max_relays_per_ticket: MAX_RELAYS_PER_TICKET,
            max_tickets: config.bounds.max_connections,
        }
    }
}

/// What the endpoint keeps across connections: its settings, the host
/// leg's TLS client, and the connections open by ticket.
pub(crate) struct Web {
    pub config: WebConfig,
    tls: tokio_rustls::TlsConnector,
    relays: TicketRelays,
}

impl Web {
    pub(crate) fn new(config: WebConfig) -> Web {
        crate::door::describe_metrics();
        Web {
            relays: TicketRelays::new(config.max_relays_per_ticket, config.max_tickets),
            config,
            tls: host::connector(),
        }
    }
}

/// The connections open by ticket (keyed by its signature), at most
/// `per_ticket` each, for at most `tickets` tickets at once.
struct TicketRelays {
    open: std::sync::Mutex<std::collections::HashMap<String, usize>>,
    per_ticket: usize,
    tickets: usize,
}

/// Why a ticket's connection is not counted in.
#[derive(Debug, PartialEq, Eq)]
enum RelayRefusal {
    /// The ticket has its connections open already.
    Ticket,
    /// The table of tickets is full.
    Table,
}

impl TicketRelays {
    fn new(per_ticket: usize, tickets: usize) -> TicketRelays {
        TicketRelays {
            open: std::sync::Mutex::default(),
            per_ticket,
            tickets,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, usize>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one more connection of the ticket signed `signature`, for as
    /// long as the answer lives.
    fn hold(&self, signature: &str) -> Result<TicketRelay<'_>, RelayRefusal> {
        let mut open = self.lock();
        let full = open.len() >= self.tickets;
        match open.get_mut(signature) {
            Some(n) if *n >= self.per_ticket => return Err(RelayRefusal::Ticket),
            Some(n) => *n += 1,
            None if full => return Err(RelayRefusal::Table),
            None => {
                open.insert(signature.to_string(), 1);
            }
        }
        Ok(TicketRelay {
            relays: self,
            signature: signature.to_string(),
        })
    }
}

/// One connection counted against its ticket, until dropped.
struct TicketRelay<'a> {
    relays: &'a TicketRelays,
    signature: String,
}

impl Drop for TicketRelay<'_> {
    fn drop(&mut self) {
        let mut open = self.relays.lock();
        if let Some(n) = open.get_mut(&self.signature) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.signature);
            }
        }
    }
}

/// The WebSocket's buffers, and its frame and message bounds.
fn websocket_config(config: &WebConfig) -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER_BYTES)
        // Each message is written as it is sent, never gathered with the
        // next: the relay makes its messages as large as what is at hand.
        .write_buffer_size(0)
        .max_write_buffer_size(MAX_WRITE_BUFFER_BYTES)
        .max_message_size(Some(config.max_message_bytes))
        .max_frame_size(Some(config.max_message_bytes))
}

/// Answers a WebSocket upgrade of `stream` (whose request head has been
/// read, `rest` the bytes after it; `key` its `Sec-WebSocket-Key`) within
/// `idle`, then serves the connection to its end, logging and counting
/// it.
pub(crate) async fn serve_upgrade<S, P>(
    mut stream: S,
    rest: Vec<u8>,
    key: &str,
    idle: Duration,
    peer: std::net::SocketAddr,
    cx: Context<'_, P>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send,
    P: Placer,
{
    let started = Instant::now();
    let mut report = Report::default();
    let response = crate::https::switching_protocols(key);
    let outcome = match tokio::time::timeout(idle, stream.write_all(response.as_bytes())).await {
        Ok(Ok(())) => {
            let ws = WebSocketStream::from_partially_read(
                stream,
                rest,
                Role::Server,
                Some(websocket_config(&cx.web.config)),
            )
            .await;
            connection(ws, &cx, &mut report).await
        }
        Ok(Err(e)) => {
            report.detail = Some(format!("the upgrade: {e}"));
            Outcome::ClientLeft
        }
        Err(_) => {
            report.detail = Some("the upgrade could not be written".into());
            Outcome::Timeout
        }
    };
    metrics::counter!("deskbroker_web_connections_total", "outcome" => outcome.as_str())
        .increment(1);
    report.log(
        "web rdp connection",
        peer,
        outcome.as_str(),
        started.elapsed(),
    );
}

/// A browser's `GET /web/rdp`, its head read by the front: refused (400)
/// without a usable WebSocket key or with a body, else upgraded and served
/// to its end. Logged and counted here (`deskbroker_web_connections_total`).
pub(crate) async fn serve_request<P: Placer>(x: Exchange<'_, P>) -> Served {
    let key = match x.head.websocket_key() {
        Some(key) => key.to_string(),
        None => return x.refuse(HeadError::NoWebSocketKey).await,
    };
    if let Err(e) = x.head.bodiless() {
        return x.refuse(e).await;
    }
    let front = x.front;
    let idle = front.config.bounds.handshake_timeout;
    let cx = Context {
        web: &front.web,
        placer: front.placer.as_ref(),
        waiting: &front.waiting,
        live: &front.live,
        source: &x.source,
    };
    serve_upgrade(x.stream, x.rest, &key, idle, x.peer, cx).await;
    Served::Closed(Outcome::Web)
}

/// What one connection works with: the endpoint, the broker, the bound on
/// connections held while hosts start (A8), the table of the sessions the
/// listener's connections own (R4), and its count against its source (T4).
pub(crate) struct Context<'a, P> {
    pub web: &'a Web,
    pub placer: &'a P,
    pub waiting: &'a Arc<Semaphore>,
    pub live: &'a Live,
    pub source: &'a SourceGuard,
}

/// A refusal: the HTTP status its RDCleanPath error carries, and the
/// connection's outcome.
type Refusal = (u16, Outcome);

/// One connection from its request to its end: the request read and its
/// ticket counted and allowed, the user placed, TLS with the host, the
/// session relayed as at every door.
async fn connection<S, P>(
    mut ws: WebSocketStream<S>,
    cx: &Context<'_, P>,
    report: &mut Report,
) -> Outcome
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
    P: Placer,
{
    let config = &cx.web.config;
    let max_bytes = config.max_request_bytes;
    let asked = match request::read(&mut ws, config.bounds.handshake_timeout, max_bytes).await {
        Ok(a) => a,
        Err(refused) => {
            report.detail = Some(refused.detail);
            if let Some(status) = refused.status {
                answer(&mut ws, RDCleanPathPdu::new_http_error(status)).await;
            }
            let _ = ws.close(None).await;
            return refused.outcome;
        }
    };
    let pool = asked.ticket.pool.clone();
    report.pool = Some(pool.clone());
    report.user = Some(asked.ticket.user.clone());
    // Counted from here to the relay's end (see the module's
    // documentation).
    let counted = count(cx, &asked, report);
    let allowed = match &counted {
        Ok(_) => allowed(cx.placer, &pool, report).await,
        Err(refusal) => Err(*refusal),
    };
    if let Err((status, outcome)) = allowed {
        return refuse(&mut ws, status, outcome).await;
    }
    let (host, placed) = match place(&mut ws, &asked, &pool, cx, report).await {
        Ok(placed) => placed,
        Err(Outcome::ClientLeft) => return Outcome::ClientLeft,
        Err(outcome) => return refuse(&mut ws, status(outcome), outcome).await,
    };
    let tls = match open_host(&mut ws, host, &placed, &asked, cx, report).await {
        Ok(tls) => tls,
        Err(outcome) => {
            // What followed the placement failed: a new session made for
            // this connection is ended.
            if !placed.reconnect {
                release(cx.placer, WEB.name, &pool, &placed.session_id).await;
            }
            return outcome;
        }
    };
    // Rules R4 and S9, as at every door.
    let session = Session::begin(
        &WEB, cx.placer, cx.live, &pool, &placed, true, false, report,
    );
    let mut carried = Report::default();
    let relay = relay::relay(ws, tls, config.bounds.idle(), &mut carried);
    session.relay(relay).await;
    report.client_to_host_bytes = carried.client_to_host_bytes;
    report.host_to_client_bytes = carried.host_to_client_bytes;
    if carried.detail.is_some() {
        report.detail = carried.detail;
    }
    session.end(logon_evidence(report, 0)).await;
    Outcome::Relayed
}

/// Counts the connection against its ticket ([`MAX_RELAYS_PER_TICKET`]),
/// for as long as the answer lives.
fn count<'a, P>(
    cx: &Context<'a, P>,
    asked: &request::Asked,
    report: &mut Report,
) -> Result<TicketRelay<'a>, Refusal> {
    let config = &cx.web.config;
    cx.web.relays.hold(&asked.signature).map_err(|refusal| {
        report.detail = Some(match refusal {
            RelayRefusal::Ticket => format!(
                "the ticket has {} connections open already",
                config.max_relays_per_ticket
            ),
            RelayRefusal::Table => {
                format!("connections of {} tickets open already", config.max_tickets)
            }
        });
        let status = match refusal {
            RelayRefusal::Ticket => 429,
            RelayRefusal::Table => 503,
        };
        (status, Outcome::TicketLimit)
    })
}

/// Whether the ticket's pool takes the front door. A pool that does not
/// allow it, or does not exist, is answered as a refused ticket (see the
/// module's documentation).
async fn allowed<P: Placer>(placer: &P, pool: &str, report: &mut Report) -> Result<(), Refusal> {
    match placer.front_door_policy(pool).await {
        Ok(policy) if policy.allowed => Ok(()),
        Ok(_) => {
            report.detail = Some(format!("host pool {pool} does not allow the front door"));
            Err((403, Outcome::PoolNotAllowed))
        }
        Err(e) => {
            report.detail = Some(e.to_string());
            Err(placer_refusal(&e))
        }
    }
}

/// Places the ticket's user and dials the host (held while one starts,
/// A8; R5's retries). The destination the client named is ignored.
async fn place<S, P>(
    ws: &mut WebSocketStream<S>,
    asked: &request::Asked,
    pool: &str,
    cx: &Context<'_, P>,
    report: &mut Report,
) -> Result<(tokio::net::TcpStream, placement::Placement), Outcome>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
    P: Placer,
{
    let named: String = asked.destination.chars().take(100).collect();
    tracing::debug!(
        pool,
        destination = named,
        "web rdp: the destination named is ignored"
    );
    let request = ConnectInput {
        user: asked.ticket.user.clone(),
        ticket: Some(asked.raw_ticket.clone()),
        ..ConnectInput::default()
    };
    let bounds = &cx.web.config.bounds;
    let door = Door::new(&WEB, cx.placer, pool, bounds, cx.waiting, cx.source);
    let mut held = Held { ws, early: false };
    let (host, placed) = door
        .place_and_dial(request, &mut held, report)
        .await
        .map_err(NoHost::outcome)?;
    if held.early {
        report.detail = Some("the client sent data before the RDCleanPath response".into());
        if !placed.reconnect {
            release(cx.placer, WEB.name, pool, &placed.session_id).await;
        }
        return Err(Outcome::BadRequest);
    }
    Ok((host, placed))
}

/// Sends the client's X.224 request to the host, does TLS with it, and
/// answers the client with the host's Connection Confirm and certificate
/// chain: the host's TLS stream, or the outcome of a failure (answered).
async fn open_host<S, P>(
    ws: &mut WebSocketStream<S>,
    host: tokio::net::TcpStream,
    placed: &placement::Placement,
    asked: &request::Asked,
    cx: &Context<'_, P>,
    report: &mut Report,
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, Outcome>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
    P: Placer,
{
    let timeout = cx.web.config.bounds.host_answer_timeout;
    let answered = || cx.source.answered();
    let upgraded = host::upgrade(host, &asked.x224, timeout, &cx.web.tls, answered).await;
    let upgraded = match upgraded {
        Ok(u) => u,
        Err(e) => {
            report.detail = Some(format!("{}: {e}", placed.host));
            let (response, outcome) = host_refusal(e);
            answer(ws, response).await;
            let _ = ws.close(None).await;
            return Err(outcome);
        }
    };
    let response =
        RDCleanPathPdu::new_response(placed.host.clone(), upgraded.confirm, upgraded.chain);
    let response = match response {
        Ok(r) => r,
        Err(e) => {
            report.detail = Some(format!("the response: {e}"));
            return Err(refuse(ws, 502, Outcome::HostTlsFailed).await);
        }
    };
    if !answer(ws, response).await {
        report.detail = Some("the client left before the response".into());
        return Err(Outcome::ClientLeft);
    }
    Ok(upgraded.tls)
}

/// The RDCleanPath answer and outcome of a host that could not be opened.
fn host_refusal(e: host::HostError) -> (RDCleanPathPdu, Outcome) {
    match e {
        host::HostError::Negotiation(confirm) => (
            RDCleanPathPdu::new_negotiation_error(confirm)
                .unwrap_or_else(|_| RDCleanPathPdu::new_http_error(502)),
            Outcome::NegotiationFailed,
        ),
        host::HostError::Tls(_, alert) => (
            error_pdu(
                ironrdp_rdcleanpath::TLS_HANDSHAKE_FAILED_ERROR_CODE,
                502,
                alert,
            ),
            Outcome::HostTlsFailed,
        ),
        host::HostError::Silent(_) => (
            error_pdu(
                ironrdp_rdcleanpath::TARGET_UNREACHABLE_ERROR_CODE,
                502,
                None,
            ),
            Outcome::HostUnreachable,
        ),
    }
}

/// An RDCleanPath error with one of its codes and an HTTP status.
fn error_pdu(code: u16, status: u16, alert: Option<u8>) -> RDCleanPathPdu {
    RDCleanPathPdu {
        error: Some(RDCleanPathErr {
            error_code: code,
            http_status_code: Some(status),
            wsa_last_error: None,
            tls_alert_code: alert,
        }),
        ..RDCleanPathPdu::default()
    }
}

/// Sends one RDCleanPath PDU as a binary message; false when it could not.
async fn answer<S>(ws: &mut WebSocketStream<S>, pdu: RDCleanPathPdu) -> bool
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let Ok(der) = pdu.to_der() else {
        return false;
    };
    ws.send(Message::Binary(Bytes::from(der))).await.is_ok()
}

/// Answers an RDCleanPath error with `status`, closes, and says `outcome`.
async fn refuse<S>(ws: &mut WebSocketStream<S>, status: u16, outcome: Outcome) -> Outcome
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    answer(ws, RDCleanPathPdu::new_http_error(status)).await;
    let _ = ws.close(None).await;
    outcome
}

/// The HTTP status and outcome of a placer's refusal (see [`status`]).
fn placer_refusal(e: &PlacerError) -> (u16, Outcome) {
    let outcome = Outcome::of_refusal(e);
    (status(outcome), outcome)
}

/// The HTTP status a connection refused with `outcome` is answered: the
/// status of the broker's answer, except that an unknown pool is
/// answered as a refused ticket (see the module's documentation).
fn status(outcome: Outcome) -> u16 {
    match outcome {
        Outcome::BadRequest => 400,
        Outcome::TicketRefused | Outcome::UnknownPool | Outcome::PoolNotAllowed => 403,
        Outcome::Refused(code) => code.status(),
        // The listener's own bound is full: not this source's doing.
        Outcome::WaitingLimit("waiting_full") => 503,
        Outcome::WaitingLimit(_) | Outcome::SourceLimit | Outcome::TicketLimit => 429,
        Outcome::HostUnreachable => 502,
        _ => 503,
    }
}

/// The browser while it is held for a starting host (A8): gone once it
/// closes; anything it sends meanwhile breaks the protocol, and is noted.
struct Held<'a, S> {
    ws: &'a mut WebSocketStream<S>,
    early: bool,
}

impl<S> Client for Held<'_, S>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    async fn gone(&mut self) -> bool {
        use futures_util::StreamExt;
        loop {
            match self.ws.next().await {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return true,
                Some(Ok(Message::Binary(_) | Message::Text(_))) => {
                    self.early = true;
                    return false;
                }
                // Pings are answered by the library; pongs carry nothing.
                Some(Ok(_)) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_holds_at_most_its_share_of_connections_until_they_close() {
        let relays = TicketRelays::new(2, 2);
        let first = relays.hold("a").expect("the first");
        let second = relays.hold("a").expect("the second");
        assert_eq!(relays.hold("a").err(), Some(RelayRefusal::Ticket));
        // Another ticket is counted on its own; a third is over the table.
        let other = relays.hold("b").expect("another ticket");
        assert_eq!(relays.hold("c").err(), Some(RelayRefusal::Table));
        drop(first);
        let third = relays.hold("a").expect("one closed: one more");
        drop((second, third, other));
        assert!(relays.lock().is_empty(), "{:?}", relays.lock());
        assert!(relays.hold("c").is_ok());
    }
}
