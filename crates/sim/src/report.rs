//! The measures of a run, per policy, and their JSON (the binary prints
//! the table and tsv from it, with the CLI's output formats). Nothing here
//! depends on the wall clock, so the same run prints the same bytes.

use serde::Serialize;

/// One run's results.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub scenario: String,
    pub hosts: u32,
    pub small_hosts: u32,
    pub users: u32,
    pub seed: u64,
    pub sample_seconds: u32,
    pub storm_minutes: u32,
    pub max_session_limit: u32,
    pub logon_cost: u32,
    pub simulated_seconds: i64,
    pub results: Vec<PolicyResult>,
    /// The scaling plan compared (`built-in` or its file), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scaling_plan: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autoscale_interval_seconds: Option<u32>,
    /// With a plan: each policy without and with it (the autoscale table).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub autoscale: Vec<crate::autoscale::AutoscaleRow>,
}

/// What one policy did.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyResult {
    pub policy: String,
    /// The worst host's highest CPU demand, averaged over one sample
    /// interval, in percent of its vCPUs. Demand, not use: it passes 100
    /// when a host is asked for more than it has (150: 1.5 × its vCPUs,
    /// everything on it running at about 2/3 of full speed), which a
    /// utilisation figure, capped at 100, would hide.
    pub peak_cpu_percent: f64,
    /// The most logons one host ran at once.
    pub peak_connecting: u32,
    /// Logon time, placement to desktop, in seconds.
    pub logon_p50_seconds: f64,
    pub logon_p99_seconds: f64,
    /// New sessions refused (`NoSessionHostAvailable`).
    pub rejected: u64,
    /// Connects that failed because the user's host was dead or
    /// unavailable (failure scenario), each retried.
    pub failed_attempts: u64,
    /// The most hosts with at least one session at once, and the average.
    pub hosts_in_use_peak: u32,
    pub hosts_in_use_mean: f64,
    /// Mean over time of (hottest host − mean host) CPU demand, in points.
    pub imbalance_mean: f64,
    pub accounting: Accounting,
    /// CPU demand across hosts in service, one point per minute.
    pub series: Series,
    /// Every host's CPU demand per minute, when kept (small runs, plots).
    #[serde(skip)]
    pub host_series: Vec<Vec<f32>>,
    /// Power and waits, in a comparison with a scaling plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub power: Option<crate::autoscale::PowerMeasures>,
}

/// Where every session went: `placed = logged_off + ended_by_failure +
/// released_unreachable + expired + live_at_end`, and the live sessions are
/// the engine's, host by host.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Accounting {
    /// Connect attempts of users without a session (first logons, logons
    /// after a logoff, retries after a failure).
    pub new_session_attempts: u64,
    pub placed: u64,
    pub reconnects: u64,
    pub logons_completed: u64,
    pub logged_off: u64,
    /// Sessions lost with a failed host (ended when it was removed).
    pub ended_by_failure: u64,
    /// Placed on a host that turned out dead, released by the front door.
    pub released_unreachable: u64,
    /// Pending sessions the engine ended (S4).
    pub expired: u64,
    /// Ended by a scaling plan (force logoff, or a host stopped with
    /// disconnected sessions under `ZeroActiveSessions`).
    #[serde(skip_serializing_if = "is_zero")]
    pub ended_by_plan: u64,
    pub live_at_end: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Accounting {
    /// Checks that nothing was lost or counted twice.
    pub fn check(&self, engine_sessions: u64) -> Result<(), String> {
        let ended = self.logged_off
            + self.ended_by_failure
            + self.released_unreachable
            + self.expired
            + self.ended_by_plan
            + self.live_at_end;
        if self.placed != ended {
            return Err(format!(
                "{} placed but {} ended or live ({self:?})",
                self.placed, ended
            ));
        }
        if self.live_at_end != engine_sessions {
            return Err(format!(
                "{} live sessions in the simulator, {engine_sessions} in the engine",
                self.live_at_end
            ));
        }
        if self.logons_completed > self.placed {
            return Err(format!(
                "{} logons completed of {} placed",
                self.logons_completed, self.placed
            ));
        }
        Ok(())
    }
}

/// Quantiles of CPU demand across hosts in service, per minute.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Series {
    pub minute: Vec<u32>,
    pub min: Vec<f32>,
    pub p50: Vec<f32>,
    pub p90: Vec<f32>,
    pub max: Vec<f32>,
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

impl PolicyResult {
    /// Rounds what is shown, so that JSON and table carry the same figures.
    pub fn rounded(mut self) -> PolicyResult {
        self.peak_cpu_percent = round1(self.peak_cpu_percent);
        self.logon_p50_seconds = round1(self.logon_p50_seconds);
        self.logon_p99_seconds = round1(self.logon_p99_seconds);
        self.hosts_in_use_mean = round1(self.hosts_in_use_mean);
        self.imbalance_mean = round1(self.imbalance_mean);
        self.power = self.power.map(|p| p.rounded());
        for v in [
            &mut self.series.min,
            &mut self.series.p50,
            &mut self.series.p90,
            &mut self.series.max,
        ] {
            for x in v.iter_mut() {
                *x = ((*x as f64 * 10.0).round() / 10.0) as f32;
            }
        }
        self
    }
}

impl Report {
    /// What was run, in one line: what the table is headed with.
    pub fn summary(&self) -> String {
        format!(
            "scenario {}: {} hosts ({} small), {} users, seed {}, metrics every {} s, \
             maxSessionLimit {}, logonCost {}",
            self.scenario,
            self.hosts,
            self.small_hosts,
            self.users,
            self.seed,
            self.sample_seconds,
            self.max_session_limit,
            self.logon_cost
        )
    }

    /// The whole report (every measure, the accounting and the per-minute
    /// series), pretty-printed.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report serializes") + "\n"
    }
}
