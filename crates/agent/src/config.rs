//! The agent's configuration: the raw inputs (flags and `DESKBROKER_*`
//! variables through clap, and the TOML file of `--config`), and the one
//! validation that turns them into a typed [`Config`].
//!
//! Precedence is flags, then environment, then the file, then defaults:
//! clap already gives a flag precedence over its variable, so the merge here
//! only has to put [`AgentArgs`] over [`FileConfig`]. Parsing never performs
//! IO (ripgrep's low/high args); the only IO is reading the file and, when no
//! `--name` or `--address` is given, asking the machine for its hostname and
//! primary IPv4 address ([`Config::load`]). A file is read only when
//! `--config` or `DESKBROKER_AGENT_CONFIG` names it ([`config_path`]).
//!
//! Reading TOML files and the secret files they name (refused when other
//! users may read them) is in `config/file.rs`, shared with `serve` and
//! `gateway`; what the machine is asked for, in `config/machine.rs`.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use api::BrokerUrl;
use serde::Deserialize;

use crate::sessions::SessionsSource;

mod file;
mod machine;

pub use file::{SecretFileError, check_secret_file, parse_toml, read_secret_file, read_toml_file};
pub use machine::{machine_hostname, primary_ipv4};

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
    /// The host's DNS name, its fully qualified name (file key dns_name):
    /// what host-named connections send users to (rule AD4), so that
    /// Kerberos to `TERMSRV/<name>` and the host's own certificate match.
    /// Given at registration; once the broker has one, only an
    /// administrator changes it [default: none; the host is named by its
    /// address].
    #[arg(long, value_name = "FQDN")]
    pub dns_name: Option<String>,
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
    /// A file whose content is the image this host runs (rule U1), sent in
    /// every heartbeat as its imageVersion: a version file the image build
    /// writes (its first line), or an os-release file such as
    /// /etc/os-release (its IMAGE_VERSION, else BUILD_ID, else VERSION_ID)
    /// [default: none].
    #[arg(long, value_name = "FILE", conflicts_with = "image_version_command")]
    pub image_version_file: Option<PathBuf>,
    /// A command run through `sh -c` whose first line of output is the
    /// image this host runs (rule U1) [default: none].
    #[arg(long, value_name = "CMD")]
    pub image_version_command: Option<String>,
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
    pub dns_name: Option<String>,
    pub state_dir: Option<PathBuf>,
    #[serde(alias = "interval_seconds")]
    pub interval: Option<u64>,
    pub load_script: Option<String>,
    pub image_version_file: Option<PathBuf>,
    pub image_version_command: Option<String>,
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
    /// The host's fully qualified DNS name, when given (rule AD4).
    pub dns_name: Option<String>,
    pub state_dir: PathBuf,
    pub interval: Duration,
    pub load_script: Option<String>,
    /// Where the host's image version comes from (rule U1), if anywhere.
    pub image_version: Option<crate::image_version::ImageVersionSource>,
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

        let dns_name = dns_name(args.dns_name.or(file.dns_name), "dns_name (--dns-name)")?;

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
        let image_version_file = args.image_version_file.or(file.image_version_file);
        let image_version_command =
            given(args.image_version_command.or(file.image_version_command));
        let image_version = match (image_version_file, image_version_command) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "image_version_file and image_version_command",
                    "give one or the other: both say which image the host runs".to_string(),
                ));
            }
            (Some(path), None) => Some(crate::image_version::ImageVersionSource::File(path)),
            (None, Some(command)) => {
                Some(crate::image_version::ImageVersionSource::Command(command))
            }
            (None, None) => None,
        };
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
            dns_name,
            state_dir,
            interval: Duration::from_secs(interval_seconds),
            load_script,
            image_version,
            sessions,
            capabilities,
            policy,
            message_command: given(args.message_command.or(file.message_command)),
            logoff_command: given(args.logoff_command.or(file.logoff_command)),
        })
    }
}

/// A host's DNS name as given (rule AD4): none when empty, else lower
/// case without a trailing dot, and a DNS name (`what` names the setting).
pub(crate) fn dns_name(
    given_name: Option<String>,
    what: &str,
) -> Result<Option<String>, ConfigError> {
    let Some(name) = given(given_name) else {
        return Ok(None);
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    placement::validate_dns_name(what, &name).map_err(|e| invalid("dns_name", e.to_string()))?;
    Ok(Some(name))
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

#[cfg(test)]
mod tests;
