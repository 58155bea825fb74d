//! Rule S5: what was acknowledged survives `kill -9`, and after a restart
//! the broker decides exactly as it would have.

use serde_json::json;

use crate::{App, pool_with_hosts};

/// What was acknowledged before a crash: (user, session id, host).
pub type Placed = Vec<(String, serde_json::Value, serde_json::Value)>;

/// Before the crash: a pool of 10 hosts (limit 50, h3 drained) and 100
/// acknowledged connects. Shared by every store's kill -9 test.
pub async fn acknowledge_before_crash(app: &App) -> Placed {
    pool_with_hosts(app, "p", "BreadthFirst", 50, 10).await;
    app.ok(
        "PATCH",
        "/api/v1/hostPools/p/sessionHosts/h3",
        Some(json!({"allowNewSession": false})),
        200,
    )
    .await;
    let mut placed = Vec::new();
    for i in 0..100 {
        let v = app
            .ok(
                "POST",
                "/api/v1/hostPools/p/connect",
                Some(json!({"user": format!("u{i}")})),
                200,
            )
            .await;
        placed.push((
            format!("u{i}"),
            v["sessionId"].clone(),
            v["sessionHost"].clone(),
        ));
    }
    placed
}

/// After the restart: settings, drain and every session are back, and
/// each user reconnects to the same session on the same host (S1, S5).
pub async fn check_after_crash(app: &App, placed: Placed) {
    let pool = app.ok("GET", "/api/v1/hostPools/p", None, 200).await;
    assert_eq!(pool["maxSessionLimit"], 50);
    let h3 = app
        .ok("GET", "/api/v1/hostPools/p/sessionHosts/h3", None, 200)
        .await;
    assert_eq!(h3["allowNewSession"], false, "drain survives");
    let sessions = app
        .ok("GET", "/api/v1/hostPools/p/userSessions", None, 200)
        .await;
    assert_eq!(sessions["value"].as_array().unwrap().len(), 100);
    for (user, id, host) in placed {
        let v = app
            .ok(
                "POST",
                "/api/v1/hostPools/p/connect",
                Some(json!({"user": user})),
                200,
            )
            .await;
        assert_eq!(v["reconnect"], true, "{v}");
        assert_eq!(v["sessionId"], id);
        assert_eq!(v["sessionHost"], host);
    }
}

#[tokio::test]
async fn acknowledged_connects_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let placed = acknowledge_before_crash(&app).await;
    let data = app.data_dir.clone();
    app.kill9();
    check_after_crash(&App::spawn_on(&data), placed).await;
}

#[tokio::test]
async fn after_a_restart_the_next_placements_are_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 999_999, 12).await;
    for i in 0..30 {
        app.ok(
            "POST",
            "/api/v1/hostPools/p/connect",
            Some(json!({"user": format!("early{i}")})),
            200,
        )
        .await;
    }
    let data = app.data_dir.clone();
    app.kill9();
    // Two copies of the same durable state must decide the same way.
    let copies: Vec<_> = (0..2)
        .map(|n| {
            let to = dir.path().join(format!("copy{n}"));
            std::fs::create_dir_all(&to).unwrap();
            for f in std::fs::read_dir(&data).unwrap() {
                let f = f.unwrap();
                std::fs::copy(f.path(), to.join(f.file_name())).unwrap();
            }
            to
        })
        .collect();
    let mut runs = Vec::new();
    for copy in &copies {
        let app = App::spawn_on(copy);
        let mut hosts = Vec::new();
        for i in 0..40 {
            let v = app
                .ok(
                    "POST",
                    "/api/v1/hostPools/p/connect",
                    Some(json!({"user": format!("late{i}")})),
                    200,
                )
                .await;
            hosts.push(v["sessionHost"].as_str().unwrap().to_string());
        }
        runs.push(hosts);
    }
    assert_eq!(
        runs[0], runs[1],
        "randomized BreadthFirst continues the same sequence after a restart"
    );
    let distinct: std::collections::HashSet<_> = runs[0].iter().collect();
    assert!(
        distinct.len() > 3,
        "and it is still spread over hosts: {:?}",
        runs[0]
    );
}

#[tokio::test]
async fn sigterm_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "DepthFirst", 5, 1).await;
    let pid = app.child.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .arg(&pid)
            .status()
            .unwrap()
            .success()
    );
    let status = app.child.wait().unwrap();
    assert!(status.success(), "clean exit on SIGTERM: {status}");
    let app = App::spawn_on(&app.data_dir.clone());
    app.ok("GET", "/api/v1/hostPools/p/sessionHosts/h1", None, 200)
        .await;
}
