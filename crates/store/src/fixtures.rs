//! Test fixtures (feature `testing`): stores as the deskbroker before this
//! one left them, schema version [`PREVIOUS_VERSION`], with data in them,
//! for the tests that check that this deskbroker migrates and serves them
//! (this crate's, and the binary's through `serve`). The schema files are
//! kept as that version shipped, never edited; `crates/store/fixtures/`.

use std::path::Path;

use crate::StoreError;

/// The schema version of the fixtures: the one before this deskbroker's.
pub const PREVIOUS_VERSION: usize = 7;

/// A version-7 SQLite store's schema, as SQLite keeps it in `sqlite_master`.
pub const SQLITE_SCHEMA: &str = include_str!("../fixtures/schema-v7.sqlite.sql");
/// A version-7 PostgreSQL store's schema: its migrations and version record.
pub const POSTGRES_SCHEMA: &str = include_str!("../fixtures/schema-v7.postgres.sql");
/// Data a version-7 broker wrote: a pool `p` with hosts h1, h2 (drained)
/// and h3 (registered by its agent), the Active sessions of
/// `alice@contoso.com` and `bob@contoso.com` on h1, registration tokens,
/// an API credential (`ops-reader`, role reader, token
/// [`READER_TOKEN`]), a scaling plan `weekdays` and the audit log.
pub const DATA: &str = include_str!("../fixtures/data-v7.sql");
/// The token of the fixture's `ops-reader` credential.
pub const READER_TOKEN: &str =
    "dbc_5e36d6dce0f20c1c8dc9439c4928ecee852e9d21059f5c297eb03991978c3d94";
/// The session ids of the fixture's sessions: alice's, then bob's.
pub const SESSION_IDS: [&str; 2] = [
    "01a249f9-815f-71db-a16f-705fdc4b9b0a",
    "01a249f9-817d-71d8-998b-4c6c82201816",
];

/// Makes `dir/deskbroker.sqlite3` a version-7 store holding [`DATA`].
pub fn previous_sqlite_store(dir: &Path) -> Result<(), StoreError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| StoreError::File(format!("cannot create {}: {e}", dir.display())))?;
    let conn = rusqlite::Connection::open(dir.join(crate::sqlite_backup::DATABASE_FILE))?;
    conn.execute_batch(&format!("BEGIN; {SQLITE_SCHEMA} {DATA} COMMIT;"))?;
    Ok(())
}

/// Makes the empty database of `url` a version-7 store holding [`DATA`].
pub async fn previous_postgres_store(url: &str) -> Result<(), StoreError> {
    crate::postgres::execute_for_tests(url, &format!("BEGIN; {POSTGRES_SCHEMA} {DATA} COMMIT;"))
        .await
}
