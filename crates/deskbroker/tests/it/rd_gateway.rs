//! The RD Gateway end to end, with real programs: two xrdp
//! servers on loopback ports are the session hosts, xfreerdp 2.11.7 is the
//! client, and `deskbroker serve --gateway-listen` is the gateway it
//! tunnels RDP through (MS-TSGU over HTTPS: `/g:`, `/gt:http` for
//! WebSocket, `/gt:http,no-websockets` for the legacy `RDG_OUT_DATA`/
//! `RDG_IN_DATA` pair; the access token with `/gat:`). The target the client names (`/v:`) is
//! the pool; the broker places the user when the channel opens. Which host
//! a connection reached is read from that xrdp's own log (its "TLS
//! connection established" line: TLS with the host runs end to end inside
//! the tunnel). The rig (xrdp, Xvfb, xfreerdp) is the front door's, in
//! `rdp.rs`; like it, this fails when those programs are missing.

use serde_json::json;

use std::process::{Command, Stdio};

use crate::{
    App, Client, Display, PATIENCE, TlsFiles, Xrdp, eventually, exe, gave_up, metrics_when,
    require, session_of, standalone_gateway, wait_session, wait_tls,
};

/// Pool `farm` (DepthFirst, reachable through the doors) with one host, h1
/// at `address`.
async fn farm_with_one_host(app: &App, address: &str) {
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst",
                    "allowFrontDoor": true, "allowedAddressRanges": ["127.0.0.0/8"]}),
        ),
        201,
    )
    .await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm/sessionHosts/h1",
        Some(json!({"address": address})),
        201,
    )
    .await;
}

/// Connects xfreerdp as alice to `farm` through the gateway (WebSocket)
/// with `token`, and follows her to h1 (`host`) and back out.
async fn alice_reaches_h1(
    app: &App,
    host: &Xrdp,
    client: impl FnOnce(&[String]) -> Client,
    gateway: &str,
    target: &str,
    token: &str,
) {
    let args: Vec<String> = vec![
        format!("/v:{target}"),
        "/u:alice".into(),
        format!("/g:{gateway}"),
        "/gt:http".into(),
        format!("/gat:{token}"),
    ];
    let alice = client(&args);
    let reached = eventually(PATIENCE, || async { host.tls_connections() >= 1 }).await;
    assert!(reached, "xrdp was not reached: {}", alice.log());
    wait_session(app, "farm", "alice", "h1", "Active").await;
    drop(alice);
    wait_session(app, "farm", "alice", "h1", "Disconnected").await;
}

/// A ticket signed with the key of the broker whose data is in `data`.
async fn ticket(
    data: &std::path::Path,
    pool: &str,
    user: &str,
    expires_unix_seconds: u64,
) -> String {
    api::ticket::TicketKey::derive(&crate::signing_secret(data).await)
        .issue(pool, user, expires_unix_seconds)
        .expect("fits")
}

fn in_five_minutes() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        + 300
}

#[tokio::test]
async fn xfreerdp_through_the_rd_gateway_lands_where_the_broker_places_it() {
    let xrdp = require("xrdp", "xrdp");
    let xfreerdp = require("xfreerdp", "freerdp2-x11");
    let xvfb = require("Xvfb", "xvfb");
    let openssl = require("openssl", "openssl");
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let a = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp-a"));
    let b = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp-b"));
    let display = Display::start(&xvfb);
    let client = |args: &[String]| Client::start(&xfreerdp, &display, &home, args);

    let (app, gateway) = App::spawn_with_rd_gateway(&dir.path().join("data"), &[]);
    // DepthFirst with a limit of 1: the first user goes to h1, the next to h2.
    for pool in ["farm", "other"] {
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/{pool}"),
            Some(
                json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst",
                        "maxSessionLimit": 1, "allowFrontDoor": true,
                        "allowedAddressRanges": ["127.0.0.0/8"]}),
            ),
            201,
        )
        .await;
    }
    for (name, host) in [("h1", &a), ("h2", &b)] {
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/farm/sessionHosts/{name}"),
            Some(json!({"address": host.address})),
            201,
        )
        .await;
    }
    let over = |transport: &str, target: &str, token: &str, user: &str| {
        vec![
            format!("/v:{target}"),
            format!("/u:{user}"),
            format!("/g:{gateway}"),
            format!("/gt:{transport}"),
            format!("/gat:{token}"),
        ]
    };
    let through_gateway = |target: &str, token: &str, user: &str| over("http", target, token, user);
    let through_legacy =
        |target: &str, token: &str, user: &str| over("http,no-websockets", target, token, user);
    let expires = in_five_minutes();

    // Tampered, expired and other-pool tokens, and the right token for
    // another resource: refused, no host reached, no session made.
    let good = ticket(&dir.path().join("data"), "farm", "mallory", expires).await;
    // Each is told why, with the HRESULT MS-TSGU has for it, which
    // xfreerdp prints by name.
    let denied = "E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED";
    let not_this_resource = "E_PROXY_RAP_ACCESSDENIED";
    let refused = [
        (
            through_gateway("farm", &good.replace(":mallory", ":alice"), "alice"),
            denied,
        ),
        (
            through_legacy("farm", &good.replace(":mallory", ":alice"), "alice"),
            denied,
        ),
        (
            through_gateway(
                "farm",
                &ticket(&dir.path().join("data"), "farm", "alice", 1_000_000_000).await,
                "alice",
            ),
            denied,
        ),
        (
            through_gateway(
                "farm",
                &ticket(&dir.path().join("data"), "other", "alice", expires).await,
                "alice",
            ),
            not_this_resource,
        ),
        (
            through_gateway("other", &good, "mallory"),
            not_this_resource,
        ),
        (through_gateway("farm", "not-a-ticket", "alice"), denied),
    ];
    for (args, hresult) in refused {
        let log = gave_up(client(&args), &format!("{args:?}")).await;
        assert!(
            log.lines()
                .any(|l| l.contains("[ERROR][com.freerdp.core.gateway") && l.contains(hresult)),
            "{args:?}: xfreerdp was not told {hresult}:\n{log}"
        );
    }
    assert_eq!((a.tls_connections(), b.tls_connections()), (0, 0));
    assert_eq!(session_of(&app, "farm", "alice").await, None);
    assert_eq!(session_of(&app, "farm", "mallory").await, None);

    // alice: placed on h1 when her channel opens, Active while connected,
    // Disconnected once she leaves.
    let alice = client(&through_gateway(
        "farm",
        &ticket(&dir.path().join("data"), "farm", "alice", expires).await,
        "alice",
    ));
    wait_tls(&a, 1, &b, 0, &alice).await;
    wait_session(&app, "farm", "alice", "h1", "Active").await;
    drop(alice);
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;

    // bob: h1 is at its limit, so h2.
    let bob = client(&through_gateway(
        "farm",
        &ticket(&dir.path().join("data"), "farm", "bob", expires).await,
        "bob",
    ));
    wait_tls(&b, 1, &a, 1, &bob).await;
    wait_session(&app, "farm", "bob", "h2", "Active").await;

    // alice again, with the same ticket: back to her session on h1 (S1).
    let alice = client(&through_gateway(
        "farm",
        &ticket(&dir.path().join("data"), "farm", "alice", expires).await,
        "alice",
    ));
    wait_tls(&a, 2, &b, 1, &alice).await;
    wait_session(&app, "farm", "alice", "h1", "Active").await;
    drop(alice);
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;

    // And over the legacy transport (two HTTPS connections): back to h1 again.
    let alice = client(&through_legacy(
        "farm",
        &ticket(&dir.path().join("data"), "farm", "alice", expires).await,
        "alice",
    ));
    wait_tls(&a, 3, &b, 1, &alice).await;
    wait_session(&app, "farm", "alice", "h1", "Active").await;
    drop(alice);
    drop(bob);
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;
    wait_session(&app, "farm", "bob", "h2", "Disconnected").await;

    // Drain mode: with room for three a host, h1 and h2 tie at one session
    // each and DepthFirst would pick h1 (first in query order); drained, h1
    // takes no new user, so carol lands on h2 …
    app.ok(
        "PATCH",
        "/api/v1/hostPools/farm",
        Some(json!({"maxSessionLimit": 3})),
        200,
    )
    .await;
    app.ok(
        "PATCH",
        "/api/v1/hostPools/farm/sessionHosts/h1",
        Some(json!({"allowNewSession": false})),
        200,
    )
    .await;
    let carol = client(&through_gateway(
        "farm",
        &ticket(&dir.path().join("data"), "farm", "carol", expires).await,
        "carol",
    ));
    wait_tls(&b, 2, &a, 3, &carol).await;
    wait_session(&app, "farm", "carol", "h2", "Active").await;
    drop(carol);
    wait_session(&app, "farm", "carol", "h2", "Disconnected").await;

    // … while alice, whose session is on the drained h1, still goes back to
    // it (S1).
    let alice = client(&through_gateway(
        "farm",
        &ticket(&dir.path().join("data"), "farm", "alice", expires).await,
        "alice",
    ));
    wait_tls(&a, 4, &b, 2, &alice).await;
    wait_session(&app, "farm", "alice", "h1", "Active").await;
    drop(alice);
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;

    // The gateway's work is in the broker's metrics.
    let relayed = "deskbroker_rdg_tunnels_total{outcome=\"relayed\"}";
    let metrics = metrics_when(&app, |m| m.contains(relayed)).await;
    assert!(metrics.contains(relayed), "{metrics}");
    assert!(metrics.contains("deskbroker_rdg_tunnels_total{outcome=\"token_refused\"}"));
    assert!(metrics.contains("deskbroker_rdg_tunnels_total{outcome=\"resource_refused\"}"));
}

/// `deskbroker gateway --gateway-listen`: the RD Gateway on a machine of
/// its own, with its own certificate, placing through the broker's HTTP
/// API with a `gateway` credential (not the admin token).
#[tokio::test]
async fn xfreerdp_through_a_standalone_rd_gateway_reaches_the_chosen_host() {
    let xrdp = require("xrdp", "xrdp");
    let xfreerdp = require("xfreerdp", "freerdp2-x11");
    let xvfb = require("Xvfb", "xvfb");
    let openssl = require("openssl", "openssl");
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let a = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp-a"));
    let display = Display::start(&xvfb);
    let (app, _) = App::spawn_with(&dir.path().join("data"), "127.0.0.1:0", &[]);
    farm_with_one_host(&app, &a.address).await;
    let credential = app
        .ok(
            "POST",
            "/api/v1/credentials",
            Some(json!({"name": "rd-gateway-1", "role": "gateway"})),
            201,
        )
        .await;
    let token = credential["token"].as_str().expect("token").to_string();

    // Without a certificate of its own it refuses to start.
    let out = Command::new(exe())
        .args(["gateway", "--broker", &app.url, "--token", &token])
        .args(["--gateway-listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .output()
        .expect("run deskbroker gateway");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--gateway-tls-cert"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let tls_dir = dir.path().join("gateway-tls");
    std::fs::create_dir_all(&tls_dir).expect("tls dir");
    let tls = TlsFiles::make(&openssl, &tls_dir);
    let (_gateway_process, gateway) = standalone_gateway(&app.url, &token, &tls, &[]);

    alice_reaches_h1(
        &app,
        &a,
        |args| Client::start(&xfreerdp, &display, &home, args),
        &gateway,
        "farm",
        &ticket(&dir.path().join("data"), "farm", "alice", in_five_minutes()).await,
    )
    .await;
}

/// The value of `name` in an `.rdp` file (`name:type:value` per line).
fn setting<'a>(file: &'a str, name: &str) -> Option<&'a str> {
    file.split("\r\n").find_map(|line| {
        let mut parts = line.splitn(3, ':');
        (parts.next() == Some(name)).then(|| parts.nth(1)).flatten()
    })
}

/// `rdpFile?user=…&gateway=true`: a file through the RD Gateway whose
/// target and access token take xfreerdp, through the gateway, to the host
/// the broker places the user on. `--gateway-public-address` is what the
/// file names as the gateway.
#[tokio::test]
async fn xfreerdp_with_the_gateway_connection_file_reaches_the_pool() {
    let xrdp = require("xrdp", "xrdp");
    let xfreerdp = require("xfreerdp", "freerdp2-x11");
    let xvfb = require("Xvfb", "xvfb");
    let openssl = require("openssl", "openssl");
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let a = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp-a"));
    let display = Display::start(&xvfb);
    let (app, gateway) = App::spawn_with_rd_gateway(&dir.path().join("data"), &[]);
    farm_with_one_host(&app, &a.address).await;

    let file = app
        .text("/api/v1/hostPools/farm/rdpFile?user=alice&gateway=true")
        .await;
    assert_eq!(setting(&file, "full address"), Some("farm"), "{file}");
    assert_eq!(setting(&file, "gatewayhostname"), Some(gateway.as_str()));
    assert_eq!(setting(&file, "gatewayusagemethod"), Some("1"));
    assert_eq!(setting(&file, "gatewaycredentialssource"), Some("5"));
    assert_eq!(setting(&file, "gatewayprofileusagemethod"), Some("1"));
    assert_eq!(setting(&file, "loadbalanceinfo"), None);
    let token = setting(&file, "gatewayaccesstoken").expect("an access token");
    assert!(token.starts_with(api::ticket::TICKET_PREFIX), "{token}");
    // Without a user there is no token to put in it.
    app.refused(
        "GET",
        "/api/v1/hostPools/farm/rdpFile?gateway=true",
        None,
        400,
        "InvalidParameter",
    )
    .await;

    alice_reaches_h1(
        &app,
        &a,
        |args| Client::start(&xfreerdp, &display, &home, args),
        setting(&file, "gatewayhostname").expect("gateway"),
        setting(&file, "full address").expect("target"),
        token,
    )
    .await;

    // Another broker, whose gateway the files name by its public address.
    let (other, _) = App::spawn_with(
        &dir.path().join("data2"),
        "127.0.0.1:0",
        &[
            "--gateway-listen",
            "127.0.0.1:0",
            "--gateway-public-address",
            "gw.contoso.com",
        ],
    );
    other
        .ok(
            "PUT",
            "/api/v1/hostPools/farm",
            Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"})),
            201,
        )
        .await;
    let file = other
        .text("/api/v1/hostPools/farm/rdpFile?user=alice&gateway=true")
        .await;
    assert_eq!(setting(&file, "gatewayhostname"), Some("gw.contoso.com"));
}
