//! Rule T2: who may get a new session in a pool that lists entitlements,
//! as a table (user, groups the caller gives → allowed or not), and the S1
//! exemption for a user who already has a session.

use placement::Error;

use crate::{Alg, World};

fn world() -> World {
    let mut w = World::with_hosts(Alg::Classic, &["h1", "h2"]);
    w.configure(|c| {
        c.entitled_users = vec!["alice@contoso.com".into()];
        c.entitled_groups = vec!["Sales".into(), "Domain Users".into()];
    });
    w
}

#[test]
fn only_listed_users_and_members_of_listed_groups_are_entitled() {
    let w = world();
    // (user, groups the caller says, entitled?)
    let table: &[(&str, &[&str], bool)] = &[
        ("alice@contoso.com", &[], true), // listed
        ("ALICE@Contoso.com", &[], true), // listed, any ASCII case (S6)
        ("bob@contoso.com", &[], false),  // neither
        ("bob@contoso.com", &["Engineering"], false),
        ("bob@contoso.com", &["sales"], true), // a listed group, any case
        ("bob@contoso.com", &["Domain Users"], true),
        ("bob@contoso.com", &["Domain"], false), // whole names only
    ];
    for (user, groups, want) in table {
        let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        let got = w.pool.check_entitled(user, &groups, None);
        match (want, &got) {
            (true, Ok(())) | (false, Err(Error::NotEntitled(_))) => {}
            _ => panic!("{user} {groups:?}: want entitled={want}, got {got:?}"),
        }
    }
}

#[test]
fn no_lists_entitle_everyone_and_a_session_outlives_its_entitlement() {
    let mut w = World::with_hosts(Alg::Classic, &["h1"]);
    assert_eq!(
        w.pool.check_entitled("anyone@contoso.com", &[], None),
        Ok(())
    );
    // zoe has a session, then the pool starts listing entitlements.
    w.connect("zoe@contoso.com", 0).expect("placed");
    w.configure(|c| c.entitled_users = vec!["alice@contoso.com".into()]);
    assert_eq!(w.pool.check_entitled("zoe@contoso.com", &[], None), Ok(()));
    assert!(matches!(
        w.pool.check_entitled("yves@contoso.com", &[], None),
        Err(Error::NotEntitled(_))
    ));
}

#[test]
fn entitlement_lists_are_validated() {
    let mut w = World::with_hosts(Alg::Classic, &["h1"]);
    let mut bad = w.pool.config().clone();
    bad.entitled_users = vec!["not a user".into()];
    assert!(matches!(bad.validate(), Err(Error::InvalidParameter(_))));
    let mut bad = w.pool.config().clone();
    bad.entitled_groups = vec![String::new()];
    assert!(matches!(bad.validate(), Err(Error::InvalidParameter(_))));
    let mut bad = w.pool.config().clone();
    bad.entitled_users = (0..10_001).map(|i| format!("u{i}")).collect();
    assert!(matches!(bad.validate(), Err(Error::InvalidParameter(_))));
    w.configure(|c| c.entitled_groups = vec!["Domain Users".into()]);
}
