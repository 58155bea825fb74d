//! Rule T2's commands, against the real binary: entitlements set and read
//! through the CLI. The rule itself (new sessions only for the entitled,
//! a removed entitlement moving nobody, bad lists refused whole) is proved
//! in process, in the broker's `rules` tests.

use serde_json::json;

use crate::App;

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
