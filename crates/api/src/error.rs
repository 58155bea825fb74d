//! The contract's error codes and error body. Every refusal of the API is
//! `{"error": {"code": "…", "message": "…"}}`; the code is one of
//! [`ErrorCode`], and the code decides the HTTP status ([`ErrorCode::status`]),
//! so the broker maps an error to HTTP in one place and a client can trust
//! the code it reads.

use serde::{Deserialize, Serialize};

/// Every error code the broker answers. Closed: a client that reads a code
/// not listed here is talking to something else (or a newer broker), and
/// says so rather than guessing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ErrorCode {
    /// 400: the request is malformed or a value is out of range.
    InvalidParameter,
    /// 401: no bearer token, or one the broker does not know.
    Unauthorized,
    /// 403: the token is valid but does not allow this request.
    Forbidden,
    /// 403, rule P7: a `Direct` personal pool and a user with no host.
    NoPersonalDesktopAssigned,
    /// 403, rule T2: the pool's entitlements do not name this user or any
    /// of the groups the caller gave.
    NotEntitled,
    /// 403, rule T3: a connection ticket that is malformed, not signed by
    /// this broker, changed, expired, or for another pool or user; or a
    /// pool that requires one was reached without.
    InvalidConnectionTicket,
    /// 404: no such path in the API.
    NotFound,
    /// 404: the host pool in the path does not exist.
    HostPoolNotFound,
    /// 404: the session host does not exist in that pool.
    SessionHostNotFound,
    /// 404: the session does not exist in that pool.
    SessionNotFound,
    /// 409: the change conflicts with the state (an owned host, a pool with
    /// hosts, a name taken).
    Conflict,
    /// 413: the request body is larger than the broker accepts.
    PayloadTooLarge,
    /// 429: this caller sent too many requests of this kind (a host's
    /// heartbeats, rule S8); retry after the `Retry-After` seconds.
    TooManyRequests,
    /// 500: a fault of the broker itself; nothing was changed.
    InternalError,
    /// 502: the leading replica went away while handling the request; its
    /// outcome is unknown.
    LeaderLost,
    /// 503, rule S3: no session host can take a new session now.
    NoSessionHostAvailable,
    /// 503, rule S1: the user's session is on a host that is not available.
    SessionHostUnavailable,
    /// 503: the store could not save the change, so it was not made.
    StoreUnavailable,
    /// 503: the broker's write queue is full.
    ServiceBusy,
    /// 503, rule L2: no replica can decide right now (an election is under
    /// way, or the leader cannot be reached); retry after `Retry-After`,
    /// through this replica or another.
    LeaderUnavailable,
    /// 504: the leading replica did not answer in time; the outcome is
    /// unknown.
    LeaderTimeout,
    /// 405: the path exists but not with this method.
    MethodNotAllowed,
    /// 414: the request's path and query are longer than the broker reads.
    UriTooLong,
    /// 502: the user portal's OpenID Connect provider could not be reached
    /// or answered something that is not OpenID Connect.
    IdentityProviderUnavailable,
    /// 503, rule A8: no host can take the user now, and the pool's
    /// `startVmOnConnect` is starting one that can; retry the same connect
    /// after the `Retry-After` seconds.
    SessionHostStarting,
    /// 431: the request head (request line and headers) is larger than the
    /// broker reads.
    HeadersTooLarge,
    /// 503, rule AD1: the decision needs the user's directory groups and
    /// the directory cannot be reached; nothing was changed. Users entitled
    /// by name and users going back to their session are not affected.
    DirectoryUnavailable,
    /// 502, rule AD3: no KDC of the realm a KDC proxy message names could
    /// be reached, or none answered in time.
    KdcUnavailable,
}

impl ErrorCode {
    /// Every code, for tests and documentation.
    pub const ALL: [ErrorCode; 28] = [
        ErrorCode::InvalidParameter,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::NoPersonalDesktopAssigned,
        ErrorCode::NotEntitled,
        ErrorCode::InvalidConnectionTicket,
        ErrorCode::NotFound,
        ErrorCode::HostPoolNotFound,
        ErrorCode::SessionHostNotFound,
        ErrorCode::SessionNotFound,
        ErrorCode::Conflict,
        ErrorCode::PayloadTooLarge,
        ErrorCode::TooManyRequests,
        ErrorCode::InternalError,
        ErrorCode::LeaderLost,
        ErrorCode::NoSessionHostAvailable,
        ErrorCode::SessionHostUnavailable,
        ErrorCode::StoreUnavailable,
        ErrorCode::ServiceBusy,
        ErrorCode::LeaderUnavailable,
        ErrorCode::LeaderTimeout,
        ErrorCode::MethodNotAllowed,
        ErrorCode::UriTooLong,
        ErrorCode::IdentityProviderUnavailable,
        ErrorCode::SessionHostStarting,
        ErrorCode::HeadersTooLarge,
        ErrorCode::DirectoryUnavailable,
        ErrorCode::KdcUnavailable,
    ];

    /// The HTTP status this code is answered with.
    pub fn status(self) -> u16 {
        use ErrorCode::*;
        match self {
            InvalidParameter => 400,
            Unauthorized => 401,
            Forbidden | NoPersonalDesktopAssigned | NotEntitled | InvalidConnectionTicket => 403,
            NotFound | HostPoolNotFound | SessionHostNotFound | SessionNotFound => 404,
            Conflict => 409,
            PayloadTooLarge => 413,
            TooManyRequests => 429,
            InternalError => 500,
            LeaderLost => 502,
            NoSessionHostAvailable
            | SessionHostUnavailable
            | StoreUnavailable
            | ServiceBusy
            | LeaderUnavailable
            | SessionHostStarting
            | DirectoryUnavailable => 503,
            LeaderTimeout => 504,
            MethodNotAllowed => 405,
            UriTooLong => 414,
            HeadersTooLarge => 431,
            IdentityProviderUnavailable | KdcUnavailable => 502,
        }
    }

    /// The code as it is written on the wire (and in metrics labels).
    pub fn as_str(self) -> &'static str {
        use ErrorCode::*;
        match self {
            InvalidParameter => "InvalidParameter",
            Unauthorized => "Unauthorized",
            Forbidden => "Forbidden",
            NoPersonalDesktopAssigned => "NoPersonalDesktopAssigned",
            NotEntitled => "NotEntitled",
            InvalidConnectionTicket => "InvalidConnectionTicket",
            NotFound => "NotFound",
            HostPoolNotFound => "HostPoolNotFound",
            SessionHostNotFound => "SessionHostNotFound",
            SessionNotFound => "SessionNotFound",
            Conflict => "Conflict",
            PayloadTooLarge => "PayloadTooLarge",
            TooManyRequests => "TooManyRequests",
            InternalError => "InternalError",
            LeaderLost => "LeaderLost",
            NoSessionHostAvailable => "NoSessionHostAvailable",
            SessionHostUnavailable => "SessionHostUnavailable",
            StoreUnavailable => "StoreUnavailable",
            ServiceBusy => "ServiceBusy",
            LeaderUnavailable => "LeaderUnavailable",
            LeaderTimeout => "LeaderTimeout",
            MethodNotAllowed => "MethodNotAllowed",
            UriTooLong => "UriTooLong",
            IdentityProviderUnavailable => "IdentityProviderUnavailable",
            SessionHostStarting => "SessionHostStarting",
            HeadersTooLarge => "HeadersTooLarge",
            DirectoryUnavailable => "DirectoryUnavailable",
            KdcUnavailable => "KdcUnavailable",
        }
    }

    /// The code written `text`, if it is one of the contract's.
    pub fn parse(text: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == text)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The engine's refusals, by variant (not by string).
impl From<&placement::Error> for ErrorCode {
    fn from(e: &placement::Error) -> ErrorCode {
        use placement::Error as E;
        match e {
            E::InvalidParameter(_) => ErrorCode::InvalidParameter,
            E::SessionHostNotFound(_) => ErrorCode::SessionHostNotFound,
            E::SessionNotFound(_) => ErrorCode::SessionNotFound,
            E::Conflict(_) => ErrorCode::Conflict,
            E::NoSessionHostAvailable(_) => ErrorCode::NoSessionHostAvailable,
            E::SessionHostUnavailable(_) => ErrorCode::SessionHostUnavailable,
            E::NoPersonalDesktopAssigned(_) => ErrorCode::NoPersonalDesktopAssigned,
            E::NotEntitled(_) => ErrorCode::NotEntitled,
        }
    }
}

/// The body of every error response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorDetail {
    /// One of the contract's codes, e.g. `InvalidParameter`, `HostPoolNotFound`.
    pub code: ErrorCode,
    /// What was wrong, naming the field or the rule.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_as_their_names() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_string(&code).expect("serializes");
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            assert_eq!(serde_json::from_str::<ErrorCode>(&json).ok(), Some(code));
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
            assert!((400..600).contains(&code.status()), "{code}");
        }
        assert_eq!(ErrorCode::parse("Nope"), None);
    }

    #[test]
    fn the_engine_codes_are_the_contract_codes() {
        let errors = [
            placement::Error::InvalidParameter(String::new()),
            placement::Error::SessionHostNotFound(String::new()),
            placement::Error::SessionNotFound(String::new()),
            placement::Error::Conflict(String::new()),
            placement::Error::NoSessionHostAvailable(String::new()),
            placement::Error::SessionHostUnavailable(String::new()),
            placement::Error::NoPersonalDesktopAssigned(String::new()),
            placement::Error::NotEntitled(String::new()),
        ];
        for e in &errors {
            assert_eq!(ErrorCode::from(e).as_str(), e.code());
        }
        // The statuses the contract names for connect (docs/rules.md, P7, S3).
        assert_eq!(ErrorCode::NoPersonalDesktopAssigned.status(), 403);
        assert_eq!(ErrorCode::Conflict.status(), 409);
        assert_eq!(ErrorCode::NoSessionHostAvailable.status(), 503);
    }
}
