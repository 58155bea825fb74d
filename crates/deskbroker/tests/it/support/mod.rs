//! What the end-to-end tests share, each thing once: how long they wait
//! ([`PATIENCE`], with [`eventually`] and [`eventually_blocking`]), the
//! broker they start ([`App`], whose spawners read its ready line), and the
//! fixtures more than one file uses (`programs`: xrdp, Xvfb, xfreerdp;
//! `wire`: RDP bytes and fake hosts; `web`: the browser's door; `pg`:
//! PostgreSQL and replicas; `browser`: the web console in chromium;
//! `desktop`: a real desktop behind xrdp; `domain`: a Samba Active
//! Directory domain controller). The other files each test one
//! area and export nothing to each other.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub mod browser;
pub mod desktop;
pub mod domain;
pub mod pg;
pub mod programs;
pub mod web;
pub mod wire;

pub use programs::*;
// Waiting with a deadline, secret files and free ports, shared with the
// test domain controller (`domain`).
pub use testdomain::{Holds, PATIENCE, POLL, eventually_blocking, free_port, write_secret};

pub use deskbroker::ready::Ready;
use serde_json::{Value, json};

/// The admin token of every test broker: random hex, as `openssl rand -hex
/// 32` makes one (`serve` refuses a token that reads as words or patterns).
pub const TOKEN: &str = "8d3f0a61c9e24b7f5a1e6c08d2b94f37e5a0c71b9d46f28e3c5b0a97d1e64f2c";

/// Registers `name` in `pool` at `address` with a fresh registration
/// token, as its agent does; answers its host credential.
pub async fn enroll(app: &App, pool: &str, name: &str, address: &str) -> String {
    let t = app
        .ok(
            "POST",
            &format!("/api/v1/hostPools/{pool}/registrationToken"),
            Some(serde_json::json!({})),
            200,
        )
        .await["token"]
        .as_str()
        .expect("token")
        .to_string();
    let (status, v) = app
        .call_with(
            "POST",
            "/api/v1/register",
            Some(
                serde_json::json!({"token": t, "hostPool": pool, "name": name, "address": address}),
            ),
            None,
        )
        .await;
    assert_eq!(status, 201, "{v}");
    v["hostCredential"]
        .as_str()
        .expect("credential")
        .to_string()
}

/// The secret of the signing key of the broker whose data directory is
/// `data_dir`, read from its store (what only the broker knows).
pub async fn signing_secret(data_dir: &Path) -> String {
    use store::Store;
    let store = store::SqliteStore::open(data_dir).expect("open the broker's store");
    let keys = store.load().await.expect("load").signing_keys;
    keys.expect("the broker made a signing key").keys[0]
        .secret
        .clone()
}

/// How long `deskbroker serve` may take to print that it listens: it opens
/// its store and binds in well under a second; this bounds a stuck start.
pub const SERVE_START: Duration = Duration::from_secs(120);

/// The ready line of `child` (`serve` or `gateway`, its stdout piped) and
/// the lines it printed before it; `Err` says how it failed to print it
/// within `within`.
pub fn ready_line(child: &mut Child, within: Duration) -> Result<(Ready, Vec<String>), String> {
    Ready::wait(child.stdout.take().expect("stdout is piped"), within)
}

/// The first `wanted` lines `child` prints on its (piped) stdout, read on a
/// thread of its own, so that a child that never prints them fails the
/// test instead of hanging it; `Err` says how it failed. The thread then
/// keeps reading, so that the child never writes to a closed pipe.
pub fn first_lines(
    child: &mut Child,
    wanted: usize,
    within: Duration,
) -> Result<Vec<String>, String> {
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout is piped"));
    let (first, lines_rx) = std::sync::mpsc::sync_channel(1);
    std::thread::spawn(move || {
        let mut lines = Vec::new();
        while lines.len() < wanted {
            let mut line = String::new();
            match stdout.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => lines.push(line.trim().to_string()),
            }
        }
        let _ = first.send(lines);
        std::io::copy(&mut stdout, &mut std::io::sink())
    });
    match lines_rx.recv_timeout(within) {
        Ok(lines) if lines.len() == wanted => Ok(lines),
        Ok(lines) => Err(format!("stopped printing after {lines:?}")),
        Err(_) => Err(format!(
            "did not print its first {wanted} line(s) within {within:?}"
        )),
    }
}

/// A running broker.
pub struct App {
    pub url: String,
    /// Its ready line: the addresses of its listeners.
    pub ready: Ready,
    pub http: reqwest::Client,
    pub child: Child,
    pub data_dir: PathBuf,
}

pub fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_deskbroker")
}

impl App {
    /// Starts a broker on a new temporary data dir.
    pub fn spawn(dir: &tempfile::TempDir) -> App {
        App::spawn_on(&dir.path().join("data"))
    }

    /// Starts a broker on `data_dir` (an existing one after a restart).
    pub fn spawn_on(data_dir: &Path) -> App {
        App::spawn_with(data_dir, "127.0.0.1:0", &[]).0
    }

    /// Starts a broker on `data_dir` listening on `listen` (the same port
    /// again after a restart, for clients that keep their URL), with extra
    /// `serve` flags. Answers the app (its listeners' addresses in
    /// `ready`) and the lines serve printed before its ready line.
    /// Starts a broker on `data_dir` with its RDP front door on a free port,
    /// `default_pool` as the door's default pool, and `extra` flags;
    /// answers the app and the front door's address.
    pub fn spawn_with_front_door(
        data_dir: &Path,
        default_pool: &str,
        extra: &[&str],
    ) -> (App, String) {
        let mut args = vec![
            "--rdp-listen",
            "127.0.0.1:0",
            "--rdp-default-pool",
            default_pool,
        ];
        args.extend_from_slice(extra);
        let (app, _) = App::spawn_with(data_dir, "127.0.0.1:0", &args);
        let rdp = app.ready.rdp_addr().to_string();
        (app, rdp)
    }

    /// Starts a broker on `data_dir` with its RD Gateway on a free port
    /// (where the browser's `/web/rdp` is served too; its TLS the data
    /// dir's self-signed certificate, as the API listens on loopback), and
    /// `extra` flags; answers the app and the gateway's address.
    pub fn spawn_with_rd_gateway(data_dir: &Path, extra: &[&str]) -> (App, String) {
        let mut args = vec!["--gateway-listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let (app, _) = App::spawn_with(data_dir, "127.0.0.1:0", &args);
        let gateway = app.ready.gateway_addr().to_string();
        (app, gateway)
    }

    pub fn spawn_with(data_dir: &Path, listen: &str, extra: &[&str]) -> (App, Vec<String>) {
        App::spawn_opts(data_dir, listen, extra, Some(TOKEN))
    }

    /// Starts a broker on `data_dir` without an admin token given, as a
    /// first run on a laptop: serve uses (or writes) `data_dir/admin.token`.
    pub fn spawn_without_token(data_dir: &Path) -> App {
        App::spawn_opts(data_dir, "127.0.0.1:0", &[], None).0
    }

    /// `spawn_with`, with `DESKBROKER_ADMIN_TOKEN` set to `admin_token` or
    /// unset.
    pub fn spawn_opts(
        data_dir: &Path,
        listen: &str,
        extra: &[&str],
        admin_token: Option<&str>,
    ) -> (App, Vec<String>) {
        let mut command = Command::new(exe());
        match admin_token {
            Some(token) => command.env("DESKBROKER_ADMIN_TOKEN", token),
            None => command.env_remove("DESKBROKER_ADMIN_TOKEN"),
        };
        App::spawn_command(command, data_dir, listen, extra)
    }

    /// Starts `command` (the binary, with its environment and user set)
    /// as `serve` on `data_dir`, listening on `listen`, with extra flags.
    pub fn spawn_command(
        mut command: Command,
        data_dir: &Path,
        listen: &str,
        extra: &[&str],
    ) -> (App, Vec<String>) {
        // reqwest's TLS needs a process-wide crypto provider (see
        // api::tls::install_default_provider), even for plain HTTP clients.
        ::api::tls::install_default_provider();
        command
            .args(["serve", "--listen", listen, "--data-dir"])
            .arg(data_dir)
            .args(extra);
        let mut child = command
            .env(
                "RUST_LOG",
                if std::env::var_os("TEST_LOG").is_some() {
                    "info"
                } else {
                    "warn"
                },
            )
            .stdout(Stdio::piped())
            .stderr(if std::env::var_os("TEST_LOG").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("start deskbroker serve");
        let (ready, lines) = ready_line(&mut child, SERVE_START).unwrap_or_else(|e| {
            let _ = child.kill();
            let _ = child.wait();
            panic!("deskbroker serve {e}")
        });
        let url = ready.api_url().to_string();
        let app = App {
            url,
            ready,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("client"),
            child,
            data_dir: data_dir.to_path_buf(),
        };
        (app, lines)
    }

    /// The `host:port` this broker listens on.
    pub fn listen_addr(&self) -> String {
        self.url.trim_start_matches("http://").to_string()
    }

    pub fn kill9(mut self) {
        self.child.kill().expect("kill -9");
        self.child.wait().expect("reap");
    }

    /// A request with the admin token; answers (status, JSON or Null).
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call_with(method, path, body, Some(TOKEN)).await
    }

    pub async fn call_with(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        token: Option<&str>,
    ) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut req = self.http.request(method, format!("{}{}", self.url, path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("body");
        let value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        (status, value)
    }

    /// Like `call`, but asserts the status.
    pub async fn ok(&self, method: &str, path: &str, body: Option<Value>, want: u16) -> Value {
        let (status, v) = self.call(method, path, body).await;
        assert_eq!(status, want, "{method} {path} answered {status}: {v}");
        v
    }

    /// `GET` of a text answer (`/metrics`, an `.rdp` file) with the admin
    /// token, asserting 200.
    pub async fn text(&self, path: &str) -> String {
        match self.ok("GET", path, None, 200).await {
            Value::String(text) => text,
            other => other.to_string(),
        }
    }

    /// What `/healthz` says now (None while it does not answer JSON).
    pub async fn health(&self) -> Option<::api::types::Health> {
        let r = self
            .http
            .get(format!("{}/healthz", self.url))
            .send()
            .await
            .ok()?;
        r.json().await.ok()
    }

    /// Whether `/healthz` says this replica leads with a working store.
    pub async fn leads(&self) -> bool {
        self.health()
            .await
            .is_some_and(|h| h.status == "ok" && h.role == "leader")
    }

    /// Asserts that a request is refused with `status` and the contract's
    /// error `code`; answers the error body.
    pub async fn refused(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        status: u16,
        code: &str,
    ) -> Value {
        let (got, v) = self.call(method, path, body).await;
        assert_eq!(
            (got, v["error"]["code"].as_str()),
            (status, Some(code)),
            "{method} {path}: {v}"
        );
        v
    }

    /// Runs the CLI against this broker; answers (exit success, stdout, stderr).
    pub fn cli(&self, args: &[&str]) -> (bool, String, String) {
        let out = Command::new(exe())
            .args(args)
            .env("DESKBROKER_URL", &self.url)
            .env("DESKBROKER_TOKEN", TOKEN)
            .output()
            .expect("run the CLI");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Connects `user` to `pool` through `app` and asserts rule S1's answer: a
/// reconnect to the session `id` on `host`.
pub async fn assert_reconnects(app: &App, pool: &str, user: &str, id: &str, host: &str) {
    let v = app
        .ok(
            "POST",
            &format!("/api/v1/hostPools/{pool}/connect"),
            Some(serde_json::json!({ "user": user })),
            200,
        )
        .await;
    assert_eq!(
        (
            &v["reconnect"],
            v["sessionId"].as_str(),
            v["sessionHost"].as_str()
        ),
        (&Value::Bool(true), Some(id), Some(host)),
        "{user}"
    );
}

/// Creates a pooled pool with `hosts` hosts h1..hN.
pub async fn pool_with_hosts(app: &App, pool: &str, lb: &str, limit: u32, hosts: usize) {
    app.ok(
        "PUT",
        &format!("/api/v1/hostPools/{pool}"),
        Some(serde_json::json!({"hostPoolType": "Pooled", "loadBalancerType": lb, "maxSessionLimit": limit})),
        201,
    )
    .await;
    for i in 1..=hosts {
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/{pool}/sessionHosts/h{i}"),
            Some(serde_json::json!({"address": format!("10.0.0.{i}:3389")})),
            201,
        )
        .await;
    }
}

/// The broker's metrics once `ready` holds for them, or as they stand after
/// a minute: a connection's counters are updated just after it is closed,
/// so a test that saw the close may otherwise read them a moment too
/// early; a held connection's gauge moves when a host starts.
pub async fn metrics_when(app: &App, ready: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = app.text("/metrics").await;
        if ready(&text) || Instant::now() >= deadline {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs `check` every 50 ms until what it answers holds or `timeout`
/// passes; answers its last answer (`true`, `Some`, `Ok` when it held).
/// Tests poll with this, never with fixed sleeps.
pub async fn eventually<T, F, Fut>(timeout: Duration, mut check: F) -> T
where
    T: Holds,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let answer = check().await;
        if answer.holds() || Instant::now() >= deadline {
            return answer;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The user's one session in `pool`: (host, state), if any.
pub async fn session_of(app: &App, pool: &str, user: &str) -> Option<(String, String)> {
    let v = app
        .ok(
            "GET",
            &format!("/api/v1/hostPools/{pool}/userSessions?user={user}"),
            None,
            200,
        )
        .await;
    let s = v["value"].as_array()?.first()?.clone();
    Some((
        s["sessionHost"].as_str()?.to_string(),
        s["sessionState"].as_str()?.to_string(),
    ))
}

/// Waits until `user` has a session on `host` in `state`.
pub async fn wait_session(app: &App, pool: &str, user: &str, host: &str, state: &str) {
    let want = Some((host.to_string(), state.to_string()));
    let reached = eventually(PATIENCE, || async {
        session_of(app, pool, user).await == want
    })
    .await;
    assert!(
        reached,
        "{user} in {pool}: expected {want:?}, have {:?}",
        session_of(app, pool, user).await
    );
}

/// Every session of `pool`, as the API lists them.
pub async fn sessions(app: &App, pool: &str) -> Vec<Value> {
    let v = app
        .ok(
            "GET",
            &format!("/api/v1/hostPools/{pool}/userSessions"),
            None,
            200,
        )
        .await;
    v["value"].as_array().cloned().unwrap_or_default()
}

/// The users with a session in `pool` and their states, sorted.
pub async fn states(app: &App, pool: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = sessions(app, pool)
        .await
        .iter()
        .map(|s| {
            (
                s["userPrincipalName"].as_str().unwrap_or("").to_string(),
                s["sessionState"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

pub async fn wait_states(app: &App, pool: &str, want: &[(&str, &str)]) {
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(u, s)| (u.to_string(), s.to_string()))
        .collect();
    let reached = eventually(PATIENCE, || async { states(app, pool).await == want }).await;
    assert!(
        reached,
        "{pool}: want {want:?}, have {:?}",
        states(app, pool).await
    );
}

/// Creates a credential with the admin token; answers its token (also
/// for the other tests of credentials).
pub async fn credential(app: &App, name: &str, role: &str, pools: &[&str]) -> String {
    let v = app
        .ok(
            "POST",
            "/api/v1/credentials",
            Some(json!({"name": name, "role": role, "hostPools": pools})),
            201,
        )
        .await;
    assert_eq!(v["role"], role, "{v}");
    let token = v["token"].as_str().expect("token").to_string();
    assert!(
        token.starts_with("dbc_") && token.len() == 4 + 64,
        "{token}"
    );
    token
}

/// A command that appends the action and the host to `log` (also for the
/// other power tests).
pub fn append_to(log: &Path) -> String {
    format!(
        "echo \"$DESKBROKER_ACTION $DESKBROKER_HOST\" >> '{}'",
        log.display()
    )
}

/// Patience for anything that needs a heartbeat or two (interval 5 s): a
/// failure bound for a loaded machine, not a speed.
pub const BEAT: Duration = Duration::from_secs(90);

/// Sets pool `pool`'s heartbeat timeout (rule H3) to `seconds`.
pub async fn set_heartbeat_timeout(app: &App, pool: &str, seconds: u32) {
    app.ok(
        "PATCH",
        &format!("/api/v1/hostPools/{pool}"),
        Some(json!({"heartbeatTimeoutSeconds": seconds})),
        200,
    )
    .await;
}

/// The power state the broker records for `host` of `pool`.
pub async fn power_state(app: &App, pool: &str, host: &str) -> String {
    app.ok(
        "GET",
        &format!("/api/v1/hostPools/{pool}/sessionHosts/{host}"),
        None,
        200,
    )
    .await["powerState"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// What was acknowledged before a crash: (user, session id, host).
pub type Placed = Vec<(String, serde_json::Value, serde_json::Value)>;

/// Before the crash: a pool of 10 hosts (limit 50, h3 drained) and 100
/// acknowledged connects. Shared by every store's kill -9 test.
pub async fn acknowledge_before_crash(app: &App) -> Placed {
    pool_with_hosts(app, "p", "BreadthFirst", 50, 10).await;
    app.ok(
        "PATCH",
        "/api/v1/hostPools/p/sessionHosts/h3",
        Some(json!({"allowNewSession": false})),
        200,
    )
    .await;
    let mut placed = Vec::new();
    for i in 0..100 {
        let v = app
            .ok(
                "POST",
                "/api/v1/hostPools/p/connect",
                Some(json!({"user": format!("u{i}")})),
                200,
            )
            .await;
        placed.push((
            format!("u{i}"),
            v["sessionId"].clone(),
            v["sessionHost"].clone(),
        ));
    }
    placed
}

/// After the restart: settings, drain and every session are back, and
/// each user reconnects to the same session on the same host (S1, S5).
pub async fn check_after_crash(app: &App, placed: Placed) {
    let pool = app.ok("GET", "/api/v1/hostPools/p", None, 200).await;
    assert_eq!(pool["maxSessionLimit"], 50);
    let h3 = app
        .ok("GET", "/api/v1/hostPools/p/sessionHosts/h3", None, 200)
        .await;
    assert_eq!(h3["allowNewSession"], false, "drain survives");
    let sessions = app
        .ok("GET", "/api/v1/hostPools/p/userSessions", None, 200)
        .await;
    assert_eq!(sessions["value"].as_array().unwrap().len(), 100);
    for (user, id, host) in placed {
        let v = app
            .ok(
                "POST",
                "/api/v1/hostPools/p/connect",
                Some(json!({"user": user})),
                200,
            )
            .await;
        assert_eq!(v["reconnect"], true, "{v}");
        assert_eq!(v["sessionId"], id);
        assert_eq!(v["sessionHost"], host);
    }
}

/// A 1×1 PNG (its header, one IDAT, IEND): an application's icon.
pub const PNG_1X1: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];
