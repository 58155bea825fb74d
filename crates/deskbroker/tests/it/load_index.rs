//! LoadIndex over HTTP: the load index on every host, and a logon storm
//! from the load generator against hosts whose metrics are stale.

use std::process::Command;

use serde_json::{Value, json};

use crate::{App, TOKEN, exe};

#[tokio::test]
async fn hosts_show_their_load_index_and_storm_buckets_hold() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    app.ok(
        "PUT",
        "/api/v1/hostPools/li",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "LoadIndex",
                    "loadIndexSettings": {"cpuThreshold": 100, "includeSessionCount": false}}),
        ),
        201,
    )
    .await;
    // Indexes 5, 10, 30, 40, 50, 90 from CPU against a threshold of 100.
    for (i, cpu) in [5.0, 10.0, 30.0, 40.0, 50.0, 90.0].iter().enumerate() {
        let host = format!("h{}", i + 1);
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/li/sessionHosts/{host}"),
            Some(json!({"address": format!("10.0.0.{}:3389", i + 1)})),
            201,
        )
        .await;
        let v = app
            .ok(
                "POST",
                &format!("/api/v1/hostPools/li/sessionHosts/{host}/heartbeat"),
                Some(json!({"cpuPercent": cpu})),
                200,
            )
            .await;
        assert_eq!(v["loadIndex"], *cpu as i64, "{v}");
    }
    // Defaults 20/20/4: bucket 1 widens to the four least-loaded hosts, and
    // round robin gives each exactly 10 of 40 logons.
    for i in 0..40 {
        app.ok(
            "POST",
            "/api/v1/hostPools/li/connect",
            Some(json!({"user": format!("u{i}")})),
            200,
        )
        .await;
    }
    let hosts = app
        .ok("GET", "/api/v1/hostPools/li/sessionHosts", None, 200)
        .await;
    let sessions: Vec<u64> = hosts["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["sessions"].as_u64().unwrap())
        .collect();
    assert_eq!(sessions, [10, 10, 10, 10, 0, 0]);
    // The index shows in /metrics too.
    let text = app.text("/metrics").await;
    assert!(
        text.contains("deskbroker_host_load_index{pool=\"li\",host=\"h6\"} 90"),
        "{text}"
    );
    // Host-side rejection (H6): h1 refuses at index 5 by its own policy.
    app.ok(
        "PATCH",
        "/api/v1/hostPools/li/sessionHosts/h1",
        Some(json!({"policy": {"loadIndexThreshold": 5}})),
        200,
    )
    .await;
    for i in 40..44 {
        let v = app
            .ok(
                "POST",
                "/api/v1/hostPools/li/connect",
                Some(json!({"user": format!("u{i}")})),
                200,
            )
            .await;
        assert_ne!(v["sessionHost"], "h1", "h1 refuses new logons: {v}");
    }
    // ...but u0 reconnects to it (S1 is exempt).
    let v = app
        .ok(
            "POST",
            "/api/v1/hostPools/li/connect",
            Some(json!({"user": "u0"})),
            200,
        )
        .await;
    assert_eq!(v["reconnect"], true);
    // Out-of-range settings are refused naming the field.
    let (status, v) = app
        .call(
            "PATCH",
            "/api/v1/hostPools/li",
            Some(json!({"logonStormSettings": {"connectingSessionThreshold": 151}})),
        )
        .await;
    assert_eq!(status, 400);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("logonStormSettings.connectingSessionThreshold"),
        "{v}"
    );
    let (status, _) = app
        .call(
            "POST",
            "/api/v1/hostPools/li/sessionHosts/h2/heartbeat",
            Some(json!({"customLoadIndex": -3})),
        )
        .await;
    assert_eq!(status, 400);
    // A heartbeat is refused whole: a new policy beside an out-of-range
    // metric changes nothing.
    app.ok(
        "POST",
        "/api/v1/hostPools/li/sessionHosts/h2/heartbeat",
        Some(json!({"cpuPercent": 10.0, "policy": {"loadIndexThreshold": 6}})),
        200,
    )
    .await;
    let (status, _) = app
        .call(
            "POST",
            "/api/v1/hostPools/li/sessionHosts/h2/heartbeat",
            Some(json!({"cpuPercent": 10.0, "customLoadIndex": -3,
                        "policy": {"loadIndexThreshold": 7}})),
        )
        .await;
    assert_eq!(status, 400);
    let h2 = app
        .ok("GET", "/api/v1/hostPools/li/sessionHosts/h2", None, 200)
        .await;
    assert_eq!(h2["policy"]["loadIndexThreshold"], 6, "{h2}");
}

#[tokio::test]
async fn a_storm_on_stale_metrics_never_floods_a_host() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    // The load generator: 60 hosts heartbeat a fixed CPU once, then 900
    // logons arrive with no new metrics (H4), none confirmed (all Pending).
    let out = Command::new(exe())
        .args([
            "bench",
            "storm",
            "--broker",
            &app.url,
            "--hosts",
            "60",
            "--users",
            "900",
            "--concurrency",
            "16",
            "--load-balancer-type",
            "LoadIndex",
            "--quiet",
            "--output",
            "json",
        ])
        .env("DESKBROKER_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["placed"], 900, "{r}");
    assert_eq!(r["sessionsInPool"], 900, "{r}");
    // 60 hosts × 20 connecting sessions = 1,200 places under the default
    // connecting threshold: no host ever needed to go past it.
    assert!(
        r["maxConnectingSessionsPerHost"].as_u64().unwrap() <= 20,
        "{r}"
    );
    assert!(
        r["hostsUsed"].as_u64().unwrap() >= 45,
        "the storm was spread: {r}"
    );
}
