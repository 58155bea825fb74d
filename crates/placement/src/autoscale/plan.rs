//! The scaling plan as an administrator writes it (rules A1–A3), and its
//! validation.
//!
//! The types are the contract's JSON (`PUT /api/v1/scalingPlans/{plan}`,
//! camelCase, unknown fields refused) so the API can read and show them
//! directly; [`ScalingPlan::validate`] checks everything serde cannot, once,
//! wherever a plan is created or changed, and names the field at fault.

use std::collections::BTreeSet;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::model::{LoadBalancerType, validate_name};

/// The most schedules a plan holds: one per day of the week at most, since
/// a day may be named by only one schedule (A1).
pub const MAX_SCHEDULES: usize = 7;
/// The most pools one plan serves. Each evaluation walks every pool of the
/// plan, so the bound keeps one plan's evaluation bounded.
pub const MAX_PLAN_HOST_POOLS: usize = 1_000;
/// The longest `rampDownNotificationMessage`, in bytes: it is shown to users
/// in a message box (and passed to a host's message command), not a letter.
pub const MAX_NOTIFICATION_MESSAGE_BYTES: usize = 1_024;
/// The longest `exclusionTag` (and any host tag it is compared with), in bytes.
pub const MAX_TAG_BYTES: usize = 128;
/// The longest `rampDownWaitTimeMinutes`: one day. A longer wait would
/// outlast the phase that asked for it by a whole cycle.
pub const MAX_WAIT_TIME_MINUTES: u32 = 1_440;
/// `rampDownWaitTimeMinutes` when a plan does not say (AVD's portal default).
pub const DEFAULT_WAIT_TIME_MINUTES: u32 = 30;

/// A day of the week, as the contract spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum DayOfWeek {
    Monday,
    Tuesday,
    Wednesday,
    Thursday,
    Friday,
    Saturday,
    Sunday,
}

impl DayOfWeek {
    /// chrono's weekday of the same name.
    pub fn from_chrono(day: chrono::Weekday) -> DayOfWeek {
        use chrono::Weekday::*;
        match day {
            Mon => DayOfWeek::Monday,
            Tue => DayOfWeek::Tuesday,
            Wed => DayOfWeek::Wednesday,
            Thu => DayOfWeek::Thursday,
            Fri => DayOfWeek::Friday,
            Sat => DayOfWeek::Saturday,
            Sun => DayOfWeek::Sunday,
        }
    }
}

/// When a host the plan drained is stopped (A5): once it has no session at
/// all, or once it has no Active session (its Disconnected sessions end
/// with the host).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum StopHostsWhen {
    #[default]
    ZeroSessions,
    ZeroActiveSessions,
}

/// One schedule of a plan: the days it names and its four phases (A1–A3),
/// field for field the contract's JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Schedule {
    /// Unique in the plan; phases and actions are reported with it.
    pub name: String,
    /// The days this schedule's phases run on; a day is named by at most
    /// one schedule of the plan.
    pub days_of_week: Vec<DayOfWeek>,
    /// "HH:MM", local time of the plan's time zone.
    pub ramp_up_start_time: String,
    pub ramp_up_load_balancing_algorithm: LoadBalancerType,
    /// 0..=100: of the hosts the plan may manage, how many run at least.
    pub ramp_up_minimum_hosts_pct: u32,
    /// 1..=100: used capacity above which the plan adds hosts (also peak's).
    pub ramp_up_capacity_threshold_pct: u32,
    pub peak_start_time: String,
    pub peak_load_balancing_algorithm: LoadBalancerType,
    /// Peak's own minimum; absent or null: ramp-up's (A3, beyond AVD, whose
    /// peak has none).
    #[serde(default)]
    pub peak_minimum_hosts_pct: Option<u32>,
    pub ramp_down_start_time: String,
    pub ramp_down_load_balancing_algorithm: LoadBalancerType,
    pub ramp_down_minimum_hosts_pct: u32,
    /// 1..=100: used capacity ramp-down and off-peak hold to.
    pub ramp_down_capacity_threshold_pct: u32,
    /// Whether the users of hosts drained in ramp-down are told, then
    /// logged off after `rampDownWaitTimeMinutes` (A5).
    #[serde(default)]
    pub ramp_down_force_logoff_users: bool,
    /// 0..=[`MAX_WAIT_TIME_MINUTES`]; [`DEFAULT_WAIT_TIME_MINUTES`] when absent.
    #[serde(default = "default_wait_time_minutes")]
    pub ramp_down_wait_time_minutes: u32,
    /// What the users of a drained host are sent; at most
    /// [`MAX_NOTIFICATION_MESSAGE_BYTES`].
    #[serde(default)]
    pub ramp_down_notification_message: String,
    #[serde(default)]
    pub ramp_down_stop_hosts_when: StopHostsWhen,
    pub off_peak_start_time: String,
    pub off_peak_load_balancing_algorithm: LoadBalancerType,
    /// Off-peak's own minimum; absent or null: 0 (A3, beyond AVD).
    #[serde(default)]
    pub off_peak_minimum_hosts_pct: Option<u32>,
}

fn default_wait_time_minutes() -> u32 {
    DEFAULT_WAIT_TIME_MINUTES
}

/// A scaling plan (A1): a time zone, the pools it serves, the tag that puts
/// a host out of its reach, and its schedules. The plan's name is the
/// caller's key (the URL), not part of the body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScalingPlan {
    /// An IANA time zone name (`Europe/Stockholm`); the schedules' times
    /// are local times there, daylight saving time included.
    pub time_zone: String,
    /// The pooled pools this plan serves, at most [`MAX_PLAN_HOST_POOLS`].
    #[serde(default)]
    pub host_pools: Vec<String>,
    /// Hosts carrying this tag are never started, stopped, drained or
    /// undrained by the plan, and are not counted in its minimum (A6).
    #[serde(default)]
    pub exclusion_tag: Option<String>,
    /// 1..=[`MAX_SCHEDULES`] schedules.
    pub schedules: Vec<Schedule>,
}

/// A validated "HH:MM" as minutes after local midnight.
pub(crate) fn parse_time(field: &str, value: &str) -> Result<u32, Error> {
    let bad = || {
        Error::InvalidParameter(format!(
            "{field}: {value:?} is not a time of day; use \"HH:MM\" from \"00:00\" to \"23:59\""
        ))
    };
    let (h, m) = value.split_once(':').ok_or_else(bad)?;
    if h.len() != 2 || m.len() != 2 || !h.bytes().chain(m.bytes()).all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let (h, m): (u32, u32) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
    if h > 23 || m > 59 {
        return Err(bad());
    }
    Ok(h * 60 + m)
}

/// A tag (A6): 1 to [`MAX_TAG_BYTES`] bytes, no white space or control
/// characters, so it reads the same in a URL, a CLI flag and a log line.
pub fn validate_tag(field: &str, tag: &str) -> Result<(), Error> {
    if tag.is_empty()
        || tag.len() > MAX_TAG_BYTES
        || tag.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(Error::InvalidParameter(format!(
            "{field}: {tag:?} is not a valid tag; use 1 to {MAX_TAG_BYTES} bytes without white \
             space or control characters"
        )));
    }
    Ok(())
}

fn check_pct(field: &str, value: u32, min: u32) -> Result<(), Error> {
    if !(min..=100).contains(&value) {
        return Err(Error::InvalidParameter(format!(
            "{field}: {value} is out of range; it must be from {min} to 100"
        )));
    }
    Ok(())
}

fn check_algorithm(field: &str, value: LoadBalancerType) -> Result<(), Error> {
    match value {
        LoadBalancerType::BreadthFirst | LoadBalancerType::DepthFirst => Ok(()),
        other => Err(Error::InvalidParameter(format!(
            "{field}: {other:?} cannot be a phase's algorithm; use BreadthFirst or DepthFirst"
        ))),
    }
}

impl Schedule {
    /// The four start times in minutes after midnight, checked: each
    /// "HH:MM" and strictly increasing (A1).
    pub(crate) fn start_minutes(&self, at: &str) -> Result<[u32; 4], Error> {
        let fields = [
            ("rampUpStartTime", &self.ramp_up_start_time),
            ("peakStartTime", &self.peak_start_time),
            ("rampDownStartTime", &self.ramp_down_start_time),
            ("offPeakStartTime", &self.off_peak_start_time),
        ];
        let mut out = [0u32; 4];
        for (i, (field, value)) in fields.iter().enumerate() {
            out[i] = parse_time(&format!("{at}.{field}"), value)?;
            if i > 0 && out[i] <= out[i - 1] {
                return Err(Error::InvalidParameter(format!(
                    "{at}.{field}: {value:?} must be later than {}.{} {:?}; the four phases \
                     start in order within one day",
                    at,
                    fields[i - 1].0,
                    fields[i - 1].1
                )));
            }
        }
        Ok(out)
    }

    fn validate(&self, at: &str) -> Result<(), Error> {
        validate_name(&format!("{at}.name"), &self.name)?;
        if self.days_of_week.is_empty() {
            return Err(Error::InvalidParameter(format!(
                "{at}.daysOfWeek: name at least one day"
            )));
        }
        self.start_minutes(at)?;
        for (field, value) in [
            (
                "rampUpLoadBalancingAlgorithm",
                self.ramp_up_load_balancing_algorithm,
            ),
            (
                "peakLoadBalancingAlgorithm",
                self.peak_load_balancing_algorithm,
            ),
            (
                "rampDownLoadBalancingAlgorithm",
                self.ramp_down_load_balancing_algorithm,
            ),
            (
                "offPeakLoadBalancingAlgorithm",
                self.off_peak_load_balancing_algorithm,
            ),
        ] {
            check_algorithm(&format!("{at}.{field}"), value)?;
        }
        let pcts = [
            (
                "rampUpMinimumHostsPct",
                Some(self.ramp_up_minimum_hosts_pct),
                0,
            ),
            (
                "rampUpCapacityThresholdPct",
                Some(self.ramp_up_capacity_threshold_pct),
                1,
            ),
            ("peakMinimumHostsPct", self.peak_minimum_hosts_pct, 0),
            (
                "rampDownMinimumHostsPct",
                Some(self.ramp_down_minimum_hosts_pct),
                0,
            ),
            (
                "rampDownCapacityThresholdPct",
                Some(self.ramp_down_capacity_threshold_pct),
                1,
            ),
            ("offPeakMinimumHostsPct", self.off_peak_minimum_hosts_pct, 0),
        ];
        for (field, value, min) in pcts {
            if let Some(v) = value {
                check_pct(&format!("{at}.{field}"), v, min)?;
            }
        }
        if self.ramp_down_wait_time_minutes > MAX_WAIT_TIME_MINUTES {
            return Err(Error::InvalidParameter(format!(
                "{at}.rampDownWaitTimeMinutes: {} is out of range; it must be from 0 to \
                 {MAX_WAIT_TIME_MINUTES}",
                self.ramp_down_wait_time_minutes
            )));
        }
        let msg = &self.ramp_down_notification_message;
        if msg.len() > MAX_NOTIFICATION_MESSAGE_BYTES {
            return Err(Error::InvalidParameter(format!(
                "{at}.rampDownNotificationMessage: longer than {MAX_NOTIFICATION_MESSAGE_BYTES} \
                 bytes"
            )));
        }
        // Line breaks are fine in a message box; other control characters
        // could drive a terminal (`wall`) or a log reader.
        if msg
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
        {
            return Err(Error::InvalidParameter(format!(
                "{at}.rampDownNotificationMessage: control characters other than line breaks \
                 and tabs are not allowed"
            )));
        }
        if self.ramp_down_force_logoff_users && msg.trim().is_empty() {
            return Err(Error::InvalidParameter(format!(
                "{at}.rampDownNotificationMessage: rampDownForceLogoffUsers needs a message to \
                 warn users before they are logged off"
            )));
        }
        Ok(())
    }
}

impl ScalingPlan {
    /// The plan's time zone, parsed.
    pub fn tz(&self) -> Result<chrono_tz::Tz, Error> {
        chrono_tz::Tz::from_str(&self.time_zone).map_err(|_| {
            Error::InvalidParameter(format!(
                "timeZone: {:?} is not an IANA time zone name (for example Europe/Stockholm)",
                self.time_zone
            ))
        })
    }

    /// Checks everything at once; the first problem found is the error,
    /// naming its field (`schedules[1].peakStartTime`). Whether a pool
    /// exists, is pooled, or already has another plan is the caller's to
    /// check: the engine sees one plan at a time.
    pub fn validate(&self) -> Result<(), Error> {
        self.tz()?;
        if self.host_pools.len() > MAX_PLAN_HOST_POOLS {
            return Err(Error::InvalidParameter(format!(
                "hostPools: {} pools; a plan serves at most {MAX_PLAN_HOST_POOLS}",
                self.host_pools.len()
            )));
        }
        let mut pools = BTreeSet::new();
        for (i, p) in self.host_pools.iter().enumerate() {
            validate_name(&format!("hostPools[{i}]"), p)?;
            if !pools.insert(p.as_str()) {
                return Err(Error::InvalidParameter(format!(
                    "hostPools[{i}]: {p:?} is listed twice"
                )));
            }
        }
        if let Some(tag) = &self.exclusion_tag {
            validate_tag("exclusionTag", tag)?;
        }
        if self.schedules.is_empty() || self.schedules.len() > MAX_SCHEDULES {
            return Err(Error::InvalidParameter(format!(
                "schedules: {} schedules; a plan has 1 to {MAX_SCHEDULES}",
                self.schedules.len()
            )));
        }
        let mut names = BTreeSet::new();
        let mut days = BTreeSet::new();
        for (i, s) in self.schedules.iter().enumerate() {
            let at = format!("schedules[{i}]");
            s.validate(&at)?;
            if !names.insert(s.name.as_str()) {
                return Err(Error::InvalidParameter(format!(
                    "{at}.name: {:?} is the name of another schedule",
                    s.name
                )));
            }
            for d in &s.days_of_week {
                if !days.insert(*d) {
                    return Err(Error::InvalidParameter(format!(
                        "{at}.daysOfWeek: {d:?} is named twice; a day belongs to at most one \
                         schedule"
                    )));
                }
            }
        }
        Ok(())
    }
}
