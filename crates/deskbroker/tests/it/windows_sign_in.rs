//! Rule AD2 against a real Active Directory domain controller (Samba,
//! `support::domain`): the RD Gateway challenges a client without a
//! ticket with `401 Negotiate`; a Kerberos ticket from the DC's KDC for
//! `HTTP/gateway.deskbroker.test` (MIT `kinit`, then MIT curl's SPNEGO
//! token) signs the user in, and the tunnel it opens places that user by
//! the pool's rules, the directory's groups deciding; a ticket for another
//! service, a replayed one and a pool that takes only connection tickets
//! are refused, and refusals audited; many failures from one source are
//! throttled; a ticket client is never challenged.

use std::path::Path;
use std::process::Command;

use ::gateway::tsgu::hresult::*;
use ::gateway::tsgu::packet::*;
use ::gateway::tsgu::{Decoder, Packet};
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::{Bytes, Message};

use crate::directory::{directory_flags, domain};
use crate::support::domain::Domain;
use crate::*;

const PASSWORD: &str = "Sesame-0pen!";
pub(crate) const GATEWAY_NAME: &str = "gateway.deskbroker.test";

/// The SPNEGO token MIT curl makes for `HTTP/<name>` as the user of
/// `ccache`: curl sends it to a listener of this test (plain HTTP, `name`
/// resolving to it), which takes it and answers 200, so that the token is
/// fresh when the test presents it to the gateway.
async fn negotiate_token(krb5_conf: &Path, ccache: &Path, name: &str) -> String {
    let curl = require("curl", "curl");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let mut cmd = tokio::process::Command::new(curl);
    cmd.args(["-s", "--negotiate", "-u", ":", "--max-time", "10"])
        .arg("--resolve")
        .arg(format!("{name}:{port}:127.0.0.1"))
        .arg(format!("http://{name}:{port}/"))
        .env("KRB5_CONFIG", krb5_conf)
        .env("KRB5CCNAME", format!("FILE:{}", ccache.display()))
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("run curl");
    let token = async {
        // curl asks without a token first, or with one at once: answer
        // the first with the challenge.
        loop {
            let (mut tcp, _) = listener.accept().await.expect("accept");
            let head = read_head(&mut tcp).await;
            let token = head.lines().find_map(|l| {
                let (name, value) = l.split_once(':')?;
                let value = value.trim();
                (name.eq_ignore_ascii_case("authorization") && value.starts_with("Negotiate "))
                    .then(|| value["Negotiate ".len()..].to_string())
            });
            match token {
                Some(t) => {
                    let _ = tcp
                        .write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        )
                        .await;
                    return t;
                }
                None => {
                    let _ = tcp
                        .write_all(
                            b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Negotiate\r\n\
                              Content-Length: 0\r\nConnection: close\r\n\r\n",
                        )
                        .await;
                }
            }
        }
    };
    let token = tokio::time::timeout(PATIENCE, token)
        .await
        .expect("curl's Negotiate token");
    let _ = child.wait().await;
    token
}

/// A request head, read byte by byte up to its empty line.
pub(crate) async fn read_head<S: tokio::io::AsyncRead + Unpin>(s: &mut S) -> String {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        match tokio::time::timeout(PATIENCE, s.read(&mut b)).await {
            Ok(Ok(1)) => head.push(b[0]),
            _ => break,
        }
        assert!(head.len() < 16 * 1024, "a head too long");
    }
    String::from_utf8_lossy(&head).into_owned()
}

pub(crate) type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// An RD Gateway tunnel on a WebSocket, driven packet by packet.
pub(crate) struct Tunnel {
    ws: WebSocketStream<Tls>,
    decoder: Decoder,
    pending: Vec<Packet>,
}

/// `RDG_OUT_DATA` with the WebSocket upgrade and `headers`: the answer's
/// head, and the tunnel when it was upgraded.
pub(crate) async fn open(gateway: &str, headers: &str) -> (String, Option<Tunnel>) {
    let mut tls = crate::support::web::tls(gateway).await.expect("TLS");
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let id = SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let answer = out_request(&mut tls, id, headers).await;
    upgraded(answer, tls).await
}

/// Sends `RDG_OUT_DATA` with the WebSocket upgrade, the connection id
/// `id` and `headers` on `tls`; reads the answer's head.
pub(crate) async fn out_request(tls: &mut Tls, id: u64, headers: &str) -> String {
    let head = format!("{}\r\n", websocket_head(id, headers));
    tls.write_all(head.as_bytes()).await.expect("head");
    read_head(tls).await
}

/// The lines of an `RDG_OUT_DATA` head with the WebSocket upgrade, the
/// connection id `id` and `headers` (each line ending in CR LF), without
/// the empty line that ends it.
pub(crate) fn websocket_head(id: u64, headers: &str) -> String {
    format!(
        "RDG_OUT_DATA /remoteDesktopGateway/ HTTP/1.1\r\nHost: {GATEWAY_NAME}\r\n\
         Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nRDG-Connection-Id: {{ad2-{id}}}\r\n\
         {headers}"
    )
}

/// The tunnel on `tls`, when `answer` upgraded it.
pub(crate) async fn upgraded(answer: String, tls: Tls) -> (String, Option<Tunnel>) {
    if !answer.starts_with("HTTP/1.1 101 ") {
        return (answer, None);
    }
    let ws = WebSocketStream::from_raw_socket(tls, Role::Client, None).await;
    let tunnel = Tunnel {
        ws,
        decoder: Decoder::new(),
        pending: Vec::new(),
    };
    (answer, Some(tunnel))
}

impl Tunnel {
    async fn send(&mut self, p: Packet) {
        let bytes = p.to_bytes().expect("encodes");
        self.ws
            .send(Message::Binary(Bytes::from(bytes)))
            .await
            .expect("send");
    }

    async fn recv(&mut self) -> Option<Packet> {
        loop {
            if !self.pending.is_empty() {
                return Some(self.pending.remove(0));
            }
            let message = tokio::time::timeout(PATIENCE, self.ws.next())
                .await
                .expect("an answer in time");
            let bytes = match message {
                Some(Ok(Message::Binary(b))) => b.to_vec(),
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return None,
                Some(Ok(_)) => continue,
            };
            let mut input = &bytes[..];
            while let Some(p) = self.decoder.decode(&mut input).expect("packet") {
                self.pending.push(p);
            }
        }
    }

    /// Handshake, tunnel (with `token` as its access token when given),
    /// tunnel auth, channel to `resource`: the HRESULT of the first answer
    /// that refused, or the channel's.
    pub(crate) async fn setup(&mut self, token: Option<&str>, resource: &str) -> u32 {
        self.send(Packet::HandshakeRequest(HandshakeRequest {
            version_major: 1,
            version_minor: 0,
            client_version: 0,
            extended_auth: if token.is_some() {
                HTTP_EXTENDED_AUTH_PAA
            } else {
                0
            },
        }))
        .await;
        match self.recv().await {
            Some(Packet::HandshakeResponse(r)) if r.error_code == S_OK => {}
            Some(Packet::HandshakeResponse(r)) => return r.error_code,
            other => panic!("handshake response: {other:?}"),
        }
        self.send(Packet::TunnelCreate(TunnelCreate {
            capabilities: 0,
            reauth_context: None,
            paa_cookie: token.map(str::to_string),
        }))
        .await;
        match self.recv().await {
            Some(Packet::TunnelResponse(r)) if r.status_code == S_OK => {}
            Some(Packet::TunnelResponse(r)) => return r.status_code,
            other => panic!("tunnel response: {other:?}"),
        }
        self.send(Packet::TunnelAuth(TunnelAuth {
            client_name: "laptop".into(),
            statement_of_health: None,
        }))
        .await;
        let Some(Packet::TunnelAuthResponse(r)) = self.recv().await else {
            panic!("tunnel auth response")
        };
        assert_eq!(r.error_code, S_OK);
        self.send(Packet::ChannelCreate(ChannelCreate {
            resources: vec![resource.into()],
            alternate_resources: vec![],
            port: 3389,
            protocol: CHANNEL_PROTOCOL_RDP,
        }))
        .await;
        let Some(Packet::ChannelResponse(r)) = self.recv().await else {
            panic!("channel response")
        };
        r.error_code
    }

    /// Sends `data` through the channel; what comes back, `want` bytes.
    pub(crate) async fn exchange(&mut self, data: &[u8], want: usize) -> Vec<u8> {
        self.send(Packet::Data(data.to_vec())).await;
        let mut got = Vec::new();
        while got.len() < want {
            match self.recv().await {
                Some(Packet::Data(d)) => got.extend_from_slice(&d),
                other => panic!("data: {other:?}"),
            }
        }
        got
    }
}

pub(crate) fn negotiate(token: &str) -> String {
    format!("Authorization: Negotiate {token}\r\n")
}

/// The pool `name` with one echoing host, entitled to the group RDS-Users,
/// its `gatewaySignIn` as given.
pub(crate) async fn pool(app: &App, name: &str, sign_in: &str) {
    let host = crate::support::wire::echo_host().await;
    app.ok(
        "PUT",
        &format!("/api/v1/hostPools/{name}"),
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
            "allowedAddressRanges": ["127.0.0.0/8"], "entitledGroups": ["RDS-Users"],
            "gatewaySignIn": sign_in}),
        ),
        201,
    )
    .await;
    app.ok(
        "PUT",
        &format!("/api/v1/hostPools/{name}/sessionHosts/h1"),
        Some(json!({"address": host})),
        201,
    )
    .await;
}

/// The gateway's service account with its keytab, and another service
/// whose keys the gateway does not hold.
pub(crate) fn services(dc: &Domain, dir: &Path) -> std::path::PathBuf {
    for account in ["gateway-svc", "other-svc"] {
        dc.add_user(account, PASSWORD);
    }
    let keytab = dir.join("gateway.keytab");
    dc.add_service_keytab("gateway-svc", &format!("HTTP/{GATEWAY_NAME}"), &keytab);
    let other = dir.join("other.keytab");
    dc.add_service_keytab("other-svc", "HTTP/other.deskbroker.test", &other);
    keytab
}

#[tokio::test]
async fn a_kerberos_signed_in_user_is_placed_by_the_directory_through_the_rd_gateway() {
    let dc = domain();
    let dir = tempfile::tempdir().expect("tempdir");
    let keytab = services(&dc, dir.path());
    let conf = dc.krb5_conf(dir.path());
    let ccache = |user: &str| {
        let path = dir.path().join(format!("{user}.ccache"));
        dc.kinit(&conf, user, PASSWORD, &path).expect("kinit");
        path
    };
    let (alice, bob) = (ccache("alice"), ccache("bob"));

    let mut flags = directory_flags(&dc, &dc.ldaps_url(), 300);
    let keytab_arg = keytab.display().to_string();
    flags.extend(
        [
            "--gateway-keytab",
            &keytab_arg,
            "--gateway-service-name",
            GATEWAY_NAME,
        ]
        .map(String::from),
    );
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (app, gateway) = App::spawn_with_rd_gateway(&dir.path().join("data"), &flags);
    pool(&app, "farm", "TicketOrWindows").await;
    pool(&app, "ticketonly", "Ticket").await;
    let shown = app.ok("GET", "/api/v1/hostPools/farm", None, 200).await;
    assert_eq!(shown["gatewaySignIn"], "TicketOrWindows", "{shown}");
    let shown = app
        .ok("GET", "/api/v1/hostPools/ticketonly", None, 200)
        .await;
    assert_eq!(shown["gatewaySignIn"], "Ticket", "{shown}");

    // No ticket, no sign-in: challenged.
    let (answer, _) = open(&gateway, "").await;
    assert!(
        answer.starts_with("HTTP/1.1 401 ") && answer.contains("WWW-Authenticate: Negotiate\r\n"),
        "{answer}"
    );

    // alice (in RDS-Users through Sales) signs in with Kerberos: the
    // gateway proves itself in its answer, and her tunnel reaches farm's
    // host, placed as alice@deskbroker.test.
    let token = negotiate_token(&conf, &alice, GATEWAY_NAME).await;
    let (answer, tunnel) = open(&gateway, &negotiate(&token)).await;
    assert!(answer.contains("WWW-Authenticate: Negotiate "), "{answer}");
    let mut tunnel = tunnel.expect("upgraded");
    assert_eq!(tunnel.setup(None, "farm").await, S_OK);
    // The host answers the first PDU, then echoes: bytes relayed both ways.
    let first = crate::support::wire::first_pdu("Cookie: mstshash=alice");
    assert_eq!(tunnel.exchange(&first, 2).await, b"CC");
    assert_eq!(tunnel.exchange(b"ping", 4).await, b"ping");
    let placed = session_of(&app, "farm", "alice@deskbroker.test").await;
    assert_eq!(placed.map(|(host, _)| host), Some("h1".to_string()));

    // The same token again: a replay, refused.
    let (answer, _) = open(&gateway, &negotiate(&token)).await;
    assert!(answer.starts_with("HTTP/1.1 401 "), "{answer}");

    // bob signs in, but no group of his is entitled: refused at the
    // channel, placed nowhere.
    let token = negotiate_token(&conf, &bob, GATEWAY_NAME).await;
    let (_, tunnel) = open(&gateway, &negotiate(&token)).await;
    let code = tunnel.expect("upgraded").setup(None, "farm").await;
    assert_ne!(code, S_OK, "{code:#x}");
    assert_eq!(session_of(&app, "farm", "bob@deskbroker.test").await, None);

    // A pool that takes only tickets refuses alice's Windows sign-in.
    let token = negotiate_token(&conf, &alice, GATEWAY_NAME).await;
    let (_, tunnel) = open(&gateway, &negotiate(&token)).await;
    let code = tunnel.expect("upgraded").setup(None, "ticketonly").await;
    assert_eq!(code, E_PROXY_RAP_ACCESSDENIED, "{code:#x}");
    assert_eq!(
        session_of(&app, "ticketonly", "alice@deskbroker.test").await,
        None
    );

    // A ticket for another service, presented to the gateway: refused.
    let token = negotiate_token(&conf, &alice, "other.deskbroker.test").await;
    let (answer, _) = open(&gateway, &negotiate(&token)).await;
    assert!(answer.starts_with("HTTP/1.1 401 "), "{answer}");

    // A ticket client (RDG-Auth-Scheme: PAA) is not challenged: its
    // connection ticket decides, as on a gateway without a keytab.
    let ticket = crate::support::web::ticket(&app, "ticketonly", "carol").await;
    let (answer, tunnel) = open(&gateway, "RDG-Auth-Scheme: PAA\r\n").await;
    let mut tunnel = tunnel.unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(tunnel.setup(Some(&ticket), "ticketonly").await, S_OK);

    // The refusals are in the audit log, folded, by source and reason.
    let log = app
        .ok("GET", "/api/v1/auditLog?actor=rd-gateway", None, 200)
        .await;
    let text = log.to_string();
    for said in [
        "a Kerberos ticket refused",
        "a pool that takes only tickets",
        "127.0.0.1",
        "users/alice@deskbroker.test",
    ] {
        assert!(text.contains(said), "{said} not in {text}");
    }
}

#[tokio::test]
async fn failed_windows_sign_ins_are_throttled_per_source_and_a_loose_keytab_is_refused() {
    let dc = Domain::start();
    dc.add_user("alice", PASSWORD);
    let dir = tempfile::tempdir().expect("tempdir");
    let keytab = services(&dc, dir.path());
    let conf = dc.krb5_conf(dir.path());
    let alice = dir.path().join("alice.ccache");
    dc.kinit(&conf, "alice", PASSWORD, &alice).expect("kinit");

    // A keytab others may read is refused at start.
    let loose = dir.path().join("loose.keytab");
    std::fs::copy(&keytab, &loose).expect("copy the keytab");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let tls = TlsFiles::make(&require("openssl", "openssl"), dir.path());
    let out = Command::new(exe())
        .args(["gateway", "--broker", "http://127.0.0.1:9", "--token", "x"])
        .args(["--gateway-listen", "127.0.0.1:0", "--gateway-tls-cert"])
        .arg(&tls.certificate)
        .arg("--gateway-tls-key")
        .arg(&tls.key)
        .arg("--gateway-keytab")
        .arg(&loose)
        .args(["--gateway-service-name", GATEWAY_NAME])
        .output()
        .expect("run deskbroker gateway");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("--gateway-keytab"),
        "{said}"
    );

    let keytab_arg = keytab.display().to_string();
    let (app, gateway) = App::spawn_with_rd_gateway(
        &dir.path().join("data"),
        &[
            "--gateway-keytab",
            &keytab_arg,
            "--gateway-service-name",
            GATEWAY_NAME,
        ],
    );
    pool(&app, "farm", "TicketOrWindows").await;
    // The setting through the CLI, refused when it is no value of its own,
    // and described in the OpenAPI document.
    let (ok, _, err) = app.cli(&[
        "hostpool",
        "update",
        "--name",
        "farm",
        "--gateway-sign-in",
        "Ticket",
    ]);
    assert!(ok, "{err}");
    let shown = app.ok("GET", "/api/v1/hostPools/farm", None, 200).await;
    assert_eq!(shown["gatewaySignIn"], "Ticket", "{shown}");
    app.refused(
        "PATCH",
        "/api/v1/hostPools/farm",
        Some(json!({"gatewaySignIn": "Kerberos"})),
        400,
        "InvalidParameter",
    )
    .await;
    let doc = app.ok("GET", "/openapi.json", None, 200).await;
    assert!(
        doc["components"]["schemas"]["GatewaySignIn"].is_object(),
        "no GatewaySignIn in the OpenAPI document"
    );

    // Tokens that are no Kerberos ticket, from one source: refused, until
    // the source has had its share of failures this minute; then refused
    // untried (429), alice's good ticket too.
    let mut answers = Vec::new();
    for _ in 0..::gateway::windows_sign_in::MAX_FAILURES_PER_MINUTE + 1 {
        let (answer, _) = open(&gateway, &negotiate("YWJjZA==")).await;
        answers.push(answer.lines().next().unwrap_or_default().to_string());
    }
    assert!(answers[0].starts_with("HTTP/1.1 401 "), "{answers:?}");
    assert!(
        answers
            .last()
            .is_some_and(|a| a.starts_with("HTTP/1.1 429 ")),
        "{answers:?}"
    );
    let token = negotiate_token(&conf, &alice, GATEWAY_NAME).await;
    let (answer, _) = open(&gateway, &negotiate(&token)).await;
    assert!(answer.starts_with("HTTP/1.1 429 "), "{answer}");
    // The failures are one audit entry of the minute, counted.
    let log = app
        .ok("GET", "/api/v1/auditLog?actor=rd-gateway", None, 200)
        .await;
    let entries = log["value"].as_array().cloned().unwrap_or_default();
    assert_eq!(entries.len(), 1, "{log}");
}
