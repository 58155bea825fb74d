//! The HTTPS front: one listener (`--gateway-listen`) for every door that
//! speaks HTTP. It accepts, does TLS, reads each request's head, and hands
//! the connection to the endpoint the head asks for; the endpoints never
//! see a socket before that, and the front never reads past a head.
//!
//! One connection, start to end:
//!
//! ```text
//! accept (≤ bounds.max_connections, per-source bounds: sources.rs, T4)
//!   ─► TLS (each step ≤ bounds.handshake_timeout, all ≤ setup_timeout)
//!   ─► request head (≤ MAX_HEAD_BYTES, 32 fields, each read ≤ bounds.handshake_timeout)
//!   ─► routed by method, path and upgrade (route.rs):
//!        RDG_OUT_DATA / RDG_IN_DATA /remoteDesktopGateway/ ─► the RD Gateway (crate::rd_gateway)
//!        GET /web/rdp, Upgrade: websocket                  ─► the browser's door (crate::web)
//!        GET or HEAD of /web and its files, no upgrade     ─► the page (crate::web::page)
//!        POST /KdcProxy, when a realm is configured        ─► the KDC proxy (crate::kdc_proxy)
//!        anything else                                     ─► 400, closed
//!   ─► the endpoint answers; one that keeps the connection (the page's
//!      files) hands it back, and its next request is read and routed the same way
//! ```
//!
//! The routes are one table (`route.rs`): an endpoint is one line of it (the
//! methods, the path, whether it is a WebSocket upgrade) and a handler that
//! takes the connection with its head read. A head the front cannot read
//! (malformed, over its bound, a body whose length could be read two ways)
//! and one no route takes are answered `400 Bad Request` with no body and
//! the connection closed; a client that sends nothing is closed unanswered.
//! Every connection is counted in `deskbroker_rdg_tunnels_total` by its
//! outcome and logged as an `rd gateway connection` (a browser's RDCleanPath
//! connection is logged and counted by its door instead).
//!
//! What the endpoints on the listener share lives here too (`Front`): the
//! placer, the settings (one `door::Bounds`), the table of the sessions the
//! listener's connections own (R4), and the bound on connections held while
//! a host starts (A8).

mod head;
mod route;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::door::{Live, Outcome, Report};
use crate::placer::Placer;
use crate::rd_gateway::{GatewayConfig, Pairing};
use crate::sources::{self, SourceGuard, Sources};

pub(crate) use head::read_head;
pub use head::{Framing, Head, HeadError, parse_head};
pub(crate) use route::{Exchange, Kept, Route, Served};
pub use route::{Path, Upgrade};

/// The longest HTTP request head read (FreeRDP's is about 350 bytes).
pub const MAX_HEAD_BYTES: usize = 8 * 1024;
/// The requests one connection serves before it is closed, when its
/// endpoint keeps it open (a load of the browser's page is six).
pub const MAX_REQUESTS_PER_CONNECTION: usize = 32;

/// A connection's byte stream, TLS or not.
pub trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}
pub(crate) type BoxIo = Box<dyn Io>;

/// Serves the HTTPS front on `listener` until `shutdown` resolves, each
/// connection on its own task: the RD Gateway, the browser's door and its
/// page. `tls`: the HTTPS certificate (clients require one; `None` serves
/// plain HTTP, for tests behind a TLS proxy). `config` bounds the front and
/// every endpoint on it.
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
    let front = Arc::new(Front::new(placer, tls.is_some(), config));
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
        let front = front.clone();
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
                    let deadline = started + front.config.setup_timeout;
                    let idle = front.config.bounds.handshake_timeout;
                    let step = "the TLS handshake";
                    match within(idle, deadline, step, &mut report, tls.accept(stream)).await {
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
                Ok(stream) => connection(stream, peer, started, &front, source, &mut report).await,
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

/// What every connection of one [`serve`] shares: what its endpoints
/// work with, their own state, and the table of routes.
pub(crate) struct Front<P> {
    pub placer: Arc<P>,
    /// Whether the listener speaks TLS itself (the page's answers then
    /// carry `Strict-Transport-Security`).
    pub https: bool,
    pub config: GatewayConfig,
    /// The sessions the connections of this listener own, the browsers'
    /// and the RD Gateway's (rule R4).
    pub live: Live,
    /// Rule A8: the connections held while a host starts, listener-wide
    /// (the RD Gateway's channels and the browsers' alike).
    pub waiting: Arc<Semaphore>,
    /// The RD Gateway's legacy OUT channels waiting for their IN channel.
    pub pairing: Pairing,
    /// The browser's door (`GET /web/rdp`).
    pub web: crate::web::Web,
    /// The KDC proxy (`POST /KdcProxy`).
    pub kdc: crate::kdc_proxy::KdcProxy,
    /// The workspace feed's key for its login tokens.
    pub feed_login: crate::feed::login::LoginKey,
    routes: Vec<Route<P>>,
}

impl<P: Placer> Front<P> {
    fn new(placer: Arc<P>, https: bool, config: GatewayConfig) -> Front<P> {
        Front {
            placer,
            https,
            live: Live::default(),
            waiting: Arc::new(Semaphore::new(config.bounds.max_waiting_connections)),
            pairing: Pairing::default(),
            web: crate::web::Web::new(crate::web::WebConfig::of(&config)),
            kdc: crate::kdc_proxy::KdcProxy::new(config.kdc_proxy.clone()),
            feed_login: crate::feed::login::LoginKey::random(),
            routes: route::routes(&config),
            config,
        }
    }
}

/// One connection of the listener: each request's head read and routed to
/// its endpoint, for as long as the endpoint keeps the connection. A
/// request's setup (its head, and what its endpoint does before it
/// relays) is bounded by the setup timeout from the connection's start,
/// or from the answer to the request before it.
async fn connection<P: Placer>(
    mut stream: BoxIo,
    peer: SocketAddr,
    started: Instant,
    front: &Front<P>,
    mut source: SourceGuard,
    report: &mut Report,
) -> Outcome {
    let idle = front.config.bounds.handshake_timeout;
    let mut deadline = started + front.config.setup_timeout;
    let mut buffered = Vec::new();
    let mut requests = 0;
    // The outcome of the request before, on a connection kept open.
    let mut kept = None;
    loop {
        let read = read_head(&mut stream, std::mem::take(&mut buffered), idle);
        let (head, rest) = match tokio::time::timeout_at(deadline.into(), read).await {
            // A kept connection the client leaves, or lets idle.
            Ok(Err(HeadError::Idle(_) | HeadError::Closed)) | Err(_) if kept.is_some() => {
                return kept.unwrap_or(Outcome::Timeout);
            }
            Ok(Ok(read)) => read,
            Ok(Err(e @ HeadError::Idle(_))) => {
                report.detail = Some(e.to_string());
                return Outcome::Idle;
            }
            Ok(Err(e)) => return refuse(&mut stream, e, report).await,
            Err(_) => return Outcome::Timeout,
        };
        let Some(route) = route::find(&front.routes, &head) else {
            let e = head.not_served();
            return refuse(&mut stream, e, report).await;
        };
        tracing::trace!(%peer, endpoint = route.name, "{} {}", head.method, head.path());
        requests += 1;
        let exchange = Exchange {
            front,
            head,
            stream,
            rest,
            source,
            peer,
            deadline,
            may_keep_alive: requests < MAX_REQUESTS_PER_CONNECTION,
            report: &mut *report,
        };
        match (route.handler)(exchange).await {
            Served::Closed(outcome) => return outcome,
            Served::Kept(next) => {
                (stream, buffered, source) = (next.stream, next.rest, next.source);
                kept = Some(next.outcome);
                deadline = Instant::now() + front.config.setup_timeout;
            }
        }
    }
}

/// Answers a head that is refused `400 Bad Request`, and closes.
pub(crate) async fn refuse(stream: &mut BoxIo, e: HeadError, report: &mut Report) -> Outcome {
    answer_status(stream, "400 Bad Request").await;
    report.detail = Some(e.to_string());
    Outcome::BadRequest
}

/// Answers a request that is not served with `status` and no body, and
/// closes.
pub(crate) async fn answer_status(stream: &mut BoxIo, status: &str) {
    let _ = stream
        .write_all(
            format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await;
    let _ = stream.shutdown().await;
}

/// The answer that upgrades a connection to a WebSocket whose request
/// carried `key` (its `Sec-WebSocket-Key`).
pub(crate) fn switching_protocols(key: &str) -> String {
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    format!(
        "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Accept: {accept}\r\n\r\n"
    )
}

/// One step of a connection before its endpoint relays: `step`'s result,
/// unless the client leaves it for `idle` ([`Outcome::Idle`]) or the
/// setup's `deadline` passes first ([`Outcome::Timeout`]).
pub(crate) async fn within<T>(
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
