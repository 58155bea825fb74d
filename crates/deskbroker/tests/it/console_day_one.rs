//! What an administrator does in a pool's first day, in the console in a
//! real browser (headless Chromium, as in `console.rs`): create a
//! registration token, shown once and kept nowhere, that registers a host;
//! add a host by hand and see the API's refusals; give a user an `.rdp`
//! file and a browser link, a name full of markup staying text; and see
//! Start/Stop only where the pool has a power driver. Operators and
//! readers see none of the administrator's controls, and the API refuses
//! them a registration token.

use serde_json::{Value, json};

use crate::browser::{
    browser, click, count, go, is_shown, js, sign_in_as, text, type_into, wait_js, wait_text,
};
use crate::{App, TOKEN, credential};

/// Opens pool `name`'s page and waits for its first refresh.
async fn open_pool(c: &fantoccini::Client, name: &str) {
    go(c, &format!("#/pools/{name}")).await;
    // Its own page (not the one before it), refreshed once.
    wait_text(c, "main h1", "the pool's name", |t| t == name).await;
    wait_text(
        c,
        "#pool-summary [data-stat=\"type\"]",
        "the pool's type",
        |t| !t.is_empty(),
    )
    .await;
}

async fn pooled(app: &App, name: &str, extra: Value) {
    let mut body = json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    app.ok("PUT", &format!("/api/v1/hostPools/{name}"), Some(body), 201)
        .await;
}

/// An admin creates a registration token in the pool's page: it is shown
/// once with the agent's configuration and command that use it, is in no
/// URL, history entry, storage or console message of the page, is gone
/// once hidden or once the page is left, and registers a host. An
/// operator and a reader see no such control, and the API refuses them.
#[tokio::test]
async fn console_registration_token_is_shown_once_registers_a_host_and_is_the_admins_only() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pooled(&app, "farm", json!({})).await;
    let operator = credential(&app, "ops", "operator", &[]).await;
    let reader = credential(&app, "watcher", "reader", &[]).await;
    let b = browser().await;
    let c = &b.client;

    sign_in_as(c, &app, TOKEN).await;
    open_pool(c, "farm").await;
    // Whatever the page logs from here on is kept, to be searched.
    js(
        c,
        "window.__logged = [];
         for (const k of ['log', 'info', 'warn', 'error', 'debug']) {
           const f = console[k].bind(console);
           console[k] = (...a) => { window.__logged.push(a.map(String).join(' ')); f(...a); };
         }
         window.__history = history.length;",
        vec![],
    )
    .await;
    type_into(c, "#reg-max-hosts", "2").await;
    click(c, "#reg-token button[type=submit]").await;
    let token = wait_text(c, "#reg-token-value", "the new token", |t| {
        t.starts_with("dbr_")
    })
    .await;
    let message = text(c, "#reg-message").await.unwrap_or_default();
    assert!(message.contains("2 new hosts"), "{message}");
    let config = text(c, "#reg-agent-config").await.unwrap_or_default();
    assert_eq!(
        config,
        format!(
            "broker = \"{}\"\nhost_pool = \"farm\"\nregistration_token = \"{token}\"\n",
            app.url
        )
    );
    let command = text(c, "#reg-agent-command").await.unwrap_or_default();
    assert_eq!(
        command,
        format!(
            "deskbroker agent --broker {} --host-pool farm \
             --registration-token-file /etc/deskbroker/farm.token",
            app.url
        )
    );

    // The secret is in the page only.
    let kept = js(
        c,
        "const t = arguments[0];
         const kept = [location.href, document.referrer, document.cookie,
           ...Object.keys(localStorage), ...Object.values(localStorage),
           ...Object.keys(sessionStorage), ...Object.values(sessionStorage),
           ...window.__logged];
         return { found: kept.filter((v) => v.includes(t)),
                  historyGrew: history.length !== window.__history };",
        vec![json!(token)],
    )
    .await;
    assert_eq!(kept, json!({"found": [], "historyGrew": false}));

    // It registers a host, which the page then lists.
    let (status, v) = app
        .call_with(
            "POST",
            "/api/v1/register",
            Some(json!({"token": token, "name": "h7", "address": "10.0.0.7:3389"})),
            None,
        )
        .await;
    assert_eq!(status, 201, "{v}");
    wait_js(
        c,
        "return !!document.querySelector('#hosts-table tr[data-host=\"h7\"]');",
        "the host the token registered",
    )
    .await;

    // Hidden, it is gone from the page; left and opened again, not shown.
    click(c, "#reg-hide").await;
    let in_page = "return document.documentElement.outerHTML.includes(arguments[0]);";
    assert_eq!(js(c, in_page, vec![json!(token)]).await, json!(false));
    type_into(c, "#reg-max-hosts", "1").await;
    click(c, "#reg-token button[type=submit]").await;
    let second = wait_text(c, "#reg-token-value", "a second token", |t| {
        t.starts_with("dbr_")
    })
    .await;
    go(c, "#/pools").await;
    open_pool(c, "farm").await;
    assert_eq!(js(c, in_page, vec![json!(second)]).await, json!(false));
    assert_eq!(count(c, "#reg-token-value").await, 0);

    // Revoked from the page, the second one registers nothing.
    click(c, "#reg-revoke").await;
    wait_text(c, "#reg-revoke", "the confirming click", |t| {
        t == "Confirm revoke"
    })
    .await;
    click(c, "#reg-revoke").await;
    wait_text(c, "#reg-message", "the revocation", |t| {
        t.starts_with("Revoked every registration token")
    })
    .await;
    let (status, v) = app
        .call_with(
            "POST",
            "/api/v1/register",
            Some(json!({"token": second, "name": "h8", "address": "10.0.0.8:3389"})),
            None,
        )
        .await;
    assert_eq!(status, 401, "a revoked token registered a host: {v}");

    // An operator and a reader: none of the admin's controls, and the API
    // makes them no token.
    for (role, cred) in [("operator", &operator), ("reader", &reader)] {
        click(c, "#signout").await;
        sign_in_as(c, &app, cred).await;
        open_pool(c, "farm").await;
        for control in ["#day-one", "#reg-token", "#add-host", "#user-link"] {
            assert_eq!(count(c, control).await, 0, "{role} sees {control}");
        }
        let (status, v) = app
            .call_with(
                "POST",
                "/api/v1/hostPools/farm/registrationToken",
                Some(json!({})),
                Some(cred),
            )
            .await;
        assert_eq!(status, 403, "{role} got a registration token: {v}");
    }
}

/// An admin adds a session host by hand; a name that exists is refused
/// (not replaced), as is an address the pool's policy refuses, each with
/// the API's own message.
#[tokio::test]
async fn console_adds_a_host_by_hand_and_shows_the_apis_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pooled(&app, "farm", json!({})).await;
    let b = browser().await;
    let c = &b.client;
    sign_in_as(c, &app, TOKEN).await;
    open_pool(c, "farm").await;

    type_into(c, "#add-host-name", "h1").await;
    type_into(c, "#add-host-address", "10.0.0.1:3389").await;
    type_into(c, "#add-host-mac", "52:54:00:ab:cd:01").await;
    click(c, "#add-host button[type=submit]").await;
    wait_text(c, "#add-host-message", "the added host", |t| {
        t.starts_with("Added session host h1 (10.0.0.1:3389)")
    })
    .await;
    let h1 = app
        .ok("GET", "/api/v1/hostPools/farm/sessionHosts/h1", None, 200)
        .await;
    assert_eq!(h1["address"], "10.0.0.1:3389", "{h1}");
    assert_eq!(h1["macAddress"], "52:54:00:ab:cd:01", "{h1}");
    wait_js(
        c,
        "return !!document.querySelector('#hosts-table tr[data-host=\"h1\"]');",
        "h1 in the host list",
    )
    .await;
    // Drained, then "added" again: refused, and left as it was.
    app.ok(
        "PATCH",
        "/api/v1/hostPools/farm/sessionHosts/h1",
        Some(json!({"allowNewSession": false})),
        200,
    )
    .await;
    type_into(c, "#add-host-name", "h1").await;
    type_into(c, "#add-host-address", "10.0.0.9:3389").await;
    click(c, "#add-host button[type=submit]").await;
    wait_text(
        c,
        "#add-host-message",
        "the refusal of an existing name",
        |t| t.starts_with("Conflict: session host h1 already exists"),
    )
    .await;
    let h1 = app
        .ok("GET", "/api/v1/hostPools/farm/sessionHosts/h1", None, 200)
        .await;
    assert_eq!(h1["address"], "10.0.0.1:3389", "{h1}");
    assert_eq!(h1["allowNewSession"], false, "{h1}");

    // A loopback address the pool does not allow: the API's words.
    type_into(c, "#add-host-name", "h2").await;
    type_into(c, "#add-host-address", "127.0.0.1:3389").await;
    click(c, "#add-host button[type=submit]").await;
    let refusal = wait_text(c, "#add-host-message", "the address's refusal", |t| {
        t.starts_with("InvalidParameter:")
    })
    .await;
    assert!(refusal.contains("127.0.0.1"), "{refusal}");
    let (status, _) = app
        .call("GET", "/api/v1/hostPools/farm/sessionHosts/h2", None)
        .await;
    assert_eq!(status, 404, "a refused host was added");
}

/// The `.rdp` file and the browser link the console hands out for a user
/// typed in: the file the API makes, with a ticket for that user, and the
/// RD Gateway's page; a user name made of markup is shown as text and runs
/// nothing.
#[tokio::test]
async fn console_gives_a_users_rdp_file_and_browser_link_and_a_hostile_name_stays_text() {
    let dir = tempfile::tempdir().unwrap();
    let (app, _) = App::spawn_with(
        &dir.path().join("data"),
        "127.0.0.1:0",
        &[
            "--rdp-listen",
            "127.0.0.1:0",
            "--gateway-listen",
            "127.0.0.1:0",
        ],
    );
    let gateway = app.ready.gateway_addr().to_string();
    crate::web::pool(&app, "farm", true).await;
    let b = browser().await;
    let c = &b.client;
    sign_in_as(c, &app, TOKEN).await;
    open_pool(c, "farm").await;
    // The files the page hands the browser to download, kept to be read.
    js(
        c,
        "window.__files = [];
         const make = URL.createObjectURL.bind(URL);
         URL.createObjectURL = (blob) => { window.__files.push(blob); return make(blob); };",
        vec![],
    )
    .await;
    let file_text = "return (async () => {
           const f = window.__files[window.__files.length - 1];
           return f ? await f.text() : null;
         })();";

    type_into(c, "#link-user", "alice@contoso.com").await;
    click(c, "#link-rdp").await;
    wait_text(c, "#link-message", "the downloaded file", |t| {
        t.starts_with("Downloaded farm.rdp for alice@contoso.com: its ticket admits them for 300 s")
    })
    .await;
    let file = js(c, file_text, vec![]).await;
    let file = file
        .as_str()
        .expect("an .rdp file was handed to the browser");
    assert!(file.contains("full address:s:"), "{file}");
    let ticket = file
        .lines()
        .find_map(|l| l.trim().strip_prefix("loadbalanceinfo:s:"))
        .unwrap_or_else(|| panic!("no ticket in {file}"));
    assert!(ticket.starts_with("dbt1:farm:"), "{ticket}");
    assert!(ticket.ends_with(":alice@contoso.com"), "{ticket}");

    // Through the RD Gateway.
    click(c, "#link-gateway").await;
    click(c, "#link-rdp").await;
    wait_value_of_files(c, 2).await;
    let file = js(c, file_text, vec![]).await;
    assert!(
        file.as_str()
            .unwrap_or_default()
            .contains("gatewayaccesstoken:s:"),
        "{file}"
    );
    click(c, "#link-gateway").await;

    // The browser link: the RD Gateway's page with alice's ticket.
    click(c, "#link-web").await;
    let url = crate::browser::wait_value(
        c,
        "const e = document.querySelector('#web-url-text'); return e ? e.value : null;",
        vec![],
        "the browser link",
        |v| v.as_str().is_some_and(|s| !s.is_empty()),
    )
    .await;
    let url = url.as_str().unwrap();
    let (page, ticket) = crate::web::split(url);
    assert_eq!(page, format!("https://{gateway}/web"));
    assert!(ticket.ends_with(":alice@contoso.com"), "{ticket}");
    let href = js(c, "return document.querySelector('#web-url').href;", vec![]).await;
    assert_eq!(href, json!(url));

    // A name of markup: a valid user name (no white space), shown as text.
    let hostile = "<img/src=x/onerror=window.__pwned=1>@x";
    type_into(c, "#link-user", hostile).await;
    click(c, "#link-rdp").await;
    wait_text(c, "#link-message", "the hostile name's file", |t| {
        t.starts_with(&format!("Downloaded farm.rdp for {hostile}:"))
    })
    .await;
    click(c, "#link-web").await;
    wait_text(c, "#link-message", "the hostile name's link", |t| {
        t.starts_with(&format!("A browser link for {hostile}:"))
    })
    .await;
    let label = text(c, "#link-out label").await.unwrap_or_default();
    assert!(
        label.starts_with(&format!("Browser link for {hostile}, valid until")),
        "{label}"
    );
    let ran = js(
        c,
        "return { images: document.querySelectorAll('#day-one img, #main img').length,
                  pwned: window.__pwned === undefined ? null : window.__pwned };",
        vec![],
    )
    .await;
    assert_eq!(ran, json!({"images": 0, "pwned": null}));
    assert!(is_shown(c, "#web-url").await);
}

/// Waits until the page has handed the browser `n` files.
async fn wait_value_of_files(c: &fantoccini::Client, n: u64) {
    crate::browser::wait_value(
        c,
        "return window.__files.length;",
        vec![],
        "another downloaded file",
        |v| v.as_u64() == Some(n),
    )
    .await;
}

/// Start and Stop are offered only for what the pool's driver and this
/// broker can do (`powerActions`): none with no driver, Start alone for
/// Wake-on-LAN without a command to stop hosts.
#[tokio::test]
async fn console_offers_start_and_stop_only_where_the_pool_can_power_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    pooled(&app, "bare", json!({})).await;
    pooled(
        &app,
        "wol",
        json!({"powerSettings": {"driver": "wakeOnLan"}}),
    )
    .await;
    for pool in ["bare", "wol"] {
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/{pool}/sessionHosts/h1"),
            Some(json!({"address": "10.0.0.1:3389", "macAddress": "52:54:00:ab:cd:01"})),
            201,
        )
        .await;
    }
    let bare = app.ok("GET", "/api/v1/hostPools/bare", None, 200).await;
    assert_eq!(bare["powerActions"], json!([]), "{bare}");
    let wol = app.ok("GET", "/api/v1/hostPools/wol", None, 200).await;
    assert_eq!(wol["powerActions"], json!(["start"]), "{wol}");

    let operator = credential(&app, "ops", "operator", &[]).await;
    let b = browser().await;
    let c = &b.client;
    sign_in_as(c, &app, &operator).await;
    let buttons = "const r = document.querySelector('#hosts-table tr[data-host=\"h1\"]');
         if (!r || !r.dataset.power) return null;
         const shown = (css) => { const e = r.querySelector(css); return !!e && e.getClientRects().length > 0; };
         return { start: shown('button.start'), stop: shown('button.stop') };";
    open_pool(c, "bare").await;
    let v =
        crate::browser::wait_value(c, buttons, vec![], "h1's power cell", |v| !v.is_null()).await;
    assert_eq!(
        v,
        json!({"start": false, "stop": false}),
        "no driver, no buttons"
    );
    open_pool(c, "wol").await;
    let v =
        crate::browser::wait_value(c, buttons, vec![], "h1's power cell", |v| !v.is_null()).await;
    assert_eq!(
        v,
        json!({"start": true, "stop": false}),
        "Wake-on-LAN starts only"
    );
}
