//! What every door does with a session once its connection is placed and
//! its host dialled (rules R4, S9): the session is marked Active while the
//! connection is relayed, then, when its last connection through this door
//! closes, marked Disconnected, or ended (logoff) when it was made here and
//! no connection of it ever showed evidence of a logon.
//!
//! **A connection changes only the sessions it owns.** It owns the
//! session it made, and, when it proves who it is (a ticket, T3), a
//! reconnect (S1) to a session that was Disconnected or that another
//! connection of this door already owns. A door keeps the sessions its
//! connections own in a [`Live`] table, with how many connections are on
//! each: a second connection of a session joins it (and the session is
//! left alone until the last one closes), and a connection to a session
//! that is Active (or Pending) with no connection of this door on it,
//! someone else's live connection, is relayed (S1 sends the user to their
//! host, which authenticates them) but never changes the session's state.
//! A connection that names its user only by a claim (the front door's
//! `mstshash` cookie, R2) never changes an existing session either.
//!
//! Each door's table is its own, in memory: after a restart, a session left
//! Active is ended by the host's agent or by the pool's S9 lifetimes.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Mutex, MutexGuard};

use placement::{Placement, SessionState};

use super::{Kind, Report, release};
use crate::placer::Placer;

/// The sessions a door's connections own, with how many of its
/// connections are on each and whether any of them showed a logon.
#[derive(Default)]
pub(crate) struct Live {
    sessions: Mutex<HashMap<(String, String), LiveSession>>,
}

struct LiveSession {
    connections: usize,
    /// Made by a connection of this door (not a reconnect).
    made_here: bool,
    logon_seen: bool,
}

/// What the last connection of a session leaves behind it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Left {
    /// Other connections of this door remain on the session.
    Others,
    /// The session was made here and never showed a logon: it ends.
    NoLogon,
    /// The session stays, Disconnected.
    Disconnected,
}

impl Live {
    fn lock(&self) -> MutexGuard<'_, HashMap<(String, String), LiveSession>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Joins the session's connections if this door owns it, or claims it
    /// when `claim` (made here, or reconnected while Disconnected). False:
    /// someone else's live session; hands off.
    pub(crate) fn join(&self, pool: &str, id: &str, claim: bool, made_here: bool) -> bool {
        let mut live = self.lock();
        let key = (pool.to_string(), id.to_string());
        if let Some(s) = live.get_mut(&key) {
            s.connections += 1;
            return true;
        }
        if claim {
            live.insert(
                key,
                LiveSession {
                    connections: 1,
                    made_here,
                    logon_seen: false,
                },
            );
        }
        claim
    }

    /// Leaves a session joined before; says what the connection leaves
    /// behind (`None`: it had not joined).
    pub(crate) fn leave(&self, pool: &str, id: &str, logon_seen: bool) -> Option<Left> {
        let mut live = self.lock();
        let key = (pool.to_string(), id.to_string());
        let s = live.get_mut(&key)?;
        s.logon_seen |= logon_seen;
        s.connections -= 1;
        if s.connections > 0 {
            return Some(Left::Others);
        }
        let s = live.remove(&key)?;
        Some(if s.made_here && !s.logon_seen {
            Left::NoLogon
        } else {
            Left::Disconnected
        })
    }

    /// How many sessions the door's connections own now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// One placed connection's session, from the relay's start to its end:
/// [`Session::begin`], [`Session::relay`], [`Session::end`].
pub(crate) struct Session<'a, P> {
    kind: &'a Kind,
    placer: &'a P,
    live: &'a Live,
    pool: &'a str,
    id: &'a str,
    owned: bool,
    anonymous: bool,
}

impl<'a, P: Placer> Session<'a, P> {
    /// The session `placed` in `pool` for a connection of `kind`'s door:
    /// owned by the connection when it made the session, or when it is
    /// `proven` (carries a ticket) and the session is Disconnected or
    /// owned by another connection of this door (see the module's
    /// documentation). An `anonymous` connection's session (no user named,
    /// R2) ends with its last connection.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn begin(
        kind: &'a Kind,
        placer: &'a P,
        live: &'a Live,
        pool: &'a str,
        placed: &'a Placement,
        proven: bool,
        anonymous: bool,
        report: &mut Report,
    ) -> Session<'a, P> {
        let owned = (!placed.reconnect || proven)
            && live.join(
                pool,
                &placed.session_id,
                !placed.reconnect || placed.state == SessionState::Disconnected,
                !placed.reconnect,
            );
        if !owned {
            report.detail = Some(if proven {
                "reconnect to a session live elsewhere: its state is left alone".into()
            } else {
                "reconnect without a ticket: the session's state is left alone".into()
            });
        }
        Session {
            kind,
            placer,
            live,
            pool,
            id: &placed.session_id,
            owned,
            anonymous,
        }
    }

    /// Runs `relay` while the session is marked Active (when owned). The
    /// relay starts at once, not after the mark; both are done before this
    /// returns, so the end's mark always comes after Active.
    pub(crate) async fn relay<T>(&self, relay: impl Future<Output = T>) -> T {
        let mark_active = async {
            if self.owned
                && let Err(e) = self
                    .placer
                    .set_session_state(self.pool, self.id, SessionState::Active)
                    .await
            {
                tracing::warn!(pool = self.pool, session = self.id, error = %e,
                    "{}: could not mark the session Active", self.kind.name);
            }
        };
        tokio::join!(mark_active, relay).1
    }

    /// The connection has closed (`logon_seen`: it showed rule S9's
    /// evidence): when it was the session's last here, the session is
    /// ended or marked Disconnected.
    pub(crate) async fn end(self, logon_seen: bool) {
        if !self.owned {
            return;
        }
        match self.live.leave(self.pool, self.id, logon_seen) {
            None | Some(Left::Others) => {}
            Some(left @ (Left::NoLogon | Left::Disconnected))
                if left == Left::NoLogon || self.anonymous =>
            {
                if left == Left::NoLogon
                    && let Some(counter) = self.kind.without_logon
                {
                    metrics::counter!(counter).increment(1);
                }
                release(self.placer, self.kind.name, self.pool, self.id).await
            }
            Some(_) => {
                if let Err(e) = self
                    .placer
                    .set_session_state(self.pool, self.id, SessionState::Disconnected)
                    .await
                {
                    tracing::warn!(pool = self.pool, session = self.id, error = %e,
                        "{}: could not mark the session Disconnected", self.kind.name);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_table_leaves_a_session_to_its_last_connection_and_hands_off_others() {
        let live = Live::default();
        // Made here: owned; a second connection joins it.
        assert!(live.join("p", "s1", true, true));
        assert!(live.join("p", "s1", false, false));
        assert_eq!(live.leave("p", "s1", true), Some(Left::Others));
        // A logon seen on any of its connections keeps it.
        assert_eq!(live.leave("p", "s1", false), Some(Left::Disconnected));
        assert_eq!(live.len(), 0);
        // Made here, never a logon: it ends.
        assert!(live.join("p", "s2", true, true));
        assert_eq!(live.leave("p", "s2", false), Some(Left::NoLogon));
        // Someone else's live session: not joined, nothing to leave.
        assert!(!live.join("p", "s3", false, false));
        assert_eq!(live.leave("p", "s3", true), None);
        // A reconnect to a Disconnected session is claimed, not made here.
        assert!(live.join("p", "s4", true, false));
        assert_eq!(live.leave("p", "s4", false), Some(Left::Disconnected));
        assert_eq!(live.len(), 0);
    }
}
