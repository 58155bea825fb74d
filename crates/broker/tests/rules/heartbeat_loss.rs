//! Rule S7: a session host that has not been heard from for its pool's
//! `heartbeatTimeoutSeconds` is Unavailable: it takes no new users, its
//! users' reconnects are refused (never moved, S1), and its next heartbeat
//! makes it Available again.

use std::time::Duration;

use broker::testkit::Kit;
use serde_json::json;

use crate::pending::pool_with_hosts;

async fn set_heartbeat_timeout(kit: &Kit, seconds: u32) {
    kit.patch_pool("p", json!({"heartbeatTimeoutSeconds": seconds}))
        .await;
}

/// The API's `a_silent_host_becomes_unavailable_and_returns_on_heartbeat`,
/// to the millisecond: h1's last heartbeat is at T0, its timeout 5 s.
#[tokio::test(start_paused = true)]
async fn a_silent_host_becomes_unavailable_and_returns_on_heartbeat() {
    let kit = Kit::open().await;
    pool_with_hosts(&kit, "DepthFirst", 2).await;
    set_heartbeat_timeout(&kit, 3600).await;
    let hb = kit
        .ok(
            "POST",
            "/api/v1/hostPools/p/sessionHosts/h1/heartbeat",
            Some(json!({"cpuPercent": 12.5, "futureField": 1})),
            200,
        )
        .await;
    assert_eq!(hb["status"], "Available");
    assert_eq!(hb["metrics"]["cpuPercent"], 12.5);
    let a = kit.connect("p", "alice").await;
    assert_eq!(a["sessionHost"], "h1");
    set_heartbeat_timeout(&kit, 5).await;

    kit.advance(Duration::from_millis(4_999)).await;
    assert_eq!(
        kit.host("p", "h1").await["status"],
        "Available",
        "unavailable before its heartbeat timeout"
    );
    kit.advance(Duration::from_millis(1)).await;
    assert_eq!(
        kit.host("p", "h1").await["status"],
        "Unavailable",
        "h1 went silent for heartbeatTimeoutSeconds (S7)"
    );
    // h2 never sent a heartbeat: it stays Available and takes new users.
    let b = kit.connect("p", "bob").await;
    assert_eq!(b["sessionHost"], "h2");
    // Alice's session is on the unavailable host: refused, never moved (S1).
    let (status, v) = kit
        .call(
            "POST",
            "/api/v1/hostPools/p/connect",
            Some(json!({"user": "alice"})),
        )
        .await;
    assert_eq!(status, 503, "{v}");
    assert_eq!(v["error"]["code"], "SessionHostUnavailable");
    // A long timeout again, and a heartbeat: h1 is back for alice.
    set_heartbeat_timeout(&kit, 3600).await;
    kit.ok(
        "POST",
        "/api/v1/hostPools/p/sessionHosts/h1/heartbeat",
        Some(json!({})),
        200,
    )
    .await;
    let again = kit.connect("p", "alice").await;
    assert_eq!(again["sessionHost"], "h1");
    assert_eq!(again["reconnect"], true);
}

/// A host registered by its agent, beating with its own credential: its
/// silence is counted from the later of its last heartbeat and the
/// broker's start, so a restart does not mark it Unavailable (the broker
/// heard nobody while it was down), and it goes silent a full timeout
/// after the restart.
#[tokio::test(start_paused = true)]
async fn silence_counts_from_the_later_of_the_last_heartbeat_and_the_start() {
    let mut kit = Kit::open().await;
    kit.create_pool(
        "farm",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
               "heartbeatTimeoutSeconds": 30}),
    )
    .await;
    let credential = kit.register_host("farm", "sh1", "10.0.0.1:3389").await;
    let (status, v) = kit
        .heartbeat("farm", "sh1", &credential, json!({"cpuPercent": 5.0}))
        .await;
    assert_eq!(status, 200, "{v}");
    kit.advance(Duration::from_secs(20)).await;
    kit.reopen().await;
    kit.advance(Duration::from_secs(10)).await;
    assert_eq!(
        kit.host("farm", "sh1").await["status"],
        "Available",
        "30 s after its heartbeat but 10 s after the restart"
    );
    kit.advance(Duration::from_millis(19_999)).await;
    assert_eq!(kit.host("farm", "sh1").await["status"], "Available");
    kit.advance(Duration::from_millis(1)).await;
    assert_eq!(
        kit.host("farm", "sh1").await["status"],
        "Unavailable",
        "silent for its timeout since the restart"
    );
    let (status, v) = kit
        .heartbeat("farm", "sh1", &credential, json!({"cpuPercent": 5.0}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["status"], "Available", "a heartbeat brings it back");
}
