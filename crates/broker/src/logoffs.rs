//! Logoff orders (rule W5): when the broker ends a session its user may be
//! logged on to (`Active` or `Disconnected`: a `DELETE`, a scaling plan's
//! forced logoff, a lifetime of S9), the host's agent is told, in the
//! answers to its heartbeats, to end that logon on the host. Without it the
//! user would stay logged on there, and the host would list the user again
//! at its next heartbeat.
//!
//! An order is repeated in every answer (an answer may be lost; the agent
//! carries each order, named by its session id, out once) until one of:
//! - the host's list leaves the user out: the logon has ended (done);
//! - the broker has placed the user on that host again since (superseded:
//!   what the host lists is now that session's);
//! - [`LOGOFF_ORDER_TTL`] has passed (expired): an agent that could carry
//!   it out has done so long before (its command runs for at most a minute,
//!   its heartbeats come every 30 s or so), so the host is past helping
//!   (an agent with no way to log users off, a host that stopped beating),
//!   and from then on the broker takes the host's list as it is (S8) and
//!   counts the user there again, which is the truth about its load.
//!
//! While an order is outstanding, the host listing that user adopts
//! nothing (S8, `loggingOff` in `refusedSessions`): the logon being ended
//! is not a new session, and the user's next connect is placed by the
//! rules, not drawn back to it.
//!
//! Only the host the session was on receives the order: orders are kept
//! per pool and host, and a heartbeat (which only that host's credential,
//! or the admin, may send) reads only its own host's.
//!
//! Bounds: [`MAX_LOGOFF_ORDERS_PER_HOST`] per host (beyond it the oldest is
//! dropped: a newer logoff matters as much, and the host's list settles
//! the rest) and [`MAX_LOGOFF_ORDERS`] in all (beyond it a new order is
//! dropped); each drop is counted in
//! `deskbroker_logoff_orders_dropped_total` and logged.
//!
//! Orders are **not durable**, like the message queue
//! (`crate::messages`): a new leader starts with none. The session's end
//! is durable; what is lost is only the request to the host, in the
//! minutes around a change of leader, and the cost is the one of having no
//! order at all (the user stays logged on at the host, which lists the
//! user again; an operator logs the user off again). Keeping them would
//! add a table and a write per logoff for a request that is worth
//! something for a few minutes.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sync::MutexExt;
use api::types::LogoffOrder;
use placement::{HostLogoff, user_key};

/// Orders outstanding for one host at most; beyond it the oldest is
/// dropped. A large RDS host runs a few hundred sessions; a scaling plan
/// logs all of a host's users off at once, well inside this.
pub const MAX_LOGOFF_ORDERS_PER_HOST: usize = 1_024;
/// Orders outstanding for all hosts at most; beyond it new ones are
/// dropped.
pub const MAX_LOGOFF_ORDERS: usize = 100_000;
/// How long an order is repeated at most (see the module's documentation).
pub const LOGOFF_ORDER_TTL: Duration = Duration::from_secs(10 * 60);

#[derive(Debug)]
struct Outstanding {
    order: LogoffOrder,
    /// The user, as the engine compares users.
    key: String,
    queued_at: Instant,
}

/// The outstanding orders, per (pool, host). A std mutex held for map
/// operations only, never across an await; taken under a pool's lock (the
/// order of locks is always pool, then this).
#[derive(Debug, Default)]
pub struct LogoffOrders {
    inner: Mutex<Orders>,
}

#[derive(Debug, Default)]
struct Orders {
    hosts: HashMap<(String, String), VecDeque<Outstanding>>,
    total: usize,
}

impl Orders {
    /// Drops every expired order (queues are in arrival order).
    fn expire(&mut self, now: Instant) {
        let mut expired = 0;
        self.hosts.retain(|_, q| {
            while q
                .front()
                .is_some_and(|o| now.duration_since(o.queued_at) >= LOGOFF_ORDER_TTL)
            {
                q.pop_front();
                expired += 1;
            }
            !q.is_empty()
        });
        if expired > 0 {
            metrics::counter!("deskbroker_logoff_orders_expired_total").increment(expired as u64);
        }
        self.total -= expired;
    }
}

fn dropped(pool: &str, logoff: &HostLogoff, why: &'static str) {
    metrics::counter!("deskbroker_logoff_orders_dropped_total", "reason" => why).increment(1);
    tracing::warn!(
        pool,
        host = %logoff.host,
        session = %logoff.session_id,
        user = %logoff.user,
        "logoff order dropped ({why}): the host is not told to end this logon (rule W5)"
    );
}

impl LogoffOrders {
    fn lock(&self) -> std::sync::MutexGuard<'_, Orders> {
        self.inner.lock_or_recover()
    }

    /// Keeps an order for each logoff of `pool`, for its host.
    pub fn push(&self, pool: &str, logoffs: Vec<HostLogoff>, now: Instant) {
        if logoffs.is_empty() {
            return;
        }
        let mut o = self.lock();
        o.expire(now);
        for l in logoffs {
            if o.total >= MAX_LOGOFF_ORDERS {
                dropped(pool, &l, "total");
                continue;
            }
            let queue = o
                .hosts
                .entry((pool.to_string(), l.host.clone()))
                .or_default();
            let mut freed = 0;
            if queue.len() >= MAX_LOGOFF_ORDERS_PER_HOST
                && let Some(old) = queue.pop_front()
            {
                freed = 1;
                let old = HostLogoff {
                    session_id: old.order.session_id,
                    host: l.host.clone(),
                    user: old.order.user,
                };
                dropped(pool, &old, "host");
            }
            tracing::info!(
                pool,
                host = %l.host,
                session = %l.session_id,
                user = %l.user,
                "logoff order for the session's host (rule W5)"
            );
            queue.push_back(Outstanding {
                key: user_key(&l.user),
                order: LogoffOrder {
                    session_id: l.session_id,
                    user: l.user,
                },
                queued_at: now,
            });
            o.total = o.total + 1 - freed;
            metrics::counter!("deskbroker_logoff_orders_queued_total").increment(1);
        }
    }

    /// The users (as the engine compares them) with an order outstanding
    /// on `host`: its list must not adopt them (S8).
    pub fn users(&self, pool: &str, host: &str, now: Instant) -> HashSet<String> {
        let mut o = self.lock();
        o.expire(now);
        o.hosts
            .get(&(pool.to_string(), host.to_string()))
            .map(|q| q.iter().map(|x| x.key.clone()).collect())
            .unwrap_or_default()
    }

    /// After a heartbeat of `host`: drops the orders it settled — users its
    /// list (`listed`, their keys, when it sent one) leaves out, and users
    /// the broker has placed on it again (`superseded`) — and answers the
    /// others, oldest first, for the heartbeat's answer.
    pub fn settle(
        &self,
        pool: &str,
        host: &str,
        listed: Option<&HashSet<String>>,
        superseded: &HashSet<String>,
        now: Instant,
    ) -> Vec<LogoffOrder> {
        let mut o = self.lock();
        o.expire(now);
        let key = (pool.to_string(), host.to_string());
        let Some(queue) = o.hosts.get_mut(&key) else {
            return Vec::new();
        };
        let before = queue.len();
        let (mut done, mut replaced) = (0u64, 0u64);
        queue.retain(|x| {
            if superseded.contains(&x.key) {
                replaced += 1;
                false
            } else if listed.is_some_and(|l| !l.contains(&x.key)) {
                done += 1;
                false
            } else {
                true
            }
        });
        let orders: Vec<LogoffOrder> = queue.iter().map(|x| x.order.clone()).collect();
        let removed = before - queue.len();
        if queue.is_empty() {
            o.hosts.remove(&key);
        }
        o.total -= removed;
        if done > 0 {
            metrics::counter!("deskbroker_logoff_orders_done_total").increment(done);
        }
        if replaced > 0 {
            metrics::counter!("deskbroker_logoff_orders_superseded_total").increment(replaced);
        }
        orders
    }

    /// Orders outstanding in all.
    pub fn len(&self) -> usize {
        self.lock().total
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logoff(id: &str, host: &str, user: &str) -> HostLogoff {
        HostLogoff {
            session_id: id.into(),
            host: host.into(),
            user: user.into(),
        }
    }

    fn ids(v: Vec<LogoffOrder>) -> Vec<String> {
        v.into_iter().map(|o| o.session_id).collect()
    }

    fn keys(users: &[&str]) -> HashSet<String> {
        users.iter().map(|u| u.to_string()).collect()
    }

    #[test]
    fn orders_repeat_until_the_host_no_longer_lists_the_user() {
        let q = LogoffOrders::default();
        let t0 = Instant::now();
        q.push(
            "p",
            vec![
                logoff("s1", "h1", "Alice@x"),
                logoff("s2", "h1", "bob@x"),
                logoff("s3", "h2", "carol@x"),
            ],
            t0,
        );
        assert_eq!(q.users("p", "h1", t0), keys(&["alice@x", "bob@x"]));
        // No list: nothing is settled, the orders are repeated.
        let none = HashSet::new();
        assert_eq!(ids(q.settle("p", "h1", None, &none, t0)), ["s1", "s2"]);
        assert_eq!(ids(q.settle("p", "h1", None, &none, t0)), ["s1", "s2"]);
        // The list still has alice, no longer bob.
        let listed = keys(&["alice@x", "dave@x"]);
        assert_eq!(ids(q.settle("p", "h1", Some(&listed), &none, t0)), ["s1"]);
        // Placed there again by the broker: superseded.
        let again = keys(&["alice@x"]);
        assert!(q.settle("p", "h1", Some(&listed), &again, t0).is_empty());
        // Another host's and another pool's orders are their own.
        assert!(q.users("p", "h1", t0).is_empty());
        assert!(q.settle("other", "h2", None, &none, t0).is_empty());
        assert_eq!(ids(q.settle("p", "h2", None, &none, t0)), ["s3"]);
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn orders_expire() {
        let q = LogoffOrders::default();
        let t0 = Instant::now();
        q.push("p", vec![logoff("old", "h", "a@x")], t0);
        q.push(
            "p",
            vec![logoff("new", "h", "b@x")],
            t0 + LOGOFF_ORDER_TTL / 2,
        );
        let none = HashSet::new();
        let later = t0 + LOGOFF_ORDER_TTL;
        assert_eq!(ids(q.settle("p", "h", None, &none, later)), ["new"]);
        assert_eq!(q.users("p", "h", later), keys(&["b@x"]));
        assert!(
            q.settle("p", "h", None, &none, t0 + LOGOFF_ORDER_TTL * 2)
                .is_empty()
        );
        assert!(q.is_empty());
    }

    #[test]
    fn a_full_host_drops_its_oldest_and_the_total_is_bounded() {
        let q = LogoffOrders::default();
        let t0 = Instant::now();
        let many: Vec<HostLogoff> = (0..MAX_LOGOFF_ORDERS_PER_HOST + 2)
            .map(|i| logoff(&format!("s{i}"), "h", &format!("u{i}@x")))
            .collect();
        q.push("p", many, t0);
        assert_eq!(q.len(), MAX_LOGOFF_ORDERS_PER_HOST);
        let got = ids(q.settle("p", "h", None, &HashSet::new(), t0));
        assert_eq!(got.len(), MAX_LOGOFF_ORDERS_PER_HOST);
        assert_eq!(got[0], "s2", "the two oldest were dropped");
        assert_eq!(
            got.last().unwrap(),
            &format!("s{}", MAX_LOGOFF_ORDERS_PER_HOST + 1)
        );

        let q = LogoffOrders::default();
        for i in 0..MAX_LOGOFF_ORDERS {
            let host = format!("h{}", i / MAX_LOGOFF_ORDERS_PER_HOST);
            q.push("p", vec![logoff(&format!("s{i}"), &host, "u@x")], t0);
        }
        q.push("p", vec![logoff("late", "fresh", "u@x")], t0);
        assert_eq!(q.len(), MAX_LOGOFF_ORDERS);
        assert!(
            q.users("p", "fresh", t0).is_empty(),
            "the new one was dropped"
        );
    }
}
