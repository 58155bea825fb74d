//! The `deskbroker credential` commands against the real binary. Rule T1
//! itself (every role against every route, pool limits, revocation,
//! expiry) is proved in process, in the broker's `rules` tests.

use serde_json::{Value, json};

use crate::{App, pool_with_hosts};

#[tokio::test]
async fn the_credential_commands_create_list_and_revoke() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "a", "BreadthFirst", 5, 0).await;
    let (ok, out, err) = app.cli(&[
        "credential",
        "create",
        "--name",
        "cli-reader",
        "--role",
        "reader",
        "--host-pools",
        "a,b",
        "--expires-in",
        "30d",
        "-o",
        "json",
    ]);
    assert!(ok, "{err}");
    let created: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(created["hostPools"], json!(["a", "b"]), "{created}");
    let token = created["token"].as_str().expect("token").to_string();
    let (status, _) = app
        .call_with("GET", "/api/v1/hostPools/a", None, Some(&token))
        .await;
    assert_eq!(status, 200);
    let (ok, out, err) = app.cli(&["credential", "list", "-o", "json"]);
    assert!(ok, "{err}");
    assert!(out.contains("cli-reader") && !out.contains("dbc_"), "{out}");
    let (ok, _, err) = app.cli(&["credential", "revoke", "--name", "cli-reader"]);
    assert!(ok, "{err}");
    let (status, _) = app
        .call_with("GET", "/api/v1/hostPools/a", None, Some(&token))
        .await;
    assert_eq!(status, 401);
    let (ok, _, err) = app.cli(&["credential", "create", "--name", "n", "--role", "root"]);
    assert!(!ok && err.contains("role"), "{err}");
}
