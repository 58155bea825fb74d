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
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::{App, TOKEN, free_port, pool_with_hosts};

pub(crate) const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// How long chromedriver may take to listen.
const DRIVER_START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the page may take to show what the test waits for. The console
/// polls every 2 s, so a change shows within about 2 s; the rest is slack
/// for a loaded 2-core CI machine.
pub(crate) const PAGE_TIMEOUT: Duration = Duration::from_secs(20);
/// A laptop screen.
pub(crate) const WINDOW: (u32, u32) = (1366, 900);

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
    browser_with(&[]).await
}

/// A browser started with `extra` command-line flags as well.
pub(crate) async fn browser_with(extra: &[&str]) -> Browser {
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
    let args: Vec<String> = args
        .into_iter()
        .chain(extra.iter().map(|a| a.to_string()))
        .collect();
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
pub(crate) const TEXT_OF: &str =
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
pub(crate) async fn is_shown(c: &Client, css: &str) -> bool {
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

pub(crate) async fn choose(c: &Client, css: &str, value: &str) {
    c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
        .select_by_value(value)
        .await
        .unwrap_or_else(|e| panic!("choosing {value} in {css}: {e}"));
}

/// Navigates within the console by its hash route (no reload).
pub(crate) async fn go(c: &Client, hash: &str) {
    js(c, "location.hash = arguments[0];", vec![json!(hash)]).await;
}

/// The console, told its tab is hidden, asks the API nothing: rather than
/// watching the clock for a few poll intervals, the test moves the page's
/// clock on itself. It fires every poll timer still armed, then fires the
/// poll once more as a timer armed just before the tab was hidden would,
/// and goes on firing whatever poll timers that arms, for several
/// intervals' worth of rounds. None of it may make a request, and no poll
/// may stay armed (an armed one would ask once its time came).
pub(crate) async fn a_hidden_tab_asks_nothing(c: &Client) {
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
pub(crate) async fn sign_in(c: &Client, app: &App) {
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

pub(crate) async fn connect(app: &App, pool: &str, user: &str) -> Value {
    app.ok(
        "POST",
        &format!("/api/v1/hostPools/{pool}/connect"),
        Some(json!({"user": user})),
        200,
    )
    .await
}

/// The pool's algorithm and limit, as the API answers them, are these.
pub(crate) async fn assert_pool_settings(app: &App, pool: &str, lb: &str, limit: u32) {
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
pub(crate) async fn api_refusal(app: &App, method: &str, path: &str, body: Value) -> String {
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
