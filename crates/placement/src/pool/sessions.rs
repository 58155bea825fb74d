//! A pool's sessions after placement: their state (S4), the host agent's
//! list of its sessions (`reconcile`, rule S8: the broker, not the host, is
//! the authority on where a user belongs) and logoff.
//!
//! Adoption. A host may list a user the broker did not place there (a
//! console logon, a session older than the agent). Such an entry is adopted
//! only for a user with no session anywhere else in the pool (in a personal
//! pool, only the host's owner), and only while the host is below the
//! pool's `maxSessionLimit`. An adopted session is *unconfirmed*: it counts
//! on its host (the host really is that loaded), but rule S1 never sends a
//! user to it, and it is never stored. What confirms it is the broker's own
//! word, never the host's: the user's next connect drops it and places the
//! user by the rules (so a host can never capture a user by listing them,
//! however often it lists them or in whatever state); if the rules choose
//! that host, the session the broker placed there is the one the host then
//! reports. An administrator's `PATCH` of its state also confirms it.

use std::collections::HashSet;

use super::session_table::Slot;
use super::{Change, Pool};
use crate::Error;
use crate::model::*;

/// The most sessions one heartbeat may list (S8): a longer list is refused
/// whole (400). 4,096 is far more desktops than one host runs (a large RDS
/// host runs a few hundred), bounds the work a heartbeat does under its
/// pool's lock, and fits the broker's 256 KiB request body with 64 bytes
/// an entry, so the bound, not the body limit, is what a long list meets.
pub const MAX_REPORTED_SESSIONS: usize = 4_096;

/// Why an entry of a host's list was not taken (S8). The entry changed
/// nothing; the rest of the list was applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RefusalReason {
    /// The user has a session on another host of the pool.
    SessionElsewhere,
    /// A personal pool, and the user does not own this host.
    NotOwner,
    /// The host is at the pool's `maxSessionLimit`.
    HostFull,
    /// The user is listed twice; the first entry was taken.
    Duplicate,
    /// The broker logged the user's session on this host off and its
    /// agent has not yet ended it there (W5): the host still listing the
    /// user is the logon being ended, not a new one to adopt.
    LoggingOff,
}

impl RefusalReason {
    /// The reason as the API says it (`refusedSessions[].reason`) and as
    /// the refusal counter's label.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalReason::SessionElsewhere => "sessionElsewhere",
            RefusalReason::NotOwner => "notOwner",
            RefusalReason::HostFull => "hostFull",
            RefusalReason::Duplicate => "duplicate",
            RefusalReason::LoggingOff => "loggingOff",
        }
    }
}

/// Why a session ended. Every end has one: the broker logs and audits it,
/// and lists recently ended sessions with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EndReason {
    /// Logged off through the API (`DELETE` of the session): by an
    /// administrator, an operator, a portal or a front door.
    Logoff,
    /// A front door placed it and its connection closed before any logon
    /// was seen through it (rule R4): released, nothing asked of the host.
    Released,
    /// Still `Pending` `pendingTimeoutSeconds` after it was placed (S4):
    /// the client never reached the host.
    PendingTimeout,
    /// Disconnected for `pendingTimeoutSeconds` and no host ever confirmed
    /// a logon on it (S9): a client that connected but never logged on.
    NoLogonEvidence,
    /// Its host's agent sent its list of sessions without it (S8): the
    /// user logged off at the host, or the session ended there.
    NotListed,
    /// `Disconnected` for the pool's `disconnectedTimeoutSeconds` (S9).
    DisconnectedTimeout,
    /// Older than the pool's `maxSessionLifetimeSeconds` (S9).
    LifetimeExceeded,
    /// Its session host was removed with `force`.
    HostRemoved,
    /// A scaling plan's logoff action, before stopping its host (A1–A7).
    ScalingLogoff,
}

impl EndReason {
    /// Every reason, in the order documented.
    pub const ALL: [EndReason; 9] = [
        EndReason::Logoff,
        EndReason::Released,
        EndReason::PendingTimeout,
        EndReason::NoLogonEvidence,
        EndReason::NotListed,
        EndReason::DisconnectedTimeout,
        EndReason::LifetimeExceeded,
        EndReason::HostRemoved,
        EndReason::ScalingLogoff,
    ];

    /// The reason as the API, the audit log and the broker's log say it
    /// (`endReason`): a stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Logoff => "logoff",
            EndReason::Released => "released",
            EndReason::PendingTimeout => "pendingTimeout",
            EndReason::NoLogonEvidence => "noLogonEvidence",
            EndReason::NotListed => "notListed",
            EndReason::DisconnectedTimeout => "disconnectedTimeout",
            EndReason::LifetimeExceeded => "lifetimeExceeded",
            EndReason::HostRemoved => "hostRemoved",
            EndReason::ScalingLogoff => "scalingLogoff",
        }
    }

    /// The reason of its wire name.
    pub fn parse(name: &str) -> Option<EndReason> {
        EndReason::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// Whether the broker decided this end by itself (a timeout, a
    /// lifetime, a scaling plan), not on anyone's request or a host's word.
    pub fn by_broker(self) -> bool {
        matches!(
            self,
            EndReason::PendingTimeout
                | EndReason::NoLogonEvidence
                | EndReason::DisconnectedTimeout
                | EndReason::LifetimeExceeded
                | EndReason::ScalingLogoff
        )
    }
}

impl std::fmt::Display for EndReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A session that ended ([`Change::SessionEnded`]): the session as it was
/// when it ended, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndedSession {
    pub session: Session,
    pub reason: EndReason,
}

/// One refused entry of a host's list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefusedSession {
    pub user: String,
    pub reason: RefusalReason,
}

/// A session the broker ended while its user may still be logged on at its
/// host (W5): it was `Active` or `Disconnected` (a `Pending` one never
/// logged on). The host's agent is told to end the logon there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostLogoff {
    pub session_id: String,
    pub host: String,
    pub user: String,
}

/// Logoffs kept for the caller at most (W5); beyond it the oldest is
/// dropped. The broker takes them after every operation, so only a caller
/// that never takes them (the simulator) meets the bound.
pub const MAX_UNTAKEN_HOST_LOGOFFS: usize = 4_096;

/// What a reconciliation did besides its changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reconciled {
    /// Entries not taken: duplicates first, then the others in the order
    /// listed.
    pub refused: Vec<RefusedSession>,
    /// Sessions adopted (unconfirmed) by this list.
    pub adopted: usize,
}

impl Pool {
    /// Sets a session `Active` or `Disconnected` (rule S4): the word of its
    /// host or of an administrator. It confirms the session's logon (S9),
    /// and on a session adopted from its host's list (S8) it confirms the
    /// session itself, which from then on is stored and used by S1.
    pub fn set_session_state(
        &mut self,
        id: &str,
        state: SessionState,
        now_ms: TimestampMs,
    ) -> Result<(), Error> {
        check_settable(state)?;
        let slot = self.find_slot(id)?;
        let confirmed = std::mem::replace(&mut self.sessions.entry_mut(slot).unconfirmed, false);
        let logon = self.confirm_logon(slot);
        let was = self.sessions[slot].session.state;
        self.change_state(slot, state, now_ms);
        if (confirmed || logon) && was == state {
            self.changes.push(Change::Session(id.to_string()));
        }
        Ok(())
    }

    /// Sets a session `Active` or `Disconnected` as a front door that
    /// relays its connection saw it (rule R4): the state only. A relayed
    /// connection proves no logon, so this never confirms one (S9): a
    /// session awaiting its logon stays so, and ends `pendingTimeoutSeconds`
    /// after it is disconnected unless its host confirms the logon first.
    pub fn mark_relayed_session(
        &mut self,
        id: &str,
        state: SessionState,
        now_ms: TimestampMs,
    ) -> Result<(), Error> {
        check_settable(state)?;
        let slot = self.find_slot(id)?;
        self.change_state(slot, state, now_ms);
        Ok(())
    }

    /// Marks the session in `slot` as logged on (S9); answers whether that
    /// changed it (the caller records the change).
    fn confirm_logon(&mut self, slot: Slot) -> bool {
        if !self.sessions[slot].session.awaiting_logon {
            return false;
        }
        self.unindex_session(slot);
        self.sessions.entry_mut(slot).session.awaiting_logon = false;
        self.index_session(slot);
        true
    }

    /// Sets a session's state; a change of a confirmed session is recorded.
    fn change_state(&mut self, slot: Slot, state: SessionState, now_ms: TimestampMs) {
        if self.sessions[slot].session.state == state {
            return;
        }
        self.unindex_session(slot);
        let e = self.sessions.entry_mut(slot);
        e.session.state = state;
        e.session.state_since_ms = now_ms;
        self.index_session(slot);
        let e = &self.sessions[slot];
        if !e.unconfirmed {
            self.changes.push(Change::Session(e.session.id.clone()));
        }
    }

    /// Reconciles the broker's sessions on `host` with the host's own full
    /// list (from its agent), by rule S8:
    /// - a session the broker has on this host and the host lists takes the
    ///   state listed (Active, Disconnected; never back to Pending);
    /// - an Active or Disconnected session on this host it no longer lists
    ///   has ended (logoff); a Pending one is kept until the host shows it
    ///   or it expires (S4), since a logon in progress may not be visible;
    /// - a user the broker has no session for on this host is adopted, as
    ///   an unconfirmed session with an id from `new_id` (see the file's
    ///   comment), only if the user has no session elsewhere in the pool,
    ///   owns the host (personal pools) and the host is below the limit
    ///   (pooled pools); anything else is refused for that entry.
    ///
    /// A list longer than [`MAX_REPORTED_SESSIONS`] or with an invalid user
    /// is refused whole. The work is O(listed + the host's sessions): no
    /// other host's sessions are looked at.
    pub fn reconcile(
        &mut self,
        host: &str,
        reported: &[(String, SessionState)],
        now_ms: TimestampMs,
        new_id: &mut dyn FnMut() -> String,
    ) -> Result<Reconciled, Error> {
        self.reconcile_logging_off(host, reported, &|_| false, now_ms, new_id)
    }

    /// [`Pool::reconcile`], where a listed user with no session on the
    /// host for whom `logging_off(user_key)` holds is refused
    /// ([`RefusalReason::LoggingOff`]) instead of adopted: the broker logged
    /// that user's session there off and the host has not ended it yet
    /// (W5). A session the broker placed for the user on the host since is
    /// taken as usual.
    pub fn reconcile_logging_off(
        &mut self,
        host: &str,
        reported: &[(String, SessionState)],
        logging_off: &dyn Fn(&str) -> bool,
        now_ms: TimestampMs,
        new_id: &mut dyn FnMut() -> String,
    ) -> Result<Reconciled, Error> {
        if reported.len() > MAX_REPORTED_SESSIONS {
            return Err(Error::InvalidParameter(format!(
                "sessions: {} entries; a heartbeat lists at most {MAX_REPORTED_SESSIONS}",
                reported.len()
            )));
        }
        for (user, _) in reported {
            validate_user("sessions.user", user)?;
        }
        let seq = self.seq_of(host)?;
        let mut out = Reconciled::default();
        let mut listed: Vec<(&str, String, SessionState)> = Vec::with_capacity(reported.len());
        let mut seen = HashSet::with_capacity(reported.len());
        for (user, state) in reported {
            let key = user_key(user);
            if seen.insert(key.clone()) {
                listed.push((user, key, *state));
            } else {
                out.refused.push(RefusedSession {
                    user: user.clone(),
                    reason: RefusalReason::Duplicate,
                });
            }
        }
        // Ends first, so that a host whose users changed is judged against
        // the limit with the sessions it still has.
        let ended: Vec<Slot> = self
            .host_session_slots(seq)
            .iter()
            .copied()
            .filter(|&slot| {
                let s = &self.sessions[slot].session;
                s.state != SessionState::Pending && !seen.contains(&user_key(&s.user))
            })
            .collect();
        for slot in ended {
            self.end_session(slot, EndReason::NotListed);
        }
        for (user, key, state) in listed {
            if let Some(slot) = self.session_on(seq, &key) {
                // The host lists the user: a logon took place (S9). The
                // host never turns a session back into Pending.
                let logon = !self.sessions[slot].unconfirmed && self.confirm_logon(slot);
                let was = self.sessions[slot].session.state;
                if state != SessionState::Pending {
                    self.change_state(slot, state, now_ms);
                }
                if logon && self.sessions[slot].session.state == was {
                    let id = self.sessions[slot].session.id.clone();
                    self.changes.push(Change::Session(id));
                }
                continue;
            }
            let refused = if logging_off(&key) {
                Some(RefusalReason::LoggingOff)
            } else {
                self.adoption_refused(seq, &key)
            };
            if let Some(reason) = refused {
                out.refused.push(RefusedSession {
                    user: user.to_string(),
                    reason,
                });
                continue;
            }
            let id = new_id();
            if id.is_empty() || self.sessions.contains(&id) {
                return Err(Error::Conflict(format!(
                    "session id {id:?} is empty or already in use"
                )));
            }
            // Unconfirmed: not recorded in `changes`, as it is not stored.
            self.insert_session_on(
                seq,
                Session {
                    id,
                    host: host.to_string(),
                    user: user.to_string(),
                    state,
                    create_time_ms: now_ms,
                    state_since_ms: now_ms,
                    awaiting_logon: false,
                },
                true,
            );
            out.adopted += 1;
        }
        Ok(out)
    }

    /// The slot of the session of the user keyed `key` on the host `seq`,
    /// if any.
    fn session_on(&self, seq: u64, key: &str) -> Option<Slot> {
        self.sessions
            .user_sessions(key)
            .iter()
            .copied()
            .find(|&slot| self.sessions[slot].host == seq)
    }

    /// Why the host `seq` may not adopt a session of the user keyed `key`
    /// (S8), who has none on it; None when it may.
    fn adoption_refused(&self, seq: u64, key: &str) -> Option<RefusalReason> {
        if self.sessions.has_user(key) {
            return Some(RefusalReason::SessionElsewhere);
        }
        let h = &self.hosts[&seq];
        match self.config.host_pool_type {
            HostPoolType::Personal => {
                let owner = h.spec.assigned_user.as_deref().map(user_key);
                (owner.as_deref() != Some(key)).then_some(RefusalReason::NotOwner)
            }
            HostPoolType::Pooled => {
                (h.sessions >= self.config.max_session_limit).then_some(RefusalReason::HostFull)
            }
        }
    }

    /// A connect of `user` drops the user's unconfirmed sessions (S8): the
    /// broker places the user by its own rules, and a host's word is not
    /// one of them. The pool then holds at most the session it places.
    pub(super) fn drop_unconfirmed(&mut self, user: &str) {
        let drop: Vec<Slot> = self
            .sessions
            .user_sessions(user)
            .iter()
            .copied()
            .filter(|&slot| self.sessions[slot].unconfirmed)
            .collect();
        for slot in drop {
            // Never stored, so its end is not recorded either.
            self.remove_session_entry(slot);
        }
    }

    /// Whether `user` has a session on `host` (any state, confirmed or
    /// not).
    pub fn has_session_on(&self, host: &str, user: &str) -> bool {
        self.seq_of(host)
            .is_ok_and(|seq| self.session_on(seq, &user_key(user)).is_some())
    }

    /// Ends a session (logoff). One that was `Active` or `Disconnected` is
    /// also kept for the caller (W5, [`Pool::take_host_logoffs`]) so that
    /// its host ends the logon.
    pub fn logoff(&mut self, id: &str) -> Result<(), Error> {
        self.logoff_for(id, EndReason::Logoff)
    }

    /// [`Pool::logoff`], recorded with `reason` (a scaling plan's logoff).
    pub fn logoff_for(&mut self, id: &str, reason: EndReason) -> Result<(), Error> {
        let slot = self.find_slot(id)?;
        self.log_off(slot, reason);
        Ok(())
    }

    /// Ends a session a front door placed and could not use (no logon was
    /// seen through it): nothing is asked of its host.
    pub fn release(&mut self, id: &str) -> Result<(), Error> {
        let slot = self.find_slot(id)?;
        self.end_session(slot, EndReason::Released);
        Ok(())
    }

    /// The logoffs of `Active` and `Disconnected` sessions since the last
    /// call, oldest first, for their hosts' agents (W5).
    pub fn take_host_logoffs(&mut self) -> Vec<HostLogoff> {
        self.host_logoffs.drain(..).collect()
    }

    /// Ends a session by the broker's decision (a logoff, a lifetime of
    /// S9), keeping a [`HostLogoff`] when the user may be logged on at the
    /// host.
    pub(super) fn log_off(&mut self, slot: Slot, reason: EndReason) {
        let s = &self.sessions[slot].session;
        if s.state != SessionState::Pending {
            if self.host_logoffs.len() >= MAX_UNTAKEN_HOST_LOGOFFS {
                self.host_logoffs.pop_front();
            }
            self.host_logoffs.push_back(HostLogoff {
                session_id: s.id.clone(),
                host: s.host.clone(),
                user: s.user.clone(),
            });
        }
        self.end_session(slot, reason);
    }

    /// Ends a session for `reason`; the end of an unconfirmed one (never
    /// stored) is not recorded.
    pub(super) fn end_session(&mut self, slot: Slot, reason: EndReason) {
        let e = self.remove_session_entry(slot);
        if !e.unconfirmed {
            self.changes.push(Change::SessionEnded(EndedSession {
                session: e.session,
                reason,
            }));
        }
    }
}

/// Rule S4: no client sets a session back to Pending.
fn check_settable(state: SessionState) -> Result<(), Error> {
    if state == SessionState::Pending {
        return Err(Error::InvalidParameter(
            "sessionState: a session can be set Active or Disconnected, not Pending".into(),
        ));
    }
    Ok(())
}
