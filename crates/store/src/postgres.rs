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
//! TLS is not supported yet (`NoTls`): use it on loopback or a trusted
//! network; `sslmode=disable` and `prefer` connect in clear, `require` is
//! refused.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Row, Statement};

use crate::{HostCredential, Mutation, PoolRecord, RegistrationToken, Snapshot, Store, StoreError};

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

/// First key of deskbroker's advisory locks ("desk" in ASCII); the second
/// says which lock. Advisory locks are scoped to one database.
const LOCK_CLASS: i32 = 0x6465_736b;
/// Held for the life of a store's connection: one broker per database.
const OWNER_LOCK: i32 = 1;
/// Held while migrations run, so two processes never migrate at once.
const MIGRATION_LOCK: i32 = 2;

/// Migrations, in order; `schema_version.version` is how many have been
/// applied. Numbered as the SQLite store's, so a version means the same
/// tables in both.
const MIGRATIONS: &[&str] = &[
    // 1: pools, hosts, sessions. Unlike SQLite, sessions are indexed by
    // host: PostgreSQL's foreign-key cascade looks up the sessions of each
    // deleted host with a query of its own, and without this index every
    // such lookup would scan the whole pool's sessions (a pool of 10,000
    // hosts could not be deleted in reasonable time).
    r#"CREATE TABLE pools (
        name text COLLATE "C" PRIMARY KEY,
        config text NOT NULL,
        counters text NOT NULL
     );
     CREATE TABLE hosts (
        pool text COLLATE "C" NOT NULL REFERENCES pools(name) ON DELETE CASCADE,
        name text COLLATE "C" NOT NULL,
        seq bigint NOT NULL,
        record text NOT NULL,
        PRIMARY KEY (pool, name)
     );
     CREATE TABLE sessions (
        pool text COLLATE "C" NOT NULL,
        id text COLLATE "C" NOT NULL,
        host text COLLATE "C" NOT NULL,
        record text NOT NULL,
        PRIMARY KEY (pool, id),
        FOREIGN KEY (pool, host) REFERENCES hosts(pool, name) ON DELETE CASCADE
     );
     CREATE INDEX sessions_by_host ON sessions (pool, host);
     -- Counters of pools that must exist: a missing pool fails the
     -- statement (as a foreign key would), so that a batch's COMMIT can be
     -- sent with its statements, without waiting to check a row count.
     CREATE FUNCTION put_counters(pool_names text[], new_counters text[]) RETURNS void
     LANGUAGE plpgsql AS $$
     DECLARE
        updated bigint;
        missing text;
     BEGIN
        UPDATE pools AS p SET counters = u.counters
          FROM unnest(pool_names, new_counters) AS u(name, counters)
         WHERE p.name = u.name;
        GET DIAGNOSTICS updated = ROW_COUNT;
        IF updated < cardinality(pool_names) THEN
           SELECT string_agg(n, ', ') INTO missing
             FROM unnest(pool_names) AS n
            WHERE NOT EXISTS (SELECT 1 FROM pools WHERE name = n);
           RAISE EXCEPTION 'counters of a missing host pool'
             USING ERRCODE = 'foreign_key_violation',
                   DETAIL = format('Key (name)=(%s) is not present in table "pools".', missing);
        END IF;
     END $$;"#,
    // 2: registration tokens and host credentials (hashes only).
    r#"CREATE TABLE registration_tokens (
        pool text COLLATE "C" NOT NULL REFERENCES pools(name) ON DELETE CASCADE,
        hash text COLLATE "C" NOT NULL,
        expires_ms bigint NOT NULL,
        PRIMARY KEY (pool, hash)
     );
     CREATE TABLE host_credentials (
        pool text COLLATE "C" NOT NULL,
        host text COLLATE "C" NOT NULL,
        hash text NOT NULL,
        PRIMARY KEY (pool, host),
        FOREIGN KEY (pool, host) REFERENCES hosts(pool, name) ON DELETE CASCADE
     );"#,
];

/// What went wrong with PostgreSQL, worded for an operator. Messages name
/// the server and database but never the password of the URL.
#[derive(Debug, thiserror::Error)]
pub enum PostgresError {
    #[error("the database URL is not valid: {0}")]
    Url(String),
    #[error("cannot connect to PostgreSQL at {target}: {reason}")]
    Connect { target: String, reason: String },
    #[error("{context}: {reason}")]
    Query {
        context: &'static str,
        reason: String,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error(
        "no answer from PostgreSQL within {} s while trying to {what}; its outcome is \
         unknown, so the store must be reopened",
        timeout.as_secs()
    )]
    Timeout {
        what: &'static str,
        timeout: Duration,
    },
    #[error(
        "database {target} is in use by another deskbroker ({holder}): only one broker \
         process may use a database for now. Stop the other one; if it is gone, its \
         session ends by itself within a minute, or end it with \
         SELECT pg_terminate_backend(pid)"
    )]
    InUse { target: String, holder: String },
}

impl PostgresError {
    fn query(context: &'static str, source: tokio_postgres::Error) -> PostgresError {
        PostgresError::Query {
            context,
            reason: reason(&source),
            source,
        }
    }
}

/// A `tokio_postgres::Error` in full: its `Display` says only "db error",
/// the server's message, detail and hint are in its source.
fn reason(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{db} (SQLSTATE {})", db.code().code());
    }
    let mut s = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}

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
}

impl PostgresStore {
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
        let statements = Statements::prepare(&client).await?;
        tracing::info!(database = %target, "postgres store open");
        Ok(PostgresStore {
            conn: Arc::new(tokio::sync::Mutex::new(Connection {
                client,
                statements,
                in_transaction: false,
            })),
            target: target.into(),
        })
    }

    /// One try at becoming the leader of the broker replicas that share
    /// the database of `url`: connects, waits at most `wait` for the owner
    /// lock, and if it gets it applies migrations and publishes
    /// `advertise_url` as the leader's address (in the same session that
    /// holds the lock, so the address dies with the lock). Otherwise
    /// answers the current leader's address, if one is published.
    ///
    /// The store of a won campaign is the only one that may write: its
    /// connection holds the lock, and every write goes through it, so a
    /// leader that lost its connection cannot write any more (a new store
    /// needs a new campaign).
    pub async fn campaign(
        url: &str,
        advertise_url: &str,
        wait: Duration,
    ) -> Result<Campaign, StoreError> {
        let (client, target) = open_connection(url).await?;
        configure_session(&client).await?;
        match take_owner_lock(&client, &target, wait).await {
            Ok(()) => {}
            Err(StoreError::Postgres(PostgresError::InUse { .. })) => {
                return Ok(Campaign::Lost {
                    leader: leader_url(&client).await?,
                });
            }
            Err(e) => return Err(e),
        }
        migrate(&client).await?;
        publish_leader(&client, advertise_url).await?;
        let statements = Statements::prepare(&client).await?;
        tracing::info!(database = %target, advertise = advertise_url, "elected leader of the broker replicas");
        Ok(Campaign::Won(PostgresStore {
            conn: Arc::new(tokio::sync::Mutex::new(Connection {
                client,
                statements,
                in_transaction: false,
            })),
            target: target.into(),
        }))
    }

    /// `host:port/database` of this store, for messages.
    pub fn target(&self) -> &str {
        &self.target
    }
}

/// What one [`PostgresStore::campaign`] found.
pub enum Campaign {
    /// This process holds the owner lock: it decides, through this store.
    Won(PostgresStore),
    /// Another replica holds it; `leader` is its published address (None
    /// for the moment between taking the lock and publishing).
    Lost { leader: Option<String> },
}

/// Publishes the leader's address, tied to this session by its pid.
async fn publish_leader(client: &Client, advertise_url: &str) -> Result<(), StoreError> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS deskbroker_leader (
                one boolean PRIMARY KEY DEFAULT true CHECK (one),
                pid integer NOT NULL,
                url text NOT NULL,
                since timestamptz NOT NULL
             )",
        )
        .await
        .map_err(|e| PostgresError::query("cannot create the leader table", e))?;
    client
        .execute(
            "INSERT INTO deskbroker_leader (pid, url, since) VALUES (pg_backend_pid(), $1, now())
             ON CONFLICT (one) DO UPDATE SET pid = excluded.pid, url = excluded.url,
                                             since = excluded.since",
            &[&advertise_url],
        )
        .await
        .map_err(|e| PostgresError::query("cannot publish the leader's address", e))?;
    Ok(())
}

/// The published address of the session that holds the owner lock now
/// (an address left by a leader whose session ended is not answered).
async fn leader_url(client: &Client) -> Result<Option<String>, StoreError> {
    let row = client
        .query_opt(
            "SELECT l.url FROM deskbroker_leader l
              WHERE EXISTS (
                SELECT 1 FROM pg_locks k
                 WHERE k.pid = l.pid AND k.locktype = 'advisory' AND k.granted
                   AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                   AND k.classid::int8 = $1 AND k.objid::int8 = $2 AND k.objsubid = 2)",
            &[&i64::from(LOCK_CLASS), &i64::from(OWNER_LOCK)],
        )
        .await;
    match row {
        Ok(row) => Ok(row.map(|r| r.get(0))),
        Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => Ok(None),
        Err(e) => Err(PostgresError::query("cannot read the leader's address", e).into()),
    }
}

/// Whether `url` names a PostgreSQL database (the schemes this store takes).
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// Parses `url`, connects and spawns the task that drives the connection.
async fn open_connection(url: &str) -> Result<(Client, String), StoreError> {
    if !is_postgres_url(url) {
        return Err(
            PostgresError::Url("it must start with postgres:// or postgresql://".into()).into(),
        );
    }
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e: tokio_postgres::Error| PostgresError::Url(reason(&e)))?;
    if config.get_application_name().is_none() {
        config.application_name("deskbroker");
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    let target = describe(&config);
    let (client, connection) = config
        .connect(NoTls)
        .await
        .map_err(|e| PostgresError::Connect {
            target: target.clone(),
            reason: reason(&e),
        })?;
    let driven = target.clone();
    tokio::spawn(async move {
        // Ends when the client is dropped (cleanly) or the server goes away;
        // calls then fail with "connection closed".
        if let Err(e) = connection.await {
            tracing::error!(database = %driven, error = %reason(&e), "postgres connection lost");
        }
    });
    Ok((client, target))
}

/// `host:port/database` (first host), for messages and logs.
fn describe(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("{host}:{port}/{db}")
}

/// Makes sure a commit is durable when `COMMIT` returns, and asks the
/// server to notice a vanished broker quickly ([`SERVER_KEEPALIVE`]).
async fn configure_session(client: &Client) -> Result<(), StoreError> {
    let (idle, interval, count) = SERVER_KEEPALIVE;
    client
        .batch_execute(&format!(
            "SET tcp_keepalives_idle = {idle}; SET tcp_keepalives_interval = {interval}; \
             SET tcp_keepalives_count = {count}"
        ))
        .await
        .map_err(|e| PostgresError::query("cannot set TCP keepalives", e))?;
    let row = client
        .query_one(
            "SELECT current_setting('synchronous_commit'), current_setting('fsync')",
            &[],
        )
        .await
        .map_err(|e| PostgresError::query("cannot read the durability settings", e))?;
    let synchronous_commit: &str = row.get(0);
    let fsync: &str = row.get(1);
    if synchronous_commit == "off" {
        tracing::warn!("synchronous_commit is off on the server: turned on for the broker");
        client
            .batch_execute("SET synchronous_commit = on")
            .await
            .map_err(|e| PostgresError::query("cannot turn synchronous_commit on", e))?;
    }
    if fsync == "off" {
        tracing::warn!(
            "the PostgreSQL server runs with fsync=off: a crash of its machine can lose \
             acknowledged placements"
        );
    }
    Ok(())
}

/// Takes the owner lock, waiting on the lock itself for at most `wait`.
/// The lock is session-level: it stays after the transaction, until the
/// connection closes.
async fn take_owner_lock(client: &Client, target: &str, wait: Duration) -> Result<(), StoreError> {
    // lock_timeout = 0 would mean "wait forever".
    let timeout_ms = wait.as_millis().clamp(1, i32::MAX as u128).to_string();
    let taken = async {
        client.batch_execute("BEGIN").await?;
        client
            .execute(
                "SELECT set_config('lock_timeout', $1, true)",
                &[&timeout_ms],
            )
            .await?;
        client
            .execute(
                "SELECT pg_advisory_lock($1, $2)",
                &[&LOCK_CLASS, &OWNER_LOCK],
            )
            .await?;
        client.batch_execute("COMMIT").await
    }
    .await;
    let Err(e) = taken else { return Ok(()) };
    let _ = client.batch_execute("ROLLBACK").await;
    if e.code() != Some(&SqlState::LOCK_NOT_AVAILABLE) {
        return Err(PostgresError::query("cannot take the database's owner lock", e).into());
    }
    let holder = client
        .query_opt(
            "SELECT a.pid, coalesce(host(a.client_addr), 'local socket'), a.application_name
               FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
              WHERE l.locktype = 'advisory' AND l.granted
                AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND l.classid::int8 = $1 AND l.objid::int8 = $2 AND l.objsubid = 2",
            &[&i64::from(LOCK_CLASS), &i64::from(OWNER_LOCK)],
        )
        .await
        .ok()
        .flatten()
        .map(|r| {
            format!(
                "PostgreSQL backend pid {}, client {}, application {:?}",
                r.get::<_, i32>(0),
                r.get::<_, String>(1),
                r.get::<_, Option<String>>(2).unwrap_or_default()
            )
        })
        .unwrap_or_else(|| "holder not visible to this user".into());
    Err(PostgresError::InUse {
        target: target.to_string(),
        holder,
    }
    .into())
}

/// Applies the migrations this database lacks, all in one transaction, under
/// an advisory lock so that two processes starting at once take turns.
async fn migrate(client: &Client) -> Result<(), StoreError> {
    let run = async {
        client.batch_execute("BEGIN").await?;
        client
            .execute(
                "SELECT pg_advisory_xact_lock($1, $2)",
                &[&LOCK_CLASS, &MIGRATION_LOCK],
            )
            .await?;
        client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS schema_version (
                    one boolean PRIMARY KEY DEFAULT true CHECK (one),
                    version integer NOT NULL
                 );
                 INSERT INTO schema_version (version) VALUES (0) ON CONFLICT DO NOTHING",
            )
            .await?;
        let version: i32 = client
            .query_one("SELECT version FROM schema_version", &[])
            .await?
            .get(0);
        Ok::<_, tokio_postgres::Error>(version)
    };
    let version = match run.await {
        Ok(v) => v,
        Err(e) => {
            let _ = client.batch_execute("ROLLBACK").await;
            return Err(PostgresError::query("cannot read the schema version", e).into());
        }
    };
    let known = MIGRATIONS.len();
    if version < 0 || version as usize > known {
        let _ = client.batch_execute("ROLLBACK").await;
        return Err(StoreError::Corrupt(format!(
            "the database has schema version {version}, newer than this deskbroker \
             knows ({known}): upgrade deskbroker"
        )));
    }
    let apply = async {
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            client.batch_execute(sql).await?;
            client
                .execute(
                    "UPDATE schema_version SET version = $1",
                    &[&((i + 1) as i32)],
                )
                .await?;
            tracing::info!(version = i + 1, "applied store migration");
        }
        client.batch_execute("COMMIT").await
    };
    if let Err(e) = apply.await {
        let _ = client.batch_execute("ROLLBACK").await;
        return Err(PostgresError::query("cannot apply the store migrations", e).into());
    }
    Ok(())
}

/// What one mutation becomes in a multi-row statement: up to three key
/// columns borrowed from the batch, up to two JSON texts and one integer;
/// [`Kind::columns`] says which a statement takes.
struct Values<'a> {
    keys: [&'a str; 3],
    texts: [String; 2],
    int: i64,
}

/// A column of a statement's parameters (each parameter is an array).
#[derive(Clone, Copy)]
enum Column {
    Key(usize),
    Text(usize),
    Int,
}

/// The kinds of statement a batch is made of, one per kind of mutation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    PutPool,
    PutCounters,
    DeletePool,
    PutHost,
    DeleteHost,
    PutSession,
    DeleteSession,
    PutToken,
    DeleteTokens,
    PutCredential,
}

impl Kind {
    const ALL: [Kind; 10] = [
        Kind::PutPool,
        Kind::PutCounters,
        Kind::DeletePool,
        Kind::PutHost,
        Kind::DeleteHost,
        Kind::PutSession,
        Kind::DeleteSession,
        Kind::PutToken,
        Kind::DeleteTokens,
        Kind::PutCredential,
    ];

    fn of(m: &Mutation) -> Kind {
        match m {
            Mutation::PutPool { .. } => Kind::PutPool,
            Mutation::PutCounters { .. } => Kind::PutCounters,
            Mutation::DeletePool { .. } => Kind::DeletePool,
            Mutation::PutHost { .. } => Kind::PutHost,
            Mutation::DeleteHost { .. } => Kind::DeleteHost,
            Mutation::PutSession { .. } => Kind::PutSession,
            Mutation::DeleteSession { .. } => Kind::DeleteSession,
            Mutation::PutRegistrationToken { .. } => Kind::PutToken,
            Mutation::DeleteRegistrationTokens { .. } => Kind::DeleteTokens,
            Mutation::PutHostCredential { .. } => Kind::PutCredential,
        }
    }

    /// The statement: every parameter is an array of one column, so one
    /// statement writes a whole run of mutations.
    fn sql(self) -> &'static str {
        match self {
            Kind::PutPool => {
                "INSERT INTO pools (name, config, counters)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
                 ON CONFLICT (name) DO UPDATE SET config = excluded.config,
                                                  counters = excluded.counters"
            }
            Kind::PutCounters => "SELECT put_counters($1::text[], $2::text[])",
            // Hosts, sessions, tokens and credentials go with it (cascades;
            // the sessions through their index by host).
            Kind::DeletePool => "DELETE FROM pools WHERE name = ANY($1::text[])",
            Kind::PutHost => {
                "INSERT INTO hosts (pool, name, seq, record)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::text[])
                 ON CONFLICT (pool, name) DO UPDATE SET seq = excluded.seq,
                                                        record = excluded.record"
            }
            Kind::DeleteHost => {
                "DELETE FROM hosts AS h USING unnest($1::text[], $2::text[]) AS d(pool, name)
                 WHERE h.pool = d.pool AND h.name = d.name"
            }
            Kind::PutSession => {
                "INSERT INTO sessions (pool, id, host, record)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
                 ON CONFLICT (pool, id) DO UPDATE SET host = excluded.host,
                                                      record = excluded.record"
            }
            Kind::DeleteSession => {
                "DELETE FROM sessions AS s USING unnest($1::text[], $2::text[]) AS d(pool, id)
                 WHERE s.pool = d.pool AND s.id = d.id"
            }
            Kind::PutToken => {
                "INSERT INTO registration_tokens (pool, hash, expires_ms)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::int8[])
                 ON CONFLICT (pool, hash) DO UPDATE SET expires_ms = excluded.expires_ms"
            }
            Kind::DeleteTokens => "DELETE FROM registration_tokens WHERE pool = ANY($1::text[])",
            Kind::PutCredential => {
                "INSERT INTO host_credentials (pool, host, hash)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
                 ON CONFLICT (pool, host) DO UPDATE SET hash = excluded.hash"
            }
        }
    }

    /// The statement's parameters, in order.
    fn columns(self) -> &'static [Column] {
        use Column::{Int, Key, Text};
        match self {
            Kind::PutPool => &[Key(0), Text(0), Text(1)],
            Kind::PutCounters => &[Key(0), Text(0)],
            Kind::DeletePool | Kind::DeleteTokens => &[Key(0)],
            Kind::PutHost => &[Key(0), Key(1), Int, Text(0)],
            Kind::DeleteHost | Kind::DeleteSession => &[Key(0), Key(1)],
            Kind::PutSession => &[Key(0), Key(1), Key(2), Text(0)],
            Kind::PutToken => &[Key(0), Key(1), Int],
            Kind::PutCredential => &[Key(0), Key(1), Key(2)],
        }
    }

    /// Whether the statement is an upsert keyed by the first two keys.
    fn keyed(self) -> bool {
        matches!(
            self,
            Kind::PutPool
                | Kind::PutCounters
                | Kind::PutHost
                | Kind::PutSession
                | Kind::PutToken
                | Kind::PutCredential
        )
    }

    /// What a foreign-key failure of this statement means is missing.
    fn parent(self) -> &'static str {
        match self {
            Kind::PutSession | Kind::PutCredential => "session host",
            _ => "host pool",
        }
    }
}

fn values(m: &Mutation) -> Values<'_> {
    fn v(keys: [&str; 3], texts: [String; 2], int: i64) -> Values<'_> {
        Values { keys, texts, int }
    }
    let none = String::new;
    match m {
        Mutation::PutPool { config, counters } => v(
            [&config.name, "", ""],
            [to_json(config), to_json(counters)],
            0,
        ),
        Mutation::PutCounters { pool, counters } => {
            v([pool, "", ""], [to_json(counters), none()], 0)
        }
        Mutation::DeletePool { pool } | Mutation::DeleteRegistrationTokens { pool } => {
            v([pool, "", ""], [none(), none()], 0)
        }
        Mutation::PutHost { pool, host } => v(
            [pool, &host.spec.name, ""],
            [to_json(host), none()],
            host.seq as i64,
        ),
        Mutation::DeleteHost { pool, host } => v([pool, host, ""], [none(), none()], 0),
        Mutation::PutSession { pool, session } => v(
            [pool, &session.id, &session.host],
            [to_json(session), none()],
            0,
        ),
        Mutation::DeleteSession { pool, id } => v([pool, id, ""], [none(), none()], 0),
        Mutation::PutRegistrationToken { pool, token } => {
            v([pool, &token.hash, ""], [none(), none()], token.expires_ms)
        }
        Mutation::PutHostCredential { pool, credential } => v(
            [pool, &credential.host, &credential.hash],
            [none(), none()],
            0,
        ),
    }
}

/// One statement of a batch: a run of consecutive mutations of one kind.
struct Step<'a> {
    kind: Kind,
    rows: Vec<Values<'a>>,
    /// Keys written so far, for keyed kinds.
    keys: HashSet<(&'a str, &'a str)>,
}

impl<'a> Step<'a> {
    fn new(kind: Kind) -> Step<'a> {
        Step {
            kind,
            rows: Vec::new(),
            keys: HashSet::new(),
        }
    }

    /// Adds `v` to this statement, or gives it back when it cannot join:
    /// another kind, or a key this upsert already writes (`ON CONFLICT DO
    /// UPDATE` may not touch a row twice, and keeping only the last would
    /// skip the checks of the first, which SQLite makes one at a time).
    fn join(&mut self, kind: Kind, v: Values<'a>) -> Option<Values<'a>> {
        if kind != self.kind || (kind.keyed() && !self.keys.insert((v.keys[0], v.keys[1]))) {
            return Some(v);
        }
        self.rows.push(v);
        None
    }

    /// The statement's parameters, one array a column.
    fn params(&self) -> Vec<Box<dyn ToSql + Sync + Send + '_>> {
        self.kind
            .columns()
            .iter()
            .map(|c| -> Box<dyn ToSql + Sync + Send + '_> {
                match *c {
                    Column::Key(i) => {
                        Box::new(self.rows.iter().map(|r| r.keys[i]).collect::<Vec<_>>())
                    }
                    Column::Text(i) => Box::new(
                        self.rows
                            .iter()
                            .map(|r| r.texts[i].as_str())
                            .collect::<Vec<_>>(),
                    ),
                    Column::Int => Box::new(self.rows.iter().map(|r| r.int).collect::<Vec<_>>()),
                }
            })
            .collect()
    }
}

/// Turns a batch into statements, in order: consecutive mutations of one
/// kind share a statement (until a key repeats), and only the last counters
/// of each pool are written (exactly as the SQLite store coalesces them).
fn plan(batch: &[Mutation]) -> Vec<Step<'_>> {
    let mut last_counters = HashMap::new();
    for (i, m) in batch.iter().enumerate() {
        if let Mutation::PutCounters { pool, .. } = m {
            last_counters.insert(pool.as_str(), i);
        }
    }
    let mut steps: Vec<Step<'_>> = Vec::new();
    for (i, m) in batch.iter().enumerate() {
        if let Mutation::PutCounters { pool, .. } = m
            && last_counters.get(pool.as_str()) != Some(&i)
        {
            continue;
        }
        let kind = Kind::of(m);
        let v = values(m);
        let left = match steps.last_mut() {
            Some(step) => step.join(kind, v),
            None => Some(v),
        };
        if let Some(v) = left {
            let mut step = Step::new(kind);
            step.join(kind, v);
            steps.push(step);
        }
    }
    steps
}

/// Every statement a batch can use, prepared once per connection.
struct Statements(Vec<Statement>);

impl Statements {
    async fn prepare(client: &Client) -> Result<Statements, StoreError> {
        let mut all = Vec::with_capacity(Kind::ALL.len());
        for kind in Kind::ALL {
            all.push(
                client.prepare(kind.sql()).await.map_err(|e| {
                    PostgresError::query("cannot prepare the store's statements", e)
                })?,
            );
        }
        Ok(Statements(all))
    }

    fn get(&self, kind: Kind) -> &Statement {
        // `ALL` lists every kind once, in declaration order.
        &self.0[kind as usize]
    }
}

type Answer = Result<Vec<Row>, tokio_postgres::Error>;
type Pending<'a> = Pin<Box<dyn Future<Output = Answer> + Send + 'a>>;

/// Runs `requests` pipelined: each is polled once, in order, which sends it
/// (tokio-postgres sends a request on its first poll), so the server gets
/// them all in batch order without waiting for any answer; then the
/// answers are awaited in the same order.
async fn pipeline(mut requests: Vec<Pending<'_>>) -> Vec<Answer> {
    let mut early: Vec<Option<Answer>> = Vec::with_capacity(requests.len());
    std::future::poll_fn(|cx| {
        for r in &mut requests {
            early.push(match r.as_mut().poll(cx) {
                Poll::Ready(a) => Some(a),
                Poll::Pending => None,
            });
        }
        Poll::Ready(())
    })
    .await;
    let mut answers = Vec::with_capacity(requests.len());
    for (r, a) in requests.into_iter().zip(early) {
        answers.push(match a {
            Some(a) => a,
            None => r.await,
        });
    }
    answers
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

    /// One round trip: `BEGIN`, every statement and `COMMIT` are sent
    /// together. If a statement fails, the server aborts the transaction,
    /// the statements after it fail too, and `COMMIT` rolls back.
    async fn apply(&mut self, batch: &[Mutation]) -> Result<(), StoreError> {
        self.recover().await?;
        let steps = plan(batch);
        if steps.is_empty() {
            // Nothing to write; everything before is already committed.
            return Ok(());
        }
        self.in_transaction = true;
        let client = &self.client;
        let statements = &self.statements;
        let params: Vec<_> = steps.iter().map(Step::params).collect();
        let mut requests: Vec<Pending<'_>> = Vec::with_capacity(steps.len() + 2);
        requests.push(Box::pin(async move {
            client.batch_execute("BEGIN").await.map(|()| Vec::new())
        }));
        for (step, params) in steps.iter().zip(&params) {
            requests.push(Box::pin(async move {
                let refs: Vec<&(dyn ToSql + Sync)> =
                    params.iter().map(|p| &**p as &(dyn ToSql + Sync)).collect();
                client.query(statements.get(step.kind), &refs).await
            }));
        }
        requests.push(Box::pin(async move {
            client.batch_execute("COMMIT").await.map(|()| Vec::new())
        }));
        let mut answers = pipeline(requests).await;
        let Some(committed) = answers.pop() else {
            return Err(StoreError::Task("a batch lost its answers".into()));
        };
        let mut answers = answers.into_iter();
        let begun = answers.next().unwrap_or_else(|| Ok(Vec::new()));
        // Whatever failed, the transaction is over once COMMIT answered.
        self.in_transaction = committed.is_err();
        begun.map_err(|e| PostgresError::query("cannot begin a transaction", e))?;
        check(&steps, answers)?;
        committed.map_err(|e| PostgresError::query("cannot commit a batch", e))?;
        Ok(())
    }

    async fn load(&mut self) -> Result<Snapshot, StoreError> {
        self.recover().await?;
        self.in_transaction = true;
        let loaded = self.load_in_transaction().await;
        let ended = self.client.batch_execute("COMMIT").await;
        if ended.is_ok() {
            self.in_transaction = false;
        }
        let snapshot = loaded?;
        ended.map_err(|e| PostgresError::query("cannot end the load transaction", e))?;
        Ok(snapshot)
    }

    /// Reads everything in one consistent snapshot, each table in one
    /// query in the order SQLite gives (pools by name, hosts by query
    /// order, sessions by id, tokens by hash, credentials by host).
    async fn load_in_transaction(&self) -> Result<Snapshot, StoreError> {
        let c = &self.client;
        let q = |e| PostgresError::query("cannot load the store", e);
        c.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await
            .map_err(q)?;
        let mut pools = Vec::new();
        let mut index = HashMap::new();
        for row in c
            .query(
                "SELECT name, config, counters FROM pools ORDER BY name",
                &[],
            )
            .await
            .map_err(q)?
        {
            index.insert(row.get::<_, String>(0), pools.len());
            pools.push(PoolRecord {
                config: from_json(row.get(1))?,
                counters: from_json(row.get(2))?,
                hosts: Vec::new(),
                sessions: Vec::new(),
                registration_tokens: Vec::new(),
                host_credentials: Vec::new(),
            });
        }
        let pool_of = |row: &Row| -> Result<usize, StoreError> {
            let name: &str = row.get(0);
            index
                .get(name)
                .copied()
                .ok_or_else(|| StoreError::Corrupt(format!("a record of missing pool {name}")))
        };
        for row in c
            .query("SELECT pool, record FROM hosts ORDER BY pool, seq", &[])
            .await
            .map_err(q)?
        {
            pools[pool_of(&row)?].hosts.push(from_json(row.get(1))?);
        }
        for row in c
            .query("SELECT pool, record FROM sessions ORDER BY pool, id", &[])
            .await
            .map_err(q)?
        {
            pools[pool_of(&row)?].sessions.push(from_json(row.get(1))?);
        }
        for row in c
            .query(
                "SELECT pool, hash, expires_ms FROM registration_tokens ORDER BY pool, hash",
                &[],
            )
            .await
            .map_err(q)?
        {
            pools[pool_of(&row)?]
                .registration_tokens
                .push(RegistrationToken {
                    hash: row.get(1),
                    expires_ms: row.get(2),
                });
        }
        for row in c
            .query(
                "SELECT pool, host, hash FROM host_credentials ORDER BY pool, host",
                &[],
            )
            .await
            .map_err(q)?
        {
            pools[pool_of(&row)?].host_credentials.push(HostCredential {
                host: row.get(1),
                hash: row.get(2),
            });
        }
        Ok(Snapshot { pools })
    }
}

/// The first failure among a batch's answers, in batch order (after one
/// statement fails, the rest only say the transaction is aborted).
fn check(steps: &[Step<'_>], answers: impl Iterator<Item = Answer>) -> Result<(), StoreError> {
    for (step, answer) in steps.iter().zip(answers) {
        match answer {
            Ok(_) => {}
            Err(e) if e.code() == Some(&SqlState::FOREIGN_KEY_VIOLATION) => {
                let detail = e
                    .as_db_error()
                    .and_then(|d| d.detail())
                    .unwrap_or("no detail")
                    .to_string();
                return Err(StoreError::Missing(format!(
                    "{} ({detail})",
                    step.kind.parent()
                )));
            }
            Err(e) => return Err(PostgresError::query("cannot apply a batch", e).into()),
        }
    }
    Ok(())
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("records serialize to JSON")
}

fn from_json<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| StoreError::Corrupt(e.to_string()))
}

#[async_trait::async_trait]
impl Store for PostgresStore {
    async fn load(&self) -> Result<Snapshot, StoreError> {
        let run = async { self.conn.lock().await.load().await };
        tokio::time::timeout(LOAD_TIMEOUT, run)
            .await
            .unwrap_or_else(|_| {
                Err(PostgresError::Timeout {
                    what: "load the store",
                    timeout: LOAD_TIMEOUT,
                }
                .into())
            })
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
        tokio::time::timeout(PING_TIMEOUT, run)
            .await
            .unwrap_or_else(|_| {
                Err(PostgresError::Timeout {
                    what: "check the connection",
                    timeout: PING_TIMEOUT,
                }
                .into())
            })
    }

    async fn apply(&self, batch: Arc<[Mutation]>) -> Result<(), StoreError> {
        let run = async { self.conn.lock().await.apply(&batch).await };
        tokio::time::timeout(APPLY_TIMEOUT, run)
            .await
            .unwrap_or_else(|_| {
                Err(PostgresError::Timeout {
                    what: "commit a batch",
                    timeout: APPLY_TIMEOUT,
                }
                .into())
            })
    }
}

/// Environment variable naming the PostgreSQL server of the tests.
pub const TEST_SERVER_URL_ENV: &str = "DESKBROKER_TEST_DATABASE_URL";
/// The tests' server when [`TEST_SERVER_URL_ENV`] is unset: this machine's.
pub const TEST_SERVER_URL_DEFAULT: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The tests' server URL: [`TEST_SERVER_URL_ENV`], or
/// [`TEST_SERVER_URL_DEFAULT`].
pub fn test_server_url() -> String {
    std::env::var(TEST_SERVER_URL_ENV).unwrap_or_else(|_| TEST_SERVER_URL_DEFAULT.into())
}

/// A fresh database for one test (of this crate or of the binary), created
/// through the server URL's database and dropped (`WITH (FORCE)`, ending
/// any session still on it) when this value is dropped, even when the
/// test panics.
pub struct ScratchDatabase {
    server_url: String,
    name: String,
    url: String,
}

impl ScratchDatabase {
    /// Creates `deskbroker_test_<unique>_<label>` on the server of
    /// `server_url` (whose own database is only used to run
    /// `CREATE DATABASE`).
    pub async fn create(server_url: &str, label: &str) -> Result<ScratchDatabase, StoreError> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let label: String = label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .take(20)
            .collect();
        let name = format!(
            "deskbroker_test_{}_{nanos:x}_{n}_{label}",
            std::process::id()
        );
        let url = with_database(server_url, &name)?;
        let (client, _) = open_connection(server_url).await?;
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .map_err(|e| PostgresError::query("cannot create a scratch database", e))?;
        Ok(ScratchDatabase {
            server_url: server_url.to_string(),
            name,
            url,
        })
    }

    /// URL of the scratch database.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for ScratchDatabase {
    fn drop(&mut self) {
        let server_url = self.server_url.clone();
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        // A runtime of its own on a thread of its own: drop may run inside
        // an async test, where blocking on that runtime is not allowed.
        let dropped = std::thread::spawn(move || -> Result<(), String> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(async {
                let (client, _) = open_connection(&server_url)
                    .await
                    .map_err(|e| e.to_string())?;
                client.batch_execute(&sql).await.map_err(|e| reason(&e))
            })
        })
        .join();
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("cannot drop scratch database {}: {e}", self.name),
            Err(_) => eprintln!("cannot drop scratch database {}: panicked", self.name),
        }
    }
}

/// `url` with its database replaced by `name` (the query is kept).
fn with_database(url: &str, name: &str) -> Result<String, StoreError> {
    let Some(scheme_end) = url.find("://").filter(|_| is_postgres_url(url)) else {
        return Err(
            PostgresError::Url("it must start with postgres:// or postgresql://".into()).into(),
        );
    };
    let after = scheme_end + 3;
    let rest = &url[after..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let query = tail.find('?').map_or("", |q| &tail[q..]);
    Ok(format!("{}{authority}/{name}{query}", &url[..after]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_listed_in_declaration_order() {
        // `Statements::get` indexes by `kind as usize`.
        for (i, kind) in Kind::ALL.iter().enumerate() {
            assert_eq!(*kind as usize, i, "{kind:?}");
        }
    }

    #[test]
    fn with_database_replaces_only_the_database() {
        let cases = [
            (
                "postgres://postgres@127.0.0.1:5432/test",
                "postgres://postgres@127.0.0.1:5432/x",
            ),
            (
                "postgresql://u:p@h/test?sslmode=disable",
                "postgresql://u:p@h/x?sslmode=disable",
            ),
            ("postgres://h:5432", "postgres://h:5432/x"),
            (
                "postgres://h?sslmode=disable",
                "postgres://h/x?sslmode=disable",
            ),
        ];
        for (url, want) in cases {
            assert_eq!(with_database(url, "x").expect("url"), want, "{url}");
        }
        assert!(with_database("mysql://h/db", "x").is_err());
    }

    #[test]
    fn runs_share_a_statement_until_a_key_repeats_and_counters_coalesce() {
        let s = |id: &str, user: &str| Mutation::PutSession {
            pool: "p".into(),
            session: crate::conformance::session(id, "h", user),
        };
        let counters = |n: u64| Mutation::PutCounters {
            pool: "p".into(),
            counters: placement::PoolCounters {
                next_seq: n,
                ..placement::PoolCounters::default()
            },
        };
        let batch = vec![
            s("a", "1"),
            counters(1),
            s("b", "2"),
            s("a", "3"),
            s("c", "4"),
            counters(2),
            Mutation::DeleteSession {
                pool: "p".into(),
                id: "a".into(),
            },
            Mutation::DeleteSession {
                pool: "p".into(),
                id: "a".into(),
            },
            s("a", "5"),
        ];
        let steps = plan(&batch);
        let rows: Vec<(Kind, Vec<&str>)> = steps
            .iter()
            .map(|s| (s.kind, s.rows.iter().map(|r| r.keys[1]).collect()))
            .collect();
        // The first counters are dropped, so the first puts join; the
        // second put of "a" starts a statement of its own; the last
        // counters stay where they were; deletes may repeat a key.
        assert_eq!(
            rows,
            [
                (Kind::PutSession, vec!["a", "b"]),
                (Kind::PutSession, vec!["a", "c"]),
                (Kind::PutCounters, vec![""]),
                (Kind::DeleteSession, vec!["a", "a"]),
                (Kind::PutSession, vec!["a"]),
            ]
        );
    }
}
