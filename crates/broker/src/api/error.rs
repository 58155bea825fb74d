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

/// Longest run of non-blank characters an error message repeats: names and
/// values a client sent are echoed in refusals ("host pool NAME does not
/// exist"), and a refusal must not hand back a path or body of kilobytes.
pub const MAX_ECHO_CHARS: usize = 100;
/// Longest error message, in characters, whatever it holds.
pub const MAX_MESSAGE_CHARS: usize = 1_000;

/// `message` with every word longer than [`MAX_ECHO_CHARS`] cut to that
/// length (marked `…`), and the whole cut to [`MAX_MESSAGE_CHARS`].
pub fn truncate_echoes(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(MAX_MESSAGE_CHARS + 8));
    let mut word = 0usize;
    let mut total = 0usize;
    for c in message.chars() {
        if total >= MAX_MESSAGE_CHARS {
            out.push('…');
            break;
        }
        if c.is_whitespace() {
            word = 0;
        } else {
            word += 1;
            if word == MAX_ECHO_CHARS + 1 {
                out.push('…');
                total += 1;
                continue;
            }
            if word > MAX_ECHO_CHARS {
                continue;
            }
        }
        out.push(c);
        total += 1;
    }
    out
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: truncate_echoes(&self.message),
            },
        };
        let mut answer = (status, axum::Json(body)).into_response();
        // Rule A8: when to retry the connect whose host is starting.
        if self.code == ErrorCode::SessionHostStarting {
            answer.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(crate::connect::HOST_STARTING_RETRY_AFTER_SECONDS),
            );
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoed_input_is_cut_and_the_rest_kept() {
        let long = "x".repeat(5_000);
        let cut = truncate_echoes(&format!("host pool {long} does not exist"));
        assert_eq!(
            cut,
            format!("host pool {}… does not exist", "x".repeat(100))
        );
        assert_eq!(truncate_echoes("short words stay"), "short words stay");
        let many = "ab ".repeat(1_000);
        assert_eq!(
            truncate_echoes(&many).chars().count(),
            MAX_MESSAGE_CHARS + 1
        );
    }
}
