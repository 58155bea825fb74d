//! Every end of a session carries its reason (`Change::SessionEnded`):
//! the broker logs, audits and lists it, so each path that ends a session
//! must name why, truthfully.

use placement::{Change, EndReason, SessionState};

use crate::{Alg, World};

const SECOND_MS: i64 = 1000;

/// The ends an operation recorded: the session as it was, and why.
fn ends(w: &mut World) -> Vec<(String, String, String, SessionState, EndReason)> {
    w.pool
        .take_changes()
        .into_iter()
        .filter_map(|c| match c {
            Change::SessionEnded(e) => Some((
                e.session.id,
                e.session.host,
                e.session.user,
                e.session.state,
                e.reason,
            )),
            _ => None,
        })
        .collect()
}

fn placed(w: &mut World, user: &str) -> String {
    let id = w.connect(user, 0).unwrap().session_id;
    w.pool.take_changes();
    id
}

#[test]
fn an_api_logoff_is_a_logoff_and_keeps_the_session_as_it_was() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    let id = placed(&mut w, "alice@x");
    w.set_state(&id, SessionState::Active);
    w.pool.take_changes();
    w.pool.logoff(&id).unwrap();
    assert_eq!(
        ends(&mut w),
        [(
            id,
            "a".into(),
            "alice@x".into(),
            SessionState::Active,
            EndReason::Logoff
        )]
    );
}

#[test]
fn a_scaling_plan_logoff_says_so() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    let id = placed(&mut w, "alice@x");
    w.pool.logoff_for(&id, EndReason::ScalingLogoff).unwrap();
    assert_eq!(ends(&mut w)[0].4, EndReason::ScalingLogoff);
}

#[test]
fn a_front_door_release_is_released() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    let id = placed(&mut w, "alice@x");
    w.pool.release(&id).unwrap();
    assert_eq!(ends(&mut w)[0].4, EndReason::Released);
    assert!(w.pool.take_host_logoffs().is_empty());
}

#[test]
fn s4_a_pending_session_that_expires_is_a_pending_timeout() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    let id = placed(&mut w, "alice@x");
    w.tick_after_ms(120 * SECOND_MS);
    let got = ends(&mut w);
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].0.as_str(), got[0].3),
        (id.as_str(), SessionState::Pending)
    );
    assert_eq!(got[0].4, EndReason::PendingTimeout);
}

#[test]
fn s9_a_relayed_session_never_confirmed_ends_for_want_of_logon_evidence() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    w.configure(|c| c.disconnected_timeout_seconds = 0);
    let id = placed(&mut w, "alice@x");
    let now = w.now_ms;
    w.pool
        .mark_relayed_session(&id, SessionState::Disconnected, now)
        .unwrap();
    w.pool.take_changes();
    w.tick_after_ms(120 * SECOND_MS);
    assert_eq!(ends(&mut w)[0].4, EndReason::NoLogonEvidence);
}

#[test]
fn s9_disconnected_timeout_and_lifetime_say_which() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    w.configure(|c| {
        c.disconnected_timeout_seconds = 60;
        c.max_session_lifetime_seconds = 3600;
    });
    let gone = placed(&mut w, "alice@x");
    let long = placed(&mut w, "bob@x");
    w.set_state(&gone, SessionState::Disconnected);
    w.set_state(&long, SessionState::Active);
    w.pool.take_changes();
    w.tick_after_ms(60 * SECOND_MS);
    assert_eq!(
        ends(&mut w)
            .into_iter()
            .map(|e| (e.0, e.4))
            .collect::<Vec<_>>(),
        [(gone, EndReason::DisconnectedTimeout)]
    );
    w.tick_after_ms(3600 * SECOND_MS);
    assert_eq!(
        ends(&mut w)
            .into_iter()
            .map(|e| (e.0, e.4))
            .collect::<Vec<_>>(),
        [(long, EndReason::LifetimeExceeded)]
    );
}

#[test]
fn s8_a_session_its_host_no_longer_lists_is_not_listed() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    let id = placed(&mut w, "alice@x");
    w.set_state(&id, SessionState::Active);
    w.pool.take_changes();
    let now = w.now_ms;
    w.pool.reconcile("a", &[], now, &mut || "x".into()).unwrap();
    assert_eq!(ends(&mut w)[0].4, EndReason::NotListed);
}

#[test]
fn removing_a_host_with_force_ends_its_sessions_as_host_removed() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    placed(&mut w, "alice@x");
    placed(&mut w, "bob@x");
    w.pool.remove_host("a", true).unwrap();
    let got = ends(&mut w);
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|e| e.4 == EndReason::HostRemoved));
}

#[test]
fn an_adopted_session_dropped_by_its_users_connect_records_no_end() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    let now = w.now_ms;
    w.pool
        .reconcile(
            "a",
            &[("alice@x".into(), SessionState::Active)],
            now,
            &mut || "adopted".into(),
        )
        .unwrap();
    w.pool.take_changes();
    w.connect("alice@x", 0).unwrap();
    assert_eq!(ends(&mut w), []);
}

#[test]
fn every_reason_has_a_stable_name_that_parses_back() {
    let names: Vec<&str> = EndReason::ALL.iter().map(|r| r.as_str()).collect();
    assert_eq!(
        names,
        [
            "logoff",
            "released",
            "pendingTimeout",
            "noLogonEvidence",
            "notListed",
            "disconnectedTimeout",
            "lifetimeExceeded",
            "hostRemoved",
            "scalingLogoff"
        ]
    );
    for r in EndReason::ALL {
        assert_eq!(EndReason::parse(r.as_str()), Some(r));
    }
    assert_eq!(EndReason::parse("LOGOFF"), None);
}
