//! `deskbroker bench` through the real binary, on tiny loads: `bench storm`
//! prints one report as json, tsv or an az-style table, finds the admin
//! token of `--broker` as every CLI command does (flag, `DESKBROKER_TOKEN`,
//! else the token file of `DESKBROKER_DATA_DIR`), and starts and stops a
//! private broker without `--broker`. The figures are timings and are not
//! checked; the counts are. (The development benchmarks, `deskbroker-devbench`,
//! are tested in `crates/devbench/tests`.)

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::{App, TOKEN, exe};

/// Runs `deskbroker bench ARGS` with `DESKBROKER_DATA_DIR` set to
/// `data_dir` and no `DESKBROKER_TOKEN`; answers (success, stdout, stderr).
fn bench(data_dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(exe())
        .arg("bench")
        .args(args)
        .env("DESKBROKER_DATA_DIR", data_dir)
        .env_remove("DESKBROKER_TOKEN")
        .env_remove("DESKBROKER_URL")
        .output()
        .expect("run deskbroker bench");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn storm_prints_json_tsv_and_table_and_finds_the_token_file() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let token_dir = dir.path().join("cli");
    std::fs::create_dir_all(&token_dir).unwrap();
    let storm = |output: &str| -> Vec<String> {
        [
            "storm",
            "--broker",
            &app.url,
            "--hosts",
            "3",
            "--users",
            "12",
            "--concurrency",
            "2",
            "--quiet",
            "--output",
            output,
        ]
        .map(String::from)
        .to_vec()
    };
    let run = |args: &[String]| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        bench(&token_dir, &args)
    };

    // No flag, no DESKBROKER_TOKEN, no token file: the broker refuses.
    let (ok, out, err) = run(&storm("json"));
    assert!(!ok, "{out}{err}");
    assert!(err.contains("Unauthorized"), "{err}");

    // The token file of DESKBROKER_DATA_DIR, as for every CLI command.
    std::fs::write(token_dir.join("admin.token"), format!("{TOKEN}\n")).unwrap();
    let (ok, out, err) = run(&storm("json"));
    assert!(ok, "{out}{err}");
    let report: Value = serde_json::from_str(&out).expect("one JSON report");
    for key in [
        "hosts",
        "users",
        "concurrency",
        "brokers",
        "loadBalancerType",
        "setupSeconds",
        "seconds",
        "connectsPerSecond",
        "placed",
        "errors",
        "sessionsInPool",
        "hostsUsed",
        "minSessionsPerHost",
        "maxSessionsPerHost",
        "maxConnectingSessionsPerHost",
        "latencyMs",
    ] {
        assert!(report.get(key).is_some(), "{key} missing from {report}");
    }
    assert_eq!(report["loadBalancerType"], "BreadthFirst", "{report}");
    assert_eq!(report["placed"], 12, "{report}");
    assert_eq!(report["errors"], serde_json::json!({}), "{report}");
    assert_eq!(report["sessionsInPool"], 12, "{report}");
    // BreadthFirst picks at random among the less-loaded half (B1), so
    // the spread varies; 12 sessions on 3 hosts put 4 or more on one.
    let per_host = |key: &str| {
        report[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key}: {report}"))
    };
    assert!((1..=3).contains(&per_host("hostsUsed")), "{report}");
    assert!(per_host("minSessionsPerHost") <= 4, "{report}");
    assert!(
        (4..=12).contains(&per_host("maxSessionsPerHost")),
        "{report}"
    );
    let latency = report["latencyMs"]
        .as_object()
        .expect("latency by quantile");
    let quantiles: Vec<&str> = latency.keys().map(String::as_str).collect();
    assert_eq!(quantiles, ["p50", "p90", "p99", "p999", "max", "mean"]);

    // tsv: the same report as one line, latency flattened, errors totalled
    // (the pool of the previous run is replaced, so the counts are the same).
    let (ok, out, err) = run(&storm("tsv"));
    assert!(ok, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out}");
    let fields: Vec<&str> = lines[0].split('\t').collect();
    // 15 scalar fields before latencyMs, then its 6 quantiles.
    assert_eq!(fields.len(), 21, "{out}");
    assert_eq!(fields[..5], ["3", "12", "2", "1", "BreadthFirst"], "{out}");
    // placed, errors (their total), sessionsInPool; then numbers only.
    assert_eq!(fields[8..11], ["12", "0", "12"], "{out}");
    for field in &fields[5..] {
        assert!(field.parse::<f64>().is_ok(), "{field:?} in {out}");
    }

    // table: a line saying what ran, then az's header and dashes.
    let (ok, out, err) = run(&storm("table"));
    assert!(ok, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("storm: 12 connects of distinct users, 3 hosts, 2 clients"),
        "{out}"
    );
    let headers: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(
        headers[..3],
        ["ConnectsPerSecond", "Seconds", "P50Ms"],
        "{out}"
    );
    assert_eq!(headers.len(), 14, "{out}");
    assert!(lines[3].starts_with("----"), "{out}");
    assert_eq!(lines.len(), 5, "{out}");
}

#[test]
fn storm_flags_are_the_api_names_and_the_cli_formats() {
    let dir = tempfile::tempdir().unwrap();
    for (flag, value) in [("--load-balancer-type", "breadth"), ("--output", "yaml")] {
        let (ok, out, err) = bench(dir.path(), &["storm", flag, value]);
        assert!(!ok, "{out}{err}");
        assert!(err.contains("invalid value"), "{err}");
    }
    let (_, _, err) = bench(dir.path(), &["storm", "--output", "yaml"]);
    assert!(err.contains("table, json, tsv"), "{err}");
    let (_, _, err) = bench(dir.path(), &["storm", "--load-balancer-type", "x"]);
    assert!(err.contains("BreadthFirst, DepthFirst, LoadIndex"), "{err}");
}

/// The development benchmarks are `deskbroker-devbench`'s
/// (crates/devbench), not the shipped binary's.
#[test]
fn the_development_benchmarks_are_not_in_the_shipped_binary() {
    let dir = tempfile::tempdir().unwrap();
    for command in [
        "rdp",
        "windows-agent",
        "ceiling-server",
        "rdp-ceiling-server",
    ] {
        let (ok, out, err) = bench(dir.path(), &[command]);
        assert!(!ok, "{out}{err}");
        assert!(err.contains("unrecognized subcommand"), "{command}: {err}");
    }
}

#[test]
fn storm_starts_and_stops_a_private_broker() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, out, err) = bench(
        dir.path(),
        &[
            "storm",
            "--hosts",
            "2",
            "--users",
            "5",
            "--concurrency",
            "1",
            "--load-balancer-type",
            "LoadIndex",
            "--quiet",
            "-o",
            "json",
        ],
    );
    assert!(ok, "{out}{err}");
    let report: Value = serde_json::from_str(&out).expect("one JSON report");
    assert_eq!(report["loadBalancerType"], "LoadIndex", "{report}");
    assert_eq!(report["placed"], 5, "{report}");
    assert_eq!(report["sessionsInPool"], 5, "{report}");
}
