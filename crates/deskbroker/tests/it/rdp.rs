//! The RDP front door end to end, with real programs (rules R1–R5, S1):
//! two xrdp servers on loopback ports are the session hosts, xfreerdp is
//! the client, and `deskbroker serve --rdp-listen` sits between them.
//! Which host a connection reached is read from that xrdp's own log (its
//! "TLS connection established" line: the TLS handshake ran end to end
//! through the front door). Logging in fails (no xrdp-sesman): the
//! connection is what is tested, not the desktop.
//!
//! Each xrdp gets a TLS certificate and key of its own, made with
//! `openssl req -x509` in the test's temporary directory: xrdp's default
//! key (/etc/xrdp/key.pem) is readable only by root and the `ssl-cert`
//! group, so the test would fail for any other developer.
//!
//! Needs xrdp, xfreerdp, Xvfb and openssl (`scripts/install-test-deps.sh`;
//! xrdp depends on openssl); without them the test fails and says so — it
//! never passes untested.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::{App, eventually, free_port, metrics_when};

/// How long to wait for anything a working setup does in a second or two.
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

/// Finds `program` on PATH (and in the sbin directories, where xrdp lives),
/// or fails the test saying how to install it.
pub(crate) fn require(program: &str, package: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from));
    for dir in dirs {
        let candidate = dir.join(program);
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "the RDP end-to-end test needs `{program}` (Debian package {package}), which is not \
         installed: run scripts/install-test-deps.sh"
    );
}

/// A child process killed when the test ends, pass or fail.
pub(crate) struct Killed(pub(crate) Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One xrdp server, its configuration and log in a directory of its own.
pub(crate) struct Xrdp {
    _process: Killed,
    pub(crate) address: String,
    log: PathBuf,
}

impl Xrdp {
    pub(crate) fn start(xrdp: &Path, openssl: &Path, dir: &Path) -> Xrdp {
        std::fs::create_dir_all(dir).expect("xrdp dir");
        let tls = TlsFiles::make(openssl, dir);
        // A port picked by binding 0 could be taken before xrdp binds it: retry.
        let mut last_log = String::new();
        for _ in 0..3 {
            let port = free_port();
            let log = dir.join("xrdp.log");
            let _ = std::fs::remove_file(&log);
            let ini = dir.join("xrdp.ini");
            std::fs::write(&ini, xrdp_ini(port, &log, &tls)).expect("write xrdp.ini");
            let child = Command::new(xrdp)
                .arg("--nodaemon")
                .arg("--config")
                .arg(&ini)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start xrdp");
            let mut process = Killed(child);
            let listening = format!("listening to port {port} on 127.0.0.1");
            let deadline = std::time::Instant::now() + PATIENCE;
            while std::time::Instant::now() < deadline {
                last_log = std::fs::read_to_string(&log).unwrap_or_default();
                if last_log.contains(&listening) {
                    return Xrdp {
                        _process: process,
                        address: format!("127.0.0.1:{port}"),
                        log,
                    };
                }
                if let Ok(Some(_)) = process.0.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        panic!("xrdp did not start listening; its log:\n{last_log}");
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Connections whose TLS handshake with this host completed.
    pub(crate) fn tls_connections(&self) -> usize {
        self.log().matches("TLS connection established").count()
    }
}

/// A self-signed certificate and its key, for one xrdp (xfreerdp runs with
/// `/cert:ignore`, so any certificate does).
pub(crate) struct TlsFiles {
    pub(crate) certificate: PathBuf,
    pub(crate) key: PathBuf,
}

impl TlsFiles {
    /// `openssl req -x509` into `dir`: an RSA key without a passphrase
    /// (xrdp cannot ask for one) and a certificate for localhost valid for
    /// a day.
    pub(crate) fn make(openssl: &Path, dir: &Path) -> TlsFiles {
        let files = TlsFiles {
            certificate: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        };
        let out = Command::new(openssl)
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args(["-subj", "/CN=localhost", "-keyout"])
            .arg(&files.key)
            .arg("-out")
            .arg(&files.certificate)
            .stdin(Stdio::null())
            .output()
            .expect("run openssl");
        assert!(
            out.status.success() && files.key.is_file() && files.certificate.is_file(),
            "openssl could not make a certificate: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // A key only its owner reads, as the broker's doors require.
        std::fs::set_permissions(
            &files.key,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .expect("chmod 600 the key");
        files
    }
}

/// A minimal xrdp.ini: one loopback port, threads instead of forks (so
/// killing the server ends its connections), the log, certificate and key
/// in the test's dir.
fn xrdp_ini(port: u16, log: &Path, tls: &TlsFiles) -> String {
    format!(
        "[Globals]\n\
         ini_version=1\n\
         fork=false\n\
         port=tcp://127.0.0.1:{port}\n\
         use_vsock=false\n\
         security_layer=negotiate\n\
         crypt_level=high\n\
         certificate={certificate}\n\
         key_file={key}\n\
         ssl_protocols=TLSv1.2, TLSv1.3\n\
         max_bpp=32\n\
         allow_channels=true\n\
         allow_multimon=true\n\
         \n\
         [Logging]\n\
         LogFile={log}\n\
         LogLevel=INFO\n\
         EnableSyslog=false\n\
         EnableConsole=false\n\
         \n\
         [Channels]\n\
         rdpdr=true\n\
         rdpsnd=true\n\
         drdynvc=true\n\
         cliprdr=true\n\
         rail=true\n\
         xrdpvr=true\n\
         \n\
         [Xorg]\n\
         name=Xorg\n\
         lib=libxup.so\n\
         username=ask\n\
         password=ask\n\
         ip=127.0.0.1\n\
         port=-1\n\
         code=20\n",
        log = log.display(),
        certificate = tls.certificate.display(),
        key = tls.key.display(),
    )
}

/// An X display for xfreerdp, which needs one to draw its window.
pub(crate) struct Display {
    _process: Killed,
    number: String,
}

impl Display {
    pub(crate) fn start(xvfb: &Path) -> Display {
        let mut child = Command::new(xvfb)
            .args([
                "-displayfd",
                "1",
                "-nolisten",
                "tcp",
                "-screen",
                "0",
                "1024x768x24",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start Xvfb");
        let stdout = child.stdout.take().expect("stdout");
        let process = Killed(child);
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("Xvfb prints its display number");
        let number = line.trim().to_string();
        assert!(
            !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()),
            "Xvfb did not start: {line:?}"
        );
        Display {
            _process: process,
            number,
        }
    }

    /// The display's name, `:N`.
    pub(crate) fn name(&self) -> String {
        format!(":{}", self.number)
    }
}

/// One xfreerdp client; killing it closes its connection.
pub(crate) struct Client {
    pub(crate) process: Killed,
    log: PathBuf,
}

impl Client {
    pub(crate) fn start(
        xfreerdp: &Path,
        display: &Display,
        home: &Path,
        args: &[String],
    ) -> Client {
        std::fs::create_dir_all(home).expect("client home");
        let log = home.join(format!("xfreerdp-{}.log", free_port()));
        let out = std::fs::File::create(&log).expect("client log");
        let err = out.try_clone().expect("client log");
        let child = Command::new(xfreerdp)
            .args(args)
            .arg("/cert:ignore")
            .env("DISPLAY", display.name())
            .env("HOME", home)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("start xfreerdp");
        Client {
            process: Killed(child),
            log,
        }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether the client gave up on its own.
    pub(crate) fn exited(&mut self) -> bool {
        matches!(self.process.0.try_wait(), Ok(Some(_)))
    }
}

/// Starts `deskbroker serve` with the front door on a free port; answers
/// the app and the front door's address (both read from stdout).
fn spawn_with_front_door(data_dir: &Path, default_pool: &str) -> (App, String) {
    let extra = [
        "--rdp-listen",
        "127.0.0.1:0",
        "--rdp-default-pool",
        default_pool,
    ];
    let (app, _) = App::spawn_with(data_dir, "127.0.0.1:0", &extra);
    let rdp = app.ready.rdp_addr().to_string();
    (app, rdp)
}

/// The user's one session in `pool`: (host, state), if any.
pub(crate) async fn session_of(app: &App, pool: &str, user: &str) -> Option<(String, String)> {
    let v = app
        .ok(
            "GET",
            &format!("/api/v1/hostPools/{pool}/userSessions?user={user}"),
            None,
            200,
        )
        .await;
    let s = v["value"].as_array()?.first()?.clone();
    Some((
        s["sessionHost"].as_str()?.to_string(),
        s["sessionState"].as_str()?.to_string(),
    ))
}

async fn sessions(app: &App, pool: &str) -> Vec<Value> {
    let v = app
        .ok(
            "GET",
            &format!("/api/v1/hostPools/{pool}/userSessions"),
            None,
            200,
        )
        .await;
    v["value"].as_array().cloned().unwrap_or_default()
}

/// Waits until `user` has a session on `host` in `state`.
pub(crate) async fn wait_session(app: &App, pool: &str, user: &str, host: &str, state: &str) {
    let want = Some((host.to_string(), state.to_string()));
    let reached = eventually(PATIENCE, || async {
        session_of(app, pool, user).await == want
    })
    .await;
    assert!(
        reached,
        "{user} in {pool}: expected {want:?}, have {:?}",
        session_of(app, pool, user).await
    );
}

/// Waits until `host` has seen `n` TLS handshakes and `other` still `m`.
pub(crate) async fn wait_tls(host: &Xrdp, n: usize, other: &Xrdp, m: usize, client: &Client) {
    let reached = eventually(PATIENCE, || async { host.tls_connections() >= n }).await;
    assert!(
        reached,
        "host {} saw {} TLS connections, expected {n}\nits log:\n{}\nclient log:\n{}",
        host.address,
        host.tls_connections(),
        host.log(),
        client.log()
    );
    assert_eq!(
        other.tls_connections(),
        m,
        "the other host {} was reached",
        other.address
    );
}

/// The RDP_NEG_FAILURE codes the front door answers refusals with
/// (`gateway::pdu::failure`; docs/gateway.md lists them for users).
pub(crate) const TICKET_REFUSED: u32 = 1001;
pub(crate) const ACCESS_REFUSED: u32 = 1002;
pub(crate) const UNAVAILABLE: u32 = 1003;

/// Asserts that xfreerdp 2.11 ended on the front door's negotiation
/// failure `code` (its log names the code and the negotiation failure),
/// not on a transport failure.
pub(crate) fn assert_told(log: &str, code: u32, what: &impl std::fmt::Debug) {
    assert!(
        log.contains(&format!("Unknown protocol security error {code}"))
            && log.contains("ERRCONNECT_SECURITY_NEGO_CONNECT_FAILED")
            && !log.contains("ERRCONNECT_CONNECT_TRANSPORT_FAILED"),
        "{what:?}: xfreerdp was not told failure {code}:\n{log}"
    );
}

#[tokio::test]
async fn xfreerdp_reaches_the_chosen_xrdp_host_and_comes_back_to_it_after_a_restart() {
    let xrdp = require("xrdp", "xrdp");
    let xfreerdp = require("xfreerdp", "freerdp2-x11");
    let xvfb = require("Xvfb", "xvfb");
    let openssl = require("openssl", "openssl");
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let a = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp-a"));
    let b = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp-b"));
    let display = Display::start(&xvfb);
    let client = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        Client::start(&xfreerdp, &display, &home, &args)
    };

    let data = dir.path().join("data");
    let (app, front_door) = spawn_with_front_door(&data, "farm");
    // DepthFirst with a limit of 1: the first user goes to h1, the next to h2.
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst", "maxSessionLimit": 1,
                    "allowedAddressRanges": ["127.0.0.0/8"], "pendingTimeoutSeconds": 3600}),
        ),
        201,
    )
    .await;
    for (name, host) in [("h1", &a), ("h2", &b)] {
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/farm/sessionHosts/{name}"),
            Some(json!({"address": host.address})),
            201,
        )
        .await;
    }
    let v = format!("/v:{front_door}");

    // alice: placed on h1, Active while connected, Disconnected once she
    // leaves. No agent runs on these hosts, so nothing confirms her logon:
    // her session lasts the pool's pendingTimeoutSeconds (an hour here)
    // after she left (S9).
    let alice = client(&[&v, "/u:alice"]);
    wait_tls(&a, 1, &b, 0, &alice).await;
    wait_session(&app, "farm", "alice", "h1", "Active").await;
    drop(alice);
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;

    // bob: h1 is at its limit, so h2.
    let bob = client(&[&v, "/u:bob"]);
    wait_tls(&b, 1, &a, 1, &bob).await;
    wait_session(&app, "farm", "bob", "h2", "Active").await;

    // alice again: back to her session on h1 (S1), though h1 is at its
    // limit. Her client names her by an mstshash cookie only, a claim the
    // host checks but the front door cannot (R2): the session's state is
    // not this connection's to change (R4), and stays Disconnected (a
    // host's agent would report it Active, S8).
    let a_before = a.tls_connections();
    let alice = client(&[&v, "/u:alice"]);
    wait_tls(&a, a_before + 1, &b, 1, &alice).await;
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;
    drop(alice);
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;

    // carol: both hosts are at the limit; refused without reaching either.
    let mut carol = client(&[&v, "/u:carol"]);
    let gave_up = eventually(PATIENCE, || {
        let exited = carol.exited();
        async move { exited }
    })
    .await;
    assert!(gave_up, "carol's client was not refused: {}", carol.log());
    assert_eq!(session_of(&app, "farm", "carol").await, None);
    assert_eq!(a.tls_connections(), a_before + 1);
    assert_eq!(b.tls_connections(), 1);

    // kill -9 (bob's relayed connection dies with it), then the same data dir.
    app.kill9();
    drop(bob);
    let (app, front_door) = spawn_with_front_door(&data, "farm");
    let v = format!("/v:{front_door}");
    let a_before = a.tls_connections();
    let alice = client(&[&v, "/u:alice"]);
    wait_tls(&a, a_before + 1, &b, 1, &alice).await;
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;
    drop(alice);
    wait_session(&app, "farm", "alice", "h1", "Disconnected").await;

    // A connection file: its routing token names the pool (R1); with no
    // user, the session is anonymous and ends with the connection (R2).
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm2",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                    "allowedAddressRanges": ["127.0.0.0/8"], "allowFrontDoor": true}),
        ),
        201,
    )
    .await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm2/sessionHosts/b",
        Some(json!({"address": b.address})),
        201,
    )
    .await;
    let rdp_file = dir.path().join("farm2.rdp");
    // The file as users get it: from the broker, through the CLI.
    let path = rdp_file.display().to_string();
    let (ok, _, err) = app.cli(&["hostpool", "rdp-file", "--name", "farm2", "--file", &path]);
    assert!(ok, "hostpool rdp-file: {err}");
    let text = std::fs::read_to_string(&rdp_file).expect("read .rdp");
    assert_eq!(
        text,
        gateway::rdp_file(&front_door, "farm2"),
        "the served file"
    );
    let anonymous = client(&[&rdp_file.display().to_string()]);
    wait_tls(&b, 2, &a, a_before + 1, &anonymous).await;
    let placed = eventually(PATIENCE, || async {
        sessions(&app, "farm2").await.iter().any(|s| {
            s["sessionHost"] == "b"
                && s["sessionState"] == "Active"
                && s["userPrincipalName"]
                    .as_str()
                    .is_some_and(|u| u.starts_with("anonymous-"))
        })
    })
    .await;
    assert!(
        placed,
        "no anonymous session: {:?}",
        sessions(&app, "farm2").await
    );
    drop(anonymous);
    let ended = eventually(PATIENCE, || async {
        sessions(&app, "farm2").await.is_empty()
    })
    .await;
    assert!(
        ended,
        "anonymous session left: {:?}",
        sessions(&app, "farm2").await
    );
    // The front door's work is in the broker's metrics.
    let metrics = app.text("/metrics").await;
    assert!(
        metrics.contains("deskbroker_rdp_connections_total{outcome=\"relayed\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("deskbroker_rdp_bytes_total{direction=\"host_to_client\"}"));
}

/// Rule T3 with real programs: a pool that requires connection tickets
/// places xfreerdp users only on a ticket the broker issued — from a
/// connection file or `/load-balance-info:` — and refuses tampered,
/// expired, foreign and missing ones without dialling any host or making
/// any session.
#[tokio::test]
async fn xfreerdp_is_placed_on_a_valid_connection_ticket_and_refused_on_any_other() {
    let xrdp = require("xrdp", "xrdp");
    let xfreerdp = require("xfreerdp", "freerdp2-x11");
    let xvfb = require("Xvfb", "xvfb");
    let openssl = require("openssl", "openssl");
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let a = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp-a"));
    let display = Display::start(&xvfb);
    let client = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        Client::start(&xfreerdp, &display, &home, &args)
    };
    // The front door's default pool is `secure`: a client with a cookie
    // alone is meant for it.
    let (app, front_door) = spawn_with_front_door(&dir.path().join("data"), "secure");
    for pool in ["secure", "other"] {
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/{pool}"),
            Some(
                json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                        "allowedAddressRanges": ["127.0.0.0/8"],
                        "requireConnectionTicket": true}),
            ),
            201,
        )
        .await;
        app.ok(
            "PUT",
            &format!("/api/v1/hostPools/{pool}/sessionHosts/h1"),
            Some(json!({"address": a.address})),
            201,
        )
        .await;
    }
    let v = format!("/v:{front_door}");

    // Refused: each client gives up, no host saw a TLS handshake, no
    // session exists in either pool.
    let refused = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        client(&args)
    };
    let issued = |pool: &str, user: &str| {
        let path = format!("/api/v1/hostPools/{pool}/rdpFile?user={user}");
        let app = &app;
        async move {
            let file = app.text(&path).await;
            file.split("\r\n")
                .find_map(|l| l.strip_prefix("loadbalanceinfo:s:"))
                .expect("loadbalanceinfo")
                .to_string()
        }
    };
    let alice = issued("secure", "alice").await;
    let other_pool = issued("other", "alice").await;
    let attempts = [
        // Missing: a cookie alone, and a routing token naming the pool.
        (vec![v.clone(), "/u:alice".to_string()], ACCESS_REFUSED),
        (
            vec![
                v.clone(),
                "/load-balance-info:tsv://MS Terminal Services Plugin.1.other".to_string(),
            ],
            ACCESS_REFUSED,
        ),
        // Tampered: another user in the broker's ticket.
        (
            vec![
                v.clone(),
                format!("/load-balance-info:{}", alice.replace(":alice", ":mallory")),
            ],
            TICKET_REFUSED,
        ),
        // Honest but for another pool, rewritten to name this one.
        (
            vec![
                v.clone(),
                format!(
                    "/load-balance-info:{}",
                    other_pool.replace("dbt1:other:", "dbt1:secure:")
                ),
            ],
            TICKET_REFUSED,
        ),
        // Signed by the broker but expired; signed by another broker.
        (
            vec![
                v.clone(),
                format!(
                    "/load-balance-info:{}",
                    api::ticket::TicketKey::derive(
                        &crate::signing_secret(&dir.path().join("data")).await
                    )
                    .issue("secure", "alice", 1_000_000_000)
                    .expect("fits")
                ),
            ],
            TICKET_REFUSED,
        ),
        (
            vec![
                v.clone(),
                format!(
                    "/load-balance-info:{}",
                    api::ticket::TicketKey::derive("another broker's admin token, 32+ chars")
                        .issue("secure", "alice", 4_000_000_000)
                        .expect("fits")
                ),
            ],
            TICKET_REFUSED,
        ),
    ];
    for (args, code) in attempts {
        let mut c = refused(args.clone());
        let gave_up = eventually(PATIENCE, || {
            let exited = c.exited();
            async move { exited }
        })
        .await;
        assert!(gave_up, "{args:?} was not refused: {}", c.log());
        assert_eq!(a.tls_connections(), 0, "{args:?} reached the host");
        // Told why, in the negotiation, not left with a closed transport.
        assert_told(&c.log(), code, &args);
    }
    assert!(sessions(&app, "secure").await.is_empty());
    assert!(sessions(&app, "other").await.is_empty());
    // Two clients without a ticket, four with a bad one (xfreerdp tries
    // each connection twice).
    let wanted = [("ticket_required", 2), ("ticket_refused", 4)];
    let count = |metrics: &str, outcome: &str| -> u64 {
        let line = format!("deskbroker_rdp_connections_total{{outcome=\"{outcome}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let metrics = metrics_when(&app, |m| wanted.iter().all(|&(o, n)| count(m, o) >= n)).await;
    for (outcome, n) in wanted {
        let count = count(&metrics, outcome);
        assert!(count >= n, "{outcome}: {count} < {n}\n{metrics}");
    }

    // Valid, from the connection file as users get it: placed as alice.
    let rdp_file = dir.path().join("secure.rdp");
    let path = rdp_file.display().to_string();
    let (ok, _, err) = app.cli(&[
        "hostpool", "rdp-file", "--name", "secure", "--user", "alice", "--file", &path,
    ]);
    assert!(ok, "hostpool rdp-file --user: {err}");
    // The one who fetched it is told for how long the ticket admits alice.
    assert!(
        err.contains("the connection ticket in this file admits alice until ")
            && err.contains("ticketLifetimeSeconds"),
        "{err}"
    );
    let c = client(&[&path]);
    let reached = eventually(PATIENCE, || async { a.tls_connections() >= 1 }).await;
    assert!(reached, "alice's ticket did not reach h1: {}", c.log());
    wait_session(&app, "secure", "alice", "h1", "Active").await;
    drop(c);
    wait_session(&app, "secure", "alice", "h1", "Disconnected").await;

    // Valid, with /load-balance-info: as bob.
    let bob = issued("secure", "bob").await;
    let c = client(&[&v, &format!("/load-balance-info:{bob}")]);
    let reached = eventually(PATIENCE, || async { a.tls_connections() >= 2 }).await;
    assert!(reached, "bob's ticket did not reach h1: {}", c.log());
    wait_session(&app, "secure", "bob", "h1", "Active").await;

    // The front door's placements are in the audit log (T5), its refusals
    // are not (anyone on the network can cause those).
    let log = app
        .ok("GET", "/api/v1/auditLog?actor=front-door", None, 200)
        .await;
    let users: Vec<&str> = log["value"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["after"]["userPrincipalName"].as_str())
        .collect();
    assert_eq!(users, ["bob", "alice"], "{log}");
}

/// A downloaded connection file whose ticket has expired: xfreerdp is told
/// so in the negotiation (RDP_NEG_FAILURE 1001, "ticket refused") and ends
/// on a negotiation failure, not a transport failure; the broker's log and
/// metrics say why. A pool with no host to take the user answers 1003
/// ("unavailable, try again later").
#[tokio::test]
async fn xfreerdp_with_an_expired_connection_file_is_told_its_ticket_was_refused() {
    let xrdp = require("xrdp", "xrdp");
    let xfreerdp = require("xfreerdp", "freerdp2-x11");
    let xvfb = require("Xvfb", "xvfb");
    let openssl = require("openssl", "openssl");
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let a = Xrdp::start(&xrdp, &openssl, &dir.path().join("xrdp-a"));
    let display = Display::start(&xvfb);
    let client = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        Client::start(&xfreerdp, &display, &home, &args)
    };
    let (app, front_door) = spawn_with_front_door(&dir.path().join("data"), "secure");
    // The shortest ticket lifetime a pool takes.
    app.ok(
        "PUT",
        "/api/v1/hostPools/secure",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                    "allowedAddressRanges": ["127.0.0.0/8"],
                    "requireConnectionTicket": true, "ticketLifetimeSeconds": 30}),
        ),
        201,
    )
    .await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/secure/sessionHosts/h1",
        Some(json!({"address": a.address})),
        201,
    )
    .await;
    // A pool the front door may reach, with no host at all.
    app.ok(
        "PUT",
        "/api/v1/hostPools/empty",
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
                     "allowFrontDoor": true}),
        ),
        201,
    )
    .await;

    let rdp_file = dir.path().join("secure.rdp");
    let path = rdp_file.display().to_string();
    let (ok, _, err) = app.cli(&[
        "hostpool", "rdp-file", "--name", "secure", "--user", "alice", "--file", &path,
    ]);
    assert!(ok, "hostpool rdp-file --user: {err}");
    let file = std::fs::read_to_string(&rdp_file).expect("connection file");
    let ticket = file
        .split("\r\n")
        .find_map(|l| l.strip_prefix("loadbalanceinfo:s:"))
        .expect("loadbalanceinfo");
    let expires = api::ticket::Ticket::parse(ticket.trim_end())
        .expect("a ticket")
        .expires_unix_seconds;

    // While the file is fresh, it takes alice to h1.
    let c = client(&[&path]);
    let reached = eventually(PATIENCE, || async { a.tls_connections() >= 1 }).await;
    assert!(reached, "the fresh file did not reach h1: {}", c.log());
    drop(c);

    // No host to take anyone: told "unavailable".
    let mut c = client(&[
        &format!("/v:{front_door}"),
        "/u:bob",
        "/load-balance-info:tsv://MS Terminal Services Plugin.1.empty",
    ]);
    let gave_up = eventually(PATIENCE, || {
        let exited = c.exited();
        async move { exited }
    })
    .await;
    assert!(gave_up, "a pool without hosts was not refused: {}", c.log());
    assert_told(&c.log(), UNAVAILABLE, &"a pool without hosts");

    // Once its ticket has expired (and the broker's leeway for clocks has
    // passed), the same file is refused, and the client is told why.
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs()
    };
    let past = expires + api::ticket::TICKET_LEEWAY_SECONDS + 1;
    let expired = eventually(Duration::from_secs(60) + PATIENCE, || {
        let done = now() > past;
        async move { done }
    })
    .await;
    assert!(expired, "the ticket did not expire");
    let mut c = client(&[&path]);
    let gave_up = eventually(PATIENCE, || {
        let exited = c.exited();
        async move { exited }
    })
    .await;
    assert!(gave_up, "the expired file was not refused: {}", c.log());
    assert_told(&c.log(), TICKET_REFUSED, &"the expired file");
    assert_eq!(a.tls_connections(), 1, "the expired file reached h1");

    // The administrator's side: counted by reason in metrics.
    let refusals = "deskbroker_rdp_refusals_total{reason=\"ticket_refused\"}";
    let metrics = metrics_when(&app, |m| m.contains(refusals)).await;
    assert!(metrics.contains(refusals), "{metrics}");
}
