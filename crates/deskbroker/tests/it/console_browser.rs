//! The web console walked through in a real browser (headless Chromium
//! driven over WebDriver): every page and action an operator uses, against
//! the real binary, and nothing called but the public API.

use std::sync::Arc;

use fantoccini::Client;
use serde_json::json;

use crate::browser::*;
use crate::{App, TOKEN};

/// The whole story in the browser: sign in, create a pool, add
/// hosts through the API, connect users and watch the counts change live,
/// drain a host from the page and see the next connect avoid it, change the
/// algorithm and limit, log a session off.
#[tokio::test]
async fn console_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let app = Arc::new(App::spawn(&dir));
    let (shots, _keep) = screenshot_dir();
    let b = browser().await;
    let c = &b.client;
    sign_in(c, &app).await;

    // Another pool already there, to have more than one row.
    app.ok(
        "PUT",
        "/api/v1/hostPools/personal01",
        Some(json!({"hostPoolType": "Personal", "loadBalancerType": "Persistent"})),
        201,
    )
    .await;

    // Create a pool from the form: first with a limit the API refuses,
    // which must show the API's own message, then properly.
    let want = api_refusal(
        &app,
        "PUT",
        "/api/v1/hostPools/contosohp01",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst", "maxSessionLimit": 1_000_000}),
    )
    .await;
    type_into(c, "#new-pool-name", "contosohp01").await;
    choose(c, "#new-pool-type", "Pooled").await;
    choose(c, "#new-pool-lb", "DepthFirst").await;
    type_into(c, "#new-pool-limit", "1000000").await;
    click(c, "#new-pool button[type=submit]").await;
    let shown = wait_text(c, "#new-pool-message", "the API's refusal", |t| {
        !t.is_empty()
    })
    .await;
    assert_eq!(shown, want, "the form must show the API's own message");
    // A combination the API refuses (P2), same message as the API's.
    let want = api_refusal(
        &app,
        "PUT",
        "/api/v1/hostPools/contosohp01",
        json!({"hostPoolType": "Pooled", "loadBalancerType": "Persistent"}),
    )
    .await;
    choose(c, "#new-pool-lb", "Persistent").await;
    type_into(c, "#new-pool-limit", "").await;
    click(c, "#new-pool button[type=submit]").await;
    wait_text(c, "#new-pool-message", "the P2 refusal", |t| t == want).await;
    choose(c, "#new-pool-lb", "DepthFirst").await;
    type_into(c, "#new-pool-limit", "10").await;
    click(c, "#new-pool button[type=submit]").await;
    wait_text(c, "#new-pool-message", "the creation", |t| {
        t.starts_with("Created host pool contosohp01")
    })
    .await;
    assert_pool_settings(&app, "contosohp01", "DepthFirst", 10).await;
    // Creating it again from the form does not replace it.
    type_into(c, "#new-pool-name", "contosohp01").await;
    click(c, "#new-pool button[type=submit]").await;
    wait_text(c, "#new-pool-message", "the conflict", |t| {
        t.starts_with("Conflict: host pool contosohp01 already exists")
    })
    .await;
    let row = "#pools-table tr[data-pool='contosohp01']";
    wait_text(c, &format!("{row} .lb"), "the new pool's row", |t| {
        t == "DepthFirst"
    })
    .await;

    // Hosts through the API; the list follows without a reload.
    js(c, "window.__noReload = 42;", vec![]).await;
    for i in 1..=12 {
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/contosohp01/sessionHosts/sh{i:02}"),
            Some(json!({"address": format!("10.0.0.{i}:3389")})),
            201,
        )
        .await;
    }
    wait_text(c, &format!("{row} .hosts"), "12 hosts", |t| t == "12").await;

    // A logon storm: 25 users at once. The count and its rate show it.
    let mut storm = tokio::task::JoinSet::new();
    for i in 1..=25 {
        let app = app.clone();
        storm.spawn(async move {
            connect(&app, "contosohp01", &format!("user{i:02}@contoso.com")).await;
        });
    }
    while let Some(r) = storm.join_next().await {
        r.expect("connect task");
    }
    wait_text(c, &format!("{row} .sessions"), "25 sessions", |t| t == "25").await;
    wait_text(c, &format!("{row} .rate"), "a rising session rate", |t| {
        t.starts_with('+')
    })
    .await;
    assert_eq!(
        js(c, "return window.__noReload;", vec![]).await,
        json!(42),
        "the page must follow changes without a reload"
    );
    screenshot(c, &shots, "pools.png").await;

    // The pool's page: DepthFirst filled sh01 and sh02 (10 each) and put 5
    // on sh03.
    click(c, &format!("{row} a")).await;
    let hrow = |h: &str| format!("#hosts-table tr[data-host='{h}']");
    wait_text(
        c,
        &format!("{} .sessions", hrow("sh01")),
        "sh01 full",
        |t| t == "10 / 10",
    )
    .await;
    wait_text(c, &format!("{} .sessions", hrow("sh03")), "sh03", |t| {
        t == "5 / 10"
    })
    .await;
    wait_text(c, "#heat [data-host='sh01']", "the heat cell", |t| {
        t.contains("10/10") && t.contains("full")
    })
    .await;
    wait_text(c, "#pool-summary [data-stat='sessions']", "25", |t| {
        t == "25"
    })
    .await;
    assert_eq!(count(c, "#hosts-table tbody tr").await, 12);

    // Load: metrics from heartbeats make the load index vary per host.
    app.ok(
        "PATCH",
        "/api/v1/hostPools/contosohp01",
        Some(json!({"loadIndexSettings": {"cpuThreshold": 90, "memoryThreshold": 95}})),
        200,
    )
    .await;
    for i in 1..=12u32 {
        let cpu = f64::from((i * 37) % 80 + 5);
        app.ok(
            "POST",
            &format!("/api/v1/hostPools/contosohp01/sessionHosts/sh{i:02}/heartbeat"),
            Some(json!({"cpuPercent": cpu, "memoryPercent": 40.0, "imageVersion": "golden-12"})),
            200,
        )
        .await;
    }
    // Each host's image (rule U1), under its address, as text.
    wait_text(
        c,
        &format!("{} .image", hrow("sh01")),
        "sh01's image",
        |t| t == "image golden-12",
    )
    .await;
    let li = app
        .ok(
            "GET",
            "/api/v1/hostPools/contosohp01/sessionHosts/sh04",
            None,
            200,
        )
        .await["loadIndex"]
        .to_string();
    wait_text(
        c,
        &format!("{} .load .bar-text", hrow("sh04")),
        "sh04's load index",
        |t| t == li,
    )
    .await;
    wait_text(
        c,
        &format!("{} .heartbeat", hrow("sh04")),
        "a heartbeat",
        |t| t.ends_with("s ago"),
    )
    .await;

    // Drain sh03 from its toggle; the next connect avoids it.
    click(c, &format!("{} input.drain", hrow("sh03"))).await;
    wait_text(
        c,
        &format!("{} .switch-text", hrow("sh03")),
        "Draining",
        |t| t == "Draining",
    )
    .await;
    let h = app
        .ok(
            "GET",
            "/api/v1/hostPools/contosohp01/sessionHosts/sh03",
            None,
            200,
        )
        .await;
    assert_eq!(h["allowNewSession"], false, "{h}");
    let placed = connect(&app, "contosohp01", "late@contoso.com").await;
    // DepthFirst would have taken sh03 (5 sessions, the most below 10).
    assert_eq!(placed["sessionHost"], "sh04", "{placed}");
    wait_text(
        c,
        &format!("{} .sessions", hrow("sh04")),
        "sh04's session",
        |t| t == "1 / 10",
    )
    .await;
    wait_text(c, "#heat [data-host='sh03']", "sh03 draining", |t| {
        t.contains("draining")
    })
    .await;
    screenshot(c, &shots, "hosts.png").await;

    // Change the algorithm and the limit from the pool's form: a refused
    // limit shows the API's message, then a good change is applied.
    let want = api_refusal(
        &app,
        "PATCH",
        "/api/v1/hostPools/contosohp01",
        json!({"maxSessionLimit": "ten"}),
    )
    .await;
    type_into(c, "#pool-limit", "ten").await;
    click(c, "#pool-settings button[type=submit]").await;
    wait_text(c, "#pool-settings-message", "the API's refusal", |t| {
        t == want
    })
    .await;
    choose(c, "#pool-lb", "BreadthFirst").await;
    type_into(c, "#pool-limit", "20").await;
    click(c, "#pool-settings button[type=submit]").await;
    wait_text(c, "#pool-settings-message", "the saved settings", |t| {
        t.starts_with("Saved: BreadthFirst, limit 20")
    })
    .await;
    assert_pool_settings(&app, "contosohp01", "BreadthFirst", 20).await;
    wait_text(c, "#pool-summary [data-stat='lb']", "BreadthFirst", |t| {
        t == "BreadthFirst"
    })
    .await;

    // Undrain from the toggle.
    click(c, &format!("{} input.drain", hrow("sh03"))).await;
    wait_text(
        c,
        &format!("{} .switch-text", hrow("sh03")),
        "Accepting",
        |t| t == "Accepting",
    )
    .await;
    assert!(
        crate::eventually(PAGE_TIMEOUT, || async {
            app.ok(
                "GET",
                "/api/v1/hostPools/contosohp01/sessionHosts/sh03",
                None,
                200,
            )
            .await["allowNewSession"]
                == true
        })
        .await
    );

    // Sessions: filter by user, see the user's host, log the session off.
    // contosohp01 is the first pool by name, so the page opens on it.
    click(c, "#nav a[data-nav='sessions']").await;
    wait_text(c, "#sessions-pager .pager-text", "26 sessions", |t| {
        t == "Sessions 1–26 of 26"
    })
    .await;
    screenshot(c, &shots, "sessions.png").await;
    type_into(c, "#s-user", "LATE@contoso.com").await;
    click(c, "#sessions-filter button[type=submit]").await;
    wait_text(c, "#sessions-pager .pager-text", "one session", |t| {
        t.starts_with("Sessions 1–1 (user LATE@contoso.com)")
    })
    .await;
    let srow = "#sessions-table tr[data-user='late@contoso.com']";
    assert_eq!(
        text(c, &format!("{srow} .host")).await.as_deref(),
        Some("sh04")
    );
    click(c, &format!("{srow} button.logoff")).await;
    wait_text(
        c,
        &format!("{srow} button.logoff"),
        "the confirmation",
        |t| t == "Confirm log off",
    )
    .await;
    click(c, &format!("{srow} button.logoff")).await;
    wait_text(c, "#sessions-error", "the logoff", |t| {
        t.starts_with("Logged off late@contoso.com")
    })
    .await;
    let left = app
        .ok(
            "GET",
            "/api/v1/hostPools/contosohp01/userSessions?user=late@contoso.com",
            None,
            200,
        )
        .await;
    assert_eq!(left["value"], json!([]), "{left}");
    wait_js(
        c,
        "return document.querySelectorAll('#sessions-table tbody tr').length === 0;",
        "the row gone",
    )
    .await;
    wait_text(c, "#sessions-empty", "no match", |t| {
        t == "No session matches."
    })
    .await;

    // A hidden tab asks nothing until it is shown again. (Headless
    // chromium never hides a tab, so the page is told it is hidden the way
    // the browser would tell it: document.hidden and a visibilitychange.)
    js(
        c,
        "Object.defineProperty(document, 'hidden', {configurable: true, get: () => true});
         document.dispatchEvent(new Event('visibilitychange'));",
        vec![],
    )
    .await;
    wait_text(c, "#live", "the paused indicator", |t| {
        t.starts_with("❚❚ Paused")
    })
    .await;
    let before = js(c, "return window.__calls.length;", vec![]).await;
    a_hidden_tab_asks_nothing(c).await;
    js(
        c,
        "delete document.hidden; document.dispatchEvent(new Event('visibilitychange'));",
        vec![],
    )
    .await;
    wait_js(
        c,
        &format!("return window.__calls.length > {before};"),
        "polling again once visible",
    )
    .await;
    wait_text(c, "#live", "the live indicator", |t| {
        t.starts_with("● Live")
    })
    .await;

    only_the_public_api_was_called(c, &app).await;

    // Signing out forgets the token: the next page is the sign-in form.
    click(c, "#signout").await;
    wait_js(
        c,
        "return !!document.querySelector('#signin') \
         && sessionStorage.getItem('deskbroker.adminToken') === null;",
        "the sign-in form, without the token",
    )
    .await;
    assert!(
        !is_shown(c, "#signout").await,
        "Sign out still shown after signing out"
    );
    b.client.clone().close().await.expect("close the browser");
}

/// Every request the page made went to the public API with the bearer
/// token in a header (or fetched one of the console's own files), none
/// carried the token in its URL, and each GET it made answers a script
/// with the token the same.
async fn only_the_public_api_was_called(c: &Client, app: &App) {
    let calls = js(c, "return window.__calls;", vec![]).await;
    let calls = calls.as_array().expect("calls");
    assert!(calls.len() > 20, "too few calls recorded: {calls:?}");
    let mut gets = std::collections::BTreeSet::new();
    for call in calls {
        let url = call["url"].as_str().unwrap();
        assert!(url.starts_with("/api/v1/"), "the console called {url}");
        assert!(call["bearer"] == true, "{url} without the bearer token");
        assert!(!url.contains(TOKEN), "the token is in a URL: {url}");
        if call["method"] == "GET" {
            gets.insert(url.to_string());
        }
    }
    let resources = js(
        c,
        "return performance.getEntriesByType('resource').map(e => e.name).concat([location.href]);",
        vec![],
    )
    .await;
    for r in resources.as_array().unwrap() {
        let r = r.as_str().unwrap();
        assert!(!r.contains(TOKEN), "the token is in a URL: {r}");
        let path = r
            .strip_prefix(&app.url)
            .unwrap_or_else(|| panic!("{r} is not the broker"));
        assert!(
            path.starts_with("/api/v1/")
                || path.starts_with("/console/")
                || path.starts_with("/#")
                || path == "/",
            "the page loaded {r}"
        );
    }
    for url in gets {
        let (status, v) = app.call("GET", &url, None).await;
        assert!(
            status == 200 || status == 404,
            "GET {url} answers a script {status}: {v}"
        );
    }
}
