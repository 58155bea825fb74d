//! The policies compared: the sources' algorithms as the engine runs them
//! (a pool setting each), the corrected LoadIndex of rule H7, and, as
//! references, what other products do — whose picks live here and run
//! through `Pool::connect_picked`, so the rules around the pick stay the
//! engine's.

use placement::{Candidates, Host, HostPoolType, LoadBalancerType, PoolConfig};
use std::collections::BTreeSet;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

/// `logonStormSettings.logonCost` of [`Policy::LoadIndexCorrected`] unless
/// `--logon-cost` says otherwise: a logon's vCPU on the model's hosts is
/// 6 % of a 16-vCPU host and 12 % of an 8-vCPU one.
pub const DEFAULT_LOGON_COST: u32 = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// B1: random host of the less-loaded half (AVD's default).
    BreadthFirst,
    /// B3: fewest sessions, ties in query order.
    BreadthFirstClassic,
    /// D1.
    DepthFirst,
    /// H1–H6 with the default storm settings (Horizon).
    LoadIndex,
    /// H7: LoadIndex with each host's stale index corrected by the logons
    /// placed since its last sample — deskbroker's improvement.
    LoadIndexCorrected,
    /// HAProxy `leastconn`, Guacamole's least connections: fewest
    /// sessions, round robin among ties.
    LeastConnections,
    /// HAProxy `random(2)`, NGINX `random two least_conn`: the fewer
    /// sessions of two hosts drawn at random.
    PowerOfTwo,
    /// Lowest reported load index, stale, with no storm handling.
    LeastLoadStale,
    /// Citrix-style horizontal load balancing: lowest reported load among
    /// hosts with fewer than 2 logons in progress (the concurrent logon
    /// tolerance), else lowest load (the tolerance is not a hard limit).
    CitrixHorizontal,
}

impl Policy {
    pub const ALL: [Policy; 9] = [
        Policy::BreadthFirst,
        Policy::BreadthFirstClassic,
        Policy::DepthFirst,
        Policy::LoadIndex,
        Policy::LeastConnections,
        Policy::PowerOfTwo,
        Policy::LeastLoadStale,
        Policy::CitrixHorizontal,
        Policy::LoadIndexCorrected,
    ];

    /// The policy's name, as the API names algorithms (`loadBalancerType`:
    /// `BreadthFirst`, `DepthFirst`, `LoadIndex`) and in the same
    /// PascalCase for the policies the API does not have (B3, H7's
    /// correction as a policy of its own, other products' picks). What
    /// `--policies` takes and what the report, table and plot show.
    pub fn name(self) -> &'static str {
        match self {
            Policy::BreadthFirst => "BreadthFirst",
            Policy::BreadthFirstClassic => "BreadthFirstClassic",
            Policy::DepthFirst => "DepthFirst",
            Policy::LoadIndex => "LoadIndex",
            Policy::LoadIndexCorrected => "LoadIndexCorrected",
            Policy::LeastConnections => "LeastConnections",
            Policy::PowerOfTwo => "PowerOfTwo",
            Policy::LeastLoadStale => "LeastLoadStale",
            Policy::CitrixHorizontal => "CitrixHorizontal",
        }
    }

    /// The name the simulator used before it named policies as the API
    /// does, still accepted by `--policies` so that existing scripts keep
    /// working; never printed.
    pub fn former_name(self) -> &'static str {
        match self {
            Policy::BreadthFirst => "breadth-first",
            Policy::BreadthFirstClassic => "breadth-first-classic",
            Policy::DepthFirst => "depth-first",
            Policy::LoadIndex => "load-index",
            Policy::LoadIndexCorrected => "load-index-corrected",
            Policy::LeastConnections => "least-connections",
            Policy::PowerOfTwo => "power-of-two",
            Policy::LeastLoadStale => "least-load-stale",
            Policy::CitrixHorizontal => "citrix-horizontal",
        }
    }

    /// Parses `--policies`: comma-separated names or former names (any
    /// case), or `all`.
    pub fn parse_list(s: &str) -> Result<Vec<Policy>, String> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim) {
            if part.eq_ignore_ascii_case("all") {
                for p in Policy::ALL {
                    if !out.contains(&p) {
                        out.push(p);
                    }
                }
                continue;
            }
            let p = Policy::ALL
                .into_iter()
                .find(|p| {
                    p.name().eq_ignore_ascii_case(part)
                        || p.former_name().eq_ignore_ascii_case(part)
                })
                .ok_or_else(|| {
                    let names: Vec<&str> = Policy::ALL.iter().map(|p| p.name()).collect();
                    format!(
                        "--policies: unknown policy {part:?}; use all or some of {}",
                        names.join(", ")
                    )
                })?;
            if out.contains(&p) {
                return Err(format!("--policies: {} is listed twice", p.name()));
            }
            out.push(p);
        }
        Ok(out)
    }

    /// How long a run of this policy takes compared with the others, to
    /// start the longest first: the `LoadIndex` pools keep their buckets
    /// true on every change of a host, and the load-based references keep
    /// their own order of hosts. Only the order runs start in depends on
    /// it, never a result.
    pub fn relative_cost(self) -> u32 {
        match self {
            Policy::LoadIndex | Policy::LoadIndexCorrected => 3,
            Policy::LeastLoadStale | Policy::CitrixHorizontal => 2,
            _ => 1,
        }
    }

    /// The engine decides (the sources' algorithms and H7); otherwise the
    /// pick here does, through `connect_picked`.
    pub fn is_engine(self) -> bool {
        matches!(
            self,
            Policy::BreadthFirst
                | Policy::BreadthFirstClassic
                | Policy::DepthFirst
                | Policy::LoadIndex
                | Policy::LoadIndexCorrected
        )
    }

    /// The pool this policy runs on. Every pool indexes CPU and memory
    /// against 100 % thresholds and the session count (the index the
    /// load-based references read too); only the algorithm and, for H7,
    /// `logonCost` differ.
    pub fn pool_config(self, limit: u32, logon_cost: u32) -> PoolConfig {
        let lb = match self {
            Policy::DepthFirst => LoadBalancerType::DepthFirst,
            Policy::LoadIndex | Policy::LoadIndexCorrected => LoadBalancerType::LoadIndex,
            _ => LoadBalancerType::BreadthFirst,
        };
        let mut c = PoolConfig::new("sim", HostPoolType::Pooled, lb);
        c.max_session_limit = limit;
        c.breadth_first_randomized = self != Policy::BreadthFirstClassic;
        // A logon slowed down by an overloaded host must not expire while
        // the host still runs it (S4's default of 120 s would end it).
        c.pending_timeout_seconds = 3600;
        c.load_index_settings.cpu_threshold = 100;
        c.load_index_settings.memory_threshold = 100;
        if self == Policy::LoadIndexCorrected {
            c.logon_storm_settings.logon_cost = logon_cost;
        }
        c
    }
}

/// The state the reference picks keep between placements.
pub struct Picker {
    policy: Policy,
    rng: SmallRng,
    /// Least connections: the host served last, for round robin on ties.
    last_seq: u64,
    /// The load-based picks: hosts by [`load_key`], kept current by
    /// [`Picker::refresh`] after every operation that touches a host, so
    /// a pick costs O(log n) instead of a scan of every host.
    by_load: BTreeSet<LoadKey>,
    /// The same, only hosts under the concurrent logon tolerance.
    calm_by_load: BTreeSet<LoadKey>,
    /// Each host's key in those sets and whether it is calm, by `seq`.
    keys: Vec<Option<(LoadKey, bool)>>,
}

/// Citrix's default concurrent logon tolerance.
const CONCURRENT_LOGON_TOLERANCE: u32 = 2;

impl Picker {
    pub fn new(policy: Policy, seed: u64) -> Picker {
        Picker {
            policy,
            rng: SmallRng::seed_from_u64(seed ^ 0x005E_ED0F_7E5E_u64),
            last_seq: 0,
            by_load: BTreeSet::new(),
            calm_by_load: BTreeSet::new(),
            keys: Vec::new(),
        }
    }

    /// Whether the pick reads hosts' load (and so needs `refresh`).
    pub fn needs_load(&self) -> bool {
        matches!(
            self.policy,
            Policy::LeastLoadStale | Policy::CitrixHorizontal
        )
    }

    /// Takes a host's current index, sessions and logons in progress
    /// (`None`: the host is gone).
    pub fn refresh(&mut self, seq: u64, host: Option<&Host>) {
        let i = seq as usize;
        if self.keys.len() <= i {
            self.keys.resize(i + 1, None);
        }
        let now = host.map(|h| {
            (
                load_key(h),
                h.connecting_sessions < CONCURRENT_LOGON_TOLERANCE,
            )
        });
        if self.keys[i] == now {
            // Most heartbeats leave a host where it was in both orders.
            return;
        }
        if let Some((key, calm)) = self.keys[i].take() {
            self.by_load.remove(&key);
            if calm {
                self.calm_by_load.remove(&key);
            }
        }
        if let Some((key, calm)) = now {
            self.by_load.insert(key);
            if calm {
                self.calm_by_load.insert(key);
            }
            self.keys[i] = Some((key, calm));
        }
    }

    /// The host (its `seq`) this policy gives a new session to.
    pub fn pick(&mut self, c: &Candidates) -> Option<u64> {
        if c.is_empty() {
            return None;
        }
        let seq = match self.policy {
            Policy::LeastConnections => {
                // Candidates come ranked by (sessions, query order): the
                // fewest-sessions hosts are a prefix, in query order.
                let fewest = c.get(0).sessions;
                let n = c.count_below(fewest + 1);
                let (mut lo, mut hi) = (0, n);
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    if c.get(mid).seq <= self.last_seq {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                c.get(if lo < n { lo } else { 0 }).seq
            }
            Policy::PowerOfTwo => {
                let n = c.len();
                let a = c.get(self.rng.random_range(0..n));
                let b = c.get(self.rng.random_range(0..n));
                if b.sessions < a.sessions {
                    b.seq
                } else {
                    a.seq
                }
            }
            Policy::LeastLoadStale => self.by_load.iter().find(|k| c.contains(k.2))?.2,
            Policy::CitrixHorizontal => {
                let tolerated = self.calm_by_load.iter().find(|k| c.contains(k.2));
                match tolerated {
                    Some(k) => k.2,
                    None => self.by_load.iter().find(|k| c.contains(k.2))?.2,
                }
            }
            _ => return None,
        };
        self.last_seq = seq;
        Some(seq)
    }
}

/// A host's place in the load order: (index, sessions, query order).
type LoadKey = (i32, u32, u64);

/// Known index first, lowest first; then fewest sessions; then query order.
fn load_key(h: &Host) -> LoadKey {
    let index = if h.load_index >= 0 {
        h.load_index
    } else {
        i32::MAX
    };
    (index, h.sessions, h.seq)
}
