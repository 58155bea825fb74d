//! A TCP listener with bounds on open connections: past
//! [`MAX_CONNECTIONS`], new connections wait in the kernel's accept backlog
//! until one closes, instead of exhausting file descriptors; past
//! [`MAX_CONNECTIONS_PER_SOURCE`] from one IP address, a new connection from
//! that address is closed at once, so that one client cannot take every
//! slot from the others.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use crate::sync::MutexExt;
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
    /// holds [`MAX_CONNECTIONS_PER_SOURCE`]. A source is keyed as at every
    /// door (T4): an IPv4 address, also IPv4-mapped, or an IPv6 /64.
    fn admit(&self, ip: IpAddr) -> Option<SourceSlot> {
        let ip = gateway::sources::source_key(ip);
        let mut open = self.per_source.lock_or_recover();
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
        let mut open = self.per_source.lock_or_recover();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_addresses_of_one_ipv6_64_share_one_sources_connections() {
        let listener = LimitedListener::new(TcpListener::bind("127.0.0.1:0").await.expect("bind"));
        let in_64 = |i: usize| {
            IpAddr::from(std::net::Ipv6Addr::from(
                0x2001_0db8_0001_0002_0000_0000_0000_0000u128 | i as u128,
            ))
        };
        let held: Vec<SourceSlot> = (1..=MAX_CONNECTIONS_PER_SOURCE)
            .map(|i| listener.admit(in_64(i)).expect("within the bound"))
            .collect();
        assert!(listener.admit(in_64(0xffff)).is_none(), "the /64 is full");
        let next_64: IpAddr = "2001:db8:1:3::1".parse().expect("address");
        assert!(listener.admit(next_64).is_some(), "another /64 has its own");
        // An IPv4 client arriving mapped is its IPv4 address.
        let v4: IpAddr = "192.0.2.7".parse().expect("address");
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().expect("address");
        let _v4: Vec<SourceSlot> = (0..MAX_CONNECTIONS_PER_SOURCE)
            .map(|_| listener.admit(mapped).expect("within the bound"))
            .collect();
        assert!(listener.admit(v4).is_none(), "the same source");
        drop(held);
    }
}
