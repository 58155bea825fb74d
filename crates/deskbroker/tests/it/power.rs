//! Rules A9 and A10 through the real binary's CLI: `deskbroker sessionhost
//! start` and `update` and `deskbroker hostpool scaling-actions` on a pool
//! whose command driver runs scripted commands (appending
//! `$DESKBROKER_ACTION $DESKBROKER_HOST` to a file). The API's starts,
//! stops and refusals, retries, timeouts, Wake-on-LAN's packet, who may do
//! what, and a kill -9 in the middle of an action are proved in process,
//! in the broker's `rules` tests.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::{App, append_to};

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

/// The CLI starts a stopped host (its command runs once), lists the
/// pool's actions newest first, and updates a host's tags, MAC address
/// and drain. (The same actions through the API, and what is refused, are
/// proved in process, in the broker's `rules` tests.)
#[tokio::test]
async fn a9_a10_the_cli_starts_lists_and_updates_hosts() {
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
    app.ok(
        "POST",
        "/api/v1/hostPools/p/sessionHosts/h1/stop",
        None,
        202,
    )
    .await;
    let done = settled(&app, "p").await;
    assert_eq!(done["outcome"], "Succeeded", "{done}");

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

    // Tags and macAddress through the CLI; a drain there is the operator's.
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
}
