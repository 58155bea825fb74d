//! Several `deskbroker serve` replicas on one PostgreSQL database: every
//! rule holds across replicas under concurrent load, a leader killed with
//! `kill -9` loses nothing acknowledged, a frozen leader is replaced once
//! its lease runs out and follows when it wakes, and a database outage
//! keeps reconnects working and refuses the rest at once. The invariants
//! are checked from the database itself afterwards.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use broker::writer::RESERVE_TIMEOUT;
use serde_json::{Value, json};
use store::postgres::{PING_TIMEOUT, ScratchDatabase};
use tokio::net::{TcpListener, TcpStream};

use crate::pg::{
    Outage, all_reconnect, check_invariants, connect, counter, db_client, leader_index, replicas,
    replicas_through, scratch, sessions_in_db, signal, spawn_with, through, upstream_of,
};
use crate::{App, PATIENCE, eventually, pool_with_hosts};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_keep_every_rule_under_concurrent_load() {
    let db = scratch("replicas").await;
    let dir = tempfile::tempdir().unwrap();
    let apps = Arc::new(replicas(&dir, db.url(), 3));
    // Set up through a follower: it forwards to the leader.
    let leader = leader_index(&apps.iter().collect::<Vec<_>>()).await;
    let setup = &apps[(leader + 1) % 3];
    pool_with_hosts(setup, "p", "BreadthFirst", 4, 20).await;
    // A personal pool: 8 desktops, first come first served (P7).
    setup
        .ok(
            "PUT",
            "/api/v1/hostPools/personal",
            Some(
                json!({"hostPoolType": "Personal", "loadBalancerType": "Persistent",
                        "personalDesktopAssignmentType": "Automatic"}),
            ),
            201,
        )
        .await;
    for i in 1..=8 {
        setup
            .ok(
                "PUT",
                &format!("/api/v1/hostPools/personal/sessionHosts/d{i}"),
                Some(json!({"address": format!("10.1.0.{i}:3389")})),
                201,
            )
            .await;
    }

    // 24 clients, each on every replica in turn, 150 operations each over
    // 120 users (more than the 80 seats): connect, disconnect, logoff.
    let mut tasks = Vec::new();
    for c in 0..24u64 {
        let apps = apps.clone();
        tasks.push(tokio::spawn(async move {
            let mut counts: BTreeMap<String, usize> = BTreeMap::new();
            let mut state = c.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let mut next = || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state
            };
            for op in 0..150u64 {
                let app = &apps[((c + op) % 3) as usize];
                let user = format!("u{}", next() % 120);
                let (pool, limit_code) = if next() % 5 == 0 {
                    ("personal", "personal")
                } else {
                    ("p", "pooled")
                };
                let (status, v) = app
                    .call(
                        "POST",
                        &format!("/api/v1/hostPools/{pool}/connect"),
                        Some(json!({"user": user})),
                    )
                    .await;
                let outcome = match status {
                    200 => "connected".to_string(),
                    503 => format!("refused {limit_code} {}", v["error"]["code"]),
                    other => panic!("connect answered {other}: {v}"),
                };
                *counts.entry(outcome).or_default() += 1;
                if status != 200 {
                    continue;
                }
                let id = v["sessionId"].as_str().expect("session id").to_string();
                let path = format!("/api/v1/hostPools/{pool}/userSessions/{id}");
                let other = &apps[((c + op + 1) % 3) as usize];
                match next() % 3 {
                    0 => {
                        let (s, v) = other
                            .call(
                                "PATCH",
                                &path,
                                Some(json!({"sessionState": "Disconnected"})),
                            )
                            .await;
                        // Another client may have logged the user off meanwhile.
                        assert!(s == 200 || s == 404, "disconnect answered {s}: {v}");
                        *counts.entry("disconnected".into()).or_default() += 1;
                    }
                    1 => {
                        let (s, v) = other.call("DELETE", &path, None).await;
                        assert!(s == 204 || s == 404, "logoff answered {s}: {v}");
                        *counts.entry("logged off".into()).or_default() += 1;
                    }
                    _ => {}
                }
            }
            counts
        }));
    }
    let mut totals: BTreeMap<String, usize> = BTreeMap::new();
    for t in tasks {
        for (k, v) in t.await.expect("client") {
            *totals.entry(k).or_default() += v;
        }
    }
    eprintln!("outcomes: {totals:?}");
    assert!(totals["connected"] > 1000, "{totals:?}");
    assert!(totals["logged off"] > 300, "{totals:?}");

    let client = db_client(&db).await;
    let pooled = check_invariants(&client, "p", 4).await;
    let personal = check_invariants(&client, "personal", 1).await;
    // One owner per personal host, and a user owns at most one (Automatic).
    let owners: Vec<String> = client
        .query("SELECT record FROM hosts WHERE pool = 'personal'", &[])
        .await
        .unwrap()
        .into_iter()
        .filter_map(|row| {
            let host: Value = serde_json::from_str(row.get(0)).unwrap();
            host["spec"]["assignedUser"]
                .as_str()
                .map(str::to_ascii_lowercase)
        })
        .collect();
    let distinct: HashSet<&String> = owners.iter().collect();
    assert_eq!(
        distinct.len(),
        owners.len(),
        "a user owns two desktops: {owners:?}"
    );
    for (_, host, user, _) in sessions_in_db(&client, "personal").await {
        let row = client
            .query_one(
                "SELECT record FROM hosts WHERE pool = 'personal' AND name = $1",
                &[&host],
            )
            .await
            .unwrap();
        let h: Value = serde_json::from_str(row.get(0)).unwrap();
        assert_eq!(
            h["spec"]["assignedUser"]
                .as_str()
                .map(str::to_ascii_lowercase),
            Some(user.to_ascii_lowercase()),
            "a session on a desktop its user does not own"
        );
    }
    // Every replica reports what the database holds.
    for app in apps.iter() {
        let listed = app
            .ok("GET", "/api/v1/hostPools/p/userSessions", None, 200)
            .await;
        assert_eq!(listed["value"].as_array().unwrap().len(), pooled);
    }
    eprintln!("in the database: {pooled} pooled sessions, {personal} personal");
}

/// How many connects asked after the kill each surviving replica must
/// have had acknowledged.
const AFTER_KILL: usize = 10;

/// One acknowledged connect of the storm.
struct Ack {
    user: String,
    host: String,
    /// Asked after the killed leader was reaped: served by its successor.
    after_kill: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_the_leader_mid_storm_loses_nothing_acknowledged() {
    let db = scratch("replica_kill9").await;
    let dir = tempfile::tempdir().unwrap();
    let mut apps: Vec<Option<App>> = replicas(&dir, db.url(), 3).into_iter().map(Some).collect();
    let leader = leader_index(&apps.iter().flatten().collect::<Vec<_>>()).await;
    let urls: Vec<String> = apps.iter().flatten().map(|a| a.url.clone()).collect();
    let first = apps[(leader + 1) % 3].as_ref().unwrap();
    pool_with_hosts(first, "p", "BreadthFirst", 1000, 10).await;

    // 12 clients, 4 per replica, connecting new users as fast as they can
    // until told to stop; each remembers what was acknowledged, and whether
    // it asked after the leader was dead (`killed` is set once the process
    // is reaped, so such a connect can only have been served by the
    // replica that took over).
    let stop = Arc::new(AtomicBool::new(false));
    let killed = Arc::new(AtomicBool::new(false));
    let acked_before = Arc::new(AtomicUsize::new(0));
    // Per replica: the new leader serves its own clients at once, a
    // follower's only once it has found the new leader.
    let acked_after: Arc<[AtomicUsize; 3]> = Arc::new(Default::default());
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut tasks = Vec::new();
    for c in 0..12usize {
        let (url, http, stop, killed) = (
            urls[c % 3].clone(),
            http.clone(),
            stop.clone(),
            killed.clone(),
        );
        let (acked_before, acked_after) = (acked_before.clone(), acked_after.clone());
        tasks.push(tokio::spawn(async move {
            let mut acked: Vec<Ack> = Vec::new();
            let mut failed = 0usize;
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                let user = format!("c{c}-u{n}");
                n += 1;
                let after_kill = killed.load(Ordering::SeqCst);
                let r = http
                    .post(format!("{url}/api/v1/hostPools/p/connect"))
                    .bearer_auth(crate::TOKEN)
                    .json(&json!({"user": user}))
                    .send()
                    .await;
                let Ok(r) = r else {
                    failed += 1;
                    if failed > 3 {
                        break; // this client's replica is gone
                    }
                    continue;
                };
                let status = r.status().as_u16();
                let v: Value = r.json().await.unwrap_or(Value::Null);
                if status == 200 {
                    let host = v["sessionHost"].as_str().unwrap().to_string();
                    acked.push(Ack {
                        user,
                        host,
                        after_kill,
                    });
                    if after_kill {
                        &acked_after[c % 3]
                    } else {
                        &acked_before
                    }
                    .fetch_add(1, Ordering::SeqCst);
                } else {
                    failed += 1;
                }
            }
            (c % 3, acked, failed)
        }));
    }
    // Kill the leader mid-storm: once there is load, not after a set time.
    let storming = eventually(PATIENCE, || async {
        acked_before.load(Ordering::SeqCst) >= 100
    })
    .await;
    assert!(
        storming,
        "only {} connects acknowledged before the kill",
        acked_before.load(Ordering::SeqCst)
    );
    apps[leader].take().unwrap().kill9();
    killed.store(true, Ordering::SeqCst);
    // Both survivors go on serving: wait for connects asked and
    // acknowledged after the kill through each of them (the new leader's
    // own, and the follower's, forwarded to the new leader).
    let survivors_served = || {
        (0..3)
            .filter(|&r| r != leader)
            .map(|r| acked_after[r].load(Ordering::SeqCst))
            .collect::<Vec<_>>()
    };
    let served = eventually(PATIENCE, || async {
        survivors_served().iter().all(|&n| n >= AFTER_KILL)
    })
    .await;
    stop.store(true, Ordering::SeqCst);

    let mut acked_all = Vec::new();
    for t in tasks {
        let (replica, acked, failed) = t.await.expect("client");
        if replica == leader {
            eprintln!("client of the killed leader: {} acknowledged", acked.len());
        } else {
            assert_eq!(failed, 0, "a client of a surviving replica saw a failure");
            eprintln!(
                "client of replica {replica}: {} acknowledged, {} of them after the kill",
                acked.len(),
                acked.iter().filter(|a| a.after_kill).count()
            );
        }
        acked_all.push((replica, acked));
    }
    assert!(
        served,
        "connects asked after the kill and acknowledged, per surviving replica: {:?}",
        survivors_served()
    );

    // Every acknowledged connect is in the database, on its host.
    let client = db_client(&db).await;
    let in_db: HashMap<String, String> = sessions_in_db(&client, "p")
        .await
        .into_iter()
        .map(|(_, host, user, _)| (user, host))
        .collect();
    let mut total = 0;
    let mut after_kill = [0usize; 3];
    for (replica, acked) in &acked_all {
        for a in acked {
            assert_eq!(
                in_db.get(&a.user),
                Some(&a.host),
                "acknowledged {} on {} is lost",
                a.user,
                a.host
            );
            total += 1;
            after_kill[*replica] += usize::from(a.after_kill);
        }
    }
    assert!(
        total > 100
            && (0..3)
                .filter(|&r| r != leader)
                .all(|r| after_kill[r] >= AFTER_KILL),
        "too little load: {total} acknowledged, per replica {after_kill:?} after the kill"
    );
    check_invariants(&client, "p", 1000).await;

    // Users who were served by the killed replica reconnect through the
    // others, to the same host.
    let survivors: Vec<&App> = apps.iter().flatten().collect();
    let theirs: Vec<(String, String)> = acked_all
        .iter()
        .filter(|(r, _)| *r == leader)
        .flat_map(|(_, a)| a.iter().take(5).map(|a| (a.user.clone(), a.host.clone())))
        .collect();
    all_reconnect(&survivors, &theirs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_outage_keeps_reconnects_and_refuses_the_rest_at_once() {
    let db = scratch("replica_outage").await;
    let outage = Outage::start(upstream_of(db.url())).await;
    let url = through(db.url(), outage.addr);
    let dir = tempfile::tempdir().unwrap();
    // A lease long enough to see reconnects answered from memory through
    // both replicas, however long noticing the outage takes.
    let apps = replicas_through(&dir, &url, &[], 2, &["--leader-lease", "15"]);
    leader_index(&apps.iter().collect::<Vec<_>>()).await;
    pool_with_hosts(&apps[0], "p", "DepthFirst", 10, 5).await;
    let mut placed = Vec::new();
    for i in 0..20 {
        let v = connect(&apps[i % 2], &format!("u{i}")).await;
        placed.push((
            format!("u{i}"),
            v["sessionHost"].as_str().unwrap().to_string(),
        ));
    }

    outage.cut();
    let newcomers = std::sync::atomic::AtomicUsize::new(0);
    // Soon every replica refuses new users with a clear 503, answered from
    // memory: not after waiting out a timeout of the queue or the database
    // (the shortest of which, 5 s, is the bug a refusal slower than that
    // would show; anything faster is only the machine's load).
    let prompt = RESERVE_TIMEOUT.min(PING_TIMEOUT);
    for app in &apps {
        let refused = eventually(PATIENCE, || async {
            let started = Instant::now();
            let (status, v) = app
                .call(
                    "POST",
                    "/api/v1/hostPools/p/connect",
                    Some(json!({"user": format!("newcomer{}", newcomers.fetch_add(1, Ordering::Relaxed))})),
                )
                .await;
            if status == 200 {
                // Placed before the loss was noticed: try again.
                return false;
            }
            assert_eq!(status, 503, "{v}");
            assert_eq!(v["error"]["code"], "StoreUnavailable", "{v}");
            assert!(
                started.elapsed() < prompt,
                "refused only after {:?}: a timeout was waited out",
                started.elapsed()
            );
            true
        })
        .await;
        assert!(
            refused,
            "new placements are still accepted without the database"
        );
    }
    // Users with a session reconnect through either replica, to their host.
    let both: Vec<&App> = apps.iter().collect();
    all_reconnect(&both, &placed).await;
    // Until the leader's lease runs out, and no longer: by then another
    // replica may lead (it could reach the database) and have logged them
    // off, so an answer from memory could send a user to a second host.
    let bounded = eventually(PATIENCE, || async {
        let (status, _) = apps[0]
            .call(
                "POST",
                "/api/v1/hostPools/p/connect",
                Some(json!({"user": "u0"})),
            )
            .await;
        status == 503
    })
    .await;
    assert!(
        bounded,
        "reconnects are answered from memory past the lease"
    );

    outage.restore();
    // The replicas catch up by themselves: new users are placed again,
    // through both, and nothing acknowledged is lost.
    for app in &apps {
        let back = eventually(PATIENCE, || async {
            let (status, _) = app
                .call(
                    "POST",
                    "/api/v1/hostPools/p/connect",
                    Some(json!({"user": format!("after-{}", app.url)})),
                )
                .await;
            status == 200
        })
        .await;
        assert!(back, "{} did not recover", app.url);
    }
    all_reconnect(&both, &placed).await;
    let client = db_client(&db).await;
    let sessions = check_invariants(&client, "p", 10).await;
    assert!(sessions >= 22, "{sessions}");
}

/// The RDP front door of a follower places through the leader, and keeps
/// doing so after the leader is killed (it then places through itself).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_front_door_places_through_the_leader_and_survives_it() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let db = scratch("replica_rdp").await;
    let dir = tempfile::tempdir().unwrap();
    let leader =
        spawn_with(&dir.path().join("r0"), &["--database-url", db.url()]).expect("first replica");
    leader_index(&[&leader]).await;
    let (follower, _) = App::spawn_with(
        &dir.path().join("r1"),
        "127.0.0.1:0",
        &[
            "--database-url",
            db.url(),
            "--rdp-listen",
            "127.0.0.1:0",
            "--rdp-default-pool",
            "farm",
        ],
    );
    let front_door = follower.ready.rdp_addr().to_string();
    let host = TcpListener::bind("127.0.0.1:0").await.unwrap();
    follower
        .ok(
            "PUT",
            "/api/v1/hostPools/farm",
            Some(
                json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst",
                        "maxSessionLimit": 5, "allowedAddressRanges": ["127.0.0.0/8"]}),
            ),
            201,
        )
        .await;
    follower
        .ok(
            "PUT",
            "/api/v1/hostPools/farm/sessionHosts/h1",
            Some(json!({"address": host.local_addr().unwrap().to_string()})),
            201,
        )
        .await;
    let pdu = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../gateway/tests/fixtures/xfreerdp-2.11.7-user.bin"
    ))
    .unwrap();
    let session_of_alice = |app: &App| {
        let app_url = app.url.clone();
        let http = app.http.clone();
        async move {
            let v: Value = http
                .get(format!(
                    "{app_url}/api/v1/hostPools/farm/userSessions?user=alice"
                ))
                .bearer_auth(crate::TOKEN)
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            let s = &v["value"][0];
            Some((
                s["id"].as_str()?.to_string(),
                s["sessionState"].as_str()?.to_string(),
            ))
        }
    };

    // Through the follower's front door: placed by the leader, relayed to h1.
    let mut client = TcpStream::connect(&front_door).await.unwrap();
    client.write_all(&pdu).await.unwrap();
    let (mut upstream, _) = tokio::time::timeout(PATIENCE, host.accept())
        .await
        .expect("h1 is dialled")
        .unwrap();
    let mut got = vec![0; pdu.len()];
    upstream.read_exact(&mut got).await.unwrap();
    assert_eq!(got, pdu);
    // The host answers: bytes flow both ways, the session is Active.
    upstream.write_all(b"host says hi").await.unwrap();
    let mut back = [0u8; 12];
    client.read_exact(&mut back).await.unwrap();
    // A logon's worth of bytes both ways (rule S9: without them the session
    // would end with the connection instead of being kept for S1).
    let from_client = vec![1u8; gateway::front_door::LOGON_EVIDENCE_CLIENT_BYTES as usize];
    client.write_all(&from_client).await.unwrap();
    let mut seen = vec![0; from_client.len()];
    upstream.read_exact(&mut seen).await.unwrap();
    let from_host = vec![2u8; gateway::front_door::LOGON_EVIDENCE_HOST_BYTES as usize];
    upstream.write_all(&from_host).await.unwrap();
    let mut seen = vec![0; from_host.len()];
    client.read_exact(&mut seen).await.unwrap();
    assert!(
        eventually(PATIENCE, || async {
            session_of_alice(&leader)
                .await
                .is_some_and(|(_, state)| state == "Active")
        })
        .await,
        "alice is Active, as the leader sees it"
    );
    let (id, _) = session_of_alice(&leader).await.expect("alice's session");
    drop(client);
    drop(upstream);

    // The leader dies; the follower takes over and its front door sends
    // alice back to her session on h1.
    leader.kill9();
    let mut client = TcpStream::connect(&front_door).await.unwrap();
    client.write_all(&pdu).await.unwrap();
    let (mut upstream, _) = tokio::time::timeout(PATIENCE, host.accept())
        .await
        .expect("h1 is dialled again")
        .unwrap();
    upstream.read_exact(&mut got).await.unwrap();
    assert_eq!(got, pdu);
    let (again, _) = session_of_alice(&follower).await.expect("alice's session");
    assert_eq!(again, id, "the same session (S1), through the new leader");
}

/// Rule L1 with the default lease: a leader frozen with SIGSTOP keeps its
/// database connection, and so PostgreSQL's lock, but stops renewing its
/// lease. The follower takes over once the lease has run out, and places;
/// after SIGCONT the old leader steps down, writes nothing and forwards.
/// Nothing acknowledged is lost and nobody has two sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_leader_is_replaced_and_follows_when_it_wakes() {
    let db = scratch("frozen_leader").await;
    let dir = tempfile::tempdir().unwrap();
    let apps = replicas(&dir, db.url(), 2);
    let refs: Vec<&App> = apps.iter().collect();
    let old = leader_index(&refs).await;
    let (leader, follower) = (&apps[old], &apps[1 - old]);
    let first_epoch = leader
        .health()
        .await
        .and_then(|h| h.epoch)
        .expect("an epoch");
    pool_with_hosts(follower, "p", "BreadthFirst", 8, 8).await;
    let mut placed = Vec::new();
    for i in 0..20 {
        let v = connect(refs[i % 2], &format!("u{i}")).await;
        placed.push((
            format!("u{i}"),
            v["sessionHost"].as_str().unwrap().to_string(),
        ));
    }

    signal(leader, nix::sys::signal::Signal::SIGSTOP);
    let frozen = Instant::now();
    // The follower answers at once, and fails fast while nobody can decide
    // (rule L2), until it leads.
    let mut unavailable = 0;
    let took_over = loop {
        assert!(
            frozen.elapsed() < PATIENCE * 2,
            "nobody took over from the frozen leader"
        );
        let (status, v) = follower
            .call(
                "POST",
                "/api/v1/hostPools/p/connect",
                Some(json!({"user": "v0"})),
            )
            .await;
        match status {
            200 => break frozen.elapsed(),
            503 => {
                assert_eq!(v["error"]["code"], "LeaderUnavailable", "{v}");
                unavailable += 1;
            }
            other => panic!("a connect during the takeover answered {other}: {v}"),
        }
    };
    eprintln!("placed by the new leader {took_over:?} after SIGSTOP ({unavailable} x 503 before)");
    let health = follower.health().await.expect("health");
    assert_eq!(health.role, "leader");
    assert!(health.epoch.expect("epoch") > first_epoch, "{health:?}");
    for i in 1..20 {
        connect(follower, &format!("v{i}")).await;
    }
    all_reconnect(&[follower], &placed).await;

    signal(leader, nix::sys::signal::Signal::SIGCONT);
    let follows = crate::eventually(PATIENCE, || async {
        leader.health().await.is_some_and(|h| {
            h.role == "follower" && h.leader.as_deref() == Some(follower.url.as_str())
        })
    })
    .await;
    assert!(
        follows,
        "the woken leader does not follow: {:?}",
        leader.health().await
    );
    assert!(counter(leader, "deskbroker_replica_step_downs_total").await >= 1.0);
    // Through the old leader: reconnects and new placements, decided by the
    // new one.
    all_reconnect(&[leader, follower], &placed).await;
    for i in 0..10 {
        connect(leader, &format!("w{i}")).await;
    }
    let client = db_client(&db).await;
    assert_eq!(check_invariants(&client, "p", 8).await, 50);
}

/// A client bound to the loopback address `source` (127.0.0.2, …), so that
/// the brokers see clients of different addresses.
fn client_from(source: &str) -> reqwest::Client {
    ::api::tls::install_default_provider();
    reqwest::Client::builder()
        .local_address(source.parse::<std::net::IpAddr>().expect("address"))
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

/// Two replicas on a scratch database: (leader, follower), once the
/// follower forwards to the leader.
async fn leader_and_follower(label: &str) -> (ScratchDatabase, tempfile::TempDir, App, App) {
    let db = scratch(label).await;
    let dir = tempfile::tempdir().unwrap();
    let mut apps = replicas(&dir, db.url(), 2);
    let i = leader_index(&[&apps[0], &apps[1]]).await;
    let leader = apps.remove(i);
    let follower = apps.remove(0);
    let follows = eventually(PATIENCE, || async {
        follower
            .health()
            .await
            .is_some_and(|h| h.role == "follower")
    })
    .await;
    assert!(follows, "{:?}", follower.health().await);
    (db, dir, leader, follower)
}

/// The audit entries of pool `pool`, newest first.
async fn audit_of(app: &App, pool: &str) -> Vec<Value> {
    let v = app
        .ok(
            "GET",
            &format!("/api/v1/auditLog?hostPool={pool}"),
            None,
            200,
        )
        .await;
    v["value"].as_array().expect("value").clone()
}

/// Sends requests without a valid credential from `client` to `url` until
/// one is answered 429; answers how many were (401) before it.
/// The `i`-th request carries the headers `headers(i)`.
async fn flood_until_throttled(
    client: &reqwest::Client,
    url: &str,
    headers: &dyn Fn(usize) -> Vec<(&'static str, String)>,
) -> usize {
    let mut unauthorized = 0;
    for i in 0..2_000 {
        let mut req = client
            .get(url)
            .bearer_auth("dba_not-a-token-of-this-broker-at-all");
        for (name, value) in headers(i) {
            req = req.header(name, value);
        }
        match req.send().await.expect("answer").status().as_u16() {
            401 => unauthorized += 1,
            429 => return unauthorized,
            other => panic!("unexpected {other}"),
        }
    }
    panic!("never throttled after {unauthorized} requests");
}

/// Rules T4 and T5 through a follower: the leader counts and records each
/// forwarded request as coming from its client, not from the follower. One
/// client flooding a follower with requests without a valid credential is
/// throttled while another client's go through the same follower; a
/// change made through the follower is recorded with its client's address.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_forwards_each_client_as_itself() {
    let (_db, _dir, leader, follower) = leader_and_follower("replica_sources").await;
    let url = format!("{}/api/v1/hostPools", follower.url);
    let flooder = client_from("127.0.0.2");
    let bystander = client_from("127.0.0.3");
    let served = flood_until_throttled(&flooder, &url, &|_| Vec::new()).await;
    assert!(served >= 100, "the burst is served first: {served}");
    // Another client's requests without a valid credential, through the
    // same follower: counted against its own address.
    let status = bystander
        .get(&url)
        .bearer_auth("dba_not-a-token-of-this-broker-at-all")
        .send()
        .await
        .expect("answer")
        .status()
        .as_u16();
    assert_eq!(status, 401, "the bystander was throttled with the flooder");
    // A change through the follower is recorded with the client's address.
    let resp = bystander
        .put(format!("{}/api/v1/hostPools/through", follower.url))
        .bearer_auth(crate::TOKEN)
        .json(&json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"}))
        .send()
        .await
        .expect("answer");
    assert_eq!(resp.status().as_u16(), 201);
    let log = audit_of(&leader, "through").await;
    assert_eq!(log.len(), 1, "{log:#?}");
    assert_eq!(log[0]["source"], "127.0.0.3", "{}", log[0]);
}

/// Nobody but a replica can say who a forwarded request's client is: a
/// client sending the forwarding headers itself, to the leader or to a
/// follower, is throttled and recorded by its own address.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_cannot_forge_the_forwarding_headers() {
    let (_db, _dir, leader, follower) = leader_and_follower("replica_forged").await;
    let forger = client_from("127.0.0.4");
    // What a client would send to pass for 198.51.100.N, forwarded by the
    // follower (it cannot know the key of the MAC).
    let forged = |n: usize| {
        vec![
            ("x-deskbroker-forwarded-by", follower.url.clone()),
            (
                "x-deskbroker-forwarded-for",
                format!("198.51.100.{}:40000;{}", n % 250 + 1, "ab".repeat(32)),
            ),
        ]
    };
    // Claiming another address with every request, straight to the leader:
    // throttled all the same.
    let url = format!("{}/api/v1/hostPools", leader.url);
    flood_until_throttled(&forger, &url, &forged).await;
    // A change claiming another address, to the leader, and through the
    // follower (which passes on no forwarding header of the client's):
    // recorded with the forger's own.
    for (pool, app, headers) in [
        ("forged-leader", &leader, forged(7)),
        ("forged-follower", &follower, forged(7)[1..].to_vec()),
    ] {
        let mut req = forger
            .put(format!("{}/api/v1/hostPools/{pool}", app.url))
            .bearer_auth(crate::TOKEN)
            .json(&json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"}));
        for (name, value) in headers {
            req = req.header(name, value);
        }
        let status = req.send().await.expect("answer").status().as_u16();
        assert_eq!(status, 201, "{pool}");
        let log = audit_of(&leader, pool).await;
        assert_eq!(log.len(), 1, "{pool}: {log:#?}");
        assert_eq!(log[0]["source"], "127.0.0.4", "{pool}: {}", log[0]);
    }
}

/// Writes `request` on a new connection to `addr` and answers the status
/// and the body of the answer (the connection is closed after it).
async fn raw(addr: &str, request: &str) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(request.as_bytes()).await.expect("send");
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).await.expect("read");
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// `OPTIONS *` (a request for the server as a whole) is answered by a
/// follower as the leader answers it, not as a lost leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn options_star_is_answered_by_a_follower_as_by_the_leader() {
    let (_db, _dir, leader, follower) = leader_and_follower("replica_options").await;
    let request = "OPTIONS * HTTP/1.1\r\nHost: broker\r\nConnection: close\r\n\r\n";
    let (want, body) = raw(&leader.listen_addr(), request).await;
    let (got, got_body) = raw(&follower.listen_addr(), request).await;
    assert_eq!(
        (got, &got_body["error"]["code"]),
        (want, &body["error"]["code"]),
        "the follower answered {got} {got_body}, the leader {want} {body}"
    );
}
