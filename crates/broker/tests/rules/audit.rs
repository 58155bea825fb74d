//! Rule T5: the audit log records every change (allowed or refused) with
//! its actor, source, before and after, and outcome; never a secret;
//! filters and pages; keeps what it acknowledged across a restart; a
//! credential limited to some pools sees only theirs; and entries older
//! than the retention go.

use std::net::SocketAddr;
use std::time::Duration;

use broker::testkit::{ADMIN_TOKEN, Kit, T0};
use serde_json::{Value, json};

/// The client address the recorded calls come from.
pub fn client() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 50_123))
}

/// Every entry of `query`, following nextLink, newest first.
pub async fn all_pages(kit: &Kit, query: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut path = format!("/api/v1/auditLog{query}");
    loop {
        let v = kit.ok("GET", &path, None, 200).await;
        out.extend(v["value"].as_array().expect("value").iter().cloned());
        match v["nextLink"].as_str() {
            Some(next) => path = next.to_string(),
            None => return out,
        }
    }
}

/// The first page of the log for `query`, as the admin.
async fn entries(kit: &Kit, query: &str) -> Vec<Value> {
    let v = kit
        .ok("GET", &format!("/api/v1/auditLog{query}"), None, 200)
        .await;
    v["value"].as_array().expect("value").clone()
}

/// The newest entry whose action is `action`.
fn find<'a>(entries: &'a [Value], action: &str) -> &'a Value {
    entries
        .iter()
        .find(|e| e["action"] == action)
        .unwrap_or_else(|| panic!("no entry {action} in {entries:#?}"))
}

/// A drain, a refused reader's undrain, a refused delete: each recorded
/// with its actor, source, before, after and outcome. Answers the
/// reader's token.
async fn drain_and_refusals_are_recorded(kit: &Kit) -> String {
    kit.pool_with_hosts("p", "BreadthFirst", 5, 2).await;
    let reader = kit.credential("watcher", "reader", &[]).await;
    let h1 = "/api/v1/hostPools/p/sessionHosts/h1";
    let (status, v) = kit
        .call_from(
            client(),
            Some(ADMIN_TOKEN),
            "PATCH",
            h1,
            Some(json!({"allowNewSession": false})),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    // A reader may not undrain: 403, nothing changed, and recorded.
    let (status, _) = kit
        .call_from(
            client(),
            Some(&reader),
            "PATCH",
            h1,
            Some(json!({"allowNewSession": true})),
        )
        .await;
    assert_eq!(status, 403);
    assert_eq!(
        kit.host("p", "h1").await["allowNewSession"],
        false,
        "the refusal changed nothing"
    );
    // A handler's refusal (no such host) is recorded too.
    kit.refused(
        "DELETE",
        "/api/v1/hostPools/p/sessionHosts/ghost",
        None,
        404,
        "SessionHostNotFound",
    )
    .await;
    let log = entries(kit, "").await;
    let actions: Vec<&str> = log
        .iter()
        .map(|e| e["action"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        actions,
        [
            "DELETE /api/v1/hostPools/p/sessionHosts/ghost",
            "PATCH /api/v1/hostPools/p/sessionHosts/h1",
            "PATCH /api/v1/hostPools/p/sessionHosts/h1",
            "POST /api/v1/credentials",
            "PUT /api/v1/hostPools/p/sessionHosts/h2",
            "PUT /api/v1/hostPools/p/sessionHosts/h1",
            "PUT /api/v1/hostPools/p",
        ],
        "newest first: {log:#?}"
    );
    let drain = &log[2];
    assert_eq!(drain["actor"], "admin", "{drain}");
    assert_eq!(drain["target"], "hostPools/p/sessionHosts/h1", "{drain}");
    assert_eq!(drain["hostPool"], "p", "{drain}");
    assert_eq!(drain["before"]["allowNewSession"], true, "{drain}");
    assert_eq!(drain["after"]["allowNewSession"], false, "{drain}");
    assert_eq!(drain["outcome"], 200, "{drain}");
    assert_eq!(drain["source"], "127.0.0.1", "{drain}");
    let refused = &log[1];
    assert_eq!(refused["actor"], "credential:watcher", "{refused}");
    assert_eq!(refused["outcome"], 403, "{refused}");
    assert_eq!(refused["source"], "127.0.0.1", "{refused}");
    // A refusal of the authorization table renders nothing.
    assert_eq!(refused["before"], Value::Null, "{refused}");
    assert_eq!(refused["after"], Value::Null, "{refused}");
    assert_eq!(log[0]["outcome"], 404, "{}", log[0]);
    assert_eq!(log[0]["after"], Value::Null, "{}", log[0]);
    let created = &log[6];
    assert_eq!(created["outcome"], 201, "{created}");
    assert_eq!(created["before"], Value::Null, "{created}");
    assert_eq!(created["after"]["name"], "p", "{created}");
    reader
}

#[tokio::test(start_paused = true)]
async fn changes_and_refusals_are_recorded_and_secrets_never() {
    let kit = Kit::open().await;
    let reader = drain_and_refusals_are_recorded(&kit).await;
    // Secrets: a credential, a registration token, a host credential.
    let token = kit.registration_token("p", 600).await;
    let (status, reg) = kit
        .call_as(
            None,
            "POST",
            "/api/v1/register",
            Some(json!({"token": token, "hostPool": "p", "name": "agent1",
                        "address": "10.1.0.1:3389"})),
        )
        .await;
    assert_eq!(status, 201, "{reg}");
    let host_credential = reg["hostCredential"]
        .as_str()
        .expect("credential")
        .to_string();
    // A placement, and a host's own heartbeat (not recorded: telemetry).
    let placed = kit.connect("p", "alice").await;
    let (status, _) = kit
        .heartbeat("p", "agent1", &host_credential, json!({"cpuPercent": 3.0}))
        .await;
    assert_eq!(status, 200);
    let log = entries(&kit, "").await;
    let text = serde_json::to_string(&log).expect("json");
    for secret in [reader.as_str(), &token, &host_credential, ADMIN_TOKEN] {
        assert!(!text.contains(secret), "a secret in the log: {text}");
    }
    assert!(
        log.iter()
            .all(|e| !e["action"].as_str().unwrap_or("").ends_with("/heartbeat")),
        "a host's own heartbeats are not recorded: {text}"
    );
    let cred = find(&log, "POST /api/v1/credentials");
    assert_eq!(cred["target"], "credentials/watcher", "{cred}");
    assert_eq!(cred["after"]["role"], "reader", "{cred}");
    assert_eq!(cred["hostPool"], Value::Null, "{cred}");
    assert!(cred["after"].get("token").is_none(), "{cred}");
    let registered = find(&log, "POST /api/v1/register");
    assert_eq!(registered["actor"], "registration-token:p", "{registered}");
    assert_eq!(
        registered["target"], "hostPools/p/sessionHosts/agent1",
        "{registered}"
    );
    assert_eq!(registered["outcome"], 201, "{registered}");
    assert_eq!(
        registered["after"]["address"], "10.1.0.1:3389",
        "{registered}"
    );
    let token_entry = find(&log, "POST /api/v1/hostPools/p/registrationToken");
    assert_eq!(token_entry["outcome"], 200, "{token_entry}");
    let connect = find(&log, "POST /api/v1/hostPools/p/connect");
    assert_eq!(connect["outcome"], 200, "{connect}");
    assert_eq!(connect["after"]["userPrincipalName"], "alice", "{connect}");
    assert_eq!(
        connect["target"],
        format!(
            "hostPools/p/userSessions/{}",
            placed["sessionId"].as_str().unwrap_or("?")
        ),
        "{connect} / {placed}"
    );
    // A removal: after is null.
    kit.ok("DELETE", "/api/v1/credentials/watcher", None, 204)
        .await;
    let log = entries(&kit, "?pageSize=1").await;
    assert_eq!(
        log[0]["action"], "DELETE /api/v1/credentials/watcher",
        "{log:?}"
    );
    assert_eq!(log[0]["before"]["role"], "reader", "{log:?}");
    assert_eq!(log[0]["after"], Value::Null, "{log:?}");
}

/// Filters, pages and pool-limited readers; the drain comes a minute after
/// the rest, so `since` is shown to cut between them.
#[tokio::test(start_paused = true)]
async fn filters_pages_and_pool_limited_readers() {
    let kit = Kit::open().await;
    kit.pool_with_hosts("p", "BreadthFirst", 5, 3).await;
    kit.pool_with_hosts("q", "BreadthFirst", 5, 1).await;
    let ops = kit.credential("ops", "operator", &["q"]).await;
    kit.advance(Duration::from_secs(60)).await;
    let (status, _) = kit
        .call_as(
            Some(&ops),
            "PATCH",
            "/api/v1/hostPools/q/sessionHosts/h1",
            Some(json!({"allowNewSession": false})),
        )
        .await;
    assert_eq!(status, 200);
    let all = all_pages(&kit, "").await;
    // p, 3 hosts, q, 1 host, the credential, the drain.
    assert_eq!(all.len(), 8, "{all:#?}");
    // Pages of 3 give the same entries, newest first, none twice.
    let paged = all_pages(&kit, "?pageSize=3").await;
    assert_eq!(paged, all);
    let ids: Vec<i64> = paged
        .iter()
        .map(|e| e["id"].as_i64().expect("id"))
        .collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "{ids:?}");
    let v = kit
        .ok("GET", "/api/v1/auditLog?pageSize=3", None, 200)
        .await;
    assert_eq!(
        v["nextLink"],
        format!("/api/v1/auditLog?pageSize=3&beforeId={}", ids[2]),
        "{v}"
    );
    // Filters.
    let by_ops = all_pages(&kit, "?actor=credential:ops").await;
    assert_eq!(by_ops.len(), 1, "{by_ops:?}");
    assert_eq!(
        by_ops[0]["action"],
        "PATCH /api/v1/hostPools/q/sessionHosts/h1"
    );
    assert_eq!(all_pages(&kit, "?hostPool=p").await.len(), 4);
    assert_eq!(all_pages(&kit, "?hostPool=q&actor=admin").await.len(), 2);
    assert_eq!(
        all_pages(&kit, "?since=2000-01-01T00:00:00Z").await.len(),
        8
    );
    assert!(
        all_pages(&kit, "?since=2999-01-01T00:00:00%2B02:00")
            .await
            .is_empty()
    );
    assert_eq!(all[0]["time"], "2026-12-01T00:01:00.000Z", "{}", all[0]);
    let since_drain = all_pages(&kit, "?since=2026-12-01T00:01:00Z").await;
    assert_eq!(since_drain, all[..1], "only the drain is that recent");
    // Bad filters: 400 InvalidParameter.
    for bad in [
        "?since=yesterday",
        "?pageSize=0",
        "?pageSize=1001",
        "?beforeId=x",
        "?user=a",
    ] {
        kit.refused(
            "GET",
            &format!("/api/v1/auditLog{bad}"),
            None,
            400,
            "InvalidParameter",
        )
        .await;
    }
    // A credential limited to q sees q's entries only, and may not ask
    // for p's.
    let limited = kit.credential("q-reader", "reader", &["q"]).await;
    let (status, v) = kit
        .call_as(Some(&limited), "GET", "/api/v1/auditLog", None)
        .await;
    assert_eq!(status, 200, "{v}");
    let pools: Vec<&str> = v["value"]
        .as_array()
        .expect("value")
        .iter()
        .map(|e| e["hostPool"].as_str().unwrap_or("none"))
        .collect();
    assert_eq!(pools, ["q", "q", "q"], "{v}");
    let (status, v) = kit
        .call_as(Some(&limited), "GET", "/api/v1/auditLog?hostPool=p", None)
        .await;
    assert_eq!(status, 403, "{v}");
    // A portal does not read the log; every credential may ask who it is.
    let portal = kit.credential("web", "portal", &[]).await;
    let (status, _) = kit
        .call_as(Some(&portal), "GET", "/api/v1/auditLog", None)
        .await;
    assert_eq!(status, 403);
    let (status, me) = kit
        .call_as(Some(&limited), "GET", "/api/v1/whoami", None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        me,
        json!({"role": "reader", "name": "q-reader", "hostPools": ["q"]})
    );
    let me = kit.ok("GET", "/api/v1/whoami", None, 200).await;
    assert_eq!(me["role"], "admin");
}

#[tokio::test(start_paused = true)]
async fn entries_survive_a_restart() {
    let mut kit = Kit::open().await;
    drain_and_refusals_are_recorded(&kit).await;
    let before = entries(&kit, "").await;
    kit.reopen().await;
    assert_eq!(
        entries(&kit, "").await,
        before,
        "every acknowledged entry is back"
    );
}

/// `--audit-retention-days`, on a retention of ten minutes: an entry is
/// kept until it is older than the retention, then the next prune
/// removes it and keeps the younger ones.
#[tokio::test(start_paused = true)]
async fn entries_older_than_the_retention_are_pruned() {
    let kit = Kit::open_with(|s| s.audit_retention.max_age_ms = 600_000).await;
    let pool = json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"});
    kit.create_pool("old", pool.clone()).await;
    kit.advance(Duration::from_secs(60)).await;
    kit.create_pool("young", pool).await;
    let actions = |log: Vec<Value>| -> Vec<String> {
        log.iter()
            .map(|e| e["action"].as_str().unwrap_or("").to_string())
            .collect()
    };
    // Every prune so far saw the old entry at most ten minutes old.
    kit.advance(Duration::from_secs(540)).await;
    assert_eq!(kit.now_ms(), T0 + 600_000);
    assert_eq!(
        actions(all_pages(&kit, "").await),
        ["PUT /api/v1/hostPools/young", "PUT /api/v1/hostPools/old"]
    );
    kit.advance(Duration::from_millis(1)).await;
    kit.advance(broker::writer::AUDIT_PRUNE_INTERVAL).await;
    assert_eq!(
        actions(all_pages(&kit, "").await),
        ["PUT /api/v1/hostPools/young"],
        "the old entry is pruned, the younger one kept"
    );
}
