//! Rule T5 against the real binary: the audit log kept and bounded on
//! PostgreSQL (`--database-url`, `--audit-max-entries`), and listed by the
//! CLI with its filters. What each entry holds, filters, pages, restarts
//! and retention are proved in process, in the broker's `rules` tests, and
//! the PostgreSQL store keeps each entry whole in the store's conformance
//! suite.

use serde_json::{Value, json};

use crate::{App, credential};

/// The audit log's entries (first page) for `query`, with the admin token.
async fn entries(app: &App, query: &str) -> Vec<Value> {
    let v = app
        .ok("GET", &format!("/api/v1/auditLog{query}"), None, 200)
        .await;
    v["value"].as_array().expect("value").clone()
}

/// Every page of `query`, following nextLink; answers the entries.
async fn all_pages(app: &App, query: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut path = format!("/api/v1/auditLog{query}");
    loop {
        let v = app.ok("GET", &path, None, 200).await;
        out.extend(v["value"].as_array().expect("value").iter().cloned());
        match v["nextLink"].as_str() {
            Some(next) => path = next.to_string(),
            None => return out,
        }
    }
}

/// Makes the pooled pool `name`.
async fn pool(app: &App, name: &str) {
    app.ok(
        "PUT",
        &format!("/api/v1/hostPools/{name}"),
        Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"})),
        201,
    )
    .await;
}

/// Seven changes, so seven entries: pool p made, then changed six times.
async fn seven_changes(app: &App) {
    pool(app, "p").await;
    for limit in 1..=6 {
        app.ok(
            "PATCH",
            "/api/v1/hostPools/p",
            Some(json!({"maxSessionLimit": limit})),
            200,
        )
        .await;
    }
}

/// On PostgreSQL the log survives a kill -9 and the writer prunes it to
/// `--audit-max-entries`, keeping the newest.
#[tokio::test]
async fn the_log_is_kept_and_bounded_on_postgresql() {
    let db = crate::pg::scratch("audit").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let args = ["--database-url", db.url(), "--audit-max-entries", "5"];
    let app = crate::pg::spawn_with(&dir.path().join("data"), &args).expect("serve");
    seven_changes(&app).await;
    let before = entries(&app, "?pageSize=3").await;
    assert_eq!(before.len(), 3, "{before:#?}");
    app.kill9();
    let app = crate::pg::spawn_with(&dir.path().join("data2"), &args).expect("restart");
    assert_eq!(
        entries(&app, "?pageSize=3").await,
        before,
        "kept across kill -9"
    );
    // The writer prunes to the newest 5 (of 7) within a few seconds.
    let pruned = crate::eventually(std::time::Duration::from_secs(30), || async {
        all_pages(&app, "").await.len() == 5
    })
    .await;
    assert!(pruned, "{:#?}", all_pages(&app, "").await);
    assert_eq!(
        all_pages(&app, "").await[..3],
        before[..],
        "the newest stay"
    );
}

/// `deskbroker audit list` passes its filters to the log: `--actor`,
/// `--host-pool` and `--limit` narrow it, `--output json` prints the
/// entries, and a `--since` it cannot read is refused clearly.
#[tokio::test]
async fn the_cli_lists_the_log_with_filters() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = App::spawn(&dir);
    pool(&app, "p").await;
    let reader = credential(&app, "watcher", "reader", &[]).await;
    // A reader may not change the pool: refused, and recorded.
    let (status, _) = app
        .call_with(
            "PATCH",
            "/api/v1/hostPools/p",
            Some(json!({"maxSessionLimit": 3})),
            Some(&reader),
        )
        .await;
    assert_eq!(status, 403);
    app.ok(
        "PATCH",
        "/api/v1/hostPools/p",
        Some(json!({"maxSessionLimit": 4})),
        200,
    )
    .await;
    // The newest entry is of another pool.
    pool(&app, "q").await;

    let (ok, out, err) = app.cli(&["audit", "list", "--actor", "credential:watcher"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("credential:watcher") && out.contains("403"),
        "{out}"
    );
    assert!(!out.contains("admin "), "only the watcher's: {out}");
    let (ok, out, err) = app.cli(&[
        "audit",
        "list",
        "--host-pool",
        "p",
        "--limit",
        "2",
        "--output",
        "json",
    ]);
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    let list = v.as_array().expect("array");
    let got: Vec<(&Value, &Value, &Value)> = list
        .iter()
        .map(|e| (&e["actor"], &e["hostPool"], &e["outcome"]))
        .collect();
    assert_eq!(
        got,
        [
            (&json!("admin"), &json!("p"), &json!(200)),
            (&json!("credential:watcher"), &json!("p"), &json!(403)),
        ],
        "{v}"
    );
    let (ok, _, err) = app.cli(&["audit", "list", "--since", "yesterday"]);
    assert!(!ok);
    assert!(err.contains("since"), "{err}");
}
