//! The host's user sessions, reported in every heartbeat as the host's full
//! list (the broker adopts sessions it does not know, confirms Pending ones
//! as Active and ends the ones the host no longer has).
//!
//! Because the broker *ends* what the list lacks, a list is sent only when
//! the probe fully worked: a failing `--sessions-command`, or a host where
//! neither logind nor xrdp can be read, means no `sessions` field that
//! round, never an empty list.
//!
//! Two sources:
//! - `--sessions-command CMD` (through `sh -c`): one JSON object a line,
//!   `{"user": "alice@contoso.com", "state": "Active"}`; bad lines are logged
//!   and skipped.
//! - otherwise the host's own view, from two places:
//!   - systemd-logind: `loginctl list-sessions --no-legend` for the session
//!     ids (the first column in every systemd version), then one
//!     `loginctl show-session ID… -p …` for their properties. Only sessions
//!     of class `user` count (not greeters, lock screens or `user@`
//!     managers); `active`/`online` map to Active, `closing` (logged out,
//!     processes left) to Disconnected, `opening` to Pending.
//!   - xrdp (see [`crate::xrdp`]): every desktop xrdp's session manager
//!     started, Active while a client is connected to it and Disconnected
//!     once the client has gone. logind calls every xrdp session `active`,
//!     so for a user xrdp shows a desktop for, logind's sessions of the
//!     `xrdp-sesman` service are left out: xrdp's word is the truth about
//!     them. Where there is no logind (a container), xrdp's sessions are
//!     the list.
//!
//!   Without either (no logind, no xrdp session manager) no `sessions`
//!   field is sent.
//!
//! A user appears at most once in a list: with several sessions (a desktop
//! and an SSH login, say) the strongest state wins, Active over Pending over
//! Disconnected, and users compare without regard to ASCII case, as the
//! broker compares them.

use std::collections::{HashMap, HashSet};

use serde::Deserialize;
use tokio::process::Command;

use crate::probe::{self, PROBE_TIMEOUT, ProbeError};
use crate::xrdp::{self, XrdpSession};

/// The most a sessions probe may print: 1 MiB is some 10,000 sessions.
const OUTPUT_BYTES_MAX: usize = 1024 * 1024;

/// Where the agent learns the host's sessions.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionsSource {
    /// systemd-logind through `loginctl`; `user_domain` is appended to user
    /// names that have no `@` (`alice` → `alice@contoso.com`).
    Loginctl { user_domain: Option<String> },
    /// The operator's `--sessions-command`.
    Command(String),
}

pub use api::types::ReportedSession;
pub use placement::SessionState;

/// Which state wins when one user has several sessions.
fn strength(state: SessionState) -> u8 {
    match state {
        SessionState::Disconnected => 0,
        SessionState::Pending => 1,
        SessionState::Active => 2,
    }
}

/// A line of `--sessions-command` output that was skipped, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct BadLine {
    /// 1-based, as an editor counts.
    pub number: usize,
    pub reason: String,
}

/// Parses `--sessions-command` output: one JSON object a line, blank lines
/// ignored, unknown fields ignored (a newer script may say more).
pub fn parse_sessions_lines(text: &str) -> (Vec<ReportedSession>, Vec<BadLine>) {
    #[derive(Deserialize)]
    struct Line {
        user: String,
        state: SessionState,
    }
    let mut sessions = Vec::new();
    let mut bad = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        // An object, not any JSON serde could read as the struct (an array
        // `["erin", "Active"]` would pass otherwise).
        let parsed = match serde_json::from_str::<serde_json::Value>(line) {
            Ok(v @ serde_json::Value::Object(_)) => serde_json::from_value::<Line>(v),
            Ok(_) => {
                bad.push(BadLine {
                    number: i + 1,
                    reason: "not a JSON object".into(),
                });
                continue;
            }
            Err(e) => Err(e),
        };
        let reason = match parsed {
            Ok(l) if l.user.trim().is_empty() => "\"user\" is empty".to_string(),
            Ok(l) => {
                sessions.push(ReportedSession {
                    user: l.user.trim().to_string(),
                    state: l.state,
                });
                continue;
            }
            Err(e) => e.to_string(),
        };
        bad.push(BadLine {
            number: i + 1,
            reason,
        });
    }
    (sessions, bad)
}

/// The session ids of `loginctl list-sessions --no-legend`: the first word
/// of each line.
pub fn parse_loginctl_list(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// The properties of one logind session that the agent reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogindSession {
    pub id: String,
    pub name: String,
    pub state: String,
    pub class: String,
    pub remote: bool,
    /// The PAM service that opened it: `xrdp-sesman` for xrdp's desktops.
    pub service: String,
}

/// The properties asked of `loginctl show-session`.
pub const LOGINCTL_PROPERTIES: [&str; 6] = ["Id", "Name", "State", "Class", "Remote", "Service"];

/// The PAM service of xrdp's session manager, as logind records it.
const XRDP_SERVICE: &str = "xrdp-sesman";

/// Parses `loginctl show-session ID… -p Id -p Name …`: `Key=value` lines,
/// one block a session, blocks separated by blank lines.
pub fn parse_loginctl_show(text: &str) -> Vec<LogindSession> {
    let mut out = Vec::new();
    let mut cur: Option<LogindSession> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            out.extend(cur.take());
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let s = cur.get_or_insert_with(LogindSession::default);
        match key {
            "Id" => s.id = value.to_string(),
            "Name" => s.name = value.to_string(),
            "State" => s.state = value.to_string(),
            "Class" => s.class = value.to_string(),
            "Remote" => s.remote = value == "yes",
            "Service" => s.service = value.to_string(),
            _ => {}
        }
    }
    out.extend(cur);
    out
}

/// The logind state as a session state; `None` for states that are no
/// session of a user (or unknown to this agent).
fn logind_state(state: &str) -> Option<SessionState> {
    match state {
        "active" | "online" => Some(SessionState::Active),
        "closing" => Some(SessionState::Disconnected),
        "opening" => Some(SessionState::Pending),
        _ => None,
    }
}

/// A local user name as the broker knows the user: with the user domain
/// appended when it has no `@` of its own.
fn broker_user(name: &str, user_domain: Option<&str>) -> String {
    match user_domain {
        Some(domain) if !name.contains('@') => format!("{name}@{domain}"),
        _ => name.to_string(),
    }
}

/// Turns logind sessions into the list the broker gets: user sessions
/// only, names completed with the user domain.
pub fn from_logind<'a>(
    sessions: impl IntoIterator<Item = &'a LogindSession>,
    user_domain: Option<&str>,
) -> Vec<ReportedSession> {
    sessions
        .into_iter()
        .filter(|s| s.class == "user" && !s.name.is_empty())
        .filter_map(|s| {
            let state = logind_state(&s.state)?;
            Some(ReportedSession {
                user: broker_user(&s.name, user_domain),
                state,
            })
        })
        .collect()
}

/// The host's list from logind's sessions and xrdp's (either may be
/// missing: `None` when neither could be read). A logind session of xrdp's
/// service is left out when xrdp shows a desktop for its user, since
/// logind calls it `active` whether a client is connected or not; when xrdp
/// shows none for that user (its processes hidden from the agent, say),
/// logind's word is kept, so that a session is never ended for want of a
/// reading.
pub fn host_sessions(
    logind: Option<&[LogindSession]>,
    xrdp: Option<&[XrdpSession]>,
    user_domain: Option<&str>,
) -> Option<Vec<ReportedSession>> {
    if logind.is_none() && xrdp.is_none() {
        return None;
    }
    let xrdp = xrdp.unwrap_or_default();
    let xrdp_users: HashSet<&str> = xrdp.iter().map(|s| s.user.as_str()).collect();
    let kept = logind
        .unwrap_or_default()
        .iter()
        .filter(|s| !(s.service == XRDP_SERVICE && xrdp_users.contains(s.name.as_str())));
    let mut list = from_logind(kept, user_domain);
    list.extend(xrdp.iter().map(|s| ReportedSession {
        user: broker_user(&s.user, user_domain),
        state: if s.connected {
            SessionState::Active
        } else {
            SessionState::Disconnected
        },
    }));
    Some(dedup(list))
}

/// One entry per user (ASCII case-insensitive), the strongest state kept,
/// in the order users first appear.
pub fn dedup(sessions: Vec<ReportedSession>) -> Vec<ReportedSession> {
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut out: Vec<ReportedSession> = Vec::new();
    for s in sessions {
        match index.get(&s.user.to_ascii_lowercase()) {
            Some(&i) => {
                if strength(s.state) > strength(out[i].state) {
                    out[i].state = s.state;
                }
            }
            None => {
                index.insert(s.user.to_ascii_lowercase(), out.len());
                out.push(s);
            }
        }
    }
    out
}

/// Why no list could be made this round.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    #[error("{0}")]
    Probe(#[from] ProbeError),
    #[error("found neither logind nor xrdp")]
    NoSource,
}

/// Asks the configured source for the host's sessions.
#[derive(Debug)]
pub struct SessionsProbe {
    source: SessionsSource,
    /// The last failure logged, so that a source that stays broken (no
    /// logind in a container) is logged once, not every interval.
    last_error: Option<String>,
    /// The same for a round where one of logind and xrdp failed.
    last_partial: Option<String>,
    /// A reading of xrdp's desktops that outlived its time limit.
    xrdp_reading: Option<XrdpReading>,
    /// How xrdp's desktops are read: [`xrdp::read`] (another in tests),
    /// and how long a reading may take ([`PROBE_TIMEOUT`]).
    read_xrdp_desktops: fn() -> XrdpDesktops,
    xrdp_timeout: std::time::Duration,
}

/// What one reading of xrdp's desktops answers.
type XrdpDesktops = Result<Option<Vec<XrdpSession>>, xrdp::ReadError>;

/// A reading of xrdp's desktops on a blocking thread.
type XrdpReading = tokio::task::JoinHandle<XrdpDesktops>;

impl SessionsProbe {
    pub fn new(source: SessionsSource) -> SessionsProbe {
        SessionsProbe {
            source,
            last_error: None,
            last_partial: None,
            xrdp_reading: None,
            read_xrdp_desktops: xrdp::read,
            xrdp_timeout: PROBE_TIMEOUT,
        }
    }

    /// The host's full session list, or `None` when the source failed this
    /// round (then the heartbeat carries no `sessions` field).
    pub async fn sample(&mut self) -> Option<Vec<ReportedSession>> {
        let result = match &self.source {
            SessionsSource::Command(command) => sessions_command(command).await,
            SessionsSource::Loginctl { user_domain } => {
                let user_domain = user_domain.clone();
                self.host_sample(user_domain.as_deref()).await
            }
        };
        match result {
            Ok(list) => {
                if self.last_error.take().is_some() {
                    tracing::info!("{} works again: sessions are reported", self.name());
                }
                Some(dedup(list))
            }
            Err(e) => {
                let message = e.to_string();
                if self.last_error.as_deref() != Some(&message) {
                    tracing::warn!(
                        "{} {message}; sending no session list until it works",
                        self.name()
                    );
                    self.last_error = Some(message);
                } else {
                    tracing::debug!("{} {message}", self.name());
                }
                None
            }
        }
    }

    fn name(&self) -> String {
        match &self.source {
            SessionsSource::Command(command) => format!("sessions command `{command}`"),
            SessionsSource::Loginctl { .. } => "the host's sessions (logind, xrdp):".to_string(),
        }
    }

    /// xrdp's desktops ([`xrdp::read`]), within [`PROBE_TIMEOUT`]. Reading
    /// `/proc` does not block, but naming a display server's owner asks
    /// the system's user database, which a directory (sssd, winbind) may
    /// keep waiting: a reading past the limit is left to finish on its
    /// own, and no other is started until it has, so at most one thread is
    /// ever held.
    async fn read_xrdp(&mut self) -> Result<Option<Vec<XrdpSession>>, String> {
        if let Some(reading) = &self.xrdp_reading {
            if !reading.is_finished() {
                return Err("the last reading has not finished".into());
            }
            self.xrdp_reading = None;
        }
        let mut reading = tokio::task::spawn_blocking(self.read_xrdp_desktops);
        match tokio::time::timeout(self.xrdp_timeout, &mut reading).await {
            Ok(Ok(result)) => result.map_err(|e| e.to_string()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => {
                self.xrdp_reading = Some(reading);
                Err(format!("no answer within {:?}", self.xrdp_timeout))
            }
        }
    }

    /// logind's sessions and xrdp's, combined ([`host_sessions`]). One of
    /// the two failing is logged once (a container has no logind; most
    /// hosts have no xrdp, which is no failure); both failing is the
    /// round's error.
    async fn host_sample(
        &mut self,
        user_domain: Option<&str>,
    ) -> Result<Vec<ReportedSession>, SessionsError> {
        // A session that ends between the two loginctl calls makes the
        // second fail; one retry sees the new list.
        let logind = match loginctl().await {
            Ok(list) => Ok(list),
            Err(_) => loginctl().await,
        };
        let xrdp = self.read_xrdp().await;
        let partial = match (&logind, &xrdp) {
            (Err(e), Ok(Some(_))) => Some(format!("loginctl: {e}; reporting xrdp's sessions")),
            (Ok(_), Err(e)) => Some(format!("xrdp's sessions: {e}; reporting logind's")),
            _ => None,
        };
        match partial {
            Some(message) if self.last_partial.as_deref() != Some(&message) => {
                tracing::info!("{message}");
                self.last_partial = Some(message);
            }
            Some(_) => {}
            None => self.last_partial = None,
        }
        let xrdp_sessions = xrdp.ok().flatten();
        match host_sessions(
            logind.as_deref().ok(),
            xrdp_sessions.as_deref(),
            user_domain,
        ) {
            Some(list) => Ok(list),
            None => Err(logind.err().unwrap_or(SessionsError::NoSource)),
        }
    }
}

async fn sessions_command(command: &str) -> Result<Vec<ReportedSession>, SessionsError> {
    let out = probe::run(probe::shell(command), PROBE_TIMEOUT, OUTPUT_BYTES_MAX).await?;
    let (sessions, bad) = parse_sessions_lines(&out);
    for b in &bad {
        tracing::warn!(
            "sessions command `{command}`: line {} skipped: {}",
            b.number,
            b.reason
        );
    }
    Ok(sessions)
}

fn loginctl_command() -> Command {
    let mut cmd = Command::new("loginctl");
    cmd.arg("--no-pager");
    cmd
}

async fn loginctl() -> Result<Vec<LogindSession>, SessionsError> {
    let mut list = loginctl_command();
    list.args(["list-sessions", "--no-legend"]);
    let ids = parse_loginctl_list(&probe::run(list, PROBE_TIMEOUT, OUTPUT_BYTES_MAX).await?);
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut show = loginctl_command();
    show.arg("show-session").args(&ids);
    for p in LOGINCTL_PROPERTIES {
        show.args(["-p", p]);
    }
    Ok(parse_loginctl_show(
        &probe::run(show, PROBE_TIMEOUT, OUTPUT_BYTES_MAX).await?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use SessionState::*;

    fn s(user: &str, state: SessionState) -> ReportedSession {
        ReportedSession {
            user: user.into(),
            state,
        }
    }

    #[test]
    fn sessions_command_lines() {
        let text = r#"{"user": "alice@contoso.com", "state": "Active"}

{"user":"bob@contoso.com","state":"Disconnected","id":"rdp-tcp#3"}
   {"user": "carol@contoso.com", "state": "Pending"}
not json
{"user": "dave@contoso.com", "state": "active"}
{"user": "", "state": "Active"}
{"state": "Active"}
["erin", "Active"]
"#;
        let (sessions, bad) = parse_sessions_lines(text);
        assert_eq!(
            sessions,
            vec![
                s("alice@contoso.com", Active),
                s("bob@contoso.com", Disconnected),
                s("carol@contoso.com", Pending),
            ]
        );
        let numbers: Vec<usize> = bad.iter().map(|b| b.number).collect();
        assert_eq!(numbers, vec![5, 6, 7, 8, 9]);
        assert!(
            bad[1].reason.contains("unknown variant `active`"),
            "{:?}",
            bad[1]
        );
        assert_eq!(bad[2].reason, "\"user\" is empty");
        assert!(
            bad[3].reason.contains("missing field `user`"),
            "{:?}",
            bad[3]
        );
        assert_eq!(bad[4].reason, "not a JSON object");
    }

    #[test]
    fn empty_output_is_an_empty_list() {
        assert_eq!(parse_sessions_lines(""), (vec![], vec![]));
        assert_eq!(parse_sessions_lines("\n \n"), (vec![], vec![]));
    }

    /// `loginctl list-sessions --no-legend` of systemd 252 (Debian 12) and
    /// of systemd 256, which added the STATE and IDLE columns.
    #[test]
    fn loginctl_list_gives_the_ids() {
        let v252 = "     3 1000 alice seat0 tty2\n    c1  118 gdm   seat0 tty1\n    12 1001 bob\n";
        assert_eq!(parse_loginctl_list(v252), vec!["3", "c1", "12"]);
        let v256 = "3 1000 alice seat0 tty2 active no -\n12 1001 bob - pts/0 online no -\n";
        assert_eq!(parse_loginctl_list(v256), vec!["3", "12"]);
        assert!(parse_loginctl_list("").is_empty());
    }

    const SHOW: &str = "Id=3
Name=alice
State=active
Remote=no
Class=user

Id=c1
Name=gdm
State=online
Remote=no
Class=greeter

Id=12
Name=bob
State=closing
Remote=yes
Class=user

Id=14
Name=carol@contoso.com
State=online
Remote=yes
Class=user

Id=15
Name=dave
State=opening
Remote=yes
Class=user

Id=16
Name=alice
State=online
Remote=yes
Class=user

Id=17
Name=erin
State=lingering
Remote=no
Class=user

Id=18
Name=frank
State=active
Remote=no
Class=manager
";

    #[test]
    fn loginctl_show_blocks() {
        let sessions = parse_loginctl_show(SHOW);
        assert_eq!(sessions.len(), 8);
        assert_eq!(
            sessions[2],
            LogindSession {
                id: "12".into(),
                name: "bob".into(),
                state: "closing".into(),
                class: "user".into(),
                remote: true,
                service: String::new(),
            }
        );
    }

    #[test]
    fn logind_sessions_become_the_reported_list() {
        let list = dedup(from_logind(&parse_loginctl_show(SHOW), Some("contoso.com")));
        assert_eq!(
            list,
            vec![
                s("alice@contoso.com", Active),
                s("bob@contoso.com", Disconnected),
                s("carol@contoso.com", Active),
                s("dave@contoso.com", Pending),
            ]
        );
        // Without a domain the logind names are reported as they are.
        let list = dedup(from_logind(&parse_loginctl_show(SHOW), None));
        assert_eq!(list[0], s("alice", Active));
    }

    /// logind on an xrdp host: alice's desktop is connected, bob's client
    /// closed, carol logged in over SSH as well, and dave's desktop is not
    /// among xrdp's (the agent could not see its processes).
    #[test]
    fn xrdps_word_replaces_loginds_for_its_desktops() {
        let logind = parse_loginctl_show(
            "Id=3\nName=alice\nState=active\nClass=user\nService=xrdp-sesman\n\n\
             Id=4\nName=bob\nState=active\nClass=user\nService=xrdp-sesman\n\n\
             Id=5\nName=carol\nState=active\nClass=user\nService=sshd\n\n\
             Id=6\nName=carol\nState=active\nClass=user\nService=xrdp-sesman\n\n\
             Id=7\nName=dave\nState=active\nClass=user\nService=xrdp-sesman\n",
        );
        assert_eq!(logind[0].service, "xrdp-sesman");
        let desktop = |user: &str, connected| XrdpSession {
            user: user.into(),
            display: 10,
            connected,
        };
        let xrdp = [
            desktop("alice", true),
            desktop("bob", false),
            desktop("carol", false),
        ];
        let list = host_sessions(Some(&logind), Some(&xrdp), Some("contoso.com")).unwrap();
        assert_eq!(
            list,
            vec![
                // An SSH login is a session of carol's too: the strongest wins.
                s("carol@contoso.com", Active),
                s("dave@contoso.com", Active),
                s("alice@contoso.com", Active),
                s("bob@contoso.com", Disconnected),
            ]
        );
    }

    #[test]
    fn without_logind_xrdps_sessions_are_the_list() {
        let xrdp = [XrdpSession {
            user: "bob@contoso.com".into(),
            display: 11,
            connected: false,
        }];
        assert_eq!(
            host_sessions(None, Some(&xrdp), Some("fabrikam.com")),
            Some(vec![s("bob@contoso.com", Disconnected)])
        );
        assert_eq!(host_sessions(None, Some(&[]), None), Some(vec![]));
        assert_eq!(host_sessions(None, None, None), None);
        // logind alone, as before xrdp was read.
        assert_eq!(
            host_sessions(Some(&parse_loginctl_show(SHOW)), None, None).map(|l| l.len()),
            Some(4)
        );
    }

    #[test]
    fn one_entry_per_user_with_the_strongest_state() {
        let list = dedup(vec![
            s("Alice@Contoso.com", Disconnected),
            s("bob@contoso.com", Pending),
            s("alice@contoso.com", Active),
            s("bob@contoso.com", Disconnected),
        ]);
        assert_eq!(
            list,
            vec![
                s("Alice@Contoso.com", Active),
                s("bob@contoso.com", Pending)
            ]
        );
    }

    /// A reading of xrdp's desktops that never answers (a user database
    /// that waits on its directory) holds one thread, and no more.
    #[tokio::test]
    async fn a_reading_that_hangs_holds_one_thread_and_no_more() {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        static RELEASED: AtomicBool = AtomicBool::new(false);
        fn stuck() -> XrdpDesktops {
            STARTED.fetch_add(1, Ordering::SeqCst);
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while !RELEASED.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Ok(Some(vec![]))
        }
        let mut probe = SessionsProbe::new(SessionsSource::Loginctl { user_domain: None });
        probe.read_xrdp_desktops = stuck;
        // The reading never answers until released: any limit is passed.
        probe.xrdp_timeout = std::time::Duration::from_millis(10);

        // The first reading outlives its limit.
        let first = probe.read_xrdp().await;
        assert!(first.unwrap_err().contains("no answer within"));
        // While it hangs, no other is started.
        let second = probe.read_xrdp().await;
        assert_eq!(second.unwrap_err(), "the last reading has not finished");
        assert_eq!(STARTED.load(Ordering::SeqCst), 1);

        // Once it has finished, the next round reads afresh.
        RELEASED.store(true, Ordering::SeqCst);
        let reading = probe.xrdp_reading.as_ref().expect("the hanging reading");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !reading.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(probe.read_xrdp().await.unwrap(), Some(vec![]));
        assert_eq!(STARTED.load(Ordering::SeqCst), 2);
        assert!(probe.xrdp_reading.is_none());
    }

    #[tokio::test]
    async fn a_failing_command_sends_no_list_and_a_working_one_does() {
        let mut probe = SessionsProbe::new(SessionsSource::Command("echo oops >&2; exit 1".into()));
        assert_eq!(probe.sample().await, None);

        let mut probe = SessionsProbe::new(SessionsSource::Command(
            r#"printf '%s\n' '{"user":"a@c.com","state":"Active"}' junk"#.into(),
        ));
        assert_eq!(probe.sample().await, Some(vec![s("a@c.com", Active)]));

        let mut probe = SessionsProbe::new(SessionsSource::Command("true".into()));
        assert_eq!(probe.sample().await, Some(vec![]));
    }
}
