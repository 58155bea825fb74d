//! The web console in a real browser, for the tests: Debian's `chromium`,
//! headless, driven over WebDriver by `chromedriver` (both installed by
//! `scripts/install-test-deps.sh`), its process group killed when dropped;
//! reading, clicking and typing with a deadline; signing in; screenshots.
//! A missing browser fails the test that wanted it: it is never skipped.
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::{App, TOKEN, free_port};

pub const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// How long chromedriver may take to listen.
const DRIVER_START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the page may take to show what the test waits for. The console
/// polls every 2 s, so a change shows within about 2 s; the rest is slack
/// for a loaded 2-core CI machine.
pub const PAGE_TIMEOUT: Duration = Duration::from_secs(20);
/// A laptop screen.
pub const WINDOW: (u32, u32) = (1366, 900);

/// A headless chromium under its own chromedriver, both killed on drop
/// (also used by the portal's test, `portal.rs`).
pub struct Browser {
    pub client: Client,
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
pub fn kill_group(pgid: u32) {
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

pub async fn browser() -> Browser {
    browser_with(&[]).await
}

/// A browser started with `extra` command-line flags as well.
pub async fn browser_with(extra: &[&str]) -> Browser {
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
    let listening = crate::eventually(DRIVER_START_TIMEOUT, || {
        std::future::ready(TcpStream::connect(("127.0.0.1", port)).is_ok())
    })
    .await;
    assert!(
        listening,
        "chromedriver did not listen on {port} within {DRIVER_START_TIMEOUT:?}"
    );
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
pub async fn js(c: &Client, script: &str, args: Vec<Value>) -> Value {
    c.execute(script, args)
        .await
        .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
}

/// Finds the first element matching `arguments[0]`; answers its text, or null.
pub const TEXT_OF: &str =
    "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;";

/// The text of the first element matching `css`, or None.
pub async fn text(c: &Client, css: &str) -> Option<String> {
    js(c, TEXT_OF, vec![json!(css)])
        .await
        .as_str()
        .map(str::to_string)
}

/// Runs `script` until its value satisfies `ok`; answers that value, or
/// fails naming `what` and the last value seen.
pub async fn wait_value(
    c: &Client,
    script: &str,
    args: Vec<Value>,
    what: &str,
    ok: impl Fn(&Value) -> bool,
) -> Value {
    crate::eventually(PAGE_TIMEOUT, || async {
        let v = js(c, script, args.clone()).await;
        if ok(&v) { Ok(v) } else { Err(v) }
    })
    .await
    .unwrap_or_else(|v| {
        panic!("the page did not show {what} within {PAGE_TIMEOUT:?} (last seen: {v})")
    })
}

/// Waits until the text of `css` satisfies `ok`; answers it.
pub async fn wait_text(c: &Client, css: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let what = format!("{what} in {css}");
    let v = wait_value(c, TEXT_OF, vec![json!(css)], &what, |v| {
        v.as_str().is_some_and(&ok)
    })
    .await;
    v.as_str().unwrap_or_default().to_string()
}

/// Waits until `script` answers true.
pub async fn wait_js(c: &Client, script: &str, what: &str) {
    wait_value(c, script, vec![], what, |v| v.as_bool() == Some(true)).await;
}

/// Whether the first element matching `css` takes up room on the page
/// (false for `display: none`, which the `hidden` attribute must give).
pub async fn is_shown(c: &Client, css: &str) -> bool {
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

pub async fn count(c: &Client, css: &str) -> u64 {
    js(
        c,
        "return document.querySelectorAll(arguments[0]).length;",
        vec![json!(css)],
    )
    .await
    .as_u64()
    .unwrap_or(0)
}

pub async fn click(c: &Client, css: &str) {
    c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("clicking {css}: {e}"));
}

pub async fn type_into(c: &Client, css: &str, value: &str) {
    let e = c
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css} on the page: {e}"));
    e.clear().await.expect("clear");
    if !value.is_empty() {
        e.send_keys(value).await.expect("type");
    }
}

pub async fn choose(c: &Client, css: &str, value: &str) {
    c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
        .select_by_value(value)
        .await
        .unwrap_or_else(|e| panic!("choosing {value} in {css}: {e}"));
}

/// Navigates within the console by its hash route (no reload).
pub async fn go(c: &Client, hash: &str) {
    js(c, "location.hash = arguments[0];", vec![json!(hash)]).await;
}

/// The console, told its tab is hidden, asks the API nothing: rather than
/// watching the clock for a few poll intervals, the test moves the page's
/// clock on itself. It fires every poll timer still armed, then fires the
/// poll once more as a timer armed just before the tab was hidden would,
/// and goes on firing whatever poll timers that arms, for several
/// intervals' worth of rounds. None of it may make a request, and no poll
/// may stay armed (an armed one would ask once its time came).
pub async fn a_hidden_tab_asks_nothing(c: &Client) {
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
pub async fn sign_in(c: &Client, app: &App) {
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

pub fn screenshot_dir() -> (PathBuf, Option<tempfile::TempDir>) {
    if std::env::var_os("DESKBROKER_UPDATE_SCREENSHOTS").is_some() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/console");
        std::fs::create_dir_all(&dir).expect("docs/console");
        (dir, None)
    } else {
        let t = tempfile::tempdir().expect("temp dir");
        (t.path().to_path_buf(), Some(t))
    }
}

pub async fn screenshot(c: &Client, dir: &Path, name: &str) {
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

pub async fn connect(app: &App, pool: &str, user: &str) -> Value {
    app.ok(
        "POST",
        &format!("/api/v1/hostPools/{pool}/connect"),
        Some(json!({"user": user})),
        200,
    )
    .await
}

/// The pool's algorithm and limit, as the API answers them, are these.
pub async fn assert_pool_settings(app: &App, pool: &str, lb: &str, limit: u32) {
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
pub async fn api_refusal(app: &App, method: &str, path: &str, body: Value) -> String {
    let (status, v) = app.call(method, path, Some(body)).await;
    assert!(status >= 400, "{method} {path} was not refused: {v}");
    format!(
        "{}: {}",
        v["error"]["code"].as_str().expect("code"),
        v["error"]["message"].as_str().expect("message")
    )
}

/// Signs in through the form with `token` (any credential), and waits for
/// the pools page.
pub async fn sign_in_as(c: &Client, app: &App, token: &str) {
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
