//! The kit itself: time moves only when told, and a restart sees what
//! was made durable before it.

use std::time::Duration;

use broker::testkit::{Kit, T0};
use serde_json::json;

#[tokio::test(start_paused = true)]
async fn the_clock_moves_only_when_told_and_a_restart_keeps_what_was_durable() {
    let mut kit = Kit::open().await;
    assert_eq!(kit.now_ms(), T0);
    kit.create_pool(
        "p",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"}),
    )
    .await;
    kit.register_host("p", "h1", "10.0.0.1:3389").await;
    let id = kit.place("p", "alice", "Active").await;
    assert_eq!(kit.now_ms(), T0, "calls do not move the clock");
    kit.advance(Duration::from_secs(90)).await;
    assert_eq!(kit.now_ms(), T0 + 90_000);

    kit.reopen().await;
    assert_eq!(kit.now_ms(), T0 + 90_000, "a restart keeps the time");
    let sessions = kit.sessions("p").await;
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(sessions[0]["id"], id.as_str());
    assert_eq!(sessions[0]["sessionState"], "Active");
}
