//! What every door does once it knows who connects to which pool, and
//! before it relays a byte: place the user (holding the client while a host
//! starts, rule A8), count a new session against its source, dial the
//! host, and when a new session's host cannot be reached, log that session
//! off and place the user again elsewhere (rule R5). The RDP front door and
//! the RD Gateway differ only in how they read the client before, and how
//! they answer it after.
//!
//! After it, every door leaves the session as rules R4 and S9 say, through
//! one `Session` and its door's table of live sessions (`session.rs`).
//!
//! Shared by every door as well: one set of [`Bounds`], one [`Outcome`]
//! for how a connection ended, and the doors' metrics, described once
//! ([`describe_metrics`]).

mod bounds;
mod outcome;
mod session;

pub use bounds::Bounds;
pub use outcome::{Outcome, describe_metrics};
pub(crate) use session::{Live, Session};

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use placement::Placement;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use crate::front_door::{LOGON_EVIDENCE_CLIENT_BYTES, LOGON_EVIDENCE_HOST_BYTES};
use crate::hold::{self, Hold, WaitEnd, Waited};
use crate::placer::{ConnectInput, Placer, PlacerError};
use crate::sources::SourceGuard;

/// What happened to one connection: its log line and metrics, the same for
/// every door.
#[derive(Default)]
pub(crate) struct Report {
    pub user: Option<String>,
    pub pool: Option<String>,
    pub host: Option<String>,
    pub session_id: Option<String>,
    pub reconnect: bool,
    pub client_to_host_bytes: u64,
    pub host_to_client_bytes: u64,
    pub detail: Option<String>,
    /// The first PDU's refusal reason, for the refusal counter.
    pub handshake_reason: Option<&'static str>,
}

impl Report {
    /// The connection's log line: `what` ("rdp connection", "rd gateway
    /// connection"), its outcome and how long it lasted.
    pub(crate) fn log(&self, what: &str, peer: SocketAddr, outcome: &str, duration: Duration) {
        tracing::info!(
            %peer,
            user = self.user.as_deref().unwrap_or("-"),
            pool = self.pool.as_deref().unwrap_or("-"),
            host = self.host.as_deref().unwrap_or("-"),
            session = self.session_id.as_deref().unwrap_or("-"),
            reconnect = self.reconnect,
            outcome,
            duration_ms = duration.as_millis() as u64,
            client_to_host_bytes = self.client_to_host_bytes,
            host_to_client_bytes = self.host_to_client_bytes,
            detail = self.detail.as_deref().unwrap_or(""),
            "{what}"
        );
    }
}

/// Rule S9's evidence that a logon can have taken place on a connection
/// (`first_pdu_bytes` of the client's are not counted: a front door's
/// Connection Request).
pub(crate) fn logon_evidence(report: &Report, first_pdu_bytes: usize) -> bool {
    report.host_to_client_bytes >= LOGON_EVIDENCE_HOST_BYTES
        && report
            .client_to_host_bytes
            .saturating_sub(first_pdu_bytes as u64)
            >= LOGON_EVIDENCE_CLIENT_BYTES
}

/// Connects to a session host within `timeout`, without Nagle's delay.
pub(crate) async fn dial(address: &str, timeout: Duration) -> io::Result<TcpStream> {
    match tokio::time::timeout(timeout, TcpStream::connect(address)).await {
        Ok(Ok(stream)) => {
            let _ = stream.set_nodelay(true);
            Ok(stream)
        }
        Ok(Err(e)) => Err(e),
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no connection within {timeout:?}"),
        )),
    }
}

/// Ends a session a door made, logging (not failing) if the broker refuses.
pub(crate) async fn release<P: Placer>(placer: &P, door: &str, pool: &str, session_id: &str) {
    if let Err(e) = placer.logoff(pool, session_id).await {
        tracing::warn!(pool, session = session_id, error = %e, "{door}: could not log off the session");
    }
}

/// The client of a door, watched while it is held for a starting host.
pub(crate) trait Client {
    /// Resolves true once the client has gone, false once it has sent
    /// something (kept, to be judged later). Must be cancel-safe.
    fn gone(&mut self) -> impl Future<Output = bool> + Send + '_;
}

/// What tells one door from another in logs and metrics.
pub(crate) struct Kind {
    /// The door's name in log lines.
    pub name: &'static str,
    /// The gauge of its connections held while a host starts (A8).
    pub waiting_gauge: &'static str,
    /// The counter of the sessions it ended for want of evidence of a
    /// logon (S9), if it keeps one.
    pub without_logon: Option<&'static str>,
}

/// The RDP front door.
pub(crate) const RDP: Kind = Kind {
    name: "rdp",
    waiting_gauge: "deskbroker_rdp_waiting_connections",
    without_logon: Some("deskbroker_rdp_sessions_without_logon_total"),
};
/// The RD Gateway.
pub(crate) const RD_GATEWAY: Kind = Kind {
    name: "rd gateway",
    waiting_gauge: "deskbroker_rdg_waiting_channels",
    without_logon: None,
};
/// The browser's door.
pub(crate) const WEB: Kind = Kind {
    name: "web rdp",
    waiting_gauge: "deskbroker_web_waiting_connections",
    without_logon: None,
};

/// Where a door places: the pool, and the bounds it places under.
pub(crate) struct Door<'a, P> {
    pub placer: &'a P,
    pub pool: &'a str,
    pub hold: Hold<'a>,
    pub source: &'a SourceGuard,
    /// Placements tried when hosts cannot be reached (R5).
    pub attempts: usize,
    pub dial_timeout: Duration,
}

/// Why a door has no host for its client (the report says more).
pub(crate) enum NoHost {
    /// The wait for a starting host ended (a bound, the time, the client).
    Waited(WaitEnd),
    /// The broker refused, or could not be asked.
    Refused(PlacerError),
    /// Too many new sessions from this source.
    SourceLimit,
    /// No host could be reached: the user's own session's host, or every
    /// host tried for a new session.
    Unreachable,
}

impl NoHost {
    /// The connection's outcome, the same at every door (which may then
    /// tell the refusals of the broker apart as it must).
    pub(crate) fn outcome(self) -> Outcome {
        match self {
            NoHost::Waited(WaitEnd::Limit(reason)) => Outcome::WaitingLimit(reason),
            NoHost::Waited(WaitEnd::Timeout) => Outcome::HostStartTimeout,
            NoHost::Waited(WaitEnd::ClientLeft) => Outcome::ClientLeft,
            NoHost::Refused(e) => Outcome::of_refusal(&e),
            NoHost::SourceLimit => Outcome::SourceLimit,
            NoHost::Unreachable => Outcome::HostUnreachable,
        }
    }
}

impl<'a, P: Placer> Door<'a, P> {
    /// `kind`'s door placing in `pool` under `bounds`, its held
    /// connections counted in `waiting`.
    pub(crate) fn new(
        kind: &Kind,
        placer: &'a P,
        pool: &'a str,
        bounds: &Bounds,
        waiting: &'a Arc<Semaphore>,
        source: &'a SourceGuard,
    ) -> Door<'a, P> {
        Door {
            placer,
            pool,
            hold: Hold {
                wait: bounds.host_start_wait,
                retry_interval: bounds.host_start_retry_interval,
                max_waiting: bounds.max_waiting_connections,
                waiting,
                gauge: kind.waiting_gauge,
                door: kind.name,
            },
            source,
            attempts: bounds.max_placement_attempts,
            dial_timeout: bounds.host_connect_timeout,
        }
    }

    /// Places `request` and dials the chosen host: the host's connection
    /// and the placement, or why there is none. A new session whose host
    /// cannot be reached is logged off and the user placed again without
    /// that host, up to `attempts` times; a user's existing session is
    /// never replaced by a new one elsewhere (R5). Fills the report's
    /// host, session and detail as it goes.
    pub(crate) async fn place_and_dial(
        &self,
        mut request: ConnectInput,
        client: &mut impl Client,
        report: &mut Report,
    ) -> Result<(TcpStream, Placement), NoHost> {
        let mut counted = false;
        for _ in 0..self.attempts {
            let placed = hold::connect_or_wait(
                self.placer,
                self.pool,
                &request,
                &self.hold,
                self.source,
                client.gone(),
            )
            .await;
            let placed = match placed {
                Ok(p) => p,
                Err(Waited::Gave(end, detail)) => {
                    report.detail = Some(detail);
                    return Err(NoHost::Waited(end));
                }
                // No host left once those that could not be reached are
                // set aside: every host tried could not be reached (R5),
                // which is what the client is told, not that the pool has
                // no host.
                Err(Waited::Refused(PlacerError::Refused {
                    code: api::ErrorCode::NoSessionHostAvailable,
                    message,
                })) if !request.exclude.is_empty() => {
                    report.detail = Some(format!(
                        "no host could be reached ({}); then: {message}",
                        request.exclude.join(", ")
                    ));
                    return Err(NoHost::Unreachable);
                }
                Err(Waited::Refused(e)) => {
                    report.detail = Some(e.to_string());
                    return Err(NoHost::Refused(e));
                }
            };
            report.host = Some(placed.host.clone());
            report.session_id = Some(placed.session_id.clone());
            report.reconnect = placed.reconnect;
            if !placed.reconnect && !counted {
                // A new session counts against its source's share per
                // minute (one per connection, whatever R5's retries place).
                if let Err(refusal) = self.source.new_session() {
                    release(self.placer, self.hold.door, self.pool, &placed.session_id).await;
                    report.session_id = None;
                    report.detail = Some(format!("{}: too many new sessions", refusal.reason()));
                    return Err(NoHost::SourceLimit);
                }
                counted = true;
            }
            match dial(&placed.address, self.dial_timeout).await {
                Ok(host) => return Ok((host, placed)),
                Err(e) => {
                    report.detail = Some(format!("{} ({}): {e}", placed.host, placed.address));
                    if placed.reconnect {
                        return Err(NoHost::Unreachable);
                    }
                    release(self.placer, self.hold.door, self.pool, &placed.session_id).await;
                    report.session_id = None;
                    request.exclude.push(placed.host);
                }
            }
        }
        Err(NoHost::Unreachable)
    }
}
