//! Rules A1–A8: the scaling plan's model and validation, the phase in force
//! (DST included), one evaluation over scripted pools (tables, a whole day,
//! force logoff), start on connect, and the invariants as properties.
//!
//! The shared helpers: [`Farm`], a pool of owned hosts written as a short
//! spec string that builds a [`ScalingView`] and applies actions the way
//! the broker does; [`phase`], a resolved phase with given figures; and
//! [`plan`], the contract's example plan.

use placement::autoscale::{
    Action, ActionKind, DayOfWeek, Phase, ResolvedPhase, ScalingHost, ScalingPlan, ScalingView,
    Schedule, StopHostsWhen,
};
use placement::{DrainedBy, LoadBalancerType, PowerState};

mod connect;
mod day;
mod evaluate;
mod phase;
mod plan;
mod props;

/// The exclusion tag of every test plan.
pub const KEEP: &str = "no-autoscale";

/// A host the test owns; [`Farm::view`] lends it to the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestHost {
    pub name: String,
    pub power: PowerState,
    pub available: bool,
    pub allow_new_session: bool,
    pub drained_by: Option<DrainedBy>,
    pub tags: Vec<String>,
    pub capabilities: Vec<String>,
    pub assigned_user: Option<String>,
    pub sessions: u32,
    pub active: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Farm {
    pub limit: u32,
    pub hosts: Vec<TestHost>,
}

impl Farm {
    /// Hosts in query order as `name:sessions[/active][flags]`, where the
    /// flags are `S` stopped, `s` starting, `x` stopping, `U` unavailable
    /// (status), `D` drained by an operator, `P` drained by the plan, `E`
    /// carrying the exclusion tag. Active defaults to all the sessions.
    pub fn new(limit: u32, spec: &str) -> Farm {
        let hosts = spec
            .split_whitespace()
            .map(|h| {
                let (name, rest) = h.split_once(':').expect("name:sessions");
                let digits_end = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
                let n = digits_end(rest);
                let sessions: u32 = rest[..n].parse().unwrap();
                let mut rest = &rest[n..];
                let mut active = sessions;
                if let Some(r) = rest.strip_prefix('/') {
                    let n = digits_end(r);
                    active = r[..n].parse().unwrap();
                    rest = &r[n..];
                }
                let mut t = TestHost {
                    name: name.to_string(),
                    power: PowerState::Running,
                    available: true,
                    allow_new_session: true,
                    drained_by: None,
                    tags: Vec::new(),
                    capabilities: vec!["rdp".into()],
                    assigned_user: None,
                    sessions,
                    active,
                };
                for flag in rest.chars() {
                    match flag {
                        'S' => t.power = PowerState::Stopped,
                        's' => t.power = PowerState::Starting,
                        'x' => t.power = PowerState::Stopping,
                        'U' => t.available = false,
                        'D' => {
                            t.allow_new_session = false;
                            t.drained_by = Some(DrainedBy::Operator);
                        }
                        'P' => {
                            t.allow_new_session = false;
                            t.drained_by = Some(DrainedBy::ScalingPlan);
                        }
                        'E' => t.tags.push(KEEP.into()),
                        f => panic!("unknown flag {f}"),
                    }
                }
                t
            })
            .collect();
        Farm { limit, hosts }
    }

    pub fn view(&self) -> ScalingView<'_> {
        ScalingView {
            max_session_limit: self.limit,
            hosts: self
                .hosts
                .iter()
                .map(|t| ScalingHost {
                    name: &t.name,
                    power_state: t.power,
                    available: t.available,
                    allow_new_session: t.allow_new_session,
                    drained_by: t.drained_by,
                    tags: &t.tags,
                    capabilities: &t.capabilities,
                    assigned_user: t.assigned_user.as_deref(),
                    sessions: t.sessions,
                    active_sessions: t.active,
                })
                .collect(),
        }
    }

    pub fn host(&mut self, name: &str) -> &mut TestHost {
        self.hosts.iter_mut().find(|h| h.name == name).unwrap()
    }

    /// What the broker does at once for each action: power states move to
    /// their transitional state, drains flip, a logoff ends the sessions.
    pub fn apply(&mut self, actions: &[Action]) {
        for a in actions {
            let h = self.host(&a.session_host);
            match a.action {
                ActionKind::Start => h.power = PowerState::Starting,
                ActionKind::Stop => h.power = PowerState::Stopping,
                ActionKind::Drain => {
                    h.allow_new_session = false;
                    h.drained_by = Some(DrainedBy::ScalingPlan);
                }
                ActionKind::Undrain => {
                    h.allow_new_session = true;
                    h.drained_by = None;
                }
                ActionKind::Notify => {}
                ActionKind::Logoff => {
                    h.sessions = 0;
                    h.active = 0;
                }
            }
        }
    }

    /// The power commands finish: starting hosts run (and heartbeat),
    /// stopping hosts are off.
    pub fn settle(&mut self) {
        for h in &mut self.hosts {
            match h.power {
                PowerState::Starting => h.power = PowerState::Running,
                PowerState::Stopping => h.power = PowerState::Stopped,
                _ => {}
            }
        }
    }
}

/// A resolved phase with the figures a table row needs.
pub fn phase(p: Phase, threshold_pct: u32, minimum_pct: u32) -> ResolvedPhase {
    ResolvedPhase {
        schedule: "test".into(),
        phase: p,
        started_at_ms: 0,
        next_phase_at_ms: i64::MAX,
        load_balancing_algorithm: LoadBalancerType::BreadthFirst,
        capacity_threshold_pct: threshold_pct,
        minimum_hosts_pct: minimum_pct,
        stop_hosts_when: StopHostsWhen::ZeroSessions,
        force_logoff_users: false,
        wait_time_minutes: 30,
        notification_message: "Please save your work and log off.".into(),
        exclusion_tag: Some(KEEP.into()),
    }
}

/// Actions as "Start h3, Drain h2" for table comparisons.
pub fn show(actions: &[Action]) -> String {
    actions
        .iter()
        .map(|a| format!("{:?} {}", a.action, a.session_host))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The contract's example schedule (api.md), weekdays in Stockholm.
pub fn weekdays() -> Schedule {
    use DayOfWeek::*;
    Schedule {
        name: "weekdays".into(),
        days_of_week: vec![Monday, Tuesday, Wednesday, Thursday, Friday],
        ramp_up_start_time: "07:00".into(),
        ramp_up_load_balancing_algorithm: LoadBalancerType::BreadthFirst,
        ramp_up_minimum_hosts_pct: 20,
        ramp_up_capacity_threshold_pct: 60,
        peak_start_time: "09:00".into(),
        peak_load_balancing_algorithm: LoadBalancerType::DepthFirst,
        peak_minimum_hosts_pct: None,
        ramp_down_start_time: "17:00".into(),
        ramp_down_load_balancing_algorithm: LoadBalancerType::DepthFirst,
        ramp_down_minimum_hosts_pct: 10,
        ramp_down_capacity_threshold_pct: 90,
        ramp_down_force_logoff_users: false,
        ramp_down_wait_time_minutes: 30,
        ramp_down_notification_message: "Please save your work and log off.".into(),
        ramp_down_stop_hosts_when: StopHostsWhen::ZeroSessions,
        off_peak_start_time: "20:00".into(),
        off_peak_load_balancing_algorithm: LoadBalancerType::DepthFirst,
        off_peak_minimum_hosts_pct: None,
    }
}

pub fn plan(schedules: Vec<Schedule>) -> ScalingPlan {
    ScalingPlan {
        time_zone: "Europe/Stockholm".into(),
        host_pools: vec!["contosohp01".into()],
        exclusion_tag: Some(KEEP.into()),
        schedules,
    }
}

/// Milliseconds of a UTC "YYYY-MM-DDTHH:MM:SSZ".
pub fn utc(s: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(s)
        .unwrap()
        .timestamp_millis()
}
