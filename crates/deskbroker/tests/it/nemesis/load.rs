//! The mixed load: a few clients at once, each sending connects (two
//! pooled pools with session limits, a personal `Persistent` pool),
//! logoffs of sessions it was told of, heartbeats and drains, each to a
//! replica picked at random, at a steady pace whatever the answers take
//! (a frozen replica holds only the requests sent to it), every request
//! bounded by [`OP_TIMEOUT`], and every one recorded in the history. Users come from a small fixed set,
//! so the same user reconnects often (rule S1 is exercised all the time),
//! sometimes spelled in upper case (users compare without case).
//!
//! The pools never end a session by themselves during a run (pending and
//! heartbeat timeouts of a day, no disconnected timeout, no lifetime), so
//! a session ends only by a logoff the history records: the checker
//! relies on it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use serde_json::json;
use tokio::sync::Semaphore;

use super::brokers::{Directory, REPLICAS, endpoint, send};
use super::history::{History, Op, Outcome, Req};
use crate::App;

/// Every load request is answered or given up within this (longer than
/// a replica's wait for a leader, 5 s, so that its 503 is seen).
pub const OP_TIMEOUT: Duration = Duration::from_secs(10);
/// Requests under way at once, of all clients together.
pub const MAX_IN_FLIGHT: usize = 256;
/// The pool of the nemesis's probes (no limit, never loaded otherwise).
pub const PROBE_POOL: &str = "probe";

#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Pooled {
        load_balancer: &'static str,
        limit: usize,
    },
    Personal,
}

#[derive(Clone, Copy, Debug)]
pub struct PoolSpec {
    pub name: &'static str,
    pub kind: Kind,
    pub hosts: usize,
    /// Users drawn from, more than the seats, so that limits are reached.
    pub users: usize,
}

/// The loaded pools: 24 seats for 40 users in each pooled pool, 12 desks
/// for 16 users in the personal one.
pub const POOLS: [PoolSpec; 3] = [
    PoolSpec {
        name: "bf",
        kind: Kind::Pooled {
            load_balancer: "BreadthFirst",
            limit: 3,
        },
        hosts: 8,
        users: 40,
    },
    PoolSpec {
        name: "df",
        kind: Kind::Pooled {
            load_balancer: "DepthFirst",
            limit: 4,
        },
        hosts: 6,
        users: 40,
    },
    PoolSpec {
        name: "desks",
        kind: Kind::Personal,
        hosts: 12,
        users: 16,
    },
];

pub fn host_name(i: usize) -> String {
    format!("h{i}")
}

pub fn user_name(i: usize) -> String {
    format!("user{i}@nemesis.test")
}

/// The settings every loaded pool gets on top of its kind: nothing ends a
/// session but a logoff during the run.
fn timeouts() -> serde_json::Value {
    json!({"pendingTimeoutSeconds": 86400, "heartbeatTimeoutSeconds": 86400,
           "disconnectedTimeoutSeconds": 0, "maxSessionLifetimeSeconds": 0})
}

/// Creates the pools and their hosts through `app` (before any fault).
pub async fn setup(app: &App) {
    let probe = PoolSpec {
        name: PROBE_POOL,
        kind: Kind::Pooled {
            load_balancer: "BreadthFirst",
            limit: 999_999,
        },
        hosts: 2,
        users: 0,
    };
    for (p, spec) in POOLS.iter().chain([&probe]).enumerate() {
        let mut body = timeouts();
        let fields = match spec.kind {
            Kind::Pooled {
                load_balancer,
                limit,
            } => json!({"hostPoolType": "Pooled", "loadBalancerType": load_balancer,
                        "maxSessionLimit": limit}),
            Kind::Personal => json!({"hostPoolType": "Personal",
                                     "loadBalancerType": "Persistent",
                                     "personalDesktopAssignmentType": "Automatic"}),
        };
        for (k, v) in fields.as_object().expect("object") {
            body[k] = v.clone();
        }
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/{}", spec.name),
            Some(body),
            201,
        )
        .await;
        for i in 1..=spec.hosts {
            app.ok(
                "PUT",
                &format!(
                    "/api/v1/hostPools/{}/sessionHosts/{}",
                    spec.name,
                    host_name(i)
                ),
                Some(json!({"address": format!("10.{p}.0.{i}:3389")})),
                201,
            )
            .await;
        }
    }
}

/// The running clients.
pub struct Load {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicUsize>,
    in_flight: Arc<Semaphore>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Sessions the clients were told of, by (pool, user index): what a
/// logoff picks from.
type Known = Arc<Mutex<HashMap<(usize, usize), String>>>;

impl Load {
    /// Starts `clients` clients; client `c` draws its operations from a
    /// generator seeded with `seed` and `c`, and sends one about every
    /// `gap` (see [`Client::run`]).
    pub fn start(
        seed: u64,
        clients: usize,
        gap: Duration,
        directory: Directory,
        history: Arc<History>,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicUsize::new(0));
        let known: Known = Arc::default();
        let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
        let http = reqwest::Client::builder()
            .timeout(OP_TIMEOUT)
            .connect_timeout(Duration::from_secs(2))
            .pool_idle_timeout(Duration::from_secs(5))
            .build()
            .expect("client");
        let tasks = (0..clients)
            .map(|c| {
                let client = Client {
                    id: c as u32,
                    rng: Xoshiro256PlusPlus::seed_from_u64(
                        seed ^ (c as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    ),
                    http: http.clone(),
                    directory: directory.clone(),
                    history: history.clone(),
                    known: known.clone(),
                    gap,
                    in_flight: in_flight.clone(),
                    done: done.clone(),
                };
                tokio::spawn(client.run(stop.clone()))
            })
            .collect();
        Load {
            stop,
            done,
            in_flight,
            tasks,
        }
    }

    /// Operations answered (or given up) so far.
    pub fn ops(&self) -> usize {
        self.done.load(Ordering::SeqCst)
    }

    /// Stops the clients once their requests under way are answered or
    /// time out.
    pub async fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.tasks {
            t.await.expect("a load client panicked");
        }
        let all = u32::try_from(MAX_IN_FLIGHT).expect("a small bound");
        let _ = self.in_flight.acquire_many(all).await;
    }
}

struct Client {
    id: u32,
    rng: Xoshiro256PlusPlus,
    http: reqwest::Client,
    directory: Directory,
    history: Arc<History>,
    known: Known,
    gap: Duration,
    in_flight: Arc<Semaphore>,
    done: Arc<AtomicUsize>,
}

impl Client {
    /// Sends a request about every `gap` (between none and twice that),
    /// without waiting for the answers: a request to a replica that does
    /// not answer (frozen, or behind a stalled link) holds only itself, as
    /// it would for one user among many, and the others go on. At most
    /// [`MAX_IN_FLIGHT`] of all clients' requests are under way at once;
    /// beyond it a request is not sent.
    async fn run(mut self, stop: Arc<AtomicBool>) {
        while !stop.load(Ordering::SeqCst) {
            let pause = self.gap.mul_f64(self.rng.random_range(0.0..2.0));
            tokio::time::sleep(pause).await;
            let slot = self.rng.random_range(0..REPLICAS);
            let (req, key) = self.next_request();
            let e = endpoint(&self.directory, slot);
            // Killed: a client would be refused at once; it asks another.
            let Some(url) = e.url.clone() else { continue };
            let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
                continue;
            };
            let (id, http, history, known, done) = (
                self.id,
                self.http.clone(),
                self.history.clone(),
                self.known.clone(),
                self.done.clone(),
            );
            tokio::spawn(async move {
                let _permit = permit;
                let start = history.now();
                let outcome = tokio::time::timeout(OP_TIMEOUT, send(&http, &url, &req))
                    .await
                    .unwrap_or_else(|_| Outcome::Unknown("no answer in time".into()));
                let end = history.now();
                learn(&known, &req, key, &outcome);
                history.record(Op {
                    index: 0,
                    client: id,
                    replica: slot,
                    incarnation: e.incarnation,
                    start,
                    end,
                    req,
                    outcome,
                });
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
    }

    /// The next operation, and the (pool, user) it is about.
    fn next_request(&mut self) -> (Req, (usize, usize)) {
        let roll = self.rng.random_range(0..100u32);
        let p = if roll < 10 {
            2 // the personal pool
        } else {
            self.rng.random_range(0..2usize)
        };
        let spec = &POOLS[p];
        let u = self.rng.random_range(0..spec.users);
        let pool = spec.name.to_string();
        let host = host_name(self.rng.random_range(1..=spec.hosts));
        match roll {
            // A logoff of a session some client was told of.
            50..75 => {
                let session = self
                    .known
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&(p, u))
                    .cloned();
                if let Some(session) = session {
                    let user = user_name(u);
                    return (
                        Req::Logoff {
                            pool,
                            user,
                            session,
                        },
                        (p, u),
                    );
                }
            }
            75..88 => return (Req::Heartbeat { pool, host }, (p, u)),
            88..100 => {
                let allow_new_session = self.rng.random_bool(0.65);
                return (
                    Req::Drain {
                        pool,
                        host,
                        allow_new_session,
                    },
                    (p, u),
                );
            }
            _ => {}
        }
        let mut user = user_name(u);
        if self.rng.random_bool(0.125) {
            user = user.to_ascii_uppercase();
        }
        (Req::Connect { pool, user }, (p, u))
    }
}

/// Remembers the sessions placed and forgets those logged off.
fn learn(known: &Known, req: &Req, key: (usize, usize), outcome: &Outcome) {
    let mut known = known.lock().unwrap_or_else(|e| e.into_inner());
    match (req, outcome) {
        (Req::Connect { .. }, Outcome::Ok(Some(placed))) => {
            known.insert(key, placed.session.clone());
        }
        (Req::Logoff { session, .. }, Outcome::Ok(_))
        | (Req::Logoff { session, .. }, Outcome::Failed { status: 404, .. })
            if known.get(&key) == Some(session) =>
        {
            known.remove(&key);
        }
        _ => {}
    }
}
