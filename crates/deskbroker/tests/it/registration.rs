//! Enrolling hosts with registration tokens (the API's and the CLI's),
//! what a host credential may do, and the host's own session list
//! reconciled with the broker's. Which tokens register nothing (E3) is
//! proved in process, in the broker's `rules` tests.

use serde_json::{Value, json};

use crate::{App, pool_with_hosts};

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

/// `deskbroker hostpool registration-token --expires-in 2h` makes a token
/// of two hours that registers a host. (Rule E3 itself, that an expired, revoked or
/// foreign token registers nothing, is proved in process, in the broker's
/// `rules` tests.)
#[tokio::test]
async fn the_cli_makes_a_registration_token_valid_for_the_time_asked() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 10, 0).await;
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
    assert!(v["token"].as_str().unwrap().starts_with("dbr_"), "{v}");
    // The token lives two hours (not the default day): its expiry is
    // within an hour of two hours from now.
    let expires = v["expirationTime"]
        .as_str()
        .and_then(|t| humantime::parse_rfc3339(t).ok())
        .unwrap_or_else(|| panic!("an RFC 3339 expirationTime: {v}"));
    let life = expires
        .duration_since(std::time::SystemTime::now())
        .unwrap_or_default();
    assert!(
        (3600..=3 * 3600).contains(&life.as_secs()),
        "expires in {life:?}: {v}"
    );
    let (status, r) = register(
        &app,
        json!({"token": v["token"], "name": "x6", "address": "10.0.0.6:3389"}),
    )
    .await;
    assert_eq!(status, 201, "{r}");
    assert_eq!(r["sessionHost"]["name"], "x6", "{r}");
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
