//! Rule S4: a Pending session that is not confirmed within the pool's
//! `pendingTimeoutSeconds` ends (`pendingTimeout`, by the broker), and a
//! confirmed one stays.

use std::time::Duration;

use broker::testkit::Kit;
use serde_json::json;

/// A pool `p` of `hosts` hosts h1… (made by the admin), `lb` balanced.
pub async fn pool_with_hosts(kit: &Kit, lb: &str, hosts: usize) {
    kit.create_pool(
        "p",
        json!({"hostPoolType": "Pooled", "loadBalancerType": lb, "maxSessionLimit": 10}),
    )
    .await;
    for i in 1..=hosts {
        kit.ok(
            "PUT",
            &format!("/api/v1/hostPools/p/sessionHosts/h{i}"),
            Some(json!({"address": format!("10.0.0.{i}:3389")})),
            201,
        )
        .await;
    }
}

/// The API's `pending_sessions_expire_and_confirmed_ones_stay`: both users
/// are placed under the default timeout and bob is confirmed; then the
/// pool's timeout becomes one second, which applies to the sessions it
/// already has.
#[tokio::test(start_paused = true)]
async fn pending_sessions_expire_and_confirmed_ones_stay() {
    let kit = Kit::open().await;
    pool_with_hosts(&kit, "BreadthFirst", 1).await;
    let alice = kit.connect("p", "alice").await["sessionId"]
        .as_str()
        .expect("id")
        .to_string();
    let bob = kit.connect("p", "bob").await["sessionId"]
        .as_str()
        .expect("id")
        .to_string();
    let confirmed = kit.set_state("p", &bob, "Active").await;
    assert_eq!(confirmed["sessionState"], "Active");
    let alice_path = format!("/api/v1/hostPools/p/userSessions/{alice}");
    kit.ok("GET", &alice_path, None, 200).await;
    kit.patch_pool("p", json!({"pendingTimeoutSeconds": 1}))
        .await;

    // The session was placed at T0: its second is not over a millisecond
    // before it ends.
    kit.advance(Duration::from_millis(999)).await;
    kit.ok("GET", &alice_path, None, 200).await;
    kit.advance(Duration::from_millis(1)).await;
    assert_eq!(
        kit.call("GET", &alice_path, None).await.0,
        404,
        "alice's Pending session expired (S4)"
    );
    let users: Vec<_> = kit
        .sessions("p")
        .await
        .iter()
        .map(|s| s["userPrincipalName"].clone())
        .collect();
    assert_eq!(users, [json!("bob")], "the Active session stays");
}

/// The end of a Pending session: listed with `includeEnded=true` as
/// `pendingTimeout` in the state it ended in, and audited as the broker's
/// own `END` of it.
#[tokio::test(start_paused = true)]
async fn a_pending_timeout_is_listed_and_audited_as_the_brokers() {
    let kit = Kit::open().await;
    pool_with_hosts(&kit, "BreadthFirst", 1).await;
    let erin = kit.place("p", "erin@x", "Active").await;
    let alice = kit.connect("p", "alice@x").await["sessionId"]
        .as_str()
        .expect("id")
        .to_string();
    kit.patch_pool("p", json!({"pendingTimeoutSeconds": 1}))
        .await;
    kit.advance(Duration::from_secs(1)).await;

    let v = kit
        .ok(
            "GET",
            "/api/v1/hostPools/p/userSessions?includeEnded=true",
            None,
            200,
        )
        .await;
    let rows: Vec<(String, Option<String>, String)> = v["value"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap_or("").to_string(),
                s["endReason"].as_str().map(str::to_string),
                s["sessionState"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (erin, None, "Active".to_string()),
            (
                alice.clone(),
                Some("pendingTimeout".into()),
                "Pending".into()
            ),
        ]
    );
    let log = kit
        .ok("GET", "/api/v1/auditLog?actor=broker", None, 200)
        .await;
    let end = log["value"]
        .as_array()
        .expect("a list")
        .iter()
        .find(|e| e["endReason"] == "pendingTimeout")
        .cloned()
        .unwrap_or_else(|| panic!("no pendingTimeout end in {log}"));
    assert_eq!(
        (&end["actor"], &end["action"]),
        (
            &json!("broker"),
            &json!(format!("END /api/v1/hostPools/p/userSessions/{alice}"))
        ),
        "{end}"
    );
}
