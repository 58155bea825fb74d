//! Every migration of both stores, tested from the schema version before
//! it with data in it: a store is built as that version left it (its
//! migrations, its version record), filled with the fixture data its
//! tables can hold (`fixtures::DATA`, written by a version-7 broker),
//! opened with this code, and must hold all of it and take new writes.
//! Also: the migrations still make the previous version's schema exactly
//! as it shipped (a migration edited in place would not run on stores that
//! already had it).

use std::sync::Arc;

use crate::fixtures::{DATA, POSTGRES_SCHEMA, PREVIOUS_VERSION, SQLITE_SCHEMA};
use crate::postgres::schema::MIGRATIONS as POSTGRES_MIGRATIONS;
use crate::sqlite::MIGRATIONS as SQLITE_MIGRATIONS;
use crate::{AuditQuery, Mutation, Snapshot, Store};

/// The fixture's statements that a store of `version` can take: those
/// into its tables, and registration tokens without the columns that
/// migration 3 added.
fn data_for(version: usize, tables: &[String]) -> String {
    let mut out = String::new();
    for line in DATA.lines().filter(|l| l.starts_with("INSERT INTO ")) {
        let table = line["INSERT INTO ".len()..]
            .split(' ')
            .next()
            .unwrap_or_default();
        if !tables.iter().any(|t| t == table) {
            continue;
        }
        if table == "registration_tokens" && version < 3 {
            // (pool, hash, expires_ms, max_hosts, used_hosts): no value
            // holds a comma.
            let values = &line[line.find("VALUES (").expect("values") + 8..line.len() - 2];
            let first3: Vec<&str> = values.split(", ").take(3).collect();
            out.push_str(&format!(
                "INSERT INTO registration_tokens (pool, hash, expires_ms) VALUES ({});\n",
                first3.join(", ")
            ));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The tables a store of `version` has (SQLite's names; PostgreSQL's are
/// the same).
fn tables_at(version: usize) -> Vec<String> {
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    for sql in &SQLITE_MIGRATIONS[..version] {
        conn.execute_batch(sql).unwrap();
    }
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Checks that `store`, migrated from `version`, holds what the fixture
/// put in it, and takes a new session, signing keys, a published
/// application with its group and a user's feed stamp (the newest
/// migrations' tables).
async fn check_migrated(store: &dyn Store, version: usize) {
    let what = format!("from version {version}");
    let snap: Snapshot = store.load().await.expect("load");
    assert_eq!(snap.pools.len(), 1, "{what}");
    let pool = &snap.pools[0];
    assert_eq!(pool.config.name, "p", "{what}");
    let hosts: Vec<&str> = pool.hosts.iter().map(|h| h.spec.name.as_str()).collect();
    assert_eq!(hosts, ["h1", "h2", "h3"], "{what}");
    // Rule AD4's fields live in the records, which a store written before
    // them holds without: their defaults come back, no DNS name and files
    // that name the pool.
    assert!(
        pool.hosts.iter().all(|h| h.spec.dns_name.is_none()),
        "{what}"
    );
    assert_eq!(
        pool.config.connection_target,
        placement::ConnectionTarget::Pool,
        "{what}"
    );
    let users: Vec<&str> = pool.sessions.iter().map(|s| s.user.as_str()).collect();
    assert_eq!(users, ["alice@contoso.com", "bob@contoso.com"], "{what}");
    if version >= 2 {
        assert_eq!(pool.registration_tokens.len(), 2, "{what}");
        assert_eq!(pool.host_credentials.len(), 1, "{what}");
        if version < 3 {
            // Migration 3: tokens made before it get one more host.
            for t in &pool.registration_tokens {
                assert_eq!((t.max_hosts, t.used_hosts), (1, 0), "{what}");
            }
        } else {
            let mut max: Vec<u32> = pool
                .registration_tokens
                .iter()
                .map(|t| t.max_hosts)
                .collect();
            max.sort();
            assert_eq!(max, [1, 5], "{what}");
        }
    }
    let credentials: Vec<&str> = snap.credentials.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        credentials,
        if version >= 4 {
            vec!["ops-reader"]
        } else {
            vec![]
        },
        "{what}"
    );
    let audit = store
        .audit(AuditQuery {
            limit: 100,
            ..AuditQuery::default()
        })
        .await
        .expect("audit");
    assert_eq!(audit.len(), if version >= 5 { 13 } else { 0 }, "{what}");
    let plans: Vec<&str> = snap.scaling_plans.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        plans,
        if version >= 7 {
            vec!["weekdays"]
        } else {
            vec![]
        },
        "{what}"
    );
    assert!(
        snap.application_groups.is_empty() && pool.applications.is_empty(),
        "{what}: no store before version 10 had applications"
    );
    assert!(
        snap.feed_stamps.is_empty(),
        "{what}: no store before version 11 had feed stamps"
    );
    // And it serves: a new session on h1, the broker's signing keys, an
    // application with its group, and a user's feed stamp (the newest
    // migrations' tables).
    let mut session = pool.sessions[0].clone();
    session.id = "new-session".into();
    session.user = "carol@contoso.com".into();
    let keys = crate::SigningKeys {
        keys: vec![crate::SigningKey {
            secret: "cd".repeat(32),
            created_ms: 1_000,
            retired_ms: None,
        }],
    };
    store
        .apply(Arc::from(vec![
            Mutation::PutSession {
                pool: "p".into(),
                session,
            },
            Mutation::PutSigningKeys { keys: keys.clone() },
            Mutation::PutApplication {
                pool: "p".into(),
                alias: "word".into(),
                application: crate::conformance::application("Word"),
            },
            Mutation::PutApplicationGroup {
                name: "p-apps".into(),
                group: crate::conformance::application_group("p", &["word"]),
            },
            Mutation::PutFeedStamp {
                user: "carol@contoso.com".into(),
                stamp: crate::conformance::feed_stamp(1),
            },
        ]))
        .await
        .expect("a write after the migration");
    let snap = store.load().await.expect("load again");
    assert_eq!(snap.pools[0].sessions.len(), 3, "{what}");
    assert_eq!(snap.signing_keys, Some(keys), "{what}");
    assert_eq!(
        snap.pools[0].applications,
        [("word".to_string(), crate::conformance::application("Word"))],
        "{what}"
    );
    assert_eq!(
        snap.application_groups,
        [(
            "p-apps".to_string(),
            crate::conformance::application_group("p", &["word"])
        )],
        "{what}"
    );
    assert_eq!(
        snap.feed_stamps,
        [(
            "carol@contoso.com".to_string(),
            crate::conformance::feed_stamp(1)
        )],
        "{what}"
    );
}

#[tokio::test]
async fn every_sqlite_migration_keeps_the_data_of_the_version_before() {
    for version in 1..SQLITE_MIGRATIONS.len() {
        let dir = tempfile::tempdir().unwrap();
        {
            let conn =
                rusqlite::Connection::open(dir.path().join(crate::sqlite::DATABASE_FILE)).unwrap();
            for sql in &SQLITE_MIGRATIONS[..version] {
                conn.execute_batch(sql).unwrap();
            }
            conn.pragma_update(None, "user_version", version as i64)
                .unwrap();
            conn.execute_batch(&data_for(version, &tables_at(version)))
                .unwrap();
        }
        let store = crate::SqliteStore::open(dir.path()).expect("open");
        check_migrated(&store, version).await;
        let conn =
            rusqlite::Connection::open(dir.path().join(crate::sqlite::DATABASE_FILE)).unwrap();
        let now: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(
            now as usize,
            SQLITE_MIGRATIONS.len(),
            "from version {version}"
        );
    }
}

#[tokio::test]
async fn every_postgres_migration_keeps_the_data_of_the_version_before() {
    let server = crate::postgres::test_server_url();
    for version in 1..POSTGRES_MIGRATIONS.len() {
        let db =
            crate::postgres::ScratchDatabase::create(&server, &format!("migrate_from_{version}"))
                .await
                .expect("a scratch database (is the tests' PostgreSQL server up?)");
        let mut sql = String::from("BEGIN;\n");
        for m in &POSTGRES_MIGRATIONS[..version] {
            sql.push_str(m);
            sql.push_str(";\n");
        }
        sql.push_str(&format!(
            "CREATE TABLE schema_version (one boolean PRIMARY KEY DEFAULT true CHECK (one), \
             version integer NOT NULL);
             INSERT INTO schema_version (version) VALUES ({version});\n{}COMMIT;",
            data_for(version, &tables_at(version))
        ));
        crate::postgres::execute_for_tests(db.url(), &sql)
            .await
            .expect("build the old store");
        let store = crate::PostgresStore::connect(db.url())
            .await
            .expect("connect");
        check_migrated(&store, version).await;
    }
}

/// The previous version's fixture schemas are what the migrations make.
#[test]
fn the_migrations_still_make_the_previous_versions_schema() {
    let schema = |conn: &rusqlite::Connection| -> Vec<String> {
        let mut stmt = conn
            .prepare("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name")
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let migrated = rusqlite::Connection::open_in_memory().unwrap();
    for sql in &SQLITE_MIGRATIONS[..PREVIOUS_VERSION] {
        migrated.execute_batch(sql).unwrap();
    }
    let fixture = rusqlite::Connection::open_in_memory().unwrap();
    fixture.execute_batch(SQLITE_SCHEMA).unwrap();
    assert_eq!(schema(&migrated), schema(&fixture), "SQLite");

    // PostgreSQL's are compared as text, blanks aside: the fixture is the
    // migrations as they shipped, each after a `-- migration N` line.
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let shipped = POSTGRES_SCHEMA
        .split("-- the version record")
        .next()
        .unwrap()
        .split("-- migration ")
        .skip(1)
        .map(|m| words(m.split_once('\n').map_or("", |(_, sql)| sql)))
        .collect::<Vec<_>>();
    let now: Vec<String> = POSTGRES_MIGRATIONS[..PREVIOUS_VERSION]
        .iter()
        .map(|m| words(m))
        .collect();
    assert_eq!(shipped, now, "PostgreSQL");
}
