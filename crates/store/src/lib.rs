//! Durable state of deskbroker behind one [`Store`] trait.
//!
//! The broker keeps every pool's state in memory (the `placement` engine)
//! and writes each change here before it acknowledges it (rule S5). A store
//! only has to do two things well: give everything back at start
//! ([`Store::load`]) and apply a batch of changes atomically and durably
//! ([`Store::apply`]). Batches let the broker group-commit many requests in
//! one transaction.
//!
//! Backends: [`SqliteStore`] (embedded, the default) and [`PostgresStore`]
//! (one writer per database: the holder of its owner lock). Every backend
//! passes the same conformance suite, `conformance::run_all`, which is a
//! test fixture: it and the PostgreSQL tests' scratch databases are built
//! only with the `testing` feature, which crates enable from their
//! `[dev-dependencies]`.

#[cfg(feature = "testing")]
pub mod conformance;
pub mod postgres;
mod sqlite;

use std::sync::Arc;

use placement::{Host, PoolConfig, PoolCounters, Session};

pub use postgres::{Campaign, PostgresStore};
pub use sqlite::SqliteStore;

/// One change to persist. Deleting a pool removes its hosts and sessions;
/// deleting a host removes its sessions.
#[derive(Clone, Debug, PartialEq)]
pub enum Mutation {
    PutPool {
        config: PoolConfig,
        counters: PoolCounters,
    },
    PutCounters {
        pool: String,
        counters: PoolCounters,
    },
    DeletePool {
        pool: String,
    },
    PutHost {
        pool: String,
        host: Host,
    },
    DeleteHost {
        pool: String,
        host: String,
    },
    PutSession {
        pool: String,
        session: Session,
    },
    DeleteSession {
        pool: String,
        id: String,
    },
    /// Creates a registration token, or replaces it (the broker puts it
    /// again each time it registers a new host, with `used_hosts` counted).
    PutRegistrationToken {
        pool: String,
        token: RegistrationToken,
    },
    /// Revokes every registration token of the pool.
    DeleteRegistrationTokens {
        pool: String,
    },
    /// A host has one credential: this replaces the previous one. Removing
    /// the host removes it.
    PutHostCredential {
        pool: String,
        credential: HostCredential,
    },
    /// Creates or replaces an API credential (rule T1), by name.
    PutApiCredential {
        credential: ApiCredential,
    },
    /// Revokes an API credential.
    DeleteApiCredential {
        name: String,
    },
}

/// An API credential with a role (rule T1), kept only as the SHA-256 (hex)
/// of its token. `host_pools` empty means every pool; `expires_ms` None
/// means it does not expire.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ApiCredential {
    pub name: String,
    pub role: String,
    pub host_pools: Vec<String>,
    pub expires_ms: Option<i64>,
    pub hash: String,
}

/// A registration token, kept only as its SHA-256 (hex): the secret itself
/// is shown once, to the administrator who created it. A token is bound:
/// it registers at most `max_hosts` new hosts, and `used_hosts` says how
/// many it has, kept durably so that a restart does not refill it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistrationToken {
    pub hash: String,
    pub expires_ms: i64,
    /// How many new hosts the token may register (at least 1).
    pub max_hosts: u32,
    /// How many new hosts it has registered so far.
    pub used_hosts: u32,
}

/// A host's credential, kept only as its SHA-256 (hex).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostCredential {
    pub host: String,
    pub hash: String,
}

/// Everything a store keeps about one pool.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolRecord {
    pub config: PoolConfig,
    pub counters: PoolCounters,
    /// In query order.
    pub hosts: Vec<Host>,
    pub sessions: Vec<Session>,
    pub registration_tokens: Vec<RegistrationToken>,
    pub host_credentials: Vec<HostCredential>,
}

/// Everything a store keeps, pools in name order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub pools: Vec<PoolRecord>,
    /// API credentials, in name order.
    pub credentials: Vec<ApiCredential>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("postgres: {0}")]
    Postgres(#[from] postgres::PostgresError),
    #[error("stored record is not valid: {0}")]
    Corrupt(String),
    #[error("a mutation refers to a missing {0}")]
    Missing(String),
    #[error("store task failed: {0}")]
    Task(String),
}

/// A durable home for the broker's state.
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// Everything kept, to rebuild the engine at start.
    async fn load(&self) -> Result<Snapshot, StoreError>;

    /// Applies `batch` in order, all or nothing. When this returns `Ok`,
    /// every mutation survives a crash of the process or the machine.
    /// Shared, so that the caller still has the batch when it fails.
    async fn apply(&self, batch: Arc<[Mutation]>) -> Result<(), StoreError>;

    /// Checks that the store can still be written, cheaply; the writer
    /// calls it when idle, so that a lost database is noticed before the
    /// next write. Embedded stores have nothing to check.
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
}
