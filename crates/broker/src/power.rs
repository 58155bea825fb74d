//! Power control (rule A9) and the record of every power action (A10):
//! the `command` driver (`sh -c` under a timeout, the host's values in
//! `DESKBROKER_*` variables), the `wakeOnLan` driver (a magic packet), the
//! manual start and stop of a host, retries with backoff, and what a
//! restart does with an action a crash interrupted.
//!
//! An action is decided under the pool's lock, where the host's power
//! state moves to `Starting` or `Stopping` and a `Pending` record is put in
//! the same batch; the driver then runs outside any lock (at most
//! [`MAX_CONCURRENT_POWER_ACTIONS`] at once), and its outcome moves the
//! host on (`Running`, `Stopped`) or back (to where it was) and completes
//! the record, again in one batch. So the store never holds a host in
//! `Starting`/`Stopping` without a `Pending` record, nor a finished record
//! for a host still in between.
//!
//! [`Power`] is the service: it owns the bound on actions running at once
//! and whether this broker runs commands, changes pools only through the
//! core's `write_with` (host state and record in one batch), and reads the
//! record of past actions from the store.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use placement::{ActionOutcome, PowerDriver, PowerSettings, PowerState, ScalingActionKind};
use store::{Mutation, ScalingAction, ScalingActionQuery};
use tokio::io::AsyncReadExt;

use crate::core::Core;
use crate::error::BrokerError;

/// How many power actions (driver runs) the broker runs at once; more wait
/// their turn. A farm's morning start must not fork a thousand shells.
pub const MAX_CONCURRENT_POWER_ACTIONS: usize = 16;
/// How many times a failing action is tried before it is recorded Failed.
pub const MAX_POWER_ATTEMPTS: u32 = 3;
/// The pause after the first failed attempt; it doubles after each.
pub const POWER_RETRY_BASE: Duration = Duration::from_secs(1);
/// How much of a command's output (stdout, then stderr) the record keeps.
pub const MAX_POWER_OUTPUT_BYTES: usize = 4096;
/// How long the output is still read once the command has exited (a
/// background child may hold the pipes open).
pub const OUTPUT_DRAIN_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a killed command is given to go.
pub const KILL_WAIT: Duration = Duration::from_secs(5);
/// How many copies of a Wake-on-LAN packet are sent (UDP may drop one).
pub const WAKE_ON_LAN_COPIES: usize = 3;
/// The only variables of the broker's environment a power command
/// inherits, besides those named `DESKBROKER_POWER_*` (how an operator
/// gives commands a credential without storing it in the pool's
/// settings). Never the admin token or the database URL.
pub const INHERITED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "TZ",
    "TMPDIR",
    "LIBVIRT_DEFAULT_URI",
    "AZURE_CONFIG_DIR",
];

/// The power service: the core whose hosts it moves, the store that
/// keeps the record of actions, and the bound on actions running at once.
pub struct Power {
    core: Arc<Core>,
    /// Read for the record of actions (what memory does not keep); every
    /// write goes through the core.
    store: Arc<dyn store::Store>,
    /// `Settings::allow_power_commands`: whether this broker runs commands.
    commands_allowed: bool,
    /// At most [`MAX_CONCURRENT_POWER_ACTIONS`] driver runs at once.
    permits: tokio::sync::Semaphore,
}

/// What a driver is asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    Start,
    Stop,
    State,
}

impl Verb {
    fn word(self) -> &'static str {
        match self {
            Verb::Start => "start",
            Verb::Stop => "stop",
            Verb::State => "state",
        }
    }
}

/// The host a driver acts on, as its pool knew it when the action began.
#[derive(Clone, Debug)]
pub struct Target {
    pub pool: String,
    pub host: String,
    pub address: String,
    pub mac_address: Option<String>,
}

/// One attempt's result: success, and what the driver said.
#[derive(Debug)]
pub struct Attempt {
    pub ok: bool,
    pub message: String,
}

/// Runs `command` through `sh -c` with the target's values in its
/// environment (never in its text), under `timeout` (killed beyond it);
/// exit 0 is success. The message is the output, bounded.
pub async fn run_command(command: &str, verb: Verb, t: &Target, timeout: Duration) -> Attempt {
    let mut c = tokio::process::Command::new("sh");
    c.arg("-c")
        .arg(command)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for k in INHERITED_ENV {
        if let Some(v) = std::env::var_os(k) {
            c.env(k, v);
        }
    }
    for (k, v) in std::env::vars_os() {
        if k.to_str()
            .is_some_and(|k| k.starts_with("DESKBROKER_POWER_"))
        {
            c.env(k, v);
        }
    }
    c.env("DESKBROKER_ACTION", verb.word())
        .env("DESKBROKER_POOL", &t.pool)
        .env("DESKBROKER_HOST", &t.host)
        .env("DESKBROKER_ADDRESS", &t.address)
        .env("DESKBROKER_MAC", t.mac_address.as_deref().unwrap_or(""));
    let mut child = match c.spawn() {
        Ok(child) => child,
        Err(e) => {
            return Attempt {
                ok: false,
                message: format!("cannot run sh: {e}"),
            };
        }
    };
    let out = tokio::spawn(read_bounded(child.stdout.take()));
    let err = tokio::spawn(read_bounded(child.stderr.take()));
    let status = tokio::time::timeout(timeout, child.wait()).await;
    let (ok, why) = match status {
        Ok(Ok(s)) if s.success() => (true, String::new()),
        Ok(Ok(s)) => (false, format!("exited with {s}")),
        Ok(Err(e)) => (false, format!("cannot wait for the command: {e}")),
        Err(_) => {
            let _ = child.start_kill();
            let _ = tokio::time::timeout(KILL_WAIT, child.wait()).await;
            (
                false,
                format!("killed after its timeout of {} s", timeout.as_secs()),
            )
        }
    };
    let mut output = Vec::new();
    for task in [out, err] {
        let abort = task.abort_handle();
        match tokio::time::timeout(OUTPUT_DRAIN_TIMEOUT, task).await {
            Ok(Ok(bytes)) => output.extend(bytes),
            _ => abort.abort(),
        }
    }
    output.truncate(MAX_POWER_OUTPUT_BYTES);
    let text = String::from_utf8_lossy(&output).trim().to_string();
    let message = match (why.is_empty(), text.is_empty()) {
        (true, _) => text,
        (false, true) => why,
        (false, false) => format!("{why}: {text}"),
    };
    Attempt { ok, message }
}

/// Reads at most [`MAX_POWER_OUTPUT_BYTES`] of a pipe, then discards the
/// rest, so a chatty command neither fills memory nor blocks on a full pipe.
async fn read_bounded(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> Vec<u8> {
    let Some(mut pipe) = pipe else {
        return Vec::new();
    };
    let mut kept = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = MAX_POWER_OUTPUT_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

/// A Wake-on-LAN magic packet: six 0xFF bytes, then the MAC sixteen times.
pub fn magic_packet(mac: [u8; 6]) -> [u8; 102] {
    let mut p = [0xFFu8; 102];
    for i in 0..16 {
        p[6 + i * 6..12 + i * 6].copy_from_slice(&mac);
    }
    p
}

/// Sends the magic packet of `mac` to the pool's broadcast address.
async fn wake_on_lan(settings: &PowerSettings, mac: Option<&str>) -> Attempt {
    let fail = |message: String| Attempt { ok: false, message };
    let Some(bytes) = mac.and_then(placement::parse_mac) else {
        return fail("the session host has no macAddress".into());
    };
    let Some(to) = settings.broadcast_socket() else {
        return fail("powerSettings.broadcastAddress is not an address".into());
    };
    let socket = match tokio::net::UdpSocket::bind("0.0.0.0:0").await {
        Ok(s) => s,
        Err(e) => return fail(format!("cannot open a UDP socket: {e}")),
    };
    if let Err(e) = socket.set_broadcast(true) {
        return fail(format!("cannot send broadcasts: {e}"));
    }
    let packet = magic_packet(bytes);
    for _ in 0..WAKE_ON_LAN_COPIES {
        if let Err(e) = socket.send_to(&packet, to).await {
            return fail(format!("cannot send the magic packet to {to}: {e}"));
        }
    }
    Attempt {
        ok: true,
        message: format!("magic packet sent to {to}"),
    }
}

/// Why a command was not run or set: this broker does not run them.
pub const COMMANDS_NOT_ALLOWED: &str = "this broker does not run power commands: its operator \
     starts it with --allow-power-commands to let it";

/// The power actions a pool's settings let this broker take (the pool's
/// `powerActions`): what `attempt` could run, so that a client offers
/// only those. Wake-on-LAN starts hosts without a command; every command
/// needs a broker that runs them (`commands_allowed`).
pub fn actions(settings: &PowerSettings, commands_allowed: bool) -> Vec<&'static str> {
    let runs = |c: &Option<String>| commands_allowed && c.is_some();
    let start = match settings.driver {
        PowerDriver::None => false,
        PowerDriver::WakeOnLan => true,
        PowerDriver::Command => runs(&settings.power_on_command),
    };
    let stop = settings.driver != PowerDriver::None && runs(&settings.power_off_command);
    [("start", start), ("stop", stop)]
        .into_iter()
        .filter_map(|(a, can)| can.then_some(a))
        .collect()
}

/// One attempt of `verb` with the pool's driver; a command only if this
/// broker runs them (`commands_allowed`, `Settings::allow_power_commands`).
async fn attempt(
    settings: &PowerSettings,
    verb: Verb,
    t: &Target,
    commands_allowed: bool,
) -> Attempt {
    let timeout = Duration::from_secs(u64::from(settings.timeout_seconds));
    let command = match verb {
        Verb::Start if settings.driver == PowerDriver::WakeOnLan => {
            return wake_on_lan(settings, t.mac_address.as_deref()).await;
        }
        Verb::Start => settings.power_on_command.as_deref(),
        Verb::Stop => settings.power_off_command.as_deref(),
        Verb::State => settings.power_state_command.as_deref(),
    };
    match command {
        Some(_) if !commands_allowed => Attempt {
            ok: false,
            message: COMMANDS_NOT_ALLOWED.to_string(),
        },
        Some(c) => run_command(c, verb, t, timeout).await,
        None => Attempt {
            ok: false,
            message: format!("no command to {} a host", verb.word()),
        },
    }
}

/// Runs `verb` until it succeeds or [`MAX_POWER_ATTEMPTS`] have failed,
/// pausing [`POWER_RETRY_BASE`], then twice as long, between attempts
/// (never a tight loop). Answers the last attempt and how many ran.
async fn with_retries(
    settings: &PowerSettings,
    verb: Verb,
    t: &Target,
    commands_allowed: bool,
) -> (Attempt, u32) {
    let mut pause = POWER_RETRY_BASE;
    let mut n = 0;
    loop {
        n += 1;
        let a = attempt(settings, verb, t, commands_allowed).await;
        if a.ok || n >= MAX_POWER_ATTEMPTS {
            return (a, n);
        }
        tracing::warn!(pool = %t.pool, host = %t.host, action = verb.word(), attempt = n,
            message = %a.message, "power action failed; retrying");
        tokio::time::sleep(pause).await;
        pause *= 2;
    }
}

/// Why a host cannot be started or stopped now, as a refusal (409).
fn conflict(msg: String) -> BrokerError {
    BrokerError::Engine(placement::Error::Conflict(msg))
}

impl Power {
    /// The service over `core` and `store`; it runs power commands only
    /// when `commands_allowed` (`serve --allow-power-commands`).
    pub fn new(core: Arc<Core>, store: Arc<dyn store::Store>, commands_allowed: bool) -> Power {
        Power {
            core,
            store,
            commands_allowed,
            permits: tokio::sync::Semaphore::new(MAX_CONCURRENT_POWER_ACTIONS),
        }
    }

    /// Starts (`Start`) or stops (`Stop`) a host by hand (rule A9): checks
    /// the pool's driver and the host's state, moves the host to
    /// `Starting`/`Stopping` and records the action `Pending` in one batch,
    /// then runs the driver in the background. Answers the Pending record.
    /// `force` lets a stop go ahead although the host has sessions.
    pub async fn act(
        self: &Arc<Self>,
        pool: &str,
        host: &str,
        kind: ScalingActionKind,
        force: bool,
        actor: String,
    ) -> Result<ScalingAction, BrokerError> {
        let verb = verb_of(kind)?;
        let reason = format!("{} by {actor}", verb_past(verb));
        let begun = self
            .core
            .write_with(pool, |p, now| {
                let begun = begin(p, host, verb, force, &actor, reason, now)?;
                let m = vec![Mutation::PutScalingAction {
                    action: begun.record.clone(),
                }];
                Ok((begun, m))
            })
            .await?;
        let record = begun.record.clone();
        self.clone().spawn_finish(begun);
        Ok(record)
    }

    /// Runs a begun action's driver in the background (at most
    /// [`MAX_CONCURRENT_POWER_ACTIONS`] at once) and records its outcome;
    /// the answer says whether it succeeded.
    pub(crate) fn spawn_finish(self: Arc<Self>, b: Begun) -> tokio::task::JoinHandle<bool> {
        tokio::spawn(async move {
            self.finish(b.record, b.settings, b.target, b.verb, b.before)
                .await
        })
    }
    /// Runs the driver for a Pending action and records its outcome: the
    /// host moves on when it succeeded, back to `before` when it failed.
    async fn finish(
        self: Arc<Self>,
        mut record: ScalingAction,
        settings: PowerSettings,
        target: Target,
        verb: Verb,
        before: PowerState,
    ) -> bool {
        let (attempt, attempts) = {
            let _permit = self.permits.acquire().await;
            with_retries(&settings, verb, &target, self.commands_allowed).await
        };
        let outcome = if attempt.ok {
            ActionOutcome::Succeeded
        } else {
            ActionOutcome::Failed
        };
        tracing::info!(pool = %target.pool, host = %target.host, action = verb.word(),
            driver = ?settings.driver, ?outcome, attempts, message = %attempt.message,
            "power action");
        let (expected, next) = match (verb, attempt.ok) {
            (Verb::Start, true) => (PowerState::Starting, PowerState::Running),
            (Verb::Stop, true) => (PowerState::Stopping, PowerState::Stopped),
            (Verb::Start, false) => (PowerState::Starting, before),
            (_, false) => (PowerState::Stopping, before),
            (Verb::State, true) => return true,
        };
        record.outcome = outcome;
        record.message = attempt.message;
        record.attempts = attempts;
        let host = target.host.clone();
        let result = self
            .core
            .write_with(&target.pool, move |p, now| {
                record.finished_ms = Some(now);
                // The host may have been removed meanwhile: the record is
                // completed all the same.
                if p.host(&host).is_some_and(|h| h.power_state == expected) {
                    p.set_power_state(&host, next, now)?;
                }
                Ok(((), vec![Mutation::PutScalingAction { action: record }]))
            })
            .await;
        if let Err(e) = result {
            tracing::warn!(pool = %target.pool, host = %target.host, error = %e,
                "cannot record the outcome of a power action; a restart resolves it");
        }
        attempt.ok
    }

    /// After a start or an election: actions a crash left `Pending` are
    /// never run again (the driver may have acted); each is recorded
    /// Failed, and its host, if still `Starting` or `Stopping`, becomes
    /// `Unknown` (`Unavailable` until its next heartbeat proves it runs).
    /// A pool with a `powerStateCommand` then asks it for the truth.
    pub async fn resolve_interrupted(self: &Arc<Self>) {
        let pending = match self
            .store
            .scaling_actions(ScalingActionQuery {
                pending_only: true,
                limit: store::MAX_SCALING_ACTION_PAGE_ROWS,
                ..ScalingActionQuery::default()
            })
            .await
        {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the interrupted power actions");
                return;
            }
        };
        // Only what an earlier process began: this one's own actions are
        // running.
        // Only power actions: a plan's Notify stays Pending until delivered.
        for mut record in pending.into_iter().filter(|r| {
            r.time_ms < self.core.started_ms()
                && matches!(r.action, ScalingActionKind::Start | ScalingActionKind::Stop)
        }) {
            let pool = record.pool.clone();
            let host = record.session_host.clone();
            let result = self
                .core
                .write_with(&pool, |p, now| {
                    record.outcome = ActionOutcome::Failed;
                    record.finished_ms = Some(now);
                    record.message = "the broker stopped before the power driver answered; \
                                      not run again (it may have acted): the host's powerState \
                                      is Unknown until its next heartbeat or power action"
                        .into();
                    let mut ask = None;
                    if let Some(h) = p.host(&host)
                        && matches!(h.power_state, PowerState::Starting | PowerState::Stopping)
                    {
                        p.set_power_state(&host, PowerState::Unknown, now)?;
                        let settings = p.config().power_settings.clone();
                        let h = p.find_host(&host)?;
                        if settings.power_state_command.is_some() {
                            ask = Some((
                                settings,
                                Target {
                                    pool: pool.clone(),
                                    host: host.clone(),
                                    address: h.spec.address.clone(),
                                    mac_address: h.spec.mac_address.clone(),
                                },
                            ));
                        }
                    }
                    let m = vec![Mutation::PutScalingAction {
                        action: record.clone(),
                    }];
                    Ok((ask, m))
                })
                .await;
            match result {
                Ok(Some((settings, target))) => {
                    let power = self.clone();
                    tokio::spawn(async move { power.read_power_state(settings, target).await });
                }
                Ok(None) => {}
                // The pool is gone: its records went with it.
                Err(BrokerError::PoolNotFound(_)) => {}
                Err(e) => {
                    tracing::warn!(%pool, %host, error = %e, "cannot resolve a power action")
                }
            }
            tracing::info!(%pool, %host, "interrupted power action recorded Failed");
        }
    }

    /// The record of `pool`'s power and scaling actions, newest first: at
    /// most `limit`, older than `before_id` when given. 404 when the pool
    /// does not exist; what it shows is durable.
    pub async fn actions(
        &self,
        pool: &str,
        before_id: Option<String>,
        limit: usize,
    ) -> Result<Vec<ScalingAction>, BrokerError> {
        self.core.read(pool, |_| Ok(())).await?;
        self.store
            .scaling_actions(ScalingActionQuery {
                pool: Some(pool.to_string()),
                pending_only: false,
                before_id,
                limit,
            })
            .await
            .map_err(|e| BrokerError::store_unavailable(e.to_string()))
    }

    /// Asks `powerStateCommand` for a host whose power state is `Unknown`;
    /// its output's first word `Running` or `Stopped` (any case) is taken.
    async fn read_power_state(self: Arc<Self>, settings: PowerSettings, target: Target) {
        let a = {
            let _permit = self.permits.acquire().await;
            attempt(&settings, Verb::State, &target, self.commands_allowed).await
        };
        let word = a.message.split_whitespace().next().unwrap_or("");
        let state = match (a.ok, word.to_ascii_lowercase().as_str()) {
            (true, "running") => PowerState::Running,
            (true, "stopped") => PowerState::Stopped,
            _ => {
                tracing::warn!(pool = %target.pool, host = %target.host, message = %a.message,
                    "powerStateCommand did not say Running or Stopped");
                return;
            }
        };
        tracing::info!(pool = %target.pool, host = %target.host, ?state, "power state read");
        let host = target.host.clone();
        let _ = self
            .core
            .write(&target.pool, move |p, now| {
                if p.host(&host)
                    .is_some_and(|h| h.power_state == PowerState::Unknown)
                {
                    p.set_power_state(&host, state, now)?;
                }
                Ok(())
            })
            .await;
    }
}

/// What a power action needs once begun: its Pending record and the
/// driver's inputs.
pub(crate) struct Begun {
    pub record: ScalingAction,
    settings: PowerSettings,
    target: Target,
    verb: Verb,
    before: PowerState,
}

/// The power verb of a start or stop.
pub(crate) fn verb_of(kind: ScalingActionKind) -> Result<Verb, BrokerError> {
    match kind {
        ScalingActionKind::Start => Ok(Verb::Start),
        ScalingActionKind::Stop => Ok(Verb::Stop),
        _ => Err(conflict("only start and stop are power actions".into())),
    }
}

/// Begins a power action under the pool's lock (the one path of manual
/// and scaling-plan actions): checks the pool's driver and the host's
/// state, moves the host to `Starting`/`Stopping` and answers the Pending
/// record, which the caller puts in the same batch. `force` lets a stop go
/// ahead although the host has sessions.
pub(crate) fn begin(
    p: &mut placement::Pool,
    host: &str,
    verb: Verb,
    force: bool,
    actor: &str,
    reason: String,
    now: placement::TimestampMs,
) -> Result<Begun, BrokerError> {
    let kind = if verb == Verb::Start {
        ScalingActionKind::Start
    } else {
        ScalingActionKind::Stop
    };
    let settings = p.config().power_settings.clone();
    let h = p.find_host(host)?;
    let name = p.name().to_string();
    let driver_ok = match (settings.driver, verb) {
        (PowerDriver::None, _) => Err(format!(
            "host pool {name} has no power driver (powerSettings.driver is none)"
        )),
        (PowerDriver::WakeOnLan, Verb::Start) if h.spec.mac_address.is_none() => Err(format!(
            "session host {host} has no macAddress for Wake-on-LAN"
        )),
        (_, Verb::Stop) if settings.power_off_command.is_none() => Err(format!(
            "host pool {name} has no powerSettings.powerOffCommand: the {:?} \
             driver cannot stop hosts without one",
            settings.driver
        )),
        _ => Ok(()),
    };
    driver_ok.map_err(conflict)?;
    let before = h.power_state;
    match (verb, before) {
        (_, PowerState::Starting | PowerState::Stopping) => {
            return Err(conflict(format!(
                "session host {host} is {before:?}: wait for that action to end \
                 (GET /api/v1/hostPools/{name}/scalingActions)"
            )));
        }
        (Verb::Start, PowerState::Running) => {
            return Err(conflict(format!("session host {host} is already Running")));
        }
        (Verb::Stop, PowerState::Stopped) => {
            return Err(conflict(format!("session host {host} is already Stopped")));
        }
        _ => {}
    }
    if verb == Verb::Stop && h.sessions > 0 && !force {
        return Err(conflict(format!(
            "session host {host} has {} session(s); stopping it would end them \
             without a logoff: drain it and log them off, or stop it with \
             force=true",
            h.sessions
        )));
    }
    let target = Target {
        pool: name.clone(),
        host: host.to_string(),
        address: h.spec.address.clone(),
        mac_address: h.spec.mac_address.clone(),
    };
    let running_hosts = p
        .hosts()
        .filter(|h| h.power_state == PowerState::Running)
        .count() as u32;
    let next = if verb == Verb::Start {
        PowerState::Starting
    } else {
        PowerState::Stopping
    };
    p.set_power_state(host, next, now)?;
    let record = ScalingAction {
        running_hosts: Some(running_hosts),
        ..ScalingAction::new(name, host, kind, reason, actor, now)
    };
    Ok(Begun {
        record,
        settings,
        target,
        verb,
        before,
    })
}

fn verb_past(v: Verb) -> &'static str {
    match v {
        Verb::Start => "started",
        Verb::Stop => "stopped",
        Verb::State => "asked",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_magic_packet_is_six_ff_then_sixteen_macs() {
        let mac = [0x52, 0x54, 0, 0xab, 0xcd, 1];
        let p = magic_packet(mac);
        assert_eq!(&p[..6], &[0xFF; 6]);
        for i in 0..16 {
            assert_eq!(&p[6 + i * 6..12 + i * 6], &mac, "copy {i}");
        }
    }

    #[test]
    fn a_pool_offers_only_the_actions_its_driver_and_this_broker_can_take() {
        let none = PowerSettings::default();
        assert_eq!(actions(&none, true), Vec::<&str>::new());
        let commands = PowerSettings {
            driver: PowerDriver::Command,
            power_on_command: Some("true".into()),
            power_off_command: Some("true".into()),
            ..PowerSettings::default()
        };
        assert_eq!(actions(&commands, true), ["start", "stop"]);
        // A broker without --allow-power-commands runs none of them.
        assert_eq!(actions(&commands, false), Vec::<&str>::new());
        let wol = PowerSettings {
            driver: PowerDriver::WakeOnLan,
            ..PowerSettings::default()
        };
        assert_eq!(actions(&wol, false), ["start"]);
        let wol_and_off = PowerSettings {
            power_off_command: Some("true".into()),
            ..wol
        };
        assert_eq!(actions(&wol_and_off, true), ["start", "stop"]);
    }

    fn target() -> Target {
        Target {
            pool: "p".into(),
            host: "h1".into(),
            address: "10.0.0.1:3389".into(),
            mac_address: None,
        }
    }

    #[tokio::test]
    async fn values_reach_a_command_only_through_its_environment() {
        // A host name cannot be injected: the text is fixed, the value is
        // a variable's.
        let mut t = target();
        t.host = "h1; echo injected".into();
        let a = run_command(
            "printf '%s|%s|%s' \"$DESKBROKER_ACTION\" \"$DESKBROKER_HOST\" \"${DESKBROKER_ADMIN_TOKEN-unset}\"",
            Verb::Start,
            &t,
            Duration::from_secs(10),
        )
        .await;
        assert!(a.ok, "{a:?}");
        assert_eq!(a.message, "start|h1; echo injected|unset");
    }

    #[tokio::test]
    async fn output_is_bounded_and_a_failure_says_its_exit() {
        let a = run_command(
            "head -c 100000 /dev/zero | tr '\\0' x; exit 3",
            Verb::Stop,
            &target(),
            Duration::from_secs(10),
        )
        .await;
        assert!(!a.ok);
        assert!(
            a.message.starts_with("exited with exit status: 3"),
            "{}",
            a.message
        );
        assert!(a.message.len() <= MAX_POWER_OUTPUT_BYTES + 64);
    }

    #[tokio::test]
    async fn a_command_past_its_timeout_is_killed() {
        let a = run_command("sleep 30", Verb::Start, &target(), Duration::from_secs(1)).await;
        assert!(!a.ok);
        assert!(
            a.message.contains("killed after its timeout of 1 s"),
            "{}",
            a.message
        );
    }
}
