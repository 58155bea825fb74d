//! The KDC proxy (`POST /KdcProxy`, rule AD3) over real sockets: a
//! request for a configured realm reaches that realm's KDCs (the next one
//! when the first fails) and the KDC's reply comes back; every refusal
//! (another realm, no realm, junk, too large, too many) reaches no KDC.
//!
//! The KDCs here are loopback listeners that record what they receive and
//! answer a fixed reply: what is proved is where bytes go. Real Kerberos
//! through the proxy (MIT `kinit` and `kvno` against a Samba DC) is the
//! end-to-end test `kdc_proxy` of the `deskbroker` crate.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use gateway::kdc_proxy::{KdcProxyConfig, KdcRealm};
use gateway::rd_gateway::GatewayConfig;
use picky_krb::messages::KdcProxyMessage;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::rd_gateway::{PROMPTLY, read_head};
use crate::{DeadAddress, fixture_in};

/// What the KDCs here answer: a length prefix and a few bytes (a KDC's
/// reply is relayed as it is, whatever it holds).
const REPLY: &[u8] = &[0, 0, 0, 5, 0x7e, 3, 2, 1, 0];

/// A KDC on loopback: each message it receives, and whether it answers.
struct Kdc {
    address: String,
    received: Arc<Mutex<Vec<Vec<u8>>>>,
    connections: Arc<Mutex<usize>>,
}

impl Kdc {
    /// A KDC that answers [`REPLY`] to each message (`answers`), or reads
    /// it and says nothing.
    async fn start(answers: bool) -> Kdc {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("addr").to_string();
        let received = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(Mutex::new(0));
        let (r, c) = (received.clone(), connections.clone());
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                *c.lock().unwrap() += 1;
                let r = r.clone();
                tokio::spawn(async move {
                    let mut prefix = [0u8; 4];
                    if s.read_exact(&mut prefix).await.is_err() {
                        return;
                    }
                    let mut message = vec![0u8; u32::from_be_bytes(prefix) as usize];
                    if s.read_exact(&mut message).await.is_err() {
                        return;
                    }
                    let mut whole = prefix.to_vec();
                    whole.extend(message);
                    r.lock().unwrap().push(whole);
                    if answers {
                        let _ = s.write_all(REPLY).await;
                    } else {
                        let mut rest = Vec::new();
                        let _ = s.read_to_end(&mut rest).await;
                    }
                });
            }
        });
        Kdc {
            address,
            received,
            connections,
        }
    }

    fn received(&self) -> Vec<Vec<u8>> {
        self.received.lock().unwrap().clone()
    }

    fn connections(&self) -> usize {
        *self.connections.lock().unwrap()
    }
}

/// The gateway's HTTPS front (plain TCP here) serving the KDC proxy with
/// `config`; its address. It stops with the test's runtime.
async fn proxy(config: KdcProxyConfig) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("addr").to_string();
    // No request here is placed: the placer names a broker nobody runs.
    let dead = DeadAddress::hold();
    let broker: api::BrokerUrl = format!("http://{}", dead.address).parse().expect("url");
    let placer = Arc::new(gateway::Http::new(broker, "x".repeat(32).as_str()).expect("placer"));
    let config = GatewayConfig {
        kdc_proxy: config,
        ..GatewayConfig::default()
    };
    tokio::spawn(async move {
        let _dead = dead;
        gateway::https::serve(listener, None, placer, config, std::future::pending()).await;
    });
    address
}

fn realms(realms: &[(&str, &[&str])]) -> KdcProxyConfig {
    let realms = realms
        .iter()
        .map(|(realm, kdcs)| {
            format!("{realm}={}", kdcs.join(","))
                .parse::<KdcRealm>()
                .expect("realm")
        })
        .collect();
    KdcProxyConfig::with_realms(realms).expect("config")
}

/// MIT kinit's AS-REQ for alice@EXAMPLE.TEST, as over TCP.
fn as_req() -> Vec<u8> {
    fixture_in("kerberos", "mit-kinit-1.20-as-req.bin")
}

/// A KDC-PROXY-MESSAGE carrying `message` for `realm`.
fn body(message: &[u8], realm: Option<&str>) -> Vec<u8> {
    let mut m = KdcProxyMessage::from_raw_kerb_message(message).expect("message");
    if let Some(realm) = realm {
        let realm = picky_asn1::restricted_string::Ia5String::from_string(realm.into()).unwrap();
        m.target_domain = picky_asn1::wrapper::Optional::from(Some(
            picky_asn1::wrapper::ExplicitContextTag1::from(
                picky_asn1::wrapper::GeneralStringAsn1::from(realm),
            ),
        ));
    }
    m.to_vec().expect("DER")
}

fn post(body: &[u8], extra: &str) -> Vec<u8> {
    let mut request = format!(
        "POST /KdcProxy HTTP/1.1\r\nHost: gw\r\nContent-Type: application/kerberos\r\n\
         Content-Length: {}\r\n{extra}\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    request
}

/// One answer on `tcp`: its head and its body (by its Content-Length).
async fn answer_on(tcp: &mut TcpStream) -> (String, Vec<u8>) {
    let head = read_head(tcp).await;
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|l| l.trim().parse::<usize>().ok())
        .expect("a Content-Length");
    let mut body = vec![0u8; length];
    tokio::time::timeout(PROMPTLY, tcp.read_exact(&mut body))
        .await
        .expect("in time")
        .expect("the body");
    (head, body)
}

/// Sends `request` on a new connection: the answer, and the connection.
async fn exchange(proxy: &str, request: &[u8]) -> (String, Vec<u8>, TcpStream) {
    let mut tcp = TcpStream::connect(proxy).await.expect("connect");
    tcp.write_all(request).await.expect("write");
    let (head, body) = answer_on(&mut tcp).await;
    (head, body, tcp)
}

/// The KDC's reply carried in a 200 answer.
fn relayed(head: &str, body: &[u8]) -> Vec<u8> {
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(
        head.contains("Content-Type: application/kerberos\r\n"),
        "{head}"
    );
    let m = KdcProxyMessage::from_raw(body).expect("a KDC-PROXY-MESSAGE");
    m.kerb_message.0.0
}

/// The status and the contract's error code of a refusal.
fn refusal(head: &str, body: &[u8]) -> (u16, String) {
    let status = head[9..12].parse().expect("status");
    assert!(head.contains("Connection: close\r\n"), "{head}");
    let v: serde_json::Value = serde_json::from_slice(body).expect("JSON");
    let code = v["error"]["code"].as_str().expect("code").to_string();
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{v}"
    );
    (status, code)
}

async fn closed(tcp: &mut TcpStream) {
    let mut rest = Vec::new();
    let read = tokio::time::timeout(PROMPTLY, tcp.read_to_end(&mut rest)).await;
    assert!(matches!(read, Ok(Ok(_))), "closed in time");
    assert!(rest.is_empty(), "{rest:?}");
}

#[tokio::test]
async fn a_request_reaches_its_realms_kdc_and_its_reply_comes_back() {
    let kdc = Kdc::start(true).await;
    let other = Kdc::start(true).await;
    let proxy = proxy(realms(&[
        ("OTHER.TEST", &[&other.address]),
        ("EXAMPLE.TEST", &[&kdc.address]),
    ]))
    .await;
    let (head, answer, mut tcp) =
        exchange(&proxy, &post(&body(&as_req(), Some("EXAMPLE.TEST")), "")).await;
    assert_eq!(relayed(&head, &answer), REPLY);
    assert_eq!(kdc.received(), [as_req()]);
    assert_eq!(other.connections(), 0);
    // The connection is kept (HTTP/1.1), and its next request relayed too,
    // the realm named in another case.
    assert!(head.contains("Connection: keep-alive\r\n"), "{head}");
    tcp.write_all(&post(&body(&as_req(), Some("example.test")), ""))
        .await
        .expect("write");
    let (head, answer) = answer_on(&mut tcp).await;
    assert_eq!(relayed(&head, &answer), REPLY);
    assert_eq!(kdc.received().len(), 2);
    // MIT's requests are HTTP/1.0: answered, then closed.
    let mut request = post(&body(&as_req(), Some("EXAMPLE.TEST")), "");
    request[15..23].copy_from_slice(b"HTTP/1.0");
    assert!(request.starts_with(b"POST /KdcProxy HTTP/1.0\r\n"));
    let (head, answer, mut tcp) = exchange(&proxy, &request).await;
    assert_eq!(relayed(&head, &answer), REPLY);
    assert!(head.contains("Connection: close\r\n"), "{head}");
    closed(&mut tcp).await;
}

#[tokio::test]
async fn the_realms_next_kdc_is_tried_when_one_fails() {
    let dead = DeadAddress::hold();
    let silent = Kdc::start(false).await;
    let kdc = Kdc::start(true).await;
    let mut config = realms(&[(
        "EXAMPLE.TEST",
        &[&dead.address, &silent.address, &kdc.address],
    )]);
    config.kdc_exchange_timeout = Duration::from_millis(300);
    let proxy = proxy(config).await;
    let (head, answer, _) =
        exchange(&proxy, &post(&body(&as_req(), Some("EXAMPLE.TEST")), "")).await;
    assert_eq!(relayed(&head, &answer), REPLY);
    assert_eq!(silent.received(), [as_req()]);
    assert_eq!(kdc.received(), [as_req()]);
}

#[tokio::test]
async fn a_realm_whose_kdcs_all_fail_is_answered_502() {
    let dead = DeadAddress::hold();
    let silent = Kdc::start(false).await;
    let mut config = realms(&[("EXAMPLE.TEST", &[&dead.address, &silent.address])]);
    config.kdc_exchange_timeout = Duration::from_millis(300);
    let proxy = proxy(config).await;
    let (head, answer, mut tcp) =
        exchange(&proxy, &post(&body(&as_req(), Some("EXAMPLE.TEST")), "")).await;
    assert_eq!(refusal(&head, &answer), (502, "KdcUnavailable".into()));
    closed(&mut tcp).await;
}

/// The attacks on an open relay: whatever a request names or carries, a
/// message goes only to the KDCs of the realm it is for, and only when
/// that realm is configured.
#[tokio::test]
async fn a_request_for_another_realm_or_none_reaches_no_kdc() {
    let kdc = Kdc::start(true).await;
    let proxy = proxy(realms(&[("OTHER.TEST", &[&kdc.address])])).await;
    let mut junk_length = as_req();
    junk_length[3] ^= 1;
    let mut trailing = body(&as_req(), Some("OTHER.TEST"));
    trailing.push(0);
    let refused: [(&str, Vec<u8>, &str); 7] = [
        // EXAMPLE.TEST's request, for EXAMPLE.TEST: not configured.
        (
            "unknown realm",
            post(&body(&as_req(), Some("EXAMPLE.TEST")), ""),
            "InvalidParameter",
        ),
        // EXAMPLE.TEST's request, sent as OTHER.TEST's.
        (
            "another realm's message",
            post(&body(&as_req(), Some("OTHER.TEST")), ""),
            "InvalidParameter",
        ),
        (
            "no realm",
            post(&body(&as_req(), None), ""),
            "InvalidParameter",
        ),
        (
            "junk",
            post(b"GET / HTTP/1.1\r\n\r\n", ""),
            "InvalidParameter",
        ),
        (
            "a length that disagrees",
            post(&body(&junk_length, Some("OTHER.TEST")), ""),
            "InvalidParameter",
        ),
        ("trailing bytes", post(&trailing, ""), "InvalidParameter"),
        // A form a browser could post cross-site: not application/kerberos.
        (
            "another content type",
            String::from_utf8_lossy(&post(&body(&as_req(), Some("OTHER.TEST")), ""))
                .replace("application/kerberos", "text/plain")
                .into_bytes(),
            "InvalidParameter",
        ),
    ];
    for (what, request, code) in refused {
        let (head, answer, mut tcp) = exchange(&proxy, &request).await;
        assert_eq!(refusal(&head, &answer), (400, code.into()), "{what}");
        closed(&mut tcp).await;
    }
    assert_eq!(kdc.connections(), 0);
}

#[tokio::test]
async fn a_body_over_the_bound_is_refused_whole_unread() {
    let kdc = Kdc::start(true).await;
    let proxy = proxy(realms(&[("EXAMPLE.TEST", &[&kdc.address])])).await;
    let too_long = gateway::kdc_proxy::MAX_REQUEST_BYTES + 1;
    // Refused from its head: the body is never waited for.
    let head = format!(
        "POST /KdcProxy HTTP/1.1\r\nHost: gw\r\nContent-Type: application/kerberos\r\n\
         Content-Length: {too_long}\r\n\r\n"
    );
    let (head, answer, _) = exchange(&proxy, head.as_bytes()).await;
    assert_eq!(refusal(&head, &answer), (413, "PayloadTooLarge".into()));
    // Chunked, and no body at all.
    for headers in [
        "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        "Content-Length: 0\r\n\r\n",
        "\r\n",
    ] {
        let request = format!(
            "POST /KdcProxy HTTP/1.1\r\nHost: gw\r\nContent-Type: application/kerberos\r\n{headers}"
        );
        let (head, answer, _) = exchange(&proxy, request.as_bytes()).await;
        assert_eq!(
            refusal(&head, &answer),
            (400, "InvalidParameter".into()),
            "{headers:?}"
        );
    }
    assert_eq!(kdc.connections(), 0);
}

#[tokio::test]
async fn a_source_over_its_messages_per_minute_is_throttled() {
    let kdc = Kdc::start(true).await;
    let mut config = realms(&[("EXAMPLE.TEST", &[&kdc.address])]);
    config.messages_per_source_per_minute = 3;
    let proxy = proxy(config).await;
    let request = post(&body(&as_req(), Some("EXAMPLE.TEST")), "");
    // Three on one kept connection: the bound is per source, not per
    // connection.
    let (head, answer, mut tcp) = exchange(&proxy, &request).await;
    assert_eq!(relayed(&head, &answer), REPLY);
    for _ in 0..2 {
        tcp.write_all(&request).await.expect("write");
        let (head, answer) = answer_on(&mut tcp).await;
        assert_eq!(relayed(&head, &answer), REPLY);
    }
    for _ in 0..3 {
        let (head, answer, _) = exchange(&proxy, &request).await;
        assert_eq!(refusal(&head, &answer), (429, "TooManyRequests".into()));
    }
    assert_eq!(kdc.received().len(), 3);
}

#[tokio::test]
async fn exchanges_over_the_bound_are_answered_503() {
    let silent = Kdc::start(false).await;
    let mut config = realms(&[("EXAMPLE.TEST", &[&silent.address])]);
    config.max_exchanges = 1;
    config.kdc_exchange_timeout = Duration::from_secs(600);
    let proxy = proxy(config).await;
    let request = post(&body(&as_req(), Some("EXAMPLE.TEST")), "");
    // The first holds the only slot while its KDC says nothing.
    let mut first = TcpStream::connect(&proxy).await.expect("connect");
    first.write_all(&request).await.expect("write");
    let deadline = tokio::time::Instant::now() + PROMPTLY;
    while silent.received().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first request reached no KDC"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (head, answer, _) = exchange(&proxy, &request).await;
    assert_eq!(refusal(&head, &answer), (503, "ServiceBusy".into()));
    assert_eq!(silent.connections(), 1);
}
