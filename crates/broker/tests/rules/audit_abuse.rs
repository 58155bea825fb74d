//! Rules T4 and T5 as an attacker tries them: the audit log cannot be
//! filled through refused requests (their bodies are not rendered,
//! refusals are folded per minute of the broker's clock, audited requests
//! are limited per credential), it is bounded in entries and in bytes, and
//! tickets and the admin token's heartbeats cannot dodge it.

use std::time::Duration;

use broker::testkit::Kit;
use broker::writer::AUDIT_PRUNE_INTERVAL;
use serde_json::{Value, json};

use crate::audit::{all_pages, client};

/// Every entry of the log, newest first.
async fn log(kit: &Kit) -> Vec<Value> {
    all_pages(kit, "?pageSize=1000").await
}

/// The value of a counter without labels in the broker's metrics (0 when
/// it is not there). The metrics are the process's: compare before and
/// after.
async fn counter(kit: &Kit, name: &str) -> f64 {
    kit.text("/metrics")
        .await
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(start_paused = true)]
async fn a_refused_request_with_a_huge_body_adds_a_few_hundred_bytes() {
    let kit = Kit::open().await;
    kit.pool_with_hosts("p", "BreadthFirst", 5, 1).await;
    let host = kit.register_host("p", "agent1", "10.9.0.1:3389").await;
    let name = "a".repeat(250 * 1024);
    let (status, v) = kit
        .call_from(
            client(),
            Some(&host),
            "POST",
            "/api/v1/credentials",
            Some(json!({"name": name, "role": "admin"})),
        )
        .await;
    assert_eq!(status, 403, "{v}");
    // A refused change of a whole pool renders nothing either.
    let (status, _) = kit
        .call_from(
            client(),
            Some(&host),
            "PUT",
            "/api/v1/hostPools/p",
            Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst"})),
        )
        .await;
    assert_eq!(status, 403);
    let entries = log(&kit).await;
    for entry in entries.iter().take(2) {
        assert_eq!(entry["actor"], "host:p/agent1", "{entry}");
        assert_eq!(entry["outcome"], 403, "{entry}");
        let bytes = serde_json::to_string(entry).expect("json").len();
        assert!(bytes <= 400, "an entry of {bytes} bytes: {entry}");
    }
    assert_eq!(entries[1]["action"], "POST /api/v1/credentials");
    assert_eq!(entries[1]["target"], "credentials");
    assert_eq!(entries[0]["before"], Value::Null);
    assert_eq!(entries[0]["after"], Value::Null);
}

#[tokio::test(start_paused = true)]
async fn a_host_credential_cannot_flood_the_log() {
    let kit = Kit::open().await;
    kit.pool_with_hosts("p", "BreadthFirst", 5, 1).await;
    let host = kit.register_host("p", "agent1", "10.9.0.1:3389").await;
    let mut statuses = Vec::new();
    for i in 0..50 {
        let (status, _) = kit
            .call_as(
                Some(&host),
                "DELETE",
                &format!("/api/v1/hostPools/p/sessionHosts/h{i}"),
                None,
            )
            .await;
        statuses.push(status);
    }
    assert!(statuses[..30].iter().all(|s| *s == 403), "{statuses:?}");
    assert!(statuses[30..].contains(&429), "{statuses:?}");
    let recorded = log(&kit)
        .await
        .iter()
        .filter(|e| e["actor"] == "host:p/agent1")
        .count();
    assert!(recorded <= 32, "{recorded} entries of the host");
    // Its heartbeats are neither limited nor recorded.
    let (status, v) = kit
        .heartbeat(
            "p",
            "agent1",
            &host,
            json!({"cpuPercent": 5.0, "sessions": []}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
}

#[tokio::test(start_paused = true)]
async fn tickets_and_the_admin_tokens_heartbeats_are_recorded() {
    let kit = Kit::open_with(|s| s.rdp_front_door = Some("127.0.0.1:3389".into())).await;
    kit.pool_with_hosts("p", "BreadthFirst", 5, 1).await;
    let file = kit.text("/api/v1/hostPools/p/rdpFile?user=alice").await;
    let entries = log(&kit).await;
    let ticket = &entries[0];
    assert_eq!(ticket["actor"], "admin", "{ticket}");
    assert_eq!(
        ticket["action"], "GET /api/v1/hostPools/p/rdpFile",
        "{ticket}"
    );
    assert_eq!(ticket["hostPool"], "p", "{ticket}");
    assert_eq!(ticket["after"]["ticketFor"], "alice", "{ticket}");
    assert!(
        ticket["after"]["expirationTime"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{ticket}"
    );
    // The ticket itself is nowhere in the entry.
    let ticket_line = file
        .lines()
        .find(|l| l.contains("loadbalanceinfo"))
        .expect("the file's ticket");
    // `dbt1:POOL:EXPIRY:SIGNATURE:USER`: its signature is what makes it.
    let signature = ticket_line.split(':').nth(5).unwrap_or("");
    assert!(signature.len() >= 16, "{ticket_line}");
    assert!(!ticket.to_string().contains(signature), "{ticket}");
    // A file without a user carries no ticket and is not recorded.
    kit.text("/api/v1/hostPools/p/rdpFile").await;
    assert_eq!(log(&kit).await.len(), entries.len());

    let (status, v) = kit
        .call(
            "POST",
            "/api/v1/hostPools/p/sessionHosts/h1/heartbeat",
            Some(json!({"cpuPercent": 5.0, "sessions": []})),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let entries = log(&kit).await;
    assert_eq!(
        entries[0]["action"], "POST /api/v1/hostPools/p/sessionHosts/h1/heartbeat",
        "{entries:#?}"
    );
    assert_eq!(entries[0]["actor"], "admin");
    assert_eq!(entries[0]["outcome"], 200);
    let host = kit.register_host("p", "agent1", "10.9.0.1:3389").await;
    let before = log(&kit).await.len();
    let (status, v) = kit
        .heartbeat(
            "p",
            "agent1",
            &host,
            json!({"cpuPercent": 5.0, "sessions": []}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(log(&kit).await.len(), before, "a host's own heartbeat");
}

/// The log is bounded in bytes (`--audit-max-bytes`): once the entries
/// take more, the next prune removes the oldest.
#[tokio::test(start_paused = true)]
async fn the_log_is_bounded_in_bytes() {
    let kit = Kit::open_with(|s| s.audit_retention.max_bytes = 20_000).await;
    // Each pool's entry renders the pool: well over 1 KB each.
    for i in 0..40 {
        kit.create_pool(
            &format!("b{i}"),
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"}),
        )
        .await;
    }
    assert_eq!(log(&kit).await.len(), 40, "nothing pruned yet");
    kit.advance(AUDIT_PRUNE_INTERVAL).await;
    let entries = log(&kit).await;
    assert!(
        !entries
            .iter()
            .any(|e| e["action"] == "PUT /api/v1/hostPools/b0"),
        "the oldest entry is still there"
    );
    assert_eq!(
        entries[0]["action"], "PUT /api/v1/hostPools/b39",
        "the newest stays"
    );
    assert!(entries.len() < 40, "{} entries", entries.len());
    let bytes: usize = entries
        .iter()
        .map(|e| serde_json::to_string(&e["after"]).map_or(0, |s| s.len()))
        .sum();
    assert!(bytes <= 20_000, "{bytes} bytes kept");
}

/// 300 refusals in one minute are one entry counting them, the next
/// minute's refusal a new entry; a log bounded to four entries keeps the
/// accepted change; and entries the bound removes while younger than the
/// retention are counted.
#[tokio::test(start_paused = true)]
async fn refusals_are_folded_per_minute_and_cannot_push_accepted_changes_out() {
    const REFUSALS: u64 = 300;
    let kit = Kit::open_with(|s| s.audit_retention.max_rows = 4).await;
    let pool = json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"});
    kit.create_pool("kept", pool.clone()).await;
    let reader = kit.credential("flooder", "reader", &[]).await;
    let refuse = || async {
        let (status, v) = kit
            .call_from(
                client(),
                Some(&reader),
                "DELETE",
                "/api/v1/hostPools/kept",
                None,
            )
            .await;
        assert_eq!(status, 403, "{v}");
    };
    // The minute starts at T0; the flood fills its last second.
    kit.advance(Duration::from_secs(59)).await;
    for _ in 0..REFUSALS {
        refuse().await;
    }
    kit.advance(AUDIT_PRUNE_INTERVAL).await;
    let entries = log(&kit).await;
    assert!(entries.len() <= 4, "{entries:#?}");
    assert!(
        entries
            .iter()
            .any(|e| e["action"] == "PUT /api/v1/hostPools/kept" && e["outcome"] == 201),
        "the accepted change was pushed out: {entries:#?}"
    );
    let refused: Vec<&Value> = entries
        .iter()
        .filter(|e| e["actor"] == "credential:flooder")
        .collect();
    assert_eq!(refused.len(), 1, "one entry for the minute: {refused:#?}");
    let e = refused[0];
    assert_eq!(e["count"], REFUSALS, "{e}");
    assert_eq!(e["action"], "DELETE /api/v1/hostPools/kept", "{e}");
    assert_eq!(e["outcome"], 403, "{e}");
    assert_eq!(e["source"], "127.0.0.1", "{e}");
    // The next minute (the clock is past T0 + 60 s now), a refusal is an
    // entry of its own.
    refuse().await;
    let refused: Vec<Value> = log(&kit)
        .await
        .into_iter()
        .filter(|e| e["actor"] == "credential:flooder")
        .collect();
    let counts: Vec<Option<u64>> = refused.iter().map(|e| e["count"].as_u64()).collect();
    assert_eq!(counts.len(), 2, "{refused:#?}");
    assert_eq!(counts[1], Some(REFUSALS), "{refused:#?}");
    assert_eq!(counts[0].unwrap_or(1), 1, "{refused:#?}");

    // Accepted changes past the bound: the oldest entries go while they
    // are far younger than the retention, and the metric says so.
    let name = "deskbroker_audit_pruned_before_retention_total";
    let before = counter(&kit, name).await;
    for i in 0..4 {
        kit.create_pool(&format!("more{i}"), pool.clone()).await;
    }
    kit.advance(AUDIT_PRUNE_INTERVAL).await;
    let after = counter(&kit, name).await;
    assert!(after >= before + 1.0, "{before} then {after}");
}

/// Refusals with ever new names, in one minute: 16 entries with their
/// names, then one by route pattern counting the rest.
#[tokio::test(start_paused = true)]
async fn refusals_with_ever_new_names_are_folded_by_route() {
    const REFUSALS: u64 = 40;
    let kit = Kit::open().await;
    let reader = kit.credential("namer", "reader", &[]).await;
    for i in 0..REFUSALS {
        let (status, v) = kit
            .call_as(
                Some(&reader),
                "DELETE",
                &format!("/api/v1/hostPools/pool{i}"),
                None,
            )
            .await;
        assert_eq!(status, 403, "{v}");
    }
    let entries: Vec<Value> = log(&kit)
        .await
        .into_iter()
        .filter(|e| e["actor"] == "credential:namer")
        .collect();
    let named = broker::audit::MAX_REFUSAL_ENTRIES_PER_MINUTE;
    assert_eq!(entries.len(), named + 1, "{entries:#?}");
    let counted: u64 = entries
        .iter()
        .map(|e| e["count"].as_u64().unwrap_or(1))
        .sum();
    assert_eq!(counted, REFUSALS, "{entries:#?}");
    let by_pattern: Vec<&Value> = entries
        .iter()
        .filter(|e| e["action"] == "DELETE /api/v1/hostPools/{pool}")
        .collect();
    assert_eq!(by_pattern.len(), 1, "{entries:#?}");
    let e = by_pattern[0];
    assert_eq!(e["count"], REFUSALS - named as u64, "{e}");
    assert_eq!(e["target"], "hostPools/{pool}", "{e}");
    assert_eq!(e["hostPool"], Value::Null, "{e}");
}
