//! `deskbroker bench storm`: a load generator for a logon storm. It creates
//! a pool of N hosts, sends M connects of distinct users from C concurrent
//! clients over HTTP (keep-alive), and reports throughput and latency
//! percentiles. Without `--broker` it starts a private broker (this same
//! binary, `serve`, on the durable SQLite store in a temporary directory),
//! so one command reproduces the figures in `docs/benchmarks.md`.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::cli::client::{ApiError, Client};

/// Flags of `deskbroker bench`.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum BenchCommand {
    /// Create a pool of N hosts and send M connects with C concurrent clients.
    Storm(StormArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct StormArgs {
    /// Broker to load. Without it, a private broker is started on a fresh
    /// SQLite data directory and stopped at the end.
    #[arg(long, value_name = "URL")]
    pub broker: Option<String>,
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
    let BenchCommand::Storm(args) = cmd;
    if !matches!(args.output.as_str(), "table" | "json") {
        anyhow::bail!("--output must be table or json");
    }
    if args.hosts == 0 || args.users == 0 || args.concurrency == 0 {
        anyhow::bail!("--hosts, --users and --concurrency must be at least 1");
    }
    let mut private = None;
    let (url, token) = match &args.broker {
        Some(url) => (url.clone(), args.token.clone()),
        None => {
            let b = PrivateBroker::start().await?;
            let r = (b.url.clone(), Some(b.token.clone()));
            private = Some(b);
            r
        }
    };
    let client = Arc::new(Client::new(&url, token)?);
    let report = storm(&client, &args).await;
    if let Some(b) = private {
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

async fn storm(client: &Arc<Client>, args: &StormArgs) -> anyhow::Result<Value> {
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
        let client = client.clone();
        let pool = pool.to_string();
        let histogram = histogram.clone();
        let errors = errors.clone();
        let placed = placed.clone();
        let bar = bar.clone();
        move |i| {
            let client = client.clone();
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
                            .downcast_ref::<ApiError>()
                            .map_or_else(|| "TransportError".to_string(), |a| a.code.clone());
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
        "storm: {} connects of distinct users, {} hosts, {} clients, {}",
        r["users"],
        r["hosts"],
        r["concurrency"],
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
    _dir: tempfile::TempDir,
}

/// How long a private broker may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(30);

impl PrivateBroker {
    async fn start() -> anyhow::Result<PrivateBroker> {
        let dir = tempfile::tempdir().context("cannot create a temporary data dir")?;
        let token = format!("bench-{:032x}", rand::random::<u128>());
        let exe = std::env::current_exe().context("cannot find the deskbroker binary")?;
        let mut child = tokio::process::Command::new(exe)
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .env("DESKBROKER_ADMIN_TOKEN", &token)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("cannot start a private broker")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let url = tokio::time::timeout(START_TIMEOUT, async {
            while let Some(line) = lines.next_line().await? {
                if let Some(url) = line.strip_prefix("listening on ") {
                    return Ok(url.trim().to_string());
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
