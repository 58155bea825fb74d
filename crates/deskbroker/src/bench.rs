//! `deskbroker bench storm`: a load generator that measures connects per
//! second and latency against a running broker.

/// Flags of `deskbroker bench`.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum BenchCommand {
    /// Create a pool of N hosts and send M connects with C concurrent clients.
    Storm(StormArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct StormArgs {
    /// Number of session hosts in the benchmark pool.
    #[arg(long, default_value_t = 10_000)]
    pub hosts: u32,
}

pub async fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    anyhow::bail!("bench is being wired: {cmd:?}")
}
