//! The relay of a browser's session (rule R4): the WebSocket's binary
//! messages to the host's TLS stream as plaintext, the host's plaintext
//! back as binary messages, in whatever pieces either side sends, until
//! either side closes or the session is idle past its bound. The host's
//! TLS is closed with close_notify.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncBufRead, AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::{Bytes, Message};

use crate::door::Report;
use crate::front_door::{LOGON_EVIDENCE_CLIENT_BYTES, LOGON_EVIDENCE_HOST_BYTES};

/// The most plaintext one message to the browser carries: what the host
/// has sent and the broker has at hand, gathered up to one TLS record's
/// worth (16 KiB) less the frame's 4-byte header, so that a busy
/// session's messages each fill one whole record of the browser's TLS.
/// tungstenite keeps its write buffer at the largest frame it has
/// written, so this is also what a session keeps for it after a burst.
pub(super) const MAX_MESSAGE_OUT_BYTES: usize = 16 * 1024 - 4;
/// A first piece at least this long (a TLS record's plaintext is at most
/// 16 KiB) is taken as the start of a burst: room for a whole message is
/// made at once. A shorter one gets room for itself alone, until a second
/// piece shows a burst.
const BURST_BYTES: usize = 8 * 1024;

/// Relays until either side closes (or fails, or idles past its bound):
/// `idle` once the session has shown evidence of a logon (S9),
/// `idle_without_logon` until then. Counts what was carried in `report`.
///
/// An idle session holds no relay buffer: the host's plaintext is copied
/// once, from its TLS, into the message that carries it to the browser,
/// made when the plaintext is there.
pub(super) async fn relay<S>(
    ws: WebSocketStream<S>,
    host: TlsStream<TcpStream>,
    (idle, idle_without_logon): (Duration, Duration),
    report: &mut Report,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (mut ws_out, mut ws_in) = ws.split();
    let host = Mutex::new(host);
    let mut host_out = Shared(&host);
    let carried = Carried::new();
    let to_host = async {
        let counted =
            metrics::counter!("deskbroker_web_bytes_total", "direction" => "client_to_host");
        let mut host_out = Shared(&host);
        while let Some(message) = ws_in.next().await {
            let bytes = match message.map_err(io::Error::other)? {
                Message::Binary(b) => b,
                Message::Close(_) => break,
                Message::Text(_) => {
                    return Err(io::Error::other("a text message; the session is binary"));
                }
                // Pings are answered by the library.
                _ => continue,
            };
            carried.saw(&carried.client, bytes.len());
            counted.increment(bytes.len() as u64);
            host_out.write_all(&bytes).await?;
            host_out.flush().await?;
        }
        Ok(())
    };
    let to_client = async {
        let counted =
            metrics::counter!("deskbroker_web_bytes_total", "direction" => "host_to_client");
        loop {
            let (message, end) = poll_fn(|cx| gather(&host, cx)).await;
            if !message.is_empty() {
                carried.saw(&carried.host, message.len());
                counted.increment(message.len() as u64);
                ws_out
                    .send(Message::Binary(Bytes::from(message)))
                    .await
                    .map_err(io::Error::other)?;
            }
            match end {
                None => {}
                Some(Ok(())) => return Ok::<(), io::Error>(()),
                Some(Err(e)) => return Err(e),
            }
        }
    };
    let ended = tokio::select! {
        r = to_host => r.map_err(|e| format!("client: {e}")),
        r = to_client => r.map_err(|e| format!("host: {e}")),
        e = carried.idle(idle, idle_without_logon) => Err(e),
    };
    // close_notify to the host, a Close frame to the browser.
    let _ = host_out.shutdown().await;
    let _ = ws_out.close().await;
    report.client_to_host_bytes = carried.client.load(Ordering::Relaxed);
    report.host_to_client_bytes = carried.host.load(Ordering::Relaxed);
    if let Err(e) = ended {
        report.detail = Some(format!("relay ended: {e}"));
    }
}

/// The host's plaintext at hand, up to [`MAX_MESSAGE_OUT_BYTES`], taken
/// from its TLS stream's own buffer; pending while there is none. With it,
/// how the host's side ended, when it did: `Ok` at its close, the error
/// otherwise (after the plaintext before it, which is returned first).
fn gather(
    host: &Mutex<TlsStream<TcpStream>>,
    cx: &mut Context<'_>,
) -> Poll<(Vec<u8>, Option<io::Result<()>>)> {
    let mut host = lock(host);
    let mut host = Pin::new(&mut *host);
    let mut message = Vec::new();
    loop {
        let end = match host.as_mut().poll_fill_buf(cx) {
            Poll::Ready(Ok([])) => Some(Ok(())),
            Poll::Ready(Ok(piece)) => {
                let room = MAX_MESSAGE_OUT_BYTES - message.len();
                let take = piece.len().min(room);
                if message.capacity() - message.len() < take {
                    // A short first piece gets room for itself; a long
                    // one, or a second, room for a whole message at once
                    // (a short first piece is copied once, not grown into).
                    let room = if message.is_empty() && take < BURST_BYTES {
                        take
                    } else {
                        MAX_MESSAGE_OUT_BYTES - message.len()
                    };
                    message.reserve_exact(room);
                }
                message.extend_from_slice(&piece[..take]);
                host.as_mut().consume(take);
                if message.len() < MAX_MESSAGE_OUT_BYTES {
                    continue;
                }
                None
            }
            Poll::Ready(Err(e)) => Some(Err(e)),
            Poll::Pending if message.is_empty() => return Poll::Pending,
            Poll::Pending => None,
        };
        return Poll::Ready((message, end));
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The host's TLS stream as written to by one direction while the other
/// reads it, in the same task: each poll takes the lock for itself alone,
/// so it is never contended.
struct Shared<'a>(&'a Mutex<TlsStream<TcpStream>>);

impl AsyncWrite for Shared<'_> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *lock(self.0)).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *lock(self.0)).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *lock(self.0)).poll_shutdown(cx)
    }
}

/// What a session has carried each way, and when last.
struct Carried {
    started: Instant,
    /// Milliseconds from `started` to the last byte either way.
    last_ms: AtomicU64,
    client: AtomicU64,
    host: AtomicU64,
}

impl Carried {
    fn new() -> Carried {
        Carried {
            started: Instant::now(),
            last_ms: AtomicU64::new(0),
            client: AtomicU64::new(0),
            host: AtomicU64::new(0),
        }
    }

    fn saw(&self, side: &AtomicU64, n: usize) {
        side.fetch_add(n as u64, Ordering::Relaxed);
        let ms = self.started.elapsed().as_millis() as u64;
        self.last_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// Rule S9's evidence of a logon, as at the other doors (the session's
    /// plaintext here: the host's TLS handshake is the broker's own).
    fn logon_seen(&self) -> bool {
        self.host.load(Ordering::Relaxed) >= LOGON_EVIDENCE_HOST_BYTES
            && self.client.load(Ordering::Relaxed) >= LOGON_EVIDENCE_CLIENT_BYTES
    }

    /// Resolves once nothing has been carried either way for the bound in
    /// force; never otherwise.
    async fn idle(&self, idle: Duration, idle_without_logon: Duration) -> String {
        loop {
            let logon = self.logon_seen();
            let limit = if logon { idle } else { idle_without_logon };
            let last = self.started + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let deadline = last + limit;
            if Instant::now() >= deadline {
                let what = if logon {
                    ""
                } else {
                    " without evidence of a logon"
                };
                return format!("nothing either way for {limit:?}{what}");
            }
            tokio::time::sleep_until(deadline.into()).await;
        }
    }
}
