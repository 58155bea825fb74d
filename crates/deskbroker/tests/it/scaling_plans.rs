//! Scaling plans through the real binary: the plan commands of the CLI and
//! the API's refusals (A1). The rules a plan follows as time passes (A2–A7,
//! A10) are proved in process on a clock the tests move, in the broker's
//! `rules` tests.

use std::path::Path;

use serde_json::{Value, json};

use crate::App;

fn spawn(data_dir: &Path) -> App {
    App::spawn_with(
        data_dir,
        "127.0.0.1:0",
        &["--allow-power-commands", "--autoscale-interval", "1s"],
    )
    .0
}

/// A plan over `pools` in UTC whose off-peak is in force now: before noon
/// its phases start late in the day (so now is before ramp-up: the
/// previous day's off-peak), after noon early (now is after off-peak began).
fn off_peak_plan(pools: &[&str], off_peak_minimum_pct: u32) -> Value {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let hour = secs / 3600 % 24;
    let times = if hour < 12 {
        ["20:00", "21:00", "22:00", "23:00"]
    } else {
        ["01:00", "02:00", "03:00", "04:00"]
    };
    json!({
        "timeZone": "UTC",
        "hostPools": pools,
        "exclusionTag": "no-autoscale",
        "schedules": [{
            "name": "everyday",
            "daysOfWeek": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
                           "Saturday", "Sunday"],
            "rampUpStartTime": times[0], "rampUpLoadBalancingAlgorithm": "BreadthFirst",
            "rampUpMinimumHostsPct": 20, "rampUpCapacityThresholdPct": 60,
            "peakStartTime": times[1], "peakLoadBalancingAlgorithm": "DepthFirst",
            "rampDownStartTime": times[2], "rampDownLoadBalancingAlgorithm": "DepthFirst",
            "rampDownMinimumHostsPct": 10, "rampDownCapacityThresholdPct": 90,
            "rampDownStopHostsWhen": "ZeroSessions",
            "offPeakStartTime": times[3], "offPeakLoadBalancingAlgorithm": "DepthFirst",
            "offPeakMinimumHostsPct": off_peak_minimum_pct
        }]
    })
}

#[tokio::test]
async fn a1_plans_are_refused_for_two_plans_one_pool_a_personal_pool_and_bad_fields() {
    let dir = tempfile::tempdir().unwrap();
    let app = spawn(&dir.path().join("data"));
    crate::pool_with_hosts(&app, "p", "BreadthFirst", 4, 1).await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/personal",
        Some(json!({"hostPoolType": "Personal", "loadBalancerType": "Persistent"})),
        201,
    )
    .await;
    app.ok(
        "PUT",
        "/api/v1/scalingPlans/a",
        Some(off_peak_plan(&["p"], 0)),
        201,
    )
    .await;
    let (s, body) = app
        .call(
            "PUT",
            "/api/v1/scalingPlans/b",
            Some(off_peak_plan(&["p"], 0)),
        )
        .await;
    assert_eq!(
        (s, &body["error"]["code"]),
        (409, &json!("Conflict")),
        "{body}"
    );
    let (s, body) = app
        .call(
            "PUT",
            "/api/v1/scalingPlans/b",
            Some(off_peak_plan(&["personal"], 0)),
        )
        .await;
    assert_eq!(s, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("hostPools[0]"),
        "{body}"
    );
    let mut bad = off_peak_plan(&[], 0);
    bad["schedules"][0]["peakStartTime"] = json!("25:00");
    let (s, body) = app.call("PUT", "/api/v1/scalingPlans/b", Some(bad)).await;
    assert_eq!(s, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("schedules[0].peakStartTime"),
        "{body}"
    );
    let (s, _) = app
        .call(
            "PATCH",
            "/api/v1/scalingPlans/a",
            Some(json!({"timeZone": "Mars/Base"})),
        )
        .await;
    assert_eq!(s, 400);
    // Nothing changed: b does not exist, a is as it was.
    assert_eq!(app.call("GET", "/api/v1/scalingPlans/b", None).await.0, 404);
    let list = app.ok("GET", "/api/v1/scalingPlans", None, 200).await;
    assert_eq!(list["value"].as_array().unwrap().len(), 1);
    assert_eq!(list["value"][0]["timeZone"], "UTC");
    // A pool in a plan cannot become personal; deleting it removes it from
    // the plan.
    app.ok("DELETE", "/api/v1/hostPools/p?force=true", None, 204)
        .await;
    let a = app.ok("GET", "/api/v1/scalingPlans/a", None, 200).await;
    assert_eq!(a["hostPools"], json!([]));
    app.ok("DELETE", "/api/v1/scalingPlans/a", None, 204).await;
    assert_eq!(app.call("GET", "/api/v1/scalingPlans/a", None).await.0, 404);

    // The CLI: create from a file, update with a partial file, status, delete.
    let file = dir.path().join("plan.json");
    std::fs::write(&file, off_peak_plan(&[], 0).to_string()).unwrap();
    let file = file.to_str().unwrap();
    let (ok, out, err) = app.cli(&["scalingplan", "create", "--name", "c", "--file", file]);
    assert!(ok, "{out}{err}");
    let patch = dir.path().join("patch.json");
    std::fs::write(&patch, r#"{"exclusionTag": "keep-on"}"#).unwrap();
    let (ok, out, err) = app.cli(&[
        "scalingplan",
        "update",
        "--name",
        "c",
        "--file",
        patch.to_str().unwrap(),
    ]);
    assert!(ok && out.contains("keep-on"), "{out}{err}");
    let (ok, out, err) = app.cli(&["scalingplan", "list"]);
    assert!(ok && out.contains("keep-on"), "{out}{err}");
    let (ok, out, err) = app.cli(&["scalingplan", "status", "--name", "c"]);
    assert!(ok, "{out}{err}");
    let (ok, out, err) = app.cli(&["scalingplan", "delete", "--name", "c"]);
    assert!(ok, "{out}{err}");
    let (ok, _, err) = app.cli(&["scalingplan", "show", "--name", "c"]);
    assert!(!ok && err.contains("does not exist"), "{err}");
}
