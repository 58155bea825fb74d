//! Durable state of deskbroker behind one [`Store`] trait.
//!
//! The broker keeps every pool's state in memory (the `placement` engine)
//! and writes each change here before it acknowledges it (rule S5). A store
//! only has to do two things well: give everything back at start
//! ([`Store::load`]) and apply a batch of changes atomically and durably
//! ([`Store::apply`]). Batches let the broker group-commit many requests in
//! one transaction.
//!
//! Backends: [`SqliteStore`] (embedded, the default) and [`PostgresStore`]
//! (one writer per database: the holder of its owner lock); for tests, with
//! the `testing` feature, `MemoryStore` (the same semantics in this
//! process's memory, shared by its clones so that a test can restart a
//! broker on what an earlier one committed). Every backend
//! passes the same conformance suite, `conformance`, whose
//! `conformance_tests!` makes each case a test of its own. It is a test
//! fixture: it and the PostgreSQL tests' scratch databases are built only
//! with the `testing` feature, which crates enable from their
//! `[dev-dependencies]`.

#[cfg(feature = "testing")]
pub mod conformance;
#[cfg(feature = "testing")]
pub mod fixtures;
#[cfg(feature = "testing")]
pub mod memory;
pub mod postgres;
#[cfg(test)]
mod schema_versions;
mod sqlite;
pub mod sqlite_backup;

use std::sync::Arc;

use placement::{Host, PoolConfig, PoolCounters, Session};

#[cfg(feature = "testing")]
pub use memory::MemoryStore;
pub use postgres::{Campaign, Leader, Lease, LeaseLost, PostgresStore};
pub use sqlite::SqliteStore;

/// One change to persist. Deleting a pool removes its hosts and sessions;
/// deleting a host removes its sessions.
#[derive(Clone, Debug, PartialEq)]
pub enum Mutation {
    PutPool {
        config: PoolConfig,
        counters: PoolCounters,
    },
    PutCounters {
        pool: String,
        counters: PoolCounters,
    },
    DeletePool {
        pool: String,
    },
    PutHost {
        pool: String,
        host: Host,
    },
    DeleteHost {
        pool: String,
        host: String,
    },
    PutSession {
        pool: String,
        session: Session,
    },
    DeleteSession {
        pool: String,
        id: String,
    },
    /// Creates a registration token, or replaces it (the broker puts it
    /// again each time it registers a new host, with `used_hosts` counted).
    PutRegistrationToken {
        pool: String,
        token: RegistrationToken,
    },
    /// Revokes every registration token of the pool.
    DeleteRegistrationTokens {
        pool: String,
    },
    /// Forgets one registration token (an expired one).
    DeleteRegistrationToken {
        pool: String,
        hash: String,
    },
    /// A host has one credential: this replaces the previous one. Removing
    /// the host removes it.
    PutHostCredential {
        pool: String,
        credential: HostCredential,
    },
    /// Creates or replaces an API credential (rule T1), by name.
    PutApiCredential {
        credential: ApiCredential,
    },
    /// Revokes an API credential.
    DeleteApiCredential {
        name: String,
    },
    /// Appends an entry to the audit log (rule T5), in the batch of the
    /// change it records when there is one, so both commit together.
    AppendAudit {
        entry: AuditEntry,
    },
    /// Counts a request into the audit entry kept under `key`: the entry
    /// is appended (with a count of 1) when no entry has that key yet;
    /// otherwise the existing entry's count grows by one and nothing else
    /// of it changes. The broker folds refusals this way (one entry per
    /// credential, action, outcome and minute), so that a credential that
    /// keeps being refused cannot push accepted changes out of the log.
    FoldAudit {
        key: String,
        entry: AuditEntry,
    },
    /// Bounds the audit log: removes entries older than `older_than_ms`,
    /// all but the newest `max_rows`, and the oldest while the entries take
    /// more than `max_bytes` (their records' JSON), at most
    /// [`AUDIT_PRUNE_CHUNK_ROWS`] for each bound a time, so that one prune
    /// never makes a long transaction (the writer prunes again a while
    /// later until the log is in bounds). The byte bound is kept with a
    /// count of the log's bytes that the backend keeps in memory, read once
    /// (one pass over the log) when it has none: when it opens, and after
    /// a batch that failed.
    PruneAudit {
        older_than_ms: i64,
        max_rows: u64,
        max_bytes: u64,
    },
    /// Records a power or scaling action (rule A10), or its outcome: the
    /// same `id` again replaces the record (Pending, then Succeeded or
    /// Failed). [`Mutation::PruneAudit`] bounds these records too.
    PutScalingAction {
        action: ScalingAction,
    },
    /// Creates or replaces a scaling plan (rules A1–A7), by name.
    PutScalingPlan {
        name: String,
        plan: placement::autoscale::ScalingPlan,
    },
    /// Removes a scaling plan.
    DeleteScalingPlan {
        name: String,
    },
    /// What a pool's plan remembers between evaluations (hosts notified,
    /// logged off), put in the batch of the actions that changed it, so a
    /// restart continues instead of repeating them. Deleting the pool
    /// deletes it.
    PutPlanMemory {
        pool: String,
        memory: placement::autoscale::PlanMemory,
    },
    /// Creates or replaces one of a pool's published applications (rule
    /// F1), by pool and alias. Deleting the pool deletes its applications.
    PutApplication {
        pool: String,
        alias: String,
        application: placement::Application,
    },
    /// Removes one of a pool's published applications.
    DeleteApplication {
        pool: String,
        alias: String,
    },
    /// Creates or replaces an application group (rule F1), by name. The
    /// broker deletes a pool's groups in the batch that deletes the pool.
    PutApplicationGroup {
        name: String,
        group: placement::ApplicationGroup,
    },
    /// Removes an application group.
    DeleteApplicationGroup {
        name: String,
    },
    /// Records what a user's workspace feed holds and since when (rule F4), by user.
    PutFeedStamp {
        user: String,
        stamp: placement::FeedStamp,
    },
    /// Forgets a user's feed stamp.
    DeleteFeedStamp {
        user: String,
    },
    /// Replaces the broker's signing keys (connection tickets, redirection
    /// tokens) with this set: made once when a store has none, and again at
    /// each rotation.
    PutSigningKeys {
        keys: SigningKeys,
    },
}

/// The name the signing keys are kept under.
pub const SIGNING_KEYS_NAME: &str = "signingKeys";

/// The secrets that sign connection tickets (rule T3) and redirection
/// tokens (R3): random, made by the broker itself, so that nothing a user
/// chose (such as the admin token) can be guessed back from what they
/// sign, and kept in the store so that every replica signs and verifies
/// alike. Newest first; the first one not retired signs, and every one
/// still in the set verifies.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SigningKeys {
    pub keys: Vec<SigningKey>,
}

/// One signing secret.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SigningKey {
    /// 32 random bytes, in lowercase hex.
    pub secret: String,
    pub created_ms: i64,
    /// When a newer key replaced it; it still verifies for a while.
    pub retired_ms: Option<i64>,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("secret", &"…")
            .field("created_ms", &self.created_ms)
            .field("retired_ms", &self.retired_ms)
            .finish()
    }
}

/// A scaling plan as the store keeps it: its name and its JSON.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredPlan {
    pub name: String,
    pub plan: placement::autoscale::ScalingPlan,
}

/// Most records one [`Store::scaling_actions`] query answers.
pub const MAX_SCALING_ACTION_PAGE_ROWS: usize = 1000;

/// One action on a host (rule A10): a scaling plan's (with its phase and
/// the figures that caused it) or an operator's (with its actor). Kept as
/// JSON; `id`, `pool`, `time_ms` and `outcome` are also columns.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ScalingAction {
    /// A UUIDv7: ids sort in the order actions were made, newest last.
    pub id: String,
    pub pool: String,
    pub time_ms: i64,
    /// The plan's phase; None for an operator's action.
    pub phase: Option<String>,
    pub action: placement::ScalingActionKind,
    pub session_host: String,
    pub reason: String,
    pub used_capacity_pct: Option<u32>,
    pub threshold_pct: Option<u32>,
    pub running_hosts: Option<u32>,
    pub minimum_hosts: Option<u32>,
    pub outcome: placement::ActionOutcome,
    /// What the driver said (its output, bounded), or why it failed.
    pub message: String,
    /// Who asked, for an operator's action (as in the audit log).
    pub actor: Option<String>,
    /// When the outcome was known.
    pub finished_ms: Option<i64>,
    /// How many times the driver was tried.
    #[serde(default)]
    pub attempts: u32,
}

impl ScalingAction {
    /// A new record of `action` on `session_host` of `pool` at `now_ms`,
    /// asked by `actor` for `reason`, with a fresh UUIDv7 id: Pending, not
    /// tried yet, without a phase or figures (as an operator's action is).
    /// A plan adds its figures ([`ScalingAction::set_figures`]); an action
    /// done at once is [`ScalingAction::finished`].
    pub fn new(
        pool: impl Into<String>,
        session_host: impl Into<String>,
        action: placement::ScalingActionKind,
        reason: impl Into<String>,
        actor: impl Into<String>,
        now_ms: i64,
    ) -> ScalingAction {
        ScalingAction {
            id: uuid::Uuid::now_v7().to_string(),
            pool: pool.into(),
            time_ms: now_ms,
            phase: None,
            action,
            session_host: session_host.into(),
            reason: reason.into(),
            used_capacity_pct: None,
            threshold_pct: None,
            running_hosts: None,
            minimum_hosts: None,
            outcome: placement::ActionOutcome::Pending,
            message: String::new(),
            actor: Some(actor.into()),
            finished_ms: None,
            attempts: 0,
        }
    }

    /// The same record, its outcome known at `now_ms`.
    pub fn finished(self, outcome: placement::ActionOutcome, now_ms: i64) -> ScalingAction {
        ScalingAction {
            outcome,
            finished_ms: Some(now_ms),
            ..self
        }
    }

    /// Records the scaling plan's phase and the figures of the evaluation
    /// that took the action (rule A10): used capacity, threshold, running
    /// hosts and minimum.
    pub fn set_figures(&mut self, figures: &placement::autoscale::Figures) {
        self.phase = Some(format!("{:?}", figures.phase));
        self.used_capacity_pct = Some(figures.used_capacity_pct);
        self.threshold_pct = Some(figures.capacity_threshold_pct);
        self.running_hosts = Some(figures.running_hosts);
        self.minimum_hosts = Some(figures.minimum_hosts);
    }
}

/// The record as the API shows it: the same action, its times in RFC 3339
/// instead of the milliseconds the store indexes, and without its pool
/// (the API asks for one pool's records).
impl From<ScalingAction> for api::types::ScalingActionOutput {
    fn from(a: ScalingAction) -> Self {
        api::types::ScalingActionOutput {
            id: a.id,
            time: api::types::rfc3339_ms(a.time_ms),
            phase: a.phase,
            action: a.action,
            session_host: a.session_host,
            reason: a.reason,
            used_capacity_pct: a.used_capacity_pct,
            threshold_pct: a.threshold_pct,
            running_hosts: a.running_hosts,
            minimum_hosts: a.minimum_hosts,
            outcome: a.outcome,
            message: a.message,
            actor: a.actor,
            finished_time: a.finished_ms.map(api::types::rfc3339_ms),
            attempts: a.attempts,
        }
    }
}

/// Which records a [`Store::scaling_actions`] query answers: newest first,
/// of one pool (or of every pool), only Pending ones if asked, below
/// `before_id`, at most `limit` (capped at
/// [`MAX_SCALING_ACTION_PAGE_ROWS`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScalingActionQuery {
    pub pool: Option<String>,
    pub pending_only: bool,
    pub before_id: Option<String>,
    pub limit: usize,
}

/// How many audit entries one [`Mutation::PruneAudit`] removes at most for
/// each of its two bounds (age and count).
pub const AUDIT_PRUNE_CHUNK_ROWS: u64 = 10_000;

/// Which of the oldest entries a byte bound removes: `oldest` are the
/// oldest entries' ids and sizes, in order, and the log takes `total`
/// bytes; answers the last id to remove so that at most `max_bytes` stay
/// (None: nothing to remove). Shared by every backend.
pub(crate) fn audit_byte_cutoff(total: i64, max_bytes: u64, oldest: &[(i64, i64)]) -> Option<i64> {
    let max = i64::try_from(max_bytes).unwrap_or(i64::MAX);
    let mut left = total;
    let mut cutoff = None;
    for &(id, bytes) in oldest {
        if left <= max {
            break;
        }
        left -= bytes;
        cutoff = Some(id);
    }
    cutoff
}

/// Notes that a prune removed `young` audit entries that the age bound
/// would have kept (the count or byte bound removed them): the log is
/// filling faster than its bounds allow for the retention asked, perhaps
/// flooded. Counted in `deskbroker_audit_pruned_before_retention_total`
/// and logged, so that an alert can say so.
pub(crate) fn pruned_before_retention(young: i64) {
    if young > 0 {
        metrics::counter!("deskbroker_audit_pruned_before_retention_total").increment(young as u64);
        tracing::warn!(
            entries = young,
            "the audit log's count or byte bound removed entries younger than its retention: \
             it fills faster than --audit-max-entries / --audit-max-bytes allow for \
             --audit-retention-days"
        );
    }
}

/// Most entries one [`Store::audit`] query answers.
pub const MAX_AUDIT_PAGE_ROWS: usize = 1000;

/// One entry of the audit log (rule T5): who changed or tried to change
/// what, the resource before and after (never a secret), and the HTTP
/// status of the answer. Kept as JSON; `time_ms`, `actor` and `host_pool`
/// are also columns, for the query's filters and the retention.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AuditEntry {
    pub time_ms: i64,
    /// `admin`, `credential:NAME`, `host:POOL/HOST`, or
    /// `registration-token:POOL`.
    pub actor: String,
    /// `METHOD PATH`: the route with each name that passes the name rules
    /// in its place, else the route's pattern (`{name}`).
    pub action: String,
    /// The resource acted on (`hostPools/p/sessionHosts/h1`).
    pub target: String,
    /// The pool the resource belongs to, if any (credentials limited to
    /// some pools see only the entries of theirs).
    pub host_pool: Option<String>,
    pub before: Option<Rendered>,
    pub after: Option<Rendered>,
    /// The answer's HTTP status (a refusal is recorded too).
    pub outcome: u16,
    /// The caller's address, when known.
    pub source: Option<String>,
    /// Set on the entry of a session's end: why it ended (`logoff`,
    /// `pendingTimeout`, …, placement's `EndReason`). `before` is then the
    /// session as it was. Absent from every other entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<String>,
}

/// A resource as the API shows it, kept as the JSON text it was rendered
/// to: an audit entry's `before` and `after` are rendered once, under the
/// pool's lock, and written as they are. (As a `serde_json::Value` the
/// resource was a map of fresh strings, then written out again: about
/// 2 µs of a connect's CPU, which records the session it places.)
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Rendered(Box<serde_json::value::RawValue>);

impl Rendered {
    /// `value` rendered as JSON; None if it cannot be (a map whose keys
    /// are not strings).
    pub fn of<T: serde::Serialize + ?Sized>(value: &T) -> Option<Rendered> {
        serde_json::value::to_raw_value(value).ok().map(Rendered)
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// The rendered resource as a value, for an answer.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(self.get()).unwrap_or(serde_json::Value::Null)
    }
}

/// Equal when they say the same, however spelt.
impl PartialEq for Rendered {
    fn eq(&self, other: &Rendered) -> bool {
        self.get() == other.get() || self.to_value() == other.to_value()
    }
}

/// An entry as the store keeps it: `id` grows with every append, so the
/// newest entry has the largest, and a page continues below the last id
/// it showed.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditRow {
    pub id: i64,
    pub entry: AuditEntry,
    /// How many requests the entry stands for: 1, or more for an entry
    /// that refusals were folded into ([`Mutation::FoldAudit`]).
    pub count: u64,
}

/// Which entries a [`Store::audit`] query answers: newest first, those
/// matching every filter given, below `before_id`, at most `limit` (capped
/// at [`MAX_AUDIT_PAGE_ROWS`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AuditQuery {
    pub since_ms: Option<i64>,
    pub actor: Option<String>,
    pub host_pool: Option<String>,
    /// Only entries of these pools (a credential limited to some pools);
    /// None: every entry, with or without a pool.
    pub within_pools: Option<Vec<String>>,
    pub before_id: Option<i64>,
    /// Only the entries of sessions' ends (those with an `end_reason`).
    pub ended_sessions: bool,
    pub limit: usize,
}

/// An API credential with a role (rule T1), kept only as the SHA-256 (hex)
/// of its token. `host_pools` empty means every pool; `expires_ms` None
/// means it does not expire.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ApiCredential {
    pub name: String,
    pub role: String,
    pub host_pools: Vec<String>,
    pub expires_ms: Option<i64>,
    pub hash: String,
    /// Rule T4: its own limit of requests a second (bursts of twice as
    /// many), whatever `serve --api-rate-limit` says; None: the broker's.
    /// Absent in records stored before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit_per_second: Option<u32>,
}

/// A registration token, kept only as its SHA-256 (hex): the secret itself
/// is shown once, to the administrator who created it. A token is bound:
/// it registers at most `max_hosts` new hosts, and `used_hosts` says how
/// many it has, kept durably so that a restart does not refill it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistrationToken {
    pub hash: String,
    pub expires_ms: i64,
    /// How many new hosts the token may register (at least 1).
    pub max_hosts: u32,
    /// How many new hosts it has registered so far.
    pub used_hosts: u32,
}

/// A host's credential, kept only as its SHA-256 (hex).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostCredential {
    pub host: String,
    pub hash: String,
}

/// Everything a store keeps about one pool.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolRecord {
    pub config: PoolConfig,
    pub counters: PoolCounters,
    /// In query order.
    pub hosts: Vec<Host>,
    pub sessions: Vec<Session>,
    pub registration_tokens: Vec<RegistrationToken>,
    pub host_credentials: Vec<HostCredential>,
    /// Its published applications (rule F1), by alias, in alias order.
    pub applications: Vec<(String, placement::Application)>,
}

/// Everything a store keeps, pools in name order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub pools: Vec<PoolRecord>,
    /// API credentials, in name order.
    pub credentials: Vec<ApiCredential>,
    /// Scaling plans, in name order.
    pub scaling_plans: Vec<StoredPlan>,
    /// Each pool's plan memory, in pool order (pools without none).
    pub plan_memories: Vec<(String, placement::autoscale::PlanMemory)>,
    /// The signing keys; None in a store no broker has signed with yet.
    pub signing_keys: Option<SigningKeys>,
    /// Application groups (rule F1), in name order.
    pub application_groups: Vec<(String, placement::ApplicationGroup)>,
    /// Each user's workspace feed stamp (rule F4), in user order.
    pub feed_stamps: Vec<(String, placement::FeedStamp)>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("postgres: {0}")]
    Postgres(#[from] postgres::PostgresError),
    #[error("stored record is not valid: {0}")]
    Corrupt(String),
    #[error("a mutation refers to a missing {0}")]
    Missing(String),
    #[error("store task failed: {0}")]
    Task(String),
    /// The store was last written by a newer deskbroker, whose schema this
    /// one does not know; it is left as it was.
    #[error(
        "the store has schema version {found}, newer than version {known}, the newest this \
         deskbroker knows: run the deskbroker that wrote it (or a newer one); nothing was changed"
    )]
    NewerSchema { found: i64, known: usize },
    /// A backup, a restore or a check could not use a file: the message
    /// names it and says why.
    #[error("{0}")]
    File(String),
}

/// The write path of a store that waits for nothing but its own disk (an
/// embedded database): the broker's writer then runs on a thread of its
/// own and calls this for each batch, where [`Store::apply`] would hand
/// the batch to a blocking thread and wake the writer's task again
/// afterwards — two thread wake-ups per batch, a fifth of a busy writer's
/// time on a loaded two-core machine (docs/benchmarks.md).
pub trait ApplyBlocking: Send + Sync + 'static {
    /// As [`Store::apply`] (with [`Flush::Now`]) or
    /// [`Store::apply_relaxed`] (with [`Flush::Soon`]), on the caller's
    /// thread, which it blocks.
    fn apply_blocking(&self, batch: &[Mutation], flush: Flush) -> Result<(), StoreError>;
}

/// When a committed batch must be on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flush {
    /// Before the write returns: every change the broker acknowledges
    /// (rule S5).
    Now,
    /// Within [`RELAXED_FLUSH_WITHIN`]: the batch is committed when the
    /// write returns, so a crash of the broker's process loses none of it,
    /// but its flush may ride on a later one; only a crash of the machine
    /// (or of the database server) can lose it. For batches made only of
    /// the RDP front door's marks, which nobody waits for (rule S5's
    /// exception).
    Soon,
}

/// How long a [`Flush::Soon`] batch may wait for its flush to disk.
pub const RELAXED_FLUSH_WITHIN: std::time::Duration = std::time::Duration::from_millis(100);

/// A durable home for the broker's state.
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// Everything kept, to rebuild the engine at start.
    async fn load(&self) -> Result<Snapshot, StoreError>;

    /// Applies `batch` in order, all or nothing. When this returns `Ok`,
    /// every mutation survives a crash of the process or the machine.
    /// Shared, so that the caller still has the batch when it fails.
    async fn apply(&self, batch: Arc<[Mutation]>) -> Result<(), StoreError>;

    /// Like [`Store::apply`], for a batch that may be flushed to disk
    /// later ([`Flush::Soon`]): when this returns `Ok`, every mutation
    /// survives a crash of the broker's process. The default flushes at
    /// once.
    async fn apply_relaxed(&self, batch: Arc<[Mutation]>) -> Result<(), StoreError> {
        self.apply(batch).await
    }

    /// This store's synchronous write path, when it has one: see
    /// [`ApplyBlocking`]. None (the default): the writer calls
    /// [`Store::apply`] from a task.
    fn blocking(&self) -> Option<Arc<dyn ApplyBlocking>> {
        None
    }

    /// Checks that the store can still be written, cheaply; the writer
    /// calls it when idle, so that a lost database is noticed before the
    /// next write. Embedded stores have nothing to check.
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Entries of the audit log, newest first (see [`AuditQuery`]). The log
    /// is never loaded into memory: it is read from the store on demand.
    async fn audit(&self, query: AuditQuery) -> Result<Vec<AuditRow>, StoreError>;

    /// Records of power and scaling actions (rule A10), newest first (see
    /// [`ScalingActionQuery`]); read on demand, never loaded at start.
    async fn scaling_actions(
        &self,
        query: ScalingActionQuery,
    ) -> Result<Vec<ScalingAction>, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry keeps the text a resource was rendered to, reads back the
    /// same, and compares by what it says.
    #[test]
    fn a_rendered_resource_keeps_its_text_and_compares_by_value() {
        #[derive(serde::Serialize)]
        struct Out {
            id: &'static str,
            n: u32,
        }
        let r = Rendered::of(&Out { id: "s1", n: 2 }).expect("a struct renders");
        assert_eq!(r.get(), r#"{"id":"s1","n":2}"#);
        assert_eq!(r.to_value(), serde_json::json!({"id": "s1", "n": 2}));
        let entry = serde_json::json!({"after": r, "before": null});
        let text = serde_json::to_string(&entry).expect("JSON");
        assert_eq!(text, r#"{"after":{"id":"s1","n":2},"before":null}"#);
        let spelt_otherwise: Rendered =
            serde_json::from_str(r#"{ "n": 2, "id": "s1" }"#).expect("JSON");
        assert_eq!(spelt_otherwise, r);
        assert_ne!(Rendered::of(&Out { id: "s1", n: 3 }).expect("renders"), r);
    }
}
