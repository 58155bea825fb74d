//! The broker's rules that depend on the time of day, on a clock the test
//! holds still and moves on: nothing here sleeps, so a rule's deadline is
//! checked to the millisecond, on either side of it.

use std::sync::Arc;
use std::time::Duration;

use api::types::{ConnectInput, CredentialInput, HeartbeatInput, RegisterInput};
use broker::clock::Clock;
use broker::{Broker, Settings};
use placement::{HostPoolType, LoadBalancerType, PoolConfig, SessionState};

const ADMIN: &str = "clock-test-admin-token-0123456789";
/// 2026-12-01 00:00:00 UTC.
const T0: i64 = 1_796_083_200_000;

async fn broker_at(clock: &Clock, dir: &tempfile::TempDir) -> Arc<Broker> {
    let store = store::SqliteStore::open(dir.path()).expect("open the store");
    let settings = Settings {
        clock: clock.clone(),
        ..Settings::new(ADMIN)
    };
    broker::open(Arc::new(store), settings)
        .await
        .expect("open the broker")
}

/// A pooled pool with one registered host that has sent a heartbeat.
async fn pool_with_a_host(b: &Arc<Broker>) {
    let mut config = PoolConfig::new("farm", HostPoolType::Pooled, LoadBalancerType::BreadthFirst);
    config.pending_timeout_seconds = 120;
    config.heartbeat_timeout_seconds = 90;
    b.put_pool(config, true).await.expect("create the pool");
    let token = b
        .enrollment()
        .create_token("farm", 600, 1)
        .await
        .expect("registration token")
        .token;
    b.enrollment()
        .register(
            RegisterInput {
                token,
                host_pool: None,
                name: "sh1".into(),
                address: "10.0.0.1:3389".into(),
                capabilities: None,
                policy: None,
                dns_name: None,
            },
            None,
        )
        .await
        .expect("register the host");
    heartbeat(b).await;
}

async fn heartbeat(b: &Arc<Broker>) {
    let input: HeartbeatInput =
        serde_json::from_value(serde_json::json!({"metrics": {"cpuPercent": 10.0}}))
            .expect("a heartbeat");
    if b.heartbeats()
        .heartbeat("farm", "sh1", input)
        .await
        .is_err()
    {
        panic!("the heartbeat was refused");
    }
}

fn connect(user: &str) -> ConnectInput {
    serde_json::from_value(serde_json::json!({ "user": user })).expect("a connect")
}

async fn sessions(b: &Arc<Broker>) -> usize {
    b.core()
        .read("farm", |p| Ok(p.session_count()))
        .await
        .expect("read the pool")
}

#[tokio::test]
async fn a_pending_session_ends_exactly_when_its_timeout_runs_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Clock::manual(T0);
    let b = broker_at(&clock, &dir).await;
    pool_with_a_host(&b).await;
    let placed = b
        .connector()
        .connect("farm", &connect("alice"))
        .await
        .expect("placed");
    assert_eq!(placed.state, SessionState::Pending);

    // One millisecond before the 120 s are up, the session is kept (S4).
    clock.advance(Duration::from_millis(119_999));
    heartbeat(&b).await;
    b.core().tick_all().await.expect("tick");
    assert_eq!(sessions(&b).await, 1, "ended before its pending timeout");

    clock.advance(Duration::from_millis(1));
    b.core().tick_all().await.expect("tick");
    assert_eq!(sessions(&b).await, 0, "kept past its pending timeout");
}

#[tokio::test]
async fn a_silent_host_is_unavailable_once_its_heartbeat_timeout_passes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Clock::manual(T0);
    let b = broker_at(&clock, &dir).await;
    pool_with_a_host(&b).await;

    clock.advance(Duration::from_secs(89));
    b.core().tick_all().await.expect("tick");
    b.connector()
        .connect("farm", &connect("bob"))
        .await
        .expect("the host is still available 89 s after its heartbeat");

    clock.advance(Duration::from_secs(1));
    b.core().tick_all().await.expect("tick");
    let refused = b.connector().connect("farm", &connect("carol")).await;
    assert!(
        refused.is_err(),
        "a host silent for its heartbeat timeout still took a new user (S7)"
    );
}

#[tokio::test]
async fn an_api_credential_stops_working_when_it_expires() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Clock::manual(T0);
    let b = broker_at(&clock, &dir).await;
    let input: CredentialInput = serde_json::from_value(serde_json::json!({
        "name": "portal",
        "role": "reader",
        "expiresInSeconds": 60,
    }))
    .expect("a credential");
    let token = b
        .credentials()
        .create(input)
        .await
        .expect("create the credential")
        .token
        .expect("its token");

    clock.advance(Duration::from_millis(59_999));
    assert!(
        b.enrollment().caller(&token).is_ok(),
        "refused before it expired"
    );
    clock.advance(Duration::from_millis(1));
    assert!(
        b.enrollment().caller(&token).is_err(),
        "accepted once expired"
    );
}

#[tokio::test]
async fn what_a_broker_is_built_with_is_what_it_serves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Clock::manual(T0);
    let store = store::SqliteStore::open(dir.path()).expect("open the store");
    let settings = Settings {
        rdp_front_door: Some("rdp.contoso.com:3389".into()),
        rd_gateway: Some("gw.contoso.com:443".into()),
        clock: clock.clone(),
        ..Settings::new(ADMIN)
    };
    let b = broker::open(Arc::new(store), settings)
        .await
        .expect("open the broker");
    assert_eq!(b.core().started_ms(), T0);
    assert_eq!(
        b.connector()
            .rd_gateway_address()
            .expect("a gateway is set"),
        "gw.contoso.com:443"
    );
    assert!(
        !format!("{:?}", b.settings()).contains(ADMIN),
        "the settings' debug form shows the admin token"
    );
}

/// The scaling plans' evaluator wakes on the core's session-change
/// channel: a session that starts or ends moves it, a heartbeat that
/// changes no session does not (a busy farm's heartbeats must not wake
/// the plans).
#[tokio::test]
async fn a_session_that_starts_or_ends_wakes_the_plans_and_a_heartbeat_does_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Clock::manual(T0);
    let b = broker_at(&clock, &dir).await;
    pool_with_a_host(&b).await;
    let mut changes = b.core().session_changes();
    changes.mark_unchanged();

    clock.advance(Duration::from_secs(10));
    heartbeat(&b).await;
    assert!(
        !changes.has_changed().expect("the core is alive"),
        "a heartbeat that changed no session woke the plans"
    );

    let placed = b
        .connector()
        .connect("farm", &connect("dave"))
        .await
        .expect("placed");
    assert!(
        changes.has_changed().expect("the core is alive"),
        "a new session did not wake the plans"
    );
    changes.mark_unchanged();

    b.connector()
        .logoff("farm", &placed.session_id)
        .await
        .expect("logoff");
    assert!(
        changes.has_changed().expect("the core is alive"),
        "an ended session did not wake the plans"
    );
}

/// The reasons of the entries of sessions' ends in the audit log, with
/// their actors and users, newest first.
async fn ends(b: &Arc<Broker>) -> Vec<(String, String, String)> {
    b.audit()
        .entries(store::AuditQuery {
            host_pool: Some("farm".into()),
            ended_sessions: true,
            limit: 100,
            ..store::AuditQuery::default()
        })
        .await
        .expect("read the audit log")
        .into_iter()
        .map(|r| {
            let user = r
                .entry
                .before
                .map(|s| s.to_value()["userPrincipalName"].clone())
                .and_then(|u| u.as_str().map(str::to_string))
                .unwrap_or_default();
            (r.entry.end_reason.unwrap_or_default(), r.entry.actor, user)
        })
        .collect()
}

/// Rule S9's ends on a clock the test moves (their shortest setting is a
/// minute): a session disconnected for `disconnectedTimeoutSeconds` ends
/// as `disconnectedTimeout`, one older than `maxSessionLifetimeSeconds`
/// as `lifetimeExceeded`, each audited as the broker's own, not a second
/// early.
#[tokio::test]
async fn s9_timeouts_end_sessions_with_their_reasons_in_the_audit_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Clock::manual(T0);
    let b = broker_at(&clock, &dir).await;
    pool_with_a_host(&b).await;
    b.core()
        .write("farm", |p, _| {
            let mut c = p.config().clone();
            c.disconnected_timeout_seconds = 60;
            c.max_session_lifetime_seconds = 600;
            p.set_config(c)?;
            Ok(())
        })
        .await
        .expect("set the timeouts");
    let gone = b
        .connector()
        .connect("farm", &connect("alice"))
        .await
        .expect("placed");
    let long = b
        .connector()
        .connect("farm", &connect("bob"))
        .await
        .expect("placed");
    b.connector()
        .set_session_state("farm", &gone.session_id, SessionState::Disconnected)
        .await
        .expect("disconnected");
    b.connector()
        .set_session_state("farm", &long.session_id, SessionState::Active)
        .await
        .expect("active");

    clock.advance(Duration::from_millis(59_999));
    b.core().tick_all().await.expect("tick");
    assert_eq!(ends(&b).await, [], "ended before its disconnected timeout");
    clock.advance(Duration::from_millis(1));
    b.core().tick_all().await.expect("tick");
    assert_eq!(
        ends(&b).await,
        [(
            "disconnectedTimeout".to_string(),
            "broker".to_string(),
            "alice".to_string()
        )]
    );

    heartbeat(&b).await;
    clock.advance(Duration::from_secs(540));
    heartbeat(&b).await;
    b.core().tick_all().await.expect("tick");
    assert_eq!(sessions(&b).await, 0, "bob's lifetime of 600 s is over");
    assert_eq!(
        ends(&b).await[0],
        (
            "lifetimeExceeded".to_string(),
            "broker".to_string(),
            "bob".to_string()
        )
    );
}
