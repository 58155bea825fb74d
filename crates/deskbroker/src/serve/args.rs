//! The flags of `deskbroker serve` and the broker settings they make.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

/// Flags of `deskbroker serve` (see the README).
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address the HTTP API listens on (port 0 picks a free port; the
    /// address is printed).
    #[arg(long, env = "DESKBROKER_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Directory of the embedded SQLite store and the generated admin token.
    #[arg(long, env = "DESKBROKER_DATA_DIR", default_value = "./deskbroker-data")]
    pub data_dir: PathBuf,
    /// `postgres://…` or `postgresql://…`: keep the state in that PostgreSQL
    /// database instead of SQLite (the data dir still holds a generated
    /// admin token). Any number of brokers may share one database: one
    /// leads and decides, the others forward to it and take over if it
    /// goes (give them all the same admin token).
    #[arg(
        long = "database-url",
        env = "DESKBROKER_DATABASE_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    pub database_url: Option<String>,
    /// Read `--database-url` from FILE (its first line), e.g. a URL with a
    /// password kept out of the config file and the environment. Only this
    /// user may read the file (mode 0600 or 0400), or serve refuses it.
    #[arg(
        long = "database-url-file",
        env = "DESKBROKER_DATABASE_URL_FILE",
        value_name = "FILE",
        conflicts_with = "database_url"
    )]
    pub database_url_file: Option<PathBuf>,
    /// A TOML file with any of these settings, named with underscores
    /// (`data_dir = "/var/lib/deskbroker"`); flags and DESKBROKER_*
    /// variables win over it. Without it no file is read, not even the
    /// packaged /etc/deskbroker/deskbroker.toml (its systemd unit names
    /// it), so that what runs depends only on what it was told. Secrets
    /// only by file (`admin_token_file`, …).
    #[arg(long, env = "DESKBROKER_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The admin bearer token (at least 32 characters, no blanks); generated
    /// into DATA_DIR/admin.token when neither this nor `--admin-token-file`
    /// is given.
    #[arg(
        long = "admin-token",
        env = "DESKBROKER_ADMIN_TOKEN",
        hide_env_values = true
    )]
    pub admin_token: Option<String>,
    /// Read the admin bearer token from FILE (its first line; at least 32
    /// characters, no blanks), e.g. a mounted secret, instead of passing it
    /// in the environment or on the command line. Only this user may read
    /// the file (mode 0600 or 0400), or serve refuses it.
    #[arg(
        long = "admin-token-file",
        env = "DESKBROKER_ADMIN_TOKEN_FILE",
        value_name = "FILE",
        conflicts_with = "admin_token"
    )]
    pub admin_token_file: Option<PathBuf>,
    /// With `--database-url`: how the other replicas reach this one's API
    /// (`http://host:port`); default `http://` + the listen address, which
    /// must then not be a wildcard (0.0.0.0, ::).
    #[arg(long = "advertise-url", env = "DESKBROKER_ADVERTISE_URL")]
    pub advertise_url: Option<String>,
    /// Address of the RDP front door (rules R1–R6); no front door when
    /// unset. Port 0 picks a free port; the address is printed.
    #[arg(long = "rdp-listen", env = "DESKBROKER_RDP_LISTEN")]
    pub rdp_listen: Option<SocketAddr>,
    /// Pool of RDP clients that send no `tsv://MS Terminal Services
    /// Plugin.1.<pool>` routing token (rule R1); without it they are refused.
    #[arg(long = "rdp-default-pool", env = "DESKBROKER_RDP_DEFAULT_POOL")]
    pub rdp_default_pool: Option<String>,
    /// How clients reach the front door (`host:port`), written into the
    /// `.rdp` files the broker hands out; default: the listen address.
    /// Without --rdp-listen: where a stand-alone front door (`deskbroker
    /// gateway`) listens, so the broker still hands out connection files.
    #[arg(long = "rdp-public-address", env = "DESKBROKER_RDP_PUBLIC_ADDRESS")]
    pub rdp_public_address: Option<String>,
    /// How clients reach the RD Gateway (`host:port`, or a name when the
    /// port is 443), written as `gatewayhostname` into the gateway's `.rdp`
    /// files (`rdpFile?gateway=true`); it must match the gateway's
    /// certificate. Default: the --gateway-listen address. Without
    /// --gateway-listen: where a stand-alone gateway (`deskbroker gateway
    /// --gateway-listen`) listens.
    #[arg(
        long = "gateway-public-address",
        env = "DESKBROKER_GATEWAY_PUBLIC_ADDRESS"
    )]
    pub gateway_public_address: Option<String>,
    /// PEM certificate chain (leaf first) to serve HTTPS with; re-read,
    /// with the key, on SIGHUP (open connections are kept).
    #[arg(
        long = "tls-cert",
        env = "DESKBROKER_TLS_CERT",
        value_name = "FILE",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of `--tls-cert`.
    #[arg(
        long = "tls-key",
        env = "DESKBROKER_TLS_KEY",
        value_name = "FILE",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
    /// Serve plain HTTP even on a non-loopback address (by default such a
    /// listener without `--tls-cert` gets a self-signed certificate kept in
    /// the data dir, whose SHA-256 fingerprint is printed).
    #[arg(
        long = "insecure-http",
        env = "DESKBROKER_INSECURE_HTTP",
        conflicts_with = "tls_cert"
    )]
    pub insecure_http: bool,
    /// With `--database-url`: trust this PEM CA for the leader's `https://`
    /// address when forwarding to it (default: the system's roots).
    #[arg(long = "ca-cert", env = "DESKBROKER_CA_CERT", value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
    /// With `--database-url`: accept only the leader certificate with this
    /// SHA-256 fingerprint when forwarding to it.
    #[arg(
        long = "tls-fingerprint",
        env = "DESKBROKER_TLS_FINGERPRINT",
        value_name = "SHA256",
        conflicts_with = "ca_cert"
    )]
    pub tls_fingerprint: Option<String>,
    /// Requests a second allowed to each credential and to each source
    /// address with a valid credential, in bursts of twice as many (rule
    /// T4); 0, the default, sets no limit. Requests without a valid
    /// credential are always limited per source (100 at once, then 20 a
    /// second).
    #[arg(
        long = "api-rate-limit",
        env = "DESKBROKER_API_RATE_LIMIT",
        value_name = "N",
        default_value_t = 0
    )]
    pub api_rate_limit: u32,
    /// Changes (audited requests: any method but GET) a second allowed to
    /// the admin token and to each API credential, in bursts of ten
    /// seconds' worth, whatever --api-rate-limit says (rule T4); 0 sets no
    /// limit. Hosts' credentials are always held to one every 10 s.
    #[arg(
        long = "audited-rate-limit",
        env = "DESKBROKER_AUDITED_RATE_LIMIT",
        value_name = "N",
        default_value_t = broker::api::throttle::AUDITED_PER_SECOND
    )]
    pub audited_rate_limit: u32,
    /// With `--database-url`: how long a leader that renews nothing keeps
    /// the lead (rule L1). A replica that finds the lease expired ends the
    /// leader's database session and takes over; the leader renews it five
    /// times a lease over a connection of its own.
    #[arg(
        long = "leader-lease",
        env = "DESKBROKER_LEADER_LEASE",
        value_name = "SECONDS",
        default_value_t = broker::replica::DEFAULT_LEADER_LEASE.as_secs(),
        value_parser = clap::value_parser!(u64).range(2..=600)
    )]
    pub leader_lease: u64,
    /// Let pools' `command` power driver run its commands (rule A9): shell
    /// on this machine, as this process. Off by default, so that not even
    /// the admin token can make the broker run a command; without it,
    /// setting a command is refused and stored ones are not run.
    #[arg(long = "allow-power-commands", env = "DESKBROKER_ALLOW_POWER_COMMANDS")]
    pub allow_power_commands: bool,
    /// How often scaling plans are evaluated (rules A1–A7), besides soon
    /// after every session change (`30s`, `1m`; at least 1s).
    #[arg(
        long = "autoscale-interval",
        env = "DESKBROKER_AUTOSCALE_INTERVAL",
        value_name = "DURATION",
        default_value = "30s",
        value_parser = parse_autoscale_interval
    )]
    pub autoscale_interval: std::time::Duration,
    /// Days the audit log keeps an entry (rule T5); older ones are pruned.
    #[arg(
        long = "audit-retention-days",
        env = "DESKBROKER_AUDIT_RETENTION_DAYS",
        value_name = "N",
        default_value_t = 90,
        value_parser = clap::value_parser!(u32).range(1..=36_500)
    )]
    pub audit_retention_days: u32,
    /// Most entries the audit log keeps (rule T5); the oldest beyond this
    /// are pruned.
    #[arg(
        long = "audit-max-entries",
        env = "DESKBROKER_AUDIT_MAX_ENTRIES",
        value_name = "N",
        default_value_t = 1_000_000,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub audit_max_entries: u64,
    /// Most bytes the audit log's entries take (rule T5, their JSON, as
    /// the store keeps them; the database's own overhead comes on top);
    /// the oldest beyond this are pruned. The default, 1 GiB, holds the
    /// default million entries at their usual size of a few hundred bytes,
    /// and bounds the disk the log can take whatever its entries are.
    #[arg(
        long = "audit-max-bytes",
        env = "DESKBROKER_AUDIT_MAX_BYTES",
        value_name = "BYTES",
        default_value_t = 1 << 30,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub audit_max_bytes: u64,
    #[command(flatten)]
    pub front_door: crate::gateway_cmd::FrontDoorFlags,
    #[command(flatten)]
    pub rd_gateway: crate::gateway_cmd::RdGatewayFlags,
    #[command(flatten)]
    pub portal: PortalFlags,
    #[command(flatten)]
    pub directory: super::directory::DirectoryFlags,
}

/// The user portal's flags (`/portal`, OpenID Connect sign-in); without
/// `--oidc-issuer` there is no portal.
#[derive(clap::Args, Debug, Clone)]
pub struct PortalFlags {
    /// The OpenID Connect provider's issuer URL (https://, or http:// on
    /// loopback); turns the user portal at /portal on.
    #[arg(
        long = "oidc-issuer",
        env = "DESKBROKER_OIDC_ISSUER",
        value_name = "URL"
    )]
    pub oidc_issuer: Option<String>,
    /// The portal's client id at the provider.
    #[arg(
        long = "oidc-client-id",
        env = "DESKBROKER_OIDC_CLIENT_ID",
        value_name = "ID",
        requires = "oidc_issuer"
    )]
    pub oidc_client_id: Option<String>,
    /// File holding the portal's client secret (its first line); only
    /// this user may read it (mode 0600 or 0400), or serve refuses it.
    #[arg(
        long = "oidc-client-secret-file",
        env = "DESKBROKER_OIDC_CLIENT_SECRET_FILE",
        value_name = "FILE",
        requires = "oidc_issuer"
    )]
    pub oidc_client_secret_file: Option<PathBuf>,
    /// The ID token claim that names the user (as entitledUsers lists
    /// them); a token without it is refused.
    #[arg(
        long = "oidc-user-claim",
        env = "DESKBROKER_OIDC_USER_CLAIM",
        value_name = "NAME",
        default_value = "preferred_username"
    )]
    pub oidc_user_claim: String,
    /// The ID token claim that lists the user's groups (as entitledGroups
    /// lists them).
    #[arg(
        long = "oidc-groups-claim",
        env = "DESKBROKER_OIDC_GROUPS_CLAIM",
        value_name = "NAME",
        default_value = "groups"
    )]
    pub oidc_groups_claim: String,
    /// Scopes asked for besides openid, separated by blanks or commas
    /// (some providers put groups in the token only for a `groups` scope).
    #[arg(
        long = "oidc-scopes",
        env = "DESKBROKER_OIDC_SCOPES",
        value_name = "SCOPES",
        default_value = "profile email"
    )]
    pub oidc_scopes: String,
    /// Trust this PEM CA for the provider's https:// (default: the
    /// system's roots).
    #[arg(
        long = "oidc-ca-cert",
        env = "DESKBROKER_OIDC_CA_CERT",
        value_name = "FILE"
    )]
    pub oidc_ca_cert: Option<PathBuf>,
    /// How browsers reach this broker (https://broker.contoso.com); the
    /// portal's redirect URI is PUBLIC_URL/portal/callback. Default: the
    /// scheme and listen address.
    #[arg(long = "public-url", env = "DESKBROKER_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,
}

impl PortalFlags {
    /// The portal, with `--oidc-issuer`; `scheme` and `addr` are the API
    /// listener's (the default public URL).
    pub(super) fn portal(
        &self,
        scheme: &str,
        addr: SocketAddr,
    ) -> anyhow::Result<Option<Arc<broker::portal::Portal>>> {
        let Some(issuer) = self.oidc_issuer.as_deref().filter(|i| !i.trim().is_empty()) else {
            return Ok(None);
        };
        let client_id = self
            .oidc_client_id
            .clone()
            .context("--oidc-issuer needs --oidc-client-id")?;
        let secret_file = self
            .oidc_client_secret_file
            .as_deref()
            .context("--oidc-issuer needs --oidc-client-secret-file")?;
        let secret = crate::secret_file::read(
            secret_file,
            "--oidc-client-secret-file",
            "the portal's client secret",
        )?;
        let public_url = match &self.public_url {
            Some(u) => u.trim_end_matches('/').to_string(),
            None => {
                anyhow::ensure!(
                    !addr.ip().is_unspecified(),
                    "--listen {addr} is a wildcard address: set --public-url to how browsers \
                     reach this broker (the portal's redirect URI is PUBLIC_URL/portal/callback)"
                );
                format!("{scheme}://{addr}")
            }
        };
        let trust = match &self.oidc_ca_cert {
            Some(path) => api::Trust::ca_file(path)?,
            None => api::Trust::system(),
        };
        let portal = broker::portal::Portal::new(broker::portal::PortalConfig {
            issuer: issuer.trim_end_matches('/').to_string(),
            client_id,
            client_secret: secret,
            public_url,
            user_claim: self.oidc_user_claim.clone(),
            groups_claim: self.oidc_groups_claim.clone(),
            scopes: self
                .oidc_scopes
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|s| !s.is_empty() && *s != "openid")
                .map(str::to_string)
                .collect(),
            trust,
        })
        .map_err(anyhow::Error::msg)?;
        Ok(Some(Arc::new(portal)))
    }
}

impl ServeArgs {
    /// The audit log's bounds (rule T5) from the flags.
    pub(super) fn audit_retention(&self) -> broker::writer::AuditRetention {
        broker::writer::AuditRetention {
            max_age_ms: i64::from(self.audit_retention_days) * 86_400_000,
            max_rows: self.audit_max_entries,
            max_bytes: self.audit_max_bytes,
        }
    }
}

/// What the broker is built with, from the flags (its doors' addresses
/// and its portal are known once their listeners are bound).
pub(super) fn broker_settings(args: &ServeArgs, admin_token: String) -> broker::Settings {
    broker::Settings {
        api_rate_limit_per_second: args.api_rate_limit,
        audited_rate_limit_per_second: args.audited_rate_limit,
        audit_retention: args.audit_retention(),
        autoscale_interval: args.autoscale_interval,
        allow_power_commands: args.allow_power_commands,
        ..broker::Settings::new(admin_token)
    }
}

/// `--autoscale-interval`: a humantime duration, at least
/// `broker::autoscale::MIN_AUTOSCALE_INTERVAL`.
pub(super) fn parse_autoscale_interval(s: &str) -> Result<std::time::Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| e.to_string())?;
    let min = broker::autoscale::MIN_AUTOSCALE_INTERVAL;
    if d < min {
        return Err(format!("at least {}", humantime::format_duration(min)));
    }
    Ok(d)
}
