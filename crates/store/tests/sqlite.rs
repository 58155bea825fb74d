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
