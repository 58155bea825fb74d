//! What one commit of the broker's writer costs on the embedded store, on
//! disk, each shape against its baseline in the same run:
//!
//! - `marks`: a batch of the RDP front door's session marks (a session set
//!   `Active` or `Disconnected`: an upsert of its row) committed with its
//!   own flush (`Flush::Now`, how every batch was written before
//!   2026-12-03) against the same batch committed without waiting for it
//!   (`Flush::Soon`, how a batch of marks only is written now);
//! - `placements`: a batch of new sessions with their flush, the shape of
//!   a logon storm's batches, for scale, and the same unflushed: what the
//!   statements and WAL frames cost without the disk, with and without the
//!   audit entry a connect over the API writes with its session;
//! - `ends`: a batch of sessions' deletions (as a tick that expires a
//!   logon storm's Pending sessions writes it), unflushed, with and without
//!   the audit entry each end now writes with its deletion (its reason and
//!   the session as it was).
//!
//! The store holds one pool of 1,000 hosts and 20,000 sessions; each batch
//! touches sessions spread over the table, as a farm's marks do. The
//! directory is the system's temporary one: run with `TMPDIR` on a disk
//! (not tmpfs), or the flush costs nothing.
//!
//! `cargo bench -p store --bench commit`

use std::sync::Arc;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use placement::{PoolCounters, Session, SessionState};
use store::conformance::{audit_entry, host, pool, session};
use store::{ApplyBlocking, Flush, Mutation, SqliteStore, Store};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const HOSTS: usize = 1_000;
const SESSIONS: usize = 20_000;

/// A store with [`HOSTS`] hosts and [`SESSIONS`] sessions in pool `p`.
fn filled_store(dir: &std::path::Path) -> Arc<dyn ApplyBlocking> {
    let store = SqliteStore::open(dir).expect("open");
    let writer = store.blocking().expect("SQLite writes synchronously");
    let mut seed = vec![Mutation::PutPool {
        config: pool("p"),
        counters: PoolCounters::default(),
    }];
    seed.extend((0..HOSTS).map(|h| Mutation::PutHost {
        pool: "p".into(),
        host: host(&format!("h{h}"), h as u64 + 1),
    }));
    seed.extend((0..SESSIONS).map(|s| Mutation::PutSession {
        pool: "p".into(),
        session: session(
            &format!("s{s}"),
            &format!("h{}", s % HOSTS),
            &format!("u{s}"),
        ),
    }));
    writer.apply_blocking(&seed, Flush::Now).expect("seed");
    writer
}

/// The `n`th batch of `size` marks: sessions spread across the table,
/// other ones than the batch before, each with a new state and time (a
/// row rewritten with the bytes it has is no write at all for SQLite).
fn mark_batch(n: usize, size: usize) -> Vec<Mutation> {
    (0..size)
        .map(|i| {
            let s = (n * size + i) * 7_919 % SESSIONS;
            let mut marked = session(
                &format!("s{s}"),
                &format!("h{}", s % HOSTS),
                &format!("u{s}"),
            );
            marked.state = if n.is_multiple_of(2) {
                SessionState::Disconnected
            } else {
                SessionState::Active
            };
            marked.state_since_ms += n as i64;
            Mutation::PutSession {
                pool: "p".into(),
                session: marked,
            }
        })
        .collect()
}

fn marks(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer = filled_store(dir.path());
    let mut group = c.benchmark_group("marks");
    let mut n = 0;
    for size in [1, 8, 32] {
        group.throughput(Throughput::Elements(size as u64));
        for (name, flush) in [("flush-now", Flush::Now), ("flush-soon", Flush::Soon)] {
            group.bench_function(BenchmarkId::new(name, size), |b| {
                b.iter(|| {
                    n += 1;
                    writer
                        .apply_blocking(&mark_batch(n, size), flush)
                        .expect("commit");
                });
            });
        }
    }
    group.finish();
}

/// The audit entry of a connect over the API that placed `placed`, the
/// shape the broker writes (about 430 bytes of JSON).
fn connect_entry(placed: &Session) -> Mutation {
    let mut entry = audit_entry(placed.create_time_ms, "admin", Some("p"));
    entry.action = "POST /api/v1/hostPools/p/connect".into();
    entry.target = format!("hostPools/p/sessions/{}", placed.id);
    entry.before = None;
    entry.after = store::Rendered::of(placed);
    Mutation::AppendAudit { entry }
}

fn placements(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer = filled_store(dir.path());
    let mut group = c.benchmark_group("placements");
    let mut n = 0usize;
    for size in [1, 8, 32] {
        group.throughput(Throughput::Elements(size as u64));
        // Unflushed: the statements and WAL frames alone, without the
        // disk's share (a placement is always flushed in the broker).
        // And unflushed with the audit entry each connect over the API
        // writes (rule T5), to tell its share.
        for (name, flush, audited) in [
            ("flush-now", Flush::Now, false),
            ("unflushed", Flush::Soon, false),
            ("unflushed-audited", Flush::Soon, true),
        ] {
            group.bench_function(BenchmarkId::new(name, size), |b| {
                b.iter(|| {
                    let mut batch = Vec::with_capacity(2 * size);
                    for _ in 0..size {
                        n += 1;
                        let placed = session(
                            &format!("new{n}"),
                            &format!("h{}", n % HOSTS),
                            &format!("new{n}"),
                        );
                        if audited {
                            batch.push(connect_entry(&placed));
                        }
                        batch.push(Mutation::PutSession {
                            pool: "p".into(),
                            session: placed,
                        });
                    }
                    writer.apply_blocking(&batch, flush).expect("commit");
                });
            });
        }
    }
    group.finish();
}

/// The audit entry of a session's end, the shape the broker writes with
/// its deletion (about 470 bytes of JSON).
fn end_entry(ended: &Session) -> Mutation {
    let mut entry = audit_entry(ended.create_time_ms, "broker", Some("p"));
    entry.action = format!("END /api/v1/hostPools/p/userSessions/{}", ended.id);
    entry.target = format!("hostPools/p/userSessions/{}", ended.id);
    entry.before = store::Rendered::of(ended);
    entry.outcome = 204;
    entry.source = None;
    entry.end_reason = Some("pendingTimeout".into());
    Mutation::AppendAudit { entry }
}

fn ends(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer = filled_store(dir.path());
    let mut group = c.benchmark_group("ends");
    let mut n = 0usize;
    for size in [1, 32, 256] {
        group.throughput(Throughput::Elements(size as u64));
        for (name, audited) in [("unflushed", false), ("unflushed-audited", true)] {
            group.bench_function(BenchmarkId::new(name, size), |b| {
                b.iter_batched(
                    // Not measured: the sessions to end, committed first.
                    || {
                        let placed: Vec<Session> = (0..size)
                            .map(|_| {
                                n += 1;
                                session(
                                    &format!("end{n}"),
                                    &format!("h{}", n % HOSTS),
                                    &format!("end{n}"),
                                )
                            })
                            .collect();
                        let puts: Vec<Mutation> = placed
                            .iter()
                            .map(|s| Mutation::PutSession {
                                pool: "p".into(),
                                session: s.clone(),
                            })
                            .collect();
                        writer.apply_blocking(&puts, Flush::Soon).expect("place");
                        placed
                    },
                    |placed| {
                        let mut batch = Vec::with_capacity(2 * size);
                        for s in &placed {
                            batch.push(Mutation::DeleteSession {
                                pool: "p".into(),
                                id: s.id.clone(),
                            });
                            if audited {
                                batch.push(end_entry(s));
                            }
                        }
                        writer.apply_blocking(&batch, Flush::Soon).expect("commit");
                    },
                    BatchSize::PerIteration,
                );
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .measurement_time(std::time::Duration::from_secs(3));
    targets = marks, placements, ends
}
criterion_main!(benches);
