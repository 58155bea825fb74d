//! The relay of a browser's session (rule R4): the WebSocket's binary
//! messages to the host's TLS stream as plaintext, the host's plaintext
//! back as binary messages, in whatever pieces either side sends, until
//! either side closes or the session is idle past its bound. The host's
//! TLS is closed with close_notify.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::{Bytes, Message};

use crate::door::Report;
use crate::front_door::{
    LOGON_EVIDENCE_CLIENT_BYTES, LOGON_EVIDENCE_HOST_BYTES, RELAY_BUFFER_BYTES,
};

/// Relays until either side closes (or fails, or idles past its bound):
/// `idle` once the session has shown evidence of a logon (S9),
/// `idle_without_logon` until then. Counts what was carried in `report`.
pub(super) async fn relay<S>(
    ws: WebSocketStream<S>,
    host: TlsStream<TcpStream>,
    (idle, idle_without_logon): (Duration, Duration),
    report: &mut Report,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (mut ws_out, mut ws_in) = ws.split();
    let (mut host_in, mut host_out) = tokio::io::split(host);
    let carried = Carried::new();
    let to_host = async {
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
            metrics::counter!("deskbroker_web_bytes_total", "direction" => "client_to_host")
                .increment(bytes.len() as u64);
            host_out.write_all(&bytes).await?;
            host_out.flush().await?;
        }
        Ok(())
    };
    let to_client = async {
        let mut buffer = Vec::with_capacity(RELAY_BUFFER_BYTES);
        loop {
            buffer.clear();
            let n = host_in.read_buf(&mut buffer).await?;
            if n == 0 {
                return Ok::<(), io::Error>(());
            }
            carried.saw(&carried.host, n);
            metrics::counter!("deskbroker_web_bytes_total", "direction" => "host_to_client")
                .increment(n as u64);
            ws_out
                .send(Message::Binary(Bytes::copy_from_slice(&buffer)))
                .await
                .map_err(io::Error::other)?;
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
