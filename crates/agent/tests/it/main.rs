//! The agent's loop, run in-process against a fake broker on loopback that
//! speaks the register/heartbeat contract: registration and the saved
//! credential, heartbeats with metrics, load index and sessions, a revoked
//! credential, an unreachable or failing broker, refused heartbeats, and a
//! prompt stop; and the documented commands run as written (doc_examples).
//! (End-to-end tests against the real broker live with the
//! binary, in crates/deskbroker/tests.)

mod doc_examples;
mod fake_broker;
mod windows;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;

use agent::config::HostPolicy;
use agent::sessions::SessionsSource;
use agent::{AgentError, Config};
use fake_broker::FakeBroker;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long a test waits for something the agent should do within a second
/// or two; only reached when the test fails.
const PATIENCE: Duration = Duration::from_secs(15);

fn config(broker: &str, state_dir: &Path) -> Config {
    Config {
        broker: broker.parse().unwrap(),
        tls: Default::default(),
        host_pool: "farm".into(),
        registration_token: Some("regtoken".into()),
        name: "h7".into(),
        address: "10.0.0.7:3389".into(),
        dns_name: Some("h7.contoso.com".into()),
        state_dir: state_dir.to_path_buf(),
        // Below the 5 s users may set: tests build the Config directly.
        interval: Duration::from_millis(200),
        load_script: Some("echo 42".into()),
        image_version: Some(agent::image_version::ImageVersionSource::Command(
            "echo farm-2026.12; echo ignored".into(),
        )),
        sessions: SessionsSource::Command(
            r#"printf '%s\n' '{"user": "alice@contoso.com", "state": "Active"}' 'junk'"#.into(),
        ),
        capabilities: Some(vec!["rdp".into(), "gpu".into()]),
        policy: HostPolicy {
            load_index_threshold: Some(80),
            connecting_session_threshold: None,
        },
        message_command: None,
        logoff_command: None,
    }
}

/// A running agent and the means to stop it.
struct Running {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), AgentError>>,
}

/// Tests are quiet unless `TEST_LOG` is set (e.g. `TEST_LOG=debug`).
fn init_logs() {
    if let Ok(level) = std::env::var("TEST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(level))
            .with_test_writer()
            .try_init();
    }
}

fn start(config: Config) -> Running {
    init_logs();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(agent::run(config, async {
        let _ = stopped.await;
    }));
    Running { stop, task }
}

impl Running {
    /// Stops the agent and checks that it returns `Ok` promptly.
    async fn stop(self) {
        let _ = self.stop.send(());
        let result = tokio::time::timeout(Duration::from_secs(2), self.task)
            .await
            .expect("the agent stops within 2 s")
            .expect("the agent task does not panic");
        result.expect("the agent stops cleanly");
    }
}

#[tokio::test]
async fn registers_saves_the_credential_and_sends_heartbeats() {
    let broker = FakeBroker::start().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = start(config(&broker.url(), dir.path()));

    broker
        .wait_for("two heartbeats", |r| r.heartbeats().len() >= 2)
        .await;
    agent.stop().await;

    let records = broker.records();
    let register = &records.registers()[0];
    assert_eq!(
        register.authorization, None,
        "the token goes in the body only"
    );
    assert_eq!(
        register.body,
        json!({
            "token": "regtoken", "hostPool": "farm", "name": "h7",
            "address": "10.0.0.7:3389", "capabilities": ["rdp", "gpu"],
            "policy": {"loadIndexThreshold": 80, "connectingSessionThreshold": null},
            "dnsName": "h7.contoso.com"
        })
    );

    let hb = &records.heartbeats()[0];
    assert_eq!(hb.path, "/api/v1/hostPools/farm/sessionHosts/h7/heartbeat");
    assert_eq!(hb.authorization.as_deref(), Some("Bearer dbh_1"));
    let body = &hb.body;
    for metric in [
        "cpuPercent",
        "memoryPercent",
        "diskQueueLength",
        "diskReadLatencyMs",
        "diskWriteLatencyMs",
    ] {
        let v = body[metric].as_f64();
        assert!(v.is_some_and(|v| v >= 0.0), "{metric} in {body}");
    }
    assert_eq!(body["customLoadIndex"], json!(42));
    assert_eq!(body["imageVersion"], json!("farm-2026.12"));
    assert_eq!(
        body["sessions"],
        json!([{"user": "alice@contoso.com", "state": "Active"}])
    );
    assert_eq!(
        body["policy"],
        json!({"loadIndexThreshold": 80, "connectingSessionThreshold": null})
    );

    let state_file = dir.path().join("agent.json");
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(&state_file).unwrap()).unwrap();
    assert_eq!(
        saved,
        json!({"broker": broker.url() + "/", "hostPool": "farm", "name": "h7", "hostCredential": "dbh_1"})
    );
    let mode = std::fs::metadata(&state_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[tokio::test]
async fn a_restart_uses_the_saved_credential_without_registering() {
    let broker = FakeBroker::start().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = start(config(&broker.url(), dir.path()));
    broker
        .wait_for("a heartbeat", |r| !r.heartbeats().is_empty())
        .await;
    agent.stop().await;

    // Even without a token: the credential is all the agent needs.
    let mut again = config(&broker.url(), dir.path());
    again.registration_token = None;
    let before = broker.records().heartbeats().len();
    let agent = start(again);
    broker
        .wait_for("a heartbeat after the restart", |r| {
            r.heartbeats().len() > before
        })
        .await;
    agent.stop().await;
    let records = broker.records();
    assert_eq!(records.registers().len(), 1);
    assert!(
        records
            .heartbeats()
            .iter()
            .all(|h| h.authorization.as_deref() == Some("Bearer dbh_1"))
    );
}

#[tokio::test]
async fn a_state_file_of_another_pool_or_name_means_registering() {
    let broker = FakeBroker::start().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = start(config(&broker.url(), dir.path()));
    broker
        .wait_for("a heartbeat", |r| !r.heartbeats().is_empty())
        .await;
    agent.stop().await;

    let mut renamed = config(&broker.url(), dir.path());
    renamed.name = "h8".into();
    let agent = start(renamed);
    broker
        .wait_for("a heartbeat of h8", |r| {
            r.heartbeats().iter().any(|h| h.path.contains("/h8/"))
        })
        .await;
    agent.stop().await;
    let records = broker.records();
    assert_eq!(records.registers().len(), 2);
    assert_eq!(records.registers()[1].body["name"], json!("h8"));
}

/// The agent forgets its registration token once registered (rule E3):
/// when its credential is revoked it cannot enrol again by itself, so a
/// stolen agent's memory holds no key to enrol other machines.
#[tokio::test]
async fn a_revoked_credential_does_not_lead_to_registering_again() {
    let broker = FakeBroker::start().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = start(config(&broker.url(), dir.path()));
    broker
        .wait_for("a heartbeat", |r| !r.heartbeats().is_empty())
        .await;

    broker.revoke_credentials();
    broker
        .wait_for("a refused heartbeat", |r| {
            r.heartbeats().iter().any(|h| h.status == 401)
        })
        .await;
    // With the token kept, the agent registered again 1 s (its first
    // backoff delay) after the refusal; watch twice as long as its second.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(4);
    while tokio::time::Instant::now() < deadline {
        assert_eq!(broker.records().registers().len(), 1, "registered again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    agent.stop().await;
    assert!(
        !dir.path().join("agent.json").exists(),
        "the revoked credential is not kept"
    );
}

#[tokio::test]
async fn an_unreachable_broker_is_retried_until_it_answers() {
    // A broker that is down: its port takes each connection and closes it
    // unanswered, counting them, so the test sees each failed attempt.
    let down = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = down.local_addr().unwrap();
    let (attempted, mut attempts) = tokio::sync::watch::channel(0_usize);
    let down = tokio::spawn(async move {
        loop {
            let (connection, _) = down.accept().await.unwrap();
            drop(connection);
            attempted.send_modify(|n| *n += 1);
        }
    });

    let dir = tempfile::tempdir().unwrap();
    let agent = start(config(&format!("http://{addr}"), dir.path()));
    // It tries again after a failure, and again (after 0.5–1 s, then 1–2 s
    // of backoff).
    tokio::time::timeout(PATIENCE, attempts.wait_for(|n| *n >= 3))
        .await
        .expect("the agent tried only once or twice")
        .unwrap();
    down.abort();
    let _ = down.await;

    let broker = FakeBroker::start_on(addr).await;
    broker
        .wait_for("registration and a heartbeat", |r| {
            !r.heartbeats().is_empty()
        })
        .await;
    agent.stop().await;
}

#[tokio::test]
async fn a_failing_broker_is_retried_and_a_refused_heartbeat_is_not_fatal() {
    let broker = FakeBroker::start().await;
    broker.fail_next(2); // two 503s: the registration is retried
    let dir = tempfile::tempdir().unwrap();
    let agent = start(config(&broker.url(), dir.path()));
    broker
        .wait_for("a heartbeat", |r| !r.heartbeats().is_empty())
        .await;

    broker.refuse_heartbeats(true);
    broker
        .wait_for("two refused heartbeats", |r| {
            r.heartbeats().iter().filter(|h| h.status == 400).count() >= 2
        })
        .await;
    broker.refuse_heartbeats(false);
    let delivered = broker.records().heartbeats().len();
    broker
        .wait_for("heartbeats delivered again", |r| {
            r.heartbeats()
                .iter()
                .skip(delivered)
                .any(|h| h.status == 200)
        })
        .await;
    agent.stop().await;
    let records = broker.records();
    assert_eq!(
        records
            .all
            .iter()
            .filter(|r| r.path == "/api/v1/register")
            .map(|r| r.status)
            .collect::<Vec<_>>(),
        vec![503, 503, 201]
    );
}

#[tokio::test]
async fn a_failing_sessions_command_sends_no_session_list() {
    let broker = FakeBroker::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(&broker.url(), dir.path());
    c.sessions = SessionsSource::Command("exit 3".into());
    c.load_script = None;
    let agent = start(c);
    broker
        .wait_for("a heartbeat", |r| !r.heartbeats().is_empty())
        .await;
    agent.stop().await;
    let records = broker.records();
    let body = &records.heartbeats()[0].body;
    assert!(body.get("sessions").is_none(), "{body}");
    // Not read: null (the contract's HostMetrics), which the broker takes as
    // "not reported", as it would an absent field.
    assert!(body["customLoadIndex"].is_null(), "{body}");
}

#[tokio::test]
async fn it_stops_promptly_while_a_load_script_runs() {
    let broker = FakeBroker::start().await;
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("sleep.pid");
    let mut c = config(&broker.url(), &dir.path().join("state"));
    // The script's child writes its pid, then blocks the sample.
    c.load_script = Some(format!("sleep 30 & echo $! > {}; wait", marker.display()));
    c.interval = Duration::from_secs(60);
    let agent = start(c);
    broker
        .wait_for("the registration", |r| !r.registers().is_empty())
        .await;
    // The first sample (1 s after start) gets stuck in the load script.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let pid = loop {
        match std::fs::read_to_string(&marker).map(|t| t.trim().parse::<i32>()) {
            Ok(Ok(pid)) => break pid,
            _ => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the load script never ran"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    agent.stop().await;
    // Stopping killed the script's whole process group, not just its shell.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while alive(pid) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the script's child {pid} outlived the agent"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether a process exists and is not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test]
async fn without_token_or_saved_credential_it_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config("http://127.0.0.1:9", dir.path());
    c.registration_token = None;
    let err = agent::run(c, std::future::pending()).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("no registration token and no saved host credential in "),
        "{text}"
    );
    assert!(
        text.contains("POST /api/v1/hostPools/farm/registrationToken"),
        "{text}"
    );
}

#[tokio::test]
async fn an_unusable_state_dir_is_reported_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "").unwrap();
    let c = config("http://127.0.0.1:9", &file.join("state"));
    let err = agent::run(c, std::future::pending()).await.unwrap_err();
    assert!(err.to_string().starts_with("state file "), "{err}");
}
