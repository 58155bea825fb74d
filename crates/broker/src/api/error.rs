//! The API's edge: every refusal becomes the contract's error body
//! `{"error": {"code": "…", "message": "…"}}` with the status its code
//! carries ([`api::ErrorCode::status`]) — one mapping, here.

use api::{ErrorBody, ErrorCode, ErrorDetail};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::error::BrokerError;

/// A refused request, as the HTTP API answers it. Nothing was changed.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::InvalidParameter, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Unauthorized, message)
    }

    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Forbidden, message)
    }

    /// The HTTP status of this refusal.
    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

impl From<BrokerError> for ApiError {
    fn from(e: BrokerError) -> ApiError {
        ApiError::new(e.code(), e.to_string())
    }
}

impl From<placement::Error> for ApiError {
    fn from(e: placement::Error) -> ApiError {
        BrokerError::from(e).into()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message,
            },
        };
        (status, axum::Json(body)).into_response()
    }
}
