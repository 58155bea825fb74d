//! Property tests: random sequences of operations run on the engine and on
//! a deliberately naive reference model written here from the rules alone
//! (a `Vec` of hosts and a `Vec` of sessions; every connect filters every
//! host by S2, sorts by (sessions, query order) and picks). After every
//! step both must agree — the host chosen, or the same error code — and
//! the S6 invariants must hold:
//!
//! - a new placement never leaves its host over `maxSessionLimit`;
//! - no user holds two sessions in the pooled pool;
//! - each host's session count (and connecting count) is the number of
//!   sessions (Pending sessions) on it.
//!
//! The model shares nothing with the engine but `pipeline::uniform_below`,
//! the documented mapping of a random value to an index (B1).

use std::collections::HashMap;

use placement::pipeline::uniform_below;
use placement::{
    ConnectRequest, HostMetrics, HostPoolType, HostStatus, LoadBalancerType, MAX_SESSION_LIMIT,
    Pool, PoolConfig, SessionState, TimestampMs,
};
use proptest::prelude::*;

use crate::{Alg, SEED, T0, host_spec};

const PENDING_MS: i64 = 120_000;
const HEARTBEAT_MS: i64 = 90_000;

#[derive(Clone, Debug)]
pub enum Op {
    /// A connect of user `user` (written in capitals when `upper`, S1),
    /// requiring `gpu` when `gpu`, with this random value (B1).
    Connect {
        user: usize,
        upper: bool,
        gpu: bool,
        random: u64,
    },
    /// The `pick`-th live session (mod their number) becomes Active or Disconnected.
    SetState {
        pick: usize,
        active: bool,
    },
    Logoff {
        pick: usize,
    },
    Drain {
        pick: usize,
        drained: bool,
    },
    Limit(u32),
    Algorithm(Alg),
    AddHost {
        gpu: bool,
    },
    /// Removes the `pick`-th host with force, ending its sessions.
    RemoveHost {
        pick: usize,
    },
    Heartbeat {
        pick: usize,
    },
    /// Time passes and the engine ticks (S4, S7).
    Advance {
        seconds: u32,
    },
    /// The engine restarts: rebuilt by `Pool::restore` from what it answers,
    /// with a new start time (S5, S7).
    Restart,
}

#[derive(Clone, Debug)]
struct MHost {
    name: String,
    drained: bool,
    gpu: bool,
    last_heartbeat_ms: Option<TimestampMs>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct MSession {
    id: String,
    host: String,
    /// Lowercased: users match without regard to case.
    user: String,
    state: SessionState,
    since_ms: TimestampMs,
}

/// The reference: the rules, written as plainly as possible.
#[derive(Clone, Debug)]
struct Model {
    /// In query order.
    hosts: Vec<MHost>,
    sessions: Vec<MSession>,
    limit: u32,
    alg: Alg,
    now_ms: TimestampMs,
    started_ms: TimestampMs,
}

/// An outcome both sides can produce: (host, reconnect, session id) or an error code.
type Outcome = Result<(String, bool, String), &'static str>;

impl Model {
    /// S7: silent for the timeout, counted from the later of the last
    /// heartbeat and the start; never silent without any heartbeat.
    fn available(&self, h: &MHost) -> bool {
        match h.last_heartbeat_ms {
            None => true,
            Some(t) => self.now_ms < t.max(self.started_ms) + HEARTBEAT_MS,
        }
    }

    /// S4: Pending sessions end `pendingTimeoutSeconds` after placement.
    fn expire(&mut self) {
        let now = self.now_ms;
        self.sessions
            .retain(|s| !(s.state == SessionState::Pending && s.since_ms + PENDING_MS <= now));
    }

    fn counts(&self) -> HashMap<&str, u32> {
        let mut c = HashMap::new();
        for s in &self.sessions {
            *c.entry(s.host.as_str()).or_default() += 1;
        }
        c
    }

    fn connect(&mut self, user: &str, gpu: bool, random: u64, id: &str) -> Outcome {
        self.expire();
        let key = user.to_lowercase();
        // S1: the user's session wins, wherever it is, or fails if its host is down.
        if let Some(s) = self.sessions.iter().find(|s| s.user == key) {
            let h = self
                .hosts
                .iter()
                .find(|h| h.name == s.host)
                .expect("session on a host");
            if !self.available(h) {
                return Err("SessionHostUnavailable");
            }
            return Ok((s.host.clone(), true, s.id.clone()));
        }
        // S2: every host, filtered; then ranked by (sessions, query order).
        let counts = self.counts();
        let count = |h: &MHost| counts.get(h.name.as_str()).copied().unwrap_or(0);
        let mut eligible: Vec<(u32, usize)> = self
            .hosts
            .iter()
            .enumerate()
            .filter(|(_, h)| !h.drained && self.available(h) && count(h) < self.limit)
            .filter(|(_, h)| !gpu || h.gpu)
            .map(|(i, h)| (count(h), i))
            .collect();
        if eligible.is_empty() {
            return Err("NoSessionHostAvailable");
        }
        eligible.sort();
        let chosen = match self.alg {
            // B1: the first half, rounded up, uniformly.
            Alg::Breadth => eligible[uniform_below(random, eligible.len().div_ceil(2))].1,
            // B3: the fewest, ties in query order.
            Alg::Classic => eligible[0].1,
            // D1: walk in query order, keep the first with strictly more.
            Alg::Depth => {
                let mut best = eligible[0];
                for &(n, i) in &eligible {
                    if n > best.0 || (n == best.0 && i < best.1) {
                        best = (n, i);
                    }
                }
                best.1
            }
        };
        let host = self.hosts[chosen].name.clone();
        self.sessions.push(MSession {
            id: id.to_string(),
            host: host.clone(),
            user: key,
            state: SessionState::Pending,
            since_ms: self.now_ms,
        });
        Ok((host, false, id.to_string()))
    }
}

/// The engine and the model side by side.
pub struct Harness {
    pool: Pool,
    model: Model,
    next_host: u32,
    next_session: u64,
    /// How many users connects choose from.
    users: usize,
    /// Check every host and session every this many steps (1: always);
    /// every connect's outcome is compared whatever this says.
    full_check_every: u64,
    steps: u64,
}

fn config(alg: Alg, limit: u32) -> PoolConfig {
    let mut c = PoolConfig::new("farm", HostPoolType::Pooled, LoadBalancerType::BreadthFirst);
    alg.apply(&mut c);
    c.max_session_limit = limit;
    c
}

impl Harness {
    pub fn new(hosts: usize, gpu_every: usize, alg: Alg, limit: u32, users: usize) -> Harness {
        let mut h = Harness {
            pool: Pool::new(config(alg, limit), SEED, T0),
            model: Model {
                hosts: Vec::new(),
                sessions: Vec::new(),
                limit,
                alg,
                now_ms: T0,
                started_ms: T0,
            },
            next_host: 0,
            next_session: 0,
            users,
            full_check_every: 1,
            steps: 0,
        };
        for i in 0..hosts {
            h.add_host(gpu_every > 0 && i % gpu_every == 0);
        }
        h
    }

    fn add_host(&mut self, gpu: bool) {
        self.next_host += 1;
        let name = format!("h{}", self.next_host);
        let extra: &[&str] = if gpu { &["gpu"] } else { &[] };
        self.pool
            .upsert_host(host_spec(&name, extra), self.model.now_ms)
            .unwrap();
        self.model.hosts.push(MHost {
            name,
            drained: false,
            gpu,
            last_heartbeat_ms: None,
        });
    }

    fn host_name(&self, pick: usize) -> Option<String> {
        let n = self.model.hosts.len();
        (n > 0).then(|| self.model.hosts[pick % n].name.clone())
    }

    fn session_id(&self, pick: usize) -> String {
        let n = self.model.sessions.len();
        if n == 0 {
            "no-such-session".into()
        } else {
            self.model.sessions[pick % n].id.clone()
        }
    }

    pub fn step(&mut self, op: &Op) {
        let now = self.model.now_ms;
        match *op {
            Op::Connect {
                user,
                upper,
                gpu,
                random,
            } => {
                let mut name = format!("user{}@contoso.com", user % self.users);
                if upper {
                    name = name.to_uppercase();
                }
                self.next_session += 1;
                let id = format!("s{}", self.next_session);
                let requires: Vec<String> = if gpu { vec!["gpu".into()] } else { Vec::new() };
                let req = ConnectRequest {
                    user: &name,
                    requires: &requires,
                    session_host: None,
                };
                let got: Outcome = match self.pool.connect(&req, now, random, &id) {
                    Ok(p) => Ok((p.host, p.reconnect, p.session_id)),
                    Err(e) => Err(e.code()),
                };
                let want = self.model.connect(&name, gpu, random, &id);
                assert_eq!(
                    got, want,
                    "connect {name} (requires gpu: {gpu}, random {random})"
                );
                if let Ok((host, false, _)) = &got {
                    // S6: a new placement never takes its host over the limit.
                    let h = self.pool.host(host).unwrap();
                    assert!(
                        h.sessions <= self.model.limit,
                        "{host} has {} > {}",
                        h.sessions,
                        self.model.limit
                    );
                }
            }
            Op::SetState { pick, active } => {
                let id = self.session_id(pick);
                let state = if active {
                    SessionState::Active
                } else {
                    SessionState::Disconnected
                };
                let got = self
                    .pool
                    .set_session_state(&id, state, now)
                    .map_err(|e| e.code());
                let want = match self.model.sessions.iter_mut().find(|s| s.id == id) {
                    None => Err("SessionNotFound"),
                    Some(s) => {
                        if s.state != state {
                            s.state = state;
                            s.since_ms = now;
                        }
                        Ok(())
                    }
                };
                assert_eq!(got, want, "set {id} {state:?}");
            }
            Op::Logoff { pick } => {
                let id = self.session_id(pick);
                let got = self.pool.logoff(&id).map_err(|e| e.code());
                let before = self.model.sessions.len();
                self.model.sessions.retain(|s| s.id != id);
                let want = if self.model.sessions.len() < before {
                    Ok(())
                } else {
                    Err("SessionNotFound")
                };
                assert_eq!(got, want, "logoff {id}");
            }
            Op::Drain { pick, drained } => {
                let Some(name) = self.host_name(pick) else {
                    return;
                };
                let mut spec = self.pool.host(&name).unwrap().spec.clone();
                spec.allow_new_session = !drained;
                self.pool.upsert_host(spec, now).unwrap();
                self.model
                    .hosts
                    .iter_mut()
                    .find(|h| h.name == name)
                    .unwrap()
                    .drained = drained;
            }
            Op::Limit(limit) => {
                let mut c = self.pool.config().clone();
                c.max_session_limit = limit;
                self.pool.set_config(c).unwrap();
                self.model.limit = limit;
            }
            Op::Algorithm(alg) => {
                let mut c = self.pool.config().clone();
                alg.apply(&mut c);
                self.pool.set_config(c).unwrap();
                self.model.alg = alg;
            }
            Op::AddHost { gpu } => self.add_host(gpu),
            Op::RemoveHost { pick } => {
                let Some(name) = self.host_name(pick) else {
                    return;
                };
                self.pool.remove_host(&name, true).unwrap();
                self.model.hosts.retain(|h| h.name != name);
                self.model.sessions.retain(|s| s.host != name);
            }
            Op::Heartbeat { pick } => {
                let Some(name) = self.host_name(pick) else {
                    return;
                };
                self.pool
                    .heartbeat(&name, HostMetrics::default(), now)
                    .unwrap();
                self.model
                    .hosts
                    .iter_mut()
                    .find(|h| h.name == name)
                    .unwrap()
                    .last_heartbeat_ms = Some(now);
            }
            Op::Advance { seconds } => {
                self.model.now_ms += i64::from(seconds) * 1000;
                self.pool.tick(self.model.now_ms);
                self.model.expire();
            }
            Op::Restart => {
                let p = &self.pool;
                self.pool = Pool::restore(
                    p.config().clone(),
                    p.counters(),
                    p.hosts().cloned().collect(),
                    p.sessions().cloned().collect(),
                    now,
                );
                self.model.started_ms = now;
            }
        }
        self.pool.take_changes();
        self.steps += 1;
        self.check_invariants();
    }

    /// S6 and agreement with the model, from the outside.
    fn check_invariants(&self) {
        if !self.steps.is_multiple_of(self.full_check_every) {
            return;
        }
        let pool = &self.pool;
        let mut on: HashMap<&str, (u32, u32)> = HashMap::new();
        let mut users: HashMap<String, &str> = HashMap::new();
        for s in pool.sessions() {
            let e = on.entry(s.host.as_str()).or_default();
            e.0 += 1;
            e.1 += u32::from(s.state == SessionState::Pending);
            let key = s.user.to_lowercase();
            if let Some(other) = users.insert(key, &s.id) {
                panic!("user {} holds two sessions: {other} and {}", s.user, s.id);
            }
        }
        assert_eq!(
            pool.session_count(),
            self.model.sessions.len(),
            "number of sessions"
        );
        assert_eq!(pool.host_count(), self.model.hosts.len(), "number of hosts");
        for (h, m) in pool.hosts().zip(&self.model.hosts) {
            assert_eq!(h.spec.name, m.name, "query order");
            let (n, pending) = on.get(h.spec.name.as_str()).copied().unwrap_or_default();
            assert_eq!(
                (h.sessions, h.connecting_sessions),
                (n, pending),
                "counts of {}",
                m.name
            );
            assert_eq!(h.spec.allow_new_session, !m.drained, "drain of {}", m.name);
            let status = if self.model.available(m) {
                HostStatus::Available
            } else {
                HostStatus::Unavailable
            };
            assert_eq!(h.status, status, "status of {}", m.name);
        }
        let sessions_on_known_hosts: u32 = on.values().map(|v| v.0).sum();
        assert_eq!(sessions_on_known_hosts as usize, pool.session_count());
        let mut got: Vec<MSession> = pool
            .sessions()
            .map(|s| MSession {
                id: s.id.clone(),
                host: s.host.clone(),
                user: s.user.to_lowercase(),
                state: s.state,
                since_ms: s.state_since_ms,
            })
            .collect();
        got.sort_by(|a, b| a.id.cmp(&b.id));
        let mut want = self.model.sessions.clone();
        want.sort_by(|a, b| a.id.cmp(&b.id));
        assert_eq!(got, want, "sessions");
    }
}

fn alg() -> impl Strategy<Value = Alg> {
    prop_oneof![Just(Alg::Breadth), Just(Alg::Classic), Just(Alg::Depth)]
}

fn limit() -> impl Strategy<Value = u32> {
    prop_oneof![4 => 0u32..6, 1 => Just(MAX_SESSION_LIMIT)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (any::<usize>(), any::<bool>(), proptest::bool::weighted(0.2), any::<u64>())
            .prop_map(|(user, upper, gpu, random)| Op::Connect { user, upper, gpu, random }),
        3 => (any::<usize>(), any::<bool>()).prop_map(|(pick, active)| Op::SetState { pick, active }),
        3 => any::<usize>().prop_map(|pick| Op::Logoff { pick }),
        2 => (any::<usize>(), any::<bool>()).prop_map(|(pick, drained)| Op::Drain { pick, drained }),
        1 => limit().prop_map(Op::Limit),
        1 => alg().prop_map(Op::Algorithm),
        1 => proptest::bool::weighted(0.3).prop_map(|gpu| Op::AddHost { gpu }),
        1 => any::<usize>().prop_map(|pick| Op::RemoveHost { pick }),
        1 => any::<usize>().prop_map(|pick| Op::Heartbeat { pick }),
        1 => (0u32..150).prop_map(|seconds| Op::Advance { seconds }),
        1 => Just(Op::Restart),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn engine_agrees_with_the_reference_model(
        hosts in 0usize..6,
        alg in alg(),
        limit in limit(),
        users in 1usize..10,
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        let mut h = Harness::new(hosts, 3, alg, limit, users);
        for op in &ops {
            h.step(op);
        }
    }

    /// Same operations, same results: the engine is a pure function of its
    /// inputs (what the simulator and a restart rely on).
    #[test]
    fn same_operations_same_results(
        alg in alg(),
        ops in proptest::collection::vec(op(), 1..60),
    ) {
        let run = || {
            let mut h = Harness::new(4, 2, alg, 3, 5);
            for op in &ops {
                h.step(op);
            }
            let mut s: Vec<_> = h.pool.sessions().cloned().collect();
            s.sort_by(|a, b| a.id.cmp(&b.id));
            (s, h.pool.counters())
        };
        prop_assert_eq!(run(), run());
    }
}

/// A small deterministic generator for the large run below.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The same comparison with thousands of hosts, so that the engine's
/// ranked index holds more entries than fit one of its nodes (1024) and
/// every pick crosses node boundaries. Seeded: the seed is printed on failure.
#[test]
fn engine_agrees_with_the_reference_model_on_thousands_of_hosts() {
    for seed in [1u64, 2] {
        let result = std::panic::catch_unwind(|| {
            let mut rng = SplitMix(seed);
            let mut h = Harness::new(2200, 7, Alg::Breadth, 3, 100_000);
            h.full_check_every = 53;
            for _ in 0..2000 {
                let op = match rng.below(100) {
                    0..=54 => Op::Connect {
                        user: rng.next() as usize,
                        upper: false,
                        gpu: rng.below(10) == 0,
                        random: rng.next(),
                    },
                    55..=74 => Op::Logoff {
                        pick: rng.next() as usize,
                    },
                    75..=84 => Op::SetState {
                        pick: rng.next() as usize,
                        active: rng.below(2) == 0,
                    },
                    85..=89 => Op::Drain {
                        pick: rng.next() as usize,
                        drained: rng.below(2) == 0,
                    },
                    90..=93 => Op::Algorithm(match rng.below(3) {
                        0 => Alg::Breadth,
                        1 => Alg::Classic,
                        _ => Alg::Depth,
                    }),
                    94..=95 => Op::Limit(1 + rng.below(4) as u32),
                    96 => Op::AddHost { gpu: false },
                    97 => Op::RemoveHost {
                        pick: rng.next() as usize,
                    },
                    98 => Op::Heartbeat {
                        pick: rng.next() as usize,
                    },
                    _ => Op::Advance {
                        seconds: rng.below(60) as u32,
                    },
                };
                h.step(&op);
            }
        });
        if let Err(e) = result {
            eprintln!("engine_agrees_with_the_reference_model_on_thousands_of_hosts: seed {seed}");
            std::panic::resume_unwind(e);
        }
    }
}
