//! Rule T4's always-on part: requests that carry no valid credential —
//! none at all, or one the broker does not know — are limited per source
//! address, so a client without a secret can neither guess tokens at wire
//! speed nor keep the broker busy answering 401s and public pages. Each
//! source may send [`UNAUTHENTICATED_BURST`] such requests at once and
//! [`UNAUTHENTICATED_PER_SECOND`] a second after that; beyond it the answer
//! is 429 `TooManyRequests` with `Retry-After`, before routing or any
//! handler. A request with a valid credential is never counted here, so an
//! administrator or an agent behind the same address is unaffected.
//!
//! With `serve --api-rate-limit N` (0, the default, is no limit), requests
//! WITH a valid credential are limited too: N a second, in bursts of 2×N,
//! for each credential (the admin token, an API credential, a host's
//! credential) and for each source address, so a runaway script or a
//! leaked credential cannot monopolise the broker.
//!
//! The limiters are `governor`'s keyed GCRA; at most
//! [`MAX_TRACKED_SOURCES`] keys are kept in each (idle ones are dropped
//! first).

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::Arc;

use api::ErrorCode;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use super::error::ApiError;
use crate::enroll::Caller;
use crate::state::Broker;

/// Unauthenticated requests a source may send at once.
pub const UNAUTHENTICATED_BURST: u32 = 100;

/// Unauthenticated requests a source may send a second, sustained.
pub const UNAUTHENTICATED_PER_SECOND: u32 = 20;

/// `--api-rate-limit N` allows bursts of this many times N.
const BURST_FACTOR: NonZeroU32 = NonZeroU32::new(2).unwrap();

/// At most this many sources are tracked; past it, those whose budget is
/// full again are forgotten (which only gives them the burst they have).
pub const MAX_TRACKED_SOURCES: usize = 65_536;

/// The per-source limiter of requests without a valid credential, and the
/// optional limiters of those with one.
pub struct Throttle {
    broker: Arc<Broker>,
    unauthenticated: DefaultKeyedRateLimiter<IpAddr>,
    /// `--api-rate-limit`: per credential and per source; None when 0.
    authenticated: Option<Authenticated>,
}

struct Authenticated {
    per_second: u32,
    by_caller: DefaultKeyedRateLimiter<String>,
    by_source: DefaultKeyedRateLimiter<IpAddr>,
}

impl Throttle {
    pub fn new(broker: Arc<Broker>) -> Throttle {
        let per_second = NonZeroU32::new(UNAUTHENTICATED_PER_SECOND).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(UNAUTHENTICATED_BURST).unwrap_or(NonZeroU32::MIN);
        let limit = broker
            .api_rate_limit_per_second
            .load(std::sync::atomic::Ordering::Relaxed);
        let authenticated = NonZeroU32::new(limit).map(|n| {
            let quota = Quota::per_second(n).allow_burst(n.saturating_mul(BURST_FACTOR));
            Authenticated {
                per_second: n.get(),
                by_caller: RateLimiter::keyed(quota),
                by_source: RateLimiter::keyed(quota),
            }
        });
        Throttle {
            broker,
            unauthenticated: RateLimiter::keyed(Quota::per_second(per_second).allow_burst(burst)),
            authenticated,
        }
    }

    /// Who the request's credential is, if the broker knows it (admin
    /// token, API credential or host credential; what it may do is the
    /// authorization table's business, later).
    fn caller(&self, req: &Request) -> Option<Caller> {
        req.headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(super::bearer_token)
            .and_then(|token| self.broker.caller(token).ok())
    }
}

/// The key a credential is limited by.
fn caller_key(caller: &Caller) -> String {
    match caller {
        Caller::Admin => "admin".to_string(),
        Caller::Host { pool, host } => format!("host:{pool}/{host}"),
        Caller::Credential { name, .. } => format!("credential:{name}"),
    }
}

/// Forgets idle keys once a limiter holds more than [`MAX_TRACKED_SOURCES`].
fn bound<K: std::hash::Hash + Eq + Clone>(limiter: &DefaultKeyedRateLimiter<K>) {
    if limiter.len() > MAX_TRACKED_SOURCES {
        limiter.retain_recent();
    }
}

/// 429 `TooManyRequests` with `Retry-After` in whole seconds (at least 1).
fn too_many(
    not_until: governor::NotUntil<<DefaultClock as Clock>::Instant>,
    reason: &'static str,
    message: String,
) -> Response {
    let wait = not_until.wait_time_from(DefaultClock::default().now());
    let seconds = (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1);
    metrics::counter!("deskbroker_http_requests_throttled_total", "reason" => reason).increment(1);
    let mut answer = ApiError::new(
        ErrorCode::TooManyRequests,
        format!("{message}; retry after {seconds} s"),
    )
    .into_response();
    if let Ok(v) = HeaderValue::from_str(&seconds.to_string()) {
        answer.headers_mut().insert(header::RETRY_AFTER, v);
    }
    answer
}

/// The layer: counts a request without a valid credential against its
/// source, and answers 429 once the source is over its budget.
pub async fn limit_unauthenticated(
    State(throttle): State<Arc<Throttle>>,
    req: Request,
    next: Next,
) -> Response {
    // Requests served without a socket (in-process tests) have no source.
    let Some(ConnectInfo(peer)) = req.extensions().get::<ConnectInfo<SocketAddr>>().copied() else {
        return next.run(req).await;
    };
    let ip = peer.ip();
    if let Some(caller) = throttle.caller(&req) {
        if let Some(limits) = &throttle.authenticated {
            bound(&limits.by_caller);
            bound(&limits.by_source);
            let n = limits.per_second;
            if let Err(not_until) = limits.by_caller.check_key(&caller_key(&caller)) {
                return too_many(
                    not_until,
                    "credential",
                    format!("this credential is over its limit of {n} requests a second"),
                );
            }
            if let Err(not_until) = limits.by_source.check_key(&ip) {
                return too_many(
                    not_until,
                    "source",
                    format!("{ip} is over its limit of {n} requests a second"),
                );
            }
        }
        return next.run(req).await;
    }
    let limiter = &throttle.unauthenticated;
    bound(limiter);
    match limiter.check_key(&ip) {
        Ok(()) => next.run(req).await,
        Err(not_until) => too_many(
            not_until,
            "unauthenticated",
            format!(
                "too many requests without a valid credential from {ip}: at most \
                 {UNAUTHENTICATED_PER_SECOND} a second (bursts of {UNAUTHENTICATED_BURST})"
            ),
        ),
    }
}
