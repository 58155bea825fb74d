//! The checker: reads the history (each operation with the client's start
//! and end times and its outcome), the database at the end and the
//! observations, and lists what is definitely wrong. It flags only what no
//! order of the concurrent operations can explain: an operation may have
//! taken effect at any moment between its start and its end, and one whose
//! outcome is unknown may or may not have.
//!
//! What makes it sound: during a run nothing ends a session but a logoff
//! (the pools' timeouts are a day; see `load`), and a logoff names the
//! session it ends, so every session's possible ends are in the history.
//!
//! The rules checked:
//! - **lost**: a session acknowledged by a connect, with no logoff of it
//!   that may have happened, is in the database at the end, for that user
//!   on the host answered (rule S5);
//! - **logoff lost**: a session whose logoff was acknowledged is not in
//!   the database at the end;
//! - **S1 split**: once a connect acknowledged session A (it ended before
//!   B started), a later connect B of the same user and pool answering
//!   another session is wrong unless a logoff of A that may have happened
//!   was sent before B's answer came;
//! - **stale S1**: a connect answering session A that started after a
//!   logoff of A was acknowledged (the session no longer existed);
//! - **one id, one place**: every answer naming a session names the same
//!   host and user;
//! - **P7**: in the personal pool a user keeps one desktop and a desktop
//!   one user, across the whole run (nothing unassigns during it);
//! - **S6** (database, at checkpoints and at the end): at most one session
//!   per user and pool, no host over its pool's limit, personal sessions
//!   only on their owner's desktop, one desktop per owner;
//! - **L1**: when a fault keeps the leader from deciding while it runs
//!   (frozen, its database link partitioned, stalled or half-dead) for
//!   longer than the bound, a write is acknowledged within the bound:
//!   another replica took over;
//! - **epochs** (observations): the leadership row's epoch never goes
//!   down, nor the epoch any one start of a replica reports, and no two
//!   replicas ever claim to lead under the same epoch.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::Duration;

use super::faults::LeaderOutage;
use super::history::{Op, Outcome, PROBE_CLIENT, Req};
use super::load::{Kind, POOLS};
use super::observe::{DbState, Observations};

#[derive(Clone, Debug)]
pub struct Violation {
    pub rule: &'static str,
    pub what: String,
    /// The history's operations that show it.
    pub ops: Vec<usize>,
}

fn violation(rule: &'static str, what: String, ops: Vec<usize>) -> Violation {
    Violation { rule, what, ops }
}

/// (pool, user in lower case).
type Key = (String, String);

fn key(pool: &str, user: &str) -> Key {
    (pool.to_string(), user.to_ascii_lowercase())
}

/// The history sorted for the checks.
struct Index<'a> {
    /// Acknowledged connects by (pool, user), in the history's order.
    acks: BTreeMap<Key, Vec<&'a Op>>,
    /// Acknowledged connects by session id.
    by_session: BTreeMap<&'a str, Vec<&'a Op>>,
    /// Every logoff by session id.
    logoffs: HashMap<&'a str, Vec<&'a Op>>,
}

impl<'a> Index<'a> {
    fn new(ops: &'a [Op]) -> Index<'a> {
        let mut index = Index {
            acks: BTreeMap::new(),
            by_session: BTreeMap::new(),
            logoffs: HashMap::new(),
        };
        for op in ops {
            match &op.req {
                Req::Connect { pool, user } => {
                    if let Some(p) = op.placed() {
                        index.acks.entry(key(pool, user)).or_default().push(op);
                        index.by_session.entry(&p.session).or_default().push(op);
                    }
                }
                Req::Logoff { session, .. } => index.logoffs.entry(session).or_default().push(op),
                _ => {}
            }
        }
        index
    }

    /// A logoff of `session` that may have happened, sent before `before`.
    fn ended_before(&self, session: &str, before: Duration) -> Option<&'a Op> {
        self.logoffs.get(session).and_then(|l| {
            l.iter()
                .find(|o| o.outcome.may_have_happened() && o.start < before)
                .copied()
        })
    }

    /// An acknowledged logoff of `session` answered before `before`.
    fn acked_logoff_before(&self, session: &str, before: Duration) -> Option<&'a Op> {
        self.logoffs.get(session).and_then(|l| {
            l.iter()
                .find(|o| matches!(o.outcome, Outcome::Ok(_)) && o.end < before)
                .copied()
        })
    }
}

/// The checks over the history alone.
pub fn check_history(ops: &[Op]) -> Vec<Violation> {
    let index = Index::new(ops);
    let mut out = Vec::new();
    // One id, one place.
    for (session, answers) in &index.by_session {
        let places: BTreeSet<(Key, &str)> = answers
            .iter()
            .filter_map(|o| match &o.req {
                Req::Connect { pool, user } => Some((key(pool, user), o.placed()?.host.as_str())),
                _ => None,
            })
            .collect();
        if places.len() > 1 {
            out.push(violation(
                "one id, one place",
                format!("session {session} was answered as {places:?}"),
                answers.iter().map(|o| o.index).collect(),
            ));
        }
    }
    // S1 split.
    for ((pool, user), answers) in &index.acks {
        // Each session's first acknowledgment: the earliest end.
        let mut first: BTreeMap<&str, &Op> = BTreeMap::new();
        for o in answers {
            let s = o.placed().map(|p| p.session.as_str()).unwrap_or_default();
            let e = first.entry(s).or_insert(o);
            if o.end < e.end {
                *e = o;
            }
        }
        let mut flagged: HashSet<(&str, &str)> = HashSet::new();
        let mut by_start: Vec<&&Op> = answers.iter().collect();
        by_start.sort_by_key(|o| o.start);
        for b in by_start {
            let Some(placed) = b.placed() else { continue };
            for (&s, a) in &first {
                if s == placed.session
                    || a.end >= b.start
                    || flagged.contains(&(s, placed.session.as_str()))
                    || index.ended_before(s, b.end).is_some()
                {
                    continue;
                }
                flagged.insert((s, placed.session.as_str()));
                let host_a = a.placed().map(|p| p.host.as_str()).unwrap_or_default();
                out.push(violation(
                    "S1 split",
                    format!(
                        "{user} in {pool}: session {s} on {host_a} was acknowledged (#{}) and \
                         no logoff of it was sent before #{} answered another session, {} on {}",
                        a.index, b.index, placed.session, placed.host
                    ),
                    vec![a.index, b.index],
                ));
            }
        }
    }
    // Stale S1.
    for (session, answers) in &index.by_session {
        for b in answers {
            if let Some(logoff) = index.acked_logoff_before(session, b.start) {
                out.push(violation(
                    "stale S1",
                    format!(
                        "#{} answered session {session}, whose logoff #{} had been \
                         acknowledged before it was sent",
                        b.index, logoff.index
                    ),
                    vec![logoff.index, b.index],
                ));
                break;
            }
        }
    }
    // P7: one desktop per user, one user per desktop.
    for spec in POOLS.iter().filter(|p| matches!(p.kind, Kind::Personal)) {
        let mut desks_of: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
        let mut users_of: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
        for ((pool, user), answers) in &index.acks {
            if pool != spec.name {
                continue;
            }
            for o in answers {
                let host = o.placed().map(|p| p.host.as_str()).unwrap_or_default();
                desks_of
                    .entry(user)
                    .or_default()
                    .entry(host)
                    .or_insert(o.index);
                users_of
                    .entry(host)
                    .or_default()
                    .entry(user)
                    .or_insert(o.index);
            }
        }
        for (user, desks) in desks_of.iter().filter(|(_, d)| d.len() > 1) {
            out.push(violation(
                "P7",
                format!(
                    "{user} was sent to several desktops of {}: {desks:?}",
                    spec.name
                ),
                desks.values().copied().collect(),
            ));
        }
        for (host, users) in users_of.iter().filter(|(_, u)| u.len() > 1) {
            out.push(violation(
                "P7",
                format!(
                    "desktop {host} of {} was given to several users: {users:?}",
                    spec.name
                ),
                users.values().copied().collect(),
            ));
        }
    }
    out
}

/// The checks of the history against the database at the end.
pub fn check_final(ops: &[Op], db: &DbState) -> Vec<Violation> {
    let index = Index::new(ops);
    let in_db: HashMap<(&str, &str), &super::observe::DbSession> = db
        .sessions
        .iter()
        .map(|s| ((s.pool.as_str(), s.id.as_str()), s))
        .collect();
    let mut out = Vec::new();
    for (session, answers) in &index.by_session {
        let first = answers[0];
        let Req::Connect { pool, user } = &first.req else {
            continue;
        };
        let host = first.placed().map(|p| p.host.as_str()).unwrap_or_default();
        if let Some(logoff) = index.acked_logoff_before(session, Duration::MAX) {
            if in_db.contains_key(&(pool.as_str(), *session)) {
                out.push(violation(
                    "logoff lost",
                    format!(
                        "session {session} of {user} in {pool} is in the database at the end, \
                         although its logoff #{} was acknowledged",
                        logoff.index
                    ),
                    vec![first.index, logoff.index],
                ));
            }
            continue;
        }
        if index.ended_before(session, Duration::MAX).is_some() {
            continue; // perhaps logged off: either way is right
        }
        match in_db.get(&(pool.as_str(), *session)) {
            None => out.push(violation(
                "lost",
                format!(
                    "session {session} of {user} on {host} in {pool} was acknowledged (#{}) and \
                     never logged off, but is not in the database at the end",
                    first.index
                ),
                answers.iter().map(|o| o.index).collect(),
            )),
            Some(s) if s.host != host || s.user != user.to_ascii_lowercase() => {
                out.push(violation(
                    "lost",
                    format!(
                        "session {session} was acknowledged for {user} on {host} (#{}), the \
                         database has it for {} on {}",
                        first.index, s.user, s.host
                    ),
                    vec![first.index],
                ))
            }
            Some(_) => {}
        }
    }
    out
}

/// Rule S6 and P7 in one snapshot of the database.
pub fn check_db(db: &DbState) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut per_user: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    let mut per_host: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for s in &db.sessions {
        per_user.entry((&s.pool, &s.user)).or_default().push(&s.id);
        *per_host.entry((&s.pool, &s.host)).or_default() += 1;
        let personal = POOLS
            .iter()
            .any(|p| p.name == s.pool && matches!(p.kind, Kind::Personal));
        if personal {
            let owner = db.owners.get(&(s.pool.clone(), s.host.clone()));
            if owner != Some(&s.user) {
                out.push(violation(
                    "P7",
                    format!(
                        "session {} of {} is on desktop {} of {}, whose owner is {owner:?}",
                        s.id, s.user, s.host, s.pool
                    ),
                    vec![],
                ));
            }
        }
    }
    for ((pool, user), ids) in per_user.iter().filter(|(_, ids)| ids.len() > 1) {
        out.push(violation(
            "S6",
            format!("{user} has {} sessions in {pool}: {ids:?}", ids.len()),
            vec![],
        ));
    }
    for ((pool, host), n) in per_host {
        let limit = POOLS.iter().find(|p| p.name == pool).map(|p| match p.kind {
            Kind::Pooled { limit, .. } => limit,
            Kind::Personal => 1,
        });
        if let Some(limit) = limit
            && n > limit
        {
            out.push(violation(
                "S6",
                format!("host {host} of {pool} has {n} sessions, over its limit of {limit}"),
                vec![],
            ));
        }
    }
    let mut desks: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    for ((pool, host), owner) in &db.owners {
        desks.entry((pool, owner)).or_default().push(host);
    }
    for ((pool, owner), hosts) in desks.iter().filter(|(_, h)| h.len() > 1) {
        out.push(violation(
            "P7",
            format!("{owner} owns several desktops of {pool}: {hosts:?}"),
            vec![],
        ));
    }
    out
}

/// Epochs only go up, and one epoch has one leader.
pub fn check_epochs(obs: &Observations) -> Vec<Violation> {
    let mut out = Vec::new();
    for pair in obs.db_epochs.windows(2) {
        let ((t0, e0), (t1, e1)) = (pair[0], pair[1]);
        if e1 < e0 {
            out.push(violation(
                "epochs",
                format!(
                    "the leadership row's epoch went from {e0} ({:.3}s) down to {e1} ({:.3}s)",
                    t0.as_secs_f64(),
                    t1.as_secs_f64()
                ),
                vec![],
            ));
        }
    }
    let mut last: HashMap<(usize, u32), (Duration, i64)> = HashMap::new();
    let mut leaders: BTreeMap<i64, BTreeSet<(usize, u32)>> = BTreeMap::new();
    for h in &obs.health {
        let Some(epoch) = h.epoch else { continue };
        let who = (h.slot, h.incarnation);
        if let Some(&(at, before)) = last.get(&who)
            && epoch < before
        {
            out.push(violation(
                "epochs",
                format!(
                    "r{}#{} reported epoch {before} at {:.3}s, then {epoch} at {:.3}s ({})",
                    h.slot,
                    h.incarnation,
                    at.as_secs_f64(),
                    h.at.as_secs_f64(),
                    h.role
                ),
                vec![],
            ));
        }
        last.insert(who, (h.at, epoch));
        if h.role == "leader" {
            leaders.entry(epoch).or_default().insert(who);
        }
    }
    for (epoch, who) in leaders.iter().filter(|(_, w)| w.len() > 1) {
        out.push(violation(
            "epochs",
            format!("several replicas claimed to lead under epoch {epoch}: {who:?}"),
            vec![],
        ));
    }
    out
}

/// Rule L1: while a leader that runs but cannot decide (frozen, or its
/// database link partitioned, stalled or half-dead) stays so for longer
/// than `bound`, another replica decides: some write (a new placement or
/// a logoff) sent after the fault took effect is acknowledged within
/// `bound` of it. The stopped leader can acknowledge none, so one proves a
/// new leader serving; a run of the load without any is a leader not
/// replaced (or replaced too late).
pub fn check_replaced(ops: &[Op], outages: &[LeaderOutage], bound: Duration) -> Vec<Violation> {
    let writes = writes(ops);
    let mut out = Vec::new();
    for outage in outages {
        if outage.healed - outage.injected < bound {
            continue;
        }
        let deadline = outage.injected + bound;
        let served = writes
            .iter()
            .any(|o| o.start >= outage.injected && o.end <= deadline);
        if served {
            continue;
        }
        let before = writes.iter().rev().find(|o| o.end < outage.injected);
        let after = writes.iter().find(|o| o.start >= outage.injected);
        out.push(violation(
            "L1",
            format!(
                "step {}: {} from {:.3}s for {:.3}s, and no write was acknowledged within {:?} \
                 of it (the first one after it: {})",
                outage.step,
                outage.what,
                outage.injected.as_secs_f64(),
                (outage.healed - outage.injected).as_secs_f64(),
                bound,
                after.map_or("none".into(), |o| format!(
                    "#{} at {:.3}s",
                    o.index,
                    o.end.as_secs_f64()
                ))
            ),
            before.iter().chain(after.iter()).map(|o| o.index).collect(),
        ));
    }
    out
}

/// The acknowledged writes a stopped leader cannot make: new placements
/// and logoffs.
fn writes(ops: &[Op]) -> Vec<&Op> {
    ops.iter()
        .filter(|o| {
            o.placed().is_some_and(|p| !p.reconnect)
                || (o.req.name() == "logoff" && matches!(o.outcome, Outcome::Ok(_)))
        })
        .collect()
}

/// For each leader outage, how long after it took effect the first write
/// sent after it was acknowledged (None: none was).
pub fn time_to_write(ops: &[Op], outages: &[LeaderOutage]) -> Vec<Option<Duration>> {
    let writes = writes(ops);
    outages
        .iter()
        .map(|outage| {
            writes
                .iter()
                .filter(|o| o.start >= outage.injected)
                .map(|o| o.end - outage.injected)
                .min()
        })
        .collect()
}

/// That the run tested something: a checker over a history of refusals
/// would find nothing wrong. Most connects are acknowledged between the
/// faults, users reconnect and are logged off, and leaders are replaced
/// (once `faults` dealt the whole deck of kinds, which kills the leader).
pub fn check_exercised(ops: &[Op], obs: &Observations, faults: usize) -> Vec<Violation> {
    let load = || ops.iter().filter(|o| o.client != PROBE_CLIENT);
    let connects = load().filter(|o| o.req.name() == "connect").count();
    let placed = load().filter(|o| o.placed().is_some()).count();
    let reconnects = load()
        .filter(|o| o.placed().is_some_and(|p| p.reconnect))
        .count();
    let logoffs = load()
        .filter(|o| o.req.name() == "logoff" && matches!(o.outcome, Outcome::Ok(_)))
        .count();
    let epochs: BTreeSet<i64> = obs.db_epochs.iter().map(|(_, e)| *e).collect();
    let mut out = Vec::new();
    let replaced = epochs.len() >= 2 || faults < super::faults::KINDS;
    if placed * 5 < connects || reconnects == 0 || logoffs == 0 || !replaced {
        out.push(violation(
            "exercised",
            format!(
                "the run tested too little: {placed} of {connects} connects acknowledged, \
                 {reconnects} reconnects, {logoffs} logoffs acknowledged, epochs seen {epochs:?}"
            ),
            vec![],
        ));
    }
    out
}

/// One fault step as the unavailability measure needs it.
pub struct StepSpan {
    pub start: Duration,
    pub kinds: Vec<&'static str>,
}

/// Per fault kind: how many steps had it, and the longest and the mean of
/// each step's longest window in which no load client's connect
/// succeeded on any replica (from a success's answer to the next one's),
/// the part of each window within the step (from its start to the next
/// step's). A step of two faults counts for both kinds.
pub fn unavailability(
    ops: &[Op],
    steps: &[StepSpan],
    end: Duration,
) -> BTreeMap<&'static str, (usize, Duration, Duration)> {
    let mut successes: Vec<Duration> = ops
        .iter()
        .filter(|o| o.client != PROBE_CLIENT && o.placed().is_some())
        .map(|o| o.end)
        .collect();
    successes.sort();
    let mut out: BTreeMap<&'static str, (usize, Duration, Duration)> = BTreeMap::new();
    for (i, step) in steps.iter().enumerate() {
        let until = steps.get(i + 1).map_or(end, |s| s.start);
        let mut worst = Duration::ZERO;
        // The last success before the step, then each one after.
        let first = successes.partition_point(|&t| t < step.start);
        let mut prev = if first == 0 {
            step.start
        } else {
            successes[first - 1]
        };
        for &t in successes[first..].iter().chain([&end]) {
            // The part of the window within the step.
            worst = worst.max(t.min(until).saturating_sub(prev.max(step.start)));
            if t >= until {
                break;
            }
            prev = t;
        }
        for kind in &step.kinds {
            let e = out.entry(kind).or_default();
            e.0 += 1;
            e.1 = e.1.max(worst);
            e.2 += worst;
        }
    }
    for e in out.values_mut() {
        e.2 /= e.0.max(1) as u32;
    }
    out
}
