//! A TCP listener with bounds on open connections: past
//! [`MAX_CONNECTIONS`], new connections wait in the kernel's accept backlog
//! until one closes, instead of exhausting file descriptors; past
//! [`MAX_CONNECTIONS_PER_SOURCE`] from one IP address, a new connection from
//! that address is closed at once, so that one client cannot take every
//! slot from the others (issue #13, finding 4).

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Most client connections served at once.
pub const MAX_CONNECTIONS: usize = 4_096;

/// Most connections open at once from one source IP address: a quarter of
/// [`MAX_CONNECTIONS`], so that one address cannot take them all, while a
/// portal, a stand-alone front door or a NAT'd site of agents behind one
/// address keeps room for hundreds of requests at once (idle connections
/// close after the server's `HEADER_READ_TIMEOUT`).
pub const MAX_CONNECTIONS_PER_SOURCE: usize = 1_024;

pub struct LimitedListener {
    inner: TcpListener,
    permits: Arc<Semaphore>,
    per_source: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl LimitedListener {
    pub fn new(inner: TcpListener) -> LimitedListener {
        LimitedListener {
            inner,
            permits: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            per_source: Arc::default(),
        }
    }

    /// Counts a connection from `ip`, or `None` when that source already
    /// holds [`MAX_CONNECTIONS_PER_SOURCE`].
    fn admit(&self, ip: IpAddr) -> Option<SourceSlot> {
        let mut open = self.per_source.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(ip).or_insert(0);
        if *n >= MAX_CONNECTIONS_PER_SOURCE {
            return None;
        }
        *n += 1;
        Some(SourceSlot {
            ip,
            per_source: self.per_source.clone(),
        })
    }
}

/// One connection counted against its source address; uncounted on drop.
struct SourceSlot {
    ip: IpAddr,
    per_source: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut open = self.per_source.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// A connection that gives its permits back when it closes.
pub struct LimitedStream {
    stream: TcpStream,
    _permit: OwnedSemaphorePermit,
    _source: SourceSlot,
}

impl axum::serve::Listener for LimitedListener {
    type Io = LimitedStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let permit = self
                .permits
                .clone()
                .acquire_owned()
                .await
                .expect("the semaphore is never closed");
            let (stream, addr) = axum::serve::Listener::accept(&mut self.inner).await;
            let Some(source) = self.admit(addr.ip()) else {
                // Dropped: closed at once, and its global permit freed.
                metrics::counter!("deskbroker_http_connections_refused_total", "reason" => "per_source")
                    .increment(1);
                continue;
            };
            // Small JSON answers: send them now, not after a delayed ACK.
            let _ = stream.set_nodelay(true);
            return (
                LimitedStream {
                    stream,
                    _permit: permit,
                    _source: source,
                },
                addr,
            );
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

impl AsyncRead for LimitedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for LimitedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
