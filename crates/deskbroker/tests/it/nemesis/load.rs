//! The mixed load: a few clients at once, each sending connects (two
//! pooled pools with session limits, a personal `Persistent` pool),
//! logoffs of sessions it was told of, heartbeats and drains, each to a
//! replica picked at random, every request bounded by [`OP_TIMEOUT`], and
//! every one recorded in the history. Users come from a small fixed set,
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

use super::brokers::{Directory, REPLICAS, endpoint, send};
use super::history::{History, Op, Outcome, Req};
use crate::App;

/// Every load request is answered or given up within this (longer than
/// a replica's wait for a leader, 5 s, so that its 503 is seen).
pub const OP_TIMEOUT: Duration = Duration::from_secs(10);
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
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Sessions the clients were told of, by (pool, user index): what a
/// logoff picks from.
type Known = Arc<Mutex<HashMap<(usize, usize), String>>>;

impl Load {
    /// Starts `clients` clients; client `c` draws its operations from a
    /// generator seeded with `seed` and `c`, and pauses about `think`
    /// between two of them.
    pub fn start(
        seed: u64,
        clients: usize,
        think: Duration,
        directory: Directory,
        history: Arc<History>,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicUsize::new(0));
        let known: Known = Arc::default();
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
                    think,
                };
                tokio::spawn(client.run(stop.clone(), done.clone()))
            })
            .collect();
        Load { stop, done, tasks }
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
    }
}

struct Client {
    id: u32,
    rng: Xoshiro256PlusPlus,
    http: reqwest::Client,
    directory: Directory,
    history: Arc<History>,
    known: Known,
    think: Duration,
}

impl Client {
    async fn run(mut self, stop: Arc<AtomicBool>, done: Arc<AtomicUsize>) {
        while !stop.load(Ordering::SeqCst) {
            let slot = self.rng.random_range(0..REPLICAS);
            let (req, key) = self.next_request();
            let e = endpoint(&self.directory, slot);
            let Some(url) = &e.url else {
                // Killed: a client would be refused at once; ask another.
                tokio::time::sleep(self.think).await;
                continue;
            };
            let start = self.history.now();
            let outcome = tokio::time::timeout(OP_TIMEOUT, send(&self.http, url, &req))
                .await
                .unwrap_or_else(|_| Outcome::Unknown("no answer in time".into()));
            let end = self.history.now();
            self.learn(&req, key, &outcome);
            self.history.record(Op {
                index: 0,
                client: self.id,
                replica: slot,
                incarnation: e.incarnation,
                start,
                end,
                req,
                outcome,
            });
            done.fetch_add(1, Ordering::SeqCst);
            let pause = self.think.mul_f64(self.rng.random_range(0.0..2.0));
            tokio::time::sleep(pause).await;
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

    /// Remembers the sessions placed and forgets those logged off.
    fn learn(&self, req: &Req, key: (usize, usize), outcome: &Outcome) {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
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
}
