//! What the nemesis watches besides the clients' answers: every replica's
//! `/healthz` (role, leader, epoch), the leadership row's epoch in the
//! database, and at checkpoints the database's sessions and owners, whose
//! invariants (rule S6, P7) are checked on the spot. A checkpoint reads
//! one snapshot (a repeatable-read transaction), so whatever it finds was
//! true of the committed state at one moment.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio_postgres::IsolationLevel;

use super::brokers::{Directory, REPLICAS, endpoint, health};
use super::checker::{Violation, check_db};
use super::history::History;

/// Between two rounds of `/healthz` polls and epoch reads.
const POLL_EVERY: Duration = Duration::from_millis(250);
/// Rounds between two checkpoints of the database's invariants.
const CHECKPOINT_EVERY_ROUNDS: u32 = 8;
/// Bound of one read of the database (it may be down or restarting).
const DB_READ_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
pub struct DbSession {
    pub pool: String,
    pub id: String,
    pub host: String,
    /// In lower case: users compare without case.
    pub user: String,
}

/// The committed state the checker needs, from one snapshot.
#[derive(Clone, Debug, Default)]
pub struct DbState {
    pub sessions: Vec<DbSession>,
    /// (pool, host) → its owner, in lower case (personal pools).
    pub owners: HashMap<(String, String), String>,
    pub epoch: Option<i64>,
}

/// Opens a connection to `url`, bounded in time.
pub async fn connect(url: &str) -> Result<tokio_postgres::Client, String> {
    let connected = tokio::time::timeout(
        DB_READ_TIMEOUT,
        tokio_postgres::connect(url, tokio_postgres::NoTls),
    )
    .await
    .map_err(|_| "no connection in time".to_string())?
    .map_err(|e| e.to_string())?;
    let (client, conn) = connected;
    tokio::spawn(conn);
    Ok(client)
}

/// Reads the sessions, owners and epoch in one snapshot, bounded in time.
pub async fn read_db(client: &mut tokio_postgres::Client) -> Result<DbState, String> {
    tokio::time::timeout(DB_READ_TIMEOUT, read_snapshot(client))
        .await
        .map_err(|_| "no answer in time".to_string())?
        .map_err(|e| e.to_string())
}

async fn read_snapshot(
    client: &mut tokio_postgres::Client,
) -> Result<DbState, tokio_postgres::Error> {
    let tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let mut state = DbState::default();
    for row in tx
        .query("SELECT pool, id, host, record FROM sessions", &[])
        .await?
    {
        let record: Value = serde_json::from_str(row.get(3)).unwrap_or(Value::Null);
        state.sessions.push(DbSession {
            pool: row.get(0),
            id: row.get(1),
            host: row.get(2),
            user: record["user"]
                .as_str()
                .unwrap_or("<no user in the record>")
                .to_ascii_lowercase(),
        });
    }
    for row in tx
        .query("SELECT pool, name, record FROM hosts", &[])
        .await?
    {
        let record: Value = serde_json::from_str(row.get(2)).unwrap_or(Value::Null);
        if let Some(owner) = record["spec"]["assignedUser"].as_str() {
            state
                .owners
                .insert((row.get(0), row.get(1)), owner.to_ascii_lowercase());
        }
    }
    state.epoch = tx
        .query_opt("SELECT epoch FROM deskbroker_leader", &[])
        .await?
        .map(|r| r.get(0));
    tx.commit().await?;
    Ok(state)
}

/// One `/healthz` answer.
#[derive(Clone, Debug)]
pub struct HealthSample {
    pub at: Duration,
    pub slot: usize,
    pub incarnation: u32,
    pub role: String,
    pub epoch: Option<i64>,
}

#[derive(Debug, Default)]
pub struct Observations {
    pub health: Vec<HealthSample>,
    /// The leadership row's epoch, as read over time.
    pub db_epochs: Vec<(Duration, i64)>,
    pub checkpoints: usize,
    pub violations: Vec<Violation>,
}

pub struct Observer {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Observations>,
}

impl Observer {
    pub fn start(directory: Directory, database_url: String, history: Arc<History>) -> Observer {
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(observe(directory, database_url, history, stop.clone()));
        Observer { stop, task }
    }

    pub async fn stop(self) -> Observations {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.expect("the observer panicked")
    }
}

async fn observe(
    directory: Directory,
    database_url: String,
    history: Arc<History>,
    stop: Arc<AtomicBool>,
) -> Observations {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("client");
    let mut obs = Observations::default();
    let mut db: Option<tokio_postgres::Client> = None;
    let mut round = 0u32;
    while !stop.load(Ordering::SeqCst) {
        round += 1;
        let poll = |slot: usize| {
            let e = endpoint(&directory, slot);
            let http = http.clone();
            async move { (slot, e.incarnation, health(&http, &e).await) }
        };
        const _: () = assert!(REPLICAS == 3, "one poll per replica below");
        let (a, b, c) = tokio::join!(poll(0), poll(1), poll(2));
        let at = history.now();
        for (slot, incarnation, h) in [a, b, c] {
            if let Some(h) = h {
                obs.health.push(HealthSample {
                    at,
                    slot,
                    incarnation,
                    role: h.role,
                    epoch: h.epoch,
                });
            }
        }
        if db.is_none() {
            db = connect(&database_url).await.ok();
        }
        if let Some(client) = db.as_mut() {
            if round.is_multiple_of(CHECKPOINT_EVERY_ROUNDS) {
                match read_db(client).await {
                    Ok(state) => {
                        obs.checkpoints += 1;
                        let at = history.now();
                        for mut v in check_db(&state) {
                            v.what = format!(
                                "at the checkpoint of {:.3}s: {}",
                                at.as_secs_f64(),
                                v.what
                            );
                            obs.violations.push(v);
                        }
                        if let Some(epoch) = state.epoch {
                            obs.db_epochs.push((at, epoch));
                        }
                    }
                    Err(_) => db = None,
                }
            } else {
                let read = tokio::time::timeout(
                    DB_READ_TIMEOUT,
                    client.query_opt("SELECT epoch FROM deskbroker_leader", &[]),
                )
                .await;
                match read {
                    Ok(Ok(Some(row))) => obs.db_epochs.push((history.now(), row.get(0))),
                    Ok(Ok(None)) => {}
                    _ => db = None,
                }
            }
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
    obs
}
