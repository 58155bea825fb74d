//! Rule A8 at the doors: a connect the broker answers 503
//! `SessionHostStarting` (the pool starts a host for this user) is held,
//! not refused, and asked again until it is placed, refused otherwise, the
//! client leaves, or the bound has passed. Shared by the RDP front door
//! (`front_door.rs`: the client waits for its Connection Confirm) and the
//! RD Gateway (`rd_gateway.rs`: the client waits for its channel response).
//! Held connections count against a bound per source
//! ([`crate::sources::MAX_WAITING_PER_SOURCE`]) and in total.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::placer::{ConnectInput, Placer, PlacerError};
use crate::sources::SourceGuard;

/// How long a door holds, how often it asks again, and the bound on held
/// connections of one door (a semaphore of that many permits).
#[derive(Clone, Debug)]
pub(crate) struct Hold<'a> {
    pub wait: Duration,
    pub retry_interval: Duration,
    pub max_waiting: usize,
    pub waiting: &'a Arc<Semaphore>,
    /// The gauge of held connections (each door has its own).
    pub gauge: &'static str,
    /// The door's name in log lines.
    pub door: &'static str,
}

/// How a connect that was not placed ended.
pub(crate) enum Waited {
    /// The broker's refusal, or it could not be asked.
    Refused(PlacerError),
    /// The wait for a starting host ended without a placement.
    Gave(WaitEnd, String),
}

/// Why a wait ended without a placement.
pub(crate) enum WaitEnd {
    /// A waiting bound was full (per source, or `waiting_full` in total).
    Limit(&'static str),
    /// No host within the wait.
    Timeout,
    /// The client closed meanwhile.
    ClientLeft,
}

/// `Placer::connect`, holding the client while the broker answers 503
/// `SessionHostStarting`: asks again every `retry_interval` until it places
/// the user, refuses otherwise, `client_gone` resolves true (the client
/// closed; false: it sent bytes, so it is watched no more), or `wait` has
/// passed. The connection counts against the waiting bounds while held.
/// `client_gone` is polled only while the connection is held, and dropped
/// unfinished when the wait ends otherwise: it must be cancel-safe.
pub(crate) async fn connect_or_wait<P, F>(
    placer: &P,
    pool: &str,
    request: &ConnectInput,
    hold: &Hold<'_>,
    source: &SourceGuard,
    client_gone: F,
) -> Result<placement::Placement, Waited>
where
    P: Placer,
    F: Future<Output = bool>,
{
    tokio::pin!(client_gone);
    let mut held = None;
    let mut deadline = Instant::now();
    let mut watch_client = true;
    loop {
        let refusal = match placer.connect(pool, request).await {
            Ok(p) => return Ok(p),
            Err(PlacerError::Refused {
                code: api::ErrorCode::SessionHostStarting,
                message,
            }) => message,
            Err(e) => return Err(Waited::Refused(e)),
        };
        if held.is_none() {
            let Ok(total) = hold.waiting.clone().try_acquire_owned() else {
                return Err(Waited::Gave(
                    WaitEnd::Limit("waiting_full"),
                    format!("{refusal}; {} connections wait already", hold.max_waiting),
                ));
            };
            let per_source = source.wait().map_err(|r| {
                Waited::Gave(
                    WaitEnd::Limit(r.reason()),
                    format!("{refusal}; this source has connections waiting already"),
                )
            })?;
            held = Some((total, per_source, WaitingGauge::new(hold.gauge)));
            deadline = Instant::now() + hold.wait;
            tracing::info!(
                pool,
                user = request.user,
                detail = refusal,
                "{}: holding the connection while a session host starts",
                hold.door
            );
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(Waited::Gave(
                WaitEnd::Timeout,
                format!("{refusal}; not available within {:?}", hold.wait),
            ));
        }
        let pause = tokio::time::sleep(hold.retry_interval.min(deadline - now));
        tokio::pin!(pause);
        loop {
            tokio::select! {
                () = &mut pause => break,
                gone = &mut client_gone, if watch_client => match gone {
                    true => {
                        return Err(Waited::Gave(
                            WaitEnd::ClientLeft,
                            "the client closed while a session host was starting".into(),
                        ));
                    }
                    // It sent something before our answer: stop watching
                    // (what it sent is judged later).
                    false => watch_client = false,
                },
            }
        }
    }
}

/// Counts a held connection in its door's gauge while it waits.
struct WaitingGauge(&'static str);

impl WaitingGauge {
    fn new(gauge: &'static str) -> WaitingGauge {
        metrics::gauge!(gauge).increment(1.0);
        WaitingGauge(gauge)
    }
}

impl Drop for WaitingGauge {
    fn drop(&mut self) {
        metrics::gauge!(self.0).decrement(1.0);
    }
}
