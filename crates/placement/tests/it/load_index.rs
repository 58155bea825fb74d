//! Rules H1–H3: the Server Load Index of a host, through the public API —
//! `load_index::factor`, `load_index::session_factor` and
//! `load_index::compute` as tables with the arithmetic in comments, then
//! the `load_index` a pool shows for its hosts as heartbeats, sessions and
//! settings change.

use placement::load_index::{self, compute, factor, session_factor};
use placement::{
    Error, HostMetrics, HostPoolType, LoadBalancerType, LoadIndexSettings, MAX_SESSION_LIMIT, Pool,
    PoolConfig, SessionState,
};

use crate::{T0, World, cpu, custom};

/// A `LoadIndex` pool with hosts `names` (no heartbeats yet) and these
/// load index settings.
fn pool_with(names: &[&str], f: impl FnOnce(&mut LoadIndexSettings)) -> World {
    let mut c = PoolConfig::new("farm", HostPoolType::Pooled, LoadBalancerType::LoadIndex);
    f(&mut c.load_index_settings);
    let mut w = World::new(c);
    for n in names {
        w.add_host(n);
    }
    w
}

/// No factor selected, so a row turns on only what it tests.
fn nothing() -> LoadIndexSettings {
    LoadIndexSettings {
        include_session_count: false,
        ..LoadIndexSettings::default()
    }
}

#[test]
fn h2_a_factor_is_floor_of_100_value_over_threshold_capped_at_100() {
    // (value, threshold, want, arithmetic)
    let rows: &[(f64, u32, i32, &str)] = &[
        (0.0, 90, 0, "100 * 0 / 90 = 0"),
        (45.0, 90, 50, "100 * 45 / 90 = 50"),
        (57.3, 90, 63, "100 * 57.3 / 90 = 63.67 -> 63"),
        (
            89.99,
            90,
            99,
            "100 * 89.99 / 90 = 99.99 -> 99, not rounded up",
        ),
        (90.0, 90, 100, "at the threshold: 100"),
        (95.0, 90, 100, "100 * 95 / 90 = 105.6 -> capped at 100"),
        (100.0, 1, 100, "10000 -> capped at 100"),
        (
            29.0,
            100,
            29,
            "29 % of 100: 29 (29 / 100 * 100 in f64 is 28.999999999999996)",
        ),
        (
            0.57,
            1,
            57,
            "100 * 0.57 / 1 = 57 (100 * 0.57 in f64 is 56.99999999999999)",
        ),
        (
            0.29,
            1,
            29,
            "100 * 0.29 / 1 = 29 (0.29 * 100 in f64 is 28.999999999999996)",
        ),
        (33.3, 100, 33, "100 * 33.3 / 100 = 33.3 -> 33"),
        (12.5, 20, 62, "read latency 12.5 ms of 20: 62.5 -> 62"),
        (3.0, 4, 75, "disk queue 3 of 4: 75"),
        (2.5, 4, 62, "disk queue 2.5 of 4: 62.5 -> 62"),
        (
            1e9,
            1,
            100,
            "the largest metric a heartbeat may carry, capped",
        ),
        (0.000001, 1, 0, "100 * 0.000001 = 0.0001 -> 0"),
        (0.01, 1, 1, "100 * 0.01 = 1"),
    ];
    for &(value, threshold, want, why) in rows {
        assert_eq!(
            factor(value, threshold),
            want,
            "factor({value}, {threshold}): {why}"
        );
    }
}

/// H2's factor is exact for every value with two decimals (what the agent
/// reports): 100 * (k / 100) / threshold is k / threshold in integers, so
/// `factor(k / 100, t)` must be `min(100, k / t)` for every k in
/// 0..=100.00 and t in 1..=100. A heartbeat's "0.29" parses to the same
/// f64 as `29.0 / 100.0` (both are the double nearest 0.29). A formula
/// that floors the float product (`floor(100 * v / t)`) fails here at
/// k = 29, t = 1 (28) and at many more pairs.
#[test]
fn h2_the_factor_of_every_two_decimal_value_is_the_integer_quotient() {
    for t in 1..=100_u32 {
        for k in 0..=10_000_u32 {
            let value = f64::from(k) / 100.0;
            let want = (k / t).min(100) as i32;
            assert_eq!(factor(value, t), want, "factor({value}, {t})");
        }
    }
}

/// The same at six decimals, the precision `factor` promises, where it is
/// hardest: at each step boundary. For threshold t and factor q, the value
/// q * t / 100 (m = q * t * 10^4 millionths) must give exactly q, and one
/// millionth less q - 1: floor(100 * m / (10^6 * t)) in integers. A float
/// formula misses a boundary whenever the product rounds below it (at
/// t = 1, q = 29 for one: `floor(100 * v / t)` misses 579 of these).
#[test]
fn h2_the_factor_is_exact_at_every_step_to_the_millionth() {
    for t in 1..=100_u32 {
        for q in 0..=100_u64 {
            let m = q * u64::from(t) * 10_000;
            let at = m as f64 / 1e6;
            assert_eq!(factor(at, t), q as i32, "factor({at}, {t})");
            if q > 0 {
                let below = (m - 1) as f64 / 1e6;
                assert_eq!(factor(below, t), q as i32 - 1, "factor({below}, {t})");
            }
        }
    }
}

#[test]
fn h2_the_session_factor_against_the_limit_or_the_raw_count() {
    // (sessions, maxSessionLimit, want, arithmetic)
    let rows: &[(u32, u32, i32, &str)] = &[
        (0, 10, 0, "100 * 0 / 10 = 0"),
        (1, 10, 10, "100 * 1 / 10 = 10"),
        (3, 7, 42, "100 * 3 / 7 = 42.86 -> 42"),
        (6, 7, 85, "100 * 6 / 7 = 85.71 -> 85"),
        (7, 7, 100, "at the limit: 100"),
        (
            9,
            7,
            100,
            "over the limit (P6 lowered it): 128 -> capped at 100",
        ),
        (1, 1, 100, "100 * 1 / 1 = 100"),
        (
            1,
            999_998,
            0,
            "a real limit, however large: 100 / 999998 -> 0",
        ),
        (999_998, 999_998, 100, "at that limit"),
        (0, 0, 100, "limit 0: no new session at all, full"),
        (5, 0, 100, "limit 0 with sessions: full"),
        (0, 999_999, 0, "no limit: the raw count, 0"),
        (42, 999_999, 42, "no limit: the raw count, 42"),
        (100, 999_999, 100, "no limit: the raw count, 100"),
        (150, 999_999, 100, "no limit: 150 capped at 100"),
    ];
    for &(sessions, limit, want, why) in rows {
        assert_eq!(
            session_factor(sessions, limit),
            want,
            "session_factor({sessions}, {limit}): {why}"
        );
    }
}

/// Five distinct metrics, so that a row turning on one threshold shows the
/// factor reads the right field.
fn five() -> HostMetrics {
    HostMetrics {
        cpu_percent: Some(10.0),
        memory_percent: Some(20.0),
        disk_queue_length: Some(3.0),
        disk_read_latency_ms: Some(40.0),
        disk_write_latency_ms: Some(50.0),
        custom_load_index: None,
    }
}

#[test]
fn h1_h2_compute_the_index_from_the_factors_in_use() {
    struct Row {
        name: &'static str,
        settings: LoadIndexSettings,
        limit: u32,
        sessions: u32,
        metrics: Option<HostMetrics>,
        want: i32,
    }
    let s = |f: fn(&mut LoadIndexSettings)| {
        let mut s = nothing();
        f(&mut s);
        s
    };
    let all = |s: &mut LoadIndexSettings| {
        s.cpu_threshold = 100;
        s.memory_threshold = 100;
        s.disk_queue_length_threshold = 4;
        s.disk_read_latency_threshold = 50;
        s.disk_write_latency_threshold = 100;
    };
    let without = |f: fn(&mut HostMetrics)| {
        let mut m = five();
        f(&mut m);
        Some(m)
    };
    let rows = [
        // One factor at a time, session count off; metrics 10 %, 20 %, 3, 40 ms, 50 ms.
        Row {
            name: "cpu: 100 * 10 / 100 = 10",
            settings: s(|s| s.cpu_threshold = 100),
            limit: MAX_SESSION_LIMIT,
            sessions: 7,
            metrics: Some(five()),
            want: 10,
        },
        Row {
            name: "memory: 100 * 20 / 100 = 20",
            settings: s(|s| s.memory_threshold = 100),
            limit: MAX_SESSION_LIMIT,
            sessions: 7,
            metrics: Some(five()),
            want: 20,
        },
        Row {
            name: "disk queue: 100 * 3 / 4 = 75",
            settings: s(|s| s.disk_queue_length_threshold = 4),
            limit: MAX_SESSION_LIMIT,
            sessions: 7,
            metrics: Some(five()),
            want: 75,
        },
        Row {
            name: "read latency: 100 * 40 / 50 = 80",
            settings: s(|s| s.disk_read_latency_threshold = 50),
            limit: MAX_SESSION_LIMIT,
            sessions: 7,
            metrics: Some(five()),
            want: 80,
        },
        Row {
            name: "write latency: 100 * 50 / 100 = 50",
            settings: s(|s| s.disk_write_latency_threshold = 100),
            limit: MAX_SESSION_LIMIT,
            sessions: 7,
            metrics: Some(five()),
            want: 50,
        },
        // The index is the largest factor.
        Row {
            name: "all five: max(10, 20, 75, 80, 50) = 80",
            settings: s(all),
            limit: MAX_SESSION_LIMIT,
            sessions: 7,
            metrics: Some(five()),
            want: 80,
        },
        Row {
            name: "all five and sessions 90 of no limit: max(80, 90) = 90",
            settings: {
                let mut s = s(all);
                s.include_session_count = true;
                s
            },
            limit: MAX_SESSION_LIMIT,
            sessions: 90,
            metrics: Some(five()),
            want: 90,
        },
        Row {
            name: "all five and sessions 9 of limit 10: max(80, 90) = 90",
            settings: {
                let mut s = s(all);
                s.include_session_count = true;
                s
            },
            limit: 10,
            sessions: 9,
            metrics: Some(five()),
            want: 90,
        },
        Row {
            name: "sessions 2 of limit 10 are below cpu: max(20, 10) = 20",
            settings: LoadIndexSettings {
                cpu_threshold: 50,
                ..LoadIndexSettings::default()
            },
            limit: 10,
            sessions: 2,
            metrics: Some(five()),
            want: 20,
        },
        Row {
            name: "a metric over its threshold: 100 * 40 / 10 = 400 -> capped at 100",
            settings: s(|s| s.disk_read_latency_threshold = 10),
            limit: MAX_SESSION_LIMIT,
            sessions: 0,
            metrics: Some(five()),
            want: 100,
        },
        // H1: a factor in use needs a metric; no heartbeat yet -> unknown,
        // even though the session count is known.
        Row {
            name: "cpu in use, never reported: -1",
            settings: LoadIndexSettings {
                cpu_threshold: 90,
                ..LoadIndexSettings::default()
            },
            limit: 10,
            sessions: 3,
            metrics: None,
            want: -1,
        },
        Row {
            name: "session count alone needs no report",
            settings: LoadIndexSettings::default(),
            limit: 10,
            sessions: 3,
            metrics: None,
            want: 30,
        },
        // H2: nothing selected (and no script) -> session count.
        Row {
            name: "nothing selected, session count off: the session count is used",
            settings: nothing(),
            limit: 10,
            sessions: 4,
            metrics: None,
            want: 40,
        },
        Row {
            name: "nothing selected, raw count without a limit",
            settings: nothing(),
            limit: MAX_SESSION_LIMIT,
            sessions: 4,
            metrics: Some(five()),
            want: 4,
        },
        // H2: a metric missing from the last heartbeat is left out.
        Row {
            name: "cpu missing, memory left: 20",
            settings: s(|s| {
                s.cpu_threshold = 10;
                s.memory_threshold = 100;
            }),
            limit: MAX_SESSION_LIMIT,
            sessions: 0,
            metrics: without(|m| m.cpu_percent = None),
            want: 20,
        },
        Row {
            name: "cpu missing, session count left: 100 * 3 / 10 = 30",
            settings: LoadIndexSettings {
                cpu_threshold: 10,
                ..LoadIndexSettings::default()
            },
            limit: 10,
            sessions: 3,
            metrics: without(|m| m.cpu_percent = None),
            want: 30,
        },
        Row {
            name: "the only factor in use missing: nothing left, -1",
            settings: s(|s| s.cpu_threshold = 10),
            limit: MAX_SESSION_LIMIT,
            sessions: 3,
            metrics: without(|m| m.cpu_percent = None),
            want: -1,
        },
        Row {
            name: "an empty heartbeat, two factors in use: -1",
            settings: s(|s| {
                s.cpu_threshold = 10;
                s.disk_write_latency_threshold = 10;
            }),
            limit: MAX_SESSION_LIMIT,
            sessions: 3,
            metrics: Some(HostMetrics::default()),
            want: -1,
        },
        Row {
            name: "a metric not in use may be missing",
            settings: s(|s| s.memory_threshold = 100),
            limit: MAX_SESSION_LIMIT,
            sessions: 3,
            metrics: without(|m| m.cpu_percent = None),
            want: 20,
        },
    ];
    for r in &rows {
        assert_eq!(
            compute(&r.settings, r.limit, r.sessions, r.metrics.as_ref(), false),
            r.want,
            "{}",
            r.name
        );
    }
}

#[test]
fn h3_compute_with_a_custom_script() {
    let script = LoadIndexSettings {
        use_custom_script: true,
        cpu_threshold: 10,
        memory_threshold: 10,
        ..LoadIndexSettings::default()
    };
    let with = |v: Option<i64>| HostMetrics {
        custom_load_index: v,
        ..five()
    };
    // (value reported, any host of the pool reports, want, why)
    let rows: &[(Option<HostMetrics>, bool, i32, &str)] = &[
        // Used alone: cpu 10 % of 10 and 50 sessions would both say 100.
        (Some(with(Some(37))), true, 37, "the value, nothing else"),
        (Some(with(Some(0))), true, 0, "0 is a value"),
        (Some(with(Some(100))), true, 100, "100"),
        (Some(with(Some(101))), true, 100, "101 capped at 100"),
        (Some(with(Some(i64::MAX))), true, 100, "huge, capped at 100"),
        (
            Some(with(None)),
            true,
            25,
            "no value while another host reports: 25",
        ),
        (
            None,
            true,
            25,
            "no heartbeat while another host reports: 25",
        ),
        (Some(with(None)), false, -1, "nobody reports: -1"),
        (None, false, -1, "no heartbeat, nobody reports: -1"),
    ];
    for (metrics, any, want, why) in rows {
        assert_eq!(
            compute(&script, 10, 50, metrics.as_ref(), *any),
            *want,
            "{why}"
        );
    }
    assert_eq!(load_index::CUSTOM_MISSING, 25);
    assert_eq!(load_index::UNKNOWN, -1);
}

#[test]
fn h1_h2_a_pool_shows_each_hosts_index_after_heartbeats() {
    let mut w = pool_with(&["a", "b"], |s| {
        s.cpu_threshold = 90;
        s.memory_threshold = 80;
    });
    w.set_limit(10);
    let metrics = |cpu: Option<f64>, mem: Option<f64>| HostMetrics {
        cpu_percent: cpu,
        memory_percent: mem,
        ..HostMetrics::default()
    };
    // H1: cpu and memory are in use and neither host has reported.
    assert_eq!(w.load_indexes(), [("a".into(), -1), ("b".into(), -1)]);

    // cpu 100 * 45 / 90 = 50, memory 100 * 20 / 80 = 25, sessions 0: 50.
    w.heartbeat_with("a", metrics(Some(45.0), Some(20.0)))
        .unwrap();
    assert_eq!(w.load_index("a"), 50);
    assert_eq!(w.load_index("b"), -1, "b still has not reported");

    // Each heartbeat replaces the last: cpu 10, memory 100 * 72 / 80 = 90.
    w.heartbeat_with("a", metrics(Some(9.0), Some(72.0)))
        .unwrap();
    assert_eq!(w.load_index("a"), 90);

    // cpu missing: left out; memory 10, sessions 0: 10.
    w.heartbeat_with("a", metrics(None, Some(8.0))).unwrap();
    assert_eq!(w.load_index("a"), 10);

    // Three sessions of limit 10: 30 > memory 10.
    let ids = w.place_on("a", 3, SessionState::Active);
    assert_eq!(w.load_index("a"), 30);
    // A lower limit (P3: the next decision sees it): 100 * 3 / 5 = 60.
    w.set_limit(5);
    assert_eq!(w.load_index("a"), 60);
    // Logoff: 100 * 2 / 5 = 40.
    w.pool.logoff(&ids[0]).unwrap();
    assert_eq!(w.load_index("a"), 40);

    // An empty heartbeat: both metrics left out; the session count is left.
    w.heartbeat_with("a", HostMetrics::default()).unwrap();
    assert_eq!(w.load_index("a"), 40);
    // Without the session count nothing is left: -1.
    w.configure(|c| c.load_index_settings.include_session_count = false);
    assert_eq!(w.load_indexes(), [("a".into(), -1), ("b".into(), -1)]);

    // Nothing selected: the session count is used, and needs no report.
    w.configure(|c| {
        c.load_index_settings.cpu_threshold = 0;
        c.load_index_settings.memory_threshold = 0;
    });
    assert_eq!(w.load_indexes(), [("a".into(), 40), ("b".into(), 0)]);
    // Without a limit, the raw count: 2.
    w.set_limit(MAX_SESSION_LIMIT);
    assert_eq!(w.load_index("a"), 2);
}

#[test]
fn h1_the_default_settings_need_no_heartbeat_and_follow_every_session() {
    let mut w = pool_with(&["a"], |_| {});
    assert_eq!(
        w.load_index("a"),
        0,
        "session count only: known without a report"
    );
    let ids = w.place_on("a", 3, SessionState::Pending);
    assert_eq!(w.load_index("a"), 3, "raw count of Pending sessions");
    w.set_state(&ids[0], SessionState::Disconnected);
    assert_eq!(w.load_index("a"), 3, "Disconnected sessions count too");
    // S4: the two Pending ones expire.
    w.tick_after_ms(120_000);
    assert_eq!(w.load_index("a"), 1);
    // A heartbeat with metrics nobody uses changes nothing.
    w.heartbeat_with("a", cpu(99.0)).unwrap();
    assert_eq!(w.load_index("a"), 1);
    // The index is derived in every pooled pool, not just LoadIndex ones.
    w.configure(|c| c.load_balancer_type = LoadBalancerType::DepthFirst);
    assert_eq!(w.load_index("a"), 1);
}

#[test]
fn h2_heartbeat_metrics_are_validated_and_a_refusal_changes_nothing() {
    let mut w = pool_with(&["a"], |s| s.cpu_threshold = 100);
    w.heartbeat_with("a", cpu(29.0)).unwrap();
    assert_eq!(w.load_index("a"), 29);
    for bad in [
        cpu(-0.5),
        cpu(100.5),
        cpu(f64::NAN),
        HostMetrics {
            disk_read_latency_ms: Some(f64::INFINITY),
            ..HostMetrics::default()
        },
        custom(-1),
    ] {
        let got = w.heartbeat_with("a", bad.clone());
        assert!(
            matches!(got, Err(Error::InvalidParameter(_))),
            "{bad:?}: {got:?}"
        );
        assert_eq!(w.load_index("a"), 29, "{bad:?} changed the index");
        assert_eq!(w.pool.host("a").unwrap().metrics, Some(cpu(29.0)));
    }
    assert!(matches!(
        w.heartbeat_with("nobody", cpu(1.0)),
        Err(Error::SessionHostNotFound(_))
    ));
}

#[test]
fn h3_custom_script_in_a_pool() {
    let mut w = pool_with(&["a", "b", "c"], |s| {
        s.use_custom_script = true;
        s.cpu_threshold = 50;
    });
    // Nobody reports: every host is -1.
    assert_eq!(
        w.load_indexes(),
        [("a".into(), -1), ("b".into(), -1), ("c".into(), -1)]
    );
    w.heartbeat_with("b", cpu(99.0)).unwrap();
    assert_eq!(
        w.load_index("b"),
        -1,
        "cpu is not used with a custom script"
    );

    // The first reporter appears: the others count 25 at once.
    w.heartbeat_with("a", custom(40)).unwrap();
    assert_eq!(
        w.load_indexes(),
        [("a".into(), 40), ("b".into(), 25), ("c".into(), 25)]
    );
    // Used alone: sessions and cpu 99 % of 50 do not count.
    w.place_on("a", 5, SessionState::Active);
    w.heartbeat_with(
        "a",
        HostMetrics {
            cpu_percent: Some(99.0),
            ..custom(40)
        },
    )
    .unwrap();
    assert_eq!(w.load_index("a"), 40);

    // > 100 is capped; 0 is a value.
    w.heartbeat_with("b", custom(250)).unwrap();
    w.heartbeat_with("c", custom(0)).unwrap();
    assert_eq!(
        w.load_indexes(),
        [("a".into(), 40), ("b".into(), 100), ("c".into(), 0)]
    );

    // Negative is refused by heartbeat validation; nothing changes.
    let got = w.heartbeat_with("c", custom(-3));
    assert!(matches!(got, Err(Error::InvalidParameter(ref m)) if m.contains("customLoadIndex")));
    assert_eq!(w.load_index("c"), 0);

    // A host registered while others report counts 25.
    w.add_host("d");
    assert_eq!(w.load_index("d"), 25);

    // Reporters stop one by one; while one is left the others count 25.
    w.heartbeat_with("b", HostMetrics::default()).unwrap();
    w.heartbeat_with("c", cpu(1.0)).unwrap();
    assert_eq!(
        w.load_indexes(),
        [
            ("a".into(), 40),
            ("b".into(), 25),
            ("c".into(), 25),
            ("d".into(), 25)
        ]
    );
    // The last reporter disappears: every host is -1.
    w.heartbeat_with("a", HostMetrics::default()).unwrap();
    assert_eq!(
        w.load_indexes(),
        [
            ("a".into(), -1),
            ("b".into(), -1),
            ("c".into(), -1),
            ("d".into(), -1)
        ]
    );
    // And the first one again.
    w.heartbeat_with("d", custom(7)).unwrap();
    assert_eq!(
        w.load_indexes(),
        [
            ("a".into(), 25),
            ("b".into(), 25),
            ("c".into(), 25),
            ("d".into(), 7)
        ]
    );

    // Turning the script off and on again: the same indexes come back.
    w.configure(|c| c.load_index_settings.use_custom_script = false);
    assert_eq!(
        w.load_index("a"),
        5,
        "session count (5 sessions, raw) and cpu left out"
    );
    w.configure(|c| c.load_index_settings.use_custom_script = true);
    assert_eq!(w.load_index("a"), 25);

    // A restart keeps who reports (metrics are stored with the host).
    let p = &w.pool;
    let restored = Pool::restore(
        p.config().clone(),
        p.counters(),
        p.hosts().cloned().collect(),
        p.sessions().cloned().collect(),
        T0,
    );
    let got: Vec<(String, i32)> = restored
        .hosts()
        .map(|h| (h.spec.name.clone(), h.load_index))
        .collect();
    assert_eq!(got, w.load_indexes());
}

/// H3: "while none does, every host is -1" — also when the last reporter
/// is removed from the pool rather than stopping its reports. (Drain and
/// re-registration of a reporter keep it a reporter.)
#[test]
fn h3_removing_the_last_custom_reporter_makes_every_host_unknown() {
    let mut w = pool_with(&["a", "b"], |s| s.use_custom_script = true);
    w.heartbeat_with("a", custom(40)).unwrap();
    assert_eq!(w.load_indexes(), [("a".into(), 40), ("b".into(), 25)]);
    // Re-registering the reporter (drain and back) keeps it a reporter.
    w.set_drained("a", true);
    w.set_drained("a", false);
    assert_eq!(w.load_indexes(), [("a".into(), 40), ("b".into(), 25)]);

    w.pool.remove_host("a", false).unwrap();
    assert_eq!(
        w.load_indexes(),
        [("b".into(), -1)],
        "H3: no host of the pool reports a value any more, so b is -1, not 25"
    );
    // And a new reporter makes b 25 again.
    w.add_host("c");
    w.heartbeat_with("c", custom(60)).unwrap();
    assert_eq!(w.load_indexes(), [("b".into(), 25), ("c".into(), 60)]);
}

/// The same bug seen from placement: with host-side rejection at index 20
/// (H6), b's stale 25 makes it refuse every logon, though nobody reports
/// any more and b is -1 (unknown), which refuses nothing.
#[test]
fn h3_h6_a_stale_25_after_removing_the_last_reporter_refuses_logons() {
    let mut w = pool_with(&["a", "b"], |s| {
        s.use_custom_script = true;
        s.load_index_threshold = 20;
    });
    w.heartbeat_with("a", custom(40)).unwrap();
    w.pool.remove_host("a", false).unwrap();
    let user = w.fresh_user();
    let got = w.connect(&user, 0).map(|p| p.host);
    assert_eq!(got, Ok("b".to_string()), "b is -1 and must take the logon");
}
