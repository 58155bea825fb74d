//! Conformance cases for a pool's state: its config and counters, hosts,
//! sessions, registration tokens and host credentials; durable across a
//! reopen, atomic per batch, and deleted with what they belong to.

use placement::SessionState;

use super::{Opener, counters, credential, host, pool, seed_batch, session, token};
use crate::{Mutation, RegistrationToken};

/// A fresh store has no pools.
pub async fn empty_store_loads_empty(open: Opener<'_>) {
    let store = open("empty");
    let snap = store.load().await.expect("load");
    assert!(snap.pools.is_empty(), "empty_store_loads_empty: {snap:?}");
}

/// Everything a batch puts comes back whole after a reopen: pools in name
/// order, hosts in query order, sessions, tokens and host credentials.
pub async fn everything_comes_back_after_reopen(open: Opener<'_>) {
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

/// A batch with one refused change (a session on a missing host, counters
/// of a missing pool) is refused whole: nothing of it is kept.
pub async fn a_failing_batch_changes_nothing(open: Opener<'_>) {
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

/// A relaxed batch ([`Store::apply_relaxed`](crate::Store::apply_relaxed))
/// may reach the disk later, but it is committed when the call returns: a
/// reopened store (a restarted broker) has it, in order with the ordinary
/// batches around it, and a failing one changes nothing.
pub async fn a_relaxed_batch_is_committed_in_order_and_all_or_nothing(open: Opener<'_>) {
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

/// Deleting a host deletes its sessions and credential; deleting a pool
/// deletes all it holds and nothing of other pools. A host credential is
/// replaced by a put, and a pool's tokens are revoked together.
pub async fn deletes_cascade(open: Opener<'_>) {
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

/// A put of an existing pool, host or session replaces it, and a put of
/// counters updates the pool's.
pub async fn puts_replace_and_counters_update(open: Opener<'_>) {
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
pub async fn a_token_keeps_its_bound_and_count(open: Opener<'_>) {
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

/// The host and pool fields added for power control and autoscale (tags,
/// MAC address, drain origin, power state, heartbeat source, power
/// settings), for host-named connections (DNS name, connection target)
/// and the pool's `gatewaySignIn` (AD2) and `customRdpProperties` (F3)
/// come back after a reopen.
pub async fn new_host_fields_come_back(open: Opener<'_>) {
    let case = "new_host_fields_come_back";
    let store = open("host-fields");
    let mut h = host("h1", 1);
    h.spec.tags = vec!["no-autoscale".into()];
    h.spec.mac_address = Some("52:54:00:ab:cd:01".into());
    h.spec.dns_name = Some("h1.contoso.com".into());
    h.spec.allow_new_session = false;
    h.spec.drained_by = Some(placement::DrainedBy::Operator);
    h.power_state = placement::PowerState::Stopped;
    h.start_requested_ms = Some(1_700_000_000_500);
    h.heartbeat_source = Some(placement::HeartbeatSource::WindowsExporter);
    h.scrape_error = Some("windows_exporter 0.30.5 is too old — ünïcode".into());
    let mut config = pool("p");
    config.start_vm_on_connect = true;
    config.connection_target = placement::ConnectionTarget::Host;
    config.gateway_sign_in = placement::GatewaySignIn::TicketOrWindows;
    config.custom_rdp_properties = "audiomode:i:2;drivestoredirect:s:*".into();
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
