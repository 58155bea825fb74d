//! The deskbroker service: the HTTP API over the placement engine, with
//! every acknowledged change durable in a [`store::Store`].
//!
//! Shape: the [`core::Core`] holds each pool's engine behind its own lock,
//! the [`writer`] and the [`clock::Clock`]; [`state::Broker`] is the core
//! with the [`state::Settings`] it was built with and the services that
//! keep what the engines do not, each owning its state and holding the
//! core. Handlers in [`api`] extract the core or the one service they use
//! and call the core's `write` or `read`, or the service; the writer
//! group-commits changes and releases answers once they are durable. A
//! ticker applies the passing of time (Pending expiry, heartbeat loss)
//! every [`TICK_INTERVAL`].

pub mod access;
pub mod api;
pub mod audit;
pub mod autoscale;
pub mod clock;
pub mod connect;
pub mod core;
pub mod credentials;
pub mod directory;
pub mod enroll;
pub mod error;
pub mod feed;
pub mod front_door;
pub mod heartbeat;
pub mod keys;
pub mod listener;
pub mod logoffs;
pub mod messages;
pub mod portal;
pub mod power;
pub mod replica;
pub mod server;
pub mod state;
pub mod sync;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testkit;
pub mod tls;
pub mod workspace;
pub mod writer;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use api::ApiError;
pub use error::BrokerError;
pub use state::{Broker, Settings};

/// How often Pending sessions are expired and silent hosts marked
/// unavailable, besides the check at the start of every connect.
pub const TICK_INTERVAL: Duration = Duration::from_millis(500);

/// Loads the store and builds the broker (nothing is served yet).
pub async fn open(
    store: Arc<dyn store::Store>,
    settings: Settings,
) -> Result<Arc<Broker>, store::StoreError> {
    telemetry::init();
    let snapshot = store.load().await?;
    let broker = Arc::new(Broker::new(store, snapshot, settings));
    broker
        .save_new_signing_key()
        .await
        .map_err(|e| store::StoreError::Task(format!("cannot keep the signing key: {e}")))?;
    Ok(broker)
}

/// Serves the API on `listener` (a `TcpListener` for plain HTTP, or
/// [`tls::Listening::tls`] for HTTPS) until `shutdown` resolves or the
/// store fails; then finishes in-flight requests (for up to
/// [`server::SHUTDOWN_GRACE`]) and flushes the store.
pub async fn serve(
    broker: Arc<Broker>,
    listener: impl Into<tls::Listening>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let ticker = spawn_ticker(broker.clone());
    let failed = {
        let b = broker.clone();
        async move { b.core().writer().failed().await }
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<Option<String>>();
    tokio::spawn(async move {
        let reason = tokio::select! {
            () = shutdown => None,
            e = failed => Some(e),
        };
        let _ = stop_tx.send(reason);
    });
    let (reason_tx, reason_rx) = tokio::sync::oneshot::channel();
    let app = api::router(broker.clone());
    // Bounded: see `server` (header-read timeout, shutdown grace) and
    // `listener` (connection caps).
    let stop = async move {
        let reason = stop_rx.await.unwrap_or(None);
        let _ = reason_tx.send(reason);
    };
    server::serve(listener.into(), app, stop)
        .await
        .map_err(|e| format!("server: {e}"))?;
    ticker.abort();
    let reason = reason_rx.await.unwrap_or(None);
    if let Some(e) = reason {
        return Err(format!("the store failed, so the broker stopped: {e}"));
    }
    broker
        .core()
        .writer()
        .flush()
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Applies the passing of time to every pool every [`TICK_INTERVAL`],
/// until aborted.
pub fn spawn_ticker(broker: Arc<Broker>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        // Rule A10: whoever decides now resolves the power actions a crash
        // (or a lost leader) left Pending, before anything else runs.
        broker.power().resolve_interrupted().await;
        // Rules A1–A7: the scaling plans' evaluator runs with the ticker,
        // so only where the engines are (the leader), and stops with it.
        let evaluator = broker.autoscale().clone().run();
        let ticks = async move {
            let mut every = tokio::time::interval(TICK_INTERVAL);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                if broker.core().writer().failure().is_some() {
                    // Nothing can be saved; the replica re-elects or stops.
                    continue;
                }
                if let Err(e) = broker.core().tick_all().await {
                    tracing::warn!(error = %e, "tick failed");
                }
            }
        };
        tokio::join!(ticks, evaluator);
    })
}
