//! Real agents (`deskbroker agent` processes) against a real broker:
//! registration, heartbeats, sessions from a `--sessions-command`, drain,
//! a broker restart under running agents, an agent that stops and comes back.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::{App, eventually, set_heartbeat_timeout};

/// A running agent, killed when dropped.
struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Agent {
    /// Starts `deskbroker agent` for host `name`, whose sessions are the
    /// lines of `sessions_file`.
    fn start(app: &App, token: &str, name: &str, dir: &Path, sessions_file: &Path) -> Agent {
        let state = dir.join(format!("state-{name}"));
        let child = Command::new(crate::exe())
            .args([
                "agent",
                "--broker",
                &app.url,
                "--host-pool",
                "farm",
                "--registration-token",
                token,
            ])
            .args([
                "--name",
                name,
                "--address",
                &format!("10.9.0.{}:3389", name.len()),
            ])
            .args(["--interval", "5", "--state-dir"])
            .arg(&state)
            .arg("--sessions-command")
            .arg(format!("cat {}", sessions_file.display()))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(if std::env::var_os("TEST_LOG").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("start deskbroker agent");
        Agent(child)
    }

    /// SIGTERM, and the exit status.
    fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.0.id().to_string();
        assert!(Command::new("kill").arg(&pid).status().unwrap().success());
        self.0.wait().unwrap()
    }
}

fn sessions_file(dir: &Path, name: &str, lines: &[Value]) -> PathBuf {
    let path = dir.join(format!("sessions-{name}.jsonl"));
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

async fn host(app: &App, name: &str) -> Value {
    app.call(
        "GET",
        &format!("/api/v1/hostPools/farm/sessionHosts/{name}"),
        None,
    )
    .await
    .1
}

/// Patience for anything that needs a heartbeat (interval 5 s): a failure
/// bound for a loaded machine, not a speed.
const BEAT: Duration = Duration::from_secs(60);

/// The pool's heartbeat timeout while agents run: well above their 5-s
/// interval, so that a host whose heartbeat is late on a loaded machine
/// does not flap to Unavailable.
const HEARTBEAT_TIMEOUT_SECONDS: u32 = 60;

#[tokio::test]
async fn agents_register_report_and_survive_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    app.ok("PUT", "/api/v1/hostPools/farm",
        Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst", "maxSessionLimit": 10,
                    "heartbeatTimeoutSeconds": HEARTBEAT_TIMEOUT_SECONDS})), 201).await;
    let token = app
        .ok(
            "POST",
            "/api/v1/hostPools/farm/registrationToken",
            Some(json!({"maxHosts": 2})),
            200,
        )
        .await["token"]
        .as_str()
        .unwrap()
        .to_string();
    // h1's console has carol logged on, whom the broker never placed.
    let h1_sessions = sessions_file(
        dir.path(),
        "h1",
        &[json!({"user": "carol@contoso.com", "state": "Active"})],
    );
    let h2_sessions = sessions_file(dir.path(), "h2", &[]);
    let a1 = Agent::start(&app, &token, "h1", dir.path(), &h1_sessions);
    // h2 registers once h1 has: query order (registration order) is then
    // h1, h2, which the DepthFirst placements below rely on.
    let h1_registered = eventually(BEAT, || async {
        app.call("GET", "/api/v1/hostPools/farm/sessionHosts/h1", None)
            .await
            .0
            == 200
    })
    .await;
    assert!(h1_registered, "h1's agent registered");
    let _a2 = Agent::start(&app, &token, "h2", dir.path(), &h2_sessions);

    // Both register, and heartbeats bring metrics and sessions.
    let up = eventually(BEAT, || async {
        let (a, b) = (host(&app, "h1").await, host(&app, "h2").await);
        a["lastHeartBeat"].is_string() && b["lastHeartBeat"].is_string() && a["sessions"] == 1
    })
    .await;
    assert!(
        up,
        "both agents registered and h1 reported carol: {} {}",
        host(&app, "h1").await,
        host(&app, "h2").await
    );
    let h1 = host(&app, "h1").await;
    let cpu = h1["metrics"]["cpuPercent"].as_f64().expect("cpu reported");
    assert!((0.0..=100.0).contains(&cpu), "{h1}");
    // The broker hears of each host from the agent on it, which scrapes
    // nothing.
    for h in [&h1, &host(&app, "h2").await] {
        assert_eq!(h["heartbeatSource"], "agent", "{h}");
        assert_eq!(h["scrapeError"], Value::Null, "{h}");
    }
    assert!(
        h1["metrics"]["memoryPercent"]
            .as_f64()
            .is_some_and(|m| m > 0.0 && m <= 100.0),
        "{h1}"
    );
    // Carol was adopted, unconfirmed (S8): her connect is placed by the
    // rules, not by h1's word — DepthFirst, both hosts empty once the
    // adoption is dropped: h1, first in query order, as a new session,
    // which h1's next heartbeat then confirms.
    let v = app
        .ok(
            "POST",
            "/api/v1/hostPools/farm/connect",
            Some(json!({"user": "carol@contoso.com"})),
            200,
        )
        .await;
    assert_eq!(
        (v["sessionHost"].clone(), v["reconnect"].clone()),
        (json!("h1"), json!(false))
    );

    // Drain h1 from the CLI: a new user goes to h2 although h1 has more
    // sessions (DepthFirst), and the agents' heartbeats do not undo it.
    let (ok, _, err) = app.cli(&[
        "sessionhost",
        "update",
        "--host-pool",
        "farm",
        "--name",
        "h1",
        "--allow-new-session",
        "false",
    ]);
    assert!(ok, "{err}");
    let dave = app
        .ok(
            "POST",
            "/api/v1/hostPools/farm/connect",
            Some(json!({"user": "dave@contoso.com"})),
            200,
        )
        .await;
    assert_eq!(dave["sessionHost"], "h2");
    // h2's agent confirms dave: Pending → Active.
    sessions_file(
        dir.path(),
        "h2",
        &[json!({"user": "dave@contoso.com", "state": "Active"})],
    );
    let dave_id = dave["sessionId"].as_str().unwrap().to_string();
    let active = eventually(BEAT, || async {
        app.call(
            "GET",
            &format!("/api/v1/hostPools/farm/userSessions/{dave_id}"),
            None,
        )
        .await
        .1["sessionState"]
            == "Active"
    })
    .await;
    assert!(active, "dave confirmed Active by his host");
    assert_eq!(
        host(&app, "h1").await["allowNewSession"],
        false,
        "drain holds under heartbeats"
    );

    // The broker is killed and restarted while the agents run: they carry
    // on with their saved credentials.
    let data = app.data_dir.clone();
    let listen = app.listen_addr();
    app.kill9();
    let app = App::spawn_with(&data, &listen, &[]).0;
    let before = host(&app, "h2").await["lastHeartBeat"].clone();
    let resumed = eventually(BEAT, || async {
        host(&app, "h2").await["lastHeartBeat"] != before
    })
    .await;
    assert!(resumed, "agents heartbeat the restarted broker");

    // Carol logs off on h1: her session ends at the next heartbeat.
    sessions_file(dir.path(), "h1", &[]);
    let ended = eventually(BEAT, || async { host(&app, "h1").await["sessions"] == 0 }).await;
    assert!(ended, "a session the host no longer has ends");

    // h1's agent stops cleanly; h1 becomes Unavailable (the shortest
    // timeout, 5 s, so as not to wait a minute; h2 may flap meanwhile and
    // is not looked at), then Available again when an agent runs once more
    // (same state dir, no new token needed).
    let status = a1.stop();
    assert!(
        status.success(),
        "the agent stops cleanly on SIGTERM: {status}"
    );
    set_heartbeat_timeout(&app, "farm", 5).await;
    let down = eventually(BEAT, || async {
        host(&app, "h1").await["status"] == "Unavailable"
    })
    .await;
    assert!(down, "a silent host becomes Unavailable (S7)");
    set_heartbeat_timeout(&app, "farm", HEARTBEAT_TIMEOUT_SECONDS).await;
    let _a1 = Agent::start(
        &app,
        "dbr_not-needed-any-more",
        "h1",
        dir.path(),
        &h1_sessions,
    );
    let back = eventually(BEAT, || async {
        host(&app, "h1").await["status"] == "Available"
    })
    .await;
    assert!(back, "it returns on its next heartbeat");
    let hosts = app
        .ok("GET", "/api/v1/hostPools/farm/sessionHosts", None, 200)
        .await;
    assert_eq!(
        hosts["value"].as_array().unwrap().len(),
        2,
        "no host registered twice"
    );
}

/// Runs `deskbroker agent --config CONFIG` until it exits, and answers
/// its status and standard error. An agent that does not exit (it took the
/// file and went on retrying an absent broker) is killed and fails the test.
fn agent_with_config(config: &Path) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(crate::exe())
        .args(["agent", "--config"])
        .arg(config)
        .env_remove("DESKBROKER_REGISTRATION_TOKEN")
        .env_remove("DESKBROKER_URL")
        .env_remove("DESKBROKER_HOST_POOL")
        .env_remove("DESKBROKER_AGENT_CONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start deskbroker agent");
    let Some(status) = crate::eventually_blocking(BEAT, || child.try_wait().unwrap()) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the agent took {} and kept running", config.display());
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    (status, stderr)
}

fn write_mode(path: &Path, text: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// As `serve` with its secret files, the agent refuses to start with a
/// secret other users may read: its config file holding a token, a token
/// file, an exporter's password file; the error names the file and mode.
#[test]
fn the_agent_refuses_secrets_other_users_may_read() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    // Nothing listens there: an agent that starts retries it forever.
    let head = format!(
        "broker = \"http://127.0.0.1:9\"\nhost_pool = \"farm\"\nname = \"h1\"\n\
         address = \"10.9.0.1:3389\"\nstate_dir = {:?}\n",
        state.display().to_string()
    );
    let said = |setting: &str, path: &Path, mode: &str, what: &str| {
        format!(
            "error: {setting} {} has mode {mode}: other users may read {what}.",
            path.display()
        )
    };

    let config = dir.path().join("agent.toml");
    write_mode(
        &config,
        &format!("{head}registration_token = \"dbr_inline\"\n"),
        0o644,
    );
    let (status, stderr) = agent_with_config(&config);
    assert!(!status.success());
    let want = said(
        "--config",
        &config,
        "644",
        "the registration token it holds",
    );
    assert!(stderr.contains(&want), "{stderr}");

    let token = dir.path().join("farm.token");
    write_mode(&token, "dbr_from_file\n", 0o640);
    write_mode(
        &config,
        &format!(
            "{head}registration_token_file = {:?}\n",
            token.display().to_string()
        ),
        0o644,
    );
    let (status, stderr) = agent_with_config(&config);
    assert!(!status.success());
    let want = said(
        "registration_token_file",
        &token,
        "640",
        "the registration token",
    );
    assert!(stderr.contains(&want), "{stderr}");

    let password = dir.path().join("exporter.password");
    write_mode(&password, "s3cret\n", 0o604);
    write_mode(
        &config,
        &format!(
            "broker = \"http://127.0.0.1:9\"\nhost_pool = \"win\"\nstate_dir = {:?}\n\
             [windows_exporter]\nusername = \"deskbroker\"\npassword_file = {:?}\n\
             [[windows_host]]\nname = \"rdsh01\"\naddress = \"10.0.0.11:3389\"\n\
             metrics_url = \"https://10.0.0.11:9182/metrics\"\n",
            state.display().to_string(),
            password.display().to_string()
        ),
        0o644,
    );
    let (status, stderr) = agent_with_config(&config);
    assert!(!status.success());
    let want = said("password_file", &password, "604", "the exporter's password");
    assert!(stderr.contains(&want), "{stderr}");
    assert!(!state.exists(), "the agent started: {stderr}");
}

/// `deskbroker agent --help` names the flag that reads the registration
/// token from a file (and its file key), and an agent given only that
/// flag registers with the token in the file: the token never appears on
/// its command line.
#[tokio::test]
async fn the_agent_reads_its_registration_token_from_the_file_its_help_names() {
    let help = Command::new(crate::exe())
        .args(["agent", "--help"])
        .output()
        .expect("run deskbroker agent --help");
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--registration-token-file <FILE>")
            && help.contains("registration_token_file"),
        "{help}"
    );

    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm",
        Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"})),
        201,
    )
    .await;
    let token = app
        .ok(
            "POST",
            "/api/v1/hostPools/farm/registrationToken",
            Some(json!({})),
            200,
        )
        .await["token"]
        .as_str()
        .unwrap()
        .to_string();
    let token_file = dir.path().join("farm.token");
    write_mode(&token_file, &format!("{token}\n"), 0o600);
    let sessions = sessions_file(dir.path(), "h1", &[]);
    // The image, as an image build writes it into os-release (rule U1).
    let os_release = dir.path().join("os-release");
    std::fs::write(
        &os_release,
        "ID=debian\nVERSION_ID=\"12\"\nIMAGE_VERSION=farm-1\n",
    )
    .unwrap();
    let child = Command::new(crate::exe())
        .args(["agent", "--broker", &app.url, "--host-pool", "farm"])
        .arg("--registration-token-file")
        .arg(&token_file)
        .arg("--image-version-file")
        .arg(&os_release)
        .args([
            "--name",
            "h1",
            "--address",
            "10.9.0.1:3389",
            "--dns-name",
            "H1.Contoso.com.",
            "--interval",
            "5",
        ])
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--sessions-command")
        .arg(format!("cat {}", sessions.display()))
        .env_remove("DESKBROKER_REGISTRATION_TOKEN")
        .env_remove("DESKBROKER_AGENT_CONFIG")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start deskbroker agent");
    let _agent = Agent(child);
    let registered = eventually(BEAT, || async {
        host(&app, "h1").await["status"] == "Available"
    })
    .await;
    assert!(registered, "{}", host(&app, "h1").await);
    // Its DNS name, as the agent was given it, for host-named connections
    // (rule AD4), in one case and without the root's dot.
    assert_eq!(host(&app, "h1").await["dnsName"], "h1.contoso.com");
    // Its image, read from the file on each heartbeat: reimaged in place,
    // it reports the new one, and is listed by it.
    let reported = eventually(BEAT, || async {
        host(&app, "h1").await["imageVersion"] == "farm-1"
    })
    .await;
    assert!(reported, "{}", host(&app, "h1").await);
    std::fs::write(&os_release, "ID=debian\nIMAGE_VERSION=farm-2\n").unwrap();
    let reimaged = eventually(BEAT, || async {
        host(&app, "h1").await["imageVersion"] == "farm-2"
    })
    .await;
    assert!(reimaged, "{}", host(&app, "h1").await);
    let (ok, out, err) = app.cli(&[
        "sessionhost",
        "list",
        "--host-pool",
        "farm",
        "--image-version",
        "farm-2",
    ]);
    assert!(
        ok && out.contains("h1") && out.contains("farm-2"),
        "{out}{err}"
    );
    let (ok, out, err) = app.cli(&[
        "sessionhost",
        "list",
        "--host-pool",
        "farm",
        "--image-version",
        "farm-1",
    ]);
    assert!(ok && !out.contains("h1"), "{out}{err}");
}
