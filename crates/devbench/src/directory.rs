//! `deskbroker-devbench directory`: what reading a user's groups from the
//! directory (rule AD1) costs a logon storm. It starts a real Samba Active
//! Directory domain controller (the `testdomain` crate: a network namespace
//! of its own, reached through forwarders on 127.0.0.1; needs root), adds
//! N users in a group nested in the group `bench-entitled`, starts a
//! private broker reading groups from it, and sends the same storm three
//! times, each into a pool made anew (so that every connect places a new
//! session, never a return to one, rule S1):
//!
//! 1. **baseline**: the pool has no `entitledGroups`, so the directory is
//!    never asked;
//! 2. **cold**: the pool is entitled to `bench-entitled`; every user's
//!    groups are read from the DC;
//! 3. **warm**: the same again, within the group cache's life: every
//!    user's groups come from the broker's cache.
//!
//! Each storm's figures are checked against the broker itself (sessions in
//! the pool, and its `deskbroker_directory_lookups_total` counters: the
//! baseline reads nothing, the cold storm reads each user once, the warm
//! one reads none).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context as _;
use deskbroker::benchkit::broker::{Broker, PrivateBroker};
use deskbroker::benchkit::round3;
use serde_json::{Value, json};
use testdomain::domain::Domain;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::Deskbroker;

/// The group named in the entitled pool's `entitledGroups`.
const ENTITLED: &str = "bench-entitled";
/// The group every benchmark user is a member of, nested in [`ENTITLED`].
const MEMBERS: &str = "bench-members";
/// The pool of every storm, made anew for each.
const POOL: &str = "bench-directory";
/// Most users (the DC's database grows about 5 KB a user).
const MAX_USERS: u64 = 100_000;

/// Flags of `deskbroker-devbench directory`.
#[derive(clap::Args)]
pub struct DirectoryArgs {
    /// Users in the directory; each connects once per storm.
    #[arg(long, default_value_t = 10_000)]
    users: u64,
    /// Session hosts in the pool.
    #[arg(long, default_value_t = 100)]
    hosts: u32,
    /// Concurrent clients (each keeps its connection open).
    #[arg(long, default_value_t = 64)]
    concurrency: u32,
    /// `table` (the three storms and the ratios) or `json`.
    #[arg(long, short = 'o', default_value = "table", value_parser = ["table", "json"])]
    output: String,
}

pub async fn run(deskbroker: &Deskbroker, args: DirectoryArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        (1..=MAX_USERS).contains(&args.users) && args.hosts > 0 && args.concurrency > 0,
        "--users must be 1..={MAX_USERS}, --hosts and --concurrency at least 1"
    );
    let program = deskbroker.path()?;
    let users: Vec<String> = (0..args.users).map(|i| format!("dbu{i:06}")).collect();

    // The DC is driven by blocking code (processes, forwarder threads).
    let started = Instant::now();
    let (dc, dc_seconds, add_seconds) = {
        let users = users.clone();
        tokio::task::spawn_blocking(move || {
            let dc = Domain::start();
            let dc_seconds = started.elapsed().as_secs_f64();
            let adding = Instant::now();
            dc.add_group(ENTITLED);
            dc.add_group(MEMBERS);
            dc.add_member(ENTITLED, MEMBERS);
            dc.add_users(&users, MEMBERS);
            (dc, dc_seconds, adding.elapsed().as_secs_f64())
        })
        .await
        .context("the domain controller could not be set up")?
    };

    // Longer than the three storms: the warm one finds every answer.
    let flags = dc.serve_flags(&dc.ldaps_url(), 86_400);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let broker = PrivateBroker::start(&program, None, &flags).await?;
    let result = storms(&broker, &args, &users).await;
    broker.stop().await;
    let setup = json!({
        "users": args.users, "hosts": args.hosts, "concurrency": args.concurrency,
        "domainControllerStartSeconds": round3(dc_seconds),
        "usersAddedSeconds": round3(add_seconds),
    });
    tokio::task::spawn_blocking(move || drop(dc)).await?;
    let mut report = result?;
    report["setup"] = setup;
    print(&report, &args.output);
    Ok(())
}

/// The three storms and their ratios to the baseline.
async fn storms(
    broker: &PrivateBroker,
    args: &DirectoryArgs,
    users: &[String],
) -> anyhow::Result<Value> {
    let client = Arc::new(broker.client()?);
    let names: Arc<Vec<String>> = Arc::new(
        users
            .iter()
            .map(|u| format!("{u}@deskbroker.test"))
            .collect(),
    );
    let mut results = Vec::new();
    for (name, entitled) in [("baseline", false), ("cold", true), ("warm", true)] {
        let before = lookups(broker).await?;
        let mut r = storm(&client, args, &names, entitled).await?;
        let after = lookups(broker).await?;
        r["directoryReads"] = json!(after.0 - before.0);
        r["directoryCached"] = json!(after.1 - before.1);
        results.push((name, r));
    }
    let rate = |i: usize| results[i].1["connectsPerSecond"].as_f64().unwrap_or(0.0);
    let p50 = |i: usize| results[i].1["latencyMs"]["p50"].as_f64().unwrap_or(0.0);
    let ratio = |a: f64, b: f64| if b > 0.0 { round3(a / b) } else { 0.0 };
    let mut report = serde_json::Map::new();
    for (name, r) in &results {
        report.insert((*name).to_string(), r.clone());
    }
    report.insert(
        "ratios".into(),
        json!({
            "coldPerBaselineConnectsPerSecond": ratio(rate(1), rate(0)),
            "warmPerBaselineConnectsPerSecond": ratio(rate(2), rate(0)),
            "coldPerBaselineP50": ratio(p50(1), p50(0)),
            "warmPerBaselineP50": ratio(p50(2), p50(0)),
        }),
    );
    Ok(Value::Object(report))
}

/// One storm: the pool made anew (entitled to [`ENTITLED`] or to anyone),
/// its hosts added, then one connect per user from `args.concurrency`
/// clients; answers its figures and the sessions the broker then counts.
async fn storm(
    client: &Arc<Broker>,
    args: &DirectoryArgs,
    users: &Arc<Vec<String>>,
    entitled: bool,
) -> anyhow::Result<Value> {
    let mut body = json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"});
    if entitled {
        body["entitledGroups"] = json!([ENTITLED]);
    }
    client.replace_pool(POOL, &body).await?;
    for i in 0..args.hosts {
        let address = format!("10.0.{}.{}:3389", (i >> 8) & 255, i & 255);
        client
            .add_host(POOL, &format!("h{i:05}"), &address)
            .await
            .context("cannot add the benchmark hosts")?;
    }
    let histogram = Arc::new(Mutex::new(
        hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"),
    ));
    let errors = Arc::new(Mutex::new(BTreeMap::<String, u64>::new()));
    let placed = Arc::new(AtomicU64::new(0));
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..args.concurrency {
        let (client, users, histogram, errors, placed, next) = (
            client.clone(),
            users.clone(),
            histogram.clone(),
            errors.clone(),
            placed.clone(),
            next.clone(),
        );
        workers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(user) = users.get(i) else { return };
                let t = Instant::now();
                let r = client.connect(POOL, user).await;
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
            }
        });
    }
    while let Some(r) = workers.join_next().await {
        r.context("a client failed")?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let sessions = client.session_count(POOL).await?;
    let h = histogram.lock().unwrap_or_else(|p| p.into_inner());
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    Ok(json!({
        "entitledGroups": entitled,
        "seconds": round3(elapsed),
        "connectsPerSecond": (users.len() as f64 / elapsed).round(),
        "placed": placed.load(Ordering::Relaxed),
        "errors": *errors.lock().unwrap_or_else(|p| p.into_inner()),
        "sessionsInPool": sessions,
        "latencyMs": {"p50": ms(0.5), "p90": ms(0.9), "p99": ms(0.99), "p999": ms(0.999),
                      "max": h.max() as f64 / 1000.0, "mean": round3(h.mean() / 1000.0)},
    }))
}

/// The broker's `deskbroker_directory_lookups_total` for the outcomes
/// `read` and `cached`, from its `/metrics` (plain HTTP on loopback).
async fn lookups(broker: &PrivateBroker) -> anyhow::Result<(u64, u64)> {
    let authority = broker
        .url
        .strip_prefix("http://")
        .context("the private broker's URL is not http://")?
        .trim_end_matches('/');
    let mut stream = tokio::net::TcpStream::connect(authority)
        .await
        .context("cannot reach the broker's /metrics")?;
    // HTTP/1.0: the answer ends with the connection, never chunked.
    let request = format!(
        "GET /metrics HTTP/1.0\r\nHost: {authority}\r\nAuthorization: Bearer {}\r\n\r\n",
        broker.token
    );
    stream.write_all(request.as_bytes()).await?;
    let mut text = String::new();
    tokio::time::timeout(
        deskbroker::benchkit::broker::START_TIMEOUT,
        stream.take(64 << 20).read_to_string(&mut text),
    )
    .await
    .context("the broker's /metrics did not answer in time")??;
    anyhow::ensure!(
        text.starts_with("HTTP/1.1 200") || text.starts_with("HTTP/1.0 200"),
        "/metrics answered {}",
        text.lines().next().unwrap_or("nothing")
    );
    let count = |outcome: &str| -> u64 {
        let key = format!("deskbroker_directory_lookups_total{{outcome=\"{outcome}\"}}");
        text.lines()
            .filter_map(|l| l.strip_prefix(&key))
            .filter_map(|v| v.trim().parse::<f64>().ok())
            .map(|v| v as u64)
            .sum()
    };
    Ok((count("read"), count("cached")))
}

/// Prints the report: its JSON, or a table of the three storms (latency
/// in ms) and the ratios to the baseline.
fn print(report: &Value, output: &str) {
    if output == "json" {
        println!(
            "{}",
            serde_json::to_string_pretty(report).unwrap_or_default()
        );
        return;
    }
    let s = &report["setup"];
    println!(
        "directory: {} users (added in {} s), {} hosts, {} clients; latency in ms\n",
        s["users"], s["usersAddedSeconds"], s["hosts"], s["concurrency"]
    );
    println!(
        "{:<9}{:>10}{:>9}{:>9}{:>9}{:>9}{:>9}{:>8}{:>10}{:>8}{:>8}",
        "storm",
        "connect/s",
        "p50",
        "p90",
        "p99",
        "max",
        "placed",
        "errors",
        "sessions",
        "reads",
        "cached"
    );
    for name in ["baseline", "cold", "warm"] {
        let r = &report[name];
        let errors: u64 = r["errors"]
            .as_object()
            .map_or(0, |e| e.values().filter_map(Value::as_u64).sum());
        // A JSON value's `Display` ignores widths: each is a string first.
        let f = |v: &Value| v.to_string();
        println!(
            "{:<9}{:>10}{:>9}{:>9}{:>9}{:>9}{:>9}{:>8}{:>10}{:>8}{:>8}",
            name,
            f(&r["connectsPerSecond"]),
            f(&r["latencyMs"]["p50"]),
            f(&r["latencyMs"]["p90"]),
            f(&r["latencyMs"]["p99"]),
            f(&r["latencyMs"]["max"]),
            f(&r["placed"]),
            errors,
            f(&r["sessionsInPool"]),
            f(&r["directoryReads"]),
            f(&r["directoryCached"])
        );
    }
    let q = &report["ratios"];
    println!(
        "\nconnects/s: cold/baseline {}, warm/baseline {}; p50: cold/baseline {}, warm/baseline {}",
        q["coldPerBaselineConnectsPerSecond"],
        q["warmPerBaselineConnectsPerSecond"],
        q["coldPerBaselineP50"],
        q["warmPerBaselineP50"]
    );
}
