//! Conformance cases for autoscale's state: power actions' records,
//! scaling plans, and each pool's plan memory.

use super::{Opener, counters, pool, scaling_action, scaling_plan, seed_batch};
use crate::Mutation;

/// Rule A10: power actions' records are put, replaced by their outcome,
/// queried newest first by pool, pending or page, deleted with their pool
/// and pruned by the audit log's bounds.
pub async fn scaling_actions_are_put_replaced_queried_and_pruned(open: Opener<'_>) {
    use crate::{ScalingAction, ScalingActionQuery};
    use placement::ActionOutcome;
    let case = "scaling_actions_are_put_replaced_queried_and_pruned";
    let store = open("scaling-actions");
    store
        .apply(
            vec![
                Mutation::PutPool {
                    config: pool("p"),
                    counters: counters(1),
                },
                Mutation::PutPool {
                    config: pool("q"),
                    counters: counters(1),
                },
            ]
            .into(),
        )
        .await
        .expect("pools");
    let batch: Vec<Mutation> = (1..=6)
        .map(|n| Mutation::PutScalingAction {
            action: scaling_action(n, if n % 2 == 0 { "q" } else { "p" }),
        })
        .collect();
    store.apply(batch.into()).await.expect("put");
    // The outcome replaces the record, in its place.
    let mut done = scaling_action(3, "p");
    done.outcome = ActionOutcome::Succeeded;
    done.message = "started".into();
    done.finished_ms = Some(3_500);
    store
        .apply(
            vec![Mutation::PutScalingAction {
                action: done.clone(),
            }]
            .into(),
        )
        .await
        .expect("replace");
    drop(store);
    let store = open("scaling-actions");
    let q = |pool: Option<&str>, pending_only: bool, before: Option<&str>, limit: usize| {
        ScalingActionQuery {
            pool: pool.map(str::to_string),
            pending_only,
            before_id: before.map(str::to_string),
            limit,
        }
    };
    let hosts = |v: Vec<ScalingAction>| v.into_iter().map(|a| a.session_host).collect::<Vec<_>>();
    let of_p = store
        .scaling_actions(q(Some("p"), false, None, 100))
        .await
        .expect("query");
    assert_eq!(of_p[1], done, "{case}: the outcome is kept");
    assert_eq!(
        hosts(of_p),
        ["h5", "h3", "h1"],
        "{case}: newest first, one pool"
    );
    let page = store
        .scaling_actions(q(None, false, None, 2))
        .await
        .expect("query");
    assert_eq!(hosts(page.clone()), ["h6", "h5"], "{case}: limit");
    let next = store
        .scaling_actions(q(None, false, Some(&page[1].id), 2))
        .await
        .expect("query");
    assert_eq!(
        hosts(next),
        ["h4", "h3"],
        "{case}: continues below the last id"
    );
    let pending = store
        .scaling_actions(q(None, true, None, 100))
        .await
        .expect("query");
    assert_eq!(
        hosts(pending),
        ["h6", "h5", "h4", "h2", "h1"],
        "{case}: pending only"
    );
    // Deleting a pool deletes its records.
    store
        .apply(vec![Mutation::DeletePool { pool: "q".into() }].into())
        .await
        .expect("delete pool");
    let all = store
        .scaling_actions(q(None, false, None, 100))
        .await
        .expect("query");
    assert_eq!(hosts(all), ["h5", "h3", "h1"], "{case}: with their pool");
    // The audit log's bounds apply: older than 2,000 s goes; then all but 1.
    store
        .apply(
            vec![Mutation::PruneAudit {
                older_than_ms: 2_000,
                max_rows: u64::MAX,
                max_bytes: u64::MAX,
            }]
            .into(),
        )
        .await
        .expect("prune by age");
    let all = store
        .scaling_actions(q(None, false, None, 100))
        .await
        .expect("query");
    assert_eq!(hosts(all), ["h5", "h3"], "{case}: pruned by age");
    store
        .apply(
            vec![Mutation::PruneAudit {
                older_than_ms: 0,
                max_rows: 1,
                max_bytes: u64::MAX,
            }]
            .into(),
        )
        .await
        .expect("prune by count");
    let all = store
        .scaling_actions(q(None, false, None, 100))
        .await
        .expect("query");
    assert_eq!(hosts(all), ["h5"], "{case}: pruned by count");
}

/// Rules A1–A7 and A10: plans are created, replaced and deleted by name;
/// a pool's plan memory is replaced, and goes with its pool.
pub async fn scaling_plans_and_plan_memory_are_kept(open: Opener<'_>) {
    use placement::autoscale::{HostMemory, PlanMemory};
    let store = open("plans");
    store.apply(seed_batch("p1").into()).await.expect("apply");
    store.apply(seed_batch("p2").into()).await.expect("apply");
    let mut memory = PlanMemory::default();
    memory.hosts.insert(
        "h1".into(),
        HostMemory {
            notified_at_ms: Some(1_000),
            logged_off_at_ms: None,
        },
    );
    let mut later = memory.clone();
    later.hosts.get_mut("h1").expect("h1").logged_off_at_ms = Some(2_000);
    store
        .apply(
            vec![
                Mutation::PutScalingPlan {
                    name: "b".into(),
                    plan: scaling_plan(&["p1"]),
                },
                Mutation::PutScalingPlan {
                    name: "a".into(),
                    plan: scaling_plan(&[]),
                },
                Mutation::PutScalingPlan {
                    name: "c".into(),
                    plan: scaling_plan(&[]),
                },
                Mutation::PutPlanMemory {
                    pool: "p1".into(),
                    memory: memory.clone(),
                },
                Mutation::PutPlanMemory {
                    pool: "p2".into(),
                    memory: memory.clone(),
                },
                // Replaced in the same batch: the last one holds.
                Mutation::PutPlanMemory {
                    pool: "p1".into(),
                    memory: later.clone(),
                },
                Mutation::PutScalingPlan {
                    name: "b".into(),
                    plan: scaling_plan(&["p1", "p2"]),
                },
                Mutation::DeleteScalingPlan { name: "c".into() },
            ]
            .into(),
        )
        .await
        .expect("apply plans");
    // Plan memory of a missing pool is refused, and the batch changes nothing.
    let refused = store
        .apply(
            vec![
                Mutation::DeleteScalingPlan { name: "a".into() },
                Mutation::PutPlanMemory {
                    pool: "nope".into(),
                    memory: memory.clone(),
                },
            ]
            .into(),
        )
        .await;
    assert!(
        refused.is_err(),
        "plan memory of a missing pool: {refused:?}"
    );
    drop(store);
    let store = open("plans");
    let snap = store.load().await.expect("load");
    let names: Vec<_> = snap.scaling_plans.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["a", "b"],
        "plans come back in name order, c deleted"
    );
    assert_eq!(snap.scaling_plans[1].plan, scaling_plan(&["p1", "p2"]));
    assert_eq!(
        snap.plan_memories,
        [("p1".to_string(), later), ("p2".to_string(), memory)]
    );
    store
        .apply(vec![Mutation::DeletePool { pool: "p1".into() }].into())
        .await
        .expect("delete pool");
    let snap = store.load().await.expect("load");
    let pools: Vec<_> = snap.plan_memories.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(pools, ["p2"], "a pool's plan memory goes with it");
    assert_eq!(
        snap.scaling_plans.len(),
        2,
        "plans stay: the broker edits them"
    );
}
