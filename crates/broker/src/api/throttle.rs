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
//! The limiter is `governor`'s keyed GCRA; at most
//! [`MAX_TRACKED_SOURCES`] sources are kept (idle ones are dropped first).

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
use crate::state::Broker;

/// Unauthenticated requests a source may send at once.
pub const UNAUTHENTICATED_BURST: u32 = 100;

/// Unauthenticated requests a source may send a second, sustained.
pub const UNAUTHENTICATED_PER_SECOND: u32 = 20;

/// At most this many sources are tracked; past it, those whose budget is
/// full again are forgotten (which only gives them the burst they have).
pub const MAX_TRACKED_SOURCES: usize = 65_536;

/// The per-source limiter of requests without a valid credential.
pub struct Throttle {
    broker: Arc<Broker>,
    unauthenticated: DefaultKeyedRateLimiter<IpAddr>,
}

impl Throttle {
    pub fn new(broker: Arc<Broker>) -> Throttle {
        let per_second = NonZeroU32::new(UNAUTHENTICATED_PER_SECOND).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(UNAUTHENTICATED_BURST).unwrap_or(NonZeroU32::MIN);
        Throttle {
            broker,
            unauthenticated: RateLimiter::keyed(Quota::per_second(per_second).allow_burst(burst)),
        }
    }

    /// Whether the request carries a credential the broker knows (admin
    /// token, API credential or host credential; what it may do is the
    /// authorization table's business, later).
    fn authenticated(&self, req: &Request) -> bool {
        req.headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(super::bearer_token)
            .is_some_and(|token| self.broker.caller(token).is_ok())
    }
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
    if throttle.authenticated(&req) {
        return next.run(req).await;
    }
    let limiter = &throttle.unauthenticated;
    if limiter.len() > MAX_TRACKED_SOURCES {
        limiter.retain_recent();
    }
    match limiter.check_key(&peer.ip()) {
        Ok(()) => next.run(req).await,
        Err(not_until) => {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            metrics::counter!("deskbroker_http_requests_throttled_total", "reason" => "unauthenticated")
                .increment(1);
            let mut answer = ApiError::new(
                ErrorCode::TooManyRequests,
                format!(
                    "too many requests without a valid credential from {}: at most \
                     {UNAUTHENTICATED_PER_SECOND} a second (bursts of {UNAUTHENTICATED_BURST}); \
                     retry after {seconds} s",
                    peer.ip()
                ),
            )
            .into_response();
            if let Ok(v) = HeaderValue::from_str(&seconds.max(1).to_string()) {
                answer.headers_mut().insert(header::RETRY_AFTER, v);
            }
            answer
        }
    }
}
