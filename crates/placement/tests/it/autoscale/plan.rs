//! A1–A3: the plan reads the contract's JSON, and validation refuses what
//! it must, naming the field.

use placement::Error;
use placement::autoscale::{DayOfWeek, MAX_PLAN_HOST_POOLS, ScalingPlan};

use super::{plan, weekdays};

const CONTRACT_EXAMPLE: &str = r#"{
  "timeZone": "Europe/Stockholm",
  "hostPools": ["contosohp01"],
  "exclusionTag": "no-autoscale",
  "schedules": [{
    "name": "weekdays",
    "daysOfWeek": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"],
    "rampUpStartTime": "07:00", "rampUpLoadBalancingAlgorithm": "BreadthFirst",
    "rampUpMinimumHostsPct": 20, "rampUpCapacityThresholdPct": 60,
    "peakStartTime": "09:00", "peakLoadBalancingAlgorithm": "DepthFirst",
    "peakMinimumHostsPct": null,
    "rampDownStartTime": "17:00", "rampDownLoadBalancingAlgorithm": "DepthFirst",
    "rampDownMinimumHostsPct": 10, "rampDownCapacityThresholdPct": 90,
    "rampDownForceLogoffUsers": false, "rampDownWaitTimeMinutes": 30,
    "rampDownNotificationMessage": "Please save your work and log off.",
    "rampDownStopHostsWhen": "ZeroSessions",
    "offPeakStartTime": "20:00", "offPeakLoadBalancingAlgorithm": "DepthFirst",
    "offPeakMinimumHostsPct": 0
  }]
}"#;

#[test]
fn a1_the_contract_example_reads_validates_and_writes_back() {
    let p: ScalingPlan = serde_json::from_str(CONTRACT_EXAMPLE).unwrap();
    p.validate().unwrap();
    let mut want = plan(vec![weekdays()]);
    want.schedules[0].off_peak_minimum_hosts_pct = Some(0);
    assert_eq!(p, want);
    let back: serde_json::Value = serde_json::to_value(&p).unwrap();
    let orig: serde_json::Value = serde_json::from_str(CONTRACT_EXAMPLE).unwrap();
    assert_eq!(back, orig, "camelCase out exactly as in");
}

#[test]
fn a1_unknown_fields_are_refused() {
    let bad = CONTRACT_EXAMPLE.replace("\"exclusionTag\"", "\"exclusionTags\"");
    let e = serde_json::from_str::<ScalingPlan>(&bad).unwrap_err();
    assert!(e.to_string().contains("exclusionTags"), "{e}");
    let bad = CONTRACT_EXAMPLE.replace("\"peakMinimumHostsPct\"", "\"peakMinimumHostPct\"");
    assert!(serde_json::from_str::<ScalingPlan>(&bad).is_err());
}

/// One row: a change to the valid plan, and the field the error must name.
fn refused(field: &str, change: impl FnOnce(&mut ScalingPlan)) {
    let mut p = plan(vec![weekdays()]);
    change(&mut p);
    match p.validate() {
        Err(Error::InvalidParameter(m)) => {
            assert!(m.starts_with(field), "{field}: the message names it: {m}")
        }
        other => panic!("{field}: expected InvalidParameter, got {other:?}"),
    }
}

#[test]
fn a1_a3_validation_names_the_field() {
    use placement::LoadBalancerType::*;
    refused("timeZone", |p| p.time_zone = "Mars/Olympus".into());
    refused("timeZone", |p| p.time_zone = "+01:00".into());
    refused("hostPools[1]", |p| p.host_pools.push("contosohp01".into()));
    refused("hostPools[0]", |p| p.host_pools[0] = "bad name".into());
    refused("hostPools", |p| {
        p.host_pools = (0..=MAX_PLAN_HOST_POOLS).map(|i| format!("p{i}")).collect()
    });
    refused("exclusionTag", |p| {
        p.exclusion_tag = Some("two words".into())
    });
    refused("exclusionTag", |p| p.exclusion_tag = Some(String::new()));
    refused("schedules", |p| p.schedules.clear());
    refused("schedules", |p| {
        p.schedules = (0..8)
            .map(|i| {
                let mut s = weekdays();
                s.name = format!("s{i}");
                s.days_of_week = vec![];
                s
            })
            .collect()
    });
    refused("schedules[0].daysOfWeek", |p| {
        p.schedules[0].days_of_week.clear()
    });
    refused("schedules[1].daysOfWeek", |p| {
        let mut s = weekdays();
        s.name = "weekend".into();
        s.days_of_week = vec![DayOfWeek::Saturday, DayOfWeek::Friday];
        p.schedules.push(s)
    });
    refused("schedules[1].name", |p| {
        let mut s = weekdays();
        s.days_of_week = vec![DayOfWeek::Saturday];
        p.schedules.push(s)
    });
    refused("schedules[0].rampUpStartTime", |p| {
        p.schedules[0].ramp_up_start_time = "7:00".into()
    });
    refused("schedules[0].peakStartTime", |p| {
        p.schedules[0].peak_start_time = "24:00".into()
    });
    refused("schedules[0].rampDownStartTime", |p| {
        p.schedules[0].ramp_down_start_time = "17:60".into()
    });
    // Strictly increasing: ramp-down at 09:00 equals peak's start.
    refused("schedules[0].rampDownStartTime", |p| {
        p.schedules[0].ramp_down_start_time = "09:00".into()
    });
    refused("schedules[0].offPeakStartTime", |p| {
        p.schedules[0].off_peak_start_time = "06:00".into()
    });
    refused("schedules[0].peakLoadBalancingAlgorithm", |p| {
        p.schedules[0].peak_load_balancing_algorithm = LoadIndex
    });
    refused("schedules[0].offPeakLoadBalancingAlgorithm", |p| {
        p.schedules[0].off_peak_load_balancing_algorithm = Persistent
    });
    refused("schedules[0].rampUpCapacityThresholdPct", |p| {
        p.schedules[0].ramp_up_capacity_threshold_pct = 0
    });
    refused("schedules[0].rampDownCapacityThresholdPct", |p| {
        p.schedules[0].ramp_down_capacity_threshold_pct = 101
    });
    refused("schedules[0].rampUpMinimumHostsPct", |p| {
        p.schedules[0].ramp_up_minimum_hosts_pct = 101
    });
    refused("schedules[0].peakMinimumHostsPct", |p| {
        p.schedules[0].peak_minimum_hosts_pct = Some(101)
    });
    refused("schedules[0].offPeakMinimumHostsPct", |p| {
        p.schedules[0].off_peak_minimum_hosts_pct = Some(200)
    });
    refused("schedules[0].rampDownWaitTimeMinutes", |p| {
        p.schedules[0].ramp_down_wait_time_minutes = 1_441
    });
    refused("schedules[0].rampDownNotificationMessage", |p| {
        p.schedules[0].ramp_down_notification_message = "x".repeat(1_025)
    });
    refused("schedules[0].rampDownNotificationMessage", |p| {
        p.schedules[0].ramp_down_notification_message = "bell\u{7}".into()
    });
    refused("schedules[0].rampDownNotificationMessage", |p| {
        p.schedules[0].ramp_down_force_logoff_users = true;
        p.schedules[0].ramp_down_notification_message = " ".into();
    });
}

#[test]
fn a1_a3_edges_that_are_valid() {
    let mut p = plan(vec![weekdays()]);
    let s = &mut p.schedules[0];
    s.ramp_up_start_time = "00:00".into();
    s.off_peak_start_time = "23:59".into();
    s.ramp_up_capacity_threshold_pct = 1;
    s.ramp_down_capacity_threshold_pct = 100;
    s.ramp_up_minimum_hosts_pct = 0;
    s.peak_minimum_hosts_pct = Some(100);
    s.ramp_down_wait_time_minutes = 0;
    s.ramp_down_notification_message = "Line one.\nLine two.".into();
    p.exclusion_tag = None;
    p.host_pools.clear();
    p.validate().unwrap();
}
