//! Enrolling hosts with registration tokens, what a host credential may
//! do, and the host's own session list reconciled with the broker's.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{App, eventually, pool_with_hosts};

async fn token(app: &App, pool: &str, seconds: u64) -> String {
    let v = app
        .ok(
            "POST",
            &format!("/api/v1/hostPools/{pool}/registrationToken"),
            Some(json!({"expiresInSeconds": seconds})),
            200,
        )
        .await;
    v["token"].as_str().unwrap().to_string()
}

async fn register(app: &App, body: Value) -> (u16, Value) {
    app.call_with("POST", "/api/v1/register", Some(body), None)
        .await
}

#[tokio::test]
async fn a_host_credential_acts_only_as_its_host() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 10, 1).await;
    pool_with_hosts(&app, "other", "BreadthFirst", 10, 1).await;
    let t = token(&app, "p", 3600).await;
    let (status, v) = register(
        &app,
        json!({"token": t, "hostPool": "p", "name": "agent1", "address": "10.1.0.1:3389"}),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["sessionHost"]["name"], "agent1");
    let cred = v["hostCredential"].as_str().unwrap().to_string();
    let c = Some(cred.as_str());
    let hb = json!({"cpuPercent": 3.0});
    let own = "/api/v1/hostPools/p/sessionHosts/agent1";
    assert_eq!(
        app.call_with("POST", &format!("{own}/heartbeat"), Some(hb.clone()), c)
            .await
            .0,
        200
    );
    assert_eq!(app.call_with("GET", own, None, c).await.0, 200);
    // Everything else is forbidden.
    let app_connect = app
        .ok(
            "POST",
            "/api/v1/hostPools/p/connect",
            Some(json!({"user": "bob"})),
            200,
        )
        .await;
    let sid = app_connect["sessionId"].as_str().unwrap();
    let forbidden: &[(&str, String, Option<Value>)] = &[
        (
            "POST",
            "/api/v1/hostPools/p/sessionHosts/h1/heartbeat".into(),
            Some(hb.clone()),
        ),
        (
            "POST",
            "/api/v1/hostPools/other/sessionHosts/h1/heartbeat".into(),
            Some(hb.clone()),
        ),
        ("PATCH", own.into(), Some(json!({"allowNewSession": false}))),
        ("DELETE", own.into(), None),
        ("GET", "/api/v1/hostPools/p".into(), None),
        (
            "PATCH",
            "/api/v1/hostPools/p".into(),
            Some(json!({"maxSessionLimit": 1})),
        ),
        ("GET", "/api/v1/hostPools/p/sessionHosts".into(), None),
        (
            "POST",
            "/api/v1/hostPools/p/connect".into(),
            Some(json!({"user": "eve"})),
        ),
        (
            "DELETE",
            format!("/api/v1/hostPools/p/userSessions/{sid}"),
            None,
        ),
        (
            "POST",
            "/api/v1/hostPools/p/registrationToken".into(),
            Some(json!({})),
        ),
        ("GET", "/metrics".into(), None),
    ];
    for (method, path, body) in forbidden {
        let (status, v) = app.call_with(method, path, body.clone(), c).await;
        assert_eq!(status, 403, "{method} {path}: {v}");
        assert_eq!(v["error"]["code"], "Forbidden");
    }
    // Nothing changed: bob's session and the pool are as they were.
    assert_eq!(
        app.ok("GET", "/api/v1/hostPools/p", None, 200).await["maxSessionLimit"],
        10
    );
    assert_eq!(
        app.ok("GET", "/api/v1/hostPools/p/userSessions", None, 200)
            .await["value"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // Re-registering with its own credential replaces the credential (at
    // the same address: only an administrator moves a host, rule E5): the
    // old one stops working.
    let (status, v) = app
        .call_with(
            "POST",
            "/api/v1/register",
            Some(json!({"token": t, "name": "agent1", "address": "10.1.0.1:3389"})),
            c,
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["sessionHost"]["address"], "10.1.0.1:3389");
    let new = v["hostCredential"].as_str().unwrap().to_string();
    assert_eq!(
        app.call_with("POST", &format!("{own}/heartbeat"), Some(hb.clone()), c)
            .await
            .0,
        401
    );
    assert_eq!(
        app.call_with(
            "POST",
            &format!("{own}/heartbeat"),
            Some(hb.clone()),
            Some(&new)
        )
        .await
        .0,
        200
    );
    // The credential survives kill -9.
    let data = app.data_dir.clone();
    app.kill9();
    let app = App::spawn_on(&data);
    assert_eq!(
        app.call_with(
            "POST",
            &format!("{own}/heartbeat"),
            Some(hb.clone()),
            Some(&new)
        )
        .await
        .0,
        200
    );
    // Removing the host revokes its credential.
    app.ok("DELETE", own, None, 204).await;
    assert_eq!(app.call_with("GET", own, None, Some(&new)).await.0, 401);
}

#[tokio::test]
async fn expired_revoked_or_foreign_tokens_register_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 10, 0).await;
    pool_with_hosts(&app, "q", "BreadthFirst", 10, 0).await;
    let short = token(&app, "p", 1).await;
    let revoked = token(&app, "p", 3600).await;
    app.ok("DELETE", "/api/v1/hostPools/p/registrationToken", None, 204)
        .await;
    let (status, v) = register(
        &app,
        json!({"token": revoked, "name": "x1", "address": "10.0.0.1:3389"}),
    )
    .await;
    assert_eq!(
        (status, v["error"]["code"].clone()),
        (401, json!("Unauthorized")),
        "{v}"
    );
    assert!(
        v["error"]["message"].as_str().unwrap().contains("revoked"),
        "{v}"
    );
    // The short token was revoked too; make a fresh one-second token.
    let short2 = token(&app, "p", 1).await;
    // Wait until the broker itself says the token expired, asking with a
    // registration into a pool the token is not for: while the token is
    // valid that is refused (403) before anything is written, so asking
    // registers nothing and uses none of the token.
    let answers = std::cell::RefCell::new(Vec::new());
    let expired = eventually(Duration::from_secs(30), || {
        let (app, short2, answers) = (&app, &short2, &answers);
        async move {
            let (status, v) = register(
                app,
                json!({"token": short2, "hostPool": "q", "name": "x2", "address": "10.0.0.2:3389"}),
            )
            .await;
            let expired = status == 401
                && v["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("expired"));
            if !expired {
                answers.borrow_mut().push((status, v));
            }
            expired
        }
    })
    .await;
    let answers = answers.into_inner();
    assert!(expired, "the one-second token never expired: {answers:?}");
    assert!(
        answers.iter().all(|(status, _)| *status == 403),
        "before it expired, the token was refused only for the other pool: {answers:?}"
    );
    let (_, v) = register(
        &app,
        json!({"token": short2, "name": "x2", "address": "10.0.0.2:3389"}),
    )
    .await;
    assert!(
        v["error"]["message"].as_str().unwrap().contains("expired"),
        "{v}"
    );
    let (status, _) = register(
        &app,
        json!({"token": short, "name": "x3", "address": "10.0.0.3:3389"}),
    )
    .await;
    assert_eq!(status, 401);
    let good = token(&app, "p", 3600).await;
    let (status, v) = register(
        &app,
        json!({"token": good, "hostPool": "q", "name": "x4", "address": "10.0.0.4:3389"}),
    )
    .await;
    assert_eq!(
        (status, v["error"]["code"].clone()),
        (403, json!("Forbidden")),
        "{v}"
    );
    let (status, _) = register(
        &app,
        json!({"token": "dbr_nonsense", "name": "x5", "address": "10.0.0.5:3389"}),
    )
    .await;
    assert_eq!(status, 401);
    for pool in ["p", "q"] {
        let hosts = app
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
    // The CLI makes tokens too.
    let (ok, out, err) = app.cli(&[
        "hostpool",
        "registration-token",
        "--name",
        "p",
        "--expires-in",
        "2h",
        "-o",
        "json",
    ]);
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v["token"].as_str().unwrap().starts_with("dbr_"));
    let (status, _) = register(
        &app,
        json!({"token": v["token"], "name": "x6", "address": "10.0.0.6:3389"}),
    )
    .await;
    assert_eq!(status, 201);
}

#[tokio::test]
async fn heartbeats_reconcile_the_hosts_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "DepthFirst", 10, 2).await;
    let placed = app
        .ok(
            "POST",
            "/api/v1/hostPools/p/connect",
            Some(json!({"user": "alice"})),
            200,
        )
        .await;
    assert_eq!(placed["sessionHost"], "h1");
    let gone = app
        .ok(
            "POST",
            "/api/v1/hostPools/p/connect",
            Some(json!({"user": "bob"})),
            200,
        )
        .await;
    let bob = gone["sessionId"].as_str().unwrap();
    app.ok(
        "PATCH",
        &format!("/api/v1/hostPools/p/userSessions/{bob}"),
        Some(json!({"sessionState": "Active"})),
        200,
    )
    .await;
    // h1 reports alice Active (she was Pending), carol (console logon the
    // broker never placed) Disconnected, and no longer has bob.
    let hb = json!({"sessions": [
        {"user": "ALICE", "state": "Active"},
        {"user": "carol", "state": "Disconnected"},
    ]});
    let h1 = app
        .ok(
            "POST",
            "/api/v1/hostPools/p/sessionHosts/h1/heartbeat",
            Some(hb),
            200,
        )
        .await;
    assert_eq!(h1["sessions"], 2, "{h1}");
    assert_eq!(h1["connectingSessions"], 0);
    let sessions = app
        .ok("GET", "/api/v1/hostPools/p/userSessions", None, 200)
        .await;
    let mut seen: Vec<(String, String)> = sessions["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["userPrincipalName"].as_str().unwrap().to_string(),
                s["sessionState"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("alice".to_string(), "Active".to_string()),
            ("carol".to_string(), "Disconnected".to_string())
        ]
    );
    assert_eq!(h1["refusedSessions"], json!([]));
    // Carol was adopted, unconfirmed (S8): the host's word does not send
    // her anywhere. Her connect is placed by the rules (DepthFirst: h1,
    // which has alice once the adoption is dropped), as a new session.
    let v = app
        .ok(
            "POST",
            "/api/v1/hostPools/p/connect",
            Some(json!({"user": "carol"})),
            200,
        )
        .await;
    assert_eq!(
        (v["sessionHost"].clone(), v["reconnect"].clone()),
        (json!("h1"), json!(false))
    );
    // A heartbeat without `sessions` leaves them alone.
    let h1 = app
        .ok(
            "POST",
            "/api/v1/hostPools/p/sessionHosts/h1/heartbeat",
            Some(json!({"cpuPercent": 1.0})),
            200,
        )
        .await;
    assert_eq!(h1["sessions"], 2);
    // Bad session entries are refused whole.
    let (status, _) = app
        .call(
            "POST",
            "/api/v1/hostPools/p/sessionHosts/h1/heartbeat",
            Some(json!({"sessions": [{"user": "", "state": "Active"}]})),
        )
        .await;
    assert_eq!(status, 400);
    assert_eq!(
        app.ok("GET", "/api/v1/hostPools/p/sessionHosts/h1", None, 200)
            .await["sessions"],
        2
    );
}
