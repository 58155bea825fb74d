//! API credentials with roles (rule T1): created with a token shown once
//! and kept as its SHA-256 like the other secrets, listed without secrets,
//! revoked at once.
//!
//! [`Credentials`] is the service: it owns the registry and takes the core
//! only to commit. Each change is made in the registry in the same step
//! that queues it for the store ([`crate::core::Core::commit`]), and
//! answered once durable. Who a bearer token is (`crate::enroll`) looks
//! credentials up here.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use api::types::{CredentialInput, CredentialOutput, rfc3339};
use store::{ApiCredential, Mutation};

use crate::access::Role;
use crate::core::Core;
use crate::error::BrokerError;
use crate::state::{new_secret, secret_hash};
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

/// The API credentials service: the registry, by the SHA-256 (hex) of each
/// credential's token, and the core it commits through.
pub struct Credentials {
    core: Arc<Core>,
    /// Credential hash → the credential. Changed under this lock's write
    /// side, inside a [`Core::commit`], in the same step that queues the
    /// change.
    by_hash: RwLock<HashMap<String, ApiCredential>>,
}

impl Credentials {
    /// The service over `core`, with the credentials the store kept.
    pub fn new(core: Arc<Core>, stored: Vec<ApiCredential>) -> Credentials {
        let by_hash = stored.into_iter().map(|c| (c.hash.clone(), c)).collect();
        Credentials {
            core,
            by_hash: RwLock::new(by_hash),
        }
    }

    /// Runs `f` on the credential whose token hashes to `hash`, if any (the
    /// bearer token's look-up, on every request).
    pub(crate) fn with_hash<R>(
        &self,
        hash: &str,
        f: impl FnOnce(&ApiCredential) -> R,
    ) -> Option<R> {
        self.by_hash.read_or_recover().get(hash).map(f)
    }

    /// The credential `name` as the API shows it (without its token), if
    /// there is one; as memory holds it now.
    pub(crate) fn shown(&self, name: &str) -> Option<CredentialOutput> {
        self.by_hash
            .read_or_recover()
            .values()
            .find(|c| c.name == name)
            .map(|c| output(c, None))
    }

    /// Creates an API credential; 409 when the name is taken.
    pub async fn create(&self, input: CredentialInput) -> Result<CredentialOutput, BrokerError> {
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
                Some(self.core.now_ms() + (s as i64) * 1000)
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
        self.core
            .commit(|| {
                let mut by_hash = self.by_hash.write_or_recover();
                if by_hash.values().any(|c| c.name == credential.name) {
                    return Err(placement::Error::Conflict(format!(
                        "a credential named {} exists; revoke it first or choose another name",
                        credential.name
                    ))
                    .into());
                }
                by_hash.insert(credential.hash.clone(), credential.clone());
                let put = Mutation::PutApiCredential {
                    credential: credential.clone(),
                };
                Ok(((), vec![put]))
            })
            .await?;
        Ok(output(&credential, Some(token)))
    }

    /// Every API credential, by name, without secrets.
    pub async fn list(&self) -> Result<Vec<CredentialOutput>, BrokerError> {
        let mut out: Vec<CredentialOutput> = self
            .by_hash
            .read_or_recover()
            .values()
            .map(|c| output(c, None))
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        self.core.writer().flush().await?;
        Ok(out)
    }

    /// Revokes the credential `name` at once (the next call with it is
    /// 401); false when there is none.
    pub async fn revoke(&self, name: &str) -> Result<bool, BrokerError> {
        self.core
            .commit(|| {
                let mut by_hash = self.by_hash.write_or_recover();
                let before = by_hash.len();
                by_hash.retain(|_, c| c.name != name);
                if by_hash.len() == before {
                    return Ok((false, Vec::new()));
                }
                let delete = Mutation::DeleteApiCredential {
                    name: name.to_string(),
                };
                Ok((true, vec![delete]))
            })
            .await
    }
}
