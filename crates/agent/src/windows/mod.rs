//! The watching agent (rules W1–W4): one `deskbroker agent` process that
//! reports for many Windows session hosts by scraping their
//! windows_exporter, with nothing of ours installed on them.
//!
//! It is the same agent as on Linux, with another source of truth: each
//! watched host gets the Linux agent's own loop ([`runner::drive`]: its
//! registration, its host credential in a state directory of its own, its
//! heartbeats, backoff and revocation handling), fed by a [`WatchedHost`]
//! that scrapes the exporter instead of reading `/proc` and logind. So a
//! watched host is to the broker exactly what an xrdp host is (S7, S8, H).
//!
//! - [`config`]: the `[windows_exporter]`, `[domains]` and
//!   `[[windows_host]]` keys;
//! - [`scrape`]: bounded, concurrent HTTP(S) scrapes;
//! - [`report`]: sessions, names and load from one scrape.
//!
//! [`runner::drive`]: crate::runner

pub mod config;
pub mod report;
pub mod scrape;

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use api::types::{HeartbeatInput, HeartbeatOutput};
use placement::{HeartbeatSource, MAX_SCRAPE_ERROR_BYTES};

use crate::AgentError;
use crate::config::{HostPolicy, policy_is_empty};
use crate::messages::{self, Messenger};
use crate::runner::{self, Agent, Identity, Source};
use config::Names;
pub use config::WatchConfig;
use report::{Counters, ListedSession};
use scrape::Target;

/// The directory below the state dir that holds one directory per
/// watched host, each with that host's `agent.json`.
pub const HOSTS_DIR: &str = "windows";

/// One watched host as a source of heartbeats.
pub struct WatchedHost {
    name: String,
    address: String,
    target: Target,
    names: Arc<Names>,
    policy: Option<HostPolicy>,
    /// The image it runs, from the configuration (rule U1).
    image_version: Option<String>,
    counters: Counters,
    /// Lower-case users of the last list, for logons in progress (W2).
    previously_listed: HashSet<String>,
    /// The last list's sessions with their Windows session ids: what an
    /// order from the broker about a user's session acts on (W5).
    listed: Vec<ListedSession>,
    /// What the last round said was wrong, so that a lasting problem is
    /// logged once, at warning level, and again only when it changes.
    last_problems: Vec<String>,
    messenger: Arc<Messenger>,
    /// Carries out the logoffs the broker orders for this host with the
    /// `logoff_command` (rule W5), runs shared with every watched host.
    logoffs: crate::orders::Logoffs,
}

impl WatchedHost {
    /// Logs `problems` at warning level when they differ from the last
    /// round's, at debug level otherwise.
    fn note(&mut self, problems: Vec<String>) {
        if problems == self.last_problems {
            for p in &problems {
                tracing::debug!(host = %self.name, "{p}");
            }
            return;
        }
        for p in &problems {
            tracing::warn!(host = %self.name, url = %self.target.url(), "{p}");
        }
        if problems.is_empty() {
            tracing::info!(host = %self.name, "the exporter's answers are whole again");
        }
        self.last_problems = problems;
    }

    /// The Windows session id of `user`'s session in the last list: a
    /// decimal number, or None (see [`report::session_id`]).
    pub fn windows_session_id(&self, user: &str) -> Option<&str> {
        self.listed
            .iter()
            .find(|s| s.user.eq_ignore_ascii_case(user))
            .and_then(|s| s.windows_session_id.as_deref())
    }

    /// The variables a command about `user`'s session on this host gets
    /// (rule W5): the host, where it is reached, and the session's id.
    pub fn command_env(&self, user: &str) -> messages::Env {
        let mut env = vec![
            ("DESKBROKER_HOST", self.name.clone()),
            ("DESKBROKER_HOST_ADDRESS", self.address.clone()),
        ];
        if let Some(id) = self.windows_session_id(user) {
            env.push(("DESKBROKER_WINDOWS_SESSION_ID", id.to_string()));
        }
        env
    }
}

impl Source for WatchedHost {
    async fn sample(&mut self) -> HeartbeatInput {
        match self.target.scrape().await {
            Err(e) => {
                // No heartbeat this round, only the failed scrape's report,
                // which the broker keeps as the host's scrapeError and does
                // not count as a heartbeat: S7 makes the host Unavailable in
                // time, nobody's session changes, and no other host waits
                // for this one (W1).
                let problem = format!("scrape failed, no heartbeat this round: {e}");
                let error = scrape_error(std::slice::from_ref(&problem));
                // The log may say what the answer or the connection said;
                // the broker's scrapeError, read by anyone, does not.
                let logged = match e.detail() {
                    Some(detail) if !detail.is_empty() => format!("{problem} ({detail:?})"),
                    _ => problem,
                };
                self.note(vec![logged]);
                HeartbeatInput {
                    source: Some(HeartbeatSource::WindowsExporter),
                    scrape_error: error,
                    scrape_failed: true,
                    ..HeartbeatInput::default()
                }
            }
            Ok(samples) => {
                let r = report::interpret(
                    &samples,
                    &mut self.counters,
                    &self.names,
                    &self.previously_listed,
                );
                let error = scrape_error(&r.problems);
                self.note(r.problems);
                if let Some(list) = &r.sessions {
                    self.previously_listed =
                        list.iter().map(|s| s.user.to_ascii_lowercase()).collect();
                    self.listed = r.listed;
                }
                HeartbeatInput {
                    metrics: r.metrics,
                    sessions: r.sessions,
                    policy: self.policy.clone(),
                    source: Some(HeartbeatSource::WindowsExporter),
                    scrape_error: error,
                    scrape_failed: false,
                    image_version: self.image_version.clone(),
                }
            }
        }
    }

    fn answered(&mut self, answer: HeartbeatOutput) {
        let messenger = self.messenger.clone();
        messenger.deliver_with(answer.messages, |m| self.command_env(&m.user));
        // The order's command gets the host, its address, the user and the
        // broker's session id from `orders`; the Windows session id of the
        // user's last listed session is this host's to add.
        self.logoffs.deliver_with(answer.logoffs, |o| {
            self.windows_session_id(&o.user)
                .map(|id| vec![("DESKBROKER_WINDOWS_SESSION_ID", id.to_string())])
                .unwrap_or_default()
        });
    }
}

/// A round's problems as the broker keeps them (the host's
/// `scrapeError`): one line, in the broker's bound
/// ([`MAX_SCRAPE_ERROR_BYTES`]), cut at a character with `…` when longer
/// (the log keeps them whole). None when the scrape was whole.
fn scrape_error(problems: &[String]) -> Option<String> {
    const CUT: &str = "…";
    if problems.is_empty() {
        return None;
    }
    let line: String = problems
        .join("; ")
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if line.len() <= MAX_SCRAPE_ERROR_BYTES {
        return Some(line);
    }
    let mut end = MAX_SCRAPE_ERROR_BYTES - CUT.len();
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    Some(format!("{}{CUT}", &line[..end]))
}

/// Runs the watching agent until `shutdown` completes. It fails only at
/// start: an unusable state directory, an unreadable password file or CA,
/// or no registration token for a host without a saved credential.
pub async fn run(
    config: WatchConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), AgentError> {
    let client = runner::broker_client(&config.broker, &config.tls)?;
    let targets = scrape::targets(&config.hosts).map_err(|e| AgentError::Client(e.to_string()))?;
    let messenger = Arc::new(Messenger::start(
        config.message_command.clone(),
        messages::MESSAGE_COMMAND_TIMEOUT,
    ));
    let names = Arc::new(config.names.clone());
    let logoff_method = match &config.logoff_command {
        Some(command) => crate::orders::LogoffMethod::Command(command.clone()),
        None => crate::orders::LogoffMethod::None,
    };
    let order_permits = Arc::new(tokio::sync::Semaphore::new(
        crate::orders::MAX_CONCURRENT_ORDERS,
    ));
    if config.logoff_command.is_none() {
        tracing::info!(
            "no logoff_command: a logoff the broker orders cannot be carried out on the \
             Windows hosts"
        );
    }

    let mut hosts = Vec::with_capacity(config.hosts.len());
    for (host, target) in config.hosts.iter().zip(targets) {
        let identity = Identity {
            broker: config.broker.clone(),
            host_pool: config.host_pool.clone(),
            name: host.name.clone(),
            address: host.address.clone(),
            dns_name: host.dns_name.clone(),
            capabilities: host.capabilities.clone(),
            policy: host.policy.clone(),
            registration_token: config.registration_token.clone(),
        };
        let dir = config.state_dir.join(HOSTS_DIR).join(&host.name);
        let agent = Agent::open(identity, client.clone(), &dir)?;
        let source = WatchedHost {
            name: host.name.clone(),
            address: host.address.clone(),
            target,
            names: names.clone(),
            policy: (!policy_is_empty(&host.policy)).then(|| host.policy.clone()),
            image_version: host.image_version.clone(),
            counters: Counters::default(),
            previously_listed: HashSet::new(),
            listed: Vec::new(),
            last_problems: Vec::new(),
            messenger: messenger.clone(),
            logoffs: crate::orders::Logoffs::sharing(
                logoff_method.clone(),
                &host.name,
                &host.address,
                order_permits.clone(),
            ),
        };
        hosts.push((agent, source));
    }

    tracing::info!(
        broker = %config.broker,
        pool = %config.host_pool,
        hosts = hosts.len(),
        interval_seconds = config.interval.as_secs_f64(),
        "deskbroker agent starting: watching Windows hosts through windows_exporter"
    );

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    for (agent, mut source) in hosts {
        let mut stopped = stopped.clone();
        let interval = config.interval;
        tasks.spawn(async move {
            let shutdown = async move {
                let _ = stopped.wait_for(|s| *s).await;
            };
            // The first scrape at once: its CPU counters start the first
            // window, and the shared permits spread the hosts out.
            runner::drive(agent, &mut source, interval, Duration::ZERO, shutdown).await;
        });
    }
    shutdown.await;
    let _ = stop.send(true);
    while tasks.join_next().await.is_some() {}
    tracing::info!("deskbroker agent stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use placement::validate_scrape_error;

    #[test]
    fn a_rounds_problems_become_one_line_the_broker_takes() {
        assert_eq!(scrape_error(&[]), None);
        let two = scrape_error(&[
            "no session list: the exporter's terminal_services collector failed".into(),
            "no CPU figure:\nline\tbreak".into(),
        ])
        .unwrap();
        assert_eq!(
            two,
            "no session list: the exporter's terminal_services collector failed; \
             no CPU figure: line break"
        );
        validate_scrape_error(&two).unwrap();

        // Long, with a multi-byte character across the cut: shortened on a
        // character boundary, within the bound, marked as cut.
        for pad in 0..4 {
            let long = format!("{}{}", "x".repeat(pad), "é".repeat(MAX_SCRAPE_ERROR_BYTES));
            let cut = scrape_error(&[long]).unwrap();
            assert!(cut.len() <= MAX_SCRAPE_ERROR_BYTES, "{}", cut.len());
            assert!(cut.len() > MAX_SCRAPE_ERROR_BYTES - 8, "{}", cut.len());
            assert!(cut.ends_with('…'), "{cut}");
            validate_scrape_error(&cut).unwrap();
        }
    }
}
