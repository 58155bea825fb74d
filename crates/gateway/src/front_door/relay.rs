//! A placed connection's relay (rule R4): the first PDU forwarded, then
//! both ways copied and counted until either side
//! closes or the connection stays idle past its bound.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use super::{Config, LOGON_EVIDENCE_CLIENT_BYTES, LOGON_EVIDENCE_HOST_BYTES, RELAY_BUFFER_BYTES};
use crate::door::{Outcome, Report};
use crate::sources::SourceGuard;

/// Rule R4: forwards the first PDU byte for byte; the host that cannot
/// take it counts as unreachable.
pub(super) async fn forward(
    host: &mut TcpStream,
    first_pdu: &[u8],
    report: &mut Report,
) -> Result<(), Outcome> {
    if let Err(e) = host.write_all(first_pdu).await {
        report.detail = Some(format!("forwarding the first PDU: {e}"));
        return Err(Outcome::HostUnreachable);
    }
    report.client_to_host_bytes = first_pdu.len() as u64;
    metrics::counter!("deskbroker_rdp_bytes_total", "direction" => "client_to_host")
        .increment(first_pdu.len() as u64);
    Ok(())
}

/// Rule R4: copies both ways, after the forwarded first PDU, until either
/// side closes (or fails): RDP has no use for a half-open connection, and
/// the session is Disconnected as soon as one side is gone. (The session
/// is marked Active meanwhile, by the caller: the host's first answer does
/// not wait for that commit, one durable write fewer before the client's
/// first byte: `deskbroker-devbench rdp`, see `docs/benchmarks.md`.)
pub(super) async fn relay(
    client: TcpStream,
    host: TcpStream,
    config: &Config,
    source: &SourceGuard,
    report: &mut Report,
) -> Outcome {
    let (client_read, mut client_write) = client.into_split();
    let (host_read, mut host_write) = host.into_split();
    let activity = Arc::new(Activity::new());
    let mut from_client = Counted::new(client_read, "client_to_host");
    from_client.activity = Some((activity.clone(), Side::Client));
    let mut from_host = Counted::new(host_read, "host_to_client");
    from_host.activity = Some((activity.clone(), Side::Host));
    let (answered_tx, answered_rx) = tokio::sync::oneshot::channel();
    let hook = source.answer_hook();
    from_host.first_read = Some(Box::new(move || {
        hook();
        let _ = answered_tx.send(());
    }));
    // Until the host answers, the connection is a handshake of its source's
    // (bounded, released by the hook the moment the host's first byte is
    // read), and it is given up after `host_answer_timeout`.
    let host_answer = async {
        match tokio::time::timeout(config.bounds.host_answer_timeout, answered_rx).await {
            Ok(Ok(())) => std::future::pending::<io::Result<()>>().await,
            // The host closed without a byte: its pump ends the relay.
            Ok(Err(_)) => std::future::pending::<io::Result<()>>().await,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the host did not answer within {:?}",
                    config.bounds.host_answer_timeout
                ),
            )),
        }
    };
    let idle = activity.idle(
        config.bounds.relay_idle_timeout,
        config.bounds.idle_timeout_without_logon,
    );
    let ended = tokio::select! {
        r = pump(&mut from_client, &mut host_write) => r,
        r = pump(&mut from_host, &mut client_write) => r,
        r = host_answer => r,
        r = idle => r,
    };
    let unanswered = matches!(&ended, Err(e) if e.kind() == io::ErrorKind::TimedOut);
    if let Err(e) = ended {
        report.detail = Some(format!("relay ended: {e}"));
    }
    let _ = host_write.shutdown().await;
    let _ = client_write.shutdown().await;
    report.client_to_host_bytes += from_client.read_bytes;
    report.host_to_client_bytes = from_host.read_bytes;
    if unanswered {
        return Outcome::HostUnreachable;
    }
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

/// Which side of a relayed connection bytes came from.
#[derive(Clone, Copy, Debug)]
enum Side {
    Client,
    Host,
}

/// What a relayed connection has carried, and when last, shared by its two
/// directions and its idle watch (R4).
struct Activity {
    started: Instant,
    /// Milliseconds from `started` to the last byte read either way.
    last_ms: AtomicU64,
    /// Bytes from the client past its first PDU.
    client_bytes: AtomicU64,
    host_bytes: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            started: Instant::now(),
            last_ms: AtomicU64::new(0),
            client_bytes: AtomicU64::new(0),
            host_bytes: AtomicU64::new(0),
        }
    }

    fn saw(&self, side: Side, n: u64) {
        let bytes = match side {
            Side::Client => &self.client_bytes,
            Side::Host => &self.host_bytes,
        };
        bytes.fetch_add(n, Ordering::Relaxed);
        let ms = self.started.elapsed().as_millis() as u64;
        self.last_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// Rule S9's evidence of a logon so far (as [`logon_evidence`]).
    fn logon_seen(&self) -> bool {
        self.host_bytes.load(Ordering::Relaxed) >= LOGON_EVIDENCE_HOST_BYTES
            && self.client_bytes.load(Ordering::Relaxed) >= LOGON_EVIDENCE_CLIENT_BYTES
    }

    /// Resolves, with an error that ends the relay, once the connection has
    /// carried no byte either way for `idle` (or `idle_without_logon`,
    /// until it shows evidence of a logon); never otherwise.
    async fn idle(&self, idle: Duration, idle_without_logon: Duration) -> io::Result<()> {
        loop {
            let limit = if self.logon_seen() {
                idle
            } else {
                idle_without_logon
            };
            let last = self.started + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let deadline = last + limit;
            if Instant::now() >= deadline {
                let what = if self.logon_seen() {
                    ""
                } else {
                    " without evidence of a logon"
                };
                return Err(io::Error::other(format!(
                    "no byte either way for {limit:?}{what}"
                )));
            }
            tokio::time::sleep_until(deadline.into()).await;
        }
    }
}

/// A stream that counts what is read from it, live in metrics and in total
/// for the connection's log line (copy_bidirectional's own counts are lost
/// when a side resets).
struct Counted<S> {
    inner: S,
    read_bytes: u64,
    counter: metrics::Counter,
    /// Called when the first byte is read (the host has answered).
    first_read: Option<Box<dyn FnOnce() + Send>>,
    /// Where reads are told, for the relay's idle watch.
    activity: Option<(Arc<Activity>, Side)>,
}

impl<S> Counted<S> {
    fn new(inner: S, direction: &'static str) -> Counted<S> {
        Counted {
            inner,
            read_bytes: 0,
            counter: metrics::counter!("deskbroker_rdp_bytes_total", "direction" => direction),
            first_read: None,
            activity: None,
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
            if n > 0
                && let Some((activity, side)) = &self.activity
            {
                activity.saw(*side, n);
            }
            if n > 0
                && let Some(hook) = self.first_read.take()
            {
                hook();
            }
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
