//! Rule A8 at the broker: in a pool with `startVmOnConnect` and a power
//! driver, a connect that finds no host starts one (the command driver,
//! run for real), once, and is answered 503 `SessionHostStarting` with
//! `Retry-After: 30`; once the host has sent its heartbeat the same
//! connect is placed there. A started host that stays silent holds
//! connects back for its boot window only. Personal pools start the
//! user's own host.

use std::time::Duration;

use broker::testkit::Kit;
use serde_json::{Value, json};

use crate::power::{PowerLog, kit_with_power};

/// Creates `pool` (`kind` is the pool's JSON) with the command driver
/// writing to `log` and `hosts` (name, JSON), each heartbeating once then
/// stopped through the API, so that each is `Stopped` and has heartbeats
/// behind it (A9).
async fn pool_all_stopped(
    kit: &Kit,
    pool: &str,
    kind: Value,
    log: &PowerLog,
    hosts: &[(&str, Value)],
) {
    let cmd = log.command();
    let mut body = kind;
    body["powerSettings"] =
        json!({"driver": "command", "powerOnCommand": cmd, "powerOffCommand": cmd});
    kit.create_pool(pool, body).await;
    for (name, spec) in hosts {
        kit.ok(
            "PUT",
            &format!("/api/v1/hostPools/{pool}/sessionHosts/{name}"),
            Some(spec.clone()),
            201,
        )
        .await;
        beat(kit, pool, name).await;
        kit.ok(
            "POST",
            &format!("/api/v1/hostPools/{pool}/sessionHosts/{name}/stop"),
            None,
            202,
        )
        .await;
    }
    kit.power_settled(pool).await;
    for (name, _) in hosts {
        assert_eq!(kit.power_state(pool, name).await, "Stopped", "{name}");
    }
}

async fn beat(kit: &Kit, pool: &str, host: &str) {
    kit.ok(
        "POST",
        &format!("/api/v1/hostPools/{pool}/sessionHosts/{host}/heartbeat"),
        Some(json!({"cpuPercent": 5.0, "sessions": []})),
        200,
    )
    .await;
}

/// A connect through the API: (status, Retry-After, body).
async fn connect(kit: &Kit, pool: &str, user: &str) -> (u16, Option<String>, Value) {
    let (status, headers, v) = kit
        .call_with_headers(
            Some(broker::testkit::ADMIN_TOKEN),
            "POST",
            &format!("/api/v1/hostPools/{pool}/connect"),
            Some(json!({ "user": user })),
        )
        .await;
    let retry = headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    (status, retry, v)
}

/// Asserts 503 `SessionHostStarting` with `Retry-After: 30`.
async fn starting(kit: &Kit, pool: &str, user: &str) -> Value {
    let (status, retry, v) = connect(kit, pool, user).await;
    assert_eq!(
        (status, v["error"]["code"].as_str(), retry.as_deref()),
        (503, Some("SessionHostStarting"), Some("30")),
        "{v}"
    );
    v
}

/// The start actions recorded for `pool`, newest first.
async fn start_actions(kit: &Kit, pool: &str) -> Vec<Value> {
    kit.scaling_actions(pool)
        .await
        .into_iter()
        .filter(|a| a["action"] == "Start")
        .collect()
}

/// The lines of the power log that start hosts.
fn starts(log: &PowerLog) -> Vec<String> {
    log.lines()
        .into_iter()
        .filter(|l| l.starts_with("start "))
        .collect()
}

async fn two_stopped_hosts(kit: &Kit, log: &PowerLog) {
    pool_all_stopped(
        kit,
        "p",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
               "maxSessionLimit": 2}),
        log,
        &[
            ("h1", json!({"address": "10.0.0.1:3389"})),
            ("h2", json!({"address": "10.0.0.2:3389"})),
        ],
    )
    .await;
}

/// A connect to a pooled pool with every host stopped starts one host,
/// once, and is placed there after its heartbeat (the metric that counts
/// it is read end to end, where one process holds one set of metrics).
#[tokio::test(start_paused = true)]
async fn a8_a_pooled_connect_starts_one_stopped_host_and_is_placed_there_after_its_heartbeat() {
    let kit = kit_with_power().await;
    let log = PowerLog::new();
    two_stopped_hosts(&kit, &log).await;

    // The setting off: today's refusal, and nothing started.
    let (status, retry, v) = connect(&kit, "p", "alice@contoso.com").await;
    assert_eq!(
        (status, v["error"]["code"].as_str(), retry),
        (503, Some("NoSessionHostAvailable"), None),
        "{v}"
    );
    assert!(start_actions(&kit, "p").await.is_empty());

    kit.patch_pool("p", json!({"startVmOnConnect": true})).await;
    let v = starting(&kit, "p", "alice@contoso.com").await;
    let message = v["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("session host h1 is starting"), "{message}");
    let recorded = start_actions(&kit, "p").await;
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(
        (&recorded[0]["sessionHost"], &recorded[0]["actor"]),
        (&json!("h1"), &json!("startOnConnect"))
    );

    // Another connect while h1 starts (or runs without a heartbeat yet)
    // waits for it: nothing else is started.
    starting(&kit, "p", "bob@contoso.com").await;
    kit.power_settled("p").await;
    assert_eq!(kit.power_state("p", "h1").await, "Running");
    starting(&kit, "p", "bob@contoso.com").await;
    assert_eq!(starts(&log), ["start h1"], "one host started, once");
    assert_eq!(start_actions(&kit, "p").await.len(), 1);
    assert_eq!(kit.power_state("p", "h2").await, "Stopped");

    // Its agent's heartbeat (the machine took its time to boot) makes it
    // available: the same connects are placed.
    kit.advance(Duration::from_secs(30)).await;
    beat(&kit, "p", "h1").await;
    for user in ["alice@contoso.com", "bob@contoso.com"] {
        let (status, _, v) = connect(&kit, "p", user).await;
        assert_eq!(
            (status, v["sessionHost"].as_str()),
            (200, Some("h1")),
            "{v}"
        );
    }
    // h1 is full (limit 2): the next user starts h2, one more host.
    starting(&kit, "p", "carol@contoso.com").await;
    kit.power_settled("p").await;
    assert_eq!(starts(&log), ["start h1", "start h2"]);
}

/// A8's boot window: a started host that has sent no heartbeat since
/// holds connects back for ten minutes after its start, to the
/// millisecond; then it is a running host that does not serve, and a
/// connect starts another.
#[tokio::test(start_paused = true)]
async fn a8_a_silent_started_host_holds_connects_back_for_its_boot_window_only() {
    let kit = kit_with_power().await;
    let log = PowerLog::new();
    two_stopped_hosts(&kit, &log).await;
    kit.patch_pool("p", json!({"startVmOnConnect": true})).await;
    let started = kit.now_ms();
    starting(&kit, "p", "alice@contoso.com").await;
    kit.power_settled("p").await;
    assert_eq!(kit.power_state("p", "h1").await, "Running");

    let window = Duration::from_millis(broker::connect::HOST_BOOT_WAIT_MS as u64);
    kit.advance(window - Duration::from_millis(1)).await;
    assert_eq!(
        kit.now_ms(),
        started + broker::connect::HOST_BOOT_WAIT_MS - 1
    );
    let v = starting(&kit, "p", "alice@contoso.com").await;
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("session host h1 is starting"),
        "{v}"
    );
    assert_eq!(start_actions(&kit, "p").await.len(), 1, "within the window");
    kit.advance(Duration::from_millis(1)).await;
    let v = starting(&kit, "p", "alice@contoso.com").await;
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("session host h2 is starting"),
        "{v}"
    );
    kit.power_settled("p").await;
    assert_eq!(starts(&log), ["start h1", "start h2"]);
}

#[tokio::test(start_paused = true)]
async fn a8_a_personal_connect_starts_the_users_own_host_and_no_other() {
    let kit = kit_with_power().await;
    let log = PowerLog::new();
    pool_all_stopped(
        &kit,
        "desks",
        json!({"hostPoolType": "Personal", "personalDesktopAssignmentType": "Automatic",
               "loadBalancerType": "Persistent", "startVmOnConnect": true}),
        &log,
        &[
            (
                "bobs",
                json!({"address": "10.0.1.1:3389", "assignedUser": "bob@contoso.com"}),
            ),
            ("free", json!({"address": "10.0.1.2:3389"})),
            (
                "alices",
                json!({"address": "10.0.1.3:3389", "assignedUser": "alice@contoso.com"}),
            ),
        ],
    )
    .await;
    starting(&kit, "desks", "alice@contoso.com").await;
    kit.power_settled("desks").await;
    assert_eq!(kit.power_state("desks", "alices").await, "Running");
    starting(&kit, "desks", "ALICE@contoso.com").await;
    assert_eq!(starts(&log), ["start alices"]);
    kit.advance(Duration::from_secs(30)).await;
    beat(&kit, "desks", "alices").await;
    let (status, _, v) = connect(&kit, "desks", "alice@contoso.com").await;
    assert_eq!(
        (status, v["sessionHost"].as_str()),
        (200, Some("alices")),
        "{v}"
    );
    assert_eq!(starts(&log), ["start alices"], "nobody else's host started");
    for h in ["bobs", "free"] {
        assert_eq!(kit.power_state("desks", h).await, "Stopped", "{h}");
    }
}

#[tokio::test(start_paused = true)]
async fn a8_without_a_power_driver_a_connect_is_refused_as_before() {
    let kit = kit_with_power().await;
    // startVmOnConnect on, but no driver: nothing can be started, and a
    // drained-only pool answers today's refusal.
    kit.create_pool(
        "nd",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
               "startVmOnConnect": true}),
    )
    .await;
    kit.ok(
        "PUT",
        "/api/v1/hostPools/nd/sessionHosts/h1",
        Some(json!({"address": "10.0.0.1:3389", "allowNewSession": false})),
        201,
    )
    .await;
    let (status, retry, v) = connect(&kit, "nd", "alice@contoso.com").await;
    assert_eq!(
        (status, v["error"]["code"].as_str(), retry),
        (503, Some("NoSessionHostAvailable"), None),
        "{v}"
    );
    assert!(start_actions(&kit, "nd").await.is_empty());
}
