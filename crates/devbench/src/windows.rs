//! `deskbroker-devbench windows-agent`: one watching agent (`deskbroker agent
//! --config`, a child process) over N fake windows_exporters on loopback,
//! against a private broker, at the production interval (15 s).
//!
//! Measured on the agent's process, over whole rounds once every host has
//! registered and been scraped twice: its CPU time over the wall time (in
//! percent of one core, from `/proc/PID/stat`, at the kernel's USER_HZ of
//! 100), its resident memory at the end and at its peak (`/proc/PID/status`,
//! VmRSS and VmHWM), and the wall time of one round (from the first scrape
//! of round k to the last, over every exporter). The baseline is the same
//! agent binary and configuration watching one exporter, measured in the
//! same run for the same time: the ratio is the cost of the other N − 1
//! hosts.
//!
//! Each fake exporter answers what windows_exporter 0.31 writes for a
//! 4-core host with 20 sessions and the `cpu`, `memory`, `logical_disk`
//! and `terminal_services` collectors, plus 300 series of a collector the
//! agent does not read (about 600 lines, 60 KB), with CPU counters that
//! move at every scrape.

use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::Deskbroker;
use deskbroker::benchkit::broker::{Broker, PrivateBroker, spawn_child};
use deskbroker::benchkit::round3;

/// Flags of `deskbroker-devbench windows-agent`.
#[derive(clap::Args, Debug, Clone)]
pub struct WindowsAgentArgs {
    /// Fake exporters (watched hosts).
    #[arg(long, default_value_t = 1000)]
    pub hosts: usize,
    /// Seconds between two scrapes of a host.
    #[arg(long, default_value_t = 15)]
    pub interval: u64,
    /// Whole rounds to measure over.
    #[arg(long, default_value_t = 4)]
    pub rounds: u32,
    /// Measure what hostile hosts cost: every exporter of the measured run
    /// pads its answer to nearly the agent's 4 MiB bound with session
    /// series of 28 short labels the agent does not read (31 in all, within
    /// its bound of 32). The baseline is then the same number of hosts
    /// answering as usual.
    #[arg(long)]
    pub hostile: bool,
}

/// How far a hostile answer is padded: just under the agent's bound on
/// an answer (4 MiB).
const HOSTILE_ANSWER_BYTES: usize = 4 * 1024 * 1024 - 64 * 1024;

/// What one measured run gave.
#[derive(Debug, Clone)]
struct Figures {
    hosts: usize,
    cpu_percent: f64,
    rss_mb: f64,
    peak_rss_mb: f64,
    round_seconds: f64,
    reporting: usize,
}

/// When each exporter was scraped.
type Scrapes = Arc<Mutex<Vec<Vec<Instant>>>>;

/// The text of host `host`'s answer; `tick` moves the CPU counters. Each
/// host has users of its own, as a real farm does. A `hostile` answer is
/// padded to [`HOSTILE_ANSWER_BYTES`] with session series of many short
/// labels (values of 0: sessions in no state).
fn body(host: usize, tick: u64, hostile: bool) -> String {
    let mut w = String::with_capacity(64 * 1024);
    let t = tick as f64;
    w.push_str("# HELP windows_cpu_time_total Time that processor spent in different modes (dpc, idle, interrupt, privileged, user)\n# TYPE windows_cpu_time_total counter\n");
    for core in 0..4 {
        for (mode, rate) in [
            ("dpc", 0.01),
            ("idle", 9.0),
            ("interrupt", 0.02),
            ("privileged", 1.5),
            ("user", 4.5),
        ] {
            let _ = writeln!(
                w,
                "windows_cpu_time_total{{core=\"0,{core}\",mode=\"{mode}\"}} {}",
                1000.0 + rate * t
            );
        }
    }
    w.push_str("# HELP windows_exporter_build_info A metric with a constant '1' value.\n# TYPE windows_exporter_build_info gauge\n");
    w.push_str("windows_exporter_build_info{branch=\"HEAD\",goarch=\"amd64\",goos=\"windows\",goversion=\"go1.24.5\",revision=\"0\",tags=\"unknown\",version=\"0.31.1\"} 1\n");
    for (name, v) in [
        ("windows_exporter_collector_success", 1),
        ("windows_exporter_collector_timeout", 0),
    ] {
        let _ = writeln!(w, "# HELP {name} windows_exporter.\n# TYPE {name} gauge");
        for c in [
            "cpu",
            "logical_disk",
            "memory",
            "service",
            "terminal_services",
        ] {
            let _ = writeln!(w, "{name}{{collector=\"{c}\"}} {v}");
        }
    }
    for (name, v) in [
        ("windows_logical_disk_reads_total", 100.0 * t),
        ("windows_logical_disk_read_seconds_total", 0.3 * t),
        ("windows_logical_disk_requests_queued", 1.0),
        ("windows_logical_disk_write_seconds_total", 0.2 * t),
        ("windows_logical_disk_writes_total", 50.0 * t),
    ] {
        let _ = writeln!(w, "# HELP {name} x\n# TYPE {name} gauge");
        for volume in ["C:", "HarddiskVolume1"] {
            let _ = writeln!(w, "{name}{{volume=\"{volume}\"}} {v}");
        }
    }
    w.push_str("windows_memory_available_bytes 6.442450944e+09\nwindows_memory_physical_total_bytes 1.7179869184e+10\n");
    for i in 0..300 {
        let _ = writeln!(
            w,
            "windows_service_state{{name=\"service{i}\",state=\"running\"}} 1"
        );
    }
    w.push_str("# HELP windows_terminal_services_session_info Terminal Services sessions info\n# TYPE windows_terminal_services_session_info gauge\n");
    let states = [
        "active",
        "connect_query",
        "connected",
        "disconnected",
        "down",
        "idle",
        "init",
        "listen",
        "reset",
        "shadow",
    ];
    for id in 2..22 {
        let state = if id % 4 == 0 {
            "disconnected"
        } else {
            "active"
        };
        for s in states {
            let _ = writeln!(
                w,
                "windows_terminal_services_session_info{{host=\"\",id=\"{id}\",session_name=\"RDP-Tcp {id}\",state=\"{s}\",user=\"CONTOSO\\\\w{host}u{id}\"}} {}",
                u8::from(s == state)
            );
        }
    }
    if hostile {
        // Many short labels: what costs a parser that keeps every label
        // most (two strings each), within the agent's bound of 32 labels.
        let labels: String = (0..28).map(|l| format!(",l{l:02}=\"\"")).collect();
        let mut id = 1_000_000;
        while w.len() < HOSTILE_ANSWER_BYTES - 4096 {
            let _ = writeln!(
                w,
                "windows_terminal_services_session_info{{id=\"{id}\",state=\"active\",user=\"p{id}\"{labels}}} 0"
            );
            id += 1;
        }
    }
    w
}

/// Starts `n` fake exporters; answers their URLs and the tasks to abort.
async fn exporters(
    n: usize,
    scrapes: &Scrapes,
    hostile: bool,
) -> anyhow::Result<(Vec<String>, Vec<tokio::task::JoinHandle<()>>)> {
    let mut urls = Vec::with_capacity(n);
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("cannot bind a fake exporter")?;
        urls.push(format!("http://{}/metrics", listener.local_addr()?));
        let scrapes = scrapes.clone();
        tasks.push(tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let scrapes = scrapes.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 2048];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let tick = {
                        let mut s = scrapes.lock().expect("scrapes");
                        s[i].push(Instant::now());
                        s[i].len() as u64
                    };
                    let text = body(i, tick, hostile);
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
                         Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
                        text.len()
                    );
                    let _ = socket.write_all(answer.as_bytes()).await;
                    let _ = socket.shutdown().await;
                });
            }
        }));
    }
    Ok((urls, tasks))
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command's closing parenthesis; utime and stime are
    // the 14th and 15th of the line, the 12th and 13th after it.
    let rest = stat.rsplit_once(')').context("unreadable stat")?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Ok(f[11].parse::<u64>()? + f[12].parse::<u64>()?)
}

/// VmRSS and VmHWM of `pid`, in MB.
fn memory_mb(pid: u32) -> anyhow::Result<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> f64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    Ok((field("VmRSS:"), field("VmHWM:")))
}

/// One measured run: `n` exporters watched by one agent.
async fn measure(
    program: &Path,
    broker: &PrivateBroker,
    client: &Broker,
    pool: &str,
    n: usize,
    hostile: bool,
    args: &WindowsAgentArgs,
) -> anyhow::Result<Figures> {
    client
        .replace_pool(
            pool,
            &json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                    "heartbeatTimeoutSeconds": 600}),
        )
        .await?;
    let token = client.registration_token(pool, n).await?;
    let scrapes: Scrapes = Arc::new(Mutex::new(vec![Vec::new(); n]));
    let (urls, tasks) = exporters(n, &scrapes, hostile).await?;
    let dir = tempfile::tempdir()?;
    let mut config = format!(
        "broker = \"{}\"\nhost_pool = \"{pool}\"\nregistration_token = \"{token}\"\n\
         state_dir = \"{}\"\ninterval = {}\n\n[domains]\nCONTOSO = \"contoso.com\"\n",
        broker.url,
        dir.path().join("state").display(),
        args.interval
    );
    for (i, url) in urls.iter().enumerate() {
        let _ = write!(
            config,
            "\n[[windows_host]]\nname = \"w{i}\"\naddress = \"10.{}.{}.{}:3389\"\nmetrics_url = \"{url}\"\n",
            i / 65536,
            (i / 256) % 256,
            i % 256
        );
    }
    let path = dir.path().join("agent.toml");
    std::fs::write(&path, config)?;
    // It holds the registration token: the agent takes it only when no
    // other user may read it.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    let mut command = tokio::process::Command::new(program);
    command.args(["agent", "--config"]).arg(&path);
    let (mut agent, _lines) = spawn_child(command, "the watching agent")?;
    let pid = agent.id().context("the agent exited at once")?;

    // Warm up: every host scraped twice (registered, CPU window started).
    let warm = |k: usize| {
        let s = scrapes.lock().expect("scrapes");
        s.iter().all(|v| v.len() >= k)
    };
    let deadline = Instant::now() + Duration::from_secs(args.interval * 10 + 120);
    while !warm(2) {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the agent did not scrape every exporter twice in time"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let start_round = scrapes
        .lock()
        .expect("scrapes")
        .iter()
        .map(Vec::len)
        .max()
        .unwrap_or(0);
    let t0 = Instant::now();
    let c0 = cpu_ticks(pid)?;
    tokio::time::sleep(Duration::from_secs(args.interval * u64::from(args.rounds))).await;
    let c1 = cpu_ticks(pid)?;
    let wall = t0.elapsed().as_secs_f64();
    let (rss_mb, peak_rss_mb) = memory_mb(pid)?;

    // Round k: from its first scrape to its last, over every exporter.
    let round_seconds = {
        let s = scrapes.lock().expect("scrapes");
        (start_round..start_round + args.rounds as usize)
            .filter_map(|k| {
                let times: Vec<Instant> = s.iter().filter_map(|v| v.get(k).copied()).collect();
                (times.len() == n).then(|| {
                    let first = times.iter().min().expect("n > 0");
                    let last = times.iter().max().expect("n > 0");
                    last.duration_since(*first).as_secs_f64()
                })
            })
            .fold(0.0, f64::max)
    };
    let reporting = client
        .hosts(pool)
        .await?
        .iter()
        .filter(|h| h["status"] == "Available" && !h["lastHeartBeat"].is_null())
        .count();

    if let Ok(pid) = i32::try_from(pid)
        && pid > 0
    {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    let _ = tokio::time::timeout(Duration::from_secs(10), agent.wait()).await;
    let _ = agent.kill().await;
    for t in tasks {
        t.abort();
    }
    Ok(Figures {
        hosts: n,
        // USER_HZ is 100 on Linux.
        cpu_percent: round3(100.0 * (c1 - c0) as f64 / 100.0 / wall),
        rss_mb: round3(rss_mb),
        peak_rss_mb: round3(peak_rss_mb),
        round_seconds: round3(round_seconds),
        reporting,
    })
}

pub async fn run(deskbroker: &Deskbroker, args: WindowsAgentArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.hosts >= 1, "--hosts must be at least 1");
    anyhow::ensure!(args.interval >= 5, "--interval must be at least 5");
    anyhow::ensure!(args.rounds >= 1, "--rounds must be at least 1");
    let program = deskbroker.path()?;
    let broker = PrivateBroker::start(&program, None, &[]).await?;
    let client = broker.client()?;
    // The baseline: one host, or with --hostile as many hosts answering
    // as usual.
    let (base_hosts, base_name) = if args.hostile {
        (args.hosts, format!("{} usual hosts", args.hosts))
    } else {
        (1, "1 host".to_string())
    };
    let baseline = measure(
        &program,
        &broker,
        &client,
        "bench-win-one",
        base_hosts,
        false,
        &args,
    )
    .await?;
    let full = measure(
        &program,
        &broker,
        &client,
        "bench-win",
        args.hosts,
        args.hostile,
        &args,
    )
    .await?;
    broker.stop().await;
    let ratio = |a: f64, b: f64| {
        if b > 0.0 {
            format!("{:.1}", a / b)
        } else {
            "-".into()
        }
    };
    println!(
        "{:<34} {:>12} {:>12} {:>8}",
        "measure",
        format!(
            "{} {}hosts",
            full.hosts,
            if args.hostile { "hostile " } else { "" }
        ),
        base_name,
        "ratio"
    );
    for (what, a, b) in [
        (
            "agent CPU, % of one core",
            full.cpu_percent,
            baseline.cpu_percent,
        ),
        ("agent resident memory, MB", full.rss_mb, baseline.rss_mb),
        (
            "agent peak resident memory, MB",
            full.peak_rss_mb,
            baseline.peak_rss_mb,
        ),
        (
            "wall time of one round, s",
            full.round_seconds,
            baseline.round_seconds,
        ),
    ] {
        println!("{what:<34} {a:>12} {b:>12} {:>8}", ratio(a, b));
    }
    println!(
        "hosts Available with heartbeats: {} of {} (baseline {} of {}); interval {} s, {} rounds",
        full.reporting, full.hosts, baseline.reporting, baseline.hosts, args.interval, args.rounds
    );
    Ok(())
}
