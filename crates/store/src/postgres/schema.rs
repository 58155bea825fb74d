//! The schema: numbered migrations, the same tables and version numbers as
//! the SQLite store's, applied at start in one transaction under the
//! migration lock and recorded in `schema_version`.

use tokio_postgres::Client;

use super::PostgresError;
use super::lock::{LOCK_CLASS, MIGRATION_LOCK};
use crate::StoreError;

/// Migrations, in order; `schema_version.version` is how many have been
/// applied. Numbered as the SQLite store's, so a version means the same
/// tables in both.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: pools, hosts, sessions. Unlike SQLite, sessions are indexed by
    // host: PostgreSQL's foreign-key cascade looks up the sessions of each
    // deleted host with a query of its own, and without this index every
    // such lookup would scan the whole pool's sessions (a pool of 10,000
    // hosts could not be deleted in reasonable time).
    r#"CREATE TABLE pools (
        name text COLLATE "C" PRIMARY KEY,
        config text NOT NULL,
        counters text NOT NULL
     );
     CREATE TABLE hosts (
        pool text COLLATE "C" NOT NULL REFERENCES pools(name) ON DELETE CASCADE,
        name text COLLATE "C" NOT NULL,
        seq bigint NOT NULL,
        record text NOT NULL,
        PRIMARY KEY (pool, name)
     );
     CREATE TABLE sessions (
        pool text COLLATE "C" NOT NULL,
        id text COLLATE "C" NOT NULL,
        host text COLLATE "C" NOT NULL,
        record text NOT NULL,
        PRIMARY KEY (pool, id),
        FOREIGN KEY (pool, host) REFERENCES hosts(pool, name) ON DELETE CASCADE
     );
     CREATE INDEX sessions_by_host ON sessions (pool, host);
     -- Counters of pools that must exist: a missing pool fails the
     -- statement (as a foreign key would), so that a batch's COMMIT can be
     -- sent with its statements, without waiting to check a row count.
     CREATE FUNCTION put_counters(pool_names text[], new_counters text[]) RETURNS void
     LANGUAGE plpgsql AS $$
     DECLARE
        updated bigint;
        missing text;
     BEGIN
        UPDATE pools AS p SET counters = u.counters
          FROM unnest(pool_names, new_counters) AS u(name, counters)
         WHERE p.name = u.name;
        GET DIAGNOSTICS updated = ROW_COUNT;
        IF updated < cardinality(pool_names) THEN
           SELECT string_agg(n, ', ') INTO missing
             FROM unnest(pool_names) AS n
            WHERE NOT EXISTS (SELECT 1 FROM pools WHERE name = n);
           RAISE EXCEPTION 'counters of a missing host pool'
             USING ERRCODE = 'foreign_key_violation',
                   DETAIL = format('Key (name)=(%s) is not present in table "pools".', missing);
        END IF;
     END $$;"#,
    // 2: registration tokens and host credentials (hashes only).
    r#"CREATE TABLE registration_tokens (
        pool text COLLATE "C" NOT NULL REFERENCES pools(name) ON DELETE CASCADE,
        hash text COLLATE "C" NOT NULL,
        expires_ms bigint NOT NULL,
        PRIMARY KEY (pool, hash)
     );
     CREATE TABLE host_credentials (
        pool text COLLATE "C" NOT NULL,
        host text COLLATE "C" NOT NULL,
        hash text NOT NULL,
        PRIMARY KEY (pool, host),
        FOREIGN KEY (pool, host) REFERENCES hosts(pool, name) ON DELETE CASCADE
     );"#,
    // 3: registration tokens are bound: how many new hosts each may
    // register, and how many it has. Tokens made before this bound get
    // one more host (they may have registered any number already).
    r#"ALTER TABLE registration_tokens ADD COLUMN max_hosts bigint NOT NULL DEFAULT 1;
     ALTER TABLE registration_tokens ADD COLUMN used_hosts bigint NOT NULL DEFAULT 0;"#,
    // 4: API credentials with roles (rule T1): the record is JSON, its
    // token only as a hash.
    r#"CREATE TABLE api_credentials (
        name text COLLATE "C" PRIMARY KEY,
        record text NOT NULL
     );"#,
    // 5: the audit log (rule T5). The id orders entries (an identity,
    // never reused); the record is JSON; time, actor and pool are columns
    // for the filters, time indexed for the retention.
    r#"CREATE TABLE audit_log (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        time_ms bigint NOT NULL,
        actor text COLLATE "C" NOT NULL,
        host_pool text COLLATE "C",
        record text NOT NULL
     );
     CREATE INDEX audit_log_by_time ON audit_log (time_ms);"#,
    // 6: power and scaling actions (rule A10). The id is a UUIDv7, so it
    // orders records by creation; a record is put again with its outcome.
    // No foreign key, as in SQLite: deleting a pool deletes its records
    // explicitly.
    r#"CREATE TABLE scaling_actions (
        id text COLLATE "C" PRIMARY KEY,
        pool text COLLATE "C" NOT NULL,
        time_ms bigint NOT NULL,
        outcome text COLLATE "C" NOT NULL,
        record text NOT NULL
     );
     CREATE INDEX scaling_actions_by_pool ON scaling_actions (pool, id);
     CREATE INDEX scaling_actions_by_time ON scaling_actions (time_ms);
     CREATE INDEX scaling_actions_pending ON scaling_actions (id) WHERE outcome = 'Pending';"#,
    // 7: scaling plans (rules A1–A7), JSON like pools, and each pool's plan
    // memory, which goes with its pool.
    r#"CREATE TABLE scaling_plans (
        name text COLLATE "C" PRIMARY KEY,
        record text NOT NULL
     );
     CREATE TABLE plan_memory (
        pool text COLLATE "C" PRIMARY KEY REFERENCES pools(name) ON DELETE CASCADE,
        record text NOT NULL
     );"#,
    // 8: the broker's own secrets (the signing keys of tickets and
    // redirection tokens), JSON by name.
    r#"CREATE TABLE broker_secrets (
        name text COLLATE "C" PRIMARY KEY,
        record text NOT NULL
     );"#,
    // 9: audit entries that stand for several requests (refusals folded
    // into one entry per credential, action, outcome and minute): the key
    // they are folded under (none for an ordinary entry) and how many.
    r#"ALTER TABLE audit_log ADD COLUMN fold_key text COLLATE "C";
     ALTER TABLE audit_log ADD COLUMN count bigint NOT NULL DEFAULT 1;
     CREATE UNIQUE INDEX audit_log_by_fold_key ON audit_log (fold_key);"#,
    // 10: published applications (rule F1), JSON by pool and alias, which
    // go with their pool; application groups, JSON by name. A group names
    // its pool in its record only: the broker deletes a pool's groups in
    // the batch that deletes the pool.
    r#"CREATE TABLE applications (
        pool text COLLATE "C" NOT NULL REFERENCES pools(name) ON DELETE CASCADE,
        alias text COLLATE "C" NOT NULL,
        record text NOT NULL,
        PRIMARY KEY (pool, alias)
     );
     CREATE TABLE application_groups (
        name text COLLATE "C" PRIMARY KEY,
        record text NOT NULL
     );"#,
    // 11: each user's workspace feed stamp (rule F4), JSON by user: which
    // set of resources the feed last listed and since when, so that its
    // `LastUpdated` is the same after a restart and on every replica.
    // `user` is a reserved word in PostgreSQL: the column is quoted.
    r#"CREATE TABLE feed_stamps (
        "user" text COLLATE "C" PRIMARY KEY,
        record text NOT NULL
     );"#,
];

/// Applies the migrations this database lacks, all in one transaction, under
/// an advisory lock so that two processes starting at once take turns.
pub(super) async fn migrate(client: &Client) -> Result<(), StoreError> {
    let run = async {
        client.batch_execute("BEGIN").await?;
        client
            .execute(
                "SELECT pg_advisory_xact_lock($1, $2)",
                &[&LOCK_CLASS, &MIGRATION_LOCK],
            )
            .await?;
        client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS schema_version (
                    one boolean PRIMARY KEY DEFAULT true CHECK (one),
                    version integer NOT NULL
                 );
                 INSERT INTO schema_version (version) VALUES (0) ON CONFLICT DO NOTHING",
            )
            .await?;
        let version: i32 = client
            .query_one("SELECT version FROM schema_version", &[])
            .await?
            .get(0);
        Ok::<_, tokio_postgres::Error>(version)
    };
    let version = match run.await {
        Ok(v) => v,
        Err(e) => {
            let _ = client.batch_execute("ROLLBACK").await;
            return Err(PostgresError::query("cannot read the schema version", e).into());
        }
    };
    let known = MIGRATIONS.len();
    if version < 0 || version as usize > known {
        let _ = client.batch_execute("ROLLBACK").await;
        return Err(StoreError::NewerSchema {
            found: version.into(),
            known,
        });
    }
    let apply = async {
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            client.batch_execute(sql).await?;
            client
                .execute(
                    "UPDATE schema_version SET version = $1",
                    &[&((i + 1) as i32)],
                )
                .await?;
            tracing::info!(version = i + 1, "applied store migration");
        }
        client.batch_execute("COMMIT").await
    };
    if let Err(e) = apply.await {
        let _ = client.batch_execute("ROLLBACK").await;
        return Err(PostgresError::query("cannot apply the store migrations", e).into());
    }
    Ok(())
}
