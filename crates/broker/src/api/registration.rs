//! The HTTP side of enrolling session hosts (the logic is `crate::enroll`):
//! registration tokens, and an agent's registration with one.

use std::sync::Arc;

use api::types::{RegisterInput, RegisterOutput, RegistrationTokenInput, RegistrationTokenOutput};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use placement::Upsert;

use super::Json;
use super::error::ApiError;
use crate::enroll::Enrollment;
use crate::enroll::{DEFAULT_TOKEN_HOSTS, DEFAULT_TOKEN_SECONDS};
use api::ErrorBody;

/// Creates a registration token for the pool (shown once; only its hash is
/// kept), bound to `maxHosts` new hosts (default 1).
#[utoipa::path(post, path = "/api/v1/hostPools/{pool}/registrationToken", tag = "registration",
    request_body = RegistrationTokenInput,
    responses((status = 200, body = RegistrationTokenOutput), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn create_token(
    State(enrollment): State<Arc<Enrollment>>,
    Path(pool): Path<String>,
    Json(input): Json<RegistrationTokenInput>,
) -> Result<axum::Json<RegistrationTokenOutput>, ApiError> {
    let seconds = input.expires_in_seconds.unwrap_or(DEFAULT_TOKEN_SECONDS);
    let max_hosts = input.max_hosts.unwrap_or(DEFAULT_TOKEN_HOSTS);
    Ok(axum::Json(
        enrollment.create_token(&pool, seconds, max_hosts).await?,
    ))
}

/// Revokes every registration token of the pool. Hosts already registered
/// keep their credentials.
#[utoipa::path(delete, path = "/api/v1/hostPools/{pool}/registrationToken", tag = "registration",
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub async fn revoke_tokens(
    State(enrollment): State<Arc<Enrollment>>,
    Path(pool): Path<String>,
) -> Result<StatusCode, ApiError> {
    enrollment.revoke_tokens(&pool).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// An agent registers its host with a registration token in the body:
/// creates the host (201, using one of the token's `maxHosts`) or
/// re-registers it (200, keeping its sessions and drain state), and
/// answers a new host credential, which replaces any earlier one. A name
/// that exists is 409 unless the bearer token is that host's current
/// credential or the admin token; only the admin changes its address
/// (403 otherwise). An address the pool's policy refuses is 400.
#[utoipa::path(post, path = "/api/v1/register", tag = "registration", request_body = RegisterInput,
    security((), ("bearer" = [])),
    responses((status = 201, body = RegisterOutput), (status = 200, body = RegisterOutput),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn register(
    State(enrollment): State<Arc<Enrollment>>,
    headers: HeaderMap,
    Json(input): Json<RegisterInput>,
) -> Result<(StatusCode, axum::Json<RegisterOutput>), ApiError> {
    let caller = match bearer(&headers)? {
        Some(token) => Some(enrollment.caller(token).map_err(ApiError::unauthorized)?),
        None => None,
    };
    let (upsert, out) = enrollment.register(input, caller).await?;
    let status = if upsert == Upsert::Created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, axum::Json(out)))
}

/// The bearer token of `Authorization: Bearer TOKEN`, the scheme matched
/// without regard to case (RFC 9110); None without that header, and a
/// refusal for any other kind of `Authorization` (it would be ignored
/// silently otherwise).
fn bearer(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let Some(value) = headers.get(axum::http::header::AUTHORIZATION) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| Some(token.trim()))
        .ok_or_else(|| ApiError::unauthorized("the Authorization header is not Bearer TOKEN"))
}
