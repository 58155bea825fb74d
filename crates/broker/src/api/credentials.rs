//! The credentials routes (rule T1): `POST /api/v1/credentials` creates
//! one (its token shown once), `GET` lists them without secrets,
//! `DELETE …/{name}` revokes one at once. Only the admin manages them
//! (`crate::access`); the registry itself is `crate::credentials`.

use std::sync::Arc;

use api::types::{CredentialInput, CredentialOutput, List};
use api::{ErrorBody, ErrorCode};
use axum::extract::{Path, State};
use axum::http::StatusCode;

use super::Json;
use super::error::ApiError;
use crate::credentials::Credentials;

/// Creates an API credential with a role (admin only). The token is in
/// this answer and nowhere else.
#[utoipa::path(post, path = "/api/v1/credentials", tag = "credentials",
    request_body = CredentialInput,
    responses((status = 201, body = CredentialOutput), (status = 400, body = ErrorBody),
              (status = 409, body = ErrorBody)))]
pub async fn create(
    State(credentials): State<Arc<Credentials>>,
    Json(input): Json<CredentialInput>,
) -> Result<(StatusCode, axum::Json<CredentialOutput>), ApiError> {
    Ok((
        StatusCode::CREATED,
        axum::Json(credentials.create(input).await?),
    ))
}

/// Every API credential, without secrets (admin only).
#[utoipa::path(get, path = "/api/v1/credentials", tag = "credentials",
    responses((status = 200, body = List<CredentialOutput>)))]
pub async fn list(
    State(credentials): State<Arc<Credentials>>,
) -> Result<axum::Json<List<CredentialOutput>>, ApiError> {
    Ok(axum::Json(List {
        value: credentials.list().await?,
    }))
}

/// Revokes an API credential at once (admin only).
#[utoipa::path(delete, path = "/api/v1/credentials/{name}", tag = "credentials",
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub async fn revoke(
    State(credentials): State<Arc<Credentials>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    if credentials.revoke(&name).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::new(
            ErrorCode::NotFound,
            format!(
                "no credential is named {}",
                name.chars().take(253).collect::<String>()
            ),
        ))
    }
}
