//! Which phase of a scaling plan is in force at an instant, with its
//! settings resolved (rules A1–A3).
//!
//! Phases start at local wall-clock times of the plan's time zone. Each
//! start is turned into one UTC instant, and the phase in force is the one
//! whose start instant is the latest not after now, looking back over the
//! last eight local days. That one definition gives every case of A1:
//!
//! - after a scheduled day's ramp-up: that day's phase;
//! - before ramp-up, or on a day no schedule names: the off-peak of the
//!   latest scheduled day before today (the day before when it is
//!   scheduled, as A1 says). So on a weekend of a weekdays-only plan,
//!   Friday's schedule's off-peak settings apply until Monday's ramp-up —
//!   the off-peak that began on Friday evening simply goes on. This is our
//!   choice where A1 says only "off-peak all day".
//!
//! Daylight saving time: a start inside the spring-forward gap (02:30 in
//! Stockholm on the last Sunday of March) starts at the first wall-clock
//! minute that exists after it (03:00 CEST); a start inside the fall-back
//! overlap (02:30 on the last Sunday of October happens twice) starts at
//! its first occurrence, and the phase stays in force through the repeated
//! hour instead of flipping back.

use chrono::{Datelike, Duration, LocalResult, NaiveDate, NaiveTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};

use super::plan::{ScalingPlan, Schedule, StopHostsWhen};
use crate::Error;
use crate::model::{LoadBalancerType, TimestampMs};

/// The four daily phases of a schedule (A1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Phase {
    RampUp,
    Peak,
    RampDown,
    OffPeak,
}

impl Phase {
    const ALL: [Phase; 4] = [Phase::RampUp, Phase::Peak, Phase::RampDown, Phase::OffPeak];
}

/// The phase in force and the settings it resolves to (A2, A3): what the
/// evaluation and the placement use, without going back to the plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ResolvedPhase {
    /// The schedule whose phase this is (for off-peak, the schedule of the
    /// day it began on).
    pub schedule: String,
    pub phase: Phase,
    /// When this phase began, in milliseconds since the epoch.
    pub started_at_ms: TimestampMs,
    /// When the next phase of the plan begins: the caller need not
    /// evaluate phase changes more often than this.
    pub next_phase_at_ms: TimestampMs,
    /// A2: the algorithm placements use while this phase is in force.
    pub load_balancing_algorithm: LoadBalancerType,
    /// A3: ramp-up's for ramp-up and peak, ramp-down's for ramp-down and
    /// off-peak.
    pub capacity_threshold_pct: u32,
    /// A3: the phase's own, peak's defaulting to ramp-up's, off-peak's to 0.
    pub minimum_hosts_pct: u32,
    /// A5: when a drained host is stopped. `rampDownStopHostsWhen` in
    /// ramp-down and off-peak (which follows ramp-down, as its threshold
    /// does); `ZeroSessions` in ramp-up and peak, where nobody's
    /// disconnected session should be lost to a shutdown.
    pub stop_hosts_when: StopHostsWhen,
    /// A5: whether hosts drained now have their users notified and logged
    /// off. Only in ramp-down, as in AVD.
    pub force_logoff_users: bool,
    /// The schedule's `rampDownWaitTimeMinutes`, in every phase: a logoff
    /// announced in ramp-down is carried out after this wait even once
    /// off-peak has begun, since users were told it would be.
    pub wait_time_minutes: u32,
    /// The schedule's `rampDownNotificationMessage`.
    pub notification_message: String,
    /// The plan's `exclusionTag` (A6).
    pub exclusion_tag: Option<String>,
}

/// How many local days back the search for the phase in force looks: a
/// week covers every weekday, one more day covers the day-before rule.
const DAYS_BACK: i64 = 8;

/// The UTC instant of a local wall-clock time, as the module says: the
/// first occurrence in an overlap, the end of the gap in a gap.
fn instant(tz: &chrono_tz::Tz, date: NaiveDate, minutes: u32) -> Option<TimestampMs> {
    let mut t = date.and_time(NaiveTime::from_hms_opt(minutes / 60, minutes % 60, 0)?);
    // A gap is at most a few hours in any zone; a day's worth of minutes
    // bounds the walk however odd the zone's history.
    for _ in 0..=1_440 {
        match tz.from_local_datetime(&t) {
            LocalResult::Single(x) => return Some(x.timestamp_millis()),
            LocalResult::Ambiguous(a, b) => return Some(a.min(b).timestamp_millis()),
            LocalResult::None => t += Duration::minutes(1),
        }
    }
    None
}

/// The phase in force at `now_ms` (A1) and its resolved settings (A2, A3).
/// The plan should have passed [`ScalingPlan::validate`]; an invalid one
/// is refused with the same error rather than guessed at.
pub fn phase_in_force(plan: &ScalingPlan, now_ms: TimestampMs) -> Result<ResolvedPhase, Error> {
    let tz = plan.tz()?;
    let mut by_day: [Option<(usize, [u32; 4])>; 7] = [None; 7];
    for (i, s) in plan.schedules.iter().enumerate() {
        let starts = s.start_minutes(&format!("schedules[{i}]"))?;
        for d in &s.days_of_week {
            by_day[*d as usize] = Some((i, starts));
        }
    }
    let now = Utc.timestamp_millis_opt(now_ms).single().ok_or_else(|| {
        Error::InvalidParameter(format!("{now_ms} ms is not a representable instant"))
    })?;
    let today = now.with_timezone(&tz).date_naive();

    // (start, order within the search, schedule, phase): the order breaks
    // ties between starts that fall on one instant (two in one DST gap),
    // in favour of the later phase.
    let mut current: Option<(TimestampMs, i64, usize, Phase)> = None;
    let mut next: Option<TimestampMs> = None;
    for back in (-DAYS_BACK..=DAYS_BACK).rev() {
        let Some(date) = today.checked_sub_signed(Duration::days(back)) else {
            continue;
        };
        let day = date.weekday().num_days_from_monday() as usize;
        let Some((schedule, starts)) = by_day[day] else {
            continue;
        };
        for (k, (phase, minutes)) in Phase::ALL.iter().zip(starts).enumerate() {
            let Some(at) = instant(&tz, date, minutes) else {
                continue;
            };
            let order = -back * 4 + k as i64;
            if at <= now_ms {
                if current.is_none_or(|(t, o, _, _)| (at, order) > (t, o)) {
                    current = Some((at, order, schedule, *phase));
                }
            } else if next.is_none_or(|t| at < t) {
                next = Some(at);
            }
        }
    }
    let (started_at_ms, _, schedule, phase) = current.ok_or_else(|| {
        Error::InvalidParameter("schedules: no schedule names any day of the week".into())
    })?;
    let s = &plan.schedules[schedule];
    Ok(resolve(
        plan,
        s,
        phase,
        started_at_ms,
        next.unwrap_or(TimestampMs::MAX),
    ))
}

fn resolve(
    plan: &ScalingPlan,
    s: &Schedule,
    phase: Phase,
    started_at_ms: TimestampMs,
    next_phase_at_ms: TimestampMs,
) -> ResolvedPhase {
    let (load_balancing_algorithm, capacity_threshold_pct, minimum_hosts_pct) = match phase {
        Phase::RampUp => (
            s.ramp_up_load_balancing_algorithm,
            s.ramp_up_capacity_threshold_pct,
            s.ramp_up_minimum_hosts_pct,
        ),
        Phase::Peak => (
            s.peak_load_balancing_algorithm,
            s.ramp_up_capacity_threshold_pct,
            s.peak_minimum_hosts_pct
                .unwrap_or(s.ramp_up_minimum_hosts_pct),
        ),
        Phase::RampDown => (
            s.ramp_down_load_balancing_algorithm,
            s.ramp_down_capacity_threshold_pct,
            s.ramp_down_minimum_hosts_pct,
        ),
        Phase::OffPeak => (
            s.off_peak_load_balancing_algorithm,
            s.ramp_down_capacity_threshold_pct,
            s.off_peak_minimum_hosts_pct.unwrap_or(0),
        ),
    };
    let stop_hosts_when = match phase {
        Phase::RampDown | Phase::OffPeak => s.ramp_down_stop_hosts_when,
        Phase::RampUp | Phase::Peak => StopHostsWhen::ZeroSessions,
    };
    ResolvedPhase {
        schedule: s.name.clone(),
        phase,
        started_at_ms,
        next_phase_at_ms,
        load_balancing_algorithm,
        capacity_threshold_pct,
        minimum_hosts_pct,
        stop_hosts_when,
        force_logoff_users: phase == Phase::RampDown && s.ramp_down_force_logoff_users,
        wait_time_minutes: s.ramp_down_wait_time_minutes,
        notification_message: s.ramp_down_notification_message.clone(),
        exclusion_tag: plan.exclusion_tag.clone(),
    }
}
