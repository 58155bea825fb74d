//! The conformance suite on the embedded SQLite store.

use store::{SqliteStore, Store};

/// Each case of the conformance suite, as a test of its own.
mod conformance {
    use store::{SqliteStore, Store};

    /// Opens each case's store in a directory of its own, in a temporary
    /// directory the opener owns (and removes when the test ends).
    fn opener() -> impl Fn(&str) -> Box<dyn Store> + Sync {
        let dir = tempfile::tempdir().expect("tempdir");
        move |case: &str| -> Box<dyn Store> {
            Box::new(SqliteStore::open(&dir.path().join(case)).expect("open sqlite"))
        }
    }

    store::conformance_tests!(
        #[tokio::test]
        opener
    );
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    drop(SqliteStore::open(dir.path()).expect("open"));
    let conn = rusqlite::Connection::open(dir.path().join("deskbroker.sqlite3")).expect("raw open");
    conn.pragma_update(None, "user_version", 99)
        .expect("set version");
    drop(conn);
    let err = SqliteStore::open(dir.path()).err().expect("refused");
    assert!(err.to_string().contains("newer"), "{err}");
}

/// A database of schema 2 (before registration tokens were bound) is
/// migrated: its tokens come back bound to one more host.
#[tokio::test]
async fn tokens_of_an_older_schema_get_a_bound_of_one_host() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("deskbroker.sqlite3");
    let conn = rusqlite::Connection::open(&path).expect("raw open");
    conn.execute_batch(
        "CREATE TABLE pools (name TEXT PRIMARY KEY, config TEXT NOT NULL,
                             counters TEXT NOT NULL) STRICT;
         CREATE TABLE hosts (pool TEXT NOT NULL REFERENCES pools(name) ON DELETE CASCADE,
            name TEXT NOT NULL, seq INTEGER NOT NULL, record TEXT NOT NULL,
            PRIMARY KEY (pool, name)) STRICT, WITHOUT ROWID;
         CREATE TABLE sessions (pool TEXT NOT NULL, id TEXT NOT NULL, host TEXT NOT NULL,
            record TEXT NOT NULL, PRIMARY KEY (pool, id),
            FOREIGN KEY (pool, host) REFERENCES hosts(pool, name) ON DELETE CASCADE
         ) STRICT, WITHOUT ROWID;
         CREATE TABLE registration_tokens (
            pool TEXT NOT NULL REFERENCES pools(name) ON DELETE CASCADE,
            hash TEXT NOT NULL, expires_ms INTEGER NOT NULL,
            PRIMARY KEY (pool, hash)) STRICT, WITHOUT ROWID;
         CREATE TABLE host_credentials (pool TEXT NOT NULL, host TEXT NOT NULL,
            hash TEXT NOT NULL, PRIMARY KEY (pool, host),
            FOREIGN KEY (pool, host) REFERENCES hosts(pool, name) ON DELETE CASCADE
         ) STRICT, WITHOUT ROWID;
         PRAGMA user_version = 2;",
    )
    .expect("schema 2");
    // A pool and a token as schema 2 wrote them.
    let config = serde_json::to_string(&store::conformance::pool("p")).expect("json");
    let counters = serde_json::to_string(&placement::PoolCounters::default()).expect("json");
    conn.execute(
        "INSERT INTO pools (name, config, counters) VALUES ('p', ?1, ?2)",
        [config, counters],
    )
    .expect("pool");
    conn.execute(
        "INSERT INTO registration_tokens (pool, hash, expires_ms) VALUES ('p', 'old', 7)",
        [],
    )
    .expect("token");
    drop(conn);
    let snap = SqliteStore::open(dir.path())
        .expect("reopen")
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

/// A commit that meets another connection's write lock waits for it (and
/// is not refused with SQLITE_BUSY), and commits once it is released.
#[tokio::test]
async fn a_commit_waits_for_a_lock_held_by_another_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path()).expect("open");
    let other = rusqlite::Connection::open(dir.path().join("deskbroker.sqlite3")).expect("open");
    other
        .execute_batch("BEGIN IMMEDIATE")
        .expect("take the write lock");
    let entry = store::conformance::audit_entry(1, "admin", None);
    let apply = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .apply(vec![store::Mutation::AppendAudit { entry }].into())
                .await
        }
    });
    // The scenario: a lock held for 200 ms while the commit comes.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(!apply.is_finished(), "the commit did not wait for the lock");
    other
        .execute_batch("COMMIT")
        .expect("release the write lock");
    apply
        .await
        .expect("join")
        .expect("committed once the lock was released");
    let page = store
        .audit(store::AuditQuery {
            limit: 10,
            ..Default::default()
        })
        .await
        .expect("read the log");
    assert_eq!(page.len(), 1);
}

/// Under steady writes the checkpointer keeps the WAL's file within what
/// `journal_size_limit` keeps, 128 MiB, while 192 MiB are written. (It
/// fails without the checkpointer. Whether its RESTART or a pass that
/// met no commit lets the WAL start over depends on timing this test does
/// not control; the broker's load, a commit always under way, needs the
/// RESTART, measured in docs/benchmarks.md.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_stays_bounded_under_steady_writes() {
    const KEPT: u64 = 128 << 20;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(dir.path()).expect("open");
    let wal = dir.path().join("deskbroker.sqlite3-wal");
    let wal_len = || std::fs::metadata(&wal).map_or(0, |m| m.len());
    // Small commits back to back, as a broker under load makes them.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let steady = tokio::spawn({
        let (store, done) = (store.clone(), done.clone());
        async move {
            let mut i = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let entry = store::conformance::audit_entry(i, "steady", None);
                store
                    .apply(vec![store::Mutation::AppendAudit { entry }].into())
                    .await
                    .expect("apply");
                i += 1;
            }
        }
    });
    // And batches of 1 MiB (ten entries of 100 KiB) to fill the WAL.
    let batch = |i: i64| -> std::sync::Arc<[store::Mutation]> {
        (0..10)
            .map(|j| {
                let mut entry = store::conformance::audit_entry(i * 10 + j, "admin", None);
                entry.before = store::Rendered::of(&"x".repeat(100 << 10));
                store::Mutation::AppendAudit { entry }
            })
            .collect()
    };
    for i in 0..192 {
        store.apply(batch(i)).await.expect("apply");
    }
    // The file may pass the bound while a restart is due; the first
    // commit after the restart cuts it back.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while wal_len() > KEPT + (1 << 20) {
        assert!(
            std::time::Instant::now() < deadline,
            "the WAL is still {} bytes after 60 s of commits",
            wal_len()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    steady.await.expect("steady writer");
}

/// A backup carries published applications and application groups: the
/// copy passes the check, and a store restored from it loads them. A copy
/// without either table is refused by the check, which names the table.
#[tokio::test]
async fn a_backup_carries_applications_and_their_groups() {
    use store::conformance::{application, application_group};
    use store::sqlite_backup;
    let dir = tempfile::tempdir().expect("tempdir");
    let served = dir.path().join("served");
    let live = SqliteStore::open(&served).expect("open");
    live.apply(
        vec![
            store::Mutation::PutPool {
                config: store::conformance::pool("p"),
                counters: placement::PoolCounters::default(),
            },
            store::Mutation::PutApplication {
                pool: "p".into(),
                alias: "word".into(),
                application: application("Word"),
            },
            store::Mutation::PutApplicationGroup {
                name: "p-apps".into(),
                group: application_group("p", &["word"]),
            },
        ]
        .into(),
    )
    .await
    .expect("apply");
    let kept = live.load().await.expect("load");
    let copy = dir.path().join("backup.sqlite3");
    let summary = sqlite_backup::backup(&served, &copy, false).expect("backup");
    assert_eq!(summary.schema_version, sqlite_backup::schema_version());

    let restored = dir.path().join("restored");
    std::fs::create_dir_all(&restored).expect("mkdir");
    sqlite_backup::restore(&copy, &restored).expect("restore");
    let snap = SqliteStore::open(&restored)
        .expect("open the restored store")
        .load()
        .await
        .expect("load");
    assert_eq!(snap, kept, "the restored store holds what was served");
    assert_eq!(
        snap.pools[0].applications,
        [("word".to_string(), application("Word"))]
    );
    assert_eq!(
        snap.application_groups,
        [("p-apps".to_string(), application_group("p", &["word"]))]
    );

    for table in ["applications", "application_groups"] {
        let lacking = dir.path().join(format!("without-{table}.sqlite3"));
        std::fs::copy(&copy, &lacking).expect("copy");
        let conn = rusqlite::Connection::open(&lacking).expect("raw open");
        conn.execute_batch(&format!("DROP TABLE {table}"))
            .expect("drop");
        drop(conn);
        let refused = sqlite_backup::check(&lacking).expect_err("a copy without the table");
        assert!(
            refused.to_string().contains(&format!("lacks: {table}")),
            "{table}: {refused}"
        );
    }
}

/// A backup carries the workspace feed's stamps: a store restored from it
/// loads each user's stamp, and a copy without their table is refused by
/// the check, which names the table.
#[tokio::test]
async fn a_backup_carries_feed_stamps() {
    use store::conformance::feed_stamp;
    use store::sqlite_backup;
    let dir = tempfile::tempdir().expect("tempdir");
    let served = dir.path().join("served");
    let live = SqliteStore::open(&served).expect("open");
    live.apply(
        vec![
            store::Mutation::PutFeedStamp {
                user: "bob@contoso.com".into(),
                stamp: feed_stamp(2),
            },
            store::Mutation::PutFeedStamp {
                user: "alice@contoso.com".into(),
                stamp: feed_stamp(1),
            },
        ]
        .into(),
    )
    .await
    .expect("apply");
    let kept = live.load().await.expect("load");
    let copy = dir.path().join("backup.sqlite3");
    sqlite_backup::backup(&served, &copy, false).expect("backup");

    let restored = dir.path().join("restored");
    std::fs::create_dir_all(&restored).expect("mkdir");
    sqlite_backup::restore(&copy, &restored).expect("restore");
    let snap = SqliteStore::open(&restored)
        .expect("open the restored store")
        .load()
        .await
        .expect("load");
    assert_eq!(snap, kept, "the restored store holds what was served");
    assert_eq!(
        snap.feed_stamps,
        [
            ("alice@contoso.com".to_string(), feed_stamp(1)),
            ("bob@contoso.com".to_string(), feed_stamp(2)),
        ]
    );

    let lacking = dir.path().join("without-feed_stamps.sqlite3");
    std::fs::copy(&copy, &lacking).expect("copy");
    let conn = rusqlite::Connection::open(&lacking).expect("raw open");
    conn.execute_batch("DROP TABLE feed_stamps").expect("drop");
    drop(conn);
    let refused = sqlite_backup::check(&lacking).expect_err("a copy without the table");
    assert!(
        refused.to_string().contains("lacks: feed_stamps"),
        "{refused}"
    );
}
