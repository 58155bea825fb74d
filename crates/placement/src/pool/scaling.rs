//! The pool as a scaling plan sees it ([`ScalingView`], rules A3–A8), made
//! from the engine's own state, so the simulator (and a broker holding a
//! `Pool`) build the view from the same counts placement uses.

use std::collections::HashMap;

use super::Pool;
use crate::autoscale::{ScalingHost, ScalingView};
use crate::model::{DrainedBy, Host, HostStatus, PowerState, SessionState};

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
    /// each host's power facts. Costs O(hosts + sessions): meant for one
    /// evaluation, not for every placement.
    pub fn scaling_view<'a>(
        &'a self,
        power: impl Fn(&'a Host) -> HostPower<'a>,
    ) -> ScalingView<'a> {
        let mut active: HashMap<&str, u32> = HashMap::with_capacity(self.hosts.len());
        for s in self.sessions.values() {
            if matches!(s.state, SessionState::Active | SessionState::Pending) {
                *active.entry(s.host.as_str()).or_default() += 1;
            }
        }
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
                    active_sessions: active.get(h.spec.name.as_str()).copied().unwrap_or(0),
                }
            })
            .collect();
        ScalingView {
            max_session_limit: self.config.max_session_limit,
            hosts,
        }
    }
}
