//! The watching agent's configuration: the `[windows_exporter]` defaults,
//! the `[domains]` map and the `[[windows_host]]` entries of the `--config`
//! file (rules W1 and W3), validated once into a [`WatchConfig`].
//!
//! The broker, pool, token, state dir, interval and trust of the broker
//! come from the same keys and flags as the Linux agent's; the settings
//! that describe the machine the agent runs on (`name`, `address`,
//! `sessions_command`, `load_script`) are refused here, because each
//! watched host has its own.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use api::BrokerUrl;
use serde::Deserialize;

use crate::config::{
    AgentArgs, ConfigError, FileConfig, HostPolicy, MAX_CONNECTING_SESSION_THRESHOLD,
    MAX_INTERVAL_SECONDS, MAX_LOAD_INDEX_THRESHOLD, MIN_INTERVAL_SECONDS, TlsConfig,
    check_address_of, check_name, given, invalid, parse_broker_url,
};

/// Seconds between two scrapes of a host unless told otherwise: the
/// exporter's own collectors refresh about this often.
pub const DEFAULT_INTERVAL_SECONDS: u64 = 15;

/// Rule W1: one scrape may take this long unless configured otherwise.
pub const DEFAULT_SCRAPE_TIMEOUT_SECONDS: u64 = 5;

/// The longest scrape timeout allowed: a scrape must end well inside the
/// shortest interval, and the exporter serves one scrape at a time.
pub const MAX_SCRAPE_TIMEOUT_SECONDS: u64 = 60;

/// Rule W1: at least 1,000 hosts per agent; more is refused, so that one
/// process's memory and sockets stay bounded.
pub const MAX_WINDOWS_HOSTS: usize = 10_000;

/// `[windows_exporter]` and the same keys on a `[[windows_host]]`.
#[derive(Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExporterFile {
    pub username: Option<String>,
    pub password_file: Option<PathBuf>,
    pub ca_cert: Option<PathBuf>,
    pub tls_fingerprint: Option<String>,
    /// Seconds.
    pub timeout: Option<u64>,
}

/// One `[[windows_host]]`.
#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WindowsHostFile {
    pub name: String,
    pub address: String,
    /// The host's fully qualified DNS name (rule AD4), e.g.
    /// `rdsh1.contoso.com`: what host-named connections send users to.
    #[serde(default)]
    pub dns_name: Option<String>,
    /// The image the host runs (rule U1), as its build names it: sent in
    /// its heartbeats as `imageVersion` (the exporter does not say it).
    #[serde(default)]
    pub image_version: Option<String>,
    pub metrics_url: String,
    pub username: Option<String>,
    pub password_file: Option<PathBuf>,
    pub ca_cert: Option<PathBuf>,
    pub tls_fingerprint: Option<String>,
    /// Seconds.
    pub timeout: Option<u64>,
    pub capabilities: Option<Vec<String>>,
    pub load_index_threshold: Option<u32>,
    pub connecting_session_threshold: Option<u32>,
}

/// How the agent reaches one exporter.
#[derive(Debug, Clone, PartialEq)]
pub struct Exporter {
    pub url: reqwest::Url,
    /// Basic auth: the user name and the file holding the password (read
    /// at start; the password itself is not kept in the configuration).
    pub basic_auth: Option<(String, PathBuf)>,
    /// How an `https://` exporter's certificate is trusted.
    pub tls: TlsConfig,
    pub timeout: Duration,
}

/// One watched host.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowsHost {
    pub name: String,
    pub address: String,
    /// The host's DNS name, checked (rule AD4).
    pub dns_name: Option<String>,
    /// The image it runs (rule U1), checked.
    pub image_version: Option<String>,
    pub exporter: Exporter,
    pub capabilities: Option<Vec<String>>,
    pub policy: HostPolicy,
}

/// Rule W3: how exporter user names become the names users sign in with.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Names {
    /// NetBIOS domain, upper case → UPN suffix.
    pub domains: BTreeMap<String, String>,
    /// The suffix of names reported without a domain.
    pub default_domain: Option<String>,
}

/// The validated configuration of a watching agent.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchConfig {
    pub broker: BrokerUrl,
    pub tls: TlsConfig,
    pub host_pool: String,
    pub registration_token: Option<String>,
    /// Each host keeps its credential in a directory of its own below.
    pub state_dir: PathBuf,
    pub interval: Duration,
    pub names: Names,
    pub hosts: Vec<WindowsHost>,
    /// Rule W5's commands, kept for the orders heartbeat answers bring.
    pub logoff_command: Option<String>,
    pub message_command: Option<String>,
}

impl WatchConfig {
    /// Whether this file asks for a watching agent.
    pub fn wanted(file: &FileConfig) -> bool {
        file.windows_host.as_ref().is_some_and(|h| !h.is_empty())
    }

    /// Merges flags over the file and validates the result.
    pub fn resolve(args: AgentArgs, file: FileConfig) -> Result<WatchConfig, ConfigError> {
        for (given_here, key) in [
            (args.name.is_some() || file.name.is_some(), "name"),
            (args.address.is_some() || file.address.is_some(), "address"),
            (
                args.sessions_command.is_some() || file.sessions_command.is_some(),
                "sessions_command",
            ),
            (
                args.load_script.is_some() || file.load_script.is_some(),
                "load_script",
            ),
        ] {
            if given_here {
                return Err(invalid(
                    "windows_host",
                    format!(
                        "{key} describes the machine the agent runs on; an agent that watches \
                         [[windows_host]] entries reports for them instead: set {key} on each \
                         entry, or run a separate agent for this machine"
                    ),
                ));
            }
        }
        let broker = given(args.broker.or(file.broker)).ok_or(ConfigError::Missing {
            what: "broker URL",
            flag: "--broker",
            env: " (or DESKBROKER_URL)",
            key: "broker",
        })?;
        let broker = parse_broker_url(&broker)?;
        let tls = trust(
            "ca_cert (--ca-cert)",
            args.ca_cert.or(file.ca_cert),
            given(args.tls_fingerprint.or(file.tls_fingerprint)),
        )?;
        let host_pool = given(args.host_pool.or(file.host_pool)).ok_or(ConfigError::Missing {
            what: "host pool",
            flag: "--host-pool",
            env: " (or DESKBROKER_HOST_POOL)",
            key: "host_pool",
        })?;
        check_name("host pool (--host-pool)", &host_pool)?;
        let registration_token = given(args.registration_token.or(file.registration_token));
        let state_dir = args
            .state_dir
            .or(file.state_dir)
            .unwrap_or_else(|| PathBuf::from(crate::config::DEFAULT_STATE_DIR));
        if state_dir.as_os_str().is_empty() {
            return Err(invalid("state dir (--state-dir)", "must not be empty"));
        }
        let interval_seconds = args
            .interval
            .or(file.interval)
            .unwrap_or(DEFAULT_INTERVAL_SECONDS);
        if !(MIN_INTERVAL_SECONDS..=MAX_INTERVAL_SECONDS).contains(&interval_seconds) {
            return Err(invalid(
                "interval (--interval)",
                format!(
                    "{interval_seconds} seconds is out of range \
                     {MIN_INTERVAL_SECONDS}..={MAX_INTERVAL_SECONDS} (rule H4)"
                ),
            ));
        }

        let mut domains = BTreeMap::new();
        for (netbios, suffix) in file.domains.unwrap_or_default() {
            let suffix = suffix.trim().trim_start_matches('@').to_string();
            if netbios.trim().is_empty() || suffix.is_empty() || suffix.contains(['@', ' ']) {
                return Err(invalid(
                    "domains",
                    format!(
                        "{netbios:?} = {suffix:?}: write NETBIOS = \"dns.suffix\", e.g. \
                         CONTOSO = \"contoso.com\""
                    ),
                ));
            }
            domains.insert(netbios.trim().to_ascii_uppercase(), suffix);
        }
        let names = Names {
            domains,
            default_domain: given(args.user_domain.or(file.user_domain))
                .map(|d| d.trim_start_matches('@').to_string())
                .filter(|d| !d.is_empty()),
        };

        let defaults = file.windows_exporter.unwrap_or_default();
        let entries = file.windows_host.unwrap_or_default();
        if entries.len() > MAX_WINDOWS_HOSTS {
            return Err(invalid(
                "windows_host",
                format!(
                    "{} entries; one agent watches at most {MAX_WINDOWS_HOSTS}",
                    entries.len()
                ),
            ));
        }
        let mut hosts: Vec<WindowsHost> = Vec::with_capacity(entries.len());
        for entry in entries {
            let host = resolve_host(entry, &defaults)?;
            if hosts
                .iter()
                .any(|h| h.name.eq_ignore_ascii_case(&host.name))
            {
                return Err(invalid(
                    "windows_host",
                    format!("host {:?} is listed twice", host.name),
                ));
            }
            hosts.push(host);
        }
        Ok(WatchConfig {
            broker,
            tls,
            host_pool,
            registration_token,
            state_dir,
            interval: Duration::from_secs(interval_seconds),
            names,
            hosts,
            logoff_command: given(file.logoff_command),
            message_command: given(args.message_command.or(file.message_command)),
        })
    }
}

fn trust(
    setting: &'static str,
    ca_cert: Option<PathBuf>,
    fingerprint: Option<String>,
) -> Result<TlsConfig, ConfigError> {
    let fingerprint = fingerprint
        .map(|f| api::Fingerprint::parse(&f))
        .transpose()
        .map_err(|e| invalid(setting, e.to_string()))?;
    if ca_cert.is_some() && fingerprint.is_some() {
        return Err(invalid(
            setting,
            "give ca_cert or tls_fingerprint, not both",
        ));
    }
    Ok(TlsConfig {
        ca_cert,
        fingerprint,
    })
}

/// A host name becomes a directory name in the state dir: keep it to
/// letters, digits, `.`, `-` and `_`, not starting with a dot.
fn check_host_name(name: &str) -> Result<(), ConfigError> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "windows_host.name",
            format!("{name:?}: use letters, digits, '.', '-' and '_', e.g. rdsh01"),
        ))
    }
}

fn resolve_host(
    entry: WindowsHostFile,
    defaults: &ExporterFile,
) -> Result<WindowsHost, ConfigError> {
    let name = entry.name.trim().to_string();
    check_host_name(&name)?;
    let address = entry.address.trim().to_string();
    check_address_of("windows_host.address", &address)?;
    let url = reqwest::Url::parse(entry.metrics_url.trim()).map_err(|e| {
        invalid(
            "windows_host.metrics_url",
            format!(
                "{:?} ({e}): write the exporter's URL, e.g. https://10.0.0.11:9182/metrics",
                entry.metrics_url
            ),
        )
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(invalid(
            "windows_host.metrics_url",
            format!("{url}: only http:// and https:// URLs with a host are supported"),
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid(
            "windows_host.metrics_url",
            "put no credentials in the URL: use username and password_file",
        ));
    }
    let e = ExporterFile {
        username: entry.username.clone(),
        password_file: entry.password_file.clone(),
        ca_cert: entry.ca_cert.clone(),
        tls_fingerprint: entry.tls_fingerprint.clone(),
        timeout: entry.timeout,
    };
    let username = given(e.username.clone().or(defaults.username.clone()));
    let password_file = e.password_file.clone().or(defaults.password_file.clone());
    let basic_auth = match (username, password_file) {
        (Some(u), Some(p)) => Some((u, p)),
        (None, None) => None,
        _ => {
            return Err(invalid(
                "windows_exporter",
                format!("host {name}: give both username and password_file, or neither"),
            ));
        }
    };
    // A host's own trust replaces the defaults' whole.
    let (ca_cert, fingerprint) = if e.ca_cert.is_some() || e.tls_fingerprint.is_some() {
        (e.ca_cert.clone(), given(e.tls_fingerprint.clone()))
    } else {
        (
            defaults.ca_cert.clone(),
            given(defaults.tls_fingerprint.clone()),
        )
    };
    let tls = trust("windows_exporter.ca_cert", ca_cert, fingerprint)?;
    let timeout = e
        .timeout
        .or(defaults.timeout)
        .unwrap_or(DEFAULT_SCRAPE_TIMEOUT_SECONDS);
    if !(1..=MAX_SCRAPE_TIMEOUT_SECONDS).contains(&timeout) {
        return Err(invalid(
            "windows_exporter.timeout",
            format!("{timeout} seconds is out of range 1..={MAX_SCRAPE_TIMEOUT_SECONDS}"),
        ));
    }
    let policy = HostPolicy {
        load_index_threshold: entry.load_index_threshold,
        connecting_session_threshold: entry.connecting_session_threshold,
    };
    if policy
        .load_index_threshold
        .is_some_and(|t| t > MAX_LOAD_INDEX_THRESHOLD)
        || policy
            .connecting_session_threshold
            .is_some_and(|t| t > MAX_CONNECTING_SESSION_THRESHOLD)
    {
        return Err(invalid(
            "windows_host",
            format!("host {name}: a threshold is out of range (rule H6)"),
        ));
    }
    let dns_name = crate::config::dns_name(entry.dns_name, "windows_host.dns_name")?;
    if let Some(v) = &entry.image_version {
        placement::validate_image_version("windows_host.image_version", v)
            .map_err(|e| invalid("windows_host", format!("host {name}: {e}")))?;
    }
    Ok(WindowsHost {
        name,
        address,
        dns_name,
        image_version: entry.image_version,
        exporter: Exporter {
            url,
            basic_auth,
            tls,
            timeout: Duration::from_secs(timeout),
        },
        capabilities: entry.capabilities,
        policy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn resolve(text: &str) -> Result<WatchConfig, ConfigError> {
        let file = FileConfig::parse(text, Path::new("agent.toml")).unwrap();
        WatchConfig::resolve(AgentArgs::default(), file)
    }

    const HEAD: &str = r#"
        broker = "https://broker.contoso.com:8443"
        host_pool = "win"
        registration_token = "t"
        state_dir = "/var/lib/deskbroker-agent"
        user_domain = "contoso.com"
        logoff_command = "ssh $DESKBROKER_HOST_ADDRESS logoff $DESKBROKER_WINDOWS_SESSION_ID"
    "#;

    #[test]
    fn the_documented_file_resolves() {
        let c = resolve(&format!(
            r#"{HEAD}
            [windows_exporter]
            username = "deskbroker"
            password_file = "/etc/deskbroker/exporter.password"
            ca_cert = "/etc/deskbroker/hosts-ca.pem"
            timeout = 5

            [domains]
            CONTOSO = "contoso.com"
            fabrikam = "@fabrikam.com"

            [[windows_host]]
            name = "rdsh01"
            address = "10.0.0.11:3389"
            metrics_url = "https://10.0.0.11:9182/metrics"

            [[windows_host]]
            name = "rdsh02"
            address = "10.0.0.12:3389"
            metrics_url = "http://10.0.0.12:9182/metrics"
            tls_fingerprint = "{}"
            timeout = 2
            capabilities = ["rdp", "gpu"]
            "#,
            "ab".repeat(32)
        ))
        .unwrap();
        assert_eq!(c.interval, Duration::from_secs(15));
        assert_eq!(c.names.domains["CONTOSO"], "contoso.com");
        assert_eq!(c.names.domains["FABRIKAM"], "fabrikam.com");
        assert_eq!(c.names.default_domain.as_deref(), Some("contoso.com"));
        assert!(c.logoff_command.is_some());
        let h1 = &c.hosts[0];
        assert_eq!(h1.exporter.timeout, Duration::from_secs(5));
        assert_eq!(
            h1.exporter.basic_auth,
            Some((
                "deskbroker".into(),
                PathBuf::from("/etc/deskbroker/exporter.password")
            ))
        );
        assert_eq!(
            h1.exporter.tls.ca_cert,
            Some(PathBuf::from("/etc/deskbroker/hosts-ca.pem"))
        );
        let h2 = &c.hosts[1];
        assert_eq!(h2.exporter.tls.ca_cert, None);
        assert!(h2.exporter.tls.fingerprint.is_some());
        assert_eq!(h2.exporter.timeout, Duration::from_secs(2));
        assert_eq!(h2.capabilities, Some(vec!["rdp".into(), "gpu".into()]));
    }

    #[test]
    fn mistakes_are_named() {
        let host = r#"
            [[windows_host]]
            name = "rdsh01"
            address = "10.0.0.11:3389"
            metrics_url = "https://10.0.0.11:9182/metrics"
        "#;
        let cases: Vec<(String, &str)> = vec![
            (
                format!("{HEAD}\nname = \"me\"\n{host}"),
                "windows_host: name describes the machine the agent runs on",
            ),
            (
                format!("{HEAD}\n[windows_exporter]\nusername = \"u\"\n{host}"),
                "windows_exporter: host rdsh01: give both username and password_file",
            ),
            (
                format!("{HEAD}\n[windows_exporter]\ntimeout = 0\n{host}"),
                "windows_exporter.timeout: 0 seconds is out of range 1..=60",
            ),
            (
                format!("{HEAD}\n{}", host.replace("rdsh01", "../etc")),
                "windows_host.name: \"../etc\": use letters",
            ),
            (
                format!(
                    "{HEAD}\n{}",
                    host.replace("https://10.0.0.11:9182", "ftp://x")
                ),
                "windows_host.metrics_url: ftp://x/metrics: only http:// and https://",
            ),
            (
                format!("{HEAD}\n{host}\n{host}"),
                "windows_host: host \"rdsh01\" is listed twice",
            ),
            (
                format!("{HEAD}\n[domains]\nCONTOSO = \"\"\n{host}"),
                "domains: \"CONTOSO\" = \"\": write NETBIOS",
            ),
        ];
        for (text, want) in cases {
            let e = resolve(&text).unwrap_err().to_string();
            assert!(e.starts_with(want), "{e}\n  wanted: {want}");
        }
        let e = FileConfig::parse(
            &format!("{HEAD}\n{host}\nmetrics_ur = \"x\""),
            Path::new("a.toml"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
    }
}
