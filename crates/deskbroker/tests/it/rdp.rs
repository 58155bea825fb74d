//! The RDP front door end to end, with real programs (rules R1–R5, S1):
//! two xrdp servers on loopback ports are the session hosts, xfreerdp is
//! the client, and `deskbroker serve --rdp-listen` sits between them.
//! Which host a connection reached is read from that xrdp's own log (its
//! "TLS connection established" line: the TLS handshake ran end to end
//! through the front door). Logging in fails (no xrdp-sesman): the
//! connection is what is tested, not the desktop.
//!
//! Each xrdp gets a TLS certificate and key of its own, made with
//! `openssl req -x509` in the test's temporary directory: xrdp's default
//! key (/etc/xrdp/key.pem) is readable only by root and the `ssl-cert`
//! group, so the test would fail for any other developer.
//!
//! Needs xrdp, xfreerdp, Xvfb and openssl (`scripts/install-test-deps.sh`;
//! xrdp depends on openssl); without them the test fails and says so — it
//! never passes untested.

use serde_json::json;

use crate::{
    ACCESS_REFUSED, App, Client, Display, PATIENCE, TICKET_REFUSED, UNAVAILABLE, Xrdp, assert_told,
    eventually, metrics_when, require, session_of, sessions, wait_session, wait_tls,
};

#[tokio::test]
async fn xfreerdp_reaches_the_chosen_xrdp_host_and_comes_back_to_it_after_a_restart() {
    let xrdp = require("xrdp", "xrdp");
    let xfreerdp = require("xfreerdp", "freerdp2-x11");
    let xvfb = require("Xvfb", "xvfb");
    let openssl = require("openssl", "openssl");
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let a = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp-a"));
    let b = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp-b"));
    let display = Display::start(&xvfb);
    let client = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        Client::start(&xfreerdp, &display, &home, &args)
    };

    let data = dir.path().join("data");
    let (app, front_door) = App::spawn_with_front_door(&data, "farm", &[]);
    // DepthFirst with a limit of 1: the first user goes to h1, the next to h2.
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst", "maxSessionLimit": 1,
                    "allowedAddressRanges": ["127.0.0.0/8"], "pendingTimeoutSeconds": 3600}),
        ),
        201,
    )
    .await;
    for (name, host) in [("h1", &a), ("h2", &b)] {
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/farm/sessionHosts/{name}"),
            Some(json!({"address": host.address})),
            201,
        )
        .await;
    }
    let v = format!("/v:{front_door}");

    // alice: placed on h1, Active while connected, Disconnected once she
    // leaves. No agent runs on these hosts, so nothing confirms her logon:
    // her session lasts the pool's pendingTimeoutSeconds (an hour here)
    // after she left (S9).
    let alice = client(&[&v, "/u:alice"]);
    wait_tls(&a, 1, &b, 0, &alice).await;
    wait_session(&app, "farm", "alice", "h1", "Active").await;
    drop(alice);
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;

    // bob: h1 is at its limit, so h2.
    let bob = client(&[&v, "/u:bob"]);
    wait_tls(&b, 1, &a, 1, &bob).await;
    wait_session(&app, "farm", "bob", "h2", "Active").await;

    // alice again: back to her session on h1 (S1), though h1 is at its
    // limit. Her client names her by an mstshash cookie only, a claim the
    // host checks but the front door cannot (R2): the session's state is
    // not this connection's to change (R4), and stays Disconnected (a
    // host's agent would report it Active, S8).
    let a_before = a.tls_connections();
    let alice = client(&[&v, "/u:alice"]);
    wait_tls(&a, a_before + 1, &b, 1, &alice).await;
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;
    drop(alice);
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;

    // carol: both hosts are at the limit; refused without reaching either.
    let mut carol = client(&[&v, "/u:carol"]);
    let gave_up = eventually(PATIENCE, || {
        let exited = carol.exited();
        async move { exited }
    })
    .await;
    assert!(gave_up, "carol's client was not refused: {}", carol.log());
    assert_eq!(session_of(&app, "farm", "carol").await, None);
    assert_eq!(a.tls_connections(), a_before + 1);
    assert_eq!(b.tls_connections(), 1);

    // kill -9 (bob's relayed connection dies with it), then the same data dir.
    app.kill9();
    drop(bob);
    let (app, front_door) = App::spawn_with_front_door(&data, "farm", &[]);
    let v = format!("/v:{front_door}");
    let a_before = a.tls_connections();
    let alice = client(&[&v, "/u:alice"]);
    wait_tls(&a, a_before + 1, &b, 1, &alice).await;
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;
    drop(alice);
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;

    // A connection file: its routing token names the pool (R1); with no
    // user, the session is anonymous and ends with the connection (R2).
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm2",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                    "allowedAddressRanges": ["127.0.0.0/8"], "allowFrontDoor": true}),
        ),
        201,
    )
    .await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm2/sessionHosts/b",
        Some(json!({"address": b.address})),
        201,
    )
    .await;
    let rdp_file = dir.path().join("farm2.rdp");
    // The file as users get it: from the broker, through the CLI.
    let path = rdp_file.display().to_string();
    let (ok, _, err) = app.cli(&["hostpool", "rdp-file", "--name", "farm2", "--file", &path]);
    assert!(ok, "hostpool rdp-file: {err}");
    let text = std::fs::read_to_string(&rdp_file).expect("read .rdp");
    assert_eq!(
        text,
        gateway::rdp_file(&front_door, "farm2"),
        "the served file"
    );
    let anonymous = client(&[&rdp_file.display().to_string()]);
    wait_tls(&b, 2, &a, a_before + 1, &anonymous).await;
    let placed = eventually(PATIENCE, || async {
        sessions(&app, "farm2").await.iter().any(|s| {
            s["sessionHost"] == "b"
                && s["sessionState"] == "Active"
                && s["userPrincipalName"]
                    .as_str()
                    .is_some_and(|u| u.starts_with("anonymous-"))
        })
    })
    .await;
    assert!(
        placed,
        "no anonymous session: {:?}",
        sessions(&app, "farm2").await
    );
    drop(anonymous);
    let ended = eventually(PATIENCE, || async {
        sessions(&app, "farm2").await.is_empty()
    })
    .await;
    assert!(
        ended,
        "anonymous session left: {:?}",
        sessions(&app, "farm2").await
    );
    // The front door's work is in the broker's metrics.
    let metrics = app.text("/metrics").await;
    assert!(
        metrics.contains("deskbroker_rdp_connections_total{outcome=\"relayed\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("deskbroker_rdp_bytes_total{direction=\"host_to_client\"}"));
}

/// Rule T3 with real programs: a pool that requires connection tickets
/// places xfreerdp users only on a ticket the broker issued — from a
/// connection file or `/load-balance-info:` — and refuses tampered,
/// expired, foreign and missing ones without dialling any host or making
/// any session.
#[tokio::test]
async fn xfreerdp_is_placed_on_a_valid_connection_ticket_and_refused_on_any_other() {
    let xrdp = require("xrdp", "xrdp");
    let xfreerdp = require("xfreerdp", "freerdp2-x11");
    let xvfb = require("Xvfb", "xvfb");
    let openssl = require("openssl", "openssl");
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let a = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp-a"));
    let display = Display::start(&xvfb);
    let client = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        Client::start(&xfreerdp, &display, &home, &args)
    };
    // The front door's default pool is `secure`: a client with a cookie
    // alone is meant for it.
    let (app, front_door) = App::spawn_with_front_door(&dir.path().join("data"), "secure", &[]);
    for pool in ["secure", "other"] {
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/{pool}"),
            Some(
                json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                        "allowedAddressRanges": ["127.0.0.0/8"],
                        "requireConnectionTicket": true}),
            ),
            201,
        )
        .await;
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/{pool}/sessionHosts/h1"),
            Some(json!({"address": a.address})),
            201,
        )
        .await;
    }
    let v = format!("/v:{front_door}");

    // Refused: each client gives up, no host saw a TLS handshake, no
    // session exists in either pool.
    let refused = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        client(&args)
    };
    let issued = |pool: &str, user: &str| {
        let path = format!("/api/v1/hostPools/{pool}/rdpFile?user={user}");
        let app = &app;
        async move {
            let file = app.text(&path).await;
            file.split("\r\n")
                .find_map(|l| l.strip_prefix("loadbalanceinfo:s:"))
                .expect("loadbalanceinfo")
                .to_string()
        }
    };
    let alice = issued("secure", "alice").await;
    let other_pool = issued("other", "alice").await;
    let attempts = [
        // Missing: a cookie alone, and a routing token naming the pool.
        (vec![v.clone(), "/u:alice".to_string()], ACCESS_REFUSED),
        (
            vec![
                v.clone(),
                "/load-balance-info:tsv://MS Terminal Services Plugin.1.other".to_string(),
            ],
            ACCESS_REFUSED,
        ),
        // Tampered: another user in the broker's ticket.
        (
            vec![
                v.clone(),
                format!("/load-balance-info:{}", alice.replace(":alice", ":mallory")),
            ],
            TICKET_REFUSED,
        ),
        // Honest but for another pool, rewritten to name this one.
        (
            vec![
                v.clone(),
                format!(
                    "/load-balance-info:{}",
                    other_pool.replace("dbt1:other:", "dbt1:secure:")
                ),
            ],
            TICKET_REFUSED,
        ),
        // Signed by the broker but expired; signed by another broker.
        (
            vec![
                v.clone(),
                format!(
                    "/load-balance-info:{}",
                    api::ticket::TicketKey::derive(
                        &crate::signing_secret(&dir.path().join("data")).await
                    )
                    .issue("secure", "alice", 1_000_000_000)
                    .expect("fits")
                ),
            ],
            TICKET_REFUSED,
        ),
        (
            vec![
                v.clone(),
                format!(
                    "/load-balance-info:{}",
                    api::ticket::TicketKey::derive("another broker's admin token, 32+ chars")
                        .issue("secure", "alice", 4_000_000_000)
                        .expect("fits")
                ),
            ],
            TICKET_REFUSED,
        ),
    ];
    for (args, code) in attempts {
        let mut c = refused(args.clone());
        let gave_up = eventually(PATIENCE, || {
            let exited = c.exited();
            async move { exited }
        })
        .await;
        assert!(gave_up, "{args:?} was not refused: {}", c.log());
        assert_eq!(a.tls_connections(), 0, "{args:?} reached the host");
        // Told why, in the negotiation, not left with a closed transport.
        assert_told(&c.log(), code, &args);
    }
    assert!(sessions(&app, "secure").await.is_empty());
    assert!(sessions(&app, "other").await.is_empty());
    // Two clients without a ticket, four with a bad one (xfreerdp tries
    // each connection twice).
    let wanted = [("ticket_required", 2), ("ticket_refused", 4)];
    let count = |metrics: &str, outcome: &str| -> u64 {
        let line = format!("deskbroker_rdp_connections_total{{outcome=\"{outcome}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let metrics = metrics_when(&app, |m| wanted.iter().all(|&(o, n)| count(m, o) >= n)).await;
    for (outcome, n) in wanted {
        let count = count(&metrics, outcome);
        assert!(count >= n, "{outcome}: {count} < {n}\n{metrics}");
    }

    // Valid, from the connection file as users get it: placed as alice.
    let rdp_file = dir.path().join("secure.rdp");
    let path = rdp_file.display().to_string();
    let (ok, _, err) = app.cli(&[
        "hostpool", "rdp-file", "--name", "secure", "--user", "alice", "--file", &path,
    ]);
    assert!(ok, "hostpool rdp-file --user: {err}");
    // The one who fetched it is told for how long the ticket admits alice.
    assert!(
        err.contains("the connection ticket in this file admits alice until ")
            && err.contains("ticketLifetimeSeconds"),
        "{err}"
    );
    let c = client(&[&path]);
    let reached = eventually(PATIENCE, || async { a.tls_connections() >= 1 }).await;
    assert!(reached, "alice's ticket did not reach h1: {}", c.log());
    wait_session(&app, "secure", "alice", "h1", "Active").await;
    drop(c);
    wait_session(&app, "secure", "alice", "h1", "Disconnected").await;

    // Valid, with /load-balance-info: as bob.
    let bob = issued("secure", "bob").await;
    let c = client(&[&v, &format!("/load-balance-info:{bob}")]);
    let reached = eventually(PATIENCE, || async { a.tls_connections() >= 2 }).await;
    assert!(reached, "bob's ticket did not reach h1: {}", c.log());
    wait_session(&app, "secure", "bob", "h1", "Active").await;

    // The front door's placements are in the audit log (T5), its refusals
    // are not (anyone on the network can cause those).
    let log = app
        .ok("GET", "/api/v1/auditLog?actor=front-door", None, 200)
        .await;
    let users: Vec<&str> = log["value"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["after"]["userPrincipalName"].as_str())
        .collect();
    assert_eq!(users, ["bob", "alice"], "{log}");
}

/// A downloaded connection file whose ticket has expired: xfreerdp is told
/// so in the negotiation (RDP_NEG_FAILURE 1001, "ticket refused") and ends
/// on a negotiation failure, not a transport failure; the broker's log and
/// metrics say why. A pool with no host to take the user answers 1003
/// ("unavailable, try again later").
#[tokio::test]
async fn xfreerdp_with_an_expired_connection_file_is_told_its_ticket_was_refused() {
    let xrdp = require("xrdp", "xrdp");
    let xfreerdp = require("xfreerdp", "freerdp2-x11");
    let xvfb = require("Xvfb", "xvfb");
    let openssl = require("openssl", "openssl");
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let a = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp-a"));
    let display = Display::start(&xvfb);
    let client = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        Client::start(&xfreerdp, &display, &home, &args)
    };
    let (app, front_door) = App::spawn_with_front_door(&dir.path().join("data"), "secure", &[]);
    // A pool that admits only users with a connection ticket.
    app.ok(
        "PUT",
        "/api/v1/hostPools/secure",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                    "allowedAddressRanges": ["127.0.0.0/8"],
                    "requireConnectionTicket": true}),
        ),
        201,
    )
    .await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/secure/sessionHosts/h1",
        Some(json!({"address": a.address})),
        201,
    )
    .await;
    // A pool the front door may reach, with no host at all.
    app.ok(
        "PUT",
        "/api/v1/hostPools/empty",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                     "allowFrontDoor": true}),
        ),
        201,
    )
    .await;

    let rdp_file = dir.path().join("secure.rdp");
    let path = rdp_file.display().to_string();
    let (ok, _, err) = app.cli(&[
        "hostpool", "rdp-file", "--name", "secure", "--user", "alice", "--file", &path,
    ]);
    assert!(ok, "hostpool rdp-file --user: {err}");
    let file = std::fs::read_to_string(&rdp_file).expect("connection file");
    let ticket = file
        .split("\r\n")
        .find_map(|l| l.strip_prefix("loadbalanceinfo:s:"))
        .expect("loadbalanceinfo");
    let issued = api::ticket::Ticket::parse(ticket.trim_end()).expect("a ticket");

    // While the file is fresh, it takes alice to h1.
    let c = client(&[&path]);
    let reached = eventually(PATIENCE, || async { a.tls_connections() >= 1 }).await;
    assert!(reached, "the fresh file did not reach h1: {}", c.log());
    drop(c);

    // No host to take anyone: told "unavailable".
    let mut c = client(&[
        &format!("/v:{front_door}"),
        "/u:bob",
        "/load-balance-info:tsv://MS Terminal Services Plugin.1.empty",
    ]);
    let gave_up = eventually(PATIENCE, || {
        let exited = c.exited();
        async move { exited }
    })
    .await;
    assert!(gave_up, "a pool without hosts was not refused: {}", c.log());
    assert_told(&c.log(), UNAVAILABLE, &"a pool without hosts");

    // The same file once its ticket has expired (and the broker's leeway
    // for clocks has passed) is refused, and the client is told why. The
    // file's ticket is replaced by one the broker's own key signed with an
    // expiry that far in the past: the client meets exactly what it would
    // meet after waiting, without the wait (the rule itself, to the second,
    // is proved in process in the broker's `rules` tests).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    assert!(
        issued.expires_unix_seconds > now,
        "the file's ticket is already expired"
    );
    let secret = crate::signing_secret(&dir.path().join("data")).await;
    let stale = api::ticket::TicketKey::derive(&secret)
        .issue(
            &issued.pool,
            &issued.user,
            now - api::ticket::TICKET_LEEWAY_SECONDS - 1,
        )
        .expect("a ticket");
    std::fs::write(&rdp_file, file.replace(ticket.trim_end(), &stale)).expect("write the file");
    let mut c = client(&[&path]);
    let gave_up = eventually(PATIENCE, || {
        let exited = c.exited();
        async move { exited }
    })
    .await;
    assert!(gave_up, "the expired file was not refused: {}", c.log());
    assert_told(&c.log(), TICKET_REFUSED, &"the expired file");
    assert_eq!(a.tls_connections(), 1, "the expired file reached h1");

    // The administrator's side: counted by reason in metrics.
    let refusals = "deskbroker_rdp_refusals_total{reason=\"ticket_refused\"}";
    let metrics = metrics_when(&app, |m| m.contains(refusals)).await;
    assert!(metrics.contains(refusals), "{metrics}");
}
