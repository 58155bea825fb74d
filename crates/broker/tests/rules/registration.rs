//! Rule E3: a registration token registers hosts only until it expires
//! (and is refused as expired after), only into its own pool, and not once
//! revoked; an expired token is forgotten when the pool's next one is made.

use std::time::Duration;

use broker::testkit::Kit;
use serde_json::{Value, json};
use store::Store;

use crate::pending::pool_with_hosts;

async fn register(kit: &Kit, body: Value) -> (u16, Value) {
    kit.call_as(None, "POST", "/api/v1/register", Some(body))
        .await
}

fn message(v: &Value) -> &str {
    v["error"]["message"].as_str().unwrap_or("")
}

/// Expired, revoked and foreign tokens register nothing: a one-second
/// token is refused for another pool (403) until its second is over, then
/// refused as expired (401).
#[tokio::test(start_paused = true)]
async fn expired_revoked_or_foreign_tokens_register_nothing() {
    let kit = Kit::open().await;
    pool_with_hosts(&kit, "BreadthFirst", 0).await;
    kit.create_pool(
        "q",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst", "maxSessionLimit": 10}),
    )
    .await;
    let short = kit.registration_token("p", 1).await;
    let revoked = kit.registration_token("p", 3600).await;
    kit.ok("DELETE", "/api/v1/hostPools/p/registrationToken", None, 204)
        .await;
    let (status, v) = register(
        &kit,
        json!({"token": revoked, "name": "x1", "address": "10.0.0.1:3389"}),
    )
    .await;
    assert_eq!(
        (status, v["error"]["code"].clone()),
        (401, json!("Unauthorized")),
        "{v}"
    );
    assert!(message(&v).contains("revoked"), "{v}");
    // The short token was revoked too; a fresh one-second token.
    let short2 = kit.registration_token("p", 1).await;
    let foreign =
        json!({"token": short2, "hostPool": "q", "name": "x2", "address": "10.0.0.2:3389"});
    kit.advance(Duration::from_millis(999)).await;
    let (status, v) = register(&kit, foreign.clone()).await;
    assert_eq!(
        status, 403,
        "before it expired, the token was refused only for the other pool: {v}"
    );
    kit.advance(Duration::from_millis(1)).await;
    let (status, v) = register(&kit, foreign).await;
    assert_eq!(status, 401, "{v}");
    assert!(message(&v).contains("expired"), "{v}");
    let (_, v) = register(
        &kit,
        json!({"token": short2, "name": "x2", "address": "10.0.0.2:3389"}),
    )
    .await;
    assert!(message(&v).contains("expired"), "{v}");
    let (status, _) = register(
        &kit,
        json!({"token": short, "name": "x3", "address": "10.0.0.3:3389"}),
    )
    .await;
    assert_eq!(status, 401);
    let good = kit.registration_token("p", 3600).await;
    let (status, v) = register(
        &kit,
        json!({"token": good, "hostPool": "q", "name": "x4", "address": "10.0.0.4:3389"}),
    )
    .await;
    assert_eq!(
        (status, v["error"]["code"].clone()),
        (403, json!("Forbidden")),
        "{v}"
    );
    let (status, _) = register(
        &kit,
        json!({"token": "dbr_nonsense", "name": "x5", "address": "10.0.0.5:3389"}),
    )
    .await;
    assert_eq!(status, 401);
    for pool in ["p", "q"] {
        let hosts = kit
            .ok(
                "GET",
                &format!("/api/v1/hostPools/{pool}/sessionHosts"),
                None,
                200,
            )
            .await;
        assert_eq!(
            hosts["value"],
            json!([]),
            "no host was registered in {pool}"
        );
    }
    let (status, v) = register(
        &kit,
        json!({"token": good, "name": "x6", "address": "10.0.0.6:3389"}),
    )
    .await;
    assert_eq!(status, 201, "a good token registers: {v}");
}

/// An expired registration token is forgotten when the pool's next token
/// is made: tokens never pile up in the store.
#[tokio::test(start_paused = true)]
async fn expired_registration_tokens_are_purged() {
    let kit = Kit::open().await;
    pool_with_hosts(&kit, "BreadthFirst", 0).await;
    let short = kit.registration_token("p", 1).await;
    kit.advance(Duration::from_secs(1)).await;
    let (status, v) = register(
        &kit,
        json!({"token": short, "name": "x1", "address": "10.0.0.1:3389"}),
    )
    .await;
    assert_eq!(status, 401, "{v}");
    assert!(message(&v).contains("expired"), "{v}");
    let _fresh = kit.registration_token("p", 3600).await;
    let stored = kit.store().load().await.expect("load");
    let pool = stored
        .pools
        .iter()
        .find(|p| p.config.name == "p")
        .expect("pool p");
    assert_eq!(
        pool.registration_tokens.len(),
        1,
        "only the fresh token is kept"
    );
}
