//! The agent on an xrdp host tells the broker the truth about each desktop:
//! Active while an RDP client is connected, Disconnected once it has gone
//! (the desktop lives on), Active again on a reconnect, ended when the user
//! logs off. Real xrdp, its session manager, xorgxrdp and xfreerdp; the
//! client connects to xrdp directly, so no door of the broker sees it and
//! only the agent can know.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::json;

use crate::desktop::{DesktopUser, Sesman, USER};
use crate::{App, Client, Display, PATIENCE, Xrdp, eventually, require, session_of, wait_session};

/// The agent, stopped by its own pid when the test ends.
struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The broker's name for the test user: the agent appends its
/// `--user-domain`.
fn broker_user() -> String {
    format!("{USER}@contoso.com")
}

/// Starts `deskbroker agent` for host h1 at `address`, with no sessions
/// command: its sessions come from the host itself (logind, where there is
/// one, and xrdp).
fn agent(app: &App, token: &str, address: &str, dir: &Path) -> Agent {
    let child = Command::new(crate::exe())
        .args(["agent", "--broker", &app.url, "--host-pool", "farm"])
        .args(["--registration-token", token, "--name", "h1"])
        .args(["--address", address, "--user-domain", "contoso.com"])
        .args(["--interval", "5", "--state-dir"])
        .arg(dir.join("agent-state"))
        .env("RUST_LOG", "info")
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

/// The pids of the test user's window managers: what ends the desktop
/// when the user logs off.
fn window_managers_of_the_user() -> Vec<u32> {
    crate::desktop::programs_of(USER)
        .into_iter()
        .filter(|(_, cmdline)| {
            cmdline
                .split_whitespace()
                .next()
                .is_some_and(|program| program.rsplit('/').next() == Some("twm"))
        })
        .map(|(pid, _)| pid)
        .collect()
}

#[tokio::test]
async fn an_xrdp_desktop_is_active_while_connected_disconnected_after_and_ends_at_logoff() {
    let xrdp = require("xrdp", "xrdp");
    let openssl = require("openssl", "openssl");
    let xvfb = require("Xvfb", "xvfb");
    let xfreerdp = require("xfreerdp", "freerdp2-x11");
    let dir = tempfile::tempdir().expect("tempdir");
    let user = DesktopUser::prepare();
    let sesman = Sesman::start(&dir.path().join("sesman"));
    let host = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp"));
    let display = Display::start(&xvfb);

    let app = App::spawn(&dir);
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                    "maxSessionLimit": 10, "heartbeatTimeoutSeconds": 60,
                    "allowedAddressRanges": ["127.0.0.0/8"]}),
        ),
        201,
    )
    .await;
    let token = app
        .ok(
            "POST",
            "/api/v1/hostPools/farm/registrationToken",
            Some(json!({"maxHosts": 1})),
            200,
        )
        .await["token"]
        .as_str()
        .unwrap()
        .to_string();
    let _agent = agent(&app, &token, &host.address, dir.path());
    let registered = eventually(PATIENCE * 2, || async {
        app.call("GET", "/api/v1/hostPools/farm/sessionHosts/h1", None)
            .await
            .1["lastHeartBeat"]
            .is_string()
    })
    .await;
    assert!(registered, "the agent registered h1 and sent a heartbeat");
    let user_name = broker_user();
    assert_eq!(session_of(&app, "farm", &user_name).await, None);

    let connect = || {
        Client::start(
            &xfreerdp,
            &display,
            &dir.path().join("client"),
            &[
                format!("/v:{}", host.address),
                format!("/u:{USER}"),
                format!("/p:{}", user.password),
                "/sec:tls".to_string(),
            ],
        )
    };

    // The client logs on: the agent reports the desktop Active, and the
    // broker adopts it (nobody placed it).
    let client = connect();
    let logged_on = eventually(PATIENCE * 2, || async {
        session_of(&app, "farm", &user_name).await.is_some()
    })
    .await;
    assert!(
        logged_on,
        "no session for {user_name}; xrdp's log:\n{}\nsesman's log:\n{}\nclient's log:\n{}",
        host.log(),
        sesman.log(),
        client.log()
    );
    wait_session(&app, "farm", &user_name, "h1", "Active").await;

    // The client closes: the desktop lives on, Disconnected. (logind,
    // where there is one, would still call it active.)
    drop(client);
    wait_session(&app, "farm", &user_name, "h1", "Disconnected").await;
    let (id, _) = session_id_and_state(&app, &user_name).await;

    // The user comes back: the same desktop, Active again.
    let client = connect();
    wait_session(&app, "farm", &user_name, "h1", "Active").await;
    assert_eq!(
        session_id_and_state(&app, &user_name).await,
        (id.clone(), "Active".to_string()),
        "the reconnect is the same session"
    );

    // The user logs off (the window manager exits): the desktop ends, the
    // host no longer lists it, and the broker ends the session.
    let managers = window_managers_of_the_user();
    assert!(
        !managers.is_empty(),
        "the user's window manager runs in the desktop"
    );
    let status = Command::new("kill")
        .args(managers.iter().map(u32::to_string))
        .status()
        .expect("run kill");
    assert!(status.success());
    let ended = eventually(PATIENCE * 2, || async {
        session_of(&app, "farm", &user_name).await.is_none()
    })
    .await;
    assert!(
        ended,
        "the session outlived the logoff: {:?}; sesman's log:\n{}",
        session_of(&app, "farm", &user_name).await,
        sesman.log()
    );
    drop(client);
}

/// The user's session id and state.
async fn session_id_and_state(app: &App, user: &str) -> (String, String) {
    let v = app
        .ok(
            "GET",
            &format!("/api/v1/hostPools/farm/userSessions?user={user}"),
            None,
            200,
        )
        .await;
    let s = &v["value"][0];
    (
        s["id"].as_str().unwrap_or_default().to_string(),
        s["sessionState"].as_str().unwrap_or_default().to_string(),
    )
}
