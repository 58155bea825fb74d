//! The session-host agent, `deskbroker agent`: runs on each session host,
//! registers it with the broker using a registration token, then sends a
//! heartbeat every interval (30 s by default, rule H4) with the host's
//! metrics (CPU, memory, disk queue and latency, rule H2), an optional
//! custom load index (H3), the host's own policy (H6) and its full session
//! list, which the broker reconciles with its own (S4) and which keeps the
//! host `Available` (S7).
//!
//! Code map:
//! - [`config`]: flags, environment and the TOML file, validated once;
//! - [`runner`]: the loop (register, sample, send, back off, stop), over
//!   the contract's one client (`api::Client`) and its error mapping;
//! - [`state`]: the saved host credential;
//! - [`metrics`] and [`diskstats`]: CPU, memory and disk load from `/proc`;
//! - [`load_script`], [`sessions`], [`probe`]: the programs the agent runs;
//! - [`messages`] and [`orders`]: what heartbeat answers ask of the host
//!   (messages to users, logoffs, rule W5).
//! - [`windows`] and [`exposition`]: the other source of truth, Windows
//!   hosts watched through their windows_exporter (rules W1–W4), each
//!   driven by the same loop as the machine the agent runs on.
//!
//! **The agent never exits because of the broker**: an unreachable broker,
//! a refused heartbeat or a revoked credential is logged and retried; only
//! a configuration it cannot start with, or a signal, stops it.

pub mod backoff;
pub mod config;
pub mod diskstats;
pub mod exposition;
pub mod image_version;
pub mod load_script;
pub mod messages;
pub mod metrics;
pub mod orders;
pub mod probe;
pub mod runner;
pub mod sessions;
pub mod state;
pub mod windows;
pub mod xrdp;

use std::path::PathBuf;

pub use config::{AgentArgs, Config, ConfigError};
pub use metrics::{SystemSample, SystemSampler, sample_once};
pub use runner::{Sampler, run};

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    State(#[from] state::StateError),
    #[error(
        "no registration token and no saved host credential in {}: create a token with \
         POST /api/v1/hostPools/{host_pool}/registrationToken and pass it with \
         --registration-token, --registration-token-file, DESKBROKER_REGISTRATION_TOKEN or \
         registration_token (or registration_token_file) in the config file",
        state_file.display()
    )]
    NoRegistrationToken {
        host_pool: String,
        state_file: PathBuf,
    },
    /// The HTTP client could not be set up.
    #[error("{0}")]
    Client(String),
}

/// `deskbroker agent`: validates the configuration and runs until SIGTERM
/// or SIGINT.
pub async fn run_with_args(args: AgentArgs) -> Result<(), AgentError> {
    let path = config::config_path(args.config.as_deref());
    let read = path.as_deref();
    let file = config::FileConfig::read(read)?;
    if windows::WatchConfig::wanted(&file) {
        let config =
            windows::WatchConfig::resolve(args, file).map_err(|e| e.with_file_read(read))?;
        return windows::run(config, shutdown_signal()).await;
    }
    let config = Config::resolve(args, file, config::machine_hostname, config::primary_ipv4)
        .map_err(|e| e.with_file_read(read))?;
    run(config, shutdown_signal()).await
}

/// Completes on SIGINT or SIGTERM (systemd's stop).
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let ctrl_c = tokio::signal::ctrl_c();
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = ctrl_c => {},
                _ = term.recv() => {},
            }
        }
        Err(e) => {
            tracing::warn!("cannot listen for SIGTERM ({e}); only SIGINT stops the agent");
            let _ = ctrl_c.await;
        }
    }
    tracing::info!("stopping");
}
