//! Rule S7: heartbeats, the heartbeat timeout, recovery, and silence
//! counted from the later of the last heartbeat and the engine's start.

use placement::{HostMetrics, HostStatus, Pool};

use crate::{Alg, T0, World};

const SECOND_MS: i64 = 1000;

fn status(w: &World, host: &str) -> HostStatus {
    w.pool.host(host).unwrap().status
}

#[test]
fn s7_a_silent_host_becomes_unavailable_after_the_timeout_and_returns_on_a_heartbeat() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b"]);
    w.heartbeat("a");
    // Default heartbeatTimeoutSeconds: 90.
    w.tick_after_ms(90 * SECOND_MS - 1);
    assert_eq!(status(&w, "a"), HostStatus::Available);
    assert_eq!(w.connect("u1@x", 0).unwrap().host, "a", "classic: a first");
    w.tick_after_ms(1);
    assert_eq!(status(&w, "a"), HostStatus::Unavailable, "90 s of silence");
    // a (1 session) would win neither way now; b must take the next ones
    // even though a is preferred by DepthFirst.
    w.set_alg(Alg::Depth);
    assert_eq!(w.connect("u2@x", 0).unwrap().host, "b");
    assert_eq!(w.connect("u3@x", 0).unwrap().host, "b");

    w.heartbeat("a");
    assert_eq!(
        status(&w, "a"),
        HostStatus::Available,
        "back on its next heartbeat"
    );
    assert_eq!(w.pool.host("a").unwrap().last_heartbeat_ms, Some(w.now_ms));
    // Depth: b has 2, a has 1 -> b; classic -> a.
    w.set_alg(Alg::Classic);
    assert_eq!(w.connect("u4@x", 0).unwrap().host, "a");
}

#[test]
fn s7_each_heartbeat_restarts_the_timeout() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    for _ in 0..10 {
        w.heartbeat("a");
        w.tick_after_ms(89 * SECOND_MS);
        assert_eq!(status(&w, "a"), HostStatus::Available);
    }
    w.tick_after_ms(SECOND_MS);
    assert_eq!(status(&w, "a"), HostStatus::Unavailable);
}

#[test]
fn s7_a_host_that_never_sent_a_heartbeat_stays_available() {
    let mut w = World::with_hosts(Alg::Classic, &["admin-registered"]);
    w.tick_after_ms(365 * 24 * 3600 * SECOND_MS);
    assert_eq!(status(&w, "admin-registered"), HostStatus::Available);
    assert_eq!(w.connect("u@x", 0).unwrap().host, "admin-registered");
}

#[test]
fn s7_the_pool_sets_the_heartbeat_timeout() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    w.configure(|c| c.heartbeat_timeout_seconds = 10);
    w.heartbeat("a");
    w.tick_after_ms(9 * SECOND_MS);
    assert_eq!(status(&w, "a"), HostStatus::Available);
    w.tick_after_ms(SECOND_MS);
    assert_eq!(status(&w, "a"), HostStatus::Unavailable);
}

#[test]
fn s7_the_connect_applies_the_timeout_itself() {
    // No tick from outside: the connect at t = 90 s sees a as silent.
    let mut w = World::with_hosts(Alg::Classic, &["a", "b"]);
    w.connect("u0@x", 0).unwrap(); // a: 1
    w.heartbeat("b");
    w.advance_ms(90 * SECOND_MS);
    // Classic would pick b (0 sessions); b is silent, so a.
    assert_eq!(w.connect("u1@x", 0).unwrap().host, "a");
    assert_eq!(status(&w, "b"), HostStatus::Unavailable);
}

#[test]
fn s7_heartbeats_are_validated_and_need_a_known_host() {
    let mut w = World::with_hosts(Alg::Classic, &["a"]);
    let bad = HostMetrics {
        cpu_percent: Some(101.0),
        ..HostMetrics::default()
    };
    let e = w.pool.heartbeat("a", bad, w.now_ms).unwrap_err();
    assert_eq!(e.code(), "InvalidParameter");
    assert!(e.to_string().contains("cpuPercent"), "{e}");
    assert_eq!(
        w.pool.host("a").unwrap().last_heartbeat_ms,
        None,
        "nothing recorded"
    );
    let e = w
        .pool
        .heartbeat("nope", HostMetrics::default(), w.now_ms)
        .unwrap_err();
    assert_eq!(e.code(), "SessionHostNotFound");
}

/// A restart: the engine is rebuilt long after the hosts' last heartbeats.
/// Silence is counted from the restart, so they stay Available for a full
/// timeout, and only then go Unavailable if they have not spoken.
#[test]
fn s7_silence_is_counted_from_the_later_of_last_heartbeat_and_engine_start() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b", "c"]);
    w.heartbeat("a"); // a at T0
    w.advance_ms(50 * SECOND_MS);
    w.heartbeat("b"); // b at T0 + 50 s; c never heartbeats
    let restart_ms = T0 + 3600 * SECOND_MS; // an hour later
    let mut p = Pool::restore(
        w.pool.config().clone(),
        w.pool.counters(),
        w.pool.hosts().cloned().collect(),
        w.pool.sessions().cloned().collect(),
        restart_ms,
    );
    let st = |p: &Pool, h: &str| p.host(h).unwrap().status;
    p.tick(restart_ms);
    assert_eq!(
        st(&p, "a"),
        HostStatus::Available,
        "the restart is not silence"
    );
    p.tick(restart_ms + 89 * SECOND_MS);
    assert_eq!(st(&p, "a"), HostStatus::Available);
    assert_eq!(st(&p, "b"), HostStatus::Available);
    p.heartbeat("b", HostMetrics::default(), restart_ms + 89 * SECOND_MS)
        .unwrap();
    p.tick(restart_ms + 90 * SECOND_MS);
    assert_eq!(
        st(&p, "a"),
        HostStatus::Unavailable,
        "90 s since the restart"
    );
    assert_eq!(
        st(&p, "b"),
        HostStatus::Available,
        "b spoke after the restart"
    );
    assert_eq!(st(&p, "c"), HostStatus::Available, "c never had an agent");
    p.tick(restart_ms + 179 * SECOND_MS);
    assert_eq!(st(&p, "b"), HostStatus::Unavailable);

    // A heartbeat later than the start counts from the heartbeat: a host
    // that spoke 60 s after the start is silent 90 s after that.
    let mut q = Pool::restore(
        w.pool.config().clone(),
        w.pool.counters(),
        w.pool.hosts().cloned().collect(),
        Vec::new(),
        T0 + 10 * SECOND_MS, // a's heartbeat (T0) is before the start, b's (T0 + 50 s) after
    );
    q.tick(T0 + 99 * SECOND_MS);
    assert_eq!(st(&q, "a"), HostStatus::Available, "start + 89 s");
    q.tick(T0 + 100 * SECOND_MS);
    assert_eq!(st(&q, "a"), HostStatus::Unavailable, "start + 90 s");
    q.tick(T0 + 139 * SECOND_MS);
    assert_eq!(st(&q, "b"), HostStatus::Available, "b's heartbeat + 89 s");
    q.tick(T0 + 140 * SECOND_MS);
    assert_eq!(st(&q, "b"), HostStatus::Unavailable, "b's heartbeat + 90 s");
}

#[test]
fn s7_an_unavailable_host_stays_unavailable_through_a_host_update() {
    let mut w = World::with_hosts(Alg::Classic, &["a", "b"]);
    w.make_unavailable(&["a"]);
    w.set_drained("a", false); // an update of a's settings (no change of drain)
    assert_eq!(status(&w, "a"), HostStatus::Unavailable);
    assert_eq!(w.connect("u@x", 0).unwrap().host, "b");
    w.heartbeat("a");
    w.tick_after_ms(89 * SECOND_MS);
    assert_eq!(status(&w, "a"), HostStatus::Available);
    w.tick_after_ms(SECOND_MS);
    assert_eq!(status(&w, "a"), HostStatus::Unavailable);
}

/// A host heard of through its exporter (W1) whose scrapes never went
/// well sent no heartbeat: it is watched for silence from its
/// registration all the same, through a restart, and its first good
/// scrape makes it Available. Other hosts that never spoke stay Available.
#[test]
fn s7_a_watched_host_that_never_had_a_good_scrape_becomes_unavailable() {
    use placement::HeartbeatSource;
    let mut w = World::with_hosts(Alg::Classic, &["win", "admin-registered"]);
    let failed = |w: &mut World| {
        w.pool
            .note_report(
                "win",
                Some(HeartbeatSource::WindowsExporter),
                Some(
                    "scrape failed, no heartbeat this round: the exporter answered HTTP 401".into(),
                ),
            )
            .unwrap();
    };
    failed(&mut w);
    w.tick_after_ms(89 * SECOND_MS);
    assert_eq!(status(&w, "win"), HostStatus::Available);
    w.tick_after_ms(SECOND_MS);
    assert_eq!(
        status(&w, "win"),
        HostStatus::Unavailable,
        "90 s since its registration"
    );
    assert_eq!(status(&w, "admin-registered"), HostStatus::Available);
    for user in ["u1@x", "u2@x", "u3@x"] {
        assert_eq!(w.connect(user, 0).unwrap().host, "admin-registered");
    }
    // More failed scrapes change nothing.
    failed(&mut w);
    assert_eq!(status(&w, "win"), HostStatus::Unavailable);

    // A restart: silence counts from the start, and then it is
    // Unavailable again, from what was stored.
    let restart_ms = w.now_ms + 3600 * SECOND_MS;
    let mut p = Pool::restore(
        w.pool.config().clone(),
        w.pool.counters(),
        w.pool.hosts().cloned().collect(),
        w.pool.sessions().cloned().collect(),
        restart_ms,
    );
    let st = |p: &Pool, h: &str| p.host(h).unwrap().status;
    p.tick(restart_ms + 89 * SECOND_MS);
    assert_eq!(st(&p, "win"), HostStatus::Available);
    p.tick(restart_ms + 90 * SECOND_MS);
    assert_eq!(st(&p, "win"), HostStatus::Unavailable);
    assert_eq!(st(&p, "admin-registered"), HostStatus::Available);

    // A good scrape: Available, and watched from that heartbeat on.
    p.heartbeat("win", HostMetrics::default(), restart_ms + 100 * SECOND_MS)
        .unwrap();
    assert_eq!(st(&p, "win"), HostStatus::Available);
    p.tick(restart_ms + 189 * SECOND_MS);
    assert_eq!(st(&p, "win"), HostStatus::Available);
    p.tick(restart_ms + 190 * SECOND_MS);
    assert_eq!(st(&p, "win"), HostStatus::Unavailable);
}
