//! Rule L3: the replica set under a nemesis, Jepsen-style. Three replicas
//! of the real binary run on a PostgreSQL cluster of the test's own (it is
//! restarted), each reaching the database through a TCP relay and
//! reached by the other replicas through another ([`relay`]), while a few
//! clients send a mixed load of connects, logoffs, heartbeats and drains
//! ([`load`]) and record each operation with its start, end and outcome
//! ([`history`]). Meanwhile the nemesis injects faults one or two at a
//! time ([`faults`]): `kill -9` and restart of the leader or a follower,
//! SIGSTOP/SIGCONT of the leader (longer and shorter than the lease) and
//! of a follower, PostgreSQL stopped (`-m fast`, `-m immediate`) and
//! started again, and cuts, partitions, delays and stalls (of every
//! connection, or only of those open, as a half-dead link does) of one
//! replica's database link or of the link the others forward to it
//! through. After each it heals everything and gives the cluster a
//! bounded time to serve again. A checker ([`checker`]) then reads the
//! whole history, the observations of every replica's `/healthz` and of
//! the database during the run ([`observe`]), and the database at the end:
//! nothing acknowledged lost, S1 never split or answered from a session
//! already logged off, at most one session per user, no limit exceeded,
//! epochs only going up, and a leader stopped while it runs (frozen, or
//! its database link broken) replaced within a bound (rule L1). It prints a summary (operations, faults by kind,
//! violations, the longest time without a successful connect per fault
//! kind) and fails listing every violation with the seed that reproduces
//! the run.
//!
//! Knobs (environment variables):
//! - `DESKBROKER_NEMESIS_SEED` (decimal or `0x…`; default fixed): seeds
//!   the fault schedule and each client's sequence of operations. The same
//!   seed gives the same faults in the same order and the same requests
//!   from each client; the interleaving, and so the exact history, still
//!   depends on timing.
//! - `DESKBROKER_NEMESIS_OPS` (default 10,000) and
//!   `DESKBROKER_NEMESIS_FAULTS` (default 30): the run goes on, fault
//!   after fault, until both are reached.
//! - `DESKBROKER_NEMESIS_LEASE` (seconds, default 3): the replicas'
//!   `--leader-lease`; short, so that a run takes minutes.
//! - `DESKBROKER_NEMESIS_LONG=1`: a soak of 100,000 operations (unless
//!   `DESKBROKER_NEMESIS_OPS` says otherwise).
//! - `DESKBROKER_NEMESIS_VERBOSE=1`: print the nemesis's steps as they
//!   happen; `DESKBROKER_NEMESIS_LOG`: the replicas' `RUST_LOG` (default
//!   `warn,broker::replica=info`).
//!
//! Every run keeps its work directory under the test target's temporary
//! directory while it runs (the replicas' logs `rN.log`, the history
//! `history.txt`); it is deleted after a passing run and kept after a
//! failing one, whose message says where.
//!
//! Needs a PostgreSQL server's programs installed (initdb, pg_ctl):
//! `scripts/install-test-deps.sh` installs Debian's `postgresql`.

mod brokers;
mod checker;
mod faults;
mod history;
mod load;
mod observe;
mod pg;
mod relay;

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use brokers::Brokers;
use checker::{StepSpan, Violation};
use faults::{Nemesis, Plan};
use history::{History, Op, Outcome};
use load::Load;
use observe::{DbState, Observer};
use pg::Cluster;

const DEFAULT_SEED: u64 = 0x5EED_0001;
/// Load clients at once, and the mean time between two requests of each:
/// about 70 requests a second in all, which three replicas and PostgreSQL
/// serve on two cores with room for the faults' restarts.
const CLIENTS: usize = 4;
const GAP: Duration = Duration::from_millis(55);
/// The database the replicas share.
const DATABASE: &str = "nemesis";

/// Rule L1's bound with this lease: a leader that stops deciding while it
/// runs is replaced, and a write acknowledged, within twice the lease and
/// 5 s (the lease runs out, a follower's campaign notices within a second,
/// it loads the state; the rest is slack for a machine the whole test
/// suite loads at once).
fn replaced_within(lease: Duration) -> Duration {
    lease * 2 + Duration::from_secs(5)
}

struct Knobs {
    seed: u64,
    ops: usize,
    faults: usize,
    lease: Duration,
    /// A bound on the whole run, so that a cluster that keeps recovering
    /// but never serves enough load cannot run for ever.
    run_limit: Duration,
}

fn env_number(name: &str) -> Option<u64> {
    let raw = std::env::var(name).ok()?;
    let raw = raw.trim().replace('_', "");
    let parsed = match raw.strip_prefix("0x").or_else(|| raw.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => raw.parse(),
    };
    Some(parsed.unwrap_or_else(|e| panic!("{name}={raw:?}: {e}")))
}

impl Knobs {
    fn from_env() -> Knobs {
        let long = std::env::var("DESKBROKER_NEMESIS_LONG").is_ok_and(|v| v == "1");
        let lease_seconds = env_number("DESKBROKER_NEMESIS_LEASE").unwrap_or(3);
        assert!(
            (2..=600).contains(&lease_seconds),
            "DESKBROKER_NEMESIS_LEASE is 2 to 600 seconds, as serve --leader-lease"
        );
        Knobs {
            seed: env_number("DESKBROKER_NEMESIS_SEED").unwrap_or(DEFAULT_SEED),
            ops: env_number("DESKBROKER_NEMESIS_OPS").unwrap_or(if long { 100_000 } else { 10_000 })
                as usize,
            faults: env_number("DESKBROKER_NEMESIS_FAULTS").unwrap_or(30) as usize,
            lease: Duration::from_secs(lease_seconds),
            run_limit: Duration::from_secs(if long { 6 * 3600 } else { 45 * 60 }),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_under_faults_keep_every_rule() {
    // reqwest's TLS needs a process-wide crypto provider, even for plain
    // HTTP clients (see api::tls::install_default_provider).
    ::api::tls::install_default_provider();
    let knobs = Knobs::from_env();
    let seed = knobs.seed;
    eprintln!(
        "nemesis: seed {seed:#x}, lease {}s, until {} operations and {} faults",
        knobs.lease.as_secs(),
        knobs.ops,
        knobs.faults
    );
    let cluster = Arc::new(Cluster::start());
    cluster.create_database(DATABASE).await;
    let work = tempfile::Builder::new()
        .prefix("nemesis-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("a work directory");
    let history = Arc::new(History::new());
    let brokers = Arc::new(
        Brokers::start(
            work.path(),
            &cluster.addr(),
            DATABASE,
            knobs.lease.as_secs(),
        )
        .await,
    );
    let mut nemesis = Nemesis {
        brokers: brokers.clone(),
        cluster: cluster.clone(),
        history: history.clone(),
        recovery: knobs.lease * 10 + Duration::from_secs(15),
        probes: 0,
        leader_outages: Vec::new(),
    };
    let logs = |brokers: &Brokers| -> String {
        (0..brokers::REPLICAS)
            .map(|r| format!("\nr{r}'s log ends:\n{}", pg::tail(&brokers.log_path(r), 20)))
            .collect()
    };
    let leader = nemesis
        .serving(0, false)
        .await
        .unwrap_or_else(|e| panic!("the replicas did not elect a leader: {e}{}", logs(&brokers)));
    {
        let follower = brokers.slots[(leader + 1) % brokers::REPLICAS]
            .app
            .lock()
            .await;
        load::setup(follower.as_ref().expect("running")).await;
    }
    let mut leader = nemesis
        .serving(0, true)
        .await
        .unwrap_or_else(|e| panic!("the replicas do not serve: {e}{}", logs(&brokers)));

    let observer = Observer::start(
        brokers.directory.clone(),
        cluster.url(DATABASE),
        history.clone(),
    );
    let load = Load::start(
        seed,
        CLIENTS,
        GAP,
        brokers.directory.clone(),
        history.clone(),
    );
    let mut plan = Plan::new(seed, knobs.lease);
    let mut steps: Vec<StepSpan> = Vec::new();
    let mut faults_by_kind: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut fault_count = 0;
    let mut failures: Vec<Violation> = Vec::new();
    let started = Instant::now();
    while fault_count < knobs.faults || load.ops() < knobs.ops {
        if started.elapsed() > knobs.run_limit {
            failures.push(Violation {
                rule: "run",
                what: format!(
                    "only {} operations and {fault_count} faults within {:?}",
                    load.ops(),
                    knobs.run_limit
                ),
                ops: vec![],
            });
            break;
        }
        let (faults, quiet) = plan.next_step();
        let step = steps.len() + 1;
        steps.push(StepSpan {
            start: history.now(),
            kinds: faults.iter().map(|f| f.kind.name()).collect(),
        });
        for f in &faults {
            *faults_by_kind.entry(f.kind.name()).or_default() += 1;
        }
        fault_count += faults.len();
        match nemesis.run_step(step, &faults, leader).await {
            Ok(l) => leader = l,
            Err(e) => {
                failures.push(Violation {
                    rule: "L1",
                    what: format!("step {step}: {e}"),
                    ops: vec![],
                });
                break;
            }
        }
        if step.is_multiple_of(10) {
            eprintln!(
                "nemesis: {step} steps, {fault_count} faults, {} operations, {:.0}s",
                load.ops(),
                started.elapsed().as_secs_f64()
            );
        }
        tokio::time::sleep(quiet).await;
    }
    load.stop().await;
    let end = history.now();
    let observations = observer.stop().await;
    let db = final_state(&cluster.url(DATABASE)).await;

    let ops = history.ops();
    let events = history.events();
    let mut violations = failures;
    violations.extend(checker::check_history(&ops));
    violations.extend(checker::check_final(&ops, &db));
    for mut v in checker::check_db(&db) {
        v.what = format!("at the end: {}", v.what);
        violations.push(v);
    }
    violations.extend(observations.violations.iter().cloned());
    violations.extend(checker::check_epochs(&observations));
    violations.extend(checker::check_replaced(
        &ops,
        &nemesis.leader_outages,
        replaced_within(knobs.lease),
    ));
    violations.extend(checker::check_exercised(&ops, &observations, fault_count));

    let elections = observations
        .db_epochs
        .first()
        .zip(observations.db_epochs.last())
        .map_or(0, |(a, b)| b.1 - a.1);
    let mut summary = summary(&ops, &steps, &faults_by_kind, end);
    let _ = writeln!(
        summary,
        "{} checkpoints of the database, {} /healthz answers, {elections} elections \
         (epoch {:?} at the end), {} sessions in the database at the end",
        observations.checkpoints,
        observations.health.len(),
        db.epoch,
        db.sessions.len()
    );
    let bound = replaced_within(knobs.lease);
    let waits = checker::time_to_write(&ops, &nemesis.leader_outages);
    let _ = write!(
        summary,
        "rule L1: {} steps stopped the leader alone ({} for longer than {bound:?}); \
         from each to the first write acknowledged after it:",
        waits.len(),
        nemesis
            .leader_outages
            .iter()
            .filter(|o| o.healed - o.injected >= bound)
            .count()
    );
    for (outage, wait) in nemesis.leader_outages.iter().zip(&waits) {
        let _ = write!(
            summary,
            " {}{}",
            wait.map_or("none".into(), |w| format!("{:.2}s", w.as_secs_f64())),
            if outage.healed - outage.injected >= bound {
                "*"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(summary, " (* held longer than the bound)");
    let mut by_rule: BTreeMap<&str, usize> = BTreeMap::new();
    for v in &violations {
        *by_rule.entry(v.rule).or_default() += 1;
    }
    let _ = writeln!(summary, "violations: {} {by_rule:?}", violations.len());
    eprintln!("{summary}");

    let text = history::render(&ops, &events);
    let history_path = work.path().join("history.txt");
    std::fs::write(&history_path, &text).expect("write the history");
    if violations.is_empty() {
        return;
    }
    let kept = work.keep();
    let mut report = format!(
        "{} violation(s) under the nemesis, seed {seed:#x} (reproduce with \
         DESKBROKER_NEMESIS_SEED={seed:#x} cargo test -p deskbroker --test it nemesis); \
         history and replica logs in {}\n",
        violations.len(),
        kept.display()
    );
    for v in violations.iter().take(40) {
        let _ = writeln!(report, "\n[{}] {} (seed {seed:#x})", v.rule, v.what);
        let _ = write!(report, "{}", context(v, &ops, &events, knobs.lease));
    }
    if violations.len() > 40 {
        let _ = writeln!(report, "\n… and {} more", violations.len() - 40);
    }
    let _ = writeln!(report, "\nthe fault sequence of seed {seed:#x}:");
    for e in events
        .iter()
        .filter(|e| e.what.starts_with("inject") || e.what.contains("did not"))
    {
        let _ = writeln!(report, "{e}");
    }
    std::fs::write(kept.join("violations.txt"), &report).expect("write the report");
    panic!("{report}\n{summary}");
}

/// The database at the end (it was healed: a few tries at most).
async fn final_state(url: &str) -> DbState {
    crate::eventually(Duration::from_secs(60), || async {
        let mut client = observe::connect(url).await?;
        observe::read_db(&mut client).await
    })
    .await
    .unwrap_or_else(|last| panic!("cannot read the database at the end: {last}"))
}

/// The table printed after every run.
fn summary(
    ops: &[Op],
    steps: &[StepSpan],
    faults_by_kind: &BTreeMap<&'static str, usize>,
    end: Duration,
) -> String {
    let mut out = String::new();
    let mut by_req: BTreeMap<&str, [usize; 3]> = BTreeMap::new();
    for op in ops {
        let name = if op.client == history::PROBE_CLIENT {
            "probe"
        } else {
            op.req.name()
        };
        let column = match op.outcome {
            Outcome::Ok(_) => 0,
            Outcome::Failed { .. } => 1,
            Outcome::Unknown(_) => 2,
        };
        by_req.entry(name).or_default()[column] += 1;
    }
    let _ = writeln!(
        out,
        "nemesis: {} operations in {:.0}s, {} fault steps, {} faults",
        ops.len(),
        end.as_secs_f64(),
        steps.len(),
        faults_by_kind.values().sum::<usize>()
    );
    let _ = writeln!(
        out,
        "{:<12} {:>8} {:>8} {:>8}",
        "operation", "ok", "failed", "unknown"
    );
    for (name, [ok, failed, unknown]) in &by_req {
        let _ = writeln!(out, "{name:<12} {ok:>8} {failed:>8} {unknown:>8}");
    }
    let windows = checker::unavailability(ops, steps, end);
    let _ = writeln!(
        out,
        "{:<28} {:>6} {:>26} {:>8}",
        "fault", "count", "longest without a connect", "mean"
    );
    for (kind, count) in faults_by_kind {
        let (_, worst, mean) = windows.get(kind).copied().unwrap_or_default();
        let _ = writeln!(
            out,
            "{kind:<28} {count:>6} {:>25.2}s {:>7.2}s",
            worst.as_secs_f64(),
            mean.as_secs_f64()
        );
    }
    out
}

/// The operations that show a violation, and the nemesis's steps from a
/// little before the first of them to the last.
fn context(v: &Violation, ops: &[Op], events: &[history::Event], lease: Duration) -> String {
    let mut out = String::new();
    let shown: Vec<&Op> = v.ops.iter().filter_map(|&i| ops.get(i)).collect();
    let (Some(from), Some(to)) = (
        shown.iter().map(|o| o.start).min(),
        shown.iter().map(|o| o.end).max(),
    ) else {
        return out;
    };
    let from = from.saturating_sub(lease * 3);
    for e in events.iter().filter(|e| e.at >= from && e.at <= to) {
        let _ = writeln!(out, "{e}");
    }
    for o in shown {
        let _ = writeln!(out, "    {o}");
    }
    out
}
