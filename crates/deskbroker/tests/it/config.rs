//! The configuration file of `serve` and `gateway` (`--config FILE`,
//! `DESKBROKER_CONFIG`), secrets by file only, `--log-format json` and
//! `--version`, through the real binary.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::{App, Ready, TOKEN, exe, ready_line, write_secret};

/// `deskbroker ARGS` with `env` (and without the variables the tests'
/// environment might carry); answers (success, stderr) once it exits.
pub(crate) fn refused(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = command(args, env).output().expect("run deskbroker");
    assert!(!out.status.success(), "{args:?} started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn command(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut c = Command::new(exe());
    c.args(args)
        .env_remove("DESKBROKER_ADMIN_TOKEN")
        .env_remove("DESKBROKER_DATA_DIR")
        .env_remove("DESKBROKER_LISTEN")
        .env_remove("DESKBROKER_CONFIG")
        .env_remove("DESKBROKER_LOG_FORMAT")
        .env("RUST_LOG", "info")
        .envs(env.iter().copied());
    c
}

/// Starts `deskbroker ARGS`, waits for its ready line; answers the child
/// and that line's addresses.
fn started(args: &[&str], env: &[(&str, &str)]) -> (Child, Ready) {
    let mut child = command(args, env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start deskbroker");
    match ready_line(&mut child, Duration::from_secs(120)) {
        Ok((ready, _)) => (child, ready),
        Err(e) => {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("{args:?} {e}: {}", String::from_utf8_lossy(&out.stderr))
        }
    }
}

/// An App for a broker started by hand (for its API and its cleanup).
fn app(child: Child, ready: Ready, data_dir: &Path) -> App {
    ::api::tls::install_default_provider();
    App {
        url: ready.api_url().to_string(),
        ready,
        http: reqwest::Client::new(),
        child,
        data_dir: data_dir.to_path_buf(),
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Everything from the file: listener, data dir, admin token by file,
/// a front door, a bound, JSON logs; a stand-alone gateway from its own
/// file, its token by file too.
#[tokio::test]
async fn serve_and_gateway_run_from_a_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("admin.token");
    write_secret(&token, &format!("{TOKEN}\n"));
    let data = dir.path().join("data");
    let config = dir.path().join("deskbroker.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\nadmin_token_file = \"{}\"\n\
             audit_retention_days = 30\nrdp_max_connections_per_source = 7\n\
             insecure_http = false\nlog_format = \"json\"\n",
            s(&data),
            s(&token)
        ),
    )
    .unwrap();
    let (mut child, ready) = started(&["serve", "--config", s(&config)], &[]);
    // The log is JSON, one object a line.
    let stderr = child.stderr.take().unwrap();
    let mut logs = BufReader::new(stderr).lines();
    let first = logs.next().expect("a log line").unwrap();
    let parsed: serde_json::Value =
        serde_json::from_str(&first).unwrap_or_else(|e| panic!("{first}: {e}"));
    assert!(
        parsed["level"].is_string() && parsed["fields"]["message"].is_string(),
        "{first}"
    );
    std::thread::spawn(move || logs.for_each(drop));
    let broker = app(child, ready, &data);
    broker.ok("GET", "/api/v1/hostPools", None, 200).await;
    assert!(
        data.join("deskbroker.sqlite3").exists(),
        "the file's data dir is used"
    );

    // The gateway, from DESKBROKER_CONFIG.
    let gateway_config = dir.path().join("gateway.toml");
    std::fs::write(
        &gateway_config,
        format!(
            "broker = \"{}\"\ntoken_file = \"{}\"\nrdp_listen = \"127.0.0.1:0\"\n",
            broker.url,
            s(&token)
        ),
    )
    .unwrap();
    let (mut gateway, ready) = started(&["gateway"], &[("DESKBROKER_CONFIG", s(&gateway_config))]);
    assert!(
        ready.rdp_addr().ip().is_loopback() && ready.api.is_none(),
        "{ready:?}"
    );
    let _ = gateway.kill();
    let _ = gateway.wait();
}

/// Flags and DESKBROKER_* variables win over the file; a setting the
/// file gets wrong is never read when a flag gives it.
#[tokio::test]
async fn flags_and_environment_win_over_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("admin.token");
    write_secret(&token, &format!("{TOKEN}\n"));
    let config = dir.path().join("deskbroker.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"not an address\"\ndata_dir = \"{}\"\nadmin_token_file = \"{}\"\n",
            s(&dir.path().join("from-file")),
            s(&token)
        ),
    )
    .unwrap();
    let flag_dir = dir.path().join("from-flag");
    let (child, ready) = started(
        &[
            "serve",
            "--config",
            s(&config),
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            s(&flag_dir),
        ],
        &[],
    );
    let a = app(child, ready, &flag_dir);
    a.ok("GET", "/api/v1/hostPools", None, 200).await;
    assert!(flag_dir.join("deskbroker.sqlite3").exists());
    drop(a);

    let env_dir = dir.path().join("from-env");
    let (child, ready) = started(
        &["serve", "--config", s(&config)],
        &[
            ("DESKBROKER_LISTEN", "127.0.0.1:0"),
            ("DESKBROKER_DATA_DIR", s(&env_dir)),
        ],
    );
    let a = app(child, ready, &env_dir);
    a.ok("GET", "/api/v1/hostPools", None, 200).await;
    assert!(env_dir.join("deskbroker.sqlite3").exists());
    assert!(
        !dir.path().join("from-file").exists(),
        "the file's data dir was used"
    );

    // A variable wins over a file's setting it excludes: the admin token
    // in the environment over the file's admin_token_file (which names a
    // file that does not exist here).
    let excluded = dir.path().join("excluded.toml");
    std::fs::write(
        &excluded,
        format!(
            "listen = \"127.0.0.1:0\"\nadmin_token_file = \"{}\"\n",
            s(&dir.path().join("no-such-token"))
        ),
    )
    .unwrap();
    let env_token_dir = dir.path().join("env-token");
    let (child, ready) = started(
        &[
            "serve",
            "--config",
            s(&excluded),
            "--data-dir",
            s(&env_token_dir),
        ],
        &[("DESKBROKER_ADMIN_TOKEN", TOKEN)],
    );
    let a = app(child, ready, &env_token_dir);
    a.ok("GET", "/api/v1/hostPools", None, 200).await;
    drop(a);

    // Without them, the file's bad listen address is refused, naming the
    // file and the key.
    let err = refused(&["serve", "--config", s(&config)], &[]);
    assert!(
        err.contains(s(&config)) && err.contains("`listen`"),
        "{err}"
    );
}

/// A file that cannot be used stops the command with one line naming the
/// file and the key: unknown keys (also with dashes), secrets written
/// inline, a database URL with a password, values of the wrong type, a
/// file that does not exist.
#[test]
fn bad_config_files_are_refused_naming_the_file_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str]); 8] = [
        ("listn = \"127.0.0.1:0\"\n", &["unknown key `listn`"]),
        ("data-dir = \"/tmp/x\"\n", &["unknown key `data-dir`"]),
        ("config = \"other.toml\"\n", &["unknown key `config`"]),
        (
            "admin_token = \"0123456789abcdef0123456789abcdef\"\n",
            &["`admin_token` is a secret", "admin_token_file"],
        ),
        (
            "database_url = \"postgres://u:secret@db/deskbroker\"\n",
            &["`database_url` holds a password", "database_url_file"],
        ),
        (
            "insecure_http = \"yes\"\n",
            &["`insecure_http` must be true or false"],
        ),
        (
            "audit_retention_days = \"many\"\n",
            &["`audit_retention_days`", "many"],
        ),
        ("listen = [1, 2]\n", &["`listen` must be a string"]),
    ];
    for (i, (text, says)) in cases.iter().enumerate() {
        let config = dir.path().join(format!("c{i}.toml"));
        std::fs::write(&config, text).unwrap();
        let err = refused(
            &[
                "serve",
                "--config",
                s(&config),
                "--data-dir",
                s(&dir.path().join("d")),
            ],
            &[],
        );
        assert!(err.contains(s(&config)), "{text}: {err}");
        for said in *says {
            assert!(err.contains(said), "{text}: {err}");
        }
        assert_eq!(err.trim().lines().count(), 1, "{text}: {err}");
    }
    let err = refused(
        &["gateway", "--config", s(&dir.path().join("c0.toml"))],
        &[],
    );
    assert!(err.contains("unknown key `listn`"), "{err}");
    let err = refused(
        &["serve", "--config", s(&dir.path().join("missing.toml"))],
        &[],
    );
    assert!(
        err.contains("cannot read the config file") && err.contains("missing.toml"),
        "{err}"
    );
    assert!(
        !dir.path().join("d").exists(),
        "a refused start touched the data dir"
    );
}

/// Secret files that the group or others may read are refused, whichever
/// way they are named (flag, variable, config file).
#[cfg(unix)]
#[test]
fn secret_files_readable_by_others_are_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    write_secret(&secret, &format!("{TOKEN}\n"));
    let data = dir.path().join("data");
    for mode in [0o644, 0o640, 0o604] {
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(mode)).unwrap();
        let said = format!("has mode {mode:o}");
        let err = refused(
            &[
                "serve",
                "--data-dir",
                s(&data),
                "--admin-token-file",
                s(&secret),
            ],
            &[],
        );
        assert!(err.contains(&said) && err.contains("chmod 600"), "{err}");
        let config = dir.path().join("c.toml");
        std::fs::write(&config, format!("admin_token_file = \"{}\"\n", s(&secret))).unwrap();
        let err = refused(
            &["serve", "--data-dir", s(&data), "--config", s(&config)],
            &[],
        );
        assert!(err.contains(&said), "{err}");
        let err = refused(
            &[
                "serve",
                "--data-dir",
                s(&data),
                "--database-url-file",
                s(&secret),
            ],
            &[("DESKBROKER_ADMIN_TOKEN", TOKEN)],
        );
        assert!(
            err.contains(&said) && err.contains("--database-url-file"),
            "{err}"
        );
        let err = refused(
            &["gateway", "--rdp-listen", "127.0.0.1:0"],
            &[("DESKBROKER_TOKEN_FILE", s(&secret))],
        );
        assert!(err.contains(&said) && err.contains("--token-file"), "{err}");
    }
}

/// The example config of deploy/ is one the broker takes (its paths
/// pointed at a temporary directory by flags, which win over the file).
#[tokio::test]
async fn the_example_config_is_accepted() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/deskbroker.toml");
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("admin.token");
    write_secret(&token, &format!("{TOKEN}\n"));
    let data = dir.path().join("data");
    let (child, ready) = started(
        &[
            "serve",
            "--config",
            s(&example),
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            s(&data),
            "--admin-token-file",
            s(&token),
        ],
        &[],
    );
    let a = app(child, ready, &data);
    a.ok("GET", "/api/v1/hostPools", None, 200).await;
}

/// `--version` names the commit the binary was built from.
#[test]
fn version_names_the_commit() {
    let out = Command::new(exe()).arg("--version").output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.starts_with("deskbroker "),
        "{said}"
    );
    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let commit = head.unwrap_or_else(|| "unknown".into());
    assert!(said.contains(&format!("(commit {commit})")), "{said}");
}

/// A TLS private key every user of the machine may read is refused at
/// start, naming the file, for each listener that takes one: the API's
/// (`--tls-key`), and the RD Gateway's of `serve` and of the stand-alone
/// gateway (`--gateway-tls-key`). A key its group may read (Debian's
/// `ssl-cert`) is taken.
#[cfg(unix)]
#[test]
fn a_tls_key_every_user_may_read_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let key_pair = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .expect("params")
        .self_signed(&key_pair)
        .expect("certificate");
    let (cert_path, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    write_secret(&key, &key_pair.serialize_pem());
    let token = dir.path().join("token");
    write_secret(&token, &format!("{TOKEN}\n"));
    let data = dir.path().join("data");
    let (cert_path, key_s) = (s(&cert_path), s(&key));
    let serve_api = [
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        s(&data),
        "--tls-cert",
        cert_path,
        "--tls-key",
        key_s,
    ];
    let serve_gateway = [
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        s(&data),
        "--gateway-listen",
        "127.0.0.1:0",
        "--gateway-tls-cert",
        cert_path,
        "--gateway-tls-key",
        key_s,
    ];
    let gateway = [
        "gateway",
        "--broker",
        "http://127.0.0.1:9",
        "--token-file",
        s(&token),
        "--gateway-listen",
        "127.0.0.1:0",
        "--gateway-tls-cert",
        cert_path,
        "--gateway-tls-key",
        key_s,
    ];
    let env = [("DESKBROKER_ADMIN_TOKEN", TOKEN)];
    for mode in [0o644, 0o604] {
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
        for args in [&serve_api[..], &serve_gateway[..], &gateway[..]] {
            let err = refused(args, &env);
            assert!(
                err.contains(&format!("{key_s} has mode {mode:o}"))
                    && err.contains("every user of this machine may read"),
                "{args:?}: {err}"
            );
        }
    }
    // Readable by its group: taken.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let (mut child, ready) = started(&serve_api, &env);
    assert!(ready.api_url().starts_with("https://"), "{ready:?}");
    let _ = child.kill();
    let _ = child.wait();
}

/// An admin token must be random text: a passphrase of common words is
/// refused at start, however long, with the command that makes a good
/// token; `openssl rand -hex 32`'s kind of token and 32 random bytes in
/// base64url (43 characters) start the broker, which then takes them.
#[tokio::test]
async fn an_admin_token_must_be_random_text_not_a_passphrase() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    for weak in [
        "correct-horse-battery-staple-2026!",
        "the-quick-brown-fox-jumps-over-the-lazy-dog-1",
    ] {
        let err = refused(
            &["serve", "--listen", "127.0.0.1:0", "--data-dir", &s(&data)],
            &[("DESKBROKER_ADMIN_TOKEN", weak)],
        );
        assert!(
            err.contains("easy to guess")
                && err.contains("passphrase")
                && err.contains("openssl rand -hex 32"),
            "{weak}: {err}"
        );
        // From a file too.
        let file = dir.path().join("weak.token");
        write_secret(&file, &format!("{weak}\n"));
        let err = refused(
            &[
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                &s(&data),
                "--admin-token-file",
                &s(&file),
            ],
            &[],
        );
        assert!(
            err.contains("openssl rand -hex 32") && err.contains("--admin-token-file"),
            "{weak}: {err}"
        );
    }
    for (i, strong) in [
        "c4a1f07e9b3d52e86f0a1b7c3d9e25f48a6b0c1d7e3f92a54b8c6d0e1f7a3b95",
        "kJ3v_Qm8ZtX-2pLr7Wc9NfYb4Hs6Ae1DgVu0Ko5RiTw",
    ]
    .into_iter()
    .enumerate()
    {
        let data = dir.path().join(format!("strong{i}"));
        let (child, ready) = started(
            &["serve", "--listen", "127.0.0.1:0", "--data-dir", &s(&data)],
            &[("DESKBROKER_ADMIN_TOKEN", strong)],
        );
        let a = app(child, ready, &data);
        let (status, v) = a
            .call_with("GET", "/api/v1/hostPools", None, Some(strong))
            .await;
        assert_eq!(status, 200, "{strong}: {v}");
    }
}
