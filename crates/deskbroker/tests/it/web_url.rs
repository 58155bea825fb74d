//! Rule WEB3 through the API: `GET /api/v1/hostPools/{pool}/webUrl` hands
//! the admin or a portal the RD Gateway's `/web` page with a fresh
//! connection ticket in its fragment, good at the browser's door for its
//! user and pool only; nobody else may have one made, and each one handed
//! out is in the audit log, without the ticket.

use serde_json::json;

use crate::web::{CountingHost, host, knock, pool, split};
use crate::{App, PATIENCE, credential, eventually};

#[tokio::test]
async fn a_web_url_opens_the_browsers_door_for_its_user_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (app, gateway) = App::spawn_with_rd_gateway(&dir.path().join("data"), &[]);
    let farm = CountingHost::start().await;
    pool(&app, "farm", true).await;
    host(&app, "farm", "f1", &farm.address).await;
    pool(&app, "closed", false).await;
    app.ok(
        "PATCH",
        "/api/v1/hostPools/farm",
        Some(json!({"entitledUsers": ["alice@contoso.com"], "entitledGroups": ["Sales"]})),
        200,
    )
    .await;

    // The admin gets alice's page; the ticket in it opens the door: the
    // broker places alice and dials the host.
    let v = app
        .ok(
            "GET",
            "/api/v1/hostPools/farm/webUrl?user=alice@contoso.com",
            None,
            200,
        )
        .await;
    let (page, ticket) = split(v["url"].as_str().expect("url"));
    assert_eq!(page, format!("https://{gateway}/web"), "{v}");
    assert!(ticket.starts_with("dbt1:farm:"), "{ticket}");
    assert!(
        api::types::parse_rfc3339(v["expirationTime"].as_str().expect("expiry")).is_some(),
        "{v}"
    );
    let _ws = knock(&gateway, &ticket).await;
    // The CLI asks the same.
    let (ok, out, err) = app.cli(&[
        "hostpool",
        "web-url",
        "--name",
        "farm",
        "--user",
        "alice@contoso.com",
        "--output",
        "json",
    ]);
    assert!(ok, "{err}");
    let cli: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let (cli_page, cli_ticket) = split(cli["url"].as_str().expect("url"));
    assert_eq!(cli_page, page);
    assert!(cli_ticket.ends_with(":alice@contoso.com"), "{cli_ticket}");
    assert!(
        eventually(PATIENCE, || async { farm.accepted() == 1 }).await,
        "the webUrl's ticket did not reach the host"
    );

    // A portal may have one made, for a user of the groups it vouches for.
    let portal = credential(&app, "web-portal", "portal", &[]).await;
    let (status, v) = app
        .call_with(
            "GET",
            "/api/v1/hostPools/farm/webUrl?user=bob@contoso.com&groups=Sales",
            None,
            Some(&portal),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let (_, bobs) = split(v["url"].as_str().expect("url"));
    assert!(bobs.ends_with(":bob@contoso.com"), "{bobs}");

    // Nobody else, and nobody the pool does not entitle.
    let reader = credential(&app, "web-reader", "reader", &[]).await;
    let operator = credential(&app, "web-operator", "operator", &[]).await;
    let gateway_cred = credential(&app, "web-gateway", "gateway", &[]).await;
    let elsewhere = credential(&app, "web-admin-elsewhere", "admin", &["closed"]).await;
    let alice = "/api/v1/hostPools/farm/webUrl?user=alice@contoso.com";
    for (what, token, path, want, code) in [
        ("a reader", Some(reader.as_str()), alice, 403, "Forbidden"),
        (
            "an operator",
            Some(operator.as_str()),
            alice,
            403,
            "Forbidden",
        ),
        (
            "a front door",
            Some(gateway_cred.as_str()),
            alice,
            403,
            "Forbidden",
        ),
        (
            "another pool's admin",
            Some(elsewhere.as_str()),
            alice,
            403,
            "Forbidden",
        ),
        ("no token", None, alice, 401, "Unauthorized"),
        (
            "a user the pool does not entitle",
            Some(portal.as_str()),
            "/api/v1/hostPools/farm/webUrl?user=mallory@contoso.com&groups=Finance",
            403,
            "NotEntitled",
        ),
        (
            "a pool closed to the doors",
            Some(portal.as_str()),
            "/api/v1/hostPools/closed/webUrl?user=alice@contoso.com",
            403,
            "Forbidden",
        ),
        (
            "no user",
            Some(portal.as_str()),
            "/api/v1/hostPools/farm/webUrl",
            400,
            "InvalidParameter",
        ),
        (
            "an unknown pool",
            Some(portal.as_str()),
            "/api/v1/hostPools/nowhere/webUrl?user=alice@contoso.com",
            404,
            "HostPoolNotFound",
        ),
    ] {
        let (status, v) = app.call_with("GET", path, None, token).await;
        assert_eq!(status, want, "{what}: {v}");
        assert_eq!(v["error"]["code"], code, "{what}: {v}");
    }

    // Every address handed out is in the audit log; no ticket is.
    let log = app
        .ok("GET", "/api/v1/auditLog?hostPool=farm", None, 200)
        .await;
    let issued: Vec<_> = log["value"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["action"] == "GET /api/v1/hostPools/farm/webUrl" && e["outcome"] == 200)
        .map(|e| e["after"]["ticketFor"].clone())
        .collect();
    assert_eq!(
        issued,
        // Newest first: the portal's for bob, the CLI's and the admin's.
        vec![
            json!("bob@contoso.com"),
            json!("alice@contoso.com"),
            json!("alice@contoso.com")
        ],
        "{log}"
    );
    assert!(
        !log.to_string().contains("dbt1:"),
        "a ticket in the log: {log}"
    );
}

/// Without an RD Gateway there is no page to send a browser to.
#[tokio::test]
async fn a_broker_without_a_gateway_has_no_web_url() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = App::spawn(&dir);
    pool(&app, "farm", true).await;
    let (status, v) = app
        .call("GET", "/api/v1/hostPools/farm/webUrl?user=alice", None)
        .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"]["code"], "InvalidParameter", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("--gateway-listen")),
        "{v}"
    );
}
