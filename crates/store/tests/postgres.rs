//! The conformance suite, and what is particular to it, on the PostgreSQL
//! store. Needs a PostgreSQL server: the one `DESKBROKER_TEST_DATABASE_URL`
//! names (`scripts/test` starts a throwaway cluster and sets it), else this
//! machine's (`postgres://postgres@127.0.0.1:5432/test`, trust auth). Each
//! test works in fresh databases of its own, dropped at the end. A server
//! that cannot be reached fails the tests.

use std::sync::Arc;
use std::time::Duration;

use placement::PoolCounters;
use store::conformance::{application, application_group, feed_stamp, host, pool, session};
use store::postgres::{ScratchDatabase, test_server_url};
use store::{Mutation, PostgresStore, SqliteStore, Store, StoreError};

/// A fresh database, or a clear failure when the server cannot be reached.
async fn scratch(label: &str) -> ScratchDatabase {
    ScratchDatabase::create(&test_server_url(), label)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "these tests need a PostgreSQL server and could not use it: {e}\n\
                 Run the tests with scripts/test (it starts a throwaway server), or name \
                 one with DESKBROKER_TEST_DATABASE_URL."
            )
        })
}

/// Each case of the conformance suite, as a test of its own, in scratch
/// databases of its own.
mod conformance {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use store::postgres::ScratchDatabase;
    use store::{PostgresStore, Store};

    /// Opens the case's database: made on first use of its name, and
    /// opened again when the case reopens it. The opener owns the
    /// databases; they are dropped when the test ends.
    fn opener() -> impl Fn(&str) -> Box<dyn Store> + Sync {
        let databases: Mutex<HashMap<String, ScratchDatabase>> = Mutex::new(HashMap::new());
        move |case: &str| -> Box<dyn Store> {
            // The suite's opener is synchronous; connecting is not (hence
            // the tests' multi-threaded runtime).
            tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current().block_on(async {
                    let known = databases
                        .lock()
                        .expect("lock")
                        .get(case)
                        .map(|d| d.url().to_string());
                    let url = match known {
                        Some(url) => url,
                        None => {
                            let db = super::scratch(case).await;
                            let url = db.url().to_string();
                            databases.lock().expect("lock").insert(case.into(), db);
                            url
                        }
                    };
                    Box::new(
                        PostgresStore::connect(&url)
                            .await
                            .unwrap_or_else(|e| panic!("open case {case}: {e}")),
                    ) as Box<dyn Store>
                })
            })
        }
    }

    store::conformance_tests!(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        opener
    );
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let db = scratch("newer").await;
    let url = format!("{}?sslmode=disable", db.url());
    drop(PostgresStore::connect(&url).await.expect("open"));
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("raw connect");
    tokio::spawn(connection);
    client
        .batch_execute("UPDATE schema_version SET version = 99")
        .await
        .expect("set version");
    drop(client);
    let err = PostgresStore::connect(&url).await.err().expect("refused");
    assert!(err.to_string().contains("newer"), "{err}");
}

/// A database of schema 2 (before registration tokens were bound) is
/// migrated: its tokens come back bound to one more host.
#[tokio::test]
async fn tokens_of_an_older_schema_get_a_bound_of_one_host() {
    let db = scratch("tokens-v2").await;
    let url = format!("{}?sslmode=disable", db.url());
    let store = PostgresStore::connect(&url).await.expect("open");
    store
        .apply(
            vec![Mutation::PutPool {
                config: pool("p"),
                counters: PoolCounters::default(),
            }]
            .into(),
        )
        .await
        .expect("pool");
    drop(store);
    // Back to schema 2, with a token as it wrote them.
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("raw connect");
    tokio::spawn(connection);
    client
        .batch_execute(
            "ALTER TABLE registration_tokens DROP COLUMN max_hosts, DROP COLUMN used_hosts;
             DROP TABLE api_credentials;
             DROP TABLE audit_log;
             DROP TABLE scaling_actions;
             DROP TABLE plan_memory;
             DROP TABLE scaling_plans;
             DROP TABLE broker_secrets;
             DROP TABLE applications;
             DROP TABLE application_groups;
             DROP TABLE feed_stamps;
             UPDATE schema_version SET version = 2;
             INSERT INTO registration_tokens (pool, hash, expires_ms) VALUES ('p', 'old', 7);",
        )
        .await
        .expect("schema 2");
    drop(client);
    let snap = PostgresStore::connect(&url)
        .await
        .expect("migrate")
        .load()
        .await
        .expect("load");
    assert_eq!(
        snap.pools[0].registration_tokens,
        [store::RegistrationToken {
            hash: "old".into(),
            expires_ms: 7,
            max_hosts: 1,
            used_hosts: 0,
        }]
    );
}

#[tokio::test]
async fn one_broker_per_database() {
    let db = scratch("owner").await;
    let wait = Duration::from_millis(300);
    // Two processes starting at once on a fresh database: one migrates and
    // owns it, the other is refused and says why.
    let (a, b) = tokio::join!(
        PostgresStore::connect_with_lock_wait(db.url(), wait),
        PostgresStore::connect_with_lock_wait(db.url(), wait),
    );
    let (owner, refused) = match (a, b) {
        (Ok(s), Err(e)) | (Err(e), Ok(s)) => (s, e),
        (a, b) => panic!(
            "exactly one store may own a database: {:?} / {:?}",
            a.err(),
            b.err()
        ),
    };
    assert!(
        refused.to_string().contains("in use by another deskbroker"),
        "{refused}"
    );
    owner
        .apply(
            vec![Mutation::PutPool {
                config: pool("p"),
                counters: PoolCounters::default(),
            }]
            .into(),
        )
        .await
        .expect("the owner writes");
    // Once the owner is gone (its connection closed), the next one starts.
    drop(owner);
    let next = PostgresStore::connect(db.url()).await.expect("reopen");
    let snap = next.load().await.expect("load");
    assert_eq!(snap.pools.len(), 1);
}

#[tokio::test]
async fn a_server_that_cannot_be_reached_is_a_clear_error() {
    // Port 1 on loopback: nothing listens there.
    let err = PostgresStore::connect("postgres://postgres@127.0.0.1:1/nope?connect_timeout=5")
        .await
        .err()
        .expect("refused");
    let msg = err.to_string();
    assert!(
        msg.contains("cannot connect to PostgreSQL at 127.0.0.1:1/nope"),
        "{msg}"
    );
    assert!(
        !msg.contains("postgres@"),
        "messages never repeat the URL: {msg}"
    );
    let err = PostgresStore::connect("mysql://x/y")
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("postgres://"), "{err}");
}

/// A tiny deterministic generator (no dependency, same batches every run).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// Random batches of every kind of mutation of pools, hosts, sessions,
/// enrollment, published applications and feed stamps, mostly valid (a model of which
/// pools and hosts exist keeps them so), sometimes not: PostgreSQL must
/// accept and refuse exactly what SQLite does, and keep exactly what SQLite
/// keeps. This is what checks that grouping runs of mutations into
/// multi-row statements changes nothing.
#[tokio::test]
async fn postgres_keeps_exactly_what_sqlite_keeps() {
    let db = scratch("differential").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let pg = PostgresStore::connect(db.url())
        .await
        .expect("open postgres");
    let lite = SqliteStore::open(dir.path()).expect("open sqlite");
    let mut rng = Lcg(7);
    let mut apps = Lcg(11);
    let mut feeds = Lcg(13);
    let pools = ["a", "b", "c"];
    let mut accepted = 0;
    for round in 0..300 {
        let snap = lite.load().await.expect("load sqlite");
        let mut hosts: Vec<(String, String)> = snap
            .pools
            .iter()
            .flat_map(|p| {
                p.hosts
                    .iter()
                    .map(|h| (p.config.name.clone(), h.spec.name.clone()))
            })
            .collect();
        let mut live: Vec<String> = snap.pools.iter().map(|p| p.config.name.clone()).collect();
        let mut batch = Vec::new();
        let len = 1 + rng.below(if round % 50 == 49 { 3_000 } else { 40 });
        for _ in 0..len {
            let p = pools[rng.below(3) as usize].to_string();
            let m = match rng.below(20) {
                0 | 1 => {
                    let mut config = pool(&p);
                    config.description = format!("round {round} \u{0} ünïcode");
                    live.push(p);
                    Mutation::PutPool {
                        config,
                        counters: PoolCounters {
                            next_seq: rng.below(100),
                            ..PoolCounters::default()
                        },
                    }
                }
                // Any pool: counters of a missing one are refused.
                2 => Mutation::PutCounters {
                    pool: p,
                    counters: PoolCounters {
                        random_draws: rng.below(1 << 40),
                        ..PoolCounters::default()
                    },
                },
                3..=6 if !live.is_empty() => {
                    let p = live[rng.below(live.len() as u64) as usize].clone();
                    let n = rng.below(30);
                    // The same name keeps the same place in query order.
                    let mut h = host(&format!("h{n}"), n + 1);
                    h.spec.allow_new_session = rng.below(2) == 0;
                    hosts.push((p.clone(), h.spec.name.clone()));
                    Mutation::PutHost { pool: p, host: h }
                }
                7..=12 if !hosts.is_empty() => {
                    let (p, h) = hosts[rng.below(hosts.len() as u64) as usize].clone();
                    let id = format!("s{:03}", rng.below(400));
                    let user = format!("u{}@contoso.com", rng.below(1_000));
                    Mutation::PutSession {
                        pool: p,
                        session: session(&id, &h, &user),
                    }
                }
                13 | 14 => Mutation::DeleteSession {
                    pool: p,
                    id: format!("s{:03}", rng.below(400)),
                },
                15 if !hosts.is_empty() => {
                    let (p, h) = hosts.swap_remove(rng.below(hosts.len() as u64) as usize);
                    Mutation::DeleteHost { pool: p, host: h }
                }
                16 if !hosts.is_empty() => {
                    let (p, h) = hosts[rng.below(hosts.len() as u64) as usize].clone();
                    Mutation::PutHostCredential {
                        pool: p,
                        credential: store::HostCredential {
                            host: h,
                            hash: format!("c{}", rng.below(1_000)),
                        },
                    }
                }
                17 if !live.is_empty() => Mutation::PutRegistrationToken {
                    pool: live[rng.below(live.len() as u64) as usize].clone(),
                    token: store::RegistrationToken {
                        hash: format!("t{}", rng.below(5)),
                        expires_ms: rng.below(1 << 50) as i64,
                        max_hosts: 1 + rng.below(1_000) as u32,
                        used_hosts: rng.below(1_000) as u32,
                    },
                },
                18 => Mutation::DeleteRegistrationTokens { pool: p },
                19 if rng.below(8) == 0 => {
                    live.retain(|x| *x != p);
                    hosts.retain(|(x, _)| *x != p);
                    Mutation::DeletePool { pool: p }
                }
                // Now and then something refers to what is not there.
                _ if rng.below(40) == 0 => Mutation::PutSession {
                    pool: p,
                    session: session("s999", "nope", "x"),
                },
                _ => Mutation::DeleteSession {
                    pool: p,
                    id: "s000".into(),
                },
            };
            batch.push(m);
            // Published applications and groups now and then, drawn from
            // a generator of their own so that the mix above stays as it
            // was: mostly of a live pool, now and then of any (one of a
            // missing pool is refused).
            if apps.below(4) == 0 {
                let p = pools[apps.below(3) as usize].to_string();
                let alias = format!("app{}", apps.below(6));
                let group = format!("g{}", apps.below(4));
                batch.push(match apps.below(4) {
                    0 if !live.is_empty() => Mutation::PutApplication {
                        pool: match apps.below(10) {
                            0 => p,
                            _ => live[apps.below(live.len() as u64) as usize].clone(),
                        },
                        alias,
                        application: application(&format!("round {round} \u{0} ünïcode")),
                    },
                    1 => Mutation::PutApplicationGroup {
                        name: group,
                        group: application_group(&p, &["app1"]),
                    },
                    2 => Mutation::DeleteApplicationGroup { name: group },
                    _ => Mutation::DeleteApplication { pool: p, alias },
                });
            }
            // Feed stamps now and then, from a generator of their own too:
            // a few users, so that a batch often puts one user twice.
            if feeds.below(4) == 0 {
                let user = ["alice", "Alice", "bob", "ünïcode", "carol"][feeds.below(5) as usize];
                batch.push(match feeds.below(4) {
                    0 => Mutation::DeleteFeedStamp { user: user.into() },
                    _ => Mutation::PutFeedStamp {
                        user: user.into(),
                        stamp: feed_stamp(round * 100 + feeds.below(100) as u32),
                    },
                });
            }
        }
        let want = lite.apply(batch.clone().into()).await;
        let got = pg.apply(batch.clone().into()).await;
        match (&want, &got) {
            (Ok(()), Ok(())) => accepted += 1,
            (Err(StoreError::Missing(_)), Err(StoreError::Missing(_))) => {}
            _ => panic!("round {round}: sqlite {want:?}, postgres {got:?} for {batch:#?}"),
        }
        let want = lite.load().await.expect("load sqlite");
        let got = pg.load().await.expect("load postgres");
        assert!(
            want == got,
            "round {round}: the stores differ after {batch:#?}"
        );
    }
    assert!(
        accepted > 150,
        "most batches are valid, or this test checks little: {accepted}"
    );
    let sessions: usize = pg
        .load()
        .await
        .expect("load")
        .pools
        .iter()
        .map(|p| p.sessions.len())
        .sum();
    assert!(sessions > 100, "the stores hold a fair amount: {sessions}");
    let snap = pg.load().await.expect("load");
    let applications: usize = snap.pools.iter().map(|p| p.applications.len()).sum();
    assert!(
        applications > 0 && !snap.application_groups.is_empty(),
        "and applications and groups: {applications}, {}",
        snap.application_groups.len()
    );
    assert!(!snap.feed_stamps.is_empty(), "and feed stamps");
}

fn put_pool(name: &str) -> std::sync::Arc<[Mutation]> {
    vec![Mutation::PutPool {
        config: pool(name),
        counters: PoolCounters::default(),
    }]
    .into()
}

async fn won(url: &str, advertise: &str, lease: Duration) -> (PostgresStore, Arc<store::Lease>) {
    match PostgresStore::campaign(url, advertise, Duration::from_secs(1), lease).await {
        Ok(store::Campaign::Won { store, lease }) => (store, lease),
        Ok(store::Campaign::Lost { leader, .. }) => panic!("lost the campaign to {leader:?}"),
        Err(e) => panic!("campaign: {e}"),
    }
}

/// Campaigns as `advertise` until it wins (a lock whose session is ending
/// frees within moments).
async fn won_eventually(url: &str, advertise: &str, lease: Duration) -> Arc<store::Lease> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        assert!(std::time::Instant::now() < deadline, "never won");
        if let store::Campaign::Won { store, lease } =
            PostgresStore::campaign(url, advertise, Duration::from_secs(1), lease)
                .await
                .expect("campaign")
        {
            // Its session ends with the store: the next campaign may win.
            drop(store);
            return lease;
        }
    }
}

async fn pools_named(url: &str, name: &str) -> i64 {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    client
        .query_one("SELECT count(*) FROM pools WHERE name = $1", &[&name])
        .await
        .expect("count")
        .get(0)
}

/// Rule L1's fence: a leader whose epoch is over commits nothing, even on
/// a connection that survived, and cannot renew its lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_leader_commits_nothing_even_on_a_live_connection() {
    let db = scratch("fenced").await;
    let (store, lease) = won(db.url(), "http://a", Duration::from_secs(10)).await;
    store.apply(put_pool("p")).await.expect("the leader writes");
    // What a new leader publishes after ending this one's session; here the
    // session lives on.
    let (client, conn) = tokio_postgres::connect(db.url(), tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    client
        .execute("UPDATE deskbroker_leader SET epoch = epoch + 1", &[])
        .await
        .expect("a newer epoch");
    let refused = store.apply(put_pool("q")).await.expect_err("fenced");
    assert!(refused.to_string().contains("no longer leads"), "{refused}");
    assert_eq!(
        pools_named(db.url(), "q").await,
        0,
        "nothing of it is written"
    );
    lease.keep().await;
    assert!(lease.replaced(), "its lease cannot be renewed");
}

/// A leader that stops renewing its lease is replaced once it runs out: the
/// next campaign ends its session, takes the lock and leads under the next
/// epoch; the old store can write nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_ends_a_leader_whose_lease_ran_out() {
    let db = scratch("expired").await;
    // Won, and never renewed (as if frozen).
    let (old, old_lease) = won(db.url(), "http://old", Duration::from_secs(2)).await;
    old.apply(put_pool("p")).await.expect("the leader writes");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let (new, new_lease) = loop {
        assert!(std::time::Instant::now() < deadline, "never took over");
        match PostgresStore::campaign(
            db.url(),
            "http://new",
            Duration::from_secs(1),
            Duration::from_secs(10),
        )
        .await
        .expect("campaign")
        {
            store::Campaign::Won { store, lease } => break (store, lease),
            store::Campaign::Lost { leader, .. } => {
                if let Some(leader) = leader {
                    assert_eq!(leader.url, "http://old");
                    assert_eq!(leader.epoch, old_lease.epoch());
                }
            }
        }
    };
    assert_eq!(new_lease.epoch(), old_lease.epoch() + 1);
    assert_eq!(new_lease.predecessor_epoch(), Some(old_lease.epoch()));
    assert!(
        new_lease.predecessor_left().is_zero(),
        "nothing to wait for: the old lease ran out"
    );
    assert!(!old_lease.is_valid(), "the old leader's own clock agrees");
    old.apply(put_pool("q"))
        .await
        .expect_err("the old session is gone");
    new.apply(put_pool("r"))
        .await
        .expect("the new leader writes");
    assert_eq!(pools_named(db.url(), "q").await, 0);
    assert_eq!(pools_named(db.url(), "r").await, 1);
}

/// A leader whose session ends while its lease still runs (a database
/// restart, a cut connection) may not know it yet, and answer from memory
/// until its lease runs out: the next leader learns how long that is, and
/// whose it was. A lease given up cleanly costs the next leader nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_leader_learns_how_long_the_previous_lease_still_runs() {
    let db = scratch("succession").await;
    let lease = Duration::from_secs(300);
    let (old, old_lease) = won(db.url(), "http://old", lease).await;
    let (client, conn) = tokio_postgres::connect(db.url(), tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    client
        .execute(
            "SELECT pg_terminate_backend(pid) FROM deskbroker_leader",
            &[],
        )
        .await
        .expect("end the leader's session");
    let next = won_eventually(db.url(), "http://next", lease).await;
    assert_eq!(next.epoch(), old_lease.epoch() + 1);
    assert_eq!(next.predecessor_epoch(), Some(old_lease.epoch()));
    assert_eq!(next.predecessor_url(), Some("http://old"));
    let left = next.predecessor_left();
    assert!(
        left > lease / 2 && left <= lease,
        "the old lease still runs for most of its {lease:?}: {left:?}"
    );
    old.apply(put_pool("q"))
        .await
        .expect_err("the old session is gone");

    next.release(Duration::from_secs(10))
        .await
        .expect("give the lease up");
    assert!(!next.is_valid(), "a lease given up is over at once");
    let third = won_eventually(db.url(), "http://third", lease).await;
    assert_eq!(third.predecessor_epoch(), Some(next.epoch()));
    assert!(
        third.predecessor_left().is_zero(),
        "a lease given up is not waited for"
    );
}
