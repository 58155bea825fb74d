//! A logoff is a logoff on the host (rule W5), end to end: an operator logs
//! off a session a real agent (`deskbroker agent --logoff-command`)
//! reported; the broker orders that host's agent, in its heartbeat
//! answers, to end the logon, and the agent runs its command with the
//! order in its environment. While the host still lists the user, the
//! broker adopts nothing (S8); once it no longer does, the order stops.
//! No other host receives it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::{App, eventually};

/// A running agent, killed when dropped.
struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Patience for anything that needs a few heartbeats (interval 5 s): a
/// failure bound for a loaded machine, not a speed.
const BEATS: Duration = Duration::from_secs(90);

/// Writes the session list host `name`'s agent reports.
fn list(dir: &Path, name: &str, users: &[&str]) {
    let text: String = users
        .iter()
        .map(|u| format!("{}\n", json!({"user": u, "state": "Active"})))
        .collect();
    let path = dir.join(format!("sessions-{name}.jsonl"));
    let tmp = dir.join(format!("sessions-{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(tmp, path).unwrap();
}

/// Starts `deskbroker agent` for host `name` of pool `farm`, reporting
/// `users`, whose logoff command appends its environment to
/// `dir/done-NAME` as `host|address|user|session`.
fn agent(app: &App, token: &str, name: &str, users: &[&str], dir: &Path) -> (Agent, PathBuf) {
    list(dir, name, users);
    let done = dir.join(format!("done-{name}"));
    let command = format!(
        "printf '%s|%s|%s|%s\\n' \"$DESKBROKER_HOST\" \"$DESKBROKER_HOST_ADDRESS\" \
         \"$DESKBROKER_USER\" \"$DESKBROKER_SESSION_ID\" >> {}",
        done.display()
    );
    let child = Command::new(crate::exe())
        .args(["agent", "--broker", &app.url, "--host-pool", "farm"])
        .args(["--registration-token", token, "--name", name])
        .args(["--address", &format!("10.9.0.{}:3389", name.len())])
        .args(["--interval", "5", "--state-dir"])
        .arg(dir.join(format!("state-{name}")))
        .arg("--sessions-command")
        .arg(format!(
            "cat {}",
            dir.join(format!("sessions-{name}.jsonl")).display()
        ))
        .arg("--logoff-command")
        .arg(command)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(if std::env::var_os("TEST_LOG").is_some() {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .spawn()
        .expect("start deskbroker agent");
    (Agent(child), done)
}

/// `user`'s sessions in `farm`.
async fn sessions_of(app: &App, user: &str) -> Vec<Value> {
    app.ok(
        "GET",
        &format!("/api/v1/hostPools/farm/userSessions?user={user}"),
        None,
        200,
    )
    .await["value"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The host's last heartbeat time, as the broker shows it (null before
/// the host registered or beat).
async fn last_beat(app: &App, host: &str) -> Value {
    let (status, v) = app
        .call(
            "GET",
            &format!("/api/v1/hostPools/farm/sessionHosts/{host}"),
            None,
        )
        .await;
    if status == 200 {
        v["lastHeartBeat"].clone()
    } else {
        Value::Null
    }
}

/// Waits until `host`'s agent has sent `n` more heartbeats.
async fn beats(app: &App, host: &str, n: usize) {
    for _ in 0..n {
        let seen = last_beat(app, host).await;
        assert!(
            eventually(BEATS, || async { last_beat(app, host).await != seen }).await,
            "{host} sent no heartbeat"
        );
    }
}

/// The logoff orders a heartbeat of `host` (sent as the admin, with no
/// list, which settles nothing) is answered with.
async fn orders_for(app: &App, host: &str) -> Vec<Value> {
    let v = app
        .ok(
            "POST",
            &format!("/api/v1/hostPools/farm/sessionHosts/{host}/heartbeat"),
            Some(json!({})),
            200,
        )
        .await;
    v["logoffs"].as_array().cloned().unwrap_or_default()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[tokio::test]
async fn a_broker_logoff_is_carried_out_on_the_users_host_only() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let token = crate::messages::farm(&app).await;
    let (_a1, done1) = agent(
        &app,
        &token,
        "h1",
        &["alice@contoso.com", "carol@contoso.com"],
        dir.path(),
    );
    let (_a2, done2) = agent(&app, &token, "h2", &["bob@contoso.com"], dir.path());
    for user in ["alice@contoso.com", "bob@contoso.com", "carol@contoso.com"] {
        assert!(
            eventually(BEATS, || async {
                !sessions_of(&app, user).await.is_empty()
            })
            .await,
            "{user}'s session was not taken from the agent's list"
        );
    }
    let alice = sessions_of(&app, "alice@contoso.com").await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();

    // The operator logs alice off.
    let (status, v) = app
        .call(
            "DELETE",
            &format!("/api/v1/hostPools/farm/userSessions/{alice}"),
            None,
        )
        .await;
    assert_eq!(status, 204, "{v}");

    // h1's agent runs its logoff command for her session, with the host
    // and the order in its environment.
    let want = format!("h1|10.9.0.2:3389|alice@contoso.com|{alice}\n");
    assert!(
        eventually(BEATS, || async { read(&done1).contains(&want) }).await,
        "h1's logoff command did not run for alice: {:?}",
        read(&done1)
    );

    // h1 still lists her (its command only wrote a file): the order stands
    // and the broker does not adopt her again, heartbeat after heartbeat.
    beats(&app, "h1", 2).await;
    assert!(
        sessions_of(&app, "alice@contoso.com").await.is_empty(),
        "the logged-off session was adopted again from h1's list"
    );
    let orders = orders_for(&app, "h1").await;
    assert_eq!(
        orders,
        [json!({"sessionId": alice, "user": "alice@contoso.com"})]
    );
    // carol, on the same host, is untouched.
    assert_eq!(sessions_of(&app, "carol@contoso.com").await.len(), 1);
    // The agent carried the order out once, however often it was repeated.
    assert_eq!(read(&done1).matches(&alice).count(), 1, "{}", read(&done1));

    // h2 never receives h1's order.
    assert!(orders_for(&app, "h2").await.is_empty());
    assert!(read(&done2).is_empty(), "h2 ran a logoff: {}", read(&done2));

    // The logon ends on h1: its list leaves alice out, and the order stops.
    list(dir.path(), "h1", &["carol@contoso.com"]);
    beats(&app, "h1", 2).await;
    assert!(
        orders_for(&app, "h1").await.is_empty(),
        "the order outlived the logon"
    );
    let metrics = app.text("/metrics").await;
    assert!(
        metrics.contains("deskbroker_logoff_orders_done_total 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("deskbroker_heartbeat_refused_sessions_total{reason=\"loggingOff\"}"),
        "{metrics}"
    );

    // Alice logs on to h1 again later, with no order outstanding: the host's
    // list is taken as before (S8).
    list(
        dir.path(),
        "h1",
        &["alice@contoso.com", "carol@contoso.com"],
    );
    assert!(
        eventually(BEATS, || async {
            !sessions_of(&app, "alice@contoso.com").await.is_empty()
        })
        .await,
        "alice's new logon was not taken from h1's list"
    );
}

/// A logoff of a session that never logged on (Pending) orders nothing.
#[tokio::test]
async fn a_pending_session_needs_no_order() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let token = crate::messages::farm(&app).await;
    let (_a1, done1) = agent(&app, &token, "h1", &[], dir.path());
    assert!(eventually(BEATS, || async { !last_beat(&app, "h1").await.is_null() }).await);
    let v = app
        .ok(
            "POST",
            "/api/v1/hostPools/farm/connect",
            Some(json!({"user": "dave@contoso.com"})),
            200,
        )
        .await;
    let id = v["sessionId"].as_str().unwrap().to_string();
    assert_eq!(v["sessionState"], "Pending");
    app.ok(
        "DELETE",
        &format!("/api/v1/hostPools/farm/userSessions/{id}"),
        None,
        204,
    )
    .await;
    assert!(orders_for(&app, "h1").await.is_empty());
    beats(&app, "h1", 1).await;
    assert!(read(&done1).is_empty(), "{}", read(&done1));
}
