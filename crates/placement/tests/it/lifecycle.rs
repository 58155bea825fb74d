//! Rule S4: a placement makes a Pending session that counts at once; the
//! host confirms it Active, a dropped client leaves it Disconnected, logoff
//! ends it, and a Pending session not confirmed in time ends by itself.

use placement::{Error, SessionState};

use crate::{Alg, World};

const SECOND_MS: i64 = 1000;

#[test]
fn s4_a_placement_is_pending_and_counts_at_once() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b"]);
    let p = w.connect("alice@x", 0).unwrap();
    let s = w.pool.session(&p.session_id).unwrap().clone();
    assert_eq!(
        (s.state, s.host.as_str(), s.user.as_str()),
        (SessionState::Pending, "a", "alice@x")
    );
    assert_eq!((s.create_time_ms, s.state_since_ms), (w.now_ms, w.now_ms));
    let a = w.pool.host("a").unwrap();
    assert_eq!((a.sessions, a.connecting_sessions), (1, 1));
}

#[test]
fn s4_state_transitions() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    let id = w.connect("alice@x", 0).unwrap().session_id;
    let connecting = |w: &World| w.pool.host("a").unwrap().connecting_sessions;

    w.advance_ms(5 * SECOND_MS);
    w.set_state(&id, SessionState::Active);
    let s = w.pool.session(&id).unwrap();
    assert_eq!(s.state, SessionState::Active);
    assert_eq!(
        s.state_since_ms, w.now_ms,
        "the state's start moves with it"
    );
    assert_eq!(
        s.create_time_ms,
        w.now_ms - 5 * SECOND_MS,
        "the creation time does not"
    );
    assert_eq!(
        connecting(&w),
        0,
        "an Active session is no longer connecting"
    );

    w.set_state(&id, SessionState::Disconnected);
    assert_eq!(
        w.pool.session(&id).unwrap().state,
        SessionState::Disconnected
    );
    w.set_state(&id, SessionState::Active);
    assert_eq!(w.pool.session(&id).unwrap().state, SessionState::Active);
    assert_eq!(
        w.sessions_on("a"),
        1,
        "the count does not change with the state"
    );

    // Back to Pending is refused; so is an unknown session.
    let e = w
        .pool
        .set_session_state(&id, SessionState::Pending, w.now_ms)
        .unwrap_err();
    assert_eq!(e.code(), "InvalidParameter");
    assert_eq!(w.pool.session(&id).unwrap().state, SessionState::Active);
    let e = w
        .pool
        .set_session_state("nope", SessionState::Active, w.now_ms)
        .unwrap_err();
    assert_eq!(e.code(), "SessionNotFound");
    w.assert_consistent();
}

#[test]
fn s4_logoff_ends_the_session() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b"]);
    let p1 = w.connect("alice@x", 0).unwrap();
    let p2 = w.connect("bob@x", 0).unwrap();
    assert_eq!((p1.host.as_str(), p2.host.as_str()), ("a", "b"));
    w.pool.logoff(&p1.session_id).unwrap();
    assert!(w.pool.session(&p1.session_id).is_none());
    assert_eq!(w.pool.session_count(), 1);
    assert_eq!(w.counts(), [("a".into(), 0), ("b".into(), 1)]);
    assert_eq!(w.pool.user_sessions("alice@x").count(), 0);
    // Twice is an error and changes nothing.
    let e = w.pool.logoff(&p1.session_id).unwrap_err();
    assert!(matches!(e, Error::SessionNotFound(_)), "{e:?}");
    assert_eq!(w.pool.session_count(), 1);
    // The freed slot is used again: classic takes a (0) over b (1).
    assert_eq!(w.connect("carol@x", 0).unwrap().host, "a");
    w.assert_consistent();
}

#[test]
fn s4_a_pending_session_expires_after_the_pending_timeout() {
    // Default pendingTimeoutSeconds: 120.
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    let id = w.connect("alice@x", 0).unwrap().session_id;
    w.tick_after_ms(120 * SECOND_MS - 1);
    assert!(w.pool.session(&id).is_some(), "still within 120 s");
    assert_eq!(w.sessions_on("a"), 1);
    w.pool.take_changes();
    w.tick_after_ms(1);
    assert!(w.pool.session(&id).is_none(), "120 s without confirmation");
    assert_eq!(w.sessions_on("a"), 0);
    assert_eq!(w.pool.host("a").unwrap().connecting_sessions, 0);
    assert_eq!(w.pool.user_sessions("alice@x").count(), 0);
    let changes = w.pool.take_changes();
    let ends: Vec<_> = changes.iter().filter_map(|c| c.ended()).collect();
    assert_eq!(ends, [(id.as_str(), placement::EndReason::PendingTimeout)]);
    // alice is placed afresh, not reconnected to the expired session.
    assert!(!w.connect("alice@x", 0).unwrap().reconnect);
    w.assert_consistent();
}

/// Sessions due in the same tick end oldest first and, within one
/// millisecond, in the order of their ids (the changes a caller reads, the
/// simulator among them, come in that order), whatever order they were
/// placed in or logged off and replaced in.
#[test]
fn s4_s9_sessions_due_together_end_by_time_then_id() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b"]);
    w.configure(|c| c.max_session_lifetime_seconds = 3600);
    let connect = |w: &mut World, user: &str, id: &str| {
        let req = placement::ConnectRequest {
            user,
            ..placement::ConnectRequest::default()
        };
        w.pool.connect(&req, w.now_ms, 0, id).unwrap();
    };
    // t = 0: ids placed out of their order; one logged off and its place
    // taken by a later one, so placement order, id order and the engine's
    // reuse of a freed place all differ.
    for (user, id) in [
        ("u1@x", "s9"),
        ("u2@x", "s10"),
        ("u3@x", "s2"),
        ("u4@x", "s30"),
    ] {
        connect(&mut w, user, id);
    }
    w.pool.logoff("s10").unwrap();
    connect(&mut w, "u5@x", "s1");
    // t = 1 ms: one more, due a millisecond later than the others.
    w.advance_ms(1);
    connect(&mut w, "u6@x", "s0");
    w.pool.take_changes();
    // Pending expiry (S4, 120 s) ends all five in one tick.
    w.tick_after_ms(120 * SECOND_MS);
    let ended = |w: &mut World| -> Vec<String> {
        w.pool
            .take_changes()
            .into_iter()
            .filter_map(|c| match c {
                placement::Change::SessionEnded(e) => Some(e.session.id),
                _ => None,
            })
            .collect()
    };
    assert_eq!(ended(&mut w), ["s1", "s2", "s30", "s9", "s0"]);
    // The same order for the lifetime (S9), on confirmed sessions.
    for (user, id) in [
        ("u1@x", "s9"),
        ("u2@x", "s10"),
        ("u3@x", "s2"),
        ("u4@x", "s30"),
    ] {
        connect(&mut w, user, id);
        w.set_state(id, SessionState::Active);
    }
    w.pool.logoff("s10").unwrap();
    connect(&mut w, "u5@x", "s1");
    w.set_state("s1", SessionState::Active);
    w.advance_ms(1);
    connect(&mut w, "u6@x", "s0");
    w.set_state("s0", SessionState::Active);
    w.pool.take_changes();
    // One hour after s0's creation, all five are over their lifetime.
    w.tick_after_ms(3600 * SECOND_MS + 1);
    assert_eq!(ended(&mut w), ["s1", "s2", "s30", "s9", "s0"]);
    assert_eq!(w.pool.session_count(), 0);
    w.assert_consistent();
}

#[test]
fn s4_the_pool_sets_the_pending_timeout() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    w.configure(|c| c.pending_timeout_seconds = 30);
    let id1 = w.connect("alice@x", 0).unwrap().session_id;
    w.advance_ms(10 * SECOND_MS);
    let id2 = w.connect("bob@x", 0).unwrap().session_id;
    // t = 30 s: alice's (placed at 0) ends, bob's (placed at 10 s) stays.
    w.tick_after_ms(20 * SECOND_MS);
    assert!(w.pool.session(&id1).is_none());
    assert!(w.pool.session(&id2).is_some());
    // t = 40 s: bob's ends too.
    w.tick_after_ms(10 * SECOND_MS);
    assert!(w.pool.session(&id2).is_none());
    assert_eq!(w.sessions_on("a"), 0);
}

#[test]
fn s4_the_connect_itself_expires_stale_pending_sessions_first() {
    // Limit 1 on the only host: alice's Pending session fills it.
    let mut w = World::with_hosts(Alg::Depth, &["a"]);
    w.set_limit(1);
    let id = w.connect("alice@x", 0).unwrap().session_id;
    w.advance_ms(60 * SECOND_MS);
    assert_eq!(
        w.connect("bob@x", 0).unwrap_err().code(),
        "NoSessionHostAvailable"
    );
    // No tick from outside: bob's connect at t = 120 s ends alice's session
    // before placing, so bob gets the slot it freed.
    w.advance_ms(60 * SECOND_MS);
    let p = w.connect("bob@x", 0).unwrap();
    assert_eq!(p.host, "a");
    assert!(w.pool.session(&id).is_none());
    assert_eq!(w.sessions_on("a"), 1);
    w.assert_consistent();
}

#[test]
fn s4_confirmed_sessions_never_expire() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    w.configure(|c| c.disconnected_timeout_seconds = 0);
    let active = w.connect("alice@x", 0).unwrap().session_id;
    let disconnected = w.connect("bob@x", 0).unwrap().session_id;
    // Confirmed just before the timeout.
    w.advance_ms(119 * SECOND_MS);
    w.set_state(&active, SessionState::Active);
    w.set_state(&disconnected, SessionState::Disconnected);
    // Thirty days later both are still there.
    w.tick_after_ms(30 * 24 * 3600 * SECOND_MS);
    assert_eq!(w.pool.session(&active).unwrap().state, SessionState::Active);
    assert_eq!(
        w.pool.session(&disconnected).unwrap().state,
        SessionState::Disconnected
    );
    assert_eq!(w.sessions_on("a"), 2);
}

/// A connect whose session id is already in use must be refused, leaving
/// the pool as it was (the engine promises every refusal as an `Error`).
/// Today the second session silently replaces the first in the session map
/// while the host's count goes up by one, so the count and the sessions
/// disagree (S6) and alice's index entry points at bob's session; after a
/// logoff, alice's next connect panics on the missing entry.
#[test]
fn s4_a_session_id_already_in_use_is_refused() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b"]);
    let now = w.now_ms;
    let req = |user| placement::ConnectRequest {
        user,
        ..Default::default()
    };
    w.pool.connect(&req("alice@x"), now, 0, "dup").unwrap();
    let before = (w.counts(), w.pool.session_count());
    let second = w.pool.connect(&req("bob@x"), now, 0, "dup");
    assert!(
        second.is_err(),
        "a second session with id \"dup\" was made: {second:?}"
    );
    assert_eq!((w.counts(), w.pool.session_count()), before);
    w.assert_consistent();
}

#[test]
fn s9_by_default_a_disconnected_session_ends_after_a_working_day() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    assert_eq!(
        w.pool.config().disconnected_timeout_seconds,
        placement::DEFAULT_DISCONNECTED_TIMEOUT_SECONDS
    );
    let active = w.connect("alice@x", 0).unwrap().session_id;
    w.set_state(&active, SessionState::Active);
    let gone = w.connect("bob@x", 0).unwrap().session_id;
    w.set_state(&gone, SessionState::Disconnected);
    // 8 h - 1 ms later bob's is still there; at 8 h it ends.
    w.tick_after_ms(8 * 3600 * SECOND_MS - 1);
    assert!(w.pool.session(&gone).is_some());
    w.tick_after_ms(1);
    assert!(w.pool.session(&gone).is_none());
    // An Active session never ends by this rule: a year later, alice's is there.
    w.tick_after_ms(366 * 86_400 * SECOND_MS);
    assert!(w.pool.session(&active).is_some());
}

#[test]
fn s9_with_no_disconnected_timeout_active_and_disconnected_sessions_never_end() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    w.configure(|c| c.disconnected_timeout_seconds = 0);
    let active = w.connect("alice@x", 0).unwrap().session_id;
    w.set_state(&active, SessionState::Active);
    let gone = w.connect("bob@x", 0).unwrap().session_id;
    w.set_state(&gone, SessionState::Disconnected);
    // A year later, both are still there (0 = never, as in AVD and RDS).
    w.tick_after_ms(366 * 86_400 * SECOND_MS);
    assert!(w.pool.session(&active).is_some());
    assert!(w.pool.session(&gone).is_some());
}

/// A front door's marks prove no logon: a session only they ever marked
/// lasts while its connection does (Active, however long), and ends the
/// pool's `pendingTimeoutSeconds` after it is disconnected, whatever the
/// disconnected timeout; its host's word makes it a lasting one.
#[test]
fn s9_a_session_no_host_confirmed_ends_the_pending_timeout_after_it_disconnects() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    w.configure(|c| c.disconnected_timeout_seconds = 0);
    let anon = w.connect("anonymous-1", 0).unwrap().session_id;
    let alice = w.connect("alice@x", 0).unwrap().session_id;
    assert!(w.pool.session(&anon).unwrap().awaiting_logon);
    // Relayed (Active) for a day: nothing ends a live connection's session.
    let now = w.now_ms;
    w.pool
        .mark_relayed_session(&anon, SessionState::Active, now)
        .unwrap();
    w.pool
        .mark_relayed_session(&alice, SessionState::Active, now)
        .unwrap();
    w.tick_after_ms(86_400 * SECOND_MS);
    assert!(w.pool.session(&anon).is_some());
    // alice's host confirms her logon; then both connections close.
    w.set_state(&alice, SessionState::Active);
    assert!(!w.pool.session(&alice).unwrap().awaiting_logon);
    let now = w.now_ms;
    w.pool
        .mark_relayed_session(&anon, SessionState::Disconnected, now)
        .unwrap();
    w.pool
        .mark_relayed_session(&alice, SessionState::Disconnected, now)
        .unwrap();
    assert!(
        w.pool.session(&anon).unwrap().awaiting_logon,
        "a mark confirms nothing"
    );
    // 120 s (the default pending timeout) after the close, the unconfirmed one ends.
    w.tick_after_ms(120 * SECOND_MS - 1);
    assert!(w.pool.session(&anon).is_some());
    w.pool.take_changes();
    w.tick_after_ms(1);
    assert!(w.pool.session(&anon).is_none());
    let changes = w.pool.take_changes();
    let ends: Vec<_> = changes.iter().filter_map(|c| c.ended()).collect();
    assert_eq!(
        ends,
        [(anon.as_str(), placement::EndReason::NoLogonEvidence)]
    );
    // alice's lasts (no disconnected timeout here).
    w.tick_after_ms(366 * 86_400 * SECOND_MS);
    assert_eq!(
        w.pool.session(&alice).unwrap().state,
        SessionState::Disconnected
    );
    assert_eq!(w.sessions_on("a"), 1);
    w.assert_consistent();
}

/// What no host confirmed is stored as such, so a restart neither forgets
/// its bound nor resets it; a record stored before the field existed loads
/// as confirmed, so an upgrade ends nobody's session.
#[test]
fn s9_an_unconfirmed_session_keeps_its_bound_across_a_restore() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    w.configure(|c| c.disconnected_timeout_seconds = 0);
    let id = w.connect("anonymous-1", 0).unwrap().session_id;
    let now = w.now_ms;
    w.pool
        .mark_relayed_session(&id, SessionState::Disconnected, now)
        .unwrap();
    let stored: Vec<String> = w
        .pool
        .sessions()
        .map(|s| serde_json::to_string(s).unwrap())
        .collect();
    let sessions: Vec<placement::Session> = stored
        .iter()
        .map(|j| serde_json::from_str(j).unwrap())
        .collect();
    let restore = |sessions: Vec<placement::Session>, at| {
        placement::Pool::restore(
            w.pool.config().clone(),
            w.pool.counters(),
            w.pool.hosts().cloned().collect(),
            sessions,
            at,
        )
    };
    let mut restored = restore(sessions, now + 1);
    restored.tick(now + 120 * SECOND_MS - 1);
    assert!(restored.session(&id).is_some());
    restored.tick(now + 120 * SECOND_MS);
    assert!(restored.session(&id).is_none());
    // The same record as an older broker wrote it, without the field.
    let old = stored[0].replace(",\"awaitingLogon\":true", "");
    assert_ne!(old, stored[0]);
    let session: placement::Session = serde_json::from_str(&old).unwrap();
    assert!(!session.awaiting_logon);
    let mut restored = restore(vec![session], now + 1);
    restored.tick(now + 86_400 * SECOND_MS);
    assert!(restored.session(&id).is_some());
}

#[test]
fn s9_a_disconnected_session_ends_after_the_disconnected_timeout() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    w.configure(|c| c.disconnected_timeout_seconds = 60);
    let alice = w.connect("alice@x", 0).unwrap().session_id;
    let bob = w.connect("bob@x", 0).unwrap().session_id;
    w.set_state(&alice, SessionState::Active);
    w.set_state(&bob, SessionState::Active);
    // t = 10 s: alice disconnects; t = 40 s: bob too.
    w.advance_ms(10 * SECOND_MS);
    w.set_state(&alice, SessionState::Disconnected);
    w.advance_ms(30 * SECOND_MS);
    w.set_state(&bob, SessionState::Disconnected);
    // t = 69.999 s: alice has been disconnected 59.999 s.
    w.tick_after_ms(30 * SECOND_MS - 1);
    assert!(w.pool.session(&alice).is_some());
    w.pool.take_changes();
    // t = 70 s: 60 s disconnected, alice's session ends; bob's (30 s) stays.
    w.tick_after_ms(1);
    assert!(w.pool.session(&alice).is_none());
    let changes = w.pool.take_changes();
    let ends: Vec<_> = changes.iter().filter_map(|c| c.ended()).collect();
    assert_eq!(
        ends,
        [(alice.as_str(), placement::EndReason::DisconnectedTimeout)]
    );
    assert!(w.pool.session(&bob).is_some());
    // bob reconnects (Active again) at t = 80 s: an Active session never
    // times out by this rule, however long it lasts.
    w.advance_ms(10 * SECOND_MS);
    w.set_state(&bob, SessionState::Active);
    w.tick_after_ms(86_400 * SECOND_MS);
    assert!(w.pool.session(&bob).is_some());
    assert_eq!(w.sessions_on("a"), 1);
    w.assert_consistent();
}

#[test]
fn s9_any_session_ends_after_the_max_session_lifetime() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    w.configure(|c| {
        c.max_session_lifetime_seconds = 120;
        c.pending_timeout_seconds = 86_400;
    });
    let pending = w.connect("carol@x", 0).unwrap().session_id;
    w.advance_ms(30 * SECOND_MS);
    let active = w.connect("alice@x", 0).unwrap().session_id;
    w.set_state(&active, SessionState::Active);
    // t = 120 s: carol's (placed at 0, still Pending) reaches its lifetime.
    w.tick_after_ms(90 * SECOND_MS);
    assert!(w.pool.session(&pending).is_none());
    assert!(w.pool.session(&active).is_some());
    // t = 150 s: alice's (placed at 30 s, Active all along) too.
    w.tick_after_ms(30 * SECOND_MS - 1);
    assert!(w.pool.session(&active).is_some());
    w.tick_after_ms(1);
    assert!(w.pool.session(&active).is_none());
    assert_eq!(w.sessions_on("a"), 0);
    assert_eq!(w.pool.user_sessions("alice@x").count(), 0);
    w.assert_consistent();
}

/// A lifetime set while sessions run counts from each one's logon, and
/// turning it off again spares them (the engine keeps the order of logons
/// only while a lifetime is set).
#[test]
fn s9_a_lifetime_set_later_counts_from_each_logon() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    w.configure(|c| c.pending_timeout_seconds = 86_400);
    let early = w.connect("carol@x", 0).unwrap().session_id;
    w.advance_ms(60 * SECOND_MS);
    let late = w.connect("alice@x", 0).unwrap().session_id;
    // t = 60 s: a two-minute lifetime ends carol's at 120 s, alice's at 180 s.
    w.configure(|c| c.max_session_lifetime_seconds = 120);
    w.tick_after_ms(60 * SECOND_MS - 1);
    assert!(w.pool.session(&early).is_some());
    w.tick_after_ms(1);
    assert!(w.pool.session(&early).is_none());
    assert!(w.pool.session(&late).is_some());
    // Off, then on again later: still counted from alice's logon.
    w.configure(|c| c.max_session_lifetime_seconds = 0);
    w.tick_after_ms(120 * SECOND_MS);
    assert!(w.pool.session(&late).is_some(), "no lifetime, no end");
    // t = 240 s: five minutes from alice's logon at 60 s is 360 s.
    w.configure(|c| c.max_session_lifetime_seconds = 300);
    w.tick_after_ms(120 * SECOND_MS - 1);
    assert!(w.pool.session(&late).is_some());
    w.tick_after_ms(1);
    assert!(w.pool.session(&late).is_none(), "300 s after its logon");
    w.assert_consistent();
}

#[test]
fn s9_the_lifetimes_survive_a_restore() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    w.configure(|c| c.disconnected_timeout_seconds = 60);
    let id = w.connect("alice@x", 0).unwrap().session_id;
    w.set_state(&id, SessionState::Disconnected);
    let hosts: Vec<_> = w.pool.hosts().cloned().collect();
    let sessions: Vec<_> = w.pool.sessions().cloned().collect();
    let mut restored = placement::Pool::restore(
        w.pool.config().clone(),
        w.pool.counters(),
        hosts,
        sessions,
        w.now_ms + 1,
    );
    restored.tick(w.now_ms + 60 * SECOND_MS - 1);
    assert!(restored.session(&id).is_some());
    restored.tick(w.now_ms + 60 * SECOND_MS);
    assert!(restored.session(&id).is_none());
}
