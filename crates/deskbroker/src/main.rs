//! The `deskbroker` binary: the broker (`serve`), the session-host agent
//! (`agent`, in `crates/agent`), the az-style CLI client of its HTTP API
//! (`hostpool`, `sessionhost`, `session`, `connect`) and the load
//! generator (`bench`). This file parses the command line, sets up logging
//! and hands over; it is also the one place where errors become an exit code.

mod backup_cmd;
mod bench;
mod cli;
mod config_file;
mod data_dir_lock;
mod explain;
mod gateway_cmd;
mod generate;
mod secret_file;
mod serve;
mod sim_cmd;

use std::io::IsTerminal as _;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// The allocator of the whole binary. The engine allocates small strings
/// (session ids, user keys, host names) on every placement, state change,
/// logoff and heartbeat; mimalloc serves them from per-size pages, without
/// glibc's consolidation passes, and keeps them close together. On the
/// simulator's 100,000-user day it cut the CPU time by 30 %
/// (docs/benchmarks.md, 2026-12-01).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The version `--version` prints: the package's, and the commit it was
/// built from (build.rs; "unknown" outside a git checkout).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("DESKBROKER_GIT_COMMIT"),
    ")"
);

/// A session broker for remote-desktop farms.
#[derive(Parser)]
#[command(name = "deskbroker", version = VERSION, about, propagate_version = true)]
struct Args {
    #[command(subcommand)]
    command: Command,
    /// How logs are written on stderr: `text` for people, `json` (one
    /// object a line) for log collectors.
    #[arg(
        long,
        global = true,
        env = "DESKBROKER_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Text
    )]
    log_format: LogFormat,
}

/// `--log-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker: the HTTP API on the embedded SQLite store or PostgreSQL.
    Serve(Box<serve::ServeArgs>),
    /// Run on a session host: register with the broker, then send heartbeats
    /// with metrics and sessions.
    Agent(agent::AgentArgs),
    /// Run the RDP front door on its own, placing users through a broker's API.
    Gateway(gateway_cmd::GatewayArgs),
    /// Copy the SQLite store of a broker, running or not, to a file.
    Backup(backup_cmd::BackupArgs),
    /// Put a backup in place as the SQLite store of a data directory no
    /// broker is using.
    Restore(backup_cmd::RestoreArgs),
    /// Load-test a running broker.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Compare placement policies on a simulated storm, day, failure or trace.
    Sim(sim_cmd::SimArgs),
    /// Create, change, show, list and delete host pools.
    Hostpool(Box<cli::hostpool::HostpoolArgs>),
    /// Register, drain, assign, show, list and remove session hosts.
    Sessionhost(cli::sessionhost::SessionhostArgs),
    /// List, show, update and log off user sessions.
    Session(cli::session::SessionArgs),
    /// Place a user: ask the broker which session host to connect to.
    Connect(cli::connect::ConnectArgs),
    /// Create, list and revoke API credentials with roles (admin only).
    Credential(cli::credential::CredentialArgs),
    /// Scaling plans (rules A1–A7): create, show, list, update, delete, status.
    Scalingplan(cli::scalingplan::ScalingPlanArgs),
    /// List the audit log: who changed what, newest first (rule T5).
    Audit(cli::audit::AuditArgs),
    /// A user's directory groups, nested ones included (rule AD1).
    User(cli::user::UserArgs),
    /// Published applications of a host pool (rules F1, F2): create, show,
    /// list, delete, and the .rdp file that opens one.
    App(cli::app::AppArgs),
    /// Application groups (rule F1), which give a pool's desktop or some
    /// of its applications to users and groups: create, show, list, delete.
    Appgroup(cli::app::AppGroupArgs),
}

impl Command {
    /// The log level when `RUST_LOG` is not set: the broker reports what it
    /// does; a CLI command prints its answer, and only warnings besides.
    fn default_log_level(&self) -> &'static str {
        match self {
            Command::Serve(_) | Command::Agent(_) | Command::Gateway(_) => "info",
            _ => "warn",
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    // `deskbroker generate` writes completions and manual pages for
    // packages: parsed on its own, so that it stays out of `--help` and out
    // of the completions and pages it writes.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == generate::COMMAND)
    {
        return generate::main(Args::command());
    }
    // `serve` and `gateway` read their config file first: its settings
    // become flags, below those of the command line and the environment.
    let line = match config_file::apply(std::env::args_os().collect(), &Args::command()) {
        Ok(line) => line,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::FAILURE;
        }
    };
    let args = match Args::try_parse_from(&line.argv) {
        Ok(args) => args,
        Err(e) => match line.explain(&e) {
            Some(said) => {
                eprintln!("error: {said}");
                return ExitCode::from(2);
            }
            None => e.exit(),
        },
    };
    init_tracing(args.command.default_log_level(), args.log_format);
    api::tls::install_default_provider();

    let result = match args.command {
        Command::Serve(serve_args) => serve::run(*serve_args).await,
        Command::Agent(agent_args) => agent::run_with_args(agent_args).await.map_err(Into::into),
        Command::Gateway(gateway_args) => gateway_cmd::run(gateway_args).await,
        Command::Backup(a) => tokio::task::block_in_place(|| backup_cmd::backup(a)),
        Command::Restore(a) => tokio::task::block_in_place(|| backup_cmd::restore(a)),
        Command::Bench(bench_command) => bench::run(bench_command).await,
        Command::Sim(sim_args) => tokio::task::block_in_place(|| sim_cmd::run(sim_args)),
        Command::Hostpool(hostpool_args) => cli::hostpool::run(*hostpool_args).await,
        Command::Sessionhost(sessionhost_args) => cli::sessionhost::run(sessionhost_args).await,
        Command::Session(session_args) => cli::session::run(session_args).await,
        Command::Connect(connect_args) => cli::connect::run(connect_args).await,
        Command::Credential(credential_args) => cli::credential::run(credential_args).await,
        Command::Scalingplan(a) => cli::scalingplan::run(a).await,
        Command::Audit(audit_args) => cli::audit::run(audit_args).await,
        Command::User(user_args) => cli::user::run(user_args).await,
        Command::App(a) => cli::app::run(a).await,
        Command::Appgroup(a) => cli::app::run_groups(a).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // `{:#}` joins the context chain on one line: "outer: inner".
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr, so stdout carries only the data a command prints.
/// `RUST_LOG` overrides the default level (e.g. `RUST_LOG=debug` shows every
/// request the CLI makes); see [`log_filter`] for rustls's lines.
fn init_tracing(default_level: &str, format: LogFormat) {
    let filter = log_filter(std::env::var("RUST_LOG").ok().as_deref(), default_level);
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logs.json().init(),
    }
}

/// What rustls logs at WARN is what a peer sent that it tolerates: an IP
/// address as the TLS server name (xfreerdp and `openssl s_client` send one
/// when given an address; RFC 6066 allows only host names, and rustls
/// ignores it), a warning alert. Anyone who can reach a TLS listener can
/// cause those lines, and nothing is wrong with the broker, so they are
/// kept below WARN: rustls logs only its errors, whatever level `RUST_LOG`
/// sets, unless `RUST_LOG` names `rustls` itself (`RUST_LOG=info,rustls=debug`).
/// A handshake or connection that fails is reported by the broker's own
/// code, under its own targets, which this does not touch.
const RUSTLS_DIRECTIVE: &str = "rustls=error";

/// The log filter: `rust_log` (the `RUST_LOG` variable) if it parses, else
/// `default_level`; with [`RUSTLS_DIRECTIVE`] unless `rust_log` names rustls.
fn log_filter(rust_log: Option<&str>, default_level: &str) -> EnvFilter {
    let chosen = rust_log
        .map(str::trim)
        .filter(|s| !s.is_empty() && EnvFilter::try_new(s).is_ok())
        .unwrap_or(default_level);
    if chosen.split(',').any(|d| d.trim().starts_with("rustls")) {
        return EnvFilter::new(chosen);
    }
    EnvFilter::new(format!("{chosen},{RUSTLS_DIRECTIVE}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rustls_logs_only_errors_unless_rust_log_names_it() {
        for (rust_log, directives) in [
            (None, "info,rustls=error"),
            (Some("info"), "info,rustls=error"),
            (Some("debug"), "debug,rustls=error"),
            (Some("  "), "info,rustls=error"),
            (Some("not a [filter"), "info,rustls=error"),
            (Some("info,rustls=debug"), "info,rustls=debug"),
            (
                Some("info,tokio_rustls=debug"),
                "info,tokio_rustls=debug,rustls=error",
            ),
        ] {
            let filter = log_filter(rust_log, "info").to_string();
            let mut got: Vec<&str> = filter.split(',').collect();
            let mut want: Vec<&str> = directives.split(',').collect();
            got.sort_unstable();
            want.sort_unstable();
            assert_eq!(got, want, "RUST_LOG={rust_log:?}");
        }
    }

    #[test]
    fn command_line_definition_is_consistent() {
        Args::command().debug_assert();
    }

    #[test]
    fn global_options_go_before_or_after_the_subcommand() {
        for line in [
            "deskbroker hostpool show --name p1 --output json --broker http://b:1",
            "deskbroker hostpool --output json --broker http://b:1 show --name p1",
            "deskbroker hostpool -o json show --broker http://b:1 --name p1",
        ] {
            let parsed = Args::try_parse_from(line.split_whitespace());
            assert!(parsed.is_ok(), "{line}: {:?}", parsed.err());
        }
    }

    #[test]
    fn contract_command_lines_parse() {
        for line in [
            "deskbroker hostpool create --name p1 --host-pool-type Pooled --load-balancer-type DepthFirst --max-session-limit 10",
            "deskbroker hostpool create --name p2 --host-pool-type Personal --load-balancer-type Persistent --personal-desktop-assignment-type Direct",
            "deskbroker hostpool update --name p1 --load-balancer-type BreadthFirst --breadth-first-randomized false",
            "deskbroker hostpool list",
            "deskbroker hostpool delete --name p1 --force",
            "deskbroker sessionhost add --host-pool p1 --name h1 --address 10.0.0.5:3389 --capabilities rdp,gpu",
            "deskbroker sessionhost update --host-pool p1 --name h1 --allow-new-session false",
            "deskbroker sessionhost update --host-pool p1 --name h1 --assigned-user alice@contoso.com",
            "deskbroker sessionhost list --host-pool p1",
            "deskbroker sessionhost remove --host-pool p1 --name h1 --force",
            "deskbroker session list --host-pool p1 --user alice@contoso.com",
            "deskbroker session logoff --host-pool p1 --id s1",
            "deskbroker session update --host-pool p1 --id s1 --state Disconnected",
            "deskbroker connect --host-pool p1 --user alice@contoso.com --requires rdp,gpu",
            "deskbroker connect --host-pool p1 --user alice@contoso.com --output tsv",
            "deskbroker agent --broker http://b:8080 --host-pool p1 --registration-token T",
            "deskbroker agent --broker http://b:8080 --host-pool p1 --registration-token T --name h7 --address 10.0.0.7:3389 --state-dir /tmp/s --interval 30 --load-script /l.sh --sessions-command cmd --config /etc/deskbroker/agent.toml",
        ] {
            let parsed = Args::try_parse_from(line.split_whitespace());
            assert!(parsed.is_ok(), "{line}: {:?}", parsed.err());
        }
    }

    #[test]
    fn assigning_and_unassigning_at_once_is_refused() {
        let line =
            "deskbroker sessionhost update --host-pool p1 --name h1 --assigned-user a --unassign";
        assert!(Args::try_parse_from(line.split_whitespace()).is_err());
    }
}
