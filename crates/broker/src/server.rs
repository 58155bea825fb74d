//! The HTTP server loop: accepts connections from any
//! [`axum::serve::Listener`] (the connection-capped [`crate::listener`], or
//! a TLS listener over it) and serves each with hyper's HTTP/1 connection
//! under named bounds, so that idle or slow clients cannot hold the API or
//! its shutdown. `axum::serve` has no header-read
//! timeout and waits for every connection at shutdown, without bound.
//!
//! - [`HEADER_READ_TIMEOUT`]: a connection that has not sent a whole request
//!   head this long after it opened, or after its previous answer (an idle
//!   keep-alive connection), is closed.
//! - [`SHUTDOWN_GRACE`]: once shutdown starts, idle connections close at
//!   once, in-flight requests get this long, then every connection is
//!   dropped.
//! - The request's own time is `api::REQUEST_TIMEOUT` (a layer of the router).
//! - A request head hyper itself refuses (a request line over its 64 KiB
//!   URI limit: 414; a head over [`MAX_HEAD_BYTES`]: 431) is answered in
//!   the contract's error shape too (`Shaped`), not with hyper's empty body.
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
            let conn = builder.serve_connection(TokioIo::new(Shaped::new(io)), service);
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

/// A connection's stream, with hyper's own refusals of a request head
/// rewritten in the contract's shape. hyper answers a request line or head
/// too long to parse itself, before any service runs, with a bodiless
/// `414 URI Too Long` or `431 Request Header Fields Too Large` and closes
/// the connection; there is no hook for its body. Such an answer is
/// recognised by its exact shape as hyper writes it (the status line,
/// `connection: close`, `content-length: 0`) and replaced by the same
/// status with the JSON error body every other refusal has. Nothing else
/// is touched: the API's own answers always carry a body and a
/// `content-type`.
struct Shaped<IO> {
    io: IO,
    /// A replacement being written: its bytes, how many are out, and how
    /// many bytes of hyper's own answer it stands for.
    replacing: Option<(Vec<u8>, usize, usize)>,
}

impl<IO> Shaped<IO> {
    fn new(io: IO) -> Shaped<IO> {
        Shaped {
            io,
            replacing: None,
        }
    }
}

/// The contract's answer in place of hyper's bodiless refusal `head`, if
/// it is one.
fn shaped_refusal(head: &[u8]) -> Option<Vec<u8>> {
    let (code, message) = if head.starts_with(b"HTTP/1.1 414 ") {
        (
            api::ErrorCode::UriTooLong,
            "the request line is longer than the broker reads",
        )
    } else if head.starts_with(b"HTTP/1.1 431 ") {
        (
            api::ErrorCode::HeadersTooLarge,
            "the request head is larger than the broker reads (64 KiB)",
        )
    } else {
        return None;
    };
    let text = std::str::from_utf8(head).ok()?;
    if !text.ends_with("\r\n\r\n")
        || !text.contains("\r\ncontent-length: 0\r\n")
        || text.contains("content-type")
    {
        return None;
    }
    let body = serde_json::to_string(&api::ErrorBody {
        error: api::ErrorDetail {
            code,
            message: message.to_string(),
        },
    })
    .ok()?;
    let status_line = text.split("\r\n").next()?;
    Some(
        format!(
            "{status_line}\r\nconnection: close\r\ncontent-type: application/json\r\n\
             cache-control: no-store\r\nx-content-type-options: nosniff\r\n\
             content-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

impl<IO: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Shaped<IO> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Shaped<IO> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        use std::task::Poll;
        let this = &mut *self;
        if this.replacing.is_none()
            && let Some(replacement) = shaped_refusal(buf)
        {
            this.replacing = Some((replacement, 0, buf.len()));
        }
        let Some((bytes, out, stands_for)) = &mut this.replacing else {
            return std::pin::Pin::new(&mut this.io).poll_write(cx, buf);
        };
        while *out < bytes.len() {
            match std::pin::Pin::new(&mut this.io).poll_write(cx, &bytes[*out..]) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => *out += n,
                other => return other,
            }
        }
        let claimed = *stands_for;
        this.replacing = None;
        Poll::Ready(Ok(claimed))
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_bodiless_refusals_are_reshaped() {
        let hyper = b"HTTP/1.1 414 URI Too Long\r\nconnection: close\r\ncontent-length: 0\r\ndate: Sun, 06 Dec 2026 00:50:50 GMT\r\n\r\n";
        let shaped = String::from_utf8(shaped_refusal(hyper).expect("reshaped")).unwrap();
        assert!(
            shaped.starts_with("HTTP/1.1 414 URI Too Long\r\n"),
            "{shaped}"
        );
        assert!(shaped.ends_with(r#"{"error":{"code":"UriTooLong","message":"the request line is longer than the broker reads"}}"#), "{shaped}");
        let hyper = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
        assert!(shaped_refusal(hyper).is_some());
        // The API's own 414 has a body and a type: left alone.
        let ours = b"HTTP/1.1 414 URI Too Long\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n";
        assert!(shaped_refusal(ours).is_none());
        assert!(shaped_refusal(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").is_none());
    }
}
