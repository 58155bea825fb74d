//! Rule T2: a pool that lists entitled users and groups gives new
//! sessions only to them; a removed entitlement moves nobody (S1) until
//! the session is logged off; bad lists are refused whole.

use broker::testkit::Kit;
use serde_json::{Value, json};

async fn connect(kit: &Kit, user: &str, groups: &[&str]) -> (u16, Value) {
    kit.call(
        "POST",
        "/api/v1/hostPools/farm/connect",
        Some(json!({"user": user, "groups": groups})),
    )
    .await
}

#[tokio::test(start_paused = true)]
async fn only_entitled_users_and_groups_get_new_sessions() {
    let kit = Kit::open().await;
    kit.create_pool(
        "farm",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"}),
    )
    .await;
    for (h, a) in [("h1", "10.0.0.1:3389"), ("h2", "10.0.0.2:3389")] {
        kit.ok(
            "PUT",
            &format!("/api/v1/hostPools/farm/sessionHosts/{h}"),
            Some(json!({"address": a})),
            201,
        )
        .await;
    }
    // No entitlements: everyone, as before.
    assert_eq!(connect(&kit, "zoe@contoso.com", &[]).await.0, 200);

    let v = kit
        .patch_pool(
            "farm",
            json!({"entitledUsers": ["alice@contoso.com"], "entitledGroups": ["Sales"]}),
        )
        .await;
    assert_eq!(v["entitledUsers"], json!(["alice@contoso.com"]));
    assert_eq!(v["entitledGroups"], json!(["Sales"]));

    // bob is neither listed nor in a listed group: refused, nothing made.
    let before = kit.sessions("farm").await.len();
    let (status, v) = connect(&kit, "bob@contoso.com", &["Engineering"]).await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (403, Some("NotEntitled")),
        "{v}"
    );
    assert_eq!(kit.sessions("farm").await.len(), before);
    // alice is listed (any case); carol's group is (any case).
    assert_eq!(connect(&kit, "ALICE@contoso.com", &[]).await.0, 200);
    let (status, v) = connect(&kit, "carol@contoso.com", &["sales"]).await;
    assert_eq!(status, 200, "{v}");
    // zoe's session predates the lists: she reconnects (S1).
    let (status, v) = connect(&kit, "zoe@contoso.com", &[]).await;
    assert_eq!((status, v["reconnect"].clone()), (200, json!(true)), "{v}");

    // alice's entitlement goes: her session stays hers ...
    kit.patch_pool("farm", json!({"entitledUsers": ["dave@contoso.com"]}))
        .await;
    let (status, v) = connect(&kit, "alice@contoso.com", &[]).await;
    assert_eq!((status, v["reconnect"].clone()), (200, json!(true)), "{v}");
    // ... until it is logged off; then she is refused.
    let id = v["sessionId"].as_str().expect("an id").to_string();
    kit.ok(
        "DELETE",
        &format!("/api/v1/hostPools/farm/userSessions/{id}"),
        None,
        204,
    )
    .await;
    kit.refused(
        "POST",
        "/api/v1/hostPools/farm/connect",
        Some(json!({"user": "alice@contoso.com"})),
        403,
        "NotEntitled",
    )
    .await;

    // Bad lists are refused whole; the pool keeps its settings.
    kit.refused(
        "PATCH",
        "/api/v1/hostPools/farm",
        Some(json!({"entitledUsers": ["not a user"], "entitledGroups": []})),
        400,
        "InvalidParameter",
    )
    .await;
    let v = kit.ok("GET", "/api/v1/hostPools/farm", None, 200).await;
    assert_eq!(v["entitledUsers"], json!(["dave@contoso.com"]));
    assert_eq!(v["entitledGroups"], json!(["Sales"]));
    let many: Vec<String> = (0..10_001).map(|i| format!("u{i}@contoso.com")).collect();
    kit.refused(
        "PATCH",
        "/api/v1/hostPools/farm",
        Some(json!({"entitledUsers": many})),
        400,
        "InvalidParameter",
    )
    .await;
}
