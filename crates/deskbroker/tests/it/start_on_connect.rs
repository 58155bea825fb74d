//! Rule A8 end to end through the real binary: a pool with
//! `startVmOnConnect` and the command driver (its power-on command appends
//! `$DESKBROKER_ACTION $DESKBROKER_HOST` to a file). A connect that finds
//! no host starts one and is answered 503 `SessionHostStarting` with
//! `Retry-After`, counted in the metrics by its decision. The RDP front
//! door and the RD Gateway hold a client while its host starts and relay
//! it once the host is available, and close one past its bound. Which
//! host a connect starts, that it is placed there after the host's
//! heartbeat, personal pools and pools without a power driver are proved
//! in process, in the broker's `rules` tests.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::wire::{echo_host, first_pdu};
use crate::{App, TOKEN, append_to, eventually, metrics_when, power_state};

const WAIT: Duration = Duration::from_secs(60);

/// The lines of the power log that start hosts.
fn starts(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("start "))
        .map(str::to_string)
        .collect()
}

/// Creates `pool` (`kind` is the pool's JSON) with the command driver
/// and `hosts` (name, JSON), each heartbeating once then stopped through
/// the API, so that each is `Stopped` and has heartbeats behind it (A9).
async fn pool_all_stopped(app: &App, pool: &str, kind: Value, log: &Path, hosts: &[(&str, Value)]) {
    let cmd = append_to(log);
    let mut body = kind;
    body["powerSettings"] =
        json!({"driver": "command", "powerOnCommand": cmd, "powerOffCommand": cmd});
    app.ok("PUT", &format!("/api/v1/hostPools/{pool}"), Some(body), 201)
        .await;
    for (name, spec) in hosts {
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/{pool}/sessionHosts/{name}"),
            Some(spec.clone()),
            201,
        )
        .await;
        beat(app, pool, name).await;
        app.ok(
            "POST",
            &format!("/api/v1/hostPools/{pool}/sessionHosts/{name}/stop"),
            None,
            202,
        )
        .await;
    }
    for (name, _) in hosts {
        assert!(
            eventually(WAIT, || async {
                power_state(app, pool, name).await == "Stopped"
            })
            .await,
            "{name} never stopped"
        );
    }
}

async fn beat(app: &App, pool: &str, host: &str) {
    app.ok(
        "POST",
        &format!("/api/v1/hostPools/{pool}/sessionHosts/{host}/heartbeat"),
        Some(json!({"cpuPercent": 5.0, "sessions": []})),
        200,
    )
    .await;
}

/// A connect through the API: (status, Retry-After, body).
async fn connect(app: &App, pool: &str, user: &str) -> (u16, Option<String>, Value) {
    let resp = app
        .http
        .post(format!("{}/api/v1/hostPools/{pool}/connect", app.url))
        .bearer_auth(TOKEN)
        .json(&json!({"user": user}))
        .send()
        .await
        .expect("connect");
    let status = resp.status().as_u16();
    let retry = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    (status, retry, resp.json().await.unwrap_or(Value::Null))
}

/// Asserts 503 `SessionHostStarting` with `Retry-After: 30`.
async fn starting(app: &App, pool: &str, user: &str) {
    let (status, retry, v) = connect(app, pool, user).await;
    assert_eq!(
        (status, v["error"]["code"].as_str(), retry.as_deref()),
        (503, Some("SessionHostStarting"), Some("30")),
        "{v}"
    );
}

/// Waits until `host` is `Running` (its power-on command succeeded).
async fn running(app: &App, pool: &str, host: &str) {
    assert!(
        eventually(WAIT, || async {
            power_state(app, pool, host).await == "Running"
        })
        .await,
        "{host} never became Running"
    );
}

/// Whether h1 of `farm` was started (once) and `gauge` came to show one
/// connection held.
async fn started_and_held(app: &App, log: &Path, gauge: &str) -> bool {
    running(app, "farm", "h1").await;
    assert_eq!(starts(log), ["start h1"]);
    holds_one(app, gauge).await
}

/// Whether `gauge` came to show one connection held.
async fn holds_one(app: &App, gauge: &str) -> bool {
    let held = format!("{gauge} 1");
    metrics_when(app, |m| m.contains(&held))
        .await
        .contains(&held)
}

/// Asserts that a held client who gave up freed its place: `gauge` back
/// to 0 and one `client_left` outcome in `counter`.
async fn freed_by_leaving(app: &App, gauge: &str, counter: &str) {
    let wanted = [
        format!("{gauge} 0"),
        format!("{counter}{{outcome=\"client_left\"}} 1"),
    ];
    let metrics = metrics_when(app, |m| wanted.iter().all(|w| m.contains(w))).await;
    assert!(wanted.iter().all(|w| metrics.contains(w)), "{metrics}");
}

fn spawn(dir: &Path, extra: &[&str]) -> (App, Vec<String>) {
    let mut args = vec!["--allow-power-commands"];
    args.extend_from_slice(extra);
    App::spawn_with(dir, "127.0.0.1:0", &args)
}

/// Each start on connect is counted in `deskbroker_start_on_connect_total`
/// by its decision: the first connect that finds no host starts one, the
/// next finds it already starting. (A8 itself, which host is started,
/// once, and that the connect is placed there after its heartbeat, is
/// proved in process, in the broker's `rules` tests.)
#[tokio::test]
async fn a8_starts_on_connect_are_counted_in_the_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("power.log");
    let (app, _) = spawn(&dir.path().join("data"), &[]);
    pool_all_stopped(
        &app,
        "p",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
               "startVmOnConnect": true}),
        &log,
        &[("h1", json!({"address": "10.0.0.1:3389"}))],
    )
    .await;
    starting(&app, "p", "alice@contoso.com").await;
    starting(&app, "p", "bob@contoso.com").await;
    let wanted = [
        "deskbroker_start_on_connect_total{decision=\"started\"} 1",
        "deskbroker_start_on_connect_total{decision=\"already_starting\"} 1",
    ];
    let metrics = metrics_when(&app, |m| wanted.iter().all(|w| m.contains(w))).await;
    assert!(wanted.iter().all(|w| metrics.contains(w)), "{metrics}");
}

/// The front door holds a client while h1 starts; a client that gives up
/// meanwhile frees its place at once (its socket is watched while held);
/// the next is relayed to h1 once its heartbeat is in.
#[tokio::test]
async fn a8_the_front_door_holds_a_client_while_its_host_starts_then_relays_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("power.log");
    let (app, rdp) = App::spawn_with_front_door(
        &dir.path().join("data"),
        "farm",
        &["--allow-power-commands"],
    );
    let host = echo_host().await;
    pool_all_stopped(
        &app,
        "farm",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
               "startVmOnConnect": true, "allowedAddressRanges": ["127.0.0.0/8"]}),
        &log,
        &[("h1", json!({"address": host}))],
    )
    .await;

    let connect = async || {
        let mut client = TcpStream::connect(&rdp).await.expect("front door");
        client
            .write_all(&first_pdu("Cookie: mstshash=alice"))
            .await
            .unwrap();
        client
    };
    let impatient = connect().await;
    // The front door's connect started h1; the client is held meanwhile.
    assert!(
        started_and_held(&app, &log, "deskbroker_rdp_waiting_connections").await,
        "the client is held"
    );
    // It gives up: the hold ends then, long before its bound, and no
    // session is made.
    drop(impatient);
    freed_by_leaving(
        &app,
        "deskbroker_rdp_waiting_connections",
        "deskbroker_rdp_connections_total",
    )
    .await;
    let sessions = app
        .ok("GET", "/api/v1/hostPools/farm/userSessions", None, 200)
        .await;
    assert_eq!(sessions["value"], json!([]), "{sessions}");

    let mut client = connect().await;
    let held = holds_one(&app, "deskbroker_rdp_waiting_connections").await;
    assert!(held, "the next client is held");
    // The host's heartbeat makes it available: the held client is relayed.
    beat(&app, "farm", "h1").await;
    let mut cc = [0u8; 2];
    tokio::time::timeout(WAIT, client.read_exact(&mut cc))
        .await
        .expect("relayed once the host is available")
        .expect("the host's answer");
    assert_eq!(&cc, b"CC");
    client.write_all(b"ping").await.unwrap();
    let mut echo = [0u8; 4];
    client.read_exact(&mut echo).await.unwrap();
    assert_eq!(&echo, b"ping");
    let sessions = app
        .ok("GET", "/api/v1/hostPools/farm/userSessions", None, 200)
        .await;
    assert_eq!(sessions["value"][0]["sessionHost"], "h1", "{sessions}");
}

#[tokio::test]
async fn a8_the_front_door_closes_a_client_whose_host_does_not_come_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("power.log");
    let (app, rdp) = App::spawn_with_front_door(
        &dir.path().join("data"),
        "farm",
        &[
            "--allow-power-commands",
            "--rdp-host-start-wait-seconds",
            "1",
        ],
    );
    let host = echo_host().await;
    pool_all_stopped(
        &app,
        "farm",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
               "startVmOnConnect": true, "allowedAddressRanges": ["127.0.0.0/8"]}),
        &log,
        &[("h1", json!({"address": host}))],
    )
    .await;
    let mut client = TcpStream::connect(&rdp).await.expect("front door");
    client
        .write_all(&first_pdu("Cookie: mstshash=alice"))
        .await
        .unwrap();
    // No heartbeat ever comes: past its bound the client is told the
    // desktop is unavailable (1003, try again later), and closed.
    let mut start = [0u8; 2];
    tokio::time::timeout(WAIT, client.read_exact(&mut start))
        .await
        .expect("answered past the bound")
        .expect("the refusal");
    assert_eq!(
        crate::wire::refusal(&mut client, start).await,
        1003,
        "told the desktop is unavailable"
    );
    assert_eq!(starts(&log), ["start h1"]);
    let metrics = app.text("/metrics").await;
    assert!(
        metrics.contains("deskbroker_rdp_connections_total{outcome=\"host_start_timeout\"} 1"),
        "{metrics}"
    );
    let sessions = app
        .ok("GET", "/api/v1/hostPools/farm/userSessions", None, 200)
        .await;
    assert_eq!(sessions["value"], json!([]), "{sessions}");
}

/// The same through the RD Gateway, with real xfreerdp and xrdp: the
/// channel request is held while h1 starts (the gateway's gauge shows it);
/// a client that gives up meanwhile frees its place at once (its tunnel is
/// watched while held); the next is opened on h1 once its heartbeat is
/// in, and the user lands there.
#[tokio::test]
async fn a8_the_rd_gateway_holds_a_channel_while_its_host_starts_then_opens_it() {
    use crate::Client;
    use crate::Display;
    use crate::Xrdp;
    use crate::require;
    use crate::wait_session;
    let xrdp = require("xrdp", "xrdp");
    let xfreerdp = require("xfreerdp", "freerdp2-x11");
    let xvfb = require("Xvfb", "xvfb");
    let openssl = require("openssl", "openssl");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("power.log");
    let host = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp-a"));
    let display = Display::start(&xvfb);
    let (app, _) = spawn(
        &dir.path().join("data"),
        &["--gateway-listen", "127.0.0.1:0"],
    );
    let gateway = app.ready.gateway_addr().to_string();
    pool_all_stopped(
        &app,
        "farm",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
               "startVmOnConnect": true, "allowFrontDoor": true,
               "allowedAddressRanges": ["127.0.0.0/8"]}),
        &log,
        &[("h1", json!({"address": host.address}))],
    )
    .await;
    let file = app
        .text("/api/v1/hostPools/farm/rdpFile?user=alice&gateway=true")
        .await;
    let token = file
        .split("\r\n")
        .find_map(|l| l.strip_prefix("gatewayaccesstoken:s:"))
        .expect("an access token")
        .to_string();
    let args: Vec<String> = vec![
        "/v:farm".into(),
        "/u:alice".into(),
        format!("/g:{gateway}"),
        "/gt:http".into(),
        format!("/gat:{token}"),
    ];
    let home = dir.path().join("home");
    let impatient = Client::start(&xfreerdp, &display, &home, &args);
    // The gateway's connect started h1; the channel is held meanwhile.
    assert!(
        started_and_held(&app, &log, "deskbroker_rdg_waiting_channels").await,
        "the channel is held: {}",
        impatient.log()
    );
    // The client gives up (killed: its connections close): the hold ends
    // then, long before its bound, and no session is made.
    drop(impatient);
    freed_by_leaving(
        &app,
        "deskbroker_rdg_waiting_channels",
        "deskbroker_rdg_tunnels_total",
    )
    .await;
    assert_eq!(crate::session_of(&app, "farm", "alice").await, None);

    let alice = Client::start(&xfreerdp, &display, &home, &args);
    let held = holds_one(&app, "deskbroker_rdg_waiting_channels").await;
    assert!(held, "the channel is held again: {}", alice.log());
    assert_eq!(host.tls_connections(), 0);
    // The host's heartbeat makes it available: the channel opens on it.
    beat(&app, "farm", "h1").await;
    let reached = eventually(WAIT, || async { host.tls_connections() >= 1 }).await;
    assert!(reached, "xrdp was not reached: {}", alice.log());
    wait_session(&app, "farm", "alice", "h1", "Active").await;
    assert!(
        app.text("/metrics")
            .await
            .contains("deskbroker_rdg_waiting_channels 0")
    );
}
