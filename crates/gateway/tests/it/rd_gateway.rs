//! The RD Gateway over real sockets, against a real broker on a real store
//! (through the in-process placer of `deskbroker serve`) and session hosts
//! that record what reaches them. The client opens with the exact request
//! head xfreerdp 2.11.7 sent (its 15-character, non-base64 WebSocket key)
//! and speaks MS-TSGU over WebSocket frames; the end-to-end test with real
//! xfreerdp and xrdp is `crates/deskbroker/tests/it/rd_gateway.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use broker::front_door::InProcess;
use futures_util::{SinkExt, StreamExt};
use gateway::rd_gateway::{self, GatewayConfig};
use gateway::tsgu::hresult::*;
use gateway::tsgu::packet::*;
use gateway::tsgu::{Decoder, Packet};
use placement::SessionState;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::{Bytes, Message};

use crate::fixture_in;

const TOKEN: &str = "rd-gateway-test-admin-token-0123456789";
/// How long a test waits for something that should happen at once.
pub(crate) const PROMPTLY: Duration = Duration::from_secs(10);

/// A session host that counts connections and answers each one: it echoes
/// what it reads, prefixed with `host-name:` once, and on `big` sends 2000
/// bytes (enough, with the client's share, to count as a logon: S9).
pub(crate) struct Host {
    pub(crate) address: String,
    pub(crate) connections: Arc<AtomicUsize>,
}

pub(crate) async fn host(name: &'static str) -> Host {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("addr").to_string();
    let connections = Arc::new(AtomicUsize::new(0));
    let count = connections.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0; 4096];
                let mut greeted = false;
                loop {
                    let n = match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    let mut answer = Vec::new();
                    if !greeted {
                        answer.extend_from_slice(format!("{name}:").as_bytes());
                        greeted = true;
                    }
                    if &buf[..n] == b"big" {
                        answer.extend_from_slice(&[7; 2000]);
                    } else {
                        answer.extend_from_slice(&buf[..n]);
                    }
                    if s.write_all(&answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Host {
        address,
        connections,
    }
}

pub(crate) struct Farm {
    pub(crate) gateway: String,
    pub(crate) broker: Arc<broker::Broker>,
    pub(crate) hosts: Vec<Host>,
    pub(crate) key: api::ticket::TicketKey,
    pub(crate) _stop: tokio::sync::oneshot::Sender<()>,
    pub(crate) _dir: tempfile::TempDir,
    /// Where the hosts nobody listens on are registered, held while the
    /// farm lives.
    pub(crate) _dead: crate::DeadAddress,
}

/// A broker with pool `p` (DepthFirst, limit 5, front door allowed) of the
/// given hosts (an address of `None` is a host nobody listens on), pool
/// `q` with one host, pool `closed` (no front door, no hosts), and the
/// gateway in front of it.
pub(crate) async fn farm(hosts: Vec<Option<Host>>) -> Farm {
    farm_with(hosts, GatewayConfig::default()).await
}

pub(crate) async fn farm_with(hosts: Vec<Option<Host>>, config: GatewayConfig) -> Farm {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store::SqliteStore::open(dir.path()).expect("store");
    let broker = broker::open(Arc::new(store), broker::Settings::new(TOKEN))
        .await
        .expect("broker");
    // Tickets are signed with the broker's own key, made in its store.
    let ticket_key = broker.keys().ticket_signer();
    let api = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", api.local_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let stopped = async move {
        let _ = stopped.await;
    };
    let stopped = futures_util::FutureExt::shared(Box::pin(stopped));
    tokio::spawn(broker::serve(broker.clone(), api, stopped.clone()));
    api::tls::install_default_provider();
    let http = reqwest::Client::new();
    let put = async |path: String, body: serde_json::Value| {
        let answer = http
            .put(format!("{url}/api/v1{path}"))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await
            .expect("request");
        let status = answer.status();
        let text = answer.text().await.unwrap_or_default();
        assert!(status.is_success(), "PUT {path}: {status} {text}");
    };
    for pool in ["p", "q", "closed"] {
        put(
            format!("/hostPools/{pool}"),
            json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst",
                   "maxSessionLimit": 5, "allowFrontDoor": pool != "closed",
                   "allowedAddressRanges": ["127.0.0.0/8"]}),
        )
        .await;
    }
    let dead = crate::DeadAddress::hold();
    let mut live = Vec::new();
    for (i, h) in hosts.into_iter().enumerate() {
        let address = h
            .as_ref()
            .map_or(dead.address.clone(), |h| h.address.clone());
        put(
            format!("/hostPools/p/sessionHosts/h{}", i + 1),
            json!({"address": address}),
        )
        .await;
        live.extend(h);
    }
    let other = host("q1").await;
    put(
        "/hostPools/q/sessionHosts/q1".into(),
        json!({"address": other.address}),
    )
    .await;
    live.push(other);

    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let gateway = listener.local_addr().expect("addr").to_string();
    let placer = Arc::new(InProcess::new(broker.clone()));
    tokio::spawn(gateway::https::serve(
        listener, None, placer, config, stopped,
    ));
    Farm {
        gateway,
        broker,
        hosts: live,
        key: ticket_key,
        _stop: stop,
        _dir: dir,
        _dead: dead,
    }
}

impl Farm {
    pub(crate) fn ticket(&self, pool: &str, user: &str, lifetime_seconds: i64) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs() as i64;
        self.key
            .issue(pool, user, (now + lifetime_seconds) as u64)
            .expect("ticket")
    }

    pub(crate) fn host_connections(&self) -> usize {
        self.hosts
            .iter()
            .map(|h| h.connections.load(Ordering::SeqCst))
            .sum()
    }

    /// (user, host, state) of every session of `pool`.
    pub(crate) async fn sessions(&self, pool: &str) -> Vec<(String, String, SessionState)> {
        self.broker
            .core()
            .read(pool, |p| {
                Ok(p.sessions()
                    .map(|s| (s.user.clone(), s.host.clone(), s.state))
                    .collect())
            })
            .await
            .expect("read")
    }

    /// Waits until `pool`'s sessions are `want`.
    pub(crate) async fn wait_sessions(
        &self,
        pool: &str,
        want: Vec<(String, String, SessionState)>,
    ) {
        let deadline = tokio::time::Instant::now() + PROMPTLY;
        loop {
            let now = self.sessions(pool).await;
            if now == want {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "sessions {now:?}, want {want:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// How the test client carries its packets: FreeRDP's two transports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transport {
    WebSocket,
    Legacy,
}

pub(crate) enum Wire {
    Ws(Box<WebSocketStream<TcpStream>>),
    /// The gateway's packets arrive raw on `out`; the client's go in HTTP
    /// chunks on `input`.
    Legacy {
        out: TcpStream,
        input: TcpStream,
    },
}

/// A tunnel client, opening as xfreerdp 2.11.7 does (its very request
/// heads, with a fresh RDG-Connection-Id).
pub(crate) struct Client {
    pub(crate) wire: Wire,
    pub(crate) decoder: Decoder,
    pub(crate) pending: Vec<Packet>,
}

/// A fixture head with its RDG-Connection-Id replaced by `id`.
pub(crate) fn head(name: &str, id: &str) -> Vec<u8> {
    let text = String::from_utf8(fixture_in("tsgu", name)).expect("ascii");
    let at = text.find("RDG-Connection-Id: ").expect("id header") + 19;
    let end = at + text[at..].find("\r\n").expect("line end");
    format!("{}{id}{}", &text[..at], &text[end..]).into_bytes()
}

impl Client {
    pub(crate) async fn open(gateway: &str) -> Client {
        Client::open_with(gateway, Transport::WebSocket).await
    }

    pub(crate) async fn open_with(gateway: &str, transport: Transport) -> Client {
        let id = format!("{{{}}}", uuid::Uuid::new_v4());
        let wire = match transport {
            Transport::WebSocket => {
                let mut tcp = TcpStream::connect(gateway).await.expect("connect");
                tcp.write_all(&head("xfreerdp-2.11.7-websocket-head.txt", &id))
                    .await
                    .expect("head");
                let answer = read_head(&mut tcp).await;
                assert!(answer.starts_with("HTTP/1.1 101 "), "{answer}");
                // The accept key of FreeRDP's non-base64 key.
                let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(
                    b"XLOBMLOP]WANSWR",
                );
                assert!(
                    answer.contains(&format!("Sec-WebSocket-Accept: {accept}\r\n")),
                    "{answer}"
                );
                Wire::Ws(Box::new(
                    WebSocketStream::from_raw_socket(tcp, Role::Client, None).await,
                ))
            }
            Transport::Legacy => {
                let mut out = TcpStream::connect(gateway).await.expect("connect");
                out.write_all(&head("xfreerdp-2.11.7-legacy-out-head.txt", &id))
                    .await
                    .expect("out head");
                let answer = read_head(&mut out).await;
                assert_eq!(answer, "HTTP/1.1 200 OK\r\n\r\n");
                let mut seed = [0u8; 10];
                out.read_exact(&mut seed).await.expect("the 10-byte seed");
                let mut input = TcpStream::connect(gateway).await.expect("connect");
                input
                    .write_all(&head("xfreerdp-2.11.7-legacy-in-head-1.txt", &id))
                    .await
                    .expect("in head");
                let answer = read_head(&mut input).await;
                assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
                input
                    .write_all(&head("xfreerdp-2.11.7-legacy-in-head-2.txt", &id))
                    .await
                    .expect("second in head");
                Wire::Legacy { out, input }
            }
        };
        Client {
            wire,
            decoder: Decoder::new(),
            pending: Vec::new(),
        }
    }

    pub(crate) async fn send(&mut self, p: Packet) {
        let bytes = p.to_bytes().expect("encodes");
        match &mut self.wire {
            Wire::Ws(ws) => ws
                .send(Message::Binary(Bytes::from(bytes)))
                .await
                .expect("send"),
            Wire::Legacy { input, .. } => {
                // One chunk per packet, its size in upper-case hex, as FreeRDP 2 writes.
                let mut chunk = format!("{:X}\r\n", bytes.len()).into_bytes();
                chunk.extend_from_slice(&bytes);
                chunk.extend_from_slice(b"\r\n");
                // The gateway may have closed already; the answer says so.
                let _ = input.write_all(&chunk).await;
            }
        }
    }

    /// The gateway's next packet, or None when it closed.
    pub(crate) async fn recv(&mut self) -> Option<Packet> {
        loop {
            if !self.pending.is_empty() {
                return Some(self.pending.remove(0));
            }
            let bytes = match &mut self.wire {
                Wire::Ws(ws) => {
                    let message = tokio::time::timeout(PROMPTLY, ws.next())
                        .await
                        .expect("an answer in time");
                    match message {
                        Some(Ok(Message::Binary(b))) => b.to_vec(),
                        Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return None,
                        Some(Ok(_)) => continue,
                    }
                }
                Wire::Legacy { out, .. } => {
                    let mut buf = vec![0u8; 70_000];
                    let n = tokio::time::timeout(PROMPTLY, out.read(&mut buf))
                        .await
                        .expect("an answer in time")
                        .unwrap_or(0);
                    if n == 0 {
                        return None;
                    }
                    buf.truncate(n);
                    buf
                }
            };
            let mut input = &bytes[..];
            while let Some(p) = self.decoder.decode(&mut input).expect("packet") {
                self.pending.push(p);
            }
        }
    }

    /// Handshake, tunnel with `token`, tunnel auth, channel to `resource`:
    /// the channel response's HRESULT (or, if refused earlier, that answer's).
    pub(crate) async fn setup(&mut self, token: &str, resource: &str) -> (u16, u32) {
        self.send(Packet::HandshakeRequest(HandshakeRequest {
            version_major: 1,
            version_minor: 0,
            client_version: 0,
            extended_auth: HTTP_EXTENDED_AUTH_PAA,
        }))
        .await;
        let Some(Packet::HandshakeResponse(r)) = self.recv().await else {
            panic!("handshake response")
        };
        assert_eq!(r.error_code, S_OK);
        self.send(Packet::TunnelCreate(TunnelCreate {
            capabilities: 0,
            reauth_context: None,
            paa_cookie: Some(token.into()),
        }))
        .await;
        match self.recv().await {
            Some(Packet::TunnelResponse(r)) if r.status_code == S_OK => {}
            Some(Packet::TunnelResponse(r)) => return (PKT_TYPE_TUNNEL_RESPONSE, r.status_code),
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
        (PKT_TYPE_CHANNEL_RESPONSE, r.error_code)
    }

    /// Sends `data` and returns what comes back, `want` bytes of it.
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

pub(crate) async fn read_head(tcp: &mut TcpStream) -> String {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        let n = tokio::time::timeout(PROMPTLY, tcp.read(&mut b))
            .await
            .expect("in time")
            .expect("read");
        assert_eq!(
            n,
            1,
            "closed mid-head: {:?}",
            String::from_utf8_lossy(&head)
        );
        head.push(b[0]);
    }
    String::from_utf8(head).expect("ascii")
}

pub(crate) fn s(user: &str, host: &str, state: SessionState) -> (String, String, SessionState) {
    (user.into(), host.into(), state)
}

#[tokio::test]
async fn a_ticket_places_the_user_and_the_data_is_relayed_both_ways_over_websocket() {
    a_ticket_places_the_user_and_the_data_is_relayed_both_ways(Transport::WebSocket).await;
}

#[tokio::test]
async fn a_ticket_places_the_user_and_the_data_is_relayed_both_ways_over_the_legacy_pair() {
    a_ticket_places_the_user_and_the_data_is_relayed_both_ways(Transport::Legacy).await;
}

async fn a_ticket_places_the_user_and_the_data_is_relayed_both_ways(transport: Transport) {
    let farm = farm(vec![Some(host("h1").await), Some(host("h2").await)]).await;
    let token = farm.ticket("p", "alice", 60);
    let mut client = Client::open_with(&farm.gateway, transport).await;
    assert_eq!(
        client.setup(&token, "p").await,
        (PKT_TYPE_CHANNEL_RESPONSE, S_OK)
    );
    // DepthFirst: h1. The host's greeting says which host the bytes reached.
    assert_eq!(client.exchange(b"hello", 8).await, b"h1:hello");
    farm.wait_sessions("p", vec![s("alice", "h1", SessionState::Active)])
        .await;
    // Enough traffic for a logon (S9), then the client closes its channel.
    assert_eq!(client.exchange(b"big", 2000).await.len(), 2000);
    client.exchange(&[1; 600], 600).await;
    // The largest DATA packet, in one WebSocket frame (or HTTP chunk) far
    // larger than the gateway reads at once, reaches the host whole.
    let largest = client.exchange(&[9; 65_535], 65_535).await;
    assert!(largest.iter().all(|&b| b == 9));
    client
        .send(Packet::CloseChannel { status_code: S_OK })
        .await;
    assert_eq!(
        client.recv().await,
        Some(Packet::CloseChannelResponse { status_code: S_OK })
    );
    farm.wait_sessions("p", vec![s("alice", "h1", SessionState::Disconnected)])
        .await;

    // Her next connection goes back to her session (S1), even with a new ticket.
    let mut again = Client::open_with(&farm.gateway, transport).await;
    assert_eq!(
        again.setup(&farm.ticket("p", "alice", 60), "p").await,
        (PKT_TYPE_CHANNEL_RESPONSE, S_OK)
    );
    assert_eq!(again.exchange(b"back", 7).await, b"h1:back");
    farm.wait_sessions("p", vec![s("alice", "h1", SessionState::Active)])
        .await;
}

#[tokio::test]
async fn a_host_that_cannot_be_reached_is_passed_over_for_the_next() {
    // h1 registered at a closed port (R5), h2 live.
    let farm = farm(vec![None, Some(host("h2").await)]).await;
    let mut client = Client::open(&farm.gateway).await;
    assert_eq!(
        client.setup(&farm.ticket("p", "bob", 60), "p").await,
        (PKT_TYPE_CHANNEL_RESPONSE, S_OK)
    );
    assert_eq!(client.exchange(b"x", 4).await, b"h2:x");
    // The session made on h1 was ended; only h2's remains.
    farm.wait_sessions("p", vec![s("bob", "h2", SessionState::Active)])
        .await;
}

#[tokio::test]
async fn refused_tokens_and_resources_reach_no_host_over_websocket() {
    refused_tokens_and_resources_reach_no_host(Transport::WebSocket).await;
}

#[tokio::test]
async fn refused_tokens_and_resources_reach_no_host_over_the_legacy_pair() {
    refused_tokens_and_resources_reach_no_host(Transport::Legacy).await;
}

async fn refused_tokens_and_resources_reach_no_host(transport: Transport) {
    let farm = farm(vec![Some(host("h1").await)]).await;
    let good = farm.ticket("p", "carol", 60);
    // One character of the MAC changed: its first of 22 base64url
    // characters (the last carries only 2 bits, so changing it may make a
    // non-canonical encoding, refused earlier, at tunnel create).
    let mut tampered: Vec<char> = good.chars().collect();
    let mac_at = good.rfind(':').expect("user sep") - 22;
    tampered[mac_at] = if tampered[mac_at] == 'A' { 'B' } else { 'A' };
    let tampered: String = tampered.into_iter().collect();
    let cases = [
        // (token, resource, the answer's type and HRESULT)
        (
            tampered,
            "p",
            (
                PKT_TYPE_CHANNEL_RESPONSE,
                E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED,
            ),
        ),
        (
            farm.ticket("p", "carol", -60),
            "p",
            (
                PKT_TYPE_CHANNEL_RESPONSE,
                E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED,
            ),
        ),
        // A ticket for q used to reach p, and p's ticket used for q.
        (
            farm.ticket("q", "carol", 60),
            "p",
            (PKT_TYPE_CHANNEL_RESPONSE, E_PROXY_RAP_ACCESSDENIED),
        ),
        (
            good.clone(),
            "q",
            (PKT_TYPE_CHANNEL_RESPONSE, E_PROXY_RAP_ACCESSDENIED),
        ),
        // Not a ticket at all.
        (
            "let-me-in".into(),
            "p",
            (
                PKT_TYPE_TUNNEL_RESPONSE,
                E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED,
            ),
        ),
    ];
    for (token, resource, want) in cases {
        let mut client = Client::open_with(&farm.gateway, transport).await;
        assert_eq!(
            client.setup(&token, resource).await,
            want,
            "{token} for {resource}"
        );
        assert_eq!(client.recv().await, None, "closed after the refusal");
    }
    assert_eq!(farm.host_connections(), 0, "no connection reached any host");
    assert!(farm.sessions("p").await.is_empty());
    assert!(farm.sessions("q").await.is_empty());
}

#[tokio::test]
async fn a_packet_out_of_order_is_answered_with_an_error_and_closed() {
    let farm = farm(vec![Some(host("h1").await)]).await;
    let mut client = Client::open(&farm.gateway).await;
    client
        .send(Packet::ChannelCreate(ChannelCreate {
            resources: vec!["p".into()],
            alternate_resources: vec![],
            port: 3389,
            protocol: CHANNEL_PROTOCOL_RDP,
        }))
        .await;
    let Some(Packet::ChannelResponse(r)) = client.recv().await else {
        panic!("a channel response")
    };
    assert_eq!(r.error_code, E_PROXY_INTERNALERROR);
    assert_eq!(client.recv().await, None);
    assert_eq!(farm.host_connections(), 0);
}

#[tokio::test]
async fn requests_that_are_not_a_gateways_are_refused_over_http() {
    let farm = farm(vec![Some(host("h1").await)]).await;
    for (request, status) in [
        // An IN channel whose OUT channel never came.
        (
            head("xfreerdp-2.11.7-legacy-in-head-2.txt", "{nobody}"),
            "HTTP/1.1 404 ",
        ),
        // A legacy request without a connection id.
        (
            b"RDG_OUT_DATA /remoteDesktopGateway/ HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            "HTTP/1.1 400 ",
        ),
        (
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            "HTTP/1.1 400 ",
        ),
        (b"\x16\x03\x01 not http\r\n\r\n".to_vec(), "HTTP/1.1 400 "),
    ] {
        let mut tcp = TcpStream::connect(&farm.gateway).await.expect("connect");
        tcp.write_all(&request).await.expect("write");
        let answer = read_head(&mut tcp).await;
        assert!(answer.starts_with(status), "{answer}");
    }
    // A head that never ends is cut at its bound.
    let mut tcp = TcpStream::connect(&farm.gateway).await.expect("connect");
    let long = format!(
        "RDG_OUT_DATA /remoteDesktopGateway/ HTTP/1.1\r\nX: {}\r\n",
        "a".repeat(gateway::https::MAX_HEAD_BYTES)
    );
    let _ = tcp.write_all(long.as_bytes()).await;
    assert!(read_head(&mut tcp).await.starts_with("HTTP/1.1 400 "));
    assert_eq!(farm.host_connections(), 0);
}

/// What a request head asks of the gateway: the head read by the front,
/// then the gateway's reading of it.
fn gateway_request(
    bytes: &[u8],
) -> Result<Option<(rd_gateway::Request, usize)>, gateway::https::HeadError> {
    let Some((head, taken)) = gateway::https::parse_head(bytes)? else {
        return Ok(None);
    };
    Ok(Some((rd_gateway::Request::of(&head)?, taken)))
}

#[test]
fn freerdps_request_heads_parse_as_what_they_are() {
    use rd_gateway::{InBody, Request};
    let id = "{37f51d44-8eea-f654-2cdf-caa345ae8fc9}".to_string();
    let ws = fixture_in("tsgu", "xfreerdp-2.11.7-websocket-head.txt");
    let (request, taken) = gateway_request(&ws)
        .expect("a gateway request")
        .expect("complete");
    assert_eq!(
        request,
        Request::WebSocket {
            key: "XLOBMLOP]WANSWR".into()
        }
    );
    assert_eq!(taken, ws.len());
    // Incomplete: asks for more.
    assert_eq!(gateway_request(&ws[..ws.len() - 1]), Ok(None));
    for (name, want) in [
        (
            "xfreerdp-2.11.7-legacy-out-head.txt",
            Request::Out {
                connection_id: id.clone(),
            },
        ),
        (
            "xfreerdp-2.11.7-legacy-in-head-1.txt",
            Request::In {
                connection_id: id.clone(),
                body: InBody::Length(0),
            },
        ),
        (
            "xfreerdp-2.11.7-legacy-in-head-2.txt",
            Request::In {
                connection_id: id.clone(),
                body: InBody::Chunked,
            },
        ),
    ] {
        let bytes = fixture_in("tsgu", name);
        assert_eq!(
            gateway_request(&bytes),
            Ok(Some((want, bytes.len()))),
            "{name}"
        );
    }
}

#[test]
fn the_in_channels_chunked_body_reads_as_the_stream_split_anywhere() {
    use rd_gateway::{BodyReader, InBody};
    let body = fixture_in("tsgu", "xfreerdp-2.11.7-legacy-in-body.bin");
    let stream = fixture_in("tsgu", "xfreerdp-2.11.7-legacy-stream.bin");
    for piece in [1, 2, 3, 7, 64, body.len()] {
        let mut reader = BodyReader::new(InBody::Chunked);
        let mut out = Vec::new();
        for chunk in body.chunks(piece) {
            reader.feed(chunk, &mut out).expect("a chunked body");
        }
        assert_eq!(out, stream, "in pieces of {piece}");
        assert!(!reader.done(), "no last chunk was sent");
    }
    // The last chunk ends the body; anything after it is refused.
    let mut reader = BodyReader::new(InBody::Chunked);
    let mut out = Vec::new();
    reader.feed(b"3\r\nabc\r\n0\r\n", &mut out).expect("ends");
    assert!(reader.done());
    assert_eq!(out, b"abc");
    assert!(reader.feed(b"x", &mut out).is_err());
    // Junk is refused: no size, a size too long, no CR LF after a chunk.
    for junk in [&b"zz\r\n"[..], b"123456789\r\n", b"1\r\naXX", b"\r\n"] {
        let mut reader = BodyReader::new(InBody::Chunked);
        assert!(reader.feed(junk, &mut Vec::new()).is_err(), "{junk:?}");
    }
    let mut long_line = BodyReader::new(InBody::Chunked);
    assert!(long_line.feed(&[b'1'; 65], &mut Vec::new()).is_err());
    // A length-delimited body ends after its length.
    let mut reader = BodyReader::new(InBody::Length(3));
    let mut out = Vec::new();
    reader.feed(b"abc", &mut out).expect("three bytes");
    assert!(reader.done());
    assert!(reader.feed(b"d", &mut out).is_err());
}

/// The head of a browser's request, read as its endpoint reads it. Which
/// endpoint takes which method, path and upgrade is the front's table's
/// (`https::route`'s tests, and `https.rs` over sockets).
#[test]
fn a_browsers_requests_read_as_what_they_are() {
    use gateway::https::parse_head;
    use gateway::web::page::PageRequest;
    let upgrade = |method: &str, path: &str, upgrade: bool| {
        let mut head =
            format!("{method} {path} HTTP/1.1\r\nHost: gw\r\nSec-WebSocket-Key: abc==\r\n");
        if upgrade {
            head.push_str("Connection: Upgrade\r\nUpgrade: websocket\r\n");
        }
        head.push_str("\r\n");
        head.into_bytes()
    };
    let read = |bytes: &[u8]| {
        let (head, taken) = parse_head(bytes).expect("a head").expect("complete");
        assert_eq!(taken, bytes.len());
        head
    };
    // The WebSocket's key, with or without a query; none without the
    // upgrade.
    for path in ["/web/rdp", "/web/rdp?session=1"] {
        let head = read(&upgrade("GET", path, true));
        assert_eq!(head.path(), "/web/rdp", "{path}");
        assert_eq!(head.websocket_key(), Some("abc=="), "{path}");
        assert_eq!(read(&upgrade("GET", path, false)).websocket_key(), None);
    }
    // The browser's page and its files.
    for (method, path, bare) in [
        ("GET", "/web", "/web"),
        ("HEAD", "/web", "/web"),
        (
            "GET",
            "/web/webclient_bg.wasm?v=1",
            "/web/webclient_bg.wasm",
        ),
    ] {
        assert_eq!(
            PageRequest::of(&read(&upgrade(method, path, false))),
            Ok(PageRequest {
                path: bare.into(),
                head: method == "HEAD",
                if_none_match: None,
                gzip: false,
                keep_alive: true,
            }),
            "{method} {path}"
        );
    }
    // The connection is kept unless the client closes it (HTTP/1.0 does by
    // default); the tag of the client's copy is read.
    for (head, keep_alive, tag) in [
        (
            "GET /web HTTP/1.1\r\nConnection: keep-alive, Close\r\nIf-None-Match: \"ab\"\r\n\r\n",
            false,
            Some("\"ab\""),
        ),
        ("GET /web HTTP/1.0\r\n\r\n", false, None),
        (
            "GET /web HTTP/1.1\r\nConnection: keep-alive\r\n\r\n",
            true,
            None,
        ),
    ] {
        let page = PageRequest::of(&read(head.as_bytes())).expect("a page request");
        assert_eq!(page.keep_alive, keep_alive, "{head:?}");
        assert_eq!(page.if_none_match.as_deref(), tag, "{head:?}");
    }
}

/// A body's length that a proxy in front could read otherwise is refused,
/// and so is any body on the browser's requests: its bytes are never read
/// as the next request on the connection.
#[test]
fn a_head_whose_body_could_be_read_two_ways_or_a_browsers_request_with_a_body_is_refused() {
    use gateway::https::{Head, HeadError, parse_head};
    use rd_gateway::{InBody, Request};
    // What the browser's endpoints ask of a head: the page reads it as a
    // page request, `/web/rdp` takes it without a body.
    let browsers = |bytes: &[u8]| -> Result<Head, HeadError> {
        let (head, _) = parse_head(bytes)?.expect("complete");
        if head.path() == gateway::web::PATH {
            head.bodiless()?;
        } else {
            gateway::web::page::PageRequest::of(&head)?;
        }
        Ok(head)
    };
    let upgrade = "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: abc==\r\n";
    let id = "RDG-Connection-Id: {37f51d44-8eea-f654-2cdf-caa345ae8fc9}\r\n";
    let head =
        |start: &str, headers: &str| format!("{start} HTTP/1.1\r\nHost: gw\r\n{headers}\r\n");
    let upgrade_with_length = format!("{upgrade}Content-Length: 64\r\n");
    let upgrade_chunked = format!("{upgrade}Transfer-Encoding: chunked\r\n");
    let upgrade_empty = format!("{upgrade}Content-Length: 0\r\n");
    // The browser's requests: no body, whatever it says it is.
    for (start, headers) in [
        ("GET /web", "Content-Length: 5\r\n"),
        ("GET /web/page.js", "Transfer-Encoding: chunked\r\n"),
        ("HEAD /web", "Content-Length: 1\r\n"),
        ("GET /web/rdp", upgrade_with_length.as_str()),
        ("GET /web/rdp", upgrade_chunked.as_str()),
    ] {
        let head = head(start, headers);
        assert!(
            matches!(browsers(head.as_bytes()), Err(HeadError::Body(..))),
            "{head:?}"
        );
    }
    // An empty body is no body.
    for (start, headers) in [
        ("GET /web", "Content-Length: 0\r\n"),
        ("GET /web/rdp", upgrade_empty.as_str()),
    ] {
        let head = head(start, headers);
        assert!(browsers(head.as_bytes()).is_ok(), "{head:?}");
    }
    // Framing that could be read two ways, on any request.
    for headers in [
        "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
        "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: gzip, chunked\r\n",
        "Transfer-Encoding: identity\r\n",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n",
        "Content-Length: 5\r\nContent-Length: 5\r\n",
        "Content-Length: 5\r\nContent-Length: 6\r\n",
        "Content-Length: +5\r\n",
        "Content-Length: 5, 5\r\n",
        "Content-Length: -1\r\n",
        "Content-Length: \r\n",
        "Content-Length: 99999999999999999999\r\n",
    ] {
        for start in [
            "RDG_IN_DATA /remoteDesktopGateway/",
            "RDG_OUT_DATA /remoteDesktopGateway/",
            "GET /web",
        ] {
            let head = head(start, &format!("{id}{headers}"));
            assert!(
                matches!(parse_head(head.as_bytes()), Err(HeadError::Framing(_))),
                "{head:?}: {:?}",
                parse_head(head.as_bytes())
            );
        }
    }
    // An IN channel's body, framed one way.
    for (headers, body) in [
        ("Content-Length: 5\r\n", InBody::Length(5)),
        ("transfer-encoding: Chunked\r\n", InBody::Chunked),
        ("", InBody::Length(0)),
    ] {
        let head = head(
            "RDG_IN_DATA /remoteDesktopGateway/",
            &format!("{id}{headers}"),
        );
        assert!(
            matches!(
                gateway_request(head.as_bytes()),
                Ok(Some((Request::In { body: b, .. }, _))) if b == body
            ),
            "{head:?}"
        );
    }
}

#[test]
fn a_hosts_connection_confirm_is_judged_by_its_negotiation() {
    use gateway::web::selects_tls;
    let confirm = |tail: &[u8]| {
        let mut c = vec![0x03, 0x00, 0x00, (11 + tail.len()) as u8];
        c.push((6 + tail.len()) as u8);
        c.extend_from_slice(&[0xd0, 0x00, 0x00, 0x12, 0x34, 0x00]);
        c.extend_from_slice(tail);
        c
    };
    // RDP_NEG_RSP selecting SSL, HYBRID; then Standard RDP Security.
    assert_eq!(selects_tls(&confirm(&[2, 0, 8, 0, 1, 0, 0, 0])), Ok(true));
    assert_eq!(
        selects_tls(&confirm(&[2, 0x1f, 8, 0, 2, 0, 0, 0])),
        Ok(true)
    );
    assert_eq!(selects_tls(&confirm(&[2, 0, 8, 0, 0, 0, 0, 0])), Ok(false));
    // RDP_NEG_FAILURE, and no negotiation at all (an RDP 4 host).
    assert_eq!(selects_tls(&confirm(&[3, 0, 8, 0, 5, 0, 0, 0])), Ok(false));
    assert_eq!(selects_tls(&confirm(&[])), Ok(false));
    // Junk: a Connection Request, a length indicator that lies, a short
    // negotiation, an unknown negotiation type.
    let mut request = confirm(&[2, 0, 8, 0, 1, 0, 0, 0]);
    request[5] = 0xe0;
    assert!(selects_tls(&request).is_err());
    let mut lying = confirm(&[]);
    lying[4] = 9;
    assert!(selects_tls(&lying).is_err());
    assert!(selects_tls(&confirm(&[2, 0, 8])).is_err());
    assert!(selects_tls(&confirm(&[9, 0, 8, 0, 1, 0, 0, 0])).is_err());
    assert!(selects_tls(&[0x03, 0x00]).is_err());
}
