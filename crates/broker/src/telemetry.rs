//! Prometheus metrics: one process-wide recorder (the `metrics` facade),
//! installed on first use so that several brokers in one test process share it.

use std::sync::OnceLock;

use metrics::{Counter, Histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Handles of the metrics recorded on every connect and every commit,
/// registered once. A `metrics::counter!`/`histogram!` call looks its
/// metric up by name and labels in the recorder's registry (a hash, a map
/// probe, a key copied) every time: three such look-ups per connect
/// and two per commit, where a handle is one atomic update.
pub(crate) struct Hot {
    /// `deskbroker_placements_total` by the outcomes of a connect that
    /// succeeded (refusals, rarer, name their error code through the macro).
    pub placed: Counter,
    pub reconnect: Counter,
    pub reconnect_from_memory: Counter,
    pub connect_duration: Histogram,
    pub placement_engine: Histogram,
    /// `deskbroker_store_commit_seconds` by flush.
    pub commit_now: Histogram,
    pub commit_soon: Histogram,
    pub batch_requests: Histogram,
    /// `deskbroker_audit_entries_total`: entries made durable.
    pub audit_entries: Counter,
}

/// The hot handles, registered (after [`init`]) on first use.
pub(crate) fn hot() -> &'static Hot {
    static HOT: OnceLock<Hot> = OnceLock::new();
    HOT.get_or_init(|| {
        init();
        let placements = |outcome: &'static str| {
            metrics::counter!("deskbroker_placements_total", "outcome" => outcome)
        };
        let commit = |flush: &'static str| {
            metrics::histogram!("deskbroker_store_commit_seconds", "flush" => flush)
        };
        Hot {
            placed: placements("placed"),
            reconnect: placements("reconnect"),
            reconnect_from_memory: placements("reconnect_from_memory"),
            connect_duration: metrics::histogram!("deskbroker_connect_duration_seconds"),
            placement_engine: metrics::histogram!("deskbroker_placement_engine_seconds"),
            commit_now: commit("now"),
            commit_soon: commit("soon"),
            batch_requests: metrics::histogram!("deskbroker_store_batch_requests"),
            audit_entries: metrics::counter!("deskbroker_audit_entries_total"),
        }
    })
}

/// Latency buckets in seconds: 50 µs to 10 s.
const SECONDS_BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0,
];
const BATCH_BUCKETS: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 4096.0,
];

/// Installs the recorder if no other is installed yet.
pub fn init() {
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Suffix("_requests".into()), BATCH_BUCKETS)
            })
            .expect("bucket lists are not empty");
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        // Another recorder may be installed (an embedding program's): then
        // ours still renders what it records, which is nothing.
        let _ = metrics::set_global_recorder(recorder);
        describe();
        handle
    });
}

fn describe() {
    metrics::describe_counter!(
        "deskbroker_autoscale_evaluations_total",
        "Scaling-plan evaluations of a pool (rules A1-A7)."
    );
    metrics::describe_histogram!(
        "deskbroker_autoscale_evaluation_seconds",
        "Time one scaling-plan evaluation holds its pool (the view and the engine's decision)."
    );
    metrics::describe_counter!(
        "deskbroker_placements_total",
        "Connects by outcome: placed, reconnect, or the error code."
    );
    metrics::describe_histogram!(
        "deskbroker_connect_duration_seconds",
        "Connect requests, end to end including the durable write."
    );
    metrics::describe_histogram!(
        "deskbroker_placement_engine_seconds",
        "Time the placement engine spends deciding one connect."
    );
    metrics::describe_histogram!(
        "deskbroker_store_commit_seconds",
        "Time to commit one batch to the store, by flush: now (flushed to disk before anyone \
         is answered), soon (a batch of the RDP front door's session marks only, flushed \
         within 100 ms)."
    );
    metrics::describe_histogram!(
        "deskbroker_store_batch_requests",
        "Requests group-committed per store batch."
    );
    metrics::describe_histogram!(
        "deskbroker_store_checkpoint_seconds",
        "SQLite checkpoints that copied something, by mode: passive (in the background, \
         with the flush of the database file), restart (the WAL starting over; commits wait \
         for it)."
    );
    metrics::describe_counter!(
        "deskbroker_store_lock_waits_total",
        "SQLite commits that found the database locked (by a checkpoint's restart) and waited."
    );
    metrics::describe_counter!(
        "deskbroker_heartbeat_refused_sessions_total",
        "Entries of heartbeats' session lists the broker did not take (rule S8), by reason: \
         sessionElsewhere, notOwner, hostFull, duplicate."
    );
    metrics::describe_counter!(
        "deskbroker_heartbeat_adopted_sessions_total",
        "Sessions adopted, unconfirmed, from heartbeats' session lists (rule S8)."
    );
    metrics::describe_counter!(
        "deskbroker_heartbeats_throttled_total",
        "Heartbeats refused 429 because their host was over its heartbeat budget."
    );
    metrics::describe_counter!(
        "deskbroker_replica_forwarded_total",
        "API requests this replica forwarded to the leading replica and relayed the answer of."
    );
    metrics::describe_counter!(
        "deskbroker_audit_entries_total",
        "Audit log entries written (rule T5). Its rate is how fast the log grows; the log is \
         kept within serve --audit-retention-days, --audit-max-entries and --audit-max-bytes, \
         so a rate far above the usual one means a caller hammering the API."
    );
    metrics::describe_counter!(
        "deskbroker_audit_pruned_before_retention_total",
        "Audit log entries younger than serve --audit-retention-days removed because the log \
         reached --audit-max-entries or --audit-max-bytes: the log keeps less history than \
         asked, perhaps because a caller floods it. Any increase is worth an alert."
    );
    // Shown from the start (at 0), so that an alert on it has a series.
    metrics::counter!("deskbroker_audit_pruned_before_retention_total").increment(0);
    metrics::describe_gauge!(
        "deskbroker_leader",
        "1 when this process decides placements (a lone broker, or the replica that leads \
         with a valid lease), 0 while it follows or no leader is known. Summed over the \
         replicas sharing a database it is 1; 0 means nobody places users."
    );
    metrics::describe_gauge!(
        "deskbroker_tls_certificate_expiry_timestamp_seconds",
        "When the certificate a listener serves stops being valid (Unix seconds), by file; \
         set at start and whenever SIGHUP reloads it."
    );
    metrics::describe_counter!(
        "deskbroker_replica_elections_won_total",
        "Times this replica became the leader of the replicas sharing its PostgreSQL database."
    );
    crate::directory::describe_metrics();
}

/// The recorded metrics in Prometheus text format.
pub fn render() -> String {
    init();
    HANDLE.get().map(|h| h.render()).unwrap_or_default()
}
