//! Every session's end has a reason, through the real binary: `deskbroker
//! session list --include-ended` shows it as JSON and as a table,
//! `deskbroker audit list` says who ended what, a backup restored with
//! `deskbroker restore` brings the sessions back for their host's first
//! list to put right, and the console shows the ended ones. Each reason's
//! rule, the list's order, filters and pages, who may see an ended
//! session, and how loaded sessions are put right are proved in process,
//! on a clock the test moves, in the broker's `rules` tests.

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

/// The ended session `id` in `GET …/userSessions?includeEnded=true`, if
/// there.
async fn ended(app: &App, pool: &str, id: &str) -> Option<Value> {
    let v = app
        .ok(
            "GET",
            &format!("/api/v1/hostPools/{pool}/userSessions?includeEnded=true"),
            None,
            200,
        )
        .await;
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

/// `deskbroker session list --host-pool pool --include-ended --output
/// json`: each session's id, state and end reason (None while live).
fn cli_sessions(app: &App, pool: &str) -> Vec<(String, String, Option<String>)> {
    let (ok, out, err) = app.cli(&[
        "session",
        "list",
        "--host-pool",
        pool,
        "--include-ended",
        "--output",
        "json",
    ]);
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    v.as_array()
        .unwrap_or_else(|| panic!("an array: {out}"))
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap_or("").to_string(),
                s["sessionState"].as_str().unwrap_or("").to_string(),
                s["endReason"].as_str().map(str::to_string),
            )
        })
        .collect()
}

/// The CLI says why each session ended: `session list --include-ended`
/// as JSON and as a table with its EndReason and EndedAt columns (without
/// the flag, only the live sessions), and `audit list --actor` shows who
/// ended what. (The rules of each end are proved in process, in the
/// broker's `rules` tests; here two ends give the table two reasons.)
#[tokio::test]
async fn the_cli_lists_each_end_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool(&app, "p").await;
    let cred = enroll(&app, "p", "h1", "10.9.0.1:3389").await;
    // dave is logged off through the API; carol's host stops listing her;
    // erin stays.
    let dave = connect(&app, "p", "dave@x").await;
    app.ok(
        "DELETE",
        &format!("/api/v1/hostPools/p/userSessions/{dave}"),
        None,
        204,
    )
    .await;
    let carol = connect(&app, "p", "carol@x").await;
    beat(&app, "p", "h1", &cred, &[("carol@x", "Active")]).await;
    beat(&app, "p", "h1", &cred, &[]).await;
    wait_ended(&app, "p", &dave).await;
    wait_ended(&app, "p", &carol).await;
    let erin = connect(&app, "p", "erin@x").await;

    // The CLI: JSON and the table both say why.
    let mut reasons: Vec<(String, Option<String>)> = cli_sessions(&app, "p")
        .into_iter()
        .map(|(id, _, reason)| (id, reason))
        .collect();
    reasons.sort();
    let mut want = vec![
        (dave.clone(), Some("logoff".to_string())),
        (carol.clone(), Some("notListed".to_string())),
        (erin.clone(), None),
    ];
    want.sort();
    assert_eq!(reasons, want);
    let (ok, out, err) = app.cli(&["session", "list", "--host-pool", "p", "--include-ended"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("EndReason") && out.contains("EndedAt"),
        "{out}"
    );
    for (id, reason) in [(&carol, "notListed"), (&dave, "logoff")] {
        assert!(
            out.lines()
                .any(|l| l.contains(id.as_str()) && l.contains(reason)),
            "{id} {reason} in:\n{out}"
        );
    }
    let (ok, out, _) = app.cli(&["session", "list", "--host-pool", "p"]);
    assert!(
        ok && out.contains(&erin) && !out.contains("EndReason") && !out.contains(&dave),
        "{out}"
    );
    // The audit log's table says who ended what, and why.
    let (ok, out, err) = app.cli(&["audit", "list", "--actor", "host:p/h1"]);
    assert!(ok, "{err}");
    assert!(
        out.lines()
            .any(|l| l.contains(&format!("userSessions/{carol}")) && l.contains("notListed")),
        "{out}"
    );
    assert!(!out.contains(&dave), "only the host's entries: {out}");
}

/// `deskbroker backup` keeps the sessions and `deskbroker restore` brings
/// them back as they were (here Active), with the host's credential: the
/// host's first list after the restore is taken, and the CLI shows the
/// sessions put right by it. (How a host's list puts loaded sessions
/// right is proved in process, in the broker's `rules` tests.)
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
    let mut listed = cli_sessions(&app, "p");
    listed.sort();
    let mut want = vec![
        (alice.clone(), "Active".to_string(), None),
        (bob.clone(), "Active".to_string(), None),
    ];
    want.sort();
    assert_eq!(listed, want, "restored as backed up");

    // Meanwhile alice's client closed, and bob logged off at the host.
    beat(&app, "p", "h1", &cred, &[("alice@x", "Disconnected")]).await;
    wait_ended(&app, "p", &bob).await;
    let mut listed = cli_sessions(&app, "p");
    listed.sort();
    let mut want = vec![
        (alice.clone(), "Disconnected".to_string(), None),
        (
            bob.clone(),
            "Active".to_string(),
            Some("notListed".to_string()),
        ),
    ];
    want.sort();
    assert_eq!(listed, want, "put right by the host's list");
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
