//! What a replica answers over HTTP: its own engine's answer while it
//! leads, the leader's otherwise (forwarded, and retried against a new
//! leader when repeating the request is harmless), and its own `/healthz`
//! and `/metrics`.
//!
//! A forwarded request keeps its client: the follower vouches for the
//! client's address in [`CLIENT_HEADER`] with an HMAC only replicas can
//! make ([`ForwardingKey`]), and the leader's engine sees the request as
//! coming from that address, so that the per-source limits (rule T4) count
//! each client on its own and the audit log (T5) names the client, not the
//! follower. A client cannot make that HMAC: what it sends in either
//! forwarding header is removed before the leader's engine sees the
//! request, and a follower never passes it on.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};
use store::Leader;
use tokio::sync::watch;

use super::{
    CLIENT_HEADER, FORWARD_TIMEOUT, FORWARDED_HEADER, LEADER_WAIT, NOT_LEADER_HEADER, Replica, Role,
};
use crate::api::ApiError;
use crate::api::MAX_BODY_BYTES;
use api::ErrorCode;

type HmacSha256 = hmac::Hmac<Sha256>;

/// The key with which a follower vouches for the client address of a
/// request it forwards ([`CLIENT_HEADER`]), and the leader checks it:
/// derived from the admin token, which every replica of a set is given
/// (docs/replicas.md) and no client holds. Anyone with the admin token can
/// make it, and may do anything already.
pub(super) struct ForwardingKey([u8; 32]);

impl ForwardingKey {
    pub(super) fn of(admin_token: &str) -> ForwardingKey {
        let mut digest = Sha256::new();
        digest.update(b"deskbroker: a replica vouches for a forwarded request's client\0");
        digest.update(admin_token.as_bytes());
        ForwardingKey(digest.finalize().into())
    }

    /// The MAC of `client` for a request with `method` and
    /// `path_and_query` to the leader of `epoch`: a header seen on its way
    /// is worth nothing for another request, nor once another leader is
    /// elected.
    fn mac(
        &self,
        epoch: i64,
        client: SocketAddr,
        method: &Method,
        path_and_query: &str,
    ) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(format!("{epoch}\n{client}\n{method}\n{path_and_query}").as_bytes());
        mac
    }

    /// The value of [`CLIENT_HEADER`] for `client`.
    fn vouch(
        &self,
        epoch: i64,
        client: SocketAddr,
        method: &Method,
        path_and_query: &str,
    ) -> Option<HeaderValue> {
        let mac = self
            .mac(epoch, client, method, path_and_query)
            .finalize()
            .into_bytes();
        HeaderValue::from_str(&format!("{client};{}", hex::encode(mac))).ok()
    }

    /// The client a [`CLIENT_HEADER`] value vouches for, if its MAC is
    /// right for this request to the leader of `epoch`.
    fn check(
        &self,
        value: &HeaderValue,
        epoch: i64,
        method: &Method,
        path_and_query: &str,
    ) -> Option<SocketAddr> {
        let (client, mac) = value.to_str().ok()?.rsplit_once(';')?;
        let client: SocketAddr = client.parse().ok()?;
        let mac = hex::decode(mac).ok()?;
        self.mac(epoch, client, method, path_and_query)
            .verify_slice(&mac)
            .ok()?;
        Some(client)
    }
}

/// The client's address of a request this replica received, when it came
/// over a socket (not in-process).
fn peer(req_extensions: &axum::http::Extensions) -> Option<SocketAddr> {
    req_extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(a)| *a)
}

impl Replica {
    /// Readies `req` for this leader's engine (of `epoch`): when a
    /// follower vouched for its client, the request is the client's (its
    /// address is what the per-source limits count and the audit log
    /// records); without a valid vouching it stays its sender's. Either
    /// way the forwarding headers are removed, so nothing a client wrote
    /// in them reaches a handler.
    fn as_received(&self, req: &mut Request, epoch: i64) {
        let path_and_query = req
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let vouched = req.headers().get(CLIENT_HEADER).and_then(|v| {
            self.forwarding
                .check(v, epoch, req.method(), &path_and_query)
        });
        let claimed = req.headers_mut().remove(CLIENT_HEADER).is_some();
        req.headers_mut().remove(FORWARDED_HEADER);
        match vouched {
            Some(client) => {
                req.extensions_mut().insert(ConnectInfo(client));
            }
            None if claimed => {
                tracing::debug!(
                    sender = ?peer(req.extensions()),
                    "a request claims a client address without a valid vouching: taken as its sender's"
                );
            }
            None => {}
        }
    }

    /// Sends a buffered request to `leader`, until it answers or this
    /// replica stops following it (its lease ran out and another replica
    /// took over: a frozen leader never answers).
    async fn forward(
        &self,
        leader: &Leader,
        method: &Method,
        path_and_query: &str,
        headers: &HeaderMap,
        client: Option<SocketAddr>,
        body: Bytes,
    ) -> Forwarded {
        let replaced = no_longer_following(self.role.subscribe(), leader);
        tokio::select! {
            forwarded = self.send(leader, method, path_and_query, headers, client, body) => forwarded,
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
        to: &Leader,
        method: &Method,
        path_and_query: &str,
        headers: &HeaderMap,
        client: Option<SocketAddr>,
        body: Bytes,
    ) -> Forwarded {
        let leader = to.url.as_str();
        let url = match reqwest::Url::parse(&format!("{leader}{path_and_query}")) {
            Ok(url) => url,
            Err(e) => {
                return Forwarded::Answer(
                    ApiError::invalid(format!("the request's path cannot be forwarded: {e}"))
                        .into_response(),
                );
            }
        };
        // The path and query as the leader receives them (the URL's own
        // spelling), which the vouching covers.
        let sent_path = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_string(),
        };
        let mut request = self.http.request(method.clone(), url).body(body);
        for (name, value) in headers {
            // What the client wrote in the forwarding headers is never
            // passed on: only this replica speaks in them.
            if !is_hop_by_hop(name) && name != FORWARDED_HEADER && name != CLIENT_HEADER {
                request = request.header(name, value);
            }
        }
        request = request.header(FORWARDED_HEADER, &self.config.advertise_url);
        if let Some(vouched) =
            client.and_then(|c| self.forwarding.vouch(to.epoch, c, method, &sent_path))
        {
            request = request.header(CLIENT_HEADER, vouched);
        }
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

/// What the API answers a request whose target is not a path (`OPTIONS
/// *`): 404 `NotFound`, as the leader's own router does for anything it
/// does not route, with the headers its answers carry.
fn not_a_path() -> Response {
    let mut r = ApiError::new(
        ErrorCode::NotFound,
        "no such path in the deskbroker API (see /openapi.json)",
    )
    .into_response();
    let headers = r.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
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
pub(super) async fn dispatch(State(r): State<Arc<Replica>>, mut req: Request) -> Response {
    let role = r.role.borrow().clone();
    if let Role::Leader(l) = &role
        && l.may_answer()
    {
        r.as_received(&mut req, l.lease.epoch());
        return l.answer(req).await;
    }
    if !req.uri().path().starts_with('/') {
        // `OPTIONS *` (or a proxy's `CONNECT host:port`): no path to
        // forward, and no route of the API.
        return not_a_path();
    }
    let forwarded_to_us = req.headers().contains_key(FORWARDED_HEADER);
    let (parts, body) = req.into_parts();
    let client = peer(&parts.extensions);
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
                // The client's address, and whatever else the server noted.
                *again.extensions_mut() = parts.extensions.clone();
                r.as_received(&mut again, l.lease.epoch());
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
                        client,
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
    fn only_the_replicas_key_vouches_for_a_client_and_only_for_that_request() {
        let key = ForwardingKey::of("the admin token of the replicas");
        let client: SocketAddr = "192.0.2.7:40000".parse().unwrap();
        let path = "/api/v1/hostPools/p?x=1";
        let vouched = key.vouch(7, client, &Method::PUT, path).unwrap();
        assert_eq!(key.check(&vouched, 7, &Method::PUT, path), Some(client));
        // Another leader, method or path: not vouched for.
        assert_eq!(key.check(&vouched, 8, &Method::PUT, path), None);
        assert_eq!(key.check(&vouched, 7, &Method::DELETE, path), None);
        assert_eq!(
            key.check(&vouched, 7, &Method::PUT, "/api/v1/hostPools/q"),
            None
        );
        // Another key (another admin token): not vouched for.
        let other = ForwardingKey::of("another token");
        assert_eq!(other.check(&vouched, 7, &Method::PUT, path), None);
        // Another address with the same MAC, or a MAC made up: refused.
        let mac = vouched.to_str().unwrap().rsplit_once(';').unwrap().1;
        for forged in [
            format!("198.51.100.1:40000;{mac}"),
            format!("192.0.2.7:40000;{}", "00".repeat(32)),
            "192.0.2.7:40000".to_string(),
            format!("not an address;{mac}"),
        ] {
            let value = HeaderValue::from_str(&forged).unwrap();
            assert_eq!(key.check(&value, 7, &Method::PUT, path), None, "{forged}");
        }
        // IPv6 clients too.
        let v6: SocketAddr = "[2001:db8::1]:5000".parse().unwrap();
        let vouched = key.vouch(7, v6, &Method::GET, "/").unwrap();
        assert_eq!(key.check(&vouched, 7, &Method::GET, "/"), Some(v6));
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
