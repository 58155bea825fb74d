//! Rules H5–H6: the `LoadIndex` algorithm in a logon storm — the three
//! buckets, the threshold raise, round robin in query order, host-side
//! rejection — and how its round robin survives a restart (S5) and a change
//! of algorithm (P3).
//!
//! The pools here set `cpuThreshold` 100 and `includeSessionCount` false,
//! so a host's index is exactly the CPU percentage of its last heartbeat
//! and placements do not move it: a test states the indexes once and every
//! expected sequence follows from the buckets alone. (With the session
//! count included the indexes would climb as sessions land — with no limit
//! each session adds one — which `h5_with_the_session_count_the_same_storm_is_shared_the_same_way`
//! shows separately.)

use placement::{
    ConnectRequest, Error, HostPoolType, LoadBalancerType, Pool, PoolConfig, PoolCounters,
    SessionState,
};

use crate::{Alg, World, caps, cpu, host_spec};

/// The six hosts of the issue as (name, CPU % = index), registered in this
/// query order, which is not the order of their indexes: i50 is 1st, i5
/// 2nd, i90 3rd, i30 4th, i10 5th, i40 6th.
const SIX: [(&str, f64); 6] = [
    ("i50", 50.0),
    ("i5", 5.0),
    ("i90", 90.0),
    ("i30", 30.0),
    ("i10", 10.0),
    ("i40", 40.0),
];

/// An empty `LoadIndex` pool whose index is the CPU percentage (see the
/// module comment), with the default logon storm settings (20/20/4) unless
/// `f` changes them.
fn storm_pool(f: impl FnOnce(&mut PoolConfig)) -> World {
    let mut c = PoolConfig::new("farm", HostPoolType::Pooled, LoadBalancerType::LoadIndex);
    c.load_index_settings.cpu_threshold = 100;
    c.load_index_settings.include_session_count = false;
    f(&mut c);
    World::new(c)
}

/// Registers a host offering `rdp` plus `extra`; with `Some(cpu)` it sends
/// a heartbeat with that CPU percentage, with `None` it never does (-1, H1).
fn add(w: &mut World, name: &str, extra: &[&str], cpu_percent: Option<f64>) {
    w.add_spec(host_spec(name, extra));
    if let Some(v) = cpu_percent {
        w.heartbeat_with(name, cpu(v)).expect("valid heartbeat");
    }
}

fn six(f: impl FnOnce(&mut PoolConfig)) -> World {
    let mut w = storm_pool(f);
    for (name, v) in SIX {
        add(&mut w, name, &[], Some(v));
    }
    w
}

/// One connect of a fresh user; answers (host, session id).
fn place(w: &mut World) -> (String, String) {
    let user = w.fresh_user();
    let p = w.connect(&user, 0).expect("a host takes the session");
    assert!(!p.reconnect);
    (p.host, p.session_id)
}

/// One connect of a fresh user that requires `need`.
fn place_requiring(w: &mut World, need: &[&str]) -> Result<String, Error> {
    let user = w.fresh_user();
    let requires = caps(need);
    w.connect_req(
        &ConnectRequest {
            user: &user,
            requires: &requires,
            session_host: None,
        },
        0,
    )
    .map(|p| p.host)
}

fn sessions_of(w: &World) -> Vec<(String, u32)> {
    w.counts()
}

fn named(list: &[(&str, u32)]) -> Vec<(String, u32)> {
    list.iter().map(|(n, c)| (n.to_string(), *c)).collect()
}

#[test]
fn h5_six_hosts_bucket_1_is_widened_to_the_four_least_loaded_and_shared_equally() {
    let mut w = six(|_| {});
    let indexes: Vec<i32> = w.load_indexes().iter().map(|(_, i)| *i).collect();
    assert_eq!(indexes, [50, 5, 90, 30, 10, 40]);

    // Below 20 (loadIndexThreshold): i5 and i10, fewer than minHostsInQueue
    // 4, so the threshold rises to the 4th lowest index (40) plus one:
    // bucket 1 = i5, i30, i10, i40. Round robin in query order (2nd, 4th,
    // 5th, 6th registered), starting after "nobody":
    let got = w.connect_fresh(40);
    let round = ["i5", "i30", "i10", "i40"];
    let want: Vec<&str> = round.iter().copied().cycle().take(40).collect();
    assert_eq!(got, want);
    // Each gets exactly 10; i50 and i90 none; none reaches the connecting
    // threshold (20): they are all still Pending, 10 each.
    assert_eq!(
        sessions_of(&w),
        named(&[
            ("i50", 0),
            ("i5", 10),
            ("i90", 0),
            ("i30", 10),
            ("i10", 10),
            ("i40", 10)
        ])
    );
    for (h, _) in SIX {
        assert!(w.connecting(h) < 20, "{h}");
    }
    // The indexes did not move (see the module comment).
    let after: Vec<i32> = w.load_indexes().iter().map(|(_, i)| *i).collect();
    assert_eq!(after, indexes);
    w.assert_consistent();
}

#[test]
fn h5_with_the_session_count_the_same_storm_is_shared_the_same_way() {
    // The session count included, no limit: index = max(cpu, sessions).
    // i5 climbs to 10 and i10 stays 10 after their 10 sessions; the 4th
    // lowest index is still 40, so bucket 1 stays i5, i30, i10, i40.
    let mut w = six(|c| c.load_index_settings.include_session_count = true);
    let got = w.connect_fresh(40);
    let want: Vec<&str> = ["i5", "i30", "i10", "i40"]
        .into_iter()
        .cycle()
        .take(40)
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        w.load_indexes(),
        [
            ("i50".into(), 50),
            ("i5".into(), 10),
            ("i90".into(), 90),
            ("i30".into(), 30),
            ("i10".into(), 10),
            ("i40".into(), 40)
        ]
    );
}

#[test]
fn h5_hosts_leave_bucket_1_at_the_connecting_threshold_and_come_back_when_active() {
    let mut w = six(|c| c.logon_storm_settings.connecting_session_threshold = 3);
    let mut ids: Vec<(String, String)> = Vec::new();
    let mut got = Vec::new();
    for _ in 0..18 {
        let (h, id) = place(&mut w);
        got.push(h.clone());
        ids.push((h, id));
    }
    assert_eq!(
        got,
        [
            // Bucket 1 = i5, i30, i10, i40 (raised to 41), two rounds.
            "i5", "i30", "i10", "i40", "i5", "i30", "i10", "i40",
            // 9th: i5 reaches 3 connecting and leaves; the next-lowest index
            // tops bucket 1 up: 10, 30, 40, 50 -> raised to 51.
            "i5",
            // 10th: after i5 (2nd) in query order: i90 (3rd) is not in bucket
            // 1, i30 (4th) is; it leaves: 10, 40, 50, 90 -> raised to 91.
            "i30", // 11th and 12th: i10, then i40 leave; bucket 1 = i50, i90.
            "i10", "i40",
            // After i40 (6th) wrap around: i50 (1st), i90 (3rd), three each.
            "i50", "i90", "i50", "i90", "i50", "i90",
        ]
    );
    for (h, _) in SIX {
        assert_eq!(w.connecting(h), 3, "{h}");
    }
    // Every host is at the threshold: buckets 1 and 2 are empty, bucket 3
    // takes the lowest known index first (then fewest connecting).
    assert_eq!(place(&mut w).0, "i5");
    assert_eq!(place(&mut w).0, "i5", "index first, then connecting");

    // i30's sessions become Active: back in bucket 1, alone (raised to 31).
    for (h, id) in &ids {
        if h == "i30" {
            w.set_state(id, SessionState::Active);
        }
    }
    assert_eq!(w.connecting("i30"), 0);
    assert_eq!(place(&mut w).0, "i30");
    assert_eq!(place(&mut w).0, "i30");
    // i10's become Disconnected (no longer connecting): bucket 1 = i10, i30
    // (raised to 31). Last served i30 (4th): next is i10 (5th), then wrap
    // to i30, which reaches 3 connecting and leaves again, then i10.
    for (h, id) in &ids {
        if h == "i10" {
            w.set_state(id, SessionState::Disconnected);
        }
    }
    assert_eq!(
        (0..4).map(|_| place(&mut w).0).collect::<Vec<_>>(),
        ["i10", "i30", "i10", "i10"]
    );
    assert_eq!((w.connecting("i30"), w.connecting("i10")), (3, 3));
    w.assert_consistent();
}

#[test]
fn h5_pending_timeouts_bring_hosts_back_to_bucket_1() {
    // A Pending timeout shorter than the heartbeat timeout, so the hosts
    // stay Available (S7) while their Pending sessions end (S4).
    let mut w = six(|c| {
        c.logon_storm_settings.connecting_session_threshold = 1;
        c.pending_timeout_seconds = 60;
    });
    // Each of the four gets one and leaves, the next-lowest index topping
    // bucket 1 up each time; then i50, i90.
    assert_eq!(
        w.connect_fresh(6),
        ["i5", "i30", "i10", "i40", "i50", "i90"]
    );
    // S4: the Pending sessions end; every host is back in bucket 1.
    w.tick_after_ms(60_000);
    assert_eq!(w.pool.session_count(), 0);
    // Last served i90 (3rd): next in bucket 1 (i5, i30, i10, i40) is i30.
    assert_eq!(w.connect_fresh(2), ["i30", "i10"]);
}

#[test]
fn h5_bucket_2_takes_what_only_it_can_serve_or_overflow() {
    // standardCapabilities rdp + blast: n1 and n2 lack blast (bucket 2).
    let mut w = storm_pool(|c| {
        c.standard_capabilities = caps(&["rdp", "blast"]);
        c.logon_storm_settings.min_hosts_in_queue = 2;
    });
    add(&mut w, "n1", &["gpu"], Some(5.0)); // 1st
    add(&mut w, "s1", &["blast"], Some(10.0)); // 2nd
    add(&mut w, "n2", &[], Some(8.0)); // 3rd
    add(&mut w, "s2", &["blast"], Some(15.0)); // 4th
    add(&mut w, "s3", &["blast", "gpu"], Some(60.0)); // 5th

    // Bucket 1: s1, s2 (below 20, and 2 = minHostsInQueue: no raise). n1
    // and n2 have lower indexes but lack blast: they get nothing.
    assert_eq!(w.connect_fresh(4), ["s1", "s2", "s1", "s2"]);
    // gpu: nobody in bucket 1 has it; n1 in bucket 2 does (s3 has it too,
    // but s3 is in bucket 3, which comes last).
    assert_eq!(place_requiring(&mut w, &["gpu"]).unwrap(), "n1");
    // blast and gpu: only s3, in bucket 3.
    assert_eq!(place_requiring(&mut w, &["blast", "gpu"]).unwrap(), "s3");
    // Nobody has hdr.
    assert_eq!(
        place_requiring(&mut w, &["hdr"]),
        Err(Error::NoSessionHostAvailable(
            "no session host offers every capability required (hdr): add such session hosts".into()
        ))
    );
    // A plain request still goes to bucket 1 (last served s3, 5th: wrap).
    assert_eq!(w.connect_fresh(1), ["s1"]);

    // Overflow: no standard host is open, so bucket 1 is empty and plain
    // requests go to bucket 2, round robin in query order.
    for s in ["s1", "s2", "s3"] {
        w.set_drained(s, true);
    }
    assert_eq!(w.connect_fresh(3), ["n2", "n1", "n2"]);

    // A bucket-2 host at or over the (configured, never raised) load index
    // threshold is in bucket 3: n2 at 30 gets nothing while n1 can serve.
    w.heartbeat_with("n2", cpu(30.0)).unwrap();
    assert_eq!(w.connect_fresh(2), ["n1", "n1"]);
    w.set_drained("n1", true);
    assert_eq!(w.connect_fresh(1), ["n2"]);
    w.assert_consistent();
}

/// H5: a host's bucket follows its own capabilities when it registers
/// again with others. The engine keeps "has every standard capability" as a
/// flag per host, set at each registration; a stale flag would keep the host
/// in its old bucket.
#[test]
fn h5_a_host_registered_again_with_other_capabilities_changes_bucket() {
    let mut w = storm_pool(|c| c.standard_capabilities = caps(&["rdp", "blast"]));
    add(&mut w, "n1", &[], Some(5.0)); // 1st, lacks blast: bucket 2
    add(&mut w, "s1", &["blast"], Some(10.0)); // 2nd, bucket 1
    assert_eq!(w.connect_fresh(2), ["s1", "s1"], "bucket 1 is s1 alone");

    // n1 comes back with blast: bucket 1 holds both, round robin from s1.
    add(&mut w, "n1", &["blast"], Some(5.0));
    assert_eq!(w.connect_fresh(2), ["n1", "s1"]);

    // And without it again: bucket 2, which plain requests never reach
    // while bucket 1 has a host.
    add(&mut w, "n1", &[], Some(5.0));
    assert_eq!(w.connect_fresh(3), ["s1", "s1", "s1"]);
    w.assert_consistent();
}

#[test]
fn h5_bucket_2_uses_the_configured_threshold_never_the_raised_one() {
    let mut w = storm_pool(|c| c.standard_capabilities = caps(&["rdp", "blast"]));
    add(&mut w, "g30", &["gpu"], Some(30.0)); // 1st
    add(&mut w, "g25", &["gpu"], Some(25.0)); // 2nd
    add(&mut w, "s1", &["blast"], Some(10.0)); // 3rd
    add(&mut w, "s2", &["blast"], Some(60.0)); // 4th
    // Bucket 1: s1 and s2, fewer than 4, raised to 61. That raise is for
    // bucket 1 only: g30 and g25 are at or over 20, so they are bucket 3,
    // not bucket 2. A gpu request finds nobody in buckets 1 and 2 and takes
    // bucket 3's lowest index, g25 (round robin in bucket 2 would give g30,
    // the first in query order).
    assert_eq!(place_requiring(&mut w, &["gpu"]).unwrap(), "g25");
    assert_eq!(place_requiring(&mut w, &["gpu"]).unwrap(), "g25");
}

#[test]
fn h5_a_fitting_bucket_1_host_wins_over_bucket_2() {
    let mut w = storm_pool(|c| c.standard_capabilities = caps(&["rdp", "blast"]));
    add(&mut w, "n1", &["gpu"], Some(1.0));
    add(&mut w, "s1", &["blast"], Some(10.0));
    add(&mut w, "s2", &["blast", "gpu"], Some(50.0));
    // Bucket-1 candidates s1 (10) and s2 (50): fewer than 4, raised to 51,
    // so s2 is in bucket 1 and has gpu.
    assert_eq!(place_requiring(&mut w, &["gpu"]).unwrap(), "s2");
    assert_eq!(place_requiring(&mut w, &["gpu"]).unwrap(), "s2");
}

#[test]
fn h5_bucket_3_by_known_index_then_fewest_connecting_then_query_order_unknown_last() {
    let mut w = storm_pool(|c| c.logon_storm_settings.connecting_session_threshold = 1);
    add(&mut w, "u", &[], None); // 1st, never reports: -1
    add(&mut w, "x", &[], Some(30.0)); // 2nd
    add(&mut w, "y", &[], Some(10.0)); // 3rd
    add(&mut w, "z", &[], Some(10.0)); // 4th
    add(&mut w, "v", &[], Some(10.0)); // 5th
    w.place_on("x", 1, SessionState::Pending);
    w.place_on("y", 2, SessionState::Pending);
    w.place_on("z", 1, SessionState::Pending);
    w.place_on("v", 1, SessionState::Pending);
    assert_eq!(w.load_index("u"), -1);
    // Every known host is at the connecting threshold (1) and u is -1:
    // buckets 1 and 2 are empty. Bucket 3, as (index, connecting, order):
    // z (10, 1, 4th), v (10, 1, 5th), y (10, 2, 3rd), x (30, 1), u (-1) last.
    // z and v each get one, then all three at 10 have 2: query order.
    assert_eq!(w.connect_fresh(6), ["z", "v", "y", "z", "v", "y"]);
    // The 10s drained: x (30) before the unknown u although u has no
    // connecting sessions at all.
    for h in ["y", "z", "v"] {
        w.set_drained(h, true);
    }
    assert_eq!(w.connect_fresh(2), ["x", "x"]);
    w.set_drained("x", true);
    assert_eq!(w.connect_fresh(1), ["u"]);
    w.assert_consistent();
}

#[test]
fn h5_a_threshold_of_0_disables_it() {
    // loadIndexThreshold 0: every known host is under it, so bucket 1 has
    // all six, shared in query order.
    let mut w = six(|c| c.logon_storm_settings.load_index_threshold = 0);
    let got = w.connect_fresh(12);
    let order = ["i50", "i5", "i90", "i30", "i10", "i40"];
    let want: Vec<&str> = order.iter().copied().cycle().take(12).collect();
    assert_eq!(got, want);

    // connectingSessionThreshold 0: hosts never leave bucket 1, even at 25
    // connecting sessions (past the default 20).
    let mut w = six(|c| c.logon_storm_settings.connecting_session_threshold = 0);
    w.connect_fresh(100);
    assert_eq!(
        sessions_of(&w),
        named(&[
            ("i50", 0),
            ("i5", 25),
            ("i90", 0),
            ("i30", 25),
            ("i10", 25),
            ("i40", 25)
        ])
    );
}

#[test]
fn h5_min_hosts_in_queue_and_the_raise() {
    // minHostsInQueue 10 > 6 candidates: the threshold rises until no host
    // is left to add, so all six are in bucket 1.
    let mut w = six(|c| c.logon_storm_settings.min_hosts_in_queue = 10);
    assert_eq!(
        w.connect_fresh(6),
        ["i50", "i5", "i90", "i30", "i10", "i40"]
    );

    // minHostsInQueue 1, threshold 3: nobody is below 3, raised to the
    // lowest index plus one (6): i5 alone.
    let mut w = six(|c| {
        c.logon_storm_settings.min_hosts_in_queue = 1;
        c.logon_storm_settings.load_index_threshold = 3;
    });
    assert_eq!(w.connect_fresh(3), ["i5", "i5", "i5"]);

    // Ties at the k-th index all qualify: minHostsInQueue 2 with indexes
    // 5, 30, 30: raised to 31, all three.
    let mut w = storm_pool(|c| c.logon_storm_settings.min_hosts_in_queue = 2);
    add(&mut w, "a", &[], Some(30.0));
    add(&mut w, "b", &[], Some(5.0));
    add(&mut w, "c", &[], Some(30.0));
    add(&mut w, "d", &[], Some(31.0));
    assert_eq!(w.connect_fresh(4), ["a", "b", "c", "a"]);
}

#[test]
fn h5_raising_the_threshold_never_adds_an_unknown_host() {
    let mut w = storm_pool(|_| {});
    add(&mut w, "u1", &[], None);
    add(&mut w, "i5", &[], Some(5.0));
    add(&mut w, "u2", &[], None);
    add(&mut w, "i10", &[], Some(10.0));
    add(&mut w, "u3", &[], None);
    // Only two known indexes, fewer than minHostsInQueue 4: the raise adds
    // nobody, and the unknown hosts stay in bucket 3.
    let got = w.connect_fresh(10);
    let want: Vec<&str> = ["i5", "i10"].into_iter().cycle().take(10).collect();
    assert_eq!(got, want);
    for u in ["u1", "u2", "u3"] {
        assert_eq!(w.sessions_on(u), 0, "{u}");
    }
}

#[test]
fn h6_the_pools_thresholds_make_a_host_refuse_new_logons() {
    // Hosts at or over index 35 refuse: i50, i90, i40. The buckets are
    // formed without them: i5, i10, i30 (raised: fewer than 4 remain).
    let mut w = six(|c| c.load_index_settings.load_index_threshold = 35);
    let got = w.connect_fresh(9);
    let want: Vec<&str> = ["i5", "i30", "i10"].into_iter().cycle().take(9).collect();
    assert_eq!(got, want);
    for h in ["i50", "i90", "i40"] {
        assert_eq!(w.sessions_on(h), 0, "{h}");
    }
    // At, not only over: 30 is refused at a threshold of 30.
    w.configure(|c| c.load_index_settings.load_index_threshold = 30);
    assert_eq!(w.connect_fresh(2), ["i5", "i10"]);

    // connectingSessionThreshold 2: at 2 Pending sessions a host refuses
    // and the user is placed on the next candidate.
    let mut w = six(|c| c.load_index_settings.connecting_session_threshold = 2);
    let mut got = w.connect_fresh(8);
    let want: Vec<&str> = ["i5", "i30", "i10", "i40"]
        .into_iter()
        .cycle()
        .take(8)
        .collect();
    assert_eq!(got, want);
    // Only i50 and i90 are left: bucket 1 is the two of them.
    got = w.connect_fresh(4);
    assert_eq!(got, ["i50", "i90", "i50", "i90"]);
    // Every host refuses: the refusal says so.
    let all_refuse = Error::NoSessionHostAvailable(
        "every session host refuses new logons: each is at its load index or connecting \
         session threshold (loadIndexSettings or the host's policy)"
            .into(),
    );
    let user = w.fresh_user();
    assert_eq!(w.connect(&user, 0), Err(all_refuse.clone()));
    // With one drained, the message counts each reason.
    w.set_drained("i5", true);
    assert_eq!(
        w.connect(&user, 0),
        Err(Error::NoSessionHostAvailable(
            "no session host can take a new session: 1 in drain mode, 5 refusing new logons \
             at their load index or connecting session threshold"
                .into()
        ))
    );
    w.set_drained("i5", false);
    assert_eq!(w.connect(&user, 0), Err(all_refuse));
    w.assert_consistent();
}

#[test]
fn h6_a_refusing_host_still_takes_reconnects() {
    let mut w = storm_pool(|c| c.load_index_settings.connecting_session_threshold = 1);
    add(&mut w, "a", &[], Some(5.0));
    let first = w.connect("alice@contoso.com", 0).unwrap();
    assert_eq!(first.host, "a");
    // a now refuses (1 connecting): a new user is refused ...
    assert!(matches!(
        w.connect("bob@contoso.com", 0),
        Err(Error::NoSessionHostAvailable(_))
    ));
    // ... but alice goes back to her session (S1: exempt).
    let again = w.connect("ALICE@contoso.com", 0).unwrap();
    assert!(again.reconnect);
    assert_eq!(
        (again.host.as_str(), again.session_id.as_str()),
        ("a", first.session_id.as_str())
    );
    // Also when the index threshold is what refuses.
    w.set_state(&first.session_id, SessionState::Disconnected);
    w.configure(|c| {
        c.load_index_settings.connecting_session_threshold = 0;
        c.load_index_settings.load_index_threshold = 5;
    });
    assert!(w.connect("bob@contoso.com", 0).is_err());
    assert!(w.connect("alice@contoso.com", 0).unwrap().reconnect);
}

#[test]
fn h6_a_hosts_policy_overrides_the_pools_values_both_ways() {
    let mut w = six(|c| c.load_index_settings.load_index_threshold = 35);
    let set_policy = |w: &mut World, host: &str, index: Option<u32>, connecting: Option<u32>| {
        let mut spec = w.pool.host(host).unwrap().spec.clone();
        spec.policy.load_index_threshold = index;
        spec.policy.connecting_session_threshold = connecting;
        w.pool.upsert_host(spec, w.now_ms).unwrap();
    };
    // Stricter: i10 refuses at 8 (its index is 10), though the pool says 35.
    set_policy(&mut w, "i10", Some(8), None);
    // Looser: i40 disables its index threshold (0); i50 refuses only at 60.
    set_policy(&mut w, "i40", Some(0), None);
    set_policy(&mut w, "i50", Some(60), None);
    // i90 still refuses (pool 35). Left: i50 (1st), i5, i30, i40 -> exactly
    // minHostsInQueue, raised to 51.
    let got = w.connect_fresh(8);
    let want: Vec<&str> = ["i50", "i5", "i30", "i40"]
        .into_iter()
        .cycle()
        .take(8)
        .collect();
    assert_eq!(got, want);

    // The connecting threshold too: the pool refuses at 2, i5's policy
    // disables it, i30's policy refuses at 3 (looser).
    let mut w = six(|c| c.load_index_settings.connecting_session_threshold = 2);
    set_policy(&mut w, "i5", None, Some(0));
    set_policy(&mut w, "i30", None, Some(3));
    // Round 1 and 2 over i5, i30, i10, i40; then i10 and i40 refuse (2),
    // bucket 1 = i5, i30, i50, i90 (raised to 91).
    let got = w.connect_fresh(8);
    assert_eq!(
        got[..8],
        ["i5", "i30", "i10", "i40", "i5", "i30", "i10", "i40"]
    );
    // After i40 (6th): i50 (1st), i5, i90, i30 (its 3rd: now refuses).
    assert_eq!(w.connect_fresh(4), ["i50", "i5", "i90", "i30"]);
    // i50 and i90 reach 2 next; i5 never refuses on connecting sessions.
    assert_eq!(w.connect_fresh(3), ["i50", "i5", "i90"]);
    assert_eq!(w.connect_fresh(3), ["i5", "i5", "i5"]);
    assert_eq!(w.connecting("i5"), 7);
}

#[test]
fn h6_applies_only_to_load_index_pools() {
    let mut w = six(|c| {
        c.load_index_settings.load_index_threshold = 10;
        Alg::Classic.apply(c);
    });
    for h in ["i5", "i10", "i30", "i40", "i50"] {
        w.set_drained(h, true);
    }
    // BreadthFirst: i90 (index 90, threshold 10) takes the session.
    assert_eq!(w.connect_fresh(1), ["i90"]);
    // LoadIndex (P3: from the next placement): it refuses.
    w.set_alg(Alg::Load);
    let user = w.fresh_user();
    assert!(matches!(
        w.connect(&user, 0),
        Err(Error::NoSessionHostAvailable(m)) if m.starts_with("no session host can take")
    ));
}

fn restored(pool: &Pool, counters: PoolCounters) -> Pool {
    Pool::restore(
        pool.config().clone(),
        counters,
        pool.hosts().cloned().collect(),
        pool.sessions().cloned().collect(),
        pool.hosts().next().map_or(0, |h| h.registered_at_ms),
    )
}

#[test]
fn h5_the_round_robin_survives_a_restart() {
    let mut w = six(|_| {});
    assert_eq!(w.connect_fresh(3), ["i5", "i30", "i10"]);
    // The pool remembers the last host it served: i10, 5th registered.
    let counters = w.pool.counters();
    assert_eq!(counters.last_served_seq, 5);
    // Through the store's JSON, as a restart sees it.
    let json = serde_json::to_string(&counters).unwrap();
    let counters: PoolCounters = serde_json::from_str(&json).unwrap();
    w.pool = restored(&w.pool, counters);
    assert_eq!(w.connect_fresh(2), ["i40", "i5"]);

    // Counters stored before the field existed: no last host, start over.
    let legacy: PoolCounters =
        serde_json::from_str(r#"{"nextSeq": 7, "randomSeed": 7, "randomDraws": 5}"#).unwrap();
    assert_eq!(legacy.last_served_seq, 0);
    w.pool = restored(&w.pool, legacy);
    assert_eq!(w.connect_fresh(1), ["i5"]);
}

#[test]
fn p3_switching_to_and_from_load_index_at_any_time() {
    let mut w = six(|c| {
        c.max_session_limit = 50;
        c.load_index_settings.include_session_count = true;
    });
    // include_session_count with limit 50: index = max(cpu, 2 * sessions).
    assert_eq!(w.connect_fresh(2), ["i5", "i30"]);
    let before: Vec<_> = w.pool.sessions().cloned().collect();

    // Classic BreadthFirst: fewest sessions, ties in query order: i50.
    w.set_alg(Alg::Classic);
    assert_eq!(w.connect_fresh(1), ["i50"]);
    // DepthFirst: the most sessions, ties in query order: i50 (1st, 1).
    w.set_alg(Alg::Depth);
    assert_eq!(w.connect_fresh(1), ["i50"]);
    // Back to LoadIndex: the indexes are still 50, 5, 90, 30, 10, 40 (i50's
    // two sessions make 4, below its cpu 50); bucket 1 raised to 41: i5,
    // i30, i10, i40. The last host the LoadIndex round robin served was i30
    // (4th; the other algorithms do not move it): next is i10.
    w.set_alg(Alg::Load);
    assert_eq!(w.connect_fresh(3), ["i10", "i40", "i5"]);
    // Randomized BreadthFirst and back again, mid-storm: whichever host it
    // picked has at most 3 sessions (index at most 6 from sessions), so
    // bucket 1 is the same four and the round robin goes on after i5.
    w.set_alg(Alg::Breadth);
    w.connect_fresh(1);
    w.set_alg(Alg::Load);
    assert_eq!(w.connect_fresh(1), ["i30"]);
    // Existing sessions never moved (P3).
    for s in before {
        assert_eq!(w.pool.session(&s.id).unwrap().host, s.host, "{}", s.id);
    }
    w.assert_consistent();
}
