//! `deskbroker bench`: the load generator users size their brokers with.
//! This file holds the clap commands and the dispatch.
//!
//! - `bench storm` ([`storm`]): a logon storm over HTTP against one broker
//!   or several replicas, private or given with `--broker`.
//!
//! It prints `--output table|json|tsv` with the CLI's `output` module and
//! reaches the broker only through the library's `benchkit::broker` (the
//! private brokers it starts and the few API calls it makes). The
//! benchmarks that compare the broker with other software or measure one
//! part of it (the RDP front door against HAProxy, the watching agent, the
//! HTTP and RDP ceilings) are development tools, in `crates/devbench`.

mod storm;

/// Flags of `deskbroker bench`.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum BenchCommand {
    /// Create a pool of N hosts and send M connects with C concurrent clients.
    Storm(storm::StormArgs),
}

pub async fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Storm(args) => storm::run(args).await,
    }
}
