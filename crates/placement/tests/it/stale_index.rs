//! Rule H7 (beyond the sources): the stale-index correction of a
//! `LoadIndex` pool. `logonStormSettings.logonCost` is added to the host's
//! metric factors for each logon its last heartbeat cannot show in full:
//! the larger of its connecting sessions (logons in progress) and the
//! logons placed on it since that heartbeat. With `logonCost` 0 (the
//! default) the index is the sources'. The corrected index is the one H5's
//! buckets and H6's refusals read.

use placement::{
    Error, HostPoolType, LoadBalancerType, LogonStormSettings, PoolConfig, SessionState,
};

use crate::{World, cpu, custom};

/// A `LoadIndex` pool indexing CPU against a 100 % threshold and session
/// count (limit 999999, so the session factor is the raw count).
fn cpu_pool(names: &[&str], logon_cost: u32) -> World {
    let mut c = PoolConfig::new("farm", HostPoolType::Pooled, LoadBalancerType::LoadIndex);
    c.load_index_settings.cpu_threshold = 100;
    c.logon_storm_settings.logon_cost = logon_cost;
    let mut w = World::new(c);
    for n in names {
        w.add_host(n);
    }
    w
}

fn index(w: &World, host: &str) -> i32 {
    w.pool.host(host).expect("host exists").load_index
}

#[test]
fn h7_each_logon_since_the_last_heartbeat_adds_the_logon_cost() {
    let mut w = cpu_pool(&["h1"], 10);
    w.pool.heartbeat("h1", cpu(20.0), w.now_ms).unwrap();
    assert_eq!(index(&w, "h1"), 20, "max(sessions 0, cpu 20)");
    // (logons since heartbeat, want, arithmetic)
    for (n, want, why) in [
        (1, 30, "max(sessions 1, 20 + 1 * 10)"),
        (2, 40, "max(sessions 2, 20 + 2 * 10)"),
        (3, 50, "max(sessions 3, 20 + 3 * 10)"),
    ] {
        let u = w.fresh_user();
        w.connect(&u, 0).unwrap();
        assert_eq!(index(&w, "h1"), want, "{n} logon(s): {why}");
        assert_eq!(w.pool.host("h1").unwrap().logons_since_heartbeat, n);
    }
    // A heartbeat while the three still log on: they keep counting, as
    // connecting sessions (an interval's average shows a logon late).
    w.pool.heartbeat("h1", cpu(35.0), w.now_ms).unwrap();
    assert_eq!(w.pool.host("h1").unwrap().logons_since_heartbeat, 0);
    assert_eq!(index(&w, "h1"), 65, "max(sessions 3, 35 + max(0, 3) * 10)");
    // Two finish: one logon left in progress.
    let ids: Vec<String> = w.pool.sessions().map(|s| s.id.clone()).collect();
    let mut ids = ids;
    ids.sort();
    w.set_state(&ids[0], SessionState::Active);
    w.set_state(&ids[1], SessionState::Active);
    assert_eq!(index(&w, "h1"), 45, "max(sessions 3, 35 + max(0, 1) * 10)");
    // One more placed: two since the heartbeat would be 1 + 1 connecting,
    // counted as the larger of the two, so never twice.
    let u = w.fresh_user();
    w.connect(&u, 0).unwrap();
    assert_eq!(index(&w, "h1"), 55, "max(sessions 4, 35 + max(1, 2) * 10)");
    // Every logon done and a new heartbeat: the metrics show the load.
    for id in w.pool.sessions().map(|s| s.id.clone()).collect::<Vec<_>>() {
        w.set_state(&id, SessionState::Active);
    }
    w.pool.heartbeat("h1", cpu(50.0), w.now_ms).unwrap();
    assert_eq!(index(&w, "h1"), 50, "max(sessions 4, 50 + 0 * 10)");
}

#[test]
fn h7_off_by_default_leaves_the_sources_index() {
    let mut w = cpu_pool(&["h1"], 0);
    w.pool.heartbeat("h1", cpu(20.0), w.now_ms).unwrap();
    for _ in 0..5 {
        let u = w.fresh_user();
        w.connect(&u, 0).unwrap();
    }
    assert_eq!(
        index(&w, "h1"),
        20,
        "max(sessions 5, cpu 20): nothing added"
    );
}

#[test]
fn h7_the_corrected_factor_is_capped_at_100() {
    let mut w = cpu_pool(&["h1"], 40);
    w.pool.heartbeat("h1", cpu(50.0), w.now_ms).unwrap();
    let u = w.fresh_user();
    w.connect(&u, 0).unwrap();
    assert_eq!(index(&w, "h1"), 90, "50 + 40");
    let u = w.fresh_user();
    w.connect(&u, 0).unwrap();
    assert_eq!(index(&w, "h1"), 100, "min(100, 50 + 80)");
}

#[test]
fn h7_never_corrects_the_session_factor_or_an_unknown_index() {
    // Session count only: the broker counts sessions live, nothing is stale.
    let mut c = PoolConfig::new("farm", HostPoolType::Pooled, LoadBalancerType::LoadIndex);
    c.logon_storm_settings.logon_cost = 10;
    let mut w = World::new(c);
    w.add_host("h1");
    for n in 1..=3 {
        let u = w.fresh_user();
        w.connect(&u, 0).unwrap();
        assert_eq!(index(&w, "h1"), n, "the raw session count");
    }
    // CPU in use but never reported: unknown stays unknown (H1).
    let mut w = cpu_pool(&["h1"], 10);
    let u = w.fresh_user();
    w.connect(&u, 0).unwrap();
    assert_eq!(index(&w, "h1"), -1);
}

#[test]
fn h7_corrects_a_custom_script_value_too() {
    let mut c = PoolConfig::new("farm", HostPoolType::Pooled, LoadBalancerType::LoadIndex);
    c.load_index_settings.use_custom_script = true;
    c.logon_storm_settings.logon_cost = 5;
    // One host in the queue: the lowest index, not round robin (H5).
    c.logon_storm_settings.min_hosts_in_queue = 1;
    let mut w = World::new(c);
    w.add_host("h1");
    w.add_host("h2");
    w.pool.heartbeat("h1", custom(30), w.now_ms).unwrap();
    let u = w.fresh_user();
    let p = w.connect(&u, 0).unwrap();
    assert_eq!(p.host, "h2", "h2 counts as 25 (H3), below h1's 30");
    assert_eq!(index(&w, "h2"), 25, "a missing value is not a metric");
    w.pool.heartbeat("h2", custom(30), w.now_ms).unwrap();
    let u = w.fresh_user();
    let p = w.connect(&u, 0).unwrap();
    assert_eq!(index(&w, &p.host), 35, "30 + 1 * 5");
}

/// The storm the correction is for: two hosts report the same stale CPU.
/// Without it, the index moves only by the session factor, so the queue
/// keeps both hosts; with it, every logon makes its host look busier and the
/// next-lowest host tops the queue up (H5 buckets are formed per request).
#[test]
fn h7_spreads_a_storm_over_hosts_whose_metrics_are_stale() {
    let names = ["h1", "h2", "h3", "h4", "h5", "h6"];
    let placed = |logon_cost: u32| {
        let mut w = cpu_pool(&names, logon_cost);
        w.configure(|c| {
            c.logon_storm_settings = LogonStormSettings {
                load_index_threshold: 20,
                connecting_session_threshold: 20,
                min_hosts_in_queue: 1,
                logon_cost,
            }
        });
        // h1 looks idle; the others reported some load.
        for (n, load) in names.iter().zip([5.0, 30.0, 30.0, 30.0, 30.0, 30.0]) {
            w.pool.heartbeat(n, cpu(load), w.now_ms).unwrap();
        }
        for _ in 0..8 {
            let u = w.fresh_user();
            w.connect(&u, 0).unwrap();
        }
        w.sessions_on("h1")
    };
    // Without correction, h1's index is max(sessions, 5): it stays alone
    // under the threshold 20 and takes all 8 logons.
    assert_eq!(placed(0), 8);
    // With 10 points a logon: 5 → 15 → 25 → 35, above the others' 30, so
    // logons 4 to 8 go round robin to h2..h6 (30 → 40 each).
    assert_eq!(placed(10), 3);
}

#[test]
fn h7_logon_cost_is_validated_and_defaults_to_0_in_stored_settings() {
    let mut c = PoolConfig::new("farm", HostPoolType::Pooled, LoadBalancerType::LoadIndex);
    c.logon_storm_settings.logon_cost = 101;
    match c.validate() {
        Err(Error::InvalidParameter(m)) => {
            assert!(m.contains("logonStormSettings.logonCost"), "{m}")
        }
        other => panic!("want InvalidParameter, got {other:?}"),
    }
    // Settings stored before logonCost existed read as 0 (off).
    let stored: LogonStormSettings = serde_json::from_str(
        r#"{"loadIndexThreshold": 20, "connectingSessionThreshold": 20, "minHostsInQueue": 4}"#,
    )
    .unwrap();
    assert_eq!(stored, LogonStormSettings::default());
    assert_eq!(stored.logon_cost, 0);
}

#[test]
fn h7_a_restarted_pool_counts_from_zero_until_the_next_heartbeat() {
    let mut w = cpu_pool(&["h1"], 10);
    w.pool.heartbeat("h1", cpu(20.0), w.now_ms).unwrap();
    let u = w.fresh_user();
    let p = w.connect(&u, 0).unwrap();
    w.set_state(&p.session_id, SessionState::Active);
    let restored = placement::Pool::restore(
        w.pool.config().clone(),
        w.pool.counters(),
        w.pool.hosts().cloned().collect(),
        w.pool.sessions().cloned().collect(),
        w.now_ms,
    );
    let h = restored.host("h1").unwrap();
    assert_eq!(h.logons_since_heartbeat, 0, "derived, not stored");
    assert_eq!(h.load_index, 20);
}

/// H7 with H6: a host refuses new logons by its corrected index. The host
/// knows its load as it is, which its last sample does not show yet; the
/// broker, which applies H6 for it, refuses on its best estimate of that
/// load. The pool's threshold and a host's own policy alike.
#[test]
fn h7_h6_a_host_whose_corrected_index_reaches_its_threshold_refuses_logons() {
    let mut w = cpu_pool(&["h1"], 10);
    w.configure(|c| c.load_index_settings.load_index_threshold = 40);
    w.pool.heartbeat("h1", cpu(20.0), w.now_ms).unwrap();
    let mut ids = Vec::new();
    for want in [30, 40] {
        let u = w.fresh_user();
        ids.push(w.connect(&u, 0).unwrap().session_id);
        assert_eq!(index(&w, "h1"), want);
    }
    // 40 is the threshold: refused, though the last sample says 20.
    let u = w.fresh_user();
    match w.connect(&u, 0) {
        Err(Error::NoSessionHostAvailable(m)) => {
            assert!(m.contains("refuses new logons"), "{m}")
        }
        other => panic!("want a refusal by H6, got {other:?}"),
    }
    // A heartbeat while both still log on: they count as connecting.
    w.pool.heartbeat("h1", cpu(20.0), w.now_ms).unwrap();
    assert_eq!(index(&w, "h1"), 40, "20 + max(0, 2 connecting) * 10");
    assert!(w.connect(&u, 0).is_err(), "still refused");
    // Both logons done: the index is the sample's again, and the host takes
    // logons until its corrected index reaches the threshold again.
    for id in &ids {
        w.set_state(id, SessionState::Active);
    }
    assert_eq!(index(&w, "h1"), 20);
    w.connect(&u, 0).unwrap();
    // Without the correction the host never refuses here.
    let mut plain = cpu_pool(&["h1"], 0);
    plain.configure(|c| c.load_index_settings.load_index_threshold = 40);
    plain.pool.heartbeat("h1", cpu(20.0), plain.now_ms).unwrap();
    for _ in 0..5 {
        let u = plain.fresh_user();
        plain.connect(&u, 0).unwrap();
    }
}

/// H7 with H6 by a host's own policy: the host is passed over for the next
/// candidate as soon as its corrected index reaches its threshold.
#[test]
fn h7_h6_a_host_over_its_own_threshold_by_correction_is_passed_over() {
    let placed = |logon_cost: u32| {
        let mut w = cpu_pool(&["h1", "h2"], logon_cost);
        // The lowest index first (one host in the queue, H5).
        w.configure(|c| c.logon_storm_settings.min_hosts_in_queue = 1);
        let mut spec = w.pool.host("h1").unwrap().spec.clone();
        spec.policy.load_index_threshold = Some(40);
        w.pool.upsert_host(spec, w.now_ms).unwrap();
        w.pool.heartbeat("h1", cpu(20.0), w.now_ms).unwrap();
        w.pool.heartbeat("h2", cpu(50.0), w.now_ms).unwrap();
        (0..3)
            .map(|_| {
                let u = w.fresh_user();
                w.connect(&u, 0).unwrap().host
            })
            .collect::<Vec<_>>()
    };
    // h1: 20 → 30 → 40, at its own threshold: the third logon goes to h2.
    assert_eq!(placed(10), ["h1", "h1", "h2"]);
    assert_eq!(placed(0), ["h1", "h1", "h1"], "uncorrected, h1 stays at 20");
}

/// H7 with H5: the buckets are formed for every request from the corrected
/// indexes, so a host leaves bucket 1 at the load index threshold, the
/// threshold is raised from the corrected indexes, and a host that looked
/// busy joins the queue once the others' logons make them look as busy.
#[test]
fn h7_h5_buckets_and_the_raised_threshold_follow_the_corrected_indexes() {
    let placed = |logon_cost: u32| {
        let mut w = cpu_pool(&["h1", "h2", "h3", "h4"], logon_cost);
        w.configure(|c| {
            c.logon_storm_settings = LogonStormSettings {
                load_index_threshold: 20,
                connecting_session_threshold: 20,
                min_hosts_in_queue: 2,
                logon_cost,
            }
        });
        for (n, load) in ["h1", "h2", "h3", "h4"]
            .iter()
            .zip([10.0, 12.0, 40.0, 45.0])
        {
            w.pool.heartbeat(n, cpu(load), w.now_ms).unwrap();
        }
        (0..14)
            .map(|_| {
                let u = w.fresh_user();
                w.connect(&u, 0).unwrap().host
            })
            .collect::<Vec<_>>()
    };
    // Without correction h1 (10) and h2 (12) stay the queue for ever.
    let plain: Vec<&str> = ["h1", "h2"].repeat(7);
    assert_eq!(placed(0), plain);
    // With 5 points a logon h1 and h2 climb: h1 leaves bucket 1 at 20 after
    // its third logon and the raise (the 2nd lowest corrected index, plus
    // one) takes it back with h2. After six logons each, h1 is at 40 and h2
    // at 42; the raise to 41 lets in h3 (40), and round robin after h2
    // serves h3 before wrapping to h1.
    let mut want: Vec<&str> = ["h1", "h2"].repeat(6);
    want.extend(["h3", "h1"]);
    assert_eq!(placed(5), want);
}

/// H7 with H5's bucket 3: when every host is at the connecting threshold,
/// bucket 3 orders by the corrected index.
#[test]
fn h7_h5_bucket_3_orders_by_the_corrected_index() {
    let placed = |logon_cost: u32| {
        let mut w = cpu_pool(&["h1", "h2"], logon_cost);
        w.configure(|c| c.logon_storm_settings.connecting_session_threshold = 1);
        w.pool.heartbeat("h1", cpu(10.0), w.now_ms).unwrap();
        w.pool.heartbeat("h2", cpu(20.0), w.now_ms).unwrap();
        (0..4)
            .map(|_| {
                let u = w.fresh_user();
                w.connect(&u, 0).unwrap().host
            })
            .collect::<Vec<_>>()
    };
    // One logon each empties buckets 1 and 2 (connecting threshold 1); then
    // bucket 3, lowest index first: uncorrected h1 (10) keeps winning;
    // corrected, h1 is at 10 + 15 = 25 against h2's 35, then 40 against 35.
    assert_eq!(placed(0), ["h1", "h2", "h1", "h1"]);
    assert_eq!(placed(15), ["h1", "h2", "h1", "h2"]);
}
