//! The simulated hosts' side of a run: heartbeats, samples for the
//! report, and the scenario's host actions.

use placement::HostMetrics;
use rand::RngExt;

use super::{Ev, LoggedOp, OBSERVE_MS, SECOND, Sim, State, quantiles};
use crate::SimError;
use crate::scenario::HostAction;

impl Sim<'_> {
    /// Schedules the host's next logon end (none on a dead host: its
    /// logons ended with it).
    pub(super) fn reschedule(&mut self, h: u32) {
        let host = &self.hosts[h as usize];
        if host.failed {
            return;
        }
        if let Some(t) = host.next_logon_end_ms() {
            let v = host.version;
            let t = t.max(self.now_ms);
            self.push(t, Ev::LogonEnd(h, v));
        }
    }

    pub(super) fn heartbeat(&mut self, h: u32, cpu: f64, memory: f64) -> Result<(), SimError> {
        let metrics = HostMetrics {
            cpu_percent: Some(cpu),
            memory_percent: Some(memory),
            ..HostMetrics::default()
        };
        let name = self.world.names.get(h);
        let now = self.now();
        if self.cfg.record_ops {
            self.ops
                .push(LoggedOp::Heartbeat(name.to_string(), metrics.clone(), now));
        }
        self.pool.heartbeat(name, metrics, now)?;
        self.pool.clear_changes();
        self.touch(h);
        Ok(())
    }

    pub(super) fn sample(&mut self, h: u32) -> Result<(), SimError> {
        let host = &mut self.hosts[h as usize];
        if host.failed || host.removed {
            return Ok(());
        }
        let (cpu, memory) = host.sample(self.now_ms);
        // A host that is not running has no agent to send a heartbeat.
        if self.power.as_ref().is_none_or(|p| p.running(h)) {
            self.heartbeat(h, cpu, memory)?;
        }
        let next = self.now_ms + i64::from(self.cfg.sample_seconds) * SECOND;
        self.push_sample(next, h);
        Ok(())
    }

    pub(super) fn observe(&mut self) {
        let now = self.now();
        self.record(|| LoggedOp::Tick(now));
        self.pool.tick(now);
        self.engine_changes();
        let mut cpu = Vec::with_capacity(self.hosts.len());
        let mut in_use = 0;
        let power = self.power.as_ref();
        for (i, h) in self.hosts.iter_mut().enumerate() {
            if h.failed || h.removed || power.is_some_and(|p| !p.powered(i as u32)) {
                if let Some(s) = self.host_series.get_mut(i) {
                    s.push(f32::NAN);
                }
                continue;
            }
            let c = h.observe(self.now_ms);
            if let Some(s) = self.host_series.get_mut(i) {
                s.push(c as f32);
            }
            cpu.push(c);
        }
        for h in self.pool.hosts() {
            in_use += u32::from(h.sessions > 0);
        }
        self.hosts_in_use_peak = self.hosts_in_use_peak.max(in_use);
        self.hosts_in_use_sum += f64::from(in_use);
        self.observations += 1;
        if !cpu.is_empty() {
            let mean = cpu.iter().sum::<f64>() / cpu.len() as f64;
            let [min, p50, p90, max] = quantiles(&mut cpu);
            if in_use > 0 {
                self.imbalance_sum += max - mean;
                self.busy_observations += 1;
            }
            self.series.minute.push((self.now_ms / OBSERVE_MS) as u32);
            self.series.min.push(min as f32);
            self.series.p50.push(p50 as f32);
            self.series.p90.push(p90 as f32);
            self.series.max.push(max as f32);
        }
        let (minute, sessions) = ((self.now_ms / OBSERVE_MS) as u32, self.pool.session_count());
        if let Some(p) = &mut self.power {
            p.observe(minute, sessions as u32);
        }
        let next = self.now_ms + OBSERVE_MS;
        self.push(next, Ev::Observe);
    }

    pub(super) fn host_action(&mut self, h: u32, a: HostAction) -> Result<(), SimError> {
        let name = self.hosts[h as usize].name.clone();
        let now = self.now();
        match a {
            HostAction::Drain | HostAction::Undrain => {
                let mut spec = self.pool.find_host(&name)?.spec.clone();
                spec.allow_new_session = a == HostAction::Undrain;
                self.record(|| LoggedOp::Upsert(spec.clone(), now));
                self.pool.upsert_host(spec, now)?;
                self.pool.clear_changes();
                self.touch(h);
                if let Some(p) = &mut self.power {
                    p.operator_drain(h, a == HostAction::Drain);
                }
            }
            HostAction::Fail => {
                let t = self.now_ms;
                self.hosts[h as usize].advance(t);
                self.hosts[h as usize].failed = true;
                for u in 0..self.users.len() as u32 {
                    let state = self.users[u as usize].state;
                    let on_it = matches!(
                        state,
                        State::LoggingOn { host, .. } | State::Active { host } | State::Disconnected { host }
                            if host == h
                    );
                    if !on_it {
                        continue;
                    }
                    self.release(u, state);
                    let user = &mut self.users[u as usize];
                    user.state = State::Lost;
                    if !user.retry_pending {
                        user.retry_pending = true;
                        let at = t + self.rng.random_range(20 * SECOND..60 * SECOND);
                        self.push(at, Ev::Retry(u));
                    }
                }
            }
            HostAction::Remove => {
                self.record(|| LoggedOp::Remove(name.clone()));
                self.pool.remove_host(&name, true)?;
                self.hosts[h as usize].removed = true;
                self.engine_changes();
                self.touch(h);
            }
        }
        Ok(())
    }
}
