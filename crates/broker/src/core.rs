//! The broker's core: every pool's engine in memory, each behind its own
//! lock, the writer that makes changes durable, and the clock. It offers
//! the only ways to reach them:
//!
//! - [`Core::read`] and [`Core::peek`] look at a pool (after what it saw is
//!   durable, or at once);
//! - [`Core::write`] (and its variants) runs an engine operation, queues
//!   what it changed for the store while still holding the pool's lock, and
//!   answers only once that is durable;
//! - [`Core::commit`] does the same for what the engines do not keep
//!   (credentials, signing keys, scaling plans, audit entries), under the
//!   core's own lock.
//!
//! Because every change is queued under the lock of the state it comes
//! from, the store's order is the order of the changes; because every
//! answer waits for its ticket, nothing acknowledged is lost to a crash.
//! What else the broker keeps (enrollment, plans, messages, power
//! actions) lives in services that take the core; the core knows none of
//! them. Who must act on a change (the scaling plans' evaluator) listens
//! on [`Core::session_changes`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use placement::{Change, Pool, PoolConfig, TimestampMs};
use store::{Mutation, Store};

use crate::clock::Clock;
use crate::error::BrokerError;
use crate::logoffs::LogoffOrders;
use crate::sync::{MutexExt, RwLockExt};
use crate::writer::{AuditRetention, WriteQueue};

/// One pool's engine. `deleted` is set when the pool is removed, so that a
/// request that fetched the slot before the removal finds it gone instead
/// of writing into a pool the store no longer has.
struct PoolSlot {
    pool: Pool,
    deleted: bool,
}

type SharedSlot = Arc<Mutex<PoolSlot>>;

/// The pools, the writer and the clock.
pub struct Core {
    pools: RwLock<HashMap<String, SharedSlot>>,
    writer: Arc<WriteQueue>,
    clock: Clock,
    started_ms: TimestampMs,
    /// Orders for hosts' agents to log sessions off (rule W5), filled from
    /// the engines' changes under their pools' locks.
    logoffs: LogoffOrders,
    /// Counts changes that started or ended a session.
    session_changes: tokio::sync::watch::Sender<u64>,
    /// Orders [`Core::commit`]s: what one changed is queued before what
    /// the next one changes.
    commit_order: Mutex<()>,
}

fn lock(slot: &SharedSlot) -> MutexGuard<'_, PoolSlot> {
    // Engine operations do not panic on request input; if one ever did, the
    // pool's state is still the consistent state before the call's change
    // was queued, so a poisoned lock is usable.
    slot.lock_or_recover()
}

impl Core {
    /// The core over `pools` (as the store kept them), writing to `store`.
    /// Starts the writer.
    pub fn new(
        store: Arc<dyn Store>,
        pools: Vec<store::PoolRecord>,
        clock: Clock,
        audit_retention: AuditRetention,
    ) -> Core {
        let started_ms = clock.now_ms();
        let pools = pools
            .into_iter()
            .map(|r| {
                let name = r.config.name.clone();
                let pool = Pool::restore(r.config, r.counters, r.hosts, r.sessions, started_ms);
                (
                    name,
                    Arc::new(Mutex::new(PoolSlot {
                        pool,
                        deleted: false,
                    })),
                )
            })
            .collect();
        Core {
            pools: RwLock::new(pools),
            writer: WriteQueue::start(store, clock.clone(), audit_retention),
            clock,
            started_ms,
            logoffs: LogoffOrders::default(),
            session_changes: tokio::sync::watch::channel(0).0,
            commit_order: Mutex::new(()),
        }
    }

    /// Now, by the core's clock.
    pub fn now_ms(&self) -> TimestampMs {
        self.clock.now_ms()
    }

    /// The clock every rule reads.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// When this core was built (its engines restored), by its clock.
    pub fn started_ms(&self) -> TimestampMs {
        self.started_ms
    }

    /// The writer: its health, its flush, how long a store call has hung.
    pub fn writer(&self) -> &Arc<WriteQueue> {
        &self.writer
    }

    /// The hosts' pending logoff orders (rule W5).
    pub fn logoffs(&self) -> &LogoffOrders {
        &self.logoffs
    }

    /// Changes whenever a change started or ended a session: the scaling
    /// plans' evaluator wakes on it.
    pub fn session_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.session_changes.subscribe()
    }

    fn slot(&self, pool: &str) -> Result<SharedSlot, BrokerError> {
        let pools = self.pools.read_or_recover();
        pools
            .get(pool)
            .cloned()
            .ok_or_else(|| BrokerError::PoolNotFound(pool.to_string()))
    }

    /// Whether `pool` exists.
    pub fn has_pool(&self, pool: &str) -> bool {
        self.slot(pool).is_ok()
    }

    /// Names of every pool, sorted.
    pub fn pool_names(&self) -> Vec<String> {
        let pools = self.pools.read_or_recover();
        let mut names: Vec<String> = pools.keys().cloned().collect();
        names.sort();
        names
    }

    /// Runs `f` on a pool without changing it, and answers once what it
    /// saw is durable.
    pub async fn read<R>(
        &self,
        pool: &str,
        f: impl FnOnce(&Pool) -> Result<R, BrokerError>,
    ) -> Result<R, BrokerError> {
        let slot = self.slot(pool)?;
        let (r, ticket) = {
            let s = lock(&slot);
            if s.deleted {
                return Err(BrokerError::PoolNotFound(pool.to_string()));
            }
            (f(&s.pool), self.writer.send(None, Vec::new()))
        };
        self.writer.wait(ticket).await?;
        r
    }

    /// Runs `f` on a pool as memory holds it, without waiting for the
    /// store: only for answers that do not depend on the store (reconnects
    /// while it is unreachable).
    pub fn peek<R>(
        &self,
        pool: &str,
        f: impl FnOnce(&Pool) -> Result<R, BrokerError>,
    ) -> Result<R, BrokerError> {
        let slot = self.slot(pool)?;
        let s = lock(&slot);
        if s.deleted {
            return Err(BrokerError::PoolNotFound(pool.to_string()));
        }
        f(&s.pool)
    }

    /// Runs `f` on a pool, persists whatever it changed (even when it
    /// refuses: a connect first expires stale Pending sessions), and
    /// answers once that is durable.
    pub async fn write<R>(
        &self,
        pool: &str,
        f: impl FnOnce(&mut Pool, TimestampMs) -> Result<R, BrokerError>,
    ) -> Result<R, BrokerError> {
        self.write_with(pool, |p, now| f(p, now).map(|r| (r, Vec::new())))
            .await
    }

    /// Like [`Core::write`], for operations that also change what the
    /// engine does not keep (tokens, credentials): `f` answers those
    /// mutations, queued after the engine's.
    pub async fn write_with<R>(
        &self,
        pool: &str,
        f: impl FnOnce(&mut Pool, TimestampMs) -> Result<(R, Vec<Mutation>), BrokerError>,
    ) -> Result<R, BrokerError> {
        let slot = self.slot(pool)?;
        let reserved = self.writer.reserve().await?;
        let (r, ticket) = self.change(&slot, pool, f, |mutations| {
            self.writer.send(Some(reserved), mutations)
        })?;
        self.writer.wait(ticket).await?;
        r
    }

    /// Like [`Core::write`], for the doors' marks of the sessions they
    /// relay: the change is queued in order but nobody waits for it (see
    /// `crate::writer`, relaxed changes), so a relayed connection is never
    /// held for a commit.
    pub async fn write_relaxed<R>(
        &self,
        pool: &str,
        f: impl FnOnce(&mut Pool, TimestampMs) -> Result<R, BrokerError>,
    ) -> Result<R, BrokerError> {
        let slot = self.slot(pool)?;
        let reserved = self.writer.reserve().await?;
        let (r, ()) = self.change(
            &slot,
            pool,
            |p, now| f(p, now).map(|r| (r, Vec::new())),
            |mutations| self.writer.send_relaxed(reserved, mutations),
        )?;
        r
    }

    /// Commits what the engines do not keep: `f` changes its own state and
    /// answers the mutations that record it; they are queued before the
    /// next commit's, and this answers once they are durable. `f` runs
    /// under the core's commit lock: it must not wait, nor commit again.
    /// A refusal (`Err`) queues nothing.
    pub async fn commit<R>(
        &self,
        f: impl FnOnce() -> Result<(R, Vec<Mutation>), BrokerError>,
    ) -> Result<R, BrokerError> {
        let reserved = self.writer.reserve().await?;
        let (r, ticket) = {
            let _in_order = self.commit_order.lock_or_recover();
            let (r, mutations) = f()?;
            (r, self.writer.send(Some(reserved), mutations))
        };
        self.writer.wait(ticket).await?;
        Ok(r)
    }

    /// Runs `f` on a pool under its lock and hands what changed to
    /// `enqueue`, still under the lock (so the queue's order is the order
    /// of changes), with the audit entry of an audited request (rule T5).
    fn change<R, T>(
        &self,
        slot: &SharedSlot,
        pool: &str,
        f: impl FnOnce(&mut Pool, TimestampMs) -> Result<(R, Vec<Mutation>), BrokerError>,
        enqueue: impl FnOnce(Vec<Mutation>) -> T,
    ) -> Result<(Result<R, BrokerError>, T), BrokerError> {
        let mut s = lock(slot);
        if s.deleted {
            return Err(BrokerError::PoolNotFound(pool.to_string()));
        }
        // An audited request's entry goes with its change (rule T5).
        let before = crate::audit::before_write(&s.pool);
        let now = self.clock.now_ms();
        let r = f(&mut s.pool, now);
        // W5: the hosts of sessions the broker ended are told, whatever
        // operation ended them; under the pool's lock, so a heartbeat of
        // that host sees the order or the session, never neither.
        self.logoffs
            .push(pool, s.pool.take_host_logoffs(), std::time::Instant::now());
        let mut mutations = mutations_for(&mut s.pool, now);
        if mutations.iter().any(|m| {
            matches!(
                m,
                Mutation::PutSession { .. } | Mutation::DeleteSession { .. }
            )
        }) {
            self.session_changes.send_modify(|n| *n = n.wrapping_add(1));
        }
        let r = r.map(|(r, extra)| {
            mutations.extend(extra);
            r
        });
        if r.is_ok()
            && !mutations.is_empty()
            && let Some(before) = before
            && let Some(entry) = crate::audit::after_write(&s.pool, before, &mutations)
        {
            mutations.push(entry);
        }
        Ok((r, enqueue(mutations)))
    }

    /// Creates a pool, or replaces the settings of an existing one; with
    /// `create_only`, an existing pool is a conflict instead (decided under
    /// the lock that creates it, so two creations cannot both succeed).
    /// Answers whether it was created, and the warnings of rule P5.
    pub async fn put_pool(
        &self,
        config: PoolConfig,
        create_only: bool,
    ) -> Result<(bool, Vec<String>), BrokerError> {
        let name = config.name.clone();
        let exists = || -> BrokerError {
            placement::Error::Conflict(format!(
                "host pool {name} already exists (If-None-Match: * only creates); change it \
                 with PATCH, or replace it with a PUT without that header"
            ))
            .into()
        };
        if self.has_pool(&name) {
            if create_only {
                return Err(exists());
            }
            let warnings = self.write(&name, |p, _| Ok(p.set_config(config)?)).await?;
            return Ok((false, warnings));
        }
        let warnings = config.validate()?;
        let reserved = self.writer.reserve().await?;
        let ticket = {
            let mut pools = self.pools.write_or_recover();
            if pools.contains_key(&name) {
                None
            } else {
                let seed: u64 = rand::random();
                let pool = Pool::new(config.clone(), seed, self.started_ms);
                let mutation = Mutation::PutPool {
                    config: pool.config().clone(),
                    counters: pool.counters(),
                };
                pools.insert(
                    name.clone(),
                    Arc::new(Mutex::new(PoolSlot {
                        pool,
                        deleted: false,
                    })),
                );
                Some(self.writer.send(Some(reserved), vec![mutation]))
            }
        };
        match ticket {
            Some(ticket) => {
                self.writer.wait(ticket).await?;
                Ok((true, warnings))
            }
            None if create_only => Err(exists()),
            None => {
                // Created meanwhile by another request: this is a replace.
                let warnings = self.write(&name, |p, _| Ok(p.set_config(config)?)).await?;
                Ok((false, warnings))
            }
        }
    }

    /// Removes a pool; with session hosts only when `force`. `forget` runs
    /// under the lock that removes it, for what services keep of the pool
    /// that must go with it (its secrets, its application groups), and
    /// answers the mutations that remove those, which go in the pool's
    /// batch.
    pub async fn delete_pool(
        &self,
        name: &str,
        force: bool,
        forget: impl FnOnce() -> Vec<Mutation>,
    ) -> Result<(), BrokerError> {
        let reserved = self.writer.reserve().await?;
        let ticket = {
            let mut pools = self.pools.write_or_recover();
            let slot = pools
                .get(name)
                .cloned()
                .ok_or_else(|| BrokerError::PoolNotFound(name.to_string()))?;
            let mut s = lock(&slot);
            let hosts = s.pool.host_count();
            if hosts > 0 && !force {
                return Err(placement::Error::Conflict(format!(
                    "host pool {name} has {hosts} session host(s); remove them or delete \
                     with force"
                ))
                .into());
            }
            s.deleted = true;
            pools.remove(name);
            let mut mutations = vec![Mutation::DeletePool {
                pool: name.to_string(),
            }];
            mutations.extend(forget());
            self.writer.send(Some(reserved), mutations)
        };
        self.writer.wait(ticket).await?;
        Ok(())
    }

    /// Applies the passing of time to every pool (rules S4, S7).
    pub async fn tick_all(&self) -> Result<(), BrokerError> {
        for name in self.pool_names() {
            match self
                .write(&name, |p, now| {
                    p.tick(now);
                    Ok(())
                })
                .await
            {
                Ok(()) => {}
                Err(BrokerError::PoolNotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Visits every pool under its lock, by name (for metrics and
    /// listings).
    pub fn for_each_pool(&self, mut f: impl FnMut(&Pool)) {
        let slots: Vec<SharedSlot> = {
            let pools = self.pools.read_or_recover();
            let mut v: Vec<(String, SharedSlot)> =
                pools.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v.into_iter().map(|(_, s)| s).collect()
        };
        for slot in slots {
            let s = lock(&slot);
            if !s.deleted {
                f(&s.pool);
            }
        }
    }
}

/// Turns the engine's record of what changed into store mutations, read
/// from the pool's current state (so several changes to one record in one
/// operation write its final form once, in order). Every session's end is
/// logged with its reason and gets its audit entry (rule T5) in the same
/// write as its deletion (see [`crate::audit::session_end`]).
fn mutations_for(pool: &mut Pool, now: TimestampMs) -> Vec<Mutation> {
    let changes = pool.take_changes();
    let name = pool.name().to_string();
    let mut out = Vec::with_capacity(changes.len());
    let mut counters = false;
    for c in changes {
        match c {
            Change::Config => out.push(Mutation::PutPool {
                config: pool.config().clone(),
                counters: pool.counters(),
            }),
            Change::Counters => counters = true,
            Change::Host(h) => {
                if let Some(host) = pool.host(&h) {
                    out.push(Mutation::PutHost {
                        pool: name.clone(),
                        host: host.clone(),
                    });
                }
            }
            Change::HostRemoved(h) => out.push(Mutation::DeleteHost {
                pool: name.clone(),
                host: h,
            }),
            Change::Session(id) => {
                if let Some(s) = pool.session(&id) {
                    out.push(Mutation::PutSession {
                        pool: name.clone(),
                        session: s.clone(),
                    });
                }
            }
            Change::SessionEnded(ended) => {
                let entry = crate::audit::session_end(&name, &ended, now);
                tracing::info!(
                    pool = %name,
                    host = %ended.session.host,
                    user = %ended.session.user,
                    session_id = %ended.session.id,
                    reason = %ended.reason,
                    actor = %entry.actor,
                    "session ended"
                );
                out.push(Mutation::DeleteSession {
                    pool: name.clone(),
                    id: ended.session.id,
                });
                out.push(Mutation::AppendAudit { entry });
            }
        }
    }
    if counters {
        out.push(Mutation::PutCounters {
            pool: name,
            counters: pool.counters(),
        });
    }
    out
}
