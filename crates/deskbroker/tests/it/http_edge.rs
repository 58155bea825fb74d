//! The HTTP server's edge against a network client without credentials:
//! idle connections cannot hold the API or its shutdown, malformed requests are answered in the
//! contract's error shape, secrets are not cached, and the data directory
//! and admin token are kept private. Each attack first, then the proof that
//! others are still served.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::{App, TOKEN, eventually, exe};

/// The server's bounds, as the broker names them (`broker::server`,
/// `broker::listener`).
const MAX_CONNECTIONS: usize = 4_096;
const MAX_CONNECTIONS_PER_SOURCE: usize = 1_024;

/// Another source address on loopback, for "the others".
const OTHER_SOURCE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

fn addr(app: &App) -> SocketAddr {
    app.listen_addr().parse().expect("listen address")
}

/// A connection from `source` that sends nothing.
/// Sends `request` on a new connection and reads the answer until the
/// broker closes it (or 64 KiB of it).
async fn raw_exchange(to: SocketAddr, request: &[u8]) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = TcpStream::connect(to).await.expect("connect");
    // The broker may answer and close before it has read everything.
    let _ = stream.write_all(request).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(
        Duration::from_secs(30),
        (&mut stream).take(64 * 1024).read_to_end(&mut answer),
    )
    .await;
    String::from_utf8_lossy(&answer).into_owned()
}

async fn idle_from(source: IpAddr, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::new(source, 0))
        .expect("bind source");
    socket.connect(to).await.expect("connect")
}

/// Whether the server has closed `stream` (EOF or reset), waiting at most
/// `wait` for it.
async fn closed_by_server(stream: &mut TcpStream, wait: Duration) -> bool {
    let mut buf = [0u8; 512];
    loop {
        match tokio::time::timeout(wait, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            // An answer (e.g. to a partial request): keep reading to EOF.
            Ok(Ok(_)) => continue,
        }
    }
}

/// Whether the server has not closed `stream` yet (nothing to read).
fn still_open(stream: &TcpStream) -> bool {
    let mut buf = [0u8; 64];
    matches!(stream.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// A client whose connections come from `source`.
fn client_from(source: IpAddr) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(source)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

/// Registers host `h` in pool `p` and answers its host credential.
async fn enrolled_host(app: &App) -> String {
    app.ok(
        "PUT",
        "/api/v1/hostPools/p",
        Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"})),
        201,
    )
    .await;
    let t = app
        .ok(
            "POST",
            "/api/v1/hostPools/p/registrationToken",
            Some(json!({"expiresInSeconds": 600})),
            200,
        )
        .await["token"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, v) = app
        .call_with(
            "POST",
            "/api/v1/register",
            Some(json!({"token": t, "hostPool": "p", "name": "h", "address": "10.0.0.1:3389"})),
            None,
        )
        .await;
    assert_eq!(status, 201, "{v}");
    v["hostCredential"].as_str().unwrap().to_string()
}

/// More idle connections from one address than the broker serves at all
/// (the issue's 4,096 stopped /healthz and every heartbeat): the source
/// keeps at most its share, another source's health checks and heartbeats
/// are answered meanwhile, and the idle ones are closed by the server.
#[tokio::test]
async fn idle_connections_from_one_source_do_not_stop_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let to = addr(&app);
    let credential = enrolled_host(&app).await;

    // The attack: more than MAX_CONNECTIONS idle connections from 127.0.0.1.
    let flood = MAX_CONNECTIONS + 100;
    let mut idle = Vec::with_capacity(flood);
    for _ in 0..flood {
        idle.push(idle_from(IpAddr::V4(Ipv4Addr::LOCALHOST), to).await);
    }

    // The others, from 127.0.0.2, are served while the flood is open.
    let other = client_from(OTHER_SOURCE);
    let health = other
        .get(format!("{}/healthz", app.url))
        .send()
        .await
        .expect("/healthz answers from another source");
    assert_eq!(health.status(), 200);
    let heartbeat = other
        .post(format!(
            "{}/api/v1/hostPools/p/sessionHosts/h/heartbeat",
            app.url
        ))
        .bearer_auth(&credential)
        .json(&json!({"cpuPercent": 5.0}))
        .send()
        .await
        .expect("a heartbeat answers from another source");
    assert_eq!(heartbeat.status(), 200);

    // Past its share, the source's connections were closed at once (and
    // counted): at most MAX_CONNECTIONS_PER_SOURCE stay open.
    let mut open = flood;
    let capped = eventually(Duration::from_secs(30), || {
        open = idle.iter().filter(|s| still_open(s)).count();
        let fine = open <= MAX_CONNECTIONS_PER_SOURCE;
        async move { fine }
    })
    .await;
    assert!(
        capped,
        "{open} of {flood} idle connections from one source open"
    );
    let metrics = other
        .get(format!("{}/metrics", app.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l
                .starts_with("deskbroker_http_connections_refused_total{reason=\"per_source\"}")),
        "no per-source refusal counted:\n{metrics}"
    );

    // Every idle connection is closed by the server: the refused ones at
    // once, the admitted ones after the header-read timeout (10 s).
    let deadline = Instant::now() + Duration::from_secs(60);
    for (i, stream) in idle.iter_mut().enumerate() {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            closed_by_server(stream, left).await,
            "idle connection {i} still open after 60 s"
        );
    }

    // And the source itself is served again.
    app.ok("GET", "/api/v1/hostPools/p", None, 200).await;
}

/// Idle connections, one with half a request head, one with a single byte
/// and one kept alive after an answer, do not hold SIGTERM (before, a
/// connection with half a request head held it for good); the broker exits
/// cleanly, within the bounds it names (header-read timeout 10 s, shutdown
/// grace 10 s) and well under 30 s.
#[tokio::test]
async fn idle_connections_do_not_hold_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = App::spawn(&dir);
    let to = addr(&app);
    let mut held = Vec::new();
    for _ in 0..6 {
        held.push(idle_from(IpAddr::V4(Ipv4Addr::LOCALHOST), to).await);
    }
    let mut partial = idle_from(IpAddr::V4(Ipv4Addr::LOCALHOST), to).await;
    partial
        .write_all(b"GET /api/v1/hostPools HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    held.push(partial);
    let mut one_byte = idle_from(IpAddr::V4(Ipv4Addr::LOCALHOST), to).await;
    one_byte.write_all(b"G").await.unwrap();
    held.push(one_byte);
    let mut kept_alive = idle_from(IpAddr::V4(Ipv4Addr::LOCALHOST), to).await;
    kept_alive
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = [0u8; 256];
    let n = kept_alive.read(&mut answer).await.unwrap();
    assert!(
        answer[..n].starts_with(b"HTTP/1.1 200"),
        "{:?}",
        &answer[..n]
    );
    held.push(kept_alive);

    let pid = nix::unistd::Pid::from_raw(i32::try_from(app.child.id()).expect("pid"));
    assert!(pid.as_raw() > 0);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let child = &mut app.child;
    let status = crate::eventually(Duration::from_secs(30), || {
        std::future::ready(child.try_wait().expect("wait"))
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "deskbroker still running 30 s after SIGTERM with {} idle connections",
            held.len()
        )
    });
    assert!(status.success(), "deskbroker exited {status}");
}

/// Requests the router cannot take are answered in the contract's error
/// shape; answers are never cached; the bearer scheme's case does not
/// matter; echoed input is cut short; and the broker serves on.
#[tokio::test]
async fn malformed_requests_are_answered_in_the_contracts_shape() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    app.ok(
        "PUT",
        "/api/v1/hostPools/p",
        Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst"})),
        201,
    )
    .await;

    // 405 for a path that exists with another method.
    app.refused("POST", "/api/v1/hostPools", None, 405, "MethodNotAllowed")
        .await;
    app.refused(
        "PUT",
        "/api/v1/hostPools/p/connect",
        None,
        405,
        "MethodNotAllowed",
    )
    .await;
    // 414 for a path longer than the broker reads.
    let long = "a".repeat(10_000);
    app.refused(
        "GET",
        &format!("/api/v1/hostPools/{long}"),
        None,
        414,
        "UriTooLong",
    )
    .await;
    // Longer than hyper itself parses (a request line past 64 KiB, a head
    // past 64 KiB): still the contract's shape, not an empty body.
    for (head, status, code) in [
        (
            format!(
                "GET /api/v1/hostPools?x={} HTTP/1.1\r\nHost: b\r\n\r\n",
                "a".repeat(70_000)
            ),
            "414",
            "UriTooLong",
        ),
        (
            format!(
                "GET /api/v1/hostPools HTTP/1.1\r\nHost: b\r\nX-Junk: {}\r\n\r\n",
                "a".repeat(200_000)
            ),
            "431",
            "HeadersTooLarge",
        ),
    ] {
        let addr: SocketAddr = app.url.trim_start_matches("http://").parse().unwrap();
        let answer = raw_exchange(addr, head.as_bytes()).await;
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status} ")),
            "{answer}"
        );
        assert!(
            answer.contains("content-type: application/json")
                && answer.contains(&format!(r#"{{"error":{{"code":"{code}","#)),
            "{answer}"
        );
    }
    // 400 for a path that is not UTF-8.
    app.refused(
        "GET",
        "/api/v1/hostPools/%ff%fe",
        None,
        400,
        "InvalidParameter",
    )
    .await;
    // Echoed input is cut at 100 characters.
    let name = "b".repeat(3_000);
    let v = app
        .refused(
            "GET",
            &format!("/api/v1/hostPools/{name}"),
            None,
            404,
            "HostPoolNotFound",
        )
        .await;
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("{}…", "b".repeat(100))) && !message.contains(&"b".repeat(101)),
        "{message}"
    );

    // The bearer scheme in any case.
    for scheme in ["bearer", "BEARER", "bEaReR"] {
        let resp = app
            .http
            .get(format!("{}/api/v1/hostPools/p", app.url))
            .header("Authorization", format!("{scheme} {TOKEN}"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{scheme}");
    }
    let resp = app
        .http
        .get(format!("{}/api/v1/hostPools/p", app.url))
        .header("Authorization", format!("Basic {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);

    // Secrets are never cached: the registration token and the register
    // answer (a host credential), and every other API answer.
    let resp = app
        .http
        .post(format!("{}/api/v1/hostPools/p/registrationToken", app.url))
        .bearer_auth(TOKEN)
        .json(&json!({"expiresInSeconds": 600}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["cache-control"], "no-store");
    let token: Value = resp.json().await.unwrap();
    let resp = app
        .http
        .post(format!("{}/api/v1/register", app.url))
        .json(&json!({"token": token["token"], "hostPool": "p", "name": "h", "address": "10.0.0.1:3389"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    assert_eq!(resp.headers()["cache-control"], "no-store");
    for path in ["/api/v1/hostPools", "/api/v1/nothing", "/healthz"] {
        let resp = app
            .http
            .get(format!("{}{path}", app.url))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.headers()["cache-control"], "no-store", "{path}");
        assert_eq!(
            resp.headers()["x-content-type-options"],
            "nosniff",
            "{path}"
        );
    }

    // The broker served on.
    app.ok("GET", "/api/v1/hostPools/p/sessionHosts/h", None, 200)
        .await;
}

/// The OpenAPI document says what every operation can answer (401/403
/// included), what a name in a path may be, and the ranges of a pool's
/// settings.
#[tokio::test]
async fn the_openapi_document_lists_auth_refusals_and_name_constraints() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::spawn(&dir);
    let (status, doc) = app.call_with("GET", "/openapi.json", None, None).await;
    assert_eq!(status, 200);
    let pool = &doc["components"]["schemas"]["HostPoolInput"]["properties"];
    assert_eq!(pool["maxSessionLimit"]["maximum"], 999_999, "{pool}");
    assert_eq!(pool["heartbeatTimeoutSeconds"]["minimum"], 5, "{pool}");
    assert_eq!(pool["description"]["maxLength"], 1_024, "{pool}");
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.len() >= 10, "{paths:?}");
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap() {
            let Some(responses) = op.get("responses").and_then(Value::as_object) else {
                continue;
            };
            for status in ["400", "401", "403", "414", "503"] {
                assert!(
                    responses.contains_key(status),
                    "{method} {path} does not list {status}"
                );
            }
            for param in op["parameters"].as_array().into_iter().flatten() {
                if param["in"] == "path" && (param["name"] == "pool" || param["name"] == "host") {
                    assert_eq!(param["schema"]["maxLength"], 253, "{method} {path}");
                    assert!(param["schema"]["pattern"].is_string(), "{method} {path}");
                }
            }
        }
    }
}

/// `deskbroker serve` with `args` and `env`, expected to refuse to start:
/// answers its stderr.
fn refused_start(data: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let out = Command::new(exe())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .args(args)
        .env_remove("DESKBROKER_ADMIN_TOKEN")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run serve");
    assert!(!out.status.success(), "serve started with {args:?} {env:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[cfg(unix)]
fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Admin tokens shorter than 32 characters, or easy to guess, are refused
/// at start, with a clear error; `--admin-token-file` gives one from a file; the data
/// directory is 0700, the database files 0600, and an admin token file
/// left readable by others is made 0600 with a warning.
#[cfg(unix)]
#[tokio::test]
async fn the_admin_token_and_the_data_directory_are_kept_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();

    // Short tokens, from the environment or a file, and blanks.
    let data = dir.path().join("short");
    let err = refused_start(
        &data,
        &[],
        &[("DESKBROKER_ADMIN_TOKEN", "only-twenty-chars-xx")],
    );
    assert!(err.contains("at least 32 characters"), "{err}");
    let file = dir.path().join("token");
    crate::write_secret(&file, "short-token\n");
    let err = refused_start(&data, &["--admin-token-file", file.to_str().unwrap()], &[]);
    assert!(
        err.contains("at least 32 characters") && err.contains("--admin-token-file"),
        "{err}"
    );
    let err = refused_start(
        &data,
        &[],
        &[(
            "DESKBROKER_ADMIN_TOKEN",
            "with blanks 0123456789 0123456789 0123",
        )],
    );
    assert!(err.contains("blanks"), "{err}");
    // Long enough, but a pattern anyone would try: refused, with how to
    // make a good one.
    for weak in [
        "Winter2026!Winter2026!Winter2026!",
        "passwordpasswordpasswordpassword",
        "abcdefghijklmnopqrstuvwxyz0123456789",
    ] {
        let err = refused_start(&data, &[], &[("DESKBROKER_ADMIN_TOKEN", weak)]);
        assert!(
            err.contains("easy to guess") && err.contains("openssl rand -hex 32"),
            "{weak}: {err}"
        );
    }

    // A token from a file.
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let data = dir.path().join("from-file");
    let (app, _) = App::spawn_opts(
        &data,
        "127.0.0.1:0",
        &["--admin-token-file", file.to_str().unwrap()],
        None,
    );
    app.ok("GET", "/api/v1/hostPools", None, 200).await;
    assert_eq!(mode(&data), 0o700, "data dir");
    let db = data.join("deskbroker.sqlite3");
    assert!(
        eventually(Duration::from_secs(10), || async { db.exists() }).await,
        "no database file"
    );
    for entry in std::fs::read_dir(&data).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            assert_eq!(mode(&path), 0o600, "{}", path.display());
        }
    }
    app.kill9();

    // A data dir and admin.token left open to others are closed, with a
    // warning; the token in the file still works.
    let data = dir.path().join("loose");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let token_file = data.join("admin.token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let app = App::spawn_without_token(&data);
    assert_eq!(mode(&data), 0o700, "data dir");
    assert_eq!(mode(&token_file), 0o600, "admin.token");
    app.ok("GET", "/api/v1/hostPools", None, 200).await;
}
