//! The advisory locks: the *owner lock* that makes one process the only
//! writer of a database (taken by `PostgresStore::connect` and
//! `campaign`), the migration lock's key, and the leadership a campaign's
//! winner publishes next to its lock: its address for the losers to read,
//! its epoch, which fences its writes, and its lease.

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

/// The leadership table: who holds the owner lock (its backend pid), where
/// it answers, its epoch (one more at every election won) and until when
/// its lease runs; and the fence every batch of a leader passes through.
/// Kept outside the numbered migrations: it is the replicas' coordination,
/// not the store's data, and the SQLite store has no counterpart.
const LEADERSHIP_SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS deskbroker_leader (
        one boolean PRIMARY KEY DEFAULT true CHECK (one),
        pid integer NOT NULL,
        url text NOT NULL,
        since timestamptz NOT NULL
    );
    ALTER TABLE deskbroker_leader
        ADD COLUMN IF NOT EXISTS epoch bigint NOT NULL DEFAULT 0,
        ADD COLUMN IF NOT EXISTS lease_until timestamptz,
        ADD COLUMN IF NOT EXISTS renewed_at timestamptz;
    CREATE OR REPLACE FUNCTION deskbroker_fence(leader_epoch bigint) RETURNS void
    LANGUAGE plpgsql AS $$
    BEGIN
        -- FOR SHARE: a new leader's epoch cannot be written while this
        -- transaction runs, so a batch commits under the epoch it checked.
        PERFORM 1 FROM deskbroker_leader
         WHERE epoch = leader_epoch AND pid = pg_backend_pid() FOR SHARE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'this replica no longer leads (its epoch % is over)', leader_epoch
                USING ERRCODE = 'DBK01';
        END IF;
    END $$;
";

/// Publishes the leader's address, tied to this session by its pid, with
/// a lease of `lease` from now (the server's clock) and the next epoch.
/// Runs under the owner lock, so never twice at once. Answers the new
/// epoch and the previous leader's, if any, with how long that leader's
/// lease still ran by the server's clock:
/// until then that leader may still answer from memory, believing it leads
/// (its session may have ended without its knowing), so the new one must
/// not decide before.
pub(super) async fn publish_leader(
    client: &Client,
    advertise_url: &str,
    lease: Duration,
) -> Result<Succession, StoreError> {
    client
        .batch_execute(LEADERSHIP_SCHEMA)
        .await
        .map_err(|e| PostgresError::query("cannot create the leadership table", e))?;
    // The CTE reads the row as it was before the upsert (one snapshot).
    let row = client
        .query_one(
            "WITH previous AS (
                SELECT epoch, url, extract(epoch FROM lease_until - now())::float8 AS left_secs
                  FROM deskbroker_leader
             )
             INSERT INTO deskbroker_leader (pid, url, since, epoch, lease_until, renewed_at)
             VALUES (pg_backend_pid(), $1, now(), 1, now() + make_interval(secs => $2), now())
             ON CONFLICT (one) DO UPDATE SET pid = excluded.pid, url = excluded.url,
                 since = excluded.since, epoch = deskbroker_leader.epoch + 1,
                 lease_until = excluded.lease_until, renewed_at = excluded.renewed_at
             RETURNING epoch, (SELECT epoch FROM previous), (SELECT url FROM previous),
                       (SELECT left_secs FROM previous)",
            &[&advertise_url, &lease.as_secs_f64()],
        )
        .await
        .map_err(|e| PostgresError::query("cannot publish the leader's address", e))?;
    Ok(Succession {
        epoch: row.get(0),
        previous_epoch: row.get(1),
        previous_url: row.get(2),
        previous_left: row.get::<_, Option<f64>>(3).map_or(Duration::ZERO, |s| {
            Duration::from_secs_f64(s.clamp(0.0, 86_400.0))
        }),
    })
}

/// What [`publish_leader`] answers.
pub(super) struct Succession {
    pub(super) epoch: i64,
    pub(super) previous_epoch: Option<i64>,
    pub(super) previous_url: Option<String>,
    pub(super) previous_left: Duration,
}

/// The leader as published by the session that holds the owner lock now
/// (an address left by a leader whose session ended is not answered).
pub(super) struct Published {
    pub(super) url: String,
    pub(super) epoch: i64,
    /// Its backend: the session to end once its lease has expired.
    pub(super) pid: i32,
    /// Its lease ran out by the server's clock (never for a leader of a
    /// deskbroker that keeps no lease).
    pub(super) expired: bool,
    /// It has not renewed its lease for half of it.
    pub(super) stale: bool,
    /// How long its lease still runs, by the server's clock.
    pub(super) lease_left: Option<Duration>,
}

pub(super) async fn published_leader(client: &Client) -> Result<Option<Published>, StoreError> {
    let row = client
        .query_opt(
            "SELECT l.url, l.epoch, l.pid, coalesce(l.lease_until < now(), false),
                    coalesce(now() - l.renewed_at > (l.lease_until - l.renewed_at) / 2, false),
                    extract(epoch FROM l.lease_until - now())::float8
               FROM deskbroker_leader l
              WHERE EXISTS (
                SELECT 1 FROM pg_locks k
                 WHERE k.pid = l.pid AND k.locktype = 'advisory' AND k.granted
                   AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                   AND k.classid::int8 = $1 AND k.objid::int8 = $2 AND k.objsubid = 2)",
            &[&i64::from(LOCK_CLASS), &i64::from(OWNER_LOCK)],
        )
        .await;
    match row {
        Ok(row) => Ok(row.map(|r| Published {
            url: r.get(0),
            epoch: r.get(1),
            pid: r.get(2),
            expired: r.get(3),
            stale: r.get(4),
            lease_left: r
                .get::<_, Option<f64>>(5)
                .map(|s| Duration::from_secs_f64(s.clamp(0.0, 86_400.0))),
        })),
        // No leader has published yet (or only one of a deskbroker that
        // kept no epoch).
        Err(e)
            if e.code() == Some(&SqlState::UNDEFINED_TABLE)
                || e.code() == Some(&SqlState::UNDEFINED_COLUMN) =>
        {
            Ok(None)
        }
        Err(e) => Err(PostgresError::query("cannot read the leader's address", e).into()),
    }
}

/// Ends the database session `pid` of a leader whose lease expired, which
/// frees its owner lock. Answers whether the server agreed (it refuses a
/// role that may not signal that backend).
pub(super) async fn end_session(client: &Client, pid: i32) -> Result<bool, StoreError> {
    let row = client
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .map_err(|e| PostgresError::query("cannot end the expired leader's session", e))?;
    Ok(row.get(0))
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
