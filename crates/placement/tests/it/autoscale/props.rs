//! A4–A7 as properties over random pools and phases: operators win,
//! never empty, same input same output, and no action repeated once the
//! caller has applied it.

use placement::autoscale::{ActionKind, Phase, PlanMemory, evaluate};
use placement::{DrainedBy, PowerState};
use proptest::prelude::*;

use super::{Farm, KEEP, TestHost, phase};

fn host() -> impl Strategy<Value = TestHost> {
    (
        prop_oneof![
            4 => Just(PowerState::Running),
            3 => Just(PowerState::Stopped),
            1 => Just(PowerState::Starting),
            1 => Just(PowerState::Stopping),
            1 => Just(PowerState::Unknown),
        ],
        prop::bool::weighted(0.9),
        prop_oneof![6 => Just(None), 2 => Just(Some(DrainedBy::ScalingPlan)), 1 => Just(Some(DrainedBy::Operator)), 1 => Just(Some(DrainedBy::Operator))],
        prop::bool::weighted(0.15),
        0u32..12,
        0u32..12,
    )
        .prop_map(|(power, available, drained_by, excluded, sessions, active)| {
            let stopped = matches!(power, PowerState::Stopped);
            TestHost {
                name: String::new(),
                power,
                available,
                allow_new_session: drained_by.is_none(),
                drained_by,
                tags: if excluded { vec![KEEP.into()] } else { vec![] },
                capabilities: vec!["rdp".into()],
                assigned_user: None,
                sessions: if stopped { 0 } else { sessions },
                active: if stopped { 0 } else { active.min(sessions) },
            }
        })
}

fn case() -> impl Strategy<Value = (Farm, Phase, u32, u32, bool)> {
    (
        prop::collection::vec(host(), 0..24),
        0u32..12,
        prop_oneof![
            Just(Phase::RampUp),
            Just(Phase::Peak),
            Just(Phase::RampDown),
            Just(Phase::OffPeak)
        ],
        1u32..=100,
        0u32..=100,
        any::<bool>(),
    )
        .prop_map(|(mut hosts, limit, p, threshold, minimum, force)| {
            for (i, h) in hosts.iter_mut().enumerate() {
                h.name = format!("h{i}");
            }
            (Farm { limit, hosts }, p, threshold, minimum, force)
        })
}

fn open(f: &Farm) -> usize {
    f.hosts
        .iter()
        .filter(|h| {
            h.tags.is_empty()
                && h.allow_new_session
                && (h.power == PowerState::Starting
                    || (h.power == PowerState::Running && h.available))
                && h.sessions < f.limit
        })
        .count()
}

proptest! {
    #[test]
    fn a6_operator_drained_and_excluded_hosts_are_never_in_an_action(
        (farm, p, threshold, minimum, force) in case()
    ) {
        let mut ph = phase(p, threshold, minimum);
        ph.force_logoff_users = force && p == Phase::RampDown;
        let e = evaluate(&farm.view(), &ph, &PlanMemory::default(), 0);
        for a in &e.actions {
            let h = farm.hosts.iter().find(|h| h.name == a.session_host).unwrap();
            prop_assert!(h.tags.is_empty(), "{a:?} on an excluded host");
            prop_assert!(
                h.allow_new_session || h.drained_by == Some(DrainedBy::ScalingPlan),
                "{a:?} on an operator's drained host"
            );
        }
    }

    #[test]
    fn a7_a_phase_with_a_minimum_never_ends_without_an_open_host_when_one_was_open(
        (mut farm, p, threshold, minimum, _f) in case()
    ) {
        prop_assume!(minimum > 0);
        let was_open = open(&farm) > 0;
        let e = evaluate(&farm.view(), &phase(p, threshold, minimum), &PlanMemory::default(), 0);
        farm.apply(&e.actions);
        if was_open && e.figures.managed_hosts > 0 {
            prop_assert!(open(&farm) > 0, "{:?} left no open host", e.actions);
        }
    }

    #[test]
    fn a4_a5_same_input_same_output_and_no_action_repeated(
        (mut farm, p, threshold, minimum, force) in case()
    ) {
        let mut ph = phase(p, threshold, minimum);
        ph.force_logoff_users = force && p == Phase::RampDown;
        let e = evaluate(&farm.view(), &ph, &PlanMemory::default(), 0);
        let again = evaluate(&farm.view(), &ph, &PlanMemory::default(), 0);
        prop_assert_eq!(&e, &again);
        // The caller applies the actions; evaluating again at once must not
        // start, undrain, drain, notify or log off a host a second time.
        farm.apply(&e.actions);
        let next = evaluate(&farm.view(), &ph, &e.memory, 0);
        for a in &next.actions {
            let repeated = e.actions.iter().any(|b| b.session_host == a.session_host && b.action == a.action);
            prop_assert!(!repeated, "{a:?} again after {:?}", e.actions);
            prop_assert!(
                !(a.action == ActionKind::Start && e.actions.iter().any(|b| b.action == ActionKind::Stop)),
                "flapping: starts {a:?} after stopping in {:?}", e.actions
            );
        }
    }
}
