//! The conformance suite on the embedded SQLite store.

use store::{SqliteStore, Store};

#[tokio::test]
async fn sqlite_passes_the_conformance_suite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    let open = move |case: &str| -> Box<dyn Store> {
        Box::new(SqliteStore::open(&root.join(case)).expect("open sqlite"))
    };
    store::conformance::run_all(&open).await;
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
