//! Rule A9 over S7: how a host's power state and its heartbeats decide its
//! status, and that only a running, heard-from host takes sessions.

use placement::{HostSpec, HostStatus, Pool, PowerState};

use crate::{Alg, World};

const SECOND_MS: i64 = 1000;

fn status(w: &World, host: &str) -> HostStatus {
    w.pool.host(host).unwrap().status
}

fn power(w: &mut World, host: &str, state: PowerState) {
    let now = w.now_ms;
    w.pool.set_power_state(host, state, now).unwrap();
}

#[test]
fn a9_a_new_host_is_running() {
    let w = World::with_hosts(Alg::Classic, &["a"]);
    assert_eq!(w.pool.host("a").unwrap().power_state, PowerState::Running);
    assert_eq!(status(&w, "a"), HostStatus::Available);
}

#[test]
fn a9_a_stopped_host_is_shutdown_never_unavailable_and_never_a_candidate() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b"]);
    w.heartbeat("a");
    w.heartbeat("b");
    power(&mut w, "a", PowerState::Stopping);
    assert_eq!(status(&w, "a"), HostStatus::Shutdown);
    power(&mut w, "a", PowerState::Stopped);
    // Far beyond heartbeatTimeoutSeconds (90 s): still Shutdown, not
    // Unavailable; b, which also fell silent, is Unavailable.
    w.tick_after_ms(3600 * SECOND_MS);
    assert_eq!(status(&w, "a"), HostStatus::Shutdown);
    assert_eq!(status(&w, "b"), HostStatus::Unavailable);
    w.heartbeat("b");
    for i in 0..5 {
        assert_eq!(w.connect(&format!("u{i}@x"), 0).unwrap().host, "b");
    }
    // A heartbeat from a stopped host (one in flight as it went down) does
    // not make it a candidate.
    w.heartbeat("a");
    assert_eq!(status(&w, "a"), HostStatus::Shutdown);
    assert_eq!(w.connect("late@x", 0).unwrap().host, "b");
    w.assert_consistent();
}

#[test]
fn a9_a_started_host_that_sent_heartbeats_is_available_only_after_its_next_heartbeat() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b"]);
    w.heartbeat("a");
    w.heartbeat("b");
    power(&mut w, "a", PowerState::Stopped);
    w.advance_ms(60 * SECOND_MS);
    power(&mut w, "a", PowerState::Starting);
    assert_eq!(status(&w, "a"), HostStatus::Unavailable);
    w.advance_ms(SECOND_MS);
    power(&mut w, "a", PowerState::Running);
    assert_eq!(
        status(&w, "a"),
        HostStatus::Unavailable,
        "its machine runs; nothing says its desktop does"
    );
    assert_eq!(w.connect("u1@x", 0).unwrap().host, "b");
    w.advance_ms(SECOND_MS);
    w.heartbeat("a");
    assert_eq!(status(&w, "a"), HostStatus::Available);
    // Classic BreadthFirst: a has 0 sessions, b 1.
    assert_eq!(w.connect("u2@x", 0).unwrap().host, "a");
    // And S7 watches it again.
    w.tick_after_ms(90 * SECOND_MS);
    assert_eq!(status(&w, "a"), HostStatus::Unavailable);
}

#[test]
fn a9_a_heartbeat_while_starting_counts_once_the_start_succeeds() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    w.heartbeat("a");
    power(&mut w, "a", PowerState::Stopped);
    power(&mut w, "a", PowerState::Starting);
    w.advance_ms(SECOND_MS);
    w.heartbeat("a");
    assert_eq!(status(&w, "a"), HostStatus::Unavailable, "still starting");
    power(&mut w, "a", PowerState::Running);
    assert_eq!(status(&w, "a"), HostStatus::Available);
}

#[test]
fn a9_a_started_host_without_an_agent_is_available_once_running() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    power(&mut w, "a", PowerState::Stopped);
    assert!(w.connect("u@x", 0).is_err());
    power(&mut w, "a", PowerState::Starting);
    power(&mut w, "a", PowerState::Running);
    assert_eq!(status(&w, "a"), HostStatus::Available);
    assert_eq!(w.connect("u@x", 0).unwrap().host, "a");
}

#[test]
fn a9_an_unknown_host_is_unavailable_until_it_speaks_and_then_running() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    power(&mut w, "a", PowerState::Unknown);
    assert_eq!(status(&w, "a"), HostStatus::Unavailable);
    w.heartbeat("a");
    let h = w.pool.host("a").unwrap();
    assert_eq!(
        (h.power_state, h.status),
        (PowerState::Running, HostStatus::Available)
    );
}

#[test]
fn a9_power_state_and_its_status_survive_a_restore() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b", "c"]);
    w.heartbeat("a");
    w.heartbeat("b");
    power(&mut w, "a", PowerState::Stopped);
    power(&mut w, "b", PowerState::Starting);
    power(&mut w, "b", PowerState::Running);
    let hosts: Vec<_> = w
        .pool
        .hosts()
        .map(|h| serde_json::from_str(&serde_json::to_string(h).unwrap()).unwrap())
        .collect();
    let p = Pool::restore(
        w.pool.config().clone(),
        w.pool.counters(),
        hosts,
        Vec::new(),
        w.now_ms,
    );
    let st = |n: &str| {
        let h = p.host(n).unwrap();
        (h.power_state, h.status)
    };
    assert_eq!(st("a"), (PowerState::Stopped, HostStatus::Shutdown));
    assert_eq!(st("b"), (PowerState::Running, HostStatus::Unavailable));
    assert_eq!(st("c"), (PowerState::Running, HostStatus::Available));
}

#[test]
fn a9_hosts_stored_before_power_states_existed_are_running() {
    let json = r#"{"seq":1,"spec":{"name":"a","address":"a:3389","allowNewSession":true,
        "capabilities":["rdp"],"policy":{"loadIndexThreshold":null,
        "connectingSessionThreshold":null},"assignedUser":null},
        "registeredAtMs":1,"lastHeartbeatMs":null,"metrics":null}"#;
    let h: placement::Host = serde_json::from_str(json).unwrap();
    assert_eq!(h.power_state, PowerState::Running);
    assert!(h.spec.tags.is_empty() && h.spec.mac_address.is_none());
    assert_eq!(h.spec.drained_by, None);
}

#[test]
fn a6_a9_host_fields_are_validated() {
    let ok = |f: &dyn Fn(&mut HostSpec)| {
        let mut s = HostSpec::new("a", "a:3389");
        f(&mut s);
        s.validate()
    };
    assert!(ok(&|s| s.tags = vec!["no-autoscale".into(), "team=fin".into()]).is_ok());
    assert!(ok(&|s| s.tags = vec!["a b".into()]).is_err());
    assert!(ok(&|s| s.tags = vec!["x".into(), "x".into()]).is_err());
    assert!(ok(&|s| s.tags = (0..33).map(|i| format!("t{i}")).collect()).is_err());
    assert!(ok(&|s| s.tags = vec!["x".repeat(65)]).is_err());
    assert!(ok(&|s| s.mac_address = Some("52:54:00:AB:cd:01".into())).is_ok());
    for bad in [
        "52:54:00:ab:cd",
        "52-54-00-ab-cd-01",
        "52:54:00:ab:cd:0g",
        "",
        "52:54:00:ab:cd:01:02",
    ] {
        assert!(ok(&|s| s.mac_address = Some(bad.into())).is_err(), "{bad}");
    }
    assert!(
        ok(&|s| s.drained_by = Some(placement::DrainedBy::Operator)).is_err(),
        "an open host is drained by nobody"
    );
    assert_eq!(
        placement::parse_mac("52:54:00:AB:cd:01"),
        Some([0x52, 0x54, 0, 0xab, 0xcd, 1])
    );
}
