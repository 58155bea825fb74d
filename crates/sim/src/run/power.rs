//! Power and the scaling plan in a run: each host's power state
//! (Running, Starting for a seeded boot time, Stopping, Stopped), the
//! plan's evaluation every `--autoscale-interval` and after a refused logon,
//! and the plan's actions carried out as the broker carries them out.
//!
//! The decisions are the engine's: the pool is shown to
//! `placement::autoscale::evaluate` through `Pool::scaling_view`, with the
//! phase from `phase_in_force`; nothing here decides what to start or stop.
//! A host that is not Running takes no new session (it is passed to the
//! engine's connect as excluded, as the front door excludes a host it
//! cannot reach) and sends no heartbeat.

use placement::autoscale::{ActionKind, PlanMemory, ResolvedPhase, ScalingPlan, StartOnConnect};
use placement::{DrainedBy, HostPower, HostStatus, PowerState};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::{Ev, SECOND, Sim, State, host_index, host_name};
use crate::autoscale::{
    BOOT_SECONDS, LOGON_RETRY_SECONDS, MAX_WAIT_SECONDS, PowerMeasures, RELOGON_SECONDS,
    SHUTDOWN_SECONDS,
};
use crate::scenario::UserAction;
use crate::{SimConfig, SimError};

/// The simulator's hosts carry no tags.
const NO_TAGS: &[String] = &[];

/// The power side of one run: the plan (none: every host always on, the
/// baseline), what it remembers, and each host's power.
pub(super) struct Power<'a> {
    plan: Option<&'a ScalingPlan>,
    phase: Option<ResolvedPhase>,
    memory: PlanMemory,
    state: Vec<PowerState>,
    drained_by: Vec<Option<DrainedBy>>,
    /// Bumped at every start and stop: a boot or shutdown that finishes
    /// after the host changed course is ignored.
    version: Vec<u64>,
    powered_since_ms: Vec<Option<i64>>,
    powered_ms: i64,
    /// The names of the hosts that are not Running, for the connect.
    not_running: Vec<String>,
    rng: SmallRng,
    pub(super) m: PowerMeasures,
}

impl<'a> Power<'a> {
    /// Without a plan every host runs all day; with one every host starts
    /// the day stopped (the night's off-peak) and the first evaluation, at
    /// the first instant, starts what the plan's phase asks for.
    pub(super) fn new(cfg: &SimConfig, hosts: usize, plan: Option<&'a ScalingPlan>) -> Power<'a> {
        let initial = match plan {
            Some(_) => PowerState::Stopped,
            None => PowerState::Running,
        };
        let mut p = Power {
            plan,
            phase: None,
            memory: PlanMemory::default(),
            state: vec![initial; hosts],
            drained_by: vec![None; hosts],
            version: vec![0; hosts],
            powered_since_ms: vec![plan.is_none().then_some(0); hosts],
            powered_ms: 0,
            not_running: Vec::new(),
            rng: SmallRng::seed_from_u64(cfg.seed ^ 0x00A7_05CA),
            m: PowerMeasures {
                scaling_plan: plan.is_some(),
                ..PowerMeasures::default()
            },
        };
        p.refresh();
        p
    }

    pub(super) fn running(&self, h: u32) -> bool {
        self.state[h as usize] == PowerState::Running
    }

    /// Running, Starting or Stopping: paid for.
    pub(super) fn powered(&self, h: u32) -> bool {
        self.state[h as usize] != PowerState::Stopped
    }

    pub(super) fn not_running(&self) -> &[String] {
        &self.not_running
    }

    fn refresh(&mut self) {
        self.not_running = (0..self.state.len() as u32)
            .filter(|&h| !self.running(h))
            .map(host_name)
            .collect();
        let powered = (0..self.state.len() as u32)
            .filter(|&h| self.powered(h))
            .count() as u32;
        self.m.peak_powered_hosts = self.m.peak_powered_hosts.max(powered);
    }

    /// An operator drains (or undrains) a host: from now on the drain is
    /// theirs, which the plan never undoes (A6).
    pub(super) fn operator_drain(&mut self, h: u32, drain: bool) {
        self.drained_by[h as usize] = drain.then_some(DrainedBy::Operator);
    }

    pub(super) fn observe(&mut self, minute: u32, sessions: u32) {
        let powered = (0..self.state.len() as u32)
            .filter(|&h| self.powered(h))
            .count() as u32;
        self.m.minute.push(minute);
        self.m.powered_hosts.push(powered);
        self.m.sessions.push(sessions);
    }

    fn set_state(&mut self, h: u32, state: PowerState, now_ms: i64) {
        let i = h as usize;
        let was_powered = self.powered(h);
        self.state[i] = state;
        let powered = self.powered(h);
        if powered && !was_powered {
            self.powered_since_ms[i] = Some(now_ms);
        } else if !powered && was_powered {
            let since = self.powered_since_ms[i].take().unwrap_or(now_ms);
            self.powered_ms += now_ms - since;
        }
        self.refresh();
    }

    /// The measures, host-hours counted up to the end of the scenario.
    pub(super) fn finish(mut self, end_ms: i64) -> PowerMeasures {
        for since in self.powered_since_ms.iter().flatten() {
            self.powered_ms += end_ms - since;
        }
        self.m.host_hours = self.powered_ms as f64 / 3_600_000.0;
        self.m
    }
}

impl Sim<'_> {
    /// One evaluation at the current instant: the used capacity is
    /// measured in both runs; with a plan, the engine decides and the
    /// actions are carried out in the order it gives them.
    pub(super) fn evaluate_plan(&mut self) -> Result<(), SimError> {
        let now = self.now();
        let limit = u64::from(self.pool.config().max_session_limit);
        let Some(power) = &mut self.power else {
            return Ok(());
        };
        // A3's used capacity, for both runs alike.
        let available = self
            .pool
            .hosts()
            .filter(|h| {
                power.running(host_index(&h.spec.name))
                    && h.status == HostStatus::Available
                    && h.spec.allow_new_session
            })
            .count() as u64;
        let sessions = self.pool.session_count() as u64;
        let used = match (sessions, limit * available) {
            (0, _) => 0,
            (_, 0) => 100,
            (s, c) => (s * 100).div_ceil(c) as u32,
        };
        power.m.peak_used_capacity_pct = power.m.peak_used_capacity_pct.max(used);
        let Some(plan) = power.plan else {
            return Ok(());
        };
        if power
            .phase
            .as_ref()
            .is_none_or(|p| now >= p.next_phase_at_ms)
        {
            power.phase = Some(placement::autoscale::phase_in_force(plan, now)?);
        }
        let phase = power.phase.as_ref().expect("resolved above");
        let (state, drained_by) = (&power.state, &power.drained_by);
        let view = self.pool.scaling_view(|h| {
            let i = host_index(&h.spec.name) as usize;
            HostPower {
                power_state: state[i],
                drained_by: drained_by[i],
                tags: NO_TAGS,
            }
        });
        let evaluation = placement::autoscale::evaluate(&view, phase, &power.memory, now);
        drop(view);
        power.memory = evaluation.memory;
        for action in evaluation.actions {
            self.apply(host_index(&action.session_host), action.action)?;
        }
        Ok(())
    }

    /// Carries out one action, with its immediate effect on what the next
    /// evaluation sees (as the engine's module asks).
    fn apply(&mut self, h: u32, kind: ActionKind) -> Result<(), SimError> {
        let t = self.now_ms;
        let power = self.power.as_mut().expect("a plan's run has power");
        if power.drained_by[h as usize] == Some(DrainedBy::Operator)
            && !matches!(kind, ActionKind::Notify | ActionKind::Logoff)
        {
            power.m.actions_on_operator_drained += 1;
        }
        match kind {
            ActionKind::Start => {
                power.m.starts += 1;
                power.version[h as usize] += 1;
                let v = power.version[h as usize];
                power.set_state(h, PowerState::Starting, t);
                let boot = power.rng.random_range(BOOT_SECONDS.0..=BOOT_SECONDS.1) * SECOND;
                self.push(t + boot, Ev::Booted(h, v));
            }
            ActionKind::Stop => {
                power.m.stops += 1;
                power.version[h as usize] += 1;
                let v = power.version[h as usize];
                power.set_state(h, PowerState::Stopping, t);
                let down = power
                    .rng
                    .random_range(SHUTDOWN_SECONDS.0..=SHUTDOWN_SECONDS.1)
                    * SECOND;
                self.push(t + down, Ev::Halted(h, v));
                // Under ZeroActiveSessions, disconnected sessions end with
                // the host.
                self.end_sessions_on(h)?;
            }
            ActionKind::Drain | ActionKind::Undrain => {
                let drain = kind == ActionKind::Drain;
                if drain {
                    power.m.drains += 1;
                } else {
                    power.m.undrains += 1;
                }
                power.drained_by[h as usize] = drain.then_some(DrainedBy::ScalingPlan);
                let name = host_name(h);
                let mut spec = self.pool.find_host(&name)?.spec.clone();
                spec.allow_new_session = !drain;
                self.pool.upsert_host(spec, self.now())?;
                self.pool.clear_changes();
                self.touch(h);
            }
            ActionKind::Notify => {
                let sessions = self.pool.find_host(&host_name(h))?.sessions;
                let power = self.power.as_mut().expect("a plan's run has power");
                power.m.sessions_notified += u64::from(sessions);
            }
            ActionKind::Logoff => self.end_sessions_on(h)?,
        }
        Ok(())
    }

    /// Ends every session on host `h` for the plan. A user who was working
    /// (logging on or Active) logs on again a few minutes later; a
    /// disconnected one had left and does not come back.
    fn end_sessions_on(&mut self, h: u32) -> Result<(), SimError> {
        let mut on: Vec<u32> = self
            .sessions
            .users()
            .filter(|&u| self.users[u as usize].session_host == h)
            .collect();
        on.sort_unstable();
        for u in on {
            let state = self.users[u as usize].state;
            let Some(n) = self.users[u as usize].session else {
                continue;
            };
            self.end_session(u, n)?;
            self.acc.ended_by_plan += 1;
            self.release(u, state);
            self.users[u as usize].state = State::Absent;
            let power = self.power.as_mut().expect("a plan's run has power");
            power.m.sessions_ended_by_plan += 1;
            if matches!(state, State::LoggingOn { .. } | State::Active { .. }) {
                let after = power
                    .rng
                    .random_range(RELOGON_SECONDS.0..=RELOGON_SECONDS.1);
                let at = self.now_ms + after * SECOND;
                self.push(at, Ev::User(u, UserAction::Connect));
            }
        }
        Ok(())
    }

    /// A started host has booted: its agent's first heartbeat makes it
    /// available.
    pub(super) fn booted(&mut self, h: u32, v: u64) -> Result<(), SimError> {
        let t = self.now_ms;
        let power = self.power.as_mut().expect("a plan's run has power");
        if power.version[h as usize] != v || power.state[h as usize] != PowerState::Starting {
            return Ok(());
        }
        power.set_state(h, PowerState::Running, t);
        let (cpu, memory) = self.hosts[h as usize].sample(t);
        self.heartbeat(h, cpu, memory)
    }

    pub(super) fn halted(&mut self, h: u32, v: u64) {
        let t = self.now_ms;
        let power = self.power.as_mut().expect("a plan's run has power");
        if power.version[h as usize] == v && power.state[h as usize] == PowerState::Stopping {
            power.set_state(h, PowerState::Stopped, t);
        }
    }

    /// A logon was refused for want of an open host: the user tries again
    /// every [`LOGON_RETRY_SECONDS`] for up to [`MAX_WAIT_SECONDS`], and the
    /// plan evaluates at once (as the broker does on a refused connect).
    pub(super) fn wait_for_host(&mut self, u: u32) -> Result<(), SimError> {
        let t = self.now_ms;
        let user = &mut self.users[u as usize];
        let since = *user.waiting_since.get_or_insert(t);
        if t - since >= MAX_WAIT_SECONDS * SECOND {
            user.waiting_since = None;
            if let Some(p) = &mut self.power {
                p.m.gave_up += 1;
            }
        } else if !user.wait_retry_pending {
            user.wait_retry_pending = true;
            self.push(t + LOGON_RETRY_SECONDS * SECOND, Ev::WaitRetry(u));
        }
        if self.cfg.start_on_connect {
            self.start_on_connect(u)?;
        }
        self.evaluate_plan()
    }

    /// A8: the engine's choice of a stopped host to start for this user,
    /// carried out (undrained first when the plan had drained it).
    fn start_on_connect(&mut self, u: u32) -> Result<(), SimError> {
        let Some(power) = &self.power else {
            return Ok(());
        };
        if power.plan.is_none() {
            return Ok(());
        }
        let req = placement::ConnectRequest {
            user: self.world.scenario.users[u as usize].as_str(),
            ..placement::ConnectRequest::default()
        };
        let (state, drained_by) = (&power.state, &power.drained_by);
        let view = self.pool.scaling_view(|h| {
            let i = host_index(&h.spec.name) as usize;
            HostPower {
                power_state: state[i],
                drained_by: drained_by[i],
                tags: NO_TAGS,
            }
        });
        let start = match placement::autoscale::start_on_connect(&view, self.pool.config(), &req) {
            StartOnConnect::Start { host, undrain } => Some((host_index(host), undrain)),
            StartOnConnect::AlreadyStarting { .. } | StartOnConnect::NoHost => None,
        };
        drop(view);
        if let Some((h, undrain)) = start {
            if undrain {
                self.apply(h, ActionKind::Undrain)?;
            }
            self.apply(h, ActionKind::Start)?;
            let power = self.power.as_mut().expect("a plan's run has power");
            power.m.started_on_connect += 1;
        }
        Ok(())
    }
}
