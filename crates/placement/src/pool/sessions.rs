//! A pool's sessions after placement: their state (S4), the host agent's
//! authoritative list (`reconcile`) and logoff.

use std::collections::{BTreeSet, HashMap};

use super::{Change, Pool};
use crate::Error;
use crate::model::*;

impl Pool {
    /// Sets a session `Active` or `Disconnected` (rule S4).
    pub fn set_session_state(
        &mut self,
        id: &str,
        state: SessionState,
        now_ms: TimestampMs,
    ) -> Result<(), Error> {
        if state == SessionState::Pending {
            return Err(Error::InvalidParameter(
                "sessionState: a session can be set Active or Disconnected, not Pending".into(),
            ));
        }
        let s = self.find_session(id)?;
        if s.state == state {
            return Ok(());
        }
        let s = self.remove_session_entry(id);
        self.insert_session(Session {
            state,
            state_since_ms: now_ms,
            ..s
        });
        self.changes.push(Change::Session(id.to_string()));
        Ok(())
    }

    /// Reconciles the broker's sessions on `host` with the host's own full
    /// list (from its agent). The host is the authority on what runs on it:
    /// - a session it reports that the broker did not place is adopted (it
    ///   counts, and its user gets affinity, S1), with an id from `new_id`;
    /// - a Pending session it reports Active becomes Active; a state it
    ///   reports (Active, Disconnected) is taken;
    /// - an Active or Disconnected session it no longer reports has ended
    ///   (logoff); a Pending one is kept until the host shows it or it
    ///   expires (S4), since a logon in progress may not be visible yet.
    ///
    /// Users the host reports twice count once.
    pub fn reconcile(
        &mut self,
        host: &str,
        reported: &[(String, SessionState)],
        now_ms: TimestampMs,
        new_id: &mut dyn FnMut() -> String,
    ) -> Result<(), Error> {
        for (user, _) in reported {
            validate_user("sessions.user", user)?;
        }
        self.find_host(host)?;
        let mut on_host: HashMap<String, String> = self
            .sessions
            .values()
            .filter(|s| s.host == host)
            .map(|s| (user_key(&s.user), s.id.clone()))
            .collect();
        let mut seen = BTreeSet::new();
        for (user, state) in reported {
            let key = user_key(user);
            if !seen.insert(key.clone()) {
                continue;
            }
            match on_host.remove(&key) {
                Some(id) => {
                    let current = self.sessions[&id].state;
                    // The host never turns a session back into Pending.
                    if *state != current && *state != SessionState::Pending {
                        self.set_session_state(&id, *state, now_ms)?;
                    }
                }
                None => {
                    let id = new_id();
                    if id.is_empty() || self.sessions.contains_key(&id) {
                        return Err(Error::Conflict(format!(
                            "session id {id:?} is empty or already in use"
                        )));
                    }
                    self.insert_session(Session {
                        id: id.clone(),
                        host: host.to_string(),
                        user: user.clone(),
                        state: *state,
                        create_time_ms: now_ms,
                        state_since_ms: now_ms,
                    });
                    self.changes.push(Change::Session(id));
                }
            }
        }
        for (_, id) in on_host {
            if self.sessions[&id].state != SessionState::Pending {
                self.end_session(&id);
            }
        }
        Ok(())
    }

    /// Ends a session (logoff).
    pub fn logoff(&mut self, id: &str) -> Result<(), Error> {
        self.find_session(id)?;
        self.end_session(id);
        Ok(())
    }

    pub(super) fn end_session(&mut self, id: &str) {
        self.remove_session_entry(id);
        self.changes.push(Change::SessionEnded(id.to_string()));
    }
}
