//! Rule S1 (reconnect wins over every threshold, never a second session)
//! and rule P6 (lowering the limit moves nothing).

use placement::{Error, SessionState};

use crate::{Alg, World, build};

/// A pool of three hosts where alice has an Active session on `b`.
fn alice_on_b() -> (World, String) {
    let mut w = build(Alg::Classic, 10, "a:2 b:1 c:3");
    let p = w.connect("alice@contoso.com", 0).unwrap();
    assert_eq!(p.host, "b"); // classic: fewest sessions
    w.set_state(&p.session_id, SessionState::Active);
    (w, p.session_id)
}

/// Connects alice again and checks that S1 sent her back to her session
/// without making a new one.
fn assert_reconnects(w: &mut World, id: &str, state: SessionState) {
    let before = (w.counts(), w.pool.session_count());
    for (user, random) in [("alice@contoso.com", 0), ("ALICE@Contoso.COM", u64::MAX)] {
        let p = w.connect(user, random).unwrap();
        assert!(p.reconnect, "{user}");
        assert_eq!(p.session_id, id, "{user}: same session");
        assert_eq!(p.host, "b", "{user}");
        assert_eq!(p.address, "b.farm.local:3389", "{user}");
        assert_eq!(p.state, state, "{user}");
    }
    assert_eq!(
        (w.counts(), w.pool.session_count()),
        before,
        "no new session"
    );
    w.assert_consistent();
}

#[test]
fn s1_reconnect_to_an_ordinary_host() {
    let (mut w, id) = alice_on_b();
    assert_reconnects(&mut w, &id, SessionState::Active);
}

#[test]
fn s1_reconnect_whatever_the_state_of_the_session() {
    let (mut w, id) = alice_on_b();
    w.set_state(&id, SessionState::Disconnected);
    assert_reconnects(&mut w, &id, SessionState::Disconnected);

    // A Pending session (placed, logon not finished) is reconnected too.
    let mut w = build(Alg::Classic, 10, "a:2 b:1 c:3");
    let p = w.connect("alice@contoso.com", 0).unwrap();
    assert_reconnects(&mut w, &p.session_id, SessionState::Pending);
}

#[test]
fn s1_reconnect_to_a_drained_host() {
    let (mut w, id) = alice_on_b();
    w.set_drained("b", true);
    assert_reconnects(&mut w, &id, SessionState::Active);
    // A new user does not get b.
    assert_eq!(w.connect("bob@x", 0).unwrap().host, "a");
}

#[test]
fn s1_reconnect_to_a_host_at_or_over_the_limit() {
    let (mut w, id) = alice_on_b();
    // b has 2 sessions: limit 2 puts it at the limit, 1 over it, 0 stops all new sessions.
    for limit in [2, 1, 0] {
        w.set_limit(limit);
        assert_reconnects(&mut w, &id, SessionState::Active);
    }
}

#[test]
fn s1_reconnect_in_every_algorithm() {
    for alg in [Alg::Breadth, Alg::Classic, Alg::Depth] {
        let (mut w, id) = alice_on_b();
        w.set_alg(alg);
        assert_reconnects(&mut w, &id, SessionState::Active);
    }
}

#[test]
fn s1_reconnect_to_an_unavailable_host_fails_and_opens_nothing_elsewhere() {
    let (mut w, id) = alice_on_b();
    w.make_unavailable(&["b"]);
    let before = (w.counts(), w.pool.session_count());
    for user in ["alice@contoso.com", "Alice@CONTOSO.com"] {
        let e = w.connect(user, 0).unwrap_err();
        assert!(matches!(e, Error::SessionHostUnavailable(_)), "{e:?}");
        assert_eq!(e.code(), "SessionHostUnavailable");
        assert!(e.to_string().contains("session host b"), "{e}");
    }
    assert_eq!(
        (w.counts(), w.pool.session_count()),
        before,
        "no second session"
    );
    assert_eq!(
        w.pool.session(&id).unwrap().host,
        "b",
        "the session is kept"
    );

    // The next heartbeat brings b back, and alice with it.
    w.heartbeat("b");
    assert_reconnects(&mut w, &id, SessionState::Active);
}

#[test]
fn s1_reconnect_ignores_what_the_request_requires() {
    // b offers only rdp; a reconnect asking for gpu still goes back to b,
    // rather than opening a second session on a gpu host.
    let (mut w, id) = alice_on_b();
    w.add_spec(crate::host_spec("g", &["gpu"]));
    let gpu = crate::caps(&["gpu"]);
    let p = w
        .connect_req(
            &placement::ConnectRequest {
                user: "alice@contoso.com",
                requires: &gpu,
                session_host: None,
            },
            0,
        )
        .unwrap();
    assert_eq!(
        (p.host.as_str(), p.session_id.as_str(), p.reconnect),
        ("b", id.as_str(), true)
    );
    assert_eq!(w.sessions_on("g"), 0);
}

#[test]
fn s1_user_names_match_without_regard_to_case() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b"]);
    let first = w.connect("Alice@Contoso.com", 0).unwrap();
    for user in [
        "alice@contoso.com",
        "ALICE@CONTOSO.COM",
        "aLiCe@cOnToSo.CoM",
    ] {
        let p = w.connect(user, 0).unwrap();
        assert!(p.reconnect, "{user}");
        assert_eq!(p.session_id, first.session_id, "{user}");
    }
    assert_eq!(w.pool.session_count(), 1);
    // The session keeps the name as first given; lookups by any case find it.
    assert_eq!(w.pool.user_sessions("ALICE@contoso.com").count(), 1);
    // A different user is a different user.
    assert!(!w.connect("alice2@contoso.com", 0).unwrap().reconnect);
}

#[test]
fn s1_after_logoff_the_user_is_placed_afresh() {
    let (mut w, id) = alice_on_b();
    w.pool.logoff(&id).unwrap();
    let p = w.connect("alice@contoso.com", 0).unwrap();
    assert!(!p.reconnect);
    assert_ne!(p.session_id, id);
    // a:2 b:1 c:3 -> classic takes b again, but as a new session.
    assert_eq!(p.host, "b");
}

#[test]
fn p6_lowering_the_limit_ends_nothing_and_stops_new_sessions_on_that_host() {
    // a has 5 sessions, b 2, limit 10; classic BreadthFirst.
    let mut w = build(Alg::Classic, 10, "a:5 b:2");
    let before: Vec<_> = {
        let mut v: Vec<_> = w.pool.sessions().cloned().collect();
        v.sort_by(|x, y| x.id.cmp(&y.id));
        v
    };
    w.set_limit(3);
    // Nothing ended, moved or changed state.
    let mut after: Vec<_> = w.pool.sessions().cloned().collect();
    after.sort_by(|x, y| x.id.cmp(&y.id));
    assert_eq!(after, before);
    assert_eq!(w.counts(), [("a".into(), 5), ("b".into(), 2)]);

    // DepthFirst would prefer a (the fullest), but a is over the limit:
    // b goes 2 -> 3, then everyone is at or over 3.
    w.set_alg(Alg::Depth);
    assert_eq!(w.connect("n1@x", 0).unwrap().host, "b");
    let e = w.connect("n2@x", 0).unwrap_err();
    assert_eq!(
        e,
        Error::NoSessionHostAvailable(
            "all session hosts have reached the max session limit (3): increase the limit or \
             add session hosts"
                .into()
        )
    );

    // a goes down to 3 sessions: still at the limit, still nothing new.
    let ids: Vec<String> = w
        .pool
        .sessions()
        .filter(|s| s.host == "a")
        .map(|s| s.id.clone())
        .collect();
    w.pool.logoff(&ids[0]).unwrap();
    w.pool.logoff(&ids[1]).unwrap();
    assert_eq!(w.sessions_on("a"), 3);
    assert_eq!(
        w.connect("n3@x", 0).unwrap_err().code(),
        "NoSessionHostAvailable"
    );
    // Below the limit: a takes the next one, up to the limit and no further.
    w.pool.logoff(&ids[2]).unwrap();
    assert_eq!(w.connect("n4@x", 0).unwrap().host, "a");
    assert_eq!(w.sessions_on("a"), 3);
    assert_eq!(
        w.connect("n5@x", 0).unwrap_err().code(),
        "NoSessionHostAvailable"
    );
    w.assert_consistent();
}
