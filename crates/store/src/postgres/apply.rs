//! Applying a batch: mutations become multi-row statements over `unnest`
//! arrays (one per run of one kind), prepared once per connection, and the
//! whole transaction is sent pipelined, in one round trip.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row, Statement};

use super::{Connection, PostgresError};
use crate::{Flush, Mutation, StoreError};

/// What one mutation becomes in a multi-row statement: up to three key
/// columns borrowed from the batch, up to two JSON texts and three
/// integers; [`Kind::columns`] says which a statement takes.
struct Values<'a> {
    keys: [&'a str; 3],
    texts: [String; 2],
    ints: [i64; 3],
}

/// A column of a statement's parameters (each parameter is an array).
#[derive(Clone, Copy)]
enum Column {
    Key(usize),
    Text(usize),
    Int(usize),
    /// [`crate::AUDIT_PRUNE_CHUNK_ROWS`], one value for the statement.
    Chunk,
}

/// The kinds of statement a batch is made of, one per kind of mutation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    PutPool,
    PutCounters,
    DeletePool,
    PutHost,
    DeleteHost,
    PutSession,
    DeleteSession,
    PutToken,
    DeleteTokens,
    DeleteToken,
    PutCredential,
    PutApiCredential,
    DeleteApiCredential,
    AppendAudit,
    PruneAudit,
    PutScalingAction,
    PutScalingPlan,
    DeleteScalingPlan,
    PutPlanMemory,
    PutSigningKeys,
    FoldAudit,
    PutApplication,
    DeleteApplication,
    PutApplicationGroup,
    DeleteApplicationGroup,
    PutFeedStamp,
    DeleteFeedStamp,
}

impl Kind {
    const ALL: [Kind; 27] = [
        Kind::PutPool,
        Kind::PutCounters,
        Kind::DeletePool,
        Kind::PutHost,
        Kind::DeleteHost,
        Kind::PutSession,
        Kind::DeleteSession,
        Kind::PutToken,
        Kind::DeleteTokens,
        Kind::DeleteToken,
        Kind::PutCredential,
        Kind::PutApiCredential,
        Kind::DeleteApiCredential,
        Kind::AppendAudit,
        Kind::PruneAudit,
        Kind::PutScalingAction,
        Kind::PutScalingPlan,
        Kind::DeleteScalingPlan,
        Kind::PutPlanMemory,
        Kind::PutSigningKeys,
        Kind::FoldAudit,
        Kind::PutApplication,
        Kind::DeleteApplication,
        Kind::PutApplicationGroup,
        Kind::DeleteApplicationGroup,
        Kind::PutFeedStamp,
        Kind::DeleteFeedStamp,
    ];

    fn of(m: &Mutation) -> Kind {
        match m {
            Mutation::PutPool { .. } => Kind::PutPool,
            Mutation::PutCounters { .. } => Kind::PutCounters,
            Mutation::DeletePool { .. } => Kind::DeletePool,
            Mutation::PutHost { .. } => Kind::PutHost,
            Mutation::DeleteHost { .. } => Kind::DeleteHost,
            Mutation::PutSession { .. } => Kind::PutSession,
            Mutation::DeleteSession { .. } => Kind::DeleteSession,
            Mutation::PutRegistrationToken { .. } => Kind::PutToken,
            Mutation::DeleteRegistrationTokens { .. } => Kind::DeleteTokens,
            Mutation::DeleteRegistrationToken { .. } => Kind::DeleteToken,
            Mutation::PutHostCredential { .. } => Kind::PutCredential,
            Mutation::PutApiCredential { .. } => Kind::PutApiCredential,
            Mutation::DeleteApiCredential { .. } => Kind::DeleteApiCredential,
            Mutation::AppendAudit { .. } => Kind::AppendAudit,
            Mutation::FoldAudit { .. } => Kind::FoldAudit,
            Mutation::PruneAudit { .. } => Kind::PruneAudit,
            Mutation::PutScalingAction { .. } => Kind::PutScalingAction,
            Mutation::PutScalingPlan { .. } => Kind::PutScalingPlan,
            Mutation::DeleteScalingPlan { .. } => Kind::DeleteScalingPlan,
            Mutation::PutPlanMemory { .. } => Kind::PutPlanMemory,
            Mutation::PutSigningKeys { .. } => Kind::PutSigningKeys,
            Mutation::PutApplication { .. } => Kind::PutApplication,
            Mutation::DeleteApplication { .. } => Kind::DeleteApplication,
            Mutation::PutApplicationGroup { .. } => Kind::PutApplicationGroup,
            Mutation::DeleteApplicationGroup { .. } => Kind::DeleteApplicationGroup,
            Mutation::PutFeedStamp { .. } => Kind::PutFeedStamp,
            Mutation::DeleteFeedStamp { .. } => Kind::DeleteFeedStamp,
        }
    }

    /// The statement: every parameter is an array of one column, so one
    /// statement writes a whole run of mutations.
    fn sql(self) -> &'static str {
        match self {
            Kind::PutPool => {
                "INSERT INTO pools (name, config, counters)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
                 ON CONFLICT (name) DO UPDATE SET config = excluded.config,
                                                  counters = excluded.counters"
            }
            Kind::PutCounters => "SELECT put_counters($1::text[], $2::text[])",
            // Hosts, sessions, tokens, credentials, plan memory and
            // published applications go with it (cascades; the sessions
            // through their index by host).
            // Its power and scaling actions (no foreign key) explicitly.
            Kind::DeletePool => {
                "WITH actions AS (DELETE FROM scaling_actions WHERE pool = ANY($1::text[]))
                 DELETE FROM pools WHERE name = ANY($1::text[])"
            }
            Kind::PutHost => {
                "INSERT INTO hosts (pool, name, seq, record)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::text[])
                 ON CONFLICT (pool, name) DO UPDATE SET seq = excluded.seq,
                                                        record = excluded.record"
            }
            Kind::DeleteHost => {
                "DELETE FROM hosts AS h USING unnest($1::text[], $2::text[]) AS d(pool, name)
                 WHERE h.pool = d.pool AND h.name = d.name"
            }
            Kind::PutSession => {
                "INSERT INTO sessions (pool, id, host, record)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
                 ON CONFLICT (pool, id) DO UPDATE SET host = excluded.host,
                                                      record = excluded.record"
            }
            Kind::DeleteSession => {
                "DELETE FROM sessions AS s USING unnest($1::text[], $2::text[]) AS d(pool, id)
                 WHERE s.pool = d.pool AND s.id = d.id"
            }
            Kind::PutToken => {
                "INSERT INTO registration_tokens (pool, hash, expires_ms, max_hosts, used_hosts)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[], $5::int8[])
                 ON CONFLICT (pool, hash) DO UPDATE SET expires_ms = excluded.expires_ms,
                                                        max_hosts = excluded.max_hosts,
                                                        used_hosts = excluded.used_hosts"
            }
            Kind::DeleteTokens => "DELETE FROM registration_tokens WHERE pool = ANY($1::text[])",
            Kind::DeleteToken => {
                "DELETE FROM registration_tokens AS t USING unnest($1::text[], $2::text[]) AS d(pool, hash)
                 WHERE t.pool = d.pool AND t.hash = d.hash"
            }
            Kind::PutCredential => {
                "INSERT INTO host_credentials (pool, host, hash)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
                 ON CONFLICT (pool, host) DO UPDATE SET hash = excluded.hash"
            }
            Kind::PutApiCredential => {
                "INSERT INTO api_credentials (name, record)
                 SELECT * FROM unnest($1::text[], $2::text[])
                 ON CONFLICT (name) DO UPDATE SET record = excluded.record"
            }
            Kind::DeleteApiCredential => "DELETE FROM api_credentials WHERE name = ANY($1::text[])",
            // `WITH ORDINALITY` keeps the batch's order in the ids. An
            // empty pool name stands for none (no pool has that name).
            Kind::AppendAudit => {
                "INSERT INTO audit_log (time_ms, actor, host_pool, record)
                 SELECT t, a, NULLIF(p, ''), r
                   FROM unnest($1::text[], $2::text[], $3::int8[], $4::text[])
                        WITH ORDINALITY AS u(a, p, t, r, n)
                  ORDER BY n"
            }
            // A key at most once a statement (`keyed`). Answers the bytes
            // of the entries it appended (a count of 1: not folded into
            // one already there).
            Kind::FoldAudit => {
                "WITH put AS (
                   INSERT INTO audit_log (time_ms, actor, host_pool, record, fold_key)
                   SELECT t, a, NULLIF(p, ''), r, k
                     FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::text[])
                          WITH ORDINALITY AS u(k, a, p, t, r, n)
                    ORDER BY n
                   ON CONFLICT (fold_key) DO UPDATE SET count = audit_log.count + 1
                   RETURNING count, octet_length(record) AS bytes)
                 SELECT coalesce(sum(bytes) FILTER (WHERE count = 1), 0)::int8 FROM put"
            }
            // Both bounds, each at most AUDIT_PRUNE_CHUNK_ROWS rows a time
            // ($3); a run of prunes keeps the strictest.
            // The records of power and scaling actions take the same bounds.
            // Answers the bytes of the entries removed, and how many of
            // them the age bound would have kept (the byte bound is a
            // statement of its own, `Connection::bound_audit_bytes`).
            Kind::PruneAudit => {
                "WITH bound AS (SELECT max(t) AS cutoff, min(k) AS keep
                                  FROM unnest($1::int8[], $2::int8[]) AS u(t, k)),
                      actions AS (DELETE FROM scaling_actions WHERE id IN (
                        (SELECT id FROM scaling_actions
                          WHERE time_ms < (SELECT cutoff FROM bound)
                          ORDER BY time_ms LIMIT $3::int8)
                        UNION ALL
                        (SELECT id FROM scaling_actions ORDER BY id DESC
                          OFFSET (SELECT keep FROM bound) LIMIT $3::int8))),
                      gone AS (DELETE FROM audit_log WHERE id IN (
                        (SELECT id FROM audit_log
                          WHERE time_ms < (SELECT cutoff FROM bound)
                          ORDER BY time_ms LIMIT $3::int8)
                        UNION ALL
                        (SELECT id FROM audit_log
                          WHERE id <= (SELECT max(id) FROM audit_log) - (SELECT keep FROM bound)
                          ORDER BY id LIMIT $3::int8))
                        RETURNING octet_length(record) AS n, time_ms)
                 SELECT coalesce(sum(n), 0)::int8,
                        (count(*) FILTER (WHERE time_ms >= (SELECT cutoff FROM bound)))::int8
                   FROM gone"
            }
            Kind::PutScalingAction => {
                "INSERT INTO scaling_actions (pool, id, outcome, time_ms, record)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::text[])
                 ON CONFLICT (id) DO UPDATE SET outcome = excluded.outcome,
                                                record = excluded.record"
            }
            Kind::PutScalingPlan => {
                "INSERT INTO scaling_plans (name, record)
                 SELECT * FROM unnest($1::text[], $2::text[])
                 ON CONFLICT (name) DO UPDATE SET record = excluded.record"
            }
            Kind::DeleteScalingPlan => "DELETE FROM scaling_plans WHERE name = ANY($1::text[])",
            Kind::PutPlanMemory => {
                "INSERT INTO plan_memory (pool, record)
                 SELECT * FROM unnest($1::text[], $2::text[])
                 ON CONFLICT (pool) DO UPDATE SET record = excluded.record"
            }
            Kind::PutSigningKeys => {
                "INSERT INTO broker_secrets (name, record)
                 SELECT * FROM unnest($1::text[], $2::text[])
                 ON CONFLICT (name) DO UPDATE SET record = excluded.record"
            }
            Kind::PutApplication => {
                "INSERT INTO applications (pool, alias, record)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
                 ON CONFLICT (pool, alias) DO UPDATE SET record = excluded.record"
            }
            Kind::DeleteApplication => {
                "DELETE FROM applications AS a USING unnest($1::text[], $2::text[]) AS d(pool, alias)
                 WHERE a.pool = d.pool AND a.alias = d.alias"
            }
            Kind::PutApplicationGroup => {
                "INSERT INTO application_groups (name, record)
                 SELECT * FROM unnest($1::text[], $2::text[])
                 ON CONFLICT (name) DO UPDATE SET record = excluded.record"
            }
            Kind::DeleteApplicationGroup => {
                "DELETE FROM application_groups WHERE name = ANY($1::text[])"
            }
            Kind::PutFeedStamp => {
                r#"INSERT INTO feed_stamps ("user", record)
                 SELECT * FROM unnest($1::text[], $2::text[])
                 ON CONFLICT ("user") DO UPDATE SET record = excluded.record"#
            }
            Kind::DeleteFeedStamp => r#"DELETE FROM feed_stamps WHERE "user" = ANY($1::text[])"#,
        }
    }

    /// The statement's parameters, in order.
    fn columns(self) -> &'static [Column] {
        use Column::{Chunk, Int, Key, Text};
        match self {
            Kind::PutPool => &[Key(0), Text(0), Text(1)],
            Kind::PutCounters
            | Kind::PutApiCredential
            | Kind::PutScalingPlan
            | Kind::PutPlanMemory
            | Kind::PutSigningKeys
            | Kind::PutApplicationGroup
            | Kind::PutFeedStamp => &[Key(0), Text(0)],
            Kind::DeletePool
            | Kind::DeleteTokens
            | Kind::DeleteApiCredential
            | Kind::DeleteScalingPlan
            | Kind::DeleteApplicationGroup
            | Kind::DeleteFeedStamp => &[Key(0)],
            Kind::PutHost => &[Key(0), Key(1), Int(0), Text(0)],
            Kind::DeleteHost
            | Kind::DeleteSession
            | Kind::DeleteToken
            | Kind::DeleteApplication => &[Key(0), Key(1)],
            Kind::PutApplication => &[Key(0), Key(1), Text(0)],
            Kind::PutSession => &[Key(0), Key(1), Key(2), Text(0)],
            Kind::PutToken => &[Key(0), Key(1), Int(0), Int(1), Int(2)],
            Kind::PutCredential => &[Key(0), Key(1), Key(2)],
            Kind::AppendAudit => &[Key(0), Key(1), Int(0), Text(0)],
            Kind::FoldAudit => &[Key(0), Key(1), Key(2), Int(0), Text(0)],
            Kind::PruneAudit => &[Int(0), Int(1), Chunk],
            Kind::PutScalingAction => &[Key(0), Key(1), Key(2), Int(0), Text(0)],
        }
    }

    /// Whether the statement is an upsert keyed by the first two keys.
    fn keyed(self) -> bool {
        matches!(
            self,
            Kind::PutPool
                | Kind::PutCounters
                | Kind::PutHost
                | Kind::PutSession
                | Kind::PutToken
                | Kind::PutCredential
                | Kind::PutApiCredential
                | Kind::PutScalingAction
                | Kind::PutScalingPlan
                | Kind::PutPlanMemory
                | Kind::PutSigningKeys
                | Kind::FoldAudit
                | Kind::PutApplication
                | Kind::PutApplicationGroup
                | Kind::PutFeedStamp
        )
    }

    /// What a foreign-key failure of this statement means is missing.
    fn parent(self) -> &'static str {
        match self {
            Kind::PutSession | Kind::PutCredential => "session host",
            _ => "host pool",
        }
    }
}

fn values(m: &Mutation) -> Values<'_> {
    fn v(keys: [&str; 3], texts: [String; 2], int: i64) -> Values<'_> {
        Values {
            keys,
            texts,
            ints: [int, 0, 0],
        }
    }
    let none = String::new;
    match m {
        Mutation::PutPool { config, counters } => v(
            [&config.name, "", ""],
            [to_json(config), to_json(counters)],
            0,
        ),
        Mutation::PutCounters { pool, counters } => {
            v([pool, "", ""], [to_json(counters), none()], 0)
        }
        Mutation::PutApiCredential { credential } => {
            v([&credential.name, "", ""], [to_json(credential), none()], 0)
        }
        Mutation::DeletePool { pool }
        | Mutation::DeleteRegistrationTokens { pool }
        | Mutation::DeleteApiCredential { name: pool }
        | Mutation::DeleteScalingPlan { name: pool }
        | Mutation::DeleteApplicationGroup { name: pool }
        | Mutation::DeleteFeedStamp { user: pool } => v([pool, "", ""], [none(), none()], 0),
        Mutation::PutApplication {
            pool,
            alias,
            application,
        } => v([pool, alias, ""], [to_json(application), none()], 0),
        Mutation::DeleteApplication { pool, alias } => v([pool, alias, ""], [none(), none()], 0),
        Mutation::PutApplicationGroup { name, group } => {
            v([name, "", ""], [to_json(group), none()], 0)
        }
        Mutation::PutFeedStamp { user, stamp } => v([user, "", ""], [to_json(stamp), none()], 0),
        Mutation::PutScalingPlan { name, plan } => v([name, "", ""], [to_json(plan), none()], 0),
        Mutation::PutPlanMemory { pool, memory } => v([pool, "", ""], [to_json(memory), none()], 0),
        Mutation::PutSigningKeys { keys } => v(
            [crate::SIGNING_KEYS_NAME, "", ""],
            [to_json(keys), none()],
            0,
        ),
        Mutation::PutHost { pool, host } => v(
            [pool, &host.spec.name, ""],
            [to_json(host), none()],
            host.seq as i64,
        ),
        Mutation::DeleteHost { pool, host } => v([pool, host, ""], [none(), none()], 0),
        Mutation::PutSession { pool, session } => v(
            [pool, &session.id, &session.host],
            [to_json(session), none()],
            0,
        ),
        Mutation::DeleteSession { pool, id } => v([pool, id, ""], [none(), none()], 0),
        Mutation::DeleteRegistrationToken { pool, hash } => {
            v([pool, hash, ""], [none(), none()], 0)
        }
        Mutation::PutRegistrationToken { pool, token } => Values {
            keys: [pool, &token.hash, ""],
            texts: [none(), none()],
            ints: [
                token.expires_ms,
                i64::from(token.max_hosts),
                i64::from(token.used_hosts),
            ],
        },
        Mutation::PutHostCredential { pool, credential } => v(
            [pool, &credential.host, &credential.hash],
            [none(), none()],
            0,
        ),
        Mutation::AppendAudit { entry } => v(
            [&entry.actor, entry.host_pool.as_deref().unwrap_or(""), ""],
            [to_json(entry), none()],
            entry.time_ms,
        ),
        Mutation::FoldAudit { key, entry } => v(
            [key, &entry.actor, entry.host_pool.as_deref().unwrap_or("")],
            [to_json(entry), none()],
            entry.time_ms,
        ),
        Mutation::PutScalingAction { action } => v(
            [
                &action.pool,
                &action.id,
                crate::sqlite::outcome_text(action.outcome),
            ],
            [to_json(action), none()],
            action.time_ms,
        ),
        Mutation::PruneAudit {
            older_than_ms,
            max_rows,
            max_bytes: _,
        } => Values {
            keys: ["", "", ""],
            texts: [none(), none()],
            ints: [
                *older_than_ms,
                i64::try_from(*max_rows).unwrap_or(i64::MAX),
                0,
            ],
        },
    }
}

/// One statement of a batch: a run of consecutive mutations of one kind.
struct Step<'a> {
    kind: Kind,
    rows: Vec<Values<'a>>,
    /// Keys written so far, for keyed kinds.
    keys: HashSet<(&'a str, &'a str)>,
}

impl<'a> Step<'a> {
    fn new(kind: Kind) -> Step<'a> {
        Step {
            kind,
            rows: Vec::new(),
            keys: HashSet::new(),
        }
    }

    /// Adds `v` to this statement, or gives it back when it cannot join:
    /// another kind, or a key this upsert already writes (`ON CONFLICT DO
    /// UPDATE` may not touch a row twice, and keeping only the last would
    /// skip the checks of the first, which SQLite makes one at a time).
    fn join(&mut self, kind: Kind, v: Values<'a>) -> Option<Values<'a>> {
        if kind != self.kind || (kind.keyed() && !self.keys.insert((v.keys[0], v.keys[1]))) {
            return Some(v);
        }
        self.rows.push(v);
        None
    }

    /// The statement's parameters, one array a column.
    fn params(&self) -> Vec<Box<dyn ToSql + Sync + Send + '_>> {
        self.kind
            .columns()
            .iter()
            .map(|c| -> Box<dyn ToSql + Sync + Send + '_> {
                match *c {
                    Column::Key(i) => {
                        Box::new(self.rows.iter().map(|r| r.keys[i]).collect::<Vec<_>>())
                    }
                    Column::Text(i) => Box::new(
                        self.rows
                            .iter()
                            .map(|r| r.texts[i].as_str())
                            .collect::<Vec<_>>(),
                    ),
                    Column::Int(i) => {
                        Box::new(self.rows.iter().map(|r| r.ints[i]).collect::<Vec<_>>())
                    }
                    Column::Chunk => Box::new(crate::AUDIT_PRUNE_CHUNK_ROWS as i64),
                }
            })
            .collect()
    }
}

/// Turns a batch into statements, in order: consecutive mutations of one
/// kind share a statement (until a key repeats), and only the last counters
/// of each pool are written (exactly as the SQLite store coalesces them).
fn plan(batch: &[Mutation]) -> Vec<Step<'_>> {
    let mut last_counters = HashMap::new();
    for (i, m) in batch.iter().enumerate() {
        if let Mutation::PutCounters { pool, .. } = m {
            last_counters.insert(pool.as_str(), i);
        }
    }
    let mut steps: Vec<Step<'_>> = Vec::new();
    for (i, m) in batch.iter().enumerate() {
        if let Mutation::PutCounters { pool, .. } = m
            && last_counters.get(pool.as_str()) != Some(&i)
        {
            continue;
        }
        let kind = Kind::of(m);
        let v = values(m);
        let left = match steps.last_mut() {
            Some(step) => step.join(kind, v),
            None => Some(v),
        };
        if let Some(v) = left {
            let mut step = Step::new(kind);
            step.join(kind, v);
            steps.push(step);
        }
    }
    steps
}

/// Every statement a batch can use, prepared once per connection.
pub(super) struct Statements {
    kinds: Vec<Statement>,
    /// A replica leader's check of its epoch (`deskbroker_fence`); only
    /// prepared by a won campaign, whose session created the function.
    fence: Statement,
}

impl Statements {
    pub(super) async fn prepare(client: &Client, leader: bool) -> Result<Statements, StoreError> {
        let failed = |e| PostgresError::query("cannot prepare the store's statements", e);
        let mut kinds = Vec::with_capacity(Kind::ALL.len());
        for kind in Kind::ALL {
            kinds.push(client.prepare(kind.sql()).await.map_err(failed)?);
        }
        let fence = match leader {
            true => "SELECT deskbroker_fence($1)",
            false => "SELECT $1::int8",
        };
        let fence = client.prepare(fence).await.map_err(failed)?;
        Ok(Statements { kinds, fence })
    }

    fn get(&self, kind: Kind) -> &Statement {
        // `ALL` lists every kind once, in declaration order.
        &self.kinds[kind as usize]
    }
}

type Answer = Result<Vec<Row>, tokio_postgres::Error>;
type Pending<'a> = Pin<Box<dyn Future<Output = Answer> + Send + 'a>>;

/// Runs `requests` pipelined: each is polled once, in order, which sends it
/// (tokio-postgres sends a request on its first poll), so the server gets
/// them all in batch order without waiting for any answer; then the
/// answers are awaited in the same order.
async fn pipeline(mut requests: Vec<Pending<'_>>) -> Vec<Answer> {
    let mut early: Vec<Option<Answer>> = Vec::with_capacity(requests.len());
    std::future::poll_fn(|cx| {
        for r in &mut requests {
            early.push(match r.as_mut().poll(cx) {
                Poll::Ready(a) => Some(a),
                Poll::Pending => None,
            });
        }
        Poll::Ready(())
    })
    .await;
    let mut answers = Vec::with_capacity(requests.len());
    for (r, a) in requests.into_iter().zip(early) {
        answers.push(match a {
            Some(a) => a,
            None => r.await,
        });
    }
    answers
}

impl Connection {
    /// One round trip: `BEGIN`, every statement and `COMMIT` are sent
    /// together. If a statement fails, the server aborts the transaction,
    /// the statements after it fail too, and `COMMIT` rolls back.
    /// With [`Flush::Soon`], the transaction commits without waiting for
    /// the server's WAL flush (`synchronous_commit` off for it alone): the
    /// server's WAL writer flushes it within three `wal_writer_delay`s
    /// (600 ms by default), and only a crash of the server can lose it.
    pub(super) async fn apply(
        &mut self,
        batch: &[Mutation],
        flush: Flush,
    ) -> Result<(), StoreError> {
        self.recover().await?;
        let steps = plan(batch);
        if steps.is_empty() {
            // Nothing to write; everything before is already committed.
            return Ok(());
        }
        // Unknown unless this batch commits.
        let mut tally = self.audit_bytes.take();
        if let Some(total) = &mut tally {
            for step in steps.iter().filter(|s| s.kind == Kind::AppendAudit) {
                *total += step
                    .rows
                    .iter()
                    .map(|r| r.texts[0].len() as i64)
                    .sum::<i64>();
            }
        }
        self.in_transaction = true;
        let client = &self.client;
        let statements = &self.statements;
        let params: Vec<_> = steps.iter().map(Step::params).collect();
        let epoch = self.epoch;
        let mut requests: Vec<Pending<'_>> = Vec::with_capacity(steps.len() + 2);
        let begin = match flush {
            Flush::Now => "BEGIN",
            Flush::Soon => "BEGIN; SET LOCAL synchronous_commit TO OFF",
        };
        requests.push(Box::pin(async move {
            client.batch_execute(begin).await.map(|()| Vec::new())
        }));
        if let Some(epoch) = &epoch {
            requests.push(Box::pin(async move {
                client.query(&statements.fence, &[epoch]).await
            }));
        }
        for (step, params) in steps.iter().zip(&params) {
            requests.push(Box::pin(async move {
                let refs: Vec<&(dyn ToSql + Sync)> =
                    params.iter().map(|p| &**p as &(dyn ToSql + Sync)).collect();
                client.query(statements.get(step.kind), &refs).await
            }));
        }
        requests.push(Box::pin(async move {
            client.batch_execute("COMMIT").await.map(|()| Vec::new())
        }));
        let mut answers = pipeline(requests).await;
        let Some(committed) = answers.pop() else {
            return Err(StoreError::Task("a batch lost its answers".into()));
        };
        let mut answers = answers.into_iter();
        let begun = answers.next().unwrap_or_else(|| Ok(Vec::new()));
        // Whatever failed, the transaction is over once COMMIT answered.
        self.in_transaction = committed.is_err();
        begun.map_err(|e| PostgresError::query("cannot begin a transaction", e))?;
        if epoch.is_some() {
            let fenced = answers.next().unwrap_or_else(|| Ok(Vec::new()));
            fenced
                .map_err(|e| PostgresError::query("the leadership check refused the batch", e))?;
        }
        let answers: Vec<Answer> = answers.collect();
        // What the audit statements answered: the bytes they removed and
        // added, and the entries younger than the retention removed.
        let (mut removed, mut added, mut young) = (0i64, 0i64, 0i64);
        for (step, answer) in steps.iter().zip(&answers) {
            match (step.kind, answer) {
                (Kind::PruneAudit, Ok(rows)) => {
                    removed += rows.iter().map(|r| r.get::<_, i64>(0)).sum::<i64>();
                    young += rows.iter().map(|r| r.get::<_, i64>(1)).sum::<i64>();
                }
                (Kind::FoldAudit, Ok(rows)) => {
                    added += rows.iter().map(|r| r.get::<_, i64>(0)).sum::<i64>();
                }
                _ => {}
            }
        }
        check(&steps, answers.into_iter())?;
        committed.map_err(|e| PostgresError::query("cannot commit a batch", e))?;
        let tally = tally.map(|t| t + added);
        let bounds = batch
            .iter()
            .filter_map(|m| match m {
                Mutation::PruneAudit {
                    max_bytes,
                    older_than_ms,
                    ..
                } => Some((*max_bytes, *older_than_ms)),
                _ => None,
            })
            .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));
        match bounds {
            Some((max_bytes, older_than_ms)) => {
                let total = tally.map(|t| t - removed);
                let (total, by_bytes) = self
                    .bound_audit_bytes(total, max_bytes, older_than_ms)
                    .await?;
                self.audit_bytes = Some(total);
                young += by_bytes;
            }
            None => self.audit_bytes = tally,
        }
        crate::pruned_before_retention(young);
        Ok(())
    }

    /// The audit log's byte bound: counts the log's bytes when `total` is
    /// unknown (one pass), then removes the oldest entries, at most
    /// [`crate::AUDIT_PRUNE_CHUNK_ROWS`], while it holds more than
    /// `max_bytes`. Answers the bytes left, and how many of the entries
    /// removed were at or after `older_than_ms` (the age bound kept them).
    /// One statement each, outside the batch's transaction: a removal is
    /// atomic and answers what it removed.
    async fn bound_audit_bytes(
        &mut self,
        total: Option<i64>,
        max_bytes: u64,
        older_than_ms: i64,
    ) -> Result<(i64, i64), StoreError> {
        let client = &self.client;
        let total = match total {
            Some(t) => t,
            None => client
                .query_one(
                    "SELECT coalesce(sum(octet_length(record)), 0)::int8 FROM audit_log",
                    &[],
                )
                .await
                .map_err(|e| PostgresError::query("cannot measure the audit log", e))?
                .get::<_, i64>(0),
        };
        let oldest: Vec<(i64, i64)> = client
            .query(
                "SELECT id, octet_length(record)::int8 FROM audit_log ORDER BY id LIMIT $1",
                &[&(crate::AUDIT_PRUNE_CHUNK_ROWS as i64)],
            )
            .await
            .map_err(|e| PostgresError::query("cannot read the audit log's oldest entries", e))?
            .iter()
            .map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1)))
            .collect();
        let Some(cutoff) = crate::audit_byte_cutoff(total, max_bytes, &oldest) else {
            return Ok((total, 0));
        };
        let gone = client
            .query_one(
                "WITH gone AS (DELETE FROM audit_log WHERE id <= $1
                                RETURNING octet_length(record) AS n, time_ms)
                 SELECT coalesce(sum(n), 0)::int8,
                        (count(*) FILTER (WHERE time_ms >= $2))::int8
                   FROM gone",
                &[&cutoff, &older_than_ms],
            )
            .await
            .map_err(|e| PostgresError::query("cannot bound the audit log's bytes", e))?;
        Ok((total - gone.get::<_, i64>(0), gone.get::<_, i64>(1)))
    }
}

/// The first failure among a batch's answers, in batch order (after one
/// statement fails, the rest only say the transaction is aborted).
fn check(steps: &[Step<'_>], answers: impl Iterator<Item = Answer>) -> Result<(), StoreError> {
    for (step, answer) in steps.iter().zip(answers) {
        match answer {
            Ok(_) => {}
            Err(e) if e.code() == Some(&SqlState::FOREIGN_KEY_VIOLATION) => {
                let detail = e
                    .as_db_error()
                    .and_then(|d| d.detail())
                    .unwrap_or("no detail")
                    .to_string();
                return Err(StoreError::Missing(format!(
                    "{} ({detail})",
                    step.kind.parent()
                )));
            }
            Err(e) => return Err(PostgresError::query("cannot apply a batch", e).into()),
        }
    }
    Ok(())
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("records serialize to JSON")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_listed_in_declaration_order() {
        // `Statements::get` indexes by `kind as usize`.
        for (i, kind) in Kind::ALL.iter().enumerate() {
            assert_eq!(*kind as usize, i, "{kind:?}");
        }
    }

    #[test]
    fn runs_share_a_statement_until_a_key_repeats_and_counters_coalesce() {
        let s = |id: &str, user: &str| Mutation::PutSession {
            pool: "p".into(),
            session: crate::conformance::session(id, "h", user),
        };
        let counters = |n: u64| Mutation::PutCounters {
            pool: "p".into(),
            counters: placement::PoolCounters {
                next_seq: n,
                ..placement::PoolCounters::default()
            },
        };
        let batch = vec![
            s("a", "1"),
            counters(1),
            s("b", "2"),
            s("a", "3"),
            s("c", "4"),
            counters(2),
            Mutation::DeleteSession {
                pool: "p".into(),
                id: "a".into(),
            },
            Mutation::DeleteSession {
                pool: "p".into(),
                id: "a".into(),
            },
            s("a", "5"),
        ];
        let steps = plan(&batch);
        let rows: Vec<(Kind, Vec<&str>)> = steps
            .iter()
            .map(|s| (s.kind, s.rows.iter().map(|r| r.keys[1]).collect()))
            .collect();
        // The first counters are dropped, so the first puts join; the
        // second put of "a" starts a statement of its own; the last
        // counters stay where they were; deletes may repeat a key.
        assert_eq!(
            rows,
            [
                (Kind::PutSession, vec!["a", "b"]),
                (Kind::PutSession, vec!["a", "c"]),
                (Kind::PutCounters, vec![""]),
                (Kind::DeleteSession, vec!["a", "a"]),
                (Kind::PutSession, vec!["a"]),
            ]
        );
    }
}
