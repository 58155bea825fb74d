//! Rule S8: a host's list of its sessions confirms, changes or ends what the
//! broker placed on it, and adopts only what takes nobody: a user with no
//! session elsewhere (the owner, in a personal pool), within the limit, and
//! never used for S1 until the broker itself places the user.

use placement::{
    Change, Error, HostPoolType, LoadBalancerType, MAX_REPORTED_SESSIONS, PoolConfig,
    RefusalReason, SessionState,
};

use crate::{Alg, World};

use RefusalReason::*;
use SessionState::*;

/// Reconciles `host`'s list at the world's time; answers the refusals as
/// `(user, reason)` and how many entries were adopted.
fn report(
    w: &mut World,
    host: &str,
    list: &[(&str, SessionState)],
) -> Result<(Vec<(String, RefusalReason)>, usize), Error> {
    let reported: Vec<(String, SessionState)> =
        list.iter().map(|(u, s)| (u.to_string(), *s)).collect();
    let mut n = 0;
    let mut ids = || {
        n += 1;
        format!("adopted{n}")
    };
    let r = w.pool.reconcile(host, &reported, w.now_ms, &mut ids)?;
    let refused = r.refused.into_iter().map(|x| (x.user, x.reason)).collect();
    Ok((refused, r.adopted))
}

fn users_on(w: &World, host: &str) -> Vec<String> {
    let mut u: Vec<String> = w
        .pool
        .sessions()
        .filter(|s| s.host == host)
        .map(|s| s.user.to_ascii_lowercase())
        .collect();
    u.sort();
    u
}

#[test]
fn s8_a_host_confirms_changes_and_ends_only_its_own_sessions() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b"]);
    let alice = w.connect("alice", 0).unwrap();
    assert_eq!(alice.host, "a");
    let bob = w.connect("bob", 0).unwrap();
    assert_eq!(bob.host, "b");
    w.set_state(&bob.session_id, Active);
    w.pool.take_changes();
    // a lists alice Active (confirms her Pending session), in another case.
    let (refused, adopted) = report(&mut w, "a", &[("ALICE", Active)]).unwrap();
    assert_eq!((refused, adopted), (vec![], 0));
    assert_eq!(w.pool.session(&alice.session_id).unwrap().state, Active);
    // An empty list from a ends alice; bob on b is not a's to end.
    report(&mut w, "a", &[]).unwrap();
    assert!(w.pool.session(&alice.session_id).is_none());
    assert!(w.pool.session(&bob.session_id).is_some());
    let changes = w.pool.take_changes();
    assert!(
        changes.iter().any(
            |c| c.ended() == Some((alice.session_id.as_str(), placement::EndReason::NotListed))
        )
    );
}

#[test]
fn s8_a_user_with_a_session_elsewhere_is_refused_and_stays_where_they_are() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b"]);
    let alice = w.connect("alice", 0).unwrap();
    assert_eq!(alice.host, "a");
    let (refused, adopted) = report(&mut w, "b", &[("alice", Active)]).unwrap();
    assert_eq!(refused, vec![("alice".to_string(), SessionElsewhere)]);
    assert_eq!(adopted, 0);
    assert!(users_on(&w, "b").is_empty());
    let again = w.connect("alice", 0).unwrap();
    assert_eq!((again.host.as_str(), again.reconnect), ("a", true));
}

#[test]
fn s8_adoption_stops_at_the_limit_and_duplicates_count_once() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b"]);
    w.set_limit(3);
    let users: Vec<String> = (0..3002).map(|i| format!("u{i}")).collect();
    let mut list: Vec<(&str, SessionState)> = users.iter().map(|u| (u.as_str(), Active)).collect();
    list.push(("U0", Active));
    w.pool.take_changes();
    let (refused, adopted) = report(&mut w, "a", &list).unwrap();
    // 3 adopted (the limit), 2,999 refused as full, 1 duplicate.
    assert_eq!(adopted, 3);
    assert_eq!(w.sessions_on("a"), 3);
    assert_eq!(refused.iter().filter(|r| r.1 == HostFull).count(), 2999);
    assert!(refused.contains(&("U0".to_string(), Duplicate)));
    assert_eq!(refused.len(), 3000);
    // Adopted sessions are never stored.
    assert_eq!(w.pool.take_changes(), vec![]);
}

#[test]
fn s8_an_adopted_session_is_never_used_for_s1() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b"]);
    w.set_drained("b", true);
    // b (drained) lists carol, who never logged on, again and again.
    for _ in 0..3 {
        let (refused, _) = report(&mut w, "b", &[("carol", Active)]).unwrap();
        assert!(refused.is_empty());
    }
    assert_eq!(users_on(&w, "b"), vec!["carol"]);
    let s1 = w.pool.existing_placement("carol", None).unwrap();
    assert!(
        s1.is_none(),
        "an unconfirmed session is not a reconnect: {s1:?}"
    );
    // Her connect drops the adoption and places her by the rules: on a.
    let p = w.connect("carol", 0).unwrap();
    assert_eq!((p.host.as_str(), p.reconnect), ("a", false));
    assert!(users_on(&w, "b").is_empty());
    // b listing her now is refused: she has a session elsewhere.
    let (refused, _) = report(&mut w, "b", &[("carol", Active)]).unwrap();
    assert_eq!(refused, vec![("carol".to_string(), SessionElsewhere)]);
}

#[test]
fn s8_when_the_rules_choose_the_adopting_host_its_next_list_confirms_the_placed_session() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    report(&mut w, "a", &[("dave", Disconnected)]).unwrap();
    let p = w.connect("dave", 0).unwrap();
    assert_eq!((p.host.as_str(), p.reconnect), ("a", false));
    report(&mut w, "a", &[("dave", Active)]).unwrap();
    assert_eq!(w.pool.session(&p.session_id).unwrap().state, Active);
    let again = w.connect("dave", 0).unwrap();
    assert_eq!((again.session_id, again.reconnect), (p.session_id, true));
}

#[test]
fn s8_an_administrator_confirms_an_adopted_session() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b"]);
    report(&mut w, "b", &[("erin", Disconnected)]).unwrap();
    let id = w.pool.user_sessions("erin").next().unwrap().id.clone();
    assert!(w.pool.is_unconfirmed(&id));
    w.pool.take_changes();
    w.set_state(&id, Active);
    assert!(!w.pool.is_unconfirmed(&id));
    assert!(w.pool.take_changes().contains(&Change::Session(id.clone())));
    let p = w.connect("erin", 0).unwrap();
    assert_eq!((p.session_id, p.reconnect), (id, true));
}

fn persistent(hosts: &[(&str, &str)]) -> World {
    let c = PoolConfig::new(
        "desks",
        HostPoolType::Personal,
        LoadBalancerType::Persistent,
    );
    let mut w = World::new(c);
    for (h, owner) in hosts {
        let mut spec = crate::host_spec(h, &[]);
        spec.assigned_user = Some(owner.to_string());
        w.add_spec(spec);
    }
    w
}

#[test]
fn s8_in_a_personal_pool_only_the_owner_is_adopted() {
    let mut w = persistent(&[("alice-pc", "alice"), ("mallory-pc", "mallory")]);
    let (refused, adopted) = report(
        &mut w,
        "mallory-pc",
        &[("alice", Active), ("Mallory", Active)],
    )
    .unwrap();
    assert_eq!(refused, vec![("alice".to_string(), NotOwner)]);
    assert_eq!(adopted, 1);
    let p = w.connect("alice", 0).unwrap();
    assert_eq!(p.host, "alice-pc");
}

#[test]
fn s8_the_list_is_bounded() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    let users: Vec<String> = (0..=MAX_REPORTED_SESSIONS)
        .map(|i| format!("u{i}"))
        .collect();
    let list: Vec<(&str, SessionState)> = users.iter().map(|u| (u.as_str(), Active)).collect();
    let e = report(&mut w, "a", &list).unwrap_err();
    assert!(matches!(e, Error::InvalidParameter(_)), "{e:?}");
    assert_eq!(w.sessions_on("a"), 0);
    let ok = report(&mut w, "a", &list[..MAX_REPORTED_SESSIONS]).unwrap();
    assert_eq!(ok.1, MAX_REPORTED_SESSIONS);
}

/// S9: the host listing a user is what confirms a logon. A session a front
/// door relayed then lasts past its connection; one the host never listed
/// ends the pending timeout after its connection closed.
#[test]
fn s8_s9_a_listed_user_s_session_lasts_past_its_connection() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    w.configure(|c| c.disconnected_timeout_seconds = 0);
    let alice = w.connect("alice", 0).unwrap().session_id;
    let bob = w.connect("bob", 0).unwrap().session_id;
    let now = w.now_ms;
    for id in [&alice, &bob] {
        w.pool.mark_relayed_session(id, Active, now).unwrap();
    }
    w.pool.take_changes();
    // The host lists alice (Active, as the door marked her): confirmed, and
    // that is a change to store though her state is the same.
    report(&mut w, "a", &[("alice", Active), ("bob", Active)]).unwrap();
    assert!(!w.pool.session(&alice).unwrap().awaiting_logon);
    assert!(!w.pool.session(&bob).unwrap().awaiting_logon);
    let changes = w.pool.take_changes();
    assert!(
        changes.contains(&Change::Session(alice.clone())),
        "{changes:?}"
    );
    // A third user, relayed but never listed, and both connections close.
    let carol = w.connect("carol", 0).unwrap().session_id;
    let now = w.now_ms;
    w.pool.mark_relayed_session(&carol, Active, now).unwrap();
    for id in [&alice, &carol] {
        w.pool.mark_relayed_session(id, Disconnected, now).unwrap();
    }
    w.tick_after_ms(120_000);
    assert!(w.pool.session(&carol).is_none(), "never confirmed: ended");
    assert_eq!(w.pool.session(&alice).unwrap().state, Disconnected);
    w.tick_after_ms(86_400_000);
    assert!(w.pool.session(&alice).is_some(), "confirmed: lasting");
}

/// Rule W5: a broker logoff of a session its user may be logged on to
/// (Active, Disconnected) is kept for the host's agent; a Pending one, a
/// front door's release and the host's own ending are not.
#[test]
fn w5_logoffs_of_logged_on_sessions_are_kept_for_their_hosts() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b"]);
    let alice = w.connect("alice@x", 0).unwrap();
    let bob = w.connect("bob@x", 0).unwrap();
    let carol = w.connect("carol@x", 0).unwrap();
    let dave = w.connect("dave@x", 0).unwrap();
    w.set_state(&alice.session_id, Active);
    w.set_state(&bob.session_id, Disconnected);
    w.set_state(&dave.session_id, Active);
    w.pool.logoff(&alice.session_id).unwrap();
    w.pool.logoff(&bob.session_id).unwrap();
    w.pool.logoff(&carol.session_id).unwrap(); // Pending: never logged on.
    w.pool.release(&dave.session_id).unwrap(); // a front door's, unused.
    let got: Vec<(String, String, String)> = w
        .pool
        .take_host_logoffs()
        .into_iter()
        .map(|l| (l.session_id, l.host, l.user))
        .collect();
    assert_eq!(
        got,
        [
            (
                alice.session_id.clone(),
                alice.host.clone(),
                "alice@x".into()
            ),
            (bob.session_id.clone(), bob.host.clone(), "bob@x".into()),
        ]
    );
    assert!(w.pool.take_host_logoffs().is_empty(), "taken once");
    // The host's own list ending a session asks nothing of it.
    let erin = w.connect("erin@x", 0).unwrap();
    w.set_state(&erin.session_id, Active);
    report(&mut w, &erin.host, &[]).unwrap();
    assert!(w.pool.take_host_logoffs().is_empty());
    w.assert_consistent();
}

/// Rule W5 with S9: lifetimes and disconnection timeouts are the broker's
/// logoffs too.
#[test]
fn w5_lifetimes_are_logoffs_on_the_host() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    w.configure(|c| {
        c.max_session_lifetime_seconds = 3600;
        c.disconnected_timeout_seconds = 600;
    });
    let old = w.connect("old@x", 0).unwrap();
    w.set_state(&old.session_id, Active);
    w.tick_after_ms(1_000);
    let away = w.connect("away@x", 0).unwrap();
    w.set_state(&away.session_id, Active);
    w.set_state(&away.session_id, Disconnected);
    w.pool.take_host_logoffs();
    // 600 s later: away's disconnection timeout.
    w.tick_after_ms(600_000);
    let ids = |w: &mut World| -> Vec<String> {
        w.pool
            .take_host_logoffs()
            .into_iter()
            .map(|l| l.session_id)
            .collect()
    };
    assert_eq!(ids(&mut w), std::slice::from_ref(&away.session_id));
    // An hour after it began: old's lifetime.
    w.tick_after_ms(3_000_000);
    assert_eq!(ids(&mut w), std::slice::from_ref(&old.session_id));
}

/// Rule W5 with S8: while the broker's logoff of a user's session on a
/// host is outstanding, that host listing the user adopts nothing; a
/// session the broker places for the user there since is taken as usual,
/// and other users are not affected.
#[test]
fn w5_a_user_being_logged_off_is_not_adopted_again() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    let alice = w.connect("alice@x", 0).unwrap();
    w.set_state(&alice.session_id, Active);
    w.pool.logoff(&alice.session_id).unwrap();
    let reported: Vec<(String, SessionState)> = vec![
        ("ALICE@x".to_string(), Active),
        ("bob@x".to_string(), Active),
    ];
    let logging_off = |key: &str| key == "alice@x";
    let mut n = 0;
    let mut ids = || {
        n += 1;
        format!("adopted{n}")
    };
    let r = w
        .pool
        .reconcile_logging_off("a", &reported, &logging_off, w.now_ms, &mut ids)
        .unwrap();
    assert_eq!(
        r.refused,
        [placement::RefusedSession {
            user: "ALICE@x".into(),
            reason: LoggingOff
        }]
    );
    assert_eq!(r.adopted, 1, "bob is adopted as before");
    assert_eq!(users_on(&w, "a"), ["bob@x"]);
    assert!(!w.pool.has_session_on("a", "alice@x"));
    // The broker places alice there again: her listing is that session's.
    let again = w.connect("alice@x", 0).unwrap();
    assert!(w.pool.has_session_on("a", "ALICE@X"));
    let r = w
        .pool
        .reconcile_logging_off("a", &reported, &logging_off, w.now_ms, &mut ids)
        .unwrap();
    assert!(r.refused.is_empty(), "{:?}", r.refused);
    assert_eq!(w.pool.session(&again.session_id).unwrap().state, Active);
    assert_eq!(LoggingOff.as_str(), "loggingOff");
    w.assert_consistent();
}
