//! Rule AD4 with real programs: a pool whose `connectionTarget` is `Host`
//! hands out files that name the host the user was placed on when the
//! file was fetched. Two xrdp servers on loopback ports are the hosts,
//! named `h1.farm.test` and `h2.farm.test`, names no resolver knows: the
//! gateway reaching the right one proves it dialled the address the broker
//! has, not the name the client sent. xfreerdp is the client, through the
//! RD Gateway and the front door of one `deskbroker serve`. The rig is the
//! front door's (`rdp.rs`); like it, this fails when those programs are
//! missing.

use serde_json::json;

use crate::{
    App, Client, Display, TICKET_REFUSED, Xrdp, assert_told, gave_up, require, session_of,
    wait_session, wait_tls,
};

/// The value of `name` in an `.rdp` file (`name:type:value` per line).
fn setting<'a>(file: &'a str, name: &str) -> Option<&'a str> {
    file.split("\r\n").find_map(|line| {
        let mut parts = line.splitn(3, ':');
        (parts.next() == Some(name)).then(|| parts.nth(1)).flatten()
    })
}

#[tokio::test]
async fn a_host_named_file_opens_its_host_through_the_gateway_and_the_front_door_and_no_other() {
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
    let (app, _) = App::spawn_with(
        &dir.path().join("data"),
        "127.0.0.1:0",
        &[
            "--gateway-listen",
            "127.0.0.1:0",
            "--rdp-listen",
            "127.0.0.1:0",
        ],
    );
    let gateway = app.ready.gateway_addr().to_string();
    let front_door = app.ready.rdp_addr().to_string();
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst",
                    "maxSessionLimit": 1, "allowedAddressRanges": ["127.0.0.0/8"],
                    "connectionTarget": "Host"}),
        ),
        201,
    )
    .await;
    for (name, host) in [("h1", &a), ("h2", &b)] {
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/farm/sessionHosts/{name}"),
            Some(json!({"address": host.address, "dnsName": format!("{name}.farm.test")})),
            201,
        )
        .await;
    }
    let port = |address: &str| address.rsplit_once(':').expect("a port").1.to_string();

    // Fetching the file places alice: Pending on h1, which the file names.
    let file = app
        .text("/api/v1/hostPools/farm/rdpFile?user=alice&gateway=true")
        .await;
    let named = format!("h1.farm.test:{}", port(&a.address));
    assert_eq!(
        setting(&file, "full address"),
        Some(named.as_str()),
        "{file}"
    );
    assert_eq!(setting(&file, "gatewayhostname"), Some(gateway.as_str()));
    assert_eq!(
        session_of(&app, "farm", "alice").await,
        Some(("h1".into(), "Pending".into()))
    );
    let token = setting(&file, "gatewayaccesstoken")
        .expect("an access token")
        .to_string();
    let through_gateway = |target: &str| {
        vec![
            format!("/v:{target}"),
            "/u:alice".to_string(),
            format!("/g:{gateway}"),
            "/gt:http".to_string(),
            format!("/gat:{token}"),
        ]
    };

    // A client that edits the target to the other host, with the same
    // ticket: refused, neither host reached.
    let edited = format!("h2.farm.test:{}", port(&b.address));
    let log = gave_up(client(&through_gateway(&edited)), "another target").await;
    assert!(
        log.lines()
            .any(|l| l.contains("[ERROR][com.freerdp.core.gateway")
                && l.contains("E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED")),
        "xfreerdp was not told its ticket was refused:\n{log}"
    );
    assert_eq!((a.tls_connections(), b.tls_connections()), (0, 0));

    // The file as it came: through the gateway to h1, at the address the
    // broker has for it.
    let alice = client(&through_gateway(&named));
    wait_tls(&a, 1, &b, 0, &alice).await;
    wait_session(&app, "farm", "alice", "h1", "Active").await;
    drop(alice);
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;

    // The same ticket at the front door: back to h1 (S1), nowhere else.
    let at_front_door = vec![
        format!("/v:{front_door}"),
        "/u:alice".to_string(),
        format!("/load-balance-info:{token}"),
    ];
    let alice = client(&at_front_door);
    wait_tls(&a, 2, &b, 0, &alice).await;
    wait_session(&app, "farm", "alice", "h1", "Active").await;
    drop(alice);
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;

    // h1 is removed with alice's session. h2 could take her, but the
    // ticket opens h1 only: at both doors it is refused, and h2 is never
    // reached.
    app.ok(
        "DELETE",
        "/api/v1/hostPools/farm/sessionHosts/h1?force=true",
        None,
        204,
    )
    .await;
    let log = gave_up(client(&at_front_door), "a ticket for a removed host").await;
    assert_told(&log, TICKET_REFUSED, &at_front_door);
    let log = gave_up(
        client(&through_gateway(&named)),
        "a ticket for a removed host",
    )
    .await;
    assert!(
        log.contains("E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED"),
        "{log}"
    );
    assert_eq!(b.tls_connections(), 0, "h2 was reached");
    assert_eq!(session_of(&app, "farm", "alice").await, None);
}
