//! The pool as a scaling plan sees it ([`ScalingView`], rules A3–A8), made
//! from the engine's own state, so the simulator (and a broker holding a
//! `Pool`) build the view from the same counts placement uses.

use super::Pool;
use crate::autoscale::{ScalingHost, ScalingView};
use crate::model::{DrainedBy, Host, HostStatus, PowerState};

/// What the engine's `Host` does not hold (yet) and the caller knows: its
/// power state, who drained it and its tags (rules A6, A9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostPower<'a> {
    pub power_state: PowerState,
    pub drained_by: Option<DrainedBy>,
    pub tags: &'a [String],
}

impl Pool {
    /// The view of this pool, hosts in query order, with `power` telling
    /// each host's power facts. Costs O(hosts): every count is kept per
    /// host by the engine as sessions change.
    pub fn scaling_view<'a>(
        &'a self,
        power: impl Fn(&'a Host) -> HostPower<'a>,
    ) -> ScalingView<'a> {
        let hosts = self
            .hosts
            .values()
            .map(|h| {
                let p = power(h);
                ScalingHost {
                    name: &h.spec.name,
                    power_state: p.power_state,
                    available: h.status == HostStatus::Available,
                    allow_new_session: h.spec.allow_new_session,
                    drained_by: p.drained_by,
                    tags: p.tags,
                    capabilities: &h.spec.capabilities,
                    assigned_user: h.spec.assigned_user.as_deref(),
                    sessions: h.sessions,
                    // Active and Pending: every session not Disconnected.
                    active_sessions: h.sessions - h.disconnected_sessions,
                }
            })
            .collect();
        ScalingView {
            max_session_limit: self.config.max_session_limit,
            hosts,
        }
    }
}
