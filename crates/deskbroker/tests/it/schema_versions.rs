//! Upgrades and downgrades of a store, through `serve`: a store the
//! previous deskbroker left (schema version 7, with its data) opens,
//! migrates and serves; a store from a newer deskbroker is refused with
//! both versions named, and left exactly as it was. On both stores.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::json;
use store::fixtures::{PREVIOUS_VERSION, READER_TOKEN, SESSION_IDS};

use crate::{App, TOKEN, exe};

/// What the fixture's broker had is served, and new work is taken.
async fn serves_the_previous_versions_data(app: &App) {
    let pool = app.ok("GET", "/api/v1/hostPools/p", None, 200).await;
    assert_eq!(pool["description"], "pool of the previous version's store");
    let h2 = app
        .ok("GET", "/api/v1/hostPools/p/sessionHosts/h2", None, 200)
        .await;
    assert_eq!(h2["allowNewSession"], false, "the drain survives");
    for (user, id) in ["alice@contoso.com", "bob@contoso.com"]
        .iter()
        .zip(SESSION_IDS)
    {
        crate::assert_reconnects(app, "p", user, id, "h1").await;
    }
    // The API credential the old broker made still works, with its role.
    let (status, _) = app
        .call_with("GET", "/api/v1/hostPools", None, Some(READER_TOKEN))
        .await;
    assert_eq!(status, 200);
    let (status, _) = app
        .call_with("DELETE", "/api/v1/hostPools/p", None, Some(READER_TOKEN))
        .await;
    assert_eq!(status, 403, "a reader stays a reader");
    app.ok("GET", "/api/v1/scalingPlans/weekdays", None, 200)
        .await;
    let audit = app.ok("GET", "/api/v1/auditLog", None, 200).await;
    assert!(
        audit["value"].as_array().is_some_and(|a| a.len() >= 13),
        "{audit}"
    );
    let v = app
        .ok(
            "POST",
            "/api/v1/hostPools/p/connect",
            Some(json!({"user": "carol@contoso.com"})),
            200,
        )
        .await;
    assert_eq!(v["reconnect"], false);
}

#[tokio::test]
async fn a_sqlite_store_of_the_previous_version_opens_migrates_and_serves() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    store::fixtures::previous_sqlite_store(&data).expect("the version-7 store");
    let app = App::spawn_on(&data);
    serves_the_previous_versions_data(&app).await;
    let conn = rusqlite::Connection::open(data.join("deskbroker.sqlite3")).unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version as usize, store::sqlite_backup::schema_version());
    assert!(version as usize > PREVIOUS_VERSION);
}

#[tokio::test]
async fn a_postgres_store_of_the_previous_version_opens_migrates_and_serves() {
    let db = crate::pg::scratch("previous_version").await;
    store::fixtures::previous_postgres_store(db.url())
        .await
        .expect("the version-7 store");
    let dir = tempfile::tempdir().unwrap();
    let app = crate::pg::spawn_with(&dir.path().join("data"), &["--database-url", db.url()])
        .expect("serve the version-7 database");
    let leads = crate::eventually(Duration::from_secs(30), || async { app.leads().await }).await;
    assert!(leads, "the broker does not lead");
    serves_the_previous_versions_data(&app).await;
    let version = schema_version(db.url()).await;
    assert_eq!(version as usize, store::sqlite_backup::schema_version());
}

/// `serve` with `extra` flags must stop with an error; answers its stderr.
fn refused_start(data: &Path, extra: &[&str]) -> String {
    let out = Command::new(exe())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .args(extra)
        .env("DESKBROKER_ADMIN_TOKEN", TOKEN)
        .output()
        .expect("run serve");
    assert!(!out.status.success(), "serve started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every file of `dir` and its bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut all: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    all.sort();
    all
}

#[tokio::test]
async fn a_sqlite_store_from_a_newer_version_is_refused_and_left_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    crate::pool_with_hosts(&app, "p", "DepthFirst", 5, 1).await;
    let data = app.data_dir.clone();
    app.kill9();
    let newer = store::sqlite_backup::schema_version() + 1;
    rusqlite::Connection::open(data.join("deskbroker.sqlite3"))
        .unwrap()
        .pragma_update(None, "user_version", newer as i64)
        .unwrap();
    // The store's files (the lock file names whoever last held it).
    let store_files = |dir: &Path| {
        let mut all = files(dir);
        all.retain(|(name, _)| !name.ends_with("deskbroker.lock"));
        all
    };
    let before = store_files(&data);
    let err = refused_start(&data, &[]);
    assert!(
        err.contains(&format!("schema version {newer}"))
            && err.contains(&format!("version {}", newer - 1))
            && err.contains("nothing was changed"),
        "{err}"
    );
    let after = store_files(&data);
    let names = |f: &[(String, Vec<u8>)]| {
        f.iter()
            .map(|(n, b)| format!("{n} {}", b.len()))
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&after), names(&before));
    assert!(after == before, "the store changed");
}

async fn schema_version(url: &str) -> i32 {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .query_one("SELECT version FROM schema_version", &[])
        .await
        .unwrap()
        .get(0)
}

/// The tables of the database of `url`, and each one's row count.
async fn tables(url: &str) -> Vec<(String, i64)> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let names: Vec<String> = client
        .query(
            "SELECT tablename::text FROM pg_tables WHERE schemaname = 'public' ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut out = Vec::new();
    for name in names {
        let n: i64 = client
            .query_one(&format!("SELECT count(*) FROM {name}"), &[])
            .await
            .unwrap()
            .get(0);
        out.push((name, n));
    }
    out
}

#[tokio::test]
async fn a_postgres_store_from_a_newer_version_is_refused_and_left_unchanged() {
    let db = crate::pg::scratch("newer_version").await;
    store::fixtures::previous_postgres_store(db.url())
        .await
        .expect("a store");
    let newer = store::sqlite_backup::schema_version() + 1;
    store::postgres::execute_for_tests(
        db.url(),
        &format!("UPDATE schema_version SET version = {newer}"),
    )
    .await
    .unwrap();
    let before = tables(db.url()).await;
    let dir = tempfile::tempdir().unwrap();
    let err = refused_start(&dir.path().join("data"), &["--database-url", db.url()]);
    assert!(
        err.contains(&format!("schema version {newer}"))
            && err.contains(&format!("version {}", newer - 1)),
        "{err}"
    );
    assert_eq!(tables(db.url()).await, before, "the database changed");
    assert_eq!(schema_version(db.url()).await as usize, newer);
}
