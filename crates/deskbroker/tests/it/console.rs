//! The web console in a real browser: Debian's `chromium`, headless, driven
//! over WebDriver by `chromedriver` (both installed by
//! `scripts/install-test-deps.sh`), against the real `deskbroker serve`.
//! A missing browser fails these tests: they are never skipped.
//!
//! Screenshots of the main pages are taken on every run; with
//! `DESKBROKER_UPDATE_SCREENSHOTS=1` they are written to `docs/console/`
//! (the ones the README shows), otherwise to a temporary directory.

use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::{App, TOKEN, free_port, pool_with_hosts};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// How long chromedriver may take to listen.
const DRIVER_START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the page may take to show what the test waits for. The console
/// polls every 2 s, so a change shows within about 2 s; the rest is slack
/// for a loaded 2-core CI machine.
const PAGE_TIMEOUT: Duration = Duration::from_secs(20);
/// A laptop screen.
const WINDOW: (u32, u32) = (1366, 900);

/// A headless chromium under its own chromedriver, both killed on drop
/// (also used by the portal's test, `portal.rs`).
pub(crate) struct Browser {
    pub(crate) client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        // chromedriver runs in its own process group with the browsers it
        // started: end the whole group (this test's own processes only).
        kill_group(self.driver.id());
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// SIGKILL to every process of group `pgid` (chromedriver's, made with
/// `process_group(0)`, so it holds only what this test started: the driver
/// and the browsers it launched), found in /proc and signalled by their own
/// positive pids.
///
/// Never `kill -KILL -PGID`: procps-ng 4.0.2 (Debian 12) reads it as
/// `kill(-1, SIGKILL)`, which ends every process on the machine (checked
/// with strace).
fn kill_group(pgid: u32) {
    if pgid <= 1 {
        return; // never the init process's group, nor "every process"
    }
    let members: Vec<String> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            // /proc/PID/stat: "pid (comm) state ppid pgrp …"; comm may hold
            // spaces and parentheses, so read after the last ')'.
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(2))
                    .and_then(|g| g.parse::<u32>().ok())
                    == Some(pgid)
            })
        })
        .map(|pid| pid.to_string())
        .collect();
    if members.is_empty() {
        return;
    }
    let _ = Command::new("kill")
        .args(["-s", "KILL", "--"])
        .args(&members)
        .stderr(Stdio::null())
        .status();
}

pub(crate) async fn browser() -> Browser {
    for bin in [CHROMIUM, CHROMEDRIVER] {
        assert!(
            Path::new(bin).exists(),
            "{bin} is missing: the console tests need Debian's chromium and chromium-driver \
             (bash scripts/install-test-deps.sh installs them)"
        );
    }
    let port = free_port();
    let driver = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromedriver");
    let profile = tempfile::tempdir().expect("profile dir");
    let deadline = Instant::now() + DRIVER_START_TIMEOUT;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "chromedriver did not listen on {port} within {DRIVER_START_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let args = vec![
        "--headless".to_string(),
        "--no-sandbox".into(),
        "--disable-gpu".into(),
        "--disable-quic".into(),
        "--no-first-run".into(),
        "--disable-background-networking".into(),
        "--disable-component-update".into(),
        "--disable-sync".into(),
        "--disable-dev-shm-usage".into(),
        format!("--window-size={},{}", WINDOW.0, WINDOW.1),
        format!("--user-data-dir={}", profile.path().display()),
    ];
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({"binary": CHROMIUM, "args": args}),
    );
    let browser = Browser {
        // Replaced at once below; a Browser owns the driver from here on so
        // that a failure to connect still ends it.
        client: match ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
        {
            Ok(c) => c,
            Err(e) => {
                kill_group(driver.id());
                panic!("chromedriver could not start chromium: {e}");
            }
        },
        driver,
        _profile: profile,
    };
    browser
        .client
        .set_window_size(WINDOW.0, WINDOW.1)
        .await
        .expect("window size");
    browser
}

/// Runs `script` in the page and answers its value.
pub(crate) async fn js(c: &Client, script: &str, args: Vec<Value>) -> Value {
    c.execute(script, args)
        .await
        .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
}

/// Finds the first element matching `arguments[0]`; answers its text, or null.
const TEXT_OF: &str =
    "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;";

/// The text of the first element matching `css`, or None.
pub(crate) async fn text(c: &Client, css: &str) -> Option<String> {
    js(c, TEXT_OF, vec![json!(css)])
        .await
        .as_str()
        .map(str::to_string)
}

/// Runs `script` until its value satisfies `ok`; answers that value, or
/// fails naming `what` and the last value seen.
pub(crate) async fn wait_value(
    c: &Client,
    script: &str,
    args: Vec<Value>,
    what: &str,
    ok: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + PAGE_TIMEOUT;
    loop {
        let v = js(c, script, args.clone()).await;
        if ok(&v) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "the page did not show {what} within {PAGE_TIMEOUT:?} (last seen: {v})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the text of `css` satisfies `ok`; answers it.
pub(crate) async fn wait_text(
    c: &Client,
    css: &str,
    what: &str,
    ok: impl Fn(&str) -> bool,
) -> String {
    let what = format!("{what} in {css}");
    let v = wait_value(c, TEXT_OF, vec![json!(css)], &what, |v| {
        v.as_str().is_some_and(&ok)
    })
    .await;
    v.as_str().unwrap_or_default().to_string()
}

/// Waits until `script` answers true.
pub(crate) async fn wait_js(c: &Client, script: &str, what: &str) {
    wait_value(c, script, vec![], what, |v| v.as_bool() == Some(true)).await;
}

/// Whether the first element matching `css` takes up room on the page
/// (false for `display: none`, which the `hidden` attribute must give).
async fn is_shown(c: &Client, css: &str) -> bool {
    js(
        c,
        "const e = document.querySelector(arguments[0]); \
         return !!e && e.getClientRects().length > 0;",
        vec![json!(css)],
    )
    .await
    .as_bool()
    .unwrap_or(false)
}

pub(crate) async fn count(c: &Client, css: &str) -> u64 {
    js(
        c,
        "return document.querySelectorAll(arguments[0]).length;",
        vec![json!(css)],
    )
    .await
    .as_u64()
    .unwrap_or(0)
}

pub(crate) async fn click(c: &Client, css: &str) {
    c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("clicking {css}: {e}"));
}

pub(crate) async fn type_into(c: &Client, css: &str, value: &str) {
    let e = c
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css} on the page: {e}"));
    e.clear().await.expect("clear");
    if !value.is_empty() {
        e.send_keys(value).await.expect("type");
    }
}

async fn choose(c: &Client, css: &str, value: &str) {
    c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
        .select_by_value(value)
        .await
        .unwrap_or_else(|e| panic!("choosing {value} in {css}: {e}"));
}

/// Navigates within the console by its hash route (no reload).
async fn go(c: &Client, hash: &str) {
    js(c, "location.hash = arguments[0];", vec![json!(hash)]).await;
}

/// The console, told its tab is hidden, asks the API nothing: rather than
/// watching the clock for a few poll intervals, the test moves the page's
/// clock on itself. It fires every poll timer still armed, then fires the
/// poll once more as a timer armed just before the tab was hidden would,
/// and goes on firing whatever poll timers that arms, for several
/// intervals' worth of rounds. None of it may make a request, and no poll
/// may stay armed (an armed one would ask once its time came).
async fn a_hidden_tab_asks_nothing(c: &Client) {
    let fired = js(
        c,
        "return (async () => {
           if (typeof window.__tick !== 'function') return 'the console never armed a poll timer';
           const before = window.__calls.length;
           let due = [window.__tick];
           let rounds = 0;
           for (; due.length > 0 || rounds === 0; rounds++) {
             if (rounds === 5) return 'a hidden tab keeps arming poll timers';
             due.push(...window.__polls.values());
             for (const id of [...window.__polls.keys()]) clearTimeout(id);
             await Promise.all(due.map((tick) => tick()));
             due = [...window.__polls.values()];
           }
           const asked = window.__calls.slice(before).map((call) => call.url);
           return asked.length === 0 ? 'nothing asked' : 'asked ' + asked.join(', ');
         })();",
        vec![],
    )
    .await;
    assert_eq!(fired, json!("nothing asked"), "a hidden tab polled");
}

/// Opens the console and signs in with the admin token through the form;
/// first makes sure a wrong token is refused with the API's own message.
async fn sign_in(c: &Client, app: &App) {
    c.goto(&format!("{}/", app.url))
        .await
        .expect("open the console");
    // Record every request the page makes from now on (see
    // `only_the_public_api_was_called`), and the poll timers it arms (the
    // console's function `tick`, armed with setTimeout): pending until they
    // fire or are cleared, so a test can fire them itself (see
    // `a_hidden_tab_asks_nothing`).
    js(
        c,
        "window.__polls = new Map();
         const realSet = window.setTimeout, realClear = window.clearTimeout;
         window.setTimeout = (fn, delay, ...args) => {
           if (typeof fn !== 'function' || fn.name !== 'tick') return realSet(fn, delay, ...args);
           window.__tick = fn;
           const id = realSet(() => { window.__polls.delete(id); fn(...args); }, delay);
           window.__polls.set(id, fn);
           return id;
         };
         window.clearTimeout = (id) => { window.__polls.delete(id); realClear(id); };
         window.__calls = [];
         const real = window.fetch;
         window.fetch = (url, init = {}) => {
           const auth = (init.headers || {}).Authorization || '';
           window.__calls.push({method: init.method || 'GET', url: String(url),
                                bearer: auth.startsWith('Bearer ')});
           return real(url, init);
         };
         performance.setResourceTimingBufferSize(100000);",
        vec![],
    )
    .await;
    type_into(c, "#token", "not-the-token").await;
    click(c, "#signin button[type=submit]").await;
    wait_text(c, "#signin-error", "the refusal of a wrong token", |t| {
        t.starts_with("Unauthorized: ")
    })
    .await;
    // Signed out: nothing to sign out of, nowhere to navigate.
    assert!(
        !is_shown(c, "#signout").await,
        "Sign out shown while signed out"
    );
    assert!(
        !is_shown(c, "#nav").await,
        "the navigation shown while signed out"
    );
    type_into(c, "#token", TOKEN).await;
    click(c, "#signin button[type=submit]").await;
    wait_js(
        c,
        "return !!document.querySelector('#pools-table');",
        "the pools page after sign-in",
    )
    .await;
    assert!(is_shown(c, "#signout").await, "no Sign out once signed in");
    assert!(is_shown(c, "#nav").await, "no navigation once signed in");
}

pub(crate) fn screenshot_dir() -> (PathBuf, Option<tempfile::TempDir>) {
    if std::env::var_os("DESKBROKER_UPDATE_SCREENSHOTS").is_some() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/console");
        std::fs::create_dir_all(&dir).expect("docs/console");
        (dir, None)
    } else {
        let t = tempfile::tempdir().expect("temp dir");
        (t.path().to_path_buf(), Some(t))
    }
}

pub(crate) async fn screenshot(c: &Client, dir: &Path, name: &str) {
    // From the top of the page, once it is painted there.
    js(
        c,
        "window.scrollTo(0, 0);
         return new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));",
        vec![],
    )
    .await;
    let png = c.screenshot().await.expect("screenshot");
    assert!(
        png.len() > 10_000 && png.starts_with(b"\x89PNG"),
        "{name}: not a real screenshot"
    );
    std::fs::write(dir.join(name), png).expect("write screenshot");
}

async fn connect(app: &App, pool: &str, user: &str) -> Value {
    app.ok(
        "POST",
        &format!("/api/v1/hostPools/{pool}/connect"),
        Some(json!({"user": user})),
        200,
    )
    .await
}

/// The pool's algorithm and limit, as the API answers them, are these.
async fn assert_pool_settings(app: &App, pool: &str, lb: &str, limit: u32) {
    let p = app
        .ok("GET", &format!("/api/v1/hostPools/{pool}"), None, 200)
        .await;
    assert_eq!(
        (&p["loadBalancerType"], &p["maxSessionLimit"]),
        (&json!(lb), &json!(limit)),
        "{p}"
    );
}

/// The API's own one-line refusal ("Code: message") of `body` on `path`.
async fn api_refusal(app: &App, method: &str, path: &str, body: Value) -> String {
    let (status, v) = app.call(method, path, Some(body)).await;
    assert!(status >= 400, "{method} {path} was not refused: {v}");
    format!(
        "{}: {}",
        v["error"]["code"].as_str().expect("code"),
        v["error"]["message"].as_str().expect("message")
    )
}

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

/// The issue's whole story in the browser: sign in, create a pool, add
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
            Some(json!({"cpuPercent": cpu, "memoryPercent": 40.0})),
            200,
        )
        .await;
    }
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

/// Signs in through the form with `token` (any credential), and waits for
/// the pools page.
async fn sign_in_as(c: &Client, app: &App, token: &str) {
    c.goto(&format!("{}/", app.url))
        .await
        .expect("open the console");
    type_into(c, "#token", token).await;
    click(c, "#signin button[type=submit]").await;
    wait_js(
        c,
        "return !!document.querySelector('#pools-table');",
        "the pools page after sign-in",
    )
    .await;
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
