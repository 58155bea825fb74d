//! Rule AD2's NTLM against a real Active Directory domain controller
//! (Samba, its winbind running, `support::domain`): xfreerdp 2.11 signs in
//! to the RD Gateway with `/gu:`, `/gd:` and `/gp:` (NTLM, checked by the
//! domain through Samba's `ntlm_auth`), over the WebSocket and the legacy
//! transport, and reaches the real xrdp host the broker places the domain
//! user on, by the directory's nested groups; a wrong password, a user of
//! no entitled group and a domain the gateway does not sign in are refused,
//! and the refusals audited.

use serde_json::json;

use crate::directory::{directory_flags, people};
use crate::support::domain::Domain;
use crate::*;

const PASSWORD: &str = "Sesame-0pen!";

/// xfreerdp's arguments to reach pool `farm` through `gateway` over
/// `transport`, signing in to the gateway as `domain\user` with
/// `password`.
fn through(
    gateway: &str,
    transport: &str,
    domain: &str,
    user: &str,
    password: &str,
) -> Vec<String> {
    vec![
        "/v:farm".into(),
        format!("/u:{user}"),
        format!("/g:{gateway}"),
        format!("/gt:{transport}"),
        format!("/gu:{user}"),
        format!("/gd:{domain}"),
        format!("/gp:{password}"),
    ]
}

#[tokio::test]
async fn xfreerdp_signs_in_with_ntlm_at_the_rd_gateway_and_reaches_the_placed_xrdp_host() {
    let xrdp = require("xrdp", "xrdp");
    let xfreerdp = require("xfreerdp", "freerdp2-x11");
    let xvfb = require("Xvfb", "xvfb");
    let openssl = require("openssl", "openssl");
    let dc = Domain::start_with_winbind();
    people(&dc);
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let host = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp"));
    let display = Display::start(&xvfb);
    let client = |args: &[String]| Client::start(&xfreerdp, &display, &home, args);

    let mut flags = directory_flags(&dc, &dc.ldaps_url(), 300);
    let (helper, helper_args) = dc.ntlm_helper();
    flags.extend([
        "--gateway-ntlm-domain".to_string(),
        format!("{}=deskbroker.test", dc.netbios()),
        "--gateway-ntlm-helper".into(),
        helper.display().to_string(),
    ]);
    for arg in helper_args {
        flags.extend(["--gateway-ntlm-helper-arg".to_string(), arg]);
    }
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (app, gateway) = App::spawn_with_rd_gateway(&dir.path().join("data"), &flags);
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst",
                "allowedAddressRanges": ["127.0.0.0/8"], "entitledGroups": ["RDS-Users"],
                "gatewaySignIn": "TicketOrWindows"}),
        ),
        201,
    )
    .await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm/sessionHosts/h1",
        Some(json!({"address": host.address})),
        201,
    )
    .await;

    // alice (in RDS-Users through Sales) signs in with NTLM over the
    // WebSocket transport: placed on h1 as alice@deskbroker.test, the name
    // a Kerberos sign-in of hers gets.
    let alice = client(&through(&gateway, "http", "DESKBROKER", "alice", PASSWORD));
    let reached = eventually(PATIENCE, || async { host.tls_connections() >= 1 }).await;
    assert!(reached, "xrdp was not reached: {}", alice.log());
    wait_session(&app, "farm", "alice@deskbroker.test", "h1", "Active").await;
    drop(alice);
    wait_session(&app, "farm", "alice@deskbroker.test", "h1", "Disconnected").await;

    // Over the legacy transport (two HTTPS connections, each signed in),
    // typing her name in another case: back to her session.
    let args = through(
        &gateway,
        "http,no-websockets",
        "deskbroker",
        "Alice",
        PASSWORD,
    );
    let alice = client(&args);
    let reached = eventually(PATIENCE, || async { host.tls_connections() >= 2 }).await;
    assert!(reached, "xrdp was not reached again: {}", alice.log());
    wait_session(&app, "farm", "alice@deskbroker.test", "h1", "Active").await;
    drop(alice);
    wait_session(&app, "farm", "alice@deskbroker.test", "h1", "Disconnected").await;

    // A wrong password, a user of no entitled group, a domain this gateway
    // does not sign in: none reaches the host, none is placed.
    for (domain, user, password) in [
        ("DESKBROKER", "carol", "Wrong-Passw0rd"),
        ("DESKBROKER", "bob", PASSWORD),
        ("FABRIKAM", "dave", PASSWORD),
    ] {
        let refused = client(&through(&gateway, "http", domain, user, password));
        gave_up(refused, &format!("{domain}\\{user}")).await;
        let name = format!("{}@deskbroker.test", user);
        assert_eq!(session_of(&app, "farm", &name).await, None, "{user}");
    }
    assert_eq!(host.tls_connections(), 2, "{}", host.log());

    // The refusals are in the audit log, by source, reason and user.
    let log = app
        .ok("GET", "/api/v1/auditLog?actor=rd-gateway", None, 200)
        .await;
    let text = log.to_string();
    for said in [
        "an NTLM sign-in refused",
        "users/carol@deskbroker.test",
        "127.0.0.1",
    ] {
        assert!(text.contains(said), "{said} not in {text}");
    }
    // Nothing of the exchange reaches the audit: no password, no NTLM
    // message.
    assert!(
        !text.contains("Wrong-Passw0rd") && !text.contains("TlRMTVNT"),
        "{text}"
    );
}
