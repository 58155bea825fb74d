//! Placement with a pick supplied by the caller: the engine still applies
//! every rule around the pick — reconnect first (S1), eligibility (S2, P4,
//! H6), the refusal and its reasons (S3), the Pending reservation (S4) —
//! and only the choice among the eligible hosts is the caller's.
//!
//! The broker never uses this: its pools place by their own algorithm
//! (`Pool::connect`). It exists so that the simulator can compare
//! deskbroker's algorithms with the rules of other products (least
//! connections, power of two choices, …) on the same engine, without a
//! second implementation of the rules they share.

use super::{Chosen, OpenBelowLimit, Pool, fits};
use crate::Error;
use crate::model::*;
use crate::pipeline::Ranked;
use crate::pool::ConnectRequest;
use crate::pool::Placement;

/// The hosts a new session may go to (S2, P4, H6, and the request's
/// `requires`), ranked by session count, fewest first, ties in query order —
/// the same view BreadthFirst and DepthFirst pick from.
pub struct Candidates<'a> {
    pool: &'a Pool,
    view: View<'a>,
    limit: u32,
}

enum View<'a> {
    /// Every host fits the request: a prefix of the pool's index, O(log n)
    /// per access, nothing copied.
    Prefix(OpenBelowLimit<'a>),
    /// Some hosts lack a required capability or refuse logons (H6): the
    /// filtered `(sessions, seq)` list.
    Filtered(Vec<(u32, u64)>),
}

impl<'a> Candidates<'a> {
    pub fn len(&self) -> usize {
        match &self.view {
            View::Prefix(v) => v.len(),
            View::Filtered(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `i`-th candidate in (session count, query order).
    pub fn get(&self, i: usize) -> &'a Host {
        let seq = match &self.view {
            View::Prefix(v) => v.get(i).1,
            View::Filtered(v) => v[i].1,
        };
        &self.pool.hosts[&seq]
    }

    /// How many candidates have fewer than `sessions` sessions.
    pub fn count_below(&self, sessions: u32) -> usize {
        match &self.view {
            View::Prefix(v) => v.count_below(sessions),
            View::Filtered(v) => v.as_slice().count_below(sessions),
        }
    }

    /// Whether the host with this `seq` is a candidate, in O(log n).
    pub fn contains(&self, seq: u64) -> bool {
        let Some(h) = self.pool.hosts.get(&seq) else {
            return false;
        };
        match &self.view {
            View::Prefix(v) => h.sessions < self.limit && v.open.contains(&(h.sessions, seq)),
            View::Filtered(v) => v.binary_search(&(h.sessions, seq)).is_ok(),
        }
    }

    /// Every candidate, in (session count, query order).
    pub fn iter(&self) -> impl Iterator<Item = &'a Host> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
}

impl Pool {
    /// [`Pool::connect`] in a pooled pool, with the host chosen by `pick`
    /// among the [`Candidates`] (it answers a host's `seq`, or `None` to
    /// refuse). A user with a session is sent back to it (S1) and `pick` is
    /// not called. A pick outside the candidates is refused as
    /// `InvalidParameter`, so a caller cannot break S2 or the limit.
    pub fn connect_picked(
        &mut self,
        req: &ConnectRequest,
        now_ms: TimestampMs,
        session_id: &str,
        pick: impl FnOnce(&Candidates) -> Option<u64>,
    ) -> Result<Placement, Error> {
        validate_user("user", req.user)?;
        validate_capabilities("requires", req.requires)?;
        if self.config.host_pool_type != HostPoolType::Pooled {
            return Err(Error::InvalidParameter(
                "a caller-picked placement needs a Pooled host pool".into(),
            ));
        }
        if req.session_host.is_some() {
            return Err(Error::InvalidParameter(
                "sessionHost: only Personal host pools let a user choose a host".into(),
            ));
        }
        if session_id.is_empty() || self.sessions.contains_key(session_id) {
            return Err(Error::Conflict(format!(
                "session id {session_id:?} is empty or already in use"
            )));
        }
        self.tick(now_ms);
        if let Some(p) = self.reconnect(req.user, None)? {
            return Ok(p);
        }
        let chosen = {
            let candidates = self.candidates(req.requires);
            let picked = pick(&candidates);
            match picked {
                None => Err(self.refusal(req.requires, &[])),
                Some(seq) => {
                    if candidates.contains(seq) {
                        Ok(Chosen::Host(seq))
                    } else {
                        Err(Error::InvalidParameter(format!(
                            "pick: host #{seq} is not eligible for a new session"
                        )))
                    }
                }
            }
        };
        match chosen? {
            Chosen::Host(seq) => Ok(self.reserve(seq, req.user, session_id, now_ms)),
            Chosen::Reconnect(p) => Ok(p),
        }
    }

    /// The eligible hosts for a new session that has `requires`.
    fn candidates(&self, requires: &[String]) -> Candidates<'_> {
        let limit = self.config.max_session_limit;
        let everyone_has = requires
            .iter()
            .all(|c| self.capability_hosts.get(c).copied().unwrap_or(0) == self.hosts.len());
        let rejecting = self.config.load_balancer_type == LoadBalancerType::LoadIndex;
        let view = if everyone_has && !rejecting {
            View::Prefix(OpenBelowLimit {
                open: &self.open,
                len: self.open.rank(&(limit, 0)),
            })
        } else {
            View::Filtered(
                self.open
                    .iter()
                    .take_while(|&&(s, _)| s < limit)
                    .filter(|(_, seq)| {
                        let h = &self.hosts[seq];
                        fits(h, requires, &[]) && !self.rejects(h)
                    })
                    .copied()
                    .collect(),
            )
        };
        Candidates {
            pool: self,
            view,
            limit,
        }
    }
}
