//! The HTTP side of enrolling session hosts (the logic is `crate::enroll`):
//! registration tokens, and an agent's registration with one.

use std::sync::Arc;

use api::types::{RegisterInput, RegisterOutput, RegistrationTokenInput, RegistrationTokenOutput};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use placement::Upsert;

use super::Json;
use super::error::ApiError;
use crate::enroll::DEFAULT_TOKEN_SECONDS;
use crate::state::Broker;
use api::ErrorBody;

/// Creates a registration token for the pool (shown once; only its hash is kept).
#[utoipa::path(post, path = "/api/v1/hostPools/{pool}/registrationToken", tag = "registration",
    request_body = RegistrationTokenInput,
    responses((status = 200, body = RegistrationTokenOutput), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn create_token(
    State(b): State<Arc<Broker>>,
    Path(pool): Path<String>,
    Json(input): Json<RegistrationTokenInput>,
) -> Result<axum::Json<RegistrationTokenOutput>, ApiError> {
    let seconds = input.expires_in_seconds.unwrap_or(DEFAULT_TOKEN_SECONDS);
    Ok(axum::Json(
        b.create_registration_token(&pool, seconds).await?,
    ))
}

/// Revokes every registration token of the pool. Hosts already registered
/// keep their credentials.
#[utoipa::path(delete, path = "/api/v1/hostPools/{pool}/registrationToken", tag = "registration",
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub async fn revoke_tokens(
    State(b): State<Arc<Broker>>,
    Path(pool): Path<String>,
) -> Result<StatusCode, ApiError> {
    b.revoke_registration_tokens(&pool).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// An agent registers its host with a registration token (no bearer token):
/// creates the host (201) or re-registers it (200, keeping its sessions
/// and drain state), and answers a new host credential, which replaces any
/// earlier one.
#[utoipa::path(post, path = "/api/v1/register", tag = "registration", request_body = RegisterInput,
    security(()),
    responses((status = 201, body = RegisterOutput), (status = 200, body = RegisterOutput),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn register(
    State(b): State<Arc<Broker>>,
    Json(input): Json<RegisterInput>,
) -> Result<(StatusCode, axum::Json<RegisterOutput>), ApiError> {
    let (upsert, out) = b.register(input).await?;
    let status = if upsert == Upsert::Created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, axum::Json(out)))
}
