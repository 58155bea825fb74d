//! Rule A5's ramp-down as a client sees it, on the kit's clock: a plan in
//! ramp-down drains the host it can do without. With
//! `rampDownForceLogoffUsers` its users are sent the notice (a message the
//! answer to their host's next heartbeat carries), logged off exactly
//! `rampDownWaitTimeMinutes` later (not a millisecond before), and the
//! host, once empty, is stopped through its pool's power driver. Without
//! it nobody is told or logged off, and the drained host is stopped at the
//! first evaluation that finds it empty, however long that takes.
//!
//! The farm: two hosts h1 and h2 registered as agents do, one session
//! each; without h2 the pool keeps enough capacity, without both it has
//! none, so h2 (the later in query order, A5's tie) is drained and h1
//! stays.

use std::time::Duration;

use api::types::rfc3339_ms;
use broker::autoscale::{MIN_AUTOSCALE_INTERVAL, NOTICE_TITLE};
use broker::testkit::Kit;
use serde_json::{Value, json};

use crate::power::{PowerLog, kit_with_power};

const NOTICE: &str = "This host stops soon: please save your work.";

/// A plan over pool p whose ramp-down begins at the kit's start: the
/// zone is 12 hours ahead of UTC, so 00:00 UTC is 12:00 there, and
/// off-peak begins only at 23:00 (11:00 UTC).
fn ramp_down_plan(force_logoff: bool, wait_minutes: u32) -> Value {
    json!({
        "timeZone": "Etc/GMT-12",
        "hostPools": ["p"],
        "schedules": [{
            "name": "everyday",
            "daysOfWeek": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
                           "Saturday", "Sunday"],
            "rampUpStartTime": "06:00", "rampUpLoadBalancingAlgorithm": "BreadthFirst",
            "rampUpMinimumHostsPct": 0, "rampUpCapacityThresholdPct": 90,
            "peakStartTime": "08:00", "peakLoadBalancingAlgorithm": "BreadthFirst",
            "rampDownStartTime": "12:00", "rampDownLoadBalancingAlgorithm": "DepthFirst",
            "rampDownMinimumHostsPct": 0, "rampDownCapacityThresholdPct": 90,
            "rampDownForceLogoffUsers": force_logoff,
            "rampDownWaitTimeMinutes": wait_minutes,
            "rampDownNotificationMessage": NOTICE,
            "rampDownStopHostsWhen": "ZeroSessions",
            "offPeakStartTime": "23:00", "offPeakLoadBalancingAlgorithm": "DepthFirst"
        }]
    })
}

/// The farm's hosts as their agents know them, and its sessions.
struct Farm {
    log: PowerLog,
    h1: String,
    h2: String,
    /// Bob's session, on h2.
    bob: String,
}

/// Pool p (BreadthFirst, 10 sessions a host, heartbeats never late) whose
/// command driver appends to a log; h1 and h2 registered, alice on h1 and
/// bob on h2, both Active and reported by their hosts.
async fn farm(kit: &Kit) -> Farm {
    let log = PowerLog::new();
    let cmd = log.command();
    kit.create_pool(
        "p",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
               "maxSessionLimit": 10, "heartbeatTimeoutSeconds": 86400,
               "powerSettings": {"driver": "command", "powerOnCommand": cmd,
                                 "powerOffCommand": cmd}}),
    )
    .await;
    let h1 = kit.register_host("p", "h1", "10.0.0.1:3389").await;
    let h2 = kit.register_host("p", "h2", "10.0.0.2:3389").await;
    let alice = kit.place("p", "alice", "Active").await;
    let bob = kit.place("p", "bob", "Active").await;
    let mut on: Vec<(String, String)> = kit
        .sessions("p")
        .await
        .iter()
        .map(|s| (text(s, "id"), text(s, "sessionHost")))
        .collect();
    on.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(on, [(alice, "h1".into()), (bob.clone(), "h2".into())]);
    let farm = Farm { log, h1, h2, bob };
    beat(kit, "h1", &farm.h1, &["alice"]).await;
    beat(kit, "h2", &farm.h2, &["bob"]).await;
    farm
}

/// A heartbeat of `host` reporting `users` logged on (Active); answers
/// its body.
async fn beat(kit: &Kit, host: &str, credential: &str, users: &[&str]) -> Value {
    let sessions: Vec<Value> = users
        .iter()
        .map(|u| json!({"user": u, "state": "Active"}))
        .collect();
    let (status, v) = kit
        .heartbeat(
            "p",
            host,
            credential,
            json!({"cpuPercent": 5.0, "sessions": sessions}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    v
}

/// `v[k]` as text ("" when it is not a string).
fn text(v: &Value, k: &str) -> String {
    v[k].as_str().unwrap_or_default().to_string()
}

/// The list `v[k]` (an absent one is empty, as the answers leave empty
/// lists out).
fn list(v: &Value, k: &str) -> Vec<Value> {
    v[k].as_array().cloned().unwrap_or_default()
}

/// Pool p's scaling actions of `kind`, newest first.
async fn actions(kit: &Kit, kind: &str) -> Vec<Value> {
    kit.scaling_actions("p")
        .await
        .into_iter()
        .filter(|a| a["action"] == kind)
        .collect()
}

/// Lets the plan evaluate (more than once) at the clock's present date.
async fn evaluated_now(kit: &Kit) {
    kit.hold(MIN_AUTOSCALE_INTERVAL * 2).await;
}

/// Asserts the one record of `kind` in pool p: on h2, in ramp-down, by the
/// plan, decided at `at_ms`, with `outcome`; answers it.
async fn the_one(kit: &Kit, kind: &str, at_ms: i64, outcome: &str) -> Value {
    let found = actions(kit, kind).await;
    assert_eq!(found.len(), 1, "{kind}: {found:?}");
    let a = found[0].clone();
    assert_eq!(
        (
            &a["sessionHost"],
            &a["phase"],
            &a["actor"],
            &a["time"],
            &a["outcome"]
        ),
        (
            &json!("h2"),
            &json!("RampDown"),
            &json!("scalingPlan"),
            &json!(rfc3339_ms(at_ms)),
            &json!(outcome)
        ),
        "{a}"
    );
    a
}

#[tokio::test(start_paused = true)]
async fn a5_ramp_down_with_force_logoff_notifies_then_logs_off_after_the_wait_then_stops() {
    let kit = kit_with_power().await;
    let farm = farm(&kit).await;
    let start = kit.now_ms();
    kit.ok(
        "PUT",
        "/api/v1/scalingPlans/evening",
        Some(ramp_down_plan(true, 10)),
        201,
    )
    .await;
    evaluated_now(&kit).await;

    // The first evaluation drains h2 and notifies its user.
    the_one(&kit, "Drain", start, "Succeeded").await;
    let notify = the_one(&kit, "Notify", start, "Succeeded").await;
    assert!(
        text(&notify, "message").contains("sent to 1 of 1"),
        "{notify}"
    );
    assert!(
        text(&notify, "reason").contains("logged off in 10 minute(s)"),
        "{notify}"
    );
    let h2 = kit.host("p", "h2").await;
    assert_eq!(
        (&h2["allowNewSession"], &h2["drainedBy"]),
        (&json!(false), &json!("scalingPlan")),
        "{h2}"
    );
    // The notice waits for h2's agent: its next heartbeat carries it,
    // once; h1's carries nothing.
    let answer = beat(&kit, "h2", &farm.h2, &["bob"]).await;
    assert_eq!(
        answer["messages"],
        json!([{"id": answer["messages"][0]["id"], "sessionId": farm.bob, "user": "bob",
                "title": NOTICE_TITLE, "message": NOTICE}]),
        "{answer}"
    );
    let again = beat(&kit, "h2", &farm.h2, &["bob"]).await;
    assert_eq!(list(&again, "messages"), Vec::<Value>::new(), "{again}");
    let h1 = beat(&kit, "h1", &farm.h1, &["alice"]).await;
    assert_eq!(list(&h1, "messages"), Vec::<Value>::new(), "{h1}");

    // A millisecond before the wait is over, evaluations leave bob on.
    let due = start + 10 * 60_000;
    kit.advance(Duration::from_millis((due - 1 - kit.now_ms()) as u64))
        .await;
    evaluated_now(&kit).await;
    assert_eq!(kit.now_ms(), due - 1);
    assert_eq!(actions(&kit, "Logoff").await, Vec::<Value>::new());
    assert_eq!(
        kit.states("p").await,
        [
            ("alice".into(), "Active".into()),
            ("bob".into(), "Active".into())
        ]
    );
    let answer = beat(&kit, "h2", &farm.h2, &["bob"]).await;
    assert_eq!(list(&answer, "logoffs"), Vec::<Value>::new(), "{answer}");
    assert_eq!(kit.power_state("p", "h2").await, "Running");

    // At the wait's end, to the millisecond, bob is logged off: his
    // session is gone and h2's agent is told to end his logon.
    kit.clock().advance(Duration::from_millis(1));
    evaluated_now(&kit).await;
    let logoff = the_one(&kit, "Logoff", due, "Succeeded").await;
    assert!(
        text(&logoff, "reason").contains("10 minute(s) since its users were notified"),
        "{logoff}"
    );
    assert_eq!(text(&logoff, "message"), "1 session(s) logged off");
    assert_eq!(kit.states("p").await, [("alice".into(), "Active".into())]);
    let answer = beat(&kit, "h2", &farm.h2, &["bob"]).await;
    assert_eq!(
        answer["logoffs"],
        json!([{"sessionId": farm.bob, "user": "bob"}]),
        "{answer}"
    );
    assert_eq!(
        the_one(&kit, "Notify", start, "Succeeded").await["id"],
        notify["id"]
    );

    // Once h2's agent has ended the logon, h2 is empty: the plan stops it.
    beat(&kit, "h2", &farm.h2, &[]).await;
    evaluated_now(&kit).await;
    kit.power_settled("p").await;
    let stop = actions(&kit, "Stop").await;
    assert_eq!(stop.len(), 1, "{stop:?}");
    assert_eq!(
        (&stop[0]["sessionHost"], &stop[0]["outcome"]),
        (&json!("h2"), &json!("Succeeded")),
        "{stop:?}"
    );
    assert!(
        text(&stop[0], "reason").contains("no session left"),
        "{stop:?}"
    );
    assert_eq!(farm.log.lines(), ["stop h2"]);
    assert_eq!(kit.power_state("p", "h2").await, "Stopped");
    assert_eq!(kit.power_state("p", "h1").await, "Running");
    assert_eq!(kit.states("p").await, [("alice".into(), "Active".into())]);
}

#[tokio::test(start_paused = true)]
async fn a5_ramp_down_without_force_logoff_stops_the_drained_host_only_once_it_is_empty() {
    let kit = kit_with_power().await;
    let farm = farm(&kit).await;
    let start = kit.now_ms();
    kit.ok(
        "PUT",
        "/api/v1/scalingPlans/evening",
        Some(ramp_down_plan(false, 10)),
        201,
    )
    .await;
    evaluated_now(&kit).await;
    the_one(&kit, "Drain", start, "Succeeded").await;

    // Well past any wait, with bob still on h2: nobody is told or logged
    // off, and h2 runs on, drained.
    kit.advance(Duration::from_secs(45 * 60)).await;
    let empty_at = kit.now_ms();
    evaluated_now(&kit).await;
    let answer = beat(&kit, "h2", &farm.h2, &["bob"]).await;
    assert_eq!(
        (list(&answer, "messages"), list(&answer, "logoffs")),
        (vec![], vec![]),
        "{answer}"
    );
    evaluated_now(&kit).await;
    for kind in ["Notify", "Logoff", "Stop"] {
        assert_eq!(actions(&kit, kind).await, Vec::<Value>::new(), "{kind}");
    }
    assert_eq!(
        kit.states("p").await,
        [
            ("alice".into(), "Active".into()),
            ("bob".into(), "Active".into())
        ]
    );
    assert_eq!(kit.power_state("p", "h2").await, "Running");
    assert_eq!(kit.host("p", "h2").await["drainedBy"], "scalingPlan");
    assert!(farm.log.lines().is_empty(), "{:?}", farm.log.lines());

    // Bob logs off at h2: the evaluation at that very millisecond stops it.
    assert_eq!(kit.now_ms(), empty_at);
    beat(&kit, "h2", &farm.h2, &[]).await;
    assert_eq!(kit.states("p").await, [("alice".into(), "Active".into())]);
    evaluated_now(&kit).await;
    kit.power_settled("p").await;
    the_one(&kit, "Stop", empty_at, "Succeeded").await;
    assert_eq!(farm.log.lines(), ["stop h2"]);
    assert_eq!(kit.power_state("p", "h2").await, "Stopped");
    assert_eq!(kit.power_state("p", "h1").await, "Running");
    assert_eq!(actions(&kit, "Logoff").await, Vec::<Value>::new());
}
