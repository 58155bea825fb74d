//! The audit log (rule T5): what an entry says about a change, and how an
//! entry is queued with the change it records.
//!
//! The API records every request that may change something (any method
//! but GET and HEAD; heartbeats aside) from an authenticated caller, in
//! `api::audit`. Before the handler runs it opens a [`Scope`] for the
//! request (a task-local: the handler runs in the request's task). When
//! the change goes through [`crate::core::Core::write_with`], that step renders
//! the resource before and after under the pool's lock and queues the entry
//! in the same write request as the change, so both commit in one
//! transaction (and on a storm an entry costs one more row in a batch, not
//! one more commit). Changes that do not go through it (pool creation and
//! removal, credentials, registration tokens) and refusals are recorded
//! by `api::audit` once the handler answered, and the answer waits until
//! the entry is durable.
//!
//! [`Audit`] is the service the API records and reads the log through: it
//! renders a resource as memory holds it, queues an entry on its own
//! through the core's `commit`, and reads the log from the store (what
//! memory does not keep).
//!
//! **Never a secret**: resources are rendered with the API's output types
//! minus anything secret (a credential without token or hash; registration
//! tokens and host credentials not at all).
//!
//! **Refusals are folded.** Any credential can be refused (a reader's
//! every change is a 403), and the log is bounded by a count of entries:
//! one entry a refusal would let a reader push months of accepted changes
//! out of the log in minutes. So a refusal (an answer of 400 or more:
//! nothing changed) is counted into one entry per caller, action, target,
//! pool, source and outcome a minute ([`Audit::append_refusal`]), which
//! says how many requests it stands for; and a caller gets at most
//! [`MAX_REFUSAL_ENTRIES_PER_MINUTE`] such entries a minute, past which
//! its refusals are counted into one entry per route pattern and outcome
//! (names, pool and source left out). An accepted change is never folded.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use placement::Pool;
use store::{AuditEntry, AuditQuery, AuditRow, Mutation, Rendered};

use crate::core::Core;
use crate::credentials::Credentials;
use crate::enroll::Caller;
use crate::error::BrokerError;
use crate::sync::MutexExt;

/// How long refusals are folded into one entry: entries are per minute
/// (of the broker's clock).
pub const REFUSAL_FOLD_MS: i64 = 60_000;

/// Entries of refusals one caller gets a minute with their names, pool
/// and source; its further refusals that minute are folded by route
/// pattern and outcome, so that varying the names in the path cannot make
/// an entry a request again.
pub const MAX_REFUSAL_ENTRIES_PER_MINUTE: usize = 16;

/// Callers whose refusal entries of the current minute are remembered; past
/// it the memory starts afresh (which gives each caller its
/// [`MAX_REFUSAL_ENTRIES_PER_MINUTE`] again, and no more).
pub const MAX_REFUSING_CALLERS: usize = 16_384;

/// Whether an answer with `status` is a refusal: it changed nothing, and
/// its entry is folded with its like ([`Audit::append_refusal`]).
pub fn is_refusal(status: u16) -> bool {
    status >= 400
}

/// The refusal entries made in the current minute, by caller.
#[derive(Default)]
struct Folds {
    minute: i64,
    by_actor: HashMap<String, HashSet<String>>,
}

/// The audit log service: the core it renders pools from and commits
/// through, the store it reads the log from, and the credentials it
/// renders (without their secrets).
pub struct Audit {
    core: Arc<Core>,
    /// Read for the log (what memory does not keep); every write goes
    /// through the core.
    store: Arc<dyn store::Store>,
    credentials: Arc<Credentials>,
    folds: Mutex<Folds>,
}

impl Audit {
    /// The service over `core`, reading the log from `store`.
    pub fn new(
        core: Arc<Core>,
        store: Arc<dyn store::Store>,
        credentials: Arc<Credentials>,
    ) -> Audit {
        Audit {
            core,
            store,
            credentials,
            folds: Mutex::default(),
        }
    }

    /// Now, by the core's clock: an entry's time.
    pub fn now_ms(&self) -> placement::TimestampMs {
        self.core.now_ms()
    }

    /// The resource as memory holds it now (without waiting for the
    /// store); None for what is never rendered.
    pub fn render(&self, resource: &Resource) -> Option<Rendered> {
        match resource {
            Resource::Pool(p)
            | Resource::Host { pool: p, .. }
            | Resource::Session { pool: p, .. } => self
                .core
                .peek(p, |pool| Ok(resource.render_in(pool)))
                .ok()
                .flatten(),
            Resource::Credential(name) => {
                self.credentials.shown(name).and_then(|c| Rendered::of(&c))
            }
            _ => None,
        }
    }

    /// Queues `entry` on its own and waits until it is durable. If the
    /// store has failed, the entry cannot be kept: that is logged, and the
    /// answer (already decided) goes out as it is.
    pub async fn append(&self, mut entry: AuditEntry) {
        bound(&mut entry);
        let queued = self
            .core
            .commit(|| Ok(((), vec![Mutation::AppendAudit { entry }])));
        if let Err(e) = queued.await {
            tracing::error!(error = %e, "an audit entry could not be stored");
        }
    }

    /// Rule AD2: a Windows sign-in an RD Gateway refused, folded into one
    /// entry per gateway (`actor`: `rd-gateway` for the gateway in the
    /// broker's process), source, user and reason a minute.
    pub async fn sign_in_refused(
        &self,
        time_ms: i64,
        actor: String,
        source: std::net::IpAddr,
        user: Option<&str>,
        reason: &str,
    ) {
        let entry = AuditEntry {
            time_ms,
            actor,
            action: format!("Windows sign-in refused: {reason}"),
            target: format!("users/{}", user.unwrap_or("-")),
            host_pool: None,
            before: None,
            after: None,
            outcome: 401,
            source: Some(source.to_string()),
            end_reason: None,
        };
        self.append_refusal(entry, "Windows sign-in refused", "users")
            .await;
    }

    /// Counts a refusal into its entry of the minute, and waits until that
    /// is durable: the entry of the same caller, action, target, pool,
    /// source and outcome this minute when there is one (its count grows),
    /// a new one otherwise. Past [`MAX_REFUSAL_ENTRIES_PER_MINUTE`] entries
    /// of the caller this minute, the entry is that of the route
    /// `pattern` (`METHOD /api/v1/hostPools/{pool}`) and outcome, on
    /// `pattern_target`, without pool or source.
    pub async fn append_refusal(&self, mut entry: AuditEntry, pattern: &str, pattern_target: &str) {
        bound(&mut entry);
        let minute = entry.time_ms.div_euclid(REFUSAL_FOLD_MS);
        let key = fold_key(&[
            &minute.to_string(),
            &entry.actor,
            &entry.outcome.to_string(),
            &entry.action,
            &entry.target,
            entry.host_pool.as_deref().unwrap_or(""),
            entry.source.as_deref().unwrap_or(""),
        ]);
        let key = {
            let mut folds = self.folds.lock_or_recover();
            if folds.minute != minute {
                folds.minute = minute;
                folds.by_actor.clear();
            }
            if !folds.by_actor.contains_key(&entry.actor)
                && folds.by_actor.len() >= MAX_REFUSING_CALLERS
            {
                folds.by_actor.clear();
            }
            let seen = folds.by_actor.entry(entry.actor.clone()).or_default();
            if seen.contains(&key) || seen.len() < MAX_REFUSAL_ENTRIES_PER_MINUTE {
                seen.insert(key.clone());
                key
            } else {
                entry.action = pattern.to_string();
                entry.target = pattern_target.to_string();
                entry.host_pool = None;
                entry.source = None;
                bound(&mut entry);
                fold_key(&[
                    &minute.to_string(),
                    &entry.actor,
                    &entry.outcome.to_string(),
                    &entry.action,
                    "by pattern",
                ])
            }
        };
        let queued = self
            .core
            .commit(|| Ok(((), vec![Mutation::FoldAudit { key, entry }])));
        if let Err(e) = queued.await {
            tracing::error!(error = %e, "an audit entry could not be stored");
        }
    }

    /// The entries `query` selects, newest first, from the store.
    pub async fn entries(&self, query: AuditQuery) -> Result<Vec<AuditRow>, BrokerError> {
        self.store
            .audit(query)
            .await
            .map_err(|e| BrokerError::store_unavailable(e.to_string()))
    }
}

tokio::task_local! {
    static SCOPE: Arc<Mutex<Scope>>;
}

/// The resource a request acts on, as its route names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resource {
    Pool(String),
    Host {
        pool: String,
        host: String,
    },
    Session {
        pool: String,
        id: String,
    },
    /// A connect: the session it places is known only once it is placed.
    Connect {
        pool: String,
    },
    /// Registration tokens (never rendered: they are secrets).
    RegistrationTokens {
        pool: String,
    },
    Credential(String),
    /// Credentials being created: the name is in the body.
    Credentials,
    /// A route this module does not know how to render.
    Other,
}

impl Resource {
    /// The resource of `route` (a pattern) with its parameters (each a
    /// valid name, or None); [`Resource::Other`] when one it needs is
    /// missing.
    pub fn of(
        route: &str,
        pool: Option<&str>,
        host: Option<&str>,
        id: Option<&str>,
        name: Option<&str>,
    ) -> Resource {
        let s = |v: &str| v.to_string();
        let resource = match route {
            "/api/v1/hostPools/{pool}" => pool.map(|p| Resource::Pool(s(p))),
            "/api/v1/hostPools/{pool}/sessionHosts/{host}"
            | "/api/v1/hostPools/{pool}/sessionHosts/{host}/heartbeat"
            | "/api/v1/hostPools/{pool}/sessionHosts/{host}/start"
            | "/api/v1/hostPools/{pool}/sessionHosts/{host}/stop" => {
                pool.zip(host).map(|(p, h)| Resource::Host {
                    pool: s(p),
                    host: s(h),
                })
            }
            "/api/v1/hostPools/{pool}/userSessions/{id}"
            | "/api/v1/hostPools/{pool}/userSessions/{id}/sendMessage" => {
                pool.zip(id).map(|(p, i)| Resource::Session {
                    pool: s(p),
                    id: s(i),
                })
            }
            "/api/v1/hostPools/{pool}/connect" => pool.map(|p| Resource::Connect { pool: s(p) }),
            "/api/v1/hostPools/{pool}/registrationToken" => {
                pool.map(|p| Resource::RegistrationTokens { pool: s(p) })
            }
            "/api/v1/credentials/{name}" => name.map(|n| Resource::Credential(s(n))),
            "/api/v1/credentials" => Some(Resource::Credentials),
            _ => None,
        };
        resource.unwrap_or(Resource::Other)
    }

    fn pool(&self) -> Option<&str> {
        match self {
            Resource::Pool(p)
            | Resource::Host { pool: p, .. }
            | Resource::Session { pool: p, .. }
            | Resource::Connect { pool: p }
            | Resource::RegistrationTokens { pool: p } => Some(p),
            _ => None,
        }
    }

    /// The resource as the API shows it in `pool` (None: absent, or not
    /// something kept in a pool).
    pub fn render_in(&self, pool: &Pool) -> Option<Rendered> {
        match self {
            Resource::Pool(_) => Rendered::of(&api::types::HostPoolOutput::of(
                pool,
                pool.config().validate().unwrap_or_default(),
            )),
            Resource::Host { host, .. } => pool
                .host(host)
                .and_then(|h| Rendered::of(&api::types::SessionHostOutput::from(h))),
            Resource::Session { id, .. } => pool
                .session(id)
                .and_then(|s| Rendered::of(&api::types::SessionOutput::from(s))),
            _ => None,
        }
    }
}

/// Longest text of an entry's `actor`, `action`, `target`, `hostPool` or
/// `source`: room for a route with two names of 253 characters each.
pub const MAX_TEXT_BYTES: usize = 1024;

/// Longest `before` or `after` kept: above any resource a request body
/// (at most `api::MAX_BODY_BYTES`) can make. A larger one is replaced by
/// a note of its size, so no entry is ever unbounded.
pub const MAX_RENDERED_BYTES: usize = 512 * 1024;

/// Holds every field of `entry` to its bound (rule T5): texts cut at
/// [`MAX_TEXT_BYTES`] (on a character boundary), a rendered resource over
/// [`MAX_RENDERED_BYTES`] replaced by a note of its size.
pub fn bound(entry: &mut AuditEntry) {
    fn cut(text: &mut String) {
        if text.len() > MAX_TEXT_BYTES {
            let mut end = MAX_TEXT_BYTES;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
        }
    }
    fn fit(rendered: &mut Option<Rendered>) {
        if let Some(r) = rendered
            && r.get().len() > MAX_RENDERED_BYTES
        {
            *rendered = Rendered::of(&serde_json::json!({
                "omitted": format!("{} bytes, over the log's bound of {MAX_RENDERED_BYTES}", r.get().len())
            }));
        }
    }
    cut(&mut entry.actor);
    cut(&mut entry.action);
    cut(&mut entry.target);
    if let Some(p) = &mut entry.host_pool {
        cut(p);
    }
    if let Some(s) = &mut entry.source {
        cut(s);
    }
    fit(&mut entry.before);
    fit(&mut entry.after);
}

/// The key refusals are folded under in the store: a digest of `parts`
/// (each bounded, so the key is short and of one length whatever they
/// hold).
fn fold_key(parts: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut digest = Sha256::new();
    for part in parts {
        digest.update((part.len() as u64).to_le_bytes());
        digest.update(part.as_bytes());
    }
    hex::encode(digest.finalize())
}

/// Who a caller is, in the log: `admin` (the admin token),
/// `credential:NAME`, `host:POOL/HOST`.
pub fn actor(caller: &Caller) -> String {
    match caller {
        Caller::Admin => "admin".into(),
        Caller::Credential { name, .. } => format!("credential:{name}"),
        Caller::Host { pool, host } => format!("host:{pool}/{host}"),
    }
}

/// Who ended sessions the broker ended on its own (a timeout, a lifetime,
/// a scaling plan's logoff), in the log.
pub const BROKER_ACTOR: &str = "broker";

/// The audit entry of a session's end (rule T5), queued with its deletion:
/// action `END /api/v1/hostPools/POOL/userSessions/ID`, `before` the
/// session as it was, `endReason` why it ended. Its actor says who ended
/// it: `broker` for what the broker decided by itself (timeouts, a
/// lifetime, a scaling plan), `host:POOL/HOST` when the host's list no
/// longer had it, the request's caller (and address) for a logoff or a
/// host's removal (whose own entry records the request), `front-door` for
/// a release by the broker's own front door. An end the rules decide
/// inside a request (a connect expiring stale sessions) is the broker's,
/// not the caller's.
pub fn session_end(
    pool: &str,
    ended: &placement::EndedSession,
    now_ms: placement::TimestampMs,
) -> AuditEntry {
    use placement::EndReason;
    let s = &ended.session;
    let caller = || {
        SCOPE
            .try_with(|scope| {
                let scope = scope.lock_or_recover();
                (scope.entry.actor.clone(), scope.entry.source.clone())
            })
            .ok()
    };
    let (actor, source) = match ended.reason {
        r if r.by_broker() => (BROKER_ACTOR.to_string(), None),
        EndReason::NotListed => (format!("host:{pool}/{}", s.host), None),
        EndReason::Released => {
            caller().unwrap_or((crate::front_door::FRONT_DOOR_ACTOR.to_string(), None))
        }
        _ => caller().unwrap_or((BROKER_ACTOR.to_string(), None)),
    };
    let mut entry = AuditEntry {
        time_ms: now_ms,
        actor,
        action: format!("END /api/v1/hostPools/{pool}/userSessions/{}", s.id),
        target: format!("hostPools/{pool}/userSessions/{}", s.id),
        host_pool: Some(pool.to_string()),
        before: Rendered::of(&api::types::SessionOutput::from(s)),
        after: None,
        outcome: 204,
        source,
        end_reason: Some(ended.reason.as_str().to_string()),
    };
    bound(&mut entry);
    entry
}

/// The entry of a request, filled in as it goes.
pub struct Scope {
    /// Everything but before, after and outcome, until they are known.
    pub entry: AuditEntry,
    pub method: String,
    pub resource: Resource,
    /// Set when [`crate::core::Core::write_with`] queued the entry with the
    /// change, to the outcome it recorded.
    pub recorded: Option<u16>,
}

/// Runs `f` (the handler) with `scope` open, and answers the scope back.
pub async fn with_scope<F: Future>(scope: Scope, f: F) -> (F::Output, Scope) {
    let shared = Arc::new(Mutex::new(scope));
    let out = SCOPE.scope(shared.clone(), f).await;
    let scope = match Arc::try_unwrap(shared) {
        Ok(m) => m.into_inner_or_recover(),
        Err(shared) => {
            let mut s = shared.lock_or_recover();
            Scope {
                entry: s.entry.clone(),
                method: std::mem::take(&mut s.method),
                resource: s.resource.clone(),
                recorded: s.recorded,
            }
        }
    };
    (out, scope)
}

/// The state of an open scope's resource in `pool` before a write: None
/// when no scope is open, or it is about another pool, or already recorded.
pub(crate) fn before_write(pool: &Pool) -> Option<Option<Rendered>> {
    SCOPE
        .try_with(|s| {
            let s = s.lock_or_recover();
            (s.recorded.is_none() && s.resource.pool() == Some(pool.name()))
                .then(|| s.resource.render_in(pool))
        })
        .ok()
        .flatten()
}

/// The entry of the open scope for a write that changed `pool` (its
/// `mutations`), with the status the handler answers for that success;
/// None when there is no scope, or the handler's status cannot be known
/// here (then `api::audit` records it after the handler).
pub(crate) fn after_write(
    pool: &Pool,
    before: Option<Rendered>,
    mutations: &[Mutation],
) -> Option<Mutation> {
    SCOPE
        .try_with(|s| {
            let mut s = s.lock_or_recover();
            let (after, outcome) = match (&s.resource, s.method.as_str()) {
                (Resource::Host { .. }, "PUT") => (
                    s.resource.render_in(pool),
                    if before.is_none() { 201 } else { 200 },
                ),
                (Resource::Pool(_) | Resource::Host { .. } | Resource::Session { .. }, "PATCH") => {
                    (s.resource.render_in(pool), 200)
                }
                // A pool that exists is replaced here (200); one created
                // does not come through a write.
                (Resource::Pool(_), "PUT") if before.is_some() => (s.resource.render_in(pool), 200),
                (Resource::Host { .. } | Resource::Session { .. }, "DELETE") => (None, 204),
                (Resource::Connect { .. }, "POST") => {
                    // The session placed (a reconnect to one that exists
                    // changes nothing, and is recorded after the handler).
                    let placed = mutations.iter().rev().find_map(|m| match m {
                        Mutation::PutSession { session, .. } => Some(session.id.clone()),
                        _ => None,
                    })?;
                    s.entry.target = format!("hostPools/{}/userSessions/{placed}", pool.name());
                    let session = pool.session(&placed)?;
                    (Rendered::of(&api::types::SessionOutput::from(session)), 200)
                }
                _ => return None,
            };
            s.recorded = Some(outcome);
            let mut entry = s.entry.clone();
            entry.before = before;
            entry.after = after;
            entry.outcome = outcome;
            bound(&mut entry);
            Some(Mutation::AppendAudit { entry })
        })
        .ok()
        .flatten()
}
