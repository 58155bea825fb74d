//! `deskbroker bench storm`: a logon storm over HTTP. It creates a pool of
//! N hosts, sends M connects of distinct users from C concurrent clients
//! (keep-alive), and reports throughput and latency percentiles, then checks
//! the outcome with the broker itself (sessions in the pool, spread over the
//! hosts). Without `--broker` it starts private brokers (this same binary,
//! `serve`, on the durable SQLite store in a temporary directory, or on
//! `--database-url`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context as _;
use placement::LoadBalancerType;
use serde_json::{Map, Value, json};

use crate::cli::output::{self, Columns, OutputFormat};
use deskbroker::benchkit::broker::{Broker, PrivateBroker, new_token};
use deskbroker::benchkit::round3;

/// Most private replicas `bench storm` starts.
const MAX_REPLICAS: u32 = 16;

/// What `--output table` shows (keys of the report's row, see [`row`]):
/// every figure of the JSON report but the setup, which the line above the
/// table gives.
const TABLE_COLUMNS: Columns = &[
    "connectsPerSecond",
    "seconds",
    "p50Ms",
    "p90Ms",
    "p99Ms",
    "p999Ms",
    "maxMs",
    "placed",
    "errors",
    "sessionsInPool",
    "hostsUsed",
    "minSessionsPerHost",
    "maxSessionsPerHost",
    "maxConnectingSessionsPerHost",
];

/// The algorithms a storm can load, named as the API names them (the
/// pooled ones of rule P2: the personal ones place nobody new).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
#[value(rename_all = "PascalCase")]
pub enum Algorithm {
    BreadthFirst,
    DepthFirst,
    LoadIndex,
}

impl Algorithm {
    fn api(self) -> LoadBalancerType {
        match self {
            Algorithm::BreadthFirst => LoadBalancerType::BreadthFirst,
            Algorithm::DepthFirst => LoadBalancerType::DepthFirst,
            Algorithm::LoadIndex => LoadBalancerType::LoadIndex,
        }
    }
}

/// Flags of `deskbroker bench storm`.
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
    /// Admin token of `--broker`. Default: DESKBROKER_TOKEN, else the
    /// contents of $DESKBROKER_DATA_DIR/admin.token
    /// (./deskbroker-data/admin.token), as for every CLI command.
    #[arg(long, env = "DESKBROKER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// How an `https://` `--broker` is trusted.
    #[command(flatten)]
    pub tls: crate::cli::TlsArgs,
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
    #[arg(long, value_enum, default_value_t = Algorithm::BreadthFirst)]
    pub load_balancer_type: Algorithm,
    /// LoadIndex pools: the CPU threshold of the index (0 leaves the CPU
    /// out). Each host then sends one heartbeat with a CPU between 0 and
    /// 60 % while it is added, and none during the storm: the index the
    /// broker sees is stale, as it is during a real logon storm (H4).
    #[arg(long, default_value_t = 90)]
    pub cpu_threshold: u32,
    /// Name of the benchmark pool (replaced if it exists).
    #[arg(long, default_value = "bench-storm")]
    pub pool: String,
    /// A scaling plan (the API's JSON) put over the benchmark pool once its
    /// hosts are added, as plan `<pool>-plan` (its `hostPools` are set to
    /// the pool): the broker's evaluator then runs during the storm, to
    /// measure what it costs the connects (start the broker with a short
    /// `--autoscale-interval`).
    #[arg(long, value_name = "FILE")]
    pub scaling_plan: Option<std::path::PathBuf>,
    /// `table` (the figures in one row, under a line saying what ran),
    /// `json` (the whole report, latency and errors by code nested) or
    /// `tsv` (the table's row, every figure, no header).
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    /// Hide the progress bar.
    #[arg(long)]
    pub quiet: bool,
}

pub async fn run(args: StormArgs) -> anyhow::Result<()> {
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
    let clients = if args.broker.is_empty() {
        let token = new_token();
        let program = std::env::current_exe().context("cannot find the deskbroker binary")?;
        let store: Vec<&str> = match &args.database_url {
            Some(url) => vec!["--database-url", url],
            None => Vec::new(),
        };
        for _ in 0..args.replicas {
            private.push(PrivateBroker::start_with_token(&program, None, &store, &token).await?);
        }
        private.iter().map(PrivateBroker::client).collect()
    } else {
        args.tls.trust().and_then(|trust| {
            args.broker
                .iter()
                .map(|url| Broker::new(url, args.token.as_deref(), &trust))
                .collect::<anyhow::Result<Vec<_>>>()
        })
    };
    let report = match clients {
        Ok(clients) => {
            let clients: Vec<Arc<Broker>> = clients.into_iter().map(Arc::new).collect();
            storm(&clients, &args).await
        }
        Err(e) => Err(e),
    };
    for b in private {
        b.stop().await;
    }
    print(&report?, args.output)
}

/// Prints the report in `format`: the JSON as it is, or its [`row`] as a
/// table (under a line saying what ran, above the errors by code if any)
/// or as tsv.
fn print(report: &Value, format: OutputFormat) -> anyhow::Result<()> {
    if format == OutputFormat::Json {
        print!("{}", output::render(report, format, TABLE_COLUMNS));
        return Ok(());
    }
    let table = format == OutputFormat::Table;
    if table {
        println!(
            "storm: {} connects of distinct users, {} hosts, {} clients over {} broker(s), {}; latency in ms\n",
            report["users"],
            report["hosts"],
            report["concurrency"],
            report["brokers"],
            report["loadBalancerType"].as_str().unwrap_or("")
        );
    }
    print!("{}", output::render(&row(report), format, TABLE_COLUMNS));
    if table
        && let Some(errors) = report["errors"].as_object()
        && !errors.is_empty()
    {
        println!("\nerrors by code: {}", report["errors"]);
    }
    Ok(())
}

/// The report as one flat row for `table` and `tsv`: its fields in order,
/// the latency percentiles (`latencyMs.p50`…) as `p50Ms`…, and `errors` as
/// their total (the JSON has them by code).
fn row(report: &Value) -> Value {
    let mut row = Map::new();
    for (key, value) in report.as_object().into_iter().flatten() {
        match (key.as_str(), value) {
            ("latencyMs", Value::Object(latency)) => {
                for (quantile, ms) in latency {
                    row.insert(format!("{quantile}Ms"), ms.clone());
                }
            }
            ("errors", Value::Object(errors)) => {
                let total: u64 = errors.values().filter_map(Value::as_u64).sum();
                row.insert(key.clone(), json!(total));
            }
            _ => {
                row.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(row)
}

async fn storm(clients: &[Arc<Broker>], args: &StormArgs) -> anyhow::Result<Value> {
    let client = &clients[0];
    let pool = args.pool.as_str();
    let load_balancer_type = args.load_balancer_type.api();
    let load_index = load_balancer_type == LoadBalancerType::LoadIndex;
    let cpu_threshold = if load_index { args.cpu_threshold } else { 0 };
    let pool_body = json!({
        "hostPoolType": "Pooled",
        "loadBalancerType": load_balancer_type,
        "loadIndexSettings": {"cpuThreshold": cpu_threshold},
    });
    // A pool left from an earlier run is cleared (force removes sessions).
    client.replace_pool(pool, &pool_body).await?;

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
                client.add_host(&pool, &host, &address).await?;
                if cpu_threshold > 0 {
                    // One heartbeat, never refreshed during the storm: a
                    // fixed, spread-out CPU of 0..60 % per host.
                    let cpu = (i.wrapping_mul(0x9E37_79B9) % 6_000) as f64 / 100.0;
                    client.heartbeat(&pool, &host, cpu).await?;
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
    if let Some(file) = &args.scaling_plan {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        let mut plan: Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", file.display()))?;
        plan["hostPools"] = json!([pool]);
        client
            .put_scaling_plan(&format!("{pool}-plan"), &plan)
            .await?;
    }
    let setup_seconds = setup_started.elapsed().as_secs_f64();

    let bar = progress(args.quiet, args.users, "connecting");
    let histogram = Arc::new(Mutex::new(
        hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"),
    ));
    let errors = Arc::new(Mutex::new(BTreeMap::<String, u64>::new()));
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
                let r = client.connect(&pool, &format!("user{i}@bench")).await;
                let micros = t.elapsed().as_micros() as u64;
                histogram
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .saturating_record(micros.max(1));
                match r {
                    Ok(()) => {
                        placed.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(code) => {
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
    let sessions_in_pool = client.session_count(pool).await?;
    let hosts = client.hosts(pool).await?;
    let per_host =
        |field: &str| -> Vec<u64> { hosts.iter().filter_map(|h| h[field].as_u64()).collect() };
    let sessions_per_host = per_host("sessions");
    let connecting_per_host = per_host("connectingSessions");
    let h = histogram.lock().unwrap_or_else(|p| p.into_inner());
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    Ok(json!({
        "hosts": args.hosts,
        "users": args.users,
        "concurrency": args.concurrency,
        "brokers": clients.len(),
        "loadBalancerType": load_balancer_type,
        "setupSeconds": round3(setup_seconds),
        "seconds": round3(elapsed),
        "connectsPerSecond": (args.users as f64 / elapsed).round(),
        "placed": placed.load(Ordering::Relaxed),
        "errors": *errors.lock().unwrap_or_else(|p| p.into_inner()),
        "sessionsInPool": sessions_in_pool,
        "hostsUsed": sessions_per_host.iter().filter(|&&n| n > 0).count(),
        "minSessionsPerHost": sessions_per_host.iter().min(),
        "maxSessionsPerHost": sessions_per_host.iter().max(),
        "maxConnectingSessionsPerHost": connecting_per_host.iter().max(),
        "latencyMs": {"p50": ms(0.5), "p90": ms(0.9), "p99": ms(0.99), "p999": ms(0.999),
                      "max": h.max() as f64 / 1000.0, "mean": round3(h.mean() / 1000.0)},
    }))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_row_flattens_latency_and_totals_errors_in_report_order() {
        let report = json!({
            "hosts": 2, "errors": {"NoHostAvailable": 3, "TransportError": 1},
            "latencyMs": {"p50": 1.5, "max": 9.0}, "placed": 7,
        });
        assert_eq!(
            row(&report).to_string(),
            json!({"hosts": 2, "errors": 4, "p50Ms": 1.5, "maxMs": 9.0, "placed": 7}).to_string()
        );
    }

    #[test]
    fn algorithms_are_named_as_the_api_names_them() {
        use clap::ValueEnum as _;
        for a in Algorithm::value_variants() {
            let name = a.to_possible_value().expect("named").get_name().to_string();
            assert_eq!(json!(a.api()), json!(name));
        }
    }
}
