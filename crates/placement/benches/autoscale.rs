//! Criterion benchmarks of one scaling-plan evaluation (rule A3–A7) over
//! large pools, against a baseline measured in the same run: cloning the
//! view (one pass over the hosts, the least any evaluation must cost).
//!
//! Pools: hosts under a limit of 16 with 0 to 8 sessions, every 3rd host
//! stopped, every 10th drained by the plan, every 50th excluded, every
//! 100th drained by an operator. Two phases: a low threshold that makes
//! the plan start every stopped host (scale out), and a high one that
//! makes it drain or stop most running hosts (scale in, which sorts the
//! candidates), with and without ramp-down's force logoff (a notification
//! and a memory entry per drained host). Also the cost of building the view from an engine `Pool`
//! with 4 sessions per host on average.
//!
//! `cargo bench -p placement --bench autoscale` runs it in about a minute.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use placement::autoscale::{
    Phase, PlanMemory, ResolvedPhase, ScalingHost, ScalingView, StopHostsWhen, evaluate,
};
use placement::{
    DrainedBy, HostPoolType, HostPower, HostSpec, LoadBalancerType, Pool, PoolConfig, PowerState,
    Session, SessionState,
};

const SIZES: [usize; 2] = [10_000, 100_000];
const LIMIT: u32 = 16;
const NOW_MS: i64 = 1_700_000_000_000;

struct Owned {
    names: Vec<String>,
    tag: Vec<String>,
    rdp: Vec<String>,
}

fn owned(n: usize) -> Owned {
    Owned {
        names: (0..n).map(|i| format!("host-{i:06}")).collect(),
        tag: vec!["no-autoscale".into()],
        rdp: vec!["rdp".into()],
    }
}

fn view(o: &Owned) -> ScalingView<'_> {
    let hosts = o
        .names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let stopped = i % 3 == 0;
            let drained_by = if i % 100 == 0 {
                Some(DrainedBy::Operator)
            } else if i % 10 == 0 {
                Some(DrainedBy::ScalingPlan)
            } else {
                None
            };
            let sessions = if stopped { 0 } else { (i % 9) as u32 };
            ScalingHost {
                name,
                power_state: if stopped {
                    PowerState::Stopped
                } else {
                    PowerState::Running
                },
                available: true,
                allow_new_session: drained_by.is_none(),
                drained_by,
                tags: if i % 50 == 0 { &o.tag } else { &[] },
                capabilities: &o.rdp,
                assigned_user: None,
                sessions,
                active_sessions: sessions / 2,
            }
        })
        .collect();
    ScalingView {
        max_session_limit: LIMIT,
        hosts,
    }
}

fn phase(threshold: u32) -> ResolvedPhase {
    ResolvedPhase {
        schedule: "weekdays".into(),
        phase: Phase::RampDown,
        started_at_ms: NOW_MS,
        next_phase_at_ms: NOW_MS + 3_600_000,
        load_balancing_algorithm: LoadBalancerType::DepthFirst,
        capacity_threshold_pct: threshold,
        minimum_hosts_pct: 10,
        stop_hosts_when: StopHostsWhen::ZeroActiveSessions,
        force_logoff_users: true,
        wait_time_minutes: 30,
        notification_message: "Please save your work and log off.".into(),
        exclusion_tag: Some("no-autoscale".into()),
    }
}

fn pool(n: usize) -> Pool {
    let mut c = PoolConfig::new(
        "bench",
        HostPoolType::Pooled,
        LoadBalancerType::BreadthFirst,
    );
    c.max_session_limit = LIMIT;
    let mut p = Pool::new(c, 1, NOW_MS);
    for i in 0..n {
        p.upsert_host(
            HostSpec::new(&format!("host-{i:06}"), "10.0.0.1:3389"),
            NOW_MS,
        )
        .unwrap();
    }
    let sessions: Vec<Session> = (0..n)
        .flat_map(|i| (0..(i % 9)).map(move |k| (i, k)))
        .map(|(i, k)| Session {
            id: format!("s-{i}-{k}"),
            host: format!("host-{i:06}"),
            user: format!("u-{i}-{k}@contoso.com"),
            state: if k % 2 == 0 {
                SessionState::Active
            } else {
                SessionState::Disconnected
            },
            create_time_ms: NOW_MS,
            state_since_ms: NOW_MS,
            awaiting_logon: false,
        })
        .collect();
    let hosts: Vec<_> = p.hosts().cloned().collect();
    Pool::restore(p.config().clone(), p.counters(), hosts, sessions, NOW_MS)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("autoscale");
    g.sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    for n in SIZES {
        let o = owned(n);
        let v = view(&o);
        let memory = PlanMemory::default();
        // Sanity: both phases do work.
        let out = evaluate(&v, &phase(10), &memory, NOW_MS);
        assert!(out.actions.len() > n / 10, "scale out starts hosts");
        let inn = evaluate(&v, &phase(100), &memory, NOW_MS);
        assert!(inn.actions.len() > n / 10, "scale in drains hosts");
        g.bench_with_input(BenchmarkId::new("baseline-clone-view", n), &v, |b, v| {
            b.iter(|| black_box(v.clone()))
        });
        g.bench_with_input(BenchmarkId::new("evaluate-scale-out", n), &v, |b, v| {
            let p = phase(10);
            b.iter(|| black_box(evaluate(v, &p, &memory, NOW_MS)))
        });
        g.bench_with_input(BenchmarkId::new("evaluate-scale-in", n), &v, |b, v| {
            let p = phase(100);
            b.iter(|| black_box(evaluate(v, &p, &memory, NOW_MS)))
        });
        g.bench_with_input(
            BenchmarkId::new("evaluate-scale-in-no-force-logoff", n),
            &v,
            |b, v| {
                let mut p = phase(100);
                p.force_logoff_users = false;
                b.iter(|| black_box(evaluate(v, &p, &memory, NOW_MS)))
            },
        );
        let engine = pool(n);
        g.bench_with_input(BenchmarkId::new("pool-scaling-view", n), &engine, |b, e| {
            b.iter(|| {
                black_box(e.scaling_view(|_| HostPower {
                    power_state: PowerState::Running,
                    drained_by: None,
                    tags: &[],
                }))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
