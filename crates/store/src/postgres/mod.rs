//! The PostgreSQL store: the same tables, records and semantics as the
//! embedded SQLite store ([`crate::SqliteStore`]), in a PostgreSQL database
//! named by a `postgres://` URL (`deskbroker serve --database-url`).
//!
//! **One writer per database.** Each broker keeps every pool's engine in
//! memory and decides alone, so two brokers writing one database would
//! overwrite each other. The writer is the process whose connection holds a
//! session-level advisory lock, the *owner lock*: [`PostgresStore::connect`]
//! takes it (waiting a little) or refuses to start, and
//! [`PostgresStore::campaign`] — used by broker replicas — takes it if it is
//! free and otherwise answers the address the current holder published
//! (`deskbroker_leader`, tied to the holder's backend pid). Every write
//! goes through the connection that holds the lock, so a process that lost
//! its connection has lost the right to write with it.

//! How it keeps its promises:
//! - *Atomic*: a batch is one transaction, all or nothing. A session on a
//!   missing host, or the counters of a missing pool, fail the whole batch
//!   with [`StoreError::Missing`], as in SQLite.
//! - *Durable*: `COMMIT` returns once the WAL is flushed
//!   (`synchronous_commit = on`, PostgreSQL's default; a connection that
//!   finds it `off` turns it back on for itself and says so).
//! - *Fast*: consecutive mutations of one kind become one multi-row
//!   statement over `unnest` arrays (a batch of placements is one
//!   `INSERT … ON CONFLICT` and one counters `UPDATE`), every statement is
//!   prepared once, and all statements of a batch are sent at once without
//!   waiting for each answer (pipelining), `BEGIN` and `COMMIT` included:
//!   a batch costs one round trip and one WAL flush, whatever its size.
//!
//! Records are JSON in `text` columns, exactly what SQLite keeps: a JSON
//! text never holds a NUL byte, while `jsonb` refuses the `\u0000` escape a
//! description may legally contain. Key columns use the `"C"` collation, so
//! `load` returns names in byte order as SQLite does, whatever the
//! database's locale.
//!
//! Schema changes are numbered migrations, applied at start in one
//! transaction under `pg_advisory_xact_lock`, recorded in `schema_version`.
//!
//! Connections: one ([`MAX_CONNECTIONS`]), behind an async mutex, like the
//! SQLite store: the broker's writer sends one batch at a time, and the owner
//! lock lives on that connection. If the connection is lost, every later
//! call fails, the broker stops (crash-only), and its restart reconnects.
//! TLS as the URL asks, read as libpq reads it: `sslmode=require`
//! encrypts (checking the certificate only against an `sslrootcert`),
//! `verify-ca` checks the chain, `verify-full` the chain and the host name
//! (roots: `sslrootcert`, else the system's); no `sslmode`, `disable`,
//! `allow` and `prefer` connect in clear.
//!
//! The modules, one seam each: `connection` (URLs, connecting,
//! session settings), `lock` (the owner lock and the leader's published
//! address), `schema` (migrations), `apply` (a batch as pipelined
//! multi-row statements), `load` (everything back in one snapshot),
//! `audit` (the audit log, read on demand) and,
//! behind the `testing` feature, `scratch` (throwaway databases for tests).

mod apply;
mod audit;
mod connection;
mod error;
mod lease;
mod load;
mod lock;
pub(crate) mod schema;
#[cfg(feature = "testing")]
mod scratch;

use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::Client;

use crate::{AuditQuery, AuditRow, Flush, Mutation, Snapshot, Store, StoreError};
use apply::Statements;
use connection::{configure_session, open_connection};
use lock::{end_session, publish_leader, published_leader, take_owner_lock};
use schema::migrate;

pub use connection::is_postgres_url;
pub use error::PostgresError;
use lease::Predecessor;
pub use lease::{Lease, LeaseLost, RENEWALS_PER_LEASE};
#[cfg(feature = "testing")]
pub use scratch::{
    ScratchDatabase, TEST_SERVER_URL_DEFAULT, TEST_SERVER_URL_ENV, execute_for_tests,
    test_server_url,
};

/// Connections a store opens to the server: one, behind a mutex. The
/// broker's writer applies one batch at a time, so a second connection
/// would only wait for the first.
pub const MAX_CONNECTIONS: usize = 1;
/// How long connecting may take when the URL sets no `connect_timeout`.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a new store waits for the owner lock of its database before
/// it gives up: long enough for the server to notice that a killed
/// broker's connection is gone, short enough to report a second broker.
pub const OWNER_LOCK_WAIT: Duration = Duration::from_secs(10);
/// How long one batch may take, from the queue to `COMMIT`. Past it the
/// batch fails with an unknown outcome, the broker stops, and its restart
/// reads what was really committed.
pub const APPLY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a liveness check of the connection may take.
pub const PING_TIMEOUT: Duration = Duration::from_secs(5);
/// How long loading everything at start may take.
pub const LOAD_TIMEOUT: Duration = Duration::from_secs(300);
/// TCP keepalive asked of the server for this connection (idle seconds,
/// seconds between probes, probes): if a broker's machine vanishes without
/// closing its connection, the server ends that session, and so frees the
/// owner lock, within about 25 s instead of the operating system's hours.
pub const SERVER_KEEPALIVE: (u32, u32, u32) = (10, 5, 3);

/// The PostgreSQL backend of [`Store`]. Cloning shares the connection.
#[derive(Clone)]
pub struct PostgresStore {
    conn: Arc<tokio::sync::Mutex<Connection>>,
    /// `host:port/database`, for messages (never the password).
    target: Arc<str>,
}

/// The one connection and what lives with it.
struct Connection {
    client: Client,
    statements: Statements,
    /// Set between `BEGIN` and the end of its transaction: a call that was
    /// cancelled half-way (a timeout) leaves it set, and the next call rolls
    /// that transaction back first.
    in_transaction: bool,
    /// The audit log's size in bytes (its records' JSON), as counted by
    /// this connection's commits; None until a prune counts it afresh (at
    /// open, and after a batch that failed).
    audit_bytes: Option<i64>,
    /// A replica leader's epoch: every batch first passes
    /// `deskbroker_fence` with it, in its own transaction, so a leader
    /// that was replaced commits nothing even if its connection survived.
    epoch: Option<i64>,
}

impl PostgresStore {
    /// Commits `batch`, flushed as `flush` says, within [`APPLY_TIMEOUT`].
    async fn apply_with(&self, batch: &[Mutation], flush: Flush) -> Result<(), StoreError> {
        let run = async { self.conn.lock().await.apply(batch, flush).await };
        within(APPLY_TIMEOUT, "commit a batch", run).await
    }

    /// Connects to the database of `url` (`postgres://` or `postgresql://`),
    /// takes its owner lock (waiting up to [`OWNER_LOCK_WAIT`]), applies
    /// migrations and prepares statements. Must run inside a Tokio runtime:
    /// the connection is driven by a task spawned on it.
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        PostgresStore::connect_with_lock_wait(url, OWNER_LOCK_WAIT).await
    }

    /// Like [`PostgresStore::connect`], waiting at most `lock_wait` for
    /// another process to release the database.
    pub async fn connect_with_lock_wait(
        url: &str,
        lock_wait: Duration,
    ) -> Result<PostgresStore, StoreError> {
        let (client, target) = open_connection(url).await?;
        configure_session(&client).await?;
        take_owner_lock(&client, &target, lock_wait).await?;
        migrate(&client).await?;
        let statements = Statements::prepare(&client, false).await?;
        tracing::info!(database = %target, "postgres store open");
        Ok(PostgresStore {
            conn: Arc::new(tokio::sync::Mutex::new(Connection {
                client,
                statements,
                in_transaction: false,
                audit_bytes: None,
                epoch: None,
            })),
            target: target.into(),
        })
    }

    /// One try at becoming the leader of the broker replicas that share
    /// the database of `url`: connects, waits at most `wait` for the owner
    /// lock, and if it gets it applies migrations and publishes
    /// `advertise_url` as the leader's address with the next epoch and a
    /// lease of `lease` (in the same session that holds the lock, so the
    /// address dies with the lock). Otherwise answers the current leader,
    /// if one is published — unless its lease has expired: then it ends
    /// that leader's database session, which frees the lock, and tries
    /// once more.
    ///
    /// The store of a won campaign is the only one that may write: its
    /// connection holds the lock, every write goes through it, and every
    /// batch is checked against its epoch in the same transaction. The
    /// lease must be kept ([`Lease::keep`]) from the moment it is won.
    pub async fn campaign(
        url: &str,
        advertise_url: &str,
        wait: Duration,
        lease: Duration,
    ) -> Result<Campaign, StoreError> {
        let (client, target) = open_connection(url).await?;
        configure_session(&client).await?;
        match take_owner_lock(&client, &target, wait).await {
            Ok(()) => {}
            Err(StoreError::Postgres(PostgresError::InUse { .. })) => {
                let leader = match published_leader(&client).await? {
                    Some(l) if l.expired => l,
                    other => {
                        return Ok(Campaign::Lost {
                            lease_left: other.as_ref().and_then(|l| l.lease_left),
                            leader: other.map(|l| Leader {
                                url: l.url,
                                epoch: l.epoch,
                                stale: l.stale,
                            }),
                        });
                    }
                };
                let ended = end_session(&client, leader.pid).await?;
                tracing::warn!(
                    leader = %leader.url, epoch = leader.epoch, pid = leader.pid, ended,
                    "the leader's lease has expired: ending its database session to take over"
                );
                // The lock is free once that backend has exited.
                let exit_wait = wait.max(Duration::from_secs(1));
                match take_owner_lock(&client, &target, exit_wait).await {
                    Ok(()) => {}
                    Err(StoreError::Postgres(PostgresError::InUse { .. })) => {
                        return Ok(Campaign::Lost {
                            leader: None,
                            lease_left: None,
                        });
                    }
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
        migrate(&client).await?;
        let granted = std::time::Instant::now();
        let succession = publish_leader(&client, advertise_url, lease).await?;
        let epoch = succession.epoch;
        let predecessor = Predecessor {
            epoch: succession.previous_epoch,
            url: succession.previous_url,
            until: std::time::Instant::now() + succession.previous_left,
        };
        let statements = Statements::prepare(&client, true).await?;
        tracing::info!(database = %target, advertise = advertise_url, epoch, "elected leader of the broker replicas");
        Ok(Campaign::Won {
            store: PostgresStore {
                conn: Arc::new(tokio::sync::Mutex::new(Connection {
                    client,
                    statements,
                    in_transaction: false,
                    audit_bytes: None,
                    epoch: Some(epoch),
                })),
                target: target.into(),
            },
            lease: Arc::new(Lease::new(url, epoch, lease, granted, predecessor)),
        })
    }

    /// `host:port/database` of this store, for messages.
    pub fn target(&self) -> &str {
        &self.target
    }
}

/// What one [`PostgresStore::campaign`] found.
pub enum Campaign {
    /// This process holds the owner lock: it decides, through this store,
    /// for as long as it keeps the lease.
    Won {
        store: PostgresStore,
        lease: Arc<Lease>,
    },
    /// Another replica holds it; `leader` is what it published (None for
    /// the moment between taking the lock and publishing, and while an
    /// expired leader's session is ending), and `lease_left` how long its
    /// lease still runs: the next campaign need not wait on the lock for
    /// longer than that.
    Lost {
        leader: Option<Leader>,
        lease_left: Option<Duration>,
    },
}

/// The leader another replica published.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leader {
    /// Where it answers (its `--advertise-url`).
    pub url: String,
    pub epoch: i64,
    /// It has not renewed its lease for half of it: it may be frozen, and
    /// is replaced if it stays so until the lease runs out.
    pub stale: bool,
}

impl Connection {
    /// Ends a transaction a cancelled call left open.
    async fn recover(&mut self) -> Result<(), StoreError> {
        if self.in_transaction {
            self.client
                .batch_execute("ROLLBACK")
                .await
                .map_err(|e| PostgresError::query("cannot roll back an interrupted batch", e))?;
            self.in_transaction = false;
        }
        Ok(())
    }
}

/// Runs `run`, or fails with a timeout naming `what` once `timeout` has
/// passed (a server that stopped answering holds no caller for ever).
async fn within<T>(
    timeout: Duration,
    what: &'static str,
    run: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    tokio::time::timeout(timeout, run)
        .await
        .unwrap_or_else(|_| Err(PostgresError::Timeout { what, timeout }.into()))
}

#[async_trait::async_trait]
impl Store for PostgresStore {
    async fn load(&self) -> Result<Snapshot, StoreError> {
        let run = async { self.conn.lock().await.load().await };
        within(LOAD_TIMEOUT, "load the store", run).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let run = async {
            let mut conn = self.conn.lock().await;
            conn.recover().await?;
            conn.client
                .simple_query("SELECT 1")
                .await
                .map_err(|e| PostgresError::query("the database does not answer", e))?;
            Ok(())
        };
        within(PING_TIMEOUT, "check the connection", run).await
    }

    async fn audit(&self, query: AuditQuery) -> Result<Vec<AuditRow>, StoreError> {
        let run = async { self.conn.lock().await.audit(&query).await };
        within(APPLY_TIMEOUT, "read the audit log", run).await
    }

    async fn scaling_actions(
        &self,
        query: crate::ScalingActionQuery,
    ) -> Result<Vec<crate::ScalingAction>, StoreError> {
        let run = async { self.conn.lock().await.scaling_actions(&query).await };
        within(APPLY_TIMEOUT, "read the scaling actions", run).await
    }

    async fn apply(&self, batch: Arc<[Mutation]>) -> Result<(), StoreError> {
        self.apply_with(&batch, Flush::Now).await
    }

    async fn apply_relaxed(&self, batch: Arc<[Mutation]>) -> Result<(), StoreError> {
        self.apply_with(&batch, Flush::Soon).await
    }
}
