//! Connecting: which URLs name a PostgreSQL database, opening the one
//! connection (in clear: TLS is not supported yet, see the module above),
//! and the session settings every store connection needs (durable commits,
//! server-side keepalives).

use tokio_postgres::{Client, NoTls};

use super::error::reason;
use super::{CONNECT_TIMEOUT, PostgresError, SERVER_KEEPALIVE};
use crate::StoreError;

/// Whether `url` names a PostgreSQL database (the schemes this store takes).
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// Parses `url`, connects and spawns the task that drives the connection.
pub(super) async fn open_connection(url: &str) -> Result<(Client, String), StoreError> {
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
pub(super) async fn configure_session(client: &Client) -> Result<(), StoreError> {
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
