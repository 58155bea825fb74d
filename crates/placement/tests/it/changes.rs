//! `take_changes`: after every operation the pool says what to persist
//! (rule S5 depends on it: an acknowledged placement must be durable).
//! Derived state (counts, host status) is never reported: it is rebuilt by
//! `Pool::restore`.

use placement::Change::{self, SessionEnded};
use placement::EndReason;
use placement::{
    ConnectRequest, HostMetrics, HostPoolType, LoadBalancerType, PoolConfig, SessionState,
};

use crate::{Alg, World, host_spec};

fn s(x: &str) -> String {
    x.to_string()
}

/// What an operation changed, each ended session as the test names it
/// (`Ended(id, reason)`).
#[derive(Debug, PartialEq, Eq)]
enum C {
    Change(Change),
    Ended(String, EndReason),
}

fn take(w: &mut World) -> Vec<C> {
    w.pool
        .take_changes()
        .into_iter()
        .map(|c| match c {
            SessionEnded(e) => C::Ended(e.session.id, e.reason),
            c => C::Change(c),
        })
        .collect()
}

#[allow(non_snake_case)]
fn Host(h: String) -> C {
    C::Change(Change::Host(h))
}
#[allow(non_snake_case)]
fn HostRemoved(h: String) -> C {
    C::Change(Change::HostRemoved(h))
}
#[allow(non_snake_case)]
fn Session(id: String) -> C {
    C::Change(Change::Session(id))
}
#[allow(non_snake_case, non_upper_case_globals)]
const Counters: C = C::Change(Change::Counters);
#[allow(non_snake_case, non_upper_case_globals)]
const Config: C = C::Change(Change::Config);

#[test]
fn changes_of_each_pooled_operation() {
    let mut w = World::pooled(Alg::Classic);
    assert_eq!(take(&mut w), []);

    // A new host: the host, and the counters (its registration sequence).
    w.add_host("a");
    assert_eq!(take(&mut w), [Host(s("a")), Counters]);
    // An update: the host only.
    w.set_drained("a", false);
    assert_eq!(take(&mut w), [Host(s("a"))]);
    w.add_host("b");
    take(&mut w);

    // A placement: the session, and the counters (the random draws).
    let p = w.connect("alice@x", 0).unwrap();
    assert_eq!(take(&mut w), [Session(p.session_id.clone()), Counters]);
    // A reconnect changes nothing.
    assert!(w.connect("alice@x", 0).unwrap().reconnect);
    assert_eq!(take(&mut w), []);
    // A state change: the session; the same state again: nothing.
    w.set_state(&p.session_id, SessionState::Active);
    assert_eq!(take(&mut w), [Session(p.session_id.clone())]);
    w.set_state(&p.session_id, SessionState::Active);
    assert_eq!(take(&mut w), []);
    // Logoff.
    w.pool.logoff(&p.session_id).unwrap();
    assert_eq!(
        take(&mut w),
        [C::Ended(p.session_id.clone(), EndReason::Logoff)]
    );

    // Settings.
    w.set_limit(5);
    assert_eq!(take(&mut w), [Config]);

    // A heartbeat is kept (last heartbeat, metrics); going silent is derived.
    w.heartbeat("a");
    assert_eq!(take(&mut w), [Host(s("a"))]);
    w.tick_after_ms(90_000);
    assert_eq!(
        w.pool.host("a").unwrap().status,
        placement::HostStatus::Unavailable
    );
    assert_eq!(take(&mut w), []);

    // A refusal changes nothing.
    w.set_limit(0);
    take(&mut w);
    assert!(w.connect("bob@x", 0).is_err());
    assert_eq!(take(&mut w), []);
    w.set_limit(5);
    take(&mut w);

    // Removing a host with force ends its sessions first.
    let p1 = w.connect("bob@x", 0).unwrap();
    let p2 = w.connect("carol@x", 0).unwrap();
    assert_eq!((p1.host.as_str(), p2.host.as_str()), ("b", "b"));
    take(&mut w);
    w.pool.remove_host("b", true).unwrap();
    let mut got = take(&mut w);
    assert_eq!(got.pop(), Some(HostRemoved(s("b"))));
    let mut want = vec![
        C::Ended(p1.session_id, EndReason::HostRemoved),
        C::Ended(p2.session_id, EndReason::HostRemoved),
    ];
    got.sort_by_key(|c| format!("{c:?}"));
    want.sort_by_key(|c| format!("{c:?}"));
    assert_eq!(got, want);
}

#[test]
fn changes_report_expired_pending_sessions_even_from_a_refused_connect() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    let p = w.connect("alice@x", 0).unwrap();
    take(&mut w);
    w.set_limit(0);
    take(&mut w);
    w.advance_ms(120_000);
    // The connect is refused (limit 0), but its tick ended alice's session:
    // that end must still be persisted.
    assert!(w.connect("bob@x", 0).is_err());
    assert_eq!(
        take(&mut w),
        [C::Ended(p.session_id, EndReason::PendingTimeout)]
    );
}

#[test]
fn changes_of_an_automatic_personal_assignment() {
    let mut c = PoolConfig::new(
        "desks",
        HostPoolType::Personal,
        LoadBalancerType::Persistent,
    );
    c.personal_desktop_assignment_type = Some(placement::PersonalDesktopAssignmentType::Automatic);
    let mut w = World::new(c);
    w.add_spec(host_spec("d1", &[]));
    take(&mut w);
    let p = w
        .connect_req(
            &ConnectRequest {
                user: "alice@x",
                ..Default::default()
            },
            0,
        )
        .unwrap();
    // The host's new owner must be kept as well as the session.
    assert_eq!(
        take(&mut w),
        [Host(s("d1")), Session(p.session_id.clone()), Counters]
    );
    w.pool.logoff(&p.session_id).unwrap();
    assert_eq!(take(&mut w), [C::Ended(p.session_id, EndReason::Logoff)]);
    // A second connect: the host is hers already, only the session is new.
    let p = w.connect("alice@x", 0).unwrap();
    assert_eq!(take(&mut w), [Session(p.session_id), Counters]);
}

#[test]
fn changes_of_a_refused_operation_are_none() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    w.connect("alice@x", 0).unwrap();
    take(&mut w);
    assert!(w.pool.remove_host("a", false).is_err());
    assert!(w.pool.logoff("nope").is_err());
    assert!(
        w.pool
            .heartbeat("zz", HostMetrics::default(), w.now_ms)
            .is_err()
    );
    assert!(w.pool.upsert_host(host_spec("", &[]), w.now_ms).is_err());
    assert_eq!(take(&mut w), []);
}
