//! `deskbroker serve`: runs the broker (HTTP API) on the embedded SQLite
//! store in `--data-dir`, or on PostgreSQL with `--database-url`, and with
//! `--rdp-listen` the RDP front door and with `--gateway-listen` the RD
//! Gateway (MS-TSGU over HTTPS, and the browser's `/web/rdp`; both crate
//! `gateway`) in the same process,
//! stopped by the same signal. HTTPS with `--tls-cert`/`--tls-key`, or
//! with a self-signed certificate generated into the data directory when it
//! listens beyond loopback without them (`--insecure-http` to refuse TLS).

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
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
    fn portal(
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
    fn audit_retention(&self) -> broker::writer::AuditRetention {
        broker::writer::AuditRetention {
            max_age_ms: i64::from(self.audit_retention_days) * 86_400_000,
            max_rows: self.audit_max_entries,
            max_bytes: self.audit_max_bytes,
        }
    }
}

/// The listener's TLS, if any: the given files; none when asked for plain
/// HTTP or on loopback; otherwise the self-signed pair of the data dir
/// (generated on first start). Prints the scheme's choice and the
/// certificate's fingerprint, and installs the SIGHUP reload.
fn listener_tls(
    args: &ServeArgs,
    addr: SocketAddr,
) -> anyhow::Result<Option<Arc<broker::tls::Tls>>> {
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => broker::tls::Tls::from_files(cert, key)?,
        _ if args.insecure_http || addr.ip().is_loopback() => return Ok(None),
        _ => {
            let (tls, generated) =
                broker::tls::Tls::self_signed(&args.data_dir, &self_signed_names(addr))?;
            let path = args.data_dir.join(broker::tls::SELF_SIGNED_CERT);
            if generated {
                eprintln!(
                    "{addr} is not a loopback address and no --tls-cert was given: generated a \
                     self-signed certificate {} (clients pin it with --tls-fingerprint, or \
                     pass --insecure-http to serve plain HTTP)",
                    path.display()
                );
            } else {
                eprintln!("using the self-signed certificate {}", path.display());
            }
            tls
        }
    };
    let tls = Arc::new(tls);
    tls.reload_on_sighup()
        .context("cannot install the SIGHUP handler for TLS reloads")?;
    Ok(Some(tls))
}

/// The names a self-signed certificate is for: loopback, this machine's
/// host name, and the listen address unless it is a wildcard.
fn self_signed_names(addr: SocketAddr) -> Vec<String> {
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    if let Ok(host) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let host = host.trim();
        if !host.is_empty() && host != "localhost" {
            names.push(host.to_string());
        }
    }
    if !addr.ip().is_unspecified() && !addr.ip().is_loopback() {
        names.push(addr.ip().to_string());
    }
    names
}

/// Prints the certificate's fingerprint, after the "listening on" lines
/// (scripts and tests read it to pin the certificate).
fn announce_tls(tls: Option<&Arc<broker::tls::Tls>>) {
    if let Some(tls) = tls {
        println!("TLS certificate SHA-256 fingerprint {}", tls.fingerprint());
    }
}

/// Prints the ready line ([`deskbroker::ready`]), once every listener is
/// bound and after the lines for people: what programs read.
fn announce_ready(
    api: &str,
    rdp: Option<&tokio::net::TcpListener>,
    rd_gateway: Option<&tokio::net::TcpListener>,
) -> anyhow::Result<()> {
    deskbroker::ready::Ready {
        api: Some(api.to_string()),
        rdp: rdp.map(|l| l.local_addr()).transpose()?,
        gateway: rd_gateway.map(|l| l.local_addr()).transpose()?,
    }
    .print()?;
    Ok(())
}

/// Serves `listener` with `tls`, or plain.
fn listening(
    listener: tokio::net::TcpListener,
    tls: Option<Arc<broker::tls::Tls>>,
) -> broker::tls::Listening {
    match tls {
        Some(tls) => broker::tls::Listening::tls(listener, tls),
        None => listener.into(),
    }
}

/// Fewest characters of an admin token: 32 random characters of any
/// kind people type are well over 128 bits; a generated token has 64 hex
/// digits (256 bits).
pub const MIN_ADMIN_TOKEN_CHARS: usize = 32;
/// The fewest guesses (as a power of ten) an admin token may take by
/// zxcvbn's estimate of the whole token: 10^18 is about 60 bits. zxcvbn
/// counts guesses in 64 bits, so it estimates at most about 10^19 for
/// anything: it sees repeats and patterns across the whole token, but it
/// cannot tell 60 bits from 256, which [`MIN_ADMIN_TOKEN_BITS`] does.
pub const MIN_ADMIN_TOKEN_GUESSES_LOG10: f64 = 18.0;
/// The fewest bits an admin token must be worth by
/// [`admin_token_bits`]: 128, what 16 random bytes are worth, out of reach
/// of any guessing, online or offline (a store backup or a log may show a
/// hash of it one day). `openssl rand -hex 32` makes a token worth about
/// 320 by this estimate (256 in truth); a passphrase of common words is
/// worth 10 to 15 bits a word, so it would need ten or more.
pub const MIN_ADMIN_TOKEN_BITS: f64 = 128.0;
/// The longest piece of a token [`admin_token_bits`] hands zxcvbn at once:
/// short enough that zxcvbn's 64-bit count of guesses does not saturate
/// (10^16 < 2^64), so that it really picks the cheapest reading of the
/// piece (words, sequences, dates, keyboard walks) over random letters.
const ADMIN_TOKEN_PIECE_CHARS: usize = 16;

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    // Every file the broker makes (the store and its journal, the admin
    // token, certificates, backups) is its user's alone, as the packaged
    // unit's UMask=0077 has it, also when it is started by hand.
    #[cfg(unix)]
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    private_data_dir(&args.data_dir)?;
    crate::explain::data_dir_usable(&args.data_dir)?;
    let database_url = match &args.database_url_file {
        Some(file) => Some(crate::secret_file::read(
            file,
            "--database-url-file",
            "the database URL",
        )?),
        None => args.database_url.clone(),
    }
    .filter(|u| !u.trim().is_empty());
    // One broker per SQLite store, and no restore under it: held until
    // this process ends. (Replicas on PostgreSQL share their database by
    // design; their data dir holds only the admin token and certificate.)
    let _data_dir_lock = match &database_url {
        None => Some(crate::data_dir_lock::lock(&args.data_dir)?),
        Some(_) => None,
    };
    if let Some(pool) = &args.rdp_default_pool {
        anyhow::ensure!(
            args.rdp_listen.is_some(),
            "--rdp-default-pool needs --rdp-listen"
        );
        placement::validate_name("--rdp-default-pool", pool).map_err(anyhow::Error::msg)?;
    }
    let given = match (&args.admin_token, &args.admin_token_file) {
        (Some(t), _) => Some((
            t.clone(),
            "--admin-token / DESKBROKER_ADMIN_TOKEN".to_string(),
        )),
        (None, Some(file)) => {
            let first = crate::secret_file::read(file, "--admin-token-file", "the admin token")?;
            Some((first, format!("--admin-token-file {}", file.display())))
        }
        (None, None) => None,
    };
    let token = match given {
        Some((t, source)) => {
            check_admin_token(&t).with_context(|| format!("the admin token of {source}"))?;
            keep_token_file_in_step(&args.data_dir, &t)?;
            t
        }
        None => admin_token_file(&args.data_dir)?,
    };
    if let Some(url) = database_url.as_deref() {
        anyhow::ensure!(
            store::postgres::is_postgres_url(url),
            "--database-url must start with postgres:// or postgresql:// \
             (leave it unset for the embedded SQLite store)"
        );
        return run_replica(args, url, token).await;
    }
    let store = store::SqliteStore::open(&args.data_dir)
        .with_context(|| format!("cannot open the store in {}", args.data_dir.display()))?;
    private_database_files(&args.data_dir)?;
    let store_name = format!("sqlite {}", args.data_dir.display());
    let listener = crate::explain::bind(args.listen, "the API").await?;
    let addr = listener.local_addr()?;
    let tls = listener_tls(&args, addr)?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let rdp_listener = bind_rdp(args.rdp_listen).await?;
    let rd_gateway = bind_rd_gateway(&args, tls.as_ref(), addr).await?;
    let settings = broker::Settings {
        rdp_front_door: rdp_public_address(&args, rdp_listener.as_ref())?,
        rd_gateway: gateway_public_address(&args, rd_gateway.as_ref().map(|(l, _)| l))?,
        portal: args.portal.portal(scheme, addr)?,
        ..broker_settings(&args, token)
    };
    let broker = broker::open(Arc::new(store), settings)
        .await
        .context("cannot load the store")?;
    let front_door_config = args
        .front_door
        .config(args.rdp_default_pool.clone(), broker.keys().redirect_keys());
    tracing::info!(%addr, store = %store_name, scheme, "deskbroker listening");
    // For people; programs read the ready line that follows.
    println!("listening on {scheme}://{addr}");
    announce_rdp(rdp_listener.as_ref())?;
    if let Some((l, _)) = &rd_gateway {
        crate::gateway_cmd::announce_rd_gateway(l)?;
    }
    announce_tls(tls.as_ref());
    announce_ready(
        &format!("{scheme}://{addr}"),
        rdp_listener.as_ref(),
        rd_gateway.as_ref().map(|(l, _)| l),
    )?;

    // One signal stops both: the HTTP API finishes in-flight requests, the
    // front door stops accepting (relayed connections are dropped with the
    // process). If the API stops on its own (the store failed), so does
    // the front door.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stop_tx = Arc::new(stop_tx);
    {
        let stop_tx = stop_tx.clone();
        tokio::spawn(async move {
            shutdown_signal().await;
            let _ = stop_tx.send(true);
        });
    }
    let front_door = rdp_listener.map(|l| {
        let placer = Arc::new(broker::front_door::InProcess::new(broker.clone()));
        tokio::spawn(gateway::serve(
            l,
            placer,
            front_door_config,
            stopped(stop_rx.clone()),
        ))
    });
    let rd_gateway = rd_gateway.map(|(l, gateway_tls)| {
        let placer = Arc::new(broker::front_door::InProcess::new(broker.clone()));
        tokio::spawn(gateway::rd_gateway::serve(
            l,
            Some(gateway_tls.acceptor()),
            placer,
            args.front_door.rd_gateway_config(),
            stopped(stop_rx.clone()),
        ))
    });
    let served = broker::serve(broker, listening(listener, tls), stopped(stop_rx)).await;
    let _ = stop_tx.send(true);
    if let Some(task) = front_door {
        let _ = task.await;
    }
    if let Some(task) = rd_gateway {
        let _ = task.await;
    }
    served.map_err(anyhow::Error::msg)?;
    tracing::info!("deskbroker stopped cleanly");
    Ok(())
}

/// What the broker is built with, from the flags (its doors' addresses
/// and its portal are known once their listeners are bound).
fn broker_settings(args: &ServeArgs, admin_token: String) -> broker::Settings {
    broker::Settings {
        api_rate_limit_per_second: args.api_rate_limit,
        audited_rate_limit_per_second: args.audited_rate_limit,
        audit_retention: args.audit_retention(),
        autoscale_interval: args.autoscale_interval,
        allow_power_commands: args.allow_power_commands,
        ..broker::Settings::new(admin_token)
    }
}

/// `serve --database-url`: one replica among any number sharing the
/// database (see `broker::replica`). The RDP front door, if any, places
/// through this replica's own API, so that it follows the leader too.
async fn run_replica(args: ServeArgs, database_url: &str, token: String) -> anyhow::Result<()> {
    let listener = crate::explain::bind(args.listen, "the API").await?;
    let addr = listener.local_addr()?;
    let tls = listener_tls(&args, addr)?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let leader_trust =
        api::Trust::from_flags(args.ca_cert.as_deref(), args.tls_fingerprint.as_deref())?;
    let advertise_url = match &args.advertise_url {
        Some(u) => {
            anyhow::ensure!(
                ["http://", "https://"]
                    .iter()
                    .any(|p| u.starts_with(p) && u.len() > p.len()),
                "--advertise-url must be http://HOST:PORT or https://HOST:PORT"
            );
            u.trim_end_matches('/').to_string()
        }
        None => {
            anyhow::ensure!(
                !addr.ip().is_unspecified(),
                "--listen {addr} is a wildcard address: set --advertise-url to how the \
                 other replicas reach this one"
            );
            format!("{scheme}://{addr}")
        }
    };
    let portal = args.portal.portal(scheme, addr)?;
    let rdp_listener = bind_rdp(args.rdp_listen).await?;
    let rd_gateway = bind_rd_gateway(&args, tls.as_ref(), addr).await?;
    let rdp_public = rdp_public_address(&args, rdp_listener.as_ref())?;
    let gateway_public = gateway_public_address(&args, rd_gateway.as_ref().map(|(l, _)| l))?;
    // Filled with the database's signing keys when this replica leads.
    let redirect_keys = gateway::redirect::RedirectKeys::default();
    let replica = broker::replica::Replica::start(broker::replica::ReplicaConfig {
        database_url: database_url.to_string(),
        advertise_url: advertise_url.clone(),
        leader_trust,
        settings: broker::Settings {
            rdp_front_door: rdp_public,
            rd_gateway: gateway_public,
            portal,
            ..broker_settings(&args, token.clone())
        },
        redirect_keys: redirect_keys.clone(),
        leader_lease: std::time::Duration::from_secs(args.leader_lease),
    })
    .await
    .map_err(anyhow::Error::msg)
    .context("cannot use the PostgreSQL database")?;
    tracing::info!(%addr, role = replica.role_name(), advertise = %advertise_url, "deskbroker replica listening");
    println!("listening on {scheme}://{addr}");
    announce_rdp(rdp_listener.as_ref())?;
    if let Some((l, _)) = &rd_gateway {
        crate::gateway_cmd::announce_rd_gateway(l)?;
    }
    announce_tls(tls.as_ref());
    announce_ready(
        &format!("{scheme}://{addr}"),
        rdp_listener.as_ref(),
        rd_gateway.as_ref().map(|(l, _)| l),
    )?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop_tx.send(true);
    });
    // The front door and the RD Gateway place through this replica's own
    // API, trusting exactly the certificate it serves (across SIGHUP reloads).
    let own_placer = || -> anyhow::Result<gateway::Http> {
        let own = if addr.ip().is_unspecified() {
            let loopback = if addr.is_ipv4() { "127.0.0.1" } else { "[::1]" };
            format!("{scheme}://{loopback}:{}", addr.port())
        } else {
            format!("{scheme}://{addr}")
        };
        let own = api::BrokerUrl::parse(&own)?;
        let trust = match &tls {
            Some(tls) => {
                let tls = tls.clone();
                api::Trust::pinned_live(move || tls.fingerprint())
            }
            None => api::Trust::system(),
        };
        gateway::Http::with_trust(own, &token, &trust).map_err(|e| anyhow::anyhow!("{e}"))
    };
    let rd_gateway = match rd_gateway {
        Some((l, gateway_tls)) => Some(tokio::spawn(gateway::rd_gateway::serve(
            l,
            Some(gateway_tls.acceptor()),
            Arc::new(own_placer()?),
            args.front_door.rd_gateway_config(),
            stopped(stop_rx.clone()),
        ))),
        None => None,
    };
    let front_door = match rdp_listener {
        Some(l) => {
            let placer = own_placer()?;
            let config = args
                .front_door
                .config(args.rdp_default_pool.clone(), redirect_keys.clone());
            Some(tokio::spawn(gateway::serve(
                l,
                Arc::new(placer),
                config,
                stopped(stop_rx.clone()),
            )))
        }
        None => None,
    };
    let served = broker::replica::serve(replica, listening(listener, tls), stopped(stop_rx)).await;
    if let Some(task) = front_door {
        let _ = task.await;
    }
    if let Some(task) = rd_gateway {
        let _ = task.await;
    }
    served.map_err(anyhow::Error::msg)?;
    tracing::info!("deskbroker replica stopped cleanly");
    Ok(())
}

/// The RDP front door's listener, with `--rdp-listen`.
async fn bind_rdp(
    rdp_listen: Option<SocketAddr>,
) -> anyhow::Result<Option<tokio::net::TcpListener>> {
    let Some(rdp_addr) = rdp_listen else {
        return Ok(None);
    };
    let l = crate::explain::bind(rdp_addr, "RDP").await?;
    Ok(Some(l))
}

/// The RD Gateway's listener and certificate, with `--gateway-listen`: its
/// own (`--gateway-tls-cert`), else the API's, else the data dir's
/// self-signed one (generated if missing): clients speak HTTPS only.
async fn bind_rd_gateway(
    args: &ServeArgs,
    api_tls: Option<&Arc<broker::tls::Tls>>,
    addr: SocketAddr,
) -> anyhow::Result<Option<(tokio::net::TcpListener, Arc<broker::tls::Tls>)>> {
    let Some(listener) = args.rd_gateway.bind().await? else {
        return Ok(None);
    };
    let tls = match (args.rd_gateway.own_tls()?, api_tls) {
        (Some(own), _) => own,
        (None, Some(api)) => api.clone(),
        (None, None) => {
            let names = self_signed_names(listener.local_addr().unwrap_or(addr));
            let (tls, generated) = broker::tls::Tls::self_signed(&args.data_dir, &names)?;
            let path = args.data_dir.join(broker::tls::SELF_SIGNED_CERT);
            eprintln!(
                "the RD Gateway serves HTTPS with the self-signed certificate {} ({}; give it \
                 its own with --gateway-tls-cert and --gateway-tls-key)",
                path.display(),
                if generated { "generated" } else { "kept" }
            );
            Arc::new(tls)
        }
    };
    Ok(Some((listener, tls)))
}

/// Prints the front door's address (after the API's "listening on" line).
fn announce_rdp(rdp_listener: Option<&tokio::net::TcpListener>) -> anyhow::Result<()> {
    if let Some(l) = rdp_listener {
        let rdp_addr = l.local_addr()?;
        tracing::info!(%rdp_addr, "rdp front door listening");
        println!("rdp front door listening on {rdp_addr}");
    }
    Ok(())
}

/// How clients reach the front door, for `.rdp` files: the flag, or the
/// listen address.
fn rdp_public_address(
    args: &ServeArgs,
    rdp_listener: Option<&tokio::net::TcpListener>,
) -> anyhow::Result<Option<String>> {
    Ok(match (&args.rdp_public_address, rdp_listener) {
        (Some(p), _) => Some(p.clone()),
        (None, Some(l)) => Some(l.local_addr()?.to_string()),
        (None, None) => None,
    })
}

/// How clients reach the RD Gateway, for its `.rdp` files: the flag, or
/// the listen address.
fn gateway_public_address(
    args: &ServeArgs,
    listener: Option<&tokio::net::TcpListener>,
) -> anyhow::Result<Option<String>> {
    Ok(match (&args.gateway_public_address, listener) {
        (Some(p), _) => Some(p.clone()),
        (None, Some(l)) => Some(l.local_addr()?.to_string()),
        (None, None) => None,
    })
}

async fn stopped(mut rx: tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

/// An admin token must be at least [`MIN_ADMIN_TOKEN_CHARS`] characters,
/// hold no blank or control character (it travels in a header), and look
/// random: at least 10^[`MIN_ADMIN_TOKEN_GUESSES_LOG10`] guesses by
/// zxcvbn's estimate of the whole token (which sees repeats, and what
/// people do to meet a length rule: a word and a year, keyboard walks,
/// sequences), and at least [`MIN_ADMIN_TOKEN_BITS`] bits by
/// [`admin_token_bits`] (which sees passphrases of dictionary words, such
/// as `correct-horse-battery-staple-2026!`, that zxcvbn's capped count
/// cannot tell from random text).
fn check_admin_token(token: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        !token.chars().any(|c| c.is_whitespace() || c.is_control()),
        "an admin token must not contain blanks or control characters"
    );
    let n = token.chars().count();
    anyhow::ensure!(
        n >= MIN_ADMIN_TOKEN_CHARS,
        "an admin token must be at least {MIN_ADMIN_TOKEN_CHARS} characters; this one has {n} \
         (leave it unset to have one generated into DATA_DIR/admin.token)"
    );
    let guesses = zxcvbn::zxcvbn(token, &[]).guesses_log10();
    anyhow::ensure!(
        guesses >= MIN_ADMIN_TOKEN_GUESSES_LOG10,
        "this admin token is easy to guess (about 10^{guesses:.0} guesses; at least \
         10^{MIN_ADMIN_TOKEN_GUESSES_LOG10:.0} are needed): make a random one with \
         `openssl rand -hex 32`, or leave it unset to have one generated into \
         DATA_DIR/admin.token"
    );
    let bits = admin_token_bits(token);
    anyhow::ensure!(
        bits >= MIN_ADMIN_TOKEN_BITS,
        "this admin token is easy to guess: it reads as words, dates, sequences or repeats \
         worth about {bits:.0} bits, and at least {MIN_ADMIN_TOKEN_BITS:.0} bits of random \
         text are needed (a passphrase is not enough): make a random one with `openssl rand \
         -hex 32`, or leave it unset to have one generated into DATA_DIR/admin.token"
    );
    Ok(())
}

/// What a token is worth, in bits, to a guesser who knows how people make
/// tokens: the cheapest reading of it as things zxcvbn knows (dictionary
/// words, names, common passwords, dates, sequences, keyboard walks,
/// repeats, each at zxcvbn's own count of guesses) and random characters
/// (each worth log2 of the size of the character classes the token uses:
/// 26 lowercase, 26 uppercase, 10 digits, 33 others).
///
/// The token is read in pieces: each run of letters and digits (cut every
/// [`ADMIN_TOKEN_PIECE_CHARS`] characters), and each other character on
/// its own (separators). A piece seen before adds nothing, so that
/// repeated words or separators count once. The order of the pieces is
/// not counted: the estimate errs low, never high. Random hex of 64
/// digits reads as about 320 bits, of 32 digits as about 165;
/// `correct-horse-battery-staple-2026!` as about 60 (while zxcvbn's count
/// for the whole of it is capped at 10^19, as for the hex).
pub fn admin_token_bits(token: &str) -> f64 {
    use zxcvbn::matching::patterns::MatchPattern;
    let has = |is: fn(&char) -> bool| token.chars().any(|c| is(&c));
    let mut cardinality: u32 = [
        (has(char::is_ascii_lowercase), 26),
        (has(char::is_ascii_uppercase), 26),
        (has(char::is_ascii_digit), 10),
    ]
    .iter()
    .filter(|(present, _)| *present)
    .map(|(_, n)| n)
    .sum();
    if token.chars().any(|c| !c.is_ascii_alphanumeric()) {
        cardinality += 33;
    }
    let per_char = f64::from(cardinality.max(2)).log2();
    let mut pieces: Vec<String> = Vec::new();
    let mut run = String::new();
    for c in token.chars() {
        if c.is_alphanumeric() {
            run.push(c);
            if run.chars().count() == ADMIN_TOKEN_PIECE_CHARS {
                pieces.push(std::mem::take(&mut run));
            }
        } else {
            if !run.is_empty() {
                pieces.push(std::mem::take(&mut run));
            }
            pieces.push(c.to_string());
        }
    }
    if !run.is_empty() {
        pieces.push(run);
    }
    let mut seen = std::collections::HashSet::new();
    let mut bits = 0.0;
    for piece in pieces {
        if !seen.insert(piece.to_lowercase()) {
            continue;
        }
        let random = piece.chars().count() as f64 * per_char;
        if piece.chars().count() == 1 {
            bits += random;
            continue;
        }
        let reading: f64 = zxcvbn::zxcvbn(&piece, &[])
            .sequence()
            .iter()
            .map(|m| {
                let random = m.token.chars().count() as f64 * per_char;
                match m.pattern {
                    MatchPattern::BruteForce => random,
                    _ => (m.guesses.unwrap_or(1).max(1) as f64).log2().min(random),
                }
            })
            .sum();
        bits += reading.min(random);
    }
    bits
}

/// Creates the data directory with mode 0700, or makes an existing one
/// 0700 (saying so): it holds the admin token and the whole state.
pub(crate) fn private_data_dir(dir: &Path) -> anyhow::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .with_context(|| format!("cannot create data dir {}", dir.display()))?;
    make_private(dir, 0o700)
}

/// Makes the SQLite database and its journal files 0600 (SQLite creates
/// the journal files with the database file's mode from then on).
fn private_database_files(dir: &Path) -> anyhow::Result<()> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        if name.to_string_lossy().starts_with("deskbroker.sqlite3") && entry.file_type()?.is_file()
        {
            make_private(&entry.path(), 0o600)?;
        }
    }
    Ok(())
}

/// Sets `path`'s permissions to `mode` when they allow more (group or
/// others), with a warning that says what was changed.
fn make_private(path: &Path, mode: u32) -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta =
            std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
        let old = meta.permissions().mode() & 0o777;
        if old & 0o077 != 0 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).with_context(
                || format!("cannot restrict the permissions of {}", path.display()),
            )?;
            tracing::warn!(path = %path.display(), old = format!("{old:o}"), new = format!("{mode:o}"), "permissions were looser than the owner's: restricted");
            eprintln!(
                "warning: {} had mode {old:o}: now {mode:o} (only the broker's user may read it)",
                path.display()
            );
        }
    }
    #[cfg(not(unix))]
    let _ = (path, mode);
    Ok(())
}

/// Reads `DATA_DIR/admin.token` (made 0600 if it was looser), or creates it
/// (mode 0600) with a new random token and says where it is.
fn admin_token_file(dir: &Path) -> anyhow::Result<String> {
    let path = dir.join("admin.token");
    match std::fs::read_to_string(&path) {
        Ok(t) if !t.trim().is_empty() => {
            make_private(&path, 0o600)?;
            let t = t.trim().to_string();
            check_admin_token(&t)
                .with_context(|| format!("the admin token in {}", path.display()))?;
            return Ok(t);
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
    let bytes: [u8; 32] = rand::random();
    let token = hex::encode(bytes);
    write_token_file(&path, &token)?;
    eprintln!("admin token written to {}", path.display());
    Ok(token)
}

/// With a token given (`--admin-token`, `DESKBROKER_ADMIN_TOKEN`): the CLI
/// reads `DATA_DIR/admin.token` when it is given no token, so a file left by
/// an earlier run that generated its token would make every CLI command
/// fail `Unauthorized`. A file that exists is therefore made to hold the
/// token in use (mode 0600, as a generated one), and serve says so. No file
/// is created when there is none: a token given from outside is written
/// only where the data dir already kept one.
fn keep_token_file_in_step(dir: &Path, token: &str) -> anyhow::Result<()> {
    let path = dir.join("admin.token");
    match std::fs::read_to_string(&path) {
        Ok(t) if t.trim() == token => return Ok(()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
    write_token_file(&path, token)?;
    eprintln!(
        "{} held an older admin token: it now holds the one given \
         (--admin-token / DESKBROKER_ADMIN_TOKEN), which the CLI reads from there",
        path.display()
    );
    Ok(())
}

/// Writes `token` to `path` with mode 0600, durably, replacing the file
/// whole (a temporary file renamed over it), so that a crash leaves the old
/// token or the new one, and a replaced file does not keep looser
/// permissions.
fn write_token_file(path: &Path, token: &str) -> anyhow::Result<()> {
    let tmp = path.with_extension("token.tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = (|| -> std::io::Result<()> {
        // A stale temporary file may have other permissions: start anew.
        match std::fs::remove_file(&tmp) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let mut f = options.open(&tmp)?;
        writeln!(f, "{token}")?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    written.with_context(|| format!("cannot write {}", path.display()))
}

pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down: finishing requests and flushing the store");
}

/// `--autoscale-interval`: a humantime duration, at least
/// `broker::autoscale::MIN_AUTOSCALE_INTERVAL`.
fn parse_autoscale_interval(s: &str) -> Result<std::time::Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| e.to_string())?;
    let min = broker::autoscale::MIN_AUTOSCALE_INTERVAL;
    if d < min {
        return Err(format!("at least {}", humantime::format_duration(min)));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_admin_token_must_be_random_text_not_a_passphrase() {
        for weak in [
            "correct-horse-battery-staple-2026!",
            "CorrectHorseBatteryStaple2026!CorrectHorse",
            "correcthorsebatterystaplecorrecthorsebatterystaple",
            "Winter2026!Winter2026!Winter2026!",
            "passwordpasswordpasswordpassword",
            "abcdefghijklmnopqrstuvwxyz0123456789",
            "the-quick-brown-fox-jumps-over-the-lazy-dog-1",
            "test-admin-token-0123456789-abcdefghij",
            // Random, but one piece of it repeated four times.
            "q7Xv2LpZ9kR4mWn8q7Xv2LpZ9kR4mWn8q7Xv2LpZ9kR4mWn8q7Xv2LpZ9kR4mWn8",
        ] {
            let err = check_admin_token(weak).expect_err(weak).to_string();
            assert!(
                err.contains("easy to guess") && err.contains("openssl rand -hex 32"),
                "{weak}: {err}"
            );
        }
        for strong in [
            // openssl rand -hex 32, openssl rand -hex 16
            "5f0c9e2a7b3d41e8a6c2f9d0b7e4a1c35e8f2d6b9a0c4e7f1d3b5a8c2e6f9d0a",
            "9c1e5a7f3b0d42e86a9f1c3e5b7d0a24",
            // 32 random bytes as base64url (43 characters), and base64
            "kJ3v_Qm8ZtX-2pLr7Wc9NfYb4Hs6Ae1DgVu0Ko5RiTw",
            "Zq9V+T2mL8xR4cN7bW1kP6sJ3fH0dY5gA8eU2nXrC4o=",
        ] {
            check_admin_token(strong).unwrap_or_else(|e| {
                panic!("{strong}: {e:#} ({:.0} bits)", admin_token_bits(strong))
            });
        }
    }

    /// Every token the broker generates passes its own check.
    #[test]
    fn generated_tokens_pass() {
        for _ in 0..20 {
            let bytes: [u8; 32] = rand::random();
            let token = hex::encode(bytes);
            assert!(admin_token_bits(&token) >= 200.0, "{token}");
            check_admin_token(&token).unwrap_or_else(|e| panic!("{token}: {e:#}"));
        }
    }
}
