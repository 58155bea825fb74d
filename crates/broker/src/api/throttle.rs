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
//! A credential may carry its own `rateLimitPerSecond` (same shape: N a
//! second, bursts of 2×N): that limit is its own, in place of the broker's
//! per-credential one, and holds even when `--api-rate-limit` is 0. The
//! per-source limit of `--api-rate-limit` still applies to it.
//!
//! Audited requests (rule T5) are limited per credential always, by
//! [`Audited`], which `api::authenticate` applies once it knows the route.
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
use crate::sync::{MutexExt, RwLockExt};

/// Unauthenticated requests a source may send at once.
pub const UNAUTHENTICATED_BURST: u32 = 100;

/// Unauthenticated requests a source may send a second, sustained.
pub const UNAUTHENTICATED_PER_SECOND: u32 = 20;

/// `--api-rate-limit N` allows bursts of this many times N.
const BURST_FACTOR: NonZeroU32 = NonZeroU32::new(2).unwrap();

/// At most this many keys are tracked in each limiter; past it, those whose
/// budget is full again are forgotten (which only gives them the burst they
/// have), and if all are busy the limiter starts afresh (a flood from that
/// many addresses at once gains one burst each, and memory stays bounded).
pub const MAX_TRACKED_SOURCES: usize = 65_536;

/// A keyed limiter with a hard bound on its keys.
struct Bounded<K: std::hash::Hash + Eq + Clone> {
    quota: Quota,
    max_keys: usize,
    limiter: std::sync::RwLock<DefaultKeyedRateLimiter<K>>,
}

impl<K: std::hash::Hash + Eq + Clone> Bounded<K> {
    fn new(quota: Quota, max_keys: usize) -> Bounded<K> {
        Bounded {
            quota,
            max_keys,
            limiter: std::sync::RwLock::new(RateLimiter::keyed(quota)),
        }
    }

    /// Takes one request from `key`'s budget, or says when it may retry.
    fn check(&self, key: &K) -> Result<(), governor::NotUntil<<DefaultClock as Clock>::Instant>> {
        {
            let limiter = self.limiter.read_or_recover();
            if limiter.len() <= self.max_keys {
                return limiter.check_key(key);
            }
        }
        let mut limiter = self.limiter.write_or_recover();
        if limiter.len() > self.max_keys {
            limiter.retain_recent();
            if limiter.len() > self.max_keys {
                *limiter = RateLimiter::keyed(self.quota);
            }
        }
        limiter.check_key(key)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.limiter.read_or_recover().len()
    }
}

// Sources are keyed as at the RDP front door and the RD Gateway (T4): an
// IPv4 address, also IPv4-mapped on a dual-stack listener, or the /64
// network of an IPv6 one.
use gateway::sources::source_key;

/// The caller the throttle found for a request's bearer token, handed on to
/// `authenticate` so the token is looked up once per request.
#[derive(Clone)]
pub struct Resolved(pub Caller);

/// The per-source limiter of requests without a valid credential, and the
/// optional limiters of those with one.
pub struct Throttle {
    broker: Arc<Broker>,
    unauthenticated: Bounded<IpAddr>,
    /// `--api-rate-limit`: per credential and per source; None when 0.
    authenticated: Option<Authenticated>,
    /// Credentials with a `rateLimitPerSecond` of their own, by name, with
    /// the limit their budget was made for (a credential made anew with
    /// another limit gets a fresh budget). At most [`MAX_TRACKED_SOURCES`];
    /// past it, the map starts afresh.
    own: std::sync::Mutex<
        std::collections::HashMap<String, (u32, governor::DefaultDirectRateLimiter)>,
    >,
}

struct Authenticated {
    per_second: u32,
    by_caller: Bounded<String>,
    by_source: Bounded<IpAddr>,
}

impl Throttle {
    pub fn new(broker: Arc<Broker>) -> Throttle {
        let per_second = NonZeroU32::new(UNAUTHENTICATED_PER_SECOND).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(UNAUTHENTICATED_BURST).unwrap_or(NonZeroU32::MIN);
        let limit = broker.settings().api_rate_limit_per_second;
        let authenticated = NonZeroU32::new(limit).map(|n| {
            let quota = Quota::per_second(n).allow_burst(n.saturating_mul(BURST_FACTOR));
            Authenticated {
                per_second: n.get(),
                by_caller: Bounded::new(quota, MAX_TRACKED_SOURCES),
                by_source: Bounded::new(quota, MAX_TRACKED_SOURCES),
            }
        });
        Throttle {
            broker,
            unauthenticated: Bounded::new(
                Quota::per_second(per_second).allow_burst(burst),
                MAX_TRACKED_SOURCES,
            ),
            authenticated,
            own: Default::default(),
        }
    }

    /// Takes one request from the budget of a credential with its own
    /// limit of `n` a second.
    fn check_own(
        &self,
        name: &str,
        n: NonZeroU32,
    ) -> Result<(), governor::NotUntil<<DefaultClock as Clock>::Instant>> {
        let mut own = self.own.lock_or_recover();
        // The usual case, looked up without allocating: a budget made for
        // this limit.
        if let Some((limit, budget)) = own.get(name)
            && *limit == n.get()
        {
            return budget.check();
        }
        if !own.contains_key(name) && own.len() >= MAX_TRACKED_SOURCES {
            own.clear();
        }
        let budget =
            RateLimiter::direct(Quota::per_second(n).allow_burst(n.saturating_mul(BURST_FACTOR)));
        let answer = budget.check();
        own.insert(name.to_string(), (n.get(), budget));
        answer
    }

    /// Who the request's credential is, if the broker knows it (admin
    /// token, API credential or host credential; what it may do is the
    /// authorization table's business, later).
    fn caller(&self, req: &Request) -> Option<Caller> {
        req.headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(super::bearer_token)
            .and_then(|token| self.broker.enrollment().caller(token).ok())
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
    mut req: Request,
    next: Next,
) -> Response {
    // Requests served without a socket (in-process tests) have no source.
    let Some(ConnectInfo(peer)) = req.extensions().get::<ConnectInfo<SocketAddr>>().copied() else {
        return next.run(req).await;
    };
    let ip = peer.ip();
    if let Some(caller) = throttle.caller(&req) {
        let own = match &caller {
            Caller::Credential {
                name,
                rate_limit_per_second: Some(n),
                ..
            } => NonZeroU32::new(*n).map(|n| (name.as_str(), n)),
            _ => None,
        };
        if let Some((name, n)) = own
            && let Err(not_until) = throttle.check_own(name, n)
        {
            return too_many(
                not_until,
                "credential",
                format!("the credential {name} is over its own limit of {n} requests a second"),
            );
        }
        if let Some(limits) = &throttle.authenticated {
            let n = limits.per_second;
            if own.is_none()
                && let Err(not_until) = limits.by_caller.check(&caller_key(&caller))
            {
                return too_many(
                    not_until,
                    "credential",
                    format!("this credential is over its limit of {n} requests a second"),
                );
            }
            if let Err(not_until) = limits.by_source.check(&source_key(ip)) {
                return too_many(
                    not_until,
                    "source",
                    format!("{ip} is over its limit of {n} requests a second"),
                );
            }
        }
        req.extensions_mut().insert(Resolved(caller));
        return next.run(req).await;
    }
    match throttle.unauthenticated.check(&source_key(ip)) {
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

/// Audited requests (rule T5: every change, or attempt at one) an API
/// credential or the admin token may send a second, sustained, whatever
/// `--api-rate-limit` says: five times what the largest farm's logon storm
/// asks of one front door (ARCHITECTURE's storm of 10,000 users in a
/// minute is about 170 connects a second), while it holds a stolen
/// credential's flood of the log to at most about 0.5 MB a second.
pub const AUDITED_PER_SECOND: u32 = 1000;

/// Audited requests an API credential or the admin token may send at once:
/// ten seconds' worth, for a script that creates a farm in one go.
pub const AUDITED_BURST: u32 = 10_000;

/// A host's credential may send one audited request every this long. A
/// host's own calls (heartbeats, reading itself) are never audited, so any
/// audited request with it is a refusal, and it sits on every session host:
/// this bounds what one desktop's local administrator can write.
pub const HOST_AUDITED_PERIOD: std::time::Duration = std::time::Duration::from_secs(10);

/// Audited requests a host's credential may send at once: enough for an
/// agent's operator to try every route of the API once and see each
/// refusal, a few kilobytes of log.
pub const HOST_AUDITED_BURST: u32 = 30;

/// The limits of audited requests, per credential (rule T4), always on:
/// [`AUDITED_PER_SECOND`] (bursts of [`AUDITED_BURST`]) for the admin token
/// and each API credential, one every [`HOST_AUDITED_PERIOD`] (bursts of
/// [`HOST_AUDITED_BURST`]) for each host's credential. A request over its
/// limit is answered 429 and not recorded.
pub struct Audited {
    /// `serve --audited-rate-limit` (N a second, bursts of ten seconds'
    /// worth); None when 0: credentials other than hosts' are not limited.
    by_credential: Option<(u32, Bounded<String>)>,
    by_host: Bounded<String>,
}

impl Default for Audited {
    fn default() -> Audited {
        Audited::new(AUDITED_PER_SECOND)
    }
}

impl Audited {
    /// The limits with `per_second` audited requests a second for the admin
    /// token and each API credential (0: none); hosts' credentials are
    /// always held to theirs.
    pub fn new(per_second: u32) -> Audited {
        let nz = |n: u32| NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN);
        let host = Quota::with_period(HOST_AUDITED_PERIOD)
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
            .allow_burst(nz(HOST_AUDITED_BURST));
        Audited {
            by_credential: NonZeroU32::new(per_second).map(|n| {
                let burst = n.saturating_mul(nz(AUDITED_BURST / AUDITED_PER_SECOND));
                (
                    n.get(),
                    Bounded::new(Quota::per_second(n).allow_burst(burst), MAX_TRACKED_SOURCES),
                )
            }),
            by_host: Bounded::new(host, MAX_TRACKED_SOURCES),
        }
    }

    /// Takes one audited request from `caller`'s budget; answers the 429
    /// to send when it is spent.
    pub fn check(&self, caller: &Caller) -> Option<Response> {
        let key = caller_key(caller);
        let checked = match caller {
            Caller::Host { .. } => self.by_host.check(&key).map_err(|not_until| {
                too_many(
                    not_until,
                    "audited",
                    format!(
                        "a session host's credential may make at most {HOST_AUDITED_BURST} \
                         changes at once, then one every {} s",
                        HOST_AUDITED_PERIOD.as_secs()
                    ),
                )
            }),
            _ => match &self.by_credential {
                None => Ok(()),
                Some((per_second, limiter)) => limiter.check(&key).map_err(|not_until| {
                    too_many(
                        not_until,
                        "audited",
                        format!(
                            "this credential is over its limit of {per_second} changes a \
                             second (serve --audited-rate-limit)"
                        ),
                    )
                }),
            },
        };
        checked.err()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audited_requests_of_credentials_follow_the_flag_and_hosts_always_their_bound() {
        let host = Caller::Host {
            pool: "p".into(),
            host: "h".into(),
        };
        let unlimited = Audited::new(0);
        for _ in 0..100_000 {
            assert!(unlimited.check(&Caller::Admin).is_none());
        }
        let hosts_refused = (0..100)
            .filter(|_| unlimited.check(&host).is_some())
            .count();
        assert_eq!(hosts_refused, 100 - HOST_AUDITED_BURST as usize);
        let two = Audited::new(2);
        let refused = (0..100)
            .filter(|_| two.check(&Caller::Admin).is_some())
            .count();
        assert_eq!(refused, 80, "two a second, in bursts of twenty");
    }

    #[test]
    fn a_limiter_holds_at_most_its_bound_of_keys_however_many_sources_come() {
        let quota = Quota::per_second(NonZeroU32::MIN).allow_burst(NonZeroU32::MIN);
        let limiter: Bounded<u32> = Bounded::new(quota, 100);
        // Every key busy (its one request taken): none can be forgotten.
        for key in 0..10_000 {
            assert!(limiter.check(&key).is_ok(), "a new key has its burst");
            assert!(limiter.len() <= 101, "{} keys", limiter.len());
        }
        // A busy key within the bound is still held to its budget.
        let small: Bounded<u32> = Bounded::new(quota, 100);
        assert!(small.check(&7).is_ok());
        assert!(small.check(&7).is_err());
    }

    #[test]
    fn ipv6_sources_count_by_their_64_network() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(source_key(a), source_key(b));
        assert_ne!(source_key(a), source_key(c));
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(source_key(v4), v4);
    }

    #[test]
    fn ipv4_mapped_sources_are_their_ipv4_address_not_one_bucket() {
        // Every IPv4 client of a dual-stack `[::]` listener arrives mapped.
        let a: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        let b: IpAddr = "::ffff:198.51.100.9".parse().unwrap();
        assert_ne!(source_key(a), source_key(b));
        assert_eq!(source_key(a), "192.0.2.7".parse::<IpAddr>().unwrap());
        let limiter: Bounded<IpAddr> = Bounded::new(
            Quota::per_second(NonZeroU32::MIN).allow_burst(NonZeroU32::MIN),
            100,
        );
        assert!(limiter.check(&source_key(a)).is_ok());
        assert!(
            limiter.check(&source_key(a)).is_err(),
            "a's budget is spent"
        );
        assert!(limiter.check(&source_key(b)).is_ok(), "b has its own");
    }
}
