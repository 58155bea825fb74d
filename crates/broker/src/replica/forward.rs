//! What a replica answers over HTTP: its own engine's answer while it
//! leads, the leader's otherwise (forwarded, and retried against a new
//! leader when repeating the request is harmless), and its own `/healthz`
//! and `/metrics`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use store::Leader;
use tokio::sync::watch;

use super::{FORWARD_TIMEOUT, FORWARDED_HEADER, LEADER_WAIT, NOT_LEADER_HEADER, Replica, Role};
use crate::api::ApiError;
use crate::api::MAX_BODY_BYTES;
use api::ErrorCode;

impl Replica {
    /// Sends a buffered request to `leader`, until it answers or this
    /// replica stops following it (its lease ran out and another replica
    /// took over: a frozen leader never answers).
    async fn forward(
        &self,
        leader: &Leader,
        method: &Method,
        path_and_query: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Forwarded {
        let replaced = no_longer_following(self.role.subscribe(), leader);
        tokio::select! {
            forwarded = self.send(&leader.url, method, path_and_query, headers, body) => forwarded,
            () = replaced => {
                if repeatable(method, path_and_query) {
                    return Forwarded::Retry;
                }
                Forwarded::Answer(
                    ApiError::new(
                        ErrorCode::LeaderLost,
                        "the leading replica stopped answering and another one leads now; \
                         the outcome is unknown: check before retrying",
                    )
                    .into_response(),
                )
            }
        }
    }

    async fn send(
        &self,
        leader: &str,
        method: &Method,
        path_and_query: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Forwarded {
        let mut request = self
            .http
            .request(method.clone(), format!("{leader}{path_and_query}"))
            .body(body);
        for (name, value) in headers {
            if !is_hop_by_hop(name) {
                request = request.header(name, value);
            }
        }
        request = request.header(FORWARDED_HEADER, &self.config.advertise_url);
        let answer = match request.send().await {
            Ok(answer) => answer,
            Err(e) if e.is_connect() => {
                // A leader whose certificate this replica does not trust
                // (--ca-cert, --tls-fingerprint) looks unreachable: say why.
                if let Some(why) = api::tls::tls_failure(&e) {
                    tracing::warn!(%leader, error = %why, "TLS with the leader failed");
                }
                return Forwarded::Retry;
            }
            Err(e) => return self.lost(method, path_and_query, &e),
        };
        let status = answer.status();
        if status == StatusCode::SERVICE_UNAVAILABLE
            && answer.headers().contains_key(NOT_LEADER_HEADER)
        {
            return Forwarded::Retry;
        }
        let mut out = Response::builder().status(status);
        for (name, value) in answer.headers() {
            if !is_hop_by_hop(name) && name != header::CONTENT_LENGTH {
                out = out.header(name, value);
            }
        }
        match answer.bytes().await {
            Ok(bytes) => Forwarded::Answer(
                out.body(Body::from(bytes))
                    .unwrap_or_else(|e| internal(format!("cannot relay the answer: {e}"))),
            ),
            Err(e) => self.lost(method, path_and_query, &e),
        }
    }

    /// The leader went away while handling a request: retried when doing
    /// it twice is harmless, otherwise the outcome is unknown.
    fn lost(&self, method: &Method, path_and_query: &str, e: &reqwest::Error) -> Forwarded {
        if e.is_timeout() && repeatable(method, path_and_query) {
            return Forwarded::Answer(leader_unavailable(&format!(
                "the leading replica did not answer within {} s",
                FORWARD_TIMEOUT.as_secs()
            )));
        }
        if e.is_timeout() {
            return Forwarded::Answer(
                ApiError::new(
                    ErrorCode::LeaderTimeout,
                    format!(
                        "the leading replica did not answer within {} s; the outcome is unknown",
                        FORWARD_TIMEOUT.as_secs()
                    ),
                )
                .into_response(),
            );
        }
        if repeatable(method, path_and_query) {
            return Forwarded::Retry;
        }
        Forwarded::Answer(
            ApiError::new(
                ErrorCode::LeaderLost,
                format!(
                    "the leading replica went away while handling the request ({e}); its \
                     outcome is unknown: check before retrying"
                ),
            )
            .into_response(),
        )
    }
}

enum Forwarded {
    Answer(Response),
    /// Not delivered, or safe to repeat: ask the leader (perhaps a new
    /// one) again.
    Retry,
}

/// Requests that may be sent twice with the same result: reads, replaces
/// and partial updates (which set, never add),
/// and connects (rule S1 sends a repeated connect to the session the first
/// one made).
fn repeatable(method: &Method, path_and_query: &str) -> bool {
    let path = path_and_query.split('?').next().unwrap_or("");
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::PUT | Method::PATCH
    ) || (*method == Method::POST && path.ends_with("/connect"))
}

/// Whether `e` is a refused connection: nothing listens at that address.
/// (A timeout is not: the process may be frozen, or cut off from here
/// only.)
pub(super) fn refused(e: &reqwest::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        source = s.source();
    }
    false
}

fn is_hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
    )
}

fn internal(message: String) -> Response {
    ApiError::new(ErrorCode::InternalError, message).into_response()
}

/// Resolves once this replica no longer follows `leader`.
async fn no_longer_following(mut rx: watch::Receiver<Role>, leader: &Leader) {
    loop {
        if !matches!(&*rx.borrow_and_update(), Role::Follower(l) if **l == *leader) {
            return;
        }
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

/// 503 `LeaderUnavailable` with `Retry-After` (rule L2).
fn leader_unavailable(why: &str) -> Response {
    let mut r = ApiError::new(
        ErrorCode::LeaderUnavailable,
        format!("no broker replica can decide right now ({why}); retry shortly"),
    )
    .into_response();
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

/// Every API request: decided here when this replica leads, otherwise
/// forwarded to the leader, waiting up to [`LEADER_WAIT`] for one.
pub(super) async fn dispatch(State(r): State<Arc<Replica>>, req: Request) -> Response {
    let role = r.role.borrow().clone();
    if let Role::Leader(l) = &role
        && l.may_answer()
    {
        return l.answer(req).await;
    }
    let forwarded_to_us = req.headers().contains_key(FORWARDED_HEADER);
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(_) => {
            return ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!("request body: larger than {MAX_BODY_BYTES} bytes"),
            )
            .into_response();
        }
    };
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let deadline = Instant::now() + LEADER_WAIT;
    // A request abandoned by a leader that was replaced meanwhile goes to
    // the new one even past the wait, a bounded number of times.
    let mut late_tries = 2;
    let mut rx = r.role.subscribe();
    loop {
        let role = rx.borrow_and_update().clone();
        match role {
            Role::Leader(l) if l.may_answer() => {
                let mut again = Request::builder()
                    .method(parts.method.clone())
                    .uri(parts.uri.clone())
                    .version(parts.version)
                    .body(Body::from(body.clone()))
                    .unwrap_or_default();
                *again.headers_mut() = parts.headers.clone();
                return l.answer(again).await;
            }
            _ if forwarded_to_us => {
                // The sender thinks we lead; we do not: it must look again.
                let mut resp = leader_unavailable("this replica is not the leader");
                resp.headers_mut()
                    .insert(NOT_LEADER_HEADER, HeaderValue::from_static("1"));
                return resp;
            }
            Role::Follower(leader) if !leader.stale => {
                match r
                    .forward(
                        &leader,
                        &parts.method,
                        &path_and_query,
                        &parts.headers,
                        body.clone(),
                    )
                    .await
                {
                    Forwarded::Answer(resp) => {
                        metrics::counter!("deskbroker_replica_forwarded_total").increment(1);
                        return resp;
                    }
                    Forwarded::Retry => {
                        if Instant::now() >= deadline
                            && late_tries > 0
                            && rx.has_changed().unwrap_or(false)
                        {
                            late_tries -= 1;
                            continue;
                        }
                    }
                }
            }
            // No leader, or one that stopped renewing its lease: wait a
            // little for the next one.
            Role::Electing | Role::Leader(_) | Role::Follower(_) => {}
        }
        let now = Instant::now();
        if now >= deadline {
            return leader_unavailable("no leader answered within the wait");
        }
        // Until the role changes (a new leader) or a short pause passes.
        let pause = (deadline - now).min(Duration::from_millis(100));
        let _ = tokio::time::timeout(pause, rx.changed()).await;
    }
}

/// This replica's role and leader as JSON (rule L2): 200 while it can
/// serve (it leads with a working store and a valid lease, or follows a
/// known leader), 503 while it has no leader or lost its store.
pub(super) async fn healthz(State(r): State<Arc<Replica>>) -> Response {
    let role = r.role.borrow().clone();
    let (role, leader, epoch, error) = match role {
        Role::Leader(l) if l.lease.is_valid() => (
            "leader",
            Some(r.config.advertise_url.clone()),
            Some(l.lease.epoch()),
            l.broker
                .core()
                .writer()
                .failure()
                .map(|e| format!("leader without its store (reconnects only): {e}")),
        ),
        Role::Leader(l) => (
            "electing",
            None,
            Some(l.lease.epoch()),
            Some("this replica's lease ran out; it is stepping down".into()),
        ),
        Role::Follower(leader) => (
            "follower",
            Some(leader.url.clone()),
            Some(leader.epoch),
            leader
                .stale
                .then(|| "the leader has stopped renewing its lease".to_string()),
        ),
        Role::Electing => ("electing", None, None, Some("no leader is known".into())),
    };
    crate::api::health(api::types::Health {
        status: String::new(),
        role: role.into(),
        leader,
        epoch,
        error,
    })
}

/// The leader's full metrics (with every host's gauges); a follower's own
/// counters only (its forwarding), so that each replica can be scraped.
pub(super) async fn metrics(State(r): State<Arc<Replica>>, req: Request) -> Response {
    let role = r.role.borrow().clone();
    if let Role::Leader(l) = role
        && l.may_answer()
    {
        return l.handle(req).await;
    }
    let token = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "));
    let admin = token.is_some_and(|t| {
        subtle::ConstantTimeEq::ct_eq(t.as_bytes(), r.config.settings.admin_token.as_bytes()).into()
    });
    if !admin {
        return ApiError::unauthorized("/metrics needs the admin token").into_response();
    }
    // Not leading (following, electing, or a leader whose lease ran out).
    metrics::gauge!("deskbroker_leader").set(0.0);
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        crate::telemetry::render(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_requests_that_can_be_repeated_are_retried_after_a_lost_leader() {
        let cases = [
            (Method::GET, "/api/v1/hostPools/p/userSessions?user=a", true),
            (Method::PUT, "/api/v1/hostPools/p", true),
            (Method::PATCH, "/api/v1/hostPools/p/sessionHosts/h1", true),
            (Method::POST, "/api/v1/hostPools/p/connect", true),
            (Method::POST, "/api/v1/hostPools/p/connect?x=1", true),
            (Method::DELETE, "/api/v1/hostPools/p/userSessions/s1", false),
            (Method::POST, "/api/v1/hostPools/p/registrationToken", false),
            (Method::POST, "/api/v1/register", false),
            (
                Method::POST,
                "/api/v1/hostPools/connect-pool/sessionHosts/h1/heartbeat",
                false,
            ),
        ];
        for (method, path, want) in cases {
            assert_eq!(repeatable(&method, path), want, "{method} {path}");
        }
    }

    #[test]
    fn hop_by_hop_headers_are_not_forwarded() {
        for name in ["connection", "host", "transfer-encoding", "upgrade"] {
            assert!(is_hop_by_hop(&HeaderName::from_static(name)), "{name}");
        }
        for name in ["authorization", "content-type", "accept"] {
            assert!(!is_hop_by_hop(&HeaderName::from_static(name)), "{name}");
        }
    }
}
