//! Rule AD2's NTLM against a real Active Directory domain controller
//! (Samba, its winbind running, `support::domain`): xfreerdp 2.11 signs in
//! to the RD Gateway with `/gu:`, `/gd:` and `/gp:` (NTLM, checked by the
//! domain through Samba's `ntlm_auth`), over the WebSocket and the legacy
//! transport, and reaches the real xrdp host the broker places the domain
//! user on, by the directory's nested groups; a wrong password, a user of
//! no entitled group and a domain the gateway does not sign in are refused,
//! and the refusals audited. Windows' own fallback, NTLM inside SPNEGO
//! under `Negotiate` (made by Samba's SPNEGO client), signs in beside
//! Kerberos on one gateway.

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::directory::{directory_flags, people};
use crate::support::domain::Domain;
use crate::windows_sign_in::{
    GATEWAY_NAME, Tls, negotiate, out_request, pool, read_head, services, upgraded, websocket_head,
};
use crate::*;

/// `serve`'s flags for NTLM sign-in through `dc`'s winbind.
pub(crate) fn ntlm_flags(dc: &Domain) -> Vec<String> {
    let (helper, helper_args) = dc.ntlm_helper();
    let mut flags = vec![
        "--gateway-ntlm-domain".to_string(),
        format!("{}=deskbroker.test", dc.netbios()),
        "--gateway-ntlm-helper".into(),
        helper.display().to_string(),
    ];
    for arg in helper_args {
        flags.extend(["--gateway-ntlm-helper-arg".to_string(), arg]);
    }
    flags
}

pub(crate) const PASSWORD: &str = "Sesame-0pen!";

/// xfreerdp's arguments to reach pool `farm` through `gateway` over
/// `transport`, signing in to the gateway as `domain\user` with
/// `password`.
fn through(
    gateway: &str,
    transport: &str,
    domain: &str,
    user: &str,
    password: &str,
) -> Vec<String> {
    vec![
        "/v:farm".into(),
        format!("/u:{user}"),
        format!("/g:{gateway}"),
        format!("/gt:{transport}"),
        format!("/gu:{user}"),
        format!("/gd:{domain}"),
        format!("/gp:{password}"),
    ]
}

#[tokio::test]
async fn xfreerdp_signs_in_with_ntlm_at_the_rd_gateway_and_reaches_the_placed_xrdp_host() {
    let xrdp = require("xrdp", "xrdp");
    let xfreerdp = require("xfreerdp", "freerdp2-x11");
    let xvfb = require("Xvfb", "xvfb");
    let openssl = require("openssl", "openssl");
    let dc = Domain::start_with_winbind();
    people(&dc);
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let host = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp"));
    let display = Display::start(&xvfb);
    let client = |args: &[String]| Client::start(&xfreerdp, &display, &home, args);

    let mut flags = directory_flags(&dc, &dc.ldaps_url(), 300);
    flags.extend(ntlm_flags(&dc));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (app, gateway) = App::spawn_with_rd_gateway(&dir.path().join("data"), &flags);
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst",
                "allowedAddressRanges": ["127.0.0.0/8"], "entitledGroups": ["RDS-Users"],
                "gatewaySignIn": "TicketOrWindows"}),
        ),
        201,
    )
    .await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm/sessionHosts/h1",
        Some(json!({"address": host.address})),
        201,
    )
    .await;

    // alice (in RDS-Users through Sales) signs in with NTLM over the
    // WebSocket transport: placed on h1 as alice@deskbroker.test, the name
    // a Kerberos sign-in of hers gets.
    let alice = client(&through(&gateway, "http", "DESKBROKER", "alice", PASSWORD));
    let reached = eventually(PATIENCE, || async { host.tls_connections() >= 1 }).await;
    assert!(reached, "xrdp was not reached: {}", alice.log());
    wait_session(&app, "farm", "alice@deskbroker.test", "h1", "Active").await;
    drop(alice);
    wait_session(&app, "farm", "alice@deskbroker.test", "h1", "Disconnected").await;

    // Over the legacy transport (two HTTPS connections, each signed in),
    // typing her name in another case: back to her session.
    let args = through(
        &gateway,
        "http,no-websockets",
        "deskbroker",
        "Alice",
        PASSWORD,
    );
    let alice = client(&args);
    let reached = eventually(PATIENCE, || async { host.tls_connections() >= 2 }).await;
    assert!(reached, "xrdp was not reached again: {}", alice.log());
    wait_session(&app, "farm", "alice@deskbroker.test", "h1", "Active").await;
    drop(alice);
    wait_session(&app, "farm", "alice@deskbroker.test", "h1", "Disconnected").await;

    // A wrong password, a user of no entitled group, a domain this gateway
    // does not sign in: none reaches the host, none is placed.
    for (domain, user, password) in [
        ("DESKBROKER", "carol", "Wrong-Passw0rd"),
        ("DESKBROKER", "bob", PASSWORD),
        ("FABRIKAM", "dave", PASSWORD),
    ] {
        let refused = client(&through(&gateway, "http", domain, user, password));
        gave_up(refused, &format!("{domain}\\{user}")).await;
        let name = format!("{}@deskbroker.test", user);
        assert_eq!(session_of(&app, "farm", &name).await, None, "{user}");
    }
    assert_eq!(host.tls_connections(), 2, "{}", host.log());

    // The refusals are in the audit log, by source, reason and user.
    let log = app
        .ok("GET", "/api/v1/auditLog?actor=rd-gateway", None, 200)
        .await;
    let text = log.to_string();
    for said in [
        "an NTLM sign-in refused",
        "users/carol@deskbroker.test",
        "127.0.0.1",
    ] {
        assert!(text.contains(said), "{said} not in {text}");
    }
    // Nothing of the exchange reaches the audit: no password, no NTLM
    // message.
    assert!(
        !text.contains("Wrong-Passw0rd") && !text.contains("TlRMTVNT"),
        "{text}"
    );
}

/// Samba's SPNEGO client (`ntlm_auth --helper-protocol=gss-spnego-client`)
/// signing in as `DESKBROKER\user` with `password`: NTLM inside SPNEGO,
/// as Windows sends it under `Negotiate` when it gets no Kerberos ticket.
struct SpnegoClient {
    child: tokio::process::Child,
    input: tokio::process::ChildStdin,
    output: BufReader<tokio::process::ChildStdout>,
}

impl SpnegoClient {
    async fn start(dc: &Domain, user: &str, password: &str) -> SpnegoClient {
        use base64::Engine as _;
        let (program, args) = dc.ntlm_helper();
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .args(["--helper-protocol=gss-spnego-client", "--domain=DESKBROKER"])
            .arg(format!("--username={user}"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start ntlm_auth's SPNEGO client");
        let input = child.stdin.take().expect("stdin");
        let output = BufReader::new(child.stdout.take().expect("stdout"));
        let mut client = SpnegoClient {
            child,
            input,
            output,
        };
        let password = base64::engine::general_purpose::STANDARD.encode(password);
        let said = client.ask(&format!("PW {password}")).await;
        assert_eq!(said, "OK", "the SPNEGO client took no password");
        client
    }

    /// One line to the client and the token of its answer (`YR t`, `KK t`).
    async fn ask(&mut self, line: &str) -> String {
        self.input
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("write");
        let mut answer = String::new();
        tokio::time::timeout(PATIENCE, self.output.read_line(&mut answer))
            .await
            .expect("an answer in time")
            .expect("read");
        let answer = answer.trim_end();
        match answer.split_once(' ') {
            Some(("YR" | "KK", token)) => token.to_string(),
            _ => answer.to_string(),
        }
    }
}

impl Drop for SpnegoClient {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Both legs of `client`'s SPNEGO-wrapped NTLM sign-in on `tls`, each
/// `head` (a request head's lines, each ending in CR LF, without its
/// empty line) with the leg's `Authorization`: the last answer's head.
async fn spnego_legs(client: &mut SpnegoClient, tls: &mut Tls, head: &str) -> String {
    let first = client.ask("YR").await;
    let request = |token: &str| format!("{head}{}\r\n", negotiate(token));
    tls.write_all(request(&first).as_bytes())
        .await
        .expect("first leg");
    let answer = read_head(tls).await;
    assert!(answer.starts_with("HTTP/1.1 401 "), "{answer}");
    let challenge = answer
        .lines()
        .find_map(|l| l.strip_prefix("WWW-Authenticate: Negotiate "))
        .unwrap_or_else(|| panic!("no Negotiate challenge in {answer}"))
        .to_string();
    let second = client.ask(&format!("TT {challenge}")).await;
    tls.write_all(request(&second).as_bytes())
        .await
        .expect("second leg");
    read_head(tls).await
}

/// The head of `method` (`RDG_OUT_DATA`, `RDG_IN_DATA`) of the legacy
/// transport for the connection id `id`, with `headers`.
fn legacy_head(method: &str, id: u64, headers: &str) -> String {
    format!(
        "{method} /remoteDesktopGateway/ HTTP/1.1\r\nHost: {GATEWAY_NAME}\r\n\
         RDG-Connection-Id: {{ad2-{id}}}\r\n{headers}"
    )
}

/// A SPNEGO-wrapped NTLM sign-in on a WebSocket tunnel to `gateway`, as
/// `user` with `password`: the gateway's last answer, and the tunnel when
/// it opened.
async fn spnego_sign_in(
    dc: &Domain,
    gateway: &str,
    user: &str,
    password: &str,
) -> (String, Option<crate::windows_sign_in::Tunnel>) {
    let mut tls = crate::support::web::tls(gateway).await.expect("TLS");
    let mut client = SpnegoClient::start(dc, user, password).await;
    let head = websocket_head(7_000 + u64::from(free_port()), "");
    let answer = spnego_legs(&mut client, &mut tls, &head).await;
    upgraded(answer, tls).await
}

#[tokio::test]
async fn ntlm_inside_spnego_signs_in_beside_kerberos_on_one_gateway() {
    let dc = Domain::start_with_winbind();
    people(&dc);
    let dir = tempfile::tempdir().expect("tempdir");
    let keytab = services(&dc, dir.path());
    let mut flags = directory_flags(&dc, &dc.ldaps_url(), 300);
    flags.extend(ntlm_flags(&dc));
    flags.extend([
        "--gateway-keytab".to_string(),
        keytab.display().to_string(),
        "--gateway-service-name".into(),
        GATEWAY_NAME.into(),
    ]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (app, gateway) = App::spawn_with_rd_gateway(&dir.path().join("data"), &flags);
    pool(&app, "farm", "TicketOrWindows").await;

    // A client with nothing is offered both schemes, Kerberos first.
    let mut tls = crate::support::web::tls(&gateway).await.expect("TLS");
    let answer = out_request(&mut tls, 1, "").await;
    assert!(
        answer.contains("WWW-Authenticate: Negotiate\r\nWWW-Authenticate: NTLM\r\n"),
        "{answer}"
    );

    // alice's NTLM inside SPNEGO: signed in, the gateway's SPNEGO
    // completion in its answer, and her tunnel placed as
    // alice@deskbroker.test.
    let (answer, tunnel) = spnego_sign_in(&dc, &gateway, "alice", PASSWORD).await;
    assert!(answer.contains("WWW-Authenticate: Negotiate "), "{answer}");
    let mut tunnel = tunnel.unwrap_or_else(|| panic!("not upgraded: {answer}"));
    assert_eq!(
        tunnel.setup(None, "farm").await,
        ::gateway::tsgu::hresult::S_OK
    );
    let first = crate::support::wire::first_pdu("Cookie: mstshash=alice");
    assert_eq!(tunnel.exchange(&first, 2).await, b"CC");
    let placed = session_of(&app, "farm", "alice@deskbroker.test").await;
    assert_eq!(placed.map(|(host, _)| host), Some("h1".to_string()));

    // A wrong password: refused with the schemes offered again, untunnelled.
    let (answer, tunnel) = spnego_sign_in(&dc, &gateway, "carol", "Wrong-Passw0rd").await;
    assert!(answer.starts_with("HTTP/1.1 401 "), "{answer}");
    assert!(tunnel.is_none());
    assert_eq!(
        session_of(&app, "farm", "carol@deskbroker.test").await,
        None
    );

    // A legacy tunnel's OUT channel signed in as alice waits for its IN
    // channel; another user who learns its connection id, signed in as
    // herself, cannot be its IN channel, and nor can a client that signs
    // in as no one: their packets would be alice's.
    let id = 9_000 + u64::from(free_port());
    let mut out = crate::support::web::tls(&gateway).await.expect("TLS");
    let mut alice = SpnegoClient::start(&dc, "alice", PASSWORD).await;
    let answer = spnego_legs(&mut alice, &mut out, &legacy_head("RDG_OUT_DATA", id, "")).await;
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    let chunked = "Transfer-Encoding: chunked\r\n";
    let mut carol = SpnegoClient::start(&dc, "carol", PASSWORD).await;
    let mut tls = crate::support::web::tls(&gateway).await.expect("TLS");
    let first = carol.ask("YR").await;
    let first_leg = legacy_head("RDG_IN_DATA", id, "Content-Length: 0\r\n");
    let request = format!("{first_leg}{}\r\n", negotiate(&first));
    tls.write_all(request.as_bytes()).await.expect("first leg");
    let answer = read_head(&mut tls).await;
    let challenge = answer
        .lines()
        .find_map(|l| l.strip_prefix("WWW-Authenticate: Negotiate "))
        .unwrap_or_else(|| panic!("no Negotiate challenge in {answer}"))
        .to_string();
    let second = carol.ask(&format!("TT {challenge}")).await;
    let second_leg = legacy_head("RDG_IN_DATA", id, chunked);
    let request = format!("{second_leg}{}\r\n", negotiate(&second));
    tls.write_all(request.as_bytes()).await.expect("second leg");
    let answer = read_head(&mut tls).await;
    assert!(
        answer.starts_with("HTTP/1.1 404 "),
        "carol joined alice's tunnel: {answer}"
    );
    let mut tls = crate::support::web::tls(&gateway).await.expect("TLS");
    let request = format!("{}\r\n", legacy_head("RDG_IN_DATA", id, chunked));
    tls.write_all(request.as_bytes())
        .await
        .expect("unsigned IN");
    let answer = read_head(&mut tls).await;
    assert!(
        answer.starts_with("HTTP/1.1 404 "),
        "a client of no one joined: {answer}"
    );
}

/// A stand-alone `deskbroker gateway` writes its refused sign-ins to the
/// broker's audit log as its own credential; the report takes only what a
/// gateway would say, and only from a gateway (or the admin).
#[tokio::test]
async fn a_standalone_gateway_writes_refused_sign_ins_to_the_brokers_audit_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (app, _) = App::spawn_with(&dir.path().join("data"), "127.0.0.1:0", &[]);
    let token = credential(&app, "rd-gateway-1", "gateway", &[]).await;
    let tls = TlsFiles::make(&require("openssl", "openssl"), dir.path());
    let extra = ["--gateway-ntlm-domain", "DESKBROKER=deskbroker.test"];
    let (_gateway_process, gateway) = standalone_gateway(&app.url, &token, &tls, &extra);

    // An NTLM answer where its first message belongs: refused before any
    // helper or domain is asked.
    use base64::Engine as _;
    let answer_first = [&b"NTLMSSP\0"[..], &3u32.to_le_bytes(), &[0u8; 56]].concat();
    let header = format!(
        "Authorization: NTLM {}\r\n",
        base64::engine::general_purpose::STANDARD.encode(answer_first)
    );
    let mut tls = crate::support::web::tls(&gateway).await.expect("TLS");
    let answer = out_request(&mut tls, 1, &header).await;
    assert!(answer.starts_with("HTTP/1.1 401 "), "{answer}");

    let entries = || async {
        app.ok(
            "GET",
            "/api/v1/auditLog?actor=credential:rd-gateway-1",
            None,
            200,
        )
        .await
        .to_string()
    };
    let written = eventually(PATIENCE, || async {
        let text = entries().await;
        text.contains("Windows sign-in refused: an NTLM sign-in refused")
            && text.contains("127.0.0.1")
    })
    .await;
    assert!(written, "{}", entries().await);
    // The report itself is not recorded a second time.
    assert!(
        !entries().await.contains("POST /api/v1/auditLog"),
        "{}",
        entries().await
    );

    // What a gateway could not say is refused whole, and only a gateway (or
    // the admin) may say it.
    let url = format!("{}/api/v1/auditLog/signInRefusals", app.url);
    let report = |token: String, body: serde_json::Value| {
        let url = url.clone();
        async move {
            let client = reqwest::Client::new();
            let sent = client.post(url).bearer_auth(token).json(&body).send();
            sent.await.expect("report").status().as_u16()
        }
    };
    for bad in [
        json!({"source": "127.0.0.1", "reason": "anything I like"}),
        json!({"source": "not an address", "reason": "a malformed token"}),
        json!({"source": "127.0.0.1", "user": "a b", "reason": "a malformed token"}),
        json!({"source": "127.0.0.1", "reason": "a malformed token", "extra": 1}),
    ] {
        assert_eq!(report(token.clone(), bad.clone()).await, 400, "{bad}");
    }
    let reader = credential(&app, "auditor", "reader", &[]).await;
    let good = json!({"source": "127.0.0.1", "reason": "a malformed token"});
    assert_eq!(report(reader, good.clone()).await, 403);
    assert_eq!(report(token, good).await, 204);
}
