//! The web console in a real browser: Debian's `chromium`, headless, driven
//! over WebDriver by `chromedriver` (both installed by
//! `scripts/install-test-deps.sh`), against the real `deskbroker serve`.
//! A missing browser fails these tests: they are never skipped.
//!
//! Screenshots of the main pages are taken on every run; with
//! `DESKBROKER_UPDATE_SCREENSHOTS=1` they are written to `docs/console/`
//! (the ones the README shows), otherwise to a temporary directory.

use serde_json::{Value, json};

use crate::support::browser::*;
use crate::{App, pool_with_hosts};

#[tokio::test]
async fn console_files_are_public_with_a_strict_policy_and_data_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let page = app.http.get(format!("{}/", app.url)).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let h = page.headers().clone();
    assert_eq!(h["content-type"], "text/html; charset=utf-8");
    let csp = h["content-security-policy"].to_str().unwrap();
    for part in [
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'self'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(part), "CSP {csp:?} lacks {part}");
    }
    assert_eq!(h["cache-control"], "no-cache");
    assert_eq!(h["x-content-type-options"], "nosniff");
    let body = page.text().await.unwrap();
    assert!(body.contains("/console/app.js"), "{body}");
    assert!(!body.contains("://"), "{body}");

    // Revalidation: the same ETag answers 304 with no body.
    let etag = h["etag"].to_str().unwrap().to_string();
    let again = app
        .http
        .get(format!("{}/", app.url))
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);

    for (file, kind) in [
        ("app.js", "text/javascript; charset=utf-8"),
        ("api.js", "text/javascript; charset=utf-8"),
        ("dom.js", "text/javascript; charset=utf-8"),
        ("dayone.js", "text/javascript; charset=utf-8"),
        ("console.css", "text/css; charset=utf-8"),
        ("favicon.svg", "image/svg+xml"),
    ] {
        let r = app
            .http
            .get(format!("{}/console/{file}", app.url))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{file}");
        assert_eq!(r.headers()["content-type"], kind, "{file}");
        // Nothing from the internet: no CDN, no font service (the SVG
        // namespace is a name, not a request).
        let text = r
            .text()
            .await
            .unwrap()
            .replace("http://www.w3.org/2000/svg", "");
        assert!(!text.contains("://"), "{file} refers to another site");
    }
    let missing = app
        .http
        .get(format!("{}/console/nope.js", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    assert_eq!(
        missing.headers()["content-security-policy"],
        csp,
        "a missing file has the console's headers too"
    );
    let v: Value = missing.json().await.unwrap();
    assert_eq!(v["error"]["code"], "NotFound", "{v}");
    // The data stays behind the token.
    let (status, v) = app.call_with("GET", "/api/v1/hostPools", None, None).await;
    assert_eq!(status, 401, "{v}");
}

#[tokio::test]
async fn hosts_and_sessions_page_through_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "DepthFirst", 100, 5).await;
    for i in 1..=5 {
        connect(&app, "p", &format!("u{i}@x")).await;
    }
    // Without pageSize: everything, as before, and no nextLink.
    let all = app
        .ok("GET", "/api/v1/hostPools/p/sessionHosts", None, 200)
        .await;
    assert_eq!(all["value"].as_array().unwrap().len(), 5);
    assert!(all.get("nextLink").is_none(), "{all}");
    // Pages of 2: h1 h2 → h3 h4 → h5, following nextLink.
    let mut names = Vec::new();
    let mut next = Some("/api/v1/hostPools/p/sessionHosts?pageSize=2".to_string());
    let mut pages = 0;
    while let Some(link) = next {
        let v = app.ok("GET", &link, None, 200).await;
        pages += 1;
        let page: Vec<String> = v["value"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["name"].as_str().unwrap().to_string())
            .collect();
        assert!(page.len() <= 2, "{v}");
        names.extend(page);
        next = v["nextLink"].as_str().map(str::to_string);
    }
    assert_eq!(pages, 3);
    assert_eq!(names, ["h1", "h2", "h3", "h4", "h5"]);
    // Sessions: oldest first; the filter is carried on in nextLink.
    let v = app
        .ok(
            "GET",
            "/api/v1/hostPools/p/userSessions?pageSize=2&initialSkip=3",
            None,
            200,
        )
        .await;
    let users: Vec<&str> = v["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["userPrincipalName"].as_str().unwrap())
        .collect();
    assert_eq!(users, ["u4@x", "u5@x"]);
    assert!(v.get("nextLink").is_none(), "{v}");
    let v = app
        .ok(
            "GET",
            "/api/v1/hostPools/p/userSessions?user=U1@X&pageSize=1",
            None,
            200,
        )
        .await;
    assert_eq!(v["value"][0]["userPrincipalName"], "u1@x");
    assert!(v.get("nextLink").is_none(), "{v}");
    let v = app
        .ok(
            "GET",
            "/api/v1/hostPools/p/userSessions?sessionHost=h1&pageSize=1",
            None,
            200,
        )
        .await;
    assert_eq!(
        v["nextLink"],
        "/api/v1/hostPools/p/userSessions?sessionHost=h1&pageSize=1&initialSkip=1"
    );
    // Bounds are the API's usual refusals.
    for bad in [
        "pageSize=0",
        "pageSize=1001",
        "pageSize=x",
        "initialSkip=-1",
        "pagesize=2",
    ] {
        let (status, v) = app
            .call(
                "GET",
                &format!("/api/v1/hostPools/p/sessionHosts?{bad}"),
                None,
            )
            .await;
        assert_eq!(status, 400, "{bad}: {v}");
        assert_eq!(v["error"]["code"], "InvalidParameter", "{bad}: {v}");
    }
    let (status, v) = app
        .call("GET", "/api/v1/hostPools/p/userSessions?pageSize=0", None)
        .await;
    assert_eq!(
        (status, &v["error"]["message"]),
        (400, &json!("pageSize: 0 is out of range 1..=1000"))
    );
    // The OpenAPI document names the new parameters.
    let doc = app.ok("GET", "/openapi.json", None, 200).await.to_string();
    assert!(doc.contains("pageSize") && doc.contains("initialSkip"));
}

/// A nextLink carries the filters back exactly as the client encoded them:
/// one user with two sessions (two desktops of a MultiplePersistent pool),
/// named by a filter that needs encoding, paged one session at a time.
#[tokio::test]
async fn next_link_carries_an_encoded_filter_as_sent() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    app.ok(
        "PUT",
        "/api/v1/hostPools/desks",
        Some(
            json!({"hostPoolType": "Personal", "loadBalancerType": "MultiplePersistent",
                    "personalDesktopAssignmentType": "Direct"}),
        ),
        201,
    )
    .await;
    let user = "a+b&c=d@x";
    for (i, desk) in ["d1", "d2"].into_iter().enumerate() {
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/desks/sessionHosts/{desk}"),
            Some(json!({"address": format!("10.0.1.{i}:3389"), "assignedUser": user})),
            201,
        )
        .await;
        let placed = app
            .ok(
                "POST",
                "/api/v1/hostPools/desks/connect",
                Some(json!({"user": user, "sessionHost": desk})),
                200,
            )
            .await;
        assert_eq!(placed["sessionHost"], desk, "{placed}");
    }
    // The user in another case, '+', '&', '=' and '@' encoded (one in
    // lower-case hex): the link keeps all of it byte for byte.
    let query = "user=A%2BB%26C%3dD%40X&pageSize=1";
    let first = app
        .ok(
            "GET",
            &format!("/api/v1/hostPools/desks/userSessions?{query}"),
            None,
            200,
        )
        .await;
    let link = first["nextLink"].as_str().expect("a nextLink");
    assert_eq!(
        link,
        format!("/api/v1/hostPools/desks/userSessions?{query}&initialSkip=1")
    );
    let second = app.ok("GET", link, None, 200).await;
    assert!(second.get("nextLink").is_none(), "{second}");
    let mut desks = Vec::new();
    for page in [&first, &second] {
        let v = page["value"].as_array().unwrap();
        assert_eq!(v.len(), 1, "{page}");
        assert_eq!(v[0]["userPrincipalName"], user, "{page}");
        desks.push(v[0]["sessionHost"].as_str().unwrap().to_string());
    }
    desks.sort();
    assert_eq!(
        desks,
        ["d1", "d2"],
        "the two pages are the user's two sessions"
    );
}
