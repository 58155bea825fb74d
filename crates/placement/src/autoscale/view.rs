//! The pool as a scaling plan sees it: a small, borrowed, read-only picture
//! that the broker and the simulator can both build, so the evaluation and
//! start on connect never need the whole engine `Pool` (nor its lock held
//! longer than it takes to copy a few fields).

use crate::model::{DrainedBy, PowerState};

/// One session host, as the plan sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalingHost<'a> {
    pub name: &'a str,
    pub power_state: PowerState,
    /// Whether its status is `Available` (S7: heartbeats arriving).
    pub available: bool,
    /// False while drained, by an operator or by the plan (`drained_by`).
    pub allow_new_session: bool,
    /// Who drained it. A host that takes no new sessions and whose drain is
    /// not the plan's (including `None`, a drain from before plans existed)
    /// counts as an operator's (A6).
    pub drained_by: Option<DrainedBy>,
    pub tags: &'a [String],
    /// What the host offers, for start on connect's `requires` (A8).
    pub capabilities: &'a [String],
    /// Its owner in a personal pool (P7), for start on connect (A8).
    pub assigned_user: Option<&'a str>,
    /// Pending + Active + Disconnected.
    pub sessions: u32,
    /// Active + Pending (a logon in progress is about to be Active): what
    /// `ZeroActiveSessions` waits for.
    pub active_sessions: u32,
}

impl ScalingHost<'_> {
    /// A6: drained by anyone but the plan.
    pub fn operator_drained(&self) -> bool {
        !self.allow_new_session && self.drained_by != Some(DrainedBy::ScalingPlan)
    }

    /// Drained by the plan (and so the plan's to undrain or stop).
    pub fn plan_drained(&self) -> bool {
        !self.allow_new_session && self.drained_by == Some(DrainedBy::ScalingPlan)
    }

    /// A6: carries the plan's exclusion tag.
    pub fn excluded(&self, exclusion_tag: Option<&str>) -> bool {
        exclusion_tag.is_some_and(|t| self.tags.iter().any(|h| h == t))
    }
}

/// A pool as the plan sees it: its limit and its hosts in query order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScalingView<'a> {
    /// P4's `maxSessionLimit`: a host's share of the capacity.
    pub max_session_limit: u32,
    /// In query order: "the first stopped host" means the first here.
    pub hosts: Vec<ScalingHost<'a>>,
}
