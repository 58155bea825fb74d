//! Rule S8: a host credential's heartbeat cannot take users nor starve
//! other hosts. Each test makes the attack with a real host credential,
//! shows it refused (`refusedSessions`, 429, 400), that nothing was taken
//! (users go where the broker's rules send them, limits hold), and that
//! the broker kept serving everyone else.

use broker::testkit::Kit;
use serde_json::{Value, json};

/// A heartbeat of `host` listing `users` (all Active), with its
/// credential.
async fn beat(kit: &Kit, pool: &str, host: &str, cred: &str, users: &[String]) -> (u16, Value) {
    let sessions: Vec<Value> = users
        .iter()
        .map(|u| json!({"user": u, "state": "Active"}))
        .collect();
    kit.heartbeat(
        pool,
        host,
        cred,
        json!({"cpuPercent": 5.0, "sessions": sessions}),
    )
    .await
}

/// Where `user` is placed in `pool`, and whether it is a reconnect.
async fn connect(kit: &Kit, pool: &str, user: &str) -> (String, bool) {
    let v = kit.connect(pool, user).await;
    (
        v["sessionHost"].as_str().expect("a host").to_string(),
        v["reconnect"].as_bool().expect("reconnect"),
    )
}

async fn host_sessions(kit: &Kit, pool: &str, host: &str) -> u64 {
    kit.host(pool, host).await["sessions"]
        .as_u64()
        .expect("sessions")
}

/// `(user, reason)` of every refused entry.
fn refused(v: &Value) -> Vec<(String, String)> {
    v["refusedSessions"]
        .as_array()
        .unwrap_or_else(|| panic!("no refusedSessions in {v}"))
        .iter()
        .map(|r| {
            (
                r["user"].as_str().unwrap_or("").to_string(),
                r["reason"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn users(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}@contoso.com")).collect()
}

/// The value of the metric line starting with `series` (0 when absent).
/// The metrics are the process's: compare before and after.
async fn metric(kit: &Kit, series: &str) -> f64 {
    kit.text("/metrics")
        .await
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(start_paused = true)]
async fn s8_a_host_listing_3002_users_in_a_limit_3_pool_adopts_3_and_takes_nobody() {
    let kit = Kit::open().await;
    kit.pool_with_hosts("p", "BreadthFirst", 3, 1).await;
    let cred = kit.register_host("p", "evil", "10.9.0.1:3389").await;
    let series = "deskbroker_heartbeat_refused_sessions_total{reason=\"hostFull\"}";
    let before = metric(&kit, series).await;
    let listed = users("victim", 3002);
    let (status, v) = beat(&kit, "p", "evil", &cred, &listed).await;
    assert_eq!(status, 200, "{v}");
    let r = refused(&v);
    assert_eq!(r.len(), 2999);
    assert!(r.iter().all(|(_, reason)| reason == "hostFull"), "{r:?}");
    assert_eq!(v["sessions"], 3, "the limit holds");
    // Nobody is sent to evil by its word: an adopted user is placed by the
    // rules (BreadthFirst: h1, the less loaded), as a new session.
    assert_eq!(connect(&kit, "p", &listed[0]).await, ("h1".into(), false));
    // Other users are served, and the limit still holds everywhere.
    assert!(
        !connect(&kit, "p", "bob@contoso.com").await.1,
        "a new session"
    );
    assert!(host_sessions(&kit, "p", "evil").await <= 3);
    assert!(host_sessions(&kit, "p", "h1").await <= 3);
    assert_eq!(metric(&kit, series).await - before, 2999.0);
}

#[tokio::test(start_paused = true)]
async fn s8_a_host_cannot_take_a_user_who_has_a_session_on_another_host() {
    let kit = Kit::open().await;
    kit.pool_with_hosts("p", "DepthFirst", 10, 1).await;
    let cred = kit.register_host("p", "evil", "10.9.0.1:3389").await;
    let (alice_host, _) = connect(&kit, "p", "alice").await;
    assert_eq!(alice_host, "h1");
    // evil lists alice, whose session is on h1, in another case.
    let (status, v) = beat(&kit, "p", "evil", &cred, &["ALICE".to_string()]).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        refused(&v),
        [("ALICE".to_string(), "sessionElsewhere".to_string())]
    );
    assert_eq!(v["sessions"], 0);
    // Alice still has one session (S6), on h1, and goes back to it.
    assert_eq!(connect(&kit, "p", "alice").await, ("h1".into(), true));
    assert_eq!(kit.sessions("p").await.len(), 1);
    // Others are served.
    assert!(!connect(&kit, "p", "bob").await.1, "a new session");
}

#[tokio::test(start_paused = true)]
async fn s8_a_user_who_never_logged_on_is_not_sent_to_the_host_that_lists_them() {
    let kit = Kit::open().await;
    kit.pool_with_hosts("p", "BreadthFirst", 10, 1).await;
    let cred = kit.register_host("p", "evil", "10.9.0.1:3389").await;
    // The administrator drains evil; it lists carol again and again.
    kit.ok(
        "PATCH",
        "/api/v1/hostPools/p/sessionHosts/evil",
        Some(json!({"allowNewSession": false})),
        200,
    )
    .await;
    for _ in 0..3 {
        let (status, v) = beat(&kit, "p", "evil", &cred, &["carol".to_string()]).await;
        assert_eq!(status, 200, "{v}");
        // Adopted (she has no session elsewhere), but unconfirmed.
        assert_eq!(refused(&v), []);
    }
    // Her connect is not a reconnect to evil: the rules place her on h1.
    assert_eq!(connect(&kit, "p", "carol").await, ("h1".into(), false));
    assert_eq!(host_sessions(&kit, "p", "evil").await, 0);
    // From now on evil's word about her is refused.
    let (_, v) = beat(&kit, "p", "evil", &cred, &["carol".to_string()]).await;
    assert_eq!(
        refused(&v),
        [("carol".to_string(), "sessionElsewhere".to_string())]
    );
    assert_eq!(connect(&kit, "p", "carol").await, ("h1".into(), true));
}

#[tokio::test(start_paused = true)]
async fn s8_mallorys_desktop_cannot_take_alice_in_a_persistent_pool() {
    let kit = Kit::open().await;
    kit.create_pool(
        "desks",
        json!({"hostPoolType": "Personal", "loadBalancerType": "Persistent",
               "personalDesktopAssignmentType": "Direct"}),
    )
    .await;
    kit.register_host("desks", "alice-pc", "10.9.0.1:3389")
        .await;
    let mallory_cred = kit
        .register_host("desks", "mallory-pc", "10.9.0.2:3389")
        .await;
    for (host, owner) in [("alice-pc", "alice"), ("mallory-pc", "mallory")] {
        kit.ok(
            "PATCH",
            &format!("/api/v1/hostPools/desks/sessionHosts/{host}"),
            Some(json!({"assignedUser": owner})),
            200,
        )
        .await;
    }
    let (status, v) = beat(
        &kit,
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
        connect(&kit, "desks", "alice").await,
        ("alice-pc".into(), false)
    );
    assert_eq!(connect(&kit, "desks", "mallory").await.0, "mallory-pc");
}

#[tokio::test(start_paused = true)]
async fn s8_a_list_longer_than_the_bound_is_refused_whole() {
    let kit = Kit::open().await;
    kit.pool_with_hosts("p", "BreadthFirst", 999_999, 0).await;
    let cred = kit.register_host("p", "evil", "10.9.0.1:3389").await;
    let (status, v) = beat(&kit, "p", "evil", &cred, &users("u", 4097)).await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (400, Some("InvalidParameter")),
        "{v}"
    );
    assert_eq!(host_sessions(&kit, "p", "evil").await, 0);
    let (status, v) = beat(&kit, "p", "evil", &cred, &users("u", 4096)).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["sessions"], 4096);
}

#[tokio::test(start_paused = true)]
async fn s8_a_host_beyond_its_heartbeat_budget_is_told_to_retry_and_others_are_served() {
    let kit = Kit::open().await;
    kit.pool_with_hosts("p", "BreadthFirst", 10, 1).await;
    let cred = kit.register_host("p", "evil", "10.9.0.1:3389").await;
    let other = kit.register_host("p", "good", "10.9.0.2:3389").await;
    let path = "/api/v1/hostPools/p/sessionHosts/evil/heartbeat";
    // The budget is 10 at once, then one a second: 100 back to back must
    // meet it, however slow this machine is.
    let mut throttled = None;
    for _ in 0..100 {
        let (status, headers, v) = kit
            .call_with_headers(Some(&cred), "POST", path, Some(json!({"cpuPercent": 1.0})))
            .await;
        if status == 429 {
            throttled = Some((headers, v));
            break;
        }
        assert_eq!(status, 200, "{v}");
    }
    let (headers, body) = throttled.expect("a host is held to its heartbeat budget");
    let retry: u64 = headers["retry-after"]
        .to_str()
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("a Retry-After in seconds");
    assert!(retry >= 1);
    assert_eq!(body["error"]["code"], "TooManyRequests", "{body}");
    // Another host's heartbeat and users' connects are served meanwhile.
    let (status, _) = beat(&kit, "p", "good", &other, &[]).await;
    assert_eq!(status, 200);
    assert!(!connect(&kit, "p", "bob").await.1, "a new session");
    assert!(
        kit.text("/metrics")
            .await
            .contains("deskbroker_heartbeats_throttled_total"),
        "the throttled heartbeats are counted"
    );
}
