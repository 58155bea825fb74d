//! The reference model the property tests hold the engine to: written from
//! the rules alone, deliberately naive (a `Vec` of hosts and a `Vec` of
//! sessions; every connect filters every host, sorts and picks), sharing
//! nothing with the engine but `pipeline::uniform_below` (B1) and the plain
//! settings types.

use std::collections::HashMap;

use placement::pipeline::uniform_below;
use placement::{
    HostMetrics, LoadIndexSettings, LogonStormSettings, MAX_SESSION_LIMIT, SessionState,
    TimestampMs,
};

use crate::Alg;

pub(crate) const PENDING_MS: i64 = 120_000;
pub(crate) const HEARTBEAT_MS: i64 = 90_000;

/// A heartbeat's metrics as the model keeps them: in hundredths (of a
/// percent, a request, a millisecond), so that the model's factors are
/// exact integer divisions. The engine is sent `n / 100` as `f64`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MMetrics {
    pub(crate) cpu: Option<u32>,
    pub(crate) memory: Option<u32>,
    pub(crate) queue: Option<u32>,
    pub(crate) read: Option<u32>,
    pub(crate) write: Option<u32>,
    pub(crate) custom: Option<i64>,
}

impl MMetrics {
    pub(crate) fn to_engine(&self) -> HostMetrics {
        let f = |v: Option<u32>| v.map(|n| f64::from(n) / 100.0);
        HostMetrics {
            cpu_percent: f(self.cpu),
            memory_percent: f(self.memory),
            disk_queue_length: f(self.queue),
            disk_read_latency_ms: f(self.read),
            disk_write_latency_ms: f(self.write),
            custom_load_index: self.custom,
        }
    }
}

/// The pool's `standardCapabilities` (H5: hosts lacking one are bucket 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standard {
    /// `rdp`, the default: every host is standard.
    Rdp,
    /// `rdp, gpu`: a request requiring gpu can be served by bucket 1.
    RdpGpu,
    /// `rdp, blast`: a gpu host without blast is in bucket 2, so a gpu
    /// request may need bucket 2 while bucket 1 serves everyone else.
    RdpBlast,
}

impl Standard {
    pub(crate) fn capabilities(self) -> Vec<String> {
        let list: &[&str] = match self {
            Standard::Rdp => &["rdp"],
            Standard::RdpGpu => &["rdp", "gpu"],
            Standard::RdpBlast => &["rdp", "blast"],
        };
        list.iter().map(|c| c.to_string()).collect()
    }

    pub(crate) fn met_by(self, h: &MHost) -> bool {
        match self {
            Standard::Rdp => true,
            Standard::RdpGpu => h.gpu,
            Standard::RdpBlast => h.blast,
        }
    }
}

/// The settings a `LoadSettings` step applies.
#[derive(Clone, Debug)]
pub struct LoadSettings {
    pub(crate) load_index: LoadIndexSettings,
    pub(crate) storm: LogonStormSettings,
    pub(crate) standard: Standard,
}

#[derive(Clone, Debug)]
pub(crate) struct MHost {
    pub(crate) name: String,
    /// Query order: hosts are named `h<seq>` in registration order.
    pub(crate) seq: u64,
    pub(crate) drained: bool,
    pub(crate) gpu: bool,
    pub(crate) blast: bool,
    pub(crate) last_heartbeat_ms: Option<TimestampMs>,
    /// The last heartbeat's metrics; `None`: never sent one (H1).
    pub(crate) metrics: Option<MMetrics>,
    /// H6 overrides: (loadIndexThreshold, connectingSessionThreshold).
    pub(crate) policy: (Option<u32>, Option<u32>),
    /// H7: logons placed on the host since its last heartbeat (0 after a
    /// restart: the engine derives it, never stores it).
    pub(crate) logons_since_heartbeat: u32,
}

/// A host as a `LoadIndex` connect sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Candidate {
    pub(crate) at: usize,
    pub(crate) seq: u64,
    pub(crate) index: i32,
    pub(crate) connecting: u32,
    pub(crate) standard: bool,
    pub(crate) fits: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MSession {
    pub(crate) id: String,
    pub(crate) host: String,
    /// Lowercased: users match without regard to case.
    pub(crate) user: String,
    pub(crate) state: SessionState,
    pub(crate) since_ms: TimestampMs,
    /// S9: no host has confirmed a logon on it yet.
    pub(crate) awaiting_logon: bool,
}

/// The reference: the rules, written as plainly as possible.
#[derive(Clone, Debug)]
pub(crate) struct Model {
    /// In query order.
    pub(crate) hosts: Vec<MHost>,
    pub(crate) sessions: Vec<MSession>,
    pub(crate) limit: u32,
    pub(crate) alg: Alg,
    pub(crate) now_ms: TimestampMs,
    pub(crate) started_ms: TimestampMs,
    pub(crate) load_index: LoadIndexSettings,
    pub(crate) storm: LogonStormSettings,
    pub(crate) standard: Standard,
    /// The seq of the host the `LoadIndex` round robin served last, 0: none.
    pub(crate) last_served: u64,
}

/// An outcome both sides can produce: (host, reconnect, session id) or an error code.
pub(crate) type Outcome = Result<(String, bool, String), &'static str>;

impl Model {
    /// S7: silent for the timeout, counted from the later of the last
    /// heartbeat and the start; never silent without any heartbeat.
    pub(crate) fn available(&self, h: &MHost) -> bool {
        match h.last_heartbeat_ms {
            None => true,
            Some(t) => self.now_ms < t.max(self.started_ms) + HEARTBEAT_MS,
        }
    }

    /// S4: Pending sessions end `pendingTimeoutSeconds` after placement;
    /// S9: so do Disconnected ones whose logon no host confirmed, after
    /// they were disconnected.
    pub(crate) fn expire(&mut self) {
        let now = self.now_ms;
        self.sessions.retain(|s| {
            let bounded = s.state == SessionState::Pending
                || (s.state == SessionState::Disconnected && s.awaiting_logon);
            !(bounded && s.since_ms + PENDING_MS <= now)
        });
    }

    pub(crate) fn counts(&self) -> HashMap<&str, u32> {
        let mut c = HashMap::new();
        for s in &self.sessions {
            *c.entry(s.host.as_str()).or_default() += 1;
        }
        c
    }

    pub(crate) fn pending(&self) -> HashMap<&str, u32> {
        let mut c = HashMap::new();
        for s in &self.sessions {
            if s.state == SessionState::Pending {
                *c.entry(s.host.as_str()).or_default() += 1;
            }
        }
        c
    }

    /// H1–H3: the host's Server Load Index with `sessions` sessions, of
    /// which `connecting` are Pending, with H7's correction: `logonCost`
    /// points for each logon the last heartbeat cannot show (the larger of
    /// `connecting` and the logons placed since), added to each factor
    /// from a reported value, each capped at 100.
    pub(crate) fn index(&self, h: &MHost, sessions: u32, connecting: u32) -> i32 {
        let s = &self.load_index;
        let logons = connecting.max(h.logons_since_heartbeat);
        let correction = (self.storm.logon_cost * logons).min(100) as i32;
        let corrected = |f: i32| (f + correction).min(100);
        if s.use_custom_script {
            let anyone = self
                .hosts
                .iter()
                .any(|h| h.metrics.as_ref().is_some_and(|m| m.custom.is_some()));
            return match h.metrics.as_ref().and_then(|m| m.custom) {
                Some(v) => corrected(v.min(100) as i32),
                None if anyone => 25,
                None => -1,
            };
        }
        type Metric = fn(&MMetrics) -> Option<u32>;
        let metric: [(u32, Metric); 5] = [
            (s.cpu_threshold, |m| m.cpu),
            (s.memory_threshold, |m| m.memory),
            (s.disk_queue_length_threshold, |m| m.queue),
            (s.disk_read_latency_threshold, |m| m.read),
            (s.disk_write_latency_threshold, |m| m.write),
        ];
        let selected = metric.iter().any(|(t, _)| *t > 0);
        let mut factors = Vec::new();
        if s.include_session_count || !selected {
            factors.push(if self.limit == 0 {
                100
            } else if self.limit < MAX_SESSION_LIMIT {
                (100 * sessions / self.limit).min(100) as i32
            } else {
                sessions.min(100) as i32
            });
        }
        for (threshold, get) in metric {
            if threshold == 0 {
                continue;
            }
            let Some(m) = &h.metrics else {
                return -1; // H1: in use, never reported.
            };
            // H2: in hundredths, 100 * (n / 100) / t = n / t; left out if missing.
            if let Some(n) = get(m) {
                factors.push(corrected((n / threshold).min(100) as i32));
            }
        }
        factors.into_iter().max().unwrap_or(-1)
    }

    /// H5–H6: the host a new session goes to in a `LoadIndex` pool.
    pub(crate) fn pick_load_index(&self, gpu: bool) -> Option<usize> {
        let counts = self.counts();
        let pending = self.pending();
        let mut eligible = Vec::new();
        for (at, h) in self.hosts.iter().enumerate() {
            let n = counts.get(h.name.as_str()).copied().unwrap_or(0);
            let connecting = pending.get(h.name.as_str()).copied().unwrap_or(0);
            // S2.
            if h.drained || !self.available(h) || n >= self.limit {
                continue;
            }
            let index = self.index(h, n, connecting);
            // H6: the host's policy, else the pool's; 0 disables.
            let index_max = h.policy.0.unwrap_or(self.load_index.load_index_threshold);
            let connecting_max = h
                .policy
                .1
                .unwrap_or(self.load_index.connecting_session_threshold);
            if (index_max > 0 && index >= index_max as i32)
                || (connecting_max > 0 && connecting >= connecting_max)
            {
                continue;
            }
            eligible.push(Candidate {
                at,
                seq: h.seq,
                index,
                connecting,
                standard: self.standard.met_by(h),
                fits: h.gpu || !gpu,
            });
        }
        let storm = &self.storm;
        // A threshold of 0 is off: 101 is above every index.
        let threshold = match storm.load_index_threshold {
            0 => 101,
            t => t as i32,
        };
        let under_connecting = |c: &Candidate| {
            storm.connecting_session_threshold == 0
                || c.connecting < storm.connecting_session_threshold
        };
        let qualifies = |c: &Candidate, t: i32| c.index >= 0 && c.index < t && under_connecting(c);
        // Bucket 1: raise the threshold one step at a time until
        // minHostsInQueue standard hosts qualify, or none is left to add.
        let mut by_index = [0usize; 101];
        for c in eligible.iter().filter(|c| c.standard && qualifies(c, 101)) {
            by_index[c.index as usize] += 1;
        }
        let below = |t: i32| by_index[..t as usize].iter().sum::<usize>();
        let everyone = below(101);
        let mut raised = threshold;
        while below(raised) < storm.min_hosts_in_queue as usize && below(raised) < everyone {
            raised += 1;
        }
        let bucket1: Vec<Candidate> = eligible
            .iter()
            .filter(|c| c.standard && qualifies(c, raised))
            .copied()
            .collect();
        let bucket2: Vec<Candidate> = eligible
            .iter()
            .filter(|c| !c.standard && qualifies(c, threshold))
            .copied()
            .collect();
        // Round robin: the first fitting host after the last served one in
        // query order, else the first (wrapping around).
        let round_robin = |bucket: &[Candidate]| {
            let mut fit: Vec<Candidate> = bucket.iter().filter(|c| c.fits).copied().collect();
            fit.sort_by_key(|c| c.seq);
            fit.iter()
                .find(|c| c.seq > self.last_served)
                .or(fit.first())
                .map(|c| c.at)
        };
        round_robin(&bucket1)
            .or_else(|| round_robin(&bucket2))
            .or_else(|| {
                // Bucket 3: nobody in 1 or 2 fits, so any fitting host;
                // known indexes lowest first, then fewest connecting, then
                // query order, unknown (-1) last.
                let mut third: Vec<Candidate> =
                    eligible.iter().filter(|c| c.fits).copied().collect();
                third.sort_by_key(|c| (c.index < 0, c.index, c.connecting, c.seq));
                third.first().map(|c| c.at)
            })
    }

    pub(crate) fn connect(&mut self, user: &str, gpu: bool, random: u64, id: &str) -> Outcome {
        self.expire();
        let key = user.to_lowercase();
        // S1: the user's session wins, wherever it is, or fails if its host is down.
        if let Some(s) = self.sessions.iter().find(|s| s.user == key) {
            let h = self
                .hosts
                .iter()
                .find(|h| h.name == s.host)
                .expect("session on a host");
            if !self.available(h) {
                return Err("SessionHostUnavailable");
            }
            return Ok((s.host.clone(), true, s.id.clone()));
        }
        if self.alg == Alg::Load {
            let Some(at) = self.pick_load_index(gpu) else {
                return Err("NoSessionHostAvailable");
            };
            let host = self.hosts[at].name.clone();
            self.last_served = self.hosts[at].seq;
            self.hosts[at].logons_since_heartbeat += 1;
            self.sessions.push(MSession {
                id: id.to_string(),
                host: host.clone(),
                user: key,
                state: SessionState::Pending,
                since_ms: self.now_ms,
                awaiting_logon: true,
            });
            return Ok((host, false, id.to_string()));
        }
        // S2: every host, filtered; then ranked by (sessions, query order).
        let counts = self.counts();
        let count = |h: &MHost| counts.get(h.name.as_str()).copied().unwrap_or(0);
        let mut eligible: Vec<(u32, usize)> = self
            .hosts
            .iter()
            .enumerate()
            .filter(|(_, h)| !h.drained && self.available(h) && count(h) < self.limit)
            .filter(|(_, h)| !gpu || h.gpu)
            .map(|(i, h)| (count(h), i))
            .collect();
        if eligible.is_empty() {
            return Err("NoSessionHostAvailable");
        }
        eligible.sort();
        let chosen = match self.alg {
            // B1: the first half, rounded up, uniformly.
            Alg::Breadth => eligible[uniform_below(random, eligible.len().div_ceil(2))].1,
            // B3: the fewest, ties in query order.
            Alg::Classic => eligible[0].1,
            // D1: walk in query order, keep the first with strictly more.
            Alg::Load => unreachable!("LoadIndex is placed above"),
            Alg::Depth => {
                let mut best = eligible[0];
                for &(n, i) in &eligible {
                    if n > best.0 || (n == best.0 && i < best.1) {
                        best = (n, i);
                    }
                }
                best.1
            }
        };
        let host = self.hosts[chosen].name.clone();
        self.hosts[chosen].logons_since_heartbeat += 1;
        self.sessions.push(MSession {
            id: id.to_string(),
            host: host.clone(),
            user: key,
            state: SessionState::Pending,
            since_ms: self.now_ms,
            awaiting_logon: true,
        });
        Ok((host, false, id.to_string()))
    }
}
