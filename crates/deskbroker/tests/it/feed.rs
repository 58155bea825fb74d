//! Rule F4 against a real Active Directory domain controller (Samba, its
//! winbind running, `support::domain`): a domain user subscribes to
//! `https://<gateway>/RDWeb/Feed/webfeed.aspx` with Kerberos, NTLM or a
//! password (HTTP Basic over TLS), as curl sends them; the feed validates against
//! MS-TSWP's own schemas (2.0 and 2.1, with xmllint) and lists exactly what
//! the user is given through the directory's nested groups; its files carry
//! no ticket and its desktop file opens in xfreerdp through the gateway
//! (NTLM) on the real xrdp host; `LastUpdated` moves when the user's set
//! changes and not otherwise, and IDs and `LastUpdated` survive a restart.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use crate::directory::{directory_flags, people};
use crate::ntlm_sign_in::{PASSWORD, ntlm_flags};
use crate::support::domain::Domain;
use crate::windows_sign_in::{GATEWAY_NAME, services};
use crate::*;

const RADC_2_0: &str = "Accept: application/x-msts-radc+xml; radc_schema_version=2.0";

/// One answer curl got: its status, its head, its body.
struct Got {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Got {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }
}

/// How curl signs in.
enum As<'a> {
    Nobody,
    Ntlm(&'a str),
    Basic(&'a str),
    /// Kerberos (`Negotiate`), with MIT's configuration and the user's
    /// credential cache, to the gateway by its service name.
    Kerberos(&'a Path, &'a Path),
}

/// curl's `GET https://<gateway><path>`, signed in `how` with `password`,
/// with `headers`. The gateway's certificate is the test's own,
/// self-signed; nothing leaves loopback.
fn get(gateway: &str, path: &str, how: As<'_>, password: &str, headers: &[&str]) -> Got {
    let dir = tempfile::tempdir().expect("tempdir");
    let (head, body) = (dir.path().join("head"), dir.path().join("body"));
    let mut curl = Command::new(require("curl", "curl"));
    curl.args(["-sk", "--max-time", "60", "-D"])
        .arg(&head)
        .arg("-o")
        .arg(&body);
    let mut url = format!("https://{gateway}{path}");
    match how {
        As::Nobody => {}
        As::Kerberos(conf, ccache) => {
            let port = gateway.rsplit_once(':').map_or("443", |(_, p)| p);
            curl.args(["--negotiate", "-u", ":", "--resolve"])
                .arg(format!("{GATEWAY_NAME}:{port}:127.0.0.1"))
                .env("KRB5_CONFIG", conf)
                .env("KRB5CCNAME", format!("FILE:{}", ccache.display()));
            url = format!("https://{GATEWAY_NAME}:{port}{path}");
        }
        As::Ntlm(user) => {
            curl.args(["--ntlm", "-u", &format!("{user}:{password}")]);
        }
        As::Basic(user) => {
            curl.args(["--basic", "-u", &format!("{user}:{password}")]);
        }
    }
    for header in headers {
        curl.args(["-H", header]);
    }
    let status = curl.arg(url).status().expect("curl runs");
    assert!(status.success(), "curl failed on {path}: {status}");
    let head = std::fs::read_to_string(&head).unwrap_or_default();
    // With NTLM, curl writes each leg's head: the last is the answer's.
    let last = head
        .split("\r\n\r\n")
        .filter(|h| h.starts_with("HTTP/"))
        .last()
        .unwrap_or_default()
        .to_string();
    let code = last
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Got {
        status: code,
        head: last,
        body: std::fs::read(&body).unwrap_or_default(),
    }
}

fn schema(version: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../api/tests/data/ms-tswp")
        .join(format!("ms-tswp-{version}.xsd"))
}

/// Asserts `xml` valid against MS-TSWP's schema of `version`.
fn assert_valid(xml: &str, version: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("feed.xml");
    std::fs::write(&file, xml).expect("write the feed");
    let out = Command::new(require("xmllint", "libxml2-utils"))
        .arg("--noout")
        .arg("--schema")
        .arg(schema(version))
        .arg(&file)
        .output()
        .expect("xmllint runs");
    assert!(
        out.status.success(),
        "not valid MS-TSWP {version}: {}\n{xml}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The feed's `LastUpdated`.
fn last_updated(xml: &str) -> String {
    let at = xml
        .find("<ResourceCollection")
        .expect("a ResourceCollection");
    let rest = &xml[at..];
    let value = rest.split("LastUpdated=\"").nth(1).expect("LastUpdated");
    value.split('"').next().expect("its value").to_string()
}

/// The IDs of the feed's resources, in order.
fn ids(xml: &str) -> Vec<String> {
    xml.split("<Resource ")
        .skip(1)
        .filter_map(|r| r.split("ID=\"").nth(1))
        .filter_map(|r| r.split('"').next())
        .map(str::to_string)
        .collect()
}

/// Creates what the test publishes: `farm` (the xrdp host at `address`,
/// its desktop to RDS-Users), `office` (Notepad to Sales, Calculator to
/// bob), and `vault` (tickets only: never in a feed).
async fn publish(app: &App, address: &str) {
    let pool = |name: &str, sign_in: &str| {
        json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst",
            "allowedAddressRanges": ["127.0.0.0/8"], "entitledGroups": ["RDS-Users"],
            "gatewaySignIn": sign_in, "friendlyName": format!("The {name}")})
    };
    for (name, sign_in) in [
        ("farm", "TicketOrWindows"),
        ("office", "TicketOrWindows"),
        ("vault", "Ticket"),
    ] {
        let path = format!("/api/v1/hostPools/{name}");
        app.ok("PUT", &path, Some(pool(name, sign_in)), 201).await;
    }
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm/sessionHosts/h1",
        Some(json!({"address": address})),
        201,
    )
    .await;
    use base64::Engine as _;
    let png = base64::engine::general_purpose::STANDARD.encode(PNG_1X1);
    let apps = "/api/v1/hostPools/office/applications";
    app.ok(
        "PUT",
        &format!("{apps}/notepad"),
        Some(
            json!({"displayName": "Notepad", "program": "||notepad", "iconPng": png,
            "fileExtensions": [".txt"], "folder": "Tools"}),
        ),
        201,
    )
    .await;
    app.ok(
        "PUT",
        &format!("{apps}/calc"),
        Some(json!({"displayName": "Calculator", "program": "||calc"})),
        201,
    )
    .await;
    notepad_to(app, &["Sales"], 201).await;
    app.ok(
        "PUT",
        "/api/v1/applicationGroups/office-calc",
        Some(
            json!({"hostPool": "office", "kind": "RemoteApp", "applications": ["calc"],
            "assignedUsers": ["bob@deskbroker.test"]}),
        ),
        201,
    )
    .await;
}

/// Assigns `office`'s Notepad to `groups`.
async fn notepad_to(app: &App, groups: &[&str], status: u16) {
    app.ok(
        "PUT",
        "/api/v1/applicationGroups/office-apps",
        Some(
            json!({"hostPool": "office", "kind": "RemoteApp", "applications": ["notepad"],
            "assignedGroups": groups}),
        ),
        status,
    )
    .await;
}

#[tokio::test]
async fn a_domain_user_subscribes_to_their_workspace_and_opens_what_it_lists() {
    let xrdp = require("xrdp", "xrdp");
    let xfreerdp = require("xfreerdp", "freerdp2-x11");
    let xvfb = require("Xvfb", "xvfb");
    let openssl = require("openssl", "openssl");
    let dc = Domain::start_with_winbind();
    people(&dc);
    let dir = tempfile::tempdir().expect("tempdir");
    let host = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp"));
    let display = Display::start(&xvfb);

    let keytab = services(&dc, dir.path());
    let conf = dc.krb5_conf(dir.path());
    let ccache = dir.path().join("alice.ccache");
    dc.kinit(&conf, "alice", PASSWORD, &ccache).expect("kinit");
    let mut flags = directory_flags(&dc, &dc.ldaps_url(), 300);
    flags.extend(ntlm_flags(&dc));
    flags.extend([
        "--gateway-keytab".to_string(),
        keytab.display().to_string(),
        "--gateway-service-name".into(),
        GATEWAY_NAME.into(),
    ]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let data = dir.path().join("data");
    let (app, gateway) = App::spawn_with_rd_gateway(&data, &flags);
    publish(&app, &host.address).await;
    let feed = "/RDWeb/Feed/webfeed.aspx";

    // Nobody signed in: offered Kerberos, NTLM and, over TLS, a password.
    let nobody = get(&gateway, feed, As::Nobody, "", &[]);
    assert_eq!(nobody.status, 401, "{}", nobody.head);
    assert!(
        nobody.head.contains("WWW-Authenticate: Negotiate"),
        "{}",
        nobody.head
    );
    assert!(
        nobody.head.contains("WWW-Authenticate: NTLM"),
        "{}",
        nobody.head
    );
    assert!(
        nobody.head.contains("WWW-Authenticate: Basic"),
        "{}",
        nobody.head
    );

    // alice (RDS-Users through Sales) with NTLM, schema 2.0: the farm's
    // desktop and Notepad; not bob's Calculator, not the tickets-only
    // vault.
    let alice = As::Ntlm("DESKBROKER\\alice");
    let got = get(&gateway, feed, alice, PASSWORD, &[RADC_2_0]);
    assert_eq!(got.status, 200, "{}\n{}", got.head, got.text());
    assert_eq!(
        got.header("Content-Type").as_deref(),
        Some("application/x-msts-radc+xml; charset=utf-8")
    );
    let xml = got.text();
    assert_valid(&xml, "2.0");
    let desktop = ::api::feed::resource_id("farm", None);
    let notepad = ::api::feed::resource_id("office", Some("notepad"));
    let calc = ::api::feed::resource_id("office", Some("calc"));
    assert_eq!(ids(&xml), vec![desktop.clone(), notepad.clone()], "{xml}");
    assert!(
        !xml.contains("vault") && !xml.contains("Calculator"),
        "{xml}"
    );
    assert!(xml.contains("FileExtension Name=\".txt\""), "{xml}");
    let first = last_updated(&xml);

    // The same with her password (Basic, her UPN), schema 2.1: the same
    // resources, the same LastUpdated.
    let basic = As::Basic("alice@deskbroker.test");
    let path = format!("{feed}?radc_schema_version=2.1");
    let got = get(&gateway, &path, basic, PASSWORD, &[]);
    assert_eq!(got.status, 200, "{}", got.head);
    let xml = got.text();
    assert_valid(&xml, "2.1");
    assert_eq!(ids(&xml), vec![desktop.clone(), notepad.clone()]);
    assert_eq!(last_updated(&xml), first);

    // And with Kerberos (her ticket for the gateway's service name).
    let got = get(
        &gateway,
        feed,
        As::Kerberos(&conf, &ccache),
        "",
        &[RADC_2_0],
    );
    assert_eq!(got.status, 200, "{}", got.head);
    assert_eq!(ids(&got.text()), vec![desktop.clone(), notepad.clone()]);
    assert_eq!(last_updated(&got.text()), first);

    // The login-token exchange: signed in once at WebFeedLogin.aspx, her
    // cookie signs the feed's requests in; a forged one does not.
    let login = get(
        &gateway,
        "/RDWeb/FeedLogin/WebFeedLogin.aspx",
        As::Ntlm("DESKBROKER\\alice"),
        PASSWORD,
        &[],
    );
    assert_eq!(login.status, 200, "{}", login.head);
    let cookie = login.header("Set-Cookie").expect("a login token");
    assert!(
        cookie.contains("Secure") && cookie.contains("HttpOnly"),
        "{cookie}"
    );
    let token = cookie.split(';').next().expect("the cookie").to_string();
    let with_token = format!("Cookie: {token}");
    let got = get(&gateway, feed, As::Nobody, "", &[RADC_2_0, &with_token]);
    assert_eq!(got.status, 200, "{}", got.head);
    assert_eq!(ids(&got.text()), vec![desktop.clone(), notepad.clone()]);
    // A token renews no token: signed in by one, the login page sets none.
    let again = get(
        &gateway,
        "/RDWeb/FeedLogin/WebFeedLogin.aspx",
        As::Nobody,
        "",
        &[&with_token],
    );
    assert_eq!(again.status, 200, "{}", again.head);
    assert_eq!(again.header("Set-Cookie"), None, "{}", again.head);
    let bob = ::base64::Engine::encode(
        &::base64::engine::general_purpose::URL_SAFE_NO_PAD,
        "bob@deskbroker.test",
    );
    let value = token.strip_prefix(".ASPXAUTH=").expect("the feed's cookie");
    let (_, signed) = value.split_once('.').expect("a token");
    let forged = format!("Cookie: .ASPXAUTH={bob}.{signed}");
    let got = get(&gateway, feed, As::Nobody, "", &[&forged]);
    assert_eq!(got.status, 401, "{}", got.head);

    // bob is in no entitled group: an empty feed, valid all the same.
    let got = get(
        &gateway,
        feed,
        As::Ntlm("DESKBROKER\\bob"),
        PASSWORD,
        &[RADC_2_0],
    );
    assert_eq!(got.status, 200, "{}", got.head);
    assert_valid(&got.text(), "2.0");
    assert!(ids(&got.text()).is_empty(), "{}", got.text());

    // The files carry no ticket: through the gateway, Windows sign-in.
    let app_file = get(
        &gateway,
        "/RDWeb/Feed/rdp/office/notepad.rdp",
        As::Ntlm("DESKBROKER\\alice"),
        PASSWORD,
        &[],
    );
    assert_eq!(app_file.status, 200, "{}", app_file.head);
    let text = app_file.text();
    for line in [
        "remoteapplicationmode:i:1",
        "remoteapplicationprogram:s:||notepad",
        "full address:s:office",
        &format!("gatewayhostname:s:{gateway}"),
        "gatewaycredentialssource:i:0",
    ] {
        assert!(text.contains(line), "{line} not in {text}");
    }
    assert!(!text.contains("gatewayaccesstoken"), "{text}");
    // What she is not given is not found, as what does not exist.
    for path in [
        "/RDWeb/Feed/rdp/office/calc.rdp",
        "/RDWeb/Feed/rdp/vault.rdp",
        "/RDWeb/Feed/rdp/nowhere.rdp",
        "/RDWeb/Feed/icon/office/calc/1.png",
    ] {
        let got = get(&gateway, path, As::Ntlm("DESKBROKER\\alice"), PASSWORD, &[]);
        assert_eq!(got.status, 404, "{path}: {}", got.head);
    }
    // Icons: the addresses the feed names, a fixed type, nosniff.
    let icon = xml
        .split("URL=\"")
        .filter_map(|s| s.split('"').next())
        .find(|u| u.ends_with(".png"))
        .expect("an icon's address")
        .to_string();
    let got = get(
        &gateway,
        &icon,
        As::Ntlm("DESKBROKER\\alice"),
        PASSWORD,
        &[],
    );
    assert_eq!(got.status, 200, "{}", got.head);
    assert_eq!(got.header("Content-Type").as_deref(), Some("image/png"));
    assert_eq!(
        got.header("X-Content-Type-Options").as_deref(),
        Some("nosniff")
    );
    assert_eq!(
        ::api::feed::icons::check_png(&got.body).map(|s| (s.width, s.height)),
        Ok((32, 32))
    );

    // Wrong passwords are refused, and audited without the password.
    let got = get(
        &gateway,
        feed,
        As::Basic("alice@deskbroker.test"),
        "Wrong-Passw0rd",
        &[],
    );
    assert_eq!(got.status, 401, "{}", got.head);
    let got = get(
        &gateway,
        feed,
        As::Ntlm("DESKBROKER\\carol"),
        "Wrong-Passw0rd",
        &[],
    );
    assert_eq!(got.status, 401, "{}", got.head);
    let audit = app
        .ok("GET", "/api/v1/auditLog?actor=rd-gateway", None, 200)
        .await
        .to_string();
    assert!(audit.contains("a password refused"), "{audit}");
    assert!(!audit.contains("Wrong-Passw0rd"), "{audit}");

    // The desktop's file opens in xfreerdp through the gateway, signed in
    // with NTLM: alice placed on the xrdp host by her nested group.
    let desktop_file = get(
        &gateway,
        "/RDWeb/Feed/rdp/farm.rdp",
        As::Ntlm("DESKBROKER\\alice"),
        PASSWORD,
        &[],
    );
    assert_eq!(desktop_file.status, 200, "{}", desktop_file.head);
    let file = dir.path().join("farm.rdp");
    std::fs::write(&file, &desktop_file.body).expect("save the file");
    let args = [
        file.display().to_string(),
        "/gt:http".into(),
        "/u:alice".into(),
        "/gu:alice".into(),
        "/gd:DESKBROKER".into(),
        format!("/gp:{PASSWORD}"),
    ];
    let client = Client::start(&xfreerdp, &display, &dir.path().join("home"), &args);
    let reached = eventually(PATIENCE, || async { host.tls_connections() >= 1 }).await;
    assert!(reached, "xrdp was not reached: {}", client.log());
    wait_session(&app, "farm", "alice@deskbroker.test", "h1", "Active").await;
    drop(client);

    // Notepad taken from Sales: gone from alice's feed, and LastUpdated
    // moved on; fetched again, it stays where it is.
    notepad_to(&app, &[], 200).await;
    let fetch = |how| {
        let got = get(&gateway, feed, how, PASSWORD, &[RADC_2_0]);
        assert_eq!(got.status, 200, "{}", got.head);
        got.text()
    };
    let xml = fetch(As::Ntlm("DESKBROKER\\alice"));
    assert_valid(&xml, "2.0");
    assert_eq!(ids(&xml), vec![desktop.clone()]);
    let moved = last_updated(&xml);
    assert!(moved > first, "{moved} is not after {first}");
    assert_eq!(last_updated(&fetch(As::Ntlm("DESKBROKER\\alice"))), moved);
    assert!(!ids(&xml).contains(&calc));

    // After a restart: the same IDs, the same LastUpdated.
    drop(app);
    let (_app, gateway) = App::spawn_with_rd_gateway(&data, &flags);
    let got = get(
        &gateway,
        feed,
        As::Ntlm("DESKBROKER\\alice"),
        PASSWORD,
        &[RADC_2_0],
    );
    assert_eq!(got.status, 200, "{}", got.head);
    assert_eq!(ids(&got.text()), vec![desktop]);
    assert_eq!(last_updated(&got.text()), moved);
}

/// alice's feed through `gateway`: its IDs and its `LastUpdated`.
fn alices_feed(gateway: &str) -> (Vec<String>, String) {
    let feed = "/RDWeb/Feed/webfeed.aspx";
    let got = get(
        gateway,
        feed,
        As::Ntlm("DESKBROKER\\alice"),
        PASSWORD,
        &[RADC_2_0],
    );
    assert_eq!(got.status, 200, "{gateway}: {}\n{}", got.head, got.text());
    assert_valid(&got.text(), "2.0");
    (ids(&got.text()), last_updated(&got.text()))
}

/// Two replicas on PostgreSQL, each with its gateway, and a stand-alone
/// gateway on the broker's API: one feed for alice from all three (the
/// follower's and the stand-alone gateway's through the API, the latter
/// with its own credential); the API's feed answers only gateways and the
/// admin, since it answers for whoever the caller names.
#[tokio::test]
async fn every_replica_and_a_standalone_gateway_serve_one_feed() {
    let openssl = require("openssl", "openssl");
    let dc = Domain::start_with_winbind();
    people(&dc);
    let db = crate::pg::scratch("feed_replicas").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut flags = directory_flags(&dc, &dc.ldaps_url(), 300);
    flags.extend(ntlm_flags(&dc));
    flags.extend([
        "--database-url".to_string(),
        db.url().to_string(),
        "--gateway-listen".into(),
        "127.0.0.1:0".into(),
    ]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (first, _) = App::spawn_with(&dir.path().join("r0"), "127.0.0.1:0", &flags);
    crate::pg::leader_index(&[&first]).await;
    let (second, _) = App::spawn_with(&dir.path().join("r1"), "127.0.0.1:0", &flags);
    publish(&first, "127.0.0.1:9").await;

    let from_first = alices_feed(&first.ready.gateway_addr().to_string());
    let desktop = ::api::feed::resource_id("farm", None);
    let notepad = ::api::feed::resource_id("office", Some("notepad"));
    assert_eq!(from_first.0, vec![desktop, notepad]);
    assert_eq!(
        alices_feed(&second.ready.gateway_addr().to_string()),
        from_first
    );

    let token = credential(&first, "rd-gateway-1", "gateway", &[]).await;
    let tls = TlsFiles::make(&openssl, dir.path());
    let extra = ntlm_flags(&dc);
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let (_standalone, gateway) = standalone_gateway(&second.url, &token, &tls, &extra);
    assert_eq!(alices_feed(&gateway), from_first);
    let file = get(
        &gateway,
        "/RDWeb/Feed/rdp/office/notepad.rdp",
        As::Ntlm("DESKBROKER\\alice"),
        PASSWORD,
        &[],
    );
    assert_eq!(file.status, 200, "{}", file.head);
    assert!(
        file.text().contains("remoteapplicationprogram:s:||notepad"),
        "{}",
        file.text()
    );
    let icon = get(
        &gateway,
        "/RDWeb/Feed/icon/office/notepad/1.ico",
        As::Ntlm("DESKBROKER\\alice"),
        PASSWORD,
        &[],
    );
    assert_eq!(icon.status, 200, "{}", icon.head);
    assert_eq!(icon.header("Content-Type").as_deref(), Some("image/x-icon"));
    assert_eq!(
        ::api::feed::icons::check_ico(&icon.body).map(|sizes| sizes.len()),
        Ok(1)
    );

    // Guessing carol's password: ten refusals a minute, then 429 untried,
    // her right password too.
    let feed = "/RDWeb/Feed/webfeed.aspx";
    let carol = "carol@deskbroker.test";
    for guess in 0..10 {
        let got = get(
            &gateway,
            feed,
            As::Basic(carol),
            &format!("Guess-{guess}"),
            &[],
        );
        assert_eq!(got.status, 401, "guess {guess}: {}", got.head);
    }
    let got = get(&gateway, feed, As::Basic(carol), PASSWORD, &[]);
    assert_eq!(got.status, 429, "{}", got.head);
    assert_eq!(got.header("Retry-After").as_deref(), Some("60"));

    // The admin's view of it, from the CLI: her two resources.
    let (ok, out, err) = first.cli(&["user", "feed", "alice@deskbroker.test", "--output", "json"]);
    assert!(ok, "{err}");
    let shown: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(
        shown["resources"].as_array().map(Vec::len),
        Some(2),
        "{out}"
    );
    let (ok, out, err) = first.cli(&["user", "feed", "alice@deskbroker.test"]);
    assert!(
        ok && out.contains("notepad") && out.contains("office"),
        "{out}{err}"
    );

    // A reader (or a pool's operator) reads no one's feed through the API.
    let reader = credential(&first, "auditor", "reader", &[]).await;
    for path in [
        "/api/v1/users/alice@deskbroker.test/feed",
        "/api/v1/users/alice@deskbroker.test/feed/office/applications/notepad/rdpFile",
        "/api/v1/users/alice@deskbroker.test/feed/office/applications/notepad/icon",
        "/api/v1/users/alice@deskbroker.test/feed/farm/rdpFile",
    ] {
        let status = reqwest::Client::new()
            .get(format!("{}{path}", first.url))
            .bearer_auth(&reader)
            .send()
            .await
            .expect("an answer")
            .status()
            .as_u16();
        assert_eq!(status, 403, "{path}");
    }
}
