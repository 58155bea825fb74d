//! Scaling plans run by the broker (rules A1–A7, A10): the plans and each
//! pool's plan memory (kept in the store, mirrored here), their changes
//! (a pool belongs to at most one plan, only pooled pools), and the
//! evaluator that applies the engine's decisions.
//!
//! The evaluator runs only where the engines are: the single broker, or
//! the leading replica (it runs inside the ticker, which only the leader
//! runs, and stops with it). Every `serve --autoscale-interval`, and
//! [`SESSION_CHANGE_DEBOUNCE`] after a session changes, it takes for every
//! plan and pool the phase in force, the pool as the plan sees it and the
//! engine's `evaluate`, then applies each action under the pool's lock in
//! one batch with its record and the new plan memory: drains and undrains
//! set `allowNewSession` (`drainedBy: scalingPlan`), logoffs end the
//! host's sessions, starts and stops go through the power path of manual
//! ones (`power::begin`), and a Notify is recorded Pending, then sent to
//! each of the host's sessions through its agent (`sendMessage`) and
//! recorded Succeeded or Failed. Since host states and the memory are durable
//! with the records, a restart evaluates again and continues: nothing
//! completed is repeated, and a power action a crash interrupted is
//! resolved by `power` (its host `Unknown`), not run again.
//!
//! [`Autoscale`] is the service: it owns the plans, their memory and the
//! hosts held back after failed power actions; it changes pools only
//! through the core's `write_with` and its own state through `commit`,
//! starts and stops hosts through [`Power`], and sends notices through
//! [`Messages`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use placement::autoscale::{
    Action, ActionKind, Evaluation, Figures, PlanMemory, ResolvedPhase, ScalingPlan, evaluate,
    phase_in_force,
};
use placement::{DrainedBy, HostPoolType, HostPower, ScalingActionKind, TimestampMs};
use store::{Mutation, ScalingAction, Snapshot};

use crate::core::Core;
use crate::error::BrokerError;
use crate::messages::Messages;
use crate::power::{self, Power};
use crate::sync::MutexExt;

/// `serve --autoscale-interval` when not given.
pub const DEFAULT_AUTOSCALE_INTERVAL: Duration = Duration::from_secs(30);
/// The shortest interval `serve` accepts (tests use it).
pub const MIN_AUTOSCALE_INTERVAL: Duration = Duration::from_secs(1);
/// How long after a session change the plans are evaluated: changes
/// arriving meanwhile share one evaluation, so a logon storm costs one.
pub const SESSION_CHANGE_DEBOUNCE: Duration = Duration::from_secs(1);
/// The most scaling plans a broker keeps.
pub const MAX_SCALING_PLANS: usize = 1_000;
/// The pause before a plan tries again a host whose power action failed
/// (after the power path's own retries); it doubles with each failure.
pub const POWER_FAILURE_BACKOFF_BASE: Duration = Duration::from_secs(60);
/// The longest such pause.
pub const POWER_FAILURE_BACKOFF_MAX: Duration = Duration::from_secs(3_600);
/// The most hosts held back at once; beyond, a failing host is not held
/// back (the power path's retries still bound its pace).
pub const MAX_BACKOFF_HOSTS: usize = 100_000;
/// Who the plan's records name as the actor.
pub const ACTOR: &str = "scalingPlan";
/// A Notify's record until its messages are queued for the host's agent.
pub const NOTIFY_PENDING_MESSAGE: &str = "being sent to the host's sessions";
/// The title of a ramp-down's notice on the user's screen.
pub const NOTICE_TITLE: &str = "Your session host is shutting down";
/// The longest message a Notify's record keeps.
const MAX_NOTICE_RECORD_BYTES: usize = 4096;

/// A host held back after failed power actions.
#[derive(Clone, Copy, Debug)]
struct Backoff {
    failures: u32,
    until_ms: TimestampMs,
}

/// The scaling plans service: the plans, each pool's memory, the hosts
/// held back, and the evaluator's wake-up on plan changes (session changes
/// come from the core's channel).
pub struct Autoscale {
    core: Arc<Core>,
    /// Starts and stops hosts (the path of manual actions).
    power: Arc<Power>,
    /// Carries a ramp-down's notice to the sessions' hosts.
    messages: Arc<Messages>,
    /// `serve --autoscale-interval`.
    interval: Duration,
    plans: Mutex<Plans>,
    plan_changed: tokio::sync::Notify,
    backoff: Mutex<HashMap<(String, String), Backoff>>,
}

#[derive(Default)]
struct Plans {
    by_name: BTreeMap<String, ScalingPlan>,
    memory: HashMap<String, PlanMemory>,
}

impl Plans {
    fn plan_of(&self, pool: &str) -> Option<&str> {
        self.by_name
            .iter()
            .find(|(_, p)| p.host_pools.iter().any(|x| x == pool))
            .map(|(n, _)| n.as_str())
    }
}

/// What the status shows of one pool.
pub struct PoolStatus {
    pub pool: String,
    pub phase: Option<ResolvedPhase>,
    pub evaluation: Result<Evaluation, String>,
}

impl Autoscale {
    /// The service over `core`, with the plans and memories the store kept
    /// (taken from `snapshot`), evaluating every `interval` (at least
    /// [`MIN_AUTOSCALE_INTERVAL`]).
    pub fn new(
        core: Arc<Core>,
        power: Arc<Power>,
        messages: Arc<Messages>,
        interval: Duration,
        snapshot: &mut Snapshot,
    ) -> Autoscale {
        let plans = Plans {
            by_name: std::mem::take(&mut snapshot.scaling_plans)
                .into_iter()
                .map(|p| (p.name, p.plan))
                .collect(),
            memory: std::mem::take(&mut snapshot.plan_memories)
                .into_iter()
                .collect(),
        };
        Autoscale {
            core,
            power,
            messages,
            interval,
            plans: Mutex::new(plans),
            plan_changed: tokio::sync::Notify::new(),
            backoff: Mutex::new(HashMap::new()),
        }
    }

    fn plans(&self) -> std::sync::MutexGuard<'_, Plans> {
        self.plans.lock_or_recover()
    }

    /// The plan serving `pool`, if any.
    pub fn plan_of(&self, pool: &str) -> Option<String> {
        self.plans().plan_of(pool).map(str::to_string)
    }

    /// Every plan, by name.
    pub fn all(&self) -> Vec<(String, ScalingPlan)> {
        let plans = self.plans();
        plans
            .by_name
            .iter()
            .map(|(n, p)| (n.clone(), p.clone()))
            .collect()
    }

    /// One plan.
    pub fn plan(&self, name: &str) -> Result<ScalingPlan, BrokerError> {
        self.plans()
            .by_name
            .get(name)
            .cloned()
            .ok_or_else(|| not_found(name))
    }

    /// Creates or replaces a plan after checking it (A1): valid, each of
    /// its pools existing, pooled (400 otherwise) and served by no other
    /// plan (409). Answers whether it was created. Pools it no longer
    /// serves return to their own algorithm and lose their memory.
    pub async fn put(&self, name: &str, plan: ScalingPlan) -> Result<bool, BrokerError> {
        placement::validate_name("name", name)?;
        plan.validate()?;
        for (i, pool) in plan.host_pools.iter().enumerate() {
            let kind = self.core.peek(pool, |p| Ok(p.config().host_pool_type));
            match kind {
                Ok(HostPoolType::Pooled) => {}
                Ok(HostPoolType::Personal) => {
                    return Err(BrokerError::Invalid(format!(
                        "hostPools[{i}]: host pool {pool} is a personal pool; scaling plans \
                         serve pooled pools (use startVmOnConnect for personal ones)"
                    )));
                }
                Err(_) => {
                    return Err(BrokerError::Invalid(format!(
                        "hostPools[{i}]: host pool {pool} does not exist"
                    )));
                }
            }
        }
        let (created, released) = self
            .core
            .commit(|| {
                let mut plans = self.plans();
                for pool in &plan.host_pools {
                    if let Some(other) = plans.plan_of(pool)
                        && other != name
                    {
                        return Err(placement::Error::Conflict(format!(
                        "host pool {pool} is served by scaling plan {other}; a pool has at most \
                         one plan: remove it from {other} first"
                    ))
                    .into());
                    }
                }
                if !plans.by_name.contains_key(name) && plans.by_name.len() >= MAX_SCALING_PLANS {
                    return Err(placement::Error::Conflict(format!(
                        "this broker keeps at most {MAX_SCALING_PLANS} scaling plans"
                    ))
                    .into());
                }
                let released: Vec<String> = plans
                    .by_name
                    .get(name)
                    .map(|old| {
                        old.host_pools
                            .iter()
                            .filter(|p| !plan.host_pools.contains(p))
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                let created = plans
                    .by_name
                    .insert(name.to_string(), plan.clone())
                    .is_none();
                let put = Mutation::PutScalingPlan {
                    name: name.to_string(),
                    plan,
                };
                Ok(((created, released), vec![put]))
            })
            .await?;
        self.release_pools(&released).await;
        self.plan_changed.notify_one();
        Ok(created)
    }

    /// Removes a plan; its pools return to their own algorithm.
    pub async fn delete(&self, name: &str) -> Result<(), BrokerError> {
        let pools = self
            .core
            .commit(|| {
                let mut plans = self.plans();
                let plan = plans.by_name.remove(name).ok_or_else(|| not_found(name))?;
                let delete = Mutation::DeleteScalingPlan {
                    name: name.to_string(),
                };
                Ok((plan.host_pools, vec![delete]))
            })
            .await?;
        self.release_pools(&pools).await;
        Ok(())
    }

    /// A pool was deleted: its plan no longer names it (A1 keeps plans
    /// naming existing pools).
    pub async fn forget_pool(&self, pool: &str) {
        let Some(name) = self.plan_of(pool) else {
            return;
        };
        let removed = self.core.commit(|| {
            let mut plans = self.plans();
            plans.memory.remove(pool);
            let Some(plan) = plans.by_name.get_mut(&name) else {
                return Ok(((), Vec::new()));
            };
            plan.host_pools.retain(|p| p != pool);
            let plan = plan.clone();
            Ok(((), vec![Mutation::PutScalingPlan { name, plan }]))
        });
        if let Err(e) = removed.await {
            tracing::warn!(%pool, error = %e, "cannot remove a deleted pool from its plan");
        }
    }

    /// Pools a plan no longer serves: their own algorithm again, and no
    /// memory. What the plan drained stays drained by it until an operator
    /// or a new plan decides (A6: nothing an operator set changes).
    async fn release_pools(&self, pools: &[String]) {
        for pool in pools {
            self.plans().memory.remove(pool);
            let _ = self
                .core
                .write_with(pool, |p, _| {
                    p.set_plan_algorithm(None);
                    Ok((
                        (),
                        vec![Mutation::PutPlanMemory {
                            pool: pool.clone(),
                            memory: PlanMemory::default(),
                        }],
                    ))
                })
                .await;
        }
    }

    /// What each pool of a plan shows now: the phase, the figures and what
    /// the plan waits for (an evaluation that applies nothing).
    pub fn status(&self, name: &str) -> Result<Vec<PoolStatus>, BrokerError> {
        let plan = self.plan(name)?;
        let now = self.core.now_ms();
        let phase = phase_in_force(&plan, now).map_err(BrokerError::Engine)?;
        let mut out = Vec::new();
        for pool in &plan.host_pools {
            let memory = self.pool_memory(pool);
            let evaluation = self
                .core
                .peek(pool, |p| {
                    let view = p.scaling_view(host_power);
                    Ok(evaluate(&view, &phase, &memory, now))
                })
                .map_err(|e| e.to_string());
            out.push(PoolStatus {
                pool: pool.clone(),
                phase: Some(phase.clone()),
                evaluation,
            });
        }
        Ok(out)
    }

    fn pool_memory(&self, pool: &str) -> PlanMemory {
        self.plans().memory.get(pool).cloned().unwrap_or_default()
    }

    /// The evaluator: every `serve --autoscale-interval`, soon after a
    /// plan changes, and [`SESSION_CHANGE_DEBOUNCE`] after sessions change
    /// (the core says when), until aborted with the ticker.
    pub async fn run(self: Arc<Self>) {
        let interval = self.interval.max(MIN_AUTOSCALE_INTERVAL);
        let mut sessions = self.core.session_changes();
        loop {
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                () = self.plan_changed.notified() => {}
                changed = sessions.changed() => {
                    if changed.is_err() {
                        // The core is gone: so is this broker.
                        return;
                    }
                    tokio::time::sleep(SESSION_CHANGE_DEBOUNCE.min(interval)).await;
                    sessions.mark_unchanged();
                }
            }
            if self.core.writer().failure().is_some() {
                continue;
            }
            self.evaluate_plans().await;
        }
    }

    /// One evaluation of every plan over every pool it serves.
    pub async fn evaluate_plans(self: &Arc<Self>) {
        for (name, plan) in self.all() {
            let phase = match phase_in_force(&plan, self.core.now_ms()) {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(plan = %name, error = %e, "cannot resolve the plan's phase");
                    continue;
                }
            };
            for pool in &plan.host_pools {
                if let Err(e) = self.evaluate_pool(pool, &phase).await {
                    match e {
                        BrokerError::PoolNotFound(_) => {}
                        e => tracing::warn!(plan = %name, %pool, error = %e,
                            "scaling plan evaluation failed"),
                    }
                }
            }
        }
    }

    /// Evaluates one pool and applies the actions, all in one batch with
    /// their records and the plan's memory; power drivers then run in the
    /// background. In phases: the hosts held back after failed power
    /// actions (`held_back`), then under the pool's lock the engine's
    /// decision (`decide`) and each action's effect with its record
    /// (`apply_action`), then, once the batch is durable, the notices and
    /// the power drivers (`carry_out`).
    async fn evaluate_pool(
        self: &Arc<Self>,
        pool: &str,
        phase: &ResolvedPhase,
    ) -> Result<(), BrokerError> {
        let memory = self.pool_memory(pool);
        let held = self.held_back(pool, self.core.now_ms());
        let (next_memory, applied) = self
            .core
            .write_with(pool, |p, now| {
                if p.config().host_pool_type != HostPoolType::Pooled {
                    return Ok(((memory.clone(), Applied::default()), Vec::new()));
                }
                let eval = decide(p, phase, &memory, now);
                let mut applied = Applied::default();
                let mut mutations = Vec::new();
                for a in &eval.actions {
                    if let Some(record) =
                        apply_action(p, a, &eval.figures, &held, now, &mut applied)?
                    {
                        mutations.push(Mutation::PutScalingAction { action: record });
                    }
                }
                if eval.memory != memory {
                    mutations.push(Mutation::PutPlanMemory {
                        pool: p.name().to_string(),
                        memory: eval.memory.clone(),
                    });
                }
                Ok(((eval.memory, applied), mutations))
            })
            .await?;
        self.plans().memory.insert(pool.to_string(), next_memory);
        self.carry_out(pool, applied).await;
        Ok(())
    }

    /// A10: the hosts of `pool` the plan does not start or stop before
    /// their pause after failed power actions is over.
    fn held_back(&self, pool: &str, now: TimestampMs) -> Vec<String> {
        self.backoff
            .lock_or_recover()
            .iter()
            .filter(|((p, _), v)| p == pool && v.until_ms > now)
            .map(|((_, h), _)| h.clone())
            .collect()
    }

    /// What follows a durable evaluation: each ramp-down notice is sent
    /// (A5), and each power action begun runs its driver in the background,
    /// a failure holding its host back ([`Autoscale::power_outcome`]).
    async fn carry_out(self: &Arc<Self>, pool: &str, applied: Applied) {
        for n in applied.notices {
            self.deliver_notice(
                n.record,
                &n.sessions,
                n.message.as_deref().unwrap_or_default(),
            )
            .await;
        }
        for b in applied.begun {
            let key = (pool.to_string(), b.record.session_host.clone());
            let handle = self.power.clone().spawn_finish(b);
            let autoscale = self.clone();
            tokio::spawn(async move {
                let ok = handle.await.unwrap_or(false);
                autoscale.power_outcome(key, ok);
            });
        }
    }

    /// A ramp-down's notice (A5): the message goes to every session of the
    /// drained host through its agent (`sendMessage`), and the record is
    /// completed: Succeeded when every session's message was queued,
    /// Failed (saying why) otherwise. The logoff after the wait does not
    /// depend on it.
    async fn deliver_notice(&self, mut record: ScalingAction, sessions: &[String], message: &str) {
        let mut queued = 0;
        let mut failures = Vec::new();
        for id in sessions {
            match self
                .messages
                .send(&record.pool, id, NOTICE_TITLE, message)
                .await
            {
                Ok(()) => queued += 1,
                Err(e) => failures.push(format!("{id}: {e}")),
            }
        }
        record.outcome = if failures.is_empty() {
            placement::ActionOutcome::Succeeded
        } else {
            placement::ActionOutcome::Failed
        };
        record.message = format!(
            "sent to {queued} of {} session(s) through the host's agent{}",
            sessions.len(),
            if failures.is_empty() {
                String::new()
            } else {
                format!("; not sent: {}", failures.join("; "))
            }
        );
        if record.message.len() > MAX_NOTICE_RECORD_BYTES {
            let cut = (0..=MAX_NOTICE_RECORD_BYTES)
                .rev()
                .find(|&i| record.message.is_char_boundary(i))
                .unwrap_or(0);
            record.message.truncate(cut);
        }
        let pool = record.pool.clone();
        let result = self
            .core
            .write_with(&pool, move |_, now| {
                record.finished_ms = Some(now);
                Ok(((), vec![Mutation::PutScalingAction { action: record }]))
            })
            .await;
        if let Err(e) = result {
            tracing::warn!(%pool, error = %e, "cannot record a ramp-down notice's delivery");
        }
    }

    /// Holds a host back after a failed power action, doubling the pause
    /// with each failure; forgets it after a success.
    fn power_outcome(&self, key: (String, String), ok: bool) {
        let mut b = self.backoff.lock_or_recover();
        if ok {
            b.remove(&key);
            return;
        }
        if !b.contains_key(&key) && b.len() >= MAX_BACKOFF_HOSTS {
            tracing::warn!(pool = %key.0, host = %key.1, "too many hosts held back; not this one");
            return;
        }
        let e = b.entry(key).or_insert(Backoff {
            failures: 0,
            until_ms: 0,
        });
        e.failures = e.failures.saturating_add(1);
        let pause = POWER_FAILURE_BACKOFF_BASE
            .saturating_mul(1u32 << e.failures.saturating_sub(1).min(16))
            .min(POWER_FAILURE_BACKOFF_MAX);
        e.until_ms = self.core.now_ms() + pause.as_millis() as TimestampMs;
    }
}

/// What an evaluation's batch leaves to do once it is durable.
#[derive(Default)]
struct Applied {
    /// Power actions begun (Pending), whose drivers are to run.
    begun: Vec<power::Begun>,
    /// Ramp-down notices to send.
    notices: Vec<Notice>,
}

/// A ramp-down notice (A5): its Pending record, the sessions of the
/// drained host, and the phase's message.
struct Notice {
    record: ScalingAction,
    sessions: Vec<String>,
    message: Option<String>,
}

/// The engine's decision for `p` under `phase` (A3–A7), with the pool's
/// placements switched to the phase's algorithm (A2), timed and counted.
fn decide(
    p: &mut placement::Pool,
    phase: &ResolvedPhase,
    memory: &PlanMemory,
    now: TimestampMs,
) -> Evaluation {
    p.set_plan_algorithm(Some(phase.load_balancing_algorithm));
    let started = std::time::Instant::now();
    let eval = {
        let view = p.scaling_view(host_power);
        evaluate(&view, phase, memory, now)
    };
    // The time the evaluation holds the pool (its placements wait).
    metrics::histogram!("deskbroker_autoscale_evaluation_seconds").record(started.elapsed());
    metrics::counter!("deskbroker_autoscale_evaluations_total").increment(1);
    eval
}

/// One action's effect on the pool, and its record with the evaluation's
/// figures (A10), for the same batch: a start or stop begins through the
/// power path of manual ones (a host `held` back is skipped, unrecorded);
/// a drain or undrain sets the host's `allowNewSession` and `drainedBy`; a
/// logoff ends the host's sessions; a notice is recorded Pending until
/// [`Autoscale::carry_out`] sends it.
fn apply_action(
    p: &mut placement::Pool,
    a: &Action,
    f: &Figures,
    held: &[String],
    now: TimestampMs,
    applied: &mut Applied,
) -> Result<Option<ScalingAction>, BrokerError> {
    let mut record = ScalingAction::new(
        p.name(),
        &a.session_host,
        kind_of(a.action),
        a.reason.to_string(),
        ACTOR,
        now,
    )
    .finished(placement::ActionOutcome::Succeeded, now);
    record.set_figures(f);
    let host = a.session_host.as_str();
    let sessions_of = |p: &placement::Pool| -> Vec<String> {
        p.sessions()
            .filter(|s| s.host == host)
            .map(|s| s.id.clone())
            .collect()
    };
    match a.action {
        ActionKind::Start | ActionKind::Stop => {
            if held.iter().any(|h| h == host) {
                return Ok(None);
            }
            let verb = power::verb_of(record.action)?;
            match power::begin(p, host, verb, true, ACTOR, record.reason.clone(), now) {
                Ok(mut b) => {
                    b.record.set_figures(f);
                    record = b.record.clone();
                    applied.begun.push(b);
                }
                Err(e) => {
                    record.outcome = placement::ActionOutcome::Failed;
                    record.message = e.to_string();
                }
            }
        }
        ActionKind::Drain | ActionKind::Undrain => {
            let drain = a.action == ActionKind::Drain;
            let mut spec = p.find_host(host)?.spec.clone();
            spec.allow_new_session = !drain;
            spec.drained_by = drain.then_some(DrainedBy::ScalingPlan);
            p.upsert_host(spec, now)?;
        }
        ActionKind::Logoff => {
            let ids = sessions_of(p);
            for id in &ids {
                p.logoff_for(id, placement::EndReason::ScalingLogoff)?;
            }
            record.message = format!("{} session(s) logged off", ids.len());
        }
        ActionKind::Notify => {
            // Delivered once the batch is durable: Pending until then.
            record.outcome = placement::ActionOutcome::Pending;
            record.finished_ms = None;
            record.message = NOTIFY_PENDING_MESSAGE.to_string();
            applied.notices.push(Notice {
                record: record.clone(),
                sessions: sessions_of(p),
                message: a.message.clone(),
            });
        }
    }
    tracing::info!(pool = %record.pool, host = %record.session_host,
        action = ?record.action, phase = ?f.phase, reason = %record.reason,
        "scaling plan action");
    Ok(Some(record))
}

/// The host's power facts the engine's view needs.
fn host_power(h: &placement::Host) -> HostPower<'_> {
    HostPower {
        power_state: h.power_state,
        drained_by: h.spec.drained_by,
        tags: &h.spec.tags,
    }
}

fn kind_of(a: ActionKind) -> ScalingActionKind {
    match a {
        ActionKind::Start => ScalingActionKind::Start,
        ActionKind::Stop => ScalingActionKind::Stop,
        ActionKind::Drain => ScalingActionKind::Drain,
        ActionKind::Undrain => ScalingActionKind::Undrain,
        ActionKind::Notify => ScalingActionKind::Notify,
        ActionKind::Logoff => ScalingActionKind::Logoff,
    }
}

fn not_found(name: &str) -> BrokerError {
    BrokerError::NotFound(format!("scaling plan {name} does not exist"))
}
