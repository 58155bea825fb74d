//! [`PostgresError`]: what can go wrong with PostgreSQL, in words for an
//! operator, and [`reason`], the whole of a driver error in one line.

use std::time::Duration;

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
    pub(super) fn query(context: &'static str, source: tokio_postgres::Error) -> PostgresError {
        PostgresError::Query {
            context,
            reason: reason(&source),
            source,
        }
    }
}

/// A `tokio_postgres::Error` in full: its `Display` says only "db error",
/// the server's message, detail and hint are in its source.
pub(super) fn reason(e: &tokio_postgres::Error) -> String {
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
