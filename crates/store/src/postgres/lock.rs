//! The advisory locks: the *owner lock* that makes one process the only
//! writer of a database (taken by `PostgresStore::connect` and
//! `campaign`), the migration lock's key, and the leader's address that a
//! campaign's winner publishes next to its lock for the losers to read.

use std::time::Duration;

use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

use super::PostgresError;
use crate::StoreError;

/// First key of deskbroker's advisory locks ("desk" in ASCII); the second
/// says which lock. Advisory locks are scoped to one database.
pub(super) const LOCK_CLASS: i32 = 0x6465_736b;
/// Held for the life of a store's connection: one broker per database.
pub(super) const OWNER_LOCK: i32 = 1;
/// Held while migrations run, so two processes never migrate at once.
pub(super) const MIGRATION_LOCK: i32 = 2;

/// Publishes the leader's address, tied to this session by its pid.
pub(super) async fn publish_leader(client: &Client, advertise_url: &str) -> Result<(), StoreError> {
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
pub(super) async fn leader_url(client: &Client) -> Result<Option<String>, StoreError> {
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

/// Takes the owner lock, waiting on the lock itself for at most `wait`.
/// The lock is session-level: it stays after the transaction, until the
/// connection closes.
pub(super) async fn take_owner_lock(
    client: &Client,
    target: &str,
    wait: Duration,
) -> Result<(), StoreError> {
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
