//! The Horizon-style Server Load Index of a host (rules H1–H3), and the
//! two small structures that let the `LoadIndex` algorithm (H5) place a
//! logon in O(log n): a min-tree over query order for round robin inside a
//! bucket, and the threshold raise.

use crate::model::{HostMetrics, LoadIndexSettings, MAX_SESSION_LIMIT};

/// The highest index (H1–H3): every factor is capped at 100.
pub const MAX: i32 = 100;

/// The index of a host whose load is unknown (H1).
pub const UNKNOWN: i32 = -1;

/// What a custom-script pool counts for a host that reports no value while
/// others do (H3).
pub const CUSTOM_MISSING: i32 = 25;

/// `min(100, floor(100 * value / threshold))`, exact for values given with
/// up to six decimals: the value is taken in millionths as an integer, so
/// 29 % against a threshold of 100 is 29, not 28.999….
pub fn factor(value: f64, threshold: u32) -> i32 {
    if threshold == 0 {
        // A threshold of 0 means "not used"; never divide by it.
        return 0;
    }
    let micro = (value * 1e6).round() as i128;
    let f = (100 * micro).div_euclid(i128::from(threshold) * 1_000_000);
    f.clamp(0, 100) as i32
}

/// The session factor (H2): against the limit when it is set below 999999
/// (100 when the limit is 0), else the raw count capped at 100.
pub fn session_factor(sessions: u32, limit: u32) -> i32 {
    if limit == 0 {
        return 100;
    }
    if limit < MAX_SESSION_LIMIT {
        return (u64::from(sessions) * 100 / u64::from(limit)).min(100) as i32;
    }
    sessions.min(100) as i32
}

/// A host's Server Load Index, 0..=100, or -1 when unknown (H1–H3).
///
/// `metrics` is the last heartbeat's (None: the host never sent one);
/// `any_custom` tells whether some host of the pool reports a custom value.
pub fn compute(
    s: &LoadIndexSettings,
    limit: u32,
    sessions: u32,
    metrics: Option<&HostMetrics>,
    any_custom: bool,
) -> i32 {
    compute_corrected(s, limit, sessions, metrics, any_custom, 0)
}

/// [`compute`] with the stale-index correction of rule H7: `correction`
/// index points (the pool's `logonCost` times the logons the last heartbeat
/// cannot show in full) are added to every factor that comes from a
/// reported metric (CPU, memory, disk, custom value), each still capped at
/// 100. The session factor is never corrected: the broker counts sessions
/// as it places them, so it is never stale. With `correction` 0 this is the
/// sources' index exactly.
///
/// The corrected index is the host's index everywhere (deskbroker decides:
/// H7 is ours): H5 forms its buckets and raises its threshold from it, and
/// H6's host-side refusal compares it with the host's threshold. A host
/// refuses by its load as it is, which it knows and its last sample does
/// not show yet; the broker applies H6 for the host, so it refuses on its
/// best estimate of that load. A host passed over this way takes logons
/// again as its logons finish or its next heartbeat shows it below the
/// threshold.
pub fn compute_corrected(
    s: &LoadIndexSettings,
    limit: u32,
    sessions: u32,
    metrics: Option<&HostMetrics>,
    any_custom: bool,
    correction: i32,
) -> i32 {
    let corrected = |f: i32| f.saturating_add(correction).min(100);
    if s.use_custom_script {
        return match metrics.and_then(|m| m.custom_load_index) {
            Some(v) => corrected(v.clamp(0, 100) as i32),
            None if any_custom => CUSTOM_MISSING,
            None => UNKNOWN,
        };
    }
    let metric_factors = [
        (s.cpu_threshold, metrics.map(|m| m.cpu_percent)),
        (s.memory_threshold, metrics.map(|m| m.memory_percent)),
        (
            s.disk_queue_length_threshold,
            metrics.map(|m| m.disk_queue_length),
        ),
        (
            s.disk_read_latency_threshold,
            metrics.map(|m| m.disk_read_latency_ms),
        ),
        (
            s.disk_write_latency_threshold,
            metrics.map(|m| m.disk_write_latency_ms),
        ),
    ];
    let any_metric = metric_factors.iter().any(|(t, _)| *t > 0);
    let use_sessions = s.include_session_count || !any_metric;
    let mut index = if use_sessions {
        session_factor(sessions, limit)
    } else {
        UNKNOWN
    };
    for (threshold, value) in metric_factors {
        if threshold == 0 {
            continue;
        }
        match value {
            // H1: a factor in use needs a metric the host never reported.
            None => return UNKNOWN,
            // H2: a factor whose metric the last heartbeat lacks is left out.
            Some(None) => {}
            Some(Some(v)) => index = index.max(corrected(factor(v, threshold))),
        }
    }
    index
}

/// Minimum over positions (query order) with "first position at or after
/// `from` whose value is below `x`" in O(log n): how round robin finds the
/// next host of a bucket. Positions not in the bucket hold `i32::MAX`.
#[derive(Clone, Debug, Default)]
pub struct MinTree {
    /// Leaves start at `size`; node `i` is the minimum of `2i` and `2i+1`.
    nodes: Vec<i32>,
    size: usize,
}

impl MinTree {
    pub fn set(&mut self, pos: usize, value: i32) {
        if pos >= self.size {
            self.grow(pos + 1);
        }
        let mut i = self.size + pos;
        self.nodes[i] = value;
        while i > 1 {
            i /= 2;
            let min = self.nodes[2 * i].min(self.nodes[2 * i + 1]);
            if self.nodes[i] == min {
                // Every node above holds the minimum of nodes that did not
                // change either: on a large pool most sets stop here,
                // short of the root.
                break;
            }
            self.nodes[i] = min;
        }
    }

    fn grow(&mut self, at_least: usize) {
        let size = at_least.next_power_of_two().max(64);
        let mut nodes = vec![i32::MAX; 2 * size];
        nodes[size..size + self.size].copy_from_slice(&self.nodes[self.size..]);
        for i in (1..size).rev() {
            nodes[i] = nodes[2 * i].min(nodes[2 * i + 1]);
        }
        self.nodes = nodes;
        self.size = size;
    }

    /// The value at `pos` (`i32::MAX` where none was set).
    pub fn get(&self, pos: usize) -> i32 {
        if pos >= self.size {
            return i32::MAX;
        }
        self.nodes[self.size + pos]
    }

    /// The first position `>= from` whose value is `< x`.
    pub fn first_below(&self, from: usize, x: i32) -> Option<usize> {
        if from >= self.size || self.nodes[1] >= x {
            return None;
        }
        self.find(1, 0, self.size, from, x)
    }

    fn find(&self, node: usize, lo: usize, hi: usize, from: usize, x: i32) -> Option<usize> {
        if hi <= from || self.nodes[node] >= x {
            return None;
        }
        if hi - lo == 1 {
            return Some(lo);
        }
        let mid = (lo + hi) / 2;
        self.find(2 * node, lo, mid, from, x)
            .or_else(|| self.find(2 * node + 1, mid, hi, from, x))
    }
}
