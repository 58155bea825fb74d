//! Carrying out the broker's logoff orders (rule W5): when the broker ends
//! a session its user may be logged on to (an operator's logoff, a scaling
//! plan's, a lifetime of S9), heartbeat answers carry a [`LogoffOrder`] for
//! this host until its list no longer shows the user. The agent ends the
//! user's logon here:
//!
//! - with `--logoff-command CMD` (`logoff_command` in the file), it runs
//!   `sh -c CMD` with the order only in its environment —
//!   `DESKBROKER_HOST`, `DESKBROKER_HOST_ADDRESS`, `DESKBROKER_USER`,
//!   `DESKBROKER_SESSION_ID` (the broker's session id) and, from the
//!   watching agent, `DESKBROKER_WINDOWS_SESSION_ID` — never interpolated
//!   into the command line, so no user name is ever parsed by the shell.
//!   That environment is clean: besides these, the command sees only the
//!   agent's [`INHERITED_ENV`] (`PATH`, `HOME`, …), never its registration
//!   token or any other variable it was started with;
//! - otherwise, when sessions come from logind, it ends each of the user's
//!   logind sessions with `loginctl terminate-session ID…`;
//! - otherwise (a `--sessions-command` and no logoff command) it cannot,
//!   and logs each order once.
//!
//! Answers repeat an order (one may be lost), so each order, named by its
//! session id, is carried out once: a success is remembered, a failure is
//! tried again on an answer at least [`RETRY_AFTER`] later. Runs take at
//! most [`ORDER_COMMAND_TIMEOUT`] each (then the command's process group
//! is killed), at most [`MAX_CONCURRENT_ORDERS`] at once, in tasks of their
//! own, so no order delays a heartbeat; at most [`MAX_REMEMBERED_ORDERS`]
//! are remembered, and each is forgotten [`REMEMBER_FOR`] after it arrived
//! (longer than the broker repeats one).
//!
//! [`run_command`] is the one way both agents run an order's command: the
//! watching agent calls it for its `logoff_command` and `message_command`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use api::types::LogoffOrder;
use tokio::process::Command;
use tokio::sync::Semaphore;

use crate::probe::{self, PROBE_TIMEOUT, ProbeError};
use crate::sessions::{
    LOGINCTL_PROPERTIES, LogindSession, parse_loginctl_list, parse_loginctl_show,
};

/// How long one run of the logoff command may take before it is killed:
/// a logoff that saves a user's profile takes a while, one that takes a
/// minute has failed.
pub const ORDER_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// Orders carried out at once at most; the others wait for their turn.
pub const MAX_CONCURRENT_ORDERS: usize = 4;

/// Orders remembered at most (the broker keeps at most 1,024 a host).
pub const MAX_REMEMBERED_ORDERS: usize = 4_096;

/// How long an order is remembered: longer than the broker repeats one
/// (10 minutes), so a repeat is never carried out twice.
pub const REMEMBER_FOR: Duration = Duration::from_secs(20 * 60);

/// A failed order is tried again on an answer at least this much later.
pub const RETRY_AFTER: Duration = Duration::from_secs(60);

/// What an order's command may print (read and dropped; more is an error).
const OUTPUT_BYTES_MAX: usize = 16 * 1024;

/// Variables an order's command gets: names are fixed, values are the
/// order's and the host's.
pub type Env = Vec<(&'static str, String)>;

/// The only variables of the agent's environment that an order's or a
/// message's command inherits, as the broker's power commands inherit only
/// theirs: what a shell and the tools it starts need, never the
/// registration token (`DESKBROKER_REGISTRATION_TOKEN`) nor anything else
/// the agent was started with.
pub const INHERITED_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR",
];

/// `sh -c COMMAND` with a clean environment: the agent's
/// [`INHERITED_ENV`], then `env` (which wins over them), and nothing else.
pub fn command(command: &str, env: &[(&'static str, String)]) -> Command {
    let mut cmd = probe::shell(command);
    cmd.env_clear();
    for name in INHERITED_ENV {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    for (name, value) in env {
        cmd.env(name, value);
    }
    cmd
}

/// Runs `sh -c COMMAND` with `env` in a clean environment ([`command`]),
/// with no input, under `timeout` (its whole process group is killed past
/// it) and with bounded output. Ok when it exits 0.
pub async fn run_command(
    command: &str,
    env: &[(&'static str, String)],
    timeout: Duration,
) -> Result<(), ProbeError> {
    let cmd = self::command(command, env);
    probe::run(cmd, timeout, OUTPUT_BYTES_MAX).await.map(|_| ())
}

/// How this agent ends a logon.
#[derive(Debug, Clone, PartialEq)]
pub enum LogoffMethod {
    /// `--logoff-command`, through [`run_command`].
    Command(String),
    /// logind, through `loginctl terminate-session`; `user_domain` as for
    /// the session list (`alice` is `alice@DOMAIN`).
    Logind { user_domain: Option<String> },
    /// No way: each order is logged once.
    None,
}

/// What became of an order.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Progress {
    Running,
    Done,
    /// Failed at this time; tried again after [`RETRY_AFTER`].
    Failed(Instant),
    /// Logged as impossible.
    Logged,
}

#[derive(Debug)]
struct Remembered {
    arrived: Instant,
    progress: Progress,
}

/// Carries out one host's logoff orders.
#[derive(Debug)]
pub struct Logoffs {
    method: LogoffMethod,
    host: String,
    host_address: String,
    permits: Arc<Semaphore>,
    /// How long one run may take ([`ORDER_COMMAND_TIMEOUT`]).
    timeout: Duration,
    orders: Arc<Mutex<HashMap<String, Remembered>>>,
}

impl Logoffs {
    /// For host `host` (its name in the pool), reached at `host_address`,
    /// with its own [`MAX_CONCURRENT_ORDERS`].
    pub fn new(method: LogoffMethod, host: &str, host_address: &str) -> Logoffs {
        Logoffs::sharing(
            method,
            host,
            host_address,
            Arc::new(Semaphore::new(MAX_CONCURRENT_ORDERS)),
        )
    }

    /// Like [`Logoffs::new`], with runs bounded by `permits`, which an agent
    /// watching many hosts shares between them.
    pub fn sharing(
        method: LogoffMethod,
        host: &str,
        host_address: &str,
        permits: Arc<Semaphore>,
    ) -> Logoffs {
        Logoffs {
            method,
            host: host.to_string(),
            host_address: host_address.to_string(),
            permits,
            timeout: ORDER_COMMAND_TIMEOUT,
            orders: Arc::default(),
        }
    }

    /// The same, with runs of the logoff command limited to `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> Logoffs {
        self.timeout = timeout;
        self
    }

    /// Takes the orders of one heartbeat answer.
    pub fn deliver(&self, orders: Vec<LogoffOrder>) {
        self.deliver_with(orders, |_| Env::new());
    }

    /// Takes the orders of one heartbeat answer; `extra` gives each order's
    /// command more variables (the watching agent's Windows session id).
    /// Must be called within a tokio runtime.
    pub fn deliver_with(&self, orders: Vec<LogoffOrder>, extra: impl Fn(&LogoffOrder) -> Env) {
        if orders.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut remembered = lock(&self.orders);
        forget_old(&mut remembered, now);
        for order in orders {
            let due = match remembered.get(&order.session_id).map(|r| r.progress) {
                None => true,
                Some(Progress::Failed(at)) => now.duration_since(at) >= RETRY_AFTER,
                Some(Progress::Running | Progress::Done | Progress::Logged) => false,
            };
            if !due {
                continue;
            }
            if remembered.len() >= MAX_REMEMBERED_ORDERS
                && !remembered.contains_key(&order.session_id)
            {
                tracing::warn!(
                    session = %order.session_id,
                    user = %order.user,
                    "logoff order not carried out now: {MAX_REMEMBERED_ORDERS} orders are \
                     remembered already; the broker repeats it"
                );
                continue;
            }
            let arrived = remembered.get(&order.session_id).map_or(now, |r| r.arrived);
            if self.method == LogoffMethod::None {
                tracing::warn!(
                    session = %order.session_id,
                    user = %order.user,
                    "the broker logged this user off, but the agent cannot end the logon: it \
                     has no --logoff-command and its sessions do not come from logind (rule W5)"
                );
                remembered.insert(
                    order.session_id,
                    Remembered {
                        arrived,
                        progress: Progress::Logged,
                    },
                );
                continue;
            }
            remembered.insert(
                order.session_id.clone(),
                Remembered {
                    arrived,
                    progress: Progress::Running,
                },
            );
            let mut env = vec![
                ("DESKBROKER_HOST", self.host.clone()),
                ("DESKBROKER_HOST_ADDRESS", self.host_address.clone()),
                ("DESKBROKER_USER", order.user.clone()),
                ("DESKBROKER_SESSION_ID", order.session_id.clone()),
            ];
            env.extend(extra(&order));
            let method = self.method.clone();
            let permits = self.permits.clone();
            let shared = self.orders.clone();
            let timeout = self.timeout;
            tokio::spawn(async move {
                let Ok(_permit) = permits.acquire_owned().await else {
                    return;
                };
                let outcome = carry_out(&method, &order, &env, timeout).await;
                let progress = match &outcome {
                    Ok(detail) => {
                        tracing::info!(
                            session = %order.session_id,
                            user = %order.user,
                            "user logged off on this host as the broker ordered ({detail})"
                        );
                        Progress::Done
                    }
                    Err(e) => {
                        tracing::warn!(
                            session = %order.session_id,
                            user = %order.user,
                            "logoff order failed: {e}; tried again when the broker repeats it \
                             after {RETRY_AFTER:?}"
                        );
                        Progress::Failed(Instant::now())
                    }
                };
                if let Some(r) = lock(&shared).get_mut(&order.session_id) {
                    r.progress = progress;
                }
            });
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Forgets finished orders older than [`REMEMBER_FOR`].
fn forget_old(remembered: &mut HashMap<String, Remembered>, now: Instant) {
    remembered.retain(|_, r| {
        r.progress == Progress::Running || now.duration_since(r.arrived) < REMEMBER_FOR
    });
}

/// Carries one order out; answers what was done, for the log.
async fn carry_out(
    method: &LogoffMethod,
    order: &LogoffOrder,
    env: &[(&'static str, String)],
    timeout: Duration,
) -> Result<String, String> {
    match method {
        LogoffMethod::Command(command) => run_command(command, env, timeout)
            .await
            .map(|()| "logoff command".to_string())
            .map_err(|e| format!("logoff command `{command}` {e}")),
        LogoffMethod::Logind { user_domain } => {
            let ids = logind_sessions_of(&order.user, user_domain.as_deref())
                .await
                .map_err(|e| format!("loginctl {e}"))?;
            if ids.is_empty() {
                return Ok("no logind session of the user was left".to_string());
            }
            let mut cmd = Command::new("loginctl");
            cmd.args(terminate_args(&ids));
            probe::run(cmd, PROBE_TIMEOUT, OUTPUT_BYTES_MAX)
                .await
                .map(|_| format!("logind session(s) {} terminated", ids.join(" ")))
                .map_err(|e| format!("loginctl terminate-session {e}"))
        }
        LogoffMethod::None => Err("no way to log users off".to_string()),
    }
}

/// The arguments of `loginctl` that end logind sessions `ids`.
pub fn terminate_args(ids: &[String]) -> Vec<String> {
    let mut args = vec!["--no-pager".to_string(), "terminate-session".to_string()];
    args.extend(ids.iter().cloned());
    args
}

/// The ids of `user`'s logind sessions among `sessions`: sessions of class
/// `user` whose name, completed with `user_domain` as the session list
/// completes it, is `user` (without regard to ASCII case).
pub fn logind_ids_of(
    sessions: &[LogindSession],
    user: &str,
    user_domain: Option<&str>,
) -> Vec<String> {
    sessions
        .iter()
        .filter(|s| s.class == "user" && !s.name.is_empty() && !s.id.is_empty())
        .filter(|s| {
            let name = match user_domain {
                Some(domain) if !s.name.contains('@') => format!("{}@{domain}", s.name),
                _ => s.name.clone(),
            };
            name.eq_ignore_ascii_case(user)
        })
        .map(|s| s.id.clone())
        .collect()
}

/// The user's logind sessions on this host now.
async fn logind_sessions_of(
    user: &str,
    user_domain: Option<&str>,
) -> Result<Vec<String>, ProbeError> {
    let mut list = Command::new("loginctl");
    list.args(["--no-pager", "list-sessions", "--no-legend"]);
    let ids = parse_loginctl_list(&probe::run(list, PROBE_TIMEOUT, OUTPUT_BYTES_MAX).await?);
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut show = Command::new("loginctl");
    show.args(["--no-pager", "show-session"]).args(&ids);
    for p in LOGINCTL_PROPERTIES {
        show.args(["-p", p]);
    }
    let sessions = parse_loginctl_show(&probe::run(show, PROBE_TIMEOUT, OUTPUT_BYTES_MAX).await?);
    Ok(logind_ids_of(&sessions, user, user_domain))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(id: &str, user: &str) -> LogoffOrder {
        LogoffOrder {
            session_id: id.into(),
            user: user.into(),
        }
    }

    async fn eventually_contains(path: &std::path::Path, want: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            if text.contains(want) || Instant::now() > deadline {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn the_command_gets_the_order_in_its_environment_once() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("done");
        let command = format!(
            "printf '%s|%s|%s|%s|%s\\n' \"$DESKBROKER_HOST\" \"$DESKBROKER_HOST_ADDRESS\" \
             \"$DESKBROKER_USER\" \"$DESKBROKER_SESSION_ID\" \"$DESKBROKER_WINDOWS_SESSION_ID\" \
             >> {}",
            out.display()
        );
        let l = Logoffs::new(LogoffMethod::Command(command), "h1", "10.0.0.1:3389");
        let pwned = dir.path().join("pwned");
        let hostile = format!("$(touch {0})`touch {0}`;touch {0}", pwned.display());
        l.deliver_with(vec![order("s1", "alice@x"), order("s2", &hostile)], |o| {
            vec![(
                "DESKBROKER_WINDOWS_SESSION_ID",
                format!("w-{}", o.session_id),
            )]
        });
        let text = eventually_contains(&out, "|s2|").await;
        assert!(
            text.contains("h1|10.0.0.1:3389|alice@x|s1|w-s1\n"),
            "{text}"
        );
        assert!(text.contains(&format!("|{hostile}|s2|w-s2\n")), "{text}");
        assert!(!pwned.exists(), "a user name was run by the shell");
        // Repeated by the next answers: not run again.
        l.deliver(vec![order("s1", "alice@x"), order("s3", "bob@x")]);
        let text = eventually_contains(&out, "|s3|").await;
        assert_eq!(text.matches("|s1|").count(), 1, "{text}");
    }

    #[tokio::test]
    async fn hanging_commands_are_killed_failed_ones_retried_and_the_others_run() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("done");
        let command = format!(
            "case \"$DESKBROKER_USER\" in hang*) sleep 600;; fail) exit 3;; esac; \
             echo \"$DESKBROKER_USER\" >> {}",
            out.display()
        );
        let l = Logoffs::new(LogoffMethod::Command(command), "h", "h:3389")
            .with_timeout(Duration::from_millis(300));
        // More hanging orders than may run at once, then a failing one and
        // a good one, which run once the hanging ones are killed.
        let mut orders: Vec<LogoffOrder> = (0..MAX_CONCURRENT_ORDERS)
            .map(|i| order(&format!("h{i}"), &format!("hang{i}")))
            .collect();
        orders.push(order("f", "fail"));
        orders.push(order("ok", "alice"));
        l.deliver(orders);
        let text = eventually_contains(&out, "alice").await;
        assert_eq!(text, "alice\n");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let failed = lock(&l.orders)
                .values()
                .filter(|r| matches!(r.progress, Progress::Failed(_)))
                .count();
            if failed == MAX_CONCURRENT_ORDERS + 1 || Instant::now() > deadline {
                assert_eq!(failed, MAX_CONCURRENT_ORDERS + 1, "hung and failed orders");
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // A failed order is tried again once RETRY_AFTER has passed.
        if let Some(r) = lock(&l.orders).get_mut("f") {
            r.progress = Progress::Failed(Instant::now() - RETRY_AFTER);
        }
        l.deliver(vec![order("f", "fail")]);
        assert_eq!(lock(&l.orders)["f"].progress, Progress::Running);
    }

    #[tokio::test]
    async fn without_a_way_each_order_is_logged_once() {
        let l = Logoffs::new(LogoffMethod::None, "h", "h:3389");
        l.deliver(vec![order("s1", "alice@x")]);
        l.deliver(vec![order("s1", "alice@x")]);
        let remembered = lock(&l.orders);
        assert_eq!(remembered.len(), 1);
        assert_eq!(remembered["s1"].progress, Progress::Logged);
    }

    #[test]
    fn logind_sessions_of_the_user_and_the_terminate_call() {
        let s = |id: &str, name: &str, class: &str| LogindSession {
            id: id.into(),
            name: name.into(),
            state: "active".into(),
            class: class.into(),
            remote: true,
            service: String::new(),
        };
        let sessions = [
            s("3", "alice", "user"),
            s("c1", "alice", "greeter"),
            s("7", "bob", "user"),
            s("12", "Alice", "user"),
            s("14", "alice@other.org", "user"),
        ];
        assert_eq!(
            logind_ids_of(&sessions, "alice@contoso.com", Some("contoso.com")),
            ["3", "12"]
        );
        assert_eq!(logind_ids_of(&sessions, "alice", None), ["3", "12"]);
        assert_eq!(
            logind_ids_of(&sessions, "ALICE@other.org", Some("contoso.com")),
            ["14"]
        );
        assert!(logind_ids_of(&sessions, "carol@contoso.com", Some("contoso.com")).is_empty());
        assert_eq!(
            terminate_args(&["3".into(), "12".into()]),
            ["--no-pager", "terminate-session", "3", "12"]
        );
    }
}
