//! The run's record: every operation a client sent, with when it was sent
//! and when its answer came (by the test's clock, relative to the start of
//! the run), which replica it went to, and its outcome; and every step of
//! the nemesis (a fault injected, healed, the cluster recovered). The
//! checker reads nothing else but this and the database.

use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Who sent an operation: a load client, or the nemesis's own probes
/// (connects through each replica to see that the cluster recovered).
pub const PROBE_CLIENT: u32 = u32::MAX;

/// What was asked.
#[derive(Clone, Debug)]
pub enum Req {
    Connect {
        pool: String,
        /// As sent (sometimes in other case: users compare without it).
        user: String,
    },
    Logoff {
        pool: String,
        user: String,
        session: String,
    },
    Heartbeat {
        pool: String,
        host: String,
    },
    Drain {
        pool: String,
        host: String,
        allow_new_session: bool,
    },
}

impl Req {
    pub fn name(&self) -> &'static str {
        match self {
            Req::Connect { .. } => "connect",
            Req::Logoff { .. } => "logoff",
            Req::Heartbeat { .. } => "heartbeat",
            Req::Drain { .. } => "drain",
        }
    }
}

/// What came back.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// A 2xx answer; for a connect, where the user was sent.
    Ok(Option<Placed>),
    /// An answer that says the request changed nothing: 4xx, and the 503s
    /// of the engine's own refusals (`NoSessionHostAvailable`,
    /// `SessionHostUnavailable`).
    Failed { status: u16, code: String },
    /// Anything else: a timeout, a connection error, another 5xx
    /// (`LeaderLost`, `LeaderUnavailable` after a forwarded request timed
    /// out, `StoreUnavailable` after a commit whose answer was lost…). The
    /// request may or may not have taken effect.
    Unknown(String),
}

#[derive(Clone, Debug)]
pub struct Placed {
    pub session: String,
    pub host: String,
    pub reconnect: bool,
}

impl Outcome {
    /// Whether the request may have taken effect.
    pub fn may_have_happened(&self) -> bool {
        !matches!(self, Outcome::Failed { .. })
    }
}

#[derive(Clone, Debug)]
pub struct Op {
    /// Its place in the history (the order answers were recorded).
    pub index: usize,
    pub client: u32,
    /// The replica it was sent to, and which start of that replica.
    pub replica: usize,
    pub incarnation: u32,
    pub start: Duration,
    pub end: Duration,
    pub req: Req,
    pub outcome: Outcome,
}

impl Op {
    /// The connect's placement, when it was acknowledged.
    pub fn placed(&self) -> Option<&Placed> {
        match (&self.req, &self.outcome) {
            (Req::Connect { .. }, Outcome::Ok(Some(p))) => Some(p),
            _ => None,
        }
    }
}

/// Seconds with milliseconds, as the history prints times.
pub struct Secs(pub Duration);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:8.3}s", self.0.as_secs_f64())
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who = if self.client == PROBE_CLIENT {
            "probe".to_string()
        } else {
            format!("c{}", self.client)
        };
        write!(
            f,
            "#{:<6} [{} → {}] {who:>5} → r{}#{} ",
            self.index,
            Secs(self.start),
            Secs(self.end),
            self.replica,
            self.incarnation
        )?;
        match &self.req {
            Req::Connect { pool, user } => write!(f, "connect {pool} {user}")?,
            Req::Logoff {
                pool,
                user,
                session,
            } => write!(f, "logoff {pool} {user} session {session}")?,
            Req::Heartbeat { pool, host } => write!(f, "heartbeat {pool}/{host}")?,
            Req::Drain {
                pool,
                host,
                allow_new_session,
            } => write!(f, "drain {pool}/{host} allowNewSession={allow_new_session}")?,
        }
        match &self.outcome {
            Outcome::Ok(Some(p)) => write!(
                f,
                " = ok: session {} on {}{}",
                p.session,
                p.host,
                if p.reconnect { " (reconnect)" } else { "" }
            ),
            Outcome::Ok(None) => write!(f, " = ok"),
            Outcome::Failed { status, code } => write!(f, " = failed: {status} {code}"),
            Outcome::Unknown(why) => write!(f, " = unknown: {why}"),
        }
    }
}

/// A step of the nemesis, as the history records it.
#[derive(Clone, Debug)]
pub struct Event {
    pub at: Duration,
    /// The fault step it belongs to (0 for the start-up).
    pub step: usize,
    pub what: String,
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "        [{}] nemesis step {}: {}",
            Secs(self.at),
            self.step,
            self.what
        )
    }
}

/// The whole record, shared by the clients and the nemesis.
pub struct History {
    t0: Instant,
    ops: Mutex<Vec<Op>>,
    events: Mutex<Vec<Event>>,
}

impl History {
    pub fn new() -> History {
        History {
            t0: Instant::now(),
            ops: Mutex::new(Vec::new()),
            events: Mutex::new(Vec::new()),
        }
    }

    /// Time since the start of the run.
    pub fn now(&self) -> Duration {
        self.t0.elapsed()
    }

    pub fn record(&self, mut op: Op) {
        let mut ops = self.ops.lock().unwrap_or_else(|e| e.into_inner());
        op.index = ops.len();
        ops.push(op);
    }

    pub fn event(&self, step: usize, what: impl Into<String>) {
        let event = Event {
            at: self.now(),
            step,
            what: what.into(),
        };
        if std::env::var_os("DESKBROKER_NEMESIS_VERBOSE").is_some() {
            eprintln!("{event}");
        }
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event);
    }

    pub fn ops(&self) -> Vec<Op> {
        self.ops.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// The history as text, operations and nemesis steps merged by time
/// (operations by their start), for the file kept after a run.
pub fn render(ops: &[Op], events: &[Event]) -> String {
    use std::fmt::Write;
    let mut by_start: Vec<&Op> = ops.iter().collect();
    by_start.sort_by_key(|o| (o.start, o.index));
    let mut out = String::new();
    let mut next_event = events.iter().peekable();
    for op in by_start {
        while let Some(e) = next_event.next_if(|e| e.at <= op.start) {
            let _ = writeln!(out, "{e}");
        }
        let _ = writeln!(out, "{op}");
    }
    for e in next_event {
        let _ = writeln!(out, "{e}");
    }
    out
}
