//! The deterministic simulator of deskbroker: replays a logon storm, a
//! working day, a host failure or a user's own trace against several
//! placement policies, with the real engine (`placement::Pool`), and
//! measures what each policy does to the hosts.
//!
//! Why it exists: operators choose an algorithm, session limits and storm
//! thresholds with no way to try them. Here one seed reproduces a whole run
//! (TigerBeetle's VOPR habit), the policies of the sources run through the
//! very code the broker runs, and the policies of other products run
//! through `Pool::connect_picked`, so every rule they share (reconnect S1,
//! eligibility S2, limits P4, refusals S3, reservations S4, health S7) is
//! the engine's, never a second implementation.
//!
//! Layout: [`scenario`] builds what users and hosts do; [`host`] is the
//! host model (CPU and memory per session, slower while overloaded, stale
//! metrics); [`policy`] names the policies and holds the other products'
//! picks; `run` is the event loop; [`report`] holds the measures and their
//! JSON (the binary prints their table with the CLI's output formats);
//! [`plot`] draws them. Nothing here reads a clock or an unseeded RNG.

pub mod autoscale;
pub mod host;
pub mod plot;
pub mod policy;
pub mod report;
mod run;
pub mod scenario;

pub use policy::Policy;
pub use report::{Accounting, PolicyResult, Report};
pub use run::{LoggedOp, T0, run, run_policy};
pub use scenario::{Scenario, ScenarioKind, Trace};

use std::sync::atomic::AtomicU64;

/// The most hosts a run may have.
pub const MAX_HOSTS: u32 = 10_000;
/// The most users a run may have (built-in scenarios and traces).
pub const MAX_USERS: u32 = 1_000_000;

/// Everything that decides a run; the same value and seed give the same
/// report, byte for byte.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub scenario: ScenarioKind,
    pub hosts: u32,
    pub users: u32,
    pub seed: u64,
    pub policies: Vec<Policy>,
    /// How often hosts sample their metrics and send a heartbeat (rule H4).
    pub sample_seconds: u32,
    /// How long the morning logon storm lasts.
    pub storm_minutes: u32,
    /// Share of hosts with half the CPU and memory (an older generation).
    pub small_hosts_percent: u32,
    /// The pools' `maxSessionLimit`; `None`: twice the users per host.
    pub max_session_limit: Option<u32>,
    /// `logonStormSettings.logonCost` of the corrected LoadIndex policy (H7).
    pub logon_cost: u32,
    /// Keep every host's load series (for plots of up to [`MAX_PLOTTED_HOSTS`]).
    pub keep_host_series: bool,
    /// Record every engine operation (tests replay them; runs without a
    /// scaling plan only).
    pub record_ops: bool,
    /// With a plan, every policy runs twice, all hosts always on and under
    /// the plan; see [`autoscale`].
    pub scaling_plan: Option<autoscale::PlanSource>,
    /// How often the plan is evaluated (the broker's `--autoscale-interval`);
    /// a refused logon also evaluates at once.
    pub autoscale_interval_seconds: u32,
    /// A8: a logon refused for want of an open host starts a stopped host
    /// (the pool's `startVmOnConnect`), in the run with the plan.
    pub start_on_connect: bool,
}

/// Plots draw every host's line up to this many hosts, bands beyond.
pub const MAX_PLOTTED_HOSTS: u32 = 100;

impl SimConfig {
    pub fn new(scenario: ScenarioKind, hosts: u32, users: u32, seed: u64) -> SimConfig {
        SimConfig {
            scenario,
            hosts,
            users,
            seed,
            policies: Policy::ALL.to_vec(),
            sample_seconds: 30,
            storm_minutes: 30,
            small_hosts_percent: 33,
            max_session_limit: None,
            logon_cost: policy::DEFAULT_LOGON_COST,
            keep_host_series: false,
            record_ops: false,
            scaling_plan: None,
            autoscale_interval_seconds: autoscale::DEFAULT_INTERVAL_SECONDS,
            start_on_connect: false,
        }
    }

    /// Checks every bound at once; the message names the flag.
    pub fn validate(&self) -> Result<(), SimError> {
        let bad = |m: String| Err(SimError::Invalid(m));
        if !(1..=MAX_HOSTS).contains(&self.hosts) {
            return bad(format!(
                "--hosts: {} must be from 1 to {MAX_HOSTS}",
                self.hosts
            ));
        }
        if !(1..=MAX_USERS).contains(&self.users) {
            return bad(format!(
                "--users: {} must be from 1 to {MAX_USERS}",
                self.users
            ));
        }
        if self.policies.is_empty() {
            return bad("--policies: name at least one policy".into());
        }
        if !(5..=600).contains(&self.sample_seconds) {
            return bad(format!(
                "--sample-seconds: {} must be from 5 to 600 (rule H4)",
                self.sample_seconds
            ));
        }
        if !(1..=600).contains(&self.storm_minutes) {
            return bad(format!(
                "--storm-minutes: {} must be from 1 to 600",
                self.storm_minutes
            ));
        }
        if self.small_hosts_percent > 100 {
            return bad(format!(
                "--small-hosts: {} must be a percentage from 0 to 100",
                self.small_hosts_percent
            ));
        }
        if let Some(l) = self.max_session_limit
            && l > placement::MAX_SESSION_LIMIT
        {
            return bad(format!(
                "--max-session-limit: {l} must be from 0 to {}",
                placement::MAX_SESSION_LIMIT
            ));
        }
        if self.logon_cost > 100 {
            return bad(format!(
                "--logon-cost: {} must be from 0 to 100",
                self.logon_cost
            ));
        }
        if let Some(plan) = &self.scaling_plan {
            plan.plan
                .validate()
                .map_err(|e| SimError::Invalid(format!("--scaling-plan {}: {e}", plan.name)))?;
            if let Some(p) = self.policies.iter().find(|p| !p.is_engine()) {
                return bad(format!(
                    "--policies: {} is another product's pick, which runs without deskbroker's \
                     scaling plans; with a plan compare BreadthFirst, BreadthFirstClassic, \
                     DepthFirst, LoadIndex or LoadIndexCorrected",
                    p.name()
                ));
            }
            if !(autoscale::MIN_INTERVAL_SECONDS..=autoscale::MAX_INTERVAL_SECONDS)
                .contains(&self.autoscale_interval_seconds)
            {
                return bad(format!(
                    "--autoscale-interval: {} must be from {} to {} seconds",
                    self.autoscale_interval_seconds,
                    autoscale::MIN_INTERVAL_SECONDS,
                    autoscale::MAX_INTERVAL_SECONDS
                ));
            }
        }
        Ok(())
    }
}

/// Why a run could not be made. Every message is one line for the user.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("{0}")]
    Invalid(String),
    #[error("trace {path}: {message}")]
    Trace { path: String, message: String },
    #[error("the engine refused an operation the simulator must be able to make: {0}")]
    Engine(#[from] placement::Error),
    #[error("accounting does not add up for {policy}: {message}")]
    Accounting { policy: String, message: String },
    #[error("plot: {0}")]
    Plot(String),
}

/// Progress for a progress bar: events processed so far over all policies.
#[derive(Debug, Default)]
pub struct Progress {
    pub events: AtomicU64,
}
