//! Rule T5 end to end against the real binary: the audit log records every
//! change (allowed or refused) with its actor, before and after, and
//! outcome; never a secret; filters and pages; survives a restart and
//! kill -9 for acknowledged changes; the same on PostgreSQL; and a
//! credential limited to some pools sees only theirs.

use serde_json::{Value, json};

use crate::{App, credential, pool_with_hosts};

/// The audit log's entries (first page) for `query`, with the admin token.
async fn entries(app: &App, query: &str) -> Vec<Value> {
    let v = app
        .ok("GET", &format!("/api/v1/auditLog{query}"), None, 200)
        .await;
    v["value"].as_array().expect("value").clone()
}

/// The newest entry whose action is `action`.
fn find<'a>(entries: &'a [Value], action: &str) -> &'a Value {
    entries
        .iter()
        .find(|e| e["action"] == action)
        .unwrap_or_else(|| panic!("no entry {action} in {entries:#?}"))
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
async fn changes_and_refusals_are_recorded_and_secrets_never() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = App::spawn(&dir);
    let reader = drain_and_refusals_are_recorded(&app).await;
    // Secrets: a credential, a registration token, a host credential.
    let token = app
        .ok(
            "POST",
            "/api/v1/hostPools/p/registrationToken",
            Some(json!({"expiresInSeconds": 600})),
            200,
        )
        .await["token"]
        .as_str()
        .expect("token")
        .to_string();
    let (status, reg) = app
        .call_with(
            "POST",
            "/api/v1/register",
            Some(json!({"token": token, "hostPool": "p", "name": "agent1", "address": "10.1.0.1:3389"})),
            None,
        )
        .await;
    assert_eq!(status, 201, "{reg}");
    let host_credential = reg["hostCredential"]
        .as_str()
        .expect("credential")
        .to_string();
    // A placement, and a host's own heartbeat (not recorded: host telemetry).
    let placed = app
        .ok(
            "POST",
            "/api/v1/hostPools/p/connect",
            Some(json!({"user": "alice"})),
            200,
        )
        .await;
    let (status, _) = app
        .call_with(
            "POST",
            "/api/v1/hostPools/p/sessionHosts/agent1/heartbeat",
            Some(json!({"cpuPercent": 3.0})),
            Some(&host_credential),
        )
        .await;
    assert_eq!(status, 200);
    let log = entries(&app, "").await;
    let text = serde_json::to_string(&log).expect("json");
    for secret in [reader.as_str(), &token, &host_credential, crate::TOKEN] {
        assert!(!text.contains(secret), "a secret in the log: {text}");
    }
    assert!(
        log.iter()
            .all(|e| !e["action"].as_str().unwrap_or("").ends_with("/heartbeat")),
        "a host's own heartbeats are not recorded: {text}"
    );
    let cred = find(&log, "POST /api/v1/credentials");
    assert_eq!(cred["target"], "credentials/watcher", "{cred}");
    assert_eq!(cred["after"]["role"], "reader", "{cred}");
    assert_eq!(cred["hostPool"], Value::Null, "{cred}");
    assert!(cred["after"].get("token").is_none(), "{cred}");
    let registered = find(&log, "POST /api/v1/register");
    assert_eq!(registered["actor"], "registration-token:p", "{registered}");
    assert_eq!(
        registered["target"], "hostPools/p/sessionHosts/agent1",
        "{registered}"
    );
    assert_eq!(registered["outcome"], 201, "{registered}");
    assert_eq!(
        registered["after"]["address"], "10.1.0.1:3389",
        "{registered}"
    );
    let token_entry = find(&log, "POST /api/v1/hostPools/p/registrationToken");
    assert_eq!(token_entry["outcome"], 200, "{token_entry}");
    let connect = find(&log, "POST /api/v1/hostPools/p/connect");
    assert_eq!(connect["outcome"], 200, "{connect}");
    assert_eq!(connect["after"]["userPrincipalName"], "alice", "{connect}");
    assert_eq!(
        connect["target"],
        format!(
            "hostPools/p/userSessions/{}",
            placed["sessionId"].as_str().unwrap_or("?")
        ),
        "{connect} / {placed}"
    );
    // A removal: after is null.
    app.ok("DELETE", "/api/v1/credentials/watcher", None, 204)
        .await;
    let log = entries(&app, "?pageSize=1").await;
    assert_eq!(
        log[0]["action"], "DELETE /api/v1/credentials/watcher",
        "{log:?}"
    );
    assert_eq!(log[0]["before"]["role"], "reader", "{log:?}");
    assert_eq!(log[0]["after"], Value::Null, "{log:?}");
}

#[tokio::test]
async fn filters_pages_and_pool_limited_readers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 5, 3).await;
    pool_with_hosts(&app, "q", "BreadthFirst", 5, 1).await;
    let ops = credential(&app, "ops", "operator", &["q"]).await;
    let (status, _) = app
        .call_with(
            "PATCH",
            "/api/v1/hostPools/q/sessionHosts/h1",
            Some(json!({"allowNewSession": false})),
            Some(&ops),
        )
        .await;
    assert_eq!(status, 200);
    let all = all_pages(&app, "").await;
    // p, 3 hosts, q, 1 host, the credential, the drain.
    assert_eq!(all.len(), 8, "{all:#?}");
    // Pages of 3 give the same entries, newest first, none twice.
    let paged = all_pages(&app, "?pageSize=3").await;
    assert_eq!(paged, all);
    let ids: Vec<i64> = paged
        .iter()
        .map(|e| e["id"].as_i64().expect("id"))
        .collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "{ids:?}");
    let v = app
        .ok("GET", "/api/v1/auditLog?pageSize=3", None, 200)
        .await;
    assert_eq!(
        v["nextLink"],
        format!("/api/v1/auditLog?pageSize=3&beforeId={}", ids[2]),
        "{v}"
    );
    // Filters.
    let by_ops = all_pages(&app, "?actor=credential:ops").await;
    assert_eq!(by_ops.len(), 1, "{by_ops:?}");
    assert_eq!(
        by_ops[0]["action"],
        "PATCH /api/v1/hostPools/q/sessionHosts/h1"
    );
    assert_eq!(all_pages(&app, "?hostPool=p").await.len(), 4);
    assert_eq!(all_pages(&app, "?hostPool=q&actor=admin").await.len(), 2);
    assert_eq!(
        all_pages(&app, "?since=2000-01-01T00:00:00Z").await.len(),
        8
    );
    assert!(
        all_pages(&app, "?since=2999-01-01T00:00:00%2B02:00")
            .await
            .is_empty()
    );
    let since_drain = format!("?since={}", all[0]["time"].as_str().expect("time"));
    assert!(!all_pages(&app, &since_drain).await.is_empty());
    // Bad filters: 400 InvalidParameter.
    for bad in [
        "?since=yesterday",
        "?pageSize=0",
        "?pageSize=1001",
        "?beforeId=x",
        "?user=a",
    ] {
        app.refused(
            "GET",
            &format!("/api/v1/auditLog{bad}"),
            None,
            400,
            "InvalidParameter",
        )
        .await;
    }
    // A credential limited to q sees q's entries only, and may not ask
    // for p's.
    let limited = credential(&app, "q-reader", "reader", &["q"]).await;
    let (status, v) = app
        .call_with("GET", "/api/v1/auditLog", None, Some(&limited))
        .await;
    assert_eq!(status, 200, "{v}");
    let pools: Vec<&str> = v["value"]
        .as_array()
        .expect("value")
        .iter()
        .map(|e| e["hostPool"].as_str().unwrap_or("none"))
        .collect();
    assert_eq!(pools, ["q", "q", "q"], "{v}");
    let (status, v) = app
        .call_with("GET", "/api/v1/auditLog?hostPool=p", None, Some(&limited))
        .await;
    assert_eq!(status, 403, "{v}");
    // A portal does not read the log; every credential may ask who it is.
    let portal = credential(&app, "web", "portal", &[]).await;
    let (status, _) = app
        .call_with("GET", "/api/v1/auditLog", None, Some(&portal))
        .await;
    assert_eq!(status, 403);
    let (status, me) = app
        .call_with("GET", "/api/v1/whoami", None, Some(&limited))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        me,
        json!({"role": "reader", "name": "q-reader", "hostPools": ["q"]})
    );
    let me = app.ok("GET", "/api/v1/whoami", None, 200).await;
    assert_eq!(me["role"], "admin");
}

#[tokio::test]
async fn entries_survive_a_restart_and_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let app = App::spawn_on(&data);
    drain_and_refusals_are_recorded(&app).await;
    let before = entries(&app, "").await;
    app.kill9();
    let app = App::spawn_on(&data);
    assert_eq!(
        entries(&app, "").await,
        before,
        "every acknowledged entry is back"
    );
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
