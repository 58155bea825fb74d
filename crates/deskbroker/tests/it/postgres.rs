//! `serve --database-url postgres://…`: rule S5 on PostgreSQL. What was
//! acknowledged survives `kill -9`, and a restart on the same database (even
//! with an empty data dir) has it all. Needs the PostgreSQL server of
//! `store`'s tests (`DESKBROKER_TEST_DATABASE_URL`, default this machine's);
//! each test uses a fresh database of its own, dropped at the end.

use crate::pg::{scratch, spawn_with};
use crate::{acknowledge_before_crash, check_after_crash};

#[tokio::test]
async fn acknowledged_connects_survive_kill_9_on_postgres() {
    let db = scratch("kill9").await;
    let dir = tempfile::tempdir().unwrap();
    let args = ["--database-url", db.url()];
    let app = spawn_with(&dir.path().join("data"), &args).expect("serve on postgres");
    let placed = acknowledge_before_crash(&app).await;
    assert!(
        !app.data_dir.join("deskbroker.sqlite3").exists(),
        "nothing is kept in SQLite"
    );
    app.kill9();
    // A new, empty data dir: everything must come from PostgreSQL.
    let app = spawn_with(&dir.path().join("other-data"), &args).expect("restart on postgres");
    check_after_crash(&app, placed).await;
}

#[tokio::test]
async fn a_database_url_that_is_not_postgres_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = spawn_with(dir.path(), &["--database-url", "mysql://127.0.0.1/x"])
        .err()
        .expect("refused");
    assert!(err.contains("postgres://"), "{err}");
}
