//! `serve --database-url postgres://…`: rule S5 on PostgreSQL. What was
//! acknowledged survives `kill -9`, and a restart on the same database (even
//! with an empty data dir) has it all. Needs the PostgreSQL server of
//! `store`'s tests (`DESKBROKER_TEST_DATABASE_URL`, default this machine's);
//! each test uses a fresh database of its own, dropped at the end.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use store::postgres::{ScratchDatabase, test_server_url};

use crate::durability::{acknowledge_before_crash, check_after_crash};
use crate::{App, TOKEN, exe};

/// A fresh database, or a clear failure when the server cannot be reached.
pub async fn scratch(label: &str) -> ScratchDatabase {
    ScratchDatabase::create(&test_server_url(), label)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "this test needs a PostgreSQL server and could not use it: {e}\n\
                 Run the tests with scripts/test (it starts a throwaway server), or name \
                 one with DESKBROKER_TEST_DATABASE_URL."
            )
        })
}

/// `deskbroker serve` with `--data-dir data_dir` and `extra` arguments;
/// answers the running broker, or the exit status and stderr of one that
/// stopped before listening.
pub fn spawn_with(data_dir: &Path, extra: &[&str]) -> Result<App, String> {
    // reqwest's TLS needs a process-wide crypto provider, even for plain
    // HTTP clients (see api::tls::install_default_provider).
    api::tls::install_default_provider();
    let mut child = Command::new(exe())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .args(extra)
        .env("DESKBROKER_ADMIN_TOKEN", TOKEN)
        .env(
            "RUST_LOG",
            if std::env::var_os("TEST_LOG").is_some() {
                "info"
            } else {
                "warn"
            },
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start deskbroker serve");
    let Ok((ready, _)) = crate::ready_line(&mut child, crate::SERVE_START) else {
        let _ = child.kill();
        let out = child.wait_with_output().expect("wait for serve");
        return Err(format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    };
    // The broker's log goes on to stderr: drain it so it never blocks.
    let stderr = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if std::env::var_os("TEST_LOG").is_some() {
                eprintln!("{line}");
            }
        }
    });
    Ok(App {
        url: ready.api_url().to_string(),
        ready,
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("client"),
        child,
        data_dir: data_dir.to_path_buf(),
    })
}

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
