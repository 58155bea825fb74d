//! The conformance suite every [`Store`] backend must pass (in the manner
//! of Garage's `test_suite(db)`): the same cases, run by each backend's
//! tests, so the broker can rely on one behaviour whatever the store.
//!
//! Each case is an `async fn(open: Opener)`. `open(case)` must open the
//! storage named `case`: fresh the first time a name is used, and the same
//! storage again when called again with that name (that is how durability
//! across a reopen is checked). A backend's tests run the suite with
//! [`conformance_tests!`](crate::conformance_tests), which makes one test
//! of each case, so one failing case does not hide the others.
//!
//! The cases live by topic: `pools` (pools, hosts, sessions, tokens),
//! `credentials` (API credentials, signing keys), `audit` (the audit
//! log), `autoscale` (scaling actions, plans and plan memory),
//! `applications` (published applications and application groups) and
//! `feed_stamps` (the workspace feed's stamps); the fixtures they share
//! are here, and other crates' tests use them too.

mod applications;
mod audit;
mod autoscale;
mod credentials;
mod feed_stamps;
mod pools;

pub use applications::*;
pub use audit::*;
pub use autoscale::*;
pub use credentials::*;
pub use feed_stamps::*;
pub use pools::*;

use placement::{
    Host, HostMetrics, HostPoolType, HostSpec, HostStatus, LoadBalancerType, PoolConfig,
    PoolCounters, Session, SessionState,
};

use crate::{AuditEntry, HostCredential, Mutation, RegistrationToken, Store};

/// Opens the storage named by the case (see the module documentation).
pub type Opener<'a> = &'a (dyn Fn(&str) -> Box<dyn Store> + Sync);

/// Makes one test function of each conformance case, named after it.
///
/// `$opener` is a function (a path) called afresh by each test, returning
/// the case's opener: anything `Fn(&str) -> Box<dyn Store> + Sync`, owning
/// whatever its storage needs (a temporary directory, scratch databases)
/// for as long as the test runs. The attributes before it are put on each
/// test, e.g. `#[tokio::test]`. Call it inside a module of its own, so the
/// tests are listed as `module::case`:
///
/// ```text
/// mod conformance {
///     fn opener() -> impl Fn(&str) -> Box<dyn store::Store> + Sync { /* ... */ }
///     store::conformance_tests!(#[tokio::test] opener);
/// }
/// ```
///
/// Adding a case: write it as a `pub async fn` in a topic module of
/// `store::conformance` and name it in the list below (a test checks that
/// every case is listed).
#[macro_export]
macro_rules! conformance_tests {
    // The list of cases, handed to the arm `$then` names.
    (@cases $($then:tt)*) => {
        $crate::conformance_tests! { $($then)*;
            empty_store_loads_empty,
            everything_comes_back_after_reopen,
            a_failing_batch_changes_nothing,
            a_relaxed_batch_is_committed_in_order_and_all_or_nothing,
            deletes_cascade,
            puts_replace_and_counters_update,
            a_token_keeps_its_bound_and_count,
            new_host_fields_come_back,
            api_credentials_are_kept_replaced_and_revoked,
            signing_keys_are_kept_and_replaced,
            the_audit_log_is_appended_queried_newest_first_and_paged,
            an_audit_entry_commits_with_its_batch_or_not_at_all,
            the_audit_log_is_pruned_by_age_and_count,
            the_audit_log_is_pruned_by_bytes_oldest_first,
            folded_audit_entries_count_their_requests,
            scaling_actions_are_put_replaced_queried_and_pruned,
            scaling_plans_and_plan_memory_are_kept,
            applications_are_put_replaced_and_deleted,
            application_groups_are_put_replaced_and_deleted,
            a_pools_deletion_removes_its_applications,
            applications_and_groups_come_back_after_reopen,
            a_failing_batch_applies_none_of_its_applications,
            feed_stamps_are_put_replaced_and_deleted,
            a_feed_stamp_put_leaves_other_users_alone,
            feed_stamps_of_many_users_come_back_after_reopen,
            a_failing_batch_applies_none_of_its_feed_stamps,
        }
    };
    // The cases' names, as an array of strings.
    (@names; $($case:ident),* $(,)?) => {
        [$(stringify!($case)),*]
    };
    (@each $attrs:tt $opener:path; $($case:ident),* $(,)?) => {
        $($crate::conformance_tests!(@one $attrs $opener, $case);)*
    };
    (@one [$(#[$attr:meta])*] $opener:path, $case:ident) => {
        $(#[$attr])*
        async fn $case() {
            let open = $opener();
            $crate::conformance::$case(&open).await;
        }
    };
    ($(#[$attr:meta])* $opener:path) => {
        $crate::conformance_tests! { @cases @each [$(#[$attr])*] $opener }
    };
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
        end_reason: None,
    }
}

fn append(entry: AuditEntry) -> Mutation {
    Mutation::AppendAudit { entry }
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

#[cfg(test)]
mod tests {
    /// Every case of the topic modules is in `conformance_tests!`'s list,
    /// once: a case left out would never run.
    #[test]
    fn every_case_is_run_by_the_macro() {
        let listed = crate::conformance_tests!(@cases @names);
        let mut written: Vec<&str> = [
            include_str!("pools.rs"),
            include_str!("credentials.rs"),
            include_str!("audit.rs"),
            include_str!("autoscale.rs"),
            include_str!("applications.rs"),
            include_str!("feed_stamps.rs"),
        ]
        .iter()
        .flat_map(|source| source.lines())
        .filter_map(|line| line.strip_prefix("pub async fn "))
        .filter_map(|rest| rest.split('(').next())
        .collect();
        written.sort_unstable();
        let mut listed_sorted = listed.to_vec();
        listed_sorted.sort_unstable();
        assert_eq!(
            listed_sorted, written,
            "the cases conformance_tests! lists (left) and the cases written (right)"
        );
    }

    /// The application fixtures are what the broker could put: valid by
    /// the model's rules.
    #[test]
    fn the_application_fixtures_are_valid() {
        super::application("Word").validate().expect("application");
        super::application_group("p", &["word"])
            .validate()
            .expect("RemoteApp group");
        super::application_group("p", &[])
            .validate()
            .expect("Desktop group");
    }
}
