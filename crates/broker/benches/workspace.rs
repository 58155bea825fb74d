//! What a user's workspace costs the broker when it publishes many
//! applications, each against `GET /healthz` through the same router in
//! the same run (the baseline: what any request costs):
//!
//! - `GET /api/v1/users/alice@contoso.com/workspace?groups=Staff` for a
//!   user given 500 applications in 50 pools (10 a pool, every other one
//!   with a 32×32 PNG icon), given by one RemoteApp application group a
//!   pool assigned to `Staff`, a group the caller vouches for (no
//!   directory);
//! - the same for a user given nothing (every pool is still looked at);
//! - `Workspace::published_to` alone, the decision every door reads;
//! - the same user's workspace feed as its RD Gateway gets it from a
//!   broker (`GET /api/v1/users/alice@contoso.com/feed`: the 500
//!   applications, each pool's route, the list's digest checked against
//!   the user's stamp), and as the gateway serves it: that list made into
//!   the MS-TSWP document (`gateway::feed::workspace_of`, every resource
//!   checked) and rendered in schema 2.0, the whole of a feed request but
//!   its sign-in.
//!
//! And a storm: [`SUBSCRIBERS`] users, each given the 500 applications by
//! name, refreshing their feeds at once (every request spawned together on
//! the runtime's two workers, as clients on the default schedule bunch),
//! against a storm of as many `GET /healthz` through the same router in
//! the same run; each storm's time is one sample.
//!
//! The broker runs in process on the memory store (`broker::testkit`),
//! warm: everything is made through the API before anything is timed, and
//! each answer is checked once before its benchmark. `/healthz` is
//! measured first and last, so that the machine's drift shows.
//!
//! Criterion reports the mean of each benchmark and its interval. Every
//! call is also timed on its own, and each benchmark ends with a line of
//! its single calls' percentiles (`p50`, `p99`, the slowest), warm-up
//! included, for the tail criterion does not give.
//!
//! `cargo bench -p broker --bench workspace`

use std::hint::black_box;
use std::time::{Duration, Instant};

use api::feed::SchemaVersion;
use base64::Engine as _;
use broker::testkit::{ADMIN_TOKEN, Kit};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use tokio::runtime::Runtime;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const POOLS: usize = 50;
const APPLICATIONS_PER_POOL: usize = 10;
/// The user given every application, through the group they claim.
const USER: &str = "alice@contoso.com";
const GROUP: &str = "Staff";
/// A user no group names: given nothing.
const NOBODY: &str = "bob@contoso.com";
/// The users of the storm, each given every application by name.
const SUBSCRIBERS: usize = 1000;
/// The most single-call times kept a benchmark (the latest ones): 16 MiB.
const MAX_TIMES: usize = 1 << 20;

/// A 32×32 RGBA PNG in base64, as an application's `iconPng`.
fn icon_png() -> String {
    let side = 32u32;
    let pixels: Vec<u8> = (0..side * side)
        .flat_map(|i| [(i % side * 8) as u8, (i / side * 8) as u8, 0x80, 0xff])
        .collect();
    let mut bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut bytes, side, side);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().expect("a PNG header");
    writer.write_image_data(&pixels).expect("a PNG's pixels");
    writer.finish().expect("a whole PNG");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A broker with an RDP front door and [`POOLS`] pools of two hosts, each
/// publishing [`APPLICATIONS_PER_POOL`] applications that one RemoteApp
/// group gives to [`GROUP`] and to [`USER`] by name (the feed, without a
/// directory, knows no groups), all made through the API.
async fn farm() -> Kit {
    farm_for(&[USER]).await
}

/// [`farm`], its groups naming `users`.
async fn farm_for(users: &[&str]) -> Kit {
    let kit = Kit::open_with(|s| s.rdp_front_door = Some("door.example:3389".into())).await;
    let icon = icon_png();
    for p in 0..POOLS {
        let pool = format!("pool{p:02}");
        kit.pool_with_hosts(&pool, "BreadthFirst", 10, 2).await;
        let mut aliases = Vec::new();
        for a in 0..APPLICATIONS_PER_POOL {
            let alias = format!("app{a}");
            let mut body = json!({
                "displayName": format!("Application {p}.{a}"),
                "program": format!("C:\\Program Files\\Vendor {a}\\app{a}.exe"),
                "fileExtensions": [format!(".p{p}a{a}")],
                "folder": format!("Folder {}", a % 3),
            });
            if a % 2 == 0 {
                body["iconPng"] = json!(icon);
            }
            let path = format!("/api/v1/hostPools/{pool}/applications/{alias}");
            kit.ok("PUT", &path, Some(body), 201).await;
            aliases.push(alias);
        }
        let group = json!({"hostPool": pool, "kind": "RemoteApp", "applications": aliases,
                           "assignedGroups": [GROUP], "assignedUsers": users});
        let path = format!("/api/v1/applicationGroups/{pool}-apps");
        kit.ok("PUT", &path, Some(group), 201).await;
    }
    kit
}

/// Single-call times of one benchmark: the latest [`MAX_TIMES`].
#[derive(Default)]
struct Times {
    times: Vec<Duration>,
    next: usize,
}

impl Times {
    fn record(&mut self, took: Duration) {
        if self.times.len() < MAX_TIMES {
            self.times.push(took);
        } else {
            self.times[self.next] = took;
        }
        self.next = (self.next + 1) % MAX_TIMES;
    }

    /// Prints `name`'s p50, p99 and slowest call.
    fn report(mut self, name: &str) {
        if self.times.is_empty() {
            return;
        }
        self.times.sort_unstable();
        let at = |q: f64| self.times[((self.times.len() - 1) as f64 * q).round() as usize];
        println!(
            "{name}: single calls p50 {:.2?}, p99 {:.2?}, slowest {:.2?} ({} calls)",
            at(0.5),
            at(0.99),
            at(1.0),
            self.times.len()
        );
    }
}

/// `GET path` through the kit's router as the admin, asserting a 200: the body.
async fn get(kit: &Kit, path: &str) -> Vec<u8> {
    let (status, body) = kit.request(Some(ADMIN_TOKEN), "GET", path, None).await;
    assert_eq!(
        status,
        200,
        "GET {path}: {}",
        String::from_utf8_lossy(&body)
    );
    body
}

/// Benchmarks `GET path` as `name`, each call timed on its own.
fn bench_get(c: &mut Criterion, rt: &Runtime, kit: &Kit, name: &str, path: &str) {
    let mut times = Times::default();
    c.bench_function(name, |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    black_box(get(kit, black_box(path)).await);
                    let took = start.elapsed();
                    total += took;
                    times.record(took);
                }
                total
            })
        })
    });
    times.report(name);
}

/// Benchmarks `f` as `name`, each call timed on its own.
fn bench_call<T>(c: &mut Criterion, name: &str, mut f: impl FnMut() -> T) {
    let mut times = Times::default();
    c.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                black_box(f());
                let took = start.elapsed();
                total += took;
                times.record(took);
            }
            total
        })
    });
    times.report(name);
}

fn workspace(c: &mut Criterion) {
    let rt = Runtime::new().expect("a tokio runtime");
    let kit = rt.block_on(farm());
    let given = format!("/api/v1/users/{USER}/workspace?groups={GROUP}");
    let nothing = format!("/api/v1/users/{NOBODY}/workspace");

    // What is timed is what the bench says: checked once, before.
    let answer: serde_json::Value =
        serde_json::from_slice(&rt.block_on(get(&kit, &given))).expect("JSON");
    let pools = answer["value"].as_array().expect("a list of pools");
    let apps: usize = pools
        .iter()
        .map(|p| p["applications"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!((pools.len(), apps), (POOLS, POOLS * APPLICATIONS_PER_POOL));
    let answer: serde_json::Value =
        serde_json::from_slice(&rt.block_on(get(&kit, &nothing))).expect("JSON");
    assert_eq!(answer["value"], json!([]), "{NOBODY} is given nothing");
    let workspace = kit.broker().workspace().clone();
    let groups = vec![GROUP.to_string()];
    let feed_path = format!("/api/v1/users/{USER}/feed");
    let listed: api::types::FeedOutput =
        serde_json::from_slice(&rt.block_on(get(&kit, &feed_path))).expect("JSON");
    assert_eq!(listed.resources.len(), POOLS * APPLICATIONS_PER_POOL);
    let broker = kit.broker().clone();
    let served = || async {
        let listed = broker::feed::feed(&broker, USER).await.expect("a feed");
        let feed = gateway::feed::workspace_of(&listed, "gw.example", listed.last_updated_ms)
            .expect("a workspace");
        api::feed::render(&feed, SchemaVersion::V2_0)
    };
    let xml = rt.block_on(served());
    assert_eq!(
        xml.matches("<Icon32 ").count(),
        POOLS * APPLICATIONS_PER_POOL / 2,
        "an Icon32 for every application with an icon"
    );
    assert_eq!(
        xml.matches("<Resource ").count(),
        POOLS * APPLICATIONS_PER_POOL
    );
    println!(
        "workspace: {} bytes of JSON for {USER}; the feed: {} bytes of XML",
        rt.block_on(get(&kit, &given)).len(),
        xml.len()
    );

    bench_get(c, &rt, &kit, "healthz (baseline, first)", "/healthz");
    bench_get(c, &rt, &kit, "workspace/500 applications", &given);
    bench_get(c, &rt, &kit, "workspace/nothing given", &nothing);
    bench_call(c, "published_to/500 applications", || {
        workspace.published_to(USER, &groups)
    });
    bench_get(
        c,
        &rt,
        &kit,
        "feed/listed for the gateway (API)",
        &feed_path,
    );
    bench_call(c, "feed/served (2.0), but the sign-in", || {
        rt.block_on(served())
    });
    bench_get(c, &rt, &kit, "healthz (baseline, last)", "/healthz");
}

/// The storm: every subscriber's feed served at once, against as many
/// `/healthz` at once.
fn storm(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let users: Vec<String> = (0..SUBSCRIBERS)
        .map(|i| format!("user{i:04}@contoso.com"))
        .collect();
    let names: Vec<&str> = users.iter().map(String::as_str).collect();
    let kit = std::sync::Arc::new(rt.block_on(farm_for(&names)));
    let users = std::sync::Arc::new(users);
    // One request of the storm: a feed served, or `/healthz`.
    async fn one(kit: std::sync::Arc<Kit>, user: Option<String>) -> usize {
        match user {
            Some(user) => {
                let broker = kit.broker();
                let listed = broker::feed::feed(broker, &user).await.expect("a feed");
                let feed =
                    gateway::feed::workspace_of(&listed, "gw.example", 0).expect("a workspace");
                api::feed::render(&feed, SchemaVersion::V2_0).len()
            }
            None => get(&kit, "/healthz").await.len(),
        }
    }
    let storm_of = |feeds: bool| {
        let (kit, users) = (kit.clone(), users.clone());
        rt.block_on(async move {
            let mut tasks = tokio::task::JoinSet::new();
            for user in users.iter() {
                tasks.spawn(one(kit.clone(), feeds.then(|| user.clone())));
            }
            let mut bytes = 0;
            while let Some(done) = tasks.join_next().await {
                bytes += done.expect("a request");
            }
            bytes
        })
    };
    // Warm: every subscriber's stamp is recorded by the first storm, and
    // each feed lists the 500 applications.
    let bytes = storm_of(true);
    assert!(bytes > SUBSCRIBERS * 400_000, "{bytes} bytes");
    for (name, feeds) in [
        ("storm/1000 healthz at once (baseline)", false),
        ("storm/1000 feeds at once", true),
    ] {
        c.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(storm_of(feeds));
                }
                start.elapsed()
            })
        });
    }
}

criterion_group! {
    name = storms;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(10));
    targets = storm
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = workspace
}
criterion_main!(benches, storms);
