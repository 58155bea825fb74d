//! The browser's door (rule WEB2) end to end: `deskbroker serve
//! --gateway-listen` serves `GET /web/rdp`, and the test is the browser — a
//! WebSocket client over HTTPS that speaks RDCleanPath as IronRDP's web
//! client does, with IronRDP's own connection sequence
//! (`ironrdp-connector`, the code the browser's wasm runs) driven through
//! the tunnel against a real xrdp until the connection is up. Refused
//! requests are sent at a session "host" that only counts connections, to
//! show that none reaches it. The rig (xrdp, openssl) is the front door's,
//! in `rdp.rs`; like it, this fails when those programs are missing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::{SinkExt, StreamExt};
use ironrdp_connector::{ClientConnector, ClientConnectorState, Sequence};
use ironrdp_pdu::WriteBuf;
use ironrdp_rdcleanpath::{RDCleanPathMessage, RDCleanPathPdu};
use serde_json::json;
use tokio_tungstenite::tungstenite::{Bytes, Message};

use crate::web::{
    CountingHost, Socket, connector, host, open, pool, request, session_id, ticket, x224_request,
};
use crate::{App, PATIENCE, Xrdp, eventually, require, wait_session};

/// The next binary message, or `None` once the socket has closed.
async fn next_binary(ws: &mut Socket) -> Option<Vec<u8>> {
    loop {
        match tokio::time::timeout(PATIENCE, ws.next()).await {
            Ok(Some(Ok(Message::Binary(b)))) => return Some(b.to_vec()),
            Ok(Some(Ok(Message::Close(_)))) | Ok(Some(Err(_))) | Ok(None) => return None,
            Ok(Some(Ok(_))) => {}
            Err(_) => panic!("nothing from the gateway within {PATIENCE:?}"),
        }
    }
}

/// Whether the socket closes with no further binary message.
async fn closes(ws: &mut Socket) -> bool {
    next_binary(ws).await.is_none()
}

/// The RDCleanPath answer to `request`.
async fn ask(ws: &mut Socket, request: &RDCleanPathPdu) -> RDCleanPathMessage {
    let der = request.to_der().expect("encode");
    ws.send(Message::Binary(Bytes::from(der)))
        .await
        .expect("send the request");
    let answer = next_binary(ws).await.expect("an RDCleanPath answer");
    RDCleanPathPdu::from_der(&answer)
        .expect("DER")
        .into_message()
        .expect("an RDCleanPath message")
}

/// The HTTP status of an RDCleanPath general error (panics on anything else).
fn refused_status(answer: &RDCleanPathMessage) -> u16 {
    match answer {
        RDCleanPathMessage::GeneralErr(e) => e.http_status_code.expect("an HTTP status"),
        other => panic!("not a refusal: {other:?}"),
    }
}

/// A browser's connection up to the RDCleanPath response: the connector,
/// the socket, and the answer.
async fn start(
    gateway: &str,
    user: &str,
    destination: &str,
    ticket: &str,
) -> (ClientConnector, Socket, RDCleanPathMessage) {
    let mut connector = connector(user);
    let x224 = x224_request(&mut connector);
    let mut ws = open(gateway).await.expect("the socket opens");
    let request =
        RDCleanPathPdu::new_request(x224, destination.to_string(), ticket.to_string(), None)
            .expect("request");
    let answer = ask(&mut ws, &request).await;
    (connector, ws, answer)
}

/// Runs the connection sequence after a successful RDCleanPath response,
/// reading and writing the session's plaintext through the socket, until
/// the connector is connected (the host has answered every step).
async fn connect_through(connector: &mut ClientConnector, ws: &mut Socket, confirm: &[u8]) {
    let mut buf = WriteBuf::new();
    let written = connector
        .step(confirm, None, &mut buf)
        .expect("the confirm");
    assert!(written.is_nothing());
    assert!(
        connector.should_perform_security_upgrade(),
        "{:?}",
        connector.state
    );
    // The TLS with the host is the gateway's.
    connector.mark_security_upgrade_as_done();
    let mut pending: Vec<u8> = Vec::new();
    let steps = async {
        loop {
            if matches!(connector.state, ClientConnectorState::Connected { .. }) {
                return;
            }
            buf.clear();
            let written = match connector.next_pdu_hint() {
                None => connector.step_no_input(&mut buf),
                Some(hint) => {
                    let pdu = loop {
                        let size = hint.find_size(&pending).expect("a PDU from the host");
                        match size {
                            Some((_, n)) if pending.len() >= n => {
                                break pending.drain(..n).collect::<Vec<u8>>();
                            }
                            _ => {
                                let more = next_binary(ws).await.unwrap_or_else(|| {
                                    panic!("the socket closed in {:?}", connector.state)
                                });
                                pending.extend_from_slice(&more);
                            }
                        }
                    };
                    connector.step(&pdu, None, &mut buf)
                }
            };
            let written = written.unwrap_or_else(|e| panic!("connector: {e:?}"));
            if let Some(n) = written.size() {
                ws.send(Message::Binary(Bytes::copy_from_slice(&buf.filled()[..n])))
                    .await
                    .expect("send to the host");
            }
        }
    };
    tokio::time::timeout(PATIENCE, steps)
        .await
        .expect("the connection sequence finishes");
}

/// xrdp's certificate (DER), as made for it in its directory.
fn xrdp_certificate(dir: &std::path::Path) -> Vec<u8> {
    use rustls_pki_types::pem::PemObject;
    rustls_pki_types::CertificateDer::from_pem_file(dir.join("cert.pem"))
        .expect("xrdp's certificate")
        .to_vec()
}

async fn session_count(app: &App, pool: &str) -> usize {
    app.ok(
        "GET",
        &format!("/api/v1/hostPools/{pool}/userSessions"),
        None,
        200,
    )
    .await["value"]
        .as_array()
        .map_or(0, Vec::len)
}

#[tokio::test]
async fn a_browser_reaches_the_host_the_broker_places_it_on_and_comes_back_to_it() {
    let xrdp = require("xrdp", "xrdp");
    let openssl = require("openssl", "openssl");
    let dir = tempfile::tempdir().expect("tempdir");
    let xrdp_dir = dir.path().join("xrdp");
    let h1 = Xrdp::start(&xrdp, &openssl, &xrdp_dir);
    let elsewhere = CountingHost::start().await;
    // A port bound and never listening: refused at once, and no other
    // socket can take it meanwhile.
    let dead = tokio::net::TcpSocket::new_v4().expect("socket");
    dead.bind(([127, 0, 0, 1], 0).into()).expect("bind");
    let dead_address = dead.local_addr().expect("addr").to_string();
    let (app, gateway) = App::spawn_with_rd_gateway(&dir.path().join("data"), &[]);
    pool(&app, "farm", true).await;
    // h0 cannot be reached; bob's session there makes it DepthFirst's
    // first choice for alice, so her connection must pass over it (R5).
    host(&app, "farm", "h0", &dead_address).await;
    host(&app, "farm", "h1", &h1.address).await;
    let bob = app
        .ok(
            "POST",
            "/api/v1/hostPools/farm/connect",
            Some(json!({"user": "bob"})),
            200,
        )
        .await;
    assert_eq!(bob["sessionHost"], "h0");

    // The destination names another machine: it is ignored.
    let first = ticket(&app, "farm", "alice").await;
    let (mut connector, mut ws, answer) =
        start(&gateway, "alice", &elsewhere.address, &first).await;
    let RDCleanPathMessage::Response {
        x224_connection_response,
        server_cert_chain,
        server_addr,
    } = answer
    else {
        panic!("not a response: {answer:?}");
    };
    assert_eq!(server_addr, "h1");
    assert_eq!(
        server_cert_chain
            .first()
            .map(|c| c.as_bytes().to_vec())
            .expect("a chain"),
        xrdp_certificate(&xrdp_dir),
        "the chain's leaf is xrdp's certificate"
    );
    // The host's own Connection Confirm: it chose TLS.
    let confirm: ironrdp_pdu::x224::X224<ironrdp_pdu::nego::ConnectionConfirm> =
        ironrdp_pdu::decode(x224_connection_response.as_bytes()).expect("an X.224 confirm");
    assert!(
        matches!(
            confirm.0,
            ironrdp_pdu::nego::ConnectionConfirm::Response { protocol, .. }
                if protocol.contains(ironrdp_pdu::nego::SecurityProtocol::SSL)
        ),
        "{confirm:?}"
    );
    // IronRDP's connection sequence through the tunnel: xrdp answers every
    // step, over the TLS the gateway holds with it.
    connect_through(&mut connector, &mut ws, x224_connection_response.as_bytes()).await;
    assert!(h1.tls_connections() >= 1, "{}", h1.log());
    wait_session(&app, "farm", "alice", "h1", "Active").await;
    assert_eq!(elsewhere.accepted(), 0, "the named destination was dialled");
    let (id, _) = session_id(&app, "farm", "alice").await;

    // The socket closes: Disconnected, and kept (a logon could have begun).
    let _ = ws.close(None).await;
    drop(ws);
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;

    // S1: her next connection goes back to her session on h1.
    let again = ticket(&app, "farm", "alice").await;
    let (mut connector, mut ws, answer) = start(&gateway, "alice", "anything", &again).await;
    let RDCleanPathMessage::Response {
        x224_connection_response,
        server_addr,
        ..
    } = answer
    else {
        panic!("not a response: {answer:?}");
    };
    assert_eq!(server_addr, "h1");
    connect_through(&mut connector, &mut ws, x224_connection_response.as_bytes()).await;
    wait_session(&app, "farm", "alice", "h1", "Active").await;
    assert_eq!(session_id(&app, "farm", "alice").await, (id, "h1".into()));
    drop(ws);
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;
    assert_eq!(elsewhere.accepted(), 0);
}

/// Seconds since the Unix epoch.
fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// Rule T3 at the browser's door: whatever is wrong with the ticket, the
/// answer is an RDCleanPath error with the broker's status, the socket
/// closes, and no host is dialled nor session made.
#[tokio::test]
async fn refused_tickets_get_the_brokers_status_and_reach_no_host() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (app, gateway) = App::spawn_with_rd_gateway(&dir.path().join("data"), &[]);
    let hosts = [
        CountingHost::start().await,
        CountingHost::start().await,
        CountingHost::start().await,
    ];
    for (pool_name, allowed, host_name, h) in [
        ("farm", true, "f1", &hosts[0]),
        ("other", true, "o1", &hosts[1]),
        ("closed", false, "c1", &hosts[2]),
    ] {
        pool(&app, pool_name, allowed).await;
        host(&app, pool_name, host_name, &h.address).await;
    }
    let good = ticket(&app, "farm", "alice").await;
    let key = api::ticket::TicketKey::derive(&crate::signing_secret(&app.data_dir).await);
    let soon = now() + 300;
    let mut flipped = good.clone().into_bytes();
    // The MAC is the fourth field; change one of its characters.
    let mac_at = good.match_indices(':').nth(2).expect("fields").0 + 1;
    flipped[mac_at] = if flipped[mac_at] == b'A' { b'B' } else { b'A' };
    let other = ticket(&app, "other", "alice").await;
    let cases: Vec<(&str, Option<String>, u16)> = vec![
        ("no ticket", None, 401),
        ("not a ticket", Some("Bearer abc".into()), 403),
        (
            "a changed MAC",
            Some(String::from_utf8(flipped).unwrap()),
            403,
        ),
        (
            "another user",
            Some(good.replace(":alice", ":mallory")),
            403,
        ),
        (
            "expired",
            Some(key.issue("farm", "alice", now() - 60).expect("fits")),
            403,
        ),
        (
            "another pool's ticket, renamed",
            Some(other.replace("dbt1:other:", "dbt1:farm:")),
            403,
        ),
        (
            "another broker's",
            Some(
                api::ticket::TicketKey::derive("another broker's signing secret")
                    .issue("farm", "alice", soon)
                    .expect("fits"),
            ),
            403,
        ),
        (
            "a pool closed to the doors",
            Some(key.issue("closed", "alice", soon).expect("fits")),
            403,
        ),
        (
            "a pool that does not exist",
            Some(key.issue("nowhere", "alice", soon).expect("fits")),
            403,
        ),
    ];
    for (what, ticket, status) in cases {
        let mut ws = open(&gateway).await.expect("the socket opens");
        let answer = ask(&mut ws, &request(ticket.as_deref(), &hosts[0].address)).await;
        assert_eq!(refused_status(&answer), status, "{what}: {answer:?}");
        assert!(closes(&mut ws).await, "{what}: the socket stays open");
    }
    for h in &hosts {
        assert_eq!(h.accepted(), 0, "a refused ticket reached {}", h.address);
    }
    for pool_name in ["farm", "other", "closed"] {
        assert_eq!(session_count(&app, pool_name).await, 0, "{pool_name}");
    }
}

/// A Connection Confirm refusing the negotiation: RDP_NEG_FAILURE,
/// HYBRID_REQUIRED_BY_SERVER.
const NEGOTIATION_FAILURE: [u8; 19] = [
    0x03, 0x00, 0x00, 0x13, 0x0e, 0xd0, 0x00, 0x00, 0x12, 0x34, 0x00, 0x03, 0x00, 0x08, 0x00, 0x05,
    0x00, 0x00, 0x00,
];

/// A host that answers every Connection Request with [`NEGOTIATION_FAILURE`].
async fn refusing_host() -> (String, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("addr").to_string();
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut header = [0u8; 4];
                if stream.read_exact(&mut header).await.is_err() {
                    return;
                }
                let length = usize::from(u16::from_be_bytes([header[2], header[3]]));
                let mut rest = vec![0u8; length.saturating_sub(4)];
                if stream.read_exact(&mut rest).await.is_ok() {
                    let _ = stream.write_all(&NEGOTIATION_FAILURE).await;
                }
            });
        }
    });
    (address, task)
}

/// Requests that are junk, too big, incomplete or never sent are refused
/// (or cut) before any host is dialled; a source over its bound is closed
/// before TLS; a host that does not answer, or refuses the negotiation,
/// gets its new session ended and the browser the protocol's error.
#[tokio::test]
async fn bad_requests_silent_clients_and_crowds_never_reach_a_host() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (app, gateway) = App::spawn_with_rd_gateway(
        &dir.path().join("data"),
        &["--rdp-max-handshakes-per-source", "3"],
    );
    let target = CountingHost::start().await;
    pool(&app, "farm", true).await;
    host(&app, "farm", "f1", &target.address).await;
    let good = ticket(&app, "farm", "alice").await;

    let oversized = request(Some(&good), &"x".repeat(20_000));
    let no_tls = {
        // A Connection Request without RDP_NEG_REQ: Standard RDP Security.
        let mut pdu = request(Some(&good), "h");
        pdu.x224_connection_pdu = Some(
            ironrdp_rdcleanpath::der::asn1::OctetString::new(vec![
                0x03, 0x00, 0x00, 0x0b, 0x06, 0xe0, 0x00, 0x00, 0x00, 0x00, 0x00,
            ])
            .expect("octets"),
        );
        pdu
    };
    let junk_x224 = {
        let mut pdu = request(Some(&good), "h");
        pdu.x224_connection_pdu = Some(
            ironrdp_rdcleanpath::der::asn1::OctetString::new(b"junk".to_vec()).expect("octets"),
        );
        pdu
    };
    let with_blob = {
        let mut pdu = request(Some(&good), "h");
        pdu.preconnection_blob = Some("vm".into());
        pdu
    };
    let der = |pdu: &RDCleanPathPdu| Message::Binary(Bytes::from(pdu.to_der().expect("der")));
    let cases: Vec<(&str, Message, u16)> = vec![
        ("a request over 8 KiB", der(&oversized), 413),
        (
            "not DER",
            Message::Binary(Bytes::from_static(b"GET / HTTP/1.1\r\n")),
            400,
        ),
        ("text", Message::Text("hello".into()), 400),
        ("no TLS asked for", der(&no_tls), 400),
        ("junk for X.224", der(&junk_x224), 400),
        ("a preconnection blob", der(&with_blob), 400),
    ];
    for (what, message, status) in cases {
        let mut ws = open(&gateway).await.expect("the socket opens");
        ws.send(message).await.expect("send");
        let answer = next_binary(&mut ws).await.expect("an answer");
        let answer = RDCleanPathPdu::from_der(&answer)
            .expect("DER")
            .into_message()
            .expect("RDCleanPath");
        assert_eq!(refused_status(&answer), status, "{what}: {answer:?}");
        assert!(closes(&mut ws).await, "{what}");
    }
    // A message over the WebSocket's own bound is not even read whole.
    let mut ws = open(&gateway).await.expect("the socket opens");
    let _ = ws
        .send(Message::Binary(Bytes::from(vec![0x30u8; 200 * 1024])))
        .await;
    assert!(closes(&mut ws).await, "a 200 KiB message was taken");

    // Three sockets that say nothing hold the source's three handshakes: a
    // fourth is closed before TLS. The three are cut at the handshake
    // timeout, unanswered, and the source may connect again.
    let mut silent = Vec::new();
    for _ in 0..3 {
        silent.push(open(&gateway).await.expect("the socket opens"));
    }
    assert!(
        open(&gateway).await.is_err(),
        "a fourth connection in handshake was let in"
    );
    for ws in &mut silent {
        assert!(closes(ws).await, "a silent client was answered");
    }
    let back = eventually(PATIENCE, || async { open(&gateway).await.is_ok() }).await;
    assert!(back, "the source stayed locked out");
    assert_eq!(target.accepted(), 0, "a refused request reached the host");
    assert_eq!(session_count(&app, "farm").await, 0);

    // The counting host is reached by a good request — and, as it never
    // answers, the browser is told the host is unreachable and the new
    // session is ended.
    let mut ws = open(&gateway).await.expect("the socket opens");
    let answer = ask(&mut ws, &request(Some(&good), "h")).await;
    assert_eq!(refused_status(&answer), 502, "{answer:?}");
    assert_eq!(target.accepted(), 1);
    let ended = eventually(PATIENCE, || async {
        session_count(&app, "farm").await == 0
    })
    .await;
    assert!(ended, "the session of an unanswered connection was kept");

    // A host that refuses the negotiation: RDCleanPath's negotiation error
    // with the host's own Connection Confirm.
    let (refusing, _task) = refusing_host().await;
    pool(&app, "strict", true).await;
    host(&app, "strict", "s1", &refusing).await;
    let strict = ticket(&app, "strict", "alice").await;
    let mut ws = open(&gateway).await.expect("the socket opens");
    let answer = ask(&mut ws, &request(Some(&strict), "h")).await;
    assert_eq!(
        answer,
        RDCleanPathMessage::NegotiationErr {
            x224_connection_response: NEGOTIATION_FAILURE.to_vec()
        }
    );
    let ended = eventually(PATIENCE, || async {
        session_count(&app, "strict").await == 0
    })
    .await;
    assert!(ended, "the session of a refused negotiation was kept");
}

/// `deskbroker gateway --gateway-listen` serves `/web/rdp` too, placing
/// through the broker's HTTP API with a `gateway` credential.
#[tokio::test]
async fn a_standalone_gateway_serves_the_browser_too() {
    let xrdp = require("xrdp", "xrdp");
    let openssl = require("openssl", "openssl");
    let dir = tempfile::tempdir().expect("tempdir");
    let xrdp_dir = dir.path().join("xrdp");
    let h1 = Xrdp::start(&xrdp, &openssl, &xrdp_dir);
    // The broker hands out connection files naming the stand-alone gateway.
    let (app, _) = App::spawn_with(
        &dir.path().join("data"),
        "127.0.0.1:0",
        &["--gateway-public-address", "gateway.example"],
    );
    pool(&app, "farm", true).await;
    host(&app, "farm", "h1", &h1.address).await;
    let credential = app
        .ok(
            "POST",
            "/api/v1/credentials",
            Some(json!({"name": "edge-1", "role": "gateway"})),
            201,
        )
        .await;
    let token = credential["token"].as_str().expect("token").to_string();
    let tls_dir = dir.path().join("gateway-tls");
    std::fs::create_dir_all(&tls_dir).expect("tls dir");
    let tls = crate::TlsFiles::make(&openssl, &tls_dir);
    let (_gateway_process, gateway) = crate::standalone_gateway(&app.url, &token, &tls, &[]);

    let first = ticket(&app, "farm", "alice").await;
    let (mut connector, mut ws, answer) = start(&gateway, "alice", "h1", &first).await;
    let RDCleanPathMessage::Response {
        x224_connection_response,
        server_cert_chain,
        ..
    } = answer
    else {
        panic!("not a response: {answer:?}");
    };
    assert_eq!(
        server_cert_chain[0].as_bytes(),
        xrdp_certificate(&xrdp_dir).as_slice()
    );
    connect_through(&mut connector, &mut ws, x224_connection_response.as_bytes()).await;
    wait_session(&app, "farm", "alice", "h1", "Active").await;
    let _ = ws.close(None).await;
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;

    // A forged ticket is refused there too, with the broker's status.
    let mut ws = open(&gateway).await.expect("the socket opens");
    let forged = first.replace(":alice", ":mallory");
    let answer = ask(&mut ws, &request(Some(&forged), "h1")).await;
    assert_eq!(refused_status(&answer), 403, "{answer:?}");
    assert_eq!(session_count(&app, "farm").await, 1);
}

/// A connection that gets its response and then says nothing is closed at
/// the idle bound without a logon, and its session, which never showed a
/// logon, is ended (S9); the host's TLS is closed.
#[tokio::test]
async fn a_silent_session_is_closed_at_the_idle_bound_and_ended() {
    let xrdp = require("xrdp", "xrdp");
    let openssl = require("openssl", "openssl");
    let dir = tempfile::tempdir().expect("tempdir");
    let h1 = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp"));
    let (app, gateway) = App::spawn_with_rd_gateway(
        &dir.path().join("data"),
        &["--rdp-idle-timeout-without-logon-seconds", "1"],
    );
    pool(&app, "farm", true).await;
    host(&app, "farm", "h1", &h1.address).await;
    let first = ticket(&app, "farm", "alice").await;
    let (_connector, mut ws, answer) = start(&gateway, "alice", "h1", &first).await;
    assert!(
        matches!(answer, RDCleanPathMessage::Response { .. }),
        "{answer:?}"
    );
    assert!(closes(&mut ws).await, "the idle socket was not closed");
    let ended = eventually(PATIENCE, || async {
        session_count(&app, "farm").await == 0
    })
    .await;
    assert!(ended, "a session without a logon was kept");
    // Its end says why: released by the broker's own door. A door's marks
    // are written in order but not waited for (rule S5), so the end's
    // entry may reach the store a moment after the session left memory.
    let reasons = || async {
        let listed = app
            .ok(
                "GET",
                "/api/v1/hostPools/farm/userSessions?includeEnded=true",
                None,
                200,
            )
            .await;
        listed["value"]
            .as_array()
            .expect("value")
            .iter()
            .map(|s| s["endReason"].clone())
            .collect::<Vec<_>>()
    };
    let recorded = eventually(PATIENCE, || async { !reasons().await.is_empty() }).await;
    assert!(recorded, "the end was never listed");
    assert_eq!(reasons().await, [json!("released")]);
}

/// A Connection Confirm choosing TLS: RDP_NEG_RSP, PROTOCOL_SSL.
const CONFIRM_TLS: [u8; 19] = [
    0x03, 0x00, 0x00, 0x13, 0x0e, 0xd0, 0x00, 0x00, 0x12, 0x34, 0x00, 0x02, 0x00, 0x08, 0x00, 0x01,
    0x00, 0x00, 0x00,
];

/// A session "host" that speaks just enough RDP for the browser's door: it
/// answers each Connection Request choosing TLS, does TLS with a
/// self-signed certificate, then holds the connection, saying nothing,
/// until the gateway closes it. Counts the connections it accepted and
/// the TLS connections it holds open now.
struct TlsHost {
    address: String,
    accepted: Arc<AtomicUsize>,
    open: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl TlsHost {
    async fn start() -> TlsHost {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        use tokio_rustls::rustls;
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .expect("params")
            .self_signed(&key)
            .expect("certificate");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .expect("server config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("addr").to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let open = Arc::new(AtomicUsize::new(0));
        let (count, held) = (accepted.clone(), open.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let (acceptor, held) = (acceptor.clone(), held.clone());
                tokio::spawn(async move {
                    let mut header = [0u8; 4];
                    if stream.read_exact(&mut header).await.is_err() {
                        return;
                    }
                    let length = usize::from(u16::from_be_bytes([header[2], header[3]]));
                    let mut rest = vec![0u8; length.saturating_sub(4)];
                    if stream.read_exact(&mut rest).await.is_err()
                        || stream.write_all(&CONFIRM_TLS).await.is_err()
                    {
                        return;
                    }
                    let Ok(mut tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    held.fetch_add(1, Ordering::SeqCst);
                    let mut buf = [0u8; 4096];
                    while matches!(tls.read(&mut buf).await, Ok(n) if n > 0) {}
                    held.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        TlsHost {
            address,
            accepted,
            open,
            task,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Whether the host comes to hold `n` TLS connections open (it counts
    /// each once its side of the handshake is done).
    async fn holds(&self, n: usize) -> bool {
        eventually(PATIENCE, || async { self.open.load(Ordering::SeqCst) == n }).await
    }
}

impl Drop for TlsHost {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A connection of `ticket` through to the host: its socket, once the
/// gateway's RDCleanPath response has come.
async fn relayed(gateway: &str, ticket: &str) -> Result<Socket, RDCleanPathMessage> {
    let mut ws = open(gateway).await.expect("the socket opens");
    match ask(&mut ws, &request(Some(ticket), "h1")).await {
        RDCleanPathMessage::Response { .. } => Ok(ws),
        other => Err(other),
    }
}

/// One ticket holds at most two connections open at once (a tab, and the
/// same tab reconnecting): a third is refused with 429 before the broker
/// is asked and reaches no host, while another ticket is let in; once one
/// of the ticket's connections closes, its next is let in again.
#[tokio::test]
async fn one_ticket_holds_at_most_two_relays_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (app, gateway) = App::spawn_with_rd_gateway(&dir.path().join("data"), &[]);
    let h1 = TlsHost::start().await;
    pool(&app, "farm", true).await;
    host(&app, "farm", "h1", &h1.address).await;
    let alice = ticket(&app, "farm", "alice").await;

    let mut held = Vec::new();
    for n in 1..=2 {
        let ws = relayed(&gateway, &alice)
            .await
            .unwrap_or_else(|answer| panic!("connection {n}: {answer:?}"));
        held.push(ws);
    }
    assert!(h1.holds(2).await, "two relays to the host");
    for n in 3..=5 {
        let mut ws = open(&gateway).await.expect("the socket opens");
        let answer = ask(&mut ws, &request(Some(&alice), "h1")).await;
        assert_eq!(refused_status(&answer), 429, "connection {n}: {answer:?}");
        assert!(closes(&mut ws).await, "connection {n} stays open");
    }
    assert_eq!(h1.accepted(), 2, "a refused connection reached the host");
    // The same ticket spelled otherwise (its expiry with a leading zero)
    // is the same ticket.
    let (prefix, rest) = alice.split_at(alice.match_indices(':').nth(1).expect("fields").0 + 1);
    let respelled = format!("{prefix}0{rest}");
    let mut ws = open(&gateway).await.expect("the socket opens");
    let answer = ask(&mut ws, &request(Some(&respelled), "h1")).await;
    assert_eq!(refused_status(&answer), 429, "{respelled}: {answer:?}");
    assert_eq!(h1.accepted(), 2);

    // Another user's ticket is counted on its own.
    let bob = ticket(&app, "farm", "bob").await;
    let bobs = relayed(&gateway, &bob)
        .await
        .unwrap_or_else(|answer| panic!("bob: {answer:?}"));
    assert!(h1.holds(3).await, "and bob's");

    // One of alice's closes: her next connection is let in.
    let mut first = held.remove(0);
    let _ = first.close(None).await;
    drop(first);
    // Polled: the gateway counts the connection out once it has recorded
    // the session's end.
    let again = eventually(PATIENCE, || async {
        let answer = relayed(&gateway, &alice).await;
        if let Err(refused) = &answer {
            assert_eq!(refused_status(refused), 429, "{refused:?}");
        }
        answer
    })
    .await
    .unwrap_or_else(|_| panic!("the ticket's next connection was refused"));
    assert!(h1.holds(3).await, "alice's two and bob's");
    drop((held, bobs, again));
}
