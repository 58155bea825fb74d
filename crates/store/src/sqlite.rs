//! The embedded default store: one SQLite database file in the data
//! directory, in WAL mode with `synchronous=FULL`, so a committed batch is
//! on disk before [`Store::apply`] returns. A batch of relaxed changes
//! ([`Flush::Soon`], [`Store::apply_relaxed`]) is committed with
//! `synchronous=NORMAL` instead: its WAL frames are written (a crash of the
//! process loses nothing) but not flushed; the next flushing commit, or the
//! checkpointer's next pass (it flushes the WAL before it copies it), takes
//! them to disk, within [`RELAXED_FLUSH_WITHIN`].
//!
//! Records are kept as JSON in a few tables keyed by name; the keys and the
//! few columns queries need are real columns. Schema changes are numbered
//! migrations applied at open, inside a transaction, recorded in
//! `PRAGMA user_version`. A batch's mutations become statements in
//! `apply`.

mod apply;

use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};

use apply::{AuditTally, apply_one};

use crate::{
    ApiCredential, ApplyBlocking, AuditQuery, AuditRow, Flush, HostCredential, MAX_AUDIT_PAGE_ROWS,
    MAX_SCALING_ACTION_PAGE_ROWS, Mutation, PoolRecord, RELAXED_FLUSH_WITHIN, RegistrationToken,
    ScalingAction, ScalingActionQuery, Snapshot, Store, StoreError, StoredPlan,
};

/// The store's file in the data directory.
pub const DATABASE_FILE: &str = "deskbroker.sqlite3";

/// Migrations, in order; `user_version` is how many have been applied.
/// Never edit one that has shipped: a store made by an earlier deskbroker
/// has run it as it was (the tests keep the schema of the version before
/// this one as a fixture, and check it still comes out of these).
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: pools, hosts, sessions. Sessions have no index by host: it would
    // take a random B-tree insert per placement, and only a host's removal
    // (rare) looks sessions up by host.
    "CREATE TABLE pools (
        name TEXT PRIMARY KEY,
        config TEXT NOT NULL,
        counters TEXT NOT NULL
     ) STRICT;
     CREATE TABLE hosts (
        pool TEXT NOT NULL REFERENCES pools(name) ON DELETE CASCADE,
        name TEXT NOT NULL,
        seq INTEGER NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (pool, name)
     ) STRICT, WITHOUT ROWID;
     CREATE TABLE sessions (
        pool TEXT NOT NULL,
        id TEXT NOT NULL,
        host TEXT NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (pool, id),
        FOREIGN KEY (pool, host) REFERENCES hosts(pool, name) ON DELETE CASCADE
          ) STRICT, WITHOUT ROWID;",
    // 2: registration tokens and host credentials (hashes only).
    "CREATE TABLE registration_tokens (
        pool TEXT NOT NULL REFERENCES pools(name) ON DELETE CASCADE,
        hash TEXT NOT NULL,
        expires_ms INTEGER NOT NULL,
        PRIMARY KEY (pool, hash)
     ) STRICT, WITHOUT ROWID;
     CREATE TABLE host_credentials (
        pool TEXT NOT NULL,
        host TEXT NOT NULL,
        hash TEXT NOT NULL,
        PRIMARY KEY (pool, host),
        FOREIGN KEY (pool, host) REFERENCES hosts(pool, name) ON DELETE CASCADE
     ) STRICT, WITHOUT ROWID;",
    // 3: registration tokens are bound: how many new hosts each may
    // register, and how many it has. Tokens made before this bound get
    // one more host (they may have registered any number already).
    "ALTER TABLE registration_tokens ADD COLUMN max_hosts INTEGER NOT NULL DEFAULT 1;
     ALTER TABLE registration_tokens ADD COLUMN used_hosts INTEGER NOT NULL DEFAULT 0;",
    // 4: API credentials with roles (rule T1): the record is JSON, its
    // token only as a hash.
    "CREATE TABLE api_credentials (
        name TEXT PRIMARY KEY,
        record TEXT NOT NULL
     ) STRICT, WITHOUT ROWID;",
    // 5: the audit log (rule T5). The id orders entries (AUTOINCREMENT:
    // never reused, even once pruning empties the table, so a page's
    // continuation stays meaningful); the record is JSON; time, actor and
    // pool are columns for the filters, time indexed for the retention.
    "CREATE TABLE audit_log (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        time_ms INTEGER NOT NULL,
        actor TEXT NOT NULL,
        host_pool TEXT,
        record TEXT NOT NULL
     ) STRICT;
     CREATE INDEX audit_log_by_time ON audit_log (time_ms);",
    // 6: power and scaling actions (rule A10). The id is a UUIDv7, so it
    // orders records by creation; a record is put again with its outcome.
    // No foreign key: deleting a pool deletes its records explicitly.
    "CREATE TABLE scaling_actions (
        id TEXT PRIMARY KEY,
        pool TEXT NOT NULL,
        time_ms INTEGER NOT NULL,
        outcome TEXT NOT NULL,
        record TEXT NOT NULL
     ) STRICT, WITHOUT ROWID;
     CREATE INDEX scaling_actions_by_pool ON scaling_actions (pool, id);
     CREATE INDEX scaling_actions_by_time ON scaling_actions (time_ms);
     CREATE INDEX scaling_actions_pending ON scaling_actions (id) WHERE outcome = 'Pending';",
    // 7: scaling plans (rules A1–A7), JSON like pools, and each pool's plan
    // memory (what the plan notified and logged off), which goes with its pool.
    "CREATE TABLE scaling_plans (
        name TEXT PRIMARY KEY,
        record TEXT NOT NULL
     ) STRICT;
     CREATE TABLE plan_memory (
        pool TEXT PRIMARY KEY REFERENCES pools(name) ON DELETE CASCADE,
        record TEXT NOT NULL
     ) STRICT;",
    // 8: the broker's own secrets (the signing keys of tickets and
    // redirection tokens), JSON by name.
    "CREATE TABLE broker_secrets (
        name TEXT PRIMARY KEY,
        record TEXT NOT NULL
     ) STRICT;",
    // 9: audit entries that stand for several requests (refusals folded
    // into one entry per credential, action, outcome and minute): the key
    // they are folded under (none for an ordinary entry) and how many.
    "ALTER TABLE audit_log ADD COLUMN fold_key TEXT;
     ALTER TABLE audit_log ADD COLUMN count INTEGER NOT NULL DEFAULT 1;
     CREATE UNIQUE INDEX audit_log_by_fold_key ON audit_log (fold_key);",
    // 10: published applications (rule F1), JSON by pool and alias, which
    // go with their pool; application groups, JSON by name. A group names
    // its pool in its record only: the broker deletes a pool's groups in
    // the batch that deletes the pool.
    "CREATE TABLE applications (
        pool TEXT NOT NULL REFERENCES pools(name) ON DELETE CASCADE,
        alias TEXT NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (pool, alias)
     ) STRICT, WITHOUT ROWID;
     CREATE TABLE application_groups (
        name TEXT PRIMARY KEY,
        record TEXT NOT NULL
     ) STRICT;",
    // 11: each user's workspace feed stamp (rule F4), JSON by user: which
    // set of resources the feed last listed and since when, so that its
    // `LastUpdated` is the same after a restart and on every replica.
    "CREATE TABLE feed_stamps (
        user TEXT PRIMARY KEY,
        record TEXT NOT NULL
     ) STRICT;",
];

/// The store's schema version (`user_version`: how many migrations it has
/// had), refused when it is newer than [`MIGRATIONS`] knows.
pub(crate) fn check_not_newer(conn: &Connection) -> Result<usize, StoreError> {
    let found: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    match usize::try_from(found) {
        Ok(v) if v <= MIGRATIONS.len() => Ok(v),
        _ => Err(StoreError::NewerSchema {
            found,
            known: MIGRATIONS.len(),
        }),
    }
}

/// SQLite behind a mutex: the broker's writer is the only frequent caller,
/// and it sends whole batches, so one connection is all that is needed.
#[derive(Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
    /// A second connection for reading the audit log: WAL lets it read
    /// while the writer commits, so a query never holds a batch up.
    reader: Arc<Mutex<Connection>>,
    /// The writer's commits not yet flushed to disk ([`Flush::Soon`]).
    /// Locked only with `conn`.
    unflushed: Arc<Mutex<Unflushed>>,
    /// The audit log's size in bytes (its records' JSON), as counted by
    /// this connection's commits; None until a prune counts it afresh (at
    /// open, and after a batch that failed). Locked only with `conn`.
    audit_bytes: Arc<Mutex<Option<i64>>>,
}

/// What the writer's connection has committed without flushing it.
#[derive(Default)]
struct Unflushed {
    /// The connection's `synchronous` is NORMAL (commits do not flush)
    /// rather than FULL.
    normal: bool,
    /// When the oldest commit not yet flushed was made.
    since: Option<std::time::Instant>,
}

impl SqliteStore {
    /// Opens (or creates) `dir/deskbroker.sqlite3` and applies migrations.
    pub fn open(dir: &Path) -> Result<SqliteStore, StoreError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| StoreError::Task(format!("cannot create {}: {e}", dir.display())))?;
        let mut conn = Connection::open(dir.join(DATABASE_FILE))?;
        // Before anything writes to it: a store from a newer deskbroker is
        // refused unchanged (even its journal mode).
        check_not_newer(&conn)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        // The broker reads everything once at start and then only writes:
        // a page cache that holds the indexes keeps each write to a few
        // in-memory B-tree steps (64 MiB at most).
        conn.pragma_update(None, "cache_size", -65_536)?;
        // A commit that finds the checkpointer's restart in the way tries
        // again within a tenth of a millisecond (see `retry_soon`).
        conn.busy_handler(Some(retry_soon))?;
        // Checkpoints run on their own connection and thread (below), not
        // inside a commit, so a placement never waits for one.
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        // When the WAL starts over, the file keeps up to this much of its
        // length for the next commits to write into (see `WAL_RESTART_PAGES`).
        conn.pragma_update(None, "journal_size_limit", WAL_KEPT_BYTES)?;
        let reader = Connection::open(dir.join(DATABASE_FILE))?;
        reader.busy_timeout(std::time::Duration::from_secs(5))?;
        let mut store = SqliteStore {
            conn: Arc::new(Mutex::new(conn)),
            reader: Arc::new(Mutex::new(reader)),
            unflushed: Arc::default(),
            audit_bytes: Arc::default(),
        };
        store.migrate()?;
        spawn_checkpointer(dir.join(DATABASE_FILE), Arc::downgrade(&store.conn))?;
        Ok(store)
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        let mut conn = self.lock();
        let version = check_not_newer(&conn)?;
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version) {
            let tx = conn.transaction()?;
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)?;
            tx.commit()?;
            tracing::info!(version = i + 1, "applied store migration");
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave a half-applied batch
        // (transactions roll back on drop), so a poisoned lock is usable.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn load_sync(&self) -> Result<Snapshot, StoreError> {
        let conn = self.lock();
        let mut pools = Vec::new();
        let mut stmt = conn.prepare_cached("SELECT config, counters FROM pools ORDER BY name")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        for row in rows {
            let (config, counters) = row?;
            pools.push(PoolRecord {
                config: from_json(&config)?,
                counters: from_json(&counters)?,
                hosts: Vec::new(),
                sessions: Vec::new(),
                registration_tokens: Vec::new(),
                host_credentials: Vec::new(),
                applications: Vec::new(),
            });
        }
        for p in &mut pools {
            let mut stmt =
                conn.prepare_cached("SELECT record FROM hosts WHERE pool = ?1 ORDER BY seq")?;
            for rec in stmt.query_map([&p.config.name], |r| r.get::<_, String>(0))? {
                p.hosts.push(from_json(&rec?)?);
            }
            let mut stmt =
                conn.prepare_cached("SELECT record FROM sessions WHERE pool = ?1 ORDER BY id")?;
            for rec in stmt.query_map([&p.config.name], |r| r.get::<_, String>(0))? {
                p.sessions.push(from_json(&rec?)?);
            }
            let mut stmt = conn.prepare_cached(
                "SELECT hash, expires_ms, max_hosts, used_hosts FROM registration_tokens
                 WHERE pool = ?1 ORDER BY hash",
            )?;
            for row in stmt.query_map([&p.config.name], |r| {
                Ok(RegistrationToken {
                    hash: r.get(0)?,
                    expires_ms: r.get(1)?,
                    max_hosts: r.get(2)?,
                    used_hosts: r.get(3)?,
                })
            })? {
                p.registration_tokens.push(row?);
            }
            let mut stmt = conn.prepare_cached(
                "SELECT host, hash FROM host_credentials WHERE pool = ?1 ORDER BY host",
            )?;
            for row in stmt.query_map([&p.config.name], |r| {
                Ok(HostCredential {
                    host: r.get(0)?,
                    hash: r.get(1)?,
                })
            })? {
                p.host_credentials.push(row?);
            }
            let mut stmt = conn.prepare_cached(
                "SELECT alias, record FROM applications WHERE pool = ?1 ORDER BY alias",
            )?;
            for row in stmt.query_map([&p.config.name], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })? {
                let (alias, record) = row?;
                p.applications.push((alias, from_json(&record)?));
            }
        }
        let mut credentials = Vec::new();
        let mut stmt = conn.prepare_cached("SELECT record FROM api_credentials ORDER BY name")?;
        for row in stmt.query_map([], |r| r.get::<_, String>(0))? {
            credentials.push(from_json::<ApiCredential>(&row?)?);
        }
        let mut scaling_plans = Vec::new();
        let mut stmt =
            conn.prepare_cached("SELECT name, record FROM scaling_plans ORDER BY name")?;
        for row in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))? {
            let (name, record) = row?;
            scaling_plans.push(StoredPlan {
                name,
                plan: from_json(&record)?,
            });
        }
        let mut plan_memories = Vec::new();
        let mut stmt = conn.prepare_cached("SELECT pool, record FROM plan_memory ORDER BY pool")?;
        for row in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))? {
            let (pool, record) = row?;
            plan_memories.push((pool, from_json(&record)?));
        }
        let signing_keys = conn
            .prepare_cached("SELECT record FROM broker_secrets WHERE name = ?1")?
            .query_row([crate::SIGNING_KEYS_NAME], |r| r.get::<_, String>(0))
            .optional()?
            .map(|record| from_json(&record))
            .transpose()?;
        let mut application_groups = Vec::new();
        let mut stmt =
            conn.prepare_cached("SELECT name, record FROM application_groups ORDER BY name")?;
        for row in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))? {
            let (name, record) = row?;
            application_groups.push((name, from_json(&record)?));
        }
        let mut feed_stamps = Vec::new();
        let mut stmt = conn.prepare_cached("SELECT user, record FROM feed_stamps ORDER BY user")?;
        for row in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))? {
            let (user, record) = row?;
            feed_stamps.push((user, from_json(&record)?));
        }
        Ok(Snapshot {
            pools,
            credentials,
            scaling_plans,
            plan_memories,
            signing_keys,
            application_groups,
            feed_stamps,
        })
    }

    fn audit_sync(&self, q: &AuditQuery) -> Result<Vec<AuditRow>, StoreError> {
        let conn = self.reader.lock().unwrap_or_else(|p| p.into_inner());
        let within = q.within_pools.as_ref().map(to_json);
        let limit = q.limit.min(MAX_AUDIT_PAGE_ROWS) as i64;
        let mut stmt = conn.prepare_cached(
            "SELECT id, record, count FROM audit_log
             WHERE (?1 IS NULL OR time_ms >= ?1)
               AND (?2 IS NULL OR actor = ?2)
               AND (?3 IS NULL OR host_pool = ?3)
               AND (?4 IS NULL OR host_pool IN (SELECT value FROM json_each(?4)))
               AND (?5 IS NULL OR id < ?5)
               AND (NOT ?7 OR json_extract(record, '$.end_reason') IS NOT NULL)
             ORDER BY id DESC LIMIT ?6",
        )?;
        let rows = stmt.query_map(
            params![
                q.since_ms,
                q.actor,
                q.host_pool,
                within,
                q.before_id,
                limit,
                q.ended_sessions
            ],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            },
        )?;
        let mut out = Vec::new();
        for row in rows {
            let (id, record, count) = row?;
            out.push(AuditRow {
                id,
                entry: from_json(&record)?,
                count: u64::try_from(count).unwrap_or(1),
            });
        }
        Ok(out)
    }

    fn scaling_actions_sync(
        &self,
        q: &ScalingActionQuery,
    ) -> Result<Vec<ScalingAction>, StoreError> {
        let conn = self.reader.lock().unwrap_or_else(|p| p.into_inner());
        let limit = q.limit.min(MAX_SCALING_ACTION_PAGE_ROWS) as i64;
        let mut stmt = conn.prepare_cached(
            "SELECT record FROM scaling_actions
             WHERE (?1 IS NULL OR pool = ?1)
               AND (?2 = 0 OR outcome = 'Pending')
               AND (?3 IS NULL OR id < ?3)
             ORDER BY id DESC LIMIT ?4",
        )?;
        let rows = stmt.query_map(
            params![q.pool, i64::from(q.pending_only), q.before_id, limit],
            |r| r.get::<_, String>(0),
        )?;
        let mut out = Vec::new();
        for row in rows {
            out.push(from_json(&row?)?);
        }
        Ok(out)
    }

    async fn apply_on_blocking_thread(
        &self,
        batch: Arc<[Mutation]>,
        flush: Flush,
    ) -> Result<(), StoreError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.apply_sync(&batch, flush))
            .await
            .map_err(|e| StoreError::Task(e.to_string()))?
    }

    fn apply_sync(&self, batch: &[Mutation], flush: Flush) -> Result<(), StoreError> {
        let mut conn = self.lock();
        let mut unflushed = self.unflushed.lock().unwrap_or_else(|p| p.into_inner());
        // A relaxed batch flushes too once an earlier one has waited long
        // enough, so that under a steady stream of them nothing waits for
        // the checkpointer.
        let flush_now = flush == Flush::Now
            || unflushed
                .since
                .is_some_and(|t| t.elapsed() >= RELAXED_FLUSH_WITHIN);
        if unflushed.normal == flush_now {
            conn.pragma_update(
                None,
                "synchronous",
                if flush_now { "FULL" } else { "NORMAL" },
            )?;
            unflushed.normal = !flush_now;
        }
        let mut audit_bytes = self.audit_bytes.lock().unwrap_or_else(|p| p.into_inner());
        // Unknown unless this batch commits.
        let mut tally = audit_bytes.take();
        // Audit entries younger than the retention that a prune removed.
        let mut young = 0i64;
        let mut audit = AuditTally {
            bytes: &mut tally,
            pruned_young: &mut young,
        };
        let tx = conn.transaction()?;
        // Only the last counters of each pool in a batch matter.
        let mut last_counters = std::collections::HashMap::new();
        for (i, m) in batch.iter().enumerate() {
            if let Mutation::PutCounters { pool, .. } = m {
                last_counters.insert(pool.as_str(), i);
            }
        }
        for (i, m) in batch.iter().enumerate() {
            if let Mutation::PutCounters { pool, .. } = m
                && last_counters.get(pool.as_str()) != Some(&i)
            {
                continue;
            }
            apply_one(&tx, m, &mut audit)?;
        }
        tx.commit()?;
        *audit_bytes = tally;
        crate::pruned_before_retention(young);
        // A flush takes every earlier commit's frames with it: the WAL is
        // one file, written in order.
        unflushed.since = if flush_now {
            None
        } else {
            unflushed.since.or_else(|| Some(std::time::Instant::now()))
        };
        Ok(())
    }
}

/// How often the checkpointer copies the WAL into the database file and
/// flushes it: often, so that each flush carries about a tenth of a second
/// of commits. Every half second, under load, the flush of 40 MB of copied
/// pages held up the writer's own WAL flush by 5–15 ms (docs/benchmarks.md).
const CHECKPOINT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// Past this many pages (64 MiB of 4 KiB pages), the checkpointer makes the
/// WAL start over. Under a steady load it never would by itself: a PASSIVE
/// checkpoint copies the frames that were there when it began, and the
/// writer has appended more by the time it ends.
const WAL_RESTART_PAGES: i64 = 16_384;

/// How much of the WAL file's length is kept when it starts over
/// (`journal_size_limit`): twice what it holds at a restart, so that under
/// load commits write into space the file already has, and neither they
/// nor the checkpointer cut or grow it. (It used to be cut to nothing,
/// `wal_checkpoint(TRUNCATE)`, which held commits for 40–100 ms once a
/// second under load.)
const WAL_KEPT_BYTES: i64 = 2 * WAL_RESTART_PAGES * 4096;

/// How long a commit that meets a lock sleeps before it tries again, and
/// how many times it tries (at least 5 s in all, as SQLite's
/// `busy_timeout` did) before it fails with `SQLITE_BUSY`. The only other
/// connection that takes a lock writers wait for is the checkpointer's
/// restart, which holds it for a few milliseconds; SQLite's own busy
/// handler sleeps 1, 2, 5, 10, 15, 20, 25… ms between tries, so a commit
/// behind a 2 ms restart waited up to 25 ms more, and every request
/// queued behind it too.
const BUSY_RETRY_SLEEP: std::time::Duration = std::time::Duration::from_micros(100);
const BUSY_RETRIES: i32 = 50_000;
/// The checkpointer's tries (about 100 ms) for a restart: first for the
/// commit under way to end, then, holding the write lock (commits wait),
/// for an audit log read to end.
const CHECKPOINT_BUSY_RETRIES: i32 = 1_000;

/// SQLite's busy handler for the writer's connection: `tries` is how many
/// times it was called for this lock already.
fn retry_soon(tries: i32) -> bool {
    if tries == 0 {
        metrics::counter!("deskbroker_store_lock_waits_total").increment(1);
    }
    retry_within(tries, BUSY_RETRIES)
}

/// Sleeps [`BUSY_RETRY_SLEEP`] and answers true (try again) while `tries`
/// is below `retries`.
fn retry_within(tries: i32, retries: i32) -> bool {
    if tries >= retries {
        return false;
    }
    std::thread::sleep(BUSY_RETRY_SLEEP);
    true
}

/// Checkpoints the WAL in the background (PASSIVE: never blocks the
/// writer) and flushes the pages it copied to the database file; when the
/// WAL has grown past [`WAL_RESTART_PAGES`] and a checkpoint has just copied
/// all of it, makes it start over (RESTART: copies what the writer appended
/// meanwhile, and holds commits for that copy and one flush of the
/// database file). Stops when the store is dropped.
fn spawn_checkpointer(
    path: std::path::PathBuf,
    alive: std::sync::Weak<Mutex<Connection>>,
) -> Result<(), StoreError> {
    let mut conn = Connection::open(&path)?;
    // FULL, as SQLite's default: a checkpoint then flushes the WAL before
    // it copies it, which takes relaxed commits to disk (`Flush::Soon`).
    conn.pragma_update(None, "synchronous", "FULL")?;
    // Takes the write lock for a restart as soon as the commit under way
    // ends, and gives up after about 100 ms (the next pass tries again).
    // (Not `retry_soon`: its count is of commits that waited.)
    conn.busy_handler(Some(|tries| retry_within(tries, CHECKPOINT_BUSY_RETRIES)))?;
    // The same file, to flush what a checkpoint copied into it without
    // holding any of SQLite's locks: under load a PASSIVE checkpoint does
    // not flush it, and the RESTART that does then held commits for
    // 15–25 ms while it flushed a second of copied pages.
    let db_file = std::fs::File::open(&path)
        .map_err(|e| StoreError::Task(format!("cannot open {}: {e}", path.display())))?;
    // What the last pass reported: a pass that reports the same copied
    // nothing, and an idle broker then flushes nothing.
    let mut last = None;
    let mut passive = move |conn: &Connection| {
        let started = std::time::Instant::now();
        let copied = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
            Ok((r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
        })?;
        if last != Some(copied) {
            db_file
                .sync_data()
                .map_err(|e| StoreError::Task(format!("cannot flush {}: {e}", path.display())))?;
            last = Some(copied);
            metrics::histogram!("deskbroker_store_checkpoint_seconds", "mode" => "passive")
                .record(started.elapsed());
        }
        Ok::<_, StoreError>(copied)
    };
    std::thread::Builder::new()
        .name("sqlite-checkpoint".into())
        .spawn(move || {
            while alive.strong_count() > 0 {
                std::thread::sleep(CHECKPOINT_INTERVAL);
                match passive(&conn) {
                    Ok((wal_pages, done)) if wal_pages > WAL_RESTART_PAGES && done == wal_pages => {
                        // Once more for what the writer appended during
                        // that pass, so that the restart has only the last
                        // few frames to copy and flush.
                        let _ = passive(&conn);
                        let started = std::time::Instant::now();
                        let restarted = conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| {
                            r.get::<_, i64>(0)
                        });
                        // The first column is 1 when the restart could not
                        // have its lock (the next pass tries again).
                        if let Ok(0) = restarted {
                            metrics::histogram!(
                                "deskbroker_store_checkpoint_seconds",
                                "mode" => "restart"
                            )
                            .record(started.elapsed());
                        }
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "sqlite checkpoint failed"),
                }
            }
        })
        .map_err(|e| StoreError::Task(format!("cannot start the checkpointer: {e}")))?;
    Ok(())
}

/// The `outcome` column: the outcome's name, as in the record.
pub(crate) fn outcome_text(o: placement::ActionOutcome) -> &'static str {
    match o {
        placement::ActionOutcome::Succeeded => "Succeeded",
        placement::ActionOutcome::Failed => "Failed",
        placement::ActionOutcome::Pending => "Pending",
    }
}

fn missing_parent(e: rusqlite::Error, what: impl FnOnce() -> String) -> StoreError {
    match e {
        rusqlite::Error::SqliteFailure(f, _)
            if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY =>
        {
            StoreError::Missing(what())
        }
        e => StoreError::Sqlite(e),
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("records serialize to JSON")
}

fn from_json<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| StoreError::Corrupt(e.to_string()))
}

impl ApplyBlocking for SqliteStore {
    fn apply_blocking(&self, batch: &[Mutation], flush: Flush) -> Result<(), StoreError> {
        self.apply_sync(batch, flush)
    }
}

#[async_trait::async_trait]
impl Store for SqliteStore {
    fn blocking(&self) -> Option<Arc<dyn ApplyBlocking>> {
        Some(Arc::new(self.clone()))
    }

    async fn load(&self) -> Result<Snapshot, StoreError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.load_sync())
            .await
            .map_err(|e| StoreError::Task(e.to_string()))?
    }

    async fn apply(&self, batch: Arc<[Mutation]>) -> Result<(), StoreError> {
        self.apply_on_blocking_thread(batch, Flush::Now).await
    }

    async fn apply_relaxed(&self, batch: Arc<[Mutation]>) -> Result<(), StoreError> {
        self.apply_on_blocking_thread(batch, Flush::Soon).await
    }

    async fn audit(&self, query: AuditQuery) -> Result<Vec<AuditRow>, StoreError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.audit_sync(&query))
            .await
            .map_err(|e| StoreError::Task(e.to_string()))?
    }

    async fn scaling_actions(
        &self,
        query: ScalingActionQuery,
    ) -> Result<Vec<ScalingAction>, StoreError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.scaling_actions_sync(&query))
            .await
            .map_err(|e| StoreError::Task(e.to_string()))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put_pool(name: &str) -> Vec<Mutation> {
        vec![Mutation::PutPool {
            config: crate::conformance::pool(name),
            counters: placement::PoolCounters::default(),
        }]
    }

    /// The writer's connection's `synchronous` (1 NORMAL, 2 FULL) and
    /// whether it holds commits not yet flushed.
    fn flushing(store: &SqliteStore) -> (i64, bool) {
        let conn = store.lock();
        let level = conn
            .pragma_query_value(None, "synchronous", |r| r.get(0))
            .expect("synchronous");
        let unflushed = store.unflushed.lock().unwrap().since.is_some();
        (level, unflushed)
    }

    #[test]
    fn relaxed_batches_wait_for_a_flush_at_most_relaxed_flush_within() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SqliteStore::open(dir.path()).expect("open");
        store.apply_sync(&put_pool("a"), Flush::Now).expect("now");
        assert_eq!(flushing(&store), (2, false), "an ordinary batch flushes");
        store.apply_sync(&put_pool("b"), Flush::Soon).expect("soon");
        assert_eq!(flushing(&store), (1, true), "a relaxed one does not");
        let since = store.unflushed.lock().unwrap().since;
        store.apply_sync(&put_pool("c"), Flush::Soon).expect("soon");
        assert_eq!(
            store.unflushed.lock().unwrap().since,
            since,
            "the wait counts from the oldest commit not flushed"
        );
        // Once the oldest has waited that long, the next relaxed batch
        // flushes, and takes every earlier one with it.
        store.unflushed.lock().unwrap().since =
            std::time::Instant::now().checked_sub(RELAXED_FLUSH_WITHIN);
        store.apply_sync(&put_pool("d"), Flush::Soon).expect("soon");
        assert_eq!(
            flushing(&store),
            (2, false),
            "a relaxed batch that waited flushes"
        );
        store.apply_sync(&put_pool("e"), Flush::Soon).expect("soon");
        assert_eq!(flushing(&store), (1, true));
        store.apply_sync(&put_pool("f"), Flush::Now).expect("now");
        assert_eq!(
            flushing(&store),
            (2, false),
            "an ordinary batch flushes them all"
        );
        let names: Vec<String> = store
            .load_sync()
            .expect("load")
            .pools
            .into_iter()
            .map(|p| p.config.name)
            .collect();
        assert_eq!(
            names,
            ["a", "b", "c", "d", "e", "f"],
            "every batch is committed"
        );
    }
}
