//! The write path: every change the engine makes is queued here, written
//! to the store in group-committed batches, and only then acknowledged
//! (rule S5).
//!
//! Ordering: a request mutates its pool and enqueues the resulting
//! mutations while it still holds the pool's lock, and a sequence number
//! (LSN) is assigned under the queue's own short lock, so the queue holds
//! changes in exactly the order they were made. The single writer drains
//! whatever accumulated while the previous batch was committing and applies
//! it in one transaction, which is what makes tens of thousands of durable
//! placements a second possible with one fsync each batch. On SQLite the
//! writer is a thread of its own that writes each batch itself
//! ([`store::ApplyBlocking`]); on PostgreSQL it is a task.
//!
//! Reads wait too: a request that saw state (even without changing it)
//! waits until every change enqueued before it is durable, so nobody is
//! ever told of a session that a crash could take back.
//!
//! One kind of change is *relaxed* ([`WriteQueue::send_relaxed`]): the RDP
//! front door's marks of a session it relays (Active when the host
//! answers, Disconnected or ended when the connection closes). They are
//! queued in order like every change and committed within a batch or two,
//! but nobody waits for them: not the connection they describe, and not
//! the reads behind them, which wait only for the last ordinary change
//! (`Lsns::strict`). A batch made only of them is committed without
//! waiting for its flush to disk ([`store::Flush::Soon`]): the store
//! flushes it with a later commit, within [`store::RELAXED_FLUSH_WITHIN`].
//! A crash of the process may therefore lose the marks not yet committed,
//! and a crash of the machine those of the last tenth of a second; never a
//! session: its placement was an ordinary change, durable before its host
//! was dialled (S5). A session whose Active mark was lost was placed
//! moments before the crash and keeps almost all of its `pendingTimeout`
//! after the restart, in which the client's reconnect or the host's agent
//! confirms it (rule S5's exception in docs/rules.md).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use store::{ApplyBlocking, Flush, Mutation, Store};
use tokio::sync::{mpsc, oneshot, watch};

use crate::clock::Clock;
use crate::error::BrokerError;
use crate::sync::MutexExt;

/// How many write requests may wait for the writer; past this, requests
/// wait for a slot up to [`RESERVE_TIMEOUT`] and are then refused.
pub const QUEUE_CAPACITY: usize = 16_384;
/// How many requests one transaction takes at most.
pub const MAX_BATCH_REQUESTS: usize = 4_096;
/// How long a request waits for a queue slot before it is refused (503).
pub const RESERVE_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the writer is reminded that time passed (`Queued::Tick`):
/// when it wrote nothing since the last reminder, it checks that the store
/// still answers ([`Store::ping`]), so that a lost database is noticed
/// within about this long even when nothing is written.
pub const PING_INTERVAL: Duration = Duration::from_secs(1);
/// How often the writer bounds the audit log (rule T5): it adds one
/// [`Mutation::PruneAudit`] to the batch it is writing (or writes one
/// alone when idle), which removes at most a chunk of entries per bound,
/// through an index, so a prune costs little even on a storm.
pub const AUDIT_PRUNE_INTERVAL: Duration = Duration::from_secs(5);

/// How long, how many and how many bytes of audit entries are kept
/// (`serve --audit-retention-days`, `--audit-max-entries`,
/// `--audit-max-bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuditRetention {
    pub max_age_ms: i64,
    pub max_rows: u64,
    pub max_bytes: u64,
}

impl AuditRetention {
    /// 90 days, 1,000,000 entries, 1 GiB.
    pub const DEFAULT: AuditRetention = AuditRetention {
        max_age_ms: 90 * 86_400_000,
        max_rows: 1_000_000,
        max_bytes: 1 << 30,
    };

    fn prune(self, now_ms: i64) -> Mutation {
        Mutation::PruneAudit {
            older_than_ms: now_ms.saturating_sub(self.max_age_ms),
            max_rows: self.max_rows,
            max_bytes: self.max_bytes,
        }
    }
}

/// What the queue carries.
enum Queued {
    Write(WriteRequest),
    /// A reminder from [`tick`] that time has passed: a writer with
    /// nothing to write then checks the store and bounds the audit log.
    Tick,
}

struct WriteRequest {
    lsn: u64,
    mutations: Vec<Mutation>,
    /// None for a relaxed change: nobody waits for it.
    done: Option<oneshot::Sender<Result<(), String>>>,
}

/// The LSNs given out so far.
#[derive(Clone, Copy, Default)]
struct Lsns {
    /// The last change of any kind.
    last: u64,
    /// The last ordinary (not relaxed) change: what a read waits for.
    strict: u64,
}

/// The producer side, shared by every request handler.
pub struct WriteQueue {
    tx: mpsc::Sender<Queued>,
    /// The LSNs given out. Held only to assign an LSN and send.
    enqueued: Mutex<Lsns>,
    durable: watch::Receiver<u64>,
    /// Set once the store failed: the broker then refuses every change, and
    /// a restart (or, on PostgreSQL, a new election) rebuilds the engine
    /// from what is durable.
    failed: watch::Receiver<Option<String>>,
    /// Sessions (pool, id) written by the batch that failed and by
    /// everything queued behind it: memory holds them, the store may not, so
    /// they are never answered from memory. Filled before `failed` is set,
    /// and only then.
    unsaved: Arc<Mutex<HashSet<(String, String)>>>,
    /// Since when the store has been working on a call (a batch or a
    /// ping) that has not returned; None while the writer waits for work.
    busy_since: Arc<Mutex<Option<Instant>>>,
}

/// A reserved slot in the queue, taken before the engine is touched so that
/// a full queue refuses a request instead of changing state it cannot save.
pub struct Slot<'a>(mpsc::Permit<'a, Queued>);

/// What a request waits on before it answers.
pub enum Ticket {
    /// Its own mutations: acknowledged when their batch commits.
    Write(oneshot::Receiver<Result<(), String>>),
    /// Nothing of its own: wait until what it saw is durable.
    Read(u64),
}

impl WriteQueue {
    /// Starts the writer on `store`: on a thread of its own when the store
    /// can write synchronously ([`Store::blocking`], SQLite), else as a
    /// task; and the ticker that reminds an idle writer to check the store.
    pub fn start(
        store: Arc<dyn Store>,
        clock: Clock,
        retention: AuditRetention,
    ) -> Arc<WriteQueue> {
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let (durable_tx, durable) = watch::channel(0);
        let (failed_tx, failed) = watch::channel(None);
        let unsaved = Arc::new(Mutex::new(HashSet::new()));
        let busy_since = Arc::new(Mutex::new(None));
        let writer = Writer {
            blocking: store.blocking(),
            store,
            durable: durable_tx,
            failed: failed_tx,
            unsaved: unsaved.clone(),
            retention,
            clock,
            busy_since: busy_since.clone(),
        };
        tokio::spawn(tick(tx.downgrade()));
        if writer.blocking.is_some() {
            // Should the thread not start, `rx` is dropped with it and every
            // write is refused as the writer having stopped.
            let started = std::thread::Builder::new()
                .name("deskbroker-writer".into())
                .spawn(move || writer.run_on_this_thread(rx));
            if let Err(e) = started {
                tracing::error!(error = %e, "cannot start the store's writer thread; every write is refused");
            }
        } else {
            tokio::spawn(writer.run(rx));
        }
        Arc::new(WriteQueue {
            tx,
            enqueued: Mutex::new(Lsns::default()),
            durable,
            failed,
            unsaved,
            busy_since,
        })
    }

    /// How long the store has been working on a call that has not
    /// returned (zero while the writer waits for work). A store that hangs
    /// (a connection whose packets stopped passing) fails only at its
    /// timeout; a replica stops renewing its lease well before, from this.
    pub fn stuck_for(&self) -> Duration {
        self.busy_since
            .lock_or_recover()
            .map_or(Duration::ZERO, |since| since.elapsed())
    }

    /// Whether the session `id` of `pool` is known to be durable as memory
    /// holds it: always while the store works; after a failure, unless the
    /// failed writes touched it.
    pub fn is_saved(&self, pool: &str, id: &str) -> bool {
        !self
            .unsaved
            .lock_or_recover()
            .contains(&(pool.to_string(), id.to_string()))
    }

    /// Waits for a queue slot (bounded by [`RESERVE_TIMEOUT`]).
    pub async fn reserve(&self) -> Result<Slot<'_>, BrokerError> {
        self.check_failed()?;
        match tokio::time::timeout(RESERVE_TIMEOUT, self.tx.reserve()).await {
            Ok(Ok(permit)) => Ok(Slot(permit)),
            Ok(Err(_)) => Err(BrokerError::store_unavailable("the writer has stopped")),
            Err(_) => Err(BrokerError::Overloaded),
        }
    }

    /// Enqueues `mutations` (call this under the lock of the state they
    /// come from). With nothing to write, the ticket waits for what is
    /// already queued.
    pub fn send(&self, slot: Option<Slot<'_>>, mutations: Vec<Mutation>) -> Ticket {
        let mut enqueued = self.enqueued.lock_or_recover();
        match slot {
            Some(slot) if !mutations.is_empty() => {
                enqueued.last += 1;
                enqueued.strict = enqueued.last;
                let (done, rx) = oneshot::channel();
                slot.0.send(Queued::Write(WriteRequest {
                    lsn: enqueued.last,
                    mutations,
                    done: Some(done),
                }));
                Ticket::Write(rx)
            }
            _ => Ticket::Read(enqueued.strict),
        }
    }

    /// Enqueues a relaxed change (see the module's documentation): written
    /// in order with the others, waited for by nobody. Call this under the
    /// lock of the state it comes from, as [`WriteQueue::send`].
    pub fn send_relaxed(&self, slot: Slot<'_>, mutations: Vec<Mutation>) {
        if mutations.is_empty() {
            return;
        }
        let mut enqueued = self.enqueued.lock_or_recover();
        enqueued.last += 1;
        slot.0.send(Queued::Write(WriteRequest {
            lsn: enqueued.last,
            mutations,
            done: None,
        }));
    }

    /// Waits until the ticket's changes (or what it saw) are durable.
    pub async fn wait(&self, ticket: Ticket) -> Result<(), BrokerError> {
        match ticket {
            Ticket::Write(rx) => match rx.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(BrokerError::store_unavailable(e)),
                Err(_) => Err(BrokerError::store_unavailable("the writer has stopped")),
            },
            Ticket::Read(lsn) => {
                let mut durable = self.durable.clone();
                let mut failed = self.failed.clone();
                tokio::select! {
                    r = durable.wait_for(|&d| d >= lsn) => r.map(|_| ()).map_err(|_| BrokerError::store_unavailable("the writer has stopped")),
                    _ = failed.wait_for(Option::is_some) => Err(self.check_failed().err().unwrap_or_else(|| BrokerError::store_unavailable("the store failed"))),
                }
            }
        }
    }

    fn check_failed(&self) -> Result<(), BrokerError> {
        match &*self.failed.borrow() {
            Some(e) => Err(BrokerError::store_unavailable(e)),
            None => Ok(()),
        }
    }

    /// The store's failure, if it failed.
    pub fn failure(&self) -> Option<String> {
        self.failed.borrow().clone()
    }

    /// Resolves once the store has failed.
    pub async fn failed(&self) -> String {
        let mut failed = self.failed.clone();
        match failed.wait_for(Option::is_some).await {
            Ok(v) => v.clone().unwrap_or_default(),
            Err(_) => "the writer has stopped".into(),
        }
    }

    /// Waits until everything enqueued so far is durable (clean shutdown).
    /// Relaxed changes too.
    pub async fn flush(&self) -> Result<(), BrokerError> {
        let last = self.enqueued.lock_or_recover().last;
        self.wait(Ticket::Read(last)).await
    }
}

/// Marks the writer busy with a store call for as long as it lives.
struct Busy<'a>(&'a Mutex<Option<Instant>>);

impl<'a> Busy<'a> {
    fn new(since: &'a Mutex<Option<Instant>>) -> Busy<'a> {
        *since.lock_or_recover() = Some(Instant::now());
        Busy(since)
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        *self.0.lock_or_recover() = None;
    }
}

/// The sessions (pool, id) a list of mutations writes.
fn sessions_written<'a>(
    mutations: impl IntoIterator<Item = &'a Mutation>,
) -> impl Iterator<Item = (String, String)> {
    mutations.into_iter().filter_map(|m| match m {
        Mutation::PutSession { pool, session } => Some((pool.clone(), session.id.clone())),
        Mutation::DeleteSession { pool, id } => Some((pool.clone(), id.clone())),
        _ => None,
    })
}

/// Sends [`Queued::Tick`] every [`PING_INTERVAL`] until the queue is gone.
/// A full queue gets none: its writer is busy, not idle.
async fn tick(queue: mpsc::WeakSender<Queued>) {
    let mut every = tokio::time::interval(PING_INTERVAL);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    every.tick().await;
    loop {
        every.tick().await;
        let Some(tx) = queue.upgrade() else {
            return;
        };
        let _ = tx.try_send(Queued::Tick);
    }
}

/// The one consumer of the queue.
struct Writer {
    store: Arc<dyn Store>,
    /// The store's synchronous write path: set, the writer runs on a thread
    /// of its own and calls it for each batch.
    blocking: Option<Arc<dyn ApplyBlocking>>,
    durable: watch::Sender<u64>,
    failed: watch::Sender<Option<String>>,
    unsaved: Arc<Mutex<HashSet<(String, String)>>>,
    /// How long and how many audit entries are kept.
    retention: AuditRetention,
    /// Dates the audit log's prunes.
    clock: Clock,
    busy_since: Arc<Mutex<Option<Instant>>>,
}

impl Writer {
    /// [`Writer::run`] on the calling thread, which it blocks: a runtime of
    /// its own drives the queue's receiver, and each batch is written
    /// synchronously, so that under load the thread goes from one batch to
    /// the next without sleeping or waking anyone but the requests.
    fn run_on_this_thread(self, rx: mpsc::Receiver<Queued>) {
        match tokio::runtime::Builder::new_current_thread().build() {
            Ok(runtime) => runtime.block_on(self.run(rx)),
            Err(e) => {
                tracing::error!(error = %e, "cannot start the store's writer; every write is refused")
            }
        }
    }

    /// Writes `batch`, flushed as `flush` says. A panic in a synchronous
    /// write is a failed write, as a blocking task's is for
    /// [`Store::apply`].
    async fn apply(&self, batch: Arc<[Mutation]>, flush: Flush) -> Result<(), store::StoreError> {
        let _busy = Busy::new(&self.busy_since);
        match (&self.blocking, flush) {
            (Some(store), _) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                store.apply_blocking(&batch, flush)
            }))
            .unwrap_or_else(|_| Err(store::StoreError::Task("the store's write panicked".into()))),
            (None, Flush::Now) => self.store.apply(batch).await,
            (None, Flush::Soon) => self.store.apply_relaxed(batch).await,
        }
    }

    /// The audit log's bound, when [`AUDIT_PRUNE_INTERVAL`] has passed since
    /// the last one.
    fn prune_due(&self, next_prune: &mut tokio::time::Instant) -> Option<Mutation> {
        let now = tokio::time::Instant::now();
        (now >= *next_prune).then(|| {
            *next_prune = now + AUDIT_PRUNE_INTERVAL;
            self.retention.prune(self.clock.now_ms())
        })
    }

    async fn run(self, mut rx: mpsc::Receiver<Queued>) {
        let mut queued = Vec::with_capacity(MAX_BATCH_REQUESTS);
        let mut batch = Vec::with_capacity(MAX_BATCH_REQUESTS);
        let mut next_prune = tokio::time::Instant::now() + AUDIT_PRUNE_INTERVAL;
        loop {
            if rx.recv_many(&mut queued, MAX_BATCH_REQUESTS).await == 0 {
                return;
            }
            batch.extend(queued.drain(..).filter_map(|q| match q {
                Queued::Write(r) => Some(r),
                Queued::Tick => None,
            }));
            if batch.is_empty() {
                // Only a tick: nothing was written since the last one.
                let checked = match self.prune_due(&mut next_prune) {
                    Some(prune) => self.apply(vec![prune].into(), Flush::Now).await,
                    None => {
                        let _busy = Busy::new(&self.busy_since);
                        self.store.ping().await
                    }
                };
                if let Err(e) = checked {
                    self.fail(e.to_string(), &[], &mut batch, &mut rx).await;
                    return;
                }
                continue;
            }
            let last_lsn = batch.last().map_or(0, |r: &WriteRequest| r.lsn);
            // A batch that nobody waits for (only relaxed marks) need not be
            // on disk before the next one is taken: it is committed, so the
            // process's crash loses none of it, and flushed within
            // `store::RELAXED_FLUSH_WITHIN` (rule S5's exception).
            let flush = if batch.iter().all(|r| r.done.is_none()) {
                Flush::Soon
            } else {
                Flush::Now
            };
            let mutations: Arc<[Mutation]> = batch
                .iter_mut()
                .flat_map(|r| std::mem::take(&mut r.mutations))
                .chain(self.prune_due(&mut next_prune))
                .collect();
            let started = std::time::Instant::now();
            let result = self.apply(mutations.clone(), flush).await;
            let hot = crate::telemetry::hot();
            match flush {
                Flush::Now => &hot.commit_now,
                Flush::Soon => &hot.commit_soon,
            }
            .record(started.elapsed());
            hot.batch_requests.record(batch.len() as f64);
            match result {
                Ok(()) => {
                    self.durable.send_replace(last_lsn);
                    let audited = mutations
                        .iter()
                        .filter(|m| matches!(m, Mutation::AppendAudit { .. }))
                        .count();
                    if audited > 0 {
                        hot.audit_entries.increment(audited as u64);
                    }
                    for r in batch.drain(..) {
                        if let Some(done) = r.done {
                            let _ = done.send(Ok(()));
                        }
                    }
                }
                Err(e) => {
                    self.fail(e.to_string(), &mutations, &mut batch, &mut rx)
                        .await;
                    return;
                }
            }
        }
    }

    /// The store failed. Memory may now hold changes the store refused:
    /// acknowledge nothing more, remember which sessions are not saved,
    /// refuse everything queued, and let the process restart (or re-elect)
    /// from what is durable.
    async fn fail(
        &self,
        msg: String,
        failed_batch: &[Mutation],
        batch: &mut Vec<WriteRequest>,
        rx: &mut mpsc::Receiver<Queued>,
    ) {
        tracing::error!(error = %msg, "store write failed; this broker refuses changes from now on");
        rx.close();
        let mut refused: Vec<WriteRequest> = std::mem::take(batch);
        while let Some(q) = rx.recv().await {
            if let Queued::Write(r) = q {
                refused.push(r);
            }
        }
        {
            let mut unsaved = self.unsaved.lock_or_recover();
            unsaved.extend(sessions_written(failed_batch));
            unsaved.extend(sessions_written(refused.iter().flat_map(|r| &r.mutations)));
        }
        self.failed.send_replace(Some(msg.clone()));
        for r in refused {
            match r.done {
                Some(done) => {
                    let _ = done.send(Err(msg.clone()));
                }
                None => tracing::warn!(
                    lsn = r.lsn,
                    "a relaxed change (a session mark) was not saved"
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use store::{Snapshot, StoreError};

    use super::*;

    fn start_queue(store: Arc<dyn Store>) -> Arc<WriteQueue> {
        WriteQueue::start(store, Clock::system(), AuditRetention::DEFAULT)
    }

    /// A store that commits its first `ok_batches` batches and then fails
    /// every write and ping, as a database that went away does (or, with
    /// `panics`, panics in its writes, as a bug would).
    struct GoesAway {
        ok_batches: usize,
        applied: AtomicUsize,
        pings_ok: bool,
        panics: bool,
        /// Set: the store writes synchronously ([`Store::blocking`]), so
        /// the writer runs on a thread of its own.
        on_thread: Option<std::sync::Weak<GoesAway>>,
        /// The name of the thread each batch was written from.
        writers: Mutex<Vec<Option<String>>>,
    }

    fn goes_away(ok_batches: usize, pings_ok: bool, on_thread: bool) -> Arc<GoesAway> {
        store_that(ok_batches, pings_ok, on_thread, false)
    }

    fn store_that(
        ok_batches: usize,
        pings_ok: bool,
        on_thread: bool,
        panics: bool,
    ) -> Arc<GoesAway> {
        Arc::new_cyclic(|this| GoesAway {
            ok_batches,
            applied: AtomicUsize::new(0),
            pings_ok,
            panics,
            on_thread: on_thread.then(|| this.clone()),
            writers: Mutex::new(Vec::new()),
        })
    }

    impl GoesAway {
        fn commit(&self) -> Result<(), StoreError> {
            let thread = std::thread::current().name().map(str::to_string);
            self.writers.lock().unwrap().push(thread);
            if self.panics {
                panic!("a bug in the store");
            }
            if self.applied.fetch_add(1, Ordering::SeqCst) < self.ok_batches {
                Ok(())
            } else {
                Err(StoreError::Task("connection closed".into()))
            }
        }
    }

    impl ApplyBlocking for GoesAway {
        fn apply_blocking(&self, _batch: &[Mutation], _flush: Flush) -> Result<(), StoreError> {
            self.commit()
        }
    }

    #[async_trait::async_trait]
    impl Store for GoesAway {
        async fn load(&self) -> Result<Snapshot, StoreError> {
            Ok(Snapshot::default())
        }
        async fn apply(&self, _batch: Arc<[Mutation]>) -> Result<(), StoreError> {
            self.commit()
        }
        fn blocking(&self) -> Option<Arc<dyn ApplyBlocking>> {
            let this = self.on_thread.as_ref()?.upgrade()?;
            Some(this)
        }
        async fn scaling_actions(
            &self,
            _query: store::ScalingActionQuery,
        ) -> Result<Vec<store::ScalingAction>, StoreError> {
            Ok(Vec::new())
        }
        async fn audit(
            &self,
            _query: store::AuditQuery,
        ) -> Result<Vec<store::AuditRow>, StoreError> {
            Err(StoreError::Task("connection closed".into()))
        }
        async fn ping(&self) -> Result<(), StoreError> {
            if self.pings_ok {
                Ok(())
            } else {
                Err(StoreError::Task("no answer".into()))
            }
        }
    }

    fn put_session(id: &str) -> Mutation {
        Mutation::PutSession {
            pool: "p".into(),
            session: store::conformance::session(id, "h1", id),
        }
    }

    async fn write(queue: &WriteQueue, mutations: Vec<Mutation>) -> Result<(), BrokerError> {
        let slot = queue.reserve().await?;
        let ticket = queue.send(Some(slot), mutations);
        queue.wait(ticket).await
    }

    #[tokio::test]
    async fn after_a_failed_write_only_what_was_committed_counts_as_saved() {
        for on_thread in [false, true] {
            let queue = start_queue(goes_away(1, true, on_thread));
            write(&queue, vec![put_session("s1")])
                .await
                .expect("committed");
            assert!(queue.is_saved("p", "s1"));
            let refused = write(&queue, vec![put_session("s2")]).await;
            assert!(matches!(
                refused.expect_err("refused"),
                BrokerError::StoreUnavailable(_)
            ));
            assert!(queue.failure().is_some());
            assert!(queue.is_saved("p", "s1"), "committed before the failure");
            assert!(!queue.is_saved("p", "s2"), "in the failed batch");
            let later = queue.reserve().await.err().expect("no more writes");
            assert!(matches!(later, BrokerError::StoreUnavailable(_)));
        }
    }

    /// Polls `done` every few milliseconds until it holds; false if it
    /// still does not after a generous deadline.
    async fn eventually(done: impl Fn() -> bool) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !done() {
            if std::time::Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    #[tokio::test]
    async fn a_store_that_writes_synchronously_has_a_writer_thread_that_ends_with_its_queue() {
        let store = goes_away(usize::MAX, true, true);
        let queue = start_queue(store.clone());
        for id in ["s1", "s2", "s3"] {
            write(&queue, vec![put_session(id)])
                .await
                .expect("committed");
        }
        let writers = store.writers.lock().unwrap().clone();
        assert_eq!(writers, vec![Some("deskbroker-writer".to_string()); 3]);
        // The writer holds the store; it lets go once its queue is gone.
        assert!(Arc::strong_count(&store) > 1);
        drop(queue);
        assert!(
            eventually(|| Arc::strong_count(&store) == 1).await,
            "the writer thread ended"
        );
    }

    /// A store that holds every batch until the test lets it commit, and
    /// says what it committed and how it was to be flushed.
    struct Gated {
        gate: tokio::sync::Semaphore,
        entered: tokio::sync::Notify,
        committed: Mutex<Vec<(Flush, Vec<Mutation>)>>,
    }

    impl Gated {
        async fn commit(&self, batch: Arc<[Mutation]>, flush: Flush) -> Result<(), StoreError> {
            self.entered.notify_one();
            self.gate.acquire().await.expect("open").forget();
            self.committed.lock().unwrap().push((flush, batch.to_vec()));
            Ok(())
        }
    }

    #[async_trait::async_trait]
    impl Store for Gated {
        async fn load(&self) -> Result<Snapshot, StoreError> {
            Ok(Snapshot::default())
        }
        async fn apply(&self, batch: Arc<[Mutation]>) -> Result<(), StoreError> {
            self.commit(batch, Flush::Now).await
        }
        async fn apply_relaxed(&self, batch: Arc<[Mutation]>) -> Result<(), StoreError> {
            self.commit(batch, Flush::Soon).await
        }
        async fn scaling_actions(
            &self,
            _query: store::ScalingActionQuery,
        ) -> Result<Vec<store::ScalingAction>, StoreError> {
            Ok(Vec::new())
        }
        async fn audit(
            &self,
            _query: store::AuditQuery,
        ) -> Result<Vec<store::AuditRow>, StoreError> {
            Ok(Vec::new())
        }
    }

    /// Whether `f` is ready at its first poll.
    async fn ready_now<F: std::future::Future>(f: F) -> Option<F::Output> {
        tokio::select! {
            biased;
            r = f => Some(r),
            () = std::future::ready(()) => None,
        }
    }

    #[tokio::test]
    async fn nobody_waits_for_a_relaxed_change_and_it_is_written_in_order() {
        let store = Arc::new(Gated {
            gate: tokio::sync::Semaphore::new(0),
            entered: tokio::sync::Notify::new(),
            committed: Mutex::new(Vec::new()),
        });
        let queue = start_queue(store.clone());
        // A relaxed mark, held by the store: a read behind it answers at once.
        let slot = queue.reserve().await.expect("slot");
        queue.send_relaxed(slot, vec![put_session("mark")]);
        store.entered.notified().await;
        let read = queue.send(None, Vec::new());
        assert!(
            matches!(ready_now(queue.wait(read)).await, Some(Ok(()))),
            "a read does not wait for a relaxed change"
        );
        // An ordinary change behind it waits for its own commit, and a read
        // behind that one waits too.
        let writer = {
            let queue = queue.clone();
            tokio::spawn(async move { write(&queue, vec![put_session("placed")]).await })
        };
        while queue.enqueued.lock().unwrap().strict == 0 {
            tokio::task::yield_now().await;
        }
        let read = queue.send(None, Vec::new());
        assert!(ready_now(queue.wait(read)).await.is_none());
        assert!(!writer.is_finished());
        store.gate.add_permits(2);
        writer.await.expect("joined").expect("committed");
        queue.flush().await.expect("flushed");
        let ids = committed_ids(&store);
        // Both committed in order; the mark's batch, which nobody waits
        // for, may reach the disk later, the placement's may not.
        assert_eq!(
            ids,
            [
                (Flush::Soon, vec!["mark".to_string()]),
                (Flush::Now, vec!["placed".to_string()])
            ],
        );
    }

    /// What each committed batch of `store` was, by session id, with how
    /// it was to be flushed.
    fn committed_ids(store: &Gated) -> Vec<(Flush, Vec<String>)> {
        store
            .committed
            .lock()
            .unwrap()
            .iter()
            .map(|(flush, b)| {
                let ids = b
                    .iter()
                    .map(|m| match m {
                        Mutation::PutSession { session, .. } => session.id.clone(),
                        other => format!("{other:?}"),
                    })
                    .collect();
                (*flush, ids)
            })
            .collect()
    }

    /// Rule S5: a batch flushes later only when it holds nothing but
    /// marks; a mark that shares a batch with an ordinary change is
    /// flushed with it, before that change is acknowledged.
    #[tokio::test]
    async fn a_batch_with_an_ordinary_change_is_flushed_whatever_rides_with_it() {
        let store = Arc::new(Gated {
            gate: tokio::sync::Semaphore::new(0),
            entered: tokio::sync::Notify::new(),
            committed: Mutex::new(Vec::new()),
        });
        let queue = start_queue(store.clone());
        let first = {
            let queue = queue.clone();
            tokio::spawn(async move { write(&queue, vec![put_session("a")]).await })
        };
        store.entered.notified().await;
        // While "a" is being written, a mark and an ordinary change queue up:
        // they make the next batch together.
        let slot = queue.reserve().await.expect("slot");
        queue.send_relaxed(slot, vec![put_session("mark")]);
        let second = {
            let queue = queue.clone();
            tokio::spawn(async move { write(&queue, vec![put_session("b")]).await })
        };
        while queue.enqueued.lock().unwrap().last < 3 {
            tokio::task::yield_now().await;
        }
        store.gate.add_permits(2);
        first.await.expect("joined").expect("committed");
        second.await.expect("joined").expect("committed");
        let slot = queue.reserve().await.expect("slot");
        queue.send_relaxed(slot, vec![put_session("last mark")]);
        store.gate.add_permits(1);
        queue.flush().await.expect("flushed");
        let s = |ids: &[&str]| ids.iter().map(|id| id.to_string()).collect::<Vec<_>>();
        assert_eq!(
            committed_ids(&store),
            [
                (Flush::Now, s(&["a"])),
                (Flush::Now, s(&["mark", "b"])),
                (Flush::Soon, s(&["last mark"])),
            ]
        );
    }

    /// A panic in the writer thread's write is a failed write: the request
    /// is refused, the broker refuses changes from then on, and nothing
    /// waits for a writer that is gone.
    #[tokio::test]
    async fn a_write_that_panics_on_the_writer_thread_fails_like_a_lost_store() {
        let queue = start_queue(store_that(usize::MAX, true, true, true));
        let refused = write(&queue, vec![put_session("s1")]).await;
        assert!(matches!(
            refused.expect_err("refused"),
            BrokerError::StoreUnavailable(_)
        ));
        assert!(queue.failure().is_some_and(|e| e.contains("panicked")));
        assert!(!queue.is_saved("p", "s1"));
        let later = queue.reserve().await.err().expect("no more writes");
        assert!(matches!(later, BrokerError::StoreUnavailable(_)));
    }

    /// A writer on a thread of its own gets its reminders from the
    /// runtime's clock as a task does (on real time here: the test's clock
    /// cannot be paused for another thread).
    #[tokio::test]
    async fn an_idle_writer_thread_notices_a_lost_store_by_its_ping() {
        let queue = start_queue(goes_away(usize::MAX, false, true));
        assert!(queue.failure().is_none());
        assert!(eventually(|| queue.failure().is_some()).await);
        assert!(queue.failure().is_some_and(|e| e.contains("no answer")));
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_writer_notices_a_lost_store_by_its_ping() {
        let queue = start_queue(goes_away(usize::MAX, false, false));
        assert!(queue.failure().is_none());
        let noticed = tokio::time::timeout(PING_INTERVAL * 2, queue.failed()).await;
        assert!(
            noticed
                .expect("within two ping intervals")
                .contains("no answer")
        );
    }
}
