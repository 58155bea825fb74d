//! The broker core's one error type. The engine, the write path, the
//! registry of secrets and the front-door placer all answer
//! [`BrokerError`]; the HTTP API maps it to a status and the contract's
//! error body once, at its edge (`api::error`), and the RDP front door to a
//! refusal. Each variant knows its contract code, so no caller matches
//! strings.

use api::ErrorCode;

/// A request the broker did not carry out, and why. Nothing was changed.
#[derive(Clone, Debug, thiserror::Error)]
pub enum BrokerError {
    /// The engine refused (a rule, a bad value, a missing host or session).
    #[error(transparent)]
    Engine(#[from] placement::Error),
    /// The pool named does not exist (or was removed meanwhile).
    #[error("host pool {0} does not exist")]
    PoolNotFound(String),
    /// A value the broker checks beyond the engine's (a token's life, say).
    #[error("{0}")]
    Invalid(String),
    /// A secret that the broker does not know, or that expired.
    #[error("{0}")]
    Unauthorized(String),
    /// A valid secret that does not allow this.
    #[error("{0}")]
    Forbidden(String),
    /// Something the broker does not have (no front door, say).
    #[error("{0}")]
    NotFound(String),
    /// A connection ticket that does not admit this connection (rule T3).
    #[error("{0}")]
    Ticket(String),
    /// The store did not confirm a write: nothing was acknowledged.
    #[error("the change could not be saved, so it was not made: {0}")]
    StoreUnavailable(String),
    /// The write queue is full ([`crate::writer::QUEUE_CAPACITY`]).
    #[error("the broker's write queue is full: retry shortly")]
    Overloaded,
    /// A bounded queue of the caller's kind is full (messages waiting for
    /// a host): retry later.
    #[error("{0}")]
    TooManyRequests(String),
    /// Rule A8: no host could take the user, and a host that can is
    /// starting (this connect started it, or another did).
    #[error("{0}")]
    HostStarting(String),
    /// Rule AD1: the decision needs the user's directory groups and the
    /// directory cannot be reached.
    #[error("{0}")]
    DirectoryUnavailable(String),
}

impl BrokerError {
    /// The contract's code for this refusal.
    pub fn code(&self) -> ErrorCode {
        match self {
            BrokerError::Engine(e) => ErrorCode::from(e),
            BrokerError::PoolNotFound(_) => ErrorCode::HostPoolNotFound,
            BrokerError::Invalid(_) => ErrorCode::InvalidParameter,
            BrokerError::Unauthorized(_) => ErrorCode::Unauthorized,
            BrokerError::Forbidden(_) => ErrorCode::Forbidden,
            BrokerError::NotFound(_) => ErrorCode::NotFound,
            BrokerError::Ticket(_) => ErrorCode::InvalidConnectionTicket,
            BrokerError::StoreUnavailable(_) => ErrorCode::StoreUnavailable,
            BrokerError::Overloaded => ErrorCode::ServiceBusy,
            BrokerError::TooManyRequests(_) => ErrorCode::TooManyRequests,
            BrokerError::HostStarting(_) => ErrorCode::SessionHostStarting,
            BrokerError::DirectoryUnavailable(_) => ErrorCode::DirectoryUnavailable,
        }
    }

    /// A store failure, with what went wrong.
    pub fn store_unavailable(detail: impl std::fmt::Display) -> BrokerError {
        BrokerError::StoreUnavailable(detail.to_string())
    }
}
