//! The three replicas of the real binary under test, each behind two
//! relays of its own: one between it and PostgreSQL, one in front of its
//! HTTP port whose address it advertises, so that the other replicas
//! forward to it through the relay. The relays outlive the processes: a
//! replica killed and started again listens on a new port, and its
//! advertised relay is pointed at it.
//!
//! Clients talk to each replica directly, at the address in
//! [`Directory`], which is updated at every start.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::history::{History, Op, Outcome, PROBE_CLIENT, Placed, Req};
use super::relay::Relay;
use crate::{App, TOKEN, exe, ready_line};

pub const REPLICAS: usize = 3;
/// How long a replica may take to print that it listens (one campaign).
const START_WITHIN: Duration = Duration::from_secs(60);
/// Bound of a `/healthz` request.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(1);

/// Where each replica answers now (None while it is down), and which start
/// of it that is.
#[derive(Clone, Debug, Default)]
pub struct Endpoint {
    pub url: Option<String>,
    pub incarnation: u32,
}

pub type Directory = Arc<[RwLock<Endpoint>; REPLICAS]>;

pub fn endpoint(directory: &Directory, slot: usize) -> Endpoint {
    directory[slot]
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// One replica's process (None while killed) and its relays.
pub struct Slot {
    pub app: tokio::sync::Mutex<Option<App>>,
    pub db_relay: Relay,
    pub adv_relay: Relay,
}

pub struct Brokers {
    pub slots: Vec<Slot>,
    pub directory: Directory,
    dir: PathBuf,
    database: String,
    lease_seconds: u64,
    /// For `/healthz` and the probes.
    http: reqwest::Client,
}

impl Brokers {
    /// Starts the relays and the replicas on database `database` of the
    /// server at `pg_addr`, logs in `dir`.
    pub async fn start(dir: &Path, pg_addr: &str, database: &str, lease_seconds: u64) -> Brokers {
        let mut slots = Vec::new();
        for _ in 0..REPLICAS {
            slots.push(Slot {
                app: tokio::sync::Mutex::new(None),
                db_relay: Relay::start(Some(pg_addr.to_string())).await,
                adv_relay: Relay::start(None).await,
            });
        }
        let brokers = Brokers {
            slots,
            directory: Arc::new(Default::default()),
            dir: dir.to_path_buf(),
            database: database.to_string(),
            lease_seconds,
            http: reqwest::Client::builder()
                .timeout(HEALTH_TIMEOUT * 10)
                .connect_timeout(HEALTH_TIMEOUT)
                .build()
                .expect("client"),
        };
        for slot in 0..REPLICAS {
            brokers
                .restart(slot, Instant::now() + START_WITHIN)
                .await
                .unwrap_or_else(|e| panic!("replica {slot} did not start: {e}"));
        }
        brokers
    }

    /// The replica's log (its stderr, every start appended).
    pub fn log_path(&self, slot: usize) -> PathBuf {
        self.dir.join(format!("r{slot}.log"))
    }

    /// Starts replica `slot` (again), retrying until `deadline`: a start
    /// fails while the database is unreachable from it.
    pub async fn restart(&self, slot: usize, deadline: Instant) -> Result<(), String> {
        let mut guard = self.slots[slot].app.lock().await;
        if guard.is_some() {
            return Ok(());
        }
        loop {
            let spawned = self.spawn(slot).await;
            match spawned {
                Ok(app) => {
                    let addr = app.listen_addr();
                    self.slots[slot].adv_relay.reopen(&addr).await?;
                    let mut e = self.directory[slot]
                        .write()
                        .unwrap_or_else(|e| e.into_inner());
                    e.incarnation += 1;
                    e.url = Some(app.url.clone());
                    *guard = Some(app);
                    return Ok(());
                }
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }

    async fn spawn(&self, slot: usize) -> Result<App, String> {
        let data_dir = self.dir.join(format!("r{slot}"));
        let log_path = self.log_path(slot);
        let database_url = format!(
            "postgres://postgres@{}/{}",
            self.slots[slot].db_relay.addr, self.database
        );
        let advertise = format!("http://{}", self.slots[slot].adv_relay.addr);
        let lease = self.lease_seconds.to_string();
        tokio::task::spawn_blocking(move || {
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_path)
                .map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
            let mut child = Command::new(exe())
                .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
                .arg(&data_dir)
                .args(["--database-url", &database_url])
                .args(["--advertise-url", &advertise])
                .args(["--leader-lease", &lease])
                .env("DESKBROKER_ADMIN_TOKEN", TOKEN)
                .env(
                    "RUST_LOG",
                    std::env::var("DESKBROKER_NEMESIS_LOG")
                        .unwrap_or_else(|_| "warn,broker::replica=info".into()),
                )
                .stdout(Stdio::piped())
                .stderr(log)
                .spawn()
                .map_err(|e| format!("cannot start deskbroker serve: {e}"))?;
            let ready = match ready_line(&mut child, START_WITHIN) {
                Ok((ready, _)) => ready,
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "deskbroker serve {e}; its log ends:\n{}",
                        super::pg::tail(&log_path, 5)
                    ));
                }
            };
            let url = ready
                .api
                .clone()
                .ok_or_else(|| format!("serve's ready line names no API: {ready:?}"))?;
            Ok(App {
                url,
                ready,
                http: reqwest::Client::builder()
                    .timeout(Duration::from_secs(30))
                    .build()
                    .expect("client"),
                child,
                data_dir,
            })
        })
        .await
        .map_err(|e| format!("the start task failed: {e}"))?
    }

    /// `kill -9` of replica `slot`; answers whether it was running.
    pub async fn kill(&self, slot: usize) -> bool {
        let mut guard = self.slots[slot].app.lock().await;
        let Some(app) = guard.take() else {
            return false;
        };
        self.directory[slot]
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .url = None;
        tokio::task::spawn_blocking(move || app.kill9())
            .await
            .expect("reap the replica");
        // Nothing listens at its advertised address any more.
        self.slots[slot].adv_relay.close();
        true
    }

    /// SIGSTOP or SIGCONT to replica `slot`, if it runs.
    pub async fn signal(&self, slot: usize, signal: nix::sys::signal::Signal) {
        if let Some(app) = self.slots[slot].app.lock().await.as_ref() {
            crate::pg::signal(app, signal);
        }
    }

    /// What replica `slot`'s `/healthz` says (None: down or no answer).
    pub async fn health(&self, slot: usize) -> Option<::api::types::Health> {
        health(&self.http, &endpoint(&self.directory, slot)).await
    }

    /// Whether the cluster serves again: every replica runs and answers
    /// `/healthz` 200, exactly one leads and the others follow its
    /// advertised address under its epoch, and a new user is placed
    /// through each replica (the probes are recorded in the history).
    /// Answers the leader's slot, or why not. Without `probes` (before the
    /// pools exist), only `/healthz` is asked.
    pub async fn serving(
        &self,
        history: &History,
        probes: Option<&mut u64>,
    ) -> Result<usize, String> {
        let mut healths = Vec::new();
        for slot in 0..REPLICAS {
            match self.health(slot).await {
                Some(h) if h.status == "ok" => healths.push(h),
                other => return Err(format!("r{slot}: {other:?}")),
            }
        }
        let leaders: Vec<usize> = (0..REPLICAS)
            .filter(|&s| healths[s].role == "leader")
            .collect();
        let [leader] = leaders[..] else {
            return Err(format!("leaders {leaders:?}: {healths:?}"));
        };
        let advertised = format!("http://{}", self.slots[leader].adv_relay.addr);
        for (slot, h) in healths.iter().enumerate() {
            if h.leader.as_deref() != Some(advertised.as_str()) || h.epoch != healths[leader].epoch
            {
                return Err(format!("r{slot} does not follow r{leader}: {h:?}"));
            }
        }
        let Some(probe) = probes else {
            return Ok(leader);
        };
        for slot in 0..REPLICAS {
            *probe += 1;
            let user = format!("probe{probe}@nemesis.test");
            let op = self.probe_connect(history, slot, &user).await;
            if op.placed().is_none() {
                return Err(format!("probe through r{slot}: {op}"));
            }
        }
        Ok(leader)
    }

    async fn probe_connect(&self, history: &History, slot: usize, user: &str) -> Op {
        let req = Req::Connect {
            pool: super::load::PROBE_POOL.into(),
            user: user.into(),
        };
        let e = endpoint(&self.directory, slot);
        let start = history.now();
        let outcome = match &e.url {
            Some(url) => send(&self.http, url, &req).await,
            None => Outcome::Unknown("the replica is down".into()),
        };
        let op = Op {
            index: 0,
            client: PROBE_CLIENT,
            replica: slot,
            incarnation: e.incarnation,
            start,
            end: history.now(),
            req,
            outcome,
        };
        history.record(op.clone());
        op
    }
}

/// `/healthz` of `e`, bounded by [`HEALTH_TIMEOUT`].
pub async fn health(http: &reqwest::Client, e: &Endpoint) -> Option<::api::types::Health> {
    let url = e.url.as_ref()?;
    let answer = tokio::time::timeout(HEALTH_TIMEOUT, async {
        http.get(format!("{url}/healthz"))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()
    })
    .await;
    answer.ok().flatten()
}

/// Sends `req` to the replica at `url` with the admin token and sorts its
/// answer (see [`Outcome`]); the client's own timeout bounds it.
pub async fn send(http: &reqwest::Client, url: &str, req: &Req) -> Outcome {
    let (method, path, body) = match req {
        Req::Connect { pool, user } => (
            reqwest::Method::POST,
            format!("/api/v1/hostPools/{pool}/connect"),
            Some(json!({"user": user})),
        ),
        Req::Logoff { pool, session, .. } => (
            reqwest::Method::DELETE,
            format!("/api/v1/hostPools/{pool}/userSessions/{session}"),
            None,
        ),
        Req::Heartbeat { pool, host } => (
            reqwest::Method::POST,
            format!("/api/v1/hostPools/{pool}/sessionHosts/{host}/heartbeat"),
            Some(json!({"cpuPercent": 20.0, "memoryPercent": 40.0})),
        ),
        Req::Drain {
            pool,
            host,
            allow_new_session,
        } => (
            reqwest::Method::PATCH,
            format!("/api/v1/hostPools/{pool}/sessionHosts/{host}"),
            Some(json!({"allowNewSession": allow_new_session})),
        ),
    };
    let mut request = http
        .request(method, format!("{url}{path}"))
        .bearer_auth(TOKEN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let answer = match request.send().await {
        Ok(a) => a,
        Err(e) => return Outcome::Unknown(error_chain(&e)),
    };
    let status = answer.status().as_u16();
    let text = match answer.text().await {
        Ok(t) => t,
        Err(e) => return Outcome::Unknown(format!("{status}, then {}", error_chain(&e))),
    };
    let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let code = v["error"]["code"].as_str().unwrap_or("").to_string();
    match status {
        200..=299 => match req {
            Req::Connect { .. } => {
                let (Some(session), Some(host)) =
                    (v["sessionId"].as_str(), v["sessionHost"].as_str())
                else {
                    return Outcome::Unknown(format!("{status} without a placement: {text}"));
                };
                Outcome::Ok(Some(Placed {
                    session: session.into(),
                    host: host.into(),
                    reconnect: v["reconnect"] == true,
                }))
            }
            _ => Outcome::Ok(None),
        },
        400..=499 => Outcome::Failed { status, code },
        503 if code == "NoSessionHostAvailable" || code == "SessionHostUnavailable" => {
            Outcome::Failed { status, code }
        }
        _ => Outcome::Unknown(format!("{status} {code}")),
    }
}

/// An error with its causes, short (reqwest's top level says little).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    let mut cut = out.len().min(160);
    while !out.is_char_boundary(cut) {
        cut -= 1;
    }
    out.truncate(cut);
    out
}
