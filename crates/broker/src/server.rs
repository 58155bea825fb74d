//! The HTTP server loop: accepts connections from any
//! [`axum::serve::Listener`] (the connection-capped [`crate::listener`], or
//! a TLS listener over it) and serves each with hyper's HTTP/1 connection
//! under named bounds, so that idle or slow clients cannot hold the API or
//! its shutdown (issue #13, finding 4). `axum::serve` has no header-read
//! timeout and waits for every connection at shutdown, without bound.
//!
//! - [`HEADER_READ_TIMEOUT`]: a connection that has not sent a whole request
//!   head this long after it opened, or after its previous answer (an idle
//!   keep-alive connection), is closed.
//! - [`SHUTDOWN_GRACE`]: once shutdown starts, idle connections close at
//!   once, in-flight requests get this long, then every connection is
//!   dropped.
//! - The request's own time is `api::REQUEST_TIMEOUT` (a layer of the router).
//!
//! HTTP/1.1 only: every client of the API (`api::Client`, the agent, the
//! replicas' forwarding) speaks it, and serving HTTP/2 too would mean
//! sniffing the protocol before any timeout applies.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::task::JoinSet;

/// Longest wait for a request's head (request line and headers), counted
/// from the connection's opening or from its previous answer: the bound on
/// idle keep-alive connections as well as on slow senders.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long in-flight requests may still run once shutdown starts, before
/// their connections are dropped.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Largest request head (request line and headers) read into memory;
/// longer ones are answered 431 by hyper. Paths longer than
/// `api::MAX_URI_BYTES` are refused in the contract's shape before that.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Serves `app` on every connection `listener` accepts until `shutdown`
/// resolves; then stops accepting, lets in-flight requests finish for up to
/// [`SHUTDOWN_GRACE`] and drops whatever is left.
pub async fn serve<L>(
    mut listener: L,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()>
where
    L: axum::serve::Listener<Addr = std::net::SocketAddr>,
{
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        // Forget connections that have closed, so the set stays small.
        while connections.try_join_next().is_some() {}
        let (io, addr) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let app = app.clone();
        let mut stop = stop_rx.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |mut req: hyper::Request<_>| {
                // Who is calling, for the per-source limits (api/throttle.rs).
                req.extensions_mut()
                    .insert(axum::extract::ConnectInfo(addr));
                let mut app = app.clone();
                async move {
                    let answer = tower::Service::call(&mut app, req).await;
                    Ok::<_, Infallible>(answer.unwrap_or_else(|never| match never {}))
                }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_buf_size(MAX_HEAD_BYTES);
            let conn = builder.serve_connection(TokioIo::new(io), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = stop.wait_for(|s| *s) => {}
            }
            // Shutdown: an idle connection closes now; one in a request
            // closes after its answer.
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let open = connections.len();
    if open > 0 {
        tracing::info!(
            connections = open,
            "stopped accepting; waiting for in-flight requests"
        );
    }
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            connections = connections.len(),
            grace_seconds = SHUTDOWN_GRACE.as_secs(),
            "requests still running after the shutdown grace: dropping their connections"
        );
        connections.shutdown().await;
    }
    Ok(())
}
