//! `deskbroker sim`: the simulator (`crates/sim`) on the command line.
//! Parses and checks the flags, runs every policy asked for, prints the
//! table, tsv (both with the CLI's output formats) or JSON on stdout (the
//! same seed prints the same bytes), writes the plot, and shows a progress
//! bar on stderr when stderr is a terminal.
//! The wall-clock time goes to stderr, never into the report.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use sim::{Policy, ScenarioKind, SimConfig};

use crate::cli::output::{self, Columns, OutputFormat};

/// What `--output table` shows of each policy (the keys of its JSON).
const TABLE_COLUMNS: Columns = &[
    "policy",
    "peakCpuPercent",
    "peakConnecting",
    "logonP50Seconds",
    "logonP99Seconds",
    "rejected",
    "failedAttempts",
    "hostsInUsePeak",
    "hostsInUseMean",
    "imbalanceMean",
];

/// What `--output table` shows of each run in a comparison with a scaling
/// plan (the keys of the report's `autoscale` rows).
const AUTOSCALE_COLUMNS: Columns = &[
    "policy",
    "plan",
    "hostHours",
    "hostHoursSavedPct",
    "peakPoweredHosts",
    "waitedLogons",
    "worstWaitSeconds",
    "gaveUp",
    "peakUsedCapacityPct",
    "sessionsEndedByPlan",
    "starts",
    "stops",
];

/// What `deskbroker sim --help` says after the flags: how to read the
/// measure that surprises, a CPU percentage above 100.
const MEASURES_HELP: &str = "\
Measures, per policy:
  PeakCpuPercent    the worst host's highest CPU demand (what its sessions and
                    logons asked for), averaged over one sample interval, in
                    percent of its vCPUs. Demand, not use: above 100 the host
                    was asked for more than it has; 150 means 1.5 times its
                    vCPUs, so everything on it, logons included, ran at about
                    2/3 of full speed.
  PeakConnecting    the most logons one host ran at once
  LogonP50Seconds, LogonP99Seconds
                    logon time, placement to desktop
  Rejected          new sessions refused (NoSessionHostAvailable)
  FailedAttempts    connects to a dead or unavailable host, each retried
  HostsInUsePeak, HostsInUseMean
                    hosts with at least one session
  ImbalanceMean     hottest host minus the mean host, in CPU points
With --autoscale or --scaling-plan, each policy also runs under the plan
(second table): HostHours (hosts Running, Starting or Stopping), the saving
against every host always on, WaitedLogons (refused for want of an open
host, then placed after retries every 30 s), WorstWaitSeconds, GaveUp,
PeakUsedCapacityPct (sessions / (maxSessionLimit x available hosts)) and
SessionsEndedByPlan (force logoff).
See docs/simulation.md.";

/// Flags of `deskbroker sim`.
#[derive(clap::Args, Debug, Clone)]
#[command(after_help = MEASURES_HELP)]
pub struct SimArgs {
    /// `storm` (a morning logon storm), `day` (a working day with
    /// disconnects, reconnects, logoffs and a maintenance drain), `failure`
    /// (a storm during which 5 % of the hosts fail), or a CSV trace file
    /// `time,user,event` (seconds, user, connect|disconnect|logoff).
    #[arg(long, value_name = "storm|day|failure|TRACE.csv")]
    pub scenario: String,
    /// Session hosts in the pool.
    #[arg(long, default_value_t = 100)]
    pub hosts: u32,
    /// Users of a built-in scenario (a trace brings its own).
    #[arg(long, default_value_t = 5000)]
    pub users: u32,
    /// Seed of everything random; printed with the results.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Policies to compare, comma-separated, or `all`, named as the API
    /// names algorithms: BreadthFirst, BreadthFirstClassic (BreadthFirst
    /// with breadthFirstRandomized false), DepthFirst, LoadIndex,
    /// LeastConnections, PowerOfTwo, LeastLoadStale, CitrixHorizontal,
    /// LoadIndexCorrected (LoadIndex with logonStormSettings.logonCost). Any
    /// case; the former names (breadth-first, load-index-corrected, …) are
    /// accepted too.
    #[arg(long, default_value = "all")]
    pub policies: String,
    /// `table` (the main measures per policy, az-style; PeakCpuPercent is
    /// CPU demand, so above 100 a host was overloaded), `json` (the
    /// whole report: also the accounting of every session and per-minute
    /// quantiles) or `tsv` (the table's rows, every scalar measure).
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    /// Write a plot of CPU per host over time to this SVG file.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Seconds between two metric samples of a host (rule H4).
    #[arg(long, default_value_t = 30)]
    pub sample_seconds: u32,
    /// How long the logon storm lasts (storm and failure scenarios).
    #[arg(long, default_value_t = 30)]
    pub storm_minutes: u32,
    /// Percentage of hosts with half the vCPUs and memory of the others.
    #[arg(long, value_name = "PERCENT", default_value_t = 33)]
    pub small_hosts: u32,
    /// maxSessionLimit of the pools (default: twice the users per host).
    #[arg(long)]
    pub max_session_limit: Option<u32>,
    /// logonStormSettings.logonCost of LoadIndexCorrected (rule H7).
    #[arg(long, default_value_t = sim::policy::DEFAULT_LOGON_COST)]
    pub logon_cost: u32,
    /// Compare every policy with all hosts always on and under the
    /// built-in scaling plan (UTC weekdays, shaped to the `day` scenario;
    /// see docs/simulation.md).
    #[arg(long, conflicts_with = "scaling_plan")]
    pub autoscale: bool,
    /// Compare every policy with all hosts always on and under this
    /// scaling plan: the JSON body of PUT /api/v1/scalingPlans/{plan}.
    /// The simulation starts on Monday 2026-01-05 at 06:00 UTC.
    #[arg(long, value_name = "FILE.json")]
    pub scaling_plan: Option<PathBuf>,
    /// Seconds between two evaluations of the plan (a refused logon also
    /// evaluates at once).
    #[arg(long, value_name = "SECONDS", default_value_t = sim::autoscale::DEFAULT_INTERVAL_SECONDS)]
    pub autoscale_interval: u32,
    /// Under the plan, a logon refused for want of an open host starts a
    /// stopped host (A8, the pool's startVmOnConnect).
    #[arg(long)]
    pub start_on_connect: bool,
    /// Hide the progress bar.
    #[arg(long)]
    pub quiet: bool,
}

impl SimArgs {
    /// The run's configuration, every flag checked (no IO but reading a
    /// trace file).
    fn config(&self) -> anyhow::Result<SimConfig> {
        let kind = match self.scenario.as_str() {
            "storm" => ScenarioKind::Storm,
            "day" => ScenarioKind::Day,
            "failure" => ScenarioKind::Failure,
            path if path.to_ascii_lowercase().ends_with(".csv") => {
                ScenarioKind::Trace(sim::Trace::read(std::path::Path::new(path))?)
            }
            other => anyhow::bail!(
                "--scenario: {other:?} is not storm, day, failure or a .csv trace file"
            ),
        };
        let users = match &kind {
            ScenarioKind::Trace(t) => t.users.len() as u32,
            _ => self.users,
        };
        let mut cfg = SimConfig::new(kind, self.hosts, users, self.seed);
        cfg.policies = Policy::parse_list(&self.policies).map_err(anyhow::Error::msg)?;
        cfg.sample_seconds = self.sample_seconds;
        cfg.storm_minutes = self.storm_minutes;
        cfg.small_hosts_percent = self.small_hosts;
        cfg.max_session_limit = self.max_session_limit;
        cfg.logon_cost = self.logon_cost;
        cfg.keep_host_series = self.plot.is_some() && self.hosts <= sim::MAX_PLOTTED_HOSTS;
        cfg.scaling_plan = match (&self.scaling_plan, self.autoscale) {
            (Some(path), _) => Some(sim::autoscale::PlanSource::read(path)?),
            (None, true) => Some(sim::autoscale::PlanSource::built_in()),
            (None, false) => None,
        };
        cfg.autoscale_interval_seconds = self.autoscale_interval;
        cfg.start_on_connect = self.start_on_connect;
        if (self.start_on_connect
            || self.autoscale_interval != sim::autoscale::DEFAULT_INTERVAL_SECONDS)
            && cfg.scaling_plan.is_none()
        {
            anyhow::bail!(
                "--start-on-connect and --autoscale-interval need --autoscale or --scaling-plan"
            );
        }
        cfg.validate()?;
        Ok(cfg)
    }
}

pub fn run(args: SimArgs) -> anyhow::Result<()> {
    let cfg = args.config()?;
    if let Some(p) = &args.plot {
        sim::plot::check_path(p)?;
    }
    let progress = sim::Progress::default();
    let started = Instant::now();
    let show = !args.quiet && std::io::stderr().is_terminal();
    let report = std::thread::scope(|s| {
        let worker = s.spawn(|| sim::run(&cfg, &progress));
        let bar = if show {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} simulating {msg} events, {elapsed}",
                )
                .expect("valid template"),
            );
            bar
        } else {
            indicatif::ProgressBar::hidden()
        };
        while !worker.is_finished() {
            bar.set_message(progress.events.load(Ordering::Relaxed).to_string());
            bar.tick();
            std::thread::sleep(Duration::from_millis(100));
        }
        bar.finish_and_clear();
        worker.join().expect("the simulator does not panic")
    })?;
    let elapsed = started.elapsed();
    match args.output {
        // The report as it is: its per-minute series are f32, which a
        // `serde_json::Value` would print with f64 digits.
        OutputFormat::Json => print!("{}", report.json()),
        format => {
            let rows = serde_json::to_value(&report.results)?;
            if format == OutputFormat::Table {
                println!("{}\n", report.summary());
            }
            print!("{}", output::render(&rows, format, TABLE_COLUMNS));
            if !report.autoscale.is_empty() {
                let rows = serde_json::to_value(&report.autoscale)?;
                if format == OutputFormat::Table {
                    println!(
                        "\nscaling plan {}, evaluated every {} s: each policy with every host \
                         always on, then under the plan",
                        report.scaling_plan.as_deref().unwrap_or_default(),
                        report.autoscale_interval_seconds.unwrap_or_default()
                    );
                }
                print!("{}", output::render(&rows, format, AUTOSCALE_COLUMNS));
            }
        }
    }
    if let Some(p) = &args.plot {
        sim::plot::write_svg(&report, p).with_context(|| "writing the plot")?;
    }
    eprintln!(
        "simulated {} s of {} policies in {:.1} s (seed {})",
        report.simulated_seconds,
        report.results.len(),
        elapsed.as_secs_f64(),
        report.seed
    );
    Ok(())
}
