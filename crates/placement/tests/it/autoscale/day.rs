//! A1–A7 over a whole working day: a weekdays plan in Stockholm, a pool of
//! scripted hosts, a clock stepped every 15 minutes from 05:00 to midnight
//! through the four phases, users arriving and leaving by a script, and
//! every action checked against the rules as it is taken.

use std::collections::BTreeMap;

use placement::PowerState;
use placement::autoscale::{ActionKind, Phase, PlanMemory, evaluate, phase_in_force};

use super::{Farm, plan, utc, weekdays};

/// Users wanting a session from each local time on (Tuesday 2026-12-01).
const DEMAND: [(&str, u32); 10] = [
    ("05:00", 0),
    ("07:30", 3),
    ("08:00", 6),
    ("09:00", 10),
    ("12:00", 12),
    ("16:00", 8),
    ("17:00", 5),
    ("18:00", 2),
    ("19:00", 1),
    ("20:30", 0),
];

fn demand_at(local: &str) -> u32 {
    DEMAND
        .iter()
        .rev()
        .find(|(t, _)| *t <= local)
        .map_or(0, |d| d.1)
}

/// Places and ends sessions to meet the demand, as users would: a new
/// user goes to the serving host with the fewest sessions under the limit
/// (or waits, counted), a leaving user leaves the busiest host (the first
/// in query order of a tie), so the load stays spread as BreadthFirst
/// spreads it. The excluded h6 and drained hosts take nobody.
fn users(farm: &mut Farm, want: u32) -> u32 {
    let managed = |h: &super::TestHost| h.tags.is_empty();
    let mut have: u32 = farm
        .hosts
        .iter()
        .filter(|h| managed(h))
        .map(|h| h.sessions)
        .sum();
    let mut waited = 0;
    while have < want {
        let limit = farm.limit;
        let Some(h) = farm
            .hosts
            .iter_mut()
            .filter(|h| {
                managed(h)
                    && h.power == PowerState::Running
                    && h.allow_new_session
                    && h.sessions < limit
            })
            .min_by_key(|h| h.sessions)
        else {
            waited += want - have;
            break;
        };
        h.sessions += 1;
        h.active += 1;
        have += 1;
    }
    while have > want {
        let h = farm
            .hosts
            .iter_mut()
            .filter(|h| managed(h) && h.sessions > 0)
            .min_by_key(|h| std::cmp::Reverse(h.sessions))
            .unwrap();
        h.sessions -= 1;
        h.active = h.active.min(h.sessions);
        have -= 1;
    }
    waited
}

#[test]
fn a1_a7_a_whole_day_of_a_plan() {
    let mut s = weekdays();
    s.ramp_up_minimum_hosts_pct = 40; // ceil(40% × 5 managed) = 2
    s.ramp_down_minimum_hosts_pct = 20; // ceil(20% × 5) = 1
    s.ramp_down_force_logoff_users = true;
    let p = plan(vec![s]);
    p.validate().unwrap();
    // h1 runs, h2–h4 are off; h5 is drained by an operator; h6 carries the
    // exclusion tag and holds 2 sessions of its own.
    let mut farm = Farm::new(4, "h1:0 h2:0S h3:0S h4:0S h5:0D h6:2E");
    let mut memory = PlanMemory::default();
    // Local time → the actions taken then.
    let mut log: BTreeMap<String, String> = BTreeMap::new();
    let mut phases = Vec::new();
    let mut waited = 0;
    let start = utc("2026-12-01T04:00:00Z"); // 05:00 CET
    for step in 0..=(19 * 4) {
        let now = start + step * 15 * 60_000;
        let local = {
            let m = (5 * 60 + step * 15) % (24 * 60);
            format!("{:02}:{:02}", m / 60, m % 60)
        };
        farm.settle();
        waited += users(&mut farm, demand_at(&local));
        let phase = phase_in_force(&p, now).unwrap();
        if phases.last() != Some(&phase.phase) {
            phases.push(phase.phase);
        }
        let before = farm.clone();
        let e = evaluate(&farm.view(), &phase, &memory, now);
        for a in &e.actions {
            let h = before
                .hosts
                .iter()
                .find(|h| h.name == a.session_host)
                .unwrap();
            // A6: operators win, excluded hosts are out of reach.
            assert!(
                !["h5", "h6"].contains(&h.name.as_str()),
                "{local}: {a:?} touches an operator's or excluded host"
            );
            match a.action {
                ActionKind::Start => assert_eq!(h.power, PowerState::Stopped, "{local}: {a:?}"),
                // ZeroSessions in every phase of this plan: never stop a
                // host with a session.
                ActionKind::Stop => assert_eq!(h.sessions, 0, "{local}: {a:?}"),
                ActionKind::Drain => assert!(h.allow_new_session, "{local}: {a:?}"),
                _ => {}
            }
        }
        farm.apply(&e.actions);
        memory = e.memory;
        // A7: while the minimum is above 0, something is open or coming.
        if e.figures.minimum_hosts > 0 {
            assert!(
                farm.hosts.iter().any(|h| h.tags.is_empty()
                    && h.allow_new_session
                    && matches!(h.power, PowerState::Running | PowerState::Starting)
                    && h.sessions < farm.limit),
                "{local}: no open host in {:?}",
                phase.phase
            );
        }
        if !e.actions.is_empty() {
            log.insert(local.clone(), super::show(&e.actions));
        }
        if local == "12:00" {
            for h in ["h1", "h2", "h3", "h4"] {
                assert_eq!(
                    farm.host(h).power,
                    PowerState::Running,
                    "{h} at noon: {log:#?}"
                );
            }
        }
    }
    // The whole day's actions, each checked above against A4–A7:
    let want = [
        // Off-peak (Monday's, minimum 0), nobody on: the running host stops.
        ("05:00", "Stop h1"),
        // Ramp-up: minimum 2 → the first two stopped hosts in query order.
        ("07:00", "Start h1, Start h2"),
        // 6 users on 2 hosts of 4: 600 > 60 × 8 → h3 (600 ≤ 60 × 12).
        ("08:00", "Start h3"),
        // 10 users: 1000 > 60 × 12 → h4 (1000 ≤ 60 × 16; at noon 12 users
        // want a fifth host, and none is left that the plan may start).
        ("09:00", "Start h4"),
        // Ramp-down (threshold 90, minimum 1), 5 users as 1, 1, 1, 2: without
        // h3 (1, last in query order of the tie) 500 ≤ 90 × 12, without h2
        // 500 ≤ 90 × 8, without h1 500 > 90 × 4. Drained and told.
        ("17:00", "Drain h3, Drain h2, Notify h3, Notify h2"),
        // rampDownWaitTimeMinutes 30 later: logged off, then stopped.
        ("17:30", "Logoff h2, Logoff h3"),
        ("17:45", "Stop h2, Stop h3"),
        // 2 users (h1 got the 17:30 returners): h4 goes the same way.
        ("18:00", "Drain h4, Notify h4"),
        ("18:30", "Logoff h4"),
        ("18:45", "Stop h4"),
        // Off-peak from 20:00 (minimum 0); the last user leaves at 20:30.
        ("20:30", "Stop h1"),
    ];
    let want: BTreeMap<String, String> = want
        .iter()
        .map(|(t, a)| (t.to_string(), a.to_string()))
        .collect();
    assert_eq!(log, want);
    assert_eq!(
        phases,
        [
            Phase::OffPeak,
            Phase::RampUp,
            Phase::Peak,
            Phase::RampDown,
            Phase::OffPeak
        ]
    );
    // Night: every managed host is off; the operator's and the excluded
    // host are as they were.
    for h in ["h1", "h2", "h3", "h4"] {
        assert_eq!(farm.host(h).power, PowerState::Stopped, "{h}: {log:#?}");
    }
    assert_eq!(farm.host("h5").power, PowerState::Running);
    assert!(!farm.host("h5").allow_new_session);
    assert_eq!(farm.host("h6").power, PowerState::Running);
    // Ramp-up's minimum and the threshold started hosts ahead of the
    // users: nobody found the pool without room.
    assert_eq!(waited, 0);
}
