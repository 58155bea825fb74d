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
//! `bounds.handshake_timeout` ([`SETUP_IDLE_TIMEOUT`]), so idle connections cannot hold
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
//! Sessions are left as at every door (`door/session.rs`, rules R4, S9):
//! the listener keeps a table of the sessions its connections own (the
//! browsers' and the RD Gateway's), so a second tunnel of a session joins
//! it, and a reconnect to a session live elsewhere is relayed, its state
//! left alone.
//!
//! The modules, one job each: `head` (the request head and the legacy
//! chunked body), `link` (WebSocket or paired legacy channels), `tunnel`
//! (MS-TSGU setup, placement through the door path shared with the front
//! door, the session's states), `relay` (the channel's data).

mod head;
mod link;
mod relay;
mod tunnel;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, oneshot};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::Role;

use crate::door::{Bounds, Live, Outcome, Report};
use crate::placer::Placer;
use crate::sources::{self, SourceGuard, Sources};
use crate::tsgu::ServerConfig;

use head::read_head;
pub use head::{BodyReader, HeadError, InBody, MAX_CONNECTION_ID_BYTES, Request, parse_head};
pub use link::Pairing;
use link::{BoxIo, Link, in_channel, websocket_config};
use tunnel::tunnel;

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
    /// The bounds every door shares, as at the front door, except: at most
    /// [`MAX_CONNECTIONS`] connections (a legacy tunnel is two), and
    /// `handshake_timeout` is [`SETUP_IDLE_TIMEOUT`], the bound on each
    /// step of the setup. The browser's door on this listener works under
    /// the same bounds.
    pub bounds: Bounds,
    /// See [`SETUP_TIMEOUT`].
    pub setup_timeout: Duration,
    /// See [`MAX_WAITING_OUT_CHANNELS`].
    pub max_waiting_out_channels: usize,
    /// See [`MAX_WAITING_OUT_CHANNELS_PER_SOURCE`].
    pub max_waiting_out_channels_per_source: usize,
    /// What the protocol tells every client (idle timeout, redirection).
    pub tsgu: ServerConfig,
}

impl Default for GatewayConfig {
    fn default() -> GatewayConfig {
        GatewayConfig {
            bounds: Bounds {
                max_connections: MAX_CONNECTIONS,
                handshake_timeout: SETUP_IDLE_TIMEOUT,
                ..Bounds::default()
            },
            setup_timeout: SETUP_TIMEOUT,
            max_waiting_out_channels: MAX_WAITING_OUT_CHANNELS,
            max_waiting_out_channels_per_source: MAX_WAITING_OUT_CHANNELS_PER_SOURCE,
            tsgu: ServerConfig::default(),
        }
    }
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
    crate::door::describe_metrics();
    // The page's gzipped files are made now, not on the first browser's
    // request.
    drop(tokio::task::spawn_blocking(crate::web::page::prepare));
    let sources = Sources::new(config.bounds.source_limits);
    let slots = Arc::new(Semaphore::new(config.bounds.max_connections));
    let shared = Arc::new(Shared {
        https: tls.is_some(),
        placer,
        waiting: Arc::new(Semaphore::new(config.bounds.max_waiting_connections)),
        pairing: Pairing::default(),
        live: Live::default(),
        web: crate::web::Web::new(crate::web::WebConfig::of(&config)),
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
                    let idle = shared.config.bounds.handshake_timeout;
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
                Ok(stream) => connection(stream, peer, started, &shared, source, &mut report).await,
                Err(outcome) => outcome,
            };
            metrics::counter!("deskbroker_rdg_tunnels_total", "outcome" => outcome.as_str())
                .increment(1);
            if outcome == Outcome::Web {
                // Logged and counted by the browser's door itself.
                return;
            }
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
    /// Whether the listener speaks TLS itself (the page's answers then
    /// carry `Strict-Transport-Security`).
    https: bool,
    config: GatewayConfig,
    /// Legacy OUT channels waiting for their IN channel.
    pairing: Pairing,
    /// The sessions the connections of this listener own, the browsers'
    /// and the RD Gateway's (rule R4).
    live: Live,
    /// Rule A8: the channels held while a host starts, gateway-wide (the
    /// browsers' connections held count here too).
    waiting: Arc<Semaphore>,
    /// The browser's door on this listener (`GET /web/rdp`).
    web: crate::web::Web,
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

/// The requests for the browser's page one connection serves (a page
/// load is six) before it is closed.
const MAX_PAGE_REQUESTS_PER_CONNECTION: usize = 32;

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

/// One connection of the HTTPS listener: its request read (the page's
/// requests served on the way), then routed: the browser's door, or an RD
/// Gateway tunnel on its link (a WebSocket, or a legacy pair of channels).
async fn connection<P: Placer>(
    mut stream: BoxIo,
    peer: std::net::SocketAddr,
    started: Instant,
    shared: &Shared<P>,
    source: SourceGuard,
    report: &mut Report,
) -> Outcome {
    let idle = shared.config.bounds.handshake_timeout;
    let (request, rest, deadline) = match read_request(&mut stream, started, shared, report).await {
        Ok(read) => read,
        Err(outcome) => return outcome,
    };
    let link = match request {
        // Served while reading.
        Request::WebPage(_) => return Outcome::WebPage,
        Request::WebRdp { key } => {
            let cx = crate::web::Context {
                web: &shared.web,
                placer: shared.placer.as_ref(),
                waiting: &shared.waiting,
                live: &shared.live,
                source: &source,
            };
            crate::web::serve_upgrade(stream, rest, &key, idle, peer, cx).await;
            return Outcome::Web;
        }
        Request::WebSocket { key } => {
            match websocket(stream, rest, &key, (deadline, idle), report).await {
                Ok(link) => link,
                Err(outcome) => return outcome,
            }
        }
        Request::In {
            connection_id,
            body,
        } => {
            let pairing = &shared.pairing;
            let (limits, id) = ((deadline, idle), connection_id);
            return in_channel(stream, rest, id, body, limits, pairing, source, report).await;
        }
        Request::Out { connection_id } => {
            match out_channel(stream, &connection_id, deadline, shared, &source, report).await {
                Ok(link) => link,
                Err(outcome) => return outcome,
            }
        }
    };
    tunnel(link, deadline, shared, &source, report).await
}

/// Reads the connection's request head. The browser's page is served on a
/// kept-alive connection, request after request (each with the bounds of
/// a connection's first), up to a bound; the first other request is
/// returned with the bytes after its head and its setup deadline.
async fn read_request<P>(
    stream: &mut BoxIo,
    started: Instant,
    shared: &Shared<P>,
    report: &mut Report,
) -> Result<(Request, Vec<u8>, Instant), Outcome> {
    let idle = shared.config.bounds.handshake_timeout;
    let mut deadline = started + shared.config.setup_timeout;
    let mut pages = 0;
    let mut buffered = Vec::new();
    loop {
        let read = read_head(stream, std::mem::take(&mut buffered), idle);
        let head = tokio::time::timeout_at(deadline.into(), read).await;
        let (request, rest) = match head {
            // A kept-alive connection the browser leaves, or lets idle.
            Ok(Err(HeadError::Idle(_) | HeadError::Closed)) | Err(_) if pages > 0 => {
                return Err(Outcome::WebPage);
            }
            Ok(Ok(h)) => h,
            Ok(Err(e @ HeadError::Idle(_))) => {
                report.detail = Some(e.to_string());
                return Err(Outcome::Idle);
            }
            Ok(Err(e)) => {
                answer_status(stream, "400 Bad Request").await;
                report.detail = Some(e.to_string());
                return Err(Outcome::BadRequest);
            }
            Err(_) => return Err(Outcome::Timeout),
        };
        let Request::WebPage(page) = request else {
            return Ok((request, rest, deadline));
        };
        pages += 1;
        let keep = page.keep_alive && pages < MAX_PAGE_REQUESTS_PER_CONNECTION;
        if !crate::web::page::serve(stream, &page, keep, shared.https).await {
            return Err(Outcome::WebPage);
        }
        buffered = rest;
        deadline = Instant::now() + shared.config.setup_timeout;
    }
}

/// `RDG_OUT_DATA` with `Upgrade: websocket`: answers the upgrade, and the
/// tunnel's packets travel in its frames.
async fn websocket(
    mut stream: BoxIo,
    rest: Vec<u8>,
    key: &str,
    (deadline, idle): (Instant, Duration),
    report: &mut Report,
) -> Result<Link, Outcome> {
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    let step = "the WebSocket upgrade";
    let upgrade = within(
        idle,
        deadline,
        step,
        report,
        stream.write_all(response.as_bytes()),
    );
    if let Err(e) = upgrade.await? {
        report.detail = Some(e.to_string());
        return Err(Outcome::BadRequest);
    }
    let config = Some(websocket_config());
    let ws = WebSocketStream::from_partially_read(stream, rest, Role::Server, config).await;
    Ok(Link::Ws(Box::new(ws)))
}

/// Legacy `RDG_OUT_DATA`: waits (bounded) for its `RDG_IN_DATA`, and the
/// pair is the tunnel's link.
async fn out_channel<P>(
    mut stream: BoxIo,
    connection_id: &str,
    deadline: Instant,
    shared: &Shared<P>,
    source: &SourceGuard,
    report: &mut Report,
) -> Result<Link, Outcome> {
    let (pairing, idle) = (&shared.pairing, shared.config.bounds.handshake_timeout);
    let (tx, rx) = oneshot::channel();
    let number = match pairing.register(connection_id, source.key(), tx, &shared.config) {
        Ok(number) => number,
        Err(why) => {
            answer_status(&mut stream, "503 Service Unavailable").await;
            report.detail = Some(why.into());
            return Err(Outcome::OutChannelLimit);
        }
    };
    // 200 and a seed of 10 random bytes, no length (MS-TSGU 3.3.5.1; what
    // FreeRDP 2 reads), then packets unframed.
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
    pairing.cancel(connection_id, number);
    let half = match paired? {
        Ok(half) => half,
        Err(e) => {
            report.detail = Some(e);
            return Err(Outcome::BadRequest);
        }
    };
    Ok(Link::Legacy {
        out: stream,
        input: half.stream,
        body: BodyReader::new(half.body),
        buf: half.rest,
        _in_source: half.source,
    })
}
