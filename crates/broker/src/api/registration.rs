//! Enrolling session hosts like AVD: an administrator creates a pool's
//! registration token; an agent presents it once to register its host and
//! receives a host credential that only lets it act as that host.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use placement::{HostSpec, Upsert};
use store::{HostCredential, Mutation, RegistrationToken};

use super::Json;
use super::types::{
    RegisterInput, RegisterOutput, RegistrationTokenInput, RegistrationTokenOutput,
    SessionHostOutput, rfc3339,
};
use crate::error::{ApiError, ErrorBody};
use crate::state::{Broker, new_secret, now_ms, secret_hash};

/// Longest life of a registration token: 30 days.
pub const MAX_TOKEN_SECONDS: u64 = 30 * 24 * 3600;

/// Creates a registration token for the pool (shown once; only its hash is kept).
#[utoipa::path(post, path = "/api/v1/hostPools/{pool}/registrationToken", tag = "registration",
    request_body = RegistrationTokenInput,
    responses((status = 200, body = RegistrationTokenOutput), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn create_token(
    State(b): State<Arc<Broker>>,
    Path(pool): Path<String>,
    Json(input): Json<RegistrationTokenInput>,
) -> Result<axum::Json<RegistrationTokenOutput>, ApiError> {
    let seconds = input.expires_in_seconds.unwrap_or(86_400);
    if !(1..=MAX_TOKEN_SECONDS).contains(&seconds) {
        return Err(ApiError::invalid(format!(
            "expiresInSeconds: {seconds} is out of range; it must be from 1 to {MAX_TOKEN_SECONDS} (30 days)"
        )));
    }
    let token = new_secret("dbr_");
    let hash = secret_hash(&token);
    let expires_ms = now_ms() + (seconds as i64) * 1000;
    let secrets = &b.secrets;
    b.write_with(&pool, |p, _| {
        let pool = p.name().to_string();
        secrets
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .tokens
            .insert(hash.clone(), (pool.clone(), expires_ms));
        let token = RegistrationToken { hash, expires_ms };
        Ok(((), vec![Mutation::PutRegistrationToken { pool, token }]))
    })
    .await?;
    Ok(axum::Json(RegistrationTokenOutput {
        token,
        expiration_time: rfc3339(expires_ms),
    }))
}

/// Revokes every registration token of the pool. Hosts already registered
/// keep their credentials.
#[utoipa::path(delete, path = "/api/v1/hostPools/{pool}/registrationToken", tag = "registration",
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub async fn revoke_tokens(
    State(b): State<Arc<Broker>>,
    Path(pool): Path<String>,
) -> Result<StatusCode, ApiError> {
    let secrets = &b.secrets;
    b.write_with(&pool, |p, _| {
        let pool = p.name().to_string();
        secrets
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .tokens
            .retain(|_, (owner, _)| *owner != pool);
        Ok(((), vec![Mutation::DeleteRegistrationTokens { pool }]))
    })
    .await?;
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
    let found = b
        .secrets
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .tokens
        .get(&secret_hash(&input.token))
        .cloned();
    let Some((pool, expires_ms)) = found else {
        return Err(ApiError::unauthorized(
            "the registration token is not valid: it is unknown or was revoked; create a new one",
        ));
    };
    if now_ms() >= expires_ms {
        return Err(ApiError::unauthorized(format!(
            "the registration token expired at {}; create a new one",
            rfc3339(expires_ms)
        )));
    }
    if let Some(asked) = &input.host_pool
        && asked != &pool
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "Forbidden",
            format!("the registration token is for host pool {pool}, not {asked}"),
        ));
    }
    let credential = new_secret("dbh_");
    let hash = secret_hash(&credential);
    let secrets = &b.secrets;
    let name = input.name.clone();
    let (upsert, host) = b
        .write_with(&pool, |p, now| {
            let spec = match p.host(&name) {
                Some(h) => HostSpec {
                    address: input.address.clone(),
                    capabilities: input
                        .capabilities
                        .clone()
                        .unwrap_or(h.spec.capabilities.clone()),
                    policy: input.policy.clone().unwrap_or(h.spec.policy.clone()),
                    ..h.spec.clone()
                },
                None => HostSpec {
                    capabilities: input
                        .capabilities
                        .clone()
                        .unwrap_or_else(|| vec!["rdp".to_string()]),
                    policy: input.policy.clone().unwrap_or_default(),
                    ..HostSpec::new(&name, &input.address)
                },
            };
            let upsert = p.upsert_host(spec, now)?;
            let mut s = secrets.write().unwrap_or_else(|e| e.into_inner());
            s.forget(p.name(), Some(&name));
            s.hosts
                .insert(hash.clone(), (p.name().to_string(), name.clone()));
            let out = SessionHostOutput::from(p.find_host(&name)?);
            let credential = HostCredential {
                host: name.clone(),
                hash,
            };
            Ok((
                (upsert, out),
                vec![Mutation::PutHostCredential {
                    pool: p.name().to_string(),
                    credential,
                }],
            ))
        })
        .await?;
    tracing::info!(pool = %pool, host = %input.name, "session host registered");
    let status = if upsert == Upsert::Created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        axum::Json(RegisterOutput {
            session_host: host,
            host_credential: credential,
        }),
    ))
}
