//! Rule T5 against the real binary: the audit log kept and bounded on
//! PostgreSQL, and listed by the CLI with its filters. What each entry
//! holds, filters, pages, restarts and retention are proved in process, in
//! the broker's `rules` tests.

use serde_json::{Value, json};

use crate::{App, credential, pool_with_hosts};

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

/// A drain, a refused reader's undrain, a refused delete: each recorded
/// with its actor, before, after and outcome (what the e2e tests on both
/// backends check).
async fn drain_and_refusals_are_recorded(app: &App) -> String {
    pool_with_hosts(app, "p", "BreadthFirst", 5, 2).await;
    let reader = credential(app, "watcher", "reader", &[]).await;
    app.ok(
        "PATCH",
        "/api/v1/hostPools/p/sessionHosts/h1",
        Some(json!({"allowNewSession": false})),
        200,
    )
    .await;
    // A reader may not undrain: 403, nothing changed, and recorded.
    let (status, _) = app
        .call_with(
            "PATCH",
            "/api/v1/hostPools/p/sessionHosts/h1",
            Some(json!({"allowNewSession": true})),
            Some(&reader),
        )
        .await;
    assert_eq!(status, 403);
    let host = app
        .ok("GET", "/api/v1/hostPools/p/sessionHosts/h1", None, 200)
        .await;
    assert_eq!(
        host["allowNewSession"], false,
        "the refusal changed nothing"
    );
    // A handler's refusal (no such host) is recorded too.
    app.refused(
        "DELETE",
        "/api/v1/hostPools/p/sessionHosts/ghost",
        None,
        404,
        "SessionHostNotFound",
    )
    .await;
    let log = entries(app, "").await;
    // Newest first: the 404, the 403, the drain, the credential, h2, h1, p.
    let actions: Vec<&str> = log
        .iter()
        .map(|e| e["action"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        actions,
        [
            "DELETE /api/v1/hostPools/p/sessionHosts/ghost",
            "PATCH /api/v1/hostPools/p/sessionHosts/h1",
            "PATCH /api/v1/hostPools/p/sessionHosts/h1",
            "POST /api/v1/credentials",
            "PUT /api/v1/hostPools/p/sessionHosts/h2",
            "PUT /api/v1/hostPools/p/sessionHosts/h1",
            "PUT /api/v1/hostPools/p",
        ],
        "{log:#?}"
    );
    let drain = &log[2];
    assert_eq!(drain["actor"], "admin", "{drain}");
    assert_eq!(drain["target"], "hostPools/p/sessionHosts/h1", "{drain}");
    assert_eq!(drain["hostPool"], "p", "{drain}");
    assert_eq!(drain["before"]["allowNewSession"], true, "{drain}");
    assert_eq!(drain["after"]["allowNewSession"], false, "{drain}");
    assert_eq!(drain["outcome"], 200, "{drain}");
    assert_eq!(drain["source"], "127.0.0.1", "{drain}");
    let refused = &log[1];
    assert_eq!(refused["actor"], "credential:watcher", "{refused}");
    assert_eq!(refused["outcome"], 403, "{refused}");
    // A refusal of the authorization table renders nothing (it changed
    // nothing, and anyone with a credential can send one).
    assert_eq!(refused["before"], Value::Null, "{refused}");
    assert_eq!(refused["after"], Value::Null, "{refused}");
    assert_eq!(log[0]["outcome"], 404, "{}", log[0]);
    assert_eq!(log[0]["after"], Value::Null, "{}", log[0]);
    let created = &log[6];
    assert_eq!(created["outcome"], 201, "{created}");
    assert_eq!(created["before"], Value::Null, "{created}");
    assert_eq!(created["after"]["name"], "p", "{created}");
    reader
}

#[tokio::test]
async fn the_log_is_kept_and_bounded_on_postgresql() {
    let db = crate::pg::scratch("audit").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let args = ["--database-url", db.url(), "--audit-max-entries", "5"];
    let app = crate::pg::spawn_with(&dir.path().join("data"), &args).expect("serve");
    drain_and_refusals_are_recorded(&app).await;
    let before = entries(&app, "?pageSize=3").await;
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

#[tokio::test]
async fn the_cli_lists_the_log_with_filters() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = App::spawn(&dir);
    drain_and_refusals_are_recorded(&app).await;
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
    assert_eq!(list.len(), 2, "{v}");
    assert_eq!(
        (&list[1]["actor"], &list[1]["outcome"]),
        (&json!("credential:watcher"), &json!(403)),
        "{v}"
    );
    let (ok, _, err) = app.cli(&["audit", "list", "--since", "yesterday"]);
    assert!(!ok);
    assert!(err.contains("since"), "{err}");
}
