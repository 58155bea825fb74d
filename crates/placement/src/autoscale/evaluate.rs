//! One evaluation of a scaling plan over one pool (rules A3–A7): from the
//! pool as the plan sees it, the phase in force, what the plan remembers
//! and the time, the figures and the actions to take now.
//!
//! It is a pure function, so the broker (on every session change and every
//! `--autoscale-interval`) and the simulator run the same decisions, and a
//! restart that evaluates again decides the same. It is idempotent over
//! the caller's bookkeeping: the caller applies each action's immediate
//! effect to what it shows the next evaluation (Start → `Starting`, Stop →
//! `Stopping`, Drain → drained by the plan, Undrain → accepting new
//! sessions) and keeps the returned [`PlanMemory`]; then evaluating again
//! never repeats an action for the same host.
//!
//! The words (A-section preamble): a host is *excluded* when it carries the
//! plan's exclusion tag; *available* when running, `Available`, accepting
//! new sessions and not excluded; *serving* when available or starting
//! (A4 counts a starting host as available); *open* when serving and under
//! the session limit (A7). Capacity is the limit times the serving hosts.
//! Used capacity counts the sessions of every host the plan may manage
//! (excluded hosts and their sessions are outside the plan, as in AVD: a
//! full excluded host must not make the plan start hosts).

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::phase::{Phase, ResolvedPhase};
use super::plan::StopHostsWhen;
use super::view::{ScalingHost, ScalingView};
use crate::model::{PowerState, TimestampMs};

/// What the plan must remember between evaluations of one pool, which the
/// pool itself does not show: when it told a drained host's users to log
/// off, and when it logged them off. Only hosts the plan is draining have
/// an entry, so it is bounded by the pool's size.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanMemory {
    pub hosts: BTreeMap<String, HostMemory>,
}

/// What the plan remembers of one host it drains (A5's force logoff).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostMemory {
    /// When its users were sent the notification; the logoff is due
    /// `rampDownWaitTimeMinutes` later.
    pub notified_at_ms: Option<TimestampMs>,
    /// When its users were logged off; not repeated (a failed logoff is the
    /// caller's to retry with backoff, A10).
    pub logged_off_at_ms: Option<TimestampMs>,
}

/// The kinds of action, as the contract's `scalingActions` spells them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ActionKind {
    Start,
    Stop,
    Drain,
    Undrain,
    /// Send every user of the host the phase's notification message.
    Notify,
    /// Log off every session of the host.
    Logoff,
}

/// Why the plan took an action: structured and `Copy`, so an evaluation
/// that starts thousands of hosts does not format thousands of sentences;
/// it reads (and serializes) as a sentence through `Display`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A4: used capacity above the threshold with `serving` serving hosts.
    AboveThreshold {
        used_capacity_pct: u32,
        threshold_pct: u32,
        serving: u32,
    },
    /// A4: fewer serving hosts than the phase's minimum.
    BelowMinimum { serving: u32, minimum: u32 },
    /// A7: no open host, and the phase's minimum is above 0.
    NoOpenHost,
    /// A5: used capacity stays within the threshold and the minimum holds
    /// without the host; `serving` are left.
    ScaleIn {
        threshold_pct: u32,
        minimum: u32,
        serving: u32,
    },
    /// A5: a host the plan drained has no session left (or, with
    /// `ZeroActiveSessions`, no active one).
    Drained { stop_hosts_when: StopHostsWhen },
    /// A5: ramp-down with force logoff; the logoff follows in `wait_minutes`.
    ForceLogoffNotice { wait_minutes: u32 },
    /// A5: the wait after the notification is over.
    WaitOver { wait_minutes: u32 },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Reason::AboveThreshold {
                used_capacity_pct,
                threshold_pct,
                serving,
            } => write!(
                f,
                "used capacity {used_capacity_pct}% is above the threshold {threshold_pct}% with \
                 {serving} serving host(s)"
            ),
            Reason::BelowMinimum { serving, minimum } => write!(
                f,
                "{serving} serving host(s), fewer than the minimum {minimum}"
            ),
            Reason::NoOpenHost => {
                write!(f, "no open host left, and the phase's minimum is above 0")
            }
            Reason::ScaleIn {
                threshold_pct,
                minimum,
                serving,
            } => write!(
                f,
                "used capacity stays at or below {threshold_pct}% and the minimum {minimum} holds \
                 without it ({serving} serving host(s) left)"
            ),
            Reason::Drained {
                stop_hosts_when: StopHostsWhen::ZeroSessions,
            } => write!(f, "drained by the plan and has no session left"),
            Reason::Drained {
                stop_hosts_when: StopHostsWhen::ZeroActiveSessions,
            } => write!(
                f,
                "drained by the plan and has no active session left (ZeroActiveSessions)"
            ),
            Reason::ForceLogoffNotice { wait_minutes } => write!(
                f,
                "ramp-down with force logoff: its users are logged off in {wait_minutes} minute(s)"
            ),
            Reason::WaitOver { wait_minutes } => write!(
                f,
                "the {wait_minutes} minute(s) since its users were notified are over"
            ),
        }
    }
}

impl Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One action the plan takes now, with why. Serializes as the contract's
/// `action`, `sessionHost`, `reason` (a sentence) and `message`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Action {
    pub action: ActionKind,
    pub session_host: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub reason: Reason,
    /// The message a `Notify` sends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What the plan is waiting for, when it holds still with work left.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Waiting {
    /// Hosts it started that are not yet available.
    HostsStarting { hosts: u32 },
    /// More hosts are needed and none is left that it may start or undrain.
    NoHostToStart { short_by_hosts: u32 },
    /// Hosts it drained whose sessions have not ended yet.
    SessionsToEnd { hosts: u32 },
    /// The first logoff due after a notification.
    LogoffDue {
        session_host: String,
        at_ms: TimestampMs,
    },
}

impl fmt::Display for Waiting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Waiting::HostsStarting { hosts } => write!(f, "{hosts} host(s) to finish starting"),
            Waiting::NoHostToStart { short_by_hosts } => write!(
                f,
                "{short_by_hosts} more host(s), but no stopped host is left that the plan may \
                 start"
            ),
            Waiting::SessionsToEnd { hosts } => {
                write!(f, "the sessions of {hosts} drained host(s) to end")
            }
            Waiting::LogoffDue {
                session_host,
                at_ms,
            } => write!(f, "the logoff of {session_host} due at {at_ms} ms"),
        }
    }
}

/// The figures of one evaluation, taken before its actions: what the
/// status shows and each action's record carries (A10).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Figures {
    pub phase: Phase,
    /// Sessions ÷ capacity, rounded up, so it is above the threshold
    /// exactly when the unrounded figure is. 100 when the capacity is 0 and
    /// a session exists, 0 when both are.
    pub used_capacity_pct: u32,
    pub capacity_threshold_pct: u32,
    /// Sessions of the hosts the plan may manage.
    pub sessions: u64,
    /// Running (power state) and not excluded.
    pub running_hosts: u32,
    pub available_hosts: u32,
    pub starting_hosts: u32,
    /// A3: ceil(pct × managed hosts / 100).
    pub minimum_hosts: u32,
    /// Every host but the excluded: the minimum's base.
    pub managed_hosts: u32,
    pub excluded_hosts: u32,
    pub operator_drained_hosts: u32,
    pub plan_drained_hosts: u32,
    pub waiting_for: Vec<Waiting>,
}

/// The outcome of one evaluation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evaluation {
    pub figures: Figures,
    /// In the order to take them: scale out (undrain, start), scale in
    /// (drain, notify, stop), then the hosts the plan drained earlier
    /// (notify, logoff, stop).
    pub actions: Vec<Action>,
    /// What to keep for the next evaluation of this pool.
    pub memory: PlanMemory,
}

/// The numbers scale-out and scale-in weigh (A4, A5, A7).
#[derive(Clone, Copy)]
struct Load {
    sessions: u64,
    limit: u64,
    threshold_pct: u64,
    minimum: u32,
}

impl Load {
    /// Why the pool needs one more serving host with `serving` serving
    /// hosts of which `open` are open, or `None` when it does not.
    fn need(&self, serving: u32, open: u32) -> Option<Reason> {
        let capacity = self.limit * serving as u64;
        // A4's capacity: used > threshold, i.e. sessions × 100 > threshold ×
        // capacity, in integers. A limit of 0 has no capacity to add, so it
        // never asks for hosts on this ground (nor on A7's).
        if self.limit > 0 && self.sessions * 100 > self.threshold_pct * capacity {
            return Some(Reason::AboveThreshold {
                used_capacity_pct: used_pct(self.sessions, capacity),
                threshold_pct: self.threshold_pct as u32,
                serving,
            });
        }
        if serving < self.minimum {
            return Some(Reason::BelowMinimum {
                serving,
                minimum: self.minimum,
            });
        }
        if self.minimum > 0 && self.limit > 0 && open == 0 {
            return Some(Reason::NoOpenHost);
        }
        None
    }
}

fn used_pct(sessions: u64, capacity: u64) -> u32 {
    match (sessions, capacity) {
        (0, _) => 0,
        (_, 0) => 100,
        (s, c) => (s * 100).div_ceil(c).min(u32::MAX as u64) as u32,
    }
}

/// One evaluation (A3–A7). See the module for the words and for what the
/// caller keeps between evaluations.
///
/// In phases: `count` takes the figures (A3), then either `scale_out`
/// (A4, A7) when the pool needs a host or `scale_in` (A5) when it does
/// not, then `tend_drained` carries on with the hosts the plan drains
/// (A5), and `waiting_for` says what the plan waits for.
pub fn evaluate(
    view: &ScalingView<'_>,
    phase: &ResolvedPhase,
    memory: &PlanMemory,
    now_ms: TimestampMs,
) -> Evaluation {
    let pass = Pass {
        view,
        phase,
        limit: view.max_session_limit as u64,
    };
    let (mut figures, open) = pass.count();
    let load = Load {
        sessions: figures.sessions,
        limit: pass.limit,
        threshold_pct: phase.capacity_threshold_pct as u64,
        minimum: figures.minimum_hosts,
    };
    let mut serving = Serving {
        hosts: figures.available_hosts + figures.starting_hosts,
        open,
    };
    let mut decided = Decided {
        actions: Vec::new(),
        undrained: vec![false; view.hosts.len()],
        drained_now: Vec::new(),
    };
    match load.need(serving.hosts, serving.open) {
        Some(first_reason) => {
            let short = pass.scale_out(&load, first_reason, &mut serving, &mut decided);
            figures.waiting_for.extend(short);
        }
        None => pass.scale_in(&load, &mut serving, &mut decided),
    }
    let drained = pass.tend_drained(memory, now_ms, &mut decided);
    figures
        .waiting_for
        .extend(waiting_for(figures.starting_hosts, &drained));
    Evaluation {
        figures,
        actions: decided.actions,
        memory: drained.memory,
    }
}

impl Action {
    /// Take `action` on `host` because of `reason`, with no message.
    fn new(action: ActionKind, host: &ScalingHost<'_>, reason: Reason) -> Action {
        Action {
            action,
            session_host: host.name.to_string(),
            reason,
            message: None,
        }
    }
}

/// One evaluation's reading of the pool and the phase, with the words of
/// the module over them.
struct Pass<'e, 'v> {
    view: &'e ScalingView<'v>,
    phase: &'e ResolvedPhase,
    /// `maxSessionLimit`: each serving host's share of the capacity.
    limit: u64,
}

/// The serving hosts and the open ones among them, as the actions taken so
/// far leave them (a started or undrained host serves at once, A4).
struct Serving {
    hosts: u32,
    open: u32,
}

/// What the evaluation decided so far.
struct Decided {
    actions: Vec<Action>,
    /// By index in the view: hosts this evaluation undrains (they leave
    /// the draining bookkeeping).
    undrained: Vec<bool>,
    /// Hosts this evaluation drains (they enter it), by index in the view.
    drained_now: Vec<usize>,
}

/// The hosts the plan drains, as [`Pass::tend_drained`] leaves them.
struct Drained<'e> {
    /// How many still have sessions to end.
    draining: u32,
    /// The first logoff due after a notification, and its host.
    logoff_due: Option<(TimestampMs, &'e str)>,
    /// What to keep for the next evaluation.
    memory: PlanMemory,
}

impl<'e, 'v> Pass<'e, 'v> {
    /// A6: every host but those carrying the exclusion tag.
    fn managed(&self, h: &ScalingHost<'_>) -> bool {
        !h.excluded(self.phase.exclusion_tag.as_deref())
    }

    /// Running, `Available`, accepting new sessions and managed.
    fn available(&self, h: &ScalingHost<'_>) -> bool {
        self.managed(h)
            && h.power_state == PowerState::Running
            && h.available
            && h.allow_new_session
    }

    /// Starting, accepting new sessions and managed: A4 counts it serving.
    fn starting(&self, h: &ScalingHost<'_>) -> bool {
        self.managed(h) && h.power_state == PowerState::Starting && h.allow_new_session
    }

    /// 1 when the host is under the session limit (open, if serving), else 0.
    fn under_limit(&self, h: &ScalingHost<'_>) -> u32 {
        ((h.sessions as u64) < self.limit) as u32
    }

    /// A5: no session left, or no active one under `ZeroActiveSessions`.
    fn stoppable(&self, h: &ScalingHost<'_>) -> bool {
        h.sessions == 0
            || (self.phase.stop_hosts_when == StopHostsWhen::ZeroActiveSessions
                && h.active_sessions == 0)
    }

    /// A3 and the words: the figures before any action (the minimum is
    /// `ceil(pct × managed hosts / 100)`, used capacity is the managed
    /// hosts' sessions over the available hosts' capacity), and how many
    /// serving hosts are open (A7).
    fn count(&self) -> (Figures, u32) {
        let mut f = Figures {
            phase: self.phase.phase,
            used_capacity_pct: 0,
            capacity_threshold_pct: self.phase.capacity_threshold_pct,
            sessions: 0,
            running_hosts: 0,
            available_hosts: 0,
            starting_hosts: 0,
            minimum_hosts: 0,
            managed_hosts: 0,
            excluded_hosts: 0,
            operator_drained_hosts: 0,
            plan_drained_hosts: 0,
            waiting_for: Vec::new(),
        };
        let mut open = 0u32;
        for h in &self.view.hosts {
            if !self.managed(h) {
                f.excluded_hosts += 1;
                continue;
            }
            f.managed_hosts += 1;
            f.sessions += h.sessions as u64;
            f.running_hosts += (h.power_state == PowerState::Running) as u32;
            f.operator_drained_hosts += h.operator_drained() as u32;
            f.plan_drained_hosts += h.plan_drained() as u32;
            if self.available(h) {
                f.available_hosts += 1;
                open += self.under_limit(h);
            } else if self.starting(h) {
                f.starting_hosts += 1;
                open += self.under_limit(h);
            }
        }
        f.minimum_hosts =
            (self.phase.minimum_hosts_pct as u64 * f.managed_hosts as u64).div_ceil(100) as u32;
        f.used_capacity_pct = used_pct(f.sessions, self.limit * f.available_hosts as u64);
        (f, open)
    }

    /// A4 (and A7), scale out while the pool needs a host: first the
    /// plan's own drained hosts that are up (most sessions first: the
    /// emptiest stay drained and stop soonest), then stopped hosts in query
    /// order, never an operator's drained host (A6). Each counts as serving
    /// at once. When none is left, says how many more would be needed.
    fn scale_out(
        &self,
        load: &Load,
        first_reason: Reason,
        serving: &mut Serving,
        decided: &mut Decided,
    ) -> Option<Waiting> {
        let hosts = &self.view.hosts;
        let mut up: Vec<usize> = (0..hosts.len())
            .filter(|&i| {
                let h = &hosts[i];
                self.managed(h)
                    && h.plan_drained()
                    && h.power_state == PowerState::Running
                    && h.available
            })
            .collect();
        up.sort_by_key(|&i| (Reverse(hosts[i].sessions), i));
        let stopped = (0..hosts.len()).filter(|&i| {
            let h = &hosts[i];
            self.managed(h)
                && h.power_state == PowerState::Stopped
                && (h.allow_new_session || h.plan_drained())
        });
        let mut candidates = up.into_iter().chain(stopped);
        let mut reason = Some(first_reason);
        while let Some(why) = reason.take() {
            let Some(i) = candidates.next() else {
                // Count how many more would be needed, for the status.
                let mut short = 1;
                while (short as usize) <= hosts.len()
                    && load
                        .need(serving.hosts + short, serving.open + short)
                        .is_some()
                {
                    short += 1;
                }
                return Some(Waiting::NoHostToStart {
                    short_by_hosts: short,
                });
            };
            let h = &hosts[i];
            if h.plan_drained() {
                decided
                    .actions
                    .push(Action::new(ActionKind::Undrain, h, why));
                decided.undrained[i] = true;
            }
            if h.power_state == PowerState::Stopped {
                decided.actions.push(Action::new(ActionKind::Start, h, why));
            }
            serving.hosts += 1;
            serving.open += self.under_limit(h);
            reason = load.need(serving.hosts, serving.open);
        }
        None
    }

    /// A5 (and A7), scale in when nothing is needed: the available host
    /// with the fewest sessions first (ties: the last in query order), as
    /// long as the pool needs nothing without it. An empty host (see
    /// [`Pass::stoppable`]) is stopped, any other drained.
    fn scale_in(&self, load: &Load, serving: &mut Serving, decided: &mut Decided) {
        let hosts = &self.view.hosts;
        let mut candidates: Vec<usize> = (0..hosts.len())
            .filter(|&i| self.available(&hosts[i]))
            .collect();
        candidates.sort_by_key(|&i| (hosts[i].sessions, Reverse(i)));
        for i in candidates {
            let h = &hosts[i];
            let open_without = serving.open - self.under_limit(h);
            // The first host that must stay ends scale-in: the rest have
            // as many sessions or more, and A5 takes the emptiest first.
            if serving.hosts == 0 || load.need(serving.hosts - 1, open_without).is_some() {
                break;
            }
            serving.hosts -= 1;
            serving.open = open_without;
            let why = Reason::ScaleIn {
                threshold_pct: self.phase.capacity_threshold_pct,
                minimum: load.minimum,
                serving: serving.hosts,
            };
            if self.stoppable(h) {
                decided.actions.push(Action::new(ActionKind::Stop, h, why));
            } else {
                decided.actions.push(Action::new(ActionKind::Drain, h, why));
                decided.drained_now.push(i);
            }
        }
    }

    /// A5, the hosts the plan drains (drained earlier and still running,
    /// unless undrained now, then those drained now): stop one once it is
    /// empty enough (not in the evaluation that drains it); in ramp-down
    /// with force logoff, notify its users once and log them off once the
    /// wait is over; otherwise wait for its sessions to end.
    fn tend_drained(
        &self,
        memory: &PlanMemory,
        now_ms: TimestampMs,
        decided: &mut Decided,
    ) -> Drained<'e> {
        let hosts: &'e [ScalingHost<'v>] = &self.view.hosts;
        let phase = self.phase;
        let mut out = Drained {
            draining: 0,
            logoff_due: None,
            memory: PlanMemory::default(),
        };
        let earlier = (0..hosts.len()).filter(|&i| {
            let h = &hosts[i];
            self.managed(h)
                && h.plan_drained()
                && !decided.undrained[i]
                && h.power_state == PowerState::Running
        });
        let order: Vec<usize> = earlier.chain(decided.drained_now.iter().copied()).collect();
        for i in order {
            let h = &hosts[i];
            let fresh = h.allow_new_session; // drained by this very evaluation
            if self.stoppable(h) && !fresh {
                let why = Reason::Drained {
                    stop_hosts_when: phase.stop_hosts_when,
                };
                decided.actions.push(Action::new(ActionKind::Stop, h, why));
                continue;
            }
            let mut mem = memory.hosts.get(h.name).copied().unwrap_or_default();
            if mem.logged_off_at_ms.is_none() {
                if mem.notified_at_ms.is_none() && phase.force_logoff_users {
                    let why = Reason::ForceLogoffNotice {
                        wait_minutes: phase.wait_time_minutes,
                    };
                    decided.actions.push(Action {
                        message: Some(phase.notification_message.clone()),
                        ..Action::new(ActionKind::Notify, h, why)
                    });
                    mem.notified_at_ms = Some(now_ms);
                }
                if let Some(at) = mem.notified_at_ms {
                    let due = at.saturating_add(phase.wait_time_minutes as i64 * 60_000);
                    if now_ms >= due {
                        let why = Reason::WaitOver {
                            wait_minutes: phase.wait_time_minutes,
                        };
                        decided
                            .actions
                            .push(Action::new(ActionKind::Logoff, h, why));
                        mem.logged_off_at_ms = Some(now_ms);
                    } else if out.logoff_due.is_none_or(|(t, _)| due < t) {
                        out.logoff_due = Some((due, h.name));
                    }
                }
            }
            out.draining += 1;
            if mem != HostMemory::default() {
                out.memory.hosts.insert(h.name.to_string(), mem);
            }
        }
        out
    }
}

/// What the plan waits for once its actions are taken: hosts to finish
/// starting, drained hosts' sessions to end, and the first logoff due.
fn waiting_for(starting_hosts: u32, drained: &Drained<'_>) -> Vec<Waiting> {
    let mut waits = Vec::new();
    if starting_hosts > 0 {
        waits.push(Waiting::HostsStarting {
            hosts: starting_hosts,
        });
    }
    if drained.draining > 0 {
        waits.push(Waiting::SessionsToEnd {
            hosts: drained.draining,
        });
    }
    if let Some((at_ms, host)) = drained.logoff_due {
        waits.push(Waiting::LogoffDue {
            session_host: host.to_string(),
            at_ms,
        });
    }
    waits
}
