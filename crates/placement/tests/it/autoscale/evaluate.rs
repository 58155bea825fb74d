//! A3–A7: one evaluation, table-driven. Each row is a pool (see
//! `Farm::new` for the spec letters), a phase's threshold and minimum, and
//! the actions expected, with the arithmetic in comments: used capacity is
//! sessions × 100 against threshold × limit × serving hosts.

use placement::autoscale::Phase::*;
use placement::autoscale::{ActionKind, PlanMemory, StopHostsWhen, Waiting, evaluate};

use super::{Farm, phase, show};

const NOW: i64 = 1_700_000_000_000;

struct Row {
    name: &'static str,
    limit: u32,
    hosts: &'static str,
    threshold_pct: u32,
    minimum_pct: u32,
    want: &'static str,
}

fn run(rows: &[Row]) {
    for r in rows {
        let farm = Farm::new(r.limit, r.hosts);
        let e = evaluate(
            &farm.view(),
            &phase(Peak, r.threshold_pct, r.minimum_pct),
            &PlanMemory::default(),
            NOW,
        );
        assert_eq!(show(&e.actions), r.want, "{}: {:?}", r.name, e.figures);
    }
}

#[test]
fn a4_scale_out() {
    run(&[
        Row {
            name: "capacity: start the first stopped host in query order",
            // 17 sessions on 2 hosts of 10: 1700 > 60 × 20 = 1200 → start h3;
            // 3 hosts: 1700 ≤ 60 × 30 = 1800 → enough.
            limit: 10,
            hosts: "h1:9 h2:8 h3:0S h4:0S",
            threshold_pct: 60,
            minimum_pct: 0,
            want: "Start h3",
        },
        Row {
            name: "undrain what the plan drained before starting",
            // 19 sessions: 2 serving: 1900 > 1200 → undrain h3 (3 serving:
            // 1900 > 1800) → start h4 (4 serving: 1900 ≤ 2400).
            limit: 10,
            hosts: "h1:9 h2:8 h3:2P h4:0S",
            threshold_pct: 60,
            minimum_pct: 0,
            want: "Undrain h3, Start h4",
        },
        Row {
            name: "plan-drained hosts come back with the most sessions first",
            // 14 sessions, 1 serving: 1400 > 500 → h3 (5) then h2 (1):
            // 3 serving: 1400 ≤ 1500.
            limit: 10,
            hosts: "h1:8 h2:1P h3:5P",
            threshold_pct: 50,
            minimum_pct: 0,
            want: "Undrain h3, Undrain h2",
        },
        Row {
            name: "minimum: ceil(60% × 5) = 3 serving hosts",
            limit: 10,
            hosts: "h1:0 h2:0S h3:0S h4:0S h5:0S",
            threshold_pct: 90,
            minimum_pct: 60,
            want: "Start h2, Start h3",
        },
        Row {
            name: "a starting host counts as available: no second start",
            // 9 sessions, h1 + starting h2: 900 ≤ 60 × 20 = 1200.
            limit: 10,
            hosts: "h1:9 h2:0s h3:0S",
            threshold_pct: 60,
            minimum_pct: 0,
            want: "",
        },
        Row {
            name: "a stopped host the plan drained is undrained and started",
            limit: 10,
            hosts: "h1:10 h2:0SP",
            threshold_pct: 80,
            minimum_pct: 0,
            want: "Undrain h2, Start h2",
        },
        Row {
            name: "stopping and unknown power states are left alone",
            limit: 10,
            hosts: "h1:10 h2:0x",
            threshold_pct: 80,
            minimum_pct: 0,
            want: "",
        },
        Row {
            name: "an unavailable running host does not serve: start another",
            // h2 runs but sends no heartbeats: 1 serving, 900 > 800.
            limit: 10,
            hosts: "h1:9 h2:0U h3:0S",
            threshold_pct: 80,
            minimum_pct: 0,
            want: "Start h3",
        },
        Row {
            name: "a limit of 0 has no capacity to add",
            limit: 0,
            hosts: "h1:0 h2:0S",
            threshold_pct: 50,
            minimum_pct: 50,
            want: "",
        },
    ]);
}

#[test]
fn a5_scale_in() {
    run(&[
        Row {
            name: "fewest sessions first, empty hosts stopped, others drained",
            // 7 sessions, 4 serving, minimum ceil(25% × 4) = 1. Order: h3 (0),
            // h4 (1, last in query order of the tie), h2 (1), h1 (5).
            // Without h3: 700 ≤ 60 × 30 → stop h3. Without h4: 700 ≤ 60 × 20
            // → drain h4. Without h2: 700 > 60 × 10 → stays, and so does h1.
            limit: 10,
            hosts: "h1:5 h2:1 h3:0 h4:1",
            threshold_pct: 60,
            minimum_pct: 25,
            want: "Stop h3, Drain h4",
        },
        Row {
            name: "the minimum holds",
            // 0 sessions, minimum ceil(50% × 4) = 2: stop h4 then h3 (last
            // in query order first), keep h1 and h2.
            limit: 10,
            hosts: "h1:0 h2:0 h3:0 h4:0",
            threshold_pct: 60,
            minimum_pct: 50,
            want: "Stop h4, Stop h3",
        },
        Row {
            name: "at the threshold is not above it: stays",
            // 6 sessions: without h2, 600 ≤ 60 × 10 → stop h2.
            limit: 10,
            hosts: "h1:6 h2:0",
            threshold_pct: 60,
            minimum_pct: 0,
            want: "Stop h2",
        },
        Row {
            name: "a minimum of 0 may stop the last empty host",
            limit: 10,
            hosts: "h1:0",
            threshold_pct: 60,
            minimum_pct: 0,
            want: "Stop h1",
        },
        Row {
            name: "the last host with sessions is never drained",
            // Without h1: 100 sessions × 100 > 0 capacity.
            limit: 10,
            hosts: "h1:1",
            threshold_pct: 60,
            minimum_pct: 0,
            want: "",
        },
        Row {
            name: "plan-drained hosts stop once empty (ZeroSessions)",
            // 3 sessions on h1: scale-in would leave none serving. h2 is
            // empty: stop. h3 still has 2 disconnected sessions: waits.
            limit: 10,
            hosts: "h1:3 h2:0P h3:2/0P",
            threshold_pct: 90,
            minimum_pct: 0,
            want: "Stop h2",
        },
    ]);
}

#[test]
fn a5_zero_active_sessions_stops_hosts_with_only_disconnected_sessions() {
    // 7 sessions: without h2 (2 disconnected), 700 ≤ 80 × 10 → stop it at
    // once, no drain first; plan-drained h3 (1 disconnected) stops too.
    let farm = Farm::new(10, "h1:5 h2:2/0 h3:1/0P");
    let mut p = phase(RampDown, 80, 0);
    p.stop_hosts_when = StopHostsWhen::ZeroActiveSessions;
    let e = evaluate(&farm.view(), &p, &PlanMemory::default(), NOW);
    assert_eq!(show(&e.actions), "Stop h2, Stop h3");
}

#[test]
fn a6_operators_win() {
    run(&[
        Row {
            name: "an operator-drained host is not undrained, started or counted",
            // h1 drained by an operator: not available; 9 sessions on h3
            // alone: 900 > 500, and the only other host is h2, stopped and
            // drained by an operator: nothing to do.
            limit: 10,
            hosts: "h1:0D h2:0SD h3:9",
            threshold_pct: 50,
            minimum_pct: 0,
            want: "",
        },
        Row {
            name: "excluded hosts are never started, and not in the minimum's base",
            // Managed: h3, h4 → minimum ceil(50% × 2) = 1, h3 serves it.
            // Counting excluded h1, h2 would make it 2 and start h4.
            limit: 10,
            hosts: "h1:0E h2:0SE h3:0 h4:0S",
            threshold_pct: 60,
            minimum_pct: 50,
            want: "",
        },
        Row {
            name: "excluded hosts and their sessions are outside the plan",
            // h1 (excluded, full) is not counted: 1 session on h2: 100 ≤ 500;
            // without h2 nothing serves: stays. h3 (excluded, empty) is
            // never stopped.
            limit: 10,
            hosts: "h1:10E h2:1 h3:0E",
            threshold_pct: 50,
            minimum_pct: 0,
            want: "",
        },
        Row {
            name: "an operator-drained empty host is never stopped",
            limit: 10,
            hosts: "h1:0D h2:0",
            threshold_pct: 50,
            minimum_pct: 0,
            want: "Stop h2",
        },
    ]);
}

#[test]
fn a7_never_empty() {
    run(&[
        Row {
            name: "a full pool within the threshold still gets an open host",
            // 10 sessions on h1 (limit 10): 1000 ≤ 100 × 10, minimum
            // ceil(10% × 2) = 1 holds, but nothing is open → start h2.
            limit: 10,
            hosts: "h1:10 h2:0S",
            threshold_pct: 100,
            minimum_pct: 10,
            want: "Start h2",
        },
        Row {
            name: "scale-in keeps the last open host",
            // Without h1 (empty, the only open host): 1000 ≤ 100 × 10 and the
            // minimum 1 holds, but no open host would be left → stays.
            limit: 10,
            hosts: "h1:0 h2:10",
            threshold_pct: 100,
            minimum_pct: 10,
            want: "",
        },
        Row {
            name: "with a minimum of 0 the rule does not apply",
            limit: 10,
            hosts: "h1:10 h2:0S",
            threshold_pct: 100,
            minimum_pct: 0,
            want: "",
        },
    ]);
}

#[test]
fn a4_the_figures_and_what_the_plan_waits_for() {
    // 19 sessions on 2 available hosts of 10, an excluded and an
    // operator-drained host: used ceil(1900 / 20) = 95%; minimum ceil(50% × 4) = 2.
    let farm = Farm::new(10, "h1:9 h2:10 h3:0SE h4:0D h5:0s");
    let e = evaluate(
        &farm.view(),
        &phase(Peak, 60, 50),
        &PlanMemory::default(),
        NOW,
    );
    let f = &e.figures;
    assert_eq!(
        (
            f.used_capacity_pct,
            f.capacity_threshold_pct,
            f.sessions,
            f.running_hosts,
            f.available_hosts,
            f.starting_hosts,
            f.minimum_hosts,
            f.managed_hosts,
            f.excluded_hosts,
            f.operator_drained_hosts
        ),
        (95, 60, 19, 3, 2, 1, 2, 4, 1, 1)
    );
    // With h5 starting, 3 serving: 1900 > 1800 → one more, and none left.
    assert_eq!(show(&e.actions), "");
    assert_eq!(
        f.waiting_for,
        vec![
            Waiting::NoHostToStart { short_by_hosts: 1 },
            Waiting::HostsStarting { hosts: 1 }
        ]
    );
}

#[test]
fn a5_force_logoff_notify_then_wait_then_logoff_then_stop() {
    // Ramp-down with force logoff, wait 30 minutes. 3 sessions: without
    // h2 (1 session): 300 ≤ 90 × 10 → drain h2 and tell its user.
    let mut farm = Farm::new(10, "h1:2 h2:1");
    let mut p = phase(RampDown, 90, 0);
    p.force_logoff_users = true;
    let t0 = NOW;
    let e = evaluate(&farm.view(), &p, &PlanMemory::default(), t0);
    assert_eq!(show(&e.actions), "Drain h2, Notify h2");
    assert_eq!(
        e.actions[1].message.as_deref(),
        Some("Please save your work and log off.")
    );
    assert_eq!(e.memory.hosts["h2"].notified_at_ms, Some(t0));
    farm.apply(&e.actions);

    // 29 minutes later: nothing new, waiting for the logoff due at t0 + 30 min.
    let t1 = t0 + 29 * 60_000;
    let e1 = evaluate(&farm.view(), &p, &e.memory, t1);
    assert_eq!(show(&e1.actions), "");
    assert!(e1.figures.waiting_for.contains(&Waiting::LogoffDue {
        session_host: "h2".into(),
        at_ms: t0 + 30 * 60_000
    }));
    assert_eq!(e1.memory, e.memory);

    // At 30 minutes: log off, once.
    let t2 = t0 + 30 * 60_000;
    let e2 = evaluate(&farm.view(), &p, &e1.memory, t2);
    assert_eq!(show(&e2.actions), "Logoff h2");
    let again = evaluate(&farm.view(), &p, &e2.memory, t2 + 60_000);
    assert_eq!(show(&again.actions), "", "the logoff is not repeated");

    // The session ends: the host is stopped, and forgotten.
    farm.apply(&e2.actions);
    let e3 = evaluate(&farm.view(), &p, &e2.memory, t2 + 60_000);
    assert_eq!(show(&e3.actions), "Stop h2");
    assert!(e3.memory.hosts.is_empty());

    // A logoff announced in ramp-down is carried out in off-peak too.
    let mut farm = Farm::new(10, "h1:2 h2:1");
    let e = evaluate(&farm.view(), &p, &PlanMemory::default(), t0);
    farm.apply(&e.actions);
    let off = phase(OffPeak, 90, 0);
    let e = evaluate(&farm.view(), &off, &e.memory, t2);
    assert_eq!(show(&e.actions), "Logoff h2");
}

#[test]
fn a5_force_logoff_with_no_wait_notifies_and_logs_off_together() {
    let farm = Farm::new(10, "h1:2 h2:1");
    let mut p = phase(RampDown, 90, 0);
    p.force_logoff_users = true;
    p.wait_time_minutes = 0;
    let e = evaluate(&farm.view(), &p, &PlanMemory::default(), NOW);
    assert_eq!(show(&e.actions), "Drain h2, Notify h2, Logoff h2");
}

#[test]
fn a5_a_host_undrained_for_scale_out_forgets_its_notification() {
    // h2 was drained and notified; load comes back: 15 sessions on h1
    // alone (limit 10) → undrain h2, and no logoff is ever due for it.
    let farm = Farm::new(10, "h1:9 h2:6P");
    let mut memory = PlanMemory::default();
    memory.hosts.insert(
        "h2".into(),
        placement::autoscale::HostMemory {
            notified_at_ms: Some(NOW),
            logged_off_at_ms: None,
        },
    );
    let mut p = phase(RampDown, 90, 0);
    p.force_logoff_users = true;
    let e = evaluate(&farm.view(), &p, &memory, NOW + 3_600_000);
    assert_eq!(show(&e.actions), "Undrain h2");
    assert!(e.memory.hosts.is_empty());
    assert!(e.actions.iter().all(|a| a.action != ActionKind::Logoff));
}
