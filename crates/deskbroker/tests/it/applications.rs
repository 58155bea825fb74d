//! Published applications end to end (rules F1, F2): an application of an
//! xrdp pool (`AlternateShell`), published and given through the CLI, its
//! launch file fetched with the CLI for the user, opened by a real
//! xfreerdp through the broker's front door: xrdp runs the application as
//! the session's only program, in place of the user's desktop.

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;

use serde_json::json;

use crate::desktop::{DesktopUser, Sesman, USER, programs_of};
use crate::{App, Client, Display, PATIENCE, Xrdp, eventually, require, wait_session};

/// The published program: a script in the user's home (the test's
/// directories are not the user's to read) that waits, under a name the
/// test looks for, with the argument it was given in its command line.
fn published_program() -> PathBuf {
    let home = nix::unistd::User::from_name(USER)
        .ok()
        .flatten()
        .expect("the test user")
        .dir;
    let path = home.join("deskbroker-published-app.sh");
    std::fs::write(&path, "#!/bin/sh\nexec sleep 600 \"$@\"\n").expect("write the program");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

#[tokio::test]
async fn an_xrdp_pools_application_opens_as_the_sessions_only_program() {
    let xrdp = require("xrdp", "xrdp");
    let openssl = require("openssl", "openssl");
    let xvfb = require("Xvfb", "xvfb");
    let xfreerdp = require("xfreerdp", "freerdp2-x11");
    let dir = tempfile::tempdir().expect("tempdir");
    let user = DesktopUser::prepare();
    let sesman = Sesman::start(&dir.path().join("sesman"));
    let host = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp"));
    let display = Display::start(&xvfb);
    let program = published_program();

    let (app, _front_door) = App::spawn_with_front_door(&dir.path().join("data"), "apps", &[]);
    app.ok(
        "PUT",
        "/api/v1/hostPools/apps",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                    "allowedAddressRanges": ["127.0.0.0/8"],
                    "applicationMode": "AlternateShell"}),
        ),
        201,
    )
    .await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/apps/sessionHosts/h1",
        Some(json!({"address": host.address})),
        201,
    )
    .await;
    let program_arg = program.display().to_string();
    let (ok, out, err) = app.cli(&[
        "app",
        "create",
        "--host-pool",
        "apps",
        "--alias",
        "timer",
        "--display-name",
        "Timer",
        "--program",
        &program_arg,
        "--command-line-policy",
        "Fixed",
        "--command-line",
        "61",
        "--folder",
        "Tools",
    ]);
    assert!(ok, "app create: {err}");
    assert!(out.contains("timer"), "{out}");
    let (ok, _, err) = app.cli(&[
        "appgroup",
        "create",
        "--name",
        "tools",
        "--host-pool",
        "apps",
        "--kind",
        "RemoteApp",
        "--application",
        "timer",
        "--user",
        USER,
    ]);
    assert!(ok, "appgroup create: {err}");
    let (ok, out, err) = app.cli(&["user", "workspace", USER]);
    assert!(ok, "user workspace: {err}");
    assert!(out.contains("apps") && out.contains("timer"), "{out}");

    // Someone the group does not name gets no file.
    let (ok, _, err) = app.cli(&[
        "app",
        "rdp-file",
        "--host-pool",
        "apps",
        "--alias",
        "timer",
        "--user",
        "mallory",
    ]);
    assert!(!ok && err.contains("NotEntitled"), "{err}");

    let file = dir.path().join("timer.rdp");
    let file_arg = file.display().to_string();
    let (ok, _, err) = app.cli(&[
        "app",
        "rdp-file",
        "--host-pool",
        "apps",
        "--alias",
        "timer",
        "--user",
        USER,
        "--file",
        &file_arg,
    ]);
    assert!(ok, "app rdp-file: {err}");
    let text = std::fs::read_to_string(&file).expect("read the file");
    assert!(
        text.contains(&format!("alternate shell:s:{program_arg} 61\r\n")),
        "{text}"
    );

    let client = Client::start(
        &xfreerdp,
        &display,
        &dir.path().join("client"),
        &[
            file_arg.clone(),
            format!("/u:{USER}"),
            format!("/p:{}", user.password),
            "/sec:tls".to_string(),
        ],
    );
    let running = eventually(PATIENCE * 2, || async {
        programs_of(USER)
            .iter()
            .any(|(_, c)| c.contains("sleep 600 61"))
    })
    .await;
    assert!(
        running,
        "the application did not run in the session: {:?}\nclient's log:\n{}\nxrdp's log:\n{}\n\
         sesman's log:\n{}",
        programs_of(USER),
        client.log(),
        host.log(),
        sesman.log()
    );
    // The desktop's window manager (the user's startwm.sh runs twm) is
    // not there: the application is the session's only program.
    let programs = programs_of(USER);
    assert!(
        programs.iter().all(|(_, c)| !c.contains("twm")),
        "{programs:?}"
    );
    wait_session(&app, "apps", USER, "h1", "Active").await;
    drop(client);

    // The user's programs end with the test: stopped by their own pids.
    let pids: Vec<String> = programs_of(USER)
        .iter()
        .filter(|(_, c)| c.contains("sleep 600 61"))
        .map(|(p, _)| p.to_string())
        .collect();
    if !pids.is_empty() {
        let _ = std::process::Command::new("kill").args(&pids).status();
    }
    let _ = std::fs::remove_file(&program);
}
