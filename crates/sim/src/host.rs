//! The host model: what a session costs a host, how an overloaded host
//! slows its logons down, and what its agent reports.
//!
//! Costs are in vCPUs and GB. A host runs its background load, a steady
//! cost per Active session (by the user's class), a small one per
//! Disconnected session, and a higher one per logon in progress. CPU is
//! shared fairly (processor sharing): while the demand exceeds the host's
//! vCPUs, everything on it — logons included — runs at `vcpus / demand` of
//! its speed, so a logon that takes 30 s on a quiet host takes 60 s on a
//! host asked for twice what it has. The agent samples every
//! `sample_seconds` and reports the *average* CPU and memory of the last
//! interval (as `/proc` deltas do), so the index the broker sees is stale.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The constants of the model; the docs quote them.
#[derive(Clone, Debug)]
pub struct HostModel {
    /// A current-generation host.
    pub large_vcpus: f64,
    pub large_memory_gb: f64,
    /// An older host: half of everything.
    pub small_vcpus: f64,
    pub small_memory_gb: f64,
    /// Background load of the OS, agents, antivirus: uniform in this range.
    pub background_vcpus: (f64, f64),
    pub background_memory_gb: f64,
    /// User classes: (share, steady vCPUs, memory GB).
    pub classes: [(f64, f64, f64); 3],
    /// A logon in progress: profile load, group policy, shell start.
    pub logon_vcpus: f64,
    pub logon_extra_memory_gb: f64,
    /// Seconds of work a logon needs at full speed: uniform in this range.
    pub logon_seconds: (f64, f64),
    /// A Disconnected session keeps its memory and almost no CPU.
    pub disconnected_vcpus: f64,
}

impl Default for HostModel {
    fn default() -> Self {
        HostModel {
            large_vcpus: 16.0,
            large_memory_gb: 160.0,
            small_vcpus: 8.0,
            small_memory_gb: 80.0,
            background_vcpus: (0.2, 0.8),
            background_memory_gb: 8.0,
            classes: [
                // task worker, knowledge worker, power user
                (0.50, 0.10, 1.0),
                (0.35, 0.20, 1.5),
                (0.15, 0.40, 3.0),
            ],
            logon_vcpus: 1.0,
            logon_extra_memory_gb: 0.5,
            logon_seconds: (20.0, 40.0),
            disconnected_vcpus: 0.02,
        }
    }
}

/// What one user's sessions cost.
#[derive(Clone, Copy, Debug)]
pub struct UserCost {
    pub steady_vcpus: f64,
    pub memory_gb: f64,
    /// Work of one logon, in seconds at full speed.
    pub logon_seconds: f64,
}

/// One session host as the simulator runs it.
#[derive(Debug)]
pub struct SimHost {
    pub name: String,
    vcpus: f64,
    memory_gb: f64,
    /// Current demand, background included.
    demand_vcpus: f64,
    used_memory_gb: f64,
    /// Virtual work clock: advances at the host's speed (1 when not
    /// overloaded); a logon ends when it has advanced by its work.
    virtual_s: f64,
    /// Logons in progress, by the virtual time they end at, then user:
    /// an entry leaves when its logon ends (`due_logons`) or is cut short
    /// (`forget_logon`).
    logons: BinaryHeap<Reverse<(OrdF64, u32)>>,
    last_ms: i64,
    /// Integrals of CPU demand (percent·s) and memory (percent·s) since the
    /// agent's last sample, and of CPU demand since the last observation.
    agent_cpu: f64,
    agent_memory: f64,
    agent_since_ms: i64,
    observed_cpu: f64,
    observed_since_ms: i64,
    /// Bumped whenever the next logon end may have moved.
    pub version: u64,
    pub failed: bool,
    pub removed: bool,
    pub peak_cpu_percent: f64,
    pub peak_connecting: u32,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct OrdF64(f64);
impl Eq for OrdF64 {}
impl PartialOrd for OrdF64 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrdF64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl SimHost {
    pub fn new(
        name: String,
        vcpus: f64,
        memory_gb: f64,
        background: f64,
        bg_mem: f64,
        now_ms: i64,
    ) -> SimHost {
        SimHost {
            name,
            vcpus,
            memory_gb,
            demand_vcpus: background,
            used_memory_gb: bg_mem,
            virtual_s: 0.0,
            logons: BinaryHeap::new(),
            last_ms: now_ms,
            agent_cpu: 0.0,
            agent_memory: 0.0,
            agent_since_ms: now_ms,
            observed_cpu: 0.0,
            observed_since_ms: now_ms,
            version: 0,
            failed: false,
            removed: false,
            peak_cpu_percent: 0.0,
            peak_connecting: 0,
        }
    }

    /// The speed of everything on the host: 1, or less while overloaded.
    fn speed(&self) -> f64 {
        if self.demand_vcpus <= self.vcpus {
            1.0
        } else {
            self.vcpus / self.demand_vcpus
        }
    }

    pub fn cpu_percent(&self) -> f64 {
        100.0 * self.demand_vcpus / self.vcpus
    }

    fn memory_percent(&self) -> f64 {
        (100.0 * self.used_memory_gb / self.memory_gb).min(100.0)
    }

    /// Moves the host's clocks and integrals to `now_ms`. Every change
    /// calls this first, so the integrals see each level for its duration.
    pub fn advance(&mut self, now_ms: i64) {
        let dt = (now_ms - self.last_ms) as f64 / 1000.0;
        if dt <= 0.0 {
            return;
        }
        self.virtual_s += self.speed() * dt;
        let cpu = self.cpu_percent();
        self.agent_cpu += cpu * dt;
        self.agent_memory += self.memory_percent() * dt;
        self.observed_cpu += cpu * dt;
        self.last_ms = now_ms;
    }

    /// Starts a logon of `user` (call `advance` first).
    pub fn start_logon(&mut self, user: u32, cost: &UserCost, model: &HostModel) {
        self.logons
            .push(Reverse((OrdF64(self.virtual_s + cost.logon_seconds), user)));
        self.peak_connecting = self.peak_connecting.max(self.logons.len() as u32);
        self.demand_vcpus += model.logon_vcpus;
        self.used_memory_gb += cost.memory_gb + model.logon_extra_memory_gb;
        self.version += 1;
    }

    /// Takes a logon's cost off the host when it ends, on time (after
    /// `due_logons`) or early (after `forget_logon`: logoff, expiry,
    /// failure).
    pub fn end_logon(&mut self, cost: &UserCost, model: &HostModel) {
        self.demand_vcpus -= model.logon_vcpus;
        self.used_memory_gb -= cost.memory_gb + model.logon_extra_memory_gb;
        self.version += 1;
    }

    /// Adds (`sign` 1) or removes (`sign` -1) a settled session's cost.
    pub fn settled(&mut self, cost: &UserCost, disconnected: bool, model: &HostModel, sign: f64) {
        let cpu = if disconnected {
            model.disconnected_vcpus
        } else {
            cost.steady_vcpus
        };
        self.demand_vcpus += sign * cpu;
        self.used_memory_gb += sign * cost.memory_gb;
        self.version += 1;
    }

    /// When the first logon in progress ends, in ms (None: no logon).
    pub fn next_logon_end_ms(&self) -> Option<i64> {
        let Reverse((OrdF64(end), _)) = self.logons.peek()?;
        let left = (end - self.virtual_s).max(0.0) / self.speed();
        Some(self.last_ms + (left * 1000.0).ceil() as i64)
    }

    /// Pops the users whose logon work is done at the host's current
    /// virtual time (with a microsecond of slack for rounding).
    pub fn due_logons(&mut self) -> Vec<u32> {
        let mut out = Vec::new();
        while let Some(Reverse((OrdF64(end), user))) = self.logons.peek() {
            if *end > self.virtual_s + 1e-6 {
                break;
            }
            out.push(*user);
            self.logons.pop();
        }
        out
    }

    /// Drops a logon's heap entry (logoff or failure before it ends).
    pub fn forget_logon(&mut self, user: u32) {
        self.logons.retain(|Reverse((_, u))| *u != user);
    }

    /// The agent's sample: average CPU (capped at 100, as a host reports)
    /// and memory over the last interval. Records the uncapped average as
    /// the host's peak when it is one.
    pub fn sample(&mut self, now_ms: i64) -> (f64, f64) {
        self.advance(now_ms);
        let dt = ((now_ms - self.agent_since_ms) as f64 / 1000.0).max(1e-3);
        let cpu = self.agent_cpu / dt;
        let memory = self.agent_memory / dt;
        self.peak_cpu_percent = self.peak_cpu_percent.max(cpu);
        self.agent_cpu = 0.0;
        self.agent_memory = 0.0;
        self.agent_since_ms = now_ms;
        (round2(cpu.min(100.0)), round2(memory.min(100.0)))
    }

    /// The average CPU demand since the last observation, in percent.
    pub fn observe(&mut self, now_ms: i64) -> f64 {
        self.advance(now_ms);
        let dt = ((now_ms - self.observed_since_ms) as f64 / 1000.0).max(1e-3);
        let cpu = self.observed_cpu / dt;
        self.observed_cpu = 0.0;
        self.observed_since_ms = now_ms;
        cpu
    }
}

/// Metrics go to the engine with two decimals, as an agent sends them.
fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
