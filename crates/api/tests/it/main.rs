//! The client against a real HTTP server on loopback that answers as the
//! broker does, as a proxy in front of it would, or not at all: every
//! program that uses the client sees the same classification. Besides: the
//! workspace feed against the specification's schemas (`feed.rs`) and its
//! icons (`icons.rs`).

mod feed;
mod icons;

use std::net::SocketAddr;

use api::types::{ConnectInput, HeartbeatInput};
use api::{BrokerUrl, Client, ClientError, ErrorCode};
use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use serde_json::json;

/// Serves `app` on a free loopback port; the server lives as long as the
/// test's runtime.
async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

fn client(addr: SocketAddr) -> Client {
    let base = BrokerUrl::parse(&format!("http://{addr}/")).expect("url");
    Client::new(base, "api-test").expect("client")
}

#[tokio::test]
async fn typed_calls_send_the_contracts_json_and_read_its_answer() {
    let app = Router::new()
        .route(
            "/api/v1/hostPools/{pool}/connect",
            post(
                |axum::extract::Path(pool): axum::extract::Path<String>,
                 headers: HeaderMap,
                 axum::Json(body): axum::Json<serde_json::Value>| async move {
                    assert_eq!(pool, "my pool");
                    assert_eq!(
                        headers.get("authorization").and_then(|v| v.to_str().ok()),
                        Some("Bearer t0ken")
                    );
                    assert_eq!(body, json!({"user": "alice", "exclude": ["h2"]}));
                    axum::Json(json!({
                        "sessionId": "s1", "sessionHost": "h1", "address": "10.0.0.5:3389",
                        "reconnect": false, "sessionState": "Pending", "aFieldFromLater": 1
                    }))
                },
            ),
        )
        .route(
            "/api/v1/hostPools/{pool}/sessionHosts/{host}/heartbeat",
            post(|| async {
                axum::Json(json!({
                    "name": "h1", "address": "a:1", "allowNewSession": true,
                    "status": "Available", "sessions": 2, "connectingSessions": 0,
                    "loadIndex": 12, "lastHeartBeat": null, "assignedUser": null,
                    "capabilities": ["rdp"],
                    "policy": {"loadIndexThreshold": null, "connectingSessionThreshold": null},
                    "registeredAt": "2026-11-30T08:00:00Z", "metrics": null
                }))
            }),
        );
    let c = client(serve(app).await).with_token("t0ken");
    let placed = c
        .connect(
            "my pool",
            &ConnectInput {
                user: "alice".into(),
                exclude: vec!["h2".into()],
                ..ConnectInput::default()
            },
        )
        .await
        .expect("placed");
    assert_eq!(placed.session_host, "h1");
    assert!(!placed.reconnect);
    let host = c
        .heartbeat("my pool", "h1", &HeartbeatInput::default())
        .await
        .expect("heartbeat");
    assert_eq!((host.host.sessions, host.host.load_index), (2, 12));
    assert!(host.refused_sessions.is_empty());
}

#[tokio::test]
async fn the_apis_refusals_keep_their_code_and_say_it_in_one_line() {
    let app = Router::new()
        .route(
            "/api/v1/hostPools/{pool}/connect",
            post(|| async {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    axum::Json(json!({"error": {"code": "NoSessionHostAvailable",
                        "message": "all session hosts\nare full"}})),
                )
            }),
        )
        .route(
            "/api/v1/hostPools",
            get(|| async {
                (
                    StatusCode::NOT_FOUND,
                    axum::Json(json!({"error": {"code": "HostPoolNotFound", "message": "no"}})),
                )
            }),
        );
    let c = client(serve(app).await);
    let e = c
        .connect("p", &ConnectInput::default())
        .await
        .expect_err("refused");
    assert_eq!(e.code(), Some(ErrorCode::NoSessionHostAvailable));
    assert_eq!(e.status(), Some(503));
    assert!(e.is_retryable(), "503 means not now");
    assert_eq!(
        e.to_string(),
        "NoSessionHostAvailable: all session hosts are full"
    );
    let e = c
        .send(reqwest::Method::GET, &["hostPools"], &[], None)
        .await
        .expect_err("404");
    assert_eq!(e.code(), Some(ErrorCode::HostPoolNotFound));
    assert!(!e.is_retryable(), "a 404 is the same again");
}

#[tokio::test]
async fn an_answer_that_is_not_the_apis_is_said_so_whatever_its_status() {
    // What a proxy or a wrong --broker answers: text, or JSON of another shape.
    let app = Router::new()
        .route(
            "/api/v1/hostPools",
            get(|| async { (StatusCode::NOT_FOUND, "<html>404 Not Found</html>") }),
        )
        .route(
            "/api/v1/hostPools/{pool}/connect",
            post(|| async {
                (
                    StatusCode::BAD_GATEWAY,
                    axum::Json(json!({"error": {"code": "SomethingElse", "message": "x"}})),
                )
            }),
        )
        .route(
            "/api/v1/hostPools/{pool}/sessionHosts",
            get(|| async { axum::Json(json!({"items": []})) }),
        );
    let addr = serve(app).await;
    let c = client(addr);
    let e = c
        .send(reqwest::Method::GET, &["hostPools"], &[], None)
        .await
        .expect_err("404 page");
    assert!(
        matches!(e, ClientError::Unexpected { status: 404, .. }),
        "{e:?}"
    );
    assert!(!e.is_retryable());
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "HTTP 404 Not Found from http://{addr}, which is not an answer of the deskbroker API"
        )),
        "{text}"
    );
    assert!(text.ends_with("<html>404 Not Found</html>"), "{text}");

    let e = c
        .connect("p", &ConnectInput::default())
        .await
        .expect_err("unknown code");
    assert_eq!(e.code(), None, "an unknown code is not guessed at");
    assert!(e.is_retryable(), "a 502 from a proxy is worth a retry");

    let e = c.session_hosts("p").await.expect_err("wrong shape");
    assert!(
        matches!(e, ClientError::Unexpected { status: 200, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("cannot read"), "{e}");
}

#[tokio::test]
async fn no_broker_listening_is_a_retryable_failure_naming_the_broker() {
    // Bound and never listening, held to the end of the test: connecting is
    // refused, and no other test can take the port meanwhile.
    let dead = tokio::net::TcpSocket::new_v4().expect("socket");
    dead.bind(([127, 0, 0, 1], 0).into()).expect("bind");
    let addr = dead.local_addr().expect("addr");
    let e = client(addr)
        .logoff("p", "s")
        .await
        .expect_err("nothing listens there");
    assert!(matches!(e, ClientError::Connect { .. }), "{e:?}");
    assert!(e.is_retryable());
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("cannot connect to the broker at http://{addr}: ")),
        "{text}"
    );
    assert!(!text.contains('\n'), "{text}");
}
