//! The simulated users' side of a run: logons through the engine (with
//! retries), logoffs and disconnects, and the scenario's user actions.

use placement::{ConnectRequest, Error as EngineError, Placement, SessionState};

use super::{
    Ev, LoggedOp, RELEASE_RETRY_MS, RETRY_MS, Sim, State, host_index, session_id, session_number,
};
use crate::SimError;
use crate::scenario::UserAction;

impl Sim<'_> {
    pub(super) fn user_action(&mut self, u: u32, a: UserAction) -> Result<(), SimError> {
        if a != UserAction::Connect && self.users[u as usize].waiting_since.take().is_some() {
            // Left while still waiting for a host.
            if let Some(p) = &mut self.power {
                p.m.gave_up += 1;
            }
        }
        match a {
            UserAction::Connect => self.connect(u),
            UserAction::Disconnect => {
                let user = &mut self.users[u as usize];
                match user.state {
                    State::LoggingOn { .. } => user.disconnect_after_logon = true,
                    State::Active { host } => {
                        user.state = State::Disconnected { host };
                        let n = user.session.expect("an Active user has a session");
                        self.set_state(n, SessionState::Disconnected, host)?;
                        self.resettle(u, host, true);
                    }
                    _ => {}
                }
                Ok(())
            }
            UserAction::Logoff => {
                let user = &self.users[u as usize];
                let state = user.state;
                let Some(n) = user.session else {
                    return Ok(());
                };
                if state == State::Lost {
                    // Nothing to log off from: the host is gone.
                    return Ok(());
                }
                self.end_session(u, n)?;
                self.acc.logged_off += 1;
                self.release(u, state);
                self.users[u as usize].state = State::Absent;
                Ok(())
            }
        }
    }

    /// Logs a session off in the engine (logoff, or release by the front
    /// door); the simulator forgets it first so the change is not counted
    /// as the engine's own.
    pub(super) fn end_session(&mut self, u: u32, n: u64) -> Result<(), SimError> {
        self.sessions.remove(n);
        self.users[u as usize].session = None;
        session_id(&mut self.id, n);
        if self.cfg.record_ops {
            self.ops.push(LoggedOp::Logoff(self.id.clone()));
        }
        self.pool.logoff(&self.id)?;
        self.engine_changes();
        self.touch(self.users[u as usize].session_host);
        Ok(())
    }

    pub(super) fn set_state(
        &mut self,
        n: u64,
        state: SessionState,
        host: u32,
    ) -> Result<(), SimError> {
        let now = self.now();
        session_id(&mut self.id, n);
        if self.cfg.record_ops {
            self.ops
                .push(LoggedOp::SetState(self.id.clone(), state, now));
        }
        self.pool.set_session_state(&self.id, state, now)?;
        self.pool.clear_changes();
        self.touch(host);
        Ok(())
    }

    /// The engine's connect, by the policy's algorithm or pick.
    pub(super) fn engine_connect(
        &mut self,
        u: u32,
    ) -> Result<Result<Placement, EngineError>, SimError> {
        session_id(&mut self.id, self.next_session);
        let id = self.id.as_str();
        let name = self.world.scenario.users[u as usize].as_str();
        let req = ConnectRequest {
            user: name,
            ..ConnectRequest::default()
        };
        let now = self.now();
        let random = self.pool.counters().placement_random();
        let exclude = self.power.as_ref().map_or(&[][..], |p| p.not_running());
        let answer = match &mut self.picker {
            None => self.pool.connect_excluding(&req, exclude, now, random, id),
            Some(picker) => self.pool.connect_picked(&req, now, id, |c| picker.pick(c)),
        };
        if let Ok(p) = &answer {
            self.touch(host_index(&p.host));
        }
        if self.cfg.record_ops {
            self.ops.push(LoggedOp::Connect {
                user: name.to_string(),
                now_ms: now,
                random,
                session_id: self.id.clone(),
                picked: match (&self.picker, &answer) {
                    (Some(_), Ok(p)) if !p.reconnect => Some(p.host.clone()),
                    _ => None,
                },
                answer: answer
                    .as_ref()
                    .map(|p| (p.host.clone(), p.reconnect))
                    .map_err(|e| e.to_string()),
            });
        }
        self.engine_changes();
        if let Ok(p) = &answer
            && !p.reconnect
        {
            self.next_session += 1;
        }
        match answer {
            Ok(p) => Ok(Ok(p)),
            Err(
                e @ (EngineError::NoSessionHostAvailable(_)
                | EngineError::SessionHostUnavailable(_)),
            ) => Ok(Err(e)),
            Err(e) => Err(e.into()),
        }
    }

    pub(super) fn connect(&mut self, u: u32) -> Result<(), SimError> {
        let state = self.users[u as usize].state;
        match state {
            State::LoggingOn { .. } | State::Active { .. } => return Ok(()),
            State::Absent if self.users[u as usize].retry_pending => return Ok(()),
            _ => {}
        }
        let had_session = self.users[u as usize].session.is_some();
        let answer = self.engine_connect(u)?;
        let t = self.now_ms;
        match answer {
            Ok(p) if p.reconnect => {
                self.acc.reconnects += 1;
                let h = host_index(&p.host);
                if self.hosts[h as usize].failed {
                    // The host is dead but the broker does not know yet.
                    self.failed_attempts += 1;
                    self.retry(u, RETRY_MS);
                    return Ok(());
                }
                if let State::Disconnected { host } = state {
                    let n = session_number(&p.session_id);
                    self.set_state(n, SessionState::Active, host)?;
                    self.users[u as usize].state = State::Active { host };
                    self.resettle(u, host, false);
                }
            }
            Ok(p) => {
                debug_assert!(!had_session || state == State::Lost);
                self.acc.new_session_attempts += 1;
                self.acc.placed += 1;
                let h = host_index(&p.host);
                let n = session_number(&p.session_id);
                self.sessions.insert(n, u);
                let user = &mut self.users[u as usize];
                user.session = Some(n);
                user.session_host = h;
                user.disconnect_after_logon = false;
                if let Some(since) = user.waiting_since.take()
                    && let Some(p) = &mut self.power
                {
                    p.m.waited_logons += 1;
                    p.m.worst_wait_seconds =
                        p.m.worst_wait_seconds.max((t - since) as f64 / 1000.0);
                }
                if self.hosts[h as usize].failed {
                    // R5: the front door cannot reach it; the session is
                    // released and the user tries again.
                    self.failed_attempts += 1;
                    self.acc.released_unreachable += 1;
                    self.end_session(u, n)?;
                    self.users[u as usize].state = State::Absent;
                    self.retry(u, RELEASE_RETRY_MS);
                    return Ok(());
                }
                user.state = State::LoggingOn {
                    host: h,
                    since_ms: t,
                };
                let cost = self.world.costs[u as usize];
                let hs = &mut self.hosts[h as usize];
                hs.advance(t);
                hs.start_logon(u, &cost, &self.world.model);
                self.reschedule(h);
            }
            Err(EngineError::SessionHostUnavailable(_)) => {
                self.failed_attempts += 1;
                self.retry(u, RETRY_MS);
            }
            Err(_) => {
                self.acc.new_session_attempts += 1;
                self.rejected += 1;
                if state == State::Lost {
                    self.users[u as usize].state = State::Absent;
                }
                if self.power.is_some() {
                    self.wait_for_host(u)?;
                }
            }
        }
        Ok(())
    }

    pub(super) fn retry(&mut self, u: u32, after_ms: i64) {
        let user = &mut self.users[u as usize];
        if !user.retry_pending {
            user.retry_pending = true;
            let at = self.now_ms + after_ms;
            self.push(at, Ev::Retry(u));
        }
    }

    pub(super) fn logon_end(&mut self, h: u32) -> Result<(), SimError> {
        let t = self.now_ms;
        self.hosts[h as usize].advance(t);
        let due = self.hosts[h as usize].due_logons();
        for u in due {
            let State::LoggingOn { host, since_ms } = self.users[u as usize].state else {
                continue;
            };
            if host != h {
                continue;
            }
            let disconnect = self.users[u as usize].disconnect_after_logon;
            let n = self.users[u as usize]
                .session
                .expect("a user logging on has a session");
            let state = if disconnect {
                SessionState::Disconnected
            } else {
                SessionState::Active
            };
            self.set_state(n, state, host)?;
            self.users[u as usize].state = if disconnect {
                State::Disconnected { host }
            } else {
                State::Active { host }
            };
            let cost = self.world.costs[u as usize];
            let hs = &mut self.hosts[h as usize];
            hs.end_logon(&cost, &self.world.model);
            hs.settled(&cost, disconnect, &self.world.model, 1.0);
            self.acc.logons_completed += 1;
            self.logon_ms
                .push((t - since_ms).clamp(0, i64::from(u32::MAX)) as u32);
        }
        self.reschedule(h);
        Ok(())
    }
}
