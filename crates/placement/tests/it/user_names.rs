//! User names may hold no character that shows as nothing: a name with
//! one looks like another user's in every list and log, yet is another
//! user to every rule. `validate_user` refuses them, and every way a name
//! enters the engine (a connect, a host's session list, entitlements, a
//! host's assigned user) goes through it.

use placement::{Error, HostSpec, PoolConfig, SessionState, is_invisible, validate_user};
use proptest::prelude::*;

use crate::{Alg, World, host_spec};

/// Invisible code points of every kind the validator refuses: format
/// characters (zero-width, joiners, byte order mark, word joiner and the
/// invisible operators, bidirectional controls, tags, the Mongolian vowel
/// separator, soft hyphen), variation selectors, Hangul fillers, the
/// combining grapheme joiner, spaces of other widths, private use,
/// unassigned, and the blank braille pattern.
const INVISIBLE: &[char] = &[
    '\u{00AD}',
    '\u{034F}',
    '\u{061C}',
    '\u{115F}',
    '\u{1160}',
    '\u{17B4}',
    '\u{180B}',
    '\u{180E}',
    '\u{200B}',
    '\u{200C}',
    '\u{200D}',
    '\u{200E}',
    '\u{200F}',
    '\u{202A}',
    '\u{202B}',
    '\u{202C}',
    '\u{202D}',
    '\u{202E}',
    '\u{2060}',
    '\u{2061}',
    '\u{2062}',
    '\u{2063}',
    '\u{2064}',
    '\u{2066}',
    '\u{2067}',
    '\u{2068}',
    '\u{2069}',
    '\u{2800}',
    '\u{3000}',
    '\u{3164}',
    '\u{FE00}',
    '\u{FE0F}',
    '\u{FEFF}',
    '\u{FFA0}',
    '\u{E000}',
    '\u{E0001}',
    '\u{E0020}',
    '\u{E0041}',
    '\u{E007F}',
    '\u{E0100}',
    '\u{E01EF}',
    '\u{10FFFD}',
    '\u{0378}',
    '\u{00A0}',
    '\u{2028}',
    '\u{2029}',
    '\u{0085}',
];

/// Names people have, in many scripts, decomposed or not: all accepted.
const VISIBLE: &[&str] = &[
    "alice@contoso.com",
    "CONTOSO\\alice",
    "d'artagnan@contoso.fr",
    "jos\u{e9}@contoso.es",
    "jose\u{301}@contoso.es",
    "\u{141}ukasz@contoso.pl",
    "\u{5c71}\u{7530}\u{592a}\u{90ce}@contoso.jp",
    "\u{645}\u{62d}\u{645}\u{62f}@contoso.sa",
    "\u{3b1}\u{3bb}\u{3ad}\u{3be}\u{3b1}\u{3bd}\u{3b4}\u{3c1}\u{3bf}\u{3c2}",
    "\u{939}\u{93f}\u{928}\u{94d}\u{926}\u{940}@contoso.in",
    "\u{d55c}\u{ad6d}\u{c5b4}@contoso.kr",
    "o'brien+test_1@sub.contoso.com",
];

#[test]
fn every_invisible_character_is_refused_and_named() {
    for &c in INVISIBLE {
        assert!(is_invisible(c), "U+{:04X}", u32::from(c));
        for user in [
            format!("alice{c}@contoso.com"),
            format!("{c}alice@contoso.com"),
            format!("alice@contoso.com{c}"),
        ] {
            let Err(Error::InvalidParameter(m)) = validate_user("user", &user) else {
                panic!("U+{:04X} in {user:?} was accepted", u32::from(c));
            };
            assert!(m.starts_with("user: "), "{m}");
            // The message shows the name with the character escaped, so
            // that a reader sees why two names that look alike differ.
            assert!(!m.contains(c), "{m}");
        }
    }
    let Err(Error::InvalidParameter(m)) = validate_user("user", "alice\u{200b}@contoso.com") else {
        panic!("accepted");
    };
    assert!(m.contains("U+200B") && m.contains("\\u{200b}"), "{m}");
}

#[test]
fn names_of_every_script_are_accepted() {
    for user in VISIBLE {
        validate_user("user", user).unwrap_or_else(|e| panic!("{user:?}: {e}"));
    }
}

#[test]
fn a_connect_for_an_invisible_lookalike_places_nobody() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    let alice = w.connect("alice@contoso.com", 0).unwrap();
    w.pool.take_changes();
    let e = w.connect("alice\u{200b}@contoso.com", 0).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidParameter(m) if m.starts_with("user: ")),
        "{e}"
    );
    assert!(w.pool.take_changes().is_empty());
    let ids: Vec<_> = w.pool.sessions().map(|s| s.id.clone()).collect();
    assert_eq!(ids, vec![alice.session_id]);
}

#[test]
fn a_host_listing_an_invisible_lookalike_changes_nothing() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    let alice = w.connect("alice@contoso.com", 0).unwrap();
    w.pool.take_changes();
    let reported = vec![
        ("alice@contoso.com".to_string(), SessionState::Active),
        (
            "alice\u{2060}@contoso.com".to_string(),
            SessionState::Active,
        ),
    ];
    let mut ids = || "adopted".to_string();
    let e = w
        .pool
        .reconcile("a", &reported, w.now_ms, &mut ids)
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidParameter(m) if m.starts_with("sessions.user: ")),
        "{e}"
    );
    assert!(w.pool.take_changes().is_empty());
    let s = w.pool.session(&alice.session_id).unwrap();
    assert_eq!(
        s.state,
        SessionState::Pending,
        "alice's session was not confirmed either"
    );
    assert_eq!(w.pool.sessions().count(), 1);
}

#[test]
fn entitlements_and_assigned_users_refuse_invisible_lookalikes() {
    let mut c = PoolConfig::new(
        "farm",
        placement::HostPoolType::Pooled,
        placement::LoadBalancerType::BreadthFirst,
    );
    c.entitled_users = vec!["alice@contoso.com".into(), "bob\u{feff}@contoso.com".into()];
    let e = c.validate().unwrap_err();
    assert!(
        matches!(&e, Error::InvalidParameter(m) if m.starts_with("entitledUsers: ")),
        "{e}"
    );
    let mut spec: HostSpec = host_spec("a", &[]);
    spec.assigned_user = Some("carol\u{202e}moc.osotnoc@".into());
    let e = spec.validate().unwrap_err();
    assert!(
        matches!(&e, Error::InvalidParameter(m) if m.starts_with("assignedUser: ")),
        "{e}"
    );
}

proptest! {
    /// Any name of visible characters is accepted; the same name with any
    /// invisible character put anywhere is refused.
    #[test]
    fn an_invisible_character_anywhere_is_refused(
        name in "[a-zA-Z0-9._'+\\-@\\\\\u{e0}-\u{ff}\u{400}-\u{44f}\u{4e00}-\u{4e80}]{1,60}",
        which in 0..INVISIBLE.len(),
        at in any::<prop::sample::Index>(),
    ) {
        prop_assert!(validate_user("user", &name).is_ok(), "{:?}", name);
        let chars: Vec<char> = name.chars().collect();
        let at = at.index(chars.len() + 1);
        let mut with: String = chars[..at].iter().collect();
        with.push(INVISIBLE[which]);
        with.extend(&chars[at..]);
        prop_assert!(validate_user("user", &with).is_err(), "{:?}", with);
    }
}
