//! Rules T4 and T5 against the real binary, as an attacker tries them: the
//! audit log cannot be filled through refused requests (their bodies are not
//! read, names are validated, audited requests are limited per credential),
//! what it shows cannot drive a terminal, it is bounded in bytes, and it
//! cannot be dodged (a client that closes its socket at once, a ticket, the
//! admin token's heartbeat).

use std::io::Write;
use std::time::Duration;

use serde_json::{Value, json};

use crate::{App, TOKEN, eventually, pool_with_hosts};

/// Every entry of the audit log, newest first, as the API shows them.
async fn log(app: &App) -> Vec<Value> {
    let mut out = Vec::new();
    let mut path = "/api/v1/auditLog?pageSize=1000".to_string();
    loop {
        let v = app.ok("GET", &path, None, 200).await;
        out.extend(v["value"].as_array().expect("value").iter().cloned());
        match v["nextLink"].as_str() {
            Some(next) => path = next.to_string(),
            None => return out,
        }
    }
}

/// A request written on a fresh connection, which is closed as soon as the
/// request is sent, without reading the answer.
fn send_and_close(app: &App, method: &str, path: &str, body: Option<&str>) {
    let mut s = std::net::TcpStream::connect(app.listen_addr()).expect("connect");
    let body = body.unwrap_or("");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: broker\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).expect("send");
    drop(s);
}

/// A 250 KiB credential name sent with a session host's credential is
/// refused, and its entry stays a few hundred bytes: nothing of the body,
/// no rendering of anything.
#[tokio::test]
async fn a_refused_request_with_a_huge_body_adds_a_few_hundred_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 5, 1).await;
    let host = crate::enroll(&app, "p", "agent1", "10.9.0.1:3389").await;
    let name = "a".repeat(250 * 1024);
    let (status, v) = app
        .call_with(
            "POST",
            "/api/v1/credentials",
            Some(json!({"name": name, "role": "admin"})),
            Some(&host),
        )
        .await;
    assert_eq!(status, 403, "{v}");
    // A refused change of a whole pool renders nothing either.
    let (status, _) = app
        .call_with(
            "PUT",
            "/api/v1/hostPools/p",
            Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst"})),
            Some(&host),
        )
        .await;
    assert_eq!(status, 403);
    let entries = log(&app).await;
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

/// A host credential's audited requests (all of them refusals) are limited
/// by default: after a burst of 30, 429, and nothing more is recorded.
#[tokio::test]
async fn a_host_credential_cannot_flood_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 5, 1).await;
    let host = crate::enroll(&app, "p", "agent1", "10.9.0.1:3389").await;
    let mut statuses = Vec::new();
    for i in 0..50 {
        let (status, _) = app
            .call_with(
                "DELETE",
                &format!("/api/v1/hostPools/p/sessionHosts/h{i}"),
                None,
                Some(&host),
            )
            .await;
        statuses.push(status);
    }
    assert!(statuses[..30].iter().all(|s| *s == 403), "{statuses:?}");
    assert!(statuses[30..].contains(&429), "{statuses:?}");
    let recorded = log(&app)
        .await
        .iter()
        .filter(|e| e["actor"] == "host:p/agent1")
        .count();
    assert!(recorded <= 32, "{recorded} entries of the host");
    // Its heartbeats are neither limited nor recorded.
    let (status, v) = app
        .call_with(
            "POST",
            "/api/v1/hostPools/p/sessionHosts/agent1/heartbeat",
            Some(json!({"cpuPercent": 5.0, "sessions": []})),
            Some(&host),
        )
        .await;
    assert_eq!(status, 200, "{v}");
}

/// Escape sequences sent by an attacker (a percent-encoded path segment, a
/// credential name, a user name with a bidi override) never reach an
/// administrator's terminal through `deskbroker audit list`, in any format.
#[tokio::test]
async fn audit_list_prints_no_escape_whatever_was_sent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (app, _) = App::spawn_with(
        &dir.path().join("data"),
        "127.0.0.1:0",
        &["--rdp-listen", "127.0.0.1:0"],
    );
    pool_with_hosts(&app, "p", "BreadthFirst", 5, 1).await;
    let host = crate::enroll(&app, "p", "agent1", "10.9.0.1:3389").await;
    let (status, _) = app
        .call_with(
            "DELETE",
            "/api/v1/credentials/x%1b%5d0%3bowned%07%1b%5b2J",
            None,
            Some(&host),
        )
        .await;
    assert_eq!(status, 403);
    let (status, _) = app
        .call_with(
            "POST",
            "/api/v1/credentials",
            Some(json!({"name": "\u{1b}[2J\u{1b}]0;owned\u{7}", "role": "admin"})),
            Some(&host),
        )
        .await;
    assert_eq!(status, 403);
    // A user name may not hold a bidi override (it would pass for another
    // name); a group name may (it is no control character, and a group
    // that only looks like another matches nobody's): the entitlement's
    // entry carries it.
    let (status, _) = app
        .call(
            "GET",
            "/api/v1/hostPools/p/rdpFile?user=ali%E2%80%AEce",
            None,
        )
        .await;
    assert_eq!(status, 400);
    app.ok(
        "PATCH",
        "/api/v1/hostPools/p",
        Some(json!({"entitledGroups": ["Sa\u{202e}les"]})),
        200,
    )
    .await;
    let entries = log(&app).await;
    assert!(
        entries
            .iter()
            .any(|e| e["after"]["entitledGroups"][0] == "Sa\u{202e}les"),
        "{entries:#?}"
    );
    for format in ["table", "tsv", "json"] {
        let (ok, out, err) = app.cli(&["audit", "list", "--output", format]);
        assert!(ok, "{err}");
        assert!(out.contains("host:p/agent1"), "{format}: {out}");
        assert!(!out.contains('\u{1b}'), "{format}: ESC in {out:?}");
        assert!(!out.contains('\u{7}'), "{format}: BEL in {out:?}");
        assert!(!out.contains('\u{202e}'), "{format}: U+202E in {out:?}");
    }
}

/// A change whose client closes its socket right after sending is either
/// not made or recorded: 20 pools created, 20 deleted, 20 credentials
/// revoked that way.
#[tokio::test]
async fn a_change_is_recorded_even_when_its_client_goes_away() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = App::spawn(&dir);
    let body = r#"{"hostPoolType":"Pooled","loadBalancerType":"BreadthFirst","maxSessionLimit":5}"#;
    for i in 0..20 {
        send_and_close(&app, "PUT", &format!("/api/v1/hostPools/c{i}"), Some(body));
    }
    for i in 0..20 {
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/d{i}"),
            Some(serde_json::from_str(body).expect("json")),
            201,
        )
        .await;
        let (status, v) = app
            .call(
                "POST",
                "/api/v1/credentials",
                Some(json!({"name": format!("k{i}"), "role": "reader"})),
            )
            .await;
        assert_eq!(status, 201, "{v}");
    }
    for i in 0..20 {
        send_and_close(&app, "DELETE", &format!("/api/v1/hostPools/d{i}"), None);
        send_and_close(&app, "DELETE", &format!("/api/v1/credentials/k{i}"), None);
    }
    // Whatever the broker made of them, each change it made has its entry
    // (checked until the requests still running are done).
    let missing = std::sync::Mutex::new(Vec::new());
    let settled = eventually(Duration::from_secs(60), || async {
        let mut found = Vec::new();
        let entries = log(&app).await;
        let has = |action: String| {
            entries
                .iter()
                .any(|e| e["action"] == action && e["outcome"].as_u64().unwrap_or(0) < 300)
        };
        let pools: Vec<String> = app.ok("GET", "/api/v1/hostPools", None, 200).await["value"]
            .as_array()
            .expect("value")
            .iter()
            .map(|p| p["name"].as_str().unwrap_or("").to_string())
            .collect();
        let credentials: Vec<String> =
            app.ok("GET", "/api/v1/credentials", None, 200).await["value"]
                .as_array()
                .expect("value")
                .iter()
                .map(|c| c["name"].as_str().unwrap_or("").to_string())
                .collect();
        for i in 0..20 {
            let (c, d, k) = (format!("c{i}"), format!("d{i}"), format!("k{i}"));
            if pools.contains(&c) && !has(format!("PUT /api/v1/hostPools/{c}")) {
                found.push(format!("created {c}"));
            }
            if !pools.contains(&d) && !has(format!("DELETE /api/v1/hostPools/{d}")) {
                found.push(format!("deleted {d}"));
            }
            if !credentials.contains(&k) && !has(format!("DELETE /api/v1/credentials/{k}")) {
                found.push(format!("revoked {k}"));
            }
        }
        let done = found.is_empty();
        *missing.lock().expect("lock") = found;
        done
    })
    .await;
    assert!(settled, "changes without an entry: {missing:?}");
}

/// A ticket is a credential for its user: minting one is recorded (who,
/// pool, user, expiry; never the ticket). So is a heartbeat that the
/// admin token sends for a host (its session list can end every session
/// there); the host's own heartbeats are not.
#[tokio::test]
async fn tickets_and_the_admin_tokens_heartbeats_are_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (app, _) = App::spawn_with(
        &dir.path().join("data"),
        "127.0.0.1:0",
        &["--rdp-listen", "127.0.0.1:0"],
    );
    pool_with_hosts(&app, "p", "BreadthFirst", 5, 1).await;
    let file = app.text("/api/v1/hostPools/p/rdpFile?user=alice").await;
    let entries = log(&app).await;
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
    app.text("/api/v1/hostPools/p/rdpFile").await;
    assert_eq!(log(&app).await.len(), entries.len());

    let (status, v) = app
        .call(
            "POST",
            "/api/v1/hostPools/p/sessionHosts/h1/heartbeat",
            Some(json!({"cpuPercent": 5.0, "sessions": []})),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let entries = log(&app).await;
    assert_eq!(
        entries[0]["action"], "POST /api/v1/hostPools/p/sessionHosts/h1/heartbeat",
        "{entries:#?}"
    );
    assert_eq!(entries[0]["actor"], "admin");
    assert_eq!(entries[0]["outcome"], 200);
    let host = crate::enroll(&app, "p", "agent1", "10.9.0.1:3389").await;
    let before = log(&app).await.len();
    let (status, v) = app
        .call_with(
            "POST",
            "/api/v1/hostPools/p/sessionHosts/agent1/heartbeat",
            Some(json!({"cpuPercent": 5.0, "sessions": []})),
            Some(&host),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(log(&app).await.len(), before, "a host's own heartbeat");
}

/// `--audit-max-bytes`: once the entries take more, the oldest go.
#[tokio::test]
async fn the_log_is_bounded_in_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (app, _) = App::spawn_with(
        &dir.path().join("data"),
        "127.0.0.1:0",
        &["--audit-max-bytes", "20000"],
    );
    // Each pool's entry renders the pool: well over 1 KB each.
    for i in 0..40 {
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/b{i}"),
            Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"})),
            201,
        )
        .await;
    }
    let pruned = eventually(Duration::from_secs(60), || async {
        let entries = log(&app).await;
        !entries
            .iter()
            .any(|e| e["action"] == "PUT /api/v1/hostPools/b0")
    })
    .await;
    assert!(pruned, "the oldest entry is still there");
    let entries = log(&app).await;
    assert_eq!(
        entries[0]["action"], "PUT /api/v1/hostPools/b39",
        "the newest stays"
    );
    assert!(entries.len() < 40, "{} entries", entries.len());
}

/// The value of a counter without labels in a `/metrics` text; 0 when it
/// is not there.
fn counter(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Refusals cannot push accepted changes out of a log bounded by its count
/// (`--audit-max-entries`): a reader's refused changes are folded into one
/// entry per action and minute, whose `count` says how many requests it
/// stands for, so a flood of them leaves the accepted change in place. And
/// when the bound does remove entries younger than the retention, that is
/// counted for an alert.
#[tokio::test]
async fn refusals_are_folded_and_cannot_push_accepted_changes_out() {
    const REFUSALS: u64 = 300;
    let dir = tempfile::tempdir().expect("tempdir");
    let (app, _) = App::spawn_with(
        &dir.path().join("data"),
        "127.0.0.1:0",
        &["--audit-max-entries", "4"],
    );
    let pool = json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"});
    app.ok("PUT", "/api/v1/hostPools/kept", Some(pool.clone()), 201)
        .await;
    let reader = crate::credential(&app, "flooder", "reader", &[]).await;
    for _ in 0..REFUSALS {
        let (status, v) = app
            .call_with("DELETE", "/api/v1/hostPools/kept", None, Some(&reader))
            .await;
        assert_eq!(status, 403, "{v}");
    }
    // Once the writer has bounded the log (every few seconds), the
    // accepted change is still there.
    let bounded = eventually(Duration::from_secs(60), || async {
        log(&app).await.len() <= 4
    })
    .await;
    let entries = log(&app).await;
    assert!(bounded, "{entries:#?}");
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
    // One entry a minute (two if the flood straddled a minute's end).
    assert!(
        (1..=2).contains(&refused.len()),
        "{} entries of the refusals: {refused:#?}",
        refused.len()
    );
    let counted: u64 = refused
        .iter()
        .map(|e| e["count"].as_u64().unwrap_or(1))
        .sum();
    assert_eq!(counted, REFUSALS, "{refused:#?}");
    for e in &refused {
        assert_eq!(e["action"], "DELETE /api/v1/hostPools/kept", "{e}");
        assert_eq!(e["outcome"], 403, "{e}");
        assert_eq!(e["source"], "127.0.0.1", "{e}");
    }
    // Accepted changes past the bound: the oldest entries go while they
    // are far younger than the retention, and the metric says so.
    let name = "deskbroker_audit_pruned_before_retention_total";
    assert_eq!(counter(&app.text("/metrics").await, name), 0.0);
    for i in 0..4 {
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/more{i}"),
            Some(pool.clone()),
            201,
        )
        .await;
    }
    let counted = eventually(Duration::from_secs(60), || async {
        counter(&app.text("/metrics").await, name) >= 1.0
    })
    .await;
    assert!(counted, "{}", app.text("/metrics").await);
}

/// Varying the names in the path does not make each refusal an entry
/// again: past 16 entries of refusals in a minute, a caller's further
/// refusals are folded by route pattern.
#[tokio::test]
async fn refusals_with_ever_new_names_are_folded_by_route() {
    const REFUSALS: u64 = 40;
    let dir = tempfile::tempdir().expect("tempdir");
    let app = App::spawn(&dir);
    let reader = crate::credential(&app, "namer", "reader", &[]).await;
    for i in 0..REFUSALS {
        let (status, v) = app
            .call_with(
                "DELETE",
                &format!("/api/v1/hostPools/pool{i}"),
                None,
                Some(&reader),
            )
            .await;
        assert_eq!(status, 403, "{v}");
    }
    let entries: Vec<Value> = log(&app)
        .await
        .into_iter()
        .filter(|e| e["actor"] == "credential:namer")
        .collect();
    // At most 16 named entries and one by pattern a minute (the requests
    // may straddle a minute's end).
    assert!(entries.len() <= 2 * 17, "{} entries", entries.len());
    let counted: u64 = entries
        .iter()
        .map(|e| e["count"].as_u64().unwrap_or(1))
        .sum();
    assert_eq!(counted, REFUSALS, "{entries:#?}");
    let by_pattern: Vec<&Value> = entries
        .iter()
        .filter(|e| e["action"] == "DELETE /api/v1/hostPools/{pool}")
        .collect();
    assert!(!by_pattern.is_empty(), "{entries:#?}");
    for e in by_pattern {
        assert_eq!(e["target"], "hostPools/{pool}", "{e}");
        assert_eq!(e["hostPool"], Value::Null, "{e}");
    }
}
