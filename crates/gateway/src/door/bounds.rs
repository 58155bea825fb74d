//! The bounds every door works under: one set, held by each door's
//! settings, so that a flag that bounds one door bounds them all alike.

use std::time::Duration;

use crate::front_door::{
    HOST_ANSWER_TIMEOUT, HOST_CONNECT_TIMEOUT, HOST_START_RETRY_INTERVAL, HOST_START_WAIT,
    IDLE_TIMEOUT_WITHOUT_LOGON, MAX_CONNECTIONS, MAX_PLACEMENT_ATTEMPTS, MAX_WAITING_CONNECTIONS,
    RELAY_IDLE_TIMEOUT,
};
use crate::pdu::HANDSHAKE_TIMEOUT;
use crate::sources::Limits;

/// What bounds one door's connections, from accept to the relay's end;
/// [`Bounds::default`] gives the RDP front door's named defaults.
#[derive(Clone, Debug)]
pub struct Bounds {
    /// Connections open at once; at the limit the door stops accepting.
    pub max_connections: usize,
    /// How long the client may take over what it must say before it is
    /// placed: the front door's first PDU, each step of an RD Gateway
    /// tunnel's setup, a browser's RDCleanPath request.
    pub handshake_timeout: Duration,
    /// How long dialling a session host may take before it counts as
    /// unreachable.
    pub host_connect_timeout: Duration,
    /// How long a host may take to answer what the door forwarded first
    /// (see [`HOST_ANSWER_TIMEOUT`]).
    pub host_answer_timeout: Duration,
    /// Placements tried for one connection when hosts are unreachable (R5).
    pub max_placement_attempts: usize,
    /// Per-source bounds (`sources.rs`).
    pub source_limits: Limits,
    /// Rule A8's hold: see [`HOST_START_WAIT`].
    pub host_start_wait: Duration,
    /// See [`HOST_START_RETRY_INTERVAL`].
    pub host_start_retry_interval: Duration,
    /// See [`MAX_WAITING_CONNECTIONS`].
    pub max_waiting_connections: usize,
    /// See [`RELAY_IDLE_TIMEOUT`].
    pub relay_idle_timeout: Duration,
    /// See [`IDLE_TIMEOUT_WITHOUT_LOGON`].
    pub idle_timeout_without_logon: Duration,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            max_connections: MAX_CONNECTIONS,
            handshake_timeout: HANDSHAKE_TIMEOUT,
            host_connect_timeout: HOST_CONNECT_TIMEOUT,
            host_answer_timeout: HOST_ANSWER_TIMEOUT,
            max_placement_attempts: MAX_PLACEMENT_ATTEMPTS,
            source_limits: Limits::default(),
            host_start_wait: HOST_START_WAIT,
            host_start_retry_interval: HOST_START_RETRY_INTERVAL,
            max_waiting_connections: MAX_WAITING_CONNECTIONS,
            relay_idle_timeout: RELAY_IDLE_TIMEOUT,
            idle_timeout_without_logon: IDLE_TIMEOUT_WITHOUT_LOGON,
        }
    }
}

impl Bounds {
    /// The relay's idle bounds: after, and before, evidence of a logon.
    pub(crate) fn idle(&self) -> (Duration, Duration) {
        (self.relay_idle_timeout, self.idle_timeout_without_logon)
    }
}
