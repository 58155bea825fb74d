//! Rules T4 and T5 against the real binary, as an attacker tries them:
//! what the audit log shows cannot drive a terminal, and a client that
//! closes its socket at once cannot dodge it. Folding refusals, the bounds
//! in entries and bytes, and tickets' and heartbeats' entries are proved in
//! process, in the broker's `rules` tests.

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
