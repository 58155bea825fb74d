//! A TCP relay the nemesis can break: every replica reaches PostgreSQL
//! through one, and the other replicas reach its HTTP API (its advertised
//! URL) through another. The relay keeps its listening address for the
//! whole run, so a replica restarted on a new port keeps its advertised
//! URL: only the relay's upstream changes.
//!
//! What it can do to the traffic it carries:
//! - [`Relay::cut`] closes every relayed connection at once (a network
//!   blip, a load balancer's reset); new connections pass.
//! - [`Relay::partition`] closes them and drops new ones until healed.
//! - [`Relay::close`] stops listening, as a host where nothing listens
//!   on that port (the replica behind it was killed): connections are
//!   refused until [`Relay::reopen`].
//! - [`Mode::Delay`] holds every chunk of bytes for a while before passing
//!   it on (a slow link); [`Mode::Stall`] accepts connections and passes
//!   nothing until healed (a link that silently stops: the bytes arrive
//!   late, all at once, when it is healed). [`Relay::stall_open`] stalls
//!   only the connections open at that moment, and passes new ones: a
//!   half-dead link (a NAT or firewall that forgot its flows), after which
//!   a process that reconnects gets through while one that waits on an
//!   old connection hears nothing.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};

/// Connections one relay carries at once; beyond it new ones are dropped
/// (a replica keeps a handful to the database and a pool to the leader).
pub const MAX_RELAYED_CONNECTIONS: usize = 512;
/// How long the relay waits to reach its upstream before it drops the
/// connection it accepted.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes read at once from either side.
const CHUNK_BYTES: usize = 16 * 1024;

/// What the relay does to the bytes it passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Pass,
    /// Each chunk waits this long before it is passed on.
    Delay(Duration),
    /// Nothing is passed until the mode changes.
    Stall,
}

struct Inner {
    upstream: Mutex<Option<String>>,
    /// New connections are dropped while false.
    accepting: AtomicBool,
    mode: watch::Sender<Mode>,
    /// Bumped to close every relayed connection.
    cut: watch::Sender<u64>,
    /// The next connection's number.
    next_id: AtomicU64,
    /// Connections numbered below this pass nothing (0: none).
    stall_below: watch::Sender<u64>,
    slots: Arc<Semaphore>,
}

/// A relay listening on a loopback port of its own (see the module's
/// docs). Dropping it stops it and closes what it relays.
pub struct Relay {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
    /// The task accepting on the relay's port; None while it is closed.
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// How often, and how long, [`Relay::reopen`] tries to listen on its port
/// again (the listener it dropped may take a moment to close).
const REBIND_PAUSE: Duration = Duration::from_millis(50);
const REBIND_TRIES: u32 = 200;

impl Relay {
    /// A relay to `upstream` (`host:port`; `None`: not known yet, every
    /// connection is dropped until [`Relay::reopen`]).
    pub async fn start(upstream: Option<String>) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a relay");
        let addr = listener.local_addr().expect("relay address");
        let inner = Arc::new(Inner {
            upstream: Mutex::new(upstream),
            accepting: AtomicBool::new(true),
            mode: watch::Sender::new(Mode::Pass),
            cut: watch::Sender::new(0),
            next_id: AtomicU64::new(1),
            stall_below: watch::Sender::new(0),
            slots: Arc::new(Semaphore::new(MAX_RELAYED_CONNECTIONS)),
        });
        let task = tokio::spawn(accept_loop(listener, inner.clone()));
        Relay {
            addr,
            inner,
            task: Mutex::new(Some(task)),
        }
    }

    /// Stops listening (a connection is then refused, as by a host where
    /// nothing listens on that port: the process behind it is gone) and
    /// closes every relayed connection.
    pub fn close(&self) {
        if let Some(task) = self.task.lock().unwrap_or_else(|e| e.into_inner()).take() {
            task.abort();
        }
        self.cut();
    }

    /// Relays to `upstream` from now on, listening again on the relay's
    /// port if it was closed.
    pub async fn reopen(&self, upstream: &str) -> Result<(), String> {
        *self
            .inner
            .upstream
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(upstream.to_string());
        if self
            .task
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
        {
            return Ok(());
        }
        let mut last = String::new();
        for _ in 0..REBIND_TRIES {
            match TcpListener::bind(self.addr).await {
                Ok(listener) => {
                    let task = tokio::spawn(accept_loop(listener, self.inner.clone()));
                    *self.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
                    return Ok(());
                }
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(REBIND_PAUSE).await;
        }
        Err(format!("cannot listen on {} again: {last}", self.addr))
    }

    /// Closes every relayed connection; new ones pass.
    pub fn cut(&self) {
        self.inner.cut.send_modify(|n| *n += 1);
    }

    /// Closes every relayed connection and drops new ones until healed.
    pub fn partition(&self) {
        self.inner.accepting.store(false, Ordering::SeqCst);
        self.cut();
    }

    pub fn set_mode(&self, mode: Mode) {
        self.inner.mode.send_replace(mode);
    }

    /// Stalls the connections open now; new ones pass.
    pub fn stall_open(&self) {
        let next = self.inner.next_id.load(Ordering::SeqCst);
        self.inner.stall_below.send_replace(next);
    }

    /// Back to passing everything at once.
    pub fn heal(&self) {
        self.inner.accepting.store(true, Ordering::SeqCst);
        self.inner.mode.send_replace(Mode::Pass);
        self.inner.stall_below.send_replace(0);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.close();
    }
}

async fn accept_loop(listener: TcpListener, inner: Arc<Inner>) {
    loop {
        let Ok((inbound, _)) = listener.accept().await else {
            continue;
        };
        if !inner.accepting.load(Ordering::SeqCst) {
            continue; // dropped: closed at once
        }
        let Ok(permit) = inner.slots.clone().try_acquire_owned() else {
            continue; // over the bound
        };
        let upstream = inner
            .upstream
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let Some(upstream) = upstream else { continue };
        let id = inner.next_id.fetch_add(1, Ordering::SeqCst);
        let gate = Gate {
            id,
            mode: inner.mode.subscribe(),
            stall_below: inner.stall_below.subscribe(),
        };
        let mut cut = inner.cut.subscribe();
        tokio::spawn(async move {
            let _permit = permit;
            let connected =
                tokio::time::timeout(UPSTREAM_CONNECT_TIMEOUT, TcpStream::connect(&upstream)).await;
            let Ok(Ok(outbound)) = connected else {
                return; // the upstream is down: the inbound side is closed
            };
            let _ = inbound.set_nodelay(true);
            let _ = outbound.set_nodelay(true);
            let (in_read, in_write) = inbound.into_split();
            let (out_read, out_write) = outbound.into_split();
            tokio::select! {
                _ = pump(in_read, out_write, gate.clone()) => {}
                _ = pump(out_read, in_write, gate) => {}
                _ = cut.changed() => {}
            }
        });
    }
}

/// What one connection's bytes wait for: the relay's mode, and whether
/// it is one of the connections stalled by [`Relay::stall_open`].
#[derive(Clone)]
struct Gate {
    id: u64,
    mode: watch::Receiver<Mode>,
    stall_below: watch::Receiver<u64>,
}

impl Gate {
    /// Waits until a chunk may pass; false once the relay is gone.
    async fn pass(&mut self) -> bool {
        loop {
            let mode = *self.mode.borrow_and_update();
            let stalled = self.id < *self.stall_below.borrow_and_update();
            match mode {
                Mode::Pass if !stalled => return true,
                Mode::Delay(d) if !stalled => {
                    tokio::time::sleep(d).await;
                    return true;
                }
                _ => {}
            }
            let changed = tokio::select! {
                r = self.mode.changed() => r.is_ok(),
                r = self.stall_below.changed() => r.is_ok(),
            };
            if !changed {
                return false;
            }
        }
    }
}

/// Copies `from` to `to` chunk by chunk, as the connection's gate says,
/// until either side closes or fails.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut gate: Gate,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
        let n = from.read(&mut buf).await?;
        // A close waits like data: over a stalled link the other side
        // never hears of it (a server keeps the session, and its locks).
        if !gate.pass().await {
            return Ok(());
        }
        if n == 0 {
            return to.shutdown().await;
        }
        to.write_all(&buf[..n]).await?;
    }
}
