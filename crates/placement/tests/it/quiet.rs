//! The two operations a quiet pool makes most: a heartbeat that repeats the
//! host's last one (same metrics, no logon since), and a session's change
//! of state (S4). Both take shorter paths than a general update of a host
//! or a session; these tests hold them to what the rules give: the health
//! of S7, the index of H1–H3 with H7's correction, the S9 timers, and a
//! pool identical to one rebuilt from the same hosts and sessions (S5),
//! which then makes the same decisions.

use placement::{ConnectRequest, HostMetrics, HostStatus, Pool, SessionState};

use crate::{Alg, T0, World};

const SECOND_MS: i64 = 1000;

fn cpu(percent: f64) -> HostMetrics {
    HostMetrics {
        cpu_percent: Some(percent),
        memory_percent: Some(20.0),
        ..HostMetrics::default()
    }
}

fn status(w: &World, host: &str) -> HostStatus {
    w.pool.host(host).expect("host exists").status
}

/// A `LoadIndex` pool with H7's correction, CPU and memory indexed.
fn corrected(hosts: &[&str]) -> World {
    let mut w = World::with_hosts(Alg::Load, hosts);
    w.configure(|c| {
        c.load_index_settings.cpu_threshold = 100;
        c.load_index_settings.memory_threshold = 100;
        c.logon_storm_settings.logon_cost = 8;
    });
    w
}

#[test]
fn a_repeated_heartbeat_renews_health_and_keeps_the_index() {
    let mut w = corrected(&["a", "b"]);
    w.heartbeat_with("a", cpu(40.0)).unwrap();
    w.heartbeat_with("b", cpu(50.0)).unwrap();
    let quiet = w.load_index("a");
    assert!(quiet < w.load_index("b"), "a is the less loaded");

    // Again with the same metrics: nothing but the time moves.
    w.advance_ms(30 * SECOND_MS);
    w.heartbeat_with("a", cpu(40.0)).unwrap();
    assert_eq!(w.load_index("a"), quiet);
    assert_eq!(w.pool.host("a").unwrap().last_heartbeat_ms, Some(w.now_ms));

    // A logon: H7 adds logonCost until a heartbeat shows it.
    let p = w.connect("u1@x", 0).unwrap();
    assert_eq!(p.host, "a");
    assert_eq!(w.load_index("a"), quiet + 8);
    w.set_state(&p.session_id, SessionState::Active);
    assert_eq!(
        w.load_index("a"),
        quiet + 8,
        "placed since the last heartbeat: still corrected"
    );
    // The same metrics again, but a logon was placed since: the heartbeat
    // resets the correction, so it is not a repeat.
    w.advance_ms(30 * SECOND_MS);
    w.heartbeat_with("a", cpu(40.0)).unwrap();
    assert_eq!(w.load_index("a"), quiet, "the correction ends");

    // S7 counts silence from the repeated heartbeat, not from the one
    // before it.
    let last = w.now_ms;
    w.advance_ms(30 * SECOND_MS);
    w.heartbeat_with("a", cpu(40.0)).unwrap();
    w.heartbeat_with("b", cpu(50.0)).unwrap();
    w.tick_after_ms(last + 120 * SECOND_MS - 1 - w.now_ms);
    assert_eq!(status(&w, "a"), HostStatus::Available);
    w.tick_after_ms(1);
    assert_eq!(status(&w, "a"), HostStatus::Unavailable, "90 s of silence");

    // An Unavailable host's repeat makes it Available and placeable again.
    w.heartbeat_with("a", cpu(40.0)).unwrap();
    assert_eq!(status(&w, "a"), HostStatus::Available);
    assert_eq!(w.load_index("a"), quiet);
    w.heartbeat_with("b", cpu(50.0)).unwrap();
    // H5's round robin shares the queue: b (served least recently), then a.
    let next: Vec<String> = (2..4)
        .map(|i| w.connect(&format!("u{i}@x"), 0).unwrap().host)
        .collect();
    assert_eq!(next, ["b", "a"]);
    w.assert_consistent();
}

#[test]
fn a_repeated_heartbeat_changes_nothing_a_restore_would_not_rebuild() {
    for alg in [Alg::Breadth, Alg::Classic, Alg::Depth, Alg::Load] {
        let mut w = World::with_hosts(alg, &["a", "b", "c"]);
        w.configure(|c| c.logon_storm_settings.logon_cost = 8);
        for (h, load) in [("a", 30.0), ("b", 10.0), ("c", 20.0)] {
            w.heartbeat_with(h, cpu(load)).unwrap();
        }
        for i in 0..5 {
            w.connect(&format!("u{i}@x"), i * 0x3333_3333_3333_3333)
                .unwrap();
        }
        for _ in 0..3 {
            w.advance_ms(30 * SECOND_MS);
            for (h, load) in [("a", 30.0), ("b", 10.0), ("c", 20.0)] {
                w.heartbeat_with(h, cpu(load)).unwrap();
            }
        }
        assert_same_as_restored(&w, &format!("{alg:?}"));
    }
}

#[test]
fn a_state_change_restarts_the_disconnected_timer() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    w.configure(|c| c.disconnected_timeout_seconds = 600);
    let p = w.connect("u1@x", 0).unwrap();
    w.set_state(&p.session_id, SessionState::Disconnected);
    w.advance_ms(500 * SECOND_MS);
    w.set_state(&p.session_id, SessionState::Active);
    w.advance_ms(100 * SECOND_MS);
    w.set_state(&p.session_id, SessionState::Disconnected);
    let since = w.now_ms;
    assert_eq!(w.pool.session(&p.session_id).unwrap().state_since_ms, since);
    assert_eq!(w.pool.host("a").unwrap().disconnected_sessions, 1);
    // 600 s after the first disconnect the session is not due: it has been
    // disconnected for 100 s only.
    w.tick_after_ms(599 * SECOND_MS);
    assert!(w.pool.session(&p.session_id).is_some(), "not yet");
    w.tick_after_ms(SECOND_MS);
    assert!(
        w.pool.session(&p.session_id).is_none(),
        "600 s disconnected"
    );
    assert_eq!(w.pool.host("a").unwrap().disconnected_sessions, 0);
    assert_eq!(w.pool.host("a").unwrap().sessions, 0);
    w.assert_consistent();
}

#[test]
fn state_changes_leave_the_pool_as_a_restore_would_build_it() {
    for alg in [Alg::Breadth, Alg::Classic, Alg::Depth, Alg::Load] {
        let mut w = World::with_hosts(alg, &["a", "b", "c", "d"]);
        w.configure(|c| {
            c.max_session_limit = 5;
            c.pending_timeout_seconds = 3600;
            c.logon_storm_settings.logon_cost = 8;
            c.logon_storm_settings.connecting_session_threshold = 2;
        });
        let mut live: Vec<String> = Vec::new();
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        for step in 0..300 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            match rng % 5 {
                0 | 1 => {
                    let user = format!("u{}@x", (rng >> 8) % 30);
                    if let Ok(p) = w.connect(&user, rng)
                        && !p.reconnect
                    {
                        live.push(p.session_id);
                    }
                }
                2 | 3 if !live.is_empty() => {
                    let id = &live[(rng >> 8) as usize % live.len()];
                    let state = if rng & 0x100 == 0 {
                        SessionState::Active
                    } else {
                        SessionState::Disconnected
                    };
                    w.set_state(id, state);
                }
                4 if !live.is_empty() => {
                    let id = live.swap_remove((rng >> 8) as usize % live.len());
                    w.pool.logoff(&id).unwrap();
                }
                _ => {}
            }
            w.advance_ms(SECOND_MS);
            if step % 10 == 9 {
                // Heartbeats show every logon: the stored hosts then hold
                // everything a restore derives (H7 counts from 0 again).
                for (i, h) in ["a", "b", "c", "d"].into_iter().enumerate() {
                    w.heartbeat_with(h, cpu(10.0 * i as f64 + 5.0)).unwrap();
                }
                assert_same_as_restored(&w, &format!("{alg:?}, step {step}"));
            }
            w.assert_consistent();
        }
    }
}

/// The pool equals one restored from its own hosts and sessions, host by
/// host, and both place the next users alike.
fn assert_same_as_restored(w: &World, what: &str) {
    let restored = Pool::restore(
        w.pool.config().clone(),
        w.pool.counters(),
        w.pool.hosts().cloned().collect(),
        w.pool.sessions().cloned().collect(),
        T0,
    );
    let live: Vec<_> = w.pool.hosts().collect();
    let rebuilt: Vec<_> = restored.hosts().collect();
    assert_eq!(live, rebuilt, "{what}: hosts");
    let (mut a, mut b) = (w.pool.clone(), restored);
    for i in 0..8u64 {
        let user = format!("next{i}@x");
        let req = ConnectRequest {
            user: &user,
            ..ConnectRequest::default()
        };
        let random = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let id = format!("n{i}");
        assert_eq!(
            a.connect(&req, w.now_ms, random, &id),
            b.connect(&req, w.now_ms, random, &id),
            "{what}: next placement {i}"
        );
    }
}
