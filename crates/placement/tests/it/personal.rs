//! Rule P7: personal pools, one owner per host, `Automatic` and `Direct`
//! assignment, `Persistent` and `MultiplePersistent`.

use placement::{
    ConnectRequest, Error, HostPoolType, LoadBalancerType, PersonalDesktopAssignmentType,
    PoolConfig, SessionState,
};

use crate::{World, host_spec};

fn personal(
    lb: LoadBalancerType,
    assignment: PersonalDesktopAssignmentType,
    hosts: &[&str],
) -> World {
    let mut c = PoolConfig::new("desks", HostPoolType::Personal, lb);
    c.personal_desktop_assignment_type = Some(assignment);
    let mut w = World::new(c);
    for h in hosts {
        w.add_host(h);
    }
    w
}

fn assign(w: &mut World, host: &str, user: Option<&str>) -> Result<(), Error> {
    let mut spec = w.pool.host(host).expect("host exists").spec.clone();
    spec.assigned_user = user.map(str::to_string);
    w.pool.upsert_host(spec, w.now_ms).map(|_| ())
}

fn owner(w: &World, host: &str) -> Option<String> {
    w.pool.host(host).unwrap().spec.assigned_user.clone()
}

fn connect_to(
    w: &mut World,
    user: &str,
    host: Option<&str>,
) -> Result<placement::Placement, Error> {
    w.connect_req(
        &ConnectRequest {
            user,
            requires: &[],
            session_host: host,
        },
        0,
    )
}

use LoadBalancerType::{MultiplePersistent, Persistent};
use PersonalDesktopAssignmentType::{Automatic, Direct};

#[test]
fn p7_automatic_gives_the_first_unassigned_available_undrained_host_and_keeps_it() {
    let mut w = personal(Persistent, Automatic, &["d1", "d2", "d3", "d4", "d5"]);
    assign(&mut w, "d1", Some("bob@x")).unwrap(); // d1 is bob's
    w.set_drained("d2", true); // d2 is drained
    w.make_unavailable(&["d3"]); // d3 is unavailable
    // d4 is the first unassigned, available, undrained host in query order.
    let p = w.connect("alice@x", u64::MAX).unwrap();
    assert_eq!(p.host, "d4");
    assert!(!p.reconnect);
    assert_eq!(owner(&w, "d4").as_deref(), Some("alice@x"));

    // She keeps it after logoff, and gets it back even if d2 is undrained.
    w.pool.logoff(&p.session_id).unwrap();
    w.set_drained("d2", false);
    let again = w.connect("ALICE@X", 0).unwrap();
    assert_eq!(again.host, "d4");
    assert!(!again.reconnect, "a new session on her own host");
    assert_eq!(owner(&w, "d4").as_deref(), Some("alice@x"));
    // While it lasts, she reconnects to it.
    assert!(w.connect("alice@x", 0).unwrap().reconnect);

    // The next new user takes d2, the first unassigned one now.
    assert_eq!(w.connect("carol@x", 0).unwrap().host, "d2");
    assert_eq!(w.connect("dave@x", 0).unwrap().host, "d5");
    // Nothing left: d1..d5 are owned or unavailable.
    let e = w.connect("erin@x", 0).unwrap_err();
    assert_eq!(e.code(), "NoSessionHostAvailable");
    assert_eq!(
        owner(&w, "d3"),
        None,
        "an unavailable host is not given away"
    );
    w.assert_consistent();
}

#[test]
fn p7_direct_without_a_host_is_refused_with_its_own_code() {
    let mut w = personal(Persistent, Direct, &["d1", "d2"]);
    let e = w.connect("alice@x", 0).unwrap_err();
    assert!(matches!(e, Error::NoPersonalDesktopAssigned(_)), "{e:?}");
    assert_eq!(e.code(), "NoPersonalDesktopAssigned");
    assert_eq!(owner(&w, "d1"), None, "Direct never assigns by itself");
    assert_eq!(w.pool.session_count(), 0);

    // Once an administrator assigns d2 she gets d2.
    assign(&mut w, "d2", Some("Alice@X")).unwrap();
    let p = w.connect("alice@x", 0).unwrap();
    assert_eq!(p.host, "d2");
}

#[test]
fn p7_a_host_with_an_owner_cannot_be_given_to_someone_else() {
    for lb in [Persistent, MultiplePersistent] {
        let mut w = personal(lb, Direct, &["d1", "d2"]);
        assign(&mut w, "d1", Some("alice@x")).unwrap();
        let e = assign(&mut w, "d1", Some("bob@x")).unwrap_err();
        assert!(matches!(e, Error::Conflict(_)), "{lb:?}: {e:?}");
        assert_eq!(
            owner(&w, "d1").as_deref(),
            Some("alice@x"),
            "{lb:?}: unchanged"
        );
        // The same owner in another case is the same owner, not a conflict.
        assign(&mut w, "d1", Some("ALICE@x")).unwrap();
        // Unassigned first, it can be given to bob.
        assign(&mut w, "d1", None).unwrap();
        assign(&mut w, "d1", Some("bob@x")).unwrap();
        assert_eq!(owner(&w, "d1").as_deref(), Some("bob@x"));
    }
}

#[test]
fn p7_an_automatic_assignment_is_an_owner_too() {
    let mut w = personal(Persistent, Automatic, &["d1", "d2"]);
    w.connect("alice@x", 0).unwrap();
    assert_eq!(
        assign(&mut w, "d1", Some("bob@x")).unwrap_err().code(),
        "Conflict"
    );
    // Unassigning the host of a user with a session there is a conflict too.
    assert_eq!(assign(&mut w, "d1", None).unwrap_err().code(), "Conflict");
}

#[test]
fn p7_a_persistent_user_gets_one_host_only() {
    let mut w = personal(Persistent, Direct, &["d1", "d2"]);
    assign(&mut w, "d1", Some("alice@x")).unwrap();
    for user in ["alice@x", "Alice@X"] {
        let e = assign(&mut w, "d2", Some(user)).unwrap_err();
        assert!(matches!(e, Error::Conflict(_)), "{user}: {e:?}");
    }
    assert_eq!(owner(&w, "d2"), None);
    // A new host registered with her as owner is refused the same way.
    let mut spec = host_spec("d3", &[]);
    spec.assigned_user = Some("alice@x".into());
    assert_eq!(
        w.pool.upsert_host(spec, w.now_ms).unwrap_err().code(),
        "Conflict"
    );
    assert!(w.pool.host("d3").is_none(), "nothing half-written");
}

#[test]
fn p7_multiple_persistent_picks_the_named_host_else_the_first_in_query_order() {
    let mut w = personal(MultiplePersistent, Direct, &["m1", "m2", "m3", "m4"]);
    // Assigned out of query order: m4 first, then m2.
    assign(&mut w, "m4", Some("alice@x")).unwrap();
    assign(&mut w, "m2", Some("alice@x")).unwrap();

    let p = connect_to(&mut w, "alice@x", None).unwrap();
    assert_eq!(p.host, "m2", "the first of hers in query order");
    w.pool.logoff(&p.session_id).unwrap();

    let p = connect_to(&mut w, "alice@x", Some("m4")).unwrap();
    assert_eq!(p.host, "m4", "the one she names");
    assert!(!p.reconnect);
    // Naming it again reconnects to the same session.
    let again = connect_to(&mut w, "alice@x", Some("m4")).unwrap();
    assert!(again.reconnect);
    assert_eq!(again.session_id, p.session_id);
    // Without a name she goes back to her existing session (S1), on m4.
    let back = connect_to(&mut w, "alice@x", None).unwrap();
    assert_eq!((back.host.as_str(), back.reconnect), ("m4", true));

    // A host that is not hers, or does not exist, is refused.
    let e = connect_to(&mut w, "alice@x", Some("m1")).unwrap_err();
    assert_eq!(e.code(), "NoPersonalDesktopAssigned");
    let e = connect_to(&mut w, "alice@x", Some("m9")).unwrap_err();
    assert_eq!(e.code(), "SessionHostNotFound");
    w.assert_consistent();
}

#[test]
fn p7_the_owners_drained_host_takes_no_new_session_but_keeps_the_existing_one() {
    let mut w = personal(Persistent, Automatic, &["d1", "d2"]);
    let p = w.connect("alice@x", 0).unwrap();
    assert_eq!(p.host, "d1");
    w.set_state(&p.session_id, SessionState::Disconnected);
    w.set_drained("d1", true);
    // S1: the existing session is reconnected in drain mode.
    let again = w.connect("alice@x", 0).unwrap();
    assert_eq!(
        (again.session_id.as_str(), again.reconnect),
        (p.session_id.as_str(), true)
    );
    // After logoff the drained host refuses a new session; she is not moved to d2.
    w.pool.logoff(&p.session_id).unwrap();
    let e = w.connect("alice@x", 0).unwrap_err();
    assert!(matches!(e, Error::NoSessionHostAvailable(_)), "{e:?}");
    assert!(e.to_string().contains("drain mode"), "{e}");
    assert_eq!(owner(&w, "d2"), None);
    assert_eq!(w.pool.session_count(), 0);
}

#[test]
fn p7_the_owners_unavailable_host_is_reported_as_such() {
    let mut w = personal(Persistent, Direct, &["d1", "d2"]);
    assign(&mut w, "d1", Some("alice@x")).unwrap();
    w.make_unavailable(&["d1"]);
    let e = w.connect("alice@x", 0).unwrap_err();
    assert_eq!(e.code(), "SessionHostUnavailable");
    assert_eq!(w.pool.session_count(), 0);
}

#[test]
fn p7_personal_pools_ignore_the_limit_and_pooled_pools_refuse_session_host() {
    // maxSessionLimit bounds pooled pools only (P4); a personal host with
    // its owner is used whatever the limit.
    let mut w = personal(MultiplePersistent, Automatic, &["d1"]);
    w.configure(|c| c.max_session_limit = 0);
    assert_eq!(w.connect("alice@x", 0).unwrap().host, "d1");

    let mut w = World::with_hosts(crate::Alg::Classic, &["a"]);
    let e = connect_to(&mut w, "alice@x", Some("a")).unwrap_err();
    assert_eq!(e.code(), "InvalidParameter");
}

#[test]
fn p7_assigned_user_is_only_for_personal_pools_and_persistent_needs_one_host_each() {
    let mut w = World::with_hosts(crate::Alg::Classic, &[]);
    let mut spec = host_spec("a", &[]);
    spec.assigned_user = Some("alice@x".into());
    assert_eq!(
        w.pool.upsert_host(spec, w.now_ms).unwrap_err().code(),
        "InvalidParameter"
    );

    // MultiplePersistent -> Persistent is refused while someone owns two hosts.
    let mut w = personal(MultiplePersistent, Direct, &["m1", "m2"]);
    assign(&mut w, "m1", Some("alice@x")).unwrap();
    assign(&mut w, "m2", Some("alice@x")).unwrap();
    let mut c = w.pool.config().clone();
    c.load_balancer_type = Persistent;
    assert_eq!(w.pool.set_config(c.clone()).unwrap_err().code(), "Conflict");
    assign(&mut w, "m2", None).unwrap();
    w.pool.set_config(c).unwrap();
}
