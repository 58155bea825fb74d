//! The agent's loop: register once (or reuse the saved credential), then
//! sample and send a heartbeat every interval, for as long as it runs.
//!
//! Two clocks drive it. Samples are taken every interval whatever happens
//! to the broker, so the load script keeps its last good value fresh and
//! CPU/disk windows stay one interval long. Sends follow samples while the
//! broker answers; when it does not, they are retried on the backoff clock
//! (1 s doubling to 60 s) with the newest sample, and the agent never gives
//! up. The shutdown future is raced against every wait, sample and request,
//! so SIGTERM stops the agent at once, whatever it is doing.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::AgentError;
use crate::backoff::Backoff;
use api::types::{HeartbeatInput, HeartbeatOutput, RefusedSession, RegisterInput};
use api::{BrokerUrl, Client, ClientError, ErrorCode};
use placement::{HeartbeatSource, HostMetrics};

use crate::config::{Config, HostPolicy, policy_is_empty};
use crate::load_script::LoadScript;
use crate::metrics::SystemSampler;
use crate::sessions::{SessionsProbe, SessionsSource};
use crate::state::{SavedState, StateFile};

/// The window of the first sample: CPU and disk figures need two readings,
/// and a heartbeat should follow registration without waiting a whole
/// interval.
const FIRST_SAMPLE_WINDOW: Duration = Duration::from_secs(1);

/// Everything one heartbeat reports, gathered from the machine, the load
/// script and the sessions source.
#[derive(Debug)]
pub struct Sampler {
    system: SystemSampler,
    load_script: Option<LoadScript>,
    image_version: Option<crate::image_version::ImageVersion>,
    sessions: SessionsProbe,
    policy: Option<HostPolicy>,
}

impl Sampler {
    pub fn new(config: &Config) -> Sampler {
        Sampler {
            system: SystemSampler::new(),
            load_script: config.load_script.clone().map(LoadScript::new),
            image_version: config
                .image_version
                .clone()
                .map(crate::image_version::ImageVersion::new),
            sessions: SessionsProbe::new(config.sessions.clone()),
            policy: (!policy_is_empty(&config.policy)).then(|| config.policy.clone()),
        }
    }

    /// Takes one sample: metrics over the window since the last one, the
    /// load script's value, and the session list. The two probes run at the
    /// same time, so a slow load script does not delay the session list.
    pub async fn sample(&mut self) -> HeartbeatInput {
        let system = self.system.sample();
        let load = async {
            match &mut self.load_script {
                Some(script) => script.sample().await,
                None => None,
            }
        };
        let image = async {
            match &mut self.image_version {
                Some(version) => version.sample().await,
                None => None,
            }
        };
        let (custom_load_index, sessions, image_version) =
            tokio::join!(load, self.sessions.sample(), image);
        let disk = system.disk;
        HeartbeatInput {
            metrics: HostMetrics {
                cpu_percent: system.cpu_percent.map(round2),
                memory_percent: system.memory_percent.map(round2),
                disk_queue_length: disk.map(|d| round2(d.queue_length)),
                disk_read_latency_ms: disk.map(|d| round2(d.read_latency_ms)),
                disk_write_latency_ms: disk.map(|d| round2(d.write_latency_ms)),
                custom_load_index,
            },
            sessions,
            policy: self.policy.clone(),
            source: Some(HeartbeatSource::Agent),
            image_version,
            ..HeartbeatInput::default()
        }
    }
}

/// Two decimals are more than the broker's integer factors need, and keep
/// the JSON readable.
fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// What came of one attempt to reach the broker.
pub(crate) enum Outcome {
    /// The heartbeat was accepted; the broker's answer.
    Delivered(Box<HeartbeatOutput>),
    /// Registered, but there is no sample to send yet.
    Registered,
    /// The broker refused this heartbeat (4xx other than 401); the next
    /// sample is sent as usual.
    Refused,
    /// Not done; try again after a backoff delay. The message says why, in
    /// one line; `severe` ones need a person (a refused token).
    Retry { message: String, severe: bool },
}

/// Who a host is to the broker: what it registers with and heartbeats as.
/// The Linux agent has one; the watching agent one per watched host.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    pub broker: BrokerUrl,
    pub host_pool: String,
    pub name: String,
    /// `HOST:PORT` where RDP clients reach the host.
    pub address: String,
    /// The host's DNS name, given at registration (rule AD4).
    pub dns_name: Option<String>,
    /// `None` lets the broker apply its default (`["rdp"]`).
    pub capabilities: Option<Vec<String>>,
    pub policy: HostPolicy,
    /// Needed only when there is no saved credential, or it was revoked.
    pub registration_token: Option<String>,
}

impl Identity {
    /// The Linux agent's identity: the machine it runs on.
    pub fn of(config: &Config) -> Identity {
        Identity {
            broker: config.broker.clone(),
            host_pool: config.host_pool.clone(),
            name: config.name.clone(),
            address: config.address.clone(),
            dns_name: config.dns_name.clone(),
            capabilities: config.capabilities.clone(),
            policy: config.policy.clone(),
            registration_token: config.registration_token.clone(),
        }
    }
}

/// One host's link to the broker: its identity, its saved credential, and
/// the registration and heartbeat calls with their error handling.
pub(crate) struct Agent {
    config: Identity,
    /// The contract's client, without a token: registration carries its
    /// token in the body, heartbeats the host credential as the bearer.
    client: Client,
    state: StateFile,
    credential: Option<String>,
    /// Whether a heartbeat got through since the agent started.
    delivered_any: bool,
}

impl Agent {
    /// Registers if there is no credential, then sends `heartbeat` if any.
    pub(crate) async fn attempt(&mut self, heartbeat: Option<&HeartbeatInput>) -> Outcome {
        if self.credential.is_none()
            && let Err(outcome) = self.register().await
        {
            return outcome;
        }
        let (Some(credential), Some(heartbeat)) = (&self.credential, heartbeat) else {
            return Outcome::Registered;
        };
        let c = &self.config;
        match self
            .client
            .with_token(credential.as_str())
            .heartbeat(&c.host_pool, &c.name, heartbeat)
            .await
        {
            Ok(answer) => {
                warn_refused(&c.name, &answer.refused_sessions);
                let host = &answer.host;
                let (status, load_index, sessions) = (host.status, host.load_index, host.sessions);
                if heartbeat.scrape_failed {
                    // The failed scrape was logged when it happened.
                    tracing::debug!(host = %c.name, ?status, "failed scrape reported");
                } else if self.delivered_any {
                    tracing::debug!(host = %c.name, ?status, load_index, sessions, "heartbeat delivered");
                } else {
                    // Once, so the log shows the agent works end to end.
                    tracing::info!(host = %c.name, ?status, load_index, sessions, "first heartbeat delivered");
                    self.delivered_any = true;
                }
                Outcome::Delivered(Box::new(answer))
            }
            Err(e) if is_unauthorized(&e) => {
                self.credential = None;
                if let Err(e) = self.state.remove() {
                    tracing::warn!("cannot remove the revoked credential: {e}");
                }
                let next = if c.registration_token.is_some() {
                    "registering again with the registration token"
                } else {
                    "the agent forgot its registration token once registered: put a new one \
                     in its configuration and restart it"
                };
                Outcome::Retry {
                    message: format!(
                        "heartbeat refused, the host credential is no longer valid (the host \
                         was removed, or re-registered by an administrator): {e}; {next}"
                    ),
                    severe: true,
                }
            }
            Err(e) if e.code() == Some(ErrorCode::TooManyRequests) => Outcome::Retry {
                // The broker bounds each host's heartbeats (S8): not an
                // error of this agent's, just a later retry.
                message: format!("the broker asks for fewer heartbeats, retrying later: {e}"),
                severe: false,
            },
            Err(e) if !e.is_retryable() => {
                tracing::error!("heartbeat refused by the broker: {e}");
                Outcome::Refused
            }
            Err(e) => Outcome::Retry {
                message: format!("heartbeat not delivered: {e}"),
                severe: false,
            },
        }
    }

    async fn register(&mut self) -> Result<(), Outcome> {
        let c = &self.config;
        let Some(token) = &c.registration_token else {
            return Err(Outcome::Retry {
                message: format!(
                    "no valid host credential and no registration token: create one with \
                     POST /api/v1/hostPools/{}/registrationToken, put it in the agent's \
                     configuration and restart the agent",
                    c.host_pool
                ),
                severe: true,
            });
        };
        let mut request = RegisterInput {
            token: token.clone(),
            host_pool: Some(c.host_pool.clone()),
            name: c.name.clone(),
            address: c.address.clone(),
            capabilities: c.capabilities.clone(),
            policy: (!policy_is_empty(&c.policy)).then(|| c.policy.clone()),
            dns_name: c.dns_name.clone(),
        };
        let answer = self.client.register(&request).await;
        forget(&mut request.token);
        match answer {
            Ok((registered, created)) => {
                let how = if created {
                    "registered as a new session host"
                } else {
                    "registered again (the broker keeps the host's sessions)"
                };
                tracing::info!(
                    pool = %c.host_pool, host = %c.name, address = %c.address,
                    "{how}"
                );
                let saved = SavedState {
                    broker: c.broker.as_url().to_string(),
                    host_pool: c.host_pool.clone(),
                    name: c.name.clone(),
                    host_credential: registered.host_credential.clone(),
                };
                if let Err(e) = self.state.save(&saved) {
                    // The credential works from memory; after a restart the
                    // agent registers again, which keeps the host's sessions.
                    tracing::error!("cannot save the host credential: {e}");
                }
                self.credential = Some(registered.host_credential);
                // Registered: the token is of no more use to this host, and
                // whoever reads the agent's memory must not find a key that
                // enrols other machines (rule E3). Only the credential stays.
                if let Some(mut token) = self.config.registration_token.take() {
                    forget(&mut token);
                }
                Ok(())
            }
            Err(e) if !e.is_retryable() => Err(Outcome::Retry {
                message: format!(
                    "registration refused: {e}{}",
                    if is_unauthorized(&e) {
                        "; put a new registration token in the agent's configuration and \
                         restart the agent"
                    } else {
                        ""
                    }
                ),
                severe: true,
            }),
            Err(e) => Err(Outcome::Retry {
                message: format!("cannot register: {e}"),
                severe: false,
            }),
        }
    }
}

/// Overwrites a secret in place before it is dropped, so that its bytes do
/// not linger in freed memory (best effort: copies the HTTP client made
/// are freed, not overwritten).
fn forget(secret: &mut String) {
    let zeros = "\0".repeat(secret.len());
    secret.replace_range(.., &zeros);
    secret.clear();
}

/// Logs the entries of this heartbeat's list the broker did not take (rule
/// S8): one warning per distinct reason, with how many and one user, so a
/// list the broker keeps refusing costs one line per reason per interval.
fn warn_refused(host: &str, refused: &[RefusedSession]) {
    let mut reasons: Vec<(&str, usize, &str)> = Vec::new();
    for r in refused {
        match reasons
            .iter_mut()
            .find(|(reason, _, _)| *reason == r.reason)
        {
            Some((_, n, _)) => *n += 1,
            None => reasons.push((&r.reason, 1, &r.user)),
        }
    }
    for (reason, n, user) in reasons {
        tracing::warn!(
            host,
            reason,
            entries = n,
            first_user = user,
            "the broker did not take {n} session(s) this host reported ({reason}); \
             those users are placed by the broker's rules, not by this host"
        );
    }
}

/// How this agent ends a logon (rule W5): its command, or logind when its
/// sessions come from logind, or no way.
fn logoff_method(config: &Config) -> crate::orders::LogoffMethod {
    use crate::orders::LogoffMethod;
    match (&config.logoff_command, &config.sessions) {
        (Some(command), _) => LogoffMethod::Command(command.clone()),
        (None, SessionsSource::Loginctl { user_domain }) => LogoffMethod::Logind {
            user_domain: user_domain.clone(),
        },
        (None, SessionsSource::Command(_)) => LogoffMethod::None,
    }
}

/// 401: the token or credential is not (or no longer) valid.
fn is_unauthorized(e: &ClientError) -> bool {
    e.code() == Some(ErrorCode::Unauthorized)
}

/// Where one host's heartbeats come from: the machine the agent runs on
/// (the Linux agent), or a Windows host's exporter (the watching agent).
/// The loop ([`drive`]) is the same for both.
pub(crate) trait Source {
    /// One sample, sent as it is. The watching agent's sample of an
    /// exporter that did not answer (rule W1) is a report of the failed
    /// scrape (`scrapeFailed`), which the broker keeps as the host's
    /// `scrapeError` and does not count as a heartbeat, so its silence
    /// rule (S7) still decides the host's status.
    fn sample(&mut self) -> impl Future<Output = HeartbeatInput>;
    /// The broker's answer to a delivered heartbeat (messages, and the
    /// orders a newer broker may add).
    fn answered(&mut self, answer: HeartbeatOutput);
}

/// The Linux agent's source: the machine itself.
struct Machine {
    sampler: Sampler,
    /// Shows the messages heartbeat answers bring (`--message-command`).
    messenger: crate::messages::Messenger,
    /// Carries out the logoffs heartbeat answers order (rule W5).
    logoffs: crate::orders::Logoffs,
}

impl Source for Machine {
    async fn sample(&mut self) -> HeartbeatInput {
        self.sampler.sample().await
    }

    fn answered(&mut self, answer: HeartbeatOutput) {
        self.messenger.deliver(answer.messages);
        self.logoffs.deliver(answer.logoffs);
    }
}

impl Agent {
    /// Opens a host's state directory and takes its saved credential when
    /// it is for this broker, pool and name. Fails when the directory is
    /// unusable, or when there is neither a credential nor a token.
    pub(crate) fn open(
        identity: Identity,
        client: Client,
        state_dir: &std::path::Path,
    ) -> Result<Agent, AgentError> {
        let state = StateFile::new(state_dir);
        state.prepare()?;
        let credential = match state.load() {
            Ok(Some(saved))
                if saved.is_for(
                    identity.broker.as_url().as_str(),
                    &identity.host_pool,
                    &identity.name,
                ) =>
            {
                tracing::info!(
                    host = %identity.name,
                    "using the host credential saved in {}",
                    state.path().display()
                );
                Some(saved.host_credential)
            }
            Ok(Some(saved)) => {
                tracing::info!(
                    "{} is for host {} of pool {} at {}: registering as {} of pool {}",
                    state.path().display(),
                    saved.name,
                    saved.host_pool,
                    saved.broker,
                    identity.name,
                    identity.host_pool
                );
                None
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!("{e}; registering anew");
                None
            }
        };
        if credential.is_none() && identity.registration_token.is_none() {
            return Err(AgentError::NoRegistrationToken {
                host_pool: identity.host_pool.clone(),
                state_file: state.path().to_path_buf(),
            });
        }
        Ok(Agent {
            config: identity,
            client,
            state,
            credential,
            delivered_any: false,
        })
    }
}

/// The broker's client for every host of this agent process.
pub(crate) fn broker_client(
    broker: &BrokerUrl,
    tls: &crate::config::TlsConfig,
) -> Result<Client, AgentError> {
    Client::with_trust(
        broker.clone(),
        concat!("deskbroker-agent/", env!("CARGO_PKG_VERSION")),
        &tls.trust().map_err(|e| AgentError::Client(e.to_string()))?,
    )
    .map_err(|e| AgentError::Client(e.to_string()))
}

/// Runs the agent with a validated configuration until `shutdown` completes
/// (then it returns `Ok`). It fails only at start: an unusable state
/// directory, or neither a saved credential nor a registration token. Once
/// running it never gives up: an unreachable broker, a refused heartbeat or
/// a revoked credential are logged and retried.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<(), AgentError> {
    let client = broker_client(&config.broker, &config.tls)?;
    let agent = Agent::open(Identity::of(&config), client, &config.state_dir)?;

    tracing::info!(
        broker = %config.broker,
        pool = %config.host_pool,
        host = %config.name,
        address = %config.address,
        interval_seconds = config.interval.as_secs_f64(),
        sessions = %match &config.sessions {
            SessionsSource::Command(c) => format!("command `{c}`"),
            SessionsSource::Loginctl { .. } => "loginctl".to_string(),
        },
        load_script = config.load_script.as_deref().unwrap_or("none"),
        "deskbroker agent starting"
    );

    let mut machine = Machine {
        sampler: Sampler::new(&config),
        messenger: crate::messages::Messenger::start(
            config.message_command.clone(),
            crate::messages::MESSAGE_COMMAND_TIMEOUT,
        ),
        logoffs: crate::orders::Logoffs::new(logoff_method(&config), &config.name, &config.address),
    };
    drive(
        agent,
        &mut machine,
        config.interval,
        FIRST_SAMPLE_WINDOW.min(config.interval),
        shutdown,
    )
    .await;
    tracing::info!("deskbroker agent stopped");
    Ok(())
}

/// One host's loop: samples every `interval` (the first after
/// `first_sample`), sends each sample, backs off while the broker does not
/// answer, and stops when `shutdown` completes.
pub(crate) async fn drive(
    mut agent: Agent,
    source: &mut impl Source,
    interval: Duration,
    first_sample: Duration,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let start = Instant::now();
    let mut next_sample = start + first_sample;
    // Register at once, so a wrong token shows before the first sample.
    let mut next_send = agent.credential.is_none().then_some(start);
    let mut latest: Option<HeartbeatInput> = None;
    let mut backoff = Backoff::default();

    loop {
        let wake = next_send.map_or(next_sample, |t| t.min(next_sample));
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            () = tokio::time::sleep_until(wake) => {}
        }

        if Instant::now() >= next_sample {
            let heartbeat = tokio::select! {
                biased;
                () = &mut shutdown => break,
                h = source.sample() => h,
            };
            let now = Instant::now();
            next_sample += interval;
            if next_sample <= now {
                // A sample took longer than the interval: skip, don't burst.
                next_sample = now + interval;
            }
            // Only the newest sample is ever sent: an older one would
            // say the host is as it was (fine, when this scrape failed).
            latest = Some(heartbeat);
            // While backing off, the retry clock decides; it will send this
            // newest sample.
            if backoff.failures() == 0 {
                next_send = Some(now);
            }
        }

        if next_send.is_some_and(|t| t <= Instant::now()) {
            let outcome = tokio::select! {
                biased;
                () = &mut shutdown => break,
                o = agent.attempt(latest.as_ref()) => o,
            };
            match outcome {
                Outcome::Delivered(answer) => {
                    if backoff.failures() > 0 {
                        tracing::info!(
                            host = %agent.config.name,
                            "heartbeat delivered after {} failed attempts",
                            backoff.failures()
                        );
                    }
                    backoff.reset();
                    next_send = None;
                    // Sent once: a retry must not repeat it as news.
                    latest = None;
                    source.answered(*answer);
                }
                Outcome::Registered | Outcome::Refused => {
                    backoff.reset();
                    next_send = None;
                }
                Outcome::Retry { message, severe } => {
                    let delay = backoff.next_delay();
                    let attempt = backoff.failures();
                    let host = &agent.config.name;
                    if severe {
                        tracing::error!(%host, "{message}; retrying in {delay:.1?} (attempt {attempt})");
                    } else {
                        tracing::warn!(%host, "{message}; retrying in {delay:.1?} (attempt {attempt})");
                    }
                    next_send = Some(Instant::now() + delay);
                }
            }
        }
    }
}
