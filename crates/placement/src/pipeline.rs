//! The shared steps of every pooled algorithm: filter (with named reasons),
//! rank and pick, over a view of the candidates already ranked by
//! (session count, query order).
//!
//! The pool keeps its open hosts ranked (`pool/open.rs`: rank and select
//! by session count and query order) so that the fast path never sorts; when a request needs a capability some hosts
//! lack, the same picks run over a filtered, ranked vector instead. Either
//! way the decision is made by the functions here, so the two paths cannot
//! disagree.

use crate::model::LoadBalancerType;

/// Hosts eligible for a new session (rule S2), ranked by session count,
/// fewest first, ties in query order. Entries are `(sessions, seq)`.
pub trait Ranked {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn get(&self, i: usize) -> (u32, u64);
    /// How many candidates have fewer than `sessions` sessions.
    fn count_below(&self, sessions: u32) -> usize;
}

impl Ranked for [(u32, u64)] {
    fn len(&self) -> usize {
        <[(u32, u64)]>::len(self)
    }
    fn get(&self, i: usize) -> (u32, u64) {
        self[i]
    }
    fn count_below(&self, sessions: u32) -> usize {
        self.partition_point(|&(s, _)| s < sessions)
    }
}

/// Maps 64 random bits to an index in `0..k` without modulo bias worth the
/// name (Lemire's multiply-shift). `k` must not be 0.
pub fn uniform_below(random: u64, k: usize) -> usize {
    ((u128::from(random) * k as u128) >> 64) as usize
}

/// Rank and pick for the pooled algorithms: the `seq` of the chosen host, or
/// `None` when there is no candidate.
pub fn pick(
    lb: LoadBalancerType,
    randomized: bool,
    candidates: &(impl Ranked + ?Sized),
    random: u64,
) -> Option<u64> {
    if candidates.is_empty() {
        return None;
    }
    let n = candidates.len();
    match lb {
        // B1: the least-loaded half, rounded up, uniformly at random.
        LoadBalancerType::BreadthFirst if randomized => {
            let half = n.div_ceil(2);
            Some(candidates.get(uniform_below(random, half)).1)
        }
        // B3: the host with the fewest sessions, ties in query order.
        LoadBalancerType::BreadthFirst => Some(candidates.get(0).1),
        // D1: the most sessions, ties to the first in query order.
        LoadBalancerType::DepthFirst => {
            let most = candidates.get(n - 1).0;
            Some(candidates.get(candidates.count_below(most)).1)
        }
        _ => None,
    }
}

/// Why hosts were filtered out, counted once each in the order the filters
/// run: unavailable, then drained, then at the limit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FilterCounts {
    pub hosts: usize,
    pub lacking_capability: usize,
    pub unavailable: usize,
    pub drained: usize,
    pub at_limit: usize,
    /// LoadIndex pools: hosts refusing logons at their own thresholds (H6).
    pub rejecting: usize,
    /// Hosts the caller passed over (the front door could not reach them).
    pub excluded: usize,
}

/// Rule S3: the message of a refused connect, saying why no host fits.
pub fn explain_refusal(counts: &FilterCounts, limit: u32, requires: &[String]) -> String {
    let c = counts;
    if c.hosts == 0 {
        return "the host pool has no session hosts: add session hosts".into();
    }
    if c.lacking_capability == c.hosts {
        return format!(
            "no session host offers every capability required ({}): add such session hosts",
            requires.join(", ")
        );
    }
    let considered = c.hosts - c.lacking_capability;
    if limit == 0 {
        return "the max session limit is 0, so no new sessions are allowed: increase the \
                limit"
            .into();
    }
    let limit_text = format!("the max session limit ({limit})");
    // "All session hosts …" only when no host was set aside for lacking a
    // capability; otherwise the mixed list below names every reason.
    if c.lacking_capability > 0 {
        return mixed(c, &limit_text, requires);
    }
    if c.at_limit == considered {
        return format!(
            "all session hosts have reached {limit_text}: increase the limit or add session hosts"
        );
    }
    if c.drained == considered {
        return "all session hosts are in drain mode: allow new sessions on a host".into();
    }
    if c.rejecting == considered {
        return "every session host refuses new logons: each is at its load index or \
                connecting session threshold (loadIndexSettings or the host's policy)"
            .into();
    }
    if c.unavailable == considered {
        return "no session host is available: every session host has stopped sending \
                heartbeats"
            .into();
    }
    mixed(c, &limit_text, requires)
}

fn mixed(c: &FilterCounts, limit_text: &str, requires: &[String]) -> String {
    let mut parts = Vec::new();
    if c.unavailable > 0 {
        parts.push(format!("{} unavailable", c.unavailable));
    }
    if c.drained > 0 {
        parts.push(format!("{} in drain mode", c.drained));
    }
    if c.at_limit > 0 {
        parts.push(format!("{} at {limit_text}", c.at_limit));
    }
    if c.excluded > 0 {
        parts.push(format!("{} could not be reached", c.excluded));
    }
    if c.rejecting > 0 {
        parts.push(format!(
            "{} refusing new logons at their load index or connecting session threshold",
            c.rejecting
        ));
    }
    if c.lacking_capability > 0 {
        parts.push(format!(
            "{} lacking a required capability ({})",
            c.lacking_capability,
            requires.join(", ")
        ));
    }
    format!(
        "no session host can take a new session: {}",
        parts.join(", ")
    )
}
