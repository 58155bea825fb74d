//! A1–A3: the phase in force at an instant and its resolved settings, on
//! ordinary days, days no schedule names, and both DST days of
//! Europe/Stockholm (CET = UTC+1, CEST = UTC+2).

use placement::LoadBalancerType::*;
use placement::autoscale::{DayOfWeek, Phase, phase_in_force};

use super::{plan, utc, weekdays};

/// (UTC instant, schedule, phase, when it started in UTC): one row.
fn check(p: &placement::autoscale::ScalingPlan, rows: &[(&str, &str, Phase, &str)]) {
    for &(now, schedule, phase, started) in rows {
        let r = phase_in_force(p, utc(now)).unwrap();
        assert_eq!(
            (r.schedule.as_str(), r.phase, r.started_at_ms),
            (schedule, phase, utc(started)),
            "at {now}"
        );
        assert!(r.started_at_ms <= utc(now) && utc(now) < r.next_phase_at_ms);
    }
}

#[test]
fn a1_weekdays_phases_in_winter_and_the_weekend_is_fridays_off_peak() {
    let p = plan(vec![weekdays()]);
    // 2026-12-01 is a Tuesday; Stockholm is on CET (UTC+1).
    check(
        &p,
        &[
            // 06:59 local: before ramp-up, the off-peak of Monday 20:00.
            (
                "2026-12-01T05:59:00Z",
                "weekdays",
                Phase::OffPeak,
                "2026-11-30T19:00:00Z",
            ),
            (
                "2026-12-01T06:00:00Z",
                "weekdays",
                Phase::RampUp,
                "2026-12-01T06:00:00Z",
            ),
            (
                "2026-12-01T07:59:59Z",
                "weekdays",
                Phase::RampUp,
                "2026-12-01T06:00:00Z",
            ),
            (
                "2026-12-01T08:00:00Z",
                "weekdays",
                Phase::Peak,
                "2026-12-01T08:00:00Z",
            ),
            (
                "2026-12-01T16:00:00Z",
                "weekdays",
                Phase::RampDown,
                "2026-12-01T16:00:00Z",
            ),
            (
                "2026-12-01T19:00:00Z",
                "weekdays",
                Phase::OffPeak,
                "2026-12-01T19:00:00Z",
            ),
            // Saturday noon and Monday 06:00: still Friday 20:00's off-peak.
            (
                "2026-12-05T11:00:00Z",
                "weekdays",
                Phase::OffPeak,
                "2026-12-04T19:00:00Z",
            ),
            (
                "2026-12-07T05:00:00Z",
                "weekdays",
                Phase::OffPeak,
                "2026-12-04T19:00:00Z",
            ),
        ],
    );
    // Saturday's off-peak ends with Monday's ramp-up at 07:00 local.
    let r = phase_in_force(&p, utc("2026-12-05T11:00:00Z")).unwrap();
    assert_eq!(r.next_phase_at_ms, utc("2026-12-07T06:00:00Z"));
}

#[test]
fn a2_a3_settings_resolve_per_phase() {
    let mut s = weekdays();
    s.ramp_down_force_logoff_users = true;
    s.ramp_down_stop_hosts_when = placement::autoscale::StopHostsWhen::ZeroActiveSessions;
    let p = plan(vec![s]);
    let at = |t: &str| phase_in_force(&p, utc(t)).unwrap();
    // (algorithm, threshold, minimum, force logoff, stop when is the schedule's)
    let up = at("2026-12-01T06:30:00Z");
    assert_eq!(
        (
            up.load_balancing_algorithm,
            up.capacity_threshold_pct,
            up.minimum_hosts_pct
        ),
        (BreadthFirst, 60, 20)
    );
    assert!(!up.force_logoff_users);
    // Peak: ramp-up's threshold 60; peakMinimumHostsPct null → ramp-up's 20.
    let peak = at("2026-12-01T12:00:00Z");
    assert_eq!(
        (
            peak.load_balancing_algorithm,
            peak.capacity_threshold_pct,
            peak.minimum_hosts_pct
        ),
        (DepthFirst, 60, 20)
    );
    assert_eq!(
        peak.stop_hosts_when,
        placement::autoscale::StopHostsWhen::ZeroSessions
    );
    let down = at("2026-12-01T17:00:00Z");
    assert_eq!(
        (down.capacity_threshold_pct, down.minimum_hosts_pct),
        (90, 10)
    );
    assert!(down.force_logoff_users);
    assert_eq!(
        down.stop_hosts_when,
        placement::autoscale::StopHostsWhen::ZeroActiveSessions
    );
    // Off-peak: ramp-down's threshold 90; offPeakMinimumHostsPct null → 0.
    let off = at("2026-12-01T22:00:00Z");
    assert_eq!((off.capacity_threshold_pct, off.minimum_hosts_pct), (90, 0));
    assert!(!off.force_logoff_users, "force logoff is ramp-down's alone");
    assert_eq!(
        off.wait_time_minutes, 30,
        "a logoff announced in ramp-down still has its wait"
    );

    let mut s = weekdays();
    s.peak_minimum_hosts_pct = Some(50);
    s.off_peak_minimum_hosts_pct = Some(5);
    let p = plan(vec![s]);
    assert_eq!(
        phase_in_force(&p, utc("2026-12-01T12:00:00Z"))
            .unwrap()
            .minimum_hosts_pct,
        50
    );
    assert_eq!(
        phase_in_force(&p, utc("2026-12-01T22:00:00Z"))
            .unwrap()
            .minimum_hosts_pct,
        5
    );
}

#[test]
fn a1_before_ramp_up_is_the_day_befores_off_peak_whichever_schedule_it_was() {
    let mut weekend = weekdays();
    weekend.name = "weekend".into();
    weekend.days_of_week = vec![DayOfWeek::Saturday, DayOfWeek::Sunday];
    weekend.ramp_up_start_time = "10:00".into();
    weekend.peak_start_time = "12:00".into();
    weekend.ramp_down_start_time = "15:00".into();
    weekend.off_peak_start_time = "18:00".into();
    let p = plan(vec![weekdays(), weekend]);
    check(
        &p,
        &[
            // Saturday 09:00 local: Friday's (weekdays) off-peak.
            (
                "2026-12-05T08:00:00Z",
                "weekdays",
                Phase::OffPeak,
                "2026-12-04T19:00:00Z",
            ),
            (
                "2026-12-05T09:00:00Z",
                "weekend",
                Phase::RampUp,
                "2026-12-05T09:00:00Z",
            ),
            // Monday 06:00 local: Sunday's (weekend) off-peak from 18:00.
            (
                "2026-12-07T05:00:00Z",
                "weekend",
                Phase::OffPeak,
                "2026-12-06T17:00:00Z",
            ),
            (
                "2026-12-07T06:00:00Z",
                "weekdays",
                Phase::RampUp,
                "2026-12-07T06:00:00Z",
            ),
        ],
    );
}

/// A Sunday schedule whose ramp-up, 02:30, falls in both DST changes.
fn sunday_plan() -> placement::autoscale::ScalingPlan {
    let mut s = weekdays();
    s.name = "sunday".into();
    s.days_of_week = vec![DayOfWeek::Sunday];
    s.ramp_up_start_time = "02:30".into();
    s.peak_start_time = "04:00".into();
    plan(vec![s])
}

#[test]
fn a1_spring_forward_a_start_in_the_gap_starts_when_the_clock_jumps() {
    // 2026-03-29: 02:00 CET jumps to 03:00 CEST at 01:00Z; 02:30 never
    // happens, so ramp-up starts at 03:00 CEST = 01:00Z.
    check(
        &sunday_plan(),
        &[
            // 01:59 CET: the off-peak of the Sunday before (20:00 CET).
            (
                "2026-03-29T00:59:00Z",
                "sunday",
                Phase::OffPeak,
                "2026-03-22T19:00:00Z",
            ),
            (
                "2026-03-29T01:00:00Z",
                "sunday",
                Phase::RampUp,
                "2026-03-29T01:00:00Z",
            ),
            // 04:00 CEST = 02:00Z; 17:00 CEST = 15:00Z.
            (
                "2026-03-29T01:59:00Z",
                "sunday",
                Phase::RampUp,
                "2026-03-29T01:00:00Z",
            ),
            (
                "2026-03-29T02:00:00Z",
                "sunday",
                Phase::Peak,
                "2026-03-29T02:00:00Z",
            ),
            (
                "2026-03-29T15:00:00Z",
                "sunday",
                Phase::RampDown,
                "2026-03-29T15:00:00Z",
            ),
        ],
    );
    let r = phase_in_force(&sunday_plan(), utc("2026-03-29T00:59:00Z")).unwrap();
    assert_eq!(r.next_phase_at_ms, utc("2026-03-29T01:00:00Z"));
}

#[test]
fn a1_fall_back_a_start_in_the_repeated_hour_happens_once() {
    // 2026-10-25: 03:00 CEST falls back to 02:00 CET at 01:00Z; 02:30
    // happens at 00:30Z (CEST) and again at 01:30Z (CET).
    check(
        &sunday_plan(),
        &[
            (
                "2026-10-25T00:29:00Z",
                "sunday",
                Phase::OffPeak,
                "2026-10-18T18:00:00Z",
            ),
            (
                "2026-10-25T00:30:00Z",
                "sunday",
                Phase::RampUp,
                "2026-10-25T00:30:00Z",
            ),
            // 02:15 CET, wall clock before 02:30 again: ramp-up stays.
            (
                "2026-10-25T01:15:00Z",
                "sunday",
                Phase::RampUp,
                "2026-10-25T00:30:00Z",
            ),
            (
                "2026-10-25T01:30:00Z",
                "sunday",
                Phase::RampUp,
                "2026-10-25T00:30:00Z",
            ),
            // 04:00 CET = 03:00Z.
            (
                "2026-10-25T02:59:00Z",
                "sunday",
                Phase::RampUp,
                "2026-10-25T00:30:00Z",
            ),
            (
                "2026-10-25T03:00:00Z",
                "sunday",
                Phase::Peak,
                "2026-10-25T03:00:00Z",
            ),
        ],
    );
}

#[test]
fn a1_an_invalid_plan_is_refused_not_guessed() {
    let mut p = plan(vec![weekdays()]);
    p.time_zone = "Nowhere/Land".into();
    assert!(phase_in_force(&p, 0).is_err());
    let mut p = plan(vec![weekdays()]);
    p.schedules[0].peak_start_time = "25:00".into();
    assert!(phase_in_force(&p, 0).is_err());
}
