//! Per-source bounds at the RDP front door: what one client address (an IP)
//! may hold and start, so that no single source can fill the front door,
//! keep hosts busy with handshakes that never finish, or fill pools with
//! sessions. Refusals are counted by reason and logged at most once per
//! [`REFUSAL_LOG_INTERVAL`], not once per junk connection.
//!
//! The bounds, all per source IP:
//!
//! | bound | default | what it stops |
//! |---|---|---|
//! | [`MAX_CONNECTIONS_PER_SOURCE`] | 64 | one source holding the front door's connections |
//! | [`MAX_HANDSHAKES_PER_SOURCE`] | 8 | connections no host has answered yet, at once |
//! | [`HANDSHAKES_PER_SOURCE_PER_MINUTE`] | 120 | new connections per minute |
//! | [`NEW_SESSIONS_PER_SOURCE_PER_MINUTE`] | 20 | new sessions placed per minute (reconnects are not counted) |
//! | [`MAX_WAITING_PER_SOURCE`] | 4 | connections held while a host starts for them (rule A8) |
//! | `kdc_proxy::MESSAGES_PER_SOURCE_PER_MINUTE` | 120 | messages sent to the KDC proxy per minute (rule AD3) |
//!
//! and one for the table itself, [`MAX_TRACKED_SOURCES`]. The minute is a
//! fixed window per source, started by its first connection.
//!
//! A source is what [`source_key`] makes of the client's address (rule T4):
//! an IPv4 address, also when it arrives IPv4-mapped (`::ffff:a.b.c.d`) on a
//! dual-stack `[::]` listener, or the /64 network of an IPv6 address. The
//! HTTP API's throttle keys its sources the same way.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Connections one source may have open at once (in handshake or relayed).
pub const MAX_CONNECTIONS_PER_SOURCE: usize = 64;
/// Connections of one source that no host has answered yet, at once.
pub const MAX_HANDSHAKES_PER_SOURCE: usize = 8;
/// Connections one source may open per [`RATE_WINDOW`].
pub const HANDSHAKES_PER_SOURCE_PER_MINUTE: u32 = 120;
/// New sessions (not reconnects) one source may have placed per [`RATE_WINDOW`].
pub const NEW_SESSIONS_PER_SOURCE_PER_MINUTE: u32 = 20;
/// Connections of one source held at once while a session host starts
/// for them (rule A8). Each is also a handshake of its source (no host has
/// answered it), so this stays below [`MAX_HANDSHAKES_PER_SOURCE`]: a
/// source whose users all wait still has handshakes left for others.
pub const MAX_WAITING_PER_SOURCE: usize = 4;
/// The window of the per-minute bounds.
pub const RATE_WINDOW: Duration = Duration::from_secs(60);
/// Sources tracked at once. Idle sources whose window has passed are
/// dropped when the table is full; if none can be, new sources are refused
/// (a flood from that many addresses is refused rather than remembered).
pub const MAX_TRACKED_SOURCES: usize = 100_000;
/// At most one log line about refusals per this interval (with how many
/// were refused since the last); every refusal is counted in metrics.
pub const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// The key under which a client address is counted (rule T4): the IPv4
/// address itself, also for an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`,
/// as every IPv4 client appears on a dual-stack `[::]` listener: without
/// this, masking it to its /64 would make all of IPv4 one source), and the
/// /64 network of any other IPv6 address (one subscriber's usual
/// allocation, so that a single client cannot count as billions of
/// sources).
pub fn source_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(std::net::Ipv6Addr::from(bits))
        }
    }
}

/// The per-source bounds in force; [`Limits::default`] gives the named ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_connections: usize,
    pub max_handshakes: usize,
    pub handshakes_per_minute: u32,
    pub new_sessions_per_minute: u32,
    pub max_waiting: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: MAX_CONNECTIONS_PER_SOURCE,
            max_handshakes: MAX_HANDSHAKES_PER_SOURCE,
            handshakes_per_minute: HANDSHAKES_PER_SOURCE_PER_MINUTE,
            new_sessions_per_minute: NEW_SESSIONS_PER_SOURCE_PER_MINUTE,
            max_waiting: MAX_WAITING_PER_SOURCE,
        }
    }
}

/// Why a source was refused, as the `reason` label of
/// `deskbroker_rdp_refusals_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceRefusal {
    Connections,
    Handshakes,
    HandshakeRate,
    SessionRate,
    TableFull,
    Waiting,
    KdcMessageRate,
}

impl SourceRefusal {
    pub fn reason(self) -> &'static str {
        match self {
            SourceRefusal::Connections => "source_connections",
            SourceRefusal::Handshakes => "source_handshakes",
            SourceRefusal::HandshakeRate => "source_handshake_rate",
            SourceRefusal::SessionRate => "source_session_rate",
            SourceRefusal::TableFull => "source_table_full",
            SourceRefusal::Waiting => "source_waiting",
            SourceRefusal::KdcMessageRate => "source_kdc_message_rate",
        }
    }
}

#[derive(Debug)]
struct Entry {
    connections: usize,
    handshakes: usize,
    window_start: Instant,
    handshakes_in_window: u32,
    sessions_in_window: u32,
    kdc_messages_in_window: u32,
    waiting: usize,
}

impl Entry {
    fn roll(&mut self, now: Instant) {
        if now.duration_since(self.window_start) >= RATE_WINDOW {
            self.window_start = now;
            self.handshakes_in_window = 0;
            self.sessions_in_window = 0;
            self.kdc_messages_in_window = 0;
        }
    }
}

/// Every source's counts, behind one mutex held for a few comparisons.
#[derive(Debug)]
pub struct Sources {
    limits: Limits,
    table: Mutex<HashMap<IpAddr, Entry>>,
}

impl Sources {
    pub fn new(limits: Limits) -> Arc<Sources> {
        Arc::new(Sources {
            limits,
            table: Mutex::new(HashMap::new()),
        })
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Entry>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits one new connection from `ip` (counted under its
    /// [`source_key`]), or says which bound it hits. The guard keeps it
    /// counted until it is dropped.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<SourceGuard, SourceRefusal> {
        let ip = source_key(ip);
        let now = Instant::now();
        let mut table = self.table();
        if !table.contains_key(&ip) && table.len() >= MAX_TRACKED_SOURCES {
            table.retain(|_, e| {
                e.connections > 0 || now.duration_since(e.window_start) < RATE_WINDOW
            });
            if table.len() >= MAX_TRACKED_SOURCES {
                return Err(SourceRefusal::TableFull);
            }
        }
        let e = table.entry(ip).or_insert(Entry {
            connections: 0,
            handshakes: 0,
            window_start: now,
            handshakes_in_window: 0,
            sessions_in_window: 0,
            kdc_messages_in_window: 0,
            waiting: 0,
        });
        e.roll(now);
        if e.connections >= self.limits.max_connections {
            return Err(SourceRefusal::Connections);
        }
        if e.handshakes >= self.limits.max_handshakes {
            return Err(SourceRefusal::Handshakes);
        }
        if e.handshakes_in_window >= self.limits.handshakes_per_minute {
            return Err(SourceRefusal::HandshakeRate);
        }
        e.connections += 1;
        e.handshakes += 1;
        e.handshakes_in_window += 1;
        Ok(SourceGuard {
            sources: self.clone(),
            ip,
            handshaking: Arc::new(std::sync::atomic::AtomicBool::new(true)),
        })
    }
}

/// One admitted connection, counted against its source until dropped.
#[derive(Debug)]
pub struct SourceGuard {
    sources: Arc<Sources>,
    ip: IpAddr,
    /// Still counted as a handshake (shared with [`SourceGuard::answer_hook`]).
    handshaking: Arc<std::sync::atomic::AtomicBool>,
}

impl SourceGuard {
    /// The source this connection counts against (its [`source_key`]).
    pub fn key(&self) -> IpAddr {
        self.ip
    }

    /// The host has answered: the connection no longer counts as a handshake.
    pub fn answered(&self) {
        answered(&self.sources, self.ip, &self.handshaking);
    }

    /// [`SourceGuard::answered`] as a function the relay calls the moment
    /// it reads the host's first byte, before passing it on.
    pub fn answer_hook(&self) -> impl FnOnce() + Send + 'static {
        let (sources, ip, handshaking) = (self.sources.clone(), self.ip, self.handshaking.clone());
        move || answered(&sources, ip, &handshaking)
    }

    /// Counts a new session placed for this source, or refuses it when the
    /// source has had its share this minute.
    pub fn new_session(&self) -> Result<(), SourceRefusal> {
        let now = Instant::now();
        let mut table = self.sources.table();
        let Some(e) = table.get_mut(&self.ip) else {
            return Ok(());
        };
        e.roll(now);
        if e.sessions_in_window >= self.sources.limits.new_sessions_per_minute {
            return Err(SourceRefusal::SessionRate);
        }
        e.sessions_in_window += 1;
        Ok(())
    }

    /// Counts a message sent to the KDC proxy (rule AD3) by this source,
    /// or refuses it when the source has sent `per_minute` this minute.
    pub fn kdc_message(&self, per_minute: u32) -> Result<(), SourceRefusal> {
        let now = Instant::now();
        let mut table = self.sources.table();
        let Some(e) = table.get_mut(&self.ip) else {
            return Err(SourceRefusal::KdcMessageRate);
        };
        e.roll(now);
        if e.kdc_messages_in_window >= per_minute {
            return Err(SourceRefusal::KdcMessageRate);
        }
        e.kdc_messages_in_window += 1;
        Ok(())
    }

    /// Counts this connection as held while a host starts for it (rule
    /// A8), or refuses when its source has [`Limits::max_waiting`] held
    /// already. The count lasts as long as the answered [`WaitGuard`].
    pub fn wait(&self) -> Result<WaitGuard, SourceRefusal> {
        let mut table = self.sources.table();
        let Some(e) = table.get_mut(&self.ip) else {
            return Err(SourceRefusal::Waiting);
        };
        if e.waiting >= self.sources.limits.max_waiting {
            return Err(SourceRefusal::Waiting);
        }
        e.waiting += 1;
        Ok(WaitGuard {
            sources: self.sources.clone(),
            ip: self.ip,
        })
    }
}

/// One connection held while a host starts, counted against its source
/// until dropped.
#[derive(Debug)]
pub struct WaitGuard {
    sources: Arc<Sources>,
    ip: IpAddr,
}

impl Drop for WaitGuard {
    fn drop(&mut self) {
        if let Some(e) = self.sources.table().get_mut(&self.ip) {
            e.waiting = e.waiting.saturating_sub(1);
        }
    }
}

fn answered(sources: &Sources, ip: IpAddr, handshaking: &std::sync::atomic::AtomicBool) {
    if handshaking.swap(false, std::sync::atomic::Ordering::Relaxed)
        && let Some(e) = sources.table().get_mut(&ip)
    {
        e.handshakes -= 1;
    }
}

impl Drop for SourceGuard {
    fn drop(&mut self) {
        let handshaking = self
            .handshaking
            .swap(false, std::sync::atomic::Ordering::Relaxed);
        if let Some(e) = self.sources.table().get_mut(&self.ip) {
            e.connections -= 1;
            if handshaking {
                e.handshakes -= 1;
            }
        }
    }
}

/// Counts a refusal (`deskbroker_rdp_refusals_total{reason}`) and logs at
/// most one line per [`REFUSAL_LOG_INTERVAL`], naming the last refusal and
/// how many there were since the previous line.
pub fn refused(reason: &'static str, peer: std::net::SocketAddr, detail: &str) {
    metrics::counter!("deskbroker_rdp_refusals_total", "reason" => reason).increment(1);
    static LAST: OnceLock<Mutex<(Option<Instant>, u64)>> = OnceLock::new();
    let mut last = LAST
        .get_or_init(|| Mutex::new((None, 0)))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    last.1 += 1;
    let now = Instant::now();
    if last
        .0
        .is_none_or(|at| now.duration_since(at) >= REFUSAL_LOG_INTERVAL)
    {
        let count = std::mem::take(&mut last.1);
        last.0 = Some(now);
        drop(last);
        tracing::warn!(
            %peer,
            reason,
            detail,
            refused_since_last_line = count,
            "rdp front door refused connections (one line per {}s at most; \
             all are counted in deskbroker_rdp_refusals_total)",
            REFUSAL_LOG_INTERVAL.as_secs()
        );
    } else {
        tracing::debug!(%peer, reason, detail, "rdp front door refused a connection");
    }
}

/// One connection a door's accept loop admitted: its stream, its peer, its
/// slot among the door's connections and its count against its source.
pub(crate) struct Admitted {
    pub stream: tokio::net::TcpStream,
    pub peer: std::net::SocketAddr,
    pub permit: tokio::sync::OwnedSemaphorePermit,
    pub source: SourceGuard,
}

/// A door's accept loop, up to one admitted connection: waits for a free
/// slot of `slots`, then for a connection whose source is within its
/// bounds. A connection over its source's bounds is closed at once, before
/// any byte is read (`counter`'s `outcome="source_limit"`, and
/// [`refused`]); a failed accept is retried after
/// [`crate::front_door::ACCEPT_ERROR_BACKOFF`]. `None` once `shutdown` has
/// resolved. Shared by the RDP front door and the RD Gateway (`door` names
/// which in the logs).
pub(crate) async fn accept<F: std::future::Future<Output = ()>>(
    listener: &tokio::net::TcpListener,
    slots: &Arc<tokio::sync::Semaphore>,
    sources: &Arc<Sources>,
    mut shutdown: std::pin::Pin<&mut F>,
    counter: &'static str,
    door: &'static str,
) -> Option<Admitted> {
    loop {
        let permit = tokio::select! {
            biased;
            () = &mut shutdown => return None,
            p = slots.clone().acquire_owned() => p.ok()?, // never closed
        };
        let (stream, peer) = tokio::select! {
            biased;
            () = &mut shutdown => return None,
            r = listener.accept() => match r {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "{door}: accept failed");
                    tokio::time::sleep(crate::front_door::ACCEPT_ERROR_BACKOFF).await;
                    continue;
                }
            },
        };
        match sources.admit(peer.ip()) {
            Ok(source) => {
                return Some(Admitted {
                    stream,
                    peer,
                    permit,
                    source,
                });
            }
            Err(refusal) => {
                // Counted before the close, so whoever sees the close sees
                // the count too.
                metrics::counter!(counter, "outcome" => "source_limit").increment(1);
                refused(refusal.reason(), peer, &format!("{door}: per-source bound"));
                drop(stream);
            }
        }
    }
}
