//! `Pool::connect_picked`: the caller chooses among the eligible hosts (the
//! simulator's reference policies of other products); the engine keeps
//! every rule around the pick (S1, S2, P4, S3, S4, H6).

use placement::{ConnectRequest, Error, SessionState};

use crate::{Alg, World};

fn connect_picked(
    w: &mut World,
    user: &str,
    pick: impl FnOnce(&placement::Candidates) -> Option<u64>,
) -> Result<placement::Placement, Error> {
    let id = w.session_id();
    let req = ConnectRequest {
        user,
        ..ConnectRequest::default()
    };
    w.pool.connect_picked(&req, w.now_ms, &id, pick)
}

#[test]
fn candidates_are_the_eligible_hosts_ranked_by_sessions_then_query_order() {
    let mut w = World::with_hosts(Alg::Classic, &["h1", "h2", "h3", "h4"]);
    w.set_limit(2);
    // h1: 2 (at the limit), h2: 1, h3: drained, h4: 0.
    for host in ["h1", "h1", "h2"] {
        let u = w.fresh_user();
        connect_picked(&mut w, &u, |c| {
            c.iter().find(|h| h.spec.name == host).map(|h| h.seq)
        })
        .unwrap();
    }
    w.set_drained("h3", true);
    let mut seen = Vec::new();
    let u = w.fresh_user();
    connect_picked(&mut w, &u, |c| {
        seen = c
            .iter()
            .map(|h| (h.spec.name.clone(), h.sessions))
            .collect();
        None
    })
    .unwrap_err();
    assert_eq!(seen, [("h4".to_string(), 0), ("h2".to_string(), 1)]);
}

#[test]
fn a_pick_outside_the_candidates_is_refused_and_changes_nothing() {
    let mut w = World::with_hosts(Alg::Classic, &["h1", "h2"]);
    w.set_drained("h2", true);
    let h2 = w.pool.host("h2").unwrap().seq;
    let u = w.fresh_user();
    let err = connect_picked(&mut w, &u, |_| Some(h2)).unwrap_err();
    assert!(matches!(err, Error::InvalidParameter(_)), "{err:?}");
    assert_eq!(w.pool.session_count(), 0);
    let err = connect_picked(&mut w, &u, |_| Some(999)).unwrap_err();
    assert!(matches!(err, Error::InvalidParameter(_)), "{err:?}");
}

#[test]
fn s1_a_reconnect_never_asks_the_picker() {
    let mut w = World::with_hosts(Alg::Classic, &["h1", "h2"]);
    let first = connect_picked(&mut w, "alice", |c| Some(c.get(1).seq)).unwrap();
    assert_eq!(first.host, "h2");
    w.set_state(&first.session_id, SessionState::Disconnected);
    w.set_drained("h2", true);
    let again = connect_picked(&mut w, "ALICE", |_| panic!("not asked")).unwrap();
    assert!(again.reconnect);
    assert_eq!(again.session_id, first.session_id);
}

#[test]
fn s3_nothing_eligible_is_the_engines_refusal() {
    let mut w = World::with_hosts(Alg::Classic, &["h1"]);
    w.set_limit(0);
    let u = w.fresh_user();
    let err = connect_picked(&mut w, &u, |c| {
        assert!(c.is_empty());
        None
    })
    .unwrap_err();
    match err {
        Error::NoSessionHostAvailable(m) => assert!(m.contains("max session limit is 0"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn s4_a_picked_placement_is_pending_and_counts_at_once() {
    let mut w = World::with_hosts(Alg::Classic, &["h1", "h2"]);
    let u = w.fresh_user();
    let p = connect_picked(&mut w, &u, |c| Some(c.get(1).seq)).unwrap();
    assert_eq!((p.host.as_str(), p.state), ("h2", SessionState::Pending));
    let h2 = w.pool.host("h2").unwrap();
    assert_eq!((h2.sessions, h2.connecting_sessions), (1, 1));
}

#[test]
fn h6_hosts_refusing_logons_are_not_candidates() {
    let mut w = World::with_hosts(Alg::Load, &["h1", "h2"]);
    w.configure(|c| c.load_index_settings.connecting_session_threshold = 1);
    let u = w.fresh_user();
    connect_picked(&mut w, &u, |c| Some(c.get(0).seq)).unwrap();
    let mut names = Vec::new();
    let u = w.fresh_user();
    connect_picked(&mut w, &u, |c| {
        names = c.iter().map(|h| h.spec.name.clone()).collect();
        Some(c.get(0).seq)
    })
    .unwrap();
    assert_eq!(
        names.len(),
        1,
        "the host with one connecting session refuses"
    );
}

/// H6 by a host's own policy, in a pool whose thresholds are off: only that
/// host refuses (the engine notices a refusing host wherever it comes from
/// before it lets a caller pick from every open host).
#[test]
fn h6_a_hosts_own_policy_is_applied_and_without_refusals_every_host_is_a_candidate() {
    let mut w = World::with_hosts(Alg::Load, &["h1", "h2", "h3"]);
    let names_seen = |w: &mut World| {
        let mut names = Vec::new();
        let u = w.fresh_user();
        connect_picked(w, &u, |c| {
            names = c.iter().map(|h| h.spec.name.clone()).collect();
            None
        })
        .unwrap_err();
        names
    };
    assert_eq!(names_seen(&mut w), ["h1", "h2", "h3"], "nobody refuses");
    let u = w.fresh_user();
    connect_picked(&mut w, &u, |c| {
        c.iter().find(|h| h.spec.name == "h2").map(|h| h.seq)
    })
    .unwrap();
    let mut spec = w.pool.host("h2").unwrap().spec.clone();
    spec.policy.connecting_session_threshold = Some(1);
    w.pool.upsert_host(spec, w.now_ms).unwrap();
    assert_eq!(
        names_seen(&mut w),
        ["h1", "h3"],
        "h2 refuses at its own connecting threshold of 1"
    );
    let h2 = w.pool.host("h2").unwrap().seq;
    let u = w.fresh_user();
    let err = connect_picked(&mut w, &u, |_| Some(h2)).unwrap_err();
    assert!(matches!(err, Error::InvalidParameter(_)), "{err:?}");
}
