//! Rule S8 against the real binary: a host credential's heartbeat cannot
//! take users nor starve other hosts.
//! Each test makes the attack with a real host credential, shows it is
//! refused (`refusedSessions`, 429, 400), that nothing was taken (users go
//! where the broker's rules send them, limits hold), and that the broker
//! kept serving everyone else.

use serde_json::{Value, json};

use crate::{App, pool_with_hosts};

/// A heartbeat of `host` listing `users` (all Active), with its credential.
async fn beat(app: &App, pool: &str, host: &str, cred: &str, users: &[String]) -> (u16, Value) {
    let sessions: Vec<Value> = users
        .iter()
        .map(|u| json!({"user": u, "state": "Active"}))
        .collect();
    app.call_with(
        "POST",
        &format!("/api/v1/hostPools/{pool}/sessionHosts/{host}/heartbeat"),
        Some(json!({"cpuPercent": 5.0, "sessions": sessions})),
        Some(cred),
    )
    .await
}

async fn connect(app: &App, pool: &str, user: &str) -> (String, bool) {
    let v = app
        .ok(
            "POST",
            &format!("/api/v1/hostPools/{pool}/connect"),
            Some(json!({"user": user})),
            200,
        )
        .await;
    (
        v["sessionHost"].as_str().unwrap().to_string(),
        v["reconnect"].as_bool().unwrap(),
    )
}

async fn host_sessions(app: &App, pool: &str, host: &str) -> u64 {
    app.ok(
        "GET",
        &format!("/api/v1/hostPools/{pool}/sessionHosts/{host}"),
        None,
        200,
    )
    .await["sessions"]
        .as_u64()
        .unwrap()
}

/// `(user, reason)` of every refused entry.
fn refused(v: &Value) -> Vec<(String, String)> {
    v["refusedSessions"]
        .as_array()
        .unwrap_or_else(|| panic!("no refusedSessions in {v}"))
        .iter()
        .map(|r| {
            (
                r["user"].as_str().unwrap().to_string(),
                r["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn users(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}@contoso.com")).collect()
}

#[tokio::test]
async fn s8_a_host_listing_3002_users_in_a_limit_3_pool_adopts_3_and_takes_nobody() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 3, 1).await;
    let cred = crate::enroll(&app, "p", "evil", "10.9.0.1:3389").await;
    let listed = users("victim", 3002);
    let (status, v) = beat(&app, "p", "evil", &cred, &listed).await;
    assert_eq!(status, 200, "{v}");
    let r = refused(&v);
    assert_eq!(r.len(), 2999);
    assert!(r.iter().all(|(_, reason)| reason == "hostFull"), "{r:?}");
    assert_eq!(v["sessions"], 3, "the limit holds");
    // Nobody is sent to evil by its word: an adopted user is placed by the
    // rules (BreadthFirst: h1, the less loaded), as a new session.
    assert_eq!(connect(&app, "p", &listed[0]).await, ("h1".into(), false));
    // Other users are served, and the limit still holds everywhere.
    assert!(
        !connect(&app, "p", "bob@contoso.com").await.1,
        "a new session"
    );
    assert!(host_sessions(&app, "p", "evil").await <= 3);
    assert!(host_sessions(&app, "p", "h1").await <= 3);
    let metrics = app.text("/metrics").await;
    assert!(
        metrics.contains("deskbroker_heartbeat_refused_sessions_total{reason=\"hostFull\"} 2999"),
        "{metrics}"
    );
}

#[tokio::test]
async fn s8_a_host_cannot_take_a_user_who_has_a_session_on_another_host() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "DepthFirst", 10, 1).await;
    let cred = crate::enroll(&app, "p", "evil", "10.9.0.1:3389").await;
    let (alice_host, _) = connect(&app, "p", "alice").await;
    assert_eq!(alice_host, "h1");
    // evil (B) lists alice, whose session is on h1 (A), in another case.
    let (status, v) = beat(&app, "p", "evil", &cred, &["ALICE".to_string()]).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        refused(&v),
        [("ALICE".to_string(), "sessionElsewhere".to_string())]
    );
    assert_eq!(v["sessions"], 0);
    // Alice still has one session (S6), on h1, and goes back to it.
    assert_eq!(connect(&app, "p", "alice").await, ("h1".into(), true));
    let sessions = app
        .ok("GET", "/api/v1/hostPools/p/userSessions", None, 200)
        .await;
    assert_eq!(sessions["value"].as_array().unwrap().len(), 1, "{sessions}");
    // Others are served.
    assert!(!connect(&app, "p", "bob").await.1, "a new session");
}

#[tokio::test]
async fn s8_a_user_who_never_logged_on_is_not_sent_to_the_host_that_lists_them() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 10, 1).await;
    let cred = crate::enroll(&app, "p", "evil", "10.9.0.1:3389").await;
    // The administrator drains evil; it lists carol again and again.
    app.ok(
        "PATCH",
        "/api/v1/hostPools/p/sessionHosts/evil",
        Some(json!({"allowNewSession": false})),
        200,
    )
    .await;
    for _ in 0..3 {
        let (status, v) = beat(&app, "p", "evil", &cred, &["carol".to_string()]).await;
        assert_eq!(status, 200, "{v}");
        // Adopted (she has no session elsewhere), but unconfirmed.
        assert_eq!(refused(&v), []);
    }
    // Her connect is not a reconnect to evil: the rules place her on h1.
    assert_eq!(connect(&app, "p", "carol").await, ("h1".into(), false));
    assert_eq!(host_sessions(&app, "p", "evil").await, 0);
    // From now on evil's word about her is refused.
    let (_, v) = beat(&app, "p", "evil", &cred, &["carol".to_string()]).await;
    assert_eq!(
        refused(&v),
        [("carol".to_string(), "sessionElsewhere".to_string())]
    );
    assert_eq!(connect(&app, "p", "carol").await, ("h1".into(), true));
}

#[tokio::test]
async fn s8_mallorys_desktop_cannot_take_alice_in_a_persistent_pool() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    app.ok(
        "PUT",
        "/api/v1/hostPools/desks",
        Some(
            json!({"hostPoolType": "Personal", "loadBalancerType": "Persistent",
                    "personalDesktopAssignmentType": "Direct"}),
        ),
        201,
    )
    .await;
    let _alice_cred = crate::enroll(&app, "desks", "alice-pc", "10.9.0.1:3389").await;
    let mallory_cred = crate::enroll(&app, "desks", "mallory-pc", "10.9.0.2:3389").await;
    for (host, owner) in [("alice-pc", "alice"), ("mallory-pc", "mallory")] {
        app.ok(
            "PATCH",
            &format!("/api/v1/hostPools/desks/sessionHosts/{host}"),
            Some(json!({"assignedUser": owner})),
            200,
        )
        .await;
    }
    let (status, v) = beat(
        &app,
        "desks",
        "mallory-pc",
        &mallory_cred,
        &["alice".to_string(), "mallory".to_string()],
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(refused(&v), [("alice".to_string(), "notOwner".to_string())]);
    // Alice goes to her own desktop; mallory's is still mallory's.
    assert_eq!(
        connect(&app, "desks", "alice").await,
        ("alice-pc".into(), false)
    );
    assert_eq!(connect(&app, "desks", "mallory").await.0, "mallory-pc");
}

#[tokio::test]
async fn s8_a_list_longer_than_the_bound_is_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 999_999, 0).await;
    let cred = crate::enroll(&app, "p", "evil", "10.9.0.1:3389").await;
    let (status, v) = beat(&app, "p", "evil", &cred, &users("u", 4097)).await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (400, Some("InvalidParameter")),
        "{v}"
    );
    assert_eq!(host_sessions(&app, "p", "evil").await, 0);
    let (status, v) = beat(&app, "p", "evil", &cred, &users("u", 4096)).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["sessions"], 4096);
}

#[tokio::test]
async fn s8_a_host_beyond_its_heartbeat_budget_is_told_to_retry_and_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 10, 1).await;
    let cred = crate::enroll(&app, "p", "evil", "10.9.0.1:3389").await;
    let other = crate::enroll(&app, "p", "good", "10.9.0.2:3389").await;
    let url = format!("{}/api/v1/hostPools/p/sessionHosts/evil/heartbeat", app.url);
    // The budget is 10 at once, then one a second: 100 back to back must
    // meet it, however slow this machine is.
    let mut throttled = None;
    for _ in 0..100 {
        let resp = app
            .http
            .post(&url)
            .bearer_auth(&cred)
            .json(&json!({"cpuPercent": 1.0}))
            .send()
            .await
            .unwrap();
        if resp.status().as_u16() == 429 {
            throttled = Some(resp);
            break;
        }
        assert_eq!(resp.status().as_u16(), 200);
    }
    let resp = throttled.expect("a host is held to its heartbeat budget");
    let retry: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry >= 1);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "TooManyRequests", "{body}");
    // Another host's heartbeat and users' connects are served meanwhile.
    let (status, _) = beat(&app, "p", "good", &other, &[]).await;
    assert_eq!(status, 200);
    assert!(!connect(&app, "p", "bob").await.1, "a new session");
    let metrics = app.text("/metrics").await;
    assert!(
        metrics.contains("deskbroker_heartbeats_throttled_total"),
        "{metrics}"
    );
}
