//! `Pool::restore` (rule S5): a pool rebuilt from what the store keeps —
//! settings, counters, hosts and sessions — derives the same counts and
//! makes the same next decisions as the pool that was running.

use placement::{Host, HostMetrics, Placement, Pool, PoolCounters, Session, SessionState};

use crate::{Alg, T0, World, assert_consistent, host_spec};

/// A live pool with some history: hosts registered, updated, drained and
/// removed, sessions in every state, some logged off, some expired.
fn busy_world(alg: Alg) -> World {
    let mut w = World::with_hosts(Alg::Classic, &["h1", "h2", "h3", "h4", "h5", "h6"]);
    w.add_spec(host_spec("g1", &["gpu"]));
    w.set_limit(6);
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    for i in 0..40 {
        rng = rng
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        if let Ok(p) = w.connect(&format!("user{i}@contoso.com"), rng) {
            match i % 4 {
                0 => w.set_state(&p.session_id, SessionState::Active),
                1 => w.set_state(&p.session_id, SessionState::Disconnected),
                2 if i % 3 == 0 => w.pool.logoff(&p.session_id).unwrap(),
                _ => {} // stays Pending
            }
        }
        if i == 10 {
            w.set_alg(Alg::Breadth);
        }
        if i == 20 {
            // Pending sessions from before t = 60 s expire at t = 180 s.
            w.advance_ms(60_000);
            w.set_drained("h2", true);
        }
        if i == 30 {
            w.advance_ms(120_000);
            w.pool.remove_host("h5", true).unwrap();
            w.add_host("h7");
        }
    }
    w.heartbeat("h1");
    w.set_alg(alg);
    w.pool.take_changes();
    w
}

fn restore_from(pool: &Pool, started_ms: i64) -> Pool {
    Pool::restore(
        pool.config().clone(),
        pool.counters(),
        pool.hosts().cloned().collect(),
        pool.sessions().cloned().collect(),
        started_ms,
    )
}

fn sorted_sessions(pool: &Pool) -> Vec<Session> {
    let mut v: Vec<Session> = pool.sessions().cloned().collect();
    v.sort_by(|a, b| a.id.cmp(&b.id));
    v
}

/// Drives both pools through the same requests and compares every answer.
fn assert_same_decisions(live: &mut Pool, restored: &mut Pool, mut now_ms: i64) {
    let mut rng = 42u64;
    for i in 0..60 {
        rng = rng
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        // Returning users (reconnects), new users, and every tenth a logoff.
        let user = format!("user{}@contoso.com", (rng >> 33) % 80);
        let id = format!("r{i}");
        let req = placement::ConnectRequest {
            user: &user,
            ..Default::default()
        };
        let a: Result<Placement, _> = live.connect(&req, now_ms, rng, &id);
        let b = restored.connect(&req, now_ms, rng, &id);
        assert_eq!(a, b, "step {i}: {user}");
        if i % 10 == 9
            && let Ok(p) = a
        {
            live.logoff(&p.session_id).unwrap();
            restored.logoff(&p.session_id).unwrap();
        }
        now_ms += 7_000;
    }
    assert_eq!(sorted_sessions(live), sorted_sessions(restored));
    assert_eq!(live.counters(), restored.counters());
}

#[test]
fn restore_rebuilds_counts_and_makes_the_same_next_decisions() {
    for alg in [Alg::Breadth, Alg::Classic, Alg::Depth] {
        let w = busy_world(alg);
        assert!(w.pool.session_count() > 5, "the history left sessions");
        let mut live = w.pool.clone();
        let mut restored = restore_from(&live, T0);
        // Derived state: counts, connecting counts, statuses, query order.
        let view = |p: &Pool| -> Vec<_> {
            p.hosts()
                .map(|h| {
                    (
                        h.seq,
                        h.spec.clone(),
                        h.sessions,
                        h.connecting_sessions,
                        h.status,
                    )
                })
                .collect()
        };
        assert_eq!(view(&live), view(&restored), "{alg:?}");
        assert_eq!(sorted_sessions(&live), sorted_sessions(&restored));
        assert_eq!(live.counters(), restored.counters());
        assert!(
            restored.take_changes().is_empty(),
            "a restore has nothing new to persist"
        );
        assert_consistent(&restored);
        assert_same_decisions(&mut live, &mut restored, w.now_ms);
    }
}

#[test]
fn restore_survives_a_round_trip_through_json() {
    // What a store does: serialize what the pool answers, read it back.
    let w = busy_world(Alg::Breadth);
    let mut live = w.pool.clone();
    let hosts: Vec<Host> =
        serde_json::from_str(&serde_json::to_string(&live.hosts().collect::<Vec<_>>()).unwrap())
            .unwrap();
    let sessions: Vec<Session> =
        serde_json::from_str(&serde_json::to_string(&live.sessions().collect::<Vec<_>>()).unwrap())
            .unwrap();
    let counters: PoolCounters =
        serde_json::from_str(&serde_json::to_string(&live.counters()).unwrap()).unwrap();
    let config = serde_json::from_str(&serde_json::to_string(live.config()).unwrap()).unwrap();
    let mut restored = Pool::restore(config, counters, hosts, sessions, T0);
    assert_consistent(&restored);
    assert_same_decisions(&mut live, &mut restored, w.now_ms);
}

#[test]
fn restore_keeps_query_order_and_the_registration_sequence() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b", "c"]);
    w.pool.remove_host("c", false).unwrap(); // seq 3 is used up
    // Hosts handed over in any order; the seq decides.
    let mut hosts: Vec<Host> = w.pool.hosts().cloned().collect();
    hosts.reverse();
    let mut p = Pool::restore(
        w.pool.config().clone(),
        w.pool.counters(),
        hosts,
        Vec::new(),
        T0,
    );
    let names: Vec<_> = p.hosts().map(|h| h.spec.name.clone()).collect();
    assert_eq!(names, ["a", "b"]);
    p.upsert_host(host_spec("d", &[]), T0).unwrap();
    assert_eq!(
        p.host("d").unwrap().seq,
        4,
        "a removed host's seq is never reused"
    );
    // Even if the counters were lost, the next seq is past every host's.
    let mut p = Pool::restore(
        w.pool.config().clone(),
        PoolCounters::default(),
        w.pool.hosts().cloned().collect(),
        Vec::new(),
        T0,
    );
    p.upsert_host(host_spec("d", &[]), T0).unwrap();
    assert_eq!(p.host("d").unwrap().seq, 3);
}

#[test]
fn restore_ignores_stored_derived_fields_and_keeps_pending_timeouts() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b"]);
    let pending = w.connect("u1@x", 0).unwrap().session_id; // a, Pending at T0
    let active = w.connect("u2@x", 0).unwrap().session_id; // b
    w.set_state(&active, SessionState::Active);
    let mut hosts: Vec<Host> = w.pool.hosts().cloned().collect();
    // Whatever stale derived values a caller hands over are recomputed.
    for h in &mut hosts {
        h.sessions = 77;
        h.connecting_sessions = 5;
        h.status = placement::HostStatus::Unavailable;
        h.metrics = Some(HostMetrics::default());
    }
    let sessions: Vec<Session> = w.pool.sessions().cloned().collect();
    let mut p = Pool::restore(
        w.pool.config().clone(),
        w.pool.counters(),
        hosts,
        sessions,
        T0 + 5_000,
    );
    let a = p.host("a").unwrap();
    assert_eq!(
        (a.sessions, a.connecting_sessions, a.status),
        (1, 1, placement::HostStatus::Available)
    );
    // The Pending session still expires 120 s after it was placed, not after the restart.
    p.tick(T0 + 119_999);
    assert!(p.session(&pending).is_some());
    p.tick(T0 + 120_000);
    assert!(p.session(&pending).is_none());
    assert!(p.session(&active).is_some());
    assert_consistent(&p);
}

#[test]
fn restore_skips_sessions_on_unknown_hosts() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    w.connect("u1@x", 0).unwrap();
    let mut sessions: Vec<Session> = w.pool.sessions().cloned().collect();
    let mut orphan = sessions[0].clone();
    orphan.id = "orphan".into();
    orphan.user = "u2@x".into();
    orphan.host = "gone".into();
    sessions.push(orphan);
    let p = Pool::restore(
        w.pool.config().clone(),
        w.pool.counters(),
        w.pool.hosts().cloned().collect(),
        sessions,
        T0,
    );
    assert_eq!(p.session_count(), 1);
    assert!(p.session("orphan").is_none());
    assert_consistent(&p);
}

/// One connect as the broker makes it: the random value comes from the
/// pool's own stored counters (`placement_random`), never from the test.
fn broker_connect(pool: &mut Pool, user: &str, id: &str, now_ms: i64) -> Placement {
    let random = pool.counters().placement_random();
    let req = placement::ConnectRequest {
        user,
        ..Default::default()
    };
    pool.connect(&req, now_ms, random, id)
        .expect("room for every user")
}

/// Rule S5 with the broker's random source: a pool restarted from what the
/// store keeps (every fifth placement here) draws the same random values
/// and so places every new user exactly where the pool that never stopped
/// does. BreadthFirst randomized, so each placement depends on its draw.
#[test]
fn s5_a_restarted_pool_places_as_the_uninterrupted_one() {
    let mut w = busy_world(Alg::Breadth);
    w.set_limit(999_999);
    w.pool.take_changes();
    let mut uninterrupted = w.pool.clone();
    let mut restarted = w.pool.clone();
    let mut lost_draws = w.pool.clone();
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    let mut now_ms = w.now_ms;
    for i in 0..50 {
        if i % 5 == 0 {
            restarted = restore_from(&restarted, now_ms);
            // The same restart with the draw count lost: what this test
            // must tell apart from a correct restore.
            let counters = PoolCounters {
                random_draws: 0,
                ..lost_draws.counters()
            };
            lost_draws = Pool::restore(
                lost_draws.config().clone(),
                counters,
                lost_draws.hosts().cloned().collect(),
                lost_draws.sessions().cloned().collect(),
                now_ms,
            );
        }
        let user = format!("new{i}@contoso.com");
        let id = format!("n{i}");
        a.push(broker_connect(&mut uninterrupted, &user, &id, now_ms).host);
        b.push(broker_connect(&mut restarted, &user, &id, now_ms).host);
        c.push(broker_connect(&mut lost_draws, &user, &id, now_ms).host);
        now_ms += 1_000;
    }
    assert_eq!(a, b, "the restarted pool placed differently");
    assert_eq!(uninterrupted.counters(), restarted.counters());
    assert_eq!(sorted_sessions(&uninterrupted), sorted_sessions(&restarted));
    assert_ne!(a, c, "a pool that forgot its draws would place differently");
    // More than one host was drawn, so the draws mattered.
    assert!(a.iter().any(|h| h != &a[0]), "{a:?}");
}
