//! HTTPS end to end, against the real binary: the
//! CLI trusting a private CA (`--ca-cert`) and pinning a certificate
//! (`--tls-fingerprint`); wrong certificates refused with a clear error
//! while the broker keeps serving; a real agent heartbeating over HTTPS;
//! SIGHUP swapping the certificate under an open connection; a
//! self-signed certificate generated once for a non-loopback listener;
//! and two replicas on PostgreSQL (reached with `sslmode=require`)
//! forwarding over HTTPS.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::pg::scratch;
use crate::{App, PATIENCE, TOKEN, eventually, exe};

/// A private CA and the files of certificates it issued.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: PathBuf,
}

impl Ca {
    fn new(dir: &Path, name: &str) -> Ca {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).expect("CA certificate");
        let pem = dir.join(format!("{name}.pem"));
        std::fs::write(&pem, cert.pem()).expect("write the CA");
        Ca {
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    /// A leaf for 127.0.0.1 and localhost, written as `name`-cert.pem and
    /// `name`-key.pem; answers the paths and the leaf's SHA-256.
    fn leaf(&self, dir: &Path, name: &str) -> (PathBuf, PathBuf, String) {
        let key = KeyPair::generate().expect("leaf key");
        let params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".into()])
            .expect("leaf params");
        let cert = params.signed_by(&key, &self.issuer).expect("leaf");
        let (cert_path, key_path) = (
            dir.join(format!("{name}-cert.pem")),
            dir.join(format!("{name}-key.pem")),
        );
        std::fs::write(&cert_path, cert.pem()).expect("write the leaf");
        crate::write_secret(&key_path, &key.serialize_pem());
        (cert_path, key_path, fingerprint(cert.der()))
    }
}

/// `AB:CD:…`, as serve prints it.
fn fingerprint(der: &[u8]) -> String {
    Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// An HTTP client of the tests that trusts what `trust` says.
fn client(trust: &api::Trust) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_backend_preconfigured(trust.client_config().expect("TLS config"))
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

/// `deskbroker serve` with `args`: the app (its client trusting `trust`)
/// and the lines serve printed before its ready line (the TLS fingerprint
/// line among them, if it prints one).
fn serve(data_dir: &Path, args: &[&str], trust: &api::Trust) -> (App, Vec<String>) {
    let mut child = Command::new(exe())
        .arg("serve")
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .env("DESKBROKER_ADMIN_TOKEN", TOKEN)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start deskbroker serve");
    let (ready, lines) = match crate::ready_line(&mut child, crate::SERVE_START) {
        Ok(started) => started,
        Err(e) => {
            let _ = child.kill();
            let status = child.wait().expect("wait");
            panic!("serve {e} ({status})");
        }
    };
    let app = App {
        url: ready.api_url().to_string(),
        ready,
        http: client(trust),
        child,
        data_dir: data_dir.to_path_buf(),
    };
    (app, lines)
}

/// The fingerprint serve printed.
fn printed_fingerprint(lines: &[String]) -> String {
    lines
        .iter()
        .find_map(|l| l.strip_prefix("TLS certificate SHA-256 fingerprint "))
        .expect("serve printed the fingerprint")
        .to_string()
}

/// The CLI with `args` against `app`'s URL; (success, stdout, stderr).
fn cli(app: &App, args: &[&str]) -> (bool, String, String) {
    cli_at(&app.url, args)
}

fn cli_at(url: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(exe())
        .args(args)
        .env("DESKBROKER_URL", url)
        .env("DESKBROKER_TOKEN", TOKEN)
        .env_remove("DESKBROKER_CA_CERT")
        .env_remove("DESKBROKER_TLS_FINGERPRINT")
        .output()
        .expect("run the CLI");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn pool_names(stdout: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(stdout).expect("JSON");
    v.as_array()
        .expect("a list")
        .iter()
        .map(|p| p["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn the_cli_trusts_a_private_ca_or_a_pinned_certificate_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let (cert, key, leaf_sha) = ca.leaf(dir.path(), "broker");
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let trust = api::Trust::ca_file(&ca.pem).expect("CA");
    let (app, lines) = serve(
        &dir.path().join("data"),
        &[
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            cert,
            "--tls-key",
            key,
        ],
        &trust,
    );
    assert!(app.url.starts_with("https://127.0.0.1:"), "{}", app.url);
    assert_eq!(printed_fingerprint(&lines), leaf_sha);
    app.ok("PUT", "/api/v1/hostPools/tls", Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst", "maxSessionLimit": 5})), 201).await;

    // --ca-cert: the chain and the name are checked.
    let ca_pem = ca.pem.to_str().unwrap();
    let (ok, out, err) = cli(
        &app,
        &["hostpool", "list", "-o", "json", "--ca-cert", ca_pem],
    );
    assert!(ok, "{err}");
    assert_eq!(pool_names(&out), ["tls"]);
    // --tls-fingerprint: that certificate only, with or without colons.
    for pin in [leaf_sha.clone(), leaf_sha.replace(':', "").to_lowercase()] {
        let (ok, out, err) = cli(
            &app,
            &["hostpool", "list", "-o", "json", "--tls-fingerprint", &pin],
        );
        assert!(ok, "{pin}: {err}");
        assert_eq!(pool_names(&out), ["tls"]);
    }

    // Attacks, each refused with a line that says why.
    // A wrong pin (an attacker's certificate would not match either).
    let wrong = fingerprint(b"another certificate");
    let (ok, _, err) = cli(&app, &["hostpool", "list", "--tls-fingerprint", &wrong]);
    assert!(!ok);
    assert!(
        err.contains("TLS with the broker at")
            && err.contains(&format!("not the pinned {wrong}"))
            && err.contains(&leaf_sha),
        "{err}"
    );
    // The system's roots do not know the private CA.
    let (ok, _, err) = cli(&app, &["hostpool", "list"]);
    assert!(!ok);
    assert!(
        err.contains("TLS with the broker at") && err.contains("invalid peer certificate"),
        "{err}"
    );
    // Another CA's certificate for the same name is not this CA's.
    let other = Ca::new(dir.path(), "other-ca");
    let (ok, _, err) = cli(
        &app,
        &["hostpool", "list", "--ca-cert", other.pem.to_str().unwrap()],
    );
    assert!(!ok);
    assert!(err.contains("invalid peer certificate"), "{err}");
    // A name the certificate is not for.
    let port = app.url.rsplit(':').next().unwrap();
    let out = Command::new(exe())
        .args(["hostpool", "list", "--ca-cert", ca_pem])
        .env("DESKBROKER_URL", format!("https://127.0.0.2:{port}"))
        .env("DESKBROKER_TOKEN", TOKEN)
        .output()
        .expect("CLI");
    // 127.0.0.2 is loopback but the listener is on 127.0.0.1 only: either
    // nothing answers or the name is refused; never a success.
    assert!(!out.status.success());
    // Both trust flags at once is a usage error, before any request.
    let (ok, _, err) = cli(
        &app,
        &[
            "hostpool",
            "list",
            "--ca-cert",
            ca_pem,
            "--tls-fingerprint",
            &leaf_sha,
        ],
    );
    assert!(!ok);
    assert!(err.contains("not both"), "{err}");
    // Plain HTTP to the HTTPS port gets no answer of the API.
    api::tls::install_default_provider();
    let plain = reqwest::Client::new();
    let r = plain
        .get(format!(
            "{}/api/v1/hostPools",
            app.url.replace("https://", "http://")
        ))
        .bearer_auth(TOKEN)
        .send()
        .await;
    assert!(r.is_err() || !r.unwrap().status().is_success());

    // The broker kept serving everyone else.
    let (ok, out, err) = cli(
        &app,
        &["hostpool", "list", "-o", "json", "--ca-cert", ca_pem],
    );
    assert!(ok, "{err}");
    assert_eq!(pool_names(&out), ["tls"]);
    assert!(app.text("/metrics").await.contains("deskbroker"));
}

#[tokio::test]
async fn a_real_agent_registers_and_heartbeats_over_https() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let (cert, key, _) = ca.leaf(dir.path(), "broker");
    let trust = api::Trust::ca_file(&ca.pem).expect("CA");
    let (app, _) = serve(
        &dir.path().join("data"),
        &[
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
        &trust,
    );
    app.ok("PUT", "/api/v1/hostPools/farm", Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst", "maxSessionLimit": 5})), 201).await;
    let token = app
        .ok(
            "POST",
            "/api/v1/hostPools/farm/registrationToken",
            Some(json!({})),
            200,
        )
        .await["token"]
        .as_str()
        .unwrap()
        .to_string();
    let sessions = dir.path().join("sessions.jsonl");
    std::fs::write(
        &sessions,
        "{\"user\": \"dora@contoso.com\", \"state\": \"Active\"}\n",
    )
    .unwrap();
    let agent = |name: &str, trust_flag: [&str; 2]| {
        Command::new(exe())
            .args(["agent", "--broker", &app.url, "--host-pool", "farm"])
            .args(["--registration-token", &token, "--name", name])
            .args(["--address", "10.9.9.9:3389", "--interval", "5"])
            .args(trust_flag)
            .arg("--state-dir")
            .arg(dir.path().join(format!("state-{name}")))
            .arg("--sessions-command")
            .arg(format!("cat {}", sessions.display()))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start deskbroker agent")
    };
    let mut good = Killed(agent("h1", ["--ca-cert", ca.pem.to_str().unwrap()]));
    // An agent pinning another certificate never reaches the broker.
    let wrong = fingerprint(b"not the broker");
    let _bad = Killed(agent("h2", ["--tls-fingerprint", &wrong]));
    let host = |name: &'static str| {
        let app = &app;
        async move {
            app.call(
                "GET",
                &format!("/api/v1/hostPools/farm/sessionHosts/{name}"),
                None,
            )
            .await
        }
    };
    let beating = eventually(PATIENCE, || async {
        let (status, h) = host("h1").await;
        status == 200 && h["lastHeartBeat"].is_string() && h["sessions"] == 1
    })
    .await;
    assert!(
        beating,
        "h1 registered and heartbeats over HTTPS: {:?}",
        host("h1").await
    );
    // The pinned-wrong agent had as long and registered nothing.
    assert_eq!(host("h2").await.0, 404);
    assert!(
        good.0.try_wait().unwrap().is_none(),
        "the agent keeps running"
    );
}

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn sighup_serves_a_new_certificate_and_keeps_open_connections() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let (cert, key, old_sha) = ca.leaf(dir.path(), "old");
    let (new_cert, new_key, new_sha) = ca.leaf(dir.path(), "new");
    let live_cert = dir.path().join("live-cert.pem");
    let live_key = dir.path().join("live-key.pem");
    std::fs::copy(&cert, &live_cert).unwrap();
    std::fs::copy(&key, &live_key).unwrap();
    let pin = |sha: &str| api::Trust::pinned(api::Fingerprint::parse(sha).unwrap());
    let (app, lines) = serve(
        &dir.path().join("data"),
        &[
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            live_cert.to_str().unwrap(),
            "--tls-key",
            live_key.to_str().unwrap(),
        ],
        &pin(&old_sha),
    );
    assert_eq!(printed_fingerprint(&lines), old_sha);
    // One connection, kept open by the client's pool (one idle connection
    // at most, so the next request must reuse it).
    let kept = reqwest::Client::builder()
        .tls_backend_preconfigured(pin(&old_sha).client_config().unwrap())
        .pool_max_idle_per_host(1)
        .pool_idle_timeout(Duration::from_secs(600))
        .build()
        .unwrap();
    let healthz = format!("{}/healthz", app.url);
    assert!(
        kept.get(&healthz)
            .send()
            .await
            .unwrap()
            .status()
            .is_success()
    );

    // A broken file first: the reload fails and the old certificate stays.
    std::fs::write(&live_cert, "garbage").unwrap();
    hangup(&app);
    std::fs::copy(&new_cert, &live_cert).unwrap();
    std::fs::copy(&new_key, &live_key).unwrap();
    hangup(&app);

    // New connections see the new certificate…
    let fresh = client(&pin(&new_sha));
    let swapped = eventually(PATIENCE, || async {
        fresh
            .get(&healthz)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    })
    .await;
    assert!(
        swapped,
        "a new connection gets the new certificate after SIGHUP"
    );
    let old_only = client(&pin(&old_sha));
    assert!(
        old_only.get(&healthz).send().await.is_err(),
        "a new connection no longer gets the old one"
    );
    // …and the connection opened before the reload still works: a new
    // connection pinned to the old certificate fails (just shown), so this
    // success is the old connection.
    let r = kept
        .get(format!("{}/api/v1/hostPools", app.url))
        .bearer_auth(TOKEN)
        .send()
        .await;
    assert!(
        r.is_ok_and(|r| r.status().is_success()),
        "the open connection survived the reload"
    );
    assert!(
        fresh
            .get(&healthz)
            .send()
            .await
            .unwrap()
            .status()
            .is_success(),
        "the broker still serves"
    );
}

/// Sends SIGHUP to the broker (its own pid, positive).
fn hangup(app: &App) {
    let pid = app.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .unwrap()
            .success()
    );
}

#[tokio::test]
async fn beyond_loopback_a_self_signed_certificate_is_generated_once_unless_plain_http_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // 0.0.0.0 is every address of the machine: beyond loopback.
    let (app, lines) = serve(&data, &["--listen", "0.0.0.0:0"], &api::Trust::system());
    assert!(app.url.starts_with("https://0.0.0.0:"), "{}", app.url);
    let printed = printed_fingerprint(&lines);
    let pem = std::fs::read_to_string(data.join("tls-cert.pem"))
        .expect("the certificate is in the data dir");
    let der = pem_to_der(&pem);
    assert_eq!(
        printed,
        fingerprint(&der),
        "the fingerprint printed is the file's"
    );
    let port = app.url.rsplit(':').next().unwrap().to_string();
    let url = format!("https://127.0.0.1:{port}");
    let pinned = client(&api::Trust::pinned(
        api::Fingerprint::parse(&printed).unwrap(),
    ));
    let r = pinned
        .get(format!("{url}/api/v1/hostPools"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Not trusted by anyone who did not pin it.
    assert!(
        client(&api::Trust::system())
            .get(format!("{url}/healthz"))
            .send()
            .await
            .is_err()
    );
    // The CLI with the printed pin.
    let (ok, _, err) = cli_at(&url, &["hostpool", "list", "--tls-fingerprint", &printed]);
    assert!(ok, "{err}");
    drop(app);

    // Restarted: the same certificate, so the pin still holds.
    let (again, lines) = serve(&data, &["--listen", "0.0.0.0:0"], &api::Trust::system());
    assert_eq!(printed_fingerprint(&lines), printed);
    drop(again);
    // --insecure-http: plain HTTP, on purpose.
    let (plain, lines) = serve(
        &data,
        &["--listen", "0.0.0.0:0", "--insecure-http"],
        &api::Trust::system(),
    );
    assert!(plain.url.starts_with("http://0.0.0.0:"), "{}", plain.url);
    assert!(
        !lines.iter().any(|l| l.starts_with("TLS certificate")),
        "{lines:?}"
    );
}

/// The DER bytes of the first PEM block.
fn pem_to_der(pem: &str) -> Vec<u8> {
    use rustls_pki_types::pem::PemObject;
    rustls_pki_types::CertificateDer::from_pem_slice(pem.as_bytes())
        .expect("PEM")
        .to_vec()
}

#[tokio::test]
async fn replicas_forward_over_https_and_reach_postgresql_over_tls() {
    let db = scratch("tls_replicas").await;
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let (cert, key, _) = ca.leaf(dir.path(), "replica");
    let trust = api::Trust::ca_file(&ca.pem).expect("CA");
    let url = format!(
        "{}{}sslmode=require",
        db.url(),
        if db.url().contains('?') { "&" } else { "?" }
    );
    let args = |_: usize| {
        vec![
            "--listen".to_string(),
            "127.0.0.1:0".into(),
            "--database-url".into(),
            url.clone(),
            "--tls-cert".into(),
            cert.to_str().unwrap().into(),
            "--tls-key".into(),
            key.to_str().unwrap().into(),
            "--ca-cert".into(),
            ca.pem.to_str().unwrap().into(),
        ]
    };
    let apps: Vec<App> = (0..2)
        .map(|i| {
            let a = args(i);
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            serve(&dir.path().join(format!("r{i}")), &a, &trust).0
        })
        .collect();
    // One leads, the other follows it at its https:// address.
    let follower = eventually(PATIENCE, || async {
        for (i, app) in apps.iter().enumerate() {
            if let Some(h) = app.health().await
                && h.role == "follower"
                && h.leader.is_some_and(|l| l.starts_with("https://"))
            {
                return Some(i);
            }
        }
        None
    })
    .await;
    let follower = &apps[follower.expect("a follower of an https:// leader")];
    // A write through the follower is forwarded to the leader over TLS,
    // with the client's token; without a token it is refused there.
    follower.ok("PUT", "/api/v1/hostPools/p", Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst", "maxSessionLimit": 5})), 201).await;
    follower
        .ok(
            "PUT",
            "/api/v1/hostPools/p/sessionHosts/h1",
            Some(json!({"address": "10.0.0.1:3389"})),
            201,
        )
        .await;
    let placed = follower
        .ok(
            "POST",
            "/api/v1/hostPools/p/connect",
            Some(json!({"user": "eve@contoso.com"})),
            200,
        )
        .await;
    assert_eq!(placed["sessionHost"], "h1", "{placed}");
    let (status, _) = follower
        .call_with("GET", "/api/v1/hostPools", None, None)
        .await;
    assert_eq!(
        status, 401,
        "the forwarded request carries only the client's own credentials"
    );
    // Every connection of the brokers to PostgreSQL is encrypted.
    let (client, conn) = tokio_postgres::connect(db.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let rows = client
        .query(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.datname = current_database() AND a.application_name = 'deskbroker'",
            &[],
        )
        .await
        .unwrap();
    assert!(!rows.is_empty(), "the replicas are connected");
    assert!(
        rows.iter().all(|r| r.get::<_, bool>(0)),
        "every broker connection uses TLS"
    );
}

#[tokio::test]
async fn a_database_whose_certificate_is_not_the_trusted_one_is_refused() {
    let db = scratch("tls_verify").await;
    let dir = tempfile::tempdir().unwrap();
    // The test server's certificate was not issued by this CA: as a man in
    // the middle's would not be.
    let ca = Ca::new(dir.path(), "not-the-servers-ca");
    let sep = if db.url().contains('?') { "&" } else { "?" };
    let url = format!(
        "{}{sep}sslmode=verify-full&sslrootcert={}",
        db.url(),
        ca.pem.display()
    );
    let err = crate::pg::spawn_with(&dir.path().join("r"), &["--database-url", &url])
        .err()
        .expect("a database it cannot verify is refused");
    assert!(
        err.contains("cannot connect to PostgreSQL") && err.contains("certificate"),
        "{err}"
    );
    // With the encryption asked for, the same database is used.
    let url = format!("{}{sep}sslmode=require", db.url());
    let app = crate::pg::spawn_with(&dir.path().join("ok"), &["--database-url", &url])
        .expect("sslmode=require connects");
    app.ok("GET", "/api/v1/hostPools", None, 200).await;
}

/// `deskbroker gateway` against `broker` with `trust_flags`; answers the
/// process and its RDP address.
fn gateway(broker: &str, trust_flags: &[&str]) -> (Killed, String) {
    let mut child = Command::new(exe())
        .args(["gateway", "--broker", broker, "--rdp-listen", "127.0.0.1:0"])
        .args(["--rdp-default-pool", "farm"])
        .args(trust_flags)
        .env("DESKBROKER_TOKEN", TOKEN)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start deskbroker gateway");
    let started = crate::ready_line(&mut child, crate::SERVE_START);
    let child = Killed(child);
    let addr = started
        .expect("the gateway starts")
        .0
        .rdp_addr()
        .to_string();
    (child, addr)
}

/// Sends a real client's first PDU to the front door at `front_door`;
/// answers whether `host` was dialled and got it byte for byte, and the
/// client connection (kept open so the session stays up).
async fn rdp_through(
    front_door: &str,
    host: &tokio::net::TcpListener,
) -> (bool, tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let pdu = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../gateway/tests/fixtures/xfreerdp-2.11.7-user.bin"
    ))
    .unwrap();
    let mut client = tokio::net::TcpStream::connect(front_door).await.unwrap();
    client.write_all(&pdu).await.unwrap();
    // The front door either dials the host, or refuses the client when it
    // cannot place the user: an RDP Negotiation Failure, then the close.
    let mut start = [0u8; 2];
    tokio::select! {
        accepted = host.accept() => {
            let (mut upstream, _) = accepted.unwrap();
            let mut got = vec![0; pdu.len()];
            upstream.read_exact(&mut got).await.unwrap();
            (got == pdu, client)
        }
        read = client.read_exact(&mut start) => {
            read.expect("the front door answers a refused client");
            crate::wire::refusal(&mut client, start).await;
            (false, client)
        }
    }
}

#[tokio::test]
async fn the_standalone_front_door_places_over_https_and_refuses_a_wrong_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let (cert, key, leaf_sha) = ca.leaf(dir.path(), "broker");
    let trust = api::Trust::ca_file(&ca.pem).expect("CA");
    let (app, _) = serve(
        &dir.path().join("data"),
        &[
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
        &trust,
    );
    let host = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host_addr = host.local_addr().unwrap().to_string();
    app.ok("PUT", "/api/v1/hostPools/farm", Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst", "maxSessionLimit": 5, "allowedAddressRanges": ["127.0.0.0/8"]})), 201).await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm/sessionHosts/h1",
        Some(json!({"address": host_addr})),
        201,
    )
    .await;

    // A front door pinning another certificate places nobody: its admin
    // token never leaves it.
    let wrong = fingerprint(b"a man in the middle");
    let (_bad, bad_door) = gateway(&app.url, &["--tls-fingerprint", &wrong]);
    let (dialled, _c) = rdp_through(&bad_door, &host).await;
    assert!(!dialled, "no placement through an untrusted broker");
    let (status, sessions) = app
        .call("GET", "/api/v1/hostPools/farm/userSessions", None)
        .await;
    assert_eq!(
        (status, sessions["value"].as_array().map(Vec::len)),
        (200, Some(0))
    );

    // Trusting the CA, or pinning the right certificate: placed.
    for flags in [
        vec!["--ca-cert", ca.pem.to_str().unwrap()],
        vec!["--tls-fingerprint", leaf_sha.as_str()],
    ] {
        let (_gw, door) = gateway(&app.url, &flags);
        let (dialled, _client) = rdp_through(&door, &host).await;
        assert!(dialled, "{flags:?}: the host got the first PDU");
    }
}

#[tokio::test]
async fn a_replicas_own_front_door_follows_its_certificate_across_a_reload() {
    let db = scratch("tls_front_door").await;
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let (cert, key, _) = ca.leaf(dir.path(), "old");
    let (new_cert, new_key, new_sha) = ca.leaf(dir.path(), "new");
    let live_cert = dir.path().join("live-cert.pem");
    let live_key = dir.path().join("live-key.pem");
    std::fs::copy(&cert, &live_cert).unwrap();
    std::fs::copy(&key, &live_key).unwrap();
    let trust = api::Trust::ca_file(&ca.pem).expect("CA");
    let (app, _) = serve(
        &dir.path().join("r"),
        &[
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            db.url(),
            "--tls-cert",
            live_cert.to_str().unwrap(),
            "--tls-key",
            live_key.to_str().unwrap(),
            "--rdp-listen",
            "127.0.0.1:0",
            "--rdp-default-pool",
            "farm",
        ],
        &trust,
    );
    let door = app.ready.rdp_addr().to_string();
    let leads = eventually(PATIENCE, || async { app.leads().await }).await;
    assert!(leads);
    let host = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host_addr = host.local_addr().unwrap().to_string();
    app.ok("PUT", "/api/v1/hostPools/farm", Some(json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst", "maxSessionLimit": 5, "allowedAddressRanges": ["127.0.0.0/8"]})), 201).await;
    app.ok(
        "PUT",
        "/api/v1/hostPools/farm/sessionHosts/h1",
        Some(json!({"address": host_addr})),
        201,
    )
    .await;

    // A new certificate, loaded on SIGHUP.
    std::fs::copy(&new_cert, &live_cert).unwrap();
    std::fs::copy(&new_key, &live_key).unwrap();
    hangup(&app);
    let fresh = client(&api::Trust::pinned(
        api::Fingerprint::parse(&new_sha).unwrap(),
    ));
    let swapped = eventually(PATIENCE, || async {
        fresh
            .get(format!("{}/healthz", app.url))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    })
    .await;
    assert!(swapped, "the new certificate is served");
    // The front door, which places through this replica's own API over
    // HTTPS, still places users.
    let (dialled, _client) = rdp_through(&door, &host).await;
    assert!(dialled, "the front door placed the user after the reload");
}

/// `openssl s_client` against `address`, sending `server_name` as SNI, with
/// `request` written once the handshake is done; answers the process, its
/// input (the client closes in order, with close_notify, when it ends) and
/// its output (`-quiet`: only what the server sends).
fn s_client(
    openssl: &Path,
    address: &str,
    server_name: &str,
    request: &[u8],
) -> (Child, std::process::ChildStdin, ChildStdout) {
    use std::io::Write;
    let mut child = Command::new(openssl)
        .args(["s_client", "-quiet", "-no_ign_eof", "-connect", address])
        .args(["-servername", server_name])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start openssl s_client");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(request).expect("write the request");
    let stdout = child.stdout.take().expect("stdout");
    (child, stdin, stdout)
}

/// Ordinary TLS clients leave no WARN line in the broker's log: one that
/// sends an IP address as its TLS server name (xfreerdp does, given
/// `/g:203.0.113.7`, as does `openssl s_client -servername` with an
/// address), and one that closes its connection without a close_notify
/// alert (a browser or xfreerdp that is closed or killed). Both under the
/// broker's default log level and under the packaged unit's
/// `RUST_LOG=info`; the connections themselves are in the log, at INFO.
#[tokio::test]
async fn ordinary_tls_clients_leave_no_warning_in_the_log() {
    let openssl = crate::require("openssl", "openssl");
    let dir = tempfile::tempdir().expect("tempdir");
    for (n, rust_log) in [None, Some("info")].into_iter().enumerate() {
        let log = dir.path().join(format!("serve-{n}.log"));
        let mut command = Command::new(exe());
        command
            .env("DESKBROKER_ADMIN_TOKEN", TOKEN)
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join(format!("data-{n}")))
            .args(["--gateway-listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("log file"));
        match rust_log {
            Some(level) => command.env("RUST_LOG", level),
            None => command.env_remove("RUST_LOG"),
        };
        let mut broker = crate::Killed(command.spawn().expect("start serve"));
        let (ready, _) = crate::ready_line(&mut broker.0, PATIENCE * 4).expect("serve starts");
        let gateway = ready.gateway_addr().to_string();
        let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
        let connections = || read_log().matches("rd gateway connection").count();

        // An IP address as the server name; the client then closes in
        // order (close_notify) when its input ends.
        let (mut ip_sni, input, _output) = s_client(&openssl, &gateway, "127.0.0.1", b"");
        drop(input);
        let closed = eventually(PATIENCE, || {
            let n = connections();
            async move { n >= 1 }
        })
        .await;
        let _ = ip_sni.kill();
        let _ = ip_sni.wait();
        assert!(closed, "the connection was not logged:\n{}", read_log());

        // A browser's request for the page, answered; then the client is
        // killed: its connection closes without close_notify.
        let (mut killed, _input, out) = s_client(
            &openssl,
            &gateway,
            "localhost",
            b"GET /web HTTP/1.1\r\nHost: localhost\r\n\r\n",
        );
        let mut status = String::new();
        BufReader::new(out)
            .read_line(&mut status)
            .expect("read the answer");
        assert!(status.starts_with("HTTP/1.1 200"), "{status:?}");
        killed.kill().expect("kill s_client");
        let _ = killed.wait();
        let closed = eventually(PATIENCE, || {
            let n = connections();
            async move { n >= 2 }
        })
        .await;
        assert!(
            closed,
            "the closed connection was not logged:\n{}",
            read_log()
        );

        let log = read_log();
        let warnings: Vec<&str> = log.lines().filter(|l| l.contains(" WARN ")).collect();
        assert!(
            warnings.is_empty(),
            "RUST_LOG={rust_log:?}: ordinary clients logged warnings:\n{}",
            warnings.join("\n")
        );
    }
}
