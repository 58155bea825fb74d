//! Each algorithm's cost per placement as a ratio to classic BreadthFirst
//! (B3), measured **interleaved**: the pools of every algorithm are built
//! side by side, then measured in turns of a fraction of a second, round
//! after round, and each round gives one ratio per algorithm. The median
//! of those ratios is the figure.
//!
//! Why not read the ratio off `placement.rs`'s criterion groups: each
//! algorithm is measured there for a few seconds, one after the other,
//! and on a shared two-core machine the same binary's figure moves by a
//! third from one minute to the next (neighbours competing for the
//! memory a 100,000-host pool lives in). Two figures taken a minute apart
//! give a ratio with that error; turns of 200 ms, alternated and repeated,
//! see the same machine.
//!
//! One step is the same as in `placement.rs` (the oldest session of a
//! window of users logs off, its user connects again). The order of the
//! turns alternates from round to round, so no algorithm always follows
//! the same one.
//!
//! ```text
//! cargo bench -p placement --bench interleaved                  # 10,000 and 100,000 hosts
//! cargo bench -p placement --bench interleaved -- 100000 30     # hosts, rounds
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

mod common;

use common::*;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How long one algorithm runs in one turn.
const TURN: Duration = Duration::from_millis(200);

/// Steps between two looks at the clock.
const BATCH: u32 = 256;

struct Subject {
    alg: Alg,
    pool: placement::Pool,
    window: Window,
    rng: u64,
    /// Nanoseconds per step, one per round.
    ns: Vec<f64>,
}

impl Subject {
    fn new(alg: Alg, hosts: usize) -> Subject {
        let mut s = Subject {
            alg,
            pool: engine_pool(hosts, alg),
            window: Window::new(hosts),
            rng: 0x9e37_79b9_7f4a_7c15,
            ns: Vec::new(),
        };
        // Fill the window, so that every measured step logs a session off.
        for _ in 0..s.window.users.len() {
            s.step();
        }
        s
    }

    fn step(&mut self) {
        let r = next_random(&mut self.rng);
        black_box(engine_step(&mut self.pool, &mut self.window, r));
    }

    /// Runs steps for about `time`; answers nanoseconds per step.
    fn turn(&mut self, time: Duration) -> f64 {
        let start = Instant::now();
        let mut steps = 0u64;
        loop {
            for _ in 0..BATCH {
                self.step();
            }
            steps += u64::from(BATCH);
            let spent = start.elapsed();
            if spent >= time {
                return spent.as_nanos() as f64 / steps as f64;
            }
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn measure(hosts: usize, rounds: usize) {
    let mut subjects: Vec<Subject> = Alg::ALL.iter().map(|&a| Subject::new(a, hosts)).collect();
    for s in &mut subjects {
        s.turn(TURN);
    }
    for round in 0..rounds {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..subjects.len()).collect()
        } else {
            (0..subjects.len()).rev().collect()
        };
        for i in order {
            let ns = subjects[i].turn(TURN);
            subjects[i].ns.push(ns);
        }
    }
    let classic = subjects
        .iter()
        .position(|s| s.alg == Alg::Classic)
        .expect("classic BreadthFirst is measured");
    let base = subjects[classic].ns.clone();
    println!(
        "{hosts} hosts, {rounds} rounds of {} ms each:",
        TURN.as_millis()
    );
    println!(
        "  {:<24} {:>10} {:>12} {:>20}",
        "algorithm", "ns/step", "÷ classic", "ratio min..max"
    );
    for s in &subjects {
        let mut ratios: Vec<f64> = s.ns.iter().zip(&base).map(|(a, b)| a / b).collect();
        let mut ns = s.ns.clone();
        let (lo, hi) = ratios
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), &r| (lo.min(r), hi.max(r)));
        println!(
            "  {:<24} {:>10.0} {:>11.2}× {:>13.2}..{:.2}",
            s.alg.name(),
            median(&mut ns),
            median(&mut ratios),
            lo,
            hi
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; the numbers are ours.
    let numbers: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = match numbers.first() {
        Some(&hosts) => vec![hosts],
        None => vec![10_000, 100_000],
    };
    let rounds = numbers.get(1).copied().unwrap_or(20);
    for hosts in sizes {
        measure(hosts, rounds);
    }
}
