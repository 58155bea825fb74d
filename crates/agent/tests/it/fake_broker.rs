//! A stand-in for the broker's agent-facing contract on loopback:
//! `POST /api/v1/register` hands out credentials `dbh_1`, `dbh_2`, … for the
//! token `regtoken`, and heartbeats need a current credential. Knobs make it
//! fail (503), refuse heartbeats (400) or revoke every credential (401). It
//! records every request so tests can wait on what the agent did.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::Notify;

/// One request the fake broker got, and the status it answered.
#[derive(Debug, Clone)]
pub struct Request {
    pub path: String,
    pub authorization: Option<String>,
    pub body: Value,
    pub status: u16,
}

#[derive(Debug, Default, Clone)]
pub struct Records {
    pub all: Vec<Request>,
}

impl Records {
    /// Successful registrations.
    pub fn registers(&self) -> Vec<&Request> {
        self.all
            .iter()
            .filter(|r| r.path == "/api/v1/register" && r.status < 300)
            .collect()
    }

    /// Every heartbeat, whatever its answer.
    pub fn heartbeats(&self) -> Vec<&Request> {
        self.all
            .iter()
            .filter(|r| r.path.ends_with("/heartbeat"))
            .collect()
    }
}

#[derive(Default)]
struct Inner {
    records: Records,
    valid: Vec<String>,
    issued: u32,
    fail_next: u32,
    refuse_heartbeats: bool,
}

#[derive(Clone, Default)]
struct Shared {
    inner: Arc<Mutex<Inner>>,
    changed: Arc<Notify>,
}

pub struct FakeBroker {
    addr: SocketAddr,
    shared: Shared,
}

impl FakeBroker {
    pub async fn start() -> FakeBroker {
        FakeBroker::start_on("127.0.0.1:0".parse().unwrap()).await
    }

    pub async fn start_on(addr: SocketAddr) -> FakeBroker {
        let shared = Shared::default();
        let app = Router::new()
            .route("/api/v1/register", post(register))
            .route(
                "/api/v1/hostPools/{pool}/sessionHosts/{host}/heartbeat",
                post(heartbeat),
            )
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        FakeBroker { addr, shared }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn records(&self) -> Records {
        self.shared.inner.lock().unwrap().records.clone()
    }

    /// Answers the next `n` requests with 503.
    pub fn fail_next(&self, n: u32) {
        self.shared.inner.lock().unwrap().fail_next = n;
    }

    pub fn refuse_heartbeats(&self, refuse: bool) {
        self.shared.inner.lock().unwrap().refuse_heartbeats = refuse;
    }

    /// Every credential handed out so far stops working (401).
    pub fn revoke_credentials(&self) {
        self.shared.inner.lock().unwrap().valid.clear();
    }

    /// Waits until `done` holds for the records (or panics after a while,
    /// naming `what`).
    pub async fn wait_for(&self, what: &str, done: impl Fn(&Records) -> bool) {
        let waiting = async {
            loop {
                let changed = self.shared.changed.notified();
                if done(&self.records()) {
                    return;
                }
                changed.await;
            }
        };
        if tokio::time::timeout(super::PATIENCE, waiting)
            .await
            .is_err()
        {
            panic!("timed out waiting for {what}: {:#?}", self.records());
        }
    }
}

impl Shared {
    fn record(&self, uri: &Uri, headers: &HeaderMap, body: &[u8], status: StatusCode) {
        let authorization = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = serde_json::from_slice(body).unwrap_or(Value::Null);
        self.inner.lock().unwrap().records.all.push(Request {
            path: uri.path().to_string(),
            authorization,
            body,
            status: status.as_u16(),
        });
        self.changed.notify_waiters();
    }

    /// 503 if a failure is pending.
    fn failing(&self) -> bool {
        let mut inner = self.inner.lock().unwrap();
        if inner.fail_next > 0 {
            inner.fail_next -= 1;
            return true;
        }
        false
    }
}

/// A session host as the broker answers it (the contract's whole shape:
/// the agent reads it with the contract's types).
fn host_json(name: &serde_json::Value, load_index: i32, sessions: u32) -> serde_json::Value {
    json!({
        "name": name, "address": "10.0.0.7:3389", "allowNewSession": true,
        "status": "Available", "sessions": sessions, "connectingSessions": 0,
        "loadIndex": load_index, "lastHeartBeat": null, "assignedUser": null,
        "capabilities": ["rdp"],
        "policy": {"loadIndexThreshold": null, "connectingSessionThreshold": null},
        "registeredAt": "2026-12-01T08:00:00Z", "metrics": null
    })
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"error": {"code": code, "message": message}})),
    )
        .into_response()
}

async fn register(
    State(shared): State<Shared>,
    uri: Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let (status, response) = if shared.failing() {
        let status = StatusCode::SERVICE_UNAVAILABLE;
        (status, error(status, "StoreUnavailable", "store down"))
    } else {
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if request["token"] != json!("regtoken") {
            let status = StatusCode::UNAUTHORIZED;
            (
                status,
                error(status, "Unauthorized", "unknown registration token"),
            )
        } else {
            let mut inner = shared.inner.lock().unwrap();
            inner.issued += 1;
            let credential = format!("dbh_{}", inner.issued);
            inner.valid.push(credential.clone());
            let status = if inner.issued == 1 {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            let host = host_json(&request["name"], 0, 0);
            (
                status,
                (
                    status,
                    axum::Json(json!({"sessionHost": host, "hostCredential": credential})),
                )
                    .into_response(),
            )
        }
    };
    shared.record(&uri, &headers, &body, status);
    response
}

async fn heartbeat(
    State(shared): State<Shared>,
    uri: Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let credential = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_string();
    let (valid, refuse) = {
        let inner = shared.inner.lock().unwrap();
        (inner.valid.contains(&credential), inner.refuse_heartbeats)
    };
    let (status, response) = if shared.failing() {
        let status = StatusCode::SERVICE_UNAVAILABLE;
        (status, error(status, "StoreUnavailable", "store down"))
    } else if !valid {
        let status = StatusCode::UNAUTHORIZED;
        (
            status,
            error(status, "Unauthorized", "the host credential was revoked"),
        )
    } else if refuse {
        let status = StatusCode::BAD_REQUEST;
        (
            status,
            error(status, "InvalidParameter", "cpuPercent: out of range"),
        )
    } else {
        let status = StatusCode::OK;
        (
            status,
            axum::Json(host_json(&json!("h7"), 3, 1)).into_response(),
        )
    };
    shared.record(&uri, &headers, &body, status);
    response
}
