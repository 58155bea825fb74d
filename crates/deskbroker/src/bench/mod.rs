//! `deskbroker bench`: load generators that reproduce the figures in
//! `docs/benchmarks.md` with one command each. This file holds the clap
//! commands and the dispatch; each benchmark lives in its own module.
//!
//! - `bench storm` ([`storm`]): a logon storm over HTTP against one broker
//!   or several replicas, private or given with `--broker`.
//! - `bench rdp` ([`rdp`]): the RDP front door side by side with HAProxy in
//!   front of the same loopback session hosts.
//!
//! - `bench windows-agent` ([`windows`]): one watching agent over many
//!   fake windows_exporters, against the same agent watching one.
//!
//! - `bench ceiling-server` ([`ceiling`], hidden): the HTTP stack's
//!   ceiling for `scripts/bench-http.sh`, which loads it and a durable
//!   broker with `wrk`.
//! - `bench rdp-ceiling-server` ([`rdp::ceiling`], hidden): the RDP front
//!   door without the broker, the `ceiling` target of `bench rdp`.
//!
//! Both print `--output table|json|tsv` with the CLI's `output` module, and
//! both reach the broker only through [`broker`] (the private brokers they
//! start and the few API calls they make).

mod broker;
mod ceiling;
mod rdp;
mod storm;
mod windows;

/// Flags of `deskbroker bench`.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum BenchCommand {
    /// Create a pool of N hosts and send M connects with C concurrent clients.
    Storm(storm::StormArgs),
    /// The RDP front door against HAProxy (and against no proxy at all), in
    /// front of the same loopback session hosts: new connections per second,
    /// added latency to the host's first byte, relayed throughput.
    Rdp(rdp::RdpArgs),
    /// A trivial JSON handler on the connect route, on the same HTTP stack
    /// as `serve`: the ceiling `scripts/bench-http.sh` compares durable
    /// connects with.
    #[command(hide = true)]
    CeilingServer(ceiling::CeilingArgs),
    /// The RDP front door on a placer that keeps a sticky table in memory
    /// and writes nothing: the ceiling `bench rdp --targets ceiling`
    /// compares the broker's front door with.
    #[command(hide = true)]
    RdpCeilingServer(rdp::ceiling::RdpCeilingArgs),
    /// One watching agent over many fake windows_exporters on loopback:
    /// its CPU share and memory, and the wall time of one scrape round,
    /// against the same agent watching one exporter.
    WindowsAgent(windows::WindowsAgentArgs),
}

pub async fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Storm(args) => storm::run(args).await,
        BenchCommand::Rdp(args) => rdp::run(args).await,
        BenchCommand::CeilingServer(args) => ceiling::run(args).await,
        BenchCommand::RdpCeilingServer(args) => rdp::ceiling::run(args).await,
        BenchCommand::WindowsAgent(args) => windows::run(args).await,
    }
}

/// Rounds to three decimals, the precision of every figure in the reports
/// (microseconds of a millisecond figure, milliseconds of a second).
fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
