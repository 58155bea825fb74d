//! Rules A1–A7 and A10 as the broker runs them: scaling plans evaluated by
//! the broker's autoscale service on the kit's clock (every second, and at
//! once when a plan changes) over a pool whose `command` driver appends
//! `$DESKBROKER_ACTION $DESKBROKER_HOST` to a file. The phase in force
//! follows the plan's local time to the millisecond; off-peak stops idle
//! hosts, a raised minimum starts them, operator drains and excluded hosts
//! are left alone, a host whose start failed is held back 60 s, then twice
//! as long, and a restart in the middle of an action repeats nothing. Also
//! the API's refusals of plans.

use std::time::Duration;

use api::types::rfc3339_ms;
use broker::autoscale::{MIN_AUTOSCALE_INTERVAL, POWER_FAILURE_BACKOFF_BASE};
use broker::power::MAX_POWER_ATTEMPTS;
use broker::testkit::Kit;
use serde_json::{Value, json};

use crate::power::{PowerLog, kit_with_power};

/// A plan over `pools` in UTC whose off-peak is in force at the kit's
/// start (a Tuesday, 00:00 UTC: before ramp-up, so the previous day's
/// off-peak, begun at 23:00).
fn off_peak_plan(pools: &[&str], off_peak_minimum_pct: u32) -> Value {
    json!({
        "timeZone": "UTC",
        "hostPools": pools,
        "exclusionTag": "no-autoscale",
        "schedules": [{
            "name": "everyday",
            "daysOfWeek": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
                           "Saturday", "Sunday"],
            "rampUpStartTime": "20:00", "rampUpLoadBalancingAlgorithm": "BreadthFirst",
            "rampUpMinimumHostsPct": 20, "rampUpCapacityThresholdPct": 60,
            "peakStartTime": "21:00", "peakLoadBalancingAlgorithm": "DepthFirst",
            "rampDownStartTime": "22:00", "rampDownLoadBalancingAlgorithm": "DepthFirst",
            "rampDownMinimumHostsPct": 10, "rampDownCapacityThresholdPct": 90,
            "rampDownStopHostsWhen": "ZeroSessions",
            "offPeakStartTime": "23:00", "offPeakLoadBalancingAlgorithm": "DepthFirst",
            "offPeakMinimumHostsPct": off_peak_minimum_pct
        }]
    })
}

/// A pooled pool (BreadthFirst) whose command driver runs `command`, with
/// hosts h1..h3, h4 drained by an operator and h5 tagged `no-autoscale`.
async fn farm(kit: &Kit, pool: &str, command: &str) {
    kit.create_pool(
        pool,
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
               "maxSessionLimit": 4,
               "powerSettings": {"driver": "command", "powerOnCommand": command,
                                 "powerOffCommand": command, "timeoutSeconds": 120}}),
    )
    .await;
    for i in 1..=5 {
        let mut body = json!({"address": format!("10.0.0.{i}:3389")});
        if i == 4 {
            body["allowNewSession"] = json!(false);
        }
        if i == 5 {
            body["tags"] = json!(["no-autoscale"]);
        }
        kit.ok(
            "PUT",
            &format!("/api/v1/hostPools/{pool}/sessionHosts/h{i}"),
            Some(body),
            201,
        )
        .await;
    }
}

async fn states(kit: &Kit, pool: &str) -> Vec<String> {
    let mut v = Vec::new();
    for i in 1..=5 {
        v.push(kit.power_state(pool, &format!("h{i}")).await);
    }
    v
}

/// Lets the plan evaluate, a second at a time with every driver answered
/// in between, until `pool`'s hosts h1..h5 are in `want` (within a
/// minute of the kit's time).
async fn until_states(kit: &Kit, pool: &str, want: [&str; 5]) {
    for _ in 0..60 {
        kit.power_settled(pool).await;
        if states(kit, pool).await == want {
            return;
        }
        kit.advance(Duration::from_secs(1)).await;
    }
    panic!(
        "hosts of {pool} are {:?}, not {want:?}",
        states(kit, pool).await
    );
}

#[tokio::test(start_paused = true)]
async fn a3_a6_a10_off_peak_stops_idle_hosts_and_a_raised_minimum_starts_them() {
    let kit = kit_with_power().await;
    let log = PowerLog::new();
    farm(&kit, "p", &log.command()).await;
    kit.ok(
        "PUT",
        "/api/v1/scalingPlans/nightly",
        Some(off_peak_plan(&["p"], 0)),
        201,
    )
    .await;
    let pool = kit.ok("GET", "/api/v1/hostPools/p", None, 200).await;
    assert_eq!(pool["scalingPlan"], "nightly");
    assert_eq!(
        pool["loadBalancerType"], "BreadthFirst",
        "the pool's own is kept"
    );

    // Off-peak, minimum 0, no session: h1..h3 are stopped; the operator's
    // drained h4 and the excluded h5 are left running.
    until_states(
        &kit,
        "p",
        ["Stopped", "Stopped", "Stopped", "Running", "Running"],
    )
    .await;
    assert_eq!(log.sorted(), ["stop h1", "stop h2", "stop h3"]);
    let pool = kit.ok("GET", "/api/v1/hostPools/p", None, 200).await;
    assert_eq!(
        pool["effectiveLoadBalancerType"], "DepthFirst",
        "A2: off-peak's"
    );
    let recorded = kit.scaling_actions("p").await;
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
    assert_eq!(kit.host("p", "h4").await["drainedBy"], "operator");

    // Raise the minimum to every host the plan may manage: the stopped
    // ones start; h4 (an operator's drain) and h5 (excluded) stay as they are.
    kit.ok(
        "PATCH",
        "/api/v1/scalingPlans/nightly",
        Some(json!({"schedules": off_peak_plan(&["p"], 100)["schedules"]})),
        200,
    )
    .await;
    until_states(
        &kit,
        "p",
        ["Running", "Running", "Running", "Running", "Running"],
    )
    .await;
    let want = [
        "start h1", "start h2", "start h3", "stop h1", "stop h2", "stop h3",
    ];
    assert_eq!(log.sorted(), want);
    let h4 = kit.host("p", "h4").await;
    assert_eq!(
        (&h4["allowNewSession"], &h4["drainedBy"]),
        (&json!(false), &json!("operator"))
    );
    // The status says what the plan waits for: one more host (h4 is the
    // operator's), none it may start.
    let status = kit
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
    // Evaluations go on (five of them); nothing is repeated.
    for _ in 0..5 {
        kit.advance(Duration::from_secs(1)).await;
        kit.power_settled("p").await;
    }
    assert_eq!(log.sorted(), want);
}

/// The plan's stops are under way (their commands wait for a gate) when the
/// broker is killed; the restart records them Failed and runs none again,
/// and its own evaluations go on.
#[tokio::test(start_paused = true)]
async fn a10_a_kill_9_mid_action_then_a_restart_repeats_no_action() {
    let mut kit = kit_with_power().await;
    let log = PowerLog::new();
    let gate = log.beside("gate");
    // Each command records itself, then waits for the gate (bounded).
    let cmd = format!(
        "{}; i=0; while [ ! -e '{}' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done",
        log.command(),
        gate.display()
    );
    farm(&kit, "p", &cmd).await;
    kit.ok(
        "PUT",
        "/api/v1/scalingPlans/nightly",
        Some(off_peak_plan(&["p"], 0)),
        201,
    )
    .await;
    // The plan begins three stops (a round a second at most); their
    // commands run and wait.
    let mut rounds = 0;
    loop {
        kit.settle().await;
        let pending = kit
            .scaling_actions("p")
            .await
            .iter()
            .filter(|a| a["action"] == "Stop" && a["outcome"] == "Pending")
            .count();
        if pending == 3 {
            break;
        }
        rounds += 1;
        assert!(rounds < 60, "{:?}", kit.scaling_actions("p").await);
        kit.advance(Duration::from_secs(1)).await;
    }
    kit.until("three stop commands ran", || log.lines().len() == 3)
        .await;
    assert_eq!(log.sorted(), ["stop h1", "stop h2", "stop h3"]);
    // A restart takes its time: the new broker tells what an earlier one
    // began by its date.
    kit.advance(Duration::from_secs(1)).await;
    kit.reopen().await;
    std::fs::write(&gate, b"").expect("the gate");
    // The interrupted stops are recorded Failed and not run again; their
    // hosts are Unknown, which the plan neither starts nor stops.
    let actions = kit.power_settled("p").await;
    let failed: Vec<&Value> = actions
        .iter()
        .filter(|a| a["outcome"] == "Failed")
        .collect();
    assert_eq!(failed.len(), 3, "{actions:?}");
    for a in &failed {
        assert!(
            a["message"]
                .as_str()
                .unwrap_or("")
                .contains("not run again"),
            "{a}"
        );
    }
    // A new idle host shows that evaluations run after the restart.
    kit.ok(
        "PUT",
        "/api/v1/hostPools/p/sessionHosts/h6",
        Some(json!({"address": "10.0.0.6:3389"})),
        201,
    )
    .await;
    for _ in 0..60 {
        if log.lines().contains(&"stop h6".to_string()) {
            break;
        }
        kit.advance(Duration::from_secs(1)).await;
        kit.power_settled("p").await;
    }
    assert_eq!(log.sorted(), ["stop h1", "stop h2", "stop h3", "stop h6"]);
    assert_eq!(
        states(&kit, "p").await[..3],
        ["Unknown", "Unknown", "Unknown"]
    );
}

/// Pool p's Start actions, newest first.
async fn starts(kit: &Kit) -> Vec<Value> {
    kit.scaling_actions("p")
        .await
        .into_iter()
        .filter(|a| a["action"] == "Start")
        .collect()
}

/// How many times the driver ran a start.
fn start_runs(log: &PowerLog) -> usize {
    log.lines().iter().filter(|l| *l == "start h1").count()
}

/// Lets the plan evaluate at the clock's present date (`at_ms`), asserts
/// that it started h1 then (its `n`th Start) and answers the start once
/// its driver is done; the driver's own pauses between attempts pass
/// with the clock standing still, so the outcome is known at `at_ms` too.
async fn started_at(kit: &Kit, at_ms: i64, n: usize) -> Value {
    assert_eq!(kit.now_ms(), at_ms);
    kit.hold(MIN_AUTOSCALE_INTERVAL * 2).await;
    kit.power_settled_holding_clock("p", Duration::from_secs(1))
        .await;
    let all = starts(kit).await;
    assert_eq!(all.len(), n, "{all:?}");
    let s = all[0].clone();
    assert_eq!(
        (&s["time"], &s["finishedTime"], &s["actor"], &s["phase"]),
        (
            &json!(rfc3339_ms(at_ms)),
            &json!(rfc3339_ms(at_ms)),
            &json!("scalingPlan"),
            &json!("OffPeak")
        ),
        "{s}"
    );
    s
}

/// Moves the clock on to a millisecond before `until_ms`, the plan
/// evaluating every second on the way and at that millisecond, and
/// asserts it started h1 no more than the `n` times it had.
async fn not_started_before(kit: &Kit, log: &PowerLog, until_ms: i64, n: usize) {
    let runs = start_runs(log);
    kit.advance(Duration::from_millis((until_ms - 1 - kit.now_ms()) as u64))
        .await;
    kit.hold(MIN_AUTOSCALE_INTERVAL * 2).await;
    assert_eq!(kit.now_ms(), until_ms - 1);
    let all = starts(kit).await;
    assert_eq!(all.len(), n, "tried again before {until_ms}: {all:?}");
    assert_eq!(start_runs(log), runs);
    assert_eq!(kit.power_state("p", "h1").await, "Stopped");
}

/// A10: a host whose start failed (after the power path's own attempts) is
/// not started again by the plan before 60 s from the failure are over, to
/// the millisecond, then is; after a second failure it waits twice as
/// long (120 s).
#[tokio::test(start_paused = true)]
async fn a10_a_host_whose_start_failed_is_held_back_60_s_then_twice_as_long() {
    let kit = kit_with_power().await;
    let log = PowerLog::new();
    let works = log.beside("works");
    // A start is logged, and fails until `works` exists; a stop works.
    let on = format!("{}; [ -e '{}' ]", log.command(), works.display());
    kit.create_pool(
        "p",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
               "maxSessionLimit": 4,
               "powerSettings": {"driver": "command", "powerOnCommand": on,
                                 "powerOffCommand": log.command(), "timeoutSeconds": 120}}),
    )
    .await;
    kit.ok(
        "PUT",
        "/api/v1/hostPools/p/sessionHosts/h1",
        Some(json!({"address": "10.0.0.1:3389"})),
        201,
    )
    .await;
    kit.ok(
        "POST",
        "/api/v1/hostPools/p/sessionHosts/h1/stop",
        None,
        202,
    )
    .await;
    kit.power_settled("p").await;
    assert_eq!(kit.power_state("p", "h1").await, "Stopped");

    // Off-peak's minimum is every host: the plan starts h1, which fails
    // after the power path's attempts and is Stopped again.
    kit.ok(
        "PUT",
        "/api/v1/scalingPlans/nightly",
        Some(off_peak_plan(&["p"], 100)),
        201,
    )
    .await;
    let base = POWER_FAILURE_BACKOFF_BASE.as_millis() as i64;
    let first = kit.now_ms();
    let s = started_at(&kit, first, 1).await;
    assert_eq!(
        (&s["outcome"], &s["attempts"]),
        (&json!("Failed"), &json!(MAX_POWER_ATTEMPTS)),
        "{s}"
    );
    assert_eq!(kit.power_state("p", "h1").await, "Stopped");
    assert_eq!(start_runs(&log), MAX_POWER_ATTEMPTS as usize);

    // Held back for 60 s from the failure: not a millisecond less.
    not_started_before(&kit, &log, first + base, 1).await;
    kit.clock().advance(Duration::from_millis(1));
    let s = started_at(&kit, first + base, 2).await;
    assert_eq!(s["outcome"], "Failed", "{s}");
    assert_eq!(start_runs(&log), 2 * MAX_POWER_ATTEMPTS as usize);

    // The second failure holds it back twice as long; then the start,
    // which now works, goes ahead.
    let second = first + base;
    not_started_before(&kit, &log, second + 2 * base, 2).await;
    std::fs::write(&works, b"").expect("the flag that lets starts work");
    kit.clock().advance(Duration::from_millis(1));
    let s = started_at(&kit, second + 2 * base, 3).await;
    assert_eq!(
        (&s["outcome"], &s["attempts"]),
        (&json!("Succeeded"), &json!(1)),
        "{s}"
    );
    assert_eq!(kit.power_state("p", "h1").await, "Running");
    assert_eq!(start_runs(&log), 2 * MAX_POWER_ATTEMPTS as usize + 1);
}

/// A1 through the API: a second plan for a pool, a plan for a personal
/// pool and bad fields are refused whole (the CLI's plan commands are
/// proved end to end).
#[tokio::test(start_paused = true)]
async fn a1_plans_are_refused_for_two_plans_one_pool_a_personal_pool_and_bad_fields() {
    let kit = Kit::open().await;
    crate::pending::pool_with_hosts(&kit, "BreadthFirst", 1).await;
    kit.create_pool(
        "personal",
        json!({"hostPoolType": "Personal", "loadBalancerType": "Persistent"}),
    )
    .await;
    kit.ok(
        "PUT",
        "/api/v1/scalingPlans/a",
        Some(off_peak_plan(&["p"], 0)),
        201,
    )
    .await;
    let (s, body) = kit
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
    for pools in [&["personal"][..], &["missing"][..]] {
        let (s, body) = kit
            .call(
                "PUT",
                "/api/v1/scalingPlans/b",
                Some(off_peak_plan(pools, 0)),
            )
            .await;
        assert_eq!(s, 400, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("hostPools[0]"),
            "{body}"
        );
    }
    let mut bad = off_peak_plan(&[], 0);
    bad["schedules"][0]["peakStartTime"] = json!("25:00");
    let (s, body) = kit.call("PUT", "/api/v1/scalingPlans/b", Some(bad)).await;
    assert_eq!(s, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("schedules[0].peakStartTime"),
        "{body}"
    );
    let (s, _) = kit
        .call(
            "PATCH",
            "/api/v1/scalingPlans/a",
            Some(json!({"timeZone": "Mars/Base"})),
        )
        .await;
    assert_eq!(s, 400);
    // Nothing changed: b does not exist, a is as it was.
    assert_eq!(kit.call("GET", "/api/v1/scalingPlans/b", None).await.0, 404);
    let list = kit.ok("GET", "/api/v1/scalingPlans", None, 200).await;
    assert_eq!(list["value"].as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(list["value"][0]["timeZone"], "UTC");
    // Deleting a pool removes it from its plan.
    kit.ok("DELETE", "/api/v1/hostPools/p?force=true", None, 204)
        .await;
    let a = kit.ok("GET", "/api/v1/scalingPlans/a", None, 200).await;
    assert_eq!(a["hostPools"], json!([]));
    kit.ok("DELETE", "/api/v1/scalingPlans/a", None, 204).await;
    assert_eq!(kit.call("GET", "/api/v1/scalingPlans/a", None).await.0, 404);
}

/// The phase of plan `day` in force now, as its status shows it.
async fn phase(kit: &Kit) -> String {
    let status = kit
        .ok("GET", "/api/v1/scalingPlans/day/status", None, 200)
        .await;
    status["hostPools"][0]["phase"]["phase"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Pool p's own algorithm and the one placements use.
async fn effective(kit: &Kit) -> (String, String) {
    let pool = kit.ok("GET", "/api/v1/hostPools/p", None, 200).await;
    let text = |k: &str| pool[k].as_str().unwrap_or_default().to_string();
    (text("loadBalancerType"), text("effectiveLoadBalancerType"))
}

/// A1, A2: the phase in force is the one whose local start is the latest
/// not after now, to the millisecond, in the plan's time zone (Berlin is
/// an hour ahead of UTC in December); placements follow its algorithm
/// from the next evaluation, while the pool keeps its own.
#[tokio::test(start_paused = true)]
async fn a1_a2_the_phase_in_force_follows_the_plans_local_time() {
    let kit = kit_with_power().await;
    crate::pending::pool_with_hosts(&kit, "DepthFirst", 2).await;
    let mut plan = off_peak_plan(&["p"], 0);
    plan["timeZone"] = json!("Europe/Berlin");
    let day = &mut plan["schedules"][0];
    day["rampUpStartTime"] = json!("07:00");
    day["peakStartTime"] = json!("09:00");
    day["rampDownStartTime"] = json!("17:00");
    day["offPeakStartTime"] = json!("20:00");
    // Minimums no host count falls short of or goes beyond: the plan
    // takes no action, only its algorithm matters here.
    day["rampUpMinimumHostsPct"] = json!(100);
    day["offPeakMinimumHostsPct"] = json!(100);
    kit.ok("PUT", "/api/v1/scalingPlans/day", Some(plan), 201)
        .await;
    // 01:00 in Berlin: the night's off-peak.
    kit.settle().await;
    assert_eq!(phase(&kit).await, "OffPeak");
    // 06:59:59.999 in Berlin (05:59:59.999 UTC): still off-peak. The
    // hours go by on the clock alone, the last second with the ticker.
    kit.clock().advance(Duration::from_secs(6 * 3600 - 1));
    kit.advance(Duration::from_millis(999)).await;
    assert_eq!(
        phase(&kit).await,
        "OffPeak",
        "ramp-up began before 07:00 local"
    );
    assert_eq!(
        effective(&kit).await,
        ("DepthFirst".to_string(), "DepthFirst".to_string())
    );
    // 07:00 in Berlin: ramp-up, and BreadthFirst once evaluated.
    kit.advance(Duration::from_millis(1)).await;
    assert_eq!(phase(&kit).await, "RampUp", "07:00 local is ramp-up");
    kit.advance(Duration::from_secs(1)).await;
    assert_eq!(
        effective(&kit).await,
        ("DepthFirst".to_string(), "BreadthFirst".to_string()),
        "A2: ramp-up's algorithm; the pool keeps its own"
    );
    let a = kit.connect("p", "alice").await;
    let b = kit.connect("p", "bob").await;
    assert_ne!(
        a["sessionHost"], b["sessionHost"],
        "placed breadth first: {a} {b}"
    );
}
