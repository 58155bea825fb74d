//! What users and hosts do: the built-in scenarios and the CSV trace.
//!
//! - **storm**: N users log on over `storm_minutes`; arrivals follow a
//!   peaked curve whose highest rate is 2.4 × the average (the Horizon
//!   sizing guide's assumption); then the farm settles for 20 minutes.
//! - **day**: 06:00 to 20:00. The morning storm from 07:00 (two hours),
//!   lunch disconnects and reconnects, short network drops, logoffs from
//!   16:00, some users who leave their session disconnected, and a tenth of
//!   the hosts drained for maintenance from 11:00 to 15:00.
//! - **failure**: the storm, with 5 % of the hosts (at least one) failing
//!   at its peak; their users reconnect; an operator removes the dead hosts
//!   five minutes later.
//! - **trace**: a CSV file `time,user,event` (seconds from the start,
//!   a user principal name, `connect`, `disconnect` or `logoff`).

use rand::RngExt;
use rand::rngs::SmallRng;

use crate::SimError;

/// Which scenario, as the command line names it.
#[derive(Clone, Debug)]
pub enum ScenarioKind {
    Storm,
    Day,
    Failure,
    Trace(Trace),
}

impl ScenarioKind {
    pub fn name(&self) -> String {
        match self {
            ScenarioKind::Storm => "storm".into(),
            ScenarioKind::Day => "day".into(),
            ScenarioKind::Failure => "failure".into(),
            ScenarioKind::Trace(t) => format!("trace {}", t.name),
        }
    }
}

/// What a user does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UserAction {
    /// Log on, or reconnect to a Disconnected session (S1).
    Connect,
    Disconnect,
    Logoff,
}

/// What happens to a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HostAction {
    /// It dies: its sessions are gone and its agent stops.
    Fail,
    /// An operator removes it (with its sessions, `--force`).
    Remove,
    Drain,
    Undrain,
}

/// The scenario, built: users' actions and host events at absolute times
/// (ms from the start), sorted.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub users: Vec<String>,
    pub user_actions: Vec<(i64, u32, UserAction)>,
    pub host_actions: Vec<(i64, u32, HostAction)>,
    pub end_ms: i64,
}

/// The peaked arrival curve: density ∝ (1 − |x|)^1.4 on x ∈ [−1, 1], whose
/// peak is (1.4 + 1) = 2.4 times its average. Inverse CDF of a uniform u.
fn storm_offset(u: f64, length_ms: f64) -> i64 {
    const P1: f64 = 2.4; // exponent + 1
    let x = if u < 0.5 {
        (2.0 * u).powf(1.0 / P1) - 1.0
    } else {
        1.0 - (2.0 * (1.0 - u)).powf(1.0 / P1)
    };
    ((x + 1.0) / 2.0 * length_ms) as i64
}

const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;

impl Scenario {
    pub fn build(
        kind: &ScenarioKind,
        hosts: u32,
        users: u32,
        storm_minutes: u32,
        rng: &mut SmallRng,
    ) -> Scenario {
        let storm_ms = i64::from(storm_minutes) * MINUTE;
        let names =
            |n: u32| -> Vec<String> { (0..n).map(|i| format!("user{i:06}@contoso.com")).collect() };
        match kind {
            ScenarioKind::Storm | ScenarioKind::Failure => {
                let mut user_actions: Vec<(i64, u32, UserAction)> = (0..users)
                    .map(|u| {
                        let t = storm_offset(rng.random(), storm_ms as f64);
                        (t, u, UserAction::Connect)
                    })
                    .collect();
                user_actions.sort();
                let mut host_actions = Vec::new();
                if matches!(kind, ScenarioKind::Failure) {
                    let failing = (hosts / 20).max(1);
                    for h in pick_hosts(hosts, failing, rng) {
                        host_actions.push((storm_ms / 2, h, HostAction::Fail));
                        host_actions.push((storm_ms / 2 + 5 * MINUTE, h, HostAction::Remove));
                    }
                    host_actions.sort();
                }
                Scenario {
                    users: names(users),
                    user_actions,
                    host_actions,
                    end_ms: storm_ms + 20 * MINUTE,
                }
            }
            ScenarioKind::Day => {
                // t = 0 is 06:00.
                let at = |h: f64| (h * HOUR as f64) as i64 - 6 * HOUR;
                let mut ua = Vec::with_capacity(users as usize * 5);
                for u in 0..users {
                    let arrive = at(7.0) + storm_offset(rng.random(), (2 * HOUR) as f64);
                    ua.push((arrive, u, UserAction::Connect));
                    let leave = at(16.0) + rng.random_range(0..150 * MINUTE);
                    if rng.random_bool(0.40) {
                        // Lunch: disconnect, come back 30 to 60 minutes later.
                        let off = at(12.0) + rng.random_range(0..60 * MINUTE);
                        ua.push((off, u, UserAction::Disconnect));
                        ua.push((
                            off + rng.random_range(30 * MINUTE..60 * MINUTE),
                            u,
                            UserAction::Connect,
                        ));
                    }
                    if rng.random_bool(0.20) {
                        // A network drop, reconnected within 1 to 5 minutes.
                        let drop = rng.random_range(at(9.5)..at(15.5));
                        let back = drop + rng.random_range(MINUTE..5 * MINUTE);
                        if !(at(11.9)..at(13.1)).contains(&drop) {
                            ua.push((drop, u, UserAction::Disconnect));
                            ua.push((back, u, UserAction::Connect));
                        }
                    }
                    if rng.random_bool(0.10) {
                        // Leaves the session disconnected overnight.
                        ua.push((leave, u, UserAction::Disconnect));
                    } else {
                        ua.push((leave, u, UserAction::Logoff));
                    }
                }
                ua.sort();
                let drained = (hosts / 10).max(u32::from(hosts >= 10));
                let mut host_actions = Vec::new();
                for h in pick_hosts(hosts, drained, rng) {
                    host_actions.push((at(11.0), h, HostAction::Drain));
                    host_actions.push((at(15.0), h, HostAction::Undrain));
                }
                host_actions.sort();
                Scenario {
                    users: names(users),
                    user_actions: ua,
                    host_actions,
                    end_ms: at(20.0),
                }
            }
            ScenarioKind::Trace(t) => Scenario {
                users: t.users.clone(),
                user_actions: t.events.clone(),
                host_actions: Vec::new(),
                end_ms: t.events.last().map_or(0, |e| e.0) + 20 * MINUTE,
            },
        }
    }
}

/// `k` distinct hosts of `n`, drawn with the run's RNG, in order.
fn pick_hosts(n: u32, k: u32, rng: &mut SmallRng) -> Vec<u32> {
    let mut all: Vec<u32> = (0..n).collect();
    for i in 0..k.min(n) as usize {
        let j = rng.random_range(i..all.len());
        all.swap(i, j);
    }
    let mut out = all[..k.min(n) as usize].to_vec();
    out.sort();
    out
}

/// One row of a trace.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
struct TraceEvent {
    time: String,
    user: String,
    event: String,
}

/// A parsed trace: users in order of first appearance, events sorted by
/// time (stable: rows at the same time keep the file's order).
#[derive(Clone, Debug)]
pub struct Trace {
    pub name: String,
    pub users: Vec<String>,
    pub events: Vec<(i64, u32, UserAction)>,
}

/// The largest trace file read.
pub const MAX_TRACE_BYTES: u64 = 256 * 1024 * 1024;
/// The most rows a trace may have.
pub const MAX_TRACE_ROWS: usize = 5_000_000;
/// The latest time in a trace: a week.
pub const MAX_TRACE_SECONDS: f64 = 7.0 * 86_400.0;

impl Trace {
    /// Reads a trace file, within [`MAX_TRACE_BYTES`].
    pub fn read(path: &std::path::Path) -> Result<Trace, SimError> {
        let err = |message: String| SimError::Trace {
            path: path.display().to_string(),
            message,
        };
        let meta = std::fs::metadata(path).map_err(|e| err(e.to_string()))?;
        if meta.len() > MAX_TRACE_BYTES {
            return Err(err(format!(
                "{} bytes is larger than the limit of {MAX_TRACE_BYTES}",
                meta.len()
            )));
        }
        let data = std::fs::read(path).map_err(|e| err(e.to_string()))?;
        Trace::parse(&path.display().to_string(), &data).map_err(err)
    }

    /// Parses `time,user,event` rows (with that header). Answers the first
    /// problem with its line number.
    pub fn parse(name: &str, data: &[u8]) -> Result<Trace, String> {
        let mut reader = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .comment(Some(b'#'))
            .from_reader(data);
        let headers = reader.headers().map_err(|e| e.to_string())?.clone();
        let want = ["time", "user", "event"];
        if headers.iter().collect::<Vec<_>>() != want {
            return Err(format!(
                "the header must be time,user,event (found {:?})",
                headers.iter().collect::<Vec<_>>().join(",")
            ));
        }
        let mut index: std::collections::HashMap<String, u32> = Default::default();
        let mut users = Vec::new();
        let mut events = Vec::new();
        for (i, row) in reader.deserialize::<TraceEvent>().enumerate() {
            let line = i + 2;
            if i >= MAX_TRACE_ROWS {
                return Err(format!("more than {MAX_TRACE_ROWS} rows"));
            }
            let row = row.map_err(|e| format!("line {line}: {e}"))?;
            let seconds: f64 = row.time.parse().map_err(|_| {
                format!(
                    "line {line}: time {:?} is not a number of seconds",
                    row.time
                )
            })?;
            if !(0.0..=MAX_TRACE_SECONDS).contains(&seconds) {
                return Err(format!(
                    "line {line}: time {seconds} must be from 0 to {MAX_TRACE_SECONDS} seconds"
                ));
            }
            placement::validate_user("user", &row.user).map_err(|e| format!("line {line}: {e}"))?;
            let action = match row.event.to_ascii_lowercase().as_str() {
                "connect" | "logon" | "reconnect" => UserAction::Connect,
                "disconnect" => UserAction::Disconnect,
                "logoff" => UserAction::Logoff,
                other => {
                    return Err(format!(
                        "line {line}: event {other:?} is not connect, disconnect or logoff"
                    ));
                }
            };
            let key = placement::user_key(&row.user);
            let u = match index.get(&key) {
                Some(&u) => u,
                None => {
                    if users.len() >= crate::MAX_USERS as usize {
                        return Err(format!("more than {} users", crate::MAX_USERS));
                    }
                    let u = users.len() as u32;
                    index.insert(key, u);
                    users.push(row.user.clone());
                    u
                }
            };
            events.push(((seconds * 1000.0).round() as i64, u, action));
        }
        if events.is_empty() {
            return Err("no events".into());
        }
        events.sort_by_key(|e| e.0);
        Ok(Trace {
            name: name.to_string(),
            users,
            events,
        })
    }
}
