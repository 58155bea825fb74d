//! Tests of the simulator, through its public API: same seed, same
//! result; its placements are the engine's for the same inputs; every
//! scenario's accounting adds up; traces are read strictly. Small runs
//! only, so the suite takes seconds.

mod autoscale;

use placement::{ConnectRequest, Pool};
use sim::{LoggedOp, Policy, ScenarioKind, SimConfig, Trace};

/// Users of the small runs.
const USERS: u64 = 240;

/// A run small enough for a debug build: 8 hosts, 240 users, a 6-minute
/// storm, metrics every minute (the day still lasts 14 hours).
fn small(kind: ScenarioKind, seed: u64) -> SimConfig {
    let mut c = SimConfig::new(kind, 8, USERS as u32, seed);
    c.storm_minutes = 6;
    c.sample_seconds = 60;
    c
}

fn kinds() -> Vec<ScenarioKind> {
    vec![
        ScenarioKind::Storm,
        ScenarioKind::Day,
        ScenarioKind::Failure,
    ]
}

#[test]
fn same_seed_same_report_byte_for_byte_other_seed_other_report() {
    for kind in kinds() {
        let cfg = small(kind.clone(), 11);
        let a = sim::run(&cfg, &Default::default()).unwrap().json();
        let b = sim::run(&cfg, &Default::default()).unwrap().json();
        assert_eq!(a, b, "{}: seed 11 twice", kind.name());
        let c = sim::run(&small(kind.clone(), 12), &Default::default())
            .unwrap()
            .json();
        assert_ne!(a, c, "{}: seeds 11 and 12", kind.name());
    }
}

/// Policies run on threads, the costliest first, and each keeps its own
/// pool, host model and random streams: a policy's result is the same
/// whichever policies run beside it, in whatever order the threads take
/// them, and the report lists them in the order asked.
#[test]
fn a_policys_result_does_not_depend_on_the_others_or_the_threads() {
    for kind in kinds() {
        let cfg = small(kind.clone(), 21);
        let all = sim::run(&cfg, &Default::default()).unwrap();
        let mut reversed_cfg = cfg.clone();
        reversed_cfg.policies.reverse();
        let reversed = sim::run(&reversed_cfg, &Default::default()).unwrap();
        for (i, policy) in cfg.policies.iter().enumerate() {
            let mut one = cfg.clone();
            one.policies = vec![*policy];
            let alone = sim::run(&one, &Default::default()).unwrap();
            let json = |r: &sim::PolicyResult| serde_json::to_string(r).unwrap();
            let what = format!("{} {}", kind.name(), policy.name());
            assert_eq!(all.results[i].policy, policy.name(), "{what}: order");
            assert_eq!(
                json(&all.results[i]),
                json(&alone.results[0]),
                "{what}: alone"
            );
            let j = cfg.policies.len() - 1 - i;
            assert_eq!(
                json(&all.results[i]),
                json(&reversed.results[j]),
                "{what}: reversed"
            );
        }
    }
}

/// Replays the engine operations of a run on a fresh pool, calling the
/// engine the plain way (`connect` with the recorded random value for the
/// sources' algorithms; `connect_picked` with the recorded host for the
/// references), and demands the same answer to every operation.
fn replay(ops: &[LoggedOp], config: placement::PoolConfig, seed: u64) -> usize {
    let mut pool = Pool::new(config, seed, sim::T0);
    let mut connects = 0;
    for (i, op) in ops.iter().enumerate() {
        match op {
            LoggedOp::Upsert(spec, now) => {
                pool.upsert_host(spec.clone(), *now).unwrap();
            }
            LoggedOp::Heartbeat(h, m, now) => pool.heartbeat(h, m.clone(), *now).unwrap(),
            LoggedOp::Tick(now) => pool.tick(*now),
            LoggedOp::SetState(id, s, now) => pool.set_session_state(id, *s, *now).unwrap(),
            LoggedOp::Logoff(id) => pool.logoff(id).unwrap(),
            LoggedOp::Remove(h) => pool.remove_host(h, true).unwrap(),
            LoggedOp::Connect {
                user,
                now_ms,
                random,
                session_id,
                picked,
                answer,
            } => {
                connects += 1;
                let req = ConnectRequest {
                    user,
                    ..ConnectRequest::default()
                };
                let got = match picked {
                    None => pool.connect(&req, *now_ms, *random, session_id),
                    Some(host) => pool.connect_picked(&req, *now_ms, session_id, |c| {
                        c.iter().find(|h| &h.spec.name == host).map(|h| h.seq)
                    }),
                };
                let got = got
                    .map(|p| (p.host, p.reconnect))
                    .map_err(|e| e.to_string());
                // A reference pick refused by the picker itself is a refusal
                // the engine explains the same way (S3).
                assert_eq!(&got, answer, "operation {i}: {op:?}");
            }
        }
        pool.take_changes();
    }
    connects
}

#[test]
fn the_simulators_placements_are_the_engines_for_the_same_inputs() {
    for kind in kinds() {
        for policy in Policy::ALL {
            let mut cfg = small(kind.clone(), 5);
            cfg.policies = vec![policy];
            cfg.record_ops = true;
            let (result, ops, config, seed) = sim::run_policy(&cfg, policy).unwrap();
            let connects = replay(&ops, config, seed);
            assert!(
                connects as u64 >= result.accounting.placed,
                "{} {}: {connects} connects replayed",
                kind.name(),
                policy.name()
            );
            assert!(result.accounting.placed > 0);
        }
    }
}

#[test]
fn every_scenarios_accounting_adds_up() {
    for kind in kinds() {
        let report = sim::run(&small(kind.clone(), 3), &Default::default()).unwrap();
        for r in &report.results {
            let a = &r.accounting;
            let what = format!("{} {}: {a:?}", kind.name(), r.policy);
            // The run checks these itself and fails otherwise; the test
            // states them once more where a reader looks.
            assert_eq!(
                a.placed,
                a.logged_off
                    + a.ended_by_failure
                    + a.released_unreachable
                    + a.expired
                    + a.live_at_end,
                "{what}"
            );
            assert_eq!(a.new_session_attempts, a.placed + r.rejected, "{what}");
            match kind {
                ScenarioKind::Storm => {
                    assert_eq!(a.placed + r.rejected, USERS, "one logon per user: {what}");
                    assert_eq!(a.live_at_end, a.placed, "{what}");
                    assert_eq!(a.logons_completed, a.placed, "{what}");
                }
                ScenarioKind::Failure => {
                    assert!(a.ended_by_failure > 0, "a host failed: {what}");
                    assert!(r.failed_attempts > 0, "its users retried: {what}");
                    // Every user ends with a session: the ones whose host
                    // died got a new one.
                    assert_eq!(a.live_at_end + r.rejected, USERS, "{what}");
                }
                ScenarioKind::Day => {
                    assert!(a.reconnects > 0 && a.logged_off > 0, "{what}");
                    assert_eq!(a.placed, a.logged_off + a.live_at_end, "{what}");
                }
                ScenarioKind::Trace(_) => unreachable!(),
            }
        }
    }
}

#[test]
fn a_pool_too_small_rejects_and_still_adds_up() {
    let mut cfg = small(ScenarioKind::Storm, 1);
    cfg.max_session_limit = Some(10);
    let report = sim::run(&cfg, &Default::default()).unwrap();
    for r in &report.results {
        assert_eq!(
            r.rejected,
            USERS - 80,
            "8 hosts of 10 sessions: {}",
            r.policy
        );
        assert_eq!(r.accounting.placed, 80);
    }
}

#[test]
fn the_corrected_load_index_beats_plain_load_index_in_a_storm() {
    let mut cfg = SimConfig::new(ScenarioKind::Storm, 40, 2000, 9);
    cfg.storm_minutes = 15;
    cfg.policies = vec![Policy::LoadIndex, Policy::LoadIndexCorrected];
    let r = sim::run(&cfg, &Default::default()).unwrap();
    let (plain, corrected) = (&r.results[0], &r.results[1]);
    assert!(
        corrected.peak_cpu_percent < plain.peak_cpu_percent,
        "{} vs {}",
        corrected.peak_cpu_percent,
        plain.peak_cpu_percent
    );
    assert!(corrected.rejected <= plain.rejected);
}

#[test]
fn traces_are_read_strictly() {
    let ok = Trace::parse(
        "t",
        b"time,user,event\n# a comment\n0,alice,connect\n2.5,bob,logon\n1,Alice,disconnect\n",
    )
    .unwrap();
    assert_eq!(ok.users, ["alice", "bob"]);
    let times: Vec<i64> = ok.events.iter().map(|e| e.0).collect();
    assert_eq!(times, [0, 1000, 2500], "sorted by time");
    for (data, want) in [
        (&b"when,who,what\n0,a,connect\n"[..], "header"),
        (b"time,user,event\nsoon,a,connect\n", "line 2"),
        (b"time,user,event\n-1,a,connect\n", "line 2"),
        (b"time,user,event\n0,a b,connect\n", "line 2"),
        (b"time,user,event\n0,a,connect\n1,a,jump\n", "line 3"),
        (b"time,user,event\n0,a\n", "line 2"),
        (b"time,user,event\n", "no events"),
        (b"time,user,event\n1e9,a,connect\n", "line 2"),
    ] {
        let err = Trace::parse("t", data).unwrap_err();
        assert!(err.contains(want), "{err}");
    }
}

#[test]
fn bounds_and_policy_names_are_checked() {
    let mut c = SimConfig::new(ScenarioKind::Storm, 0, 10, 1);
    assert!(c.validate().unwrap_err().to_string().contains("--hosts"));
    c.hosts = 10;
    c.users = sim::MAX_USERS + 1;
    assert!(c.validate().unwrap_err().to_string().contains("--users"));
    assert!(Policy::parse_list("all").unwrap().len() == 9);
    assert!(Policy::parse_list("DepthFirst,DepthFirst").is_err());
    assert!(
        Policy::parse_list("Least-Connections")
            .unwrap()
            .contains(&Policy::LeastConnections)
    );
    assert!(
        Policy::parse_list("random")
            .unwrap_err()
            .contains("unknown policy")
    );
}

/// Policies are named as the API names algorithms (`loadBalancerType`),
/// the others in the same PascalCase; the simulator's former kebab-case
/// names are still accepted, in any case, and mean the same policy.
#[test]
fn policies_are_named_as_the_api_names_algorithms() {
    let api = [
        ("BreadthFirst", Policy::BreadthFirst),
        ("DepthFirst", Policy::DepthFirst),
        ("LoadIndex", Policy::LoadIndex),
    ];
    for (name, policy) in api {
        assert_eq!(policy.name(), name);
        assert_eq!(Policy::parse_list(name).unwrap(), [policy]);
    }
    let names: Vec<&str> = Policy::ALL.iter().map(|p| p.name()).collect();
    assert_eq!(
        names,
        [
            "BreadthFirst",
            "BreadthFirstClassic",
            "DepthFirst",
            "LoadIndex",
            "LeastConnections",
            "PowerOfTwo",
            "LeastLoadStale",
            "CitrixHorizontal",
            "LoadIndexCorrected",
        ]
    );
    let former = "breadth-first,breadth-first-classic,depth-first,load-index,\
                  least-connections,power-of-two,least-load-stale,citrix-horizontal,\
                  load-index-corrected";
    assert_eq!(Policy::parse_list(former).unwrap(), Policy::ALL);
    assert_eq!(
        Policy::parse_list("breadthfirst, LOAD-INDEX-CORRECTED").unwrap(),
        [Policy::BreadthFirst, Policy::LoadIndexCorrected]
    );
    // A name and its former name are the same policy.
    let twice = Policy::parse_list("LoadIndex,load-index").unwrap_err();
    assert!(twice.contains("LoadIndex is listed twice"), "{twice}");
    // The error lists the names, not the former ones.
    let err = Policy::parse_list("fastest").unwrap_err();
    assert!(err.contains("BreadthFirst, BreadthFirstClassic"), "{err}");
    assert!(!err.contains("breadth-first"), "{err}");
    // The report names policies the same way.
    let mut cfg = SimConfig::new(ScenarioKind::Storm, 2, 4, 1);
    cfg.storm_minutes = 1;
    cfg.policies = vec![Policy::LoadIndexCorrected, Policy::BreadthFirst];
    let report = sim::run(&cfg, &Default::default()).unwrap();
    let shown: Vec<&str> = report.results.iter().map(|r| r.policy.as_str()).collect();
    assert_eq!(shown, ["LoadIndexCorrected", "BreadthFirst"]);
    // Plots are SVG, whatever the case of the extension.
    assert!(sim::plot::check_path(std::path::Path::new("day.SVG")).is_ok());
    for bad in ["day.png", "day", "svg"] {
        let err = sim::plot::check_path(std::path::Path::new(bad)).unwrap_err();
        assert!(err.to_string().starts_with("--plot: "), "{err}");
    }
}
