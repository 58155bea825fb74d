//! Messages to users wait for their host's next heartbeat at most
//! `broker::messages::MESSAGE_TTL` by the broker's clock: one fetched
//! within it is delivered, one fetched later is dropped.

use broker::messages::MESSAGE_TTL;
use broker::testkit::Kit;
use serde_json::{Value, json};

async fn send(kit: &Kit, id: &str, text: &str) {
    kit.ok(
        "POST",
        &format!("/api/v1/hostPools/farm/userSessions/{id}/sendMessage"),
        Some(json!({"title": "Maintenance", "message": text})),
        202,
    )
    .await;
}

fn texts(answer: &Value) -> Vec<String> {
    answer["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|m| m["message"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn a_message_waits_for_its_host_no_longer_than_its_time_to_live() {
    let kit = Kit::open().await;
    kit.create_pool(
        "farm",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
               "heartbeatTimeoutSeconds": 86400}),
    )
    .await;
    let credential = kit.register_host("farm", "sh1", "10.0.0.1:3389").await;
    let beat = json!({"cpuPercent": 5.0, "sessions": [{"user": "alice", "state": "Active"}]});
    let id = kit.place("farm", "alice", "Active").await;
    let (status, v) = kit
        .heartbeat("farm", "sh1", &credential, beat.clone())
        .await;
    assert_eq!(status, 200, "{v}");

    send(&kit, &id, "in time").await;
    kit.advance(MESSAGE_TTL - std::time::Duration::from_millis(1))
        .await;
    let (status, v) = kit
        .heartbeat("farm", "sh1", &credential, beat.clone())
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(texts(&v), ["in time"], "{v}");

    send(&kit, &id, "too late").await;
    kit.advance(MESSAGE_TTL).await;
    let (status, v) = kit.heartbeat("farm", "sh1", &credential, beat).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(texts(&v), Vec::<String>::new(), "{v}");
}
