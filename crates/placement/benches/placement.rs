//! Criterion benchmarks of one steady-state placement, per algorithm and
//! pool size, each against a naive reference measured in the same run
//! (conventions: "report ratios against a baseline measured in the same
//! run, never a lone absolute time").
//!
//! **One iteration is a connect of a user with no session followed by the
//! logoff of the session it made**, so the pool is back in the same state
//! after every iteration and the measurement is a steady state, not a pool
//! filling up. The random value changes every iteration (B1).
//!
//! The pools are pre-filled with a realistic load: 0 to 8 sessions per host
//! (4 on average) under a limit of 16, every 50th host at the limit and
//! every 100th host drained, so the filters have something to do.
//!
//! The naive reference is what a straightforward broker does: keep hosts in
//! a `Vec` and, on every connect, filter all of them (S2), sort the eligible
//! ones by (sessions, query order) and pick with the same
//! `pipeline::pick`; it keeps sessions and users in hash maps like the engine.
//!
//! `cargo bench -p placement` runs everything in about two minutes on two
//! cores; `cargo bench -p placement -- DepthFirst/engine` runs a subset.

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use placement::{
    ConnectRequest, HostPoolType, HostSpec, LoadBalancerType, Pool, PoolConfig, Session,
    SessionState, pipeline,
};

const SIZES: [usize; 4] = [100, 1_000, 10_000, 100_000];
const LIMIT: u32 = 16;
const NOW_MS: i64 = 1_700_000_000_000;
const USER: &str = "bench-user@contoso.com";
const SESSION_ID: &str = "bench-session";

#[derive(Clone, Copy, Debug)]
enum Alg {
    Breadth,
    Classic,
    Depth,
}

impl Alg {
    const ALL: [Alg; 3] = [Alg::Breadth, Alg::Classic, Alg::Depth];

    fn name(self) -> &'static str {
        match self {
            Alg::Breadth => "BreadthFirst-randomized",
            Alg::Classic => "BreadthFirst-classic",
            Alg::Depth => "DepthFirst",
        }
    }

    fn lb(self) -> (LoadBalancerType, bool) {
        match self {
            Alg::Breadth => (LoadBalancerType::BreadthFirst, true),
            Alg::Classic => (LoadBalancerType::BreadthFirst, false),
            Alg::Depth => (LoadBalancerType::DepthFirst, true),
        }
    }
}

/// The pre-filled load of host `i`: 0..=8 sessions, every 50th host at the limit.
fn sessions_of(i: usize) -> u32 {
    if i % 50 == 49 {
        LIMIT
    } else {
        ((i as u64).wrapping_mul(2_654_435_761) >> 7) as u32 % 9
    }
}

fn drained(i: usize) -> bool {
    i % 100 == 37
}

fn config(alg: Alg) -> PoolConfig {
    let (lb, randomized) = alg.lb();
    let mut c = PoolConfig::new("bench", HostPoolType::Pooled, lb);
    c.breadth_first_randomized = randomized;
    c.max_session_limit = LIMIT;
    c
}

/// The engine's pool with `n` hosts and their sessions, built the way a
/// restart builds it (`Pool::restore`).
fn engine_pool(n: usize, alg: Alg) -> Pool {
    let mut p = Pool::new(config(alg), 1, NOW_MS);
    for i in 0..n {
        let mut spec = HostSpec::new(
            &format!("host{i}"),
            &format!("10.{}.{}.{}:3389", i >> 16, (i >> 8) & 255, i & 255),
        );
        spec.allow_new_session = !drained(i);
        p.upsert_host(spec, NOW_MS).expect("valid host");
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

struct NaiveHost {
    name: String,
    allow_new_session: bool,
    /// Always true here (no host sends heartbeats), but checked like S2 says.
    available: bool,
    sessions: u32,
}

/// The baseline: filter and sort every host on every connect.
struct Naive {
    hosts: Vec<NaiveHost>,
    /// Session id → (host index, user key).
    sessions: HashMap<String, (usize, String)>,
    /// User key → session id.
    users: HashMap<String, String>,
    lb: LoadBalancerType,
    randomized: bool,
    limit: u32,
}

impl Naive {
    fn new(n: usize, alg: Alg) -> Naive {
        let (lb, randomized) = alg.lb();
        let mut naive = Naive {
            hosts: Vec::with_capacity(n),
            sessions: HashMap::new(),
            users: HashMap::new(),
            lb,
            randomized,
            limit: LIMIT,
        };
        for i in 0..n {
            naive.hosts.push(NaiveHost {
                name: format!("host{i}"),
                allow_new_session: !drained(i),
                available: true,
                sessions: sessions_of(i),
            });
            for k in 0..sessions_of(i) {
                let user = format!("u{i}-{k}@contoso.com");
                naive.users.insert(user.clone(), format!("s{i}-{k}"));
                naive.sessions.insert(format!("s{i}-{k}"), (i, user));
            }
        }
        naive
    }

    /// The host index chosen, or `None` when nothing fits.
    fn connect(&mut self, user: &str, random: u64, id: &str) -> Option<usize> {
        let key = user.to_ascii_lowercase();
        if let Some(existing) = self.users.get(&key) {
            return Some(self.sessions[existing].0);
        }
        let limit = self.limit;
        let mut ranked: Vec<(u32, u64)> = self
            .hosts
            .iter()
            .enumerate()
            .filter(|(_, h)| h.allow_new_session && h.available && h.sessions < limit)
            .map(|(i, h)| (h.sessions, i as u64))
            .collect();
        ranked.sort_unstable();
        let i = pipeline::pick(self.lb, self.randomized, ranked.as_slice(), random)? as usize;
        self.hosts[i].sessions += 1;
        self.sessions.insert(id.to_string(), (i, key.clone()));
        self.users.insert(key, id.to_string());
        Some(i)
    }

    fn logoff(&mut self, id: &str) {
        let (i, key) = self.sessions.remove(id).expect("session exists");
        self.users.remove(&key);
        self.hosts[i].sessions -= 1;
    }
}

/// A fast, fixed sequence of random values.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Before measuring: the engine and the baseline must agree, or the
/// comparison means nothing.
fn assert_same_choices(pool: &mut Pool, naive: &mut Naive) {
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    for _ in 0..50 {
        let r = next_random(&mut rng);
        let req = ConnectRequest {
            user: USER,
            ..ConnectRequest::default()
        };
        let p = pool
            .connect(&req, NOW_MS, r, SESSION_ID)
            .expect("a host fits");
        let i = naive.connect(USER, r, SESSION_ID).expect("a host fits");
        assert_eq!(p.host, naive.hosts[i].name, "engine and baseline disagree");
        pool.logoff(SESSION_ID).expect("session exists");
        naive.logoff(SESSION_ID);
    }
    pool.take_changes();
}

fn connect_logoff(c: &mut Criterion) {
    for alg in Alg::ALL {
        let mut group = c.benchmark_group(format!("connect+logoff/{}", alg.name()));
        for n in SIZES {
            let mut pool = engine_pool(n, alg);
            let mut naive = Naive::new(n, alg);
            assert_same_choices(&mut pool, &mut naive);
            // Small pools are fast and steady; the naive reference at
            // 100,000 hosts takes milliseconds per call.
            let (samples, measure) = if n >= 100_000 {
                (10, 2)
            } else if n >= 10_000 {
                (20, 2)
            } else {
                (50, 1)
            };
            group.sample_size(samples);
            group.warm_up_time(Duration::from_millis(500));
            group.measurement_time(Duration::from_secs(measure));

            group.bench_with_input(BenchmarkId::new("engine", n), &n, |b, _| {
                let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
                let req = ConnectRequest {
                    user: USER,
                    ..ConnectRequest::default()
                };
                b.iter(|| {
                    let r = next_random(&mut rng);
                    let p = pool
                        .connect(&req, NOW_MS, r, SESSION_ID)
                        .expect("a host fits");
                    black_box(&p);
                    pool.logoff(SESSION_ID).expect("session exists");
                    // The change log would grow without bound otherwise;
                    // the broker drains it after every operation too.
                    black_box(pool.take_changes());
                });
            });
            group.bench_with_input(BenchmarkId::new("naive", n), &n, |b, _| {
                let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
                b.iter(|| {
                    let r = next_random(&mut rng);
                    black_box(naive.connect(USER, r, SESSION_ID).expect("a host fits"));
                    naive.logoff(SESSION_ID);
                });
            });
        }
        group.finish();
    }
}

criterion_group!(benches, connect_logoff);
criterion_main!(benches);
