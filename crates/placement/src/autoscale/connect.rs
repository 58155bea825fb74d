//! Start on connect (rule A8), the pure part: given the pool as the plan
//! sees it and a connect that found no eligible host, which stopped host to
//! start — at most one, so a connect never starts spares ahead of need
//! (that is the scaling plan's job).
//!
//! The broker calls it only after the placement refused the connect, and
//! answers 503 `SessionHostStarting` with `Retry-After` for both `Start`
//! and `AlreadyStarting`; the same connect, retried, is placed once the
//! host is available.

use super::view::{ScalingHost, ScalingView};
use crate::model::{HostPoolType, PersonalDesktopAssignmentType, PoolConfig, PowerState, user_key};
use crate::pool::ConnectRequest;

/// What a connect that found no host should do about power (A8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartOnConnect<'a> {
    /// Start this host; `undrain` when the scaling plan had drained it (a
    /// host the plan stopped keeps its drain until it is needed again).
    Start { host: &'a str, undrain: bool },
    /// A host that could take the user is already starting: wait for it
    /// instead of starting another.
    AlreadyStarting { host: &'a str },
    /// No stopped host could take this user.
    NoHost,
}

fn offers(h: &ScalingHost<'_>, requires: &[String]) -> bool {
    requires.iter().all(|r| h.capabilities.contains(r))
}

/// Not drained by an operator (A6, P7: an owner's drained host takes no
/// new session, and neither does an operator's anywhere).
fn may_take(h: &ScalingHost<'_>) -> bool {
    h.allow_new_session || h.plan_drained()
}

fn first<'a>(
    view: &ScalingView<'a>,
    mut eligible: impl FnMut(&ScalingHost<'a>) -> bool,
) -> StartOnConnect<'a> {
    if let Some(h) = view
        .hosts
        .iter()
        .find(|h| h.power_state == PowerState::Starting && h.allow_new_session && eligible(h))
    {
        return StartOnConnect::AlreadyStarting { host: h.name };
    }
    match view
        .hosts
        .iter()
        .find(|h| h.power_state == PowerState::Stopped && may_take(h) && eligible(h))
    {
        Some(h) => StartOnConnect::Start {
            host: h.name,
            undrain: !h.allow_new_session,
        },
        None => StartOnConnect::NoHost,
    }
}

/// A8: the host to start for `request`, in query order. Pooled: the first
/// stopped host that offers what the connect requires (none when the
/// session limit is 0). Personal: the user's own host (the one named by
/// `sessionHost` in a `MultiplePersistent` pool); with no host of their own
/// in an `Automatic` pool, the first unassigned one, which the retried
/// connect then assigns (P7); in a `Direct` pool, none. Whether the pool
/// has `startVmOnConnect` on is the caller's to check.
pub fn start_on_connect<'a>(
    view: &ScalingView<'a>,
    config: &PoolConfig,
    request: &ConnectRequest<'_>,
) -> StartOnConnect<'a> {
    let fits = |h: &ScalingHost<'_>| offers(h, request.requires);
    match config.host_pool_type {
        HostPoolType::Pooled => {
            if view.max_session_limit == 0 {
                return StartOnConnect::NoHost;
            }
            first(view, fits)
        }
        HostPoolType::Personal => {
            let user = user_key(request.user);
            let owns = |h: &ScalingHost<'_>| h.assigned_user.is_some_and(|u| user_key(u) == user);
            if view.hosts.iter().any(owns) {
                return first(view, |h| {
                    owns(h) && request.session_host.is_none_or(|n| n == h.name) && fits(h)
                });
            }
            match config.personal_desktop_assignment_type {
                Some(PersonalDesktopAssignmentType::Automatic) => {
                    first(view, |h| h.assigned_user.is_none() && fits(h))
                }
                _ => StartOnConnect::NoHost,
            }
        }
    }
}
