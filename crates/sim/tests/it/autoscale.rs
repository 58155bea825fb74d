//! Autoscale in the simulator: the working day with and
//! without a scaling plan, through the engine's own decisions. Small runs
//! (10 hosts, 300 users) so the debug build takes a second or two.

use placement::autoscale::ScalingPlan;
use sim::autoscale::{PlanSource, PowerMeasures};
use sim::{Policy, Report, ScenarioKind, SimConfig};

fn day(plan: ScalingPlan, seed: u64) -> SimConfig {
    let mut c = SimConfig::new(ScenarioKind::Day, 10, 300, seed);
    c.sample_seconds = 60;
    c.policies = vec![Policy::BreadthFirst, Policy::DepthFirst];
    c.scaling_plan = Some(PlanSource {
        name: "test".into(),
        plan,
    });
    c
}

fn run(cfg: &SimConfig) -> Report {
    sim::run(cfg, &Default::default()).unwrap()
}

/// The runs of one policy: (always on, under the plan).
fn pair<'a>(r: &'a Report, policy: &str) -> (&'a PowerMeasures, &'a PowerMeasures) {
    let find = |name: String| {
        r.results
            .iter()
            .find(|x| x.policy == name)
            .and_then(|x| x.power.as_ref())
            .unwrap_or_else(|| panic!("no run {name}"))
    };
    (find(policy.to_string()), find(format!("{policy} + plan")))
}

#[test]
fn same_seed_same_report_byte_for_byte_with_a_plan() {
    let cfg = day(sim::autoscale::default_plan(), 7);
    let a = run(&cfg).json();
    assert_eq!(a, run(&cfg).json());
    assert!(a.contains("\"autoscale\""), "{a}");
    let mut other = cfg.clone();
    other.seed = 8;
    assert_ne!(a, run(&other).json());
}

#[test]
fn the_plan_saves_host_hours_on_the_working_day_and_loses_no_logon() {
    let r = run(&day(sim::autoscale::default_plan(), 3));
    assert_eq!(r.autoscale.len(), 4, "{:?}", r.autoscale);
    for policy in ["BreadthFirst", "DepthFirst"] {
        let (on, plan) = pair(&r, policy);
        // Every host always on: 10 hosts for the 14 hours of the day.
        assert_eq!(on.host_hours, 140.0, "{policy}");
        assert_eq!((on.starts, on.stops), (0, 0));
        assert!(
            plan.host_hours < on.host_hours * 0.9,
            "{policy}: {} host-hours under the plan, {} always on",
            plan.host_hours,
            on.host_hours
        );
        assert!(plan.starts > 0 && plan.stops > 0, "{policy}: {plan:?}");
        // The minimum is kept and the threshold leaves room: nobody gives
        // up, nobody is logged off, nobody waits longer than a boot.
        assert_eq!(plan.gave_up, 0, "{policy}: {plan:?}");
        assert_eq!(plan.sessions_ended_by_plan, 0, "{policy}");
        assert!(plan.worst_wait_seconds <= 300.0, "{policy}: {plan:?}");
        let row = r
            .autoscale
            .iter()
            .find(|x| x.policy == format!("{policy} + plan"))
            .unwrap();
        assert!(row.host_hours_saved_pct > 10.0, "{row:?}");
    }
    // Both runs of a policy had the same users: every logon was placed.
    for x in &r.results {
        assert_eq!(x.rejected, 0, "{}: {:?}", x.policy, x.power);
    }
}

#[test]
fn operator_drained_hosts_are_left_alone() {
    // The day drains a tenth of the hosts (one of ten) from 11:00 to 15:00.
    for seed in [1, 2, 3] {
        let r = run(&day(sim::autoscale::default_plan(), seed));
        for x in &r.results {
            let p = x.power.as_ref().unwrap();
            assert_eq!(p.actions_on_operator_drained, 0, "{} seed {seed}", x.policy);
        }
    }
}

fn min_zero_plan() -> ScalingPlan {
    let mut plan = sim::autoscale::default_plan();
    let s = &mut plan.schedules[0];
    s.ramp_up_minimum_hosts_pct = 0;
    s.ramp_down_minimum_hosts_pct = 0;
    plan
}

#[test]
fn with_no_minimum_logons_wait_for_a_host_unless_it_starts_on_connect() {
    // Minimum 0 and no session: no capacity is needed, nothing starts, and
    // the first users wait until they give up (AVD's known trap).
    let r = run(&day(min_zero_plan(), 4));
    let (_, plan) = pair(&r, "BreadthFirst");
    assert!(plan.gave_up > 0, "{plan:?}");
    assert_eq!(plan.starts, 0, "{plan:?}");

    // A8: a refused logon starts a host; its users wait for the boot only.
    let mut cfg = day(min_zero_plan(), 4);
    cfg.start_on_connect = true;
    let r = run(&cfg);
    for policy in ["BreadthFirst", "DepthFirst"] {
        let (on, plan) = pair(&r, policy);
        assert_eq!(on.waited_logons, 0, "{policy}");
        assert_eq!(plan.gave_up, 0, "{policy}: {plan:?}");
        assert!(plan.started_on_connect >= 1, "{policy}: {plan:?}");
        assert!(plan.waited_logons >= 1, "{policy}: {plan:?}");
        // A boot takes 2 to 4 minutes; a user retries every 30 s.
        let boot_max = sim::autoscale::BOOT_SECONDS.1 as f64;
        let retry = sim::autoscale::LOGON_RETRY_SECONDS as f64;
        assert!(
            plan.worst_wait_seconds >= 120.0 && plan.worst_wait_seconds <= boot_max + retry,
            "{policy}: {plan:?}"
        );
        assert!(plan.host_hours < on.host_hours, "{policy}: {plan:?}");
    }
}

#[test]
fn ramp_down_force_logoff_ends_sessions_and_the_accounting_still_adds_up() {
    let mut plan = sim::autoscale::default_plan();
    let s = &mut plan.schedules[0];
    s.ramp_down_force_logoff_users = true;
    s.ramp_down_wait_time_minutes = 10;
    s.ramp_down_notification_message = "This host shuts down in 10 minutes.".into();
    let r = run(&day(plan, 5));
    let (on, plan) = pair(&r, "DepthFirst");
    assert_eq!(on.sessions_ended_by_plan, 0);
    assert!(plan.sessions_notified > 0, "{plan:?}");
    assert!(plan.sessions_ended_by_plan > 0, "{plan:?}");
    let x = r
        .results
        .iter()
        .find(|x| x.policy == "DepthFirst + plan")
        .unwrap();
    // The run checks placed = ended + live itself; the plan's share shows.
    assert_eq!(x.accounting.ended_by_plan, plan.sessions_ended_by_plan);
}

#[test]
fn a_plan_is_validated_and_other_products_picks_are_refused() {
    let mut cfg = day(sim::autoscale::default_plan(), 1);
    cfg.policies = vec![Policy::LeastConnections];
    let e = sim::run(&cfg, &Default::default()).unwrap_err().to_string();
    assert!(e.contains("--policies"), "{e}");
    let mut bad = sim::autoscale::default_plan();
    bad.time_zone = "Mars/Olympus".into();
    let e = sim::run(&day(bad, 1), &Default::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("timeZone"), "{e}");
    let mut cfg = day(sim::autoscale::default_plan(), 1);
    cfg.autoscale_interval_seconds = 1;
    let e = sim::run(&cfg, &Default::default()).unwrap_err().to_string();
    assert!(e.contains("--autoscale-interval"), "{e}");
}
