//! Scaling plans through the real binary: the plan commands of the CLI
//! (create from a file, update with a partial file, list, status, delete,
//! show). What a plan may be (A1: one plan a pool, no personal pools,
//! fields checked, nothing half-written) and the rules it follows as time
//! passes (A2–A7, A10) are proved in process, on a clock the tests move,
//! in the broker's `rules` tests.

use serde_json::{Value, json};

use crate::App;

/// A plan over no pools, in UTC.
fn plan() -> Value {
    json!({
        "timeZone": "UTC",
        "hostPools": [],
        "exclusionTag": "no-autoscale",
        "schedules": [{
            "name": "everyday",
            "daysOfWeek": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
                           "Saturday", "Sunday"],
            "rampUpStartTime": "07:00", "rampUpLoadBalancingAlgorithm": "BreadthFirst",
            "rampUpMinimumHostsPct": 20, "rampUpCapacityThresholdPct": 60,
            "peakStartTime": "09:00", "peakLoadBalancingAlgorithm": "DepthFirst",
            "rampDownStartTime": "18:00", "rampDownLoadBalancingAlgorithm": "DepthFirst",
            "rampDownMinimumHostsPct": 10, "rampDownCapacityThresholdPct": 90,
            "rampDownStopHostsWhen": "ZeroSessions",
            "offPeakStartTime": "20:00", "offPeakLoadBalancingAlgorithm": "DepthFirst",
            "offPeakMinimumHostsPct": 0
        }]
    })
}

/// The CLI's plan commands: create from a file, update with a partial
/// file, list, status, delete; a deleted plan is shown as missing. (The
/// API's refusals of bad plans, A1, are proved in process, in the broker's
/// `rules` tests.)
#[tokio::test]
async fn a1_the_plan_commands_create_show_update_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let file = dir.path().join("plan.json");
    std::fs::write(&file, plan().to_string()).unwrap();
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
