//! The event loop: one run of one policy, driving a real `placement::Pool`
//! exactly as the broker does — time applied before a connect (`tick`),
//! heartbeats with the host's metrics, `set_session_state` when a logon
//! ends or a user disconnects, `logoff`, drain as a host upsert, removal
//! with `force` — and the host model beside it.
//!
//! Events run in (time, order of scheduling), so a run is a pure function
//! of its configuration and seed. Policies run on threads of their own (each
//! with its own pool and model); results come back in the order asked.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use placement::{Change, HostMetrics, HostSpec, Pool, SessionState, TimestampMs};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::host::{HostModel, SimHost, UserCost};
use crate::policy::{Picker, Policy};
use crate::report::{Accounting, PolicyResult, Report, Series};
use crate::scenario::{HostAction, Scenario, UserAction};
use crate::{Progress, SimConfig, SimError};

mod hosts;
mod power;
mod users;
use power::Power;

/// When every simulated pool starts: 2026-01-05 06:00 UTC, a Monday.
pub const T0: TimestampMs = 1_767_592_800_000;

const SECOND: i64 = 1000;
const OBSERVE_MS: i64 = 60 * SECOND;
/// A user whose host died tries to reconnect after 20–60 s, then every 30 s.
const RETRY_MS: i64 = 30 * SECOND;
/// The front door releases a session placed on a dead host and tries again.
const RELEASE_RETRY_MS: i64 = 5 * SECOND;

/// One engine operation as the simulator made it, with what it answered:
/// tests replay these on a fresh pool and must get the same answers.
#[derive(Clone, Debug, PartialEq)]
pub enum LoggedOp {
    Upsert(HostSpec, TimestampMs),
    Heartbeat(String, HostMetrics, TimestampMs),
    Tick(TimestampMs),
    Connect {
        user: String,
        now_ms: TimestampMs,
        random: u64,
        session_id: String,
        /// `Some`: placed by this host of the simulator's pick.
        picked: Option<String>,
        answer: Result<(String, bool), String>,
    },
    SetState(String, SessionState, TimestampMs),
    Logoff(String),
    Remove(String),
}

/// What all policies of one run share: the scenario and the hosts.
struct World {
    scenario: Scenario,
    hosts: Vec<HostBuild>,
    names: HostNames,
    costs: Vec<UserCost>,
    limit: u32,
    model: HostModel,
}

struct HostBuild {
    vcpus: f64,
    memory_gb: f64,
    background: f64,
    phase_ms: i64,
}

/// Every host's name ([`host_name`]) in one buffer: the names the engine
/// is given on every heartbeat are read from a few cache lines all hosts
/// share, not from an allocation of each host's own.
struct HostNames {
    text: String,
    /// Where each name ends in `text`.
    ends: Vec<usize>,
}

impl HostNames {
    fn new(hosts: u32) -> HostNames {
        let mut names = HostNames {
            text: String::new(),
            ends: Vec::with_capacity(hosts as usize),
        };
        for i in 0..hosts {
            names.text.push_str(&host_name(i));
            names.ends.push(names.text.len());
        }
        names
    }

    fn get(&self, h: u32) -> &str {
        let h = h as usize;
        let start = if h == 0 { 0 } else { self.ends[h - 1] };
        &self.text[start..self.ends[h]]
    }
}

fn host_name(i: u32) -> String {
    format!("h{:05}", i + 1)
}

/// The minimum, the 50th and 90th percentiles and the maximum of a
/// non-empty `values`: the elements a sort by `f64::total_cmp` would put
/// at `(len - 1) * p / 100`, found by selection instead of a sort (values
/// equal in that order are the same bits, so the answer is the sort's).
/// Reorders `values`.
fn quantiles(values: &mut [f64]) -> [f64; 4] {
    let at = |p: usize| ((values.len() - 1) * p) / 100;
    let (k50, k90) = (at(50), at(90));
    let (below, &mut p90, _) = values.select_nth_unstable_by(k90, f64::total_cmp);
    let p50 = if k50 == k90 {
        p90
    } else {
        *below.select_nth_unstable_by(k50, f64::total_cmp).1
    };
    let min = values.iter().copied().min_by(f64::total_cmp).unwrap_or(p50);
    let max = values.iter().copied().max_by(f64::total_cmp).unwrap_or(p90);
    [min, p50, p90, max]
}

/// Writes the engine id of the simulator's session number `n` into `out`.
fn session_id(out: &mut String, n: u64) {
    out.clear();
    write!(out, "s{n}").expect("writing to a String cannot fail");
}

/// The number of the simulator's session named `id` (see [`session_id`]).
fn session_number(id: &str) -> u64 {
    id[1..]
        .parse::<u64>()
        .expect("the simulator names its sessions")
}

/// The simulator's live engine sessions: the user of each, by session
/// number (numbers are dense: one per placement).
#[derive(Debug, Default)]
struct SessionTable {
    users: Vec<u32>,
    live: usize,
}

/// A number whose session has ended (or was never placed).
const NO_USER: u32 = u32::MAX;

impl SessionTable {
    fn insert(&mut self, n: u64, user: u32) {
        let i = n as usize;
        if self.users.len() <= i {
            self.users.resize(i + 1, NO_USER);
        }
        debug_assert_eq!(self.users[i], NO_USER, "session numbers are not reused");
        self.users[i] = user;
        self.live += 1;
    }

    /// Forgets a session; its user, if it was live.
    fn remove(&mut self, n: u64) -> Option<u32> {
        let slot = self.users.get_mut(n as usize)?;
        if *slot == NO_USER {
            return None;
        }
        self.live -= 1;
        Some(std::mem::replace(slot, NO_USER))
    }

    fn len(&self) -> usize {
        self.live
    }

    /// The users of the live sessions, by session number.
    fn users(&self) -> impl Iterator<Item = u32> + '_ {
        self.users.iter().copied().filter(|&u| u != NO_USER)
    }
}

fn host_index(name: &str) -> u32 {
    name[1..]
        .parse::<u32>()
        .expect("the simulator names its hosts")
        - 1
}

impl World {
    fn build(cfg: &SimConfig) -> World {
        let model = HostModel::default();
        let mut rng = SmallRng::seed_from_u64(cfg.seed);
        let scenario = Scenario::build(
            &cfg.scenario,
            cfg.hosts,
            cfg.users,
            cfg.storm_minutes,
            &mut rng,
        );
        let mut rng = SmallRng::seed_from_u64(cfg.seed ^ 0x0057_0517);
        let small = small_count(cfg);
        // Which hosts are small: drawn, so they are spread over query order.
        let mut is_small = vec![false; cfg.hosts as usize];
        let mut order: Vec<usize> = (0..cfg.hosts as usize).collect();
        for i in 0..small as usize {
            let j = rng.random_range(i..order.len());
            order.swap(i, j);
            is_small[order[i]] = true;
        }
        let interval = i64::from(cfg.sample_seconds) * SECOND;
        let hosts: Vec<HostBuild> = is_small
            .iter()
            .map(|&s| HostBuild {
                vcpus: if s {
                    model.small_vcpus
                } else {
                    model.large_vcpus
                },
                memory_gb: if s {
                    model.small_memory_gb
                } else {
                    model.large_memory_gb
                },
                background: rng.random_range(model.background_vcpus.0..model.background_vcpus.1),
                phase_ms: rng.random_range(0..interval),
            })
            .collect();
        let mut rng = SmallRng::seed_from_u64(cfg.seed ^ 0x0C05_7C05);
        let costs = (0..scenario.users.len())
            .map(|_| {
                let x: f64 = rng.random();
                let mut acc = 0.0;
                let mut class = model.classes[model.classes.len() - 1];
                for c in model.classes {
                    acc += c.0;
                    if x < acc {
                        class = c;
                        break;
                    }
                }
                UserCost {
                    steady_vcpus: class.1,
                    memory_gb: class.2,
                    logon_seconds: rng.random_range(model.logon_seconds.0..model.logon_seconds.1),
                }
            })
            .collect();
        let users = scenario.users.len() as u64;
        let limit = cfg.max_session_limit.unwrap_or_else(|| {
            (2 * users.div_ceil(u64::from(cfg.hosts)))
                .clamp(1, u64::from(placement::MAX_SESSION_LIMIT)) as u32
        });
        World {
            scenario,
            names: HostNames::new(hosts.len() as u32),
            hosts,
            costs,
            limit,
            model,
        }
    }
}

fn small_count(cfg: &SimConfig) -> u32 {
    ((u64::from(cfg.hosts) * u64::from(cfg.small_hosts_percent) + 50) / 100) as u32
}

/// Runs every policy of `cfg` (on up to as many threads as the machine has
/// cores) and answers the report, policies in the order asked. With a
/// scaling plan, each policy runs twice: every host always on, then under
/// the plan (same seed, same users).
pub fn run(cfg: &SimConfig, progress: &Progress) -> Result<Report, SimError> {
    cfg.validate()?;
    let world = World::build(cfg);
    let runs: Vec<(Policy, bool)> = cfg
        .policies
        .iter()
        .flat_map(|&p| {
            let with_plan: &[bool] = match cfg.scaling_plan {
                Some(_) => &[false, true],
                None => &[false],
            };
            with_plan.iter().map(move |&w| (p, w))
        })
        .collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(runs.len());
    // Threads take runs from a shared queue, the costliest first (longest
    // processing time first), so that no thread is left with a long run
    // while the others have finished; results keep the order asked.
    let mut queue: Vec<usize> = (0..runs.len()).collect();
    queue.sort_by_key(|&i| Reverse(runs[i].0.relative_cost()));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut slots: Vec<Option<Result<PolicyResult, SimError>>> =
        (0..runs.len()).map(|_| None).collect();
    let done = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while let Some(&i) = queue.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let (policy, with_plan) = runs[i];
                    let r =
                        Sim::new(cfg, &world, policy, with_plan, progress).and_then(|s| s.run());
                    done.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((i, r.map(|(r, _)| r)));
                }
            });
        }
    });
    for (i, r) in done.into_inner().unwrap_or_else(|e| e.into_inner()) {
        slots[i] = Some(r);
    }
    let mut results = Vec::new();
    for r in slots.into_iter().flatten() {
        results.push(r?.rounded());
    }
    let plan_name = cfg.scaling_plan.as_ref().map(|p| p.name.clone());
    Ok(Report {
        autoscale: plan_name
            .as_deref()
            .map(|n| crate::autoscale::rows(&results, n))
            .unwrap_or_default(),
        scaling_plan: plan_name,
        autoscale_interval_seconds: cfg
            .scaling_plan
            .as_ref()
            .map(|_| cfg.autoscale_interval_seconds),
        scenario: cfg.scenario.name(),
        hosts: cfg.hosts,
        small_hosts: small_count(cfg),
        users: world.scenario.users.len() as u32,
        seed: cfg.seed,
        sample_seconds: cfg.sample_seconds,
        storm_minutes: cfg.storm_minutes,
        max_session_limit: world.limit,
        logon_cost: cfg.logon_cost,
        simulated_seconds: world.scenario.end_ms / SECOND,
        results,
    })
}

/// One policy's run, with the engine operations when `cfg.record_ops`.
pub fn run_policy(
    cfg: &SimConfig,
    policy: Policy,
) -> Result<(PolicyResult, Vec<LoggedOp>, placement::PoolConfig, u64), SimError> {
    cfg.validate()?;
    let world = World::build(cfg);
    let progress = Progress::default();
    let sim = Sim::new(cfg, &world, policy, false, &progress)?;
    let config = sim.pool.config().clone();
    let seed = sim.pool.counters().random_seed;
    let (r, ops) = sim.run()?;
    Ok((r.rounded(), ops, config, seed))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Host(u32, HostAction),
    User(u32, UserAction),
    Retry(u32),
    LogonEnd(u32, u64),
    Sample(u32),
    Observe,
    /// The scaling plan's evaluation interval (and, without a plan, the
    /// same instants' measure of used capacity).
    Evaluate,
    /// A host the plan started has booted, unless started or stopped again
    /// since (its power version).
    Booted(u32, u64),
    /// A host the plan stopped is off.
    Halted(u32, u64),
    /// A user refused for want of an open host tries again.
    WaitRetry(u32),
}

/// Where the event loop takes its next event from.
#[derive(Clone, Copy, Debug)]
enum Next {
    /// The scenario's next user action.
    Action,
    /// The first of `Sim::samples`.
    Sample,
    /// The first of `Sim::queue`.
    Queued,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Absent,
    LoggingOn {
        host: u32,
        since_ms: i64,
    },
    Active {
        host: u32,
    },
    Disconnected {
        host: u32,
    },
    /// The session's host died; the user keeps trying to reconnect.
    Lost,
}

struct User {
    state: State,
    /// The engine's session of this user, if the engine has one: its
    /// number (the engine's id is `s` and the number, [`session_id`]).
    session: Option<u64>,
    /// On the engine's host (the session may outlive the sim's view: Lost).
    session_host: u32,
    disconnect_after_logon: bool,
    retry_pending: bool,
    /// Since when the user has waited for an open host (comparisons with a
    /// scaling plan only), and whether their next try is queued.
    waiting_since: Option<i64>,
    wait_retry_pending: bool,
}

struct Sim<'a> {
    cfg: &'a SimConfig,
    world: &'a World,
    policy: Policy,
    pool: Pool,
    picker: Option<Picker>,
    hosts: Vec<SimHost>,
    users: Vec<User>,
    /// Live engine sessions → their users.
    sessions: SessionTable,
    next_session: u64,
    /// The engine id of the session an operation is about (`s` and its
    /// number), written here so that no operation allocates one.
    id: String,
    /// Every event but the scenario's user actions and the samples.
    queue: BinaryHeap<Reverse<(i64, u64, Ev)>>,
    /// The hosts' next samples as (time, order of scheduling, host). A
    /// sample schedules the host's next one a fixed interval later, and
    /// samples run in (time, order), so the queue stays sorted by pushing
    /// at the back: a FIFO does what the heap did for them, in O(1).
    samples: VecDeque<(i64, u64, u32)>,
    /// The numbers of the sessions the engine ended in one operation (a
    /// buffer kept between operations).
    ended: Vec<u64>,
    order: u64,
    now_ms: i64,
    rng: SmallRng,
    ops: Vec<LoggedOp>,
    acc: Accounting,
    rejected: u64,
    failed_attempts: u64,
    logon_ms: Vec<u32>,
    series: Series,
    host_series: Vec<Vec<f32>>,
    hosts_in_use_peak: u32,
    hosts_in_use_sum: f64,
    imbalance_sum: f64,
    observations: u64,
    busy_observations: u64,
    progress: &'a Progress,
    events: u64,
    /// Power and the scaling plan, in a comparison with a plan (`None`:
    /// every host is simply on, as in every other run).
    power: Option<Power<'a>>,
}

impl<'a> Sim<'a> {
    fn new(
        cfg: &'a SimConfig,
        world: &'a World,
        policy: Policy,
        with_plan: bool,
        progress: &'a Progress,
    ) -> Result<Sim<'a>, SimError> {
        let config = policy.pool_config(world.limit, cfg.logon_cost);
        config.validate()?;
        let pool = Pool::new(config, cfg.seed ^ 0x0B0C_4E55, T0);
        let hosts = world
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| {
                SimHost::new(
                    host_name(i as u32),
                    h.vcpus,
                    h.memory_gb,
                    h.background,
                    world.model.background_memory_gb,
                    0,
                )
            })
            .collect();
        let users = (0..world.scenario.users.len())
            .map(|_| User {
                state: State::Absent,
                session: None,
                session_host: 0,
                disconnect_after_logon: false,
                retry_pending: false,
                waiting_since: None,
                wait_retry_pending: false,
            })
            .collect();
        let mut sim = Sim {
            cfg,
            world,
            policy,
            pool,
            picker: (!policy.is_engine()).then(|| Picker::new(policy, cfg.seed)),
            hosts,
            users,
            sessions: SessionTable::default(),
            next_session: 1,
            id: String::new(),
            queue: BinaryHeap::new(),
            samples: VecDeque::with_capacity(world.hosts.len()),
            ended: Vec::new(),
            order: 0,
            now_ms: 0,
            rng: SmallRng::seed_from_u64(cfg.seed ^ 0x0012_E7F1),
            ops: Vec::new(),
            acc: Accounting::default(),
            rejected: 0,
            failed_attempts: 0,
            logon_ms: Vec::new(),
            series: Series::default(),
            host_series: vec![
                Vec::new();
                if cfg.keep_host_series {
                    world.hosts.len()
                } else {
                    0
                }
            ],
            hosts_in_use_peak: 0,
            hosts_in_use_sum: 0.0,
            imbalance_sum: 0.0,
            observations: 0,
            busy_observations: 0,
            progress,
            events: 0,
            power: cfg
                .scaling_plan
                .as_ref()
                .map(|p| Power::new(cfg, world.hosts.len(), with_plan.then_some(&p.plan))),
        };
        for i in 0..world.hosts.len() as u32 {
            let spec = HostSpec::new(
                &host_name(i),
                &format!("10.{}.{}.{}:3389", i >> 16, (i >> 8) & 255, i & 255),
            );
            sim.record(|| LoggedOp::Upsert(spec.clone(), T0));
            sim.pool.upsert_host(spec, T0)?;
            // The agent's first heartbeat, as it registers.
            let (cpu, memory) = sim.hosts[i as usize].sample(0);
            sim.heartbeat(i, cpu, memory)?;
        }
        sim.pool.clear_changes();
        for &(t, h, a) in &world.scenario.host_actions {
            sim.push(t, Ev::Host(h, a));
        }
        // The first samples are at each host's phase, so they are sorted
        // once; every later one is pushed in the order they run (see
        // `samples`).
        for (i, h) in world.hosts.iter().enumerate() {
            sim.order += 1;
            sim.samples.push_back((h.phase_ms, sim.order, i as u32));
        }
        sim.samples.make_contiguous().sort_unstable();
        sim.push(OBSERVE_MS, Ev::Observe);
        if sim.power.is_some() {
            sim.push(0, Ev::Evaluate);
        }
        Ok(sim)
    }

    fn record(&mut self, op: impl FnOnce() -> LoggedOp) {
        if self.cfg.record_ops {
            self.ops.push(op());
        }
    }

    fn push(&mut self, t: i64, ev: Ev) {
        self.order += 1;
        self.queue.push(Reverse((t, self.order, ev)));
    }

    /// Schedules host `h`'s sample at `t`, in the same order of scheduling
    /// as every other event.
    fn push_sample(&mut self, t: i64, h: u32) {
        self.order += 1;
        debug_assert!(
            self.samples.back().is_none_or(|&b| b < (t, self.order, h)),
            "samples are pushed in the order they run"
        );
        self.samples.push_back((t, self.order, h));
    }

    fn run(mut self) -> Result<(PolicyResult, Vec<LoggedOp>), SimError> {
        let end = self.world.scenario.end_ms;
        // The scenario's user actions are sorted already: they are merged
        // with the queue (first at equal times) instead of filling it, which
        // keeps the queue to about one entry per host.
        let actions = &self.world.scenario.user_actions;
        let mut next_action = 0;
        loop {
            // The next event: a user action first at equal times, else the
            // earlier of the next sample and the queue's first, by (time,
            // order of scheduling).
            let action_at = actions.get(next_action).map(|a| a.0);
            let queued = self.queue.peek().map(|Reverse((t, o, _))| (*t, *o));
            let sample = self.samples.front().map(|&(t, o, _)| (t, o));
            let other = match (queued, sample) {
                (Some(q), Some(s)) if s < q => Some((s.0, Next::Sample)),
                (Some(q), _) => Some((q.0, Next::Queued)),
                (None, Some(s)) => Some((s.0, Next::Sample)),
                (None, None) => None,
            };
            let next = match (action_at, other) {
                (Some(a), Some((o, _))) if a <= o => Next::Action,
                (Some(_), None) => Next::Action,
                (_, Some((_, n))) => n,
                (None, None) => break,
            };
            let (t, ev) = match next {
                Next::Action => {
                    let (t, u, a) = actions[next_action];
                    next_action += 1;
                    (t, Ev::User(u, a))
                }
                Next::Sample => {
                    let Some((t, _, h)) = self.samples.pop_front() else {
                        unreachable!("peeked")
                    };
                    (t, Ev::Sample(h))
                }
                Next::Queued => {
                    let Some(Reverse((t, _, ev))) = self.queue.pop() else {
                        unreachable!("peeked")
                    };
                    (t, ev)
                }
            };
            if t > end {
                break;
            }
            self.now_ms = t;
            self.events += 1;
            if self.events.is_multiple_of(4096) {
                self.progress.events.fetch_add(4096, Ordering::Relaxed);
            }
            match ev {
                Ev::Host(h, a) => self.host_action(h, a)?,
                Ev::User(u, a) => self.user_action(u, a)?,
                Ev::Retry(u) => {
                    self.users[u as usize].retry_pending = false;
                    self.connect(u)?;
                }
                Ev::LogonEnd(h, v) => {
                    if self.hosts[h as usize].version == v {
                        self.logon_end(h)?;
                    }
                }
                Ev::Sample(h) => self.sample(h)?,
                Ev::Observe => self.observe(),
                Ev::Evaluate => {
                    self.evaluate_plan()?;
                    let next =
                        self.now_ms + i64::from(self.cfg.autoscale_interval_seconds) * SECOND;
                    self.push(next, Ev::Evaluate);
                }
                Ev::Booted(h, v) => self.booted(h, v)?,
                Ev::Halted(h, v) => self.halted(h, v),
                Ev::WaitRetry(u) => {
                    let user = &mut self.users[u as usize];
                    user.wait_retry_pending = false;
                    if user.waiting_since.is_some() {
                        self.connect(u)?;
                    }
                }
            }
        }
        self.progress
            .events
            .fetch_add(self.events % 4096, Ordering::Relaxed);
        self.finish()
    }

    fn now(&self) -> TimestampMs {
        T0 + self.now_ms
    }

    /// Reads what the engine changed by itself (S4 expiry, removal with
    /// force) and keeps the simulator's view the same.
    fn engine_changes(&mut self) {
        let mut ended = std::mem::take(&mut self.ended);
        ended.extend(self.pool.changes().iter().filter_map(|c| match c {
            Change::SessionEnded(e) => Some(session_number(&e.session.id)),
            _ => None,
        }));
        self.pool.clear_changes();
        for &n in &ended {
            // Sessions the simulator ended itself were forgotten before.
            let Some(u) = self.sessions.remove(n) else {
                continue;
            };
            let user = &mut self.users[u as usize];
            user.session = None;
            let on = user.session_host;
            self.touch(on);
            let state = self.users[u as usize].state;
            match state {
                State::Lost => self.acc.ended_by_failure += 1,
                State::LoggingOn { .. } | State::Active { .. } | State::Disconnected { .. } => {
                    self.acc.expired += 1;
                    self.users[u as usize].state = State::Absent;
                    self.release(u, state);
                }
                State::Absent => self.acc.expired += 1,
            }
        }
        ended.clear();
        self.ended = ended;
    }

    /// Tells a load-based reference pick that a host's index, sessions or
    /// logons may have changed in the engine.
    fn touch(&mut self, h: u32) {
        if let Some(p) = &mut self.picker
            && p.needs_load()
        {
            let host = self.pool.host(self.world.names.get(h));
            p.refresh(u64::from(h) + 1, host);
        }
    }

    /// Takes what a user's session costs off its host, as the user leaves
    /// `state` (logoff, expiry, the host's failure): the logon in progress,
    /// or the settled session.
    fn release(&mut self, u: u32, state: State) {
        let (host, logging_on, disconnected) = match state {
            State::LoggingOn { host, .. } => (host, true, false),
            State::Active { host } => (host, false, false),
            State::Disconnected { host } => (host, false, true),
            State::Absent | State::Lost => return,
        };
        let cost = self.world.costs[u as usize];
        let model = &self.world.model;
        let h = &mut self.hosts[host as usize];
        h.advance(self.now_ms);
        if logging_on {
            h.forget_logon(u);
            h.end_logon(&cost, model);
        } else {
            h.settled(&cost, disconnected, model, -1.0);
        }
        self.reschedule(host);
    }

    /// A settled session on `host` turns Disconnected (`disconnected`) or
    /// Active again: its cost changes from one to the other.
    fn resettle(&mut self, u: u32, host: u32, disconnected: bool) {
        let cost = self.world.costs[u as usize];
        let model = &self.world.model;
        let h = &mut self.hosts[host as usize];
        h.advance(self.now_ms);
        h.settled(&cost, !disconnected, model, -1.0);
        h.settled(&cost, disconnected, model, 1.0);
        self.reschedule(host);
    }

    fn finish(mut self) -> Result<(PolicyResult, Vec<LoggedOp>), SimError> {
        self.acc.live_at_end = self.sessions.len() as u64;
        let engine = self.pool.session_count() as u64;
        let fail = |message: String| SimError::Accounting {
            policy: self.policy.name().to_string(),
            message,
        };
        self.acc.check(engine).map_err(fail)?;
        if self.acc.new_session_attempts != self.acc.placed + self.rejected {
            return Err(fail(format!(
                "{} new-session attempts but {} placed and {} rejected",
                self.acc.new_session_attempts, self.acc.placed, self.rejected
            )));
        }
        // Host by host, the simulator's sessions are the engine's.
        let mut per_host = vec![0u32; self.hosts.len()];
        for u in self.sessions.users() {
            per_host[self.users[u as usize].session_host as usize] += 1;
        }
        for h in self.pool.hosts() {
            let i = host_index(&h.spec.name) as usize;
            if per_host[i] != h.sessions {
                return Err(fail(format!(
                    "host {} has {} sessions in the engine, {} in the simulator",
                    h.spec.name, h.sessions, per_host[i]
                )));
            }
        }
        let end_ms = self.world.scenario.end_ms;
        let power = self.power.take().map(|p| p.finish(end_ms));
        let mut logons = std::mem::take(&mut self.logon_ms);
        logons.sort_unstable();
        let pct = |p: usize| -> f64 {
            if logons.is_empty() {
                return 0.0;
            }
            let rank = (p * logons.len()).div_ceil(100).max(1);
            f64::from(logons[rank - 1]) / 1000.0
        };
        let result = PolicyResult {
            policy: match &power {
                Some(p) if p.scaling_plan => format!("{} + plan", self.policy.name()),
                _ => self.policy.name().to_string(),
            },
            power,
            peak_cpu_percent: self
                .hosts
                .iter()
                .map(|h| h.peak_cpu_percent)
                .fold(0.0, f64::max),
            peak_connecting: self
                .hosts
                .iter()
                .map(|h| h.peak_connecting)
                .max()
                .unwrap_or(0),
            logon_p50_seconds: pct(50),
            logon_p99_seconds: pct(99),
            rejected: self.rejected,
            failed_attempts: self.failed_attempts,
            hosts_in_use_peak: self.hosts_in_use_peak,
            hosts_in_use_mean: self.hosts_in_use_sum / self.observations.max(1) as f64,
            imbalance_mean: self.imbalance_sum / self.busy_observations.max(1) as f64,
            accounting: self.acc.clone(),
            series: std::mem::take(&mut self.series),
            host_series: std::mem::take(&mut self.host_series),
        };
        Ok((result, self.ops))
    }
}

#[cfg(test)]
mod tests {
    use super::quantiles;
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};

    /// Selection answers what the sort it replaced answered, bit for bit,
    /// with ties, zeros of both signs and every length up to a few hosts.
    #[test]
    fn quantiles_are_the_sorted_elements() {
        let mut rng = SmallRng::seed_from_u64(5);
        for len in 1..300 {
            let mut v: Vec<f64> = (0..len)
                .map(|_| match rng.random_range(0..4) {
                    0 => 0.0,
                    1 => -0.0,
                    2 => f64::from(rng.random_range(0..5u32)),
                    _ => rng.random_range(0.0..200.0),
                })
                .collect();
            let mut sorted = v.clone();
            sorted.sort_by(f64::total_cmp);
            let q = |p: usize| sorted[((len - 1) * p) / 100].to_bits();
            let got = quantiles(&mut v).map(f64::to_bits);
            assert_eq!(got, [q(0), q(50), q(90), q(100)], "{len} values");
        }
    }
}
