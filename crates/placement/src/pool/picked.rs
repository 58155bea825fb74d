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

use super::Pool;
use super::placement::View;
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
}

impl<'a> Candidates<'a> {
    pub fn len(&self) -> usize {
        self.view.len()
    }

    pub fn is_empty(&self) -> bool {
        self.view.is_empty()
    }

    /// The `i`-th candidate in (session count, query order).
    pub fn get(&self, i: usize) -> &'a Host {
        &self.pool.hosts[&self.view.get(i).1]
    }

    /// How many candidates have fewer than `sessions` sessions.
    pub fn count_below(&self, sessions: u32) -> usize {
        self.view.count_below(sessions)
    }

    /// Whether the host with this `seq` is a candidate, in O(log n).
    pub fn contains(&self, seq: u64) -> bool {
        self.pool
            .hosts
            .get(&seq)
            .is_some_and(|h| self.view.contains((h.sessions, seq)))
    }

    /// Every candidate, in (session count, query order).
    pub fn iter(&self) -> impl Iterator<Item = &'a Host> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
}

impl Pool {
    /// [`Pool::connect`] in a pooled pool, with the host chosen by `pick`
    /// among the [`Candidates`] (it answers a host's `seq`, or `None` to
    /// refuse). Everything before the choice is `connect`'s own
    /// (`check_connect`): a user with a session is sent back to it (S1) and
    /// `pick` is not called. A pick outside the candidates is refused as
    /// `InvalidParameter`, so a caller cannot break S2 or the limit.
    pub fn connect_picked(
        &mut self,
        req: &ConnectRequest,
        now_ms: TimestampMs,
        session_id: &str,
        pick: impl FnOnce(&Candidates) -> Option<u64>,
    ) -> Result<Placement, Error> {
        if self.config.host_pool_type != HostPoolType::Pooled {
            return Err(Error::InvalidParameter(
                "a caller-picked placement needs a Pooled host pool".into(),
            ));
        }
        if let Some(p) = self.check_connect(req, now_ms, session_id)? {
            return Ok(p);
        }
        let seq = {
            let candidates = Candidates {
                pool: self,
                view: self.eligible(req.requires, &[]),
            };
            match pick(&candidates) {
                None => return Err(self.refusal(req.requires, &[])),
                Some(seq) if candidates.contains(seq) => seq,
                Some(seq) => {
                    return Err(Error::InvalidParameter(format!(
                        "pick: host #{seq} is not eligible for a new session"
                    )));
                }
            }
        };
        Ok(self.reserve(seq, req.user, session_id, now_ms))
    }
}
