//! The API's one error type and its one mapping to HTTP: every refusal is
//! `{"error": {"code": "…", "message": "…"}}` with a fitting status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// A refused request. Nothing was changed.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "InvalidParameter", message)
    }

    pub fn pool_not_found(pool: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "HostPoolNotFound",
            format!("host pool {pool} does not exist"),
        )
    }

    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "Unauthorized", message)
    }

    /// The store did not confirm a write: nothing was acknowledged.
    pub fn store_unavailable(detail: impl std::fmt::Display) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "StoreUnavailable",
            format!("the change could not be saved, so it was not made: {detail}"),
        )
    }

    pub fn overloaded() -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceBusy",
            "the broker's write queue is full: retry shortly",
        )
    }
}

impl From<placement::Error> for ApiError {
    fn from(e: placement::Error) -> ApiError {
        use placement::Error::*;
        let status = match &e {
            InvalidParameter(_) => StatusCode::BAD_REQUEST,
            SessionHostNotFound(_) | SessionNotFound(_) => StatusCode::NOT_FOUND,
            Conflict(_) => StatusCode::CONFLICT,
            NoSessionHostAvailable(_) | SessionHostUnavailable(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            NoPersonalDesktopAssigned(_) => StatusCode::FORBIDDEN,
        };
        ApiError::new(status, e.code(), e.to_string())
    }
}

/// The body of every error response.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// One of the contract's codes, e.g. `InvalidParameter`, `HostPoolNotFound`.
    pub code: String,
    /// What was wrong, naming the field or the rule.
    pub message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_string(),
                message: self.message,
            },
        };
        (self.status, axum::Json(body)).into_response()
    }
}
