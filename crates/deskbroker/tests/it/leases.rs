//! The leader's lease between replicas (rule L1), in the cases where the
//! leader lives on but can no longer decide: its store fails while its
//! lease could still be renewed, it is cut off from the database while it
//! still answers, or it stops cleanly. One replica decides at a time, by
//! the lease: never two answers that disagree about a user's session.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::pg::{
    Outage, check_invariants, connect, db_client, leader_index, replicas_through, scratch, signal,
    upstream_of,
};
use crate::{App, PATIENCE, eventually, pool_with_hosts};

/// A new user placed through `app`, retried while no replica can decide.
async fn placed_eventually(app: &App, user: &str) -> bool {
    eventually(PATIENCE, || async {
        let (status, _) = app
            .call(
                "POST",
                "/api/v1/hostPools/p/connect",
                Some(json!({"user": user})),
            )
            .await;
        status == 200
    })
    .await
}

/// A leader whose store fails while the database is up (here a write the
/// database refuses) must not keep its lease alive over its other
/// connection: it lets the lease run out, another replica takes over, and
/// new users are placed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_whose_store_fails_lets_its_lease_run_out() {
    let db = scratch("lease_store_fails").await;
    let dir = tempfile::tempdir().unwrap();
    let apps = replicas_through(&dir, db.url(), &[], 2, &["--leader-lease", "4"]);
    let refs: Vec<&App> = apps.iter().collect();
    let old = leader_index(&refs).await;
    let (leader, follower) = (&apps[old], &apps[1 - old]);
    let first_epoch = leader.health().await.and_then(|h| h.epoch).expect("epoch");
    pool_with_hosts(follower, "p", "BreadthFirst", 10, 2).await;
    let u0 = connect(follower, "u0").await;

    // The database refuses every new session: the leader's writer fails,
    // while its lease's connection works on.
    let client = db_client(&db).await;
    client
        .batch_execute("ALTER TABLE sessions ADD CONSTRAINT refused CHECK (false) NOT VALID")
        .await
        .expect("refuse new sessions");
    let (status, v) = leader
        .call(
            "POST",
            "/api/v1/hostPools/p/connect",
            Some(json!({"user": "refused"})),
        )
        .await;
    assert_eq!(status, 503, "{v}");
    let failed = eventually(PATIENCE, || async {
        leader
            .health()
            .await
            .is_some_and(|h| h.error.is_some_and(|e| e.contains("without its store")))
    })
    .await;
    // (Or its lease ran out already: then it says so.)
    assert!(
        failed || !leader.leads().await,
        "the leader does not say it lost its store: {:?}",
        leader.health().await
    );
    client
        .batch_execute("ALTER TABLE sessions DROP CONSTRAINT refused")
        .await
        .expect("accept sessions again");

    // Its lease runs out and a new leadership (either replica's) places.
    assert!(
        placed_eventually(follower, "after").await,
        "no replica places again after the leader's store failed: {:?} / {:?}",
        leader.health().await,
        follower.health().await
    );
    let now = leader_index(&refs).await;
    let health = apps[now].health().await.expect("health");
    assert!(health.epoch.expect("epoch") > first_epoch, "{health:?}");
    let again = connect(leader, "u0").await;
    assert_eq!(again["sessionHost"], u0["sessionHost"], "{again}");
    check_invariants(&client, "p", 10).await;
}

/// One answer of the cut-off leader to a reconnect.
struct Answer {
    sent: Instant,
    status: u16,
    host: Option<String>,
    /// The error's code, for the record.
    code: Option<String>,
}

/// A leader cut off from the database (its connections closed, so the
/// lock frees at once) still believes it leads until its lease runs out,
/// and answers reconnects from memory meanwhile. The replica that takes
/// over must not decide before then: once it has logged a user off and
/// placed him elsewhere, the old leader never again sends him to his old
/// host (rule S1 across replicas).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cut_off_leader_answers_nothing_once_its_successor_decides() {
    let db = scratch("lease_cut_off").await;
    let relays = [
        Outage::start(upstream_of(db.url())).await,
        Outage::start(upstream_of(db.url())).await,
    ];
    let dir = tempfile::tempdir().unwrap();
    let apps = replicas_through(
        &dir,
        db.url(),
        &relays.iter().collect::<Vec<_>>(),
        2,
        &["--leader-lease", "6"],
    );
    let refs: Vec<&App> = apps.iter().collect();
    let old = leader_index(&refs).await;
    let (leader, follower) = (&apps[old], &apps[1 - old]);
    pool_with_hosts(follower, "p", "BreadthFirst", 10, 2).await;
    let placed = connect(follower, "u0").await;
    let first_host = placed["sessionHost"].as_str().expect("host").to_string();
    let session = placed["sessionId"].as_str().expect("id").to_string();

    relays[old].cut();
    let cut = Instant::now();
    // Once it knows its store is gone (a reconnect sent before that would
    // try to write, fail, and count the session as unsaved).
    let knows = eventually(PATIENCE, || async {
        leader
            .health()
            .await
            .is_some_and(|h| h.error.is_some_and(|e| e.contains("without its store")))
    })
    .await;
    assert!(
        knows,
        "the cut-off leader never noticed: {:?}",
        leader.health().await
    );
    // The old leader is asked for u0 again and again.
    let answers = Arc::new(Mutex::new(Vec::<Answer>::new()));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poller = tokio::spawn({
        let (url, answers, done) = (leader.url.clone(), answers.clone(), done.clone());
        async move {
            let http = reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("client");
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                let sent = Instant::now();
                let answer = http
                    .post(format!("{url}/api/v1/hostPools/p/connect"))
                    .bearer_auth(crate::TOKEN)
                    .json(&json!({"user": "u0"}))
                    .send()
                    .await;
                let (status, v) = match answer {
                    Ok(r) => (r.status().as_u16(), r.json().await.unwrap_or_default()),
                    Err(_) => (0, serde_json::Value::Null),
                };
                answers.lock().unwrap().push(Answer {
                    sent,
                    status,
                    host: v["sessionHost"].as_str().map(str::to_string),
                    code: v["error"]["message"].as_str().map(str::to_string),
                });
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });

    // Through the follower, once it decides: u0 logged off, his host
    // drained, and u0 placed on the other host.
    let logged_off = eventually(PATIENCE * 2, || async {
        let (status, _) = follower
            .call(
                "DELETE",
                &format!("/api/v1/hostPools/p/userSessions/{session}"),
                None,
            )
            .await;
        status == 200 || status == 204
    })
    .await;
    assert!(logged_off, "the follower never took over");
    let decided = Instant::now();
    follower
        .ok(
            "PATCH",
            &format!("/api/v1/hostPools/p/sessionHosts/{first_host}"),
            Some(json!({"allowNewSession": false})),
            200,
        )
        .await;
    let moved = connect(follower, "u0").await;
    assert_ne!(moved["sessionHost"].as_str(), Some(first_host.as_str()));
    // The old leader has had its chance to answer from a stale memory.
    let more = eventually(PATIENCE, || async {
        answers
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.sent > decided)
            .count()
            >= 3
    })
    .await;
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    poller.await.expect("poller");
    assert!(more, "the old leader was not asked after the takeover");

    let answers = std::mem::take(&mut *answers.lock().unwrap());
    let last_from_memory = answers
        .iter()
        .filter(|a| a.status == 200 && a.sent < decided)
        .map(|a| a.sent - cut)
        .max();
    eprintln!(
        "the cut-off leader answered from memory until {last_from_memory:?} after the cut; \
         its successor decided {:?} after the cut; refusals: {:?}",
        decided - cut,
        answers
            .iter()
            .filter_map(|a| a.code.as_deref())
            .collect::<std::collections::BTreeSet<_>>()
    );
    let from_memory = answers
        .iter()
        .filter(|a| a.status == 200 && a.sent < decided)
        .count();
    assert!(
        from_memory > 0,
        "the cut-off leader never answered a reconnect from memory: this test checks nothing"
    );
    let stale: Vec<_> = answers
        .iter()
        .filter(|a| a.sent > decided && a.host.as_deref() == Some(first_host.as_str()))
        .map(|a| format!("{:?} after the cut: {}", a.sent - cut, a.status))
        .collect();
    assert!(
        stale.is_empty(),
        "the old leader sent u0 to {first_host} after the new leader logged him off: {stale:?}"
    );
    relays[old].restore();
    let client = db_client(&db).await;
    check_invariants(&client, "p", 10).await;
}

/// A leader stopped cleanly (SIGTERM: a restart, an upgrade) gives its
/// lease up: the next leader decides at once instead of waiting for it to
/// run out, with the longest lease there is.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_that_stops_cleanly_hands_over_without_waiting_out_its_lease() {
    let db = scratch("lease_clean_stop").await;
    let dir = tempfile::tempdir().unwrap();
    let mut apps = replicas_through(&dir, db.url(), &[], 2, &["--leader-lease", "600"]);
    let refs: Vec<&App> = apps.iter().collect();
    let old = leader_index(&refs).await;
    pool_with_hosts(&apps[old], "p", "BreadthFirst", 10, 2).await;
    let u0 = connect(&apps[old], "u0").await;

    let mut leader = apps.remove(old);
    signal(&leader, nix::sys::signal::Signal::SIGTERM);
    let status = leader.child.wait().expect("the leader stops");
    assert!(status.success(), "{status:?}");
    let follower = &apps[0];
    assert!(
        placed_eventually(follower, "after").await,
        "the follower waited for the stopped leader's lease: {:?}",
        follower.health().await
    );
    let again = connect(follower, "u0").await;
    assert_eq!(again["sessionHost"], u0["sessionHost"], "{again}");
}
