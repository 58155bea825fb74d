//! PostgreSQL for the tests: a scratch database of its own per test, and
//! brokers on it (one, or replicas sharing it), with what the replica tests
//! share: who leads, connects and reconnects through any replica, the
//! invariants read from the database itself, an outage between a replica
//! and its database, signals and counters.

use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use store::postgres::{ScratchDatabase, test_server_url};
use tokio::net::{TcpListener, TcpStream};

use super::*;

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

/// `n` replicas on `database_url`, each with its own data dir.
pub fn replicas(dir: &tempfile::TempDir, database_url: &str, n: usize) -> Vec<App> {
    replicas_through(dir, database_url, &[], n, &[])
}

/// `n` replicas of `database_url` with `extra` arguments, the i-th reaching
/// the database through `relays[i]` when given.
pub fn replicas_through(
    dir: &tempfile::TempDir,
    database_url: &str,
    relays: &[&Outage],
    n: usize,
    extra: &[&str],
) -> Vec<App> {
    (0..n)
        .map(|i| {
            let url = relays
                .get(i)
                .map_or(database_url.to_string(), |r| through(database_url, r.addr));
            let mut args = vec!["--database-url", url.as_str()];
            args.extend_from_slice(extra);
            spawn_with(&dir.path().join(format!("r{i}")), &args)
                .unwrap_or_else(|e| panic!("replica {i} did not start: {e}"))
        })
        .collect()
}

/// The replica whose /healthz says it leads.
pub async fn leader_index(apps: &[&App]) -> usize {
    crate::eventually(PATIENCE, || async {
        for (i, app) in apps.iter().enumerate() {
            if app.leads().await {
                return Some(i);
            }
        }
        None
    })
    .await
    .unwrap_or_else(|| panic!("no replica leads after {PATIENCE:?}"))
}

/// Connects `user` to pool `p` through `app`, expecting 200.
pub async fn connect(app: &App, user: &str) -> Value {
    app.ok(
        "POST",
        "/api/v1/hostPools/p/connect",
        Some(json!({"user": user})),
        200,
    )
    .await
}

/// Every `(user, host)` reconnects, through the replicas in turn, to the
/// same host (rule S1 across replicas).
pub async fn all_reconnect(apps: &[&App], placed: &[(String, String)]) {
    for (i, (user, host)) in placed.iter().enumerate() {
        let v = connect(apps[i % apps.len()], user).await;
        assert_eq!(v["sessionHost"].as_str(), Some(host.as_str()), "{user}");
        assert_eq!(v["reconnect"], true, "{user}");
    }
}

pub async fn db_client(db: &ScratchDatabase) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(db.url(), tokio_postgres::NoTls)
        .await
        .expect("connect to the test database");
    tokio::spawn(conn);
    client
}

/// Checks rule S6 from the database: no host over the limit, one session
/// per user and pool. Answers the number of sessions.
pub async fn check_invariants(client: &tokio_postgres::Client, pool: &str, limit: usize) -> usize {
    let sessions = sessions_in_db(client, pool).await;
    let mut per_host: HashMap<&str, usize> = HashMap::new();
    let mut per_user: HashMap<String, usize> = HashMap::new();
    for (_, host, user, _) in &sessions {
        *per_host.entry(host).or_default() += 1;
        *per_user.entry(user.to_ascii_lowercase()).or_default() += 1;
    }
    let over: Vec<_> = per_host.iter().filter(|(_, n)| **n > limit).collect();
    assert!(over.is_empty(), "hosts over the limit of {limit}: {over:?}");
    let twice: Vec<_> = per_user.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "users with two sessions: {twice:?}");
    sessions.len()
}

/// A TCP relay to PostgreSQL that the test can cut: cutting closes every
/// relayed connection and refuses new ones, as a database outage does.
pub struct Outage {
    pub addr: std::net::SocketAddr,
    up: Arc<AtomicBool>,
    cut: tokio::sync::watch::Sender<u64>,
}

impl Outage {
    pub async fn start(upstream: String) -> Outage {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let up = Arc::new(AtomicBool::new(true));
        let (cut, _) = tokio::sync::watch::channel(0u64);
        let (up2, cut2) = (up.clone(), cut.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                if !up2.load(Ordering::SeqCst) {
                    continue; // dropped: refused
                }
                let upstream = upstream.clone();
                let mut cut = cut2.subscribe();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Outage { addr, up, cut }
    }

    pub fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.cut.send_modify(|n| *n += 1);
    }

    pub fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

/// `url` with its `host:port` replaced by `addr`.
pub fn through(url: &str, addr: std::net::SocketAddr) -> String {
    let scheme_end = url.find("://").unwrap() + 3;
    let rest = &url[scheme_end..];
    let auth_end = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..auth_end];
    let userinfo = authority.rfind('@').map_or("", |i| &authority[..=i]);
    format!(
        "{}{userinfo}{addr}{}",
        &url[..scheme_end],
        &rest[auth_end..]
    )
}

/// The `host:port` of a postgres URL.
pub fn upstream_of(url: &str) -> String {
    let rest = &url[url.find("://").unwrap() + 3..];
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    let hostport = authority.rsplit('@').next().unwrap();
    if hostport.contains(':') {
        hostport.to_string()
    } else {
        format!("{hostport}:5432")
    }
}

/// Sends `signal` to `app`'s process (its own positive pid).
pub fn signal(app: &App, signal: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(app.child.id() as i32);
    nix::sys::signal::kill(pid, signal).expect("signal the replica");
}

/// The counter `name` in a replica's own metrics (0 when absent).
pub async fn counter(app: &App, name: &str) -> f64 {
    app.text("/metrics")
        .await
        .lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Every session row of `pool`: (id, host, user, state).
pub async fn sessions_in_db(
    client: &tokio_postgres::Client,
    pool: &str,
) -> Vec<(String, String, String, String)> {
    client
        .query(
            "SELECT id, host, record FROM sessions WHERE pool = $1",
            &[&pool],
        )
        .await
        .expect("read sessions")
        .into_iter()
        .map(|row| {
            let record: Value = serde_json::from_str(row.get(2)).expect("session record");
            (
                row.get(0),
                row.get(1),
                record["user"].as_str().expect("user").to_string(),
                record["state"].as_str().expect("state").to_string(),
            )
        })
        .collect()
}
