//! API credentials with roles (rule T1): `POST /api/v1/credentials`
//! creates one (its token shown once, kept as SHA-256 like the others),
//! `GET` lists them without secrets, `DELETE …/{name}` revokes one at once.
//! Only the admin manages them (`crate::access`). Each change is made in
//! the registry under its lock in the same step that queues it for the
//! store, and answered once durable.

use std::sync::Arc;

use api::types::{CredentialInput, CredentialOutput, List, rfc3339};
use api::{ErrorBody, ErrorCode};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use store::{ApiCredential, Mutation};

use super::Json;
use super::error::ApiError;
use crate::access::Role;
use crate::error::BrokerError;
use crate::state::{Broker, new_secret, now_ms, secret_hash};
use crate::sync::RwLockExt;

/// Longest life of a credential that expires: ten years.
pub const MAX_CREDENTIAL_SECONDS: u64 = 10 * 365 * 86_400;

/// Most host pools one credential may be limited to.
pub const MAX_CREDENTIAL_POOLS: usize = 1000;

/// The largest `rateLimitPerSecond` a credential may carry.
pub const MAX_CREDENTIAL_RATE_LIMIT: u32 = 100_000;

pub(crate) fn output(c: &ApiCredential, token: Option<String>) -> CredentialOutput {
    CredentialOutput {
        name: c.name.clone(),
        role: c.role.clone(),
        host_pools: c.host_pools.clone(),
        expiration_time: c.expires_ms.map(rfc3339),
        rate_limit_per_second: c.rate_limit_per_second,
        token,
    }
}

impl Broker {
    /// Creates an API credential; 409 when the name is taken.
    pub async fn create_credential(
        &self,
        input: CredentialInput,
    ) -> Result<CredentialOutput, BrokerError> {
        placement::validate_name("name", &input.name)?;
        if Role::parse(&input.role).is_none() {
            return Err(BrokerError::Invalid(format!(
                "role: {:?} is not a role; it must be one of {}",
                input.role.chars().take(64).collect::<String>(),
                Role::ALL.map(Role::as_str).join(", ")
            )));
        }
        if let Some(n) = input.rate_limit_per_second
            && !(1..=MAX_CREDENTIAL_RATE_LIMIT).contains(&n)
        {
            return Err(BrokerError::Invalid(format!(
                "rateLimitPerSecond: {n} is out of range; it must be from 1 to \
                 {MAX_CREDENTIAL_RATE_LIMIT}, or absent for the broker's limit"
            )));
        }
        if input.host_pools.len() > MAX_CREDENTIAL_POOLS {
            return Err(BrokerError::Invalid(format!(
                "hostPools: at most {MAX_CREDENTIAL_POOLS} pools"
            )));
        }
        for (i, p) in input.host_pools.iter().enumerate() {
            placement::validate_name(&format!("hostPools[{i}]"), p)?;
        }
        let expires_ms = match input.expires_in_seconds {
            None => None,
            Some(s) if (1..=MAX_CREDENTIAL_SECONDS).contains(&s) => {
                Some(now_ms() + (s as i64) * 1000)
            }
            Some(s) => {
                return Err(BrokerError::Invalid(format!(
                    "expiresInSeconds: {s} is out of range; it must be from 1 to \
                     {MAX_CREDENTIAL_SECONDS} (ten years), or absent for no expiry"
                )));
            }
        };
        let mut host_pools = input.host_pools;
        host_pools.sort();
        host_pools.dedup();
        let token = new_secret("dbc_");
        let credential = ApiCredential {
            name: input.name,
            role: input.role,
            host_pools,
            expires_ms,
            hash: secret_hash(&token),
            rate_limit_per_second: input.rate_limit_per_second,
        };
        let reserved = self.writer.reserve().await?;
        let ticket = {
            let mut secrets = self.secrets.write_or_recover();
            if secrets
                .credentials
                .values()
                .any(|c| c.name == credential.name)
            {
                return Err(placement::Error::Conflict(format!(
                    "a credential named {} exists; revoke it first or choose another name",
                    credential.name
                ))
                .into());
            }
            secrets
                .credentials
                .insert(credential.hash.clone(), credential.clone());
            self.writer.send(
                Some(reserved),
                vec![Mutation::PutApiCredential {
                    credential: credential.clone(),
                }],
            )
        };
        self.writer.wait(ticket).await?;
        Ok(output(&credential, Some(token)))
    }

    /// Every API credential, by name, without secrets.
    pub async fn list_credentials(&self) -> Result<Vec<CredentialOutput>, BrokerError> {
        let mut out: Vec<CredentialOutput> = self
            .secrets
            .read_or_recover()
            .credentials
            .values()
            .map(|c| output(c, None))
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        self.writer.flush().await?;
        Ok(out)
    }

    /// Revokes the credential `name` at once (the next call with it is
    /// 401); false when there is none.
    pub async fn revoke_credential(&self, name: &str) -> Result<bool, BrokerError> {
        let reserved = self.writer.reserve().await?;
        let ticket = {
            let mut secrets = self.secrets.write_or_recover();
            let before = secrets.credentials.len();
            secrets.credentials.retain(|_, c| c.name != name);
            if secrets.credentials.len() == before {
                return Ok(false);
            }
            self.writer.send(
                Some(reserved),
                vec![Mutation::DeleteApiCredential {
                    name: name.to_string(),
                }],
            )
        };
        self.writer.wait(ticket).await?;
        Ok(true)
    }
}

/// Creates an API credential with a role (admin only). The token is in
/// this answer and nowhere else.
#[utoipa::path(post, path = "/api/v1/credentials", tag = "credentials",
    request_body = CredentialInput,
    responses((status = 201, body = CredentialOutput), (status = 400, body = ErrorBody),
              (status = 409, body = ErrorBody)))]
pub async fn create(
    State(b): State<Arc<Broker>>,
    Json(input): Json<CredentialInput>,
) -> Result<(StatusCode, axum::Json<CredentialOutput>), ApiError> {
    Ok((
        StatusCode::CREATED,
        axum::Json(b.create_credential(input).await?),
    ))
}

/// Every API credential, without secrets (admin only).
#[utoipa::path(get, path = "/api/v1/credentials", tag = "credentials",
    responses((status = 200, body = List<CredentialOutput>)))]
pub async fn list(
    State(b): State<Arc<Broker>>,
) -> Result<axum::Json<List<CredentialOutput>>, ApiError> {
    Ok(axum::Json(List {
        value: b.list_credentials().await?,
    }))
}

/// Revokes an API credential at once (admin only).
#[utoipa::path(delete, path = "/api/v1/credentials/{name}", tag = "credentials",
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub async fn revoke(
    State(b): State<Arc<Broker>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    if b.revoke_credential(&name).await? {
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
