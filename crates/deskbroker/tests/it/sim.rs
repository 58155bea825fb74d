//! The simulator and its improvement through the real binary:
//! `logonStormSettings.logonCost` (rule H7) is accepted by the API, shown
//! by GET, kept across a restart and set by the CLI; `deskbroker sim`
//! prints the same bytes for the same seed, its table and tsv as the CLI
//! prints them, names policies as the API names algorithms, explains its
//! measures in its help, and refuses bad input with one line and a
//! non-zero exit.

use std::process::Command;

use serde_json::json;

use crate::{App, exe};

#[tokio::test]
async fn logon_cost_is_selectable_shown_persisted_and_corrects_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let app = App::spawn_on(&data);
    let (ok, out, err) = app.cli(&[
        "hostpool",
        "create",
        "--name",
        "li",
        "--host-pool-type",
        "Pooled",
        "--load-balancer-type",
        "LoadIndex",
        "--cpu-threshold",
        "100",
        "--storm-logon-cost",
        "8",
        "--output",
        "json",
    ]);
    assert!(ok, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["logonStormSettings"]["logonCost"], 8, "{v}");
    // A host that reported 20 % CPU: each logon placed since adds 8 (H7).
    app.ok(
        "PUT",
        "/api/v1/hostPools/li/sessionHosts/h1",
        Some(json!({"address": "10.0.0.1:3389"})),
        201,
    )
    .await;
    let h = app
        .ok(
            "POST",
            "/api/v1/hostPools/li/sessionHosts/h1/heartbeat",
            Some(json!({"cpuPercent": 20.0})),
            200,
        )
        .await;
    assert_eq!(h["loadIndex"], 20, "{h}");
    for i in 0..2 {
        app.ok(
            "POST",
            "/api/v1/hostPools/li/connect",
            Some(json!({"user": format!("u{i}")})),
            200,
        )
        .await;
    }
    let h = app
        .ok("GET", "/api/v1/hostPools/li/sessionHosts/h1", None, 200)
        .await;
    assert_eq!(h["loadIndex"], 36, "max(sessions 2, 20 + 2 * 8): {h}");
    // PATCH through the CLI, out of range through the API.
    let (ok, out, err) = app.cli(&[
        "hostpool",
        "update",
        "--name",
        "li",
        "--storm-logon-cost",
        "5",
    ]);
    assert!(ok, "{out}{err}");
    let (status, v) = app
        .call(
            "PATCH",
            "/api/v1/hostPools/li",
            Some(json!({"logonStormSettings": {"logonCost": 101}})),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("logonStormSettings.logonCost"),
        "{v}"
    );
    // Kept across a restart.
    app.kill9();
    let app = App::spawn_on(&data);
    let v = app.ok("GET", "/api/v1/hostPools/li", None, 200).await;
    assert_eq!(v["logonStormSettings"]["logonCost"], 5, "{v}");
    // A pool created without it has it off.
    let v = app
        .ok(
            "PUT",
            "/api/v1/hostPools/plain",
            Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "LoadIndex"})),
            201,
        )
        .await;
    assert_eq!(v["logonStormSettings"]["logonCost"], 0, "{v}");
}

fn sim(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(exe())
        .arg("sim")
        .args(args)
        .output()
        .expect("run deskbroker sim");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn sim_prints_the_same_bytes_for_the_same_seed_and_draws_a_plot() {
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("storm.svg");
    let args = [
        "--scenario",
        "failure",
        "--hosts",
        "12",
        "--users",
        "300",
        "--seed",
        "42",
        "--storm-minutes",
        "5",
        "--output",
        "json",
    ];
    let (ok, first, err) = sim(&args);
    assert!(ok, "{err}");
    let (ok, second, _) = sim(&[&args[..], &["--plot", plot.to_str().unwrap()]].concat());
    assert!(ok);
    assert_eq!(first, second, "same seed, same bytes");
    let v: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(v["seed"], 42);
    assert_eq!(v["results"].as_array().unwrap().len(), 9, "every policy");
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("LoadIndexCorrected (peak"));
    let (ok, table, _) = sim(&[
        "--scenario",
        "storm",
        "--hosts",
        "4",
        "--users",
        "40",
        "--seed",
        "7",
    ]);
    assert!(ok);
    assert!(table.starts_with("scenario storm: 4 hosts"), "{table}");
    assert!(table.contains("seed 7"), "{table}");
    // The CLI's az-style table: headers from the JSON keys, two spaces
    // between columns, each at least its header plus two wide.
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[2].split_whitespace().collect::<Vec<_>>(),
        [
            "Policy",
            "PeakCpuPercent",
            "PeakConnecting",
            "LogonP50Seconds",
            "LogonP99Seconds",
            "Rejected",
            "FailedAttempts",
            "HostsInUsePeak",
            "HostsInUseMean",
            "ImbalanceMean"
        ],
        "{table}"
    );
    assert!(
        lines[2].starts_with("Policy               PeakCpuPercent    PeakConnecting  "),
        "{table}"
    );
    assert_eq!(
        lines.len(),
        4 + 9,
        "summary, blank, header, dashes, 9 policies"
    );
    // Policies named as the API names algorithms, in their fixed order.
    let names: Vec<&str> = lines[4..]
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "BreadthFirst",
            "BreadthFirstClassic",
            "DepthFirst",
            "LoadIndex",
            "LeastConnections",
            "PowerOfTwo",
            "LeastLoadStale",
            "CitrixHorizontal",
            "LoadIndexCorrected"
        ],
        "{table}"
    );
    // tsv: the same rows, every scalar measure, no header.
    let (ok, tsv, _) = sim(&[
        "--scenario",
        "storm",
        "--hosts",
        "4",
        "--users",
        "40",
        "--seed",
        "7",
        "--output",
        "tsv",
    ]);
    assert!(ok);
    let rows: Vec<Vec<&str>> = tsv.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), 9, "{tsv}");
    assert_eq!(rows[0][0], "BreadthFirst", "{tsv}");
    assert_eq!(rows[0].len(), 10, "{tsv}");
}

/// The help names the policies as the API does and says why a CPU
/// percentage can pass 100.
#[test]
fn sim_help_names_the_policies_and_explains_cpu_demand() {
    let (ok, help, err) = sim(&["--help"]);
    assert!(ok, "{err}");
    // As one line: clap may wrap the help to the terminal's width.
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    for want in [
        "BreadthFirst, BreadthFirstClassic",
        "LoadIndexCorrected",
        "PeakCpuPercent the worst host's highest CPU demand",
        "Demand, not use: above 100 the host was asked for more than it has",
        "150 means 1.5 times its vCPUs",
    ] {
        assert!(help.contains(want), "{want:?} missing from: {help}");
    }
}

#[test]
fn sim_refuses_bad_input_with_one_line_and_a_failure_exit() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("bad.csv");
    std::fs::write(&trace, "time,user,event\n0,alice,connect\n5,bob,dance\n").unwrap();
    let trace = trace.to_str().unwrap();
    for (args, want) in [
        (
            vec!["--scenario", "storm", "--policies", "fastest"],
            "unknown policy",
        ),
        (vec!["--scenario", "tuesday"], "--scenario"),
        (vec!["--scenario", "storm", "--hosts", "0"], "--hosts"),
        (vec!["--scenario", trace], "line 3"),
        (vec!["--scenario", "/nonexistent/t.csv"], "t.csv"),
        (vec!["--scenario", "storm", "--plot", "x.png"], "SVG"),
        (
            vec!["--scenario", "storm", "--logon-cost", "101"],
            "--logon-cost",
        ),
    ] {
        let (ok, out, err) = sim(&args);
        assert!(!ok, "{args:?} must fail: {out}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // --output is the CLI's: clap names the flag and the formats it takes
    // (on more than one line, as for every CLI command).
    let (ok, _, err) = sim(&["--scenario", "storm", "--output", "xml"]);
    assert!(!ok);
    assert!(
        err.contains("--output") && err.contains("table, json, tsv"),
        "{err}"
    );
}

#[test]
fn sim_replays_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("monday.csv");
    std::fs::write(
        &trace,
        "time,user,event\n0,alice@contoso.com,connect\n1.5,bob@contoso.com,connect\n\
         600,alice@contoso.com,disconnect\n900,ALICE@contoso.com,connect\n1200,bob@contoso.com,logoff\n",
    )
    .unwrap();
    let (ok, out, err) = sim(&[
        "--scenario",
        trace.to_str().unwrap(),
        "--hosts",
        "2",
        "--policies",
        // An API name and a former name (still accepted).
        "BreadthFirst,load-index-corrected",
        "--output",
        "json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["users"], 2);
    let policies: Vec<&str> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["policy"].as_str().unwrap())
        .collect();
    assert_eq!(policies, ["BreadthFirst", "LoadIndexCorrected"], "{v}");
    for r in v["results"].as_array().unwrap() {
        let a = &r["accounting"];
        assert_eq!(a["placed"], 2, "{r}");
        assert_eq!(a["reconnects"], 1, "{r}");
        assert_eq!(a["loggedOff"], 1, "{r}");
        assert_eq!(a["liveAtEnd"], 1, "{r}");
    }
}

#[test]
fn sim_compares_a_day_with_and_without_a_scaling_plan() {
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("autoscale.svg");
    let args = [
        "--scenario",
        "day",
        "--hosts",
        "6",
        "--users",
        "120",
        "--policies",
        "DepthFirst",
        "--autoscale",
        "--output",
        "json",
    ];
    let (ok, first, err) = sim(&args);
    assert!(ok, "{err}");
    let (ok, second, _) = sim(&[&args[..], &["--plot", plot.to_str().unwrap()]].concat());
    assert!(ok);
    assert_eq!(first, second, "same seed, same bytes");
    let v: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(v["scalingPlan"], "built-in", "{v}");
    let rows = v["autoscale"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{v}");
    assert_eq!(rows[0]["plan"], "none");
    assert_eq!(rows[0]["hostHours"], 84.0, "6 hosts for 14 hours: {v}");
    assert!(rows[1]["hostHoursSavedPct"].as_f64().unwrap() > 0.0, "{v}");
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("host-hours always on"));

    // A plan file: the API's body; a bad one is refused in one line.
    let file = dir.path().join("plan.json");
    let plan = serde_json::to_string(&sim::autoscale::default_plan()).unwrap();
    std::fs::write(&file, plan).unwrap();
    let f = file.to_str().unwrap();
    let (ok, table, err) = sim(&[
        "--scenario",
        "day",
        "--hosts",
        "6",
        "--users",
        "120",
        "--policies",
        "DepthFirst",
        "--scaling-plan",
        f,
    ]);
    assert!(ok, "{err}");
    assert!(
        table.contains("HostHoursSavedPct") && table.contains(f),
        "{table}"
    );
    std::fs::write(&file, r#"{"timeZone":"Nowhere/Else","schedules":[]}"#).unwrap();
    for (args, want) in [
        (vec!["--scenario", "day", "--scaling-plan", f], "timeZone"),
        (
            vec!["--scenario", "day", "--start-on-connect"],
            "--start-on-connect",
        ),
        (
            vec![
                "--scenario",
                "day",
                "--autoscale",
                "--policies",
                "PowerOfTwo",
            ],
            "--policies",
        ),
    ] {
        let (ok, out, err) = sim(&args);
        assert!(!ok, "{args:?} must fail: {out}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
    }
}
