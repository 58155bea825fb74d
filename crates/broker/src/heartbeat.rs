//! Hearing from session hosts: a heartbeat says the host is alive (rule
//! S7) and carries its metrics, its own thresholds (H6) and, from an agent,
//! its list of user sessions, which the broker reconciles with its own by
//! rule S8 (the broker, not the host, decides where a user belongs). Its
//! answer carries the host's messages and logoff orders (W5,
//! `crate::logoffs`). It also says where it comes from (the agent on the
//! host, or the watching agent's scrape of a windows_exporter) and what
//! that scrape found wrong, kept with the host for operators; the
//! watching agent's report of a scrape that failed whole keeps only that,
//! and is no heartbeat (W1).
//!
//! [`Heartbeats`] is the service: it owns the hosts' budgets, changes a
//! pool only through the core's `write`, and takes the host's waiting
//! messages from [`Messages`] for the answer.
//!
//! One host's heartbeats cannot starve others: each host has a budget of
//! [`HEARTBEAT_BURST`] heartbeats, refilled by one every
//! [`HEARTBEAT_REFILL`] (an agent sends one every 5 s or more, so it never
//! meets the bound; a test or a restarted agent may send a few at once). A
//! heartbeat beyond the budget is refused 429 `TooManyRequests` with
//! `Retry-After` before it reaches its pool's lock. The list is bounded
//! ([`placement::MAX_REPORTED_SESSIONS`]), and reconciling it costs
//! O(listed + the host's sessions) under the pool's lock; adopted sessions
//! are never stored, so a long list adds nothing to the store's batches
//! that every pool's writes share.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use api::types::{HeartbeatInput, HeartbeatOutput, RefusedSession, SessionHostOutput};
use placement::{
    HeartbeatSource, HostMetrics, HostSpec, MAX_REPORTED_SESSIONS, Reconciled, RefusalReason,
    validate_scrape_error,
};

use crate::core::Core;
use crate::error::BrokerError;
use crate::messages::Messages;
use crate::sync::MutexExt;

/// Heartbeats a host may send at once before the refill rate applies.
pub const HEARTBEAT_BURST: u32 = 10;

/// One more heartbeat of the budget per this much time: a host's sustained
/// rate is at most one heartbeat a second.
pub const HEARTBEAT_REFILL: Duration = Duration::from_secs(1);

/// At most this many hosts' budgets are kept; beyond it the full (idle)
/// ones are forgotten, which only grants them the burst they would have.
pub const MAX_TRACKED_HOSTS: usize = 100_000;

/// At most one log line about a host's refused entries per this much time;
/// the line says how many were refused meanwhile without one.
pub const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// Why a heartbeat was not applied.
#[derive(Debug)]
pub enum HeartbeatError {
    /// The host is over its budget: retry after this many seconds.
    TooSoon { retry_after_seconds: u64 },
    /// The broker or the engine refused it.
    Broker(BrokerError),
}

impl From<BrokerError> for HeartbeatError {
    fn from(e: BrokerError) -> HeartbeatError {
        HeartbeatError::Broker(e)
    }
}

/// Per-host heartbeat budgets and refusal log limits, kept outside the
/// pools' locks (a std mutex held for a map look-up, never across await).
#[derive(Debug, Default)]
pub struct HeartbeatLimiter {
    hosts: Mutex<HashMap<(String, String), Budget>>,
}

#[derive(Debug)]
struct Budget {
    tokens: f64,
    refilled_at: Instant,
    logged_at: Option<Instant>,
    /// Refused entries not told in a log line yet.
    unlogged: u64,
}

impl HeartbeatLimiter {
    fn with_budget<R>(
        &self,
        pool: &str,
        host: &str,
        now: Instant,
        f: impl FnOnce(&mut Budget) -> R,
    ) -> R {
        let mut hosts = self.hosts.lock_or_recover();
        if hosts.len() >= MAX_TRACKED_HOSTS {
            hosts.retain(|_, b| refill(b, now) < f64::from(HEARTBEAT_BURST));
        }
        let b = hosts
            .entry((pool.to_string(), host.to_string()))
            .or_insert(Budget {
                tokens: f64::from(HEARTBEAT_BURST),
                refilled_at: now,
                logged_at: None,
                unlogged: 0,
            });
        f(b)
    }

    /// Takes one heartbeat from the host's budget, or answers how many
    /// seconds to wait for one.
    pub fn admit(&self, pool: &str, host: &str, now: Instant) -> Result<(), u64> {
        self.with_budget(pool, host, now, |b| {
            let tokens = refill(b, now);
            if tokens >= 1.0 {
                b.tokens = tokens - 1.0;
                Ok(())
            } else {
                let wait = (1.0 - tokens) * HEARTBEAT_REFILL.as_secs_f64();
                Err((wait.ceil() as u64).max(1))
            }
        })
    }

    /// Counts `refused` entries of the host's list; answers how many to
    /// tell in a log line now (those since the last line), or None while
    /// the last line is younger than [`REFUSAL_LOG_INTERVAL`].
    fn refused(&self, pool: &str, host: &str, refused: u64, now: Instant) -> Option<u64> {
        self.with_budget(pool, host, now, |b| {
            b.unlogged += refused;
            if b.logged_at
                .is_some_and(|t| now.duration_since(t) < REFUSAL_LOG_INTERVAL)
            {
                return None;
            }
            b.logged_at = Some(now);
            Some(std::mem::take(&mut b.unlogged))
        })
    }
}

/// The budget's tokens at `now` (without taking one), and the refill noted.
fn refill(b: &mut Budget, now: Instant) -> f64 {
    let earned = now.duration_since(b.refilled_at).as_secs_f64() / HEARTBEAT_REFILL.as_secs_f64();
    b.tokens = (b.tokens + earned).min(f64::from(HEARTBEAT_BURST));
    b.refilled_at = now;
    b.tokens
}

/// The heartbeats service: the hosts' budgets, the core whose pools a
/// heartbeat changes, and the messages its answer carries.
pub struct Heartbeats {
    core: Arc<Core>,
    /// Where the host's waiting messages are taken from for the answer.
    messages: Arc<Messages>,
    limiter: HeartbeatLimiter,
}

impl Heartbeats {
    /// The service over `core`, with every host at its full budget.
    pub fn new(core: Arc<Core>, messages: Arc<Messages>) -> Heartbeats {
        Heartbeats {
            core,
            messages,
            limiter: HeartbeatLimiter::default(),
        }
    }

    /// A heartbeat of `host`: the host is alive (rule S7), its metrics and
    /// own thresholds (H6) replace the last ones, and its list of sessions,
    /// when it sends one, is reconciled with the broker's (S8); the answer
    /// says which entries were refused.
    pub async fn heartbeat(
        &self,
        pool: &str,
        host: &str,
        input: HeartbeatInput,
    ) -> Result<HeartbeatOutput, HeartbeatError> {
        if let Err(retry_after_seconds) = self.limiter.admit(pool, host, Instant::now()) {
            metrics::counter!("deskbroker_heartbeats_throttled_total").increment(1);
            return Err(HeartbeatError::TooSoon {
                retry_after_seconds,
            });
        }
        if let Some(list) = &input.sessions
            && list.len() > MAX_REPORTED_SESSIONS
        {
            return Err(BrokerError::Invalid(format!(
                "sessions: {} entries; a heartbeat lists at most {MAX_REPORTED_SESSIONS}",
                list.len()
            ))
            .into());
        }
        // Every listed user is a valid name, or the heartbeat is refused
        // whole before anything of it is applied (its time and metrics
        // included): a list naming a look-alike user changes nothing.
        for s in input.sessions.iter().flatten() {
            placement::validate_user("sessions.user", &s.user).map_err(BrokerError::from)?;
        }
        check_scrape_report(&input)?;
        if let Some(v) = &input.image_version {
            placement::validate_image_version("imageVersion", v).map_err(BrokerError::from)?;
        }
        if input.scrape_failed {
            return self.scrape_failed(pool, host, input).await;
        }
        let (source, scrape_error) = (input.source, input.scrape_error);
        let reported: Option<Vec<(String, placement::SessionState)>> = input
            .sessions
            .map(|v| v.into_iter().map(|s| (s.user, s.state)).collect());
        let listed: Option<HashSet<String>> = reported.as_ref().map(|l| {
            l.iter()
                .map(|(user, _)| placement::user_key(user))
                .collect()
        });
        let (out, reconciled, logoffs) = self
            .core
            .write(pool, |p, now| {
                // Refused whole: nothing changes before the metrics pass.
                input.metrics.validate()?;
                // The host's own thresholds (H6) and image (U1), when the
                // heartbeat says them and they changed: the host is stored
                // again only then, and a heartbeat that says neither does
                // not look.
                if input.policy.is_some() || input.image_version.is_some() {
                    let current = p.find_host(host)?;
                    let policy = input.policy.unwrap_or_else(|| current.spec.policy.clone());
                    let image_version = input
                        .image_version
                        .or_else(|| current.spec.image_version.clone());
                    if current.spec.policy != policy || current.spec.image_version != image_version
                    {
                        let spec = HostSpec {
                            policy,
                            image_version,
                            ..current.spec.clone()
                        };
                        p.upsert_host(spec, now)?;
                    }
                }
                p.heartbeat(host, input.metrics, now)?;
                p.note_report(host, source, scrape_error)?;
                // W5: users whose logoff on this host is outstanding are
                // not adopted again; read under the pool's lock, where
                // orders are made.
                let at = Instant::now();
                let logging_off = self.core.logoffs().users(pool, host, at);
                let reconciled = match &reported {
                    Some(reported) => p.reconcile_logging_off(
                        host,
                        reported,
                        &|key| logging_off.contains(key),
                        now,
                        &mut || uuid::Uuid::now_v7().to_string(),
                    )?,
                    None => Reconciled::default(),
                };
                let superseded: HashSet<String> = logging_off
                    .into_iter()
                    .filter(|key| p.has_session_on(host, key))
                    .collect();
                let logoffs =
                    self.core
                        .logoffs()
                        .settle(pool, host, listed.as_ref(), &superseded, at);
                Ok((
                    SessionHostOutput::from(p.find_host(host)?),
                    reconciled,
                    logoffs,
                ))
            })
            .await?;
        self.account(pool, host, &reconciled);
        let messages = self.messages.take_for(pool, host);
        Ok(HeartbeatOutput {
            host: out,
            refused_sessions: reconciled
                .refused
                .into_iter()
                .map(|r| RefusedSession {
                    user: r.user,
                    reason: r.reason.as_str().to_string(),
                })
                .collect(),
            messages,
            logoffs,
        })
    }

    /// The watching agent's report of a scrape that failed whole (rule
    /// W1): the host's `scrapeError` is kept, and nothing else happens.
    /// It is no heartbeat: the host's silence still counts (S7), so a host
    /// whose exporter stays down becomes `Unavailable`, and so does one
    /// whose exporter never answered well (the report marks it watched
    /// from its registration, `Pool::note_report`); nobody's session
    /// changes (W2); and the answer hands out none of the host's messages
    /// or logoff orders, which wait for a heartbeat.
    async fn scrape_failed(
        &self,
        pool: &str,
        host: &str,
        input: HeartbeatInput,
    ) -> Result<HeartbeatOutput, HeartbeatError> {
        let out = self
            .core
            .write(pool, |p, _| {
                p.note_report(host, input.source, input.scrape_error)?;
                Ok(SessionHostOutput::from(p.find_host(host)?))
            })
            .await?;
        Ok(HeartbeatOutput {
            host: out,
            refused_sessions: Vec::new(),
            messages: Vec::new(),
            logoffs: Vec::new(),
        })
    }

    /// Counts what a list did (per refusal reason) and logs its refusals,
    /// one line per host per [`REFUSAL_LOG_INTERVAL`] at most.
    fn account(&self, pool: &str, host: &str, r: &Reconciled) {
        if r.adopted > 0 {
            metrics::counter!("deskbroker_heartbeat_adopted_sessions_total")
                .increment(r.adopted as u64);
        }
        if r.refused.is_empty() {
            return;
        }
        let mut by_reason: Vec<(RefusalReason, u64)> = Vec::new();
        for x in &r.refused {
            match by_reason.iter_mut().find(|(reason, _)| *reason == x.reason) {
                Some((_, n)) => *n += 1,
                None => by_reason.push((x.reason, 1)),
            }
        }
        for (reason, n) in &by_reason {
            metrics::counter!("deskbroker_heartbeat_refused_sessions_total", "reason" => reason.as_str())
                .increment(*n);
        }
        let Some(told) = self
            .limiter
            .refused(pool, host, r.refused.len() as u64, Instant::now())
        else {
            return;
        };
        let reasons: Vec<String> = by_reason
            .iter()
            .map(|(reason, n)| format!("{}={n}", reason.as_str()))
            .collect();
        tracing::warn!(
            pool,
            host,
            refused_since_last_line = told,
            this_heartbeat = %reasons.join(" "),
            first_user = %r.refused[0].user,
            "a heartbeat listed sessions the broker does not take (rule S8); \
             no user was moved"
        );
    }
}

/// A heartbeat's `scrapeError` and `scrapeFailed` are the watching
/// agent's: an error is one bounded line, and a failed scrape's report
/// says why and carries nothing the broker would apply as a heartbeat.
/// Checked before anything changes, so a refused heartbeat changes nothing.
fn check_scrape_report(input: &HeartbeatInput) -> Result<(), BrokerError> {
    let watched = input.source == Some(HeartbeatSource::WindowsExporter);
    if let Some(e) = &input.scrape_error {
        validate_scrape_error(e)?;
        if !watched {
            return Err(BrokerError::Invalid(
                "scrapeError: only a heartbeat with source windowsExporter reports scrapes".into(),
            ));
        }
    }
    if input.scrape_failed {
        if !watched || input.scrape_error.is_none() {
            return Err(BrokerError::Invalid(
                "scrapeFailed: a failed scrape is reported with source windowsExporter and \
                 a scrapeError saying why"
                    .into(),
            ));
        }
        if input.sessions.is_some()
            || input.policy.is_some()
            || input.metrics != HostMetrics::default()
        {
            return Err(BrokerError::Invalid(
                "scrapeFailed: a failed scrape has nothing to report but its scrapeError; \
                 sessions, metrics and policy are refused with it"
                    .into(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_gets_its_burst_then_one_heartbeat_per_refill() {
        let l = HeartbeatLimiter::default();
        let t0 = Instant::now();
        for _ in 0..HEARTBEAT_BURST {
            assert_eq!(l.admit("p", "h", t0), Ok(()));
        }
        assert_eq!(l.admit("p", "h", t0), Err(1));
        // Another host of the same pool is not held back.
        assert_eq!(l.admit("p", "other", t0), Ok(()));
        let later = t0 + HEARTBEAT_REFILL;
        assert_eq!(l.admit("p", "h", later), Ok(()));
        assert_eq!(l.admit("p", "h", later), Err(1));
    }

    #[test]
    fn refusals_are_told_once_per_interval_with_what_came_between() {
        let l = HeartbeatLimiter::default();
        let t0 = Instant::now();
        assert_eq!(l.refused("p", "h", 3, t0), Some(3));
        assert_eq!(l.refused("p", "h", 5, t0 + Duration::from_secs(1)), None);
        assert_eq!(l.refused("p", "h", 2, t0 + REFUSAL_LOG_INTERVAL), Some(7));
    }
}
