//! The HTTPS front over real sockets: each request reaches its endpoint,
//! a kept connection's next request is routed again, and a request no
//! endpoint takes is answered as it always was.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::fixture_in;
use crate::rd_gateway::{PROMPTLY, farm, head, host, read_head};

const UPGRADE: &str = "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: abc==\r\n";

/// The refusal of a request no endpoint takes: the whole answer.
const REFUSED: &str = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

fn request(start: &str, headers: &str) -> Vec<u8> {
    format!("{start} HTTP/1.1\r\nHost: gw\r\n{headers}\r\n").into_bytes()
}

/// Sends `request` on a new connection: the head of the answer.
async fn answer(gateway: &str, request: &[u8]) -> (String, TcpStream) {
    let mut tcp = TcpStream::connect(gateway).await.expect("connect");
    tcp.write_all(request).await.expect("write");
    (read_head(&mut tcp).await, tcp)
}

/// The rest of what the connection says until it is closed.
async fn rest(tcp: &mut TcpStream) -> Vec<u8> {
    let mut rest = Vec::new();
    tokio::time::timeout(PROMPTLY, tcp.read_to_end(&mut rest))
        .await
        .expect("closed in time")
        .expect("read");
    rest
}

#[tokio::test]
async fn each_request_reaches_its_endpoint() {
    let farm = farm(vec![Some(host("h1").await)]).await;
    let gateway = farm.gateway.as_str();
    // The RD Gateway: a WebSocket tunnel, and a legacy OUT channel (200,
    // then its seed) and an IN channel (whose OUT channel never came: the
    // gateway's own 404).
    let ws = fixture_in("tsgu", "xfreerdp-2.11.7-websocket-head.txt");
    let (answered, _tunnel) = answer(gateway, &ws).await;
    assert!(answered.starts_with("HTTP/1.1 101 "), "{answered}");
    let out = head("xfreerdp-2.11.7-legacy-out-head.txt", "{out}");
    let (answered, _out) = answer(gateway, &out).await;
    assert_eq!(answered, "HTTP/1.1 200 OK\r\n\r\n");
    let into = head("xfreerdp-2.11.7-legacy-in-head-2.txt", "{nobody}");
    let (answered, _) = answer(gateway, &into).await;
    assert!(answered.starts_with("HTTP/1.1 404 "), "{answered}");
    // The page: its file with its policy, and the page's own 404.
    let (answered, _page) = answer(gateway, &request("GET /web", "")).await;
    assert!(answered.starts_with("HTTP/1.1 200 "), "{answered}");
    assert!(answered.contains("Content-Security-Policy: "), "{answered}");
    let (answered, _) = answer(gateway, &request("GET /favicon.ico", "")).await;
    assert!(answered.starts_with("HTTP/1.1 404 "), "{answered}");
    // The browser's door, on the page's kept connection: the next request
    // is routed as a first one (a HEAD, so that no body is in the way).
    let (answered, mut kept) = answer(gateway, &request("HEAD /web", "")).await;
    assert!(answered.starts_with("HTTP/1.1 200 "), "{answered}");
    kept.write_all(&request("GET /web/rdp?x=1", UPGRADE))
        .await
        .expect("write");
    let answered = read_head(&mut kept).await;
    assert!(answered.starts_with("HTTP/1.1 101 "), "{answered}");
    assert_eq!(farm.host_connections(), 0);
}

#[tokio::test]
async fn a_request_no_endpoint_takes_is_refused_and_closed() {
    let farm = farm(vec![Some(host("h1").await)]).await;
    let with_body = format!("{UPGRADE}Content-Length: 64\r\n");
    for refused in [
        request("GET /", ""),
        request("POST /KdcProxy", "Content-Length: 0\r\n"),
        request("GET /remoteDesktopGateway/", UPGRADE),
        request("RDG_OUT_DATA /web/rdp", UPGRADE),
        // The browser's door takes a WebSocket upgrade with a key, and no
        // body; its page takes no upgrade.
        request("GET /web/rdp", "Sec-WebSocket-Key: abc==\r\n"),
        request(
            "GET /web/rdp",
            "Connection: Upgrade\r\nUpgrade: websocket\r\n",
        ),
        request("GET /web/rdp", &with_body),
        request("GET /web", UPGRADE),
        // A body's length read two ways, whatever the path.
        request("GET /web", "Content-Length: 5\r\nContent-Length: 6\r\n"),
    ] {
        let (answered, mut tcp) = answer(&farm.gateway, &refused).await;
        let text = String::from_utf8_lossy(&refused);
        assert_eq!(answered, REFUSED, "{text}");
        assert_eq!(rest(&mut tcp).await, b"", "{text}");
    }
    // After a kept request too.
    let (answered, mut kept) = answer(&farm.gateway, &request("HEAD /web", "")).await;
    assert!(answered.starts_with("HTTP/1.1 200 "), "{answered}");
    kept.write_all(&request("GET /nothing", ""))
        .await
        .expect("write");
    assert_eq!(read_head(&mut kept).await, REFUSED);
    assert_eq!(rest(&mut kept).await, b"");
    assert_eq!(farm.host_connections(), 0);
}
