//! Messages to users' sessions (`sendMessage`), end to end: an operator
//! (API or CLI) sends one, the broker queues it for the session's host, the
//! real agent (`deskbroker agent --message-command`) receives it in its
//! heartbeat's answer and runs the command with the message in its
//! environment. A message reaches only the host the session is on; bounds,
//! bad input and the roles that may send are enforced.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::{App, eventually, pool_with_hosts};

/// A running agent, killed when dropped.
struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `deskbroker agent` for host `name` of pool `farm`, reporting one
/// Active session of `user`, and appending every message it receives to
/// `dir/shown-NAME` as `user|session|title|text`.
fn agent(app: &App, token: &str, name: &str, user: &str, dir: &Path) -> (Agent, PathBuf) {
    let sessions = dir.join(format!("sessions-{name}.jsonl"));
    std::fs::write(
        &sessions,
        format!("{}\n", json!({"user": user, "state": "Active"})),
    )
    .unwrap();
    let shown = dir.join(format!("shown-{name}"));
    let command = format!(
        "printf '%s|%s|%s|%s\\n' \"$DESKBROKER_USER\" \"$DESKBROKER_SESSION_ID\" \
         \"$DESKBROKER_MESSAGE_TITLE\" \"$DESKBROKER_MESSAGE_TEXT\" >> {}",
        shown.display()
    );
    let child = Command::new(crate::exe())
        .args(["agent", "--broker", &app.url, "--host-pool", "farm"])
        .args(["--registration-token", token, "--name", name])
        .args(["--address", &format!("10.9.0.{}:3389", name.len())])
        .args(["--interval", "5", "--state-dir"])
        .arg(dir.join(format!("state-{name}")))
        .arg("--sessions-command")
        .arg(format!("cat {}", sessions.display()))
        .arg("--message-command")
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
    (Agent(child), shown)
}

/// Patience for anything that needs a heartbeat (interval 5 s): a failure
/// bound for a loaded machine, not a speed.
const BEAT: Duration = Duration::from_secs(60);

/// The id of `user`'s session in `farm`, once there is one.
async fn session_of(app: &App, user: &str) -> String {
    crate::eventually(BEAT, || async {
        app.ok(
            "GET",
            &format!("/api/v1/hostPools/farm/userSessions?user={user}"),
            None,
            200,
        )
        .await["value"][0]["id"]
            .as_str()
            .map(str::to_string)
    })
    .await
    .unwrap_or_else(|| panic!("{user}'s session was not adopted from the agent's list"))
}

/// Pool `farm` (BreadthFirst, 10 sessions a host) and a registration token
/// for its two agents.
pub async fn farm(app: &App) -> String {
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                    "maxSessionLimit": 10, "heartbeatTimeoutSeconds": 60}),
        ),
        201,
    )
    .await;
    app.ok(
        "POST",
        "/api/v1/hostPools/farm/registrationToken",
        Some(json!({"maxHosts": 2})),
        200,
    )
    .await["token"]
        .as_str()
        .unwrap()
        .to_string()
}

fn shown(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

async fn send(app: &App, token: &str, session: &str, title: &str, message: &str) -> (u16, Value) {
    app.call_with(
        "POST",
        &format!("/api/v1/hostPools/farm/userSessions/{session}/sendMessage"),
        Some(json!({"title": title, "message": message})),
        Some(token),
    )
    .await
}

#[tokio::test]
async fn an_operator_messages_a_user_and_only_the_users_host_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let token = farm(&app).await;
    let (_a1, shown1) = agent(&app, &token, "h1", "alice@contoso.com", dir.path());
    let (_a2, shown2) = agent(&app, &token, "h2", "bob@contoso.com", dir.path());
    let alice = session_of(&app, "alice@contoso.com").await;
    let bob = session_of(&app, "bob@contoso.com").await;
    let operator = crate::credential(&app, "ops", "operator", &[]).await;
    let reader = crate::credential(&app, "auditor", "reader", &[]).await;

    // A reader may not send; nothing is queued for alice by it.
    let (status, v) = send(&app, &reader, &alice, "Reader", "from a reader").await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (403, Some("Forbidden")),
        "{v}"
    );

    // The operator's message: accepted (202), queued for alice's host.
    let (status, v) = send(
        &app,
        &operator,
        &alice,
        "Maintenance",
        "Please save your work: this host stops in 10 minutes.",
    )
    .await;
    assert_eq!(status, 202, "{v}");
    assert_eq!(v["user"], "alice@contoso.com");
    assert_eq!(v["sessionId"], alice.as_str());
    let (status, v) = send(&app, &operator, &bob, "For bob", "only on h2").await;
    assert_eq!(status, 202, "{v}");

    // h1 holds a host credential of its own: it cannot fetch h2's messages
    // by sending h2's heartbeat, nor send messages itself.
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("state-h1/agent.json")).unwrap(),
    )
    .unwrap();
    let h1_credential = state["hostCredential"]
        .as_str()
        .expect("h1's credential")
        .to_string();
    let (status, _) = app
        .call_with(
            "POST",
            "/api/v1/hostPools/farm/sessionHosts/h2/heartbeat",
            Some(json!({})),
            Some(&h1_credential),
        )
        .await;
    assert_eq!(status, 403, "a host heartbeats only as itself");
    let (status, _) = send(&app, &h1_credential, &bob, "Spoof", "from a host").await;
    assert_eq!(status, 403, "a host does not send messages");

    // The CLI sends one more to alice, with a newline and shell syntax in
    // it, which must reach the command as data.
    let pwned = dir.path().join("pwned");
    let hostile = format!(
        "line one\nline two $(touch {0}) `touch {0}`",
        pwned.display()
    );
    let (ok, out, err) = app.cli(&[
        "session",
        "send-message",
        "--host-pool",
        "farm",
        "--id",
        &alice,
        "--title",
        "From the CLI",
        "--message",
        &hostile,
    ]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("alice@contoso.com"), "{out}");

    let delivered = eventually(BEAT, || async {
        shown(&shown1).contains("|From the CLI|") && shown(&shown2).contains("|For bob|")
    })
    .await;
    assert!(
        delivered,
        "h1: {:?}; h2: {:?}",
        shown(&shown1),
        shown(&shown2)
    );
    let h1 = shown(&shown1);
    let h2 = shown(&shown2);
    assert!(
        h1.contains(&format!(
            "alice@contoso.com|{alice}|Maintenance|Please save your work: this host stops in \
             10 minutes.\n"
        )),
        "{h1}"
    );
    assert!(h1.contains(&format!("|From the CLI|{hostile}\n")), "{h1}");
    assert!(!pwned.exists(), "a message's text was run by a shell");
    assert!(!h1.contains("For bob") && !h1.contains("Reader"), "{h1}");
    assert_eq!(h2, format!("bob@contoso.com|{bob}|For bob|only on h2\n"));
    // Each message was given once: the next heartbeats bring nothing new.
    let before = app
        .ok("GET", "/api/v1/hostPools/farm/sessionHosts/h1", None, 200)
        .await["lastHeartBeat"]
        .clone();
    let beat_again = eventually(BEAT, || async {
        app.ok("GET", "/api/v1/hostPools/farm/sessionHosts/h1", None, 200)
            .await["lastHeartBeat"]
            != before
    })
    .await;
    assert!(beat_again);
    assert_eq!(shown(&shown1), h1, "nothing shown twice");
}

#[tokio::test]
async fn messages_are_bounded_checked_and_dropped_with_their_session() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "farm", "BreadthFirst", 10, 2).await;
    let placed = app
        .ok(
            "POST",
            "/api/v1/hostPools/farm/connect",
            Some(json!({"user": "alice"})),
            200,
        )
        .await;
    let id = placed["sessionId"].as_str().expect("sessionId").to_string();
    let host = placed["sessionHost"]
        .as_str()
        .expect("sessionHost")
        .to_string();
    let other = if host == "h1" { "h2" } else { "h1" };
    let path = format!("/api/v1/hostPools/farm/userSessions/{id}/sendMessage");
    let beat = |h: &str| format!("/api/v1/hostPools/farm/sessionHosts/{h}/heartbeat");

    // Bad input: the contract's error, nothing queued.
    for body in [
        json!({"title": "", "message": "x"}),
        json!({"title": "t", "message": "  "}),
        json!({"title": "two\nlines", "message": "x"}),
        json!({"title": "t", "message": "clear screen \u{1b}[2J"}),
        json!({"title": "t", "message": "x".repeat(4097)}),
        json!({"title": "t".repeat(257), "message": "x"}),
        json!({"title": "t", "message": "x", "urgent": true}),
        json!({"title": "t"}),
    ] {
        app.refused("POST", &path, Some(body), 400, "InvalidParameter")
            .await;
    }
    app.refused(
        "POST",
        "/api/v1/hostPools/farm/userSessions/nope/sendMessage",
        Some(json!({"title": "t", "message": "x"})),
        404,
        "SessionNotFound",
    )
    .await;
    app.refused(
        "POST",
        "/api/v1/hostPools/nope/userSessions/x/sendMessage",
        Some(json!({"title": "t", "message": "x"})),
        404,
        "HostPoolNotFound",
    )
    .await;
    let answer = app.ok("POST", &beat(&host), Some(json!({})), 200).await;
    assert!(answer.get("messages").is_none(), "nothing queued: {answer}");

    // 64 wait for the host; the 65th is refused, not pushed in.
    for i in 0..64 {
        app.ok(
            "POST",
            &path,
            Some(json!({"title": format!("m{i}"), "message": "x"})),
            202,
        )
        .await;
    }
    app.refused(
        "POST",
        &path,
        Some(json!({"title": "one too many", "message": "x"})),
        429,
        "TooManyRequests",
    )
    .await;
    // The other host's heartbeat gets none of them; the session's host
    // gets all 64, oldest first, once.
    let answer = app.ok("POST", &beat(other), Some(json!({})), 200).await;
    assert!(answer.get("messages").is_none(), "{answer}");
    let answer = app.ok("POST", &beat(&host), Some(json!({})), 200).await;
    let got = answer["messages"].as_array().expect("messages");
    assert_eq!(got.len(), 64);
    assert_eq!(got[0]["title"], "m0");
    assert_eq!(got[63]["title"], "m63");
    assert_eq!(got[0]["user"], "alice");
    assert_eq!(got[0]["sessionId"], id.as_str());
    let answer = app.ok("POST", &beat(&host), Some(json!({})), 200).await;
    assert!(answer.get("messages").is_none(), "given once: {answer}");

    // A message whose session ends before the host fetches it is dropped.
    app.ok(
        "POST",
        &path,
        Some(json!({"title": "late", "message": "x"})),
        202,
    )
    .await;
    app.ok(
        "DELETE",
        &format!("/api/v1/hostPools/farm/userSessions/{id}"),
        None,
        204,
    )
    .await;
    let answer = app.ok("POST", &beat(&host), Some(json!({})), 200).await;
    assert!(answer.get("messages").is_none(), "{answer}");
}

/// Rule A5's notice through the real evaluator and the real agents: a
/// plan whose ramp-down (with force logoff) is in force now drains one of
/// two lightly used hosts and sends its user the plan's message, which that
/// host's agent shows; the other host's user sees nothing. The Notify
/// record says how many sessions it was sent to.
#[tokio::test]
async fn a_ramp_down_notice_reaches_the_drained_hosts_user_through_its_agent() {
    let dir = tempfile::tempdir().unwrap();
    let (app, _) = App::spawn_with(
        &dir.path().join("data"),
        "127.0.0.1:0",
        &["--autoscale-interval", "1s"],
    );
    let token = farm(&app).await;
    let (_a1, shown1) = agent(&app, &token, "h1", "alice@contoso.com", dir.path());
    let (_a2, shown2) = agent(&app, &token, "h2", "bob@contoso.com", dir.path());
    session_of(&app, "alice@contoso.com").await;
    session_of(&app, "bob@contoso.com").await;

    // Ramp-down from 00:02 to 23:59 local time, in a zone where it is
    // neither just before nor just after midnight now.
    let hour = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 3600
        % 24;
    let zone = if (1..22).contains(&hour) {
        "UTC"
    } else {
        "Etc/GMT-6"
    };
    let text = "This host stops soon: please save your work.";
    app.ok(
        "PUT",
        "/api/v1/scalingPlans/evening",
        Some(json!({
            "timeZone": zone,
            "hostPools": ["farm"],
            "schedules": [{
                "name": "everyday",
                "daysOfWeek": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
                               "Saturday", "Sunday"],
                "rampUpStartTime": "00:00", "rampUpLoadBalancingAlgorithm": "BreadthFirst",
                "rampUpMinimumHostsPct": 0, "rampUpCapacityThresholdPct": 90,
                "peakStartTime": "00:01", "peakLoadBalancingAlgorithm": "BreadthFirst",
                "rampDownStartTime": "00:02", "rampDownLoadBalancingAlgorithm": "DepthFirst",
                "rampDownMinimumHostsPct": 0, "rampDownCapacityThresholdPct": 90,
                "rampDownForceLogoffUsers": true, "rampDownWaitTimeMinutes": 30,
                "rampDownNotificationMessage": text,
                "rampDownStopHostsWhen": "ZeroSessions",
                "offPeakStartTime": "23:59", "offPeakLoadBalancingAlgorithm": "DepthFirst"
            }]
        })),
        201,
    )
    .await;
    // 2 sessions over 2 hosts of 10: without one host 2 of 10 (20 %) stays
    // under 90 %, so the last in query order of the two (they have a
    // session each; the agents registered in either order) is drained and
    // its user told; without both there is no capacity, so the other stays.
    let notified = eventually(BEAT, || async {
        shown(&shown1).contains(text) || shown(&shown2).contains(text)
    })
    .await;
    assert!(notified, "no host showed the notice");
    let (drained, user, line, other) = if shown(&shown2).contains(text) {
        ("h2", "bob@contoso.com", shown(&shown2), shown(&shown1))
    } else {
        ("h1", "alice@contoso.com", shown(&shown1), shown(&shown2))
    };
    assert!(
        line.starts_with(&format!("{user}|"))
            && line.contains("|Your session host is shutting down|"),
        "{line}"
    );
    assert_eq!(other, "", "the host that stays shows nothing");
    let v = app
        .ok("GET", "/api/v1/hostPools/farm/scalingActions", None, 200)
        .await;
    let notify = v["value"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == "Notify")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (&notify["sessionHost"], &notify["outcome"], &notify["phase"]),
        (&json!(drained), &json!("Succeeded"), &json!("RampDown")),
        "{v}"
    );
    assert!(
        notify["message"]
            .as_str()
            .unwrap_or("")
            .contains("sent to 1 of 1"),
        "{notify}"
    );
    let host = app
        .ok(
            "GET",
            &format!("/api/v1/hostPools/farm/sessionHosts/{drained}"),
            None,
            200,
        )
        .await;
    assert_eq!(
        (&host["allowNewSession"], &host["drainedBy"]),
        (&json!(false), &json!("scalingPlan")),
        "{host}"
    );
    // The drained host is the later of the two in query order (A5's tie).
    let hosts = app
        .ok("GET", "/api/v1/hostPools/farm/sessionHosts", None, 200)
        .await;
    let last = hosts["value"].as_array().unwrap().last().unwrap()["name"].clone();
    assert_eq!(last, json!(drained), "{hosts}");
}

/// The variables `env` printed, as `NAME=VALUE` lines (the test's values
/// hold no newline).
fn env_of(path: &Path) -> std::collections::BTreeMap<String, String> {
    shown(path)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The commands the agent runs for the broker get a clean environment:
/// the variables documented for each and the agent's `PATH`, never the
/// registration token the agent was started with nor any other variable
/// of its own.
#[tokio::test]
async fn the_agents_commands_see_their_variables_and_none_of_the_agents() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let token = farm(&app).await;
    let sessions = dir.path().join("sessions.jsonl");
    std::fs::write(
        &sessions,
        format!(
            "{}\n",
            json!({"user": "alice@contoso.com", "state": "Active"})
        ),
    )
    .unwrap();
    let (message_env, logoff_env) = (
        dir.path().join("message.env"),
        dir.path().join("logoff.env"),
    );
    let dump = |path: &Path| format!("env > {0}.tmp && mv {0}.tmp {0}", path.display());
    let child = Command::new(crate::exe())
        .args(["agent", "--broker", &app.url, "--host-pool", "farm"])
        .args(["--name", "h1", "--address", "10.9.0.2:3389"])
        .args(["--interval", "5", "--state-dir"])
        .arg(dir.path().join("state-h1"))
        .arg("--sessions-command")
        .arg(format!("cat {}", sessions.display()))
        .arg("--message-command")
        .arg(dump(&message_env))
        .arg("--logoff-command")
        .arg(dump(&logoff_env))
        // The token the agent registers with, as the unit may pass it.
        .env("DESKBROKER_REGISTRATION_TOKEN", &token)
        .env("AGENT_TEST_UNRELATED", "not for the commands")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(if std::env::var_os("TEST_LOG").is_some() {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .spawn()
        .expect("start deskbroker agent");
    let _agent = Agent(child);
    let alice = session_of(&app, "alice@contoso.com").await;
    let path = std::env::var("PATH").expect("the test has a PATH");

    let (status, v) = send(&app, crate::TOKEN, &alice, "Maintenance", "Save your work").await;
    assert_eq!(status, 202, "{v}");
    assert!(
        eventually(BEAT, || async { message_env.exists() }).await,
        "the message command ran"
    );
    let env = env_of(&message_env);
    for (name, value) in [
        ("DESKBROKER_MESSAGE_TITLE", "Maintenance"),
        ("DESKBROKER_MESSAGE_TEXT", "Save your work"),
        ("DESKBROKER_USER", "alice@contoso.com"),
        ("DESKBROKER_SESSION_ID", alice.as_str()),
        ("PATH", path.as_str()),
    ] {
        assert_eq!(env.get(name).map(String::as_str), Some(value), "{env:?}");
    }

    app.ok(
        "DELETE",
        &format!("/api/v1/hostPools/farm/userSessions/{alice}"),
        None,
        204,
    )
    .await;
    assert!(
        eventually(BEAT, || async { logoff_env.exists() }).await,
        "the logoff command ran"
    );
    let logoff = env_of(&logoff_env);
    for (name, value) in [
        ("DESKBROKER_HOST", "h1"),
        ("DESKBROKER_HOST_ADDRESS", "10.9.0.2:3389"),
        ("DESKBROKER_USER", "alice@contoso.com"),
        ("DESKBROKER_SESSION_ID", alice.as_str()),
        ("PATH", path.as_str()),
    ] {
        assert_eq!(
            logoff.get(name).map(String::as_str),
            Some(value),
            "{logoff:?}"
        );
    }

    for (what, text, env) in [
        ("message", shown(&message_env), env),
        ("logoff", shown(&logoff_env), logoff),
    ] {
        for name in [
            "DESKBROKER_REGISTRATION_TOKEN",
            "AGENT_TEST_UNRELATED",
            "RUST_LOG",
        ] {
            assert!(!env.contains_key(name), "the {what} command saw {name}");
        }
        assert!(!text.contains(&token), "the {what} command saw the token");
    }
}
