//! The broker side of the benchmarks (`deskbroker bench storm` and
//! `deskbroker-devbench`): the private brokers they start (`deskbroker
//! serve` on a temporary data directory, stopped at the end), and every API
//! call they make.
//!
//! The calls go through the contract's client (`api::Client`: typed
//! `connect` and `heartbeat`, JSON for the rest) and are gathered here, in
//! [`Broker`]; the benchmarks see typed methods, not paths.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use api::types::{ConnectInput, HeartbeatInput};
use api::{BrokerUrl, Client};
use placement::HostMetrics;
use reqwest::Method;

/// How long a private broker may take to start listening.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a private broker may take to stop after SIGTERM before it is
/// killed.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// The broker's HTTP API as the benchmarks use it.
pub struct Broker {
    client: Client,
}

impl Broker {
    /// A client of the broker at `url`. The token is `token` (the flag or
    /// `DESKBROKER_TOKEN`), else the admin token file, found as every
    /// other CLI command finds it ([`crate::token::admin_token`]). An
    /// `https://` broker's certificate is checked as `trust` says.
    pub fn new(url: &str, token: Option<&str>, trust: &api::Trust) -> anyhow::Result<Broker> {
        let base = BrokerUrl::parse(url).map_err(|e| anyhow::anyhow!("{e} (--broker)"))?;
        let client = Client::with_trust(
            base,
            concat!("deskbroker-bench/", env!("CARGO_PKG_VERSION")),
            trust,
        )?;
        Ok(Broker {
            client: match crate::token::admin_token(token)? {
                Some(token) => client.with_token(token),
                None => client,
            },
        })
    }

    /// Creates pool `pool` with `body`, replacing a pool of that name left
    /// from an earlier run (with its hosts and sessions).
    pub async fn replace_pool(&self, pool: &str, body: &Value) -> anyhow::Result<()> {
        let path = ["hostPools", pool];
        if self
            .client
            .send(Method::GET, &path, &[], None)
            .await
            .is_ok()
        {
            self.client
                .send(Method::DELETE, &path, &[("force", "true")], None)
                .await?;
        }
        self.client
            .send(Method::PUT, &path, &[], Some(body))
            .await
            .context("cannot create the benchmark pool")?;
        Ok(())
    }

    /// Creates or replaces scaling plan `name`.
    pub async fn put_scaling_plan(&self, name: &str, plan: &Value) -> anyhow::Result<()> {
        self.client
            .send(Method::PUT, &["scalingPlans", name], &[], Some(plan))
            .await
            .with_context(|| format!("cannot put the scaling plan {name}"))?;
        Ok(())
    }

    /// Adds session host `host` at `address` to `pool`.
    pub async fn add_host(&self, pool: &str, host: &str, address: &str) -> anyhow::Result<()> {
        self.client
            .send(
                Method::PUT,
                &["hostPools", pool, "sessionHosts", host],
                &[],
                Some(&json!({"address": address})),
            )
            .await?;
        Ok(())
    }

    /// Sends one heartbeat of `host` with its CPU and nothing else.
    pub async fn heartbeat(&self, pool: &str, host: &str, cpu_percent: f64) -> anyhow::Result<()> {
        self.client
            .heartbeat(
                pool,
                host,
                &HeartbeatInput {
                    metrics: HostMetrics {
                        cpu_percent: Some(cpu_percent),
                        ..HostMetrics::default()
                    },
                    ..HeartbeatInput::default()
                },
            )
            .await?;
        Ok(())
    }

    /// Places `user` in `pool`. A refusal answers the API's error code;
    /// anything that is not an answer of the broker, `TransportError`.
    pub async fn connect(&self, pool: &str, user: &str) -> Result<(), String> {
        let input = ConnectInput {
            user: user.to_string(),
            ..ConnectInput::default()
        };
        match self.client.connect(pool, &input).await {
            Ok(_) => Ok(()),
            Err(e) => Err(e
                .code()
                .map_or_else(|| "TransportError".to_string(), |c| c.to_string())),
        }
    }

    /// The pool's `sessionCount`, as its GET answers it.
    pub async fn session_count(&self, pool: &str) -> anyhow::Result<Value> {
        let p = self
            .client
            .send(Method::GET, &["hostPools", pool], &[], None)
            .await?;
        Ok(p.get("sessionCount").cloned().unwrap_or(Value::Null))
    }

    /// A registration token of `pool` for at most `max_hosts` hosts.
    pub async fn registration_token(&self, pool: &str, max_hosts: usize) -> anyhow::Result<String> {
        let v = self
            .client
            .send(
                Method::POST,
                &["hostPools", pool, "registrationToken"],
                &[],
                Some(&json!({"maxHosts": max_hosts})),
            )
            .await?;
        v.get("token")
            .and_then(Value::as_str)
            .map(str::to_string)
            .context("the registration token answer has no token")
    }

    /// The session hosts of `pool`, as their list answers them (every page).
    pub async fn hosts(&self, pool: &str) -> anyhow::Result<Vec<Value>> {
        let hosts = self
            .client
            .send(Method::GET, &["hostPools", pool, "sessionHosts"], &[], None)
            .await?;
        Ok(match hosts.get("value") {
            Some(Value::Array(hosts)) => hosts.clone(),
            _ => Vec::new(),
        })
    }
}

/// A broker started for the benchmark: `deskbroker serve` on port 0 with a
/// temporary data directory, stopped at the end (killed if dropped).
pub struct PrivateBroker {
    child: tokio::process::Child,
    pub url: String,
    pub token: String,
    /// The RDP front door's address, when it was started with one.
    pub rdp: Option<SocketAddr>,
    _dir: tempfile::TempDir,
}

impl PrivateBroker {
    /// Starts `deskbroker serve` (`program` is the `deskbroker` binary)
    /// with `extra` flags and a fresh random admin token; with
    /// `rdp_default_pool`, also its RDP front door (`--rdp-listen
    /// 127.0.0.1:0 --rdp-default-pool POOL`).
    pub async fn start(
        program: &Path,
        rdp_default_pool: Option<&str>,
        extra: &[&str],
    ) -> anyhow::Result<PrivateBroker> {
        PrivateBroker::start_with_token(program, rdp_default_pool, extra, &new_token()).await
    }

    /// Like [`PrivateBroker::start`], with admin `token` (replicas of one
    /// broker share theirs).
    pub async fn start_with_token(
        program: &Path,
        rdp_default_pool: Option<&str>,
        extra: &[&str],
        token: &str,
    ) -> anyhow::Result<PrivateBroker> {
        let dir = tempfile::tempdir().context("cannot create a temporary data dir")?;
        let token = token.to_string();
        let mut command = tokio::process::Command::new(program);
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .args(extra);
        if let Some(pool) = rdp_default_pool {
            command.args(["--rdp-listen", "127.0.0.1:0", "--rdp-default-pool", pool]);
            command.args(unbounded_source_args());
        }
        command.env("DESKBROKER_ADMIN_TOKEN", &token);
        let (child, mut lines) = spawn_child(command, "a private broker")?;
        let ready = ready_line(&mut lines, "the private broker").await?;
        let url = ready
            .api
            .context("the private broker's ready line names no API")?;
        let rdp = ready.rdp;
        anyhow::ensure!(
            rdp_default_pool.is_none() || rdp.is_some(),
            "the private broker's ready line names no RDP front door"
        );
        Ok(PrivateBroker {
            child,
            url,
            token,
            rdp,
            _dir: dir,
        })
    }

    /// A client of this broker with its admin token.
    pub fn client(&self) -> anyhow::Result<Broker> {
        Broker::new(&self.url, Some(&self.token), &api::Trust::system())
    }

    /// The broker's process id while it runs (for its CPU time).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// SIGTERM, so the broker flushes and stops cleanly; killed if it has
    /// not stopped within [`STOP_TIMEOUT`].
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id().and_then(|id| i32::try_from(id).ok())
            && pid > 0
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        if tokio::time::timeout(STOP_TIMEOUT, self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// The `serve` flags that lift an RDP front door's per-source bounds (its
/// `FrontDoorFlags`): a benchmark's load comes from one address, and the
/// bounds of a real front door would measure themselves, not the relay.
pub fn unbounded_source_args() -> Vec<String> {
    let unbounded = u32::MAX.to_string();
    [
        "--rdp-max-connections-per-source",
        "--rdp-max-handshakes-per-source",
        "--rdp-handshakes-per-source-per-minute",
        "--rdp-new-sessions-per-source-per-minute",
    ]
    .into_iter()
    .flat_map(|flag| [flag.to_string(), unbounded.clone()])
    .collect()
}

/// Lines read from a child's standard output.
pub type ChildLines = tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>;

/// Starts `command` (`what` names it in errors) quiet, with warnings only
/// on its standard error, killed if it is dropped, and answers it with the
/// lines of its standard output, where it says where it listens.
pub fn spawn_child(
    mut command: tokio::process::Command,
    what: &str,
) -> anyhow::Result<(tokio::process::Child, ChildLines)> {
    let mut child = command
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {what}"))?;
    let stdout = child.stdout.take().context("no stdout")?;
    Ok((child, tokio::io::BufReader::new(stdout).lines()))
}

/// The ready line ([`crate::ready`]) of the child printing `lines`, within
/// [`START_TIMEOUT`]; `what` names the child in errors.
pub async fn ready_line(lines: &mut ChildLines, what: &str) -> anyhow::Result<crate::ready::Ready> {
    tokio::time::timeout(START_TIMEOUT, async {
        while let Some(line) = lines.next_line().await? {
            if let Some(ready) = crate::ready::Ready::parse(&line) {
                return Ok(ready);
            }
        }
        anyhow::bail!("{what} exited before listening")
    })
    .await
    .with_context(|| format!("{what} did not start in time"))?
}

/// A fresh admin token for private brokers.
pub fn new_token() -> String {
    format!("bench-{:032x}", rand::random::<u128>())
}
