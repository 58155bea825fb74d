//! The placement engine of deskbroker: which session host of a pool gets a
//! logon, by the rules of docs/rules.md.
//!
//! **This crate performs no IO, reads no clock and keeps no random number
//! generator**: time and randomness come in as arguments, so every decision
//! is a pure function of the pool's state and the request, and can be
//! replayed (tests, the simulator, a restart). The one place it draws,
//! [`PoolCounters::placement_random`], is itself a pure function of the
//! pool's stored seed and count of draws: callers (the broker, the
//! simulator) use it to make each placement's random value, so theirs are
//! the same. It cannot fail for reasons other than the request: every
//! refusal is an [`Error`] that says why.
//!
//! Each pool is a [`Pool`]: settings, hosts in query order, sessions, and an
//! index of open hosts ranked by session count (a bitmap per count, with
//! rank and select), so a placement costs O(log n) however many hosts the
//! pool has.
//!
//! [`autoscale`] holds the scaling plans' decisions (rules A1–A8): the plan,
//! the phase in force, one evaluation over a pool, start on connect.

pub mod autoscale;
mod error;
pub mod load_index;
pub mod model;
pub mod pipeline;
mod pool;
mod random;

pub use error::Error;
pub use model::*;
pub use pool::{
    Candidates, Change, ConnectRequest, EndReason, EndedSession, HostLogoff, HostPower,
    MAX_REPORTED_SESSIONS, MAX_UNTAKEN_HOST_LOGOFFS, Placement, Pool, PoolCounters, Reconciled,
    RefusalReason, RefusedSession, Upsert,
};
