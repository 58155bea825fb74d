//! The conformance suite every [`Store`] backend must pass (in the manner
//! of Garage's `test_suite(db)`): the same cases, run by each backend's
//! tests, so the broker can rely on one behaviour whatever the store.
//!
//! `open(case)` must open the storage named `case`: fresh the first time a
//! name is used, and the same storage again when called again with that
//! name (that is how durability across a reopen is checked).

use placement::{
    Host, HostMetrics, HostPoolType, HostSpec, HostStatus, LoadBalancerType, PoolConfig,
    PoolCounters, Session, SessionState,
};

use crate::{
    ApiCredential, AuditEntry, AuditQuery, HostCredential, Mutation, RegistrationToken, Store,
};

/// Opens the storage named by the case (see the module documentation).
pub type Opener<'a> = &'a (dyn Fn(&str) -> Box<dyn Store> + Sync);

/// Runs every case; panics (as a test should) on the first failure, naming it.
pub async fn run_all(open: Opener<'_>) {
    empty_store_loads_empty(open).await;
    everything_comes_back_after_reopen(open).await;
    a_failing_batch_changes_nothing(open).await;
    a_relaxed_batch_is_committed_in_order_and_all_or_nothing(open).await;
    deletes_cascade(open).await;
    puts_replace_and_counters_update(open).await;
    a_token_keeps_its_bound_and_count(open).await;
    api_credentials_are_kept_replaced_and_revoked(open).await;
    the_audit_log_is_appended_queried_newest_first_and_paged(open).await;
    an_audit_entry_commits_with_its_batch_or_not_at_all(open).await;
    the_audit_log_is_pruned_by_age_and_count(open).await;
    the_audit_log_is_pruned_by_bytes_oldest_first(open).await;
    scaling_actions_are_put_replaced_queried_and_pruned(open).await;
    new_host_fields_come_back(open).await;
    scaling_plans_and_plan_memory_are_kept(open).await;
    signing_keys_are_kept_and_replaced(open).await;
}

/// Rules T3 and R3: the broker's signing keys are absent until put, come
/// back after a reopen, and a rotation replaces the whole set.
async fn signing_keys_are_kept_and_replaced(open: Opener<'_>) {
    use crate::{SigningKey, SigningKeys};
    let store = open("signing");
    assert_eq!(store.load().await.expect("load").signing_keys, None);
    let first = SigningKey {
        secret: "ab".repeat(32),
        created_ms: 1_000,
        retired_ms: None,
    };
    let one = SigningKeys {
        keys: vec![first.clone()],
    };
    store
        .apply(vec![Mutation::PutSigningKeys { keys: one.clone() }].into())
        .await
        .expect("put keys");
    drop(store);
    let store = open("signing");
    assert_eq!(store.load().await.expect("load").signing_keys, Some(one));
    let rotated = SigningKeys {
        keys: vec![
            SigningKey {
                secret: "cd".repeat(32),
                created_ms: 2_000,
                retired_ms: None,
            },
            SigningKey {
                retired_ms: Some(2_000),
                ..first
            },
        ],
    };
    store
        .apply(
            vec![Mutation::PutSigningKeys {
                keys: rotated.clone(),
            }]
            .into(),
        )
        .await
        .expect("rotate keys");
    drop(store);
    assert_eq!(
        open("signing").load().await.expect("load").signing_keys,
        Some(rotated)
    );
}

/// A scaling plan serving `pools`, as the contract's example writes it.
pub fn scaling_plan(pools: &[&str]) -> placement::autoscale::ScalingPlan {
    serde_json::from_value(serde_json::json!({
        "timeZone": "Europe/Stockholm",
        "hostPools": pools,
        "exclusionTag": "no-autoscale",
        "schedules": [{
            "name": "weekdays",
            "daysOfWeek": ["Monday", "Tuesday"],
            "rampUpStartTime": "07:00", "rampUpLoadBalancingAlgorithm": "BreadthFirst",
            "rampUpMinimumHostsPct": 20, "rampUpCapacityThresholdPct": 60,
            "peakStartTime": "09:00", "peakLoadBalancingAlgorithm": "DepthFirst",
            "rampDownStartTime": "17:00", "rampDownLoadBalancingAlgorithm": "DepthFirst",
            "rampDownMinimumHostsPct": 10, "rampDownCapacityThresholdPct": 90,
            "rampDownNotificationMessage": "Please save your work — ünïcode.",
            "offPeakStartTime": "20:00", "offPeakLoadBalancingAlgorithm": "DepthFirst"
        }]
    }))
    .expect("a valid plan")
}

/// Rules A1–A7 and A10: plans are created, replaced and deleted by name;
/// a pool's plan memory is replaced, and goes with its pool.
async fn scaling_plans_and_plan_memory_are_kept(open: Opener<'_>) {
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

/// A power action's record (rule A10), numbered so ids sort by `n`.
pub fn scaling_action(n: u32, pool: &str) -> crate::ScalingAction {
    crate::ScalingAction {
        id: format!("0190a000-0000-7000-8000-{n:012}"),
        pool: pool.into(),
        time_ms: i64::from(n) * 1_000,
        phase: None,
        action: placement::ScalingActionKind::Start,
        session_host: format!("h{n}"),
        reason: "operator — ünïcode".into(),
        used_capacity_pct: None,
        threshold_pct: Some(60),
        running_hosts: Some(2),
        minimum_hosts: None,
        outcome: placement::ActionOutcome::Pending,
        message: String::new(),
        actor: Some("admin".into()),
        finished_ms: None,
        attempts: 0,
    }
}

async fn scaling_actions_are_put_replaced_queried_and_pruned(open: Opener<'_>) {
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

async fn new_host_fields_come_back(open: Opener<'_>) {
    let case = "new_host_fields_come_back";
    let store = open("host-fields");
    let mut h = host("h1", 1);
    h.spec.tags = vec!["no-autoscale".into()];
    h.spec.mac_address = Some("52:54:00:ab:cd:01".into());
    h.spec.allow_new_session = false;
    h.spec.drained_by = Some(placement::DrainedBy::Operator);
    h.power_state = placement::PowerState::Stopped;
    h.start_requested_ms = Some(1_700_000_000_500);
    h.heartbeat_source = Some(placement::HeartbeatSource::WindowsExporter);
    h.scrape_error = Some("windows_exporter 0.30.5 is too old — ünïcode".into());
    let mut config = pool("p");
    config.start_vm_on_connect = true;
    config.power_settings.driver = placement::PowerDriver::Command;
    config.power_settings.power_on_command = Some("virsh start \"$DESKBROKER_HOST\"".into());
    store
        .apply(
            vec![
                Mutation::PutPool {
                    config: config.clone(),
                    counters: counters(2),
                },
                Mutation::PutHost {
                    pool: "p".into(),
                    host: h.clone(),
                },
            ]
            .into(),
        )
        .await
        .expect("apply");
    drop(store);
    let store = open("host-fields");
    let snap = store.load().await.expect("load");
    assert_eq!(snap.pools[0].config, config, "{case}: pool");
    assert_eq!(snap.pools[0].hosts, vec![h], "{case}: host");
}

pub fn pool(name: &str) -> PoolConfig {
    let mut c = PoolConfig::new(name, HostPoolType::Pooled, LoadBalancerType::DepthFirst);
    c.max_session_limit = 10;
    c.description = "conformance — ünïcode".into();
    c
}

pub fn host(name: &str, seq: u64) -> Host {
    Host {
        seq,
        spec: HostSpec::new(name, &format!("10.0.0.{seq}:3389")),
        registered_at_ms: 1_700_000_000_000 + seq as i64,
        last_heartbeat_ms: Some(1_700_000_100_000),
        metrics: Some(HostMetrics {
            cpu_percent: Some(29.0),
            ..HostMetrics::default()
        }),
        power_state: placement::PowerState::Running,
        start_requested_ms: None,
        status: HostStatus::Available,
        sessions: 0,
        connecting_sessions: 0,
        disconnected_sessions: 0,
        load_index: placement::load_index::UNKNOWN,
        logons_since_heartbeat: 0,
        heartbeat_source: None,
        scrape_error: None,
    }
}

pub fn session(id: &str, host: &str, user: &str) -> Session {
    Session {
        id: id.into(),
        host: host.into(),
        user: user.into(),
        state: SessionState::Active,
        create_time_ms: 1_700_000_200_000,
        state_since_ms: 1_700_000_300_000,
        awaiting_logon: false,
    }
}

fn counters(n: u64) -> PoolCounters {
    PoolCounters {
        next_seq: n,
        random_seed: 0xdead_beef,
        random_draws: n * 7,
        last_served_seq: n + 1,
    }
}

fn seed_batch(p: &str) -> Vec<Mutation> {
    vec![
        Mutation::PutPool {
            config: pool(p),
            counters: counters(3),
        },
        // Registered out of name order: query order is seq, not name.
        Mutation::PutHost {
            pool: p.into(),
            host: host("h2", 1),
        },
        Mutation::PutHost {
            pool: p.into(),
            host: host("h1", 2),
        },
        Mutation::PutSession {
            pool: p.into(),
            session: session("s1", "h2", "alice@contoso.com"),
        },
        Mutation::PutSession {
            pool: p.into(),
            session: session("s2", "h1", "bob@contoso.com"),
        },
        Mutation::PutRegistrationToken {
            pool: p.into(),
            token: token("aa", 5),
        },
        Mutation::PutHostCredential {
            pool: p.into(),
            credential: credential("h2", "c2"),
        },
        Mutation::PutHostCredential {
            pool: p.into(),
            credential: credential("h1", "c1"),
        },
    ]
}

fn token(hash: &str, expires_ms: i64) -> RegistrationToken {
    RegistrationToken {
        hash: hash.into(),
        expires_ms,
        max_hosts: 3,
        used_hosts: 1,
    }
}

fn credential(host: &str, hash: &str) -> HostCredential {
    HostCredential {
        host: host.into(),
        hash: hash.into(),
    }
}

async fn empty_store_loads_empty(open: Opener<'_>) {
    let store = open("empty");
    let snap = store.load().await.expect("load");
    assert!(snap.pools.is_empty(), "empty_store_loads_empty: {snap:?}");
}

async fn everything_comes_back_after_reopen(open: Opener<'_>) {
    let store = open("reopen");
    store.apply(seed_batch("p1").into()).await.expect("apply");
    store.apply(seed_batch("p0").into()).await.expect("apply");
    drop(store);
    let snap = open("reopen").load().await.expect("load");
    let names: Vec<_> = snap.pools.iter().map(|p| p.config.name.as_str()).collect();
    assert_eq!(names, ["p0", "p1"], "pools come back in name order");
    let p = &snap.pools[1];
    assert_eq!(p.config, pool("p1"));
    assert_eq!(p.counters, counters(3));
    let hosts: Vec<_> = p.hosts.iter().map(|h| h.spec.name.as_str()).collect();
    assert_eq!(hosts, ["h2", "h1"], "hosts come back in query order");
    assert_eq!(p.hosts[0], host("h2", 1), "a host comes back whole");
    assert_eq!(p.registration_tokens, [token("aa", 5)]);
    assert_eq!(
        p.host_credentials,
        [credential("h1", "c1"), credential("h2", "c2")]
    );
    let mut sessions = p.sessions.clone();
    sessions.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(
        sessions,
        [
            session("s1", "h2", "alice@contoso.com"),
            session("s2", "h1", "bob@contoso.com")
        ]
    );
}

async fn a_failing_batch_changes_nothing(open: Opener<'_>) {
    let store = open("atomic");
    store.apply(seed_batch("p").into()).await.expect("apply");
    let before = store.load().await.expect("load");
    let bad = vec![
        Mutation::PutHost {
            pool: "p".into(),
            host: host("h3", 3),
        },
        Mutation::DeleteSession {
            pool: "p".into(),
            id: "s1".into(),
        },
        // The host does not exist: the whole batch must be refused.
        Mutation::PutSession {
            pool: "p".into(),
            session: session("s9", "nope", "carol"),
        },
    ];
    assert!(
        store.apply(bad.into()).await.is_err(),
        "a session on a missing host is refused"
    );
    let missing_pool = vec![Mutation::PutCounters {
        pool: "nope".into(),
        counters: counters(1),
    }];
    assert!(
        store.apply(missing_pool.into()).await.is_err(),
        "counters of a missing pool are refused"
    );
    let after = store.load().await.expect("load");
    assert_eq!(before, after, "a failing batch leaves nothing behind");
}

/// A relaxed batch ([`Store::apply_relaxed`]) may reach the disk later,
/// but it is committed when the call returns: a reopened store (a
/// restarted broker) has it, in order with the ordinary batches around
/// it, and a failing one changes nothing.
async fn a_relaxed_batch_is_committed_in_order_and_all_or_nothing(open: Opener<'_>) {
    let store = open("relaxed");
    store.apply(seed_batch("p").into()).await.expect("apply");
    let mut marked = session("s1", "h2", "alice@contoso.com");
    marked.state = SessionState::Disconnected;
    marked.state_since_ms += 1_000;
    store
        .apply_relaxed(
            vec![Mutation::PutSession {
                pool: "p".into(),
                session: marked.clone(),
            }]
            .into(),
        )
        .await
        .expect("relaxed");
    store
        .apply(
            vec![Mutation::PutSession {
                pool: "p".into(),
                session: session("s3", "h1", "carol@contoso.com"),
            }]
            .into(),
        )
        .await
        .expect("ordinary after relaxed");
    store
        .apply_relaxed(
            vec![Mutation::DeleteSession {
                pool: "p".into(),
                id: "s2".into(),
            }]
            .into(),
        )
        .await
        .expect("relaxed after ordinary");
    let bad = vec![
        Mutation::DeleteSession {
            pool: "p".into(),
            id: "s3".into(),
        },
        Mutation::PutSession {
            pool: "p".into(),
            session: session("s9", "nope", "dave"),
        },
    ];
    assert!(
        store.apply_relaxed(bad.into()).await.is_err(),
        "a relaxed batch with a session on a missing host is refused"
    );
    drop(store);
    let snap = open("relaxed").load().await.expect("load");
    let mut sessions = snap.pools[0].sessions.clone();
    sessions.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(
        sessions,
        [marked, session("s3", "h1", "carol@contoso.com")],
        "both relaxed batches and the ordinary one are kept, the refused one is not"
    );
}

async fn deletes_cascade(open: Opener<'_>) {
    let store = open("cascade");
    store.apply(seed_batch("p").into()).await.expect("apply");
    store.apply(seed_batch("q").into()).await.expect("apply");
    store
        .apply(
            vec![Mutation::DeleteHost {
                pool: "p".into(),
                host: "h2".into(),
            }]
            .into(),
        )
        .await
        .expect("delete host");
    let snap = store.load().await.expect("load");
    let p = &snap.pools[0];
    assert_eq!(p.hosts.len(), 1);
    assert_eq!(
        p.sessions.len(),
        1,
        "the deleted host's session went with it"
    );
    assert_eq!(p.sessions[0].id, "s2");
    assert_eq!(
        p.host_credentials,
        [credential("h1", "c1")],
        "and its credential"
    );
    store
        .apply(
            vec![
                Mutation::PutHostCredential {
                    pool: "p".into(),
                    credential: credential("h1", "c1-new"),
                },
                Mutation::DeleteRegistrationTokens { pool: "p".into() },
            ]
            .into(),
        )
        .await
        .expect("replace credential, revoke tokens");
    let snap = store.load().await.expect("load");
    assert_eq!(
        snap.pools[0].host_credentials,
        [credential("h1", "c1-new")],
        "one credential a host"
    );
    assert!(
        snap.pools[0].registration_tokens.is_empty(),
        "tokens revoked"
    );
    store
        .apply(vec![Mutation::DeletePool { pool: "p".into() }].into())
        .await
        .expect("delete pool");
    let snap = store.load().await.expect("load");
    assert_eq!(snap.pools.len(), 1);
    assert_eq!(snap.pools[0].config.name, "q");
    assert_eq!(snap.pools[0].sessions.len(), 2, "other pools are untouched");
}

async fn puts_replace_and_counters_update(open: Opener<'_>) {
    let store = open("replace");
    store.apply(seed_batch("p").into()).await.expect("apply");
    let mut cfg = pool("p");
    cfg.max_session_limit = 3;
    let mut h = host("h1", 2);
    h.spec.allow_new_session = false;
    let mut s = session("s1", "h2", "alice@contoso.com");
    s.state = SessionState::Disconnected;
    store
        .apply(
            vec![
                Mutation::PutPool {
                    config: cfg.clone(),
                    counters: counters(3),
                },
                Mutation::PutCounters {
                    pool: "p".into(),
                    counters: counters(9),
                },
                Mutation::PutHost {
                    pool: "p".into(),
                    host: h.clone(),
                },
                Mutation::PutSession {
                    pool: "p".into(),
                    session: s.clone(),
                },
            ]
            .into(),
        )
        .await
        .expect("apply");
    let snap = store.load().await.expect("load");
    let p = &snap.pools[0];
    assert_eq!(p.config, cfg);
    assert_eq!(p.counters, counters(9));
    assert_eq!(p.hosts.len(), 2, "a put of an existing host replaces it");
    assert_eq!(p.hosts[1], h);
    assert_eq!(p.sessions.iter().find(|x| x.id == "s1"), Some(&s));
    assert_eq!(p.sessions.len(), 2);
}

/// A registration token's bound and how much of it is used survive a
/// reopen, and a put of the same token replaces its count (the broker puts
/// it again each time the token registers a host), also twice in a batch.
async fn a_token_keeps_its_bound_and_count(open: Opener<'_>) {
    let store = open("token-count");
    store.apply(seed_batch("p").into()).await.expect("apply");
    let used = |n: u32| Mutation::PutRegistrationToken {
        pool: "p".into(),
        token: RegistrationToken {
            hash: "aa".into(),
            expires_ms: 5,
            max_hosts: 300,
            used_hosts: n,
        },
    };
    store
        .apply(vec![used(2), used(3)].into())
        .await
        .expect("apply");
    drop(store);
    let snap = open("token-count").load().await.expect("load");
    assert_eq!(
        snap.pools[0].registration_tokens,
        [RegistrationToken {
            hash: "aa".into(),
            expires_ms: 5,
            max_hosts: 300,
            used_hosts: 3,
        }],
        "a_token_keeps_its_bound_and_count"
    );
    // One token is forgotten by its hash; the pool's others stay.
    let store = open("token-count");
    let other = RegistrationToken {
        hash: "bb".into(),
        expires_ms: 9,
        max_hosts: 1,
        used_hosts: 0,
    };
    store
        .apply(
            vec![
                Mutation::PutRegistrationToken {
                    pool: "p".into(),
                    token: other.clone(),
                },
                Mutation::DeleteRegistrationToken {
                    pool: "p".into(),
                    hash: "aa".into(),
                },
            ]
            .into(),
        )
        .await
        .expect("apply");
    drop(store);
    let snap = open("token-count").load().await.expect("load");
    assert_eq!(
        snap.pools[0].registration_tokens,
        [other],
        "one registration token deleted"
    );
}

/// Rule T1: API credentials survive a reopen, a put replaces one by name,
/// a delete revokes it, and they do not depend on any pool.
async fn api_credentials_are_kept_replaced_and_revoked(open: Opener<'_>) {
    let cred = |name: &str, role: &str, pools: &[&str], expires_ms: Option<i64>| ApiCredential {
        name: name.into(),
        role: role.into(),
        host_pools: pools.iter().map(|p| p.to_string()).collect(),
        expires_ms,
        hash: format!("hash-of-{name}-{role}"),
        // Some credentials carry their own rate limit (T4); it is kept.
        rate_limit_per_second: (role == "portal").then_some(250),
    };
    let store = open("api-credentials");
    let put = |c: ApiCredential| Mutation::PutApiCredential { credential: c };
    store
        .apply(
            vec![
                put(cred("zeta", "reader", &[], None)),
                put(cred("alpha", "operator", &["p1", "p2"], Some(7))),
                put(cred("gone", "admin", &[], None)),
            ]
            .into(),
        )
        .await
        .expect("apply");
    store
        .apply(
            vec![
                put(cred("zeta", "portal", &["p3"], Some(9))),
                Mutation::DeleteApiCredential {
                    name: "gone".into(),
                },
            ]
            .into(),
        )
        .await
        .expect("apply");
    drop(store);
    let snap = open("api-credentials").load().await.expect("load");
    assert_eq!(
        snap.credentials,
        [
            cred("alpha", "operator", &["p1", "p2"], Some(7)),
            cred("zeta", "portal", &["p3"], Some(9)),
        ],
        "api_credentials_are_kept_replaced_and_revoked"
    );
    assert!(
        snap.pools.is_empty(),
        "api_credentials_are_kept_replaced_and_revoked: no pools"
    );
}

/// An audit entry at `time_ms` by `actor`, on `pool` if any.
pub fn audit_entry(time_ms: i64, actor: &str, pool: Option<&str>) -> AuditEntry {
    AuditEntry {
        time_ms,
        actor: actor.into(),
        action: format!(
            "PATCH /api/v1/hostPools/{}/sessionHosts/h1",
            pool.unwrap_or("-")
        ),
        target: "hostPools/p/sessionHosts/h1".into(),
        host_pool: pool.map(str::to_string),
        before: crate::Rendered::of(
            &serde_json::json!({"allowNewSession": true, "note": "ünïcode"}),
        ),
        after: None,
        outcome: 200,
        source: Some("127.0.0.1:5000".into()),
    }
}

fn append(entry: AuditEntry) -> Mutation {
    Mutation::AppendAudit { entry }
}

/// Rule T5: entries survive a reopen and come back whole, newest first;
/// each filter narrows; a page continues below the last id it showed.
async fn the_audit_log_is_appended_queried_newest_first_and_paged(open: Opener<'_>) {
    let case = "the_audit_log_is_appended_queried_newest_first_and_paged";
    let store = open("audit-query");
    let mut batch = seed_batch("p");
    batch.push(append(audit_entry(1_000, "admin", Some("p"))));
    batch.push(append(audit_entry(2_000, "credential:ops", Some("q"))));
    store.apply(batch.into()).await.expect("apply");
    store
        .apply(
            vec![
                append(audit_entry(3_000, "admin", None)),
                append(audit_entry(4_000, "credential:ops", Some("p"))),
                append(audit_entry(5_000, "admin", Some("p"))),
            ]
            .into(),
        )
        .await
        .expect("apply");
    drop(store);
    let store = open("audit-query");
    let times = |rows: &[crate::AuditRow]| rows.iter().map(|r| r.entry.time_ms).collect::<Vec<_>>();
    let all = store
        .audit(AuditQuery {
            limit: 100,
            ..AuditQuery::default()
        })
        .await
        .expect("query");
    assert_eq!(
        times(&all),
        [5_000, 4_000, 3_000, 2_000, 1_000],
        "{case}: newest first"
    );
    assert_eq!(
        all[4].entry,
        audit_entry(1_000, "admin", Some("p")),
        "{case}: whole"
    );
    assert!(
        all.windows(2).all(|w| w[0].id > w[1].id),
        "{case}: ids grow"
    );
    let q = |f: &dyn Fn(&mut AuditQuery)| {
        let mut q = AuditQuery {
            limit: 100,
            ..AuditQuery::default()
        };
        f(&mut q);
        q
    };
    let got = store
        .audit(q(&|q| q.since_ms = Some(3_000)))
        .await
        .expect("since");
    assert_eq!(times(&got), [5_000, 4_000, 3_000], "{case}: since");
    let got = store
        .audit(q(&|q| q.actor = Some("credential:ops".into())))
        .await
        .expect("actor");
    assert_eq!(times(&got), [4_000, 2_000], "{case}: actor");
    let got = store
        .audit(q(&|q| q.host_pool = Some("p".into())))
        .await
        .expect("pool");
    assert_eq!(times(&got), [5_000, 4_000, 1_000], "{case}: pool");
    let got = store
        .audit(q(&|q| q.within_pools = Some(vec!["q".into(), "x".into()])))
        .await
        .expect("within");
    assert_eq!(
        times(&got),
        [2_000],
        "{case}: within pools (no entry without a pool)"
    );
    let got = store
        .audit(q(&|q| q.within_pools = Some(Vec::new())))
        .await
        .expect("within none");
    assert!(got.is_empty(), "{case}: within no pool");
    let got = store
        .audit(q(&|q| {
            q.actor = Some("admin".into());
            q.host_pool = Some("p".into());
            q.since_ms = Some(2_000);
        }))
        .await
        .expect("all filters");
    assert_eq!(times(&got), [5_000], "{case}: filters combine");
    // Pages of two: [5000, 4000], then below 4000's id [3000, 2000], [1000].
    let mut pages = Vec::new();
    let mut before_id = None;
    loop {
        let page = store
            .audit(q(&|q| {
                q.limit = 2;
                q.before_id = before_id;
            }))
            .await
            .expect("page");
        if page.is_empty() {
            break;
        }
        before_id = page.last().map(|r| r.id);
        pages.push(times(&page));
    }
    assert_eq!(
        pages,
        [vec![5_000, 4_000], vec![3_000, 2_000], vec![1_000]],
        "{case}: pages"
    );
    let got = store
        .audit(q(&|q| q.limit = usize::MAX))
        .await
        .expect("huge limit");
    assert_eq!(got.len(), 5, "{case}: a huge limit is capped, not an error");
}

/// An audit entry in a batch that fails is not kept, and one in a batch
/// that commits is kept with the change it records.
async fn an_audit_entry_commits_with_its_batch_or_not_at_all(open: Opener<'_>) {
    let case = "an_audit_entry_commits_with_its_batch_or_not_at_all";
    let store = open("audit-atomic");
    store.apply(seed_batch("p").into()).await.expect("apply");
    let bad = vec![
        append(audit_entry(1_000, "admin", Some("p"))),
        Mutation::PutSession {
            pool: "p".into(),
            session: session("s9", "nope", "carol"),
        },
    ];
    assert!(store.apply(bad.into()).await.is_err(), "{case}: refused");
    let all = || AuditQuery {
        limit: 100,
        ..AuditQuery::default()
    };
    assert!(
        store.audit(all()).await.expect("query").is_empty(),
        "{case}: nothing kept"
    );
    let mut h = host("h1", 2);
    h.spec.allow_new_session = false;
    store
        .apply(
            vec![
                Mutation::PutHost {
                    pool: "p".into(),
                    host: h.clone(),
                },
                append(audit_entry(2_000, "admin", Some("p"))),
            ]
            .into(),
        )
        .await
        .expect("apply");
    drop(store);
    let store = open("audit-atomic");
    let snap = store.load().await.expect("load");
    assert_eq!(snap.pools[0].hosts[1], h, "{case}: the change");
    let got = store.audit(all()).await.expect("query");
    assert_eq!(got.len(), 1, "{case}: and its entry");
    assert_eq!(got[0].entry.time_ms, 2_000, "{case}");
}

/// Retention: a prune removes entries older than its cutoff and all but
/// the newest `max_rows`, and leaves the rest.
async fn the_audit_log_is_pruned_by_age_and_count(open: Opener<'_>) {
    let case = "the_audit_log_is_pruned_by_age_and_count";
    let store = open("audit-prune");
    let batch: Vec<Mutation> = (1..=10)
        .map(|i| append(audit_entry(i * 1_000, "admin", Some("p"))))
        .collect();
    store.apply(batch.into()).await.expect("apply");
    let all = || AuditQuery {
        limit: 100,
        ..AuditQuery::default()
    };
    let times =
        |rows: Vec<crate::AuditRow>| rows.iter().map(|r| r.entry.time_ms).collect::<Vec<_>>();
    // Older than 3,000: 1,000 and 2,000 go.
    store
        .apply(
            vec![Mutation::PruneAudit {
                older_than_ms: 3_000,
                max_rows: u64::MAX,
                max_bytes: u64::MAX,
            }]
            .into(),
        )
        .await
        .expect("prune by age");
    assert_eq!(
        times(store.audit(all()).await.expect("query")),
        [10_000, 9_000, 8_000, 7_000, 6_000, 5_000, 4_000, 3_000],
        "{case}: by age"
    );
    // At most 3 rows, with an append in the same batch: the newest 3 stay.
    store
        .apply(
            vec![
                append(audit_entry(11_000, "admin", None)),
                Mutation::PruneAudit {
                    older_than_ms: 0,
                    max_rows: 3,
                    max_bytes: u64::MAX,
                },
            ]
            .into(),
        )
        .await
        .expect("prune by count");
    drop(store);
    let store = open("audit-prune");
    assert_eq!(
        times(store.audit(all()).await.expect("query")),
        [11_000, 10_000, 9_000],
        "{case}: by count"
    );
    store
        .apply(
            vec![Mutation::PruneAudit {
                older_than_ms: i64::MAX,
                max_rows: 0,
                max_bytes: u64::MAX,
            }]
            .into(),
        )
        .await
        .expect("prune all");
    assert!(
        store.audit(all()).await.expect("query").is_empty(),
        "{case}: emptied"
    );
    store
        .apply(vec![append(audit_entry(12_000, "admin", None))].into())
        .await
        .expect("append after emptying");
    let got = store.audit(all()).await.expect("query");
    assert_eq!(got.len(), 1, "{case}");
}

/// The byte bound: the oldest entries go while the log's records take more
/// than `max_bytes`, whether the store counted the log's bytes as it wrote
/// them or counts them afresh (after a reopen), appends of the same batch
/// included.
async fn the_audit_log_is_pruned_by_bytes_oldest_first(open: Opener<'_>) {
    let case = "the_audit_log_is_pruned_by_bytes_oldest_first";
    let store = open("audit-bytes");
    // Times of five digits: every entry's JSON is the same size.
    let entry = |i: i64| audit_entry(10_000 + i * 1_000, "admin", Some("p"));
    let size = serde_json::to_string(&entry(0)).expect("json").len() as u64;
    let prune = |max_bytes: u64| Mutation::PruneAudit {
        older_than_ms: 0,
        max_rows: u64::MAX,
        max_bytes,
    };
    let all = || AuditQuery {
        limit: 100,
        ..AuditQuery::default()
    };
    let times =
        |rows: Vec<crate::AuditRow>| rows.iter().map(|r| r.entry.time_ms).collect::<Vec<_>>();
    let batch: Vec<Mutation> = (0..10).map(|i| append(entry(i))).collect();
    store.apply(batch.into()).await.expect("apply");
    // Room for 4.5 entries: the newest 4 stay.
    store
        .apply(vec![prune(4 * size + size / 2)].into())
        .await
        .expect("prune by bytes");
    assert_eq!(
        times(store.audit(all()).await.expect("query")),
        [19_000, 18_000, 17_000, 16_000],
        "{case}: the oldest went first"
    );
    // Two appends and a bound of 3 in one batch: the newest 3 stay.
    store
        .apply(vec![append(entry(10)), append(entry(11)), prune(3 * size)].into())
        .await
        .expect("append and prune");
    assert_eq!(
        times(store.audit(all()).await.expect("query")),
        [21_000, 20_000, 19_000],
        "{case}: counted as written"
    );
    // Reopened, the store counts the log again.
    drop(store);
    let store = open("audit-bytes");
    store
        .apply(vec![prune(2 * size)].into())
        .await
        .expect("prune after reopen");
    assert_eq!(
        times(store.audit(all()).await.expect("query")),
        [21_000, 20_000],
        "{case}: counted afresh"
    );
    // A bound the log is within removes nothing.
    store
        .apply(vec![prune(2 * size)].into())
        .await
        .expect("prune within bounds");
    assert_eq!(store.audit(all()).await.expect("query").len(), 2, "{case}");
}
