//! Rule S5: what was acknowledged survives `kill -9`, and after a restart
//! the broker decides exactly as it would have.

use serde_json::json;

use crate::{App, acknowledge_before_crash, check_after_crash, pool_with_hosts};

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
