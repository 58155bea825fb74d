//! Loading: every table read in one repeatable-read snapshot, in the order
//! the SQLite store gives, into a [`Snapshot`].

use std::collections::HashMap;

use tokio_postgres::Row;

use super::{Connection, PostgresError};
use crate::{
    ApiCredential, HostCredential, PoolRecord, RegistrationToken, Snapshot, StoreError, StoredPlan,
};

impl Connection {
    pub(super) async fn load(&mut self) -> Result<Snapshot, StoreError> {
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
    /// order, sessions by id, tokens by hash, credentials by host,
    /// applications by alias, application groups by name, feed stamps by
    /// user).
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
                applications: Vec::new(),
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
                "SELECT pool, hash, expires_ms, max_hosts, used_hosts FROM registration_tokens
                 ORDER BY pool, hash",
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
                    max_hosts: count(row.get(3))?,
                    used_hosts: count(row.get(4))?,
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
        for row in c
            .query(
                "SELECT pool, alias, record FROM applications ORDER BY pool, alias",
                &[],
            )
            .await
            .map_err(q)?
        {
            pools[pool_of(&row)?]
                .applications
                .push((row.get(1), from_json(row.get(2))?));
        }
        let mut credentials = Vec::new();
        for row in c
            .query("SELECT record FROM api_credentials ORDER BY name", &[])
            .await
            .map_err(q)?
        {
            credentials.push(from_json::<ApiCredential>(row.get(0))?);
        }
        let mut scaling_plans = Vec::new();
        for row in c
            .query("SELECT name, record FROM scaling_plans ORDER BY name", &[])
            .await
            .map_err(q)?
        {
            scaling_plans.push(StoredPlan {
                name: row.get(0),
                plan: from_json(row.get(1))?,
            });
        }
        let mut plan_memories = Vec::new();
        for row in c
            .query("SELECT pool, record FROM plan_memory ORDER BY pool", &[])
            .await
            .map_err(q)?
        {
            plan_memories.push((row.get(0), from_json(row.get(1))?));
        }
        let signing_keys = c
            .query_opt(
                "SELECT record FROM broker_secrets WHERE name = $1",
                &[&crate::SIGNING_KEYS_NAME],
            )
            .await
            .map_err(q)?
            .map(|row| from_json(row.get(0)))
            .transpose()?;
        let mut application_groups = Vec::new();
        for row in c
            .query(
                "SELECT name, record FROM application_groups ORDER BY name",
                &[],
            )
            .await
            .map_err(q)?
        {
            application_groups.push((row.get(0), from_json(row.get(1))?));
        }
        let mut feed_stamps = Vec::new();
        for row in c
            .query(
                r#"SELECT "user", record FROM feed_stamps ORDER BY "user""#,
                &[],
            )
            .await
            .map_err(q)?
        {
            feed_stamps.push((row.get(0), from_json(row.get(1))?));
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
}

/// A stored count as the `u32` it was written from.
fn count(n: i64) -> Result<u32, StoreError> {
    u32::try_from(n).map_err(|_| StoreError::Corrupt(format!("a count of {n} is out of range")))
}

fn from_json<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| StoreError::Corrupt(e.to_string()))
}
