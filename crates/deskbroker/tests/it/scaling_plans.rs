//! Rules A1–A7 and A10 end to end through the real binary: a scaling plan
//! whose phase is in force now (its times chosen from the current UTC
//! time) over a pool of scripted hosts (the command driver appending
//! `$DESKBROKER_ACTION $DESKBROKER_HOST` to a file), evaluated every
//! second (`--autoscale-interval 1s`): off-peak stops idle hosts, a raised
//! minimum starts them, operator drains and excluded hosts are untouched,
//! and a kill -9 mid-action repeats nothing. Also the API's refusals.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::{App, eventually, power_state};

const WAIT: Duration = Duration::from_secs(60);

fn lines(log: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

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

/// A pooled pool (BreadthFirst) whose command driver runs `command`, with
/// hosts h1..h3, h4 drained by an operator and h5 tagged `no-autoscale`,
/// all at 127.0.0.x.
async fn farm(app: &App, pool: &str, command: &str) {
    app.ok(
        "PUT",
        &format!("/api/v1/hostPools/{pool}"),
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                    "maxSessionLimit": 4, "allowedAddressRanges": ["127.0.0.0/8"],
                    "powerSettings": {"driver": "command", "powerOnCommand": command,
                                      "powerOffCommand": command, "timeoutSeconds": 120}}),
        ),
        201,
    )
    .await;
    for i in 1..=5 {
        let mut body = json!({"address": format!("127.0.0.{i}:3389")});
        if i == 4 {
            body["allowNewSession"] = json!(false);
        }
        if i == 5 {
            body["tags"] = json!(["no-autoscale"]);
        }
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/{pool}/sessionHosts/h{i}"),
            Some(body),
            201,
        )
        .await;
    }
}

async fn actions(app: &App, pool: &str) -> Vec<Value> {
    let v = app
        .ok(
            "GET",
            &format!("/api/v1/hostPools/{pool}/scalingActions"),
            None,
            200,
        )
        .await;
    v["value"].as_array().cloned().unwrap_or_default()
}

async fn states(app: &App, pool: &str) -> Vec<String> {
    let mut v = Vec::new();
    for i in 1..=5 {
        v.push(power_state(app, pool, &format!("h{i}")).await);
    }
    v
}

#[tokio::test]
async fn a3_a6_a10_off_peak_stops_idle_hosts_and_a_raised_minimum_starts_them() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("power.log");
    let app = spawn(&dir.path().join("data"));
    let cmd = format!(
        "echo \"$DESKBROKER_ACTION $DESKBROKER_HOST\" >> '{}'",
        log.display()
    );
    farm(&app, "p", &cmd).await;
    app.ok(
        "PUT",
        "/api/v1/scalingPlans/nightly",
        Some(off_peak_plan(&["p"], 0)),
        201,
    )
    .await;
    let pool = app.ok("GET", "/api/v1/hostPools/p", None, 200).await;
    assert_eq!(pool["scalingPlan"], "nightly");
    assert_eq!(
        pool["loadBalancerType"], "BreadthFirst",
        "the pool's own is kept"
    );

    // Off-peak, minimum 0, no session: h1..h3 are stopped; the operator's
    // drained h4 and the excluded h5 are left running.
    let stopped = eventually(WAIT, || async {
        states(&app, "p").await == ["Stopped", "Stopped", "Stopped", "Running", "Running"]
    })
    .await;
    assert!(stopped, "states: {:?}", states(&app, "p").await);
    assert_eq!(lines(&log), ["stop h1", "stop h2", "stop h3"]);
    let pool = app.ok("GET", "/api/v1/hostPools/p", None, 200).await;
    assert_eq!(
        pool["effectiveLoadBalancerType"], "DepthFirst",
        "A2: off-peak's"
    );
    let recorded = actions(&app, "p").await;
    let stops: Vec<&Value> = recorded.iter().filter(|a| a["action"] == "Stop").collect();
    assert_eq!(stops.len(), 3, "{recorded:?}");
    for a in &stops {
        assert_eq!(a["phase"], "OffPeak", "{a}");
        assert_eq!(a["actor"], "scalingPlan", "{a}");
        assert_eq!(a["outcome"], "Succeeded", "{a}");
        assert_eq!(a["usedCapacityPct"], 0, "{a}");
        assert_eq!(a["thresholdPct"], 90, "{a}");
        assert_eq!(a["minimumHosts"], 0, "{a}");
        assert!(a["runningHosts"].as_u64().is_some(), "{a}");
        assert!(!a["reason"].as_str().unwrap_or("").is_empty(), "{a}");
    }
    let h4 = app
        .ok("GET", "/api/v1/hostPools/p/sessionHosts/h4", None, 200)
        .await;
    assert_eq!(h4["drainedBy"], "operator");

    // Raise the minimum to every host the plan may manage: the stopped
    // ones start; h4 (an operator's drain) and h5 (excluded) stay as they are.
    app.ok(
        "PATCH",
        "/api/v1/scalingPlans/nightly",
        Some(json!({"schedules": off_peak_plan(&["p"], 100)["schedules"]})),
        200,
    )
    .await;
    let started = eventually(WAIT, || async {
        states(&app, "p").await == ["Running", "Running", "Running", "Running", "Running"]
    })
    .await;
    assert!(started, "states: {:?}", states(&app, "p").await);
    let want = [
        "start h1", "start h2", "start h3", "stop h1", "stop h2", "stop h3",
    ];
    assert_eq!(lines(&log), want);
    let h4 = app
        .ok("GET", "/api/v1/hostPools/p/sessionHosts/h4", None, 200)
        .await;
    assert_eq!(
        (&h4["allowNewSession"], &h4["drainedBy"]),
        (&json!(false), &json!("operator"))
    );
    // The status says what the plan waits for: one more host (h4 is the
    // operator's), none it may start.
    let status = app
        .ok("GET", "/api/v1/scalingPlans/nightly/status", None, 200)
        .await;
    let s = &status["hostPools"][0];
    assert_eq!(s["hostPool"], "p");
    assert_eq!(s["phase"]["phase"], "OffPeak");
    assert_eq!(s["figures"]["minimumHosts"], 4, "{s}");
    assert_eq!(s["figures"]["runningHosts"], 4, "{s}");
    assert_eq!(s["figures"]["availableHosts"], 3, "{s}");
    assert!(
        s["waitingFor"][0]
            .as_str()
            .unwrap_or("")
            .contains("1 more host"),
        "{s}"
    );
    // Evaluations go on; nothing is repeated.
    let more = eventually(Duration::from_secs(5), || async { lines(&log).len() > 6 }).await;
    assert!(!more, "{:?}", lines(&log));
}

#[tokio::test]
async fn a10_a_kill_9_mid_action_then_a_restart_repeats_no_action() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("power.log");
    let gate = dir.path().join("gate");
    let data = dir.path().join("data");
    let app = spawn(&data);
    // Each command records itself, then waits for the gate (bounded).
    let cmd = format!(
        "echo \"$DESKBROKER_ACTION $DESKBROKER_HOST\" >> '{}'; i=0; \
         while [ ! -e '{}' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done",
        log.display(),
        gate.display()
    );
    farm(&app, "p", &cmd).await;
    app.ok(
        "PUT",
        "/api/v1/scalingPlans/nightly",
        Some(off_peak_plan(&["p"], 0)),
        201,
    )
    .await;
    let begun = eventually(WAIT, || async { lines(&log).len() == 3 }).await;
    assert!(begun, "{:?}", lines(&log));
    assert_eq!(lines(&log), ["stop h1", "stop h2", "stop h3"]);
    app.kill9();
    std::fs::write(&gate, b"").unwrap();
    let app = spawn(&data);
    // The interrupted stops are recorded Failed and not run again; their
    // hosts are Unknown, which the plan neither starts nor stops.
    let resolved = eventually(WAIT, || async {
        let a = actions(&app, "p").await;
        a.iter().filter(|a| a["outcome"] == "Failed").count() == 3
    })
    .await;
    assert!(resolved, "{:?}", actions(&app, "p").await);
    // A new idle host shows that evaluations run after the restart.
    app.ok(
        "PUT",
        "/api/v1/hostPools/p/sessionHosts/h6",
        Some(json!({"address": "127.0.0.6:3389"})),
        201,
    )
    .await;
    let marker = eventually(WAIT, || async {
        lines(&log).contains(&"stop h6".to_string())
    })
    .await;
    assert!(marker, "{:?}", lines(&log));
    assert_eq!(lines(&log), ["stop h1", "stop h2", "stop h3", "stop h6"]);
    assert_eq!(
        states(&app, "p").await[..3],
        ["Unknown", "Unknown", "Unknown"]
    );
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
