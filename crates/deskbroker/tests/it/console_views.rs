//! The web console's views that need more than one walk: a 10,000-host
//! pool, what each role sees, and hosts' reports shown as text.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::browser::*;
use crate::{App, pool_with_hosts};

/// A pool of 10,000 hosts: the console shows it a page at a time (the
/// first page, the last, a page of 1,000, a link straight to a page), and
/// its sessions too. How fast is not asserted: on a loaded machine running
/// the suite in parallel any bound would be a guess (tests assert
/// behaviour; timings belong in benchmarks).
#[tokio::test]
async fn console_shows_a_10000_host_pool() {
    const HOSTS: usize = 10_000;
    /// Parallel registrations (the store commits them in groups).
    const CONCURRENCY: usize = 32;
    let dir = tempfile::tempdir().unwrap();
    let app = Arc::new(App::spawn(&dir));
    app.ok(
        "PUT",
        "/api/v1/hostPools/big",
        Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst", "maxSessionLimit": 20})),
        201,
    )
    .await;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..HOSTS {
        if tasks.len() >= CONCURRENCY {
            tasks.join_next().await.unwrap().unwrap();
        }
        let app = app.clone();
        tasks.spawn(async move {
            let address = format!("10.{}.{}.{}:3389", i / 65536, (i / 256) % 256, i % 256);
            app.ok(
                "PUT",
                &format!("/api/v1/hostPools/big/sessionHosts/h{:05}", i + 1),
                Some(json!({ "address": address })),
                201,
            )
            .await;
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    for i in 0..200 {
        connect(&app, "big", &format!("u{i}@x")).await;
    }
    let whole = app
        .ok("GET", "/api/v1/hostPools/big/sessionHosts", None, 200)
        .await;
    assert_eq!(whole["value"].as_array().map_or(0, Vec::len), HOSTS);

    // Registered in parallel, so query order is not name order: the last
    // host is the API's.
    let last = app
        .ok(
            "GET",
            "/api/v1/hostPools/big/sessionHosts?pageSize=1&initialSkip=9999",
            None,
            200,
        )
        .await;
    let last_host = format!(
        "{}{}",
        last["value"][0]["name"].as_str().unwrap(),
        last["value"][0]["address"].as_str().unwrap()
    );

    let b = browser().await;
    let c = &b.client;
    sign_in(c, &app).await;
    go(c, "#/pools/big").await;
    wait_text(c, "#hosts-pager .pager-text", "the first page", |t| {
        t == "Hosts 1–100 of 10,000"
    })
    .await;
    wait_js(
        c,
        "return document.querySelectorAll('#hosts-table tbody tr').length === 100 \
         && document.querySelectorAll('#heat .cell').length === 100;",
        "100 rows and 100 heat cells",
    )
    .await;
    click(c, "#hosts-pager a[data-rel='last']").await;
    wait_text(c, "#hosts-pager .pager-text", "the last page", |t| {
        t == "Hosts 9,901–10,000 of 10,000"
    })
    .await;
    wait_text(
        c,
        "#hosts-table tbody tr:last-child th",
        "the last host in query order",
        |t| t.starts_with(&last_host),
    )
    .await;
    choose(c, "#hosts-pager-size", "1000").await;
    wait_js(
        c,
        "return document.querySelectorAll('#hosts-table tbody tr').length === 1000;",
        "a page of 1,000",
    )
    .await;
    // A link straight to the third page of 1,000.
    go(c, "#/pools/big?page=3&size=1000").await;
    wait_text(
        c,
        "#hosts-pager .pager-text",
        "the third page of 1,000",
        |t| t == "Hosts 2,001–3,000 of 10,000",
    )
    .await;
    wait_js(
        c,
        "return document.querySelectorAll('#hosts-table tbody tr').length === 1000;",
        "the third page's 1,000 rows",
    )
    .await;

    // Sessions page by page too: 200 of them, 100 a page.
    go(c, "#/sessions?pool=big").await;
    wait_text(
        c,
        "#sessions-pager .pager-text",
        "the first 100 sessions",
        |t| t == "Sessions 1–100 of 200",
    )
    .await;
    click(c, "#sessions-pager a[data-rel='next']").await;
    wait_text(
        c,
        "#sessions-pager .pager-text",
        "the next 100 sessions",
        |t| t == "Sessions 101–200 of 200",
    )
    .await;
    assert_eq!(count(c, "#sessions-table tbody tr").await, 100);
    b.client.clone().close().await.expect("close the browser");
}

/// Rules T1 and T5 in the console: a reader signs in with its own
/// credential and sees no change buttons; an operator drains a host, and
/// the audit page shows that entry with the operator as its actor.
#[tokio::test]
async fn each_role_sees_its_actions_and_the_audit_page_shows_a_drain() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pool_with_hosts(&app, "p", "BreadthFirst", 5, 2).await;
    connect(&app, "p", "alice").await;
    let token = |v: Value| v["token"].as_str().expect("token").to_string();
    let reader = token(
        app.ok(
            "POST",
            "/api/v1/credentials",
            Some(json!({"name": "watcher", "role": "reader"})),
            201,
        )
        .await,
    );
    let operator = token(
        app.ok(
            "POST",
            "/api/v1/credentials",
            Some(json!({"name": "ops", "role": "operator"})),
            201,
        )
        .await,
    );
    let b = browser().await;
    let c = &b.client;

    sign_in_as(c, &app, &reader).await;
    wait_text(c, "#whoami", "who is signed in", |t| {
        t == "watcher (reader)"
    })
    .await;
    assert_eq!(count(c, "#new-pool").await, 0, "a reader creates no pool");
    go(c, "#/pools/p").await;
    wait_js(
        c,
        "return document.querySelectorAll('#hosts-table tbody tr').length === 2;",
        "the hosts of p",
    )
    .await;
    assert_eq!(
        count(c, "input.drain").await,
        0,
        "a reader has no drain switch"
    );
    assert_eq!(
        count(c, "#pool-settings").await,
        0,
        "nor the pool's settings"
    );
    go(c, "#/sessions?pool=p").await;
    wait_js(
        c,
        "return !!document.querySelector('tr[data-user=\"alice\"]');",
        "alice's session",
    )
    .await;
    assert_eq!(
        count(c, "button.logoff").await,
        0,
        "a reader logs nobody off"
    );
    click(c, "#signout").await;

    sign_in_as(c, &app, &operator).await;
    assert_eq!(
        count(c, "#new-pool").await,
        0,
        "an operator creates no pool"
    );
    go(c, "#/pools/p").await;
    wait_js(
        c,
        "return document.querySelectorAll('input.drain').length === 2;",
        "the operator's drain switches",
    )
    .await;
    assert_eq!(
        count(c, "#pool-settings").await,
        0,
        "an operator edits no pool"
    );
    click(c, "input.drain[data-host=\"h1\"]").await;
    let drained = crate::eventually(std::time::Duration::from_secs(10), || async {
        app.ok("GET", "/api/v1/hostPools/p/sessionHosts/h1", None, 200)
            .await["allowNewSession"]
            == false
    })
    .await;
    assert!(drained, "the operator's switch drained h1");
    go(c, "#/sessions?pool=p").await;
    wait_js(
        c,
        "return !!document.querySelector('button.logoff');",
        "the operator's log off button",
    )
    .await;
    go(c, "#/audit").await;
    let action = wait_text(
        c,
        "#audit-table tr[data-actor=\"credential:ops\"] .action",
        "the operator's drain in the audit log",
        |t| t == "PATCH /api/v1/hostPools/p/sessionHosts/h1",
    )
    .await;
    assert!(!action.is_empty());
    let change = text(c, "#audit-table tr[data-actor=\"credential:ops\"] .change")
        .await
        .unwrap_or_default();
    assert!(change.contains("allowNewSession: true → false"), "{change}");
}

/// `POST …/heartbeat` of `host` in `pool` with its credential.
async fn heartbeat(app: &App, pool: &str, host: &str, credential: &str, body: Value) {
    let (status, v) = app
        .call_with(
            "POST",
            &format!("/api/v1/hostPools/{pool}/sessionHosts/{host}/heartbeat"),
            Some(body),
            Some(credential),
        )
        .await;
    assert_eq!(status, 200, "{v}");
}

/// The host table says how the broker hears of each host and what the
/// watching agent's last scrape found wrong. That error is written by
/// whoever controls the host's side (a compromised host, or its
/// exporter's answer quoted): the console shows it as text, so markup in
/// it makes no element and runs nothing.
#[tokio::test]
async fn the_host_table_shows_each_hosts_source_and_scrape_error_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    app.ok(
        "PUT",
        "/api/v1/hostPools/win",
        Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"})),
        201,
    )
    .await;
    let linux = crate::enroll(&app, "win", "xrdp01", "10.0.0.10:3389").await;
    let watched = crate::enroll(&app, "win", "rdsh01", "10.0.0.11:3389").await;
    crate::enroll(&app, "win", "manual01", "10.0.0.12:3389").await;
    heartbeat(&app, "win", "xrdp01", &linux, json!({"source": "agent"})).await;
    let hostile = r#"<img src=x onerror="window.__owned=1"><script>window.__owned=2</script> collector <b>failed</b> &amp; "quoted""#;
    heartbeat(
        &app,
        "win",
        "rdsh01",
        &watched,
        json!({"source": "windowsExporter", "scrapeError": hostile}),
    )
    .await;

    let b = browser().await;
    let c = &b.client;
    sign_in(c, &app).await;
    go(c, "#/pools/win").await;
    let row = |h: &str| format!("#hosts-table tr[data-host='{h}']");
    let shown = wait_text(
        c,
        &format!("{} .scrape-error", row("rdsh01")),
        "rdsh01's scrape error",
        |t| !t.is_empty(),
    )
    .await;
    assert_eq!(shown, hostile, "the error, character for character");
    assert!(
        is_shown(c, &format!("{} .scrape-error", row("rdsh01"))).await,
        "the error is not visible"
    );
    assert_eq!(
        text(c, &format!("{} .source", row("rdsh01")))
            .await
            .as_deref(),
        Some("windows_exporter")
    );
    // Its markup made no element and ran nothing.
    let made = js(
        c,
        "const t = document.querySelector('#hosts-table'); \
         return [t.querySelectorAll('img, script, b').length, window.__owned === undefined];",
        vec![],
    )
    .await;
    assert_eq!(made, json!([0, true]));

    // The Linux agent's host, and one that never sent a heartbeat: no
    // error shown.
    assert_eq!(
        text(c, &format!("{} .source", row("xrdp01")))
            .await
            .as_deref(),
        Some("agent")
    );
    assert_eq!(
        text(c, &format!("{} .source", row("manual01")))
            .await
            .as_deref(),
        Some("—")
    );
    for h in ["xrdp01", "manual01"] {
        assert!(
            !is_shown(c, &format!("{} .scrape-error", row(h))).await,
            "{h} shows a scrape error"
        );
    }

    // A whole scrape clears the error on the next poll.
    heartbeat(
        &app,
        "win",
        "rdsh01",
        &watched,
        json!({"source": "windowsExporter"}),
    )
    .await;
    wait_js(
        c,
        &format!(
            "const e = document.querySelector(\"{} .scrape-error\"); \
             return !!e && e.hidden && e.textContent === '';",
            row("rdsh01")
        ),
        "rdsh01's error cleared",
    )
    .await;
}
