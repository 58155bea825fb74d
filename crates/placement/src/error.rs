//! The ways a request to the engine can be refused.
//!
//! A refusal is a normal outcome (like the Kubernetes scheduler's
//! `Unschedulable`), not an internal fault: each variant carries a message
//! for the user that names the field or the rule, and maps to one of the
//! contract's error codes.

/// A request the engine will not carry out, and why. Nothing was changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    InvalidParameter(String),
    #[error("{0}")]
    SessionHostNotFound(String),
    #[error("{0}")]
    SessionNotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// Rule S3: no host can take a new session; the message says why.
    #[error("{0}")]
    NoSessionHostAvailable(String),
    /// Rule S1: the user's session is on a host that is not available.
    #[error("{0}")]
    SessionHostUnavailable(String),
    /// Rule P7: a `Direct` personal pool and a user with no host.
    #[error("{0}")]
    NoPersonalDesktopAssigned(String),
    /// Rule T2: the pool lists who may get a new session, and this user is
    /// not among them.
    #[error("{0}")]
    NotEntitled(String),
}

impl Error {
    /// The contract's error code.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidParameter(_) => "InvalidParameter",
            Error::SessionHostNotFound(_) => "SessionHostNotFound",
            Error::SessionNotFound(_) => "SessionNotFound",
            Error::Conflict(_) => "Conflict",
            Error::NoSessionHostAvailable(_) => "NoSessionHostAvailable",
            Error::SessionHostUnavailable(_) => "SessionHostUnavailable",
            Error::NoPersonalDesktopAssigned(_) => "NoPersonalDesktopAssigned",
            Error::NotEntitled(_) => "NotEntitled",
        }
    }
}
