//! Rule S9: a session Disconnected for its pool's
//! `disconnectedTimeoutSeconds` ends, and so does one older than
//! `maxSessionLifetimeSeconds`, whatever its state, even across a restart
//! (the settings and the sessions' times are durable; a restart does not
//! reset them).

use std::time::Duration;

use broker::testkit::Kit;
use serde_json::{Value, json};

/// A pool `name` with one host, open to loopback clients.
async fn pool(kit: &Kit, name: &str) {
    kit.create_pool(
        name,
        json!({"hostPoolType": "Pooled", "allowedAddressRanges": ["127.0.0.0/8"],
               "loadBalancerType": "BreadthFirst"}),
    )
    .await;
    kit.ok(
        "PUT",
        &format!("/api/v1/hostPools/{name}/sessionHosts/h1"),
        Some(json!({"address": "127.0.0.1:3389"})),
        201,
    )
    .await;
}

fn pairs(want: &[(&str, &str)]) -> Vec<(String, String)> {
    want.iter()
        .map(|(u, s)| (u.to_string(), s.to_string()))
        .collect()
}

/// The front door test `s9_lifetimes_end_sessions_even_across_a_restart`,
/// on the kit's clock: the bounds refused below a minute, set through the
/// API and shown by GET; a restart (kill -9) in between; the sessions end
/// when their minute is over, not a millisecond before; the pools keep
/// serving.
#[tokio::test(start_paused = true)]
async fn s9_lifetimes_end_sessions_even_across_a_restart() {
    let mut kit = Kit::open().await;
    pool(&kit, "idle").await;
    pool(&kit, "life").await;
    // Out of range: refused, naming the field.
    let (status, v) = kit
        .call(
            "PATCH",
            "/api/v1/hostPools/idle",
            Some(json!({"disconnectedTimeoutSeconds": 59})),
        )
        .await;
    assert_eq!(
        (status, &v["error"]["code"]),
        (400, &json!("InvalidParameter")),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("disconnectedTimeoutSeconds")),
        "{v}"
    );
    let v = kit
        .patch_pool("idle", json!({"disconnectedTimeoutSeconds": 60}))
        .await;
    assert_eq!(v["disconnectedTimeoutSeconds"], 60);
    assert_eq!(v["maxSessionLifetimeSeconds"], 0);
    let v = kit
        .patch_pool("life", json!({"maxSessionLifetimeSeconds": 60}))
        .await;
    assert_eq!(v["maxSessionLifetimeSeconds"], 60);

    kit.place("idle", "gone", "Disconnected").await;
    kit.place("idle", "working", "Active").await;
    kit.place("life", "worker", "Active").await;

    kit.advance(Duration::from_secs(30)).await;
    // A restart does not forget the settings nor reset the clocks.
    kit.reopen().await;
    let v: Value = kit.ok("GET", "/api/v1/hostPools/life", None, 200).await;
    assert_eq!(v["maxSessionLifetimeSeconds"], 60);

    kit.advance(Duration::from_millis(29_999)).await;
    assert_eq!(
        kit.states("idle").await,
        pairs(&[("gone", "Disconnected"), ("working", "Active")]),
        "ended before its disconnected timeout"
    );
    assert_eq!(
        kit.states("life").await,
        pairs(&[("worker", "Active")]),
        "ended before its lifetime"
    );
    kit.advance(Duration::from_millis(1)).await;
    assert_eq!(kit.states("idle").await, pairs(&[("working", "Active")]));
    assert_eq!(kit.states("life").await, pairs(&[]));
    // The pools keep serving: a new user is placed in each.
    kit.place("life", "next", "Active").await;
    assert_eq!(kit.states("life").await.len(), 1);
}
