//! The broker's state: every pool's engine in memory, each behind its own
//! lock, and the one way to change it — [`Broker::write`] — which runs an
//! engine operation, queues what it changed for the store while still
//! holding the lock, and answers only once that is durable.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use placement::{Change, Pool, PoolConfig, TimestampMs};
use store::{Mutation, PoolRecord, Snapshot, Store};

use crate::error::BrokerError;
use crate::sync::{MutexExt, RwLockExt};
use crate::writer::WriteQueue;

/// One pool's engine. `deleted` is set when the pool is removed, so that a
/// request that fetched the slot before the removal finds it gone instead
/// of writing into a pool the store no longer has.
pub struct PoolSlot {
    pub pool: Pool,
    pub deleted: bool,
}

pub type SharedSlot = Arc<Mutex<PoolSlot>>;

/// Registration tokens and host credentials, by the SHA-256 (hex) of the
/// secret. Changed only under the lock of the pool they belong to, in the
/// same step that queues the change for the store.
#[derive(Default)]
pub struct Secrets {
    /// Registration token hash → its pool, expiry and host bound.
    pub tokens: HashMap<String, crate::enroll::TokenGrant>,
    /// Host credential hash → (pool, host).
    pub hosts: HashMap<String, (String, String)>,
    /// API credential hash → the credential (rule T1). Changed under this
    /// registry's write lock, in the same step that queues the change.
    pub credentials: HashMap<String, store::ApiCredential>,
}

impl Secrets {
    /// Forgets the credential of `host` in `pool` (all of the pool's when
    /// `host` is None), and with a pool its registration tokens.
    pub fn forget(&mut self, pool: &str, host: Option<&str>) {
        self.hosts
            .retain(|_, (p, h)| !(p == pool && host.is_none_or(|host| host == h)));
        if host.is_none() {
            self.tokens.retain(|_, t| t.pool != pool);
        }
    }
}

/// SHA-256 of a secret, in hex: what is stored and compared.
pub fn secret_hash(secret: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(secret.as_bytes()))
}

/// A new random secret with a recognisable prefix (`dbr_` registration
/// token, `dbh_` host credential).
pub fn new_secret(prefix: &str) -> String {
    let bytes: [u8; 32] = rand::random();
    format!("{prefix}{}", hex::encode(bytes))
}

/// The running broker's state, shared by every request.
pub struct Broker {
    pools: RwLock<HashMap<String, SharedSlot>>,
    /// The store, read directly only for what memory does not keep (the
    /// audit log, rule T5); every write goes through `writer`.
    pub store: Arc<dyn Store>,
    pub secrets: RwLock<Secrets>,
    pub writer: Arc<WriteQueue>,
    pub admin_token: String,
    /// Sign and check connection tickets (rule T3) and redirection tokens
    /// (R3): random, kept in the store, so every replica shares them
    /// (`keys.rs`).
    pub keys: crate::keys::SigningKeys,
    /// A signing key made at start, until it is durable
    /// ([`Broker::save_new_signing_key`]).
    unsaved_key: Mutex<Option<Mutation>>,
    pub started_ms: TimestampMs,
    /// Where RDP clients reach this broker's front door (`host:port`), for
    /// the `.rdp` connection files; None when it runs none.
    pub rdp_front_door: RwLock<Option<String>>,
    /// Where RDP clients reach this broker's RD Gateway (`host:port`), for
    /// the gateway's connection files (`rdpFile?gateway=true`); None when
    /// there is none.
    pub rd_gateway: RwLock<Option<String>>,
    /// Per-host heartbeat budgets (rule S8: one host cannot starve others).
    /// `serve --api-rate-limit`: requests a second allowed to each
    /// credential and to each source address with a valid credential
    /// (bursts of twice as many); 0 = no limit. Read when the API's router
    /// is built (rule T4, `api::throttle`).
    pub api_rate_limit_per_second: std::sync::atomic::AtomicU32,
    /// `serve --audited-rate-limit`: audited requests a second allowed to
    /// the admin token and each API credential (rule T4; 0 = no limit).
    /// Read when the API's router is built.
    pub audited_rate_limit_per_second: std::sync::atomic::AtomicU32,
    pub heartbeats: crate::heartbeat::HeartbeatLimiter,
    /// The user portal's sign-in (`serve --oidc-issuer`); unset: `/portal`
    /// answers that it is not configured.
    pub portal: std::sync::OnceLock<Arc<crate::portal::Portal>>,
    /// The bound on power actions running at once (rule A9).
    pub power: crate::power::PowerActions,
    /// Messages waiting for their session hosts' heartbeats (not durable).
    pub messages: crate::messages::MessageQueues,
    /// Logoff orders for hosts' agents (rule W5), kept in memory only.
    pub logoffs: crate::logoffs::LogoffOrders,
    /// Scaling plans, their memory and their evaluator's wake-up (A1–A7).
    pub autoscale: crate::autoscale::Autoscale,
}

pub fn now_ms() -> TimestampMs {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as TimestampMs)
        .unwrap_or(0)
}

fn lock(slot: &SharedSlot) -> MutexGuard<'_, PoolSlot> {
    // Engine operations do not panic on request input; if one ever did, the
    // pool's state is still the consistent state before the call's change
    // was queued, so a poisoned lock is usable.
    slot.lock_or_recover()
}

impl Broker {
    /// Rebuilds every pool from the store's snapshot and starts the writer.
    pub fn new(store: Arc<dyn Store>, mut snapshot: Snapshot, admin_token: String) -> Broker {
        let started_ms = now_ms();
        let autoscale = crate::autoscale::Autoscale::from_snapshot(&mut snapshot);
        let mut secrets = Secrets::default();
        for r in &snapshot.pools {
            for t in &r.registration_tokens {
                secrets.tokens.insert(
                    t.hash.clone(),
                    crate::enroll::TokenGrant::from_stored(&r.config.name, t),
                );
            }
            for c in &r.host_credentials {
                secrets
                    .hosts
                    .insert(c.hash.clone(), (r.config.name.clone(), c.host.clone()));
            }
        }
        let (keys, unsaved_key) =
            crate::keys::SigningKeys::load(snapshot.signing_keys.take(), started_ms);
        for c in snapshot.credentials {
            secrets.credentials.insert(c.hash.clone(), c);
        }
        let pools = snapshot
            .pools
            .into_iter()
            .map(|r: PoolRecord| {
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
        Broker {
            pools: RwLock::new(pools),
            secrets: RwLock::new(secrets),
            writer: WriteQueue::start(store.clone()),
            store,
            keys,
            unsaved_key: Mutex::new(unsaved_key),
            admin_token,
            started_ms,
            rdp_front_door: RwLock::new(None),
            rd_gateway: RwLock::new(None),
            heartbeats: Default::default(),
            api_rate_limit_per_second: Default::default(),
            audited_rate_limit_per_second: std::sync::atomic::AtomicU32::new(
                crate::api::throttle::AUDITED_PER_SECOND,
            ),
            portal: Default::default(),
            power: Default::default(),
            messages: Default::default(),
            logoffs: Default::default(),
            autoscale,
        }
    }

    /// Writes the signing key made at start, if one was, and waits until it
    /// is durable: before this broker signs anything, so a ticket it hands
    /// out is still good after a restart.
    pub async fn save_new_signing_key(&self) -> Result<(), BrokerError> {
        let unsaved = self.unsaved_key.lock_or_recover().take();
        if let Some(put) = unsaved {
            let slot = self.writer.reserve().await?;
            let ticket = self.writer.send(Some(slot), vec![put]);
            self.writer.wait(ticket).await?;
            tracing::info!("made this broker's signing key (tickets, redirection tokens)");
        }
        Ok(())
    }

    fn slot(&self, pool: &str) -> Result<SharedSlot, BrokerError> {
        let pools = self.pools.read_or_recover();
        pools
            .get(pool)
            .cloned()
            .ok_or_else(|| BrokerError::PoolNotFound(pool.to_string()))
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

    /// Like [`Broker::write`], for operations that also change what the
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

    /// Like [`Broker::write`], for the RDP front door's marks of the
    /// sessions it relays: the change is queued in order but nobody waits
    /// for it (see `crate::writer`, relaxed changes), so a relayed
    /// connection is never held for a commit.
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
        let r = f(&mut s.pool, now_ms());
        // W5: the hosts of sessions the broker ended are told, whatever
        // operation ended them; under the pool's lock, so a heartbeat of
        // that host sees the order or the session, never neither.
        self.logoffs
            .push(pool, s.pool.take_host_logoffs(), std::time::Instant::now());
        let mut mutations = mutations_for(&mut s.pool);
        if mutations.iter().any(|m| {
            matches!(
                m,
                Mutation::PutSession { .. } | Mutation::DeleteSession { .. }
            )
        }) {
            self.autoscale.session_changed();
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
        if self.slot(&name).is_ok() {
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

    /// Removes a pool; with session hosts only when `force`.
    pub async fn delete_pool(&self, name: &str, force: bool) -> Result<(), BrokerError> {
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
            self.secrets.write_or_recover().forget(name, None);
            self.writer.send(
                Some(reserved),
                vec![Mutation::DeletePool {
                    pool: name.to_string(),
                }],
            )
        };
        self.writer.wait(ticket).await?;
        self.forget_pool_in_plans(name).await;
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

    /// Visits every pool under its lock (for metrics and listings).
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
/// operation write its final form once, in order).
fn mutations_for(pool: &mut Pool) -> Vec<Mutation> {
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
            Change::SessionEnded(id) => out.push(Mutation::DeleteSession {
                pool: name.clone(),
                id,
            }),
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
