//! The nemesis's faults, one or two at a time, drawn from a seeded
//! generator: the same seed gives the same sequence of faults (kinds,
//! whether the leader or which follower is hit, how long, how slow).
//! Kinds are dealt from a shuffled deck of all of them, so every kind
//! comes up once before any comes up twice.
//!
//! Every fault is healed after its hold; then the cluster gets a bounded
//! time to serve again ([`Brokers::serving`]: one leader that every
//! replica follows, and a new user placed through each replica). A
//! cluster that does not recover within it breaks rule L1.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use rand::rngs::Xoshiro256PlusPlus;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};

use super::brokers::{Brokers, REPLICAS};
use super::history::History;
use super::pg::Cluster;
use super::relay::{Mode, Relay};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    KillLeader,
    KillFollower,
    /// Frozen for longer than the lease: replaced.
    StopLeaderLong,
    /// Frozen for less than the lease: keeps the lead.
    StopLeaderShort,
    StopFollower,
    PgRestartFast,
    PgRestartImmediate,
    DbCut,
    DbPartition,
    DbDelay,
    DbStall,
    /// The links open now stall, new ones pass (a half-dead link).
    DbStallOpen,
    AdvCut,
    AdvPartition,
    AdvDelay,
    AdvStall,
    AdvStallOpen,
}

/// How many kinds of fault there are: a deck.
pub const KINDS: usize = 17;

const ALL: [Kind; KINDS] = [
    Kind::KillLeader,
    Kind::KillFollower,
    Kind::StopLeaderLong,
    Kind::StopLeaderShort,
    Kind::StopFollower,
    Kind::PgRestartFast,
    Kind::PgRestartImmediate,
    Kind::DbCut,
    Kind::DbPartition,
    Kind::DbDelay,
    Kind::DbStall,
    Kind::DbStallOpen,
    Kind::AdvCut,
    Kind::AdvPartition,
    Kind::AdvDelay,
    Kind::AdvStall,
    Kind::AdvStallOpen,
];

/// What a fault acts on, so that two faults of one step never act on the
/// same thing (two signals to one process, two modes of one relay).
#[derive(PartialEq, Eq)]
enum Class {
    Process,
    Database,
    DbRelay,
    AdvRelay,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::KillLeader => "kill -9 leader",
            Kind::KillFollower => "kill -9 follower",
            Kind::StopLeaderLong => "SIGSTOP leader > lease",
            Kind::StopLeaderShort => "SIGSTOP leader < lease",
            Kind::StopFollower => "SIGSTOP follower",
            Kind::PgRestartFast => "postgres stop -m fast",
            Kind::PgRestartImmediate => "postgres stop -m immediate",
            Kind::DbCut => "db relay: cut",
            Kind::DbPartition => "db relay: partition",
            Kind::DbDelay => "db relay: delay",
            Kind::DbStall => "db relay: stall",
            Kind::DbStallOpen => "db relay: stall open links",
            Kind::AdvCut => "adv relay: cut",
            Kind::AdvPartition => "adv relay: partition",
            Kind::AdvDelay => "adv relay: delay",
            Kind::AdvStall => "adv relay: stall",
            Kind::AdvStallOpen => "adv relay: stall open links",
        }
    }

    fn class(self) -> Class {
        match self {
            Kind::KillLeader
            | Kind::KillFollower
            | Kind::StopLeaderLong
            | Kind::StopLeaderShort
            | Kind::StopFollower => Class::Process,
            Kind::PgRestartFast | Kind::PgRestartImmediate => Class::Database,
            Kind::DbCut | Kind::DbPartition | Kind::DbDelay | Kind::DbStall | Kind::DbStallOpen => {
                Class::DbRelay
            }
            Kind::AdvCut
            | Kind::AdvPartition
            | Kind::AdvDelay
            | Kind::AdvStall
            | Kind::AdvStallOpen => Class::AdvRelay,
        }
    }

    /// Whether it always hits the leader, always a follower, or either.
    fn on_leader(self) -> Option<bool> {
        match self {
            Kind::KillLeader | Kind::StopLeaderLong | Kind::StopLeaderShort => Some(true),
            Kind::KillFollower | Kind::StopFollower => Some(false),
            _ => None,
        }
    }
}

/// One planned fault.
#[derive(Clone, Debug)]
pub struct Fault {
    pub kind: Kind,
    /// Hits the leader (else the follower `follower`, 0 or 1).
    on_leader: bool,
    follower: usize,
    /// How long it lasts before it is healed (a kill: how long the
    /// replica stays down).
    hold: Duration,
    /// A delay fault's delay of each chunk.
    delay: Duration,
    /// How long after the step's start it is injected.
    offset: Duration,
}

/// The seeded sequence of fault steps.
pub struct Plan {
    rng: Xoshiro256PlusPlus,
    deck: Vec<Kind>,
    lease: Duration,
}

impl Plan {
    pub fn new(seed: u64, lease: Duration) -> Plan {
        Plan {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            deck: Vec::new(),
            lease,
        }
    }

    fn deal(&mut self) -> Kind {
        if self.deck.is_empty() {
            self.deck = ALL.to_vec();
            self.deck.shuffle(&mut self.rng);
        }
        self.deck.pop().expect("a full deck")
    }

    /// The next step: one fault, sometimes two at once (of different
    /// classes), and the quiet pause after it. A fault that stops the
    /// leader while it runs comes alone, so that rule L1's bound applies
    /// to it.
    pub fn next_step(&mut self) -> (Vec<Fault>, Duration) {
        let first = self.deal();
        let mut faults = vec![self.fault(first, false)];
        if !faults[0].stops_the_leader()
            && self.rng.random_bool(0.3)
            && let Some(i) = self
                .deck
                .iter()
                .rposition(|k| k.class() != first.class() && *k != Kind::StopLeaderLong)
        {
            let second = self.deck.remove(i);
            let mut second = self.fault(second, true);
            // Nor does one come second: it hits a follower instead.
            if second.stops_the_leader() {
                second.on_leader = false;
            }
            faults.push(second);
        }
        let quiet = Duration::from_millis(self.rng.random_range(300..1500));
        (faults, quiet)
    }

    fn fault(&mut self, kind: Kind, second: bool) -> Fault {
        let lease = self.lease;
        let mut between = |lo: f64, hi: f64| lease.mul_f64(self.rng.random_range(lo..hi));
        let hold = match kind {
            Kind::KillLeader | Kind::KillFollower => between(0.1, 1.5),
            Kind::StopLeaderLong => between(2.0, 5.0),
            Kind::StopLeaderShort => between(0.1, 0.6),
            Kind::StopFollower => between(0.2, 3.0),
            Kind::PgRestartFast | Kind::PgRestartImmediate => between(0.0, 2.0),
            Kind::DbCut | Kind::AdvCut => Duration::ZERO,
            Kind::DbPartition | Kind::DbStall => between(0.3, 4.0),
            Kind::AdvPartition | Kind::AdvStall => between(0.3, 2.5),
            Kind::DbStallOpen => between(2.0, 6.0),
            Kind::AdvStallOpen => between(1.0, 4.0),
            Kind::DbDelay | Kind::AdvDelay => between(1.0, 3.0),
        };
        let delay = Duration::from_millis(self.rng.random_range(50..1500));
        let offset = if second {
            lease.mul_f64(self.rng.random_range(0.0..0.5))
        } else {
            Duration::ZERO
        };
        Fault {
            kind,
            on_leader: kind
                .on_leader()
                .unwrap_or_else(|| self.rng.random_bool(0.5)),
            follower: self.rng.random_range(0..REPLICAS - 1),
            hold,
            delay,
            offset,
        }
    }
}

/// What the faults act on.
pub struct Nemesis {
    pub brokers: Arc<Brokers>,
    pub cluster: Arc<Cluster>,
    pub history: Arc<History>,
    /// How long the cluster may take to serve again after a step is healed.
    pub recovery: Duration,
    /// Count of the probes' users, so each probe places a new one.
    pub probes: u64,
    /// The steps that stopped the leader alone (rule L1's cases).
    pub leader_outages: Vec<LeaderOutage>,
}

/// A step whose only fault kept the leader from making progress while it
/// still ran: frozen, or its database link partitioned, stalled or
/// half-dead. Rule L1: another replica decides within a bound.
#[derive(Clone, Debug)]
pub struct LeaderOutage {
    pub step: usize,
    pub what: String,
    pub injected: Duration,
    pub healed: Duration,
}

impl Nemesis {
    /// Injects the step's faults (each after its offset), heals each after
    /// its hold, then waits for the cluster to serve. Answers the new
    /// leader's slot, or why the cluster did not recover.
    pub async fn run_step(
        &mut self,
        step: usize,
        faults: &[Fault],
        leader: usize,
    ) -> Result<usize, String> {
        let followers: Vec<usize> = (0..REPLICAS).filter(|&s| s != leader).collect();
        let mut runs = Vec::new();
        for f in faults {
            let slot = if f.on_leader {
                leader
            } else {
                followers[f.follower]
            };
            let (brokers, cluster, history) = (
                self.brokers.clone(),
                self.cluster.clone(),
                self.history.clone(),
            );
            let f = f.clone();
            let recovery = self.recovery;
            runs.push(tokio::spawn(async move {
                tokio::time::sleep(f.offset).await;
                inject(&f, slot, step, &brokers, &cluster, &history, recovery).await
            }));
        }
        let mut failures = Vec::new();
        for (run, f) in runs.into_iter().zip(faults) {
            match run.await.map_err(|e| e.to_string()).and_then(|r| r) {
                Err(e) => failures.push(e),
                Ok((injected, healed)) => {
                    if faults.len() == 1 && f.stops_the_leader() {
                        self.leader_outages.push(LeaderOutage {
                            step,
                            what: format!("{} on r{leader}", f.kind.name()),
                            injected,
                            healed,
                        });
                    }
                }
            }
        }
        if !failures.is_empty() {
            let why = failures.join("; ");
            self.history.event(step, format!("did not heal: {why}"));
            return Err(why);
        }
        self.serving(step, true).await
    }

    /// Waits for the cluster to serve (see [`Brokers::serving`]; without
    /// `probe`, only `/healthz` is asked), for at most `recovery`.
    /// Answers the leader's slot, or why the cluster did not recover.
    pub async fn serving(&mut self, step: usize, probe: bool) -> Result<usize, String> {
        let healed = Instant::now();
        let mut last = String::new();
        while healed.elapsed() < self.recovery {
            let probes = probe.then_some(&mut self.probes);
            match self.brokers.serving(&self.history, probes).await {
                Ok(leader) => {
                    let epoch = self
                        .brokers
                        .health(leader)
                        .await
                        .and_then(|h| h.epoch)
                        .map_or("?".into(), |e| e.to_string());
                    self.history.event(
                        step,
                        format!(
                            "serving {:.3}s after healing: r{leader} leads, epoch {epoch}",
                            healed.elapsed().as_secs_f64()
                        ),
                    );
                    return Ok(leader);
                }
                Err(e) => last = e,
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let why = format!(
            "the cluster did not serve again within {:?} of healing: {last}",
            self.recovery
        );
        self.history.event(step, why.clone());
        Err(why)
    }
}

impl Fault {
    /// Whether it keeps the leader from deciding without killing it.
    fn stops_the_leader(&self) -> bool {
        self.on_leader
            && matches!(
                self.kind,
                Kind::StopLeaderLong | Kind::DbPartition | Kind::DbStall | Kind::DbStallOpen
            )
    }
}

/// One fault: inject, hold, heal. Answers when the fault took effect and
/// when it was healed; errors only when it cannot heal.
async fn inject(
    f: &Fault,
    slot: usize,
    step: usize,
    brokers: &Brokers,
    cluster: &Arc<Cluster>,
    history: &History,
    recovery: Duration,
) -> Result<(Duration, Duration), String> {
    let target = match f.kind.class() {
        Class::Database => "the database".to_string(),
        _ => format!(
            "r{slot} ({})",
            if f.on_leader { "leader" } else { "follower" }
        ),
    };
    let detail = match f.kind {
        Kind::DbDelay | Kind::AdvDelay => format!(", {} ms a chunk", f.delay.as_millis()),
        _ => String::new(),
    };
    history.event(
        step,
        format!(
            "inject {} on {target} for {:.3}s{detail}",
            f.kind.name(),
            f.hold.as_secs_f64()
        ),
    );
    let relay = |class: Class| relay_of(brokers, slot, class);
    // When the fault took effect.
    let injected;
    match f.kind {
        Kind::KillLeader | Kind::KillFollower => {
            brokers.kill(slot).await;
            injected = history.now();
            tokio::time::sleep(f.hold).await;
            history.event(step, format!("restart r{slot}"));
            brokers
                .restart(slot, Instant::now() + recovery)
                .await
                .map_err(|e| format!("r{slot} did not start again: {e}"))?;
        }
        Kind::StopLeaderLong | Kind::StopLeaderShort | Kind::StopFollower => {
            brokers.signal(slot, Signal::SIGSTOP).await;
            injected = history.now();
            tokio::time::sleep(f.hold).await;
            brokers.signal(slot, Signal::SIGCONT).await;
        }
        Kind::PgRestartFast | Kind::PgRestartImmediate => {
            let mode = if f.kind == Kind::PgRestartFast {
                "fast"
            } else {
                "immediate"
            };
            let c = cluster.clone();
            tokio::task::spawn_blocking(move || c.stop_server(mode))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("pg_ctl stop: {e}"))?;
            history.event(step, "postgres stopped");
            injected = history.now();
            tokio::time::sleep(f.hold).await;
            let c = cluster.clone();
            tokio::task::spawn_blocking(move || c.start_server())
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("pg_ctl start: {e}"))?;
        }
        Kind::DbCut | Kind::AdvCut => {
            relay(f.kind.class()).cut();
            injected = history.now();
        }
        Kind::DbPartition | Kind::AdvPartition => {
            relay(f.kind.class()).partition();
            injected = history.now();
            tokio::time::sleep(f.hold).await;
        }
        Kind::DbDelay | Kind::AdvDelay => {
            relay(f.kind.class()).set_mode(Mode::Delay(f.delay));
            injected = history.now();
            tokio::time::sleep(f.hold).await;
        }
        Kind::DbStall | Kind::AdvStall => {
            relay(f.kind.class()).set_mode(Mode::Stall);
            injected = history.now();
            tokio::time::sleep(f.hold).await;
        }
        Kind::DbStallOpen | Kind::AdvStallOpen => {
            relay(f.kind.class()).stall_open();
            injected = history.now();
            tokio::time::sleep(f.hold).await;
        }
    }
    if matches!(f.kind.class(), Class::DbRelay | Class::AdvRelay) {
        relay(f.kind.class()).heal();
    }
    let healed = history.now();
    history.event(step, format!("healed {} on {target}", f.kind.name()));
    Ok((injected, healed))
}

fn relay_of(brokers: &Brokers, slot: usize, class: Class) -> &Relay {
    if class == Class::DbRelay {
        &brokers.slots[slot].db_relay
    } else {
        &brokers.slots[slot].adv_relay
    }
}
