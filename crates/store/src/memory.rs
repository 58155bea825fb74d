//! A store kept in this process's memory, for tests: the same tables,
//! records and semantics as the embedded SQLite store
//! ([`crate::SqliteStore`]), without a file, a thread or a wait, so that a
//! broker under test commits in microseconds and runs on tokio's paused
//! time.
//!
//! What it keeps: records as the JSON text SQLite keeps (so what comes
//! back is what SQLite would give back, to the last bit of a float), keyed
//! as SQLite's tables are, with the few columns its queries read beside
//! them. What it promises, as every backend (the conformance suite checks
//! it): a batch is applied in order, all or nothing (it is applied to a
//! copy of the tables, which replaces them only once every mutation
//! applied); a session on a missing host, or anything of a missing pool
//! (its published applications too), fails the whole batch with
//! [`StoreError::Missing`]; deleting a pool or a host deletes what belongs
//! to it.
//!
//! "Durable" here means: kept in the tables every clone of the store
//! shares. A [`MemoryStore`] and its clones are one storage, so a broker
//! that stops (or is dropped mid-flight, as a `kill -9` would stop it) and
//! a new broker opened on a clone sees exactly what the first one's
//! batches committed: that is a restart. [`Store::apply_relaxed`] is the
//! same as [`Store::apply`]: there is no disk to flush later.
//!
//! It has no synchronous write path ([`Store::blocking`] is None), so the
//! broker's writer calls it from a task: no thread outside tokio's
//! knowledge, which would let paused time jump while a batch is written.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use placement::autoscale::{PlanMemory, ScalingPlan};
use placement::{
    Application, ApplicationGroup, FeedStamp, Host, PoolConfig, PoolCounters, Session,
};

use crate::{
    AUDIT_PRUNE_CHUNK_ROWS, ApiCredential, AuditQuery, AuditRow, HostCredential,
    MAX_AUDIT_PAGE_ROWS, MAX_SCALING_ACTION_PAGE_ROWS, Mutation, PoolRecord, RegistrationToken,
    ScalingAction, ScalingActionQuery, SigningKeys, Snapshot, Store, StoreError, StoredPlan,
};

/// The storage, shared by every clone: see the module's documentation.
#[derive(Clone, Default)]
pub struct MemoryStore {
    tables: Arc<Mutex<Tables>>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = self.lock();
        f.debug_struct("MemoryStore")
            .field("pools", &t.pools.len())
            .field("audit_entries", &t.audit.len())
            .finish_non_exhaustive()
    }
}

/// Everything kept, as SQLite's tables keep it.
#[derive(Clone, Default)]
struct Tables {
    pools: BTreeMap<String, PoolRow>,
    /// API credentials' JSON, by name.
    credentials: BTreeMap<String, String>,
    /// The audit log, by id.
    audit: BTreeMap<i64, AuditRecord>,
    /// The id of each folded entry, by its key.
    fold_keys: HashMap<String, i64>,
    /// The largest audit id ever given: ids are never reused, even once
    /// a prune empties the log (SQLite's AUTOINCREMENT).
    last_audit_id: i64,
    /// Power actions' records, by id.
    scaling_actions: BTreeMap<String, ActionRecord>,
    /// Scaling plans' JSON, by name.
    scaling_plans: BTreeMap<String, String>,
    /// The signing keys' JSON.
    signing_keys: Option<String>,
    /// Application groups' JSON, by name.
    application_groups: BTreeMap<String, String>,
    /// Workspace feed stamps' JSON, by user.
    feed_stamps: BTreeMap<String, String>,
}

/// One pool and everything that belongs to it (what SQLite's foreign keys
/// tie to the pool's row).
#[derive(Clone)]
struct PoolRow {
    config: String,
    counters: String,
    /// By name: each host's `seq` (its query order) and JSON.
    hosts: BTreeMap<String, (u64, String)>,
    /// By id: the session's host and JSON.
    sessions: BTreeMap<String, (String, String)>,
    /// By hash.
    tokens: BTreeMap<String, RegistrationToken>,
    /// By host: the credential's hash.
    host_credentials: BTreeMap<String, String>,
    plan_memory: Option<String>,
    /// Published applications' JSON, by alias.
    applications: BTreeMap<String, String>,
}

#[derive(Clone)]
struct AuditRecord {
    time_ms: i64,
    actor: String,
    host_pool: Option<String>,
    record: String,
    fold_key: Option<String>,
    count: u64,
    ended: bool,
}

/// A power action's record; `pool` and `time_ms` are those it was first
/// put with (a replacement changes only its outcome and record).
#[derive(Clone)]
struct ActionRecord {
    pool: String,
    time_ms: i64,
    pending: bool,
    record: String,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tables> {
        // A batch is applied to a copy: a panic while the lock is held
        // cannot leave it half-applied, so a poisoned lock is usable.
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn apply_now(&self, batch: &[Mutation]) -> Result<(), StoreError> {
        let mut tables = self.lock();
        let mut next = tables.clone();
        // Only the last counters of each pool in a batch matter (as SQLite
        // applies them).
        let mut last_counters = HashMap::new();
        for (i, m) in batch.iter().enumerate() {
            if let Mutation::PutCounters { pool, .. } = m {
                last_counters.insert(pool.as_str(), i);
            }
        }
        let mut young = 0i64;
        for (i, m) in batch.iter().enumerate() {
            if let Mutation::PutCounters { pool, .. } = m
                && last_counters.get(pool.as_str()) != Some(&i)
            {
                continue;
            }
            next.apply_one(m, &mut young)?;
        }
        *tables = next;
        crate::pruned_before_retention(young);
        Ok(())
    }

    fn load_now(&self) -> Result<Snapshot, StoreError> {
        let t = self.lock();
        let mut pools = Vec::with_capacity(t.pools.len());
        let mut plan_memories = Vec::new();
        for (name, p) in &t.pools {
            let mut hosts: Vec<&(u64, String)> = p.hosts.values().collect();
            hosts.sort_by_key(|(seq, _)| *seq);
            pools.push(PoolRecord {
                config: from_json::<PoolConfig>(&p.config)?,
                counters: from_json::<PoolCounters>(&p.counters)?,
                hosts: hosts
                    .into_iter()
                    .map(|(_, h)| from_json::<Host>(h))
                    .collect::<Result<_, _>>()?,
                sessions: p
                    .sessions
                    .values()
                    .map(|(_, s)| from_json::<Session>(s))
                    .collect::<Result<_, _>>()?,
                registration_tokens: p.tokens.values().cloned().collect(),
                host_credentials: p
                    .host_credentials
                    .iter()
                    .map(|(host, hash)| HostCredential {
                        host: host.clone(),
                        hash: hash.clone(),
                    })
                    .collect(),
                applications: p
                    .applications
                    .iter()
                    .map(|(alias, a)| Ok((alias.clone(), from_json::<Application>(a)?)))
                    .collect::<Result<_, StoreError>>()?,
            });
            if let Some(memory) = &p.plan_memory {
                plan_memories.push((name.clone(), from_json::<PlanMemory>(memory)?));
            }
        }
        Ok(Snapshot {
            pools,
            credentials: t
                .credentials
                .values()
                .map(|c| from_json::<ApiCredential>(c))
                .collect::<Result<_, _>>()?,
            scaling_plans: t
                .scaling_plans
                .iter()
                .map(|(name, plan)| {
                    Ok(StoredPlan {
                        name: name.clone(),
                        plan: from_json::<ScalingPlan>(plan)?,
                    })
                })
                .collect::<Result<_, StoreError>>()?,
            plan_memories,
            signing_keys: t
                .signing_keys
                .as_deref()
                .map(from_json::<SigningKeys>)
                .transpose()?,
            application_groups: t
                .application_groups
                .iter()
                .map(|(name, g)| Ok((name.clone(), from_json::<ApplicationGroup>(g)?)))
                .collect::<Result<_, StoreError>>()?,
            feed_stamps: t
                .feed_stamps
                .iter()
                .map(|(user, f)| Ok((user.clone(), from_json::<FeedStamp>(f)?)))
                .collect::<Result<_, StoreError>>()?,
        })
    }

    fn audit_now(&self, q: &AuditQuery) -> Result<Vec<AuditRow>, StoreError> {
        let t = self.lock();
        let limit = q.limit.min(MAX_AUDIT_PAGE_ROWS);
        let below = q.before_id.unwrap_or(i64::MAX);
        let mut out = Vec::new();
        for (&id, r) in t.audit.range(..below).rev() {
            if out.len() >= limit {
                break;
            }
            let within = match &q.within_pools {
                None => true,
                Some(pools) => r.host_pool.as_ref().is_some_and(|p| pools.contains(p)),
            };
            if q.since_ms.is_some_and(|s| r.time_ms < s)
                || q.actor.as_ref().is_some_and(|a| *a != r.actor)
                || q.host_pool.is_some() && q.host_pool != r.host_pool
                || !within
                || q.ended_sessions && !r.ended
            {
                continue;
            }
            out.push(AuditRow {
                id,
                entry: from_json(&r.record)?,
                count: r.count,
            });
        }
        Ok(out)
    }

    fn scaling_actions_now(
        &self,
        q: &ScalingActionQuery,
    ) -> Result<Vec<ScalingAction>, StoreError> {
        let t = self.lock();
        let limit = q.limit.min(MAX_SCALING_ACTION_PAGE_ROWS);
        let mut out = Vec::new();
        for (id, a) in t.scaling_actions.iter().rev() {
            if out.len() >= limit {
                break;
            }
            if q.pool.as_ref().is_some_and(|p| *p != a.pool)
                || q.pending_only && !a.pending
                || q.before_id.as_ref().is_some_and(|b| id >= b)
            {
                continue;
            }
            out.push(from_json(&a.record)?);
        }
        Ok(out)
    }
}

impl Tables {
    fn pool_mut(&mut self, pool: &str) -> Result<&mut PoolRow, StoreError> {
        self.pools
            .get_mut(pool)
            .ok_or_else(|| StoreError::Missing(format!("host pool {pool}")))
    }

    fn apply_one(&mut self, m: &Mutation, young: &mut i64) -> Result<(), StoreError> {
        match m {
            Mutation::PutPool { config, counters } => {
                let name = config.name.clone();
                let (config, counters) = (to_json(config), to_json(counters));
                match self.pools.get_mut(&name) {
                    Some(p) => {
                        p.config = config;
                        p.counters = counters;
                    }
                    None => {
                        self.pools.insert(
                            name,
                            PoolRow {
                                config,
                                counters,
                                hosts: BTreeMap::new(),
                                sessions: BTreeMap::new(),
                                tokens: BTreeMap::new(),
                                host_credentials: BTreeMap::new(),
                                plan_memory: None,
                                applications: BTreeMap::new(),
                            },
                        );
                    }
                }
            }
            Mutation::PutCounters { pool, counters } => {
                self.pool_mut(pool)?.counters = to_json(counters);
            }
            Mutation::DeletePool { pool } => {
                self.scaling_actions.retain(|_, a| a.pool != *pool);
                self.pools.remove(pool);
            }
            Mutation::PutHost { pool, host } => {
                self.pool_mut(pool)?
                    .hosts
                    .insert(host.spec.name.clone(), (host.seq, to_json(host)));
            }
            Mutation::DeleteHost { pool, host } => {
                if let Some(p) = self.pools.get_mut(pool)
                    && p.hosts.remove(host).is_some()
                {
                    p.sessions.retain(|_, (on, _)| on != host);
                    p.host_credentials.remove(host);
                }
            }
            Mutation::PutSession { pool, session } => {
                let missing =
                    || StoreError::Missing(format!("session host {pool}/{}", session.host));
                let p = self.pools.get_mut(pool).ok_or_else(missing)?;
                if !p.hosts.contains_key(&session.host) {
                    return Err(missing());
                }
                p.sessions
                    .insert(session.id.clone(), (session.host.clone(), to_json(session)));
            }
            Mutation::DeleteSession { pool, id } => {
                if let Some(p) = self.pools.get_mut(pool) {
                    p.sessions.remove(id);
                }
            }
            Mutation::PutRegistrationToken { pool, token } => {
                self.pool_mut(pool)?
                    .tokens
                    .insert(token.hash.clone(), token.clone());
            }
            Mutation::DeleteRegistrationTokens { pool } => {
                if let Some(p) = self.pools.get_mut(pool) {
                    p.tokens.clear();
                }
            }
            Mutation::DeleteRegistrationToken { pool, hash } => {
                if let Some(p) = self.pools.get_mut(pool) {
                    p.tokens.remove(hash);
                }
            }
            Mutation::PutHostCredential { pool, credential } => {
                let missing =
                    || StoreError::Missing(format!("session host {pool}/{}", credential.host));
                let p = self.pools.get_mut(pool).ok_or_else(missing)?;
                if !p.hosts.contains_key(&credential.host) {
                    return Err(missing());
                }
                p.host_credentials
                    .insert(credential.host.clone(), credential.hash.clone());
            }
            Mutation::PutApiCredential { credential } => {
                self.credentials
                    .insert(credential.name.clone(), to_json(credential));
            }
            Mutation::DeleteApiCredential { name } => {
                self.credentials.remove(name);
            }
            Mutation::AppendAudit { entry } => {
                self.append_audit(entry, None);
            }
            Mutation::FoldAudit { key, entry } => match self.fold_keys.get(key) {
                Some(id) => {
                    if let Some(r) = self.audit.get_mut(id) {
                        r.count += 1;
                    }
                }
                None => {
                    let id = self.append_audit(entry, Some(key.clone()));
                    self.fold_keys.insert(key.clone(), id);
                }
            },
            Mutation::PruneAudit {
                older_than_ms,
                max_rows,
                max_bytes,
            } => {
                *young += self.prune(*older_than_ms, *max_rows, *max_bytes);
            }
            Mutation::PutScalingAction { action } => {
                let record = to_json(action);
                let pending = action.outcome == placement::ActionOutcome::Pending;
                match self.scaling_actions.get_mut(&action.id) {
                    Some(a) => {
                        a.pending = pending;
                        a.record = record;
                    }
                    None => {
                        self.scaling_actions.insert(
                            action.id.clone(),
                            ActionRecord {
                                pool: action.pool.clone(),
                                time_ms: action.time_ms,
                                pending,
                                record,
                            },
                        );
                    }
                }
            }
            Mutation::PutScalingPlan { name, plan } => {
                self.scaling_plans.insert(name.clone(), to_json(plan));
            }
            Mutation::DeleteScalingPlan { name } => {
                self.scaling_plans.remove(name);
            }
            Mutation::PutPlanMemory { pool, memory } => {
                self.pool_mut(pool)?.plan_memory = Some(to_json(memory));
            }
            Mutation::PutApplication {
                pool,
                alias,
                application,
            } => {
                self.pool_mut(pool)?
                    .applications
                    .insert(alias.clone(), to_json(application));
            }
            Mutation::DeleteApplication { pool, alias } => {
                if let Some(p) = self.pools.get_mut(pool) {
                    p.applications.remove(alias);
                }
            }
            Mutation::PutApplicationGroup { name, group } => {
                self.application_groups.insert(name.clone(), to_json(group));
            }
            Mutation::DeleteApplicationGroup { name } => {
                self.application_groups.remove(name);
            }
            Mutation::PutFeedStamp { user, stamp } => {
                self.feed_stamps.insert(user.clone(), to_json(stamp));
            }
            Mutation::DeleteFeedStamp { user } => {
                self.feed_stamps.remove(user);
            }
            Mutation::PutSigningKeys { keys } => {
                self.signing_keys = Some(to_json(keys));
            }
        }
        Ok(())
    }

    /// Appends an entry under a new id, and answers the id.
    fn append_audit(&mut self, entry: &crate::AuditEntry, fold_key: Option<String>) -> i64 {
        self.last_audit_id += 1;
        let id = self.last_audit_id;
        self.audit.insert(
            id,
            AuditRecord {
                time_ms: entry.time_ms,
                actor: entry.actor.clone(),
                host_pool: entry.host_pool.clone(),
                record: to_json(entry),
                fold_key,
                count: 1,
                ended: entry.end_reason.is_some(),
            },
        );
        id
    }

    /// Removes an audit entry (and frees its fold key); answers its size
    /// and whether the age bound `older_than_ms` would have kept it.
    fn remove_audit(&mut self, id: i64, older_than_ms: i64) -> Option<(i64, bool)> {
        let r = self.audit.remove(&id)?;
        if let Some(key) = &r.fold_key {
            self.fold_keys.remove(key);
        }
        Some((r.record.len() as i64, r.time_ms >= older_than_ms))
    }

    /// [`Mutation::PruneAudit`], as SQLite applies it: power actions by
    /// age, then by count; audit entries by age, by count, then by bytes,
    /// each bound at most [`AUDIT_PRUNE_CHUNK_ROWS`] a time. Answers how
    /// many entries the age bound would have kept were removed.
    fn prune(&mut self, older_than_ms: i64, max_rows: u64, max_bytes: u64) -> i64 {
        let chunk = AUDIT_PRUNE_CHUNK_ROWS as usize;
        let keep = usize::try_from(max_rows).unwrap_or(usize::MAX);
        let mut old: Vec<(i64, String)> = self
            .scaling_actions
            .iter()
            .filter(|(_, a)| a.time_ms < older_than_ms)
            .map(|(id, a)| (a.time_ms, id.clone()))
            .collect();
        old.sort();
        for (_, id) in old.into_iter().take(chunk) {
            self.scaling_actions.remove(&id);
        }
        let beyond: Vec<String> = self
            .scaling_actions
            .keys()
            .rev()
            .skip(keep)
            .take(chunk)
            .cloned()
            .collect();
        for id in beyond {
            self.scaling_actions.remove(&id);
        }

        let mut old: Vec<(i64, i64)> = self
            .audit
            .iter()
            .filter(|(_, r)| r.time_ms < older_than_ms)
            .map(|(&id, r)| (r.time_ms, id))
            .collect();
        old.sort();
        for (_, id) in old.into_iter().take(chunk) {
            self.remove_audit(id, older_than_ms);
        }
        let mut young = 0i64;
        // All but the newest `max_rows`, counted from the largest id.
        if let Some(&max_id) = self.audit.keys().next_back() {
            let keep = i64::try_from(max_rows).unwrap_or(i64::MAX);
            let cutoff = max_id.saturating_sub(keep);
            let ids: Vec<i64> = self
                .audit
                .range(..=cutoff)
                .take(chunk)
                .map(|(&id, _)| id)
                .collect();
            for id in ids {
                if let Some((_, true)) = self.remove_audit(id, older_than_ms) {
                    young += 1;
                }
            }
        }
        let total: i64 = self.audit.values().map(|r| r.record.len() as i64).sum();
        let oldest: Vec<(i64, i64)> = self
            .audit
            .iter()
            .take(chunk)
            .map(|(&id, r)| (id, r.record.len() as i64))
            .collect();
        if let Some(cutoff) = crate::audit_byte_cutoff(total, max_bytes, &oldest) {
            let ids: Vec<i64> = self.audit.range(..=cutoff).map(|(&id, _)| id).collect();
            for id in ids {
                if let Some((_, true)) = self.remove_audit(id, older_than_ms) {
                    young += 1;
                }
            }
        }
        young
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("records serialize to JSON")
}

fn from_json<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| StoreError::Corrupt(e.to_string()))
}

#[async_trait::async_trait]
impl Store for MemoryStore {
    async fn load(&self) -> Result<Snapshot, StoreError> {
        self.load_now()
    }

    async fn apply(&self, batch: Arc<[Mutation]>) -> Result<(), StoreError> {
        self.apply_now(&batch)
    }

    async fn audit(&self, query: AuditQuery) -> Result<Vec<AuditRow>, StoreError> {
        self.audit_now(&query)
    }

    async fn scaling_actions(
        &self,
        query: ScalingActionQuery,
    ) -> Result<Vec<ScalingAction>, StoreError> {
        self.scaling_actions_now(&query)
    }
}
