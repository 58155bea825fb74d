//! A fake windows_exporter, as the Windows tests need one: `/metrics` as
//! windows_exporter 0.31 writes it (the ten
//! `windows_terminal_services_session_info` series per session, labels
//! sorted as the Prometheus client library sorts them; the collector
//! success and timeout gauges; `windows_exporter_build_info`; CPU counters
//! that move at every scrape), or silence, garbage or a redirect; and the
//! watching agent, killed when dropped.

use crate::{BEAT, eventually};
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// How a fake exporter answers.
#[derive(Clone, PartialEq, Debug)]
pub(super) enum Mode {
    Normal,
    /// Accepts the connection and never answers.
    Silent,
    /// 200 with text that is not the exposition format.
    Garbage,
    /// 302 to this URL.
    Redirect(&'static str),
}

#[derive(Clone, Debug)]
pub(super) struct Session {
    pub(super) id: u32,
    pub(super) name: &'static str,
    pub(super) user: &'static str,
    pub(super) state: &'static str,
}

#[derive(Debug)]
pub(super) struct ExporterState {
    pub(super) mode: Mode,
    pub(super) version: &'static str,
    /// `windows_exporter_collector_success{collector="terminal_services"}`.
    pub(super) sessions_whole: bool,
    pub(super) sessions: Vec<Session>,
    /// CPU seconds added at each scrape: busy (user) and idle, over two
    /// cores.
    pub(super) busy_step: f64,
    pub(super) idle_step: f64,
    pub(super) busy: f64,
    pub(super) idle: f64,
    pub(super) scrapes: u64,
    /// The last request's head, for the headers the agent sends.
    pub(super) last_request: String,
    /// The basic-auth credentials (base64 of `user:password`) this
    /// exporter takes, as its web config's `basic_auth_users` would: any
    /// other request is answered 401. None: no auth.
    pub(super) credentials: Option<&'static str>,
}

pub(super) const STATES: [&str; 10] = [
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

/// What windows_exporter 0.31 writes for this state, families in name
/// order and series in label order, as client_golang does.
pub(super) fn render(s: &ExporterState) -> String {
    let mut out = String::new();
    let w = &mut out;
    let family = |w: &mut String, name: &str, kind: &str, help: &str| {
        writeln!(w, "# HELP {name} {help}").unwrap();
        writeln!(w, "# TYPE {name} {kind}").unwrap();
    };
    family(
        w,
        "windows_cpu_time_total",
        "counter",
        "Time that processor spent in different modes (dpc, idle, interrupt, privileged, user)",
    );
    for core in ["0,0", "0,1"] {
        for (mode, v) in [
            ("dpc", 0.0),
            ("idle", s.idle / 2.0),
            ("interrupt", 0.0),
            ("privileged", 0.0),
            ("user", s.busy / 2.0),
        ] {
            writeln!(
                w,
                "windows_cpu_time_total{{core=\"{core}\",mode=\"{mode}\"}} {v}"
            )
            .unwrap();
        }
    }
    family(
        w,
        "windows_exporter_build_info",
        "gauge",
        "A metric with a constant '1' value labeled by version, revision, branch, goversion from which windows_exporter was built, and the goos and goarch for the build.",
    );
    writeln!(
        w,
        "windows_exporter_build_info{{branch=\"HEAD\",goarch=\"amd64\",goos=\"windows\",goversion=\"go1.24.5\",revision=\"abc\",tags=\"unknown\",version=\"{}\"}} 1",
        s.version
    )
    .unwrap();
    family(
        w,
        "windows_exporter_collector_success",
        "gauge",
        "windows_exporter: Whether the collector was successful.",
    );
    for (c, ok) in [
        ("cpu", true),
        ("memory", true),
        ("terminal_services", s.sessions_whole),
    ] {
        writeln!(
            w,
            "windows_exporter_collector_success{{collector=\"{c}\"}} {}",
            u8::from(ok)
        )
        .unwrap();
    }
    family(
        w,
        "windows_exporter_collector_timeout",
        "gauge",
        "windows_exporter: Whether the collector timed out.",
    );
    for c in ["cpu", "memory", "terminal_services"] {
        writeln!(
            w,
            "windows_exporter_collector_timeout{{collector=\"{c}\"}} 0"
        )
        .unwrap();
    }
    family(
        w,
        "windows_memory_available_bytes",
        "gauge",
        "The amount of physical memory immediately available for allocation to a process or for system use.",
    );
    writeln!(w, "windows_memory_available_bytes 6.442450944e+09").unwrap();
    family(
        w,
        "windows_memory_physical_total_bytes",
        "gauge",
        "The amount of physical memory (PhysicalMemoryTotalBytes)",
    );
    writeln!(w, "windows_memory_physical_total_bytes 8.589934592e+09").unwrap();
    family(
        w,
        "windows_terminal_services_session_info",
        "gauge",
        "Terminal Services sessions info",
    );
    // The console and the listener, as on every RDS host.
    let mut sessions = vec![
        Session {
            id: 1,
            name: "Console",
            user: "",
            state: "connected",
        },
        Session {
            id: 65536,
            name: "RDP-Tcp",
            user: "",
            state: "listen",
        },
    ];
    sessions.extend(s.sessions.iter().cloned());
    for session in &sessions {
        // `DOMAIN\sam`, with the backslash escaped as the format wants.
        let user = session.user.replace('\\', "\\\\");
        for state in STATES {
            writeln!(
                w,
                "windows_terminal_services_session_info{{host=\"\",id=\"{}\",session_name=\"{}\",state=\"{state}\",user=\"{user}\"}} {}",
                session.id,
                session.name,
                u8::from(state == session.state)
            )
            .unwrap();
        }
    }
    out
}

/// A fake exporter on loopback.
pub(super) struct Exporter {
    pub(super) url: String,
    pub(super) state: Arc<Mutex<ExporterState>>,
}

impl Exporter {
    pub(super) async fn start(busy_step: f64, idle_step: f64, sessions: Vec<Session>) -> Exporter {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/metrics", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(ExporterState {
            mode: Mode::Normal,
            version: "0.31.1",
            sessions_whole: true,
            sessions,
            busy_step,
            idle_step,
            busy: 1000.0,
            idle: 5000.0,
            scrapes: 0,
            last_request: String::new(),
            credentials: None,
        }));
        let shared = state.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let state = shared.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let (mode, body, authorized) = {
                        let mut s = state.lock().unwrap();
                        s.last_request = String::from_utf8_lossy(&head).into_owned();
                        s.scrapes += 1;
                        s.busy += s.busy_step;
                        s.idle += s.idle_step;
                        let authorized = s.credentials.is_none_or(|c| {
                            s.last_request.to_ascii_lowercase().contains(&format!(
                                "authorization: basic {}\r\n",
                                c.to_ascii_lowercase()
                            ))
                        });
                        (s.mode.clone(), render(&s), authorized)
                    };
                    let refusal = if !authorized {
                        Some("401 Unauthorized\r\nWWW-Authenticate: Basic\r\n".to_string())
                    } else if let Mode::Redirect(to) = mode {
                        Some(format!("302 Found\r\nLocation: {to}\r\n"))
                    } else {
                        None
                    };
                    if let Some(head) = refusal {
                        let answer = format!(
                            "HTTP/1.1 {head}Content-Length: 0\r\nConnection: close\r\n\r\n"
                        );
                        let _ = socket.write_all(answer.as_bytes()).await;
                        let _ = socket.shutdown().await;
                        return;
                    }
                    let body = match mode {
                        Mode::Silent => {
                            // Hold the connection, answer nothing.
                            tokio::time::sleep(Duration::from_secs(3600)).await;
                            return;
                        }
                        Mode::Garbage => "<html><body>Service Unavailable</body></html>\n".into(),
                        Mode::Normal | Mode::Redirect(_) => body,
                    };
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
                         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = socket.write_all(answer.as_bytes()).await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        Exporter { url, state }
    }

    pub(super) fn set(&self, change: impl FnOnce(&mut ExporterState)) {
        change(&mut self.state.lock().unwrap());
    }

    pub(super) fn scrapes(&self) -> u64 {
        self.state.lock().unwrap().scrapes
    }
}

/// The watching agent, killed when dropped.
pub(super) struct WatchingAgent(Child);

impl Drop for WatchingAgent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl WatchingAgent {
    pub(super) fn start(config: &Path, log: &Path) -> WatchingAgent {
        let child = Command::new(crate::exe())
            .args(["agent", "--config"])
            .arg(config)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("start deskbroker agent");
        WatchingAgent(child)
    }
}

/// Waits until `exporter` has been scraped `n` more times and the agent
/// had time to send what it read: the next scrape after a heartbeat shows
/// the previous one was sent (a host's scrapes and heartbeats alternate).
pub(super) async fn rounds(exporter: &Exporter, n: u64) {
    let start = exporter.scrapes();
    assert!(
        eventually(BEAT, || async { exporter.scrapes() >= start + n }).await,
        "the exporter was scraped {n} more times"
    );
}
