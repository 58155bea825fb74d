//! A pool's hosts: registration and replacement in query order, owners
//! (P7), removal, heartbeats (S7, H3) and the passing of time (`tick`: S4
//! expiry, S7 silence).

use super::index::{due, reports_custom};
use super::{Change, EndReason, Pool, Upsert};
use crate::model::*;
use crate::{Error, load_index};

impl Pool {
    /// Registers a host, or replaces its settings keeping its place in query
    /// order and its sessions.
    pub fn upsert_host(&mut self, spec: HostSpec, now_ms: TimestampMs) -> Result<Upsert, Error> {
        spec.validate()?;
        let pooled = self.config.host_pool_type == HostPoolType::Pooled;
        if pooled && spec.assigned_user.is_some() {
            return Err(Error::InvalidParameter(
                "assignedUser: only session hosts of Personal host pools have an owner".into(),
            ));
        }
        let existing = self.host_by_name.get(&spec.name).copied();
        let old_owner = existing.and_then(|seq| self.hosts[&seq].spec.assigned_user.clone());
        let new_owner = spec.assigned_user.clone();
        if old_owner.as_deref().map(user_key) != new_owner.as_deref().map(user_key) {
            self.check_assignment(
                &spec.name,
                existing,
                old_owner.as_deref(),
                new_owner.as_deref(),
            )?;
        }
        match existing {
            Some(seq) => {
                let old = self.remove_host_entry(seq);
                let mut h = old;
                h.spec = spec;
                self.insert_host(h);
                self.changes
                    .push(Change::Host(self.hosts[&seq].spec.name.clone()));
                Ok(Upsert::Replaced)
            }
            None => {
                let seq = self.next_seq;
                self.next_seq += 1;
                let name = spec.name.clone();
                self.insert_host(Host {
                    seq,
                    spec,
                    registered_at_ms: now_ms,
                    last_heartbeat_ms: None,
                    metrics: None,
                    power_state: PowerState::Running,
                    start_requested_ms: None,
                    status: HostStatus::Available,
                    sessions: 0,
                    connecting_sessions: 0,
                    disconnected_sessions: 0,
                    load_index: load_index::UNKNOWN,
                    logons_since_heartbeat: 0,
                    heartbeat_source: None,
                    scrape_error: None,
                });
                self.changes.push(Change::Host(name));
                self.changes.push(Change::Counters);
                Ok(Upsert::Created)
            }
        }
    }

    /// Rule P7: a host has one owner; a `Persistent` user owns one host; an
    /// owner with sessions on the host cannot be taken away.
    fn check_assignment(
        &self,
        host: &str,
        existing: Option<u64>,
        old: Option<&str>,
        new: Option<&str>,
    ) -> Result<(), Error> {
        if let Some(old) = old {
            let has_sessions = existing.is_some_and(|seq| self.hosts[&seq].sessions > 0);
            match new {
                Some(_) => {
                    return Err(Error::Conflict(format!(
                        "assignedUser: session host {host} is already assigned to {old}; \
                         unassign it first"
                    )));
                }
                None if has_sessions => {
                    return Err(Error::Conflict(format!(
                        "assignedUser: {old} has a session on session host {host}; log it \
                         off before unassigning the host"
                    )));
                }
                None => {}
            }
        }
        if let Some(new) = new
            && self.config.load_balancer_type == LoadBalancerType::Persistent
            && let Some(owned) = self.owners.get(&user_key(new))
            && let Some(other) = owned.iter().next()
        {
            return Err(Error::Conflict(format!(
                "assignedUser: {new} already has session host {} and a Persistent pool gives \
                 a user one host; use MultiplePersistent for several",
                self.hosts[other].spec.name
            )));
        }
        Ok(())
    }

    /// Removes a host. With sessions it is a conflict unless `force`, which
    /// ends them.
    pub fn remove_host(&mut self, name: &str, force: bool) -> Result<(), Error> {
        let seq = self.seq_of(name)?;
        let sessions = self.hosts[&seq].sessions;
        if sessions > 0 && !force {
            return Err(Error::Conflict(format!(
                "session host {name} has {sessions} session(s); log them off or remove it \
                 with force"
            )));
        }
        if sessions > 0 {
            for slot in self.host_session_slots(seq).to_vec() {
                self.end_session(slot, EndReason::HostRemoved);
            }
        }
        let reported_before = self.custom_reporters > 0;
        // Its sessions are ended, so its entry is empty and given back.
        self.remove_host_entry(seq);
        if reported_before != (self.custom_reporters > 0) {
            // H3: the last custom reporter is gone: every host is -1 again.
            self.rebuild_indexes();
        }
        self.changes.push(Change::HostRemoved(name.to_string()));
        Ok(())
    }

    pub(super) fn seq_of(&self, name: &str) -> Result<u64, Error> {
        self.host_by_name.get(name).copied().ok_or_else(|| {
            Error::SessionHostNotFound(format!(
                "session host {name} is not in host pool {}",
                self.config.name
            ))
        })
    }

    /// Rule S7: a heartbeat makes the host `Available` and replaces its metrics.
    pub fn heartbeat(
        &mut self,
        name: &str,
        metrics: HostMetrics,
        now_ms: TimestampMs,
    ) -> Result<(), Error> {
        metrics.validate()?;
        let seq = self.seq_of(name)?;
        let started_ms = self.started_ms;
        if let Some(h) = self.hosts.get_mut(&seq)
            && repeats_itself(h, &metrics, now_ms)
        {
            // Nothing the host's load index or place in the indexes depends
            // on changes: only when it was last heard from.
            let seen_before = watch_key(h, started_ms);
            h.last_heartbeat_ms = Some(now_ms);
            h.metrics = Some(metrics);
            let seen = watch_key(h, started_ms);
            self.watched.remove(&seen_before);
            self.watched.insert(seen);
            self.changes.push(Change::Host(name.to_string()));
            return Ok(());
        }
        let reported_before = self.custom_reporters > 0;
        let is = metrics.custom_load_index.is_some();
        // One look-up of the host does it all. Its load index is recomputed
        // in `update_host` with the custom reporters counted before this
        // heartbeat: right unless the count crosses zero, and then every
        // index is rebuilt below.
        let (was, seen_before, seen) = self.update_host(seq, |h| {
            let was = reports_custom(h);
            let seen_before = watch_key(h, started_ms);
            h.last_heartbeat_ms = Some(now_ms);
            h.metrics = Some(metrics);
            h.logons_since_heartbeat = 0;
            // A9: a host whose power state is unknown (an action a crash
            // interrupted) and that speaks is running.
            if h.power_state == PowerState::Unknown {
                h.power_state = PowerState::Running;
            }
            h.status = power_status(h).unwrap_or(HostStatus::Available);
            let watch = h.status == HostStatus::Available;
            (was, seen_before, watch.then(|| watch_key(h, started_ms)))
        });
        self.custom_reporters = self.custom_reporters + usize::from(is) - usize::from(was);
        self.watched.remove(&seen_before);
        if let Some(seen) = seen {
            self.watched.insert(seen);
        }
        if reported_before != (self.custom_reporters > 0) {
            // H3: the first or last custom reporter changes every other
            // host's index (25 or -1).
            self.rebuild_indexes();
        }
        self.changes.push(Change::Host(name.to_string()));
        Ok(())
    }

    /// Notes where the host's heartbeats come from and what its last
    /// scrape found wrong (rule W1); the host is stored again only when
    /// they change. A host heard of through its exporter is watched for
    /// silence from its registration even before its first heartbeat
    /// (S7): one whose exporter never answers well becomes `Unavailable`.
    pub fn note_report(
        &mut self,
        name: &str,
        source: Option<HeartbeatSource>,
        scrape_error: Option<String>,
    ) -> Result<(), Error> {
        if let Some(e) = &scrape_error {
            validate_scrape_error(e)?;
        }
        let seq = self.seq_of(name)?;
        let Some(h) = self.hosts.get_mut(&seq) else {
            return Ok(());
        };
        if h.heartbeat_source != source || h.scrape_error != scrape_error {
            let source_changed = h.heartbeat_source != source;
            h.heartbeat_source = source;
            h.scrape_error = scrape_error;
            if source_changed {
                // Where it stands in the watch does not depend on the
                // source, only whether it is in it.
                let key = watch_key(h, self.started_ms);
                if watched_for_silence(h) {
                    self.watched.insert(key);
                } else {
                    self.watched.remove(&key);
                }
            }
            self.changes.push(Change::Host(name.to_string()));
        }
        Ok(())
    }

    pub(super) fn watch_key(&self, seq: u64) -> (TimestampMs, u64) {
        watch_key(&self.hosts[&seq], self.started_ms)
    }

    /// Applies the passing of time: Pending sessions older than the pool's
    /// `pendingTimeoutSeconds` end (S4), and so do sessions Disconnected
    /// that long whose logon no host confirmed (S9); sessions Disconnected for
    /// `disconnectedTimeoutSeconds`, and any session older than
    /// `maxSessionLifetimeSeconds`, end (S9; 0 turns either off); hosts
    /// silent for `heartbeatTimeoutSeconds` become `Unavailable` (S7).
    /// The ends of S9 are kept for the hosts' agents (W5).
    /// Costs O(1) when nothing is due, so every connect calls it first.
    pub fn tick(&mut self, now_ms: TimestampMs) {
        let pending_ms = i64::from(self.config.pending_timeout_seconds) * 1000;
        for slot in due(&self.sessions, &self.pending, |since| {
            since + pending_ms <= now_ms
        }) {
            self.end_session(slot, EndReason::PendingTimeout);
        }
        let is_due = |since| since + pending_ms <= now_ms;
        for slot in due(&self.sessions, &self.unconfirmed_disconnected, is_due) {
            // No host listed it (that would have confirmed its logon):
            // nothing to end there.
            self.end_session(slot, EndReason::NoLogonEvidence);
        }
        let disconnected_ms = i64::from(self.config.disconnected_timeout_seconds) * 1000;
        if disconnected_ms > 0 {
            let is_due = |since| since + disconnected_ms <= now_ms;
            for slot in due(&self.sessions, &self.disconnected, is_due) {
                self.log_off(slot, EndReason::DisconnectedTimeout);
            }
        }
        let lifetime_ms = i64::from(self.config.max_session_lifetime_seconds) * 1000;
        if lifetime_ms > 0 {
            let is_due = |created| created + lifetime_ms <= now_ms;
            for slot in due(&self.sessions, &self.by_create_time, is_due) {
                self.log_off(slot, EndReason::LifetimeExceeded);
            }
        }
        let silence_ms = i64::from(self.config.heartbeat_timeout_seconds) * 1000;
        while let Some(&(seen, seq)) = self.watched.first() {
            if seen + silence_ms > now_ms {
                break;
            }
            self.watched.remove(&(seen, seq));
            self.update_host(seq, |h| {
                if h.status == HostStatus::Available {
                    h.status = HostStatus::Unavailable;
                }
            });
            // Status is derived, not stored: nothing to persist.
        }
    }
}

impl Pool {
    /// Rule A9: records a host's power state, as a power action (or a
    /// scaling plan) learnt it, and derives its status from it: `Stopping`
    /// and `Stopped` hosts are `Shutdown` (never `Unavailable` for their
    /// silence), `Starting` and `Unknown` ones `Unavailable`, and a
    /// `Running` host is `Available` unless it sent heartbeats before it
    /// was started and none since (then `Unavailable` until its next one).
    /// None of these but an `Available` host is a placement candidate.
    pub fn set_power_state(
        &mut self,
        name: &str,
        state: PowerState,
        now_ms: TimestampMs,
    ) -> Result<(), Error> {
        let seq = self.seq_of(name)?;
        let key = self.watch_key(seq);
        self.watched.remove(&key);
        let watch = self.update_host(seq, |h| {
            if state == PowerState::Starting {
                h.start_requested_ms = Some(now_ms);
            }
            h.power_state = state;
            h.status = power_status(h).unwrap_or(HostStatus::Available);
            watched_for_silence(h)
        });
        if watch {
            let key = self.watch_key(seq);
            self.watched.insert(key);
        }
        self.changes.push(Change::Host(name.to_string()));
        Ok(())
    }
}

/// The status a host's power state imposes (rule A9), or None when it is
/// running and rule S7 (its heartbeats) decides.
pub(super) fn power_status(h: &Host) -> Option<HostStatus> {
    match h.power_state {
        PowerState::Stopping | PowerState::Stopped => Some(HostStatus::Shutdown),
        PowerState::Starting | PowerState::Unknown => Some(HostStatus::Unavailable),
        PowerState::Running => match (h.last_heartbeat_ms, h.start_requested_ms) {
            (Some(seen), Some(started)) if seen <= started => Some(HostStatus::Unavailable),
            _ => None,
        },
    }
}

/// Whether a heartbeat at `now_ms` with `metrics` would leave everything
/// but the host's last-heard time as it is: the host is running and
/// Available and stays so, reports the very metrics of its last heartbeat
/// (so its custom index, H3, and its load index, H1–H2, are the same), and
/// no logon was placed on it since (so H7's correction, which the heartbeat
/// resets, is the same). Every host of a quiet pool sends such a heartbeat
/// every 30 s: it then costs no pass through the pool's indexes.
fn repeats_itself(h: &Host, metrics: &HostMetrics, now_ms: TimestampMs) -> bool {
    h.status == HostStatus::Available
        && h.power_state == PowerState::Running
        && h.logons_since_heartbeat == 0
        && h.metrics.as_ref() == Some(metrics)
        && h.start_requested_ms.is_none_or(|started| now_ms > started)
}

/// Whether a host is watched for silence (S7): it is `Available` and has
/// sent a heartbeat, or is heard of through its exporter (W1), whose
/// watching agent sends none until a scrape is good: a host whose
/// exporter never answers well (down, refusing the agent's password,
/// presenting another certificate, answering garbage) must not stay
/// `Available` for want of a first heartbeat. A host that never spoke
/// and is not watched through an exporter stays `Available` (S7).
pub(super) fn watched_for_silence(h: &Host) -> bool {
    h.status == HostStatus::Available
        && (h.last_heartbeat_ms.is_some()
            || h.heartbeat_source == Some(HeartbeatSource::WindowsExporter))
}

/// Where a host stands in the watch for silence (S7): its last heartbeat
/// (its registration before its first), or the engine's start if that is
/// later.
fn watch_key(h: &Host, started_ms: TimestampMs) -> (TimestampMs, u64) {
    let seen = h
        .last_heartbeat_ms
        .unwrap_or(h.registered_at_ms)
        .max(started_ms);
    (seen, h.seq)
}
