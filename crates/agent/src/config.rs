//! The agent's configuration: the raw inputs (flags and `DESKBROKER_*`
//! variables through clap, and the TOML file of `--config`), and the one
//! validation that turns them into a typed [`Config`].
//!
//! Precedence is flags, then environment, then the file, then defaults:
//! clap already gives a flag precedence over its variable, so the merge here
//! only has to put [`AgentArgs`] over [`FileConfig`]. Parsing never performs
//! IO (ripgrep's low/high args); the only IO is reading the file and, when no
//! `--name` or `--address` is given, asking the machine for its hostname and
//! primary IPv4 address ([`Config::load`]).

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::Duration;

use api::BrokerUrl;
use serde::Deserialize;

use crate::sessions::SessionsSource;

/// Where the agent keeps its state file unless told otherwise.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/deskbroker-agent";

/// Seconds between two samples and heartbeats unless told otherwise (rule H4).
pub const DEFAULT_INTERVAL_SECONDS: u64 = 30;

/// The shortest interval allowed (rule H4: hosts sample every 5 seconds at
/// least). Shorter intervals would only load the broker's write path.
pub const MIN_INTERVAL_SECONDS: u64 = 5;

/// The longest interval allowed: a day, the largest `heartbeatTimeoutSeconds`
/// a pool may have (any longer and every host would be `Unavailable`).
pub const MAX_INTERVAL_SECONDS: u64 = 86_400;

/// The RDP port, used when `--address` is not given.
pub const DEFAULT_RDP_PORT: u16 = 3389;

/// Rule H6: a host's `loadIndexThreshold` is 0..=100.
pub const MAX_LOAD_INDEX_THRESHOLD: u32 = 100;

/// Rule H6: a host's `connectingSessionThreshold` is 0..=150.
pub const MAX_CONNECTING_SESSION_THRESHOLD: u32 = 150;

/// Flags of `deskbroker agent` (see docs/agent.md). Every one is
/// optional here because it may come from the `--config` file instead;
/// [`Config::load`] says what is missing.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct AgentArgs {
    /// The broker's base URL, e.g. `https://broker.contoso.com:8080`.
    #[arg(long, env = "DESKBROKER_URL", value_name = "URL")]
    pub broker: Option<String>,
    /// Trust this PEM CA certificate (a private CA) for an `https://`
    /// broker's certificate, instead of the system's roots.
    #[arg(long = "ca-cert", env = "DESKBROKER_CA_CERT", value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
    /// Accept only the broker certificate with this SHA-256 fingerprint
    /// (what `deskbroker serve` prints for a self-signed one).
    #[arg(
        long = "tls-fingerprint",
        env = "DESKBROKER_TLS_FINGERPRINT",
        value_name = "SHA256"
    )]
    pub tls_fingerprint: Option<String>,
    /// The host pool this session host joins.
    #[arg(long, env = "DESKBROKER_HOST_POOL", value_name = "N")]
    pub host_pool: Option<String>,
    /// A registration token of the pool (from
    /// `POST /api/v1/hostPools/{pool}/registrationToken`). Needed to register
    /// and to register again when the host credential is revoked.
    #[arg(
        long,
        env = "DESKBROKER_REGISTRATION_TOKEN",
        hide_env_values = true,
        value_name = "T"
    )]
    pub registration_token: Option<String>,
    /// A file whose first line is the registration token (file key
    /// registration_token_file): keeps the token out of the process list
    /// and the config file. Only this user may read it (mode 0600 or 0400).
    /// Used when no token is given with --registration-token.
    #[arg(long, env = "DESKBROKER_REGISTRATION_TOKEN_FILE", value_name = "FILE")]
    pub registration_token_file: Option<PathBuf>,
    /// The session host's name in the pool [default: the machine's hostname].
    #[arg(long, value_name = "H")]
    pub name: Option<String>,
    /// Where RDP clients reach this host [default: the machine's primary IPv4
    /// address, port 3389].
    #[arg(long, value_name = "HOST:PORT")]
    pub address: Option<String>,
    /// Directory of the agent's state file, agent.json, which holds the host
    /// credential [default: /var/lib/deskbroker-agent].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Seconds between two samples and heartbeats, at least 5 [default: 30].
    #[arg(long, value_name = "SECONDS")]
    pub interval: Option<u64>,
    /// A program run through `sh -c` at every sample; it prints an integer
    /// >= 0, reported as the host's customLoadIndex (rule H3).
    #[arg(long, value_name = "PATH")]
    pub load_script: Option<String>,
    /// A command run through `sh -c` at every sample instead of asking
    /// systemd-logind; it prints one JSON object a line,
    /// {"user": "alice@contoso.com", "state": "Active"}.
    #[arg(long, value_name = "CMD")]
    pub sessions_command: Option<String>,
    /// What the host offers, e.g. rdp,gpu [default: the broker's, rdp].
    #[arg(long, value_delimiter = ',', value_name = "C1,C2")]
    pub capabilities: Option<Vec<String>>,
    /// This host refuses new logons at this load index, 0..=100 (rule H6;
    /// 0 disables it) [default: the pool's].
    #[arg(long, value_name = "N")]
    pub load_index_threshold: Option<u32>,
    /// This host refuses new logons with this many logons in progress,
    /// 0..=150 (rule H6; 0 disables it) [default: the pool's].
    #[arg(long, value_name = "N")]
    pub connecting_session_threshold: Option<u32>,
    /// Domain added to logind user names that have none, so that `alice`
    /// is reported as `alice@DOMAIN`, the name users connect with.
    #[arg(long, value_name = "DOMAIN")]
    pub user_domain: Option<String>,
    /// A command run through `sh -c` for each message the broker sends to
    /// a user of this host (sendMessage), with DESKBROKER_MESSAGE_TITLE,
    /// DESKBROKER_MESSAGE_TEXT, DESKBROKER_USER and DESKBROKER_SESSION_ID in
    /// an otherwise clean environment (PATH, HOME…, never the registration
    /// token), e.g. notify-send or wall [default: messages are logged and
    /// dropped].
    #[arg(long, value_name = "CMD")]
    pub message_command: Option<String>,
    /// A command run through `sh -c` for each logoff the broker orders
    /// (rule W5), with DESKBROKER_HOST, DESKBROKER_HOST_ADDRESS,
    /// DESKBROKER_USER and DESKBROKER_SESSION_ID in an otherwise clean
    /// environment [default: logind's terminate-session when sessions come
    /// from logind; otherwise orders are logged].
    #[arg(long, value_name = "CMD")]
    pub logoff_command: Option<String>,
    /// A TOML file with any of the settings above, named with underscores
    /// (host_pool = "farm"); flags and DESKBROKER_* variables win over it.
    /// Without it no file is read, not even the packaged
    /// /etc/deskbroker/agent.toml (its systemd unit names it). With a
    /// registration_token in it, only this user may read it (mode 0600 or
    /// 0400).
    #[arg(long, env = "DESKBROKER_AGENT_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// The `--config` file as written: every key optional, unknown keys refused
/// (a typo must not pass silently).
#[derive(Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub broker: Option<String>,
    pub ca_cert: Option<PathBuf>,
    pub tls_fingerprint: Option<String>,
    pub host_pool: Option<String>,
    pub registration_token: Option<String>,
    pub name: Option<String>,
    pub address: Option<String>,
    pub state_dir: Option<PathBuf>,
    #[serde(alias = "interval_seconds")]
    pub interval: Option<u64>,
    pub load_script: Option<String>,
    pub sessions_command: Option<String>,
    pub capabilities: Option<Vec<String>>,
    pub load_index_threshold: Option<u32>,
    pub connecting_session_threshold: Option<u32>,
    pub user_domain: Option<String>,
    pub message_command: Option<String>,
    /// A file holding the registration token (kept out of the config file,
    /// which is often readable by more people than the token should be);
    /// refused when other users may read it.
    pub registration_token_file: Option<PathBuf>,
    /// Rule W5: the command that logs a session off (the machine's, or a watched host's).
    pub logoff_command: Option<String>,
    /// Defaults for every `[[windows_host]]` exporter (rule W1).
    pub windows_exporter: Option<crate::windows::config::ExporterFile>,
    /// Rule W3: NetBIOS domain = UPN suffix.
    pub domains: Option<std::collections::BTreeMap<String, String>>,
    /// Windows hosts watched through their exporters (rules W1–W4); with
    /// any, this agent watches them instead of the machine it runs on.
    pub windows_host: Option<Vec<crate::windows::config::WindowsHostFile>>,
}

impl FileConfig {
    /// Reads and parses the `--config` file, if any, and the registration
    /// token file it names when it gives no token itself. Secrets must be
    /// readable by the agent's user only ([`check_secret_file`]): the file
    /// itself when it holds a `registration_token`, the token file, and
    /// every exporter `password_file` (read later, when the watching agent
    /// starts).
    pub fn read(path: Option<&Path>) -> Result<FileConfig, ConfigError> {
        let Some(path) = path else {
            return Ok(FileConfig::default());
        };
        let mut file: FileConfig = read_toml_file(path)?;
        if given(file.registration_token.clone()).is_some() {
            check_secret_file(path, "--config", "the registration token it holds")?;
        }
        if file.registration_token.is_none()
            && let Some(token_file) = &file.registration_token_file
        {
            file.registration_token = Some(read_secret_file(
                token_file,
                "registration_token_file",
                "the registration token",
            )?);
        }
        let exporters = file.windows_exporter.iter().map(|e| &e.password_file);
        let hosts = file.windows_host.iter().flatten().map(|h| &h.password_file);
        for password_file in exporters.chain(hosts).flatten() {
            check_secret_file(password_file, "password_file", "the exporter's password")?;
        }
        Ok(file)
    }

    /// Parses the text of a config file; `path` only names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<FileConfig, ConfigError> {
        parse_toml(text, path)
    }
}

/// Reads and parses a TOML config file into `T`: the one loader of
/// deskbroker's config files (the agent's, and `serve`'s and `gateway`'s,
/// which parse into a table and check its keys against their flags).
pub fn read_toml_file<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, ConfigError> {
    parse_toml(&read_text(path)?, path)
}

/// Parses the text of a config file; `path` only names it in errors.
pub fn parse_toml<T: serde::de::DeserializeOwned>(
    text: &str,
    path: &Path,
) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::File {
        path: path.to_path_buf(),
        message: e.message().to_string(),
    })
}

/// A file holding a secret that cannot be used: it cannot be read, or
/// other users may read it.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SecretFileError {
    #[error("cannot read {setting} {}: {message}", path.display())]
    Read {
        setting: String,
        path: PathBuf,
        message: String,
    },
    #[error(
        "{setting} {p} has mode {mode:o}: other users may read {what}. Make it readable by \
         this user only (chmod 600 {p}, or a mounted secret's mode 0400) and start again",
        p = path.display()
    )]
    Readable {
        setting: String,
        path: PathBuf,
        mode: u32,
        what: String,
    },
}

/// Refuses a file holding a secret that other users may read (any group
/// or other permission bit): a secret left readable stops the process at
/// once instead of going on working. The one check of every secret file
/// of deskbroker (`serve`'s, `gateway`'s and the agent's); `setting` and
/// `what` name the file and the secret in the error.
pub fn check_secret_file(path: &Path, setting: &str, what: &str) -> Result<(), SecretFileError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path).map_err(|e| SecretFileError::Read {
            setting: setting.to_string(),
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(SecretFileError::Readable {
                setting: setting.to_string(),
                path: path.to_path_buf(),
                mode,
                what: what.to_string(),
            });
        }
    }
    #[cfg(not(unix))]
    let _ = (path, setting, what);
    Ok(())
}

/// The first line of the secret file `path`, trimmed, once
/// [`check_secret_file`] has passed it.
pub fn read_secret_file(path: &Path, setting: &str, what: &str) -> Result<String, SecretFileError> {
    check_secret_file(path, setting, what)?;
    let text = std::fs::read_to_string(path).map_err(|e| SecretFileError::Read {
        setting: setting.to_string(),
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    Ok(text.lines().next().unwrap_or("").trim().to_string())
}

fn read_text(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// The host's own policy (rule H6), sent when registering and with every
/// heartbeat; the contract's type.
pub use placement::HostPolicy;

/// True when the configuration sets no threshold at all (then no policy is
/// sent, and what an administrator set on the host stands).
pub fn policy_is_empty(policy: &HostPolicy) -> bool {
    policy.load_index_threshold.is_none() && policy.connecting_session_threshold.is_none()
}

/// The validated configuration the agent runs with. Fields are public so
/// that tests can build one directly (for example with an interval below
/// the 5 seconds users may set).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The broker's base URL; API paths are appended to its path.
    pub broker: BrokerUrl,
    /// How an `https://` broker's certificate is trusted.
    pub tls: TlsConfig,
    pub host_pool: String,
    /// Needed only when there is no saved credential, or it was revoked.
    pub registration_token: Option<String>,
    pub name: String,
    /// `HOST:PORT` where RDP clients reach this host.
    pub address: String,
    pub state_dir: PathBuf,
    pub interval: Duration,
    pub load_script: Option<String>,
    pub sessions: SessionsSource,
    /// `None` lets the broker apply its default (`["rdp"]`).
    pub capabilities: Option<Vec<String>>,
    pub policy: HostPolicy,
    /// Shows the broker's messages to users (`--message-command`); None:
    /// they are logged and dropped.
    pub message_command: Option<String>,
    /// Ends a logon the broker logged off (`--logoff-command`, rule W5);
    /// None: logind's, when sessions come from it.
    pub logoff_command: Option<String>,
}

/// How the agent trusts an `https://` broker: the system's roots, a
/// private CA (`--ca-cert`), or one pinned certificate
/// (`--tls-fingerprint`); at most one of the last two.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TlsConfig {
    pub ca_cert: Option<PathBuf>,
    pub fingerprint: Option<api::Fingerprint>,
}

impl TlsConfig {
    /// The client's trust; reads the CA file.
    pub fn trust(&self) -> Result<api::Trust, api::TrustError> {
        match (&self.ca_cert, self.fingerprint) {
            (Some(path), _) => api::Trust::ca_file(path),
            (None, Some(f)) => Ok(api::Trust::pinned(f)),
            (None, None) => Ok(api::Trust::system()),
        }
    }
}

/// A configuration that cannot be used, said in one line naming the setting.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    #[error("cannot read the config file {}: {message}", path.display())]
    Read { path: PathBuf, message: String },
    #[error("config file {}: {message}", path.display())]
    File { path: PathBuf, message: String },
    #[error("no {what}: pass {flag}{env}, or set {key} in the config file")]
    Missing {
        what: &'static str,
        flag: &'static str,
        env: &'static str,
        key: &'static str,
    },
    #[error("{setting}: {message}")]
    Invalid {
        setting: &'static str,
        message: String,
    },
    #[error(transparent)]
    Secret(#[from] SecretFileError),
    /// A setting is missing: `missing`, with which file was read, if any.
    #[error("{missing} ({read})")]
    Incomplete {
        missing: Box<ConfigError>,
        read: String,
    },
}

/// The configuration file the package installs for `deskbroker agent`,
/// which its systemd unit names with `--config`. The agent never reads it
/// unless told to: a program's behaviour must not depend on a file it was
/// not told about (an agent started by hand or by a test on a machine with
/// the package would otherwise join the installed agent's pool).
pub const PACKAGED_CONFIG: &str = "/etc/deskbroker/agent.toml";

/// The file to read: the one named by `--config` or
/// `DESKBROKER_AGENT_CONFIG`, and no other.
pub fn config_path(given: Option<&Path>) -> Option<PathBuf> {
    given.map(Path::to_path_buf)
}

impl ConfigError {
    /// A missing setting's error, saying which file was read (`read`), or
    /// that none was and where the agent looked: without it, "set broker in
    /// the config file" would leave open whether the file was read at all.
    pub fn with_file_read(self, read: Option<&Path>) -> ConfigError {
        match self {
            ConfigError::Missing { .. } => ConfigError::Incomplete {
                missing: Box::new(self),
                read: match read {
                    Some(path) => format!("the config file read was {}", path.display()),
                    None => format!(
                        "no config file was read: name one with --config FILE \
                         (the package's is {PACKAGED_CONFIG})"
                    ),
                },
            },
            other => other,
        }
    }
}

pub(crate) fn invalid(setting: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        setting,
        message: message.into(),
    }
}

/// A string setting with surrounding blanks removed; an empty one counts as
/// not given (an empty `DESKBROKER_REGISTRATION_TOKEN=` is not a token).
pub(crate) fn given(value: Option<String>) -> Option<String> {
    value
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

impl Config {
    /// Reads the `--config` file if any, asks the machine for what is left
    /// to defaults, and validates everything.
    pub fn load(args: AgentArgs) -> Result<Config, ConfigError> {
        let path = config_path(args.config.as_deref());
        let file = FileConfig::read(path.as_deref())?;
        Config::resolve(args, file, machine_hostname, primary_ipv4)
            .map_err(|e| e.with_file_read(path.as_deref()))
    }

    /// Merges flags over the file and validates the result. The machine's
    /// hostname and primary address are asked for only when needed, so this
    /// is pure for callers (tests) that pass both settings.
    pub fn resolve(
        args: AgentArgs,
        file: FileConfig,
        hostname: impl FnOnce() -> Result<String, String>,
        primary_ipv4: impl FnOnce() -> Result<Ipv4Addr, String>,
    ) -> Result<Config, ConfigError> {
        let broker = given(args.broker.or(file.broker)).ok_or(ConfigError::Missing {
            what: "broker URL",
            flag: "--broker",
            env: " (or DESKBROKER_URL)",
            key: "broker",
        })?;
        let broker = parse_broker_url(&broker)?;
        let ca_cert = args.ca_cert.or(file.ca_cert);
        let fingerprint = given(args.tls_fingerprint.or(file.tls_fingerprint))
            .map(|f| api::Fingerprint::parse(&f))
            .transpose()
            .map_err(|e| invalid("tls_fingerprint (--tls-fingerprint)", e.to_string()))?;
        if ca_cert.is_some() && fingerprint.is_some() {
            return Err(invalid(
                "ca_cert (--ca-cert)",
                "give --ca-cert or --tls-fingerprint, not both",
            ));
        }
        let tls = TlsConfig {
            ca_cert,
            fingerprint,
        };

        let host_pool = given(args.host_pool.or(file.host_pool)).ok_or(ConfigError::Missing {
            what: "host pool",
            flag: "--host-pool",
            env: " (or DESKBROKER_HOST_POOL)",
            key: "host_pool",
        })?;
        check_name("host pool (--host-pool)", &host_pool)?;

        // A token given as such wins over a token file; a flag or variable
        // wins over the config file (which read its own token file).
        let registration_token = match (
            given(args.registration_token),
            &args.registration_token_file,
        ) {
            (Some(token), _) => Some(token),
            (None, Some(path)) => given(Some(read_secret_file(
                path,
                "--registration-token-file",
                "the registration token",
            )?)),
            (None, None) => given(file.registration_token),
        };

        let name = match given(args.name.or(file.name)) {
            Some(name) => name,
            None => {
                hostname().map_err(|e| invalid("name (--name)", format!("{e}; pass --name")))?
            }
        };
        check_name("name (--name)", &name)?;

        let address = match given(args.address.or(file.address)) {
            Some(address) => {
                check_address(&address)?;
                address
            }
            None => {
                let ip = primary_ipv4().map_err(|e| {
                    invalid(
                        "address (--address)",
                        format!("{e}; pass --address HOST:PORT"),
                    )
                })?;
                SocketAddr::from((ip, DEFAULT_RDP_PORT)).to_string()
            }
        };

        let state_dir = args
            .state_dir
            .or(file.state_dir)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_STATE_DIR));
        if state_dir.as_os_str().is_empty() {
            return Err(invalid("state dir (--state-dir)", "must not be empty"));
        }

        let interval_seconds = args
            .interval
            .or(file.interval)
            .unwrap_or(DEFAULT_INTERVAL_SECONDS);
        if interval_seconds < MIN_INTERVAL_SECONDS {
            return Err(invalid(
                "interval (--interval)",
                format!(
                    "{interval_seconds} seconds is too short: hosts sample every \
                     {MIN_INTERVAL_SECONDS} seconds at least (rule H4)"
                ),
            ));
        }
        if interval_seconds > MAX_INTERVAL_SECONDS {
            return Err(invalid(
                "interval (--interval)",
                format!(
                    "{interval_seconds} seconds is too long: at most {MAX_INTERVAL_SECONDS} \
                     (a pool's longest heartbeat timeout)"
                ),
            ));
        }

        let load_script = given(args.load_script.or(file.load_script));
        let sessions = match given(args.sessions_command.or(file.sessions_command)) {
            Some(command) => SessionsSource::Command(command),
            None => SessionsSource::Loginctl {
                user_domain: given(args.user_domain.or(file.user_domain))
                    .map(|d| d.trim_start_matches('@').to_string())
                    .filter(|d| !d.is_empty()),
            },
        };

        let capabilities = match args.capabilities.or(file.capabilities) {
            None => None,
            Some(list) => {
                let list: Vec<String> = list.into_iter().map(|c| c.trim().to_string()).collect();
                if list.is_empty() || list.iter().any(|c| c.is_empty()) {
                    return Err(invalid(
                        "capabilities (--capabilities)",
                        "give one or more names, e.g. rdp,gpu",
                    ));
                }
                Some(list)
            }
        };

        let policy = HostPolicy {
            load_index_threshold: args.load_index_threshold.or(file.load_index_threshold),
            connecting_session_threshold: args
                .connecting_session_threshold
                .or(file.connecting_session_threshold),
        };
        if let Some(t) = policy.load_index_threshold
            && t > MAX_LOAD_INDEX_THRESHOLD
        {
            return Err(invalid(
                "load_index_threshold",
                format!("{t} is out of range 0..={MAX_LOAD_INDEX_THRESHOLD} (rule H6)"),
            ));
        }
        if let Some(t) = policy.connecting_session_threshold
            && t > MAX_CONNECTING_SESSION_THRESHOLD
        {
            return Err(invalid(
                "connecting_session_threshold",
                format!("{t} is out of range 0..={MAX_CONNECTING_SESSION_THRESHOLD} (rule H6)"),
            ));
        }

        Ok(Config {
            broker,
            tls,
            host_pool,
            registration_token,
            name,
            address,
            state_dir,
            interval: Duration::from_secs(interval_seconds),
            load_script,
            sessions,
            capabilities,
            policy,
            message_command: given(args.message_command.or(file.message_command)),
            logoff_command: given(args.logoff_command.or(file.logoff_command)),
        })
    }
}

/// Checks the broker URL once, up front, with the contract's one parser
/// (the CLI's rules and words).
pub(crate) fn parse_broker_url(text: &str) -> Result<BrokerUrl, ConfigError> {
    BrokerUrl::parse(text).map_err(|e| {
        invalid(
            "broker URL (--broker / DESKBROKER_URL)",
            e.to_string()
                .trim_start_matches("invalid broker URL ")
                .to_string(),
        )
    })
}

/// Pool and host names travel in URL paths and logs: no blanks or control
/// characters (the broker has the final word on everything else).
pub(crate) fn check_name(setting: &'static str, name: &str) -> Result<(), ConfigError> {
    if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(invalid(
            setting,
            format!("{name:?} must not contain blanks or control characters"),
        ));
    }
    Ok(())
}

/// `HOST:PORT`, where HOST is a name, an IPv4 address or a bracketed IPv6
/// address and PORT is 1..=65535.
fn check_address(address: &str) -> Result<(), ConfigError> {
    check_address_of("address (--address)", address)
}

/// [`check_address`] for another setting's name.
pub(crate) fn check_address_of(setting: &'static str, address: &str) -> Result<(), ConfigError> {
    let bad = |why: &str| {
        invalid(
            setting,
            format!("{address:?} {why}; write HOST:PORT, e.g. 10.0.0.7:3389"),
        )
    };
    let Some((host, port)) = address.rsplit_once(':') else {
        return Err(bad("has no port"));
    };
    match port.parse::<u16>() {
        Ok(p) if p > 0 => {}
        _ => return Err(bad("has no valid port")),
    }
    let host_ok = if let Some(inner) = host.strip_prefix('[') {
        inner
            .strip_suffix(']')
            .is_some_and(|ip| ip.parse::<std::net::Ipv6Addr>().is_ok())
    } else {
        !host.is_empty()
            && !host.contains(':')
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_')
    };
    if !host_ok {
        return Err(bad("has no valid host"));
    }
    Ok(())
}

/// The machine's hostname, the default session host name.
pub fn machine_hostname() -> Result<String, String> {
    let name = gethostname::gethostname();
    let name = name
        .into_string()
        .map_err(|n| format!("the hostname {n:?} is not UTF-8"))?;
    if name.trim().is_empty() {
        return Err("the machine has no hostname".to_string());
    }
    Ok(name.trim().to_string())
}

/// The machine's primary IPv4 address: the source address the kernel would
/// use to reach a private-range address. `connect` on a UDP socket only
/// chooses a route; it sends nothing, so this causes no network traffic.
pub fn primary_ipv4() -> Result<Ipv4Addr, String> {
    /// Any private-range address will do: only the routing decision matters.
    const PROBE: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 254, 254, 254), 9);
    let fail = |e: std::io::Error| format!("cannot find the machine's primary IPv4 address: {e}");
    let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).map_err(fail)?;
    socket.connect(PROBE).map_err(fail)?;
    match socket.local_addr().map_err(fail)?.ip() {
        std::net::IpAddr::V4(ip) if !ip.is_unspecified() && !ip.is_loopback() => Ok(ip),
        other => Err(format!(
            "cannot find the machine's primary IPv4 address (the route says {other})"
        )),
    }
}

#[cfg(test)]
mod tests {
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
        let err =
            FileConfig::parse("brokr = \"http://b:1\"", Path::new("/etc/a.toml")).unwrap_err();
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
}
