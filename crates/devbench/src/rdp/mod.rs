//! `deskbroker-devbench rdp`: the RDP front door side by side with HAProxy
//! 2.6 configured the way RDP farms run it (`balance leastconn`,
//! `stick on req.rdp_cookie(mstshash)`), both in front of the same
//! loopback session hosts, and both compared with no proxy at all
//! (`direct`, the baseline).
//!
//! The session hosts are tasks of this process ([`hosts`]). The targets
//! are started here: a private `deskbroker serve --rdp-listen` on a fresh
//! durable store whose default pool holds the hosts (BreadthFirst, no
//! limit), `haproxy -db` on a generated configuration, and with `--targets
//! …,ceiling` the front door alone on a placer that writes nothing
//! ([`ceiling`]: the relay's own cost, without the broker's); all are
//! stopped at the end.
//!
//! Measurements, each run against every target in one round, the order
//! of the targets rotating from round to round (the machine is shared:
//! the table shows the median of the rounds, the JSON every round):
//!
//! 1. new connections per second from C clients, each connection being
//!    connect, first PDU with `Cookie: mstshash=<user>`, the host's
//!    Connection Confirm, close; with users never seen before (a new
//!    placement, and for deskbroker a new durable session) and with
//!    users who come back (a reconnect to their session, S1, and a
//!    sticky-table hit for HAProxy). The returning users' connections log
//!    on: after the Connection Confirm, a logon's worth of bytes each way
//!    ([`hosts::LOGON_COMMAND`], rule R4's evidence), so the front door
//!    keeps their sessions (Disconnected) between connections, as it
//!    does a real user's; the new users' connections close at once and
//!    leave no session;
//! 2. time from connect to the host's first byte, one connection at a
//!    time (unloaded), against connecting to the host directly;
//! 3. relayed throughput: a few long connections streaming from the
//!    hosts to the client.
//!
//! Every network wait is bounded ([`load::CONNECTION_TIMEOUT`],
//! [`hosts::IO_TIMEOUT`]) and every run is bounded by a duration or a count.
//!
//! This file holds the flags, the targets and the order of the runs; the
//! session hosts are in [`hosts`], HAProxy in [`haproxy`], the client side
//! of the runs in [`load`], the proxies' CPU time in [`cpu`], and the
//! medians and the table in [`report`].

pub mod ceiling;
mod cpu;
mod haproxy;
mod hosts;
mod load;
mod report;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use serde_json::{Value, json};

use crate::Deskbroker;
use deskbroker::benchkit::broker::{Broker, PrivateBroker};
use deskbroker::output::OutputFormat;
use haproxy::Haproxy;
use hosts::Hosts;
use load::{RunLimit, Users, rate_run, throughput_run};

/// What the benchmark connects to.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    /// Straight to the session hosts, round robin: the baseline.
    Direct,
    /// HAProxy in TCP mode with RDP cookie persistence.
    Haproxy,
    /// The RDP front door alone, on a placer that keeps a sticky table in
    /// memory and writes nothing: what the relay costs without the broker.
    Ceiling,
    /// deskbroker's RDP front door.
    Deskbroker,
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Target::Direct => "direct",
            Target::Haproxy => "haproxy",
            Target::Ceiling => "ceiling",
            Target::Deskbroker => "deskbroker",
        }
    }
}

/// Flags of `deskbroker-devbench rdp`.
#[derive(clap::Args, Debug, Clone)]
pub struct RdpArgs {
    /// Session hosts (loopback listeners in this process).
    #[arg(long, default_value_t = 8)]
    pub backends: u16,
    /// Concurrent clients in the connection-rate runs.
    #[arg(long, default_value_t = 64)]
    pub concurrency: u32,
    /// Length of each connection-rate run, in seconds; 0 skips these runs.
    #[arg(long, default_value_t = 5)]
    pub rate_seconds: u64,
    /// Users who come back in the reconnect runs; each is connected
    /// once, unmeasured, before the first round, and logs on every time
    /// (so the broker keeps their sessions). 0 skips these runs.
    #[arg(long, default_value_t = 1000)]
    pub reconnect_users: u64,
    /// Connections, one at a time, in each latency run.
    #[arg(long, default_value_t = 2000)]
    pub latency_connections: u64,
    /// MiB streamed from the hosts in each throughput run, split evenly
    /// over --streams connections. 0 skips these runs.
    #[arg(long, default_value_t = 1024)]
    pub stream_mib: u64,
    /// Connections of each throughput run.
    #[arg(long, default_value_t = 4)]
    pub streams: u32,
    /// Rounds; each runs every measurement against every target.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Targets, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "direct,haproxy,deskbroker"
    )]
    pub targets: Vec<Target>,
    /// The HAProxy program.
    #[arg(long, default_value = "haproxy")]
    pub haproxy: PathBuf,
    /// Use this broker instead of a private one (needs --rdp). Its
    /// front door's --rdp-default-pool must be --pool, which is replaced.
    #[arg(long, value_name = "URL", requires = "rdp")]
    pub broker: Option<String>,
    /// Admin token of `--broker`. Default: DESKBROKER_TOKEN, else the
    /// contents of $DESKBROKER_DATA_DIR/admin.token
    /// (./deskbroker-data/admin.token), as for every CLI command.
    #[arg(long, env = "DESKBROKER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The RDP front door of `--broker`.
    #[arg(long, value_name = "ADDR", requires = "broker")]
    pub rdp: Option<SocketAddr>,
    /// The pool of the session hosts (the front door's default pool).
    #[arg(long, default_value = "bench")]
    pub pool: String,
    /// `table` (the medians, one row per measure and one column per
    /// target), `json` (the medians and every run of every round) or `tsv`
    /// (the table's rows without the header).
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    /// Print no progress on stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// Where each target listens.
struct Endpoints {
    hosts: Vec<SocketAddr>,
    haproxy: Option<SocketAddr>,
    ceiling: Option<SocketAddr>,
    deskbroker: Option<SocketAddr>,
    /// Processes of the proxies started here, whose CPU time each run
    /// reports (a front door given with `--rdp` is not measured).
    haproxy_pid: Option<u32>,
    ceiling_pid: Option<u32>,
    deskbroker_pid: Option<u32>,
}

impl Endpoints {
    /// The address of connection `i` to `target` (round robin over the
    /// hosts for `direct`).
    fn address(&self, target: Target, i: u64) -> SocketAddr {
        match target {
            Target::Direct => self.hosts[(i % self.hosts.len() as u64) as usize],
            Target::Haproxy => self.haproxy.unwrap_or(self.hosts[0]),
            Target::Ceiling => self.ceiling.unwrap_or(self.hosts[0]),
            Target::Deskbroker => self.deskbroker.unwrap_or(self.hosts[0]),
        }
    }

    /// CPU seconds the target's process has used so far, if known.
    fn cpu_seconds(&self, target: Target) -> Option<f64> {
        let pid = match target {
            Target::Direct => None,
            Target::Haproxy => self.haproxy_pid,
            Target::Ceiling => self.ceiling_pid,
            Target::Deskbroker => self.deskbroker_pid,
        }?;
        cpu::process_cpu_seconds(pid)
    }
}

pub async fn run(deskbroker: &Deskbroker, mut args: RdpArgs) -> anyhow::Result<()> {
    if args.backends == 0 || args.concurrency == 0 || args.rounds == 0 {
        anyhow::bail!("--backends, --concurrency and --rounds must be at least 1");
    }
    if args.rate_seconds > 600 {
        anyhow::bail!("--rate-seconds must be at most 600");
    }
    if args.stream_mib > 0 && args.streams == 0 {
        anyhow::bail!("--streams must be at least 1");
    }
    args.targets.sort();
    args.targets.dedup();
    if args.targets.is_empty() {
        anyhow::bail!("--targets names no target");
    }

    let hosts = Hosts::start(args.backends).await?;
    let mut endpoints = Endpoints {
        hosts: hosts.addresses.clone(),
        haproxy: None,
        ceiling: None,
        deskbroker: None,
        haproxy_pid: None,
        ceiling_pid: None,
        deskbroker_pid: None,
    };
    let mut haproxy = None;
    let mut haproxy_version = None;
    if args.targets.contains(&Target::Haproxy) {
        let h = Haproxy::start(&args.haproxy, &hosts.addresses).await?;
        endpoints.haproxy = Some(h.address);
        endpoints.haproxy_pid = h.pid();
        haproxy_version = Some(h.version.clone());
        haproxy = Some(h);
    }
    let mut ceiling = None;
    if args.targets.contains(&Target::Ceiling) {
        let c = ceiling::Ceiling::start(&hosts.addresses).await?;
        endpoints.ceiling = Some(c.address);
        endpoints.ceiling_pid = c.pid();
        ceiling = Some(c);
    }
    let mut private = None;
    let mut client = None;
    if args.targets.contains(&Target::Deskbroker) {
        let (url, token, rdp) = match (&args.broker, args.rdp) {
            (Some(url), Some(rdp)) => (url.clone(), args.token.clone(), rdp),
            _ => {
                let b = PrivateBroker::start(&deskbroker.path()?, Some(&args.pool), &[]).await?;
                let rdp = b.rdp.context("the private broker started no front door")?;
                endpoints.deskbroker_pid = b.pid();
                let r = (b.url.clone(), Some(b.token.clone()), rdp);
                private = Some(b);
                r
            }
        };
        let c = Broker::new(&url, token.as_deref(), &api::Trust::system())?;
        register_hosts(&c, &args.pool, &hosts.addresses).await?;
        endpoints.deskbroker = Some(rdp);
        client = Some(c);
    }

    let measured = measure(&args, &endpoints).await;
    // Rules R4 and S9: of the bench's connections only the returning
    // users' log on, so only they keep a session (Disconnected) after the
    // run, one each; every other connection closes before any logon and
    // leaves none.
    let expected = if args.rate_seconds > 0 {
        args.reconnect_users
    } else {
        0
    };
    let pool = match &client {
        Some(c) if measured.is_ok() => pool_outcome(c, &args.pool, expected).await.ok(),
        _ => None,
    };
    if let Some(h) = haproxy {
        h.stop().await;
    }
    if let Some(c) = ceiling {
        c.stop().await;
    }
    if let Some(b) = private {
        b.stop().await;
    }
    let rounds = measured?;
    let pool = pool.map(|mut p| {
        p["expectedSessions"] = json!(expected);
        p
    });
    let report = json!({
        "date": report::today(),
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "backends": args.backends,
        "concurrency": args.concurrency,
        "rateSeconds": args.rate_seconds,
        "reconnectUsers": args.reconnect_users,
        "latencyConnections": args.latency_connections,
        "streamMib": args.stream_mib,
        "streams": args.streams,
        "rounds": args.rounds,
        "haproxyVersion": haproxy_version,
        "hostBadRequests": hosts.bad_requests.load(Ordering::Relaxed),
        "deskbrokerPool": pool,
        "median": report::medians(&rounds),
        "runs": rounds,
    });
    report::print(&report, &args.targets, args.output);
    Ok(())
}

/// Every measurement against every target, `--rounds` times. Each run
/// is one JSON object: `round`, `measure`, `target` and its figures.
async fn measure(args: &RdpArgs, endpoints: &Endpoints) -> anyhow::Result<Vec<Value>> {
    let proxies: Vec<Target> = args
        .targets
        .iter()
        .copied()
        .filter(|t| *t != Target::Direct)
        .collect();
    // Users never seen before: one counter for the whole run, so every
    // connection of the new-user runs is a first placement.
    let new_users = Arc::new(AtomicU64::new(0));
    let rates = args.rate_seconds > 0;
    if rates && args.reconnect_users > 0 {
        for &target in &proxies {
            progress(
                args,
                format_args!("connecting the reconnect users once: {}", target.name()),
            );
            let warm = rate_run(
                endpoints,
                target,
                Users::Repeat(args.reconnect_users),
                true,
                args.concurrency,
                RunLimit::Count(args.reconnect_users),
            )
            .await;
            if warm["connections"].as_u64() != Some(args.reconnect_users) {
                anyhow::bail!(
                    "{}: the reconnect users could not all connect: {}",
                    target.name(),
                    warm["errors"]
                );
            }
        }
    }
    let mut runs = Vec::new();
    let limit = RunLimit::Time(Duration::from_secs(args.rate_seconds));
    let stream_bytes = args.stream_mib * 1024 * 1024;
    for round in 0..args.rounds {
        // Rotate the order so no target always runs first (cold) or last.
        let mut order = args.targets.clone();
        let shift = round as usize % order.len();
        order.rotate_left(shift);
        let mut record = |measure: &str, target: Target, mut v: Value| {
            progress(
                args,
                format_args!("round {} {measure} {}: {v}", round + 1, target.name()),
            );
            v["round"] = json!(round + 1);
            v["measure"] = json!(measure);
            v["target"] = json!(target.name());
            runs.push(v);
        };
        for &target in order.iter().filter(|_| rates) {
            let users = Users::New(new_users.clone());
            let v = rate_run(endpoints, target, users, false, args.concurrency, limit).await;
            record("newUsers", target, v);
        }
        if rates && args.reconnect_users > 0 {
            for &target in order.iter().filter(|t| **t != Target::Direct) {
                let users = Users::Repeat(args.reconnect_users);
                let v = rate_run(endpoints, target, users, true, args.concurrency, limit).await;
                record("reconnects", target, v);
            }
        }
        if args.latency_connections > 0 {
            for &target in &order {
                let users = Users::New(new_users.clone());
                let v = rate_run(
                    endpoints,
                    target,
                    users,
                    false,
                    1,
                    RunLimit::Count(args.latency_connections),
                )
                .await;
                record("latency", target, v);
            }
        }
        if stream_bytes > 0 {
            for &target in &order {
                let users = Users::New(new_users.clone());
                let v = throughput_run(endpoints, target, users, args.streams, stream_bytes).await;
                record("throughput", target, v);
            }
        }
    }
    Ok(runs)
}

fn progress(args: &RdpArgs, what: std::fmt::Arguments<'_>) {
    if !args.quiet {
        eprintln!("devbench rdp: {what}");
    }
}

/// Replaces `pool` with a BreadthFirst pool without a session limit
/// holding the session hosts.
async fn register_hosts(client: &Broker, pool: &str, hosts: &[SocketAddr]) -> anyhow::Result<()> {
    client
        .replace_pool(
            pool,
            // The fake hosts listen on loopback, which a pool must name
            // to accept (rule E4).
            &json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                    "allowedAddressRanges": ["127.0.0.0/8"]}),
        )
        .await?;
    for (i, address) in hosts.iter().enumerate() {
        let name = format!("bench-h{i:03}");
        client
            .add_host(pool, &name, &address.to_string())
            .await
            .with_context(|| format!("cannot register session host {name}"))?;
    }
    Ok(())
}

/// How long the pool may take to end the sessions of the run's last
/// connections after they closed.
const POOL_SETTLE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The pool as the broker sees it after the run: `expected` sessions, those
/// of the users who logged on (rules R4, S9).
///
/// The front door ends a session after its connection closed, so the last
/// ones may still be ending: the count is read again until it is
/// `expected` or [`POOL_SETTLE_WAIT`] has passed (then it is reported as it
/// stands).
async fn pool_outcome(client: &Broker, pool: &str, expected: u64) -> anyhow::Result<Value> {
    let deadline = tokio::time::Instant::now() + POOL_SETTLE_WAIT;
    let mut sessions = client.session_count(pool).await?;
    while sessions.as_u64().is_some_and(|n| n != expected) && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        sessions = client.session_count(pool).await?;
    }
    let per_host: Vec<u64> = client
        .hosts(pool)
        .await?
        .iter()
        .filter_map(|h| h["sessions"].as_u64())
        .collect();
    Ok(json!({
        "sessions": sessions,
        "minSessionsPerHost": per_host.iter().min(),
        "maxSessionsPerHost": per_host.iter().max(),
    }))
}
