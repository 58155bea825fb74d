//! Rule T2 through the API and the CLI, against the real binary: a pool
//! that lists entitled users and groups gives new sessions only to them;
//! a removed entitlement moves nobody (S1) until an operator logs the
//! session off; bad lists are refused whole.

use serde_json::{Value, json};

use crate::App;

async fn connect(app: &App, user: &str, groups: &[&str]) -> (u16, Value) {
    app.call(
        "POST",
        "/api/v1/hostPools/farm/connect",
        Some(json!({"user": user, "groups": groups})),
    )
    .await
}

async fn session_count(app: &App) -> usize {
    app.ok("GET", "/api/v1/hostPools/farm/userSessions", None, 200)
        .await["value"]
        .as_array()
        .map_or(0, Vec::len)
}

#[tokio::test]
async fn only_entitled_users_and_groups_get_new_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm",
        Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"})),
        201,
    )
    .await;
    for (h, a) in [("h1", "10.0.0.1:3389"), ("h2", "10.0.0.2:3389")] {
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/farm/sessionHosts/{h}"),
            Some(json!({"address": a})),
            201,
        )
        .await;
    }
    // No entitlements: everyone, as before.
    assert_eq!(connect(&app, "zoe@contoso.com", &[]).await.0, 200);

    let v = app
        .ok(
            "PATCH",
            "/api/v1/hostPools/farm",
            Some(json!({"entitledUsers": ["alice@contoso.com"], "entitledGroups": ["Sales"]})),
            200,
        )
        .await;
    assert_eq!(v["entitledUsers"], json!(["alice@contoso.com"]));
    assert_eq!(v["entitledGroups"], json!(["Sales"]));

    // bob is neither listed nor in a listed group: refused, nothing made.
    let before = session_count(&app).await;
    let (status, v) = connect(&app, "bob@contoso.com", &["Engineering"]).await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (403, Some("NotEntitled")),
        "{v}"
    );
    assert_eq!(session_count(&app).await, before);
    // alice is listed (any case); carol's group is (any case).
    assert_eq!(connect(&app, "ALICE@contoso.com", &[]).await.0, 200);
    let (status, v) = connect(&app, "carol@contoso.com", &["sales"]).await;
    assert_eq!(status, 200, "{v}");
    // zoe's session predates the lists: she reconnects (S1).
    let (status, v) = connect(&app, "zoe@contoso.com", &[]).await;
    assert_eq!((status, v["reconnect"].clone()), (200, json!(true)), "{v}");

    // alice's entitlement goes: her session stays hers ...
    app.ok(
        "PATCH",
        "/api/v1/hostPools/farm",
        Some(json!({"entitledUsers": ["dave@contoso.com"]})),
        200,
    )
    .await;
    let (status, v) = connect(&app, "alice@contoso.com", &[]).await;
    assert_eq!((status, v["reconnect"].clone()), (200, json!(true)), "{v}");
    // ... until it is logged off; then she is refused.
    let id = v["sessionId"].as_str().unwrap().to_string();
    app.ok(
        "DELETE",
        &format!("/api/v1/hostPools/farm/userSessions/{id}"),
        None,
        204,
    )
    .await;
    app.refused(
        "POST",
        "/api/v1/hostPools/farm/connect",
        Some(json!({"user": "alice@contoso.com"})),
        403,
        "NotEntitled",
    )
    .await;

    // Bad lists are refused whole; the pool keeps its settings.
    app.refused(
        "PATCH",
        "/api/v1/hostPools/farm",
        Some(json!({"entitledUsers": ["not a user"], "entitledGroups": []})),
        400,
        "InvalidParameter",
    )
    .await;
    let v = app.ok("GET", "/api/v1/hostPools/farm", None, 200).await;
    assert_eq!(v["entitledUsers"], json!(["dave@contoso.com"]));
    assert_eq!(v["entitledGroups"], json!(["Sales"]));
    let many: Vec<String> = (0..10_001).map(|i| format!("u{i}@contoso.com")).collect();
    app.refused(
        "PATCH",
        "/api/v1/hostPools/farm",
        Some(json!({"entitledUsers": many})),
        400,
        "InvalidParameter",
    )
    .await;
}

#[tokio::test]
async fn entitlements_from_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let ok = |args: &[&str]| {
        let (ok, out, err) = app.cli(args);
        assert!(ok, "{args:?}: {err}");
        out
    };
    ok(&[
        "hostpool",
        "create",
        "--name",
        "farm",
        "--host-pool-type",
        "Pooled",
        "--load-balancer-type",
        "BreadthFirst",
        "--entitled-groups",
        "Sales,Support",
    ]);
    ok(&[
        "sessionhost",
        "add",
        "--host-pool",
        "farm",
        "--name",
        "h1",
        "--address",
        "10.0.0.1:3389",
    ]);
    let (ok_, _, err) = app.cli(&[
        "connect",
        "--host-pool",
        "farm",
        "--user",
        "bob@contoso.com",
    ]);
    assert!(!ok_);
    assert!(err.contains("NotEntitled"), "{err}");
    ok(&[
        "connect",
        "--host-pool",
        "farm",
        "--user",
        "bob@contoso.com",
        "--groups",
        "support",
    ]);
    // Cleared: everyone again.
    ok(&[
        "hostpool",
        "update",
        "--name",
        "farm",
        "--entitled-groups",
        "",
    ]);
    ok(&[
        "connect",
        "--host-pool",
        "farm",
        "--user",
        "eve@contoso.com",
    ]);
    let v = app.ok("GET", "/api/v1/hostPools/farm", None, 200).await;
    assert_eq!(v["entitledGroups"], json!([]));
}
