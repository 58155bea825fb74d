//! The rolling upgrade of docs/operations.md, done on two replicas of one
//! PostgreSQL database while clients connect through both: the follower
//! first (stop it cleanly, start it again, wait for its `/healthz`), then
//! the leader. Nothing acknowledged is lost, nobody gets two sessions, no
//! host goes over its limit, and no client request fails for good: clients
//! only retry what the contract says is retryable.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use api::ErrorCode;
use serde_json::{Value, json};

use crate::pg::{check_invariants, db_client, leader_index, scratch, signal};
use crate::{App, PATIENCE, eventually, pool_with_hosts};

/// Clients, half of them sent to each replica first.
const CLIENTS: usize = 4;
/// Hosts of the pool, and the session limit of each: room for every
/// connect the clients make, so that a refusal is never "the pool is full".
const HOSTS: usize = 10;
const LIMIT: usize = 2000;
/// Connects acknowledged through each replica in a step of the upgrade
/// before the next one starts: the load goes on throughout.
const PER_STEP: usize = 10;
/// The pause before retrying a retryable answer (a backoff, not a wait for
/// something to happen).
const BACKOFF: Duration = Duration::from_millis(25);

/// The steps of the upgrade, in order.
const STEPS: [&str; 5] = [
    "before",
    "follower restarting",
    "follower upgraded",
    "leader restarting",
    "after",
];

/// What the clients saw, per step of the upgrade.
#[derive(Default)]
struct Seen {
    /// The step the upgrade is at (an index into [`STEPS`]).
    step: AtomicUsize,
    /// Acknowledged connects, per step and per replica that answered.
    acked: [[AtomicUsize; 2]; 5],
    /// 503 `LeaderUnavailable` or `StoreUnavailable`, asked again.
    retried: [AtomicUsize; 5],
    /// No answer (refused, reset, timed out): asked again of the other
    /// replica, as a load balancer does.
    failed_over: [AtomicUsize; 5],
    /// When each connect was acknowledged.
    ack_times: Mutex<Vec<Instant>>,
}

impl Seen {
    fn step(&self) -> usize {
        self.step.load(Ordering::SeqCst)
    }

    fn acked_in(&self, step: usize, replica: usize) -> usize {
        self.acked[step][replica].load(Ordering::SeqCst)
    }
}

/// What one client had acknowledged, and what went wrong for it.
#[derive(Default)]
struct ClientLog {
    /// user → (session id, host) as the last 200 said.
    placed: HashMap<String, (String, String)>,
    reconnects: usize,
    /// Requests that failed for good, after their retries.
    failures: Vec<String>,
    /// Reconnects answered with another session than the user's (rule S1).
    moved: Vec<String>,
}

/// `POST …/connect` for `user`, first through `urls[home]`, retrying what
/// the contract says is retryable until `PATIENCE` has passed: 503
/// `LeaderUnavailable` or `StoreUnavailable` (through the same replica),
/// and no answer at all (through the other). A connect asked twice is
/// harmless (rule S1: the second finds the session of the first), so a
/// request whose answer was lost may be asked again. Answers the 200's
/// body and the replica that gave it, or why it failed for good.
async fn connect_retrying(
    http: &reqwest::Client,
    urls: &[String; 2],
    home: usize,
    user: &str,
    seen: &Seen,
) -> Result<(Value, usize), String> {
    let deadline = Instant::now() + PATIENCE;
    let mut target = home;
    loop {
        let answer = http
            .post(format!("{}/api/v1/hostPools/p/connect", urls[target]))
            .bearer_auth(crate::TOKEN)
            .json(&json!({ "user": user }))
            .send()
            .await;
        let why = match answer {
            Err(e) => {
                seen.failed_over[seen.step()].fetch_add(1, Ordering::SeqCst);
                target = 1 - target;
                format!("no answer from {}: {e}", urls[1 - target])
            }
            Ok(r) => {
                let status = r.status().as_u16();
                let v: Value = r.json().await.unwrap_or(Value::Null);
                let code = v["error"]["code"].as_str().unwrap_or_default().to_string();
                let retryable = status == 503
                    && [ErrorCode::LeaderUnavailable, ErrorCode::StoreUnavailable]
                        .iter()
                        .any(|c| c.as_str() == code);
                if status == 200 {
                    return Ok((v, target));
                }
                if !retryable {
                    return Err(format!("{user}: {status} {v}"));
                }
                seen.retried[seen.step()].fetch_add(1, Ordering::SeqCst);
                format!("{status} {v}")
            }
        };
        if Instant::now() >= deadline {
            return Err(format!("{user}: still retried after {PATIENCE:?}: {why}"));
        }
        tokio::time::sleep(BACKOFF).await;
    }
}

/// One client: new users, and every third connect a user it placed before
/// (a reconnect, which must find the same session), until `stop`.
async fn client(
    c: usize,
    urls: Arc<[String; 2]>,
    seen: Arc<Seen>,
    stop: Arc<AtomicBool>,
) -> ClientLog {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    let mut log = ClientLog::default();
    let mut users: Vec<String> = Vec::new();
    let mut n = 0usize;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let again = n.is_multiple_of(3) && !users.is_empty();
        let user = if again {
            users[(n * 7) % users.len()].clone()
        } else {
            format!("c{c}-u{n}")
        };
        match connect_retrying(&http, &urls, c % 2, &user, &seen).await {
            Err(why) => log.failures.push(why),
            Ok((v, replica)) => {
                let step = seen.step();
                seen.acked[step][replica].fetch_add(1, Ordering::SeqCst);
                seen.ack_times.lock().unwrap().push(Instant::now());
                let (Some(id), Some(host)) = (v["sessionId"].as_str(), v["sessionHost"].as_str())
                else {
                    log.failures
                        .push(format!("{user}: a 200 without a session: {v}"));
                    continue;
                };
                let now = (id.to_string(), host.to_string());
                if again {
                    log.reconnects += 1;
                    let before = &log.placed[&user];
                    if *before != now || v["reconnect"] != true {
                        log.moved.push(format!("{user}: {before:?} then {v}"));
                    }
                } else {
                    users.push(user.clone());
                    log.placed.insert(user, now);
                }
            }
        }
    }
    log
}

/// Whether `/healthz` answers 200: what an operator (or a load balancer)
/// checks before the next step.
async fn healthy(app: &App) -> bool {
    app.http
        .get(format!("{}/healthz", app.url))
        .send()
        .await
        .is_ok_and(|r| r.status() == 200)
}

/// Stops the replica in `slot` cleanly (SIGTERM to its own pid, as the
/// service manager does), starts it again on the same data dir, address
/// and arguments, and waits until its `/healthz` answers 200.
///
/// The "new binary" is this same build: what is tested is the procedure
/// (the order, a clean stop, the health check between steps), not a
/// schema change; migrations of a store under a new binary are tested in
/// schema_versions.rs.
async fn upgrade(slot: &mut Option<App>, args: &[String]) {
    let mut old = slot.take().expect("a running replica");
    let (data_dir, listen) = (old.data_dir.clone(), old.listen_addr());
    signal(&old, nix::sys::signal::Signal::SIGTERM);
    let child = &mut old.child;
    let status = crate::eventually(PATIENCE, || {
        std::future::ready(child.try_wait().expect("wait for the replica"))
    })
    .await
    .unwrap_or_else(|| panic!("{} did not stop within {PATIENCE:?} of SIGTERM", old.url));
    assert!(status.success(), "{} stopped with {status:?}", old.url);
    drop(old);
    let args = args.to_vec();
    let app = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        App::spawn_with(&data_dir, &listen, &args).0
    })
    .await
    .expect("start the replica again");
    assert!(
        eventually(PATIENCE, || healthy(&app)).await,
        "{} is not healthy after its restart: {:?}",
        app.url,
        app.health().await
    );
    *slot = Some(app);
}

/// Whether `app`'s `/healthz` says it follows the leader at `leader_url`.
async fn follows(app: &App, leader_url: &str) -> bool {
    app.health()
        .await
        .is_some_and(|h| h.role == "follower" && h.leader.as_deref() == Some(leader_url))
}

/// Waits until the clients had `PER_STEP` connects acknowledged through
/// each replica in `step`.
async fn served_through_both(seen: &Seen, step: usize) {
    let served = eventually(PATIENCE, || async {
        (0..2).all(|r| seen.acked_in(step, r) >= PER_STEP)
    })
    .await;
    assert!(
        served,
        "{}: acknowledged through each replica: {:?}",
        STEPS[step],
        (0..2).map(|r| seen.acked_in(step, r)).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_upgraded_one_at_a_time_under_load_lose_nothing() {
    let db = scratch("rolling_upgrade").await;
    let dir = tempfile::tempdir().unwrap();
    let args = vec!["--database-url".to_string(), db.url().to_string()];
    let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut apps: [Option<App>; 2] = [0, 1].map(|i| {
        Some(App::spawn_with(&dir.path().join(format!("r{i}")), "127.0.0.1:0", &arg_refs).0)
    });
    let refs: Vec<&App> = apps.iter().flatten().collect();
    let leader = leader_index(&refs).await;
    let follower = 1 - leader;
    let first_epoch = refs[leader]
        .health()
        .await
        .and_then(|h| h.epoch)
        .expect("the leader's epoch");
    pool_with_hosts(refs[follower], "p", "BreadthFirst", LIMIT as u32, HOSTS).await;
    // Sessions nobody confirms (these hosts have no agent) stay Pending
    // for the whole test instead of ending after the default two minutes.
    refs[follower]
        .ok(
            "PATCH",
            "/api/v1/hostPools/p",
            Some(json!({"pendingTimeoutSeconds": 86400})),
            200,
        )
        .await;

    // Each replica keeps its address across its restart, as behind a load
    // balancer: the clients keep these URLs throughout.
    let urls = Arc::new([0, 1].map(|i| refs[i].url.clone()));
    let seen = Arc::new(Seen::default());
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| tokio::spawn(client(c, urls.clone(), seen.clone(), stop.clone())))
        .collect();
    served_through_both(&seen, 0).await;

    // Step 1: the follower. It follows the old leader again once back.
    seen.step.store(1, Ordering::SeqCst);
    upgrade(&mut apps[follower], &args).await;
    let back = apps[follower].as_ref().unwrap();
    assert!(
        follows(back, &urls[leader]).await,
        "the upgraded follower does not follow the leader: {:?}",
        back.health().await
    );
    seen.step.store(2, Ordering::SeqCst);
    served_through_both(&seen, 2).await;

    // Step 2: the leader. The upgraded follower takes over (one election),
    // and the old leader follows it once back.
    seen.step.store(3, Ordering::SeqCst);
    upgrade(&mut apps[leader], &args).await;
    seen.step.store(4, Ordering::SeqCst);
    let (new_leader, old_leader) = (
        apps[follower].as_ref().unwrap(),
        apps[leader].as_ref().unwrap(),
    );
    assert!(
        eventually(PATIENCE, || follows(old_leader, &urls[follower])).await,
        "the restarted leader does not follow the upgraded one: {:?}",
        old_leader.health().await
    );
    let health = new_leader.health().await.expect("health");
    assert_eq!(
        (health.role.as_str(), health.epoch),
        ("leader", Some(first_epoch + 1)),
        "one failover, to the upgraded follower: {health:?}"
    );
    served_through_both(&seen, 4).await;
    stop.store(true, Ordering::SeqCst);

    let mut placed: HashMap<String, (String, String)> = HashMap::new();
    let (mut failures, mut moved, mut reconnects) = (Vec::new(), Vec::new(), 0);
    for c in clients {
        let log = c.await.expect("a client");
        placed.extend(log.placed);
        failures.extend(log.failures);
        moved.extend(log.moved);
        reconnects += log.reconnects;
    }
    assert!(
        failures.is_empty(),
        "requests failed for good: {failures:?}"
    );
    assert!(moved.is_empty(), "reconnects to another session: {moved:?}");

    // Every acknowledged connect is in the store, as the API lists it.
    let listed = new_leader
        .ok("GET", "/api/v1/hostPools/p/userSessions", None, 200)
        .await;
    let listed = listed["value"].as_array().expect("a list of sessions");
    let mut per_user: HashMap<String, Vec<(String, String)>> = HashMap::new();
    let mut per_host: HashMap<String, usize> = HashMap::new();
    for s in listed {
        let field = |k: &str| s[k].as_str().unwrap_or_else(|| panic!("{k} in {s}"));
        per_user
            .entry(field("userPrincipalName").to_ascii_lowercase())
            .or_default()
            .push((field("id").to_string(), field("sessionHost").to_string()));
        *per_host
            .entry(field("sessionHost").to_string())
            .or_default() += 1;
    }
    let lost: Vec<_> = placed
        .iter()
        .filter(|(user, session)| {
            per_user.get(&user.to_ascii_lowercase()) != Some(&vec![(*session).clone()])
        })
        .map(|(user, session)| (user, session, per_user.get(&user.to_ascii_lowercase())))
        .collect();
    assert!(
        lost.is_empty(),
        "acknowledged and not (only) in the store: {lost:?}"
    );
    let twice: Vec<_> = per_user.iter().filter(|(_, s)| s.len() > 1).collect();
    assert!(twice.is_empty(), "users with two sessions (S1): {twice:?}");
    let over: Vec<_> = per_host.iter().filter(|(_, n)| **n > LIMIT).collect();
    assert!(over.is_empty(), "hosts over their limit: {over:?}");
    // And the same from the database itself.
    let in_db = check_invariants(&db_client(&db).await, "p", LIMIT).await;
    assert_eq!(in_db, listed.len(), "the API lists what the database holds");

    // Figures for the report (`--nocapture`), not assertions.
    let mut times = seen.ack_times.lock().unwrap().clone();
    times.sort();
    let longest = times
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default();
    eprintln!(
        "rolling upgrade: {} users placed, {reconnects} reconnects, {} sessions listed; \
         longest time without an acknowledged connect: {longest:?}",
        placed.len(),
        listed.len()
    );
    for (i, step) in STEPS.iter().enumerate() {
        eprintln!(
            "  {step}: acknowledged {:?} (leader's URL, follower's URL), retried after 503: {}, failed over: {}",
            [seen.acked_in(i, leader), seen.acked_in(i, follower)],
            seen.retried[i].load(Ordering::SeqCst),
            seen.failed_over[i].load(Ordering::SeqCst)
        );
    }
}
