//! Test fixtures (feature `testing`): the tests' PostgreSQL server, named
//! by [`TEST_SERVER_URL_ENV`], and [`ScratchDatabase`], a throwaway
//! database per test. Used by this crate's tests and by the broker's and
//! the binary's; production builds do not carry them.

use super::PostgresError;
use super::connection::{is_postgres_url, open_connection};
use super::error::reason;
use crate::StoreError;

/// Environment variable naming the PostgreSQL server of the tests.
pub const TEST_SERVER_URL_ENV: &str = "DESKBROKER_TEST_DATABASE_URL";
/// The tests' server when [`TEST_SERVER_URL_ENV`] is unset: this machine's.
pub const TEST_SERVER_URL_DEFAULT: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The tests' server URL: [`TEST_SERVER_URL_ENV`], or
/// [`TEST_SERVER_URL_DEFAULT`].
pub fn test_server_url() -> String {
    std::env::var(TEST_SERVER_URL_ENV).unwrap_or_else(|_| TEST_SERVER_URL_DEFAULT.into())
}

/// Runs `sql` (any number of statements) on the database of `url`: for
/// tests that build a database by hand, such as the fixtures of an earlier
/// schema version.
pub async fn execute_for_tests(url: &str, sql: &str) -> Result<(), StoreError> {
    let (client, _) = open_connection(url).await?;
    client
        .batch_execute(sql)
        .await
        .map_err(|e| PostgresError::query("a test's statements failed", e).into())
}

/// A fresh database for one test (of this crate or of the binary), created
/// through the server URL's database and dropped (`WITH (FORCE)`, ending
/// any session still on it) when this value is dropped, even when the
/// test panics.
pub struct ScratchDatabase {
    server_url: String,
    name: String,
    url: String,
}

impl ScratchDatabase {
    /// Creates `deskbroker_test_<unique>_<label>` on the server of
    /// `server_url` (whose own database is only used to run
    /// `CREATE DATABASE`).
    pub async fn create(server_url: &str, label: &str) -> Result<ScratchDatabase, StoreError> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let label: String = label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .take(20)
            .collect();
        let name = format!(
            "deskbroker_test_{}_{nanos:x}_{n}_{label}",
            std::process::id()
        );
        let url = with_database(server_url, &name)?;
        let (client, _) = open_connection(server_url).await?;
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .map_err(|e| PostgresError::query("cannot create a scratch database", e))?;
        Ok(ScratchDatabase {
            server_url: server_url.to_string(),
            name,
            url,
        })
    }

    /// URL of the scratch database.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for ScratchDatabase {
    fn drop(&mut self) {
        let server_url = self.server_url.clone();
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        // A runtime of its own on a thread of its own: drop may run inside
        // an async test, where blocking on that runtime is not allowed.
        let dropped = std::thread::spawn(move || -> Result<(), String> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(async {
                let (client, _) = open_connection(&server_url)
                    .await
                    .map_err(|e| e.to_string())?;
                client.batch_execute(&sql).await.map_err(|e| reason(&e))
            })
        })
        .join();
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("cannot drop scratch database {}: {e}", self.name),
            Err(_) => eprintln!("cannot drop scratch database {}: panicked", self.name),
        }
    }
}

/// `url` with its database replaced by `name` (the query is kept).
fn with_database(url: &str, name: &str) -> Result<String, StoreError> {
    let Some(scheme_end) = url.find("://").filter(|_| is_postgres_url(url)) else {
        return Err(
            PostgresError::Url("it must start with postgres:// or postgresql://".into()).into(),
        );
    };
    let after = scheme_end + 3;
    let rest = &url[after..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let query = tail.find('?').map_or("", |q| &tail[q..]);
    Ok(format!("{}{authority}/{name}{query}", &url[..after]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_database_replaces_only_the_database() {
        let cases = [
            (
                "postgres://postgres@127.0.0.1:5432/test",
                "postgres://postgres@127.0.0.1:5432/x",
            ),
            (
                "postgresql://u:p@h/test?sslmode=disable",
                "postgresql://u:p@h/x?sslmode=disable",
            ),
            ("postgres://h:5432", "postgres://h:5432/x"),
            (
                "postgres://h?sslmode=disable",
                "postgres://h/x?sslmode=disable",
            ),
        ];
        for (url, want) in cases {
            assert_eq!(with_database(url, "x").expect("url"), want, "{url}");
        }
        assert!(with_database("mysql://h/db", "x").is_err());
    }
}
