//! Criterion benchmarks of one steady-state placement, per algorithm and
//! pool size, each against a naive reference measured in the same run
//! (conventions: "report ratios against a baseline measured in the same
//! run, never a lone absolute time").
//!
//! **One iteration is the logoff of the oldest of a window of sessions and
//! the connect of its user again** (a user with no session, so a new
//! placement): the pool holds its pre-filled load plus the window's
//! sessions, the same after every iteration, and each placement lands
//! where the algorithm sends it in a pool whose users come and go. The
//! window is a tenth of the hosts (10 to 10,000 users). The random value
//! changes every iteration (B1).
//!
//! Why a window and not one user connecting and logging off: with one user,
//! classic BreadthFirst (B3) and DepthFirst (D1) pick the *same* host every
//! iteration (the logoff puts it back where it was), so their host, its
//! strings and its index entries never leave the cache, while randomized
//! BreadthFirst (B1) lands on a random host every time: the comparison
//! measured the cache, not the algorithms. With a window, classic
//! BreadthFirst walks the least-loaded hosts in query order as sessions
//! accumulate and drain, as it does in a broker. The one-user shape is
//! still measured (`engine-one-user`) to show that difference.
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
//! `LoadIndex` (H1–H6) pools also have varied Server Load Indexes: every
//! host reports a CPU percentage (0 to 100 %, two decimals) in a heartbeat
//! and the index is `max(cpu, sessions / limit)`; every 97th host never
//! reports (-1), every 25th lacks the standard capability `blast` (bucket
//! 2), and hosts at index 95 or more refuse logons (H6). The logon storm
//! settings are the defaults (20/20/4). Its naive reference recomputes
//! every host's index on every connect (`load_index::compute`), filters
//! (S2, H6), forms the three buckets by scanning every host, sorts bucket 1's
//! candidates to find the raised threshold, and walks the hosts in query
//! order from the last one served (round robin).
//!
//! `host_at` is rule R3's lookup of a host by address, the index against
//! a scan.
//!
//! `cargo bench -p placement --bench placement` runs everything in about
//! four minutes on two cores; `cargo bench -p placement --bench placement
//! -- DepthFirst/engine` runs a subset, `-- LoadIndex` the `LoadIndex` part,
//! and builds only the pools of the benchmarks it selects. The ratio of
//! two algorithms is better read from `benches/interleaved.rs`, which
//! measures them in alternating turns (its header says why).

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use placement::{
    ConnectRequest, HostMetrics, LoadBalancerType, LoadIndexSettings, LogonStormSettings, Pool,
    load_index, pipeline,
};

mod common;

use common::*;

/// The shipped binary's allocator (`crates/deskbroker/src/main.rs`), so the
/// engine and the naive reference are measured on what the broker and the
/// simulator run on.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SIZES: [usize; 4] = [100, 1_000, 10_000, 100_000];
const USER: &str = "bench-user@contoso.com";
const SESSION_ID: &str = "bench-session";

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

/// The `LoadIndex` baseline: every connect recomputes every host's index,
/// filters, forms the buckets by scanning all hosts and sorting bucket 1's
/// candidates, then walks the hosts in query order from the last served.
struct NaiveLoad {
    hosts: Vec<NaiveLoadHost>,
    sessions: HashMap<String, (usize, String)>,
    users: HashMap<String, String>,
    settings: LoadIndexSettings,
    storm: LogonStormSettings,
    limit: u32,
    /// Position of the host served last, `None` before the first.
    last_served: Option<usize>,
}

struct NaiveLoadHost {
    name: String,
    allow_new_session: bool,
    available: bool,
    standard: bool,
    sessions: u32,
    connecting: u32,
    metrics: Option<HostMetrics>,
}

impl NaiveLoad {
    fn new(n: usize) -> NaiveLoad {
        let mut naive = NaiveLoad {
            hosts: Vec::with_capacity(n),
            sessions: HashMap::new(),
            users: HashMap::new(),
            settings: load_index_settings(),
            storm: LogonStormSettings::default(),
            limit: LIMIT,
            last_served: None,
        };
        for i in 0..n {
            naive.hosts.push(NaiveLoadHost {
                name: format!("host{i}"),
                allow_new_session: !drained(i),
                available: true,
                standard: standard(i),
                sessions: sessions_of(i),
                connecting: 0,
                metrics: cpu_of(i).map(|cpu| HostMetrics {
                    cpu_percent: Some(cpu),
                    ..HostMetrics::default()
                }),
            });
            for k in 0..sessions_of(i) {
                let user = format!("u{i}-{k}@contoso.com");
                naive.users.insert(user.clone(), format!("s{i}-{k}"));
                naive.sessions.insert(format!("s{i}-{k}"), (i, user));
            }
        }
        naive
    }

    fn connect(&mut self, user: &str, id: &str) -> Option<usize> {
        let key = user.to_ascii_lowercase();
        if let Some(existing) = self.users.get(&key) {
            return Some(self.sessions[existing].0);
        }
        let storm = &self.storm;
        let threshold = match storm.load_index_threshold {
            0 => i32::MAX,
            t => t as i32,
        };
        let connecting_max = storm.connecting_session_threshold;
        let under = |c: u32| connecting_max == 0 || c < connecting_max;
        // Filter (S2, H6) and classify every host: (position, index, connecting).
        let mut first = Vec::new();
        let mut second = Vec::new();
        let mut third = Vec::new();
        for (i, h) in self.hosts.iter().enumerate() {
            if !h.allow_new_session || !h.available || h.sessions >= self.limit {
                continue;
            }
            let index = load_index::compute(
                &self.settings,
                self.limit,
                h.sessions,
                h.metrics.as_ref(),
                false,
            );
            let refuse_index = self.settings.load_index_threshold;
            let refuse_connecting = self.settings.connecting_session_threshold;
            if (refuse_index > 0 && index >= refuse_index as i32)
                || (refuse_connecting > 0 && h.connecting >= refuse_connecting)
            {
                continue;
            }
            let key = (index, h.connecting, i);
            if index >= 0 && under(h.connecting) {
                if h.standard {
                    first.push(key);
                } else if index < threshold {
                    second.push(key);
                } else {
                    third.push(key);
                }
            } else {
                third.push(key);
            }
        }
        // The raise: the minHostsInQueue-th lowest index of bucket 1's candidates.
        let mut by_index: Vec<i32> = first.iter().map(|&(index, _, _)| index).collect();
        by_index.sort_unstable();
        let raised = match by_index.len() {
            0 => threshold,
            n => {
                let k = (storm.min_hosts_in_queue as usize).clamp(1, n);
                threshold.max(by_index[k - 1] + 1)
            }
        };
        let (bucket1, over): (Vec<_>, Vec<_>) =
            first.into_iter().partition(|&(index, _, _)| index < raised);
        third.extend(over);
        // Round robin in query order from the host after the last served.
        let after = self.last_served.map_or(0, |p| p + 1);
        let round_robin = |bucket: &[(i32, u32, usize)]| {
            bucket
                .iter()
                .find(|&&(_, _, i)| i >= after)
                .or(bucket.first())
                .map(|&(_, _, i)| i)
        };
        let i = round_robin(&bucket1)
            .or_else(|| round_robin(&second))
            .or_else(|| {
                third.sort_unstable_by_key(|&(index, c, i)| {
                    (if index < 0 { i32::MAX } else { index }, c, i)
                });
                third.first().map(|&(_, _, i)| i)
            })?;
        let h = &mut self.hosts[i];
        h.sessions += 1;
        h.connecting += 1;
        self.last_served = Some(i);
        self.sessions.insert(id.to_string(), (i, key.clone()));
        self.users.insert(key, id.to_string());
        Some(i)
    }

    fn logoff(&mut self, id: &str) {
        let (i, key) = self.sessions.remove(id).expect("session exists");
        self.users.remove(&key);
        let h = &mut self.hosts[i];
        h.sessions -= 1;
        // Only the benchmark's own sessions are ever logged off, and they
        // are all still Pending.
        h.connecting -= 1;
    }
}

/// Either baseline, so that the measuring loop is written once.
enum Baseline {
    Ranked(Naive),
    Load(NaiveLoad),
}

impl Baseline {
    fn new(n: usize, alg: Alg) -> Baseline {
        match alg {
            Alg::Load => Baseline::Load(NaiveLoad::new(n)),
            _ => Baseline::Ranked(Naive::new(n, alg)),
        }
    }

    fn connect(&mut self, user: &str, random: u64, id: &str) -> Option<usize> {
        match self {
            Baseline::Ranked(n) => n.connect(user, random, id),
            Baseline::Load(n) => n.connect(user, id),
        }
    }

    fn logoff(&mut self, id: &str) {
        match self {
            Baseline::Ranked(n) => n.logoff(id),
            Baseline::Load(n) => n.logoff(id),
        }
    }

    /// A new session of `user` on host `i`, as the engine placed it.
    fn record(&mut self, i: usize, user: &str, id: &str) {
        let key = user.to_ascii_lowercase();
        let (sessions, users) = match self {
            Baseline::Ranked(n) => {
                n.hosts[i].sessions += 1;
                (&mut n.sessions, &mut n.users)
            }
            Baseline::Load(n) => {
                let h = &mut n.hosts[i];
                h.sessions += 1;
                h.connecting += 1;
                n.last_served = Some(i);
                (&mut n.sessions, &mut n.users)
            }
        };
        sessions.insert(id.to_string(), (i, key.clone()));
        users.insert(key, id.to_string());
    }

    fn host_name(&self, i: usize) -> &str {
        match self {
            Baseline::Ranked(n) => &n.hosts[i].name,
            Baseline::Load(n) => &n.hosts[i].name,
        }
    }
}

/// [`engine_step`] on the baseline.
fn naive_step(naive: &mut Baseline, w: &mut Window, random: u64) -> usize {
    let (i, had) = w.advance();
    if had {
        naive.logoff(&w.ids[i]);
    }
    naive
        .connect(&w.users[i], random, &w.ids[i])
        .expect("a host fits")
}

/// Before measuring: the engine and the baseline must agree, or the
/// comparison means nothing. The engine fills the window and the baseline
/// records the same sessions on the same hosts (its own connect at 100,000
/// hosts costs milliseconds, ten thousand times over); then both go
/// through 50 more logoffs and placements and must choose the same host
/// every time. Both are then in the steady state that is measured.
fn assert_same_choices(pool: &mut Pool, naive: &mut Baseline, hosts: usize) -> (Window, Window) {
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    let mut engine_window = Window::new(hosts);
    let mut naive_window = Window::new(hosts);
    for _ in 0..engine_window.users.len() {
        let host = engine_step(pool, &mut engine_window, next_random(&mut rng));
        let (i, _) = naive_window.advance();
        let at: usize = host["host".len()..].parse().expect("bench host names");
        naive.record(at, &naive_window.users[i], &naive_window.ids[i]);
    }
    for _ in 0..50 {
        let r = next_random(&mut rng);
        let host = engine_step(pool, &mut engine_window, r);
        let i = naive_step(naive, &mut naive_window, r);
        assert_eq!(host, naive.host_name(i), "engine and baseline disagree");
    }
    (engine_window, naive_window)
}

/// One pool size's engine, baseline and windows, in the steady state
/// [`assert_same_choices`] leaves them in.
struct State {
    pool: Pool,
    naive: Baseline,
    engine_window: Window,
    naive_window: Window,
}

fn connect_logoff(c: &mut Criterion) {
    for alg in Alg::ALL {
        let mut group = c.benchmark_group(format!("connect+logoff/{}", alg.name()));
        for n in SIZES {
            // Built by the first benchmark of this size that the filter
            // selects, so that `-- BreadthFirst-classic/engine/100000`
            // builds one pool, not sixteen.
            let mut state: Option<State> = None;
            let state = &mut state;
            let build = move || {
                let mut pool = engine_pool(n, alg);
                let mut naive = Baseline::new(n, alg);
                let (engine_window, naive_window) = assert_same_choices(&mut pool, &mut naive, n);
                State {
                    pool,
                    naive,
                    engine_window,
                    naive_window,
                }
            };
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
                let s = state.get_or_insert_with(build);
                let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
                b.iter(|| {
                    let r = next_random(&mut rng);
                    black_box(engine_step(&mut s.pool, &mut s.engine_window, r));
                });
            });
            group.bench_with_input(BenchmarkId::new("naive", n), &n, |b, _| {
                let s = state.get_or_insert_with(build);
                let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
                b.iter(|| {
                    let r = next_random(&mut rng);
                    black_box(naive_step(&mut s.naive, &mut s.naive_window, r));
                });
            });
            // The shape of the earlier figures: one user connects and logs
            // off, so the pool returns to the same state and classic
            // BreadthFirst and DepthFirst place on the same (cached) host
            // every time. Engine only; the window's sessions stay.
            group.bench_with_input(BenchmarkId::new("engine-one-user", n), &n, |b, _| {
                let pool = &mut state.get_or_insert_with(build).pool;
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
                    black_box(pool.take_changes());
                });
            });
        }
        group.finish();
    }
}

/// Rule R3: the host a redirected connection names by its address, found
/// through the pool's index, against a scan of every host in query order
/// (what the front door did before the index). Addresses drawn at random
/// over the pool, so that both meet cold entries as a real front door
/// does.
fn host_at(c: &mut Criterion) {
    let mut group = c.benchmark_group("host_at");
    for n in [1_000, 100_000] {
        let pool = engine_pool(n, Alg::Classic);
        let addresses: Vec<String> = pool.hosts().map(|h| h.spec.address.clone()).collect();
        group.sample_size(20);
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(2));
        group.bench_with_input(BenchmarkId::new("index", n), &n, |b, _| {
            let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
            b.iter(|| {
                let a = &addresses[pipeline::uniform_below(next_random(&mut rng), n)];
                black_box(pool.host_at(a).map(|h| h.seq))
            });
        });
        group.bench_with_input(BenchmarkId::new("scan", n), &n, |b, _| {
            let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
            b.iter(|| {
                let a = &addresses[pipeline::uniform_below(next_random(&mut rng), n)];
                black_box(pool.hosts().find(|h| &h.spec.address == a).map(|h| h.seq))
            });
        });
    }
    group.finish();
}

criterion_group!(benches, connect_logoff, host_at);
criterion_main!(benches);
