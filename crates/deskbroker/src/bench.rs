//! `deskbroker bench`: load generators that reproduce the figures in
//! `docs/benchmarks.md` with one command each.
//!
//! - `bench storm`: a logon storm over HTTP. It creates a pool of N hosts,
//!   sends M connects of distinct users from C concurrent clients
//!   (keep-alive), and reports throughput and latency percentiles. Without
//!   `--broker` it starts a private broker (this same binary, `serve`, on the
//!   durable SQLite store in a temporary directory).
//! - `bench rdp`: the RDP front door side by side with HAProxy in front of
//!   the same loopback session hosts (see [`rdp`]).

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::cli::client::Client;

/// Flags of `deskbroker bench`.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum BenchCommand {
    /// Create a pool of N hosts and send M connects with C concurrent clients.
    Storm(StormArgs),
    /// The RDP front door against HAProxy (and against no proxy at all), in
    /// front of the same loopback session hosts: new connections per second,
    /// added latency to the host's first byte, relayed throughput.
    Rdp(rdp::RdpArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct StormArgs {
    /// Broker to load; several replicas of one broker as a list (repeat the
    /// flag or separate with commas): the clients are spread evenly over
    /// them. Without it, private brokers are started and stopped at the end.
    #[arg(long, value_name = "URL", value_delimiter = ',')]
    pub broker: Vec<String>,
    /// Private brokers keep their state in this PostgreSQL database instead
    /// of a fresh SQLite data directory.
    #[arg(long = "database-url", value_name = "URL", conflicts_with = "broker")]
    pub database_url: Option<String>,
    /// Private broker replicas to start (more than one needs
    /// --database-url): one leads, the others forward to it.
    #[arg(long, default_value_t = 1, conflicts_with = "broker")]
    pub replicas: u32,
    /// Admin token of `--broker` (default: DESKBROKER_TOKEN).
    #[arg(long, env = "DESKBROKER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Session hosts in the benchmark pool.
    #[arg(long, default_value_t = 10_000)]
    pub hosts: u32,
    /// Connects to send, one per distinct user.
    #[arg(long, default_value_t = 100_000)]
    pub users: u64,
    /// Concurrent clients (each keeps its connection open).
    #[arg(long, default_value_t = 64)]
    pub concurrency: u32,
    /// Algorithm of the benchmark pool.
    #[arg(long, default_value = "BreadthFirst")]
    pub load_balancer_type: String,
    /// LoadIndex pools: the CPU threshold of the index (0 leaves the CPU
    /// out). Each host then sends one heartbeat with a CPU between 0 and
    /// 60 % while it is added, and none during the storm: the index the
    /// broker sees is stale, as it is during a real logon storm (H4).
    #[arg(long, default_value_t = 90)]
    pub cpu_threshold: u32,
    /// Name of the benchmark pool (replaced if it exists).
    #[arg(long, default_value = "bench-storm")]
    pub pool: String,
    /// `table` or `json`.
    #[arg(long, short = 'o', default_value = "table")]
    pub output: String,
    /// Hide the progress bar.
    #[arg(long)]
    pub quiet: bool,
}

pub async fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Storm(args) => run_storm(args).await,
        BenchCommand::Rdp(args) => rdp::run(args).await,
    }
}

async fn run_storm(args: StormArgs) -> anyhow::Result<()> {
    if !matches!(args.output.as_str(), "table" | "json") {
        anyhow::bail!("--output must be table or json");
    }
    if args.hosts == 0 || args.users == 0 || args.concurrency == 0 {
        anyhow::bail!("--hosts, --users and --concurrency must be at least 1");
    }
    if !(1..=MAX_REPLICAS).contains(&args.replicas)
        || (args.replicas > 1 && args.database_url.is_none())
    {
        anyhow::bail!(
            "--replicas must be 1..={MAX_REPLICAS}, and more than 1 needs --database-url"
        );
    }
    let mut private = Vec::new();
    let (urls, token) = if args.broker.is_empty() {
        let token = format!("bench-{:032x}", rand::random::<u128>());
        let store: Vec<&str> = match &args.database_url {
            Some(url) => vec!["--database-url", url],
            None => Vec::new(),
        };
        for _ in 0..args.replicas {
            private.push(PrivateBroker::start(None, &store, &token).await?);
        }
        (private.iter().map(|b| b.url.clone()).collect(), Some(token))
    } else {
        (args.broker.clone(), args.token.clone())
    };
    let clients = urls
        .iter()
        .map(|url| Client::new(url, token.clone()).map(Arc::new))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let report = storm(&clients, &args).await;
    for b in private {
        b.stop().await;
    }
    let report = report?;
    if args.output == "json" {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    Ok(())
}

/// Most private replicas `bench storm` starts.
const MAX_REPLICAS: u32 = 16;

async fn storm(clients: &[Arc<Client>], args: &StormArgs) -> anyhow::Result<Value> {
    let client = &clients[0];
    let pool = args.pool.as_str();
    let load_index = args.load_balancer_type == "LoadIndex";
    let cpu_threshold = if load_index { args.cpu_threshold } else { 0 };
    let pool_body = json!({
        "hostPoolType": "Pooled",
        "loadBalancerType": args.load_balancer_type,
        "loadIndexSettings": {"cpuThreshold": cpu_threshold},
    });
    // A pool left from an earlier run: clear it (force removes sessions).
    if client.get(&["hostPools", pool], &[]).await.is_ok() {
        client
            .delete(&["hostPools", pool], &[("force", "true")])
            .await?;
    }
    client
        .put(&["hostPools", pool], &pool_body)
        .await
        .context("cannot create the benchmark pool")?;

    let setup_started = Instant::now();
    let bar = progress(args.quiet, u64::from(args.hosts), "adding hosts");
    run_parallel(args.concurrency, u64::from(args.hosts), {
        let client = client.clone();
        let pool = pool.to_string();
        let bar = bar.clone();
        move |i| {
            let client = client.clone();
            let pool = pool.clone();
            let bar = bar.clone();
            async move {
                let host = format!("h{i:06}");
                let address = format!("10.{}.{}.{}:3389", (i >> 16) & 255, (i >> 8) & 255, i & 255);
                let path = ["hostPools", &pool, "sessionHosts", &host];
                client.put(&path, &json!({"address": address})).await?;
                if cpu_threshold > 0 {
                    // One heartbeat, never refreshed during the storm: a
                    // fixed, spread-out CPU of 0..60 % per host.
                    let cpu = (i.wrapping_mul(0x9E37_79B9) % 6_000) as f64 / 100.0;
                    let beat = ["hostPools", &pool, "sessionHosts", &host, "heartbeat"];
                    client.post(&beat, &json!({"cpuPercent": cpu})).await?;
                }
                bar.inc(1);
                Ok(())
            }
        }
    })
    .await
    .into_iter()
    .collect::<Result<Vec<()>, _>>()
    .context("cannot add the benchmark hosts")?;
    bar.finish_and_clear();
    let setup_seconds = setup_started.elapsed().as_secs_f64();

    let bar = progress(args.quiet, args.users, "connecting");
    let histogram = Arc::new(std::sync::Mutex::new(
        hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"),
    ));
    let errors = Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::<
        String,
        u64,
    >::new()));
    let placed = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    run_parallel(args.concurrency, args.users, {
        let clients = clients.to_vec();
        let pool = pool.to_string();
        let histogram = histogram.clone();
        let errors = errors.clone();
        let placed = placed.clone();
        let bar = bar.clone();
        move |i| {
            let client = clients[(i % clients.len() as u64) as usize].clone();
            let pool = pool.clone();
            let histogram = histogram.clone();
            let errors = errors.clone();
            let placed = placed.clone();
            let bar = bar.clone();
            async move {
                let t = Instant::now();
                let r = client
                    .post(
                        &["hostPools", &pool, "connect"],
                        &json!({"user": format!("user{i}@bench")}),
                    )
                    .await;
                let micros = t.elapsed().as_micros() as u64;
                histogram
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .saturating_record(micros.max(1));
                match r {
                    Ok(_) => {
                        placed.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        let code = e
                            .downcast_ref::<api::ClientError>()
                            .and_then(api::ClientError::code)
                            .map_or_else(|| "TransportError".to_string(), |c| c.to_string());
                        *errors
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .entry(code)
                            .or_default() += 1;
                    }
                }
                bar.inc(1);
                Ok::<(), anyhow::Error>(())
            }
        }
    })
    .await;
    let elapsed = started.elapsed().as_secs_f64();
    bar.finish_and_clear();

    // Check the outcome from the broker itself: every placement is there,
    // and how evenly the hosts were loaded.
    let sessions = client.get(&["hostPools", pool], &[]).await?;
    let hosts = client
        .list(&["hostPools", pool, "sessionHosts"], &[])
        .await?;
    let per_host = |field: &str| -> Vec<u64> {
        hosts
            .as_array()
            .map(|a| a.iter().filter_map(|h| h[field].as_u64()).collect())
            .unwrap_or_default()
    };
    let sessions_per_host = per_host("sessions");
    let connecting_per_host = per_host("connectingSessions");
    let h = histogram.lock().unwrap_or_else(|p| p.into_inner());
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    Ok(json!({
        "hosts": args.hosts,
        "users": args.users,
        "concurrency": args.concurrency,
        "brokers": clients.len(),
        "loadBalancerType": args.load_balancer_type,
        "setupSeconds": round3(setup_seconds),
        "seconds": round3(elapsed),
        "connectsPerSecond": (args.users as f64 / elapsed).round(),
        "placed": placed.load(Ordering::Relaxed),
        "errors": *errors.lock().unwrap_or_else(|p| p.into_inner()),
        "sessionsInPool": sessions.get("sessionCount"),
        "hostsUsed": sessions_per_host.iter().filter(|&&n| n > 0).count(),
        "minSessionsPerHost": sessions_per_host.iter().min(),
        "maxSessionsPerHost": sessions_per_host.iter().max(),
        "maxConnectingSessionsPerHost": connecting_per_host.iter().max(),
        "latencyMs": {"p50": ms(0.5), "p90": ms(0.9), "p99": ms(0.99), "p999": ms(0.999),
                      "max": h.max() as f64 / 1000.0, "mean": round3(h.mean() / 1000.0)},
    }))
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn print_table(r: &Value) {
    let l = &r["latencyMs"];
    println!(
        "storm: {} connects of distinct users, {} hosts, {} clients over {} broker(s), {}",
        r["users"],
        r["hosts"],
        r["concurrency"],
        r["brokers"],
        r["loadBalancerType"].as_str().unwrap_or("")
    );
    println!(
        "  throughput  {} connects/s over {} s",
        r["connectsPerSecond"], r["seconds"]
    );
    println!(
        "  latency ms  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
        l["p50"], l["p90"], l["p99"], l["p999"], l["max"]
    );
    println!(
        "  placed      {} (pool now holds {} sessions); errors {}",
        r["placed"], r["sessionsInPool"], r["errors"]
    );
    println!(
        "  spread      {} hosts used; sessions per host {}..{}; most connecting on one host {}",
        r["hostsUsed"],
        r["minSessionsPerHost"],
        r["maxSessionsPerHost"],
        r["maxConnectingSessionsPerHost"]
    );
}

fn progress(quiet: bool, len: u64, what: &'static str) -> indicatif::ProgressBar {
    if quiet {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg:>12} [{bar:40}] {pos}/{len} {per_sec} eta {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.set_message(what);
    bar
}

/// Runs `job(i)` for i in 0..count with `concurrency` workers; each worker
/// takes the next index when it is done, so at most `concurrency` requests
/// are in flight.
async fn run_parallel<F, Fut>(concurrency: u32, count: u64, job: F) -> Vec<anyhow::Result<()>>
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let next = Arc::new(AtomicU64::new(0));
    let job = Arc::new(job);
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let next = next.clone();
        let job = job.clone();
        workers.spawn(async move {
            let mut results = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return results;
                }
                if let Err(e) = job(i).await {
                    results.push(Err(e));
                }
            }
        });
    }
    let mut all = Vec::new();
    while let Some(r) = workers.join_next().await {
        match r {
            Ok(results) => all.extend(results),
            Err(e) => all.push(Err(anyhow::anyhow!("worker failed: {e}"))),
        }
    }
    all
}

/// A broker started for the benchmark: `deskbroker serve` on port 0 with a
/// temporary data directory, killed at the end.
struct PrivateBroker {
    child: tokio::process::Child,
    url: String,
    token: String,
    /// The RDP front door's address, when it was started with one.
    rdp: Option<std::net::SocketAddr>,
    _dir: tempfile::TempDir,
}

/// How long a private broker may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(30);

impl PrivateBroker {
    /// Starts `serve` with `extra` flags and admin `token`; with
    /// `rdp_default_pool`, also its RDP front door (`--rdp-listen
    /// 127.0.0.1:0 --rdp-default-pool POOL`).
    async fn start(
        rdp_default_pool: Option<&str>,
        extra: &[&str],
        token: &str,
    ) -> anyhow::Result<PrivateBroker> {
        let dir = tempfile::tempdir().context("cannot create a temporary data dir")?;
        let token = token.to_string();
        let exe = std::env::current_exe().context("cannot find the deskbroker binary")?;
        let mut command = tokio::process::Command::new(exe);
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .args(extra);
        if let Some(pool) = rdp_default_pool {
            command.args(["--rdp-listen", "127.0.0.1:0", "--rdp-default-pool", pool]);
        }
        let mut child = command
            .env("DESKBROKER_ADMIN_TOKEN", &token)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("cannot start a private broker")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        // `serve` prints its HTTP address, then its front door's.
        let (url, rdp) = tokio::time::timeout(START_TIMEOUT, async {
            let mut url = None;
            let mut rdp = None;
            while let Some(line) = lines.next_line().await? {
                if let Some(u) = line.strip_prefix("listening on ") {
                    url = Some(u.trim().to_string());
                } else if let Some(a) = line.strip_prefix("rdp front door listening on ") {
                    let a = a.trim();
                    rdp = Some(
                        a.parse::<std::net::SocketAddr>()
                            .with_context(|| format!("unreadable front door address {a:?}"))?,
                    );
                }
                if let Some(url) = &url
                    && (rdp_default_pool.is_none() || rdp.is_some())
                {
                    return Ok((url.clone(), rdp));
                }
            }
            anyhow::bail!("the private broker exited before listening")
        })
        .await
        .context("the private broker did not start in time")??;
        Ok(PrivateBroker {
            child,
            url,
            token,
            rdp,
            _dir: dir,
        })
    }

    async fn stop(mut self) {
        #[cfg(unix)]
        if let Some(pid) = self.child.id() {
            // SIGTERM: let it flush and stop cleanly.
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
        }
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

pub mod rdp {
    //! `deskbroker bench rdp`: the RDP front door side by side with HAProxy
    //! 2.6 configured the way RDP farms run it (`balance leastconn`,
    //! `stick on req.rdp_cookie(mstshash)`), both in front of the same
    //! loopback session hosts, and both compared with no proxy at all
    //! (`direct`, the baseline).
    //!
    //! The session hosts are tasks of this process: each reads the client's
    //! first PDU (TPKT, length-delimited), answers an X.224 Connection
    //! Confirm, then either waits for the client to close or, when the client
    //! asks with a 9-byte command (`D` and a u64 byte count), streams that
    //! many bytes to it. The targets are started here: a private `deskbroker
    //! serve --rdp-listen` on a fresh durable store whose default pool holds
    //! the hosts (BreadthFirst, no limit), and `haproxy -db` on a generated
    //! configuration; both are stopped at the end.
    //!
    //! Measurements, each run against every target in one round, the order
    //! of the targets rotating from round to round (the machine is shared:
    //! the table shows the median of the rounds, the JSON every round):
    //!
    //! 1. new connections per second from C clients, each connection being
    //!    connect, first PDU with `Cookie: mstshash=<user>`, the host's
    //!    Connection Confirm, close; with users never seen before (a new
    //!    placement, and for deskbroker a new durable session) and with
    //!    users who come back (a reconnect, and a sticky-table hit for
    //!    HAProxy);
    //! 2. time from connect to the host's first byte, one connection at a
    //!    time (unloaded), against connecting to the host directly;
    //! 3. relayed throughput: a few long connections streaming from the
    //!    hosts to the client.
    //!
    //! Every network wait is bounded ([`CONNECTION_TIMEOUT`], [`IO_TIMEOUT`])
    //! and every run is bounded by a duration or a count.

    use std::collections::BTreeMap;
    use std::net::SocketAddr;
    use std::path::{Path, PathBuf};
    use std::process::Stdio;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    use anyhow::Context as _;
    use serde_json::{Value, json};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::{PrivateBroker, START_TIMEOUT};
    use crate::cli::client::Client;

    /// How long one benchmark connection may take from connect to the
    /// host's whole Connection Confirm; past it, it counts as an error.
    pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);
    /// How long any single read or write may wait for progress (hosts and
    /// clients alike), so a stuck peer never hangs the benchmark.
    pub const IO_TIMEOUT: Duration = Duration::from_secs(10);
    /// Largest first PDU a host accepts (the X.224 length indicator is one
    /// byte, so a real Connection Request is at most 259 bytes).
    pub const MAX_FIRST_PDU_BYTES: usize = 259;
    /// Bytes per read or write when streaming (hosts and clients).
    pub const STREAM_CHUNK_BYTES: usize = 256 * 1024;
    /// How long HAProxy may take to accept its first connection.
    pub const HAPROXY_START_TIMEOUT: Duration = START_TIMEOUT;
    /// What a host answers to a Connection Request: TPKT (19 bytes), X.224
    /// Connection Confirm (LI 14, code 0xD0, dst-ref 0, src-ref 0x1234,
    /// class 0) and RDP_NEG_RSP selecting PROTOCOL_SSL.
    pub const CONNECTION_CONFIRM: [u8; 19] = [
        3, 0, 0, 19, 14, 0xD0, 0, 0, 0x12, 0x34, 0, 2, 0, 8, 0, 1, 0, 0, 0,
    ];
    /// The unit of `/proc/PID/stat`'s CPU times (`getconf CLK_TCK`: 100 on
    /// every Linux architecture deskbroker builds for).
    const CLOCK_TICKS_PER_SECOND: f64 = 100.0;
    /// The command byte asking a host to stream: `D` and a u64 count (BE).
    const STREAM_COMMAND: u8 = b'D';

    /// What the benchmark connects to.
    #[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    pub enum Target {
        /// Straight to the session hosts, round robin: the baseline.
        Direct,
        /// HAProxy in TCP mode with RDP cookie persistence.
        Haproxy,
        /// deskbroker's RDP front door.
        Deskbroker,
    }

    impl Target {
        fn name(self) -> &'static str {
            match self {
                Target::Direct => "direct",
                Target::Haproxy => "haproxy",
                Target::Deskbroker => "deskbroker",
            }
        }
    }

    /// Flags of `deskbroker bench rdp`.
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
        /// once, unmeasured, before the first round. 0 skips these runs.
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
        /// Admin token of `--broker` (default: DESKBROKER_TOKEN).
        #[arg(long, env = "DESKBROKER_TOKEN", hide_env_values = true)]
        pub token: Option<String>,
        /// The RDP front door of `--broker`.
        #[arg(long, value_name = "ADDR", requires = "broker")]
        pub rdp: Option<SocketAddr>,
        /// The pool of the session hosts (the front door's default pool).
        #[arg(long, default_value = "bench")]
        pub pool: String,
        /// `table` or `json`.
        #[arg(long, short = 'o', default_value = "table")]
        pub output: String,
        /// Print no progress on stderr.
        #[arg(long)]
        pub quiet: bool,
    }

    /// Where each target listens.
    struct Endpoints {
        hosts: Vec<SocketAddr>,
        haproxy: Option<SocketAddr>,
        deskbroker: Option<SocketAddr>,
        /// Processes of the proxies started here, whose CPU time each run
        /// reports (a front door given with `--rdp` is not measured).
        haproxy_pid: Option<u32>,
        deskbroker_pid: Option<u32>,
    }

    impl Endpoints {
        /// The address of connection `i` to `target` (round robin over the
        /// hosts for `direct`).
        fn address(&self, target: Target, i: u64) -> SocketAddr {
            match target {
                Target::Direct => self.hosts[(i % self.hosts.len() as u64) as usize],
                Target::Haproxy => self.haproxy.unwrap_or(self.hosts[0]),
                Target::Deskbroker => self.deskbroker.unwrap_or(self.hosts[0]),
            }
        }

        /// CPU seconds the target's process has used so far, if known.
        fn cpu_seconds(&self, target: Target) -> Option<f64> {
            let pid = match target {
                Target::Direct => None,
                Target::Haproxy => self.haproxy_pid,
                Target::Deskbroker => self.deskbroker_pid,
            }?;
            process_cpu_seconds(pid)
        }
    }

    pub async fn run(mut args: RdpArgs) -> anyhow::Result<()> {
        if !matches!(args.output.as_str(), "table" | "json") {
            anyhow::bail!("--output must be table or json");
        }
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
            deskbroker: None,
            haproxy_pid: None,
            deskbroker_pid: None,
        };
        let mut haproxy = None;
        let mut haproxy_version = None;
        if args.targets.contains(&Target::Haproxy) {
            let h = Haproxy::start(&args.haproxy, &hosts.addresses).await?;
            endpoints.haproxy = Some(h.address);
            endpoints.haproxy_pid = h.child.id();
            haproxy_version = Some(h.version.clone());
            haproxy = Some(h);
        }
        let mut private = None;
        let mut client = None;
        if args.targets.contains(&Target::Deskbroker) {
            let (url, token, rdp) = match (&args.broker, args.rdp) {
                (Some(url), Some(rdp)) => (url.clone(), args.token.clone(), rdp),
                _ => {
                    let token = format!("bench-{:032x}", rand::random::<u128>());
                    let b = PrivateBroker::start(Some(&args.pool), &[], &token).await?;
                    let rdp = b.rdp.context("the private broker started no front door")?;
                    endpoints.deskbroker_pid = b.child.id();
                    let r = (b.url.clone(), Some(b.token.clone()), rdp);
                    private = Some(b);
                    r
                }
            };
            let c = Client::new(&url, token)?;
            register_hosts(&c, &args.pool, &hosts.addresses).await?;
            endpoints.deskbroker = Some(rdp);
            client = Some(c);
        }

        let measured = measure(&args, &endpoints).await;
        let pool = match &client {
            Some(c) if measured.is_ok() => pool_outcome(c, &args.pool).await.ok(),
            _ => None,
        };
        if let Some(h) = haproxy {
            h.stop().await;
        }
        if let Some(b) = private {
            b.stop().await;
        }
        let rounds = measured?;
        let pool = pool.map(|mut p| {
            // Each new user's connection left one session, each returning
            // user one: the broker's own count must match.
            let new_users: u64 = rounds
                .iter()
                .filter(|r| {
                    r["target"] == Target::Deskbroker.name() && r["measure"] != "reconnects"
                })
                .filter_map(|r| r["connections"].as_u64().or(r["streamsDone"].as_u64()))
                .sum();
            let returning = if args.rate_seconds > 0 {
                args.reconnect_users
            } else {
                0
            };
            p["expectedSessions"] = json!(new_users + returning);
            p
        });
        let report = json!({
            "date": today(),
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
            "median": medians(&rounds),
            "runs": rounds,
        });
        if args.output == "json" {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print_table(&report, &args.targets);
        }
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
                let v = rate_run(endpoints, target, users, args.concurrency, limit).await;
                record("newUsers", target, v);
            }
            if rates && args.reconnect_users > 0 {
                for &target in order.iter().filter(|t| **t != Target::Direct) {
                    let users = Users::Repeat(args.reconnect_users);
                    let v = rate_run(endpoints, target, users, args.concurrency, limit).await;
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
                    let v =
                        throughput_run(endpoints, target, users, args.streams, stream_bytes).await;
                    record("throughput", target, v);
                }
            }
        }
        Ok(runs)
    }

    fn progress(args: &RdpArgs, what: std::fmt::Arguments<'_>) {
        if !args.quiet {
            eprintln!("bench rdp: {what}");
        }
    }

    /// Who the connections of a run claim to be.
    #[derive(Clone)]
    enum Users {
        /// A user never seen before for every connection.
        New(Arc<AtomicU64>),
        /// Users `r0`..`rN`, in turn.
        Repeat(u64),
    }

    impl Users {
        fn name(&self, i: u64) -> String {
            match self {
                Users::New(next) => format!("u{}", next.fetch_add(1, Ordering::Relaxed)),
                Users::Repeat(n) => format!("r{}", i % n),
            }
        }
    }

    /// When a run stops starting connections.
    #[derive(Clone, Copy)]
    enum RunLimit {
        Time(Duration),
        Count(u64),
    }

    /// The client's first PDU: TPKT, X.224 Connection Request with a
    /// `Cookie: mstshash=<user>` line, and RDP_NEG_REQ asking for TLS or
    /// CredSSP (what mstsc sends, less its correlation info).
    pub fn first_pdu(user: &str) -> Vec<u8> {
        let cookie = format!("Cookie: mstshash={user}\r\n");
        let length = 4 + 7 + cookie.len() + 8;
        let mut pdu = Vec::with_capacity(length);
        pdu.extend_from_slice(&[3, 0]);
        pdu.extend_from_slice(&(length as u16).to_be_bytes());
        pdu.extend_from_slice(&[(length - 5) as u8, 0xE0, 0, 0, 0, 0, 0]);
        pdu.extend_from_slice(cookie.as_bytes());
        pdu.extend_from_slice(&[1, 0, 8, 0, 3, 0, 0, 0]);
        pdu
    }

    /// Connects, sends `pdu` and reads the host's whole Connection Confirm.
    /// Answers the open stream and the time from connect to the first byte
    /// of the answer, or a short label of what failed.
    async fn open(address: SocketAddr, pdu: &[u8]) -> Result<(TcpStream, Duration), String> {
        let started = Instant::now();
        let handshake = async {
            let mut stream = TcpStream::connect(address)
                .await
                .map_err(|e| format!("connect: {}", e.kind()))?;
            let _ = stream.set_nodelay(true);
            stream
                .write_all(pdu)
                .await
                .map_err(|e| format!("send: {}", e.kind()))?;
            let mut reply = [0u8; CONNECTION_CONFIRM.len()];
            let n = stream
                .read(&mut reply)
                .await
                .map_err(|e| format!("receive: {}", e.kind()))?;
            if n == 0 {
                return Err("closed before the host answered".to_string());
            }
            let first_byte = started.elapsed();
            stream
                .read_exact(&mut reply[n..])
                .await
                .map_err(|e| format!("receive: {}", e.kind()))?;
            if reply != CONNECTION_CONFIRM {
                return Err("unexpected answer".to_string());
            }
            Ok((stream, first_byte))
        };
        tokio::time::timeout(CONNECTION_TIMEOUT, handshake)
            .await
            .unwrap_or_else(|_| Err("timed out".to_string()))
    }

    fn new_histogram() -> hdrhistogram::Histogram<u64> {
        // Nanoseconds, from 1 µs to a minute, 3 significant digits.
        hdrhistogram::Histogram::new_with_bounds(1_000, 60_000_000_000, 3).expect("valid bounds")
    }

    /// What one client worker of a run saw.
    struct WorkerTally {
        connections: u64,
        first_byte_ns: hdrhistogram::Histogram<u64>,
        errors: BTreeMap<String, u64>,
    }

    /// Connections of `concurrency` clients until `limit`: connect, first
    /// PDU, Connection Confirm, close. With one client and a count, this is
    /// the unloaded latency run.
    async fn rate_run(
        endpoints: &Endpoints,
        target: Target,
        users: Users,
        concurrency: u32,
        limit: RunLimit,
    ) -> Value {
        let next = Arc::new(AtomicU64::new(0));
        let cpu_before = endpoints.cpu_seconds(target);
        let started = Instant::now();
        let deadline = match limit {
            RunLimit::Time(d) => Some(started + d),
            RunLimit::Count(_) => None,
        };
        let count = match limit {
            RunLimit::Count(n) => n,
            RunLimit::Time(_) => u64::MAX,
        };
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..concurrency {
            let next = next.clone();
            let users = users.clone();
            let addresses: Vec<SocketAddr> = (0..endpoints.hosts.len() as u64)
                .map(|i| endpoints.address(target, i))
                .collect();
            workers.spawn(async move {
                let mut tally = WorkerTally {
                    connections: 0,
                    first_byte_ns: new_histogram(),
                    errors: BTreeMap::new(),
                };
                loop {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        break;
                    }
                    let pdu = first_pdu(&users.name(i));
                    let address = addresses[(i % addresses.len() as u64) as usize];
                    match open(address, &pdu).await {
                        Ok((stream, first_byte)) => {
                            drop(stream);
                            tally.connections += 1;
                            tally
                                .first_byte_ns
                                .saturating_record(first_byte.as_nanos() as u64);
                        }
                        Err(e) => *tally.errors.entry(e).or_default() += 1,
                    }
                }
                tally
            });
        }
        let mut connections = 0;
        let mut first_byte_ns = new_histogram();
        let mut errors = BTreeMap::<String, u64>::new();
        while let Some(r) = workers.join_next().await {
            match r {
                Ok(t) => {
                    connections += t.connections;
                    let _ = first_byte_ns.add(&t.first_byte_ns);
                    for (e, n) in t.errors {
                        *errors.entry(e).or_default() += n;
                    }
                }
                Err(e) => {
                    *errors
                        .entry(format!("client task failed: {e}"))
                        .or_default() += 1
                }
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        let cpu = cpu_used(endpoints, target, cpu_before);
        let ms = |ns: u64| round3(ns as f64 / 1e6);
        json!({
            "concurrency": concurrency,
            "connections": connections,
            "seconds": round3(seconds),
            "perSecond": (connections as f64 / seconds).round(),
            "firstByteP50Ms": ms(first_byte_ns.value_at_quantile(0.5)),
            "firstByteP99Ms": ms(first_byte_ns.value_at_quantile(0.99)),
            "firstByteMeanMs": round3(first_byte_ns.mean() / 1e6),
            "firstByteMaxMs": ms(first_byte_ns.max()),
            "proxyCpuSeconds": cpu.map(round3),
            "proxyCpuMsPer1kConnections": cpu
                .filter(|_| connections > 0)
                .map(|c| round3(c * 1e6 / connections as f64)),
            "errors": errors,
        })
    }

    /// `streams` long connections, each asking its host for
    /// `total_bytes / streams` bytes and reading them all; answers MB/s
    /// (10^6 bytes) over the wall time of the whole run.
    async fn throughput_run(
        endpoints: &Endpoints,
        target: Target,
        users: Users,
        streams: u32,
        total_bytes: u64,
    ) -> Value {
        let per_stream = total_bytes / u64::from(streams);
        let cpu_before = endpoints.cpu_seconds(target);
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..u64::from(streams) {
            let address = endpoints.address(target, i);
            let pdu = first_pdu(&users.name(i));
            tasks.spawn(async move { stream_from_host(address, &pdu, per_stream).await });
        }
        let mut received = 0u64;
        let mut streams_done = 0u64;
        let mut errors = BTreeMap::<String, u64>::new();
        while let Some(r) = tasks.join_next().await {
            match r {
                Ok(Ok(n)) => {
                    received += n;
                    streams_done += 1;
                }
                Ok(Err(e)) => *errors.entry(e).or_default() += 1,
                Err(e) => {
                    *errors
                        .entry(format!("client task failed: {e}"))
                        .or_default() += 1
                }
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        let cpu = cpu_used(endpoints, target, cpu_before);
        json!({
            "streams": streams,
            "streamsDone": streams_done,
            "bytes": received,
            "seconds": round3(seconds),
            "megabytesPerSecond": (received as f64 / seconds / 1e6).round(),
            "proxyCpuSeconds": cpu.map(round3),
            "proxyCpuSecondsPerGB": cpu
                .filter(|_| received > 0)
                .map(|c| round3(c * 1e9 / received as f64)),
            "errors": errors,
        })
    }

    /// One throughput connection: handshake, then `bytes` from the host.
    async fn stream_from_host(address: SocketAddr, pdu: &[u8], bytes: u64) -> Result<u64, String> {
        let (mut stream, _) = open(address, pdu).await?;
        let mut command = [0u8; 9];
        command[0] = STREAM_COMMAND;
        command[1..].copy_from_slice(&bytes.to_be_bytes());
        with_timeout(stream.write_all(&command))
            .await
            .map_err(|e| format!("send: {e}"))?;
        let mut buffer = vec![0u8; STREAM_CHUNK_BYTES];
        let mut received = 0u64;
        while received < bytes {
            let n = with_timeout(stream.read(&mut buffer))
                .await
                .map_err(|e| format!("stream: {e}"))?;
            if n == 0 {
                return Err(format!("stream: closed after {received} of {bytes} bytes"));
            }
            received += n as u64;
        }
        Ok(received)
    }

    /// CPU seconds `target`'s process used since `before`.
    fn cpu_used(endpoints: &Endpoints, target: Target, before: Option<f64>) -> Option<f64> {
        Some(endpoints.cpu_seconds(target)? - before?)
    }

    /// User and system CPU time of a whole process (every thread), from
    /// `/proc/PID/stat`; None where there is no such file.
    fn process_cpu_seconds(pid: u32) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the command name, which is in parentheses and may
        // hold spaces: state is field 3, utime 14 and stime 15.
        let after_name = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(ticks as f64 / CLOCK_TICKS_PER_SECOND)
    }

    /// Bounds one read or write by [`IO_TIMEOUT`].
    async fn with_timeout<T>(
        io: impl std::future::Future<Output = std::io::Result<T>>,
    ) -> std::io::Result<T> {
        tokio::time::timeout(IO_TIMEOUT, io)
            .await
            .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
    }

    /// The session hosts: loopback listeners whose accept loops end when
    /// this is dropped.
    struct Hosts {
        addresses: Vec<SocketAddr>,
        /// First PDUs that were not TPKT or too long: should stay 0.
        bad_requests: Arc<AtomicU64>,
        _accepting: tokio::task::JoinSet<()>,
    }

    impl Hosts {
        async fn start(n: u16) -> anyhow::Result<Hosts> {
            let bad_requests = Arc::new(AtomicU64::new(0));
            let mut accepting = tokio::task::JoinSet::new();
            let mut addresses = Vec::new();
            for _ in 0..n {
                let listener = TcpListener::bind("127.0.0.1:0")
                    .await
                    .context("cannot start a session host on 127.0.0.1")?;
                addresses.push(listener.local_addr()?);
                let bad_requests = bad_requests.clone();
                accepting.spawn(async move {
                    loop {
                        match listener.accept().await {
                            Ok((stream, _)) => {
                                let bad_requests = bad_requests.clone();
                                tokio::spawn(async move {
                                    if host_connection(stream).await.is_err() {
                                        bad_requests.fetch_add(1, Ordering::Relaxed);
                                    }
                                });
                            }
                            // Out of descriptors, most likely: pause, go on.
                            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                        }
                    }
                });
            }
            Ok(Hosts {
                addresses,
                bad_requests,
                _accepting: accepting,
            })
        }
    }

    /// One connection to a session host. Errs only on a malformed first
    /// PDU; a peer that goes away (a health check, a client that closed) is
    /// a normal end.
    async fn host_connection(mut stream: TcpStream) -> Result<(), ()> {
        let _ = stream.set_nodelay(true);
        let mut header = [0u8; 4];
        if with_timeout(stream.read_exact(&mut header)).await.is_err() {
            return Ok(()); // a health check, or a client that gave up
        }
        let length = usize::from(u16::from_be_bytes([header[2], header[3]]));
        if header[0] != 3 || !(4..=MAX_FIRST_PDU_BYTES).contains(&length) {
            return Err(());
        }
        let mut rest = vec![0u8; length - 4];
        if with_timeout(stream.read_exact(&mut rest)).await.is_err()
            || with_timeout(stream.write_all(&CONNECTION_CONFIRM))
                .await
                .is_err()
        {
            return Ok(());
        }
        let mut command = [0u8; 9];
        if with_timeout(stream.read_exact(&mut command)).await.is_err() {
            return Ok(()); // the client closed after the confirm
        }
        if command[0] != STREAM_COMMAND {
            return Err(());
        }
        let mut remaining = u64::from_be_bytes(command[1..].try_into().map_err(|_| ())?);
        let chunk = vec![0u8; STREAM_CHUNK_BYTES];
        while remaining > 0 {
            let n = remaining.min(chunk.len() as u64) as usize;
            if with_timeout(stream.write_all(&chunk[..n])).await.is_err() {
                return Ok(());
            }
            remaining -= n as u64;
        }
        // Wait for the client to close (bounded), so the last bytes are read.
        let _ = with_timeout(stream.read(&mut command)).await;
        Ok(())
    }

    /// Replaces `pool` with a BreadthFirst pool without a session limit
    /// holding the session hosts.
    async fn register_hosts(
        client: &Client,
        pool: &str,
        hosts: &[SocketAddr],
    ) -> anyhow::Result<()> {
        if client.get(&["hostPools", pool], &[]).await.is_ok() {
            client
                .delete(&["hostPools", pool], &[("force", "true")])
                .await?;
        }
        client
            .put(
                &["hostPools", pool],
                &json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"}),
            )
            .await
            .context("cannot create the benchmark pool")?;
        for (i, address) in hosts.iter().enumerate() {
            let name = format!("bench-h{i:03}");
            client
                .put(
                    &["hostPools", pool, "sessionHosts", &name],
                    &json!({"address": address.to_string()}),
                )
                .await
                .with_context(|| format!("cannot register session host {name}"))?;
        }
        Ok(())
    }

    /// The pool as the broker sees it after the run: every connection of
    /// a new user left a (Disconnected) session, spread over the hosts.
    async fn pool_outcome(client: &Client, pool: &str) -> anyhow::Result<Value> {
        let p = client.get(&["hostPools", pool], &[]).await?;
        let hosts = client
            .list(&["hostPools", pool, "sessionHosts"], &[])
            .await?;
        let per_host: Vec<u64> = hosts
            .as_array()
            .map(|a| a.iter().filter_map(|h| h["sessions"].as_u64()).collect())
            .unwrap_or_default();
        Ok(json!({
            "sessions": p.get("sessionCount"),
            "minSessionsPerHost": per_host.iter().min(),
            "maxSessionsPerHost": per_host.iter().max(),
        }))
    }

    /// HAProxy on a generated configuration, in the foreground (`-db`),
    /// killed at the end.
    struct Haproxy {
        child: tokio::process::Child,
        address: SocketAddr,
        version: String,
        _dir: tempfile::TempDir,
    }

    /// The configuration: TCP mode, the first PDU inspected for its RDP
    /// cookie, least connections, and a user's later connections stuck to
    /// the host of the first (the RDP farm setup of HAProxy's own docs).
    fn haproxy_config(port: u16, hosts: &[SocketAddr]) -> String {
        let mut cfg = format!(
            "# Generated by `deskbroker bench rdp`.
global
    maxconn 8000

defaults
    mode tcp
    timeout connect 3s
    timeout client 1h
    timeout server 1h
    maxconn 8000

frontend rdp
    bind 127.0.0.1:{port}
    tcp-request inspect-delay 5s
    tcp-request content accept if RDP_COOKIE
    default_backend hosts

backend hosts
    balance leastconn
    stick-table type string len 32 size 10k expire 8h
    stick on req.rdp_cookie(mstshash)
"
        );
        for (i, address) in hosts.iter().enumerate() {
            cfg.push_str(&format!("    server h{i:03} {address} check\n"));
        }
        cfg
    }

    impl Haproxy {
        async fn start(program: &Path, hosts: &[SocketAddr]) -> anyhow::Result<Haproxy> {
            let version = tokio::process::Command::new(program)
                .arg("-v")
                .output()
                .await
                .with_context(|| {
                    format!(
                        "cannot run {} (install it: apt-get install haproxy; or leave it out: \
                         --targets direct,deskbroker)",
                        program.display()
                    )
                })?;
            let version = String::from_utf8_lossy(&version.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string();
            let dir = tempfile::tempdir().context("cannot create a directory for haproxy")?;
            let mut last_log = String::new();
            // A port picked by binding 0 could be taken before HAProxy binds it: retry.
            for _ in 0..3 {
                let port = std::net::TcpListener::bind("127.0.0.1:0")
                    .and_then(|l| l.local_addr())
                    .context("cannot find a free port for haproxy")?
                    .port();
                let cfg = dir.path().join("haproxy.cfg");
                std::fs::write(&cfg, haproxy_config(port, hosts))
                    .with_context(|| format!("cannot write {}", cfg.display()))?;
                let log_path = dir.path().join("haproxy.log");
                let log = std::fs::File::create(&log_path)
                    .with_context(|| format!("cannot create {}", log_path.display()))?;
                let mut child = tokio::process::Command::new(program)
                    .arg("-f")
                    .arg(&cfg)
                    .arg("-db")
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(log)
                    .kill_on_drop(true)
                    .spawn()
                    .with_context(|| format!("cannot start {}", program.display()))?;
                let address = SocketAddr::from(([127, 0, 0, 1], port));
                let deadline = Instant::now() + HAPROXY_START_TIMEOUT;
                while Instant::now() < deadline {
                    if let Ok(Some(_)) = child.try_wait() {
                        break;
                    }
                    if TcpStream::connect(address).await.is_ok() {
                        return Ok(Haproxy {
                            child,
                            address,
                            version,
                            _dir: dir,
                        });
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let _ = child.kill().await;
                last_log = std::fs::read_to_string(&log_path).unwrap_or_default();
            }
            anyhow::bail!("haproxy did not start listening; it said:\n{last_log}")
        }

        async fn stop(mut self) {
            let _ = self.child.kill().await;
        }
    }

    /// Today's date (UTC), for the report.
    fn today() -> String {
        let days = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() / 86_400)
            .unwrap_or(0) as i64;
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        format!("{year:04}-{month:02}-{day:02}")
    }

    fn round3(x: f64) -> f64 {
        (x * 1000.0).round() / 1000.0
    }

    /// The median over rounds of every number of every run, by measure
    /// and target.
    fn medians(runs: &[Value]) -> Value {
        let mut grouped = BTreeMap::<(String, String), Vec<&Value>>::new();
        for r in runs {
            let key = (
                r["measure"].as_str().unwrap_or("").to_string(),
                r["target"].as_str().unwrap_or("").to_string(),
            );
            grouped.entry(key).or_default().push(r);
        }
        let mut out = serde_json::Map::new();
        for ((measure, target), rs) in grouped {
            let mut fields = serde_json::Map::new();
            if let Some(Value::Object(first)) = rs.first().copied() {
                for (k, v) in first {
                    if k == "round" || !v.is_number() {
                        continue;
                    }
                    let mut xs: Vec<f64> = rs.iter().filter_map(|r| r[k].as_f64()).collect();
                    xs.sort_by(f64::total_cmp);
                    let m = if xs.len() % 2 == 1 {
                        xs[xs.len() / 2]
                    } else {
                        (xs[xs.len() / 2 - 1] + xs[xs.len() / 2]) / 2.0
                    };
                    fields.insert(k.clone(), json!(round3(m)));
                }
            }
            let errors: u64 = rs
                .iter()
                .filter_map(|r| r["errors"].as_object())
                .flat_map(|e| e.values().filter_map(Value::as_u64))
                .sum();
            fields.insert("errorsAllRounds".into(), json!(errors));
            let entry = out
                .entry(measure)
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            entry[target] = Value::Object(fields);
        }
        Value::Object(out)
    }

    fn print_table(r: &Value, targets: &[Target]) {
        let m = &r["median"];
        println!(
            "bench rdp, {}: {} loopback session hosts, {} CPUs shared by clients, hosts and proxies; \
             median of {} rounds",
            r["date"].as_str().unwrap_or(""),
            r["backends"],
            r["cpus"],
            r["rounds"]
        );
        if let Some(v) = r["haproxyVersion"].as_str() {
            println!("haproxy: {v}");
        }
        let get = |measure: &str, t: Target, field: &str| m[measure][t.name()][field].as_f64();
        let mut header = format!("{:<44}", "");
        for t in targets {
            header.push_str(&format!("{:>12}", t.name()));
        }
        let both = targets.contains(&Target::Haproxy) && targets.contains(&Target::Deskbroker);
        if both {
            header.push_str(&format!("{:>14}", "deskb/haproxy"));
        }
        println!("{header}");
        let row = |label: String, measure: &str, field: &str, decimals: usize| {
            let mut line = format!("{label:<44}");
            for &t in targets {
                match get(measure, t, field) {
                    Some(x) => line.push_str(&format!("{x:>12.decimals$}")),
                    None => line.push_str(&format!("{:>12}", "-")),
                }
            }
            if both
                && let (Some(d), Some(h)) = (
                    get(measure, Target::Deskbroker, field),
                    get(measure, Target::Haproxy, field),
                )
                && h > 0.0
            {
                line.push_str(&format!("{:>13.2}x", d / h));
            }
            println!("{line}");
        };
        let c = &r["concurrency"];
        row(
            format!("new connections/s, new users ({c} clients)"),
            "newUsers",
            "perSecond",
            0,
        );
        row(
            format!("new connections/s, reconnects ({c} clients)"),
            "reconnects",
            "perSecond",
            0,
        );
        row(
            "  first byte p50 ms under load, new users".into(),
            "newUsers",
            "firstByteP50Ms",
            2,
        );
        row(
            "  first byte p99 ms under load, new users".into(),
            "newUsers",
            "firstByteP99Ms",
            2,
        );
        row(
            "first byte p50 ms, 1 client, new users".into(),
            "latency",
            "firstByteP50Ms",
            3,
        );
        row(
            "first byte p99 ms, 1 client, new users".into(),
            "latency",
            "firstByteP99Ms",
            3,
        );
        if targets.contains(&Target::Direct) {
            for (q, field) in [("p50", "firstByteP50Ms"), ("p99", "firstByteP99Ms")] {
                let mut line = format!("{:<44}", format!("  added to direct, {q} ms"));
                let base = get("latency", Target::Direct, field);
                for &t in targets {
                    match (get("latency", t, field), base) {
                        (Some(x), Some(b)) if t != Target::Direct => {
                            line.push_str(&format!("{:>12}", format!("+{:.3}", x - b)))
                        }
                        _ => line.push_str(&format!("{:>12}", "-")),
                    }
                }
                println!("{line}");
            }
        }
        row(
            format!(
                "relayed MB/s ({} streams, {} MiB)",
                r["streams"], r["streamMib"]
            ),
            "throughput",
            "megabytesPerSecond",
            0,
        );
        row(
            "proxy CPU ms per 1,000 new users".into(),
            "newUsers",
            "proxyCpuMsPer1kConnections",
            1,
        );
        row(
            "proxy CPU s per GB relayed".into(),
            "throughput",
            "proxyCpuSecondsPerGB",
            3,
        );
        let mut line = format!("{:<44}", "errors (all runs)");
        for &t in targets {
            let n: u64 = ["newUsers", "reconnects", "latency", "throughput"]
                .iter()
                .filter_map(|ms| m[*ms][t.name()]["errorsAllRounds"].as_u64())
                .sum();
            line.push_str(&format!("{n:>12}"));
        }
        println!("{line}");
        if let Some(p) = r["deskbrokerPool"].as_object() {
            println!(
                "deskbroker pool after the run: {} sessions ({} expected), {}..{} per host",
                p.get("sessions").unwrap_or(&Value::Null),
                p.get("expectedSessions").unwrap_or(&Value::Null),
                p.get("minSessionsPerHost").unwrap_or(&Value::Null),
                p.get("maxSessionsPerHost").unwrap_or(&Value::Null)
            );
        }
        let bad = r["hostBadRequests"].as_u64().unwrap_or(0);
        if bad > 0 {
            println!("session hosts refused {bad} malformed first PDUs");
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn the_first_pdu_is_one_the_front_door_reads_as_the_user() {
            let pdu = first_pdu("u12345");
            let request = gateway::pdu::parse(&pdu).expect("a valid first PDU");
            assert_eq!(
                request.routing,
                Some(gateway::pdu::Routing::User("u12345".into()))
            );
            assert_eq!(request.negotiation.map(|n| n.requested_protocols), Some(3));
        }

        #[test]
        fn medians_take_the_middle_round() {
            let runs: Vec<Value> = [3.0, 1.0, 2.0]
                .iter()
                .enumerate()
                .map(
                    |(i, x)| json!({"round": i + 1, "measure": "m", "target": "t", "perSecond": x}),
                )
                .collect();
            assert_eq!(medians(&runs)["m"]["t"]["perSecond"], json!(2.0));
        }
    }
}
