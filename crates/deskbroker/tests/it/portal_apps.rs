//! The portal's workspace (rule F5) end to end: a user signed in at a
//! real OpenID Connect provider sees the desktops and applications they
//! are given, applications as tiles with their icons by folder; an
//! application's tile downloads the file that opens it, with their ticket;
//! what no group gives them is neither shown nor handed out.

use base64::Engine as _;
use serde_json::json;

use crate::browser::{browser, js, wait_js};
use crate::portal::{code, get, pool, session_cookie, sign_in, spawn_broker, start_provider};
use crate::{PNG_1X1, free_port};

/// The applications the page shows: (folder, pool, alias, name, icon
/// loaded), in the page's order.
const TILES: &str = "return [...document.querySelectorAll('ul.apps')].flatMap(ul => \
     [...ul.querySelectorAll('li.app')].map(li => [ul.dataset.folder, li.dataset.pool, \
     li.dataset.app, li.querySelector('.app-name').textContent, \
     !!li.querySelector('img') && li.querySelector('img').naturalWidth === 32]));";

#[tokio::test]
async fn users_see_their_applications_as_tiles_and_download_what_opens_them() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let broker_url = format!("http://127.0.0.1:{port}");
    let provider = start_provider(
        &broker_url,
        "127.0.0.2",
        json!({"alice": {"preferred_username": "alice@contoso.com", "groups": ["Staff"]}}),
    );
    let app = spawn_broker(&dir, port, &provider.issuer, &[]);
    pool(&app, "desk", json!({})).await;
    pool(&app, "apps", json!({})).await;
    let icon = base64::engine::general_purpose::STANDARD.encode(PNG_1X1);
    for (alias, body) in [
        (
            "notepad",
            json!({"displayName": "Notepad", "program": "||notepad", "folder": "Office",
                   "iconPng": icon}),
        ),
        (
            "calc",
            json!({"displayName": "Calculator", "program": "||calc"}),
        ),
        (
            "payroll",
            json!({"displayName": "Payroll", "program": "||payroll", "folder": "Office"}),
        ),
    ] {
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/apps/applications/{alias}"),
            Some(body),
            201,
        )
        .await;
    }
    // Staff get notepad and calc; payroll is carol's alone.
    for (name, body) in [
        (
            "office",
            json!({"hostPool": "apps", "kind": "RemoteApp",
                   "applications": ["notepad", "calc"], "assignedGroups": ["Staff"]}),
        ),
        (
            "payroll",
            json!({"hostPool": "apps", "kind": "RemoteApp", "applications": ["payroll"],
                   "assignedUsers": ["carol@contoso.com"]}),
        ),
    ] {
        app.ok(
            "PUT",
            &format!("/api/v1/applicationGroups/{name}"),
            Some(body),
            201,
        )
        .await;
    }

    let b = browser().await;
    let c = &b.client;
    sign_in(c, &app, "alice").await;
    wait_js(
        c,
        "return [...document.querySelectorAll('li.app img')].every(i => i.complete);",
        "the icons loaded",
    )
    .await;
    // `desk` has no application group: its desktop, as before. `apps`
    // gives applications only, so its desktop is not offered.
    let desktops = js(
        c,
        "return [...document.querySelectorAll('li.pool')].map(e => e.dataset.pool);",
        vec![],
    )
    .await;
    assert_eq!(desktops, json!(["desk"]));
    assert_eq!(
        js(c, TILES, vec![]).await,
        json!([
            ["", "apps", "calc", "Calculator", false],
            ["Office", "apps", "notepad", "Notepad", true]
        ])
    );

    let cookie = session_cookie(c).await.expect("the session cookie");
    let base = format!("{broker_url}/portal/pools/apps");
    let (status, headers, file) = get(
        &format!("{base}/applications/notepad/rdpFile"),
        Some(&cookie),
    )
    .await;
    assert_eq!(status, 200, "{file}");
    assert_eq!(headers["content-type"], "application/x-rdp");
    assert!(
        file.contains("remoteapplicationprogram:s:||notepad\r\n")
            && file.contains("remoteapplicationmode:i:1\r\n"),
        "{file}"
    );
    let ticket = file
        .split("\r\n")
        .find_map(|l| l.strip_prefix("loadbalanceinfo:s:"))
        .expect("loadbalanceinfo");
    assert!(
        ticket.starts_with("dbt1:apps:") && ticket.ends_with(":alice@contoso.com"),
        "{ticket}"
    );
    let (status, headers, _) =
        get(&format!("{base}/applications/notepad/icon"), Some(&cookie)).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "image/png");
    assert_eq!(headers["x-content-type-options"], "nosniff");

    // What no group gives alice: refused, and nothing handed out.
    for (path, cookie, status, want) in [
        (
            "applications/payroll/rdpFile",
            Some(cookie.as_str()),
            403,
            "NotEntitled",
        ),
        (
            "applications/payroll/icon",
            Some(cookie.as_str()),
            403,
            "NotEntitled",
        ),
        ("rdpFile", Some(cookie.as_str()), 403, "NotEntitled"),
        ("applications/notepad/rdpFile", None, 401, "Unauthorized"),
    ] {
        let (got, _, body) = get(&format!("{base}/{path}"), cookie).await;
        assert_eq!(
            (got, code(&body)),
            (status, want.to_string()),
            "{path}: {body}"
        );
    }
    let log = app
        .ok("GET", "/api/v1/auditLog?hostPool=apps", None, 200)
        .await;
    assert!(
        log["value"].as_array().unwrap().iter().any(|e| e["action"]
            == "GET /portal/pools/apps/applications/notepad/rdpFile"
            && e["actor"] == "portal:alice@contoso.com"
            && e["after"]["ticketFor"] == "alice@contoso.com"),
        "{log}"
    );
}
