//! Enrolling session hosts like AVD: an administrator creates a pool's
//! registration token; an agent presents it once to register its host and
//! receives a host credential that only lets it act as that host (its
//! heartbeats are `heartbeat.rs`). Secrets are random, shown once, and
//! kept only as SHA-256 hashes ([`crate::state::Secrets`]), changed under
//! the pool's lock in the same step that queues them for the store.

use api::types::{
    RegisterInput, RegisterOutput, RegistrationTokenOutput, SessionHostOutput, rfc3339,
};
use placement::{HostSpec, Upsert};
use store::{HostCredential, Mutation, RegistrationToken};
use subtle::ConstantTimeEq;

use crate::error::BrokerError;
use crate::state::{Broker, new_secret, now_ms, secret_hash};

/// Longest life of a registration token: 30 days.
pub const MAX_TOKEN_SECONDS: u64 = 30 * 24 * 3600;

/// Life of a registration token when the request does not say: one day.
pub const DEFAULT_TOKEN_SECONDS: u64 = 86_400;

/// Who presented a bearer token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// The admin token: may do everything.
    Admin,
    /// A host credential: may act only as this host of this pool.
    Host { pool: String, host: String },
}

impl Broker {
    /// Who `token` is, if anyone: the admin token is compared in constant
    /// time; host credentials by their hash.
    pub fn caller(&self, token: &str) -> Option<Caller> {
        if bool::from(token.as_bytes().ct_eq(self.admin_token.as_bytes())) {
            return Some(Caller::Admin);
        }
        self.secrets
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .hosts
            .get(&secret_hash(token))
            .map(|(pool, host)| Caller::Host {
                pool: pool.clone(),
                host: host.clone(),
            })
    }

    /// Creates a registration token for `pool`, valid for `seconds`
    /// (1..=[`MAX_TOKEN_SECONDS`]).
    pub async fn create_registration_token(
        &self,
        pool: &str,
        seconds: u64,
    ) -> Result<RegistrationTokenOutput, BrokerError> {
        if !(1..=MAX_TOKEN_SECONDS).contains(&seconds) {
            return Err(BrokerError::Invalid(format!(
                "expiresInSeconds: {seconds} is out of range; it must be from 1 to \
                 {MAX_TOKEN_SECONDS} (30 days)"
            )));
        }
        let token = new_secret("dbr_");
        let hash = secret_hash(&token);
        let expires_ms = now_ms() + (seconds as i64) * 1000;
        self.write_with(pool, |p, _| {
            let pool = p.name().to_string();
            self.secrets
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .tokens
                .insert(hash.clone(), (pool.clone(), expires_ms));
            let token = RegistrationToken { hash, expires_ms };
            Ok(((), vec![Mutation::PutRegistrationToken { pool, token }]))
        })
        .await?;
        Ok(RegistrationTokenOutput {
            token,
            expiration_time: rfc3339(expires_ms),
        })
    }

    /// Revokes every registration token of `pool`. Hosts already
    /// registered keep their credentials.
    pub async fn revoke_registration_tokens(&self, pool: &str) -> Result<(), BrokerError> {
        self.write_with(pool, |p, _| {
            let pool = p.name().to_string();
            self.secrets
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .tokens
                .retain(|_, (owner, _)| *owner != pool);
            Ok(((), vec![Mutation::DeleteRegistrationTokens { pool }]))
        })
        .await
    }

    /// An agent registers its host with a registration token: creates the
    /// host or re-registers it (keeping its sessions and drain state), and
    /// answers a new host credential, which replaces any earlier one.
    pub async fn register(
        &self,
        input: RegisterInput,
    ) -> Result<(Upsert, RegisterOutput), BrokerError> {
        let found = self
            .secrets
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .tokens
            .get(&secret_hash(&input.token))
            .cloned();
        let Some((pool, expires_ms)) = found else {
            return Err(BrokerError::Unauthorized(
                "the registration token is not valid: it is unknown or was revoked; create a \
                 new one"
                    .into(),
            ));
        };
        if now_ms() >= expires_ms {
            return Err(BrokerError::Unauthorized(format!(
                "the registration token expired at {}; create a new one",
                rfc3339(expires_ms)
            )));
        }
        if let Some(asked) = &input.host_pool
            && asked != &pool
        {
            return Err(BrokerError::Forbidden(format!(
                "the registration token is for host pool {pool}, not {asked}"
            )));
        }
        let credential = new_secret("dbh_");
        let hash = secret_hash(&credential);
        let name = input.name.clone();
        let (upsert, host) = self
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
                let mut s = self.secrets.write().unwrap_or_else(|e| e.into_inner());
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
        Ok((
            upsert,
            RegisterOutput {
                session_host: host,
                host_credential: credential,
            },
        ))
    }

    /// Removes a host (with its sessions only when `force`), and forgets
    /// its credential in the same step.
    pub async fn remove_host(
        &self,
        pool: &str,
        host: &str,
        force: bool,
    ) -> Result<(), BrokerError> {
        self.write(pool, |p, _| {
            p.remove_host(host, force)?;
            self.secrets
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .forget(p.name(), Some(host));
            Ok(())
        })
        .await
    }
}
