//! The user portal (`/portal`) end to end: a REAL OpenID Connect provider
//! (the `oidc-provider` package on Node, `tests/oidc/provider.js`, started
//! here on a free loopback port), the real `deskbroker serve`, and Debian's
//! headless chromium through chromedriver (the console test's helpers)
//! filling the provider's login and consent forms. Users see exactly the
//! pools rule T2 entitles them to, by name and by the ID token's groups,
//! download the same `.rdp` file the API gives for them, are refused other
//! pools, and sign out; forged, missing, reused or other browsers' states
//! are refused at the callback.
//!
//! `node` and `npm` must be installed (scripts/install-test-deps.sh); the
//! provider's package is installed from `tests/oidc/package-lock.json` by
//! `npm ci` when missing (scripts/test does it first).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::browser::{
    browser, click, js, screenshot, screenshot_dir, type_into, wait_js, wait_text,
};
use crate::{App, free_port};

const CLIENT_ID: &str = "deskbroker-portal";
const CLIENT_SECRET: &str = "portal-client-secret-0123456789abcdef";

/// How long the provider may take to print that it listens: node loads
/// oidc-provider in well under a second; this bounds a stuck start.
const PROVIDER_START: Duration = Duration::from_secs(60);

/// The provider's directory (package.json, its lock, provider.js).
fn oidc_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oidc")
}

/// Installs the provider's package from its lock file, once per test
/// process (tests run as threads), when it is not there yet.
fn install_provider() {
    static INSTALLED: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
    let mut done = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
    if *done || oidc_dir().join("node_modules/oidc-provider").exists() {
        *done = true;
        return;
    }
    let status = Command::new("npm")
        .args(["ci", "--prefer-offline", "--no-audit", "--no-fund"])
        .current_dir(oidc_dir())
        .status()
        .expect(
            "npm is missing: the portal tests need node and npm (scripts/install-test-deps.sh)",
        );
    assert!(
        status.success(),
        "npm ci in {} failed",
        oidc_dir().display()
    );
    *done = true;
}

/// A running provider, ended (by its own pid) on drop.
pub(crate) struct Provider {
    child: Child,
    pub(crate) issuer: String,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the provider with the broker's client (redirect URI under
/// `broker_url`) and `accounts` (login → claims), listening on the
/// loopback address `host` (its issuer names it).
pub(crate) fn start_provider(broker_url: &str, host: &str, accounts: Value) -> Provider {
    install_provider();
    // What node says on stderr goes to a file, to be shown if it fails.
    let log = tempfile::NamedTempFile::new().expect("a file for the provider's stderr");
    let stderr = if std::env::var_os("TEST_LOG").is_some() {
        Stdio::inherit()
    } else {
        Stdio::from(log.reopen().expect("reopen the provider's log"))
    };
    let mut child = Command::new("node")
        .arg("provider.js")
        .current_dir(oidc_dir())
        .env("OIDC_CLIENT_ID", CLIENT_ID)
        .env("OIDC_CLIENT_SECRET", CLIENT_SECRET)
        .env("OIDC_REDIRECT_URI", format!("{broker_url}/portal/callback"))
        .env("OIDC_ACCOUNTS", accounts.to_string())
        .env("OIDC_HOST", host)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("node is missing: the portal tests need node (scripts/install-test-deps.sh)");
    let line = match crate::first_lines(&mut child, 1, PROVIDER_START) {
        Ok(mut lines) => lines.remove(0),
        Err(e) => give_up(child, &log, &e),
    };
    let Some(issuer) = line.trim().strip_prefix("listening on ") else {
        give_up(child, &log, &format!("did not start: {line:?}"))
    };
    let issuer = issuer.to_string();
    Provider { child, issuer }
}

/// Stops a provider that failed to start and fails the test with what it
/// wrote on stderr.
fn give_up(mut child: Child, log: &tempfile::NamedTempFile, what: &str) -> ! {
    let _ = child.kill();
    let _ = child.wait();
    let said = std::fs::read_to_string(log.path()).unwrap_or_default();
    panic!("provider.js {what}; its stderr:\n{said}")
}

/// A broker on `port` with the portal pointed at `issuer`, and a front
/// door (the `.rdp` files need one).
pub(crate) fn spawn_broker(
    dir: &tempfile::TempDir,
    port: u16,
    issuer: &str,
    extra: &[&str],
) -> App {
    let secret = dir.path().join("client-secret");
    crate::write_secret(&secret, &format!("{CLIENT_SECRET}\n"));
    let secret = secret.display().to_string();
    let mut args = vec![
        "--rdp-listen",
        "127.0.0.1:0",
        "--oidc-issuer",
        issuer,
        "--oidc-client-id",
        CLIENT_ID,
        "--oidc-client-secret-file",
        &secret,
        "--oidc-scopes",
        "profile email groups",
    ];
    args.extend_from_slice(extra);
    App::spawn_with(
        &dir.path().join("data"),
        &format!("127.0.0.1:{port}"),
        &args,
    )
    .0
}

/// A pool with one host and the given settings.
pub(crate) async fn pool(app: &App, name: &str, settings: Value) {
    let mut body = json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"});
    for (k, v) in settings.as_object().unwrap() {
        body[k] = v.clone();
    }
    app.ok("PUT", &format!("/api/v1/hostPools/{name}"), Some(body), 201)
        .await;
    app.ok(
        "PUT",
        &format!("/api/v1/hostPools/{name}/sessionHosts/h1"),
        Some(json!({"address": "10.0.0.1:3389"})),
        201,
    )
    .await;
}

/// A client that follows no redirect, as the tests read each answer.
fn raw_client() -> reqwest::Client {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    CLIENT
        .get_or_init(|| {
            ::api::tls::install_default_provider();
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap()
        })
        .clone()
}

/// `GET url` with `cookie` (a `name=value` header): (status, headers, body).
pub(crate) async fn get(
    url: &str,
    cookie: Option<&str>,
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut r = raw_client().get(url);
    if let Some(c) = cookie {
        r = r.header("Cookie", c);
    }
    let answer = r.send().await.expect("request");
    let status = answer.status().as_u16();
    let headers = answer.headers().clone();
    (status, headers, answer.text().await.unwrap_or_default())
}

/// The contract's error code of a body.
pub(crate) fn code(body: &str) -> String {
    serde_json::from_str::<Value>(body).unwrap_or_default()["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The `name=value` of cookie `name` from `Set-Cookie` headers.
fn set_cookie(headers: &reqwest::header::HeaderMap, name: &str) -> Option<(String, String)> {
    headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(|v| {
            let pair = v.split(';').next().unwrap_or_default().to_string();
            (pair, v.to_string())
        })
}

/// Signs in through the provider's forms in the browser, from `/portal`.
pub(crate) async fn sign_in(c: &fantoccini::Client, app: &App, login: &str) {
    c.goto(&format!("{}/portal", app.url))
        .await
        .expect("open /portal");
    wait_js(
        c,
        "return !!document.querySelector('input[name=login]');",
        "the provider's login form",
    )
    .await;
    type_into(c, "input[name=login]", login).await;
    type_into(c, "input[name=password]", "any password").await;
    click(c, "button[type=submit]").await;
    // The consent form, then back to the portal.
    let seen = crate::eventually(Duration::from_secs(20), || async {
        js(
            c,
            "return !!document.querySelector('input[name=prompt][value=consent]') \
             || !!document.querySelector('#user');",
            vec![],
        )
        .await
        .as_bool()
            == Some(true)
    })
    .await;
    if !seen {
        let url = c.current_url().await.map(|u| u.to_string());
        let page = js(c, "return document.documentElement.outerHTML;", vec![]).await;
        panic!("neither the consent form nor the portal: at {url:?}:\n{page}");
    }
    if js(c, "return !!document.querySelector('#user');", vec![])
        .await
        .as_bool()
        != Some(true)
    {
        click(c, "button[type=submit]").await;
    }
    wait_text(c, "#user", "the signed-in user", |t| !t.is_empty()).await;
}

/// The pools the page offers, in order.
pub(crate) async fn offered(c: &fantoccini::Client) -> Vec<String> {
    let v = js(
        c,
        "return [...document.querySelectorAll('li.pool')].map(e => e.dataset.pool);",
        vec![],
    )
    .await;
    serde_json::from_value(v).unwrap()
}

/// The browser's portal session cookie, as a `Cookie` header value.
pub(crate) async fn session_cookie(c: &fantoccini::Client) -> Option<String> {
    c.get_all_cookies()
        .await
        .expect("cookies")
        .into_iter()
        .find(|k| k.name() == "deskbroker-portal")
        .map(|k| format!("deskbroker-portal={}", k.value()))
}

/// The settings of an `.rdp` file, by name.
fn settings(file: &str) -> Vec<(String, String)> {
    file.split("\r\n")
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (name, rest) = l.split_once(':').unwrap_or((l, ""));
            (name.to_string(), rest.to_string())
        })
        .collect()
}

/// The portal's file equals the API's `rdpFile?user=` for the same user,
/// but for a fresh connection ticket (rule T3) in `loadbalanceinfo`: then
/// both carry one, and neither is the plain routing token.
fn same_file_modulo_ticket(portal: &str, api: &str, pool: &str) {
    let plain = format!("s:tsv://MS Terminal Services Plugin.1.{pool}");
    let (p, a) = (settings(portal), settings(api));
    let names = |s: &[(String, String)]| s.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&p), names(&a), "portal:\n{portal}\napi:\n{api}");
    for ((name, pv), (_, av)) in p.iter().zip(&a) {
        if name == "loadbalanceinfo" && pv != av {
            assert!(
                *pv != plain && *av != plain,
                "one file has a ticket and the other the plain token:\n{portal}\n{api}"
            );
        } else {
            assert_eq!(pv, av, "{name} differs:\nportal:\n{portal}\napi:\n{api}");
        }
    }
    assert!(
        names(&p).iter().any(|n| n == "loadbalanceinfo"),
        "no loadbalanceinfo:\n{portal}"
    );
}

#[tokio::test]
async fn users_sign_in_at_a_real_provider_and_get_their_entitled_pools() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let broker_url = format!("http://127.0.0.1:{port}");
    // The provider on another site than the broker (127.0.0.2 vs
    // 127.0.0.1), as in production: the callback is a cross-site
    // navigation, which SameSite=Lax cookies survive.
    let provider = start_provider(
        &broker_url,
        "127.0.0.2",
        json!({
            "alice": {"preferred_username": "alice@contoso.com", "email": "alice@contoso.com",
                      "groups": ["Desk Users", "Staff"]},
            "bob": {"preferred_username": "bob@contoso.com", "groups": []},
        }),
    );
    let app = spawn_broker(&dir, port, &provider.issuer, &[]);
    assert_eq!(app.url, broker_url);
    pool(&app, "open", json!({"friendlyName": "Office desktop"})).await;
    pool(
        &app,
        "by-user",
        json!({"entitledUsers": ["Alice@Contoso.com"], "friendlyName": "Alice's workstation"}),
    )
    .await;
    pool(
        &app,
        "by-group",
        json!({"entitledGroups": ["desk users"], "friendlyName": "Finance <apps>"}),
    )
    .await;
    pool(
        &app,
        "others",
        json!({"entitledUsers": ["carol@contoso.com"], "entitledGroups": ["Admins"]}),
    )
    .await;
    pool(&app, "no-front-door", json!({"allowFrontDoor": false})).await;

    let b = browser().await;
    let c = &b.client;
    sign_in(c, &app, "alice").await;
    assert_eq!(
        crate::browser::text(c, "#user").await.as_deref(),
        Some("alice@contoso.com")
    );
    // By name (any case), by group (any case), open to all; not the
    // others, nor a pool the front door may not reach.
    assert_eq!(offered(c).await, ["by-group", "by-user", "open"]);
    // The page with its style (the README shows it).
    let style = js(
        c,
        "return getComputedStyle(document.querySelector('a.download')).borderTopStyle;",
        vec![],
    )
    .await;
    assert_eq!(style, "solid", "the stylesheet was not applied");
    // A friendly name is shown as text, markup and all (escaped).
    assert_eq!(
        crate::browser::text(c, "li[data-pool=by-group] .pool-name")
            .await
            .as_deref(),
        Some("Finance <apps>")
    );
    let (shots, _keep) = screenshot_dir();
    screenshot(c, &shots, "portal.png").await;
    let cookie = session_cookie(c)
        .await
        .expect("the portal's session cookie");
    let cookies = c.get_all_cookies().await.unwrap();
    let k = cookies
        .iter()
        .find(|k| k.name() == "deskbroker-portal")
        .unwrap();
    assert_eq!(k.http_only(), Some(true), "the session cookie is HttpOnly");
    assert_eq!(
        format!("{:?}", k.same_site()),
        "Some(Lax)",
        "the session cookie is SameSite=Lax"
    );
    // The login cookie is gone once used.
    assert!(cookies.iter().all(|k| k.name() != "deskbroker-login"));

    // Each link's answer: the API's file for alice, as a download.
    let hrefs: Vec<String> = serde_json::from_value(
        js(
            c,
            "return [...document.querySelectorAll('li.pool a.download')].map(a => a.href);",
            vec![],
        )
        .await,
    )
    .unwrap();
    assert_eq!(hrefs.len(), 3);
    for (href, pool) in hrefs.iter().zip(["by-group", "by-user", "open"]) {
        assert_eq!(*href, format!("{broker_url}/portal/pools/{pool}/rdpFile"));
        let (status, headers, file) = get(href, Some(&cookie)).await;
        assert_eq!(status, 200, "{href}: {file}");
        assert_eq!(headers["content-type"], "application/x-rdp");
        assert_eq!(
            headers["content-disposition"],
            format!("attachment; filename=\"{pool}.rdp\"")
        );
        let api = app
            .text(&format!(
                "/api/v1/hostPools/{pool}/rdpFile?user=alice%40contoso.com&groups=Desk%20Users,Staff"
            ))
            .await;
        same_file_modulo_ticket(&file, &api, pool);
        // The portal's file carries alice's connection ticket (T3).
        let ticket = settings(&file)
            .into_iter()
            .find_map(|(n, v)| (n == "loadbalanceinfo").then_some(v))
            .unwrap_or_default();
        assert!(
            ticket.starts_with(&format!("s:dbt1:{pool}:"))
                && ticket.ends_with(":alice@contoso.com"),
            "{ticket}"
        );
    }
    // Not entitled: 403 NotEntitled; not through the front door: 403
    // Forbidden; no such pool: 404; no session: 401.
    for (pool, status, want) in [
        ("others", 403, "NotEntitled"),
        ("no-front-door", 403, "Forbidden"),
        ("nowhere", 404, "HostPoolNotFound"),
    ] {
        let (got, _, body) = get(
            &format!("{broker_url}/portal/pools/{pool}/rdpFile"),
            Some(&cookie),
        )
        .await;
        assert_eq!(
            (got, code(&body)),
            (status, want.to_string()),
            "{pool}: {body}"
        );
    }
    for forged in [
        None,
        Some("deskbroker-portal=0000"),
        Some("deskbroker-portal="),
    ] {
        let (got, _, body) = get(&format!("{broker_url}/portal/pools/open/rdpFile"), forged).await;
        assert_eq!(
            (got, code(&body).as_str()),
            (401, "Unauthorized"),
            "{forged:?}"
        );
    }
    // The page is served under the strict policy, and is not cached.
    let (status, headers, page) = get(&format!("{broker_url}/portal"), Some(&cookie)).await;
    assert_eq!(status, 200);
    assert!(page.contains("alice@contoso.com"));
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("default-src 'none'") && !csp.contains("script-src"),
        "{csp}"
    );
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(headers["x-frame-options"], "DENY");

    // Sign out: the session ends on the server and the cookie goes.
    click(c, "#signout").await;
    wait_text(c, "#signed-out", "the signed-out page", |t| {
        t == "Signed out"
    })
    .await;
    assert_eq!(session_cookie(c).await, None);
    let (got, _, body) = get(
        &format!("{broker_url}/portal/pools/open/rdpFile"),
        Some(&cookie),
    )
    .await;
    assert_eq!((got, code(&body).as_str()), (401, "Unauthorized"), "{body}");
    // Signed out, /portal sends the browser to the provider again.
    let (got, headers, _) = get(&format!("{broker_url}/portal"), Some(&cookie)).await;
    assert_eq!(got, 303);
    let location = headers["location"].to_str().unwrap();
    assert!(
        location.starts_with(&format!("{}/auth?", provider.issuer)),
        "{location}"
    );

    // bob, in no group: only the open pool. (The provider's session is
    // alice's: forget every cookie of both sites first.)
    c.goto(&format!(
        "{}/.well-known/openid-configuration",
        provider.issuer
    ))
    .await
    .unwrap();
    c.delete_all_cookies().await.unwrap();
    c.goto(&format!("{broker_url}/portal/portal.css"))
        .await
        .unwrap();
    c.delete_all_cookies().await.unwrap();
    sign_in(c, &app, "bob").await;
    assert_eq!(
        crate::browser::text(c, "#user").await.as_deref(),
        Some("bob@contoso.com")
    );
    assert_eq!(offered(c).await, ["open"]);
    let bob = session_cookie(c).await.unwrap();
    let (got, _, body) = get(
        &format!("{broker_url}/portal/pools/by-group/rdpFile"),
        Some(&bob),
    )
    .await;
    assert_eq!((got, code(&body).as_str()), (403, "NotEntitled"), "{body}");
    // alice's session is gone; bob's does not become hers.
    assert_ne!(bob, cookie);
}

#[tokio::test]
async fn the_callback_refuses_missing_forged_reused_and_other_browsers_states() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let broker_url = format!("http://127.0.0.1:{port}");
    let provider = start_provider(&broker_url, "127.0.0.1", json!({}));
    let _app = spawn_broker(&dir, port, &provider.issuer, &[]);

    // /portal starts a login: off to the provider's authorization
    // endpoint with a state, PKCE (S256) and a nonce; a login cookie binds
    // the state to this browser.
    let (status, headers, _) = get(&format!("{broker_url}/portal"), None).await;
    assert_eq!(status, 303);
    let location = reqwest::Url::parse(headers["location"].to_str().unwrap()).unwrap();
    assert!(
        location
            .as_str()
            .starts_with(&format!("{}/auth?", provider.issuer))
    );
    let query: std::collections::HashMap<String, String> =
        location.query_pairs().into_owned().collect();
    assert_eq!(query["client_id"], CLIENT_ID);
    assert_eq!(
        query["redirect_uri"],
        format!("{broker_url}/portal/callback")
    );
    assert_eq!(query["code_challenge_method"], "S256");
    assert!(query["scope"].split(' ').any(|s| s == "openid"));
    assert!(!query["nonce"].is_empty());
    let state = query["state"].clone();
    let (login, raw) = set_cookie(&headers, "deskbroker-login").expect("a login cookie");
    assert!(
        raw.contains("HttpOnly") && raw.contains("SameSite=Lax"),
        "{raw}"
    );

    let callback = |q: &str| format!("{broker_url}/portal/callback?{q}");
    // No state, a forged one: refused.
    for (q, cookie) in [
        ("code=abc".to_string(), Some(login.as_str())),
        ("code=abc&state=".to_string(), Some(login.as_str())),
        ("code=abc&state=forged".to_string(), Some(login.as_str())),
    ] {
        let (got, headers, body) = get(&callback(&q), cookie).await;
        assert_eq!(
            (got, code(&body).as_str()),
            (403, "Forbidden"),
            "{q}: {body}"
        );
        assert!(set_cookie(&headers, "deskbroker-portal").is_none());
    }
    // The right state from another browser (no login cookie, or another
    // one): refused — and the state is spent, so the right browser cannot
    // use it afterwards either.
    let (got, _, body) = get(
        &callback(&format!("code=abc&state={state}")),
        Some("deskbroker-login=other"),
    )
    .await;
    assert_eq!((got, code(&body).as_str()), (403, "Forbidden"), "{body}");
    let (got, _, body) = get(&callback(&format!("code=abc&state={state}")), Some(&login)).await;
    assert_eq!((got, code(&body).as_str()), (403, "Forbidden"), "{body}");

    // A fresh login with the right browser but a code the provider never
    // issued: the provider refuses it, and nobody is signed in.
    let (_, headers, _) = get(&format!("{broker_url}/portal"), None).await;
    let location = reqwest::Url::parse(headers["location"].to_str().unwrap()).unwrap();
    let state = location
        .query_pairs()
        .find(|(k, _)| k == "state")
        .unwrap()
        .1
        .into_owned();
    let (login, _) = set_cookie(&headers, "deskbroker-login").unwrap();
    let (got, headers, body) = get(
        &callback(&format!("code=made-up&state={state}")),
        Some(&login),
    )
    .await;
    assert_eq!((got, code(&body).as_str()), (401, "Unauthorized"), "{body}");
    assert!(set_cookie(&headers, "deskbroker-portal").is_none());
    // The provider's own refusal (the user cancelled) comes back as 401.
    let (got, _, body) = get(&callback("error=access_denied&state=x"), None).await;
    assert_eq!((got, code(&body).as_str()), (401, "Unauthorized"), "{body}");

    // The portal's routes take no bearer token: they are counted by the
    // unauthenticated throttle (rule T4) like any request without one.
    let mut throttled = false;
    for _ in 0..200 {
        let (got, _, _) = get(&callback("code=a&state=b"), None).await;
        if got == 429 {
            throttled = true;
            break;
        }
    }
    assert!(
        throttled,
        "200 callbacks in a row from one address were never throttled"
    );
}

#[tokio::test]
async fn a_portal_not_configured_or_a_provider_down_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // No --oidc-issuer: 404 naming the flag.
    let app = App::spawn(&dir);
    let (got, _, body) = get(&format!("{}/portal", app.url), None).await;
    assert_eq!((got, code(&body).as_str()), (404, "NotFound"), "{body}");
    assert!(body.contains("--oidc-issuer"), "{body}");
    drop(app);

    // A provider that does not answer: 502 IdentityProviderUnavailable,
    // and the broker serves everything else.
    let dir = tempfile::tempdir().unwrap();
    let dead = format!("http://127.0.0.1:{}", free_port());
    let app = spawn_broker(&dir, free_port(), &dead, &[]);
    let (got, _, body) = get(&format!("{}/portal", app.url), None).await;
    assert_eq!(
        (got, code(&body).as_str()),
        (502, "IdentityProviderUnavailable"),
        "{body}"
    );
    app.ok("GET", "/api/v1/hostPools", None, 200).await;

    // A provider over plain HTTP beyond loopback is refused at start.
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    crate::write_secret(&secret, CLIENT_SECRET);
    let out = Command::new(crate::exe())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .args([
            "--oidc-issuer",
            "http://login.contoso.com",
            "--oidc-client-id",
            CLIENT_ID,
            "--oidc-client-secret-file",
        ])
        .arg(&secret)
        .env("DESKBROKER_ADMIN_TOKEN", crate::TOKEN)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("https://"), "{stderr}");
}

#[tokio::test]
async fn replicas_serve_the_portal_through_the_leader() {
    let db = crate::pg::scratch("portal_replicas").await;
    let dir = tempfile::tempdir().unwrap();
    // Behind one address (a load balancer): the same public URL for all.
    let public = "http://desktops.contoso.test";
    let provider = start_provider(public, "127.0.0.1", json!({}));
    let secret = dir.path().join("client-secret");
    crate::write_secret(&secret, CLIENT_SECRET);
    let secret = secret.display().to_string();
    let args = [
        "--database-url",
        db.url(),
        "--oidc-issuer",
        &provider.issuer,
        "--oidc-client-id",
        CLIENT_ID,
        "--oidc-client-secret-file",
        &secret,
        "--public-url",
        public,
    ];
    let leader = crate::pg::spawn_with(&dir.path().join("r0"), &args).expect("replica 0");
    let leads = crate::eventually(Duration::from_secs(30), || async { leader.leads().await }).await;
    assert!(leads, "the first replica does not lead");
    let follower = crate::pg::spawn_with(&dir.path().join("r1"), &args).expect("replica 1");

    // Through the follower: the leader begins the login, and its redirect
    // and login cookie come back whole.
    let (status, headers, body) = get(&format!("{}/portal", follower.url), None).await;
    assert_eq!(status, 303, "{body}");
    let location = reqwest::Url::parse(headers["location"].to_str().unwrap()).unwrap();
    assert!(
        location
            .as_str()
            .starts_with(&format!("{}/auth?", provider.issuer))
    );
    let query: std::collections::HashMap<String, String> =
        location.query_pairs().into_owned().collect();
    assert_eq!(query["redirect_uri"], format!("{public}/portal/callback"));
    let (login, _) = set_cookie(&headers, "deskbroker-login").expect("the login cookie");
    // A forged state is refused; the real one reaches the login the
    // leader keeps (then the provider refuses the made-up code).
    let (got, _, body) = get(
        &format!("{}/portal/callback?code=x&state=forged", follower.url),
        Some(&login),
    )
    .await;
    assert_eq!((got, code(&body).as_str()), (403, "Forbidden"), "{body}");
    let (got, _, body) = get(
        &format!(
            "{}/portal/callback?code=made-up&state={}",
            follower.url, query["state"]
        ),
        Some(&login),
    )
    .await;
    assert_eq!((got, code(&body).as_str()), (401, "Unauthorized"), "{body}");
}

/// Rule WEB3: with an RD Gateway, each pool the user may use has "Open in
/// the browser", which sends the browser on to the gateway's `/web` page
/// with a fresh connection ticket for that user in the fragment, never
/// cached; that ticket opens the browser's door. Other pools and other
/// browsers are refused as the files are.
#[tokio::test]
async fn the_portal_opens_a_desktop_in_the_browser() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let broker_url = format!("http://127.0.0.1:{port}");
    let provider = start_provider(
        &broker_url,
        "127.0.0.2",
        json!({"alice": {"preferred_username": "alice@contoso.com", "groups": ["Staff"]}}),
    );
    let app = spawn_broker(
        &dir,
        port,
        &provider.issuer,
        &["--gateway-listen", "127.0.0.1:0"],
    );
    let gateway = app.ready.gateway_addr().to_string();
    let farm = crate::web::CountingHost::start().await;
    crate::web::pool(&app, "farm", true).await;
    crate::web::host(&app, "farm", "f1", &farm.address).await;
    pool(
        &app,
        "others",
        json!({"entitledUsers": ["carol@contoso.com"]}),
    )
    .await;

    let b = browser().await;
    let c = &b.client;
    sign_in(c, &app, "alice").await;
    let links: Vec<(String, String)> = serde_json::from_value(
        js(
            c,
            "return [...document.querySelectorAll('li.pool a.browser')].map(a => [a.href, a.target]);",
            vec![],
        )
        .await,
    )
    .unwrap();
    let href = format!("{broker_url}/portal/pools/farm/web");
    assert_eq!(links, [(href.clone(), "_blank".to_string())]);
    let cookie = session_cookie(c).await.expect("the session cookie");

    let (status, headers, body) = get(&href, Some(&cookie)).await;
    assert_eq!(status, 303, "{body}");
    assert_eq!(headers["cache-control"], "no-store");
    let location = headers["location"].to_str().unwrap();
    let (page, ticket) = crate::web::split(location);
    assert_eq!(page, format!("https://{gateway}/web"));
    assert!(
        ticket.starts_with("dbt1:farm:") && ticket.ends_with(":alice@contoso.com"),
        "{ticket}"
    );
    let _ws = crate::web::knock(&gateway, &ticket).await;
    assert!(
        crate::eventually(crate::PATIENCE, || async { farm.accepted() == 1 }).await,
        "the portal's ticket did not reach the host"
    );
    let log = app
        .ok("GET", "/api/v1/auditLog?hostPool=farm", None, 200)
        .await;
    assert!(
        log["value"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == "GET /portal/pools/farm/web"
                && e["actor"] == "portal:alice@contoso.com"
                && e["after"]["ticketFor"] == "alice@contoso.com"),
        "{log}"
    );

    for (path, cookie, status, want) in [
        ("others", Some(cookie.as_str()), 403, "NotEntitled"),
        ("nowhere", Some(cookie.as_str()), 404, "HostPoolNotFound"),
        ("farm", None, 401, "Unauthorized"),
    ] {
        let (got, _, body) = get(&format!("{broker_url}/portal/pools/{path}/web"), cookie).await;
        assert_eq!(
            (got, code(&body)),
            (status, want.to_string()),
            "{path}: {body}"
        );
    }
}
