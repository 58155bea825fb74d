//! What one scrape of a windows_exporter says, in the broker's terms: the
//! session list (rule W2), the user names (W3) and the load (W4). Pure: the
//! samples and the previous scrape's counters come in, a [`Report`] comes
//! out, so every rule here is tested without a network.
//!
//! The exporter's series used, as windows_exporter 0.31 writes them:
//! - `windows_terminal_services_session_info{host,id,session_name,state,user}`:
//!   one series per session and state, 1 for the session's state, 0 for the
//!   nine others;
//! - `windows_exporter_collector_success{collector}` and
//!   `windows_exporter_collector_timeout{collector}`: whether a collector's
//!   part of this answer is whole (a failed collector still answers 200);
//! - `windows_exporter_build_info{version,…}`;
//! - `windows_cpu_time_total{core,mode}` (seconds, counters),
//!   `windows_memory_physical_total_bytes`, `windows_memory_available_bytes`,
//!   and the `windows_logical_disk_*{volume}` series named below.
//!
//! The per-session CPU series of `terminal_services` are not used: their
//! labels do not say which session they measure.

use std::collections::{HashMap, HashSet};

use placement::{HostMetrics, MAX_REPORTED_SESSIONS, SessionState, validate_user};

use super::config::Names;
use crate::exposition::{Keep, Sample};
use crate::sessions::ReportedSession;

pub const SESSION_INFO: &str = "windows_terminal_services_session_info";
pub const COLLECTOR_SUCCESS: &str = "windows_exporter_collector_success";
pub const COLLECTOR_TIMEOUT: &str = "windows_exporter_collector_timeout";
pub const BUILD_INFO: &str = "windows_exporter_build_info";
pub const CPU_TIME: &str = "windows_cpu_time_total";
pub const MEMORY_TOTAL: &str = "windows_memory_physical_total_bytes";
pub const MEMORY_AVAILABLE: &str = "windows_memory_available_bytes";
pub const DISK_QUEUED: &str = "windows_logical_disk_requests_queued";
pub const DISK_READ_SECONDS: &str = "windows_logical_disk_read_seconds_total";
pub const DISK_READS: &str = "windows_logical_disk_reads_total";
pub const DISK_WRITE_SECONDS: &str = "windows_logical_disk_write_seconds_total";
pub const DISK_WRITES: &str = "windows_logical_disk_writes_total";

/// The first windows_exporter version whose session list can be trusted:
/// 0.30 left disconnected sessions out, and earlier ones had no `id`.
pub const NEEDED_VERSION: (u64, u64) = (0, 31);

/// What the agent keeps of the series of this name: the series and
/// labels read below, and of the session series only each session's
/// state in force (1). The parser drops the rest as it reads, so an
/// exporter's other series and labels cost the agent no memory.
pub fn wanted(name: &str) -> Keep {
    match name {
        SESSION_INFO => Keep::LabelsWhenOne(&["id", "state", "user"]),
        COLLECTOR_SUCCESS | COLLECTOR_TIMEOUT => Keep::Labels(&["collector"]),
        BUILD_INFO => Keep::Labels(&["version"]),
        CPU_TIME => Keep::Labels(&["mode"]),
        MEMORY_TOTAL | MEMORY_AVAILABLE | DISK_QUEUED | DISK_READ_SECONDS | DISK_READS
        | DISK_WRITE_SECONDS | DISK_WRITES => Keep::Labels(&["volume"]),
        _ => Keep::Nothing,
    }
}

/// The longest Windows session id: a session id is a 32-bit number.
const SESSION_ID_DIGITS_MAX: usize = 10;

/// A Windows session id as Windows writes it, a decimal number of 32
/// bits, or None. It reaches commands as `DESKBROKER_WINDOWS_SESSION_ID`
/// (rule W5), so nothing else is taken for one.
pub fn session_id(text: &str) -> Option<&str> {
    let digits = !text.is_empty()
        && text.len() <= SESSION_ID_DIGITS_MAX
        && text.bytes().all(|b| b.is_ascii_digit());
    (digits && text.parse::<u32>().is_ok()).then_some(text)
}

/// Counters of the previous scrape of the same host, for the figures that
/// are deltas (W4: the first scrape reports no CPU).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counters {
    /// Busy and total CPU seconds over every core.
    cpu: Option<(f64, f64)>,
    /// Read seconds, reads, write seconds, writes, over every volume.
    disk: Option<[f64; 4]>,
}

/// A session the last list named, with its Windows session id (rule W5's
/// orders name it): None when the exporter gave one that is not a decimal
/// number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedSession {
    pub user: String,
    pub windows_session_id: Option<String>,
}

/// What one scrape says.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Report {
    /// The host's full list, only when the scrape was whole (W2).
    pub sessions: Option<Vec<ReportedSession>>,
    /// The Windows session id of each listed user.
    pub listed: Vec<ListedSession>,
    pub metrics: HostMetrics,
    /// Why there is no list or some metric is missing, one sentence each,
    /// in the agent's own words: the broker shows them to every reader of
    /// the pool as the host's `scrapeError`, so they carry the names of
    /// collectors and series the agent reads and numbers, never the
    /// exporter's text.
    pub problems: Vec<String>,
}

/// Whether `collector`'s part of the answer is whole, or why not.
fn collector_whole(samples: &[Sample], collector: &str) -> Result<(), String> {
    let gauge = |name: &str| {
        samples
            .iter()
            .find(|s| s.name == name && s.label("collector") == Some(collector))
            .map(|s| s.value)
    };
    match gauge(COLLECTOR_SUCCESS) {
        None => Err(format!(
            "the exporter does not run its {collector} collector: add it to its enabled \
             collectors"
        )),
        Some(v) if v != 1.0 => Err(format!(
            "the exporter's {collector} collector failed in this scrape"
        )),
        Some(_) if gauge(COLLECTOR_TIMEOUT) == Some(1.0) => Err(format!(
            "the exporter's {collector} collector timed out in this scrape"
        )),
        Some(_) => Ok(()),
    }
}

/// `0.31.2`, `v0.31.0-rc.1` → (0, 31).
fn major_minor(version: &str) -> Option<(u64, u64)> {
    let v = version.trim().trim_start_matches('v');
    let mut parts = v.split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Whether this exporter's session list can be used, or why not (W2).
/// The version is named by the numbers read from it, never as written.
fn version_ok(samples: &[Sample]) -> Result<(), String> {
    let (major, minor) = NEEDED_VERSION;
    let need = format!("session lists need windows_exporter {major}.{minor} or later");
    let Some(info) = samples.iter().find(|s| s.name == BUILD_INFO) else {
        return Err(format!("the exporter reports no {BUILD_INFO}: {need}"));
    };
    match major_minor(info.label("version").unwrap_or("")) {
        Some(v) if v >= NEEDED_VERSION => Ok(()),
        // Below 0.31, so two small numbers.
        Some((old_major, old_minor)) => Err(format!(
            "windows_exporter {old_major}.{old_minor} is too old: {need} (older ones leave \
             disconnected sessions out or give no session id); upgrade it"
        )),
        None => Err(format!(
            "the exporter's version is not a version number: {need}"
        )),
    }
}

/// Rule W3: `CONTOSO\alice` → `alice@contoso.com` when CONTOSO is mapped;
/// `alice` → `alice@DEFAULT` when a default domain is set; anything else
/// as written.
pub fn user_principal_name(reported: &str, names: &Names) -> String {
    if let Some((domain, sam)) = reported.split_once('\\') {
        if !sam.is_empty()
            && !sam.contains(['\\', '@'])
            && let Some(suffix) = names.domains.get(&domain.to_ascii_uppercase())
        {
            return format!("{sam}@{suffix}");
        }
        return reported.to_string();
    }
    match &names.default_domain {
        Some(d) if !reported.contains('@') => format!("{reported}@{d}"),
        _ => reported.to_string(),
    }
}

/// Rule W2's state mapping: `Some(state)` for a user session, with
/// Pending for a logon in progress; `None` for anything that is not one.
fn state_of(state: &str) -> Option<SessionState> {
    match state {
        "active" => Some(SessionState::Active),
        "disconnected" => Some(SessionState::Disconnected),
        "connected" | "connect_query" | "init" => Some(SessionState::Pending),
        _ => None,
    }
}

/// Which state wins when a user has several sessions.
fn strength(state: SessionState) -> u8 {
    match state {
        SessionState::Disconnected => 0,
        SessionState::Pending => 1,
        SessionState::Active => 2,
    }
}

/// The session list of a whole scrape, or why there is none.
///
/// A logon in progress (`connected`, `connect_query`, `init`) is listed as
/// Pending only for a user the previous list named: the broker then keeps
/// the session it has (a host never turns a session back into Pending),
/// and a user the broker did not place there is not adopted from it. A
/// user the previous list did not name is left out, which leaves the
/// broker's Pending session there as it is (S4).
fn session_list(
    samples: &[Sample],
    names: &Names,
    previously_listed: &HashSet<String>,
    problems: &mut Vec<String>,
) -> Option<(Vec<ReportedSession>, Vec<ListedSession>)> {
    if let Err(e) = collector_whole(samples, "terminal_services").and_then(|()| version_ok(samples))
    {
        problems.push(format!("no session list: {e}"));
        return None;
    }
    // key (lower case) → (user, state, Windows session id)
    let mut by_user: HashMap<String, (String, SessionState, Option<String>)> = HashMap::new();
    let mut invalid = 0usize;
    let mut bad_ids = 0usize;
    for s in samples.iter().filter(|s| s.name == SESSION_INFO) {
        let Some(id) = s.label("id") else {
            problems.push(format!(
                "no session list: the exporter's {SESSION_INFO} has no id label: session lists \
                 need windows_exporter {}.{} or later",
                NEEDED_VERSION.0, NEEDED_VERSION.1
            ));
            return None;
        };
        if s.value != 1.0 {
            continue;
        }
        let reported = s.label("user").unwrap_or("");
        if reported.is_empty() {
            // The console or a listener: no user session.
            continue;
        }
        let Some(state) = s.label("state").and_then(state_of) else {
            continue;
        };
        let user = user_principal_name(reported, names);
        if validate_user("user", &user).is_err() {
            invalid += 1;
            continue;
        }
        let id = session_id(id).map(str::to_string);
        bad_ids += usize::from(id.is_none());
        let key = user.to_ascii_lowercase();
        match by_user.get_mut(&key) {
            Some(have) if strength(state) > strength(have.1) => {
                *have = (user, state, id);
            }
            Some(_) => {}
            None => {
                by_user.insert(key, (user, state, id));
            }
        }
    }
    if bad_ids > 0 {
        problems.push(format!(
            "{bad_ids} session(s) listed without a Windows session id: the exporter's id is \
             not a decimal number, as Windows session ids are, so no command about them is \
             given one"
        ));
    }
    if invalid > 0 {
        problems.push(format!(
            "{invalid} session(s) left out: their user names are not names the broker \
             accepts (blanks or control characters, or longer than 256)"
        ));
    }
    by_user.retain(|key, (_, state, _)| {
        *state != SessionState::Pending || previously_listed.contains(key)
    });
    if by_user.len() > MAX_REPORTED_SESSIONS {
        problems.push(format!(
            "no session list: {} sessions, more than the {MAX_REPORTED_SESSIONS} a heartbeat \
             may list",
            by_user.len()
        ));
        return None;
    }
    let mut entries: Vec<_> = by_user.into_values().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let sessions = entries
        .iter()
        .map(|(user, state, _)| ReportedSession {
            user: user.clone(),
            state: *state,
        })
        .collect();
    let listed = entries
        .into_iter()
        .map(|(user, _, id)| ListedSession {
            user,
            windows_session_id: id,
        })
        .collect();
    Some((sessions, listed))
}

/// The sum of the series `name`, when there is at least one and all are
/// finite and non-negative; volumes named `_Total` are left out (they
/// would count every disk twice).
fn sum(samples: &[Sample], name: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut any = false;
    for s in samples.iter().filter(|s| s.name == name) {
        if s.label("volume") == Some("_Total") {
            continue;
        }
        if !s.value.is_finite() || s.value < 0.0 {
            return None;
        }
        total += s.value;
        any = true;
    }
    any.then_some(total)
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Rule W4: CPU, memory and disk into the Linux agent's heartbeat metrics.
fn load(samples: &[Sample], prev: &mut Counters, problems: &mut Vec<String>) -> HostMetrics {
    let mut m = HostMetrics::default();

    match collector_whole(samples, "cpu") {
        Err(e) => {
            prev.cpu = None;
            problems.push(format!("no CPU figure: {e}"));
        }
        Ok(()) => {
            let mut busy = 0.0;
            let mut total = 0.0;
            let mut ok = false;
            for s in samples.iter().filter(|s| s.name == CPU_TIME) {
                if !s.value.is_finite() || s.value < 0.0 {
                    ok = false;
                    break;
                }
                ok = true;
                total += s.value;
                if s.label("mode") != Some("idle") {
                    busy += s.value;
                }
            }
            let now = ok.then_some((busy, total));
            if let (Some((b0, t0)), Some((b1, t1))) = (prev.cpu, now) {
                let (db, dt) = (b1 - b0, t1 - t0);
                // A counter that went back (a restart) gives nothing.
                if dt > 0.0 && db >= 0.0 && db <= dt {
                    m.cpu_percent = Some(round2(100.0 * db / dt));
                }
            }
            prev.cpu = now;
        }
    }

    match collector_whole(samples, "memory") {
        Err(e) => problems.push(format!("no memory figure: {e}")),
        Ok(()) => {
            let total = sum(samples, MEMORY_TOTAL);
            let available = sum(samples, MEMORY_AVAILABLE);
            if let (Some(t), Some(a)) = (total, available)
                && t > 0.0
            {
                m.memory_percent = Some(round2((100.0 * (t - a) / t).clamp(0.0, 100.0)));
            }
        }
    }

    match collector_whole(samples, "logical_disk") {
        // The disk factors are optional (H2): say nothing when the
        // collector is simply not enabled.
        Err(e) if e.contains("does not run") => prev.disk = None,
        Err(e) => {
            prev.disk = None;
            problems.push(format!("no disk figures: {e}"));
        }
        Ok(()) => {
            m.disk_queue_length = sum(samples, DISK_QUEUED).map(round2);
            let now = match (
                sum(samples, DISK_READ_SECONDS),
                sum(samples, DISK_READS),
                sum(samples, DISK_WRITE_SECONDS),
                sum(samples, DISK_WRITES),
            ) {
                (Some(a), Some(b), Some(c), Some(d)) => Some([a, b, c, d]),
                _ => None,
            };
            if let (Some(p), Some(n)) = (prev.disk, now) {
                let d: Vec<f64> = (0..4).map(|i| n[i] - p[i]).collect();
                if d.iter().all(|x| *x >= 0.0) {
                    let latency = |seconds: f64, ops: f64| {
                        if ops > 0.0 {
                            round2(1000.0 * seconds / ops)
                        } else {
                            0.0
                        }
                    };
                    m.disk_read_latency_ms = Some(latency(d[0], d[1]));
                    m.disk_write_latency_ms = Some(latency(d[2], d[3]));
                }
            }
            prev.disk = now;
        }
    }
    m
}

/// Everything one scrape says. `previously_listed` holds the lower-case
/// users of the last list sent for this host.
pub fn interpret(
    samples: &[Sample],
    prev: &mut Counters,
    names: &Names,
    previously_listed: &HashSet<String>,
) -> Report {
    let mut problems = Vec::new();
    let (sessions, listed) = match session_list(samples, names, previously_listed, &mut problems) {
        Some((s, l)) => (Some(s), l),
        None => (None, Vec::new()),
    };
    let metrics = load(samples, prev, &mut problems);
    Report {
        sessions,
        listed,
        metrics,
        problems,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exposition::{LIMITS, parse};

    fn names() -> Names {
        Names {
            domains: [("CONTOSO".to_string(), "contoso.com".to_string())].into(),
            default_domain: Some("contoso.com".into()),
        }
    }

    const STATES: [&str; 10] = [
        "active",
        "connect_query",
        "connected",
        "disconnected",
        "down",
        "idle",
        "init",
        "listen",
        "reset",
        "shadow",
    ];

    /// The ten series of one session, as the exporter writes them.
    fn session(id: u32, name: &str, user: &str, state: &str) -> String {
        let user = crate::exposition::escape_label_value(user);
        STATES
            .iter()
            .map(|s| {
                format!(
                    "{SESSION_INFO}{{host=\"\",id=\"{id}\",session_name=\"{name}\",state=\"{s}\",\
                     user=\"{user}\"}} {}\n",
                    u8::from(*s == state)
                )
            })
            .collect()
    }

    fn status(collector: &str, success: u8, timeout: u8) -> String {
        format!(
            "{COLLECTOR_SUCCESS}{{collector=\"{collector}\"}} {success}\n\
             {COLLECTOR_TIMEOUT}{{collector=\"{collector}\"}} {timeout}\n"
        )
    }

    fn build(version: &str) -> String {
        format!(
            "{BUILD_INFO}{{branch=\"HEAD\",goarch=\"amd64\",goos=\"windows\",goversion=\"go1.24\",\
             revision=\"x\",tags=\"unknown\",version=\"{version}\"}} 1\n"
        )
    }

    fn cpu(busy: f64, idle: f64) -> String {
        format!(
            "{CPU_TIME}{{core=\"0,0\",mode=\"idle\"}} {idle}\n\
             {CPU_TIME}{{core=\"0,0\",mode=\"user\"}} {busy}\n\
             {CPU_TIME}{{core=\"0,0\",mode=\"privileged\"}} 0\n"
        )
    }

    fn read(text: &str) -> Vec<Sample> {
        parse(text, &LIMITS, wanted).unwrap()
    }

    fn whole(body: &str) -> String {
        format!(
            "{}{}{}{}{}",
            build("0.31.1"),
            status("terminal_services", 1, 0),
            status("cpu", 1, 0),
            status("memory", 1, 0),
            body
        )
    }

    fn list(r: &Report) -> Vec<(String, SessionState)> {
        r.sessions
            .as_ref()
            .expect("a list")
            .iter()
            .map(|s| (s.user.clone(), s.state))
            .collect()
    }

    #[test]
    fn states_map_and_names_become_principal_names() {
        let text = whole(&format!(
            "{}{}{}{}{}",
            session(0, "Console", "", "connected"),
            session(2, "RDP-Tcp 0", "CONTOSO\\alice", "active"),
            session(3, "", "contoso\\bob", "disconnected"),
            session(4, "RDP-Tcp 1", "FABRIKAM\\carol", "active"),
            session(65536, "RDP-Tcp", "", "listen"),
        ));
        let r = interpret(
            &read(&text),
            &mut Counters::default(),
            &names(),
            &HashSet::new(),
        );
        assert_eq!(
            list(&r),
            vec![
                ("FABRIKAM\\carol".into(), SessionState::Active),
                ("alice@contoso.com".into(), SessionState::Active),
                ("bob@contoso.com".into(), SessionState::Disconnected),
            ]
        );
        assert_eq!(
            r.listed[1],
            ListedSession {
                user: "alice@contoso.com".into(),
                windows_session_id: Some("2".into())
            }
        );
        assert_eq!(r.problems, Vec::<String>::new());
    }

    #[test]
    fn names_without_a_domain_take_the_default_or_stay() {
        let n = names();
        assert_eq!(user_principal_name("dave", &n), "dave@contoso.com");
        assert_eq!(
            user_principal_name("dave@fabrikam.com", &n),
            "dave@fabrikam.com"
        );
        assert_eq!(user_principal_name("Contoso\\Eve", &n), "Eve@contoso.com");
        assert_eq!(user_principal_name("OTHER\\eve", &n), "OTHER\\eve");
        let none = Names::default();
        assert_eq!(user_principal_name("dave", &none), "dave");
    }

    #[test]
    fn a_logon_in_progress_never_adopts_and_never_ends() {
        let text = whole(&session(5, "RDP-Tcp 2", "CONTOSO\\alice", "connected"));
        let mut prev = Counters::default();
        let r = interpret(&read(&text), &mut prev, &names(), &HashSet::new());
        assert_eq!(list(&r), vec![]);
        let before: HashSet<String> = ["alice@contoso.com".to_string()].into();
        let r = interpret(&read(&text), &mut prev, &names(), &before);
        assert_eq!(
            list(&r),
            vec![("alice@contoso.com".into(), SessionState::Pending)]
        );
    }

    #[test]
    fn only_a_whole_scrape_of_a_new_enough_exporter_gives_a_list() {
        let alice = session(2, "RDP-Tcp 0", "CONTOSO\\alice", "active");
        let cases: Vec<(String, &str)> = vec![
            (
                format!(
                    "{}{}{alice}",
                    build("0.31.0"),
                    status("terminal_services", 0, 0)
                ),
                "no session list: the exporter's terminal_services collector failed in this scrape",
            ),
            (
                format!(
                    "{}{}{alice}",
                    build("0.31.0"),
                    status("terminal_services", 1, 1)
                ),
                "no session list: the exporter's terminal_services collector timed out in this scrape",
            ),
            (
                format!("{}{alice}", build("0.31.0")),
                "no session list: the exporter does not run its terminal_services collector",
            ),
            (
                format!(
                    "{}{}{alice}",
                    build("0.30.5"),
                    status("terminal_services", 1, 0)
                ),
                "no session list: windows_exporter 0.30 is too old: session lists need windows_exporter 0.31 or later",
            ),
            (
                format!("{}{alice}", status("terminal_services", 1, 0)),
                "no session list: the exporter reports no windows_exporter_build_info",
            ),
            (
                format!(
                    "{}{}{SESSION_INFO}{{session_name=\"RDP-Tcp 0\",state=\"active\",user=\"a\"}} 1\n",
                    build("v0.31.0-rc.1"),
                    status("terminal_services", 1, 0)
                ),
                "no session list: the exporter's windows_terminal_services_session_info has no id label",
            ),
        ];
        for (text, want) in cases {
            let r = interpret(
                &read(&text),
                &mut Counters::default(),
                &names(),
                &HashSet::new(),
            );
            assert_eq!(r.sessions, None, "{want}");
            assert!(
                r.problems.iter().any(|p| p.starts_with(want)),
                "{:?}\n  wanted: {want}",
                r.problems
            );
        }
    }

    #[test]
    fn cpu_is_the_busy_share_between_two_scrapes() {
        let mut prev = Counters::default();
        let first = interpret(
            &read(&whole(&cpu(100.0, 300.0))),
            &mut prev,
            &names(),
            &HashSet::new(),
        );
        assert_eq!(first.metrics.cpu_percent, None);
        // 29 busy seconds out of 100: 29 %.
        let second = interpret(
            &read(&whole(&cpu(129.0, 371.0))),
            &mut prev,
            &names(),
            &HashSet::new(),
        );
        assert_eq!(second.metrics.cpu_percent, Some(29.0));
        // The counters went back (the host restarted): no figure, and the
        // next scrape measures from the new counters.
        let reset = interpret(
            &read(&whole(&cpu(1.0, 1.0))),
            &mut prev,
            &names(),
            &HashSet::new(),
        );
        assert_eq!(reset.metrics.cpu_percent, None);
        let after = interpret(
            &read(&whole(&cpu(4.0, 4.0))),
            &mut prev,
            &names(),
            &HashSet::new(),
        );
        assert_eq!(after.metrics.cpu_percent, Some(50.0));
    }

    #[test]
    fn memory_and_disk() {
        let disk = |rs: f64, r: f64, ws: f64, w: f64| {
            format!(
                "{}{DISK_QUEUED}{{volume=\"C:\"}} 2\n{DISK_QUEUED}{{volume=\"_Total\"}} 2\n\
                 {DISK_READ_SECONDS}{{volume=\"C:\"}} {rs}\n{DISK_READS}{{volume=\"C:\"}} {r}\n\
                 {DISK_WRITE_SECONDS}{{volume=\"C:\"}} {ws}\n{DISK_WRITES}{{volume=\"C:\"}} {w}\n",
                status("logical_disk", 1, 0)
            )
        };
        let mem = format!("{MEMORY_TOTAL} 8e+09\n{MEMORY_AVAILABLE} 2e+09\n");
        let mut prev = Counters::default();
        let r = interpret(
            &read(&whole(&format!("{mem}{}", disk(1.0, 100.0, 2.0, 100.0)))),
            &mut prev,
            &names(),
            &HashSet::new(),
        );
        assert_eq!(r.metrics.memory_percent, Some(75.0));
        assert_eq!(r.metrics.disk_queue_length, Some(2.0));
        assert_eq!(r.metrics.disk_read_latency_ms, None);
        // 0.5 s over 100 reads: 5 ms; no writes: 0.
        let r = interpret(
            &read(&whole(&format!("{mem}{}", disk(1.5, 200.0, 2.0, 100.0)))),
            &mut prev,
            &names(),
            &HashSet::new(),
        );
        assert_eq!(r.metrics.disk_read_latency_ms, Some(5.0));
        assert_eq!(r.metrics.disk_write_latency_ms, Some(0.0));
    }

    #[test]
    fn a_failed_collector_gives_no_figure_and_says_so() {
        let text = format!(
            "{}{}{}{}",
            build("0.31.1"),
            status("terminal_services", 1, 0),
            status("cpu", 0, 0),
            cpu(1.0, 1.0)
        );
        let r = interpret(
            &read(&text),
            &mut Counters::default(),
            &names(),
            &HashSet::new(),
        );
        assert_eq!(r.metrics.cpu_percent, None);
        assert!(
            r.problems.contains(
                &"no CPU figure: the exporter's cpu collector failed in this scrape".into()
            ),
            "{:?}",
            r.problems
        );
        assert!(r.sessions.is_some());
    }
}
