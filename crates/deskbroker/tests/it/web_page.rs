//! The browser's page (rule WEB1) end to end: headless Chromium opens
//! `https://gateway/web#ticket=…` served by the real `deskbroker serve`,
//! the page's WebAssembly RDP client connects through `/web/rdp` to a real
//! xrdp, and the test reads the canvas back to see xrdp's login screen
//! drawn square (a client that ignores the bitmaps' row stride draws it
//! sheared). A changed ticket reaches no host, and the page says why.
//! A user then logs on through the page to a real desktop (xrdp's session
//! manager, xorgxrdp and twm), and the desktop follows the tab's size.

use fantoccini::Client;
use serde_json::Value;

use crate::browser::{browser_with, wait_text};
use crate::desktop::{DESKTOP_RGB, DesktopUser, NlaHost, Sesman, USER};
use crate::web::{host, pool, session_id, ticket};
use crate::{App, PATIENCE, Xrdp, require, wait_session};

/// Reads the component's canvas: its size, its four corners, and for every
/// row the first and last pixel that differs from the top-left corner's
/// colour (-1 when none does).
const PROBE: &str = r#"
const el = document.querySelector("iron-remote-desktop");
const cv = el && el.shadowRoot && el.shadowRoot.querySelector("canvas");
if (!cv || cv.width === 0 || cv.height === 0) return null;
const w = cv.width, h = cv.height;
const d = cv.getContext("2d").getImageData(0, 0, w, h).data;
const px = (x, y) => { const i = (y * w + x) * 4; return [d[i], d[i + 1], d[i + 2], d[i + 3]]; };
const rows = [];
for (let y = 0; y < h; y++) {
  let l = -1, r = -1;
  for (let x = 0; x < w; x++) {
    const i = (y * w + x) * 4;
    if (d[i] !== d[0] || d[i + 1] !== d[1] || d[i + 2] !== d[2] || d[i + 3] !== d[3]) {
      if (l < 0) l = x;
      r = x;
    }
  }
  rows.push([l, r]);
}
return { w, h, corners: [px(0, 0), px(w - 1, 0), px(0, h - 1), px(w - 1, h - 1)], rows };
"#;

/// Waits (in the page) until the canvas holds a drawn pixel; answers the
/// page's clock then (milliseconds since the page's navigation began).
const FIRST_FRAME: &str = r#"
const done = arguments[arguments.length - 1];
function tick() {
  const el = document.querySelector("iron-remote-desktop");
  const cv = el && el.shadowRoot && el.shadowRoot.querySelector("canvas");
  if (cv && cv.width > 0 && cv.height > 0) {
    const d = cv.getContext("2d").getImageData(0, 0, cv.width, cv.height).data;
    for (let i = 3; i < d.length; i += 4) {
      if (d[i] !== 0) { done(performance.now()); return; }
    }
  }
  setTimeout(tick, 5);
}
tick();
"#;

/// How many pixels of the canvas are black (xrdp's text is).
const BLACK_PIXELS: &str = r#"
const el = document.querySelector("iron-remote-desktop");
const cv = el && el.shadowRoot && el.shadowRoot.querySelector("canvas");
if (!cv) return -1;
const d = cv.getContext("2d").getImageData(0, 0, cv.width, cv.height).data;
let n = 0;
for (let i = 0; i < d.length; i += 4) if (d[i] === 0 && d[i + 1] === 0 && d[i + 2] === 0) n++;
return n;
"#;

/// The canvas's size, and the share of its pixels that are within 8 of
/// the colour in `arguments[0..3]` on each channel.
const COLOUR_SHARE: &str = r#"
const el = document.querySelector("iron-remote-desktop");
const cv = el && el.shadowRoot && el.shadowRoot.querySelector("canvas");
if (!cv || cv.width === 0 || cv.height === 0) return null;
const d = cv.getContext("2d").getImageData(0, 0, cv.width, cv.height).data;
const [r, g, b] = [arguments[0], arguments[1], arguments[2]];
let n = 0;
for (let i = 0; i < d.length; i += 4) {
  if (Math.abs(d[i] - r) <= 8 && Math.abs(d[i + 1] - g) <= 8 && Math.abs(d[i + 2] - b) <= 8) n++;
}
return { w: cv.width, h: cv.height, share: n / (cv.width * cv.height), inner: [window.innerWidth, window.innerHeight] };
"#;

/// What the probe shows of xrdp's login screen.
#[derive(Debug)]
struct Screen {
    width: i64,
    height: i64,
    /// The background, the same in all four corners.
    background: Option<Vec<i64>>,
    /// The rows where something else is drawn: the first and the last.
    band: Option<(usize, usize)>,
    /// Over those rows, the distinct left and right edges of the drawing.
    lefts: Vec<i64>,
    rights: Vec<i64>,
}

fn screen(probe: &Value) -> Option<Screen> {
    let width = probe["w"].as_i64()?;
    let height = probe["h"].as_i64()?;
    let corners: Vec<Vec<i64>> = probe["corners"]
        .as_array()?
        .iter()
        .map(|c| {
            c.as_array()
                .map(|v| v.iter().filter_map(Value::as_i64).collect())
                .unwrap_or_default()
        })
        .collect();
    let background = corners
        .windows(2)
        .all(|w| w[0] == w[1])
        .then(|| corners[0].clone());
    let rows: Vec<(i64, i64)> = probe["rows"]
        .as_array()?
        .iter()
        .map(|r| (r[0].as_i64().unwrap_or(-1), r[1].as_i64().unwrap_or(-1)))
        .collect();
    let drawn: Vec<usize> = (0..rows.len()).filter(|&y| rows[y].0 >= 0).collect();
    let band = drawn.first().copied().zip(drawn.last().copied());
    let mut lefts = Vec::new();
    let mut rights = Vec::new();
    if let Some((top, bottom)) = band {
        for &(l, r) in &rows[top..=bottom] {
            if !lefts.contains(&l) {
                lefts.push(l);
            }
            if !rights.contains(&r) {
                rights.push(r);
            }
        }
    }
    Some(Screen {
        width,
        height,
        background,
        band,
        lefts,
        rights,
    })
}

/// xrdp's login screen as it must look: one background colour around a
/// single dialog that is a rectangle (every row of it starts and ends at
/// the same columns: sheared rows would drift), centred, of a dialog's size.
fn is_login_screen(s: &Screen) -> bool {
    let Some((top, bottom)) = s.band else {
        return false;
    };
    let (Some(bg), [left], [right]) = (&s.background, s.lefts.as_slice(), s.rights.as_slice())
    else {
        return false;
    };
    let dialog_w = right - left + 1;
    let dialog_h = (bottom - top + 1) as i64;
    let centre = (left + right) / 2;
    bg.get(3) == Some(&255)
        && (150..s.width).contains(&dialog_w)
        && (100..s.height).contains(&dialog_h)
        && (centre - s.width / 2).abs() <= 2
}

async fn probe(c: &Client) -> Option<Screen> {
    let v = c
        .execute(PROBE, vec![])
        .await
        .unwrap_or_else(|e| panic!("probe failed: {e}"));
    screen(&v)
}

/// `ticket` as a fragment parameter's value (percent-encoded).
fn fragment(ticket: &str) -> String {
    ticket
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test]
async fn the_page_draws_the_hosts_login_screen_square_and_says_why_a_changed_ticket_is_refused() {
    let xrdp = require("xrdp", "xrdp");
    let openssl = require("openssl", "openssl");
    let dir = tempfile::tempdir().expect("tempdir");
    let h1 = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp"));
    let (app, gateway) = App::spawn_with_rd_gateway(&dir.path().join("data"), &[]);
    pool(&app, "farm", true).await;
    host(&app, "farm", "h1", &h1.address).await;
    let good = ticket(&app, "farm", "alice").await;

    // The gateway's certificate is the data dir's self-signed one.
    let b = browser_with(&["--ignore-certificate-errors"]).await;
    let c = &b.client;
    c.goto(&format!("https://{gateway}/web#ticket={}", fragment(&good)))
        .await
        .expect("open the page");
    let first_frame = c
        .execute_async(FIRST_FRAME, vec![])
        .await
        .unwrap_or_else(|e| panic!("no frame drawn: {e}; xrdp's log:\n{}", h1.log()));
    eprintln!(
        "web page: first frame {:.0} ms after the page's navigation began",
        first_frame.as_f64().unwrap_or(f64::NAN)
    );
    // The ticket left the address bar.
    let url = c.current_url().await.expect("url");
    assert_eq!(url.fragment(), None, "{url}");

    // The login screen, drawn whole and square.
    let (drawn, last) = match crate::eventually(PATIENCE, || async {
        let s = probe(c).await;
        if s.as_ref().is_some_and(is_login_screen) {
            Ok(s)
        } else {
            Err(s)
        }
    })
    .await
    {
        Ok(s) => (true, s),
        Err(s) => (false, s),
    };
    assert!(
        drawn,
        "xrdp's login screen is not drawn square; the canvas: {:?}; xrdp's log:\n{}",
        last.map(|s| (s.width, s.height, s.background, s.band, s.lefts, s.rights)),
        h1.log()
    );
    let s = last.expect("a screen");
    eprintln!(
        "web page: {}x{} desktop, background {:?}, dialog rows {:?}, columns {:?}..{:?}",
        s.width, s.height, s.background, s.band, s.lefts, s.rights
    );
    wait_text(
        c,
        "#status[data-state=connected]",
        "the connected state",
        |_| true,
    )
    .await;

    // Keys reach the host: typed into xrdp's user name field, they are
    // drawn back in black.
    let black = |c: Client| async move {
        c.execute(BLACK_PIXELS, vec![])
            .await
            .expect("count")
            .as_i64()
            .unwrap_or(-1)
    };
    let before = black(c.clone()).await;
    c.execute(
        "document.querySelector('iron-remote-desktop').shadowRoot.querySelector('canvas').focus();",
        vec![],
    )
    .await
    .expect("focus the desktop");
    c.active_element()
        .await
        .expect("the focused element")
        .send_keys("alicealice")
        .await
        .expect("type");
    let typed = crate::eventually(PATIENCE, || {
        let c = c.clone();
        async move { black(c).await > before + 60 }
    })
    .await;
    assert!(
        typed,
        "the typed name is not drawn: {before} black pixels before, {} after",
        black(c.clone()).await
    );
    eprintln!(
        "web page: black pixels {before} before typing, {} after",
        black(c.clone()).await
    );
    wait_session(&app, "farm", "alice", "h1", "Active").await;

    // The page's policy, as the browser received it.
    let csp = c
        .execute_async(
            "const done = arguments[arguments.length - 1];\
             fetch('/web').then(r => done(r.headers.get('content-security-policy')));",
            vec![],
        )
        .await
        .expect("fetch the page");
    let csp = csp.as_str().unwrap_or_default();
    assert!(
        csp.contains("script-src 'self' 'wasm-unsafe-eval'") && csp.contains("connect-src 'self'"),
        "{csp}"
    );

    // A smaller tab: the desktop is scaled to fit it.
    c.set_window_size(900, 600).await.expect("resize");
    let fits = crate::eventually(PATIENCE, || {
        let c = c.clone();
        async move {
            let v = c
                .execute(
                    "const cv = document.querySelector('iron-remote-desktop').shadowRoot.querySelector('canvas');\
                     const r = cv.getBoundingClientRect();\
                     return r.width > 0 && r.right <= window.innerWidth + 1 && r.bottom <= window.innerHeight + 1 && cv.width > r.width;",
                    vec![],
                )
                .await
                .expect("measure");
            v.as_bool() == Some(true)
        }
    })
    .await;
    assert!(fits, "the desktop is not scaled to the smaller tab");

    // Leaving the page closes the socket: the session is Disconnected.
    c.goto("about:blank").await.expect("leave the page");
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;

    // The user's next tab, with a fresh link (the API's webUrl, the
    // address the portal's "Open in the browser" sends a browser to), goes
    // back to that session (S1), and leaving it disconnects it again.
    let (id, _) = session_id(&app, "farm", "alice").await;
    let again = app
        .ok("GET", "/api/v1/hostPools/farm/webUrl?user=alice", None, 200)
        .await;
    let again = again["url"].as_str().expect("a url");
    assert!(
        again.starts_with(&format!("https://{gateway}/web#ticket=")),
        "{again}"
    );
    c.goto(again).await.expect("open the page again");
    wait_text(
        c,
        "#status[data-state=connected]",
        "connected again",
        |_| true,
    )
    .await;
    wait_session(&app, "farm", "alice", "h1", "Active").await;
    assert_eq!(
        session_id(&app, "farm", "alice").await.0,
        id,
        "a new session"
    );
    c.goto("about:blank").await.expect("leave the page");
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;

    // A changed ticket: refused, no new connection reaches the host, and
    // the page says why.
    let before = h1.tls_connections();
    let mut changed = good.clone().into_bytes();
    let mac_at = good.match_indices(':').nth(2).expect("fields").0 + 1;
    changed[mac_at] = if changed[mac_at] == b'A' { b'B' } else { b'A' };
    let changed = String::from_utf8(changed).expect("utf-8");
    c.goto(&format!(
        "https://{gateway}/web#ticket={}",
        fragment(&changed)
    ))
    .await
    .expect("open the page");
    let said = wait_text(c, "#status[data-state=refused]", "the refusal", |t| {
        !t.is_empty()
    })
    .await;
    // The user reads what happened and what to do about it.
    assert!(
        said.contains("refused") && said.contains("Ask for a new link"),
        "{said}"
    );
    assert_eq!(
        h1.tls_connections(),
        before,
        "the changed ticket reached the host"
    );

    // An expired ticket, signed by this broker: the same sentence, which
    // names expiry, and no host reached.
    let expired =
        api::ticket::TicketKey::derive(&crate::signing_secret(&dir.path().join("data")).await)
            .issue("farm", "alice", 1_000_000_000)
            .expect("fits");
    c.goto("about:blank").await.expect("leave the page");
    c.goto(&format!(
        "https://{gateway}/web#ticket={}",
        fragment(&expired)
    ))
    .await
    .expect("open the page");
    let said = wait_text(c, "#status[data-state=refused]", "the expired link", |t| {
        !t.is_empty()
    })
    .await;
    assert!(
        said.contains("expired") && said.contains("Ask for a new link"),
        "{said}"
    );
    assert_eq!(
        h1.tls_connections(),
        before,
        "the expired ticket reached the host"
    );

    // A pool whose only host cannot be reached: the gateway answers 502
    // (every host tried could not be reached, R5); the page says so and
    // offers to reconnect, which tries again.
    let dead = tokio::net::TcpSocket::new_v4().expect("socket");
    dead.bind(([127, 0, 0, 1], 0).into()).expect("bind");
    pool(&app, "dead", true).await;
    host(
        &app,
        "dead",
        "d1",
        &dead.local_addr().expect("addr").to_string(),
    )
    .await;
    let lost = ticket(&app, "dead", "alice").await;
    c.goto(&format!("https://{gateway}/web#ticket={}", fragment(&lost)))
        .await
        .expect("open the page");
    let said = wait_text(c, "#status", "a failure", |t| {
        !t.starts_with("Loading") && !t.starts_with("Connecting")
    })
    .await;
    assert!(
        said.starts_with("The desktop's host cannot be reached"),
        "{said}"
    );
    let button = c
        .find(fantoccini::Locator::Css("#reconnect"))
        .await
        .expect("the reconnect button");
    assert!(button.is_displayed().await.expect("shown"));
    // Marked, so that only the retry's own answer can replace the mark.
    c.execute(
        "document.getElementById('status').dataset.state = 'before-retry';",
        vec![],
    )
    .await
    .expect("mark");
    button.click().await.expect("reconnect");
    wait_text(
        c,
        "#status[data-state=unreachable]",
        "the retry's answer",
        |t| t.starts_with("The desktop's host cannot be reached"),
    )
    .await;

    // No ticket at all: the page says so and opens no socket.
    c.goto(&format!("https://{gateway}/web"))
        .await
        .expect("open the page");
    wait_text(c, "#status[data-state=no-ticket]", "no ticket", |t| {
        t.contains("no connection ticket")
    })
    .await;
    assert_eq!(h1.tls_connections(), before);
}

/// The canvas's size and the share of it painted the test user's desktop
/// colour, with the tab's inner size.
async fn desktop_share(c: &Client) -> Option<(i64, i64, f64, (i64, i64))> {
    let [r, g, b] = DESKTOP_RGB;
    let v = c
        .execute(COLOUR_SHARE, vec![r.into(), g.into(), b.into()])
        .await
        .unwrap_or_else(|e| panic!("probe failed: {e}"));
    Some((
        v["w"].as_i64()?,
        v["h"].as_i64()?,
        v["share"].as_f64()?,
        (v["inner"][0].as_i64()?, v["inner"][1].as_i64()?),
    ))
}

/// A broker with the browser's door (its data under `dir`), a pool `farm`
/// of one host, and the address that opens the pool's desktop for alice.
async fn one_host_pool(dir: &std::path::Path, name: &str, address: &str) -> (crate::App, String) {
    let (app, _gateway) = App::spawn_with_rd_gateway(&dir.join("data"), &[]);
    pool(&app, "farm", true).await;
    host(&app, "farm", name, address).await;
    let link = app
        .ok("GET", "/api/v1/hostPools/farm/webUrl?user=alice", None, 200)
        .await;
    let link = link["url"].as_str().expect("a url").to_string();
    (app, link)
}

/// What the page's status line says, and its state.
async fn page_status(c: &Client) -> Value {
    c.execute(
        "const s = document.getElementById('status'); return [s.dataset.state, s.textContent];",
        vec![],
    )
    .await
    .unwrap_or_default()
}

#[tokio::test]
async fn a_user_logs_on_through_the_page_to_a_desktop_that_follows_the_tabs_size() {
    let xrdp = require("xrdp", "xrdp");
    let openssl = require("openssl", "openssl");
    let dir = tempfile::tempdir().expect("tempdir");
    let user = DesktopUser::prepare();
    let sesman = Sesman::start(&dir.path().join("sesman"));
    let h1 = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp"));
    let (app, link) = one_host_pool(dir.path(), "h1", &h1.address).await;
    let b = browser_with(&["--ignore-certificate-errors"]).await;
    let c = &b.client;
    c.set_window_size(1100, 800).await.expect("size the tab");
    c.goto(&link).await.expect("open the page");
    let login = crate::eventually(PATIENCE, || async {
        probe(c).await.as_ref().is_some_and(is_login_screen)
    })
    .await;
    assert!(login, "no login screen; xrdp's log:\n{}", h1.log());

    // The user name, a tab to the password field, the password, Enter.
    c.execute(
        "document.querySelector('iron-remote-desktop').shadowRoot.querySelector('canvas').focus();",
        vec![],
    )
    .await
    .expect("focus the desktop");
    let tab = char::from(fantoccini::key::Key::Tab);
    let enter = char::from(fantoccini::key::Key::Enter);
    c.active_element()
        .await
        .expect("the focused element")
        .send_keys(&format!("{USER}{tab}{}{enter}", user.password))
        .await
        .expect("type");

    // The desktop: the user's root window fills the canvas.
    let desktop = crate::eventually(PATIENCE, || async {
        desktop_share(c)
            .await
            .is_some_and(|(_, _, share, _)| share > 0.9)
    })
    .await;
    assert!(
        desktop,
        "no desktop drawn after the logon: {:?}; xrdp's log:\n{}\nsesman's log:\n{}",
        desktop_share(c).await,
        h1.log(),
        sesman.log()
    );
    let log = h1.log();
    assert!(
        log.contains(&format!("login successful for user {USER}")),
        "xrdp's log has no logon:\n{log}"
    );
    let (w, h, share, (iw, ih)) = desktop_share(c).await.expect("the desktop");
    eprintln!(
        "web page: logged on, a {w}x{h} desktop ({:.1}% its colour) in a {iw}x{ih} tab",
        share * 100.0
    );
    wait_session(&app, "farm", "alice", "h1", "Active").await;

    // A smaller tab: the host is asked for a desktop of the tab's size and
    // draws it (an even width, as the display control channel requires).
    c.set_window_size(900, 640).await.expect("resize the tab");
    let followed = crate::eventually(PATIENCE, || async {
        desktop_share(c)
            .await
            .is_some_and(|(w, h, share, (iw, ih))| {
                w == iw - iw % 2 && h == ih && (iw, ih) != (0, 0) && share > 0.9
            })
    })
    .await;
    assert!(
        followed,
        "the desktop did not follow the tab's size: {:?}; the page says {:?}; xrdp's log:\n{}",
        desktop_share(c).await,
        page_status(c).await,
        h1.log()
    );
    let (w, h, _, (iw, ih)) = desktop_share(c).await.expect("the desktop");
    eprintln!("web page: the tab became {iw}x{ih}, the desktop {w}x{h}");

    // Leaving the page: Disconnected, the desktop kept for the user.
    c.goto("about:blank").await.expect("leave the page");
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;
}

/// Fills the page's credentials form and submits it.
async fn sign_in(c: &Client, user: &str, password: &str) {
    for (field, value) in [("#user", user), ("#password", password)] {
        let input = c
            .find(fantoccini::Locator::Css(field))
            .await
            .expect("the field");
        input.clear().await.expect("clear");
        input.send_keys(value).await.expect("type");
    }
    c.find(fantoccini::Locator::Css("#sign-in"))
        .await
        .expect("the button")
        .click()
        .await
        .expect("submit");
}

#[tokio::test]
async fn a_host_that_requires_nla_gets_the_users_credentials_through_credssp() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nla = NlaHost::start(&dir.path().join("nla"));
    let (app, link) = one_host_pool(dir.path(), "n1", &nla.address).await;
    let b = browser_with(&["--ignore-certificate-errors"]).await;
    let c = &b.client;
    c.goto(&link).await.expect("open the page");
    // The host refuses a connection without CredSSP: the page asks.
    let said = wait_text(c, "#status[data-state=credentials]", "the question", |t| {
        !t.is_empty()
    })
    .await;
    assert!(said.contains("user name and password"), "{said}");

    // A wrong password: the host refuses it, the page asks again.
    sign_in(c, &nla.user, "not-the-password").await;
    wait_text(
        c,
        "#status[data-state=credentials-refused]",
        "the refusal",
        |t| t.contains("refused"),
    )
    .await;
    let log = nla.log();
    assert!(
        log.contains("authentication failure") || log.contains("SEC_E_"),
        "the host's log shows no refused authentication:\n{log}"
    );
    // The refused logon left no session behind (rule S9).
    let none = crate::eventually(PATIENCE, || async {
        crate::session_of(&app, "farm", "alice").await.is_none()
    })
    .await;
    assert!(
        none,
        "a refused logon left {:?}",
        crate::session_of(&app, "farm", "alice").await
    );

    // The right one: the connection sequence completes past CredSSP, and
    // the host's screen (its size, not the tab's) is drawn. FreeRDP's
    // shadow server sends clients without the graphics pipeline a black
    // screen, so what is drawn is checked against xrdp, above, not here.
    sign_in(c, &nla.user, &nla.password).await;
    wait_text(c, "#status[data-state=connected]", "the connection", |_| {
        true
    })
    .await;
    let drawn = crate::eventually(PATIENCE, || async {
        probe(c).await.is_some_and(|s| {
            (s.width, s.height) == (1024, 768)
                && s.background.as_ref().and_then(|b| b.get(3)) == Some(&255)
        })
    })
    .await;
    assert!(
        drawn,
        "the host's screen is not drawn: {:?}; the page says {:?}; the host's log:\n{}",
        probe(c).await.map(|s| (s.width, s.height, s.background)),
        page_status(c).await,
        nla.log()
    );
    assert_eq!(
        nla.log().matches("client authentication failure").count(),
        1,
        "only the wrong password is refused:\n{}",
        nla.log()
    );
    wait_session(&app, "farm", "alice", "n1", "Active").await;
    // The password is not kept in the form.
    let kept = c
        .execute("return document.getElementById('password').value;", vec![])
        .await
        .expect("read the field");
    assert_eq!(kept.as_str(), Some(""));
    c.goto("about:blank").await.expect("leave the page");
    wait_session(&app, "farm", "alice", "n1", "Disconnected").await;
}

/// Reads one HTTP/1.1 response's head off `stream`.
async fn response_head<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> String {
    use tokio::io::AsyncReadExt as _;
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        let n = stream.read(&mut byte).await.expect("read the head");
        assert_eq!(
            n,
            1,
            "closed in the head: {}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    String::from_utf8(head).expect("a text head")
}

/// Reads one HTTP/1.1 response off `stream`: its head, and its body by
/// `Content-Length` (none for a 304, a 101, or when there is no length).
async fn response<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> (String, Vec<u8>) {
    use tokio::io::AsyncReadExt as _;
    let head = response_head(stream).await;
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .map_or(0, |n| n.trim().parse::<usize>().expect("a length"));
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.expect("read the body");
    (head, body)
}

#[tokio::test]
async fn the_pages_files_share_one_connection_and_a_current_copy_is_not_sent_again() {
    use tokio::io::AsyncWriteExt as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let (_app, gateway) = App::spawn_with_rd_gateway(&dir.path().join("data"), &[]);
    let mut tls = crate::web::tls(&gateway).await.expect("connect");

    // The page's files, one after another on one connection.
    let mut tag = String::new();
    let mut wasm = Vec::new();
    for path in ["/web", "/web/page.js", "/web/webclient_bg.wasm"] {
        let get = format!("GET {path} HTTP/1.1\r\nHost: gw\r\n\r\n");
        tls.write_all(get.as_bytes()).await.expect("send");
        let (head, body) = response(&mut tls).await;
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{path}: {head}");
        assert!(
            head.contains("Connection: keep-alive\r\n"),
            "{path}: {head}"
        );
        assert!(!body.is_empty(), "{path}");
        tag = head
            .lines()
            .find_map(|l| l.strip_prefix("ETag: "))
            .expect("an ETag")
            .to_string();
        wasm = body;
    }
    // Gzipped for a browser that takes it: a third of the bytes.
    tls.write_all(
        b"GET /web/webclient_bg.wasm HTTP/1.1\r\nHost: gw\r\nAccept-Encoding: gzip, br\r\n\r\n",
    )
    .await
    .expect("send");
    let (head, gzipped) = response(&mut tls).await;
    assert!(head.contains("Content-Encoding: gzip\r\n"), "{head}");
    assert!(gzipped.starts_with(&[0x1f, 0x8b]), "not gzip");
    eprintln!(
        "web page: the WebAssembly is {} bytes, {} gzipped",
        wasm.len(),
        gzipped.len()
    );
    assert!(gzipped.len() * 2 < wasm.len());
    // The browser's copy of the WebAssembly is current: 304, no body.
    let again =
        format!("GET /web/webclient_bg.wasm HTTP/1.1\r\nHost: gw\r\nIf-None-Match: {tag}\r\n\r\n");
    tls.write_all(again.as_bytes()).await.expect("send");
    let (head, body) = response(&mut tls).await;
    assert!(head.starts_with("HTTP/1.1 304 Not Modified\r\n"), "{head}");
    assert!(body.is_empty());
    // And the desktop's socket on the same connection.
    tls.write_all(
        b"GET /web/rdp HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
          Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    )
    .await
    .expect("send");
    let (head, _) = response(&mut tls).await;
    assert!(
        head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{head}"
    );

    // A client that closes: the connection ends after the answer.
    let mut tls = crate::web::tls(&gateway).await.expect("connect");
    tls.write_all(b"GET /web HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
        .await
        .expect("send");
    let (head, _) = response(&mut tls).await;
    assert!(head.contains("Connection: close\r\n"), "{head}");
    let mut rest = Vec::new();
    let _ = tokio::io::AsyncReadExt::read_to_end(&mut tls, &mut rest).await;
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));

    // A client that keeps asking is closed after 32 requests.
    let mut tls = crate::web::tls(&gateway).await.expect("connect");
    for n in 1..=32 {
        tls.write_all(b"HEAD /web HTTP/1.1\r\nHost: gw\r\n\r\n")
            .await
            .expect("send");
        let head = response_head(&mut tls).await;
        let closing = head.contains("Connection: close\r\n");
        assert_eq!(closing, n == 32, "request {n}: {head}");
    }
}

/// The WebSocket upgrade a smuggled body would carry.
const UPGRADE: &str = "GET /web/rdp HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\n\
     Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
     Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";

/// A request for the page or one of its files with a body is answered 400
/// and its connection closed: the body is never read as the next request
/// (behind a proxy that reuses its connections to the gateway, that would
/// be another client's request). The same on a kept-alive connection, and
/// for the desktop's socket.
#[tokio::test]
async fn a_page_request_with_a_body_is_refused_and_its_body_never_read_as_a_request() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let dir = tempfile::tempdir().expect("tempdir");
    let (_app, gateway) = App::spawn_with_rd_gateway(&dir.path().join("data"), &[]);
    let chunked = format!("{:x}\r\n{UPGRADE}\r\n0\r\n\r\n", UPGRADE.len());
    let length = format!("Content-Length: {}\r\n", UPGRADE.len());
    let upgrade_head = UPGRADE.trim_end_matches("\r\n");
    let cases = [
        ("GET /web", length.as_str(), UPGRADE),
        ("HEAD /web/page.js", length.as_str(), UPGRADE),
        (
            "GET /web",
            "Transfer-Encoding: chunked\r\n",
            chunked.as_str(),
        ),
        (
            "GET /web",
            "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
            chunked.as_str(),
        ),
    ];
    for kept_alive in [false, true] {
        for (start, framing, body) in cases {
            let what = format!("{start} with {framing:?} (after a request: {kept_alive})");
            let mut tls = crate::web::tls(&gateway).await.expect("connect");
            if kept_alive {
                tls.write_all(b"GET /web HTTP/1.1\r\nHost: gw\r\n\r\n")
                    .await
                    .expect("send");
                let (head, _) = response(&mut tls).await;
                assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{what}: {head}");
            }
            let request = format!("{start} HTTP/1.1\r\nHost: gw\r\n{framing}\r\n{body}");
            tls.write_all(request.as_bytes()).await.expect("send");
            let head = response_head(&mut tls).await;
            assert!(head.starts_with("HTTP/1.1 400 "), "{what}: {head}");
            let mut rest = Vec::new();
            let _ = tls.read_to_end(&mut rest).await;
            assert!(
                rest.is_empty(),
                "{what}: after the 400: {}",
                String::from_utf8_lossy(&rest)
            );
        }
    }
    // The desktop's socket with a body: refused too, not upgraded.
    let mut tls = crate::web::tls(&gateway).await.expect("connect");
    let request = format!("{upgrade_head}\r\n{length}\r\n{UPGRADE}");
    tls.write_all(request.as_bytes()).await.expect("send");
    let head = response_head(&mut tls).await;
    assert!(head.starts_with("HTTP/1.1 400 "), "{head}");
    // Still served without one.
    let mut tls = crate::web::tls(&gateway).await.expect("connect");
    tls.write_all(b"GET /web HTTP/1.1\r\nHost: gw\r\nContent-Length: 0\r\n\r\n")
        .await
        .expect("send");
    let (head, body) = response(&mut tls).await;
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(!body.is_empty());
}

/// The gateway's HTTPS listener tells browsers to come back over HTTPS
/// only (its own name, not its domain's others) with every answer for the
/// page and its files.
#[tokio::test]
async fn the_pages_answers_over_https_carry_strict_transport_security() {
    use tokio::io::AsyncWriteExt as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let (_app, gateway) = App::spawn_with_rd_gateway(&dir.path().join("data"), &[]);
    let mut tls = crate::web::tls(&gateway).await.expect("connect");
    for request in [
        "GET /web HTTP/1.1\r\nHost: gw\r\n\r\n",
        "HEAD /web/webclient_bg.wasm HTTP/1.1\r\nHost: gw\r\nAccept-Encoding: gzip\r\n\r\n",
        "GET /web/page.js HTTP/1.1\r\nHost: gw\r\nAccept-Encoding: gzip\r\n\r\n",
    ] {
        tls.write_all(request.as_bytes()).await.expect("send");
        let (head, _) = if request.starts_with("HEAD") {
            (response_head(&mut tls).await, Vec::new())
        } else {
            response(&mut tls).await
        };
        assert!(
            head.contains("\r\nStrict-Transport-Security: max-age=31536000\r\n"),
            "{request:?}: {head}"
        );
        assert!(!head.contains("includeSubDomains"), "{head}");
    }
}

/// The icon every browser asks for beside the page is a plain 404 (the
/// page has none), not a refusal of a request that is not the gateway's.
#[tokio::test]
async fn a_browsers_icon_request_is_not_found_not_refused() {
    use tokio::io::AsyncWriteExt as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let (_app, gateway) = App::spawn_with_rd_gateway(&dir.path().join("data"), &[]);
    let mut tls = crate::web::tls(&gateway).await.expect("connect");
    tls.write_all(b"GET /favicon.ico HTTP/1.1\r\nHost: gw\r\n\r\n")
        .await
        .expect("send");
    let head = response_head(&mut tls).await;
    assert!(head.starts_with("HTTP/1.1 404 "), "{head}");
}
