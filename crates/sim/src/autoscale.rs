//! The simulator's side of autoscale (rules A1–A7): the built-in
//! scaling plan, reading a plan file, the power model's constants and the
//! measures of a day with and without a plan.
//!
//! Why it exists: an operator asks what a scaling plan saves and what it
//! costs users before letting it power hosts off. The run itself
//! (`run::power`) calls the engine's own decisions
//! (`placement::autoscale::{phase_in_force, evaluate}` over
//! `Pool::scaling_view`), never a second implementation; this module holds
//! only what the simulator adds around them.

use placement::LoadBalancerType;
use placement::autoscale::{DayOfWeek, ScalingPlan, Schedule, StopHostsWhen};
use serde::Serialize;

use crate::SimError;

/// `--autoscale-interval` when not given: the broker's default.
pub const DEFAULT_INTERVAL_SECONDS: u32 = 30;
/// The shortest and longest evaluation interval a run accepts.
pub const MIN_INTERVAL_SECONDS: u32 = 5;
pub const MAX_INTERVAL_SECONDS: u32 = 3_600;
/// A host started by the plan boots in this many seconds (uniform, seeded):
/// a VM's power-on, OS boot and the agent's first heartbeat.
pub const BOOT_SECONDS: (i64, i64) = (120, 240);
/// A host stopped by the plan shuts down in this many seconds (uniform).
pub const SHUTDOWN_SECONDS: (i64, i64) = (30, 60);
/// A user refused for want of an open host tries again this often (the
/// client's retry, as after the broker's 503 with `Retry-After`).
pub const LOGON_RETRY_SECONDS: i64 = 30;
/// A user who has waited this long for a host gives up (counted).
pub const MAX_WAIT_SECONDS: i64 = 30 * 60;
/// A user logged off by the plan while working logs on again after this
/// many seconds (uniform); a disconnected one does not come back.
pub const RELOGON_SECONDS: (i64, i64) = (60, 300);
/// The largest plan file read.
pub const MAX_PLAN_FILE_BYTES: u64 = 1024 * 1024;

/// A plan and where it came from (`built-in` or the file's path), for the
/// report.
#[derive(Clone, Debug)]
pub struct PlanSource {
    pub name: String,
    pub plan: ScalingPlan,
}

impl PlanSource {
    /// The built-in plan: [`default_plan`].
    pub fn built_in() -> PlanSource {
        PlanSource {
            name: "built-in".into(),
            plan: default_plan(),
        }
    }

    /// Reads a plan file: the body of `PUT /api/v1/scalingPlans/{plan}`
    /// (docs/api.md), at most [`MAX_PLAN_FILE_BYTES`], validated as the API
    /// validates it.
    pub fn read(path: &std::path::Path) -> Result<PlanSource, SimError> {
        let err = |m: String| SimError::Invalid(format!("--scaling-plan {}: {m}", path.display()));
        let meta = std::fs::metadata(path).map_err(|e| err(e.to_string()))?;
        if meta.len() > MAX_PLAN_FILE_BYTES {
            return Err(err(format!(
                "{} bytes is larger than the limit of {MAX_PLAN_FILE_BYTES}",
                meta.len()
            )));
        }
        let data = std::fs::read(path).map_err(|e| err(e.to_string()))?;
        let plan: ScalingPlan = serde_json::from_slice(&data).map_err(|e| err(e.to_string()))?;
        plan.validate().map_err(|e| err(e.to_string()))?;
        Ok(PlanSource {
            name: path.display().to_string(),
            plan,
        })
    }
}

/// The built-in plan, shaped to the `day` scenario (06:00–20:00 UTC on a
/// Monday, arrivals 07:00–09:00, departures 16:00–18:30), in UTC, Monday to
/// Friday, with AVD's usual choices: ramp-up from 06:00 keeps a fifth of
/// the hosts on and adds hosts above 60 % used capacity (breadth-first, so
/// the morning's logons spread); peak from 09:30; ramp-down from 16:00
/// packs (depth-first), holds to 90 % and a tenth of the hosts; off-peak
/// from 19:00. No force logoff and stop only empty hosts: the plan never
/// ends a session.
pub fn default_plan() -> ScalingPlan {
    ScalingPlan {
        time_zone: "UTC".into(),
        host_pools: vec!["sim".into()],
        exclusion_tag: None,
        schedules: vec![Schedule {
            name: "weekdays".into(),
            days_of_week: vec![
                DayOfWeek::Monday,
                DayOfWeek::Tuesday,
                DayOfWeek::Wednesday,
                DayOfWeek::Thursday,
                DayOfWeek::Friday,
            ],
            ramp_up_start_time: "06:00".into(),
            ramp_up_load_balancing_algorithm: LoadBalancerType::BreadthFirst,
            ramp_up_minimum_hosts_pct: 20,
            ramp_up_capacity_threshold_pct: 60,
            peak_start_time: "09:30".into(),
            peak_load_balancing_algorithm: LoadBalancerType::BreadthFirst,
            peak_minimum_hosts_pct: None,
            ramp_down_start_time: "16:00".into(),
            ramp_down_load_balancing_algorithm: LoadBalancerType::DepthFirst,
            ramp_down_minimum_hosts_pct: 10,
            ramp_down_capacity_threshold_pct: 90,
            ramp_down_force_logoff_users: false,
            ramp_down_wait_time_minutes: placement::autoscale::DEFAULT_WAIT_TIME_MINUTES,
            ramp_down_notification_message: String::new(),
            ramp_down_stop_hosts_when: StopHostsWhen::ZeroSessions,
            off_peak_start_time: "19:00".into(),
            off_peak_load_balancing_algorithm: LoadBalancerType::DepthFirst,
            off_peak_minimum_hosts_pct: None,
        }],
    }
}

/// What the power of one run did: the same measures with and without a
/// plan, so the two can be compared line by line.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PowerMeasures {
    /// Whether this run had the plan (false: every host always on).
    pub scaling_plan: bool,
    /// Hours hosts spent Running, Starting or Stopping, summed.
    pub host_hours: f64,
    /// The most hosts powered (Running, Starting or Stopping) at once.
    pub peak_powered_hosts: u32,
    /// Logons refused at least once for want of an open host, then placed.
    pub waited_logons: u64,
    /// The longest such wait, first attempt to placement, in seconds.
    pub worst_wait_seconds: f64,
    /// Users who waited [`MAX_WAIT_SECONDS`] and gave up, or left (logged
    /// off or disconnected in the scenario) while waiting.
    pub gave_up: u64,
    /// The highest used capacity seen at an evaluation interval: sessions ÷
    /// (maxSessionLimit × available hosts), in percent, as A3 counts it.
    pub peak_used_capacity_pct: u32,
    /// Sessions the plan ended: logged off after its notice (A5's force
    /// logoff), or ended with a host stopped under `ZeroActiveSessions`.
    pub sessions_ended_by_plan: u64,
    /// Sessions sent the plan's notification.
    pub sessions_notified: u64,
    /// The plan's actions by kind.
    pub starts: u64,
    pub stops: u64,
    pub drains: u64,
    pub undrains: u64,
    /// Hosts started for a refused logon (A8, `--start-on-connect`); also
    /// counted in `starts`.
    pub started_on_connect: u64,
    /// Actions on a host an operator had drained: A6 says never; counted
    /// so that a test can hold the engine to it.
    pub actions_on_operator_drained: u64,
    /// Per minute: powered hosts and sessions (for the plot).
    #[serde(skip)]
    pub minute: Vec<u32>,
    #[serde(skip)]
    pub powered_hosts: Vec<u32>,
    #[serde(skip)]
    pub sessions: Vec<u32>,
}

/// One line of the autoscale table: a policy with or without the plan.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AutoscaleRow {
    pub policy: String,
    /// `none` (all hosts always on), or the plan's source.
    pub plan: String,
    pub host_hours: f64,
    /// Against the same policy with every host always on.
    pub host_hours_saved_pct: f64,
    pub peak_powered_hosts: u32,
    pub waited_logons: u64,
    pub worst_wait_seconds: f64,
    pub gave_up: u64,
    pub peak_used_capacity_pct: u32,
    pub sessions_ended_by_plan: u64,
    pub starts: u64,
    pub stops: u64,
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// The table's rows from the report's results: each run with a plan
/// follows the same policy's run without one.
pub fn rows(results: &[crate::PolicyResult], plan_name: &str) -> Vec<AutoscaleRow> {
    let mut out = Vec::new();
    let mut baseline = 0.0;
    for r in results {
        let Some(p) = &r.power else { continue };
        if !p.scaling_plan {
            baseline = p.host_hours;
        }
        let saved = if p.scaling_plan && baseline > 0.0 {
            round1(100.0 * (baseline - p.host_hours) / baseline)
        } else {
            0.0
        };
        out.push(AutoscaleRow {
            policy: r.policy.clone(),
            plan: if p.scaling_plan {
                plan_name.to_string()
            } else {
                "none".into()
            },
            host_hours: p.host_hours,
            host_hours_saved_pct: saved,
            peak_powered_hosts: p.peak_powered_hosts,
            waited_logons: p.waited_logons,
            worst_wait_seconds: p.worst_wait_seconds,
            gave_up: p.gave_up,
            peak_used_capacity_pct: p.peak_used_capacity_pct,
            sessions_ended_by_plan: p.sessions_ended_by_plan,
            starts: p.starts,
            stops: p.stops,
        });
    }
    out
}

impl PowerMeasures {
    pub(crate) fn rounded(mut self) -> PowerMeasures {
        self.host_hours = round1(self.host_hours);
        self.worst_wait_seconds = round1(self.worst_wait_seconds);
        self
    }
}
