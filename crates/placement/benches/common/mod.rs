//! What the placement benchmarks share: the pools they measure (sizes,
//! pre-filled load, settings per algorithm), the window of users that come
//! and go, and one measured step. `placement.rs` says why they are shaped
//! this way.

use std::hint::black_box;

use placement::{
    ConnectRequest, HostMetrics, HostPoolType, HostSpec, LoadBalancerType, LoadIndexSettings,
    LogonStormSettings, Pool, PoolConfig, Session, SessionState,
};

pub const LIMIT: u32 = 16;
pub const NOW_MS: i64 = 1_700_000_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alg {
    Breadth,
    Classic,
    Depth,
    Load,
}

impl Alg {
    pub const ALL: [Alg; 4] = [Alg::Breadth, Alg::Classic, Alg::Depth, Alg::Load];

    pub fn name(self) -> &'static str {
        match self {
            Alg::Breadth => "BreadthFirst-randomized",
            Alg::Classic => "BreadthFirst-classic",
            Alg::Depth => "DepthFirst",
            Alg::Load => "LoadIndex",
        }
    }

    pub fn lb(self) -> (LoadBalancerType, bool) {
        match self {
            Alg::Breadth => (LoadBalancerType::BreadthFirst, true),
            Alg::Classic => (LoadBalancerType::BreadthFirst, false),
            Alg::Depth => (LoadBalancerType::DepthFirst, true),
            Alg::Load => (LoadBalancerType::LoadIndex, true),
        }
    }
}

/// The pre-filled load of host `i`: 0..=8 sessions, every 50th host at the limit.
pub fn sessions_of(i: usize) -> u32 {
    if i % 50 == 49 {
        LIMIT
    } else {
        ((i as u64).wrapping_mul(2_654_435_761) >> 7) as u32 % 9
    }
}

pub fn drained(i: usize) -> bool {
    i % 100 == 37
}

/// `LoadIndex` pools: the CPU percentage host `i` reports, `None` for the
/// hosts that never send a heartbeat (index -1).
pub fn cpu_of(i: usize) -> Option<f64> {
    if i % 97 == 3 {
        return None;
    }
    let h = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40;
    Some((h % 10_001) as f64 / 100.0)
}

/// `LoadIndex` pools: every 25th host lacks the standard capability `blast`.
pub fn standard(i: usize) -> bool {
    i % 25 != 11
}

pub fn load_index_settings() -> LoadIndexSettings {
    LoadIndexSettings {
        cpu_threshold: 100,
        load_index_threshold: 95,
        ..LoadIndexSettings::default()
    }
}

pub fn config(alg: Alg) -> PoolConfig {
    let (lb, randomized) = alg.lb();
    let mut c = PoolConfig::new("bench", HostPoolType::Pooled, lb);
    c.breadth_first_randomized = randomized;
    c.max_session_limit = LIMIT;
    if alg == Alg::Load {
        c.standard_capabilities = vec!["rdp".into(), "blast".into()];
        c.load_index_settings = load_index_settings();
        c.logon_storm_settings = LogonStormSettings::default();
    }
    c
}

pub fn spec_of(i: usize, alg: Alg) -> HostSpec {
    let mut spec = HostSpec::new(
        &format!("host{i}"),
        &format!("10.{}.{}.{}:3389", i >> 16, (i >> 8) & 255, i & 255),
    );
    spec.allow_new_session = !drained(i);
    if alg == Alg::Load && standard(i) {
        spec.capabilities.push("blast".into());
    }
    spec
}

/// The engine's pool with `n` hosts and their sessions, built the way a
/// restart builds it (`Pool::restore`).
pub fn engine_pool(n: usize, alg: Alg) -> Pool {
    let mut p = Pool::new(config(alg), 1, NOW_MS);
    for i in 0..n {
        p.upsert_host(spec_of(i, alg), NOW_MS).expect("valid host");
        if alg == Alg::Load
            && let Some(cpu) = cpu_of(i)
        {
            let metrics = HostMetrics {
                cpu_percent: Some(cpu),
                ..HostMetrics::default()
            };
            p.heartbeat(&format!("host{i}"), metrics, NOW_MS)
                .expect("valid heartbeat");
        }
    }
    let mut sessions = Vec::new();
    for (i, h) in p.hosts().enumerate() {
        for k in 0..sessions_of(i) {
            sessions.push(Session {
                id: format!("s{i}-{k}"),
                host: h.spec.name.clone(),
                user: format!("u{i}-{k}@contoso.com"),
                state: SessionState::Active,
                create_time_ms: NOW_MS,
                state_since_ms: NOW_MS,
                awaiting_logon: false,
            });
        }
    }
    Pool::restore(
        config(alg),
        p.counters(),
        p.hosts().cloned().collect(),
        sessions,
        NOW_MS,
    )
}

/// A fast, fixed sequence of random values.
pub fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// The users that come and go: a window of `n / 10` (at least 10), each
/// with its session id, made once so that the measured loop formats
/// nothing.
pub struct Window {
    pub users: Vec<String>,
    pub ids: Vec<String>,
    /// Whether user `i` has a session now.
    pub live: Vec<bool>,
    pub next: usize,
}

impl Window {
    pub fn new(hosts: usize) -> Window {
        let size = (hosts / 10).max(10);
        Window {
            users: (0..size)
                .map(|i| format!("bench-user-{i}@contoso.com"))
                .collect(),
            ids: (0..size).map(|i| format!("bench-session-{i}")).collect(),
            live: vec![false; size],
            next: 0,
        }
    }

    /// The next user: the one whose session is the oldest. Answers its
    /// index and whether it has a session to log off first.
    pub fn advance(&mut self) -> (usize, bool) {
        let i = self.next % self.users.len();
        self.next += 1;
        let had = std::mem::replace(&mut self.live[i], true);
        (i, had)
    }
}

/// One iteration on the engine: the oldest session of the window logs
/// off, its user connects again. Answers the host placed on.
pub fn engine_step(pool: &mut Pool, w: &mut Window, random: u64) -> String {
    let (i, had) = w.advance();
    if had {
        pool.logoff(&w.ids[i]).expect("session exists");
    }
    let req = ConnectRequest {
        user: &w.users[i],
        ..ConnectRequest::default()
    };
    let p = pool
        .connect(&req, NOW_MS, random, &w.ids[i])
        .expect("a host fits");
    // The change log would grow without bound otherwise; the broker
    // drains it after every operation too.
    black_box(pool.take_changes());
    p.host
}
