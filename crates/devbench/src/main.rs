//! `deskbroker-devbench`: the benchmarks used to develop deskbroker, kept
//! out of the shipped `deskbroker` binary. Each reproduces figures of
//! `docs/benchmarks.md` with one command:
//!
//! - `rdp` ([`rdp`]): the RDP front door side by side with HAProxy in
//!   front of the same loopback session hosts;
//! - `windows-agent` ([`windows`]): one watching agent over many fake
//!   windows_exporters, against the same agent watching one;
//! - `ceiling-server` ([`ceiling`]): the HTTP stack's ceiling for
//!   `scripts/bench-http.sh`, which loads it and a durable broker with
//!   `wrk`;
//! - `rdp-ceiling-server` ([`rdp::ceiling`]): the RDP front door without
//!   the broker, the `ceiling` target of `rdp`;
//! - `directory` ([`directory`]): a logon storm into a pool entitled to a
//!   directory group, read from a real Samba AD domain controller, cold
//!   and warm, against the same storm without a group;
//! - `negotiate` ([`negotiate`]): one Windows sign-in's CPU at the gateway
//!   (a Kerberos SPNEGO token accepted against a real Samba AD DC's keys)
//!   against one connection ticket's check.
//!
//! They start a `deskbroker` binary (`serve`, `agent`) as children: by
//! default the one beside this binary, as cargo builds them. What they
//! share with `deskbroker bench storm` (the private brokers, the API
//! calls, the output formats) is the `deskbroker` package's library.

mod ceiling;
mod directory;
mod negotiate;
mod rdp;
mod windows;

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Parser;
use tracing_subscriber::EnvFilter;

/// The allocator of the shipped binary, so that the front door's ceiling
/// relays on the same allocator as the broker's front door it is compared
/// with.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Benchmarks for developing deskbroker (not shipped).
#[derive(Parser)]
#[command(name = "deskbroker-devbench", version, about)]
struct Args {
    #[command(subcommand)]
    command: Command,
    /// The `deskbroker` binary whose `serve` and `agent` the benchmarks
    /// start. Default: `deskbroker` in this binary's directory.
    #[arg(long, global = true, env = "DESKBROKER_BIN", value_name = "PATH")]
    deskbroker: Option<PathBuf>,
}

#[derive(clap::Subcommand)]
enum Command {
    /// The RDP front door against HAProxy (and against no proxy at all), in
    /// front of the same loopback session hosts: new connections per second,
    /// added latency to the host's first byte, relayed throughput.
    Rdp(rdp::RdpArgs),
    /// One watching agent over many fake windows_exporters on loopback:
    /// its CPU share and memory, and the wall time of one scrape round,
    /// against the same agent watching one exporter.
    WindowsAgent(windows::WindowsAgentArgs),
    /// A trivial JSON handler on the connect route, on the same HTTP stack
    /// as `serve`: the ceiling `scripts/bench-http.sh` compares durable
    /// connects with.
    CeilingServer(ceiling::CeilingArgs),
    /// The RDP front door on a placer that keeps a sticky table in memory
    /// and writes nothing: the ceiling `rdp --targets ceiling` compares the
    /// broker's front door with.
    RdpCeilingServer(rdp::ceiling::RdpCeilingArgs),
    /// A logon storm into a pool entitled to a directory group (rule AD1),
    /// the groups read from a real Samba AD domain controller (needs root):
    /// the same storm without a group, then with the broker's group cache
    /// cold, then warm.
    Directory(directory::DirectoryArgs),
    /// One Windows sign-in at the RD Gateway (rule AD2: a fresh Kerberos
    /// SPNEGO token accepted with the gateway's keytab, from a real Samba
    /// AD domain controller; needs root) against one connection ticket's
    /// check (T3): CPU per operation and the ratio.
    Negotiate(negotiate::NegotiateArgs),
    /// `negotiate`'s measuring half, started by it with MIT's environment.
    #[command(hide = true)]
    NegotiateWorker(negotiate::WorkerArgs),
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    // Quiet but for warnings, on stderr: stdout carries the reports and
    // the lines saying where a server listens.
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    api::tls::install_default_provider();
    let result = run(args).await;
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let deskbroker = Deskbroker(args.deskbroker);
    match args.command {
        Command::Rdp(a) => rdp::run(&deskbroker, a).await,
        Command::WindowsAgent(a) => windows::run(&deskbroker, a).await,
        Command::CeilingServer(a) => ceiling::run(a).await,
        Command::RdpCeilingServer(a) => rdp::ceiling::run(a).await,
        Command::Directory(a) => directory::run(&deskbroker, a).await,
        Command::Negotiate(a) => negotiate::run(a).await,
        Command::NegotiateWorker(a) => negotiate::worker(a).await,
    }
}

/// The `deskbroker` binary the benchmarks start (`--deskbroker`,
/// `DESKBROKER_BIN`), looked for when a benchmark first needs it: a run
/// without the broker needs none.
struct Deskbroker(Option<PathBuf>);

impl Deskbroker {
    /// The binary: the one given, else `deskbroker` beside this binary,
    /// where cargo puts it (`target/release/`). It must exist.
    fn path(&self) -> anyhow::Result<PathBuf> {
        let program = match &self.0 {
            Some(path) => path.clone(),
            None => {
                let exe = std::env::current_exe().context("cannot find this binary")?;
                exe.parent().unwrap_or(Path::new(".")).join("deskbroker")
            }
        };
        anyhow::ensure!(
            program.is_file(),
            "no deskbroker binary at {}: build it (`cargo build --release -p deskbroker`) \
             or pass --deskbroker PATH",
            program.display()
        );
        Ok(program)
    }
}

/// This binary, as a command to start one of its own servers as a child
/// (whose CPU time is then its own).
fn devbench_command() -> anyhow::Result<tokio::process::Command> {
    let exe = std::env::current_exe().context("cannot find the deskbroker-devbench binary")?;
    Ok(tokio::process::Command::new(exe))
}
