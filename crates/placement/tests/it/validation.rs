//! Rules P2, P4, P5 and the validation of settings, hosts and requests:
//! a bad value is refused whole, naming its field, and nothing changes.

use placement::{
    ConnectRequest, HostPoolType, HostSpec, LoadBalancerType, MAX_SESSION_LIMIT,
    PersonalDesktopAssignmentType, PoolConfig,
};

use crate::{Alg, World, host_spec};

use HostPoolType::{Personal, Pooled};
use LoadBalancerType::*;

fn pooled() -> PoolConfig {
    PoolConfig::new("farm", Pooled, BreadthFirst)
}

fn personal() -> PoolConfig {
    PoolConfig::new("desks", Personal, Persistent)
}

/// What `validate` should answer: warnings, or an `InvalidParameter` whose
/// message names this field.
enum Want {
    Ok(usize),
    Invalid(&'static str),
}

#[test]
fn p2_p4_p5_settings_table() {
    type Base = fn() -> PoolConfig;
    type Edit = fn(&mut PoolConfig);
    let rows: &[(&str, Base, Edit, Want)] = &[
        ("pooled defaults", pooled, |_| {}, Want::Ok(0)),
        ("personal defaults", personal, |_| {}, Want::Ok(0)),
        // P2: every valid combination.
        (
            "pooled DepthFirst with a limit",
            pooled,
            |c| {
                c.load_balancer_type = DepthFirst;
                c.max_session_limit = 10;
            },
            Want::Ok(0),
        ),
        (
            "personal MultiplePersistent",
            personal,
            |c| c.load_balancer_type = MultiplePersistent,
            Want::Ok(0),
        ),
        (
            "personal Direct",
            personal,
            |c| c.personal_desktop_assignment_type = Some(PersonalDesktopAssignmentType::Direct),
            Want::Ok(0),
        ),
        // P2: every invalid combination.
        (
            "pooled Persistent",
            pooled,
            |c| c.load_balancer_type = Persistent,
            Want::Invalid("loadBalancerType"),
        ),
        (
            "pooled MultiplePersistent",
            pooled,
            |c| c.load_balancer_type = MultiplePersistent,
            Want::Invalid("loadBalancerType"),
        ),
        (
            "personal BreadthFirst",
            personal,
            |c| c.load_balancer_type = BreadthFirst,
            Want::Invalid("loadBalancerType"),
        ),
        (
            "personal DepthFirst",
            personal,
            |c| c.load_balancer_type = DepthFirst,
            Want::Invalid("loadBalancerType"),
        ),
        (
            "personal LoadIndex",
            personal,
            |c| c.load_balancer_type = LoadIndex,
            Want::Invalid("loadBalancerType"),
        ),
        // LoadIndex is a valid pooled algorithm (P2).
        (
            "pooled LoadIndex",
            pooled,
            |c| c.load_balancer_type = LoadIndex,
            Want::Ok(0),
        ),
        (
            "pooled with an assignment type",
            pooled,
            |c| c.personal_desktop_assignment_type = Some(PersonalDesktopAssignmentType::Automatic),
            Want::Invalid("personalDesktopAssignmentType"),
        ),
        (
            "personal without an assignment type",
            personal,
            |c| c.personal_desktop_assignment_type = None,
            Want::Invalid("personalDesktopAssignmentType"),
        ),
        // P4: 0..=999999.
        ("limit 0", pooled, |c| c.max_session_limit = 0, Want::Ok(0)),
        (
            "limit 999999",
            pooled,
            |c| c.max_session_limit = 999_999,
            Want::Ok(0),
        ),
        (
            "limit 1000000",
            pooled,
            |c| c.max_session_limit = 1_000_000,
            Want::Invalid("maxSessionLimit"),
        ),
        (
            "limit u32::MAX",
            pooled,
            |c| c.max_session_limit = u32::MAX,
            Want::Invalid("maxSessionLimit"),
        ),
        // P5: DepthFirst with the default limit is accepted, with a warning.
        (
            "DepthFirst, default limit",
            pooled,
            |c| c.load_balancer_type = DepthFirst,
            Want::Ok(1),
        ),
        (
            "DepthFirst, limit 999998",
            pooled,
            |c| {
                c.load_balancer_type = DepthFirst;
                c.max_session_limit = 999_998;
            },
            Want::Ok(0),
        ),
        (
            "BreadthFirst, default limit",
            pooled,
            |c| c.breadth_first_randomized = false,
            Want::Ok(0),
        ),
        // Timeouts.
        (
            "pending timeout 0",
            pooled,
            |c| c.pending_timeout_seconds = 0,
            Want::Invalid("pendingTimeoutSeconds"),
        ),
        (
            "pending timeout 1",
            pooled,
            |c| c.pending_timeout_seconds = 1,
            Want::Ok(0),
        ),
        (
            "pending timeout 86401",
            pooled,
            |c| c.pending_timeout_seconds = 86_401,
            Want::Invalid("pendingTimeoutSeconds"),
        ),
        (
            "disconnected timeout 0 (never)",
            pooled,
            |c| c.disconnected_timeout_seconds = 0,
            Want::Ok(0),
        ),
        (
            "disconnected timeout 59",
            pooled,
            |c| c.disconnected_timeout_seconds = 59,
            Want::Invalid("disconnectedTimeoutSeconds"),
        ),
        (
            "disconnected timeout 60",
            pooled,
            |c| c.disconnected_timeout_seconds = 60,
            Want::Ok(0),
        ),
        (
            "session lifetime 31536000",
            pooled,
            |c| c.max_session_lifetime_seconds = 31_536_000,
            Want::Ok(0),
        ),
        (
            "session lifetime 31536001",
            pooled,
            |c| c.max_session_lifetime_seconds = 31_536_001,
            Want::Invalid("maxSessionLifetimeSeconds"),
        ),
        (
            "session lifetime 1",
            pooled,
            |c| c.max_session_lifetime_seconds = 1,
            Want::Invalid("maxSessionLifetimeSeconds"),
        ),
        (
            "heartbeat timeout 4",
            pooled,
            |c| c.heartbeat_timeout_seconds = 4,
            Want::Invalid("heartbeatTimeoutSeconds"),
        ),
        (
            "heartbeat timeout 5",
            pooled,
            |c| c.heartbeat_timeout_seconds = 5,
            Want::Ok(0),
        ),
        // Names and text.
        (
            "empty name",
            pooled,
            |c| c.name = String::new(),
            Want::Invalid("name"),
        ),
        (
            "name with a slash",
            pooled,
            |c| c.name = "a/b".into(),
            Want::Invalid("name"),
        ),
        (
            "name starting with a dot",
            pooled,
            |c| c.name = ".farm".into(),
            Want::Invalid("name"),
        ),
        (
            "capability in capitals",
            pooled,
            |c| c.standard_capabilities = vec!["RDP".into()],
            Want::Invalid("standardCapabilities"),
        ),
        (
            "description with a control character",
            pooled,
            |c| c.description = "a\u{7}b".into(),
            Want::Invalid("description"),
        ),
        (
            "friendly name too long",
            pooled,
            |c| c.friendly_name = "x".repeat(257),
            Want::Invalid("friendlyName"),
        ),
        (
            "storm queue 0",
            pooled,
            |c| c.logon_storm_settings.min_hosts_in_queue = 0,
            Want::Invalid("logonStormSettings.minHostsInQueue"),
        ),
        (
            "cpu threshold 101",
            pooled,
            |c| c.load_index_settings.cpu_threshold = 101,
            Want::Invalid("loadIndexSettings.cpuThreshold"),
        ),
    ];
    for (name, base, edit, want) in rows {
        let mut c = base();
        edit(&mut c);
        match (want, c.validate()) {
            (Want::Ok(n), Ok(warnings)) => assert_eq!(warnings.len(), *n, "{name}: {warnings:?}"),
            (Want::Invalid(field), Err(e)) => {
                assert_eq!(e.code(), "InvalidParameter", "{name}");
                assert!(
                    e.to_string().starts_with(&format!("{field}:")),
                    "{name}: {e}"
                );
            }
            (Want::Ok(_), Err(e)) => panic!("{name}: refused: {e}"),
            (Want::Invalid(f), Ok(w)) => panic!("{name}: accepted ({w:?}), want {f} refused"),
        }
    }
}

/// P4 pinned by its literal, not by the constant the code uses, so a change
/// of `MAX_SESSION_LIMIT` (or of the default `PoolConfig::new` takes)
/// cannot pass unnoticed: the contract says 0..=999999, default 999999.
#[test]
fn p4_the_limit_defaults_to_999999_which_is_also_the_highest() {
    for c in [pooled(), personal()] {
        assert_eq!(c.max_session_limit, 999_999, "{:?}", c.host_pool_type);
    }
    assert_eq!(MAX_SESSION_LIMIT, 999_999);
    let with_limit = |limit| {
        let mut c = pooled();
        c.max_session_limit = limit;
        c.validate()
    };
    assert_eq!(with_limit(999_999).unwrap(), Vec::<String>::new());
    let e = with_limit(1_000_000).unwrap_err();
    assert_eq!(e.code(), "InvalidParameter");
    assert!(e.to_string().starts_with("maxSessionLimit:"), "{e}");
    // P5: the default is what DepthFirst warns about; one below is a real
    // limit.
    let depth = |limit| {
        let mut c = pooled();
        c.load_balancer_type = DepthFirst;
        c.max_session_limit = limit;
        c.validate().unwrap().len()
    };
    assert_eq!((depth(999_999), depth(999_998)), (1, 0));
}

#[test]
fn p5_the_depth_first_warning_names_the_limit() {
    let mut w = World::pooled(Alg::Classic);
    let warnings = w.configure(|c| c.load_balancer_type = DepthFirst);
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("maxSessionLimit"), "{warnings:?}");
    assert_eq!(w.pool.config().load_balancer_type, DepthFirst, "accepted");
    assert!(w.configure(|c| c.max_session_limit = 50).is_empty());
}

#[test]
fn p3_set_config_refuses_whole_and_keeps_the_old_settings() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    let before = w.pool.config().clone();
    w.pool.take_changes();
    let mut bad = before.clone();
    bad.max_session_limit = 1_000_000;
    bad.load_balancer_type = DepthFirst;
    assert_eq!(
        w.pool.set_config(bad).unwrap_err().code(),
        "InvalidParameter"
    );
    // Renaming, or changing the type of a pool with hosts.
    let mut renamed = before.clone();
    renamed.name = "other".into();
    assert_eq!(
        w.pool.set_config(renamed).unwrap_err().code(),
        "InvalidParameter"
    );
    let mut personal = PoolConfig::new("farm", Personal, Persistent);
    personal.max_session_limit = before.max_session_limit;
    assert_eq!(w.pool.set_config(personal).unwrap_err().code(), "Conflict");
    assert_eq!(w.pool.config(), &before);
    assert!(w.pool.take_changes().is_empty(), "nothing to persist");
}

#[test]
fn host_specs_are_validated() {
    let mut w = World::pooled(Alg::Classic);
    type Edit = fn(&mut HostSpec);
    let rows: &[(&str, Edit, &str)] = &[
        ("empty name", |s| s.name = String::new(), "name"),
        ("no port", |s| s.address = "10.0.0.5".into(), "address"),
        ("port 0", |s| s.address = "10.0.0.5:0".into(), "address"),
        (
            "port too big",
            |s| s.address = "10.0.0.5:65536".into(),
            "address",
        ),
        (
            "bad IPv6",
            |s| s.address = "[fe80::zz]:3389".into(),
            "address",
        ),
        (
            "space in host",
            |s| s.address = "my host:3389".into(),
            "address",
        ),
        (
            "capital capability",
            |s| s.capabilities = vec!["GPU".into()],
            "capabilities",
        ),
        (
            "policy over 100",
            |s| s.policy.load_index_threshold = Some(101),
            "policy.loadIndexThreshold",
        ),
    ];
    for (name, edit, field) in rows {
        let mut spec = host_spec("h1", &[]);
        edit(&mut spec);
        let e = w.pool.upsert_host(spec, w.now_ms).unwrap_err();
        assert_eq!(e.code(), "InvalidParameter", "{name}");
        assert!(
            e.to_string().starts_with(&format!("{field}:")),
            "{name}: {e}"
        );
    }
    assert_eq!(w.pool.host_count(), 0);
    for ok in ["10.0.0.5:3389", "[fe80::1]:3389", "host-1.farm.local:1"] {
        let mut spec = host_spec("h1", &[]);
        spec.address = ok.into();
        w.pool
            .upsert_host(spec, w.now_ms)
            .unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
}

#[test]
fn connect_requests_are_validated_before_anything_happens() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    let gpu_caps = vec!["GPU".to_string()];
    let rows: &[(&str, ConnectRequest, &str)] = &[
        (
            "empty user",
            ConnectRequest {
                user: "",
                ..Default::default()
            },
            "user",
        ),
        (
            "user with a space",
            ConnectRequest {
                user: "a b",
                ..Default::default()
            },
            "user",
        ),
        (
            "capital capability",
            ConnectRequest {
                user: "u@x",
                requires: &gpu_caps,
                session_host: None,
            },
            "requires",
        ),
        (
            "bad session host",
            ConnectRequest {
                user: "u@x",
                requires: &[],
                session_host: Some("a/b"),
            },
            "sessionHost",
        ),
    ];
    for (name, req, field) in rows {
        let e = w.connect_req(req, 0).unwrap_err();
        assert_eq!(e.code(), "InvalidParameter", "{name}");
        assert!(
            e.to_string().starts_with(&format!("{field}:")),
            "{name}: {e}"
        );
    }
    assert_eq!(w.pool.session_count(), 0);
}

#[test]
fn removing_a_host_with_sessions_needs_force() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b"]);
    let id = w.connect("u@x", 0).unwrap().session_id;
    assert_eq!(
        w.pool.remove_host("a", false).unwrap_err().code(),
        "Conflict"
    );
    assert!(w.pool.session(&id).is_some());
    assert_eq!(
        w.pool.remove_host("zz", true).unwrap_err().code(),
        "SessionHostNotFound"
    );
    w.pool.remove_host("a", true).unwrap();
    assert!(
        w.pool.session(&id).is_none(),
        "force ends the host's sessions"
    );
    assert!(w.pool.host("a").is_none());
    // b (registered second) keeps its place; the user is placed afresh.
    let p = w.connect("u@x", 0).unwrap();
    assert_eq!((p.host.as_str(), p.reconnect), ("b", false));
    w.pool.remove_host("b", true).unwrap();
    w.add_host("a");
    // A re-registered name is a new host, last in query order.
    w.add_host("c");
    let order: Vec<_> = w.pool.hosts().map(|h| h.spec.name.clone()).collect();
    assert_eq!(order, ["a", "c"]);
    assert!(
        w.pool
            .hosts()
            .map(|h| h.seq)
            .collect::<Vec<_>>()
            .windows(2)
            .all(|p| p[0] < p[1])
    );
    w.assert_consistent();
}

#[test]
fn updating_a_host_keeps_its_place_in_query_order_and_its_sessions() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b", "c"]);
    let seq_a = w.pool.host("a").unwrap().seq;
    w.connect("u1@x", 0).unwrap(); // a
    let mut spec = w.pool.host("a").unwrap().spec.clone();
    spec.address = "10.9.9.9:3390".into();
    assert_eq!(
        w.pool.upsert_host(spec, w.now_ms).unwrap(),
        placement::Upsert::Replaced
    );
    let a = w.pool.host("a").unwrap();
    assert_eq!(
        (a.seq, a.sessions, a.spec.address.as_str()),
        (seq_a, 1, "10.9.9.9:3390")
    );
    // a re-registered is still first in query order: classic with b, c at 0 and a at 1.
    assert_eq!(w.connect("u2@x", 0).unwrap().host, "b");
    w.set_alg(Alg::Depth);
    assert_eq!(
        w.connect("u3@x", 0).unwrap().host,
        "a",
        "a:1 b:1 -> the first, a"
    );
}
