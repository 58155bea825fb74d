//! Applying one mutation of a batch inside the batch's transaction:
//! [`apply_one`] only dispatches, to one statement function per mutation,
//! grouped by what they change (pools, hosts, sessions, enrollment, API
//! credentials, the audit log, autoscale, published applications, the
//! workspace feed's stamps, the broker's secrets). Every
//! statement is prepared once per connection (`prepare_cached`).

use placement::autoscale::{PlanMemory, ScalingPlan};
use placement::{
    Application, ApplicationGroup, FeedStamp, Host, PoolConfig, PoolCounters, Session,
};
use rusqlite::{Transaction, params};

use super::{missing_parent, outcome_text, to_json};
use crate::{
    AUDIT_PRUNE_CHUNK_ROWS, ApiCredential, AuditEntry, HostCredential, Mutation, RegistrationToken,
    ScalingAction, SigningKeys, StoreError,
};

/// The audit log's byte count as a batch changes it: `bytes` is the count
/// the store keeps (None until it is read again), `pruned_young` how many
/// entries the count and byte bounds removed that the age bound keeps.
pub(super) struct AuditTally<'a> {
    pub bytes: &'a mut Option<i64>,
    pub pruned_young: &'a mut i64,
}

/// Applies `m` inside `tx`.
pub(super) fn apply_one(
    tx: &Transaction,
    m: &Mutation,
    tally: &mut AuditTally<'_>,
) -> Result<(), StoreError> {
    match m {
        Mutation::PutPool { config, counters } => put_pool(tx, config, counters),
        Mutation::PutCounters { pool, counters } => put_counters(tx, pool, counters),
        Mutation::DeletePool { pool } => delete_pool(tx, pool),
        Mutation::PutHost { pool, host } => put_host(tx, pool, host),
        Mutation::DeleteHost { pool, host } => delete_host(tx, pool, host),
        Mutation::PutSession { pool, session } => put_session(tx, pool, session),
        Mutation::DeleteSession { pool, id } => delete_session(tx, pool, id),
        Mutation::PutRegistrationToken { pool, token } => put_registration_token(tx, pool, token),
        Mutation::DeleteRegistrationToken { pool, hash } => {
            delete_registration_token(tx, pool, hash)
        }
        Mutation::DeleteRegistrationTokens { pool } => delete_registration_tokens(tx, pool),
        Mutation::PutHostCredential { pool, credential } => {
            put_host_credential(tx, pool, credential)
        }
        Mutation::PutApiCredential { credential } => put_api_credential(tx, credential),
        Mutation::DeleteApiCredential { name } => delete_api_credential(tx, name),
        Mutation::AppendAudit { entry } => append_audit(tx, entry, tally),
        Mutation::FoldAudit { key, entry } => fold_audit(tx, key, entry, tally),
        Mutation::PruneAudit {
            older_than_ms,
            max_rows,
            max_bytes,
        } => prune_audit(tx, *older_than_ms, *max_rows, *max_bytes, tally),
        Mutation::PutScalingAction { action } => put_scaling_action(tx, action),
        Mutation::PutScalingPlan { name, plan } => put_scaling_plan(tx, name, plan),
        Mutation::DeleteScalingPlan { name } => delete_scaling_plan(tx, name),
        Mutation::PutPlanMemory { pool, memory } => put_plan_memory(tx, pool, memory),
        Mutation::PutApplication {
            pool,
            alias,
            application,
        } => put_application(tx, pool, alias, application),
        Mutation::DeleteApplication { pool, alias } => delete_application(tx, pool, alias),
        Mutation::PutApplicationGroup { name, group } => put_application_group(tx, name, group),
        Mutation::DeleteApplicationGroup { name } => delete_application_group(tx, name),
        Mutation::PutFeedStamp { user, stamp } => put_feed_stamp(tx, user, stamp),
        Mutation::DeleteFeedStamp { user } => delete_feed_stamp(tx, user),
        Mutation::PutSigningKeys { keys } => put_signing_keys(tx, keys),
    }
}

// Pools.

fn put_pool(tx: &Transaction, config: &PoolConfig, c: &PoolCounters) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO pools (name, config, counters) VALUES (?1, ?2, ?3)
         ON CONFLICT(name) DO UPDATE SET config = excluded.config,
                                         counters = excluded.counters",
    )?
    .execute(params![config.name, to_json(config), to_json(c)])?;
    Ok(())
}

/// Refused as missing when the pool does not exist.
fn put_counters(tx: &Transaction, pool: &str, counters: &PoolCounters) -> Result<(), StoreError> {
    let n = tx
        .prepare_cached("UPDATE pools SET counters = ?2 WHERE name = ?1")?
        .execute(params![pool, to_json(counters)])?;
    if n == 0 {
        return Err(StoreError::Missing(format!("host pool {pool}")));
    }
    Ok(())
}

/// The pool and everything of it: its scaling actions, host credentials
/// and sessions explicitly, the rest (hosts, tokens, plan memory,
/// published applications) through the schema's cascades.
fn delete_pool(tx: &Transaction, pool: &str) -> Result<(), StoreError> {
    tx.prepare_cached("DELETE FROM scaling_actions WHERE pool = ?1")?
        .execute([pool])?;
    tx.prepare_cached("DELETE FROM host_credentials WHERE pool = ?1")?
        .execute([pool])?;
    tx.prepare_cached("DELETE FROM sessions WHERE pool = ?1")?
        .execute([pool])?;
    tx.prepare_cached("DELETE FROM pools WHERE name = ?1")?
        .execute([pool])?;
    Ok(())
}

// Hosts.

fn put_host(tx: &Transaction, pool: &str, host: &Host) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO hosts (pool, name, seq, record) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(pool, name) DO UPDATE SET seq = excluded.seq,
                                               record = excluded.record",
    )?
    .execute(params![
        pool,
        host.spec.name,
        host.seq as i64,
        to_json(host)
    ])
    .map_err(|e| missing_parent(e, || format!("host pool {pool}")))?;
    Ok(())
}

fn delete_host(tx: &Transaction, pool: &str, host: &str) -> Result<(), StoreError> {
    tx.prepare_cached("DELETE FROM hosts WHERE pool = ?1 AND name = ?2")?
        .execute([pool, host])?;
    Ok(())
}

// Sessions.

fn put_session(tx: &Transaction, pool: &str, session: &Session) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO sessions (pool, id, host, record) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(pool, id) DO UPDATE SET host = excluded.host,
                                             record = excluded.record",
    )?
    .execute(params![pool, session.id, session.host, to_json(session)])
    .map_err(|e| missing_parent(e, || format!("session host {}/{}", pool, session.host)))?;
    Ok(())
}

fn delete_session(tx: &Transaction, pool: &str, id: &str) -> Result<(), StoreError> {
    tx.prepare_cached("DELETE FROM sessions WHERE pool = ?1 AND id = ?2")?
        .execute([pool, id])?;
    Ok(())
}

// Enrollment: registration tokens and host credentials.

fn put_registration_token(
    tx: &Transaction,
    pool: &str,
    token: &RegistrationToken,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO registration_tokens
           (pool, hash, expires_ms, max_hosts, used_hosts)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        pool,
        token.hash,
        token.expires_ms,
        token.max_hosts,
        token.used_hosts
    ])
    .map_err(|e| missing_parent(e, || format!("host pool {pool}")))?;
    Ok(())
}

fn delete_registration_token(tx: &Transaction, pool: &str, hash: &str) -> Result<(), StoreError> {
    tx.prepare_cached("DELETE FROM registration_tokens WHERE pool = ?1 AND hash = ?2")?
        .execute([pool, hash])?;
    Ok(())
}

fn delete_registration_tokens(tx: &Transaction, pool: &str) -> Result<(), StoreError> {
    tx.prepare_cached("DELETE FROM registration_tokens WHERE pool = ?1")?
        .execute([pool])?;
    Ok(())
}

fn put_host_credential(
    tx: &Transaction,
    pool: &str,
    credential: &HostCredential,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO host_credentials (pool, host, hash) VALUES (?1, ?2, ?3)",
    )?
    .execute(params![pool, credential.host, credential.hash])
    .map_err(|e| missing_parent(e, || format!("session host {pool}/{}", credential.host)))?;
    Ok(())
}

// API credentials.

fn put_api_credential(tx: &Transaction, credential: &ApiCredential) -> Result<(), StoreError> {
    tx.prepare_cached("INSERT OR REPLACE INTO api_credentials (name, record) VALUES (?1, ?2)")?
        .execute(params![credential.name, to_json(credential)])?;
    Ok(())
}

fn delete_api_credential(tx: &Transaction, name: &str) -> Result<(), StoreError> {
    tx.prepare_cached("DELETE FROM api_credentials WHERE name = ?1")?
        .execute([name])?;
    Ok(())
}

// The audit log.

/// A new entry; its bytes count towards the byte bound.
fn append_audit(
    tx: &Transaction,
    entry: &AuditEntry,
    tally: &mut AuditTally<'_>,
) -> Result<(), StoreError> {
    let record = to_json(entry);
    if let Some(total) = tally.bytes {
        *total += record.len() as i64;
    }
    tx.prepare_cached(
        "INSERT INTO audit_log (time_ms, actor, host_pool, record)
         VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![entry.time_ms, entry.actor, entry.host_pool, record])?;
    Ok(())
}

/// A new entry under `key`, or one more count of the entry already there.
fn fold_audit(
    tx: &Transaction,
    key: &str,
    entry: &AuditEntry,
    tally: &mut AuditTally<'_>,
) -> Result<(), StoreError> {
    let record = to_json(entry);
    let count: i64 = tx
        .prepare_cached(
            "INSERT INTO audit_log (time_ms, actor, host_pool, record, fold_key)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (fold_key) DO UPDATE SET count = count + 1
             RETURNING count",
        )?
        .query_row(
            params![entry.time_ms, entry.actor, entry.host_pool, record, key],
            |r| r.get(0),
        )?;
    // A new entry: its bytes count towards the byte bound.
    if let (Some(total), 1) = (tally.bytes.as_mut(), count) {
        *total += record.len() as i64;
    }
    Ok(())
}

/// The bounds of the audit log and of the scaling actions' records (age,
/// then count, then the log's bytes), each at most
/// [`AUDIT_PRUNE_CHUNK_ROWS`] a time.
fn prune_audit(
    tx: &Transaction,
    older_than_ms: i64,
    max_rows: u64,
    max_bytes: u64,
    tally: &mut AuditTally<'_>,
) -> Result<(), StoreError> {
    let chunk = AUDIT_PRUNE_CHUNK_ROWS as i64;
    let keep = i64::try_from(max_rows).unwrap_or(i64::MAX);
    prune_scaling_actions(tx, older_than_ms, keep, chunk)?;
    // Each delete answers the sizes of the records it removed, so
    // the count of the log's bytes follows.
    let mut removed = sum_of(
        tx.prepare_cached(
            "DELETE FROM audit_log WHERE id IN
               (SELECT id FROM audit_log WHERE time_ms < ?1 ORDER BY time_ms LIMIT ?2)
             RETURNING octet_length(record)",
        )?
        .query_map(params![older_than_ms, chunk], |r| r.get::<_, i64>(0))?,
    )?;
    // The count and byte bounds may remove entries the age bound
    // keeps: those are counted (`crate::pruned_before_retention`).
    let (bytes, mut young) = sum_young(
        tx.prepare_cached(
            "DELETE FROM audit_log WHERE id IN
               (SELECT id FROM audit_log
                 WHERE id <= (SELECT max(id) FROM audit_log) - ?1
                 ORDER BY id LIMIT ?2)
             RETURNING octet_length(record), time_ms >= ?3",
        )?
        .query_map(params![keep, chunk, older_than_ms], young_row)?,
    )?;
    removed += bytes;
    let total = match *tally.bytes {
        Some(total) => total - removed,
        None => tx
            .prepare_cached("SELECT coalesce(sum(octet_length(record)), 0) FROM audit_log")?
            .query_row([], |r| r.get::<_, i64>(0))?,
    };
    let (total, n) = bound_audit_bytes(tx, total, older_than_ms, max_bytes, chunk)?;
    young += n;
    *tally.bytes = Some(total);
    *tally.pruned_young += young;
    Ok(())
}

/// The scaling actions' records older than `older_than_ms`, and all but the
/// newest `keep`, `chunk` of each at most.
fn prune_scaling_actions(
    tx: &Transaction,
    older_than_ms: i64,
    keep: i64,
    chunk: i64,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "DELETE FROM scaling_actions WHERE id IN
           (SELECT id FROM scaling_actions WHERE time_ms < ?1 ORDER BY time_ms LIMIT ?2)",
    )?
    .execute(params![older_than_ms, chunk])?;
    tx.prepare_cached(
        "DELETE FROM scaling_actions WHERE id IN
           (SELECT id FROM scaling_actions ORDER BY id DESC LIMIT ?2 OFFSET ?1)",
    )?
    .execute(params![keep, chunk])?;
    Ok(())
}

/// The oldest entries of a log of `total` bytes while it holds more than
/// `max_bytes` (at most `chunk` of them): the log's bytes after, and how
/// many of those removed the age bound keeps.
fn bound_audit_bytes(
    tx: &Transaction,
    total: i64,
    older_than_ms: i64,
    max_bytes: u64,
    chunk: i64,
) -> Result<(i64, i64), StoreError> {
    let oldest = tx
        .prepare_cached("SELECT id, octet_length(record) FROM audit_log ORDER BY id LIMIT ?1")?
        .query_map([chunk], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    let Some(cutoff) = crate::audit_byte_cutoff(total, max_bytes, &oldest) else {
        return Ok((total, 0));
    };
    let (bytes, young) = sum_young(
        tx.prepare_cached(
            "DELETE FROM audit_log WHERE id <= ?1
             RETURNING octet_length(record), time_ms >= ?2",
        )?
        .query_map(params![cutoff, older_than_ms], young_row)?,
    )?;
    Ok((total - bytes, young))
}

/// A removed audit entry's size, and whether the age bound kept it.
fn young_row(r: &rusqlite::Row<'_>) -> Result<(i64, bool), rusqlite::Error> {
    Ok((r.get(0)?, r.get(1)?))
}

/// The bytes of the removed entries, and how many the age bound kept.
fn sum_young(
    rows: impl Iterator<Item = Result<(i64, bool), rusqlite::Error>>,
) -> Result<(i64, i64), rusqlite::Error> {
    let mut out = (0, 0);
    for row in rows {
        let (bytes, young) = row?;
        out.0 += bytes;
        out.1 += i64::from(young);
    }
    Ok(out)
}

/// The sum of a query's integers.
fn sum_of(
    rows: impl Iterator<Item = Result<i64, rusqlite::Error>>,
) -> Result<i64, rusqlite::Error> {
    rows.sum()
}

// Autoscale: power and scaling actions' records, plans, plan memory.

/// A new record, or the outcome of one already there (same id).
fn put_scaling_action(tx: &Transaction, action: &ScalingAction) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO scaling_actions (id, pool, time_ms, outcome, record)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (id) DO UPDATE SET outcome = excluded.outcome,
                                        record = excluded.record",
    )?
    .execute(params![
        action.id,
        action.pool,
        action.time_ms,
        outcome_text(action.outcome),
        to_json(action)
    ])?;
    Ok(())
}

fn put_scaling_plan(tx: &Transaction, name: &str, plan: &ScalingPlan) -> Result<(), StoreError> {
    tx.prepare_cached("INSERT OR REPLACE INTO scaling_plans (name, record) VALUES (?1, ?2)")?
        .execute(params![name, to_json(plan)])?;
    Ok(())
}

fn delete_scaling_plan(tx: &Transaction, name: &str) -> Result<(), StoreError> {
    tx.prepare_cached("DELETE FROM scaling_plans WHERE name = ?1")?
        .execute([name])?;
    Ok(())
}

fn put_plan_memory(tx: &Transaction, pool: &str, memory: &PlanMemory) -> Result<(), StoreError> {
    tx.prepare_cached("INSERT OR REPLACE INTO plan_memory (pool, record) VALUES (?1, ?2)")?
        .execute(params![pool, to_json(memory)])?;
    Ok(())
}

// Published applications and application groups (rule F1).

/// Refused as missing when the pool does not exist.
fn put_application(
    tx: &Transaction,
    pool: &str,
    alias: &str,
    application: &Application,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO applications (pool, alias, record) VALUES (?1, ?2, ?3)
         ON CONFLICT(pool, alias) DO UPDATE SET record = excluded.record",
    )?
    .execute(params![pool, alias, to_json(application)])
    .map_err(|e| missing_parent(e, || format!("host pool {pool}")))?;
    Ok(())
}

fn delete_application(tx: &Transaction, pool: &str, alias: &str) -> Result<(), StoreError> {
    tx.prepare_cached("DELETE FROM applications WHERE pool = ?1 AND alias = ?2")?
        .execute([pool, alias])?;
    Ok(())
}

fn put_application_group(
    tx: &Transaction,
    name: &str,
    group: &ApplicationGroup,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO application_groups (name, record) VALUES (?1, ?2)
         ON CONFLICT(name) DO UPDATE SET record = excluded.record",
    )?
    .execute(params![name, to_json(group)])?;
    Ok(())
}

fn delete_application_group(tx: &Transaction, name: &str) -> Result<(), StoreError> {
    tx.prepare_cached("DELETE FROM application_groups WHERE name = ?1")?
        .execute([name])?;
    Ok(())
}

// The workspace feed's stamps (rule F4).

fn put_feed_stamp(tx: &Transaction, user: &str, stamp: &FeedStamp) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO feed_stamps (user, record) VALUES (?1, ?2)
         ON CONFLICT(user) DO UPDATE SET record = excluded.record",
    )?
    .execute(params![user, to_json(stamp)])?;
    Ok(())
}

fn delete_feed_stamp(tx: &Transaction, user: &str) -> Result<(), StoreError> {
    tx.prepare_cached("DELETE FROM feed_stamps WHERE user = ?1")?
        .execute([user])?;
    Ok(())
}

// The broker's secrets.

fn put_signing_keys(tx: &Transaction, keys: &SigningKeys) -> Result<(), StoreError> {
    tx.prepare_cached("INSERT OR REPLACE INTO broker_secrets (name, record) VALUES (?1, ?2)")?
        .execute(params![crate::SIGNING_KEYS_NAME, to_json(keys)])?;
    Ok(())
}
