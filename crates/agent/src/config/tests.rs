//! The configuration's tests: flags, the file, secrets and what the
//! machine is asked for, merged and validated.

use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    agent: AgentArgs,
}

/// Parses a command line the way the binary does. Settings that clap
/// would take from `DESKBROKER_*` variables are cleared unless the line
/// gives them, so a developer's environment cannot change the outcome.
fn args(line: &str) -> AgentArgs {
    let words = std::iter::once("agent").chain(line.split_whitespace());
    let mut a = Cli::try_parse_from(words)
        .expect("command line parses")
        .agent;
    let has = |flag: &str| line.split_whitespace().any(|w| w == flag);
    if !has("--broker") {
        a.broker = None;
    }
    if !has("--host-pool") {
        a.host_pool = None;
    }
    if !has("--registration-token") {
        a.registration_token = None;
    }
    if !has("--registration-token-file") {
        a.registration_token_file = None;
    }
    if !has("--config") {
        a.config = None;
    }
    if !has("--ca-cert") {
        a.ca_cert = None;
    }
    if !has("--tls-fingerprint") {
        a.tls_fingerprint = None;
    }
    a
}

fn file(text: &str) -> FileConfig {
    FileConfig::parse(text, Path::new("agent.toml")).expect("file parses")
}

fn no_hostname() -> Result<String, String> {
    Err("hostname asked for".into())
}

fn no_ipv4() -> Result<Ipv4Addr, String> {
    Err("address asked for".into())
}

fn resolve(args: AgentArgs, file: FileConfig) -> Result<Config, ConfigError> {
    Config::resolve(args, file, no_hostname, no_ipv4)
}

const MINIMAL: &str =
    "--broker http://127.0.0.1:8080 --host-pool farm --name h7 --address 10.0.0.7:3389";

#[test]
fn flags_alone_give_the_documented_defaults() {
    let c = resolve(args(MINIMAL), FileConfig::default()).unwrap();
    assert_eq!(c.broker.as_url().as_str(), "http://127.0.0.1:8080/");
    assert_eq!(c.host_pool, "farm");
    assert_eq!(c.name, "h7");
    assert_eq!(c.address, "10.0.0.7:3389");
    assert_eq!(c.state_dir, PathBuf::from("/var/lib/deskbroker-agent"));
    assert_eq!(c.interval, Duration::from_secs(30));
    assert_eq!(c.load_script, None);
    assert_eq!(c.sessions, SessionsSource::Loginctl { user_domain: None });
    assert_eq!(c.capabilities, None);
    assert!(policy_is_empty(&c.policy));
}

#[test]
fn flags_win_over_the_file_and_the_file_fills_the_rest() {
    let f = file(
        r#"
        broker = "http://file:1"
        host_pool = "file-pool"
        registration_token = "file-token"
        name = "file-name"
        address = "file-host:3390"
        state_dir = "/file/state"
        interval = 60
        load_script = "/file/load.sh"
        sessions_command = "file-sessions"
        capabilities = ["rdp", "gpu"]
        load_index_threshold = 80
        connecting_session_threshold = 10
        "#,
    );
    let c = resolve(
        args("--broker http://flag:2 --name flag-name --interval 5 --load-index-threshold 90"),
        f,
    )
    .unwrap();
    assert_eq!(c.broker.as_url().as_str(), "http://flag:2/");
    assert_eq!(c.name, "flag-name");
    assert_eq!(c.interval, Duration::from_secs(5));
    assert_eq!(c.policy.load_index_threshold, Some(90));
    // From the file:
    assert_eq!(c.host_pool, "file-pool");
    assert_eq!(c.registration_token.as_deref(), Some("file-token"));
    assert_eq!(c.address, "file-host:3390");
    assert_eq!(c.state_dir, PathBuf::from("/file/state"));
    assert_eq!(c.load_script.as_deref(), Some("/file/load.sh"));
    assert_eq!(c.sessions, SessionsSource::Command("file-sessions".into()));
    assert_eq!(
        c.capabilities,
        Some(vec!["rdp".to_string(), "gpu".to_string()])
    );
    assert_eq!(c.policy.connecting_session_threshold, Some(10));
}

#[test]
fn machine_defaults_are_asked_for_only_when_needed() {
    let c = Config::resolve(
        args("--broker http://b:1 --host-pool p"),
        FileConfig::default(),
        || Ok("h-from-machine".into()),
        || Ok(Ipv4Addr::new(192, 0, 2, 7)),
    )
    .unwrap();
    assert_eq!(c.name, "h-from-machine");
    assert_eq!(c.address, "192.0.2.7:3389");

    let err = Config::resolve(
        args("--broker http://b:1 --host-pool p --name h"),
        FileConfig::default(),
        no_hostname,
        || Err("no route".into()),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "address (--address): no route; pass --address HOST:PORT"
    );
}

#[test]
fn missing_and_invalid_settings_are_named() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "--host-pool p --name h --address a:1",
            "",
            "no broker URL: pass --broker (or DESKBROKER_URL), or set broker in the config file",
        ),
        (
            "--broker http://b:1 --name h --address a:1",
            "",
            "no host pool: pass --host-pool (or DESKBROKER_HOST_POOL), or set host_pool in the config file",
        ),
        (
            "--broker b:1 --host-pool p --name h --address a:1",
            "",
            "broker URL (--broker / DESKBROKER_URL): \"b:1\": write it as http://HOST:PORT or https://HOST:PORT, e.g. https://b:1",
        ),
        (
            "--broker https://b:1 --host-pool p --name h --address a:1 --tls-fingerprint ab",
            "",
            "tls_fingerprint (--tls-fingerprint): invalid --tls-fingerprint \"ab\": give the certificate's SHA-256 as 64 hex digits, with or without colons (as `deskbroker serve` prints it)",
        ),
        (
            &format!("{MINIMAL} --interval 4"),
            "",
            "interval (--interval): 4 seconds is too short: hosts sample every 5 seconds at least (rule H4)",
        ),
        (
            MINIMAL,
            "interval = 0",
            "interval (--interval): 0 seconds is too short: hosts sample every 5 seconds at least (rule H4)",
        ),
        (
            &format!("{MINIMAL} --interval 86401"),
            "",
            "interval (--interval): 86401 seconds is too long: at most 86400 (a pool's longest heartbeat timeout)",
        ),
        (
            "--broker http://b:1 --host-pool p --name h --address 10.0.0.7",
            "",
            "address (--address): \"10.0.0.7\" has no port; write HOST:PORT, e.g. 10.0.0.7:3389",
        ),
        (
            "--broker http://b:1 --host-pool p --name h --address 10.0.0.7:0",
            "",
            "address (--address): \"10.0.0.7:0\" has no valid port; write HOST:PORT, e.g. 10.0.0.7:3389",
        ),
        (
            "--broker http://b:1 --host-pool p --name h --address ::1:3389",
            "",
            "address (--address): \"::1:3389\" has no valid host; write HOST:PORT, e.g. 10.0.0.7:3389",
        ),
        (
            &format!("{MINIMAL} --load-index-threshold 101"),
            "",
            "load_index_threshold: 101 is out of range 0..=100 (rule H6)",
        ),
        (
            MINIMAL,
            "connecting_session_threshold = 151",
            "connecting_session_threshold: 151 is out of range 0..=150 (rule H6)",
        ),
        (
            &format!("{MINIMAL} --capabilities rdp,,gpu"),
            "",
            "capabilities (--capabilities): give one or more names, e.g. rdp,gpu",
        ),
    ];
    for (line, file_text, want) in cases {
        let err = resolve(args(line), file(file_text)).unwrap_err();
        assert_eq!(err.to_string(), *want, "{line} / {file_text}");
    }
}

#[test]
fn good_addresses_pass() {
    for address in [
        "10.0.0.7:3389",
        "h7.contoso.com:3389",
        "[fe80::1]:3389",
        "h_7:1",
    ] {
        assert_eq!(check_address(address), Ok(()), "{address}");
    }
}

#[test]
fn the_file_refuses_unknown_keys_and_wrong_types() {
    let err = FileConfig::parse("brokr = \"http://b:1\"", Path::new("/etc/a.toml")).unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("config file /etc/a.toml: unknown field `brokr`"),
        "{text}"
    );

    let err = FileConfig::parse("interval = \"30\"", Path::new("a.toml")).unwrap_err();
    assert!(err.to_string().contains("invalid type"), "{err}");
}

#[test]
fn empty_values_count_as_not_given_and_user_domain_is_normalised() {
    let f = file("registration_token = \"  \"\nuser_domain = \"@contoso.com\"");
    let c = resolve(args(MINIMAL), f).unwrap();
    assert_eq!(c.registration_token, None);
    assert_eq!(
        c.sessions,
        SessionsSource::Loginctl {
            user_domain: Some("contoso.com".into())
        }
    );
}

#[test]
fn the_message_command_comes_from_the_flag_or_the_file() {
    let c = resolve(args(MINIMAL), FileConfig::default()).unwrap();
    assert_eq!(c.message_command, None);
    let f = || file("message_command = \"wall\"");
    let c = resolve(args(MINIMAL), f()).unwrap();
    assert_eq!(c.message_command.as_deref(), Some("wall"));
    let mut a = args(MINIMAL);
    a.message_command = Some("notify-send \"$DESKBROKER_MESSAGE_TITLE\"".into());
    let c = resolve(a, f()).unwrap();
    assert_eq!(
        c.message_command.as_deref(),
        Some("notify-send \"$DESKBROKER_MESSAGE_TITLE\"")
    );
}

#[test]
fn the_logoff_command_comes_from_the_flag_or_the_file() {
    let c = resolve(args(MINIMAL), FileConfig::default()).unwrap();
    assert_eq!(c.logoff_command, None);
    let f = || file("logoff_command = \"pkill -KILL -u \\\"$DESKBROKER_USER\\\"\"");
    let c = resolve(args(MINIMAL), f()).unwrap();
    assert_eq!(
        c.logoff_command.as_deref(),
        Some("pkill -KILL -u \"$DESKBROKER_USER\"")
    );
    let mut a = args(MINIMAL);
    a.logoff_command = Some("  ".into());
    let c = resolve(a, FileConfig::default()).unwrap();
    assert_eq!(c.logoff_command, None, "a blank command is none");
    let mut a = args(MINIMAL);
    a.logoff_command = Some("my-logoff".into());
    let c = resolve(a, f()).unwrap();
    assert_eq!(c.logoff_command.as_deref(), Some("my-logoff"));
}

/// Writes `text` to `dir/name` with permissions `mode`.
fn write_mode(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

fn refusal(setting: &str, path: &Path, mode: &str, what: &str) -> String {
    format!(
        "{setting} {p} has mode {mode}: other users may read {what}. Make it readable by \
         this user only (chmod 600 {p}, or a mounted secret's mode 0400) and start again",
        p = path.display()
    )
}

#[test]
fn the_registration_token_file_flag_reads_a_private_file() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let token = write_mode(dir, "pool.token", "dbr_from_flag\n", 0o600);
    let line = format!("{MINIMAL} --registration-token-file {}", token.display());
    let file = FileConfig {
        registration_token: Some("dbr_from_config".into()),
        ..FileConfig::default()
    };
    // The flag wins over the config file's token.
    let c = resolve(args(&line), file.clone()).unwrap();
    assert_eq!(c.registration_token.as_deref(), Some("dbr_from_flag"));
    // A token given as such wins over the file.
    let both = format!("{line} --registration-token dbr_inline");
    let c = resolve(args(&both), file).unwrap();
    assert_eq!(c.registration_token.as_deref(), Some("dbr_inline"));
    // A file others may read is refused, naming the flag.
    write_mode(dir, "pool.token", "dbr_from_flag\n", 0o644);
    let err = resolve(args(&line), FileConfig::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        refusal(
            "--registration-token-file",
            &token,
            "644",
            "the registration token"
        )
    );
}

#[test]
fn secret_files_other_users_may_read_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let head = "broker = \"http://b:1\"\nhost_pool = \"p\"\n";

    // The config file itself, when it holds a token.
    let with_token = format!("{head}registration_token = \"dbr_inline\"\n");
    for mode in [0o644, 0o640, 0o604, 0o660] {
        let config = write_mode(dir, "with-token.toml", &with_token, mode);
        let err = FileConfig::read(Some(&config)).unwrap_err();
        let mode = format!("{mode:o}");
        let want = refusal(
            "--config",
            &config,
            &mode,
            "the registration token it holds",
        );
        assert_eq!(err.to_string(), want);
    }
    for mode in [0o600, 0o400] {
        let config = write_mode(dir, "with-token.toml", &with_token, mode);
        let file = FileConfig::read(Some(&config)).unwrap();
        assert_eq!(file.registration_token.as_deref(), Some("dbr_inline"));
    }

    // A token file; the config naming it may be readable by all.
    let token = write_mode(dir, "win.token", "dbr_from_file\n", 0o644);
    let config = write_mode(
        dir,
        "token-file.toml",
        &format!(
            "{head}registration_token_file = {:?}\n",
            token.display().to_string()
        ),
        0o644,
    );
    let err = FileConfig::read(Some(&config)).unwrap_err();
    let want = refusal(
        "registration_token_file",
        &token,
        "644",
        "the registration token",
    );
    assert_eq!(err.to_string(), want);
    write_mode(dir, "win.token", "dbr_from_file\n", 0o400);
    let file = FileConfig::read(Some(&config)).unwrap();
    assert_eq!(file.registration_token.as_deref(), Some("dbr_from_file"));
    // A missing one is named as such.
    let missing = dir.join("missing.token");
    let config = write_mode(
        dir,
        "missing.toml",
        &format!(
            "registration_token_file = {:?}\n",
            missing.display().to_string()
        ),
        0o644,
    );
    let err = FileConfig::read(Some(&config)).unwrap_err().to_string();
    let want = format!(
        "cannot read registration_token_file {}: ",
        missing.display()
    );
    assert!(err.starts_with(&want), "{err}");

    // Exporter password files, the default one and a host's own.
    let shared = write_mode(dir, "exporter.password", "s3cret\n", 0o600);
    let own = write_mode(dir, "rdsh02.password", "other\n", 0o604);
    let watching = format!(
        "{head}[windows_exporter]\nusername = \"deskbroker\"\npassword_file = {:?}\n\n\
         [[windows_host]]\nname = \"rdsh02\"\naddress = \"10.0.0.12:3389\"\n\
         metrics_url = \"https://10.0.0.12:9182/metrics\"\npassword_file = {:?}\n",
        shared.display().to_string(),
        own.display().to_string()
    );
    let config = write_mode(dir, "watching.toml", &watching, 0o644);
    let err = FileConfig::read(Some(&config)).unwrap_err();
    let want = refusal("password_file", &own, "604", "the exporter's password");
    assert_eq!(err.to_string(), want);
    write_mode(dir, "rdsh02.password", "other\n", 0o600);
    write_mode(dir, "exporter.password", "s3cret\n", 0o640);
    let err = FileConfig::read(Some(&config)).unwrap_err();
    let want = refusal("password_file", &shared, "640", "the exporter's password");
    assert_eq!(err.to_string(), want);
    write_mode(dir, "exporter.password", "s3cret\n", 0o600);
    assert!(FileConfig::read(Some(&config)).is_ok());
}

#[test]
fn interval_seconds_is_accepted_as_a_file_key() {
    let c = resolve(args(MINIMAL), file("interval_seconds = 10")).unwrap();
    assert_eq!(c.interval, Duration::from_secs(10));
}

#[test]
fn the_machine_has_a_hostname_and_maybe_a_primary_address() {
    assert!(!machine_hostname().unwrap().is_empty());
    // A machine without a route has no primary address; either way the
    // answer is a usable IPv4 address or a sentence.
    match primary_ipv4() {
        Ok(ip) => assert!(!ip.is_loopback() && !ip.is_unspecified()),
        Err(e) => assert!(e.contains("primary IPv4"), "{e}"),
    }
}

#[test]
fn only_a_named_file_is_read_and_a_missing_setting_says_which_was() {
    let dir = tempfile::tempdir().unwrap();
    let packaged = dir.path().join("agent.toml");
    let named = dir.path().join("mine.toml");
    assert_eq!(config_path(None), None);
    assert_eq!(config_path(Some(&named)), Some(named.clone()));
    std::fs::write(&packaged, "host_pool = \"p\"\n").unwrap();
    assert_eq!(config_path(None), None);
    // Nothing named: the agent reads no file, even where the package
    // installed one, and says so.
    let e = Config::load(AgentArgs::default()).unwrap_err();
    assert!(e.to_string().contains("no config file was read"), "{e}");

    let missing = || ConfigError::Missing {
        what: "broker URL",
        flag: "--broker",
        env: " (or DESKBROKER_URL)",
        key: "broker",
    };
    assert_eq!(
        missing().with_file_read(None).to_string(),
        "no broker URL: pass --broker (or DESKBROKER_URL), or set broker in the config \
         file (no config file was read: name one with --config FILE (the package's is \
         /etc/deskbroker/agent.toml))"
    );
    assert_eq!(
        missing().with_file_read(Some(&packaged)).to_string(),
        format!(
            "no broker URL: pass --broker (or DESKBROKER_URL), or set broker in the config \
             file (the config file read was {})",
            packaged.display()
        )
    );
    assert_eq!(
        invalid("--interval", "too long").with_file_read(None),
        invalid("--interval", "too long")
    );
}
