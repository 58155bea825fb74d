//! Every session's end has a reason, through the real binary: each way a
//! session ends shows in `GET …/userSessions?includeEnded=true`, in
//! `deskbroker session list --include-ended` (JSON and table) and in the
//! audit log with who ended it; a restored store's sessions are put right by
//! their host's first list; the console shows them. (Each reason's rule,
//! and who may see an ended session, are proved on a clock the test moves,
//! in the broker's `rules` tests.)

use serde_json::{Value, json};

use crate::{App, PATIENCE, enroll, eventually};

async fn pool(app: &App, name: &str) {
    app.ok(
        "PUT",
        &format!("/api/v1/hostPools/{name}"),
        Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"})),
        201,
    )
    .await;
}

async fn connect(app: &App, pool: &str, user: &str) -> String {
    app.ok(
        "POST",
        &format!("/api/v1/hostPools/{pool}/connect"),
        Some(json!({ "user": user })),
        200,
    )
    .await["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_string()
}

/// A heartbeat of `host` with its credential, listing `(user, state)`.
async fn beat(app: &App, pool: &str, host: &str, cred: &str, listed: &[(&str, &str)]) {
    let sessions: Vec<Value> = listed
        .iter()
        .map(|(u, s)| json!({"user": u, "state": s}))
        .collect();
    let (status, v) = app
        .call_with(
            "POST",
            &format!("/api/v1/hostPools/{pool}/sessionHosts/{host}/heartbeat"),
            Some(json!({"cpuPercent": 5.0, "sessions": sessions})),
            Some(cred),
        )
        .await;
    assert_eq!(status, 200, "{v}");
}

/// The list with ended sessions, as `token` (the admin's when None).
async fn listed(app: &App, pool: &str, token: Option<&str>) -> (u16, Value) {
    app.call_with(
        "GET",
        &format!("/api/v1/hostPools/{pool}/userSessions?includeEnded=true"),
        None,
        Some(token.unwrap_or(crate::TOKEN)),
    )
    .await
}

/// The ended session `id` in the list with ended sessions, if there.
async fn ended(app: &App, pool: &str, id: &str) -> Option<Value> {
    let (status, v) = listed(app, pool, None).await;
    assert_eq!(status, 200, "{v}");
    v["value"]
        .as_array()
        .expect("value")
        .iter()
        .find(|s| s["id"] == id && s.get("endReason").is_some())
        .cloned()
}

/// Waits until `id` is listed as ended; answers its entry.
async fn wait_ended(app: &App, pool: &str, id: &str) -> Value {
    eventually(PATIENCE, || async { ended(app, pool, id).await.is_some() }).await;
    ended(app, pool, id)
        .await
        .unwrap_or_else(|| panic!("session {id} was not listed as ended"))
}

/// The audit log's entry of the end of `id`.
async fn audit_end(app: &App, pool: &str, id: &str) -> Value {
    let v = app
        .ok(
            "GET",
            &format!("/api/v1/auditLog?hostPool={pool}&pageSize=1000"),
            None,
            200,
        )
        .await;
    v["value"]
        .as_array()
        .expect("value")
        .iter()
        .find(|e| {
            e["target"] == format!("hostPools/{pool}/userSessions/{id}")
                && e.get("endReason").is_some()
        })
        .cloned()
        .unwrap_or_else(|| panic!("no audit entry of the end of {id}: {v}"))
}

#[tokio::test]
async fn each_end_is_listed_and_audited_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool(&app, "p").await;
    let cred = enroll(&app, "p", "h1", "10.9.0.1:3389").await;

    // A logoff through the API: the admin's, and said so.
    let dave = connect(&app, "p", "dave@x").await;
    app.ok(
        "DELETE",
        &format!("/api/v1/hostPools/p/userSessions/{dave}"),
        None,
        204,
    )
    .await;
    let e = wait_ended(&app, "p", &dave).await;
    assert_eq!(
        (&e["endReason"], &e["userPrincipalName"], &e["sessionHost"]),
        (&json!("logoff"), &json!("dave@x"), &json!("h1")),
        "{e}"
    );
    assert!(
        e["endedAt"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{e}"
    );
    let a = audit_end(&app, "p", &dave).await;
    assert_eq!(
        (&a["actor"], &a["endReason"]),
        (&json!("admin"), &json!("logoff"))
    );
    assert_eq!(a["before"]["userPrincipalName"], "dave@x", "{a}");

    // The host lists carol, then no longer does: she logged off there.
    let carol = connect(&app, "p", "carol@x").await;
    beat(&app, "p", "h1", &cred, &[("carol@x", "Active")]).await;
    beat(&app, "p", "h1", &cred, &[]).await;
    let e = wait_ended(&app, "p", &carol).await;
    assert_eq!(e["endReason"], "notListed", "{e}");
    assert_eq!(e["sessionState"], "Active", "the state it ended in: {e}");
    let a = audit_end(&app, "p", &carol).await;
    assert_eq!(
        (&a["actor"], &a["endReason"]),
        (&json!("host:p/h1"), &json!("notListed"))
    );

    // A live session stays in the list, without an end.
    let erin = connect(&app, "p", "erin@x").await;
    beat(&app, "p", "h1", &cred, &[("erin@x", "Active")]).await;

    // alice never reaches her host: her Pending session times out (S4).
    let alice = connect(&app, "p", "alice@x").await;
    app.ok(
        "PATCH",
        "/api/v1/hostPools/p",
        Some(json!({"pendingTimeoutSeconds": 1})),
        200,
    )
    .await;
    let e = wait_ended(&app, "p", &alice).await;
    assert_eq!(
        (&e["endReason"], &e["sessionState"]),
        (&json!("pendingTimeout"), &json!("Pending")),
        "{e}"
    );
    let a = audit_end(&app, "p", &alice).await;
    assert_eq!(
        (&a["actor"], &a["endReason"], &a["action"]),
        (
            &json!("broker"),
            &json!("pendingTimeout"),
            &json!(format!("END /api/v1/hostPools/p/userSessions/{alice}"))
        )
    );

    // The list: the live one first, then the ends, latest first.
    let (_, v) = listed(&app, "p", None).await;
    let rows: Vec<(String, Option<String>)> = v["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().to_string(),
                s["endReason"].as_str().map(str::to_string),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (erin.clone(), None),
            (alice.clone(), Some("pendingTimeout".into())),
            (carol.clone(), Some("notListed".into())),
            (dave.clone(), Some("logoff".into())),
        ]
    );
    // Without includeEnded, only the live one; filters apply to the ends.
    let v = app
        .ok("GET", "/api/v1/hostPools/p/userSessions", None, 200)
        .await;
    assert_eq!(v["value"].as_array().unwrap().len(), 1, "{v}");
    let v = app
        .ok(
            "GET",
            "/api/v1/hostPools/p/userSessions?includeEnded=true&user=CAROL@X",
            None,
            200,
        )
        .await;
    let ids: Vec<&str> = v["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [carol.as_str()]);
    // Paged like the other lists.
    let v = app
        .ok(
            "GET",
            "/api/v1/hostPools/p/userSessions?includeEnded=true&pageSize=2&initialSkip=1",
            None,
            200,
        )
        .await;
    let ids: Vec<&str> = v["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [alice.as_str(), carol.as_str()]);
    assert!(
        v["nextLink"]
            .as_str()
            .is_some_and(|l| l.contains("includeEnded=true"))
    );

    // The CLI: JSON and the table both say why.
    let (ok, out, err) = app.cli(&[
        "session",
        "list",
        "--host-pool",
        "p",
        "--include-ended",
        "--output",
        "json",
    ]);
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    let reasons: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["endReason"].as_str())
        .collect();
    assert_eq!(reasons, ["pendingTimeout", "notListed", "logoff"]);
    let (ok, out, err) = app.cli(&["session", "list", "--host-pool", "p", "--include-ended"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("EndReason") && out.contains("EndedAt"),
        "{out}"
    );
    for (id, reason) in [
        (&alice, "pendingTimeout"),
        (&carol, "notListed"),
        (&dave, "logoff"),
    ] {
        assert!(
            out.lines()
                .any(|l| l.contains(id.as_str()) && l.contains(reason)),
            "{id} {reason} in:\n{out}"
        );
    }
    // The audit log's table says who ended what, and why.
    let (ok, out, err) = app.cli(&["audit", "list", "--actor", "broker"]);
    assert!(ok, "{err}");
    assert!(
        out.lines()
            .any(|l| l.contains(&format!("userSessions/{alice}")) && l.contains("pendingTimeout")),
        "{out}"
    );
    let (ok, out, _) = app.cli(&["session", "list", "--host-pool", "p"]);
    assert!(
        ok && !out.contains("EndReason") && !out.contains(&dave),
        "{out}"
    );
}

/// After `deskbroker restore` the sessions come back as they were backed
/// up (here Active, whatever became of them since); their host's first
/// list puts them right: a session it lists Disconnected is Disconnected,
/// one it no longer lists ends as `notListed`, shown with the ended ones.
#[tokio::test]
async fn restored_sessions_are_put_right_by_their_hosts_first_list() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool(&app, "p").await;
    let cred = enroll(&app, "p", "h1", "10.9.0.1:3389").await;
    let alice = connect(&app, "p", "alice@x").await;
    let bob = connect(&app, "p", "bob@x").await;
    beat(
        &app,
        "p",
        "h1",
        &cred,
        &[("alice@x", "Active"), ("bob@x", "Active")],
    )
    .await;
    let backup = dir.path().join("backup.sqlite3");
    let data = app.data_dir.clone();
    let (ok, _, err) = crate::backup::run(&[
        "backup",
        "--data-dir",
        data.to_str().unwrap(),
        "--output",
        backup.to_str().unwrap(),
    ]);
    assert!(ok, "backup: {err}");
    drop(app);

    let restored = dir.path().join("restored");
    let (ok, _, err) = crate::backup::run(&[
        "restore",
        "--input",
        backup.to_str().unwrap(),
        "--data-dir",
        restored.to_str().unwrap(),
    ]);
    assert!(ok, "restore: {err}");
    let app = App::spawn_on(&restored);
    let state = |v: &Value, id: &str| -> Option<Value> {
        v["value"]
            .as_array()?
            .iter()
            .find(|s| s["id"] == id && s.get("endReason").is_none())
            .map(|s| s["sessionState"].clone())
    };
    let (_, v) = listed(&app, "p", None).await;
    assert_eq!(state(&v, &alice), Some(json!("Active")), "{v}");
    assert_eq!(state(&v, &bob), Some(json!("Active")), "{v}");

    // Meanwhile alice's client closed, and bob logged off at the host.
    beat(&app, "p", "h1", &cred, &[("alice@x", "Disconnected")]).await;
    let (_, v) = listed(&app, "p", None).await;
    assert_eq!(state(&v, &alice), Some(json!("Disconnected")), "{v}");
    assert_eq!(state(&v, &bob), None, "{v}");
    let e = wait_ended(&app, "p", &bob).await;
    assert_eq!(
        (&e["endReason"], &e["sessionState"]),
        (&json!("notListed"), &json!("Active")),
        "{e}"
    );
    let (ok, out, err) = app.cli(&["session", "list", "--host-pool", "p", "--include-ended"]);
    assert!(ok, "{err}");
    assert!(
        out.lines()
            .any(|l| l.contains(&bob) && l.contains("notListed")),
        "{out}"
    );
}

/// The console's Sessions view shows the live sessions and, below them,
/// the recently ended ones with why each ended, as text.
#[tokio::test]
async fn the_console_shows_recently_ended_sessions_with_their_reason() {
    use crate::browser::browser;
    use crate::browser::go;
    use crate::browser::sign_in;
    use crate::browser::text;
    use crate::browser::wait_text;
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool(&app, "p").await;
    enroll(&app, "p", "h1", "10.9.0.1:3389").await;
    let live = connect(&app, "p", "live@x").await;
    let gone = connect(&app, "p", "gone@x").await;
    app.ok(
        "DELETE",
        &format!("/api/v1/hostPools/p/userSessions/{gone}"),
        None,
        204,
    )
    .await;
    wait_ended(&app, "p", &gone).await;

    let b = browser().await;
    let c = &b.client;
    sign_in(c, &app).await;
    go(c, "#/sessions?pool=p").await;
    let row = format!("#ended-table tr[data-id='{gone}']");
    let reason = wait_text(
        c,
        &format!("{row} .reason"),
        "the ended session's reason",
        |t| !t.is_empty(),
    )
    .await;
    assert_eq!(reason, "logoff");
    assert_eq!(
        text(c, &format!("#sessions-table tr[data-id='{live}'] .state"))
            .await
            .as_deref(),
        Some("Pending")
    );
    assert_eq!(
        text(c, &format!("#ended-table tr[data-id='{live}']")).await,
        None,
        "a live session is not among the ended"
    );
}
