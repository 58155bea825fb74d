//! `deskbroker gateway`: the RDP front door, the RD Gateway (MS-TSGU over
//! HTTPS, and on the same listener the browser's `/web/rdp`), or both, on
//! a machine of their own, placing users through a broker's HTTP API
//! (`serve --rdp-listen` and `serve --gateway-listen` run the same inside
//! the broker instead).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

/// Flags of `deskbroker gateway`.
#[derive(clap::Args, Debug, Clone)]
pub struct GatewayArgs {
    /// The broker whose rules place the users.
    #[arg(long, env = "DESKBROKER_URL", default_value = "http://127.0.0.1:8080")]
    pub broker: api::BrokerUrl,
    /// The broker's admin token (the front door places users, marks their
    /// sessions Active and Disconnected, and ends anonymous ones).
    #[arg(
        long,
        env = "DESKBROKER_TOKEN",
        hide_env_values = true,
        required_unless_present = "token_file"
    )]
    pub token: Option<String>,
    /// Read the broker's admin token from FILE (its first line) instead.
    /// Only this user may read the file (mode 0600 or 0400), or the
    /// gateway refuses it.
    #[arg(
        long = "token-file",
        env = "DESKBROKER_TOKEN_FILE",
        value_name = "FILE",
        conflicts_with = "token"
    )]
    pub token_file: Option<std::path::PathBuf>,
    /// A TOML file with any of these settings, named with underscores
    /// (`rdp_listen = "0.0.0.0:3389"`); flags and DESKBROKER_* variables
    /// win over it. Without it no file is read, not even the packaged
    /// /etc/deskbroker/gateway.toml (its systemd unit names it), so that
    /// what runs depends only on what it was told. Secrets only by file
    /// (`token_file`).
    #[arg(long, env = "DESKBROKER_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address RDP clients connect to (port 0 picks a free port; printed).
    #[arg(
        long = "rdp-listen",
        env = "DESKBROKER_RDP_LISTEN",
        required_unless_present = "gateway_listen"
    )]
    pub rdp_listen: Option<SocketAddr>,
    /// Pool of clients that send no routing token (rule R1).
    #[arg(long = "rdp-default-pool", env = "DESKBROKER_RDP_DEFAULT_POOL")]
    pub rdp_default_pool: Option<String>,
    /// How an `https://` broker is trusted.
    #[command(flatten)]
    pub tls: crate::cli::TlsArgs,
    #[command(flatten)]
    pub front_door: FrontDoorFlags,
    #[command(flatten)]
    pub rd_gateway: RdGatewayFlags,
}

/// The RD Gateway's flags (MS-TSGU over HTTPS, `gateway::rd_gateway`),
/// shared by `serve` and `gateway`.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "RD Gateway (RDP over HTTPS)")]
pub struct RdGatewayFlags {
    /// Address the RD Gateway listens on, HTTPS only (clients name it with
    /// `/g:` or `gatewayhostname`); none when unset. The same listener
    /// serves browsers' RDCleanPath WebSockets at `/web/rdp`. Port 0 picks
    /// a free port; the address is printed.
    #[arg(long = "gateway-listen", env = "DESKBROKER_GATEWAY_LISTEN")]
    pub gateway_listen: Option<SocketAddr>,
    /// PEM certificate chain (leaf first) of the RD Gateway. `serve`
    /// defaults to the API's certificate, or a self-signed one in the data
    /// dir; `gateway` needs one.
    #[arg(
        long = "gateway-tls-cert",
        env = "DESKBROKER_GATEWAY_TLS_CERT",
        value_name = "FILE",
        requires = "gateway_tls_key"
    )]
    pub gateway_tls_cert: Option<PathBuf>,
    /// PEM private key of `--gateway-tls-cert`.
    #[arg(
        long = "gateway-tls-key",
        env = "DESKBROKER_GATEWAY_TLS_KEY",
        value_name = "FILE",
        requires = "gateway_tls_cert"
    )]
    pub gateway_tls_key: Option<PathBuf>,
    /// A realm whose Kerberos requests the KDC proxy relays (`POST
    /// /KdcProxy` on the --gateway-listen listener, MS-KKDCP: mstsc's
    /// `kdcproxyname`, MIT's `kdc = https://…/KdcProxy`), and its KDCs, tried
    /// in turn: `REALM=HOST:PORT[,HOST:PORT…]` (port 88 when left out).
    /// Repeat it for more realms (`kdc_proxy_realm = ["…", "…"]` in the
    /// config file; the variable gives one). Requests for any other realm
    /// are refused and reach no KDC; without this flag there is no KDC proxy.
    #[arg(
        long = "kdc-proxy-realm",
        env = "DESKBROKER_KDC_PROXY_REALM",
        value_name = "REALM=KDC[,KDC…]",
        requires = "gateway_listen"
    )]
    pub kdc_proxy_realm: Vec<gateway::kdc_proxy::KdcRealm>,
    /// Messages one source address may send the KDC proxy per minute.
    #[arg(long, value_name = "N",
          default_value_t = gateway::kdc_proxy::MESSAGES_PER_SOURCE_PER_MINUTE,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub kdc_proxy_messages_per_source_per_minute: u32,
    /// Keytab holding the key of the gateway's service principal
    /// `HTTP/<--gateway-service-name>` (rule AD2; from `samba-tool domain
    /// exportkeytab` or `ktpass`), readable by the gateway's user only.
    /// With it, RD Gateway clients without a connection ticket sign in
    /// with Windows (Kerberos, HTTP `Negotiate`), for pools whose
    /// `gatewaySignIn` is `TicketOrWindows`.
    #[arg(
        long = "gateway-keytab",
        env = "DESKBROKER_GATEWAY_KEYTAB",
        value_name = "FILE",
        requires = "gateway_service_name"
    )]
    pub gateway_keytab: Option<PathBuf>,
    /// The host name clients reach the RD Gateway by (their `/g:` or
    /// `gatewayhostname`), which names the gateway's service principal
    /// `HTTP/<name>`. Given, not guessed: clients build the principal
    /// from the name they dialled, which only the operator knows.
    #[arg(
        long = "gateway-service-name",
        env = "DESKBROKER_GATEWAY_SERVICE_NAME",
        value_name = "HOST",
        requires = "gateway_keytab"
    )]
    pub gateway_service_name: Option<String>,
    /// A domain whose users sign in to the RD Gateway with NTLM (rule
    /// AD2), checked by the domain through Samba's `ntlm_auth` on this
    /// machine (a domain member running winbind): `NETBIOS=dns.name`, e.g.
    /// `CONTOSO=contoso.com`. Its users are placed as `name@dns.name` (in
    /// lower case), the name their Kerberos sign-in gets. Repeat it for
    /// more domains (`gateway_ntlm_domain = ["…"]` in the config file);
    /// users of other domains are refused. Without it, no NTLM.
    #[arg(
        long = "gateway-ntlm-domain",
        env = "DESKBROKER_GATEWAY_NTLM_DOMAIN",
        value_name = "NETBIOS=DNS",
        value_parser = parse_ntlm_domain,
        requires = "gateway_listen"
    )]
    pub gateway_ntlm_domain: Vec<(String, String)>,
    /// The NTLM helper: Samba's `ntlm_auth`, run once per sign-in with
    /// `--helper-protocol=squid-2.5-ntlmssp` after the arguments of
    /// `--gateway-ntlm-helper-arg`. Its user must be able to use winbind's
    /// privileged pipe (on Debian: the group `winbindd_priv`).
    #[arg(
        long = "gateway-ntlm-helper",
        env = "DESKBROKER_GATEWAY_NTLM_HELPER",
        value_name = "PROGRAM",
        default_value = "/usr/bin/ntlm_auth"
    )]
    pub gateway_ntlm_helper: PathBuf,
    /// An argument for the NTLM helper before its protocol (e.g.
    /// `--configfile=/etc/samba/smb.conf`); repeat it for more.
    #[arg(
        long = "gateway-ntlm-helper-arg",
        value_name = "ARG",
        allow_hyphen_values = true
    )]
    pub gateway_ntlm_helper_arg: Vec<String>,
}

/// `NETBIOS=dns.name`, an NTLM domain of `--gateway-ntlm-domain`.
fn parse_ntlm_domain(s: &str) -> Result<(String, String), String> {
    let (netbios, dns) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not NETBIOS=dns.name"))?;
    let (netbios, dns) = (netbios.trim(), dns.trim().trim_end_matches('.'));
    if netbios.is_empty() || dns.is_empty() {
        return Err(format!("{s:?} is not NETBIOS=dns.name"));
    }
    Ok((netbios.to_ascii_uppercase(), dns.to_ascii_lowercase()))
}

impl RdGatewayFlags {
    /// Windows sign-in (rule AD2), with `--gateway-keytab` (Kerberos)
    /// and/or `--gateway-ntlm-domain` (NTLM): the keytab must be readable
    /// by this user only (a stolen keytab lets anyone mint tickets to the
    /// gateway for any user).
    pub fn windows_sign_in(
        &self,
    ) -> anyhow::Result<Option<Arc<gateway::windows_sign_in::WindowsSignIn>>> {
        use gateway::windows_sign_in::{KerberosSettings, SignInSettings, ntlm::NtlmSettings};
        let kerberos = match (&self.gateway_keytab, &self.gateway_service_name) {
            (Some(keytab), Some(host)) => {
                agent::config::check_secret_file(
                    keytab,
                    "--gateway-keytab",
                    "the gateway's Kerberos keys",
                )?;
                Some(KerberosSettings {
                    keytab: keytab.clone(),
                    service_host: host.to_ascii_lowercase(),
                })
            }
            _ => None,
        };
        let ntlm = (!self.gateway_ntlm_domain.is_empty()).then(|| NtlmSettings {
            helper: std::iter::once(self.gateway_ntlm_helper.clone().into_os_string())
                .chain(self.gateway_ntlm_helper_arg.iter().map(Into::into))
                .collect(),
            domains: self.gateway_ntlm_domain.clone(),
        });
        if kerberos.is_none() && ntlm.is_none() {
            return Ok(None);
        }
        let sign_in =
            gateway::windows_sign_in::WindowsSignIn::new(SignInSettings { kerberos, ntlm })
                .map_err(anyhow::Error::msg)?;
        if let Some(principal) = sign_in.service_principal() {
            tracing::info!(%principal, "rd gateway: Windows sign-in with Kerberos");
        }
        for (netbios, dns) in &self.gateway_ntlm_domain {
            tracing::info!(domain = %netbios, users = %format!("name@{dns}"), "rd gateway: Windows sign-in with NTLM");
        }
        Ok(Some(Arc::new(sign_in)))
    }

    /// MIT Kerberos reads the acceptor's keytab from the process's
    /// environment (`KRB5_KTNAME`), and this workspace does not change its
    /// own environment while it runs: with `--gateway-keytab` and an
    /// environment that does not name it yet, the process starts itself
    /// again, the same arguments, with it named. Returns only when no
    /// start was needed (or the new start failed: the error).
    pub fn name_keytab_for_kerberos(&self) -> anyhow::Result<()> {
        use std::os::unix::process::CommandExt;
        let Some(keytab) = &self.gateway_keytab else {
            return Ok(());
        };
        let keytab = std::path::absolute(keytab)?;
        let var = gateway::windows_sign_in::KEYTAB_VARIABLE;
        let value = gateway::windows_sign_in::keytab_variable_value(&keytab);
        if std::env::var_os(var).as_ref() == Some(&value) {
            return Ok(());
        }
        let exe = std::env::current_exe()?;
        let err = std::process::Command::new(exe)
            .args(std::env::args_os().skip(1))
            .env(var, value)
            .exec();
        Err(anyhow::anyhow!("starting again with {var} set: {err}"))
    }

    /// The settings of the gateway's HTTPS listener: `front_door`'s bounds,
    /// and the KDC proxy's realms (each named once).
    pub fn config(
        &self,
        front_door: &FrontDoorFlags,
    ) -> anyhow::Result<gateway::rd_gateway::GatewayConfig> {
        let mut kdc_proxy =
            gateway::kdc_proxy::KdcProxyConfig::with_realms(self.kdc_proxy_realm.clone())
                .map_err(|e| anyhow::anyhow!("--kdc-proxy-realm: {e}"))?;
        kdc_proxy.messages_per_source_per_minute = self.kdc_proxy_messages_per_source_per_minute;
        Ok(gateway::rd_gateway::GatewayConfig {
            kdc_proxy,
            ..front_door.rd_gateway_config(self.windows_sign_in()?)
        })
    }

    /// The listener, with `--gateway-listen`.
    pub async fn bind(&self) -> anyhow::Result<Option<tokio::net::TcpListener>> {
        let Some(addr) = self.gateway_listen else {
            return Ok(None);
        };
        let l = crate::explain::bind(addr, "the RD Gateway").await?;
        Ok(Some(l))
    }

    /// The certificate of `--gateway-tls-cert`, if given (re-read on SIGHUP).
    pub fn own_tls(&self) -> anyhow::Result<Option<Arc<broker::tls::Tls>>> {
        let (Some(cert), Some(key)) = (&self.gateway_tls_cert, &self.gateway_tls_key) else {
            return Ok(None);
        };
        let tls = Arc::new(broker::tls::Tls::from_files(cert, key)?);
        tls.reload_on_sighup()
            .context("cannot install the SIGHUP handler for TLS reloads")?;
        Ok(Some(tls))
    }
}

/// Prints the RD Gateway's address for people (programs read the ready
/// line, [`deskbroker::ready`]).
pub fn announce_rd_gateway(listener: &tokio::net::TcpListener) -> anyhow::Result<()> {
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "rd gateway listening");
    println!("rd gateway listening on {addr}");
    Ok(())
}

/// The front door's per-source bounds (`gateway::sources`), shared by
/// `serve --rdp-listen` and `gateway`, and by the RD Gateway. A source is one client IP address;
/// behind a NAT many users share one, so raise these there.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "RDP front door: per-source bounds")]
pub struct FrontDoorFlags {
    /// Connections one source may have open at once.
    #[arg(long, value_name = "N", default_value_t = gateway::sources::MAX_CONNECTIONS_PER_SOURCE as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub rdp_max_connections_per_source: u32,
    /// Connections of one source that no host has answered yet, at once.
    #[arg(long, value_name = "N", default_value_t = gateway::sources::MAX_HANDSHAKES_PER_SOURCE as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub rdp_max_handshakes_per_source: u32,
    /// Connections one source may open per minute.
    #[arg(long, value_name = "N", default_value_t = gateway::sources::HANDSHAKES_PER_SOURCE_PER_MINUTE,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub rdp_handshakes_per_source_per_minute: u32,
    /// New sessions (not reconnects) one source may have placed per minute.
    #[arg(long, value_name = "N", default_value_t = gateway::sources::NEW_SESSIONS_PER_SOURCE_PER_MINUTE,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub rdp_new_sessions_per_source_per_minute: u32,
    /// How long a connection is held while a session host starts for its
    /// user (rule A8, `startVmOnConnect`); then it is closed. The RD
    /// Gateway holds a channel request as long.
    #[arg(long, value_name = "SECONDS", default_value_t = gateway::HOST_START_WAIT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub rdp_host_start_wait_seconds: u64,
    /// How long a relayed connection (front door or RD Gateway) may carry
    /// no byte either way once it has shown evidence of a logon (R4).
    #[arg(long, value_name = "SECONDS", default_value_t = gateway::RELAY_IDLE_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub rdp_relay_idle_timeout_seconds: u64,
    /// The same, until the connection has shown evidence of a logon (S9).
    #[arg(long, value_name = "SECONDS", default_value_t = gateway::IDLE_TIMEOUT_WITHOUT_LOGON.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub rdp_idle_timeout_without_logon_seconds: u64,
}

impl FrontDoorFlags {
    /// `defaults` with these flags' bounds.
    pub fn bounds(&self, defaults: gateway::door::Bounds) -> gateway::door::Bounds {
        let secs = std::time::Duration::from_secs;
        gateway::door::Bounds {
            source_limits: gateway::sources::Limits {
                max_connections: self.rdp_max_connections_per_source as usize,
                max_handshakes: self.rdp_max_handshakes_per_source as usize,
                handshakes_per_minute: self.rdp_handshakes_per_source_per_minute,
                new_sessions_per_minute: self.rdp_new_sessions_per_source_per_minute,
                ..gateway::sources::Limits::default()
            },
            host_start_wait: secs(self.rdp_host_start_wait_seconds),
            relay_idle_timeout: secs(self.rdp_relay_idle_timeout_seconds),
            idle_timeout_without_logon: secs(self.rdp_idle_timeout_without_logon_seconds),
            ..defaults
        }
    }

    /// The front door's settings: these bounds, the default pool, and the
    /// keys of redirection tokens it honours.
    pub fn config(
        &self,
        default_pool: Option<String>,
        redirect_keys: gateway::redirect::RedirectKeys,
    ) -> gateway::Config {
        let config = gateway::Config::new(default_pool);
        gateway::Config {
            bounds: self.bounds(config.bounds),
            redirect_keys,
            ..config
        }
    }

    /// The RD Gateway's settings: the same per-source bounds, and the same
    /// hold while a host starts (A8).
    pub fn rd_gateway_config(
        &self,
        windows_sign_in: Option<Arc<gateway::windows_sign_in::WindowsSignIn>>,
    ) -> gateway::rd_gateway::GatewayConfig {
        let config = gateway::rd_gateway::GatewayConfig::default();
        gateway::rd_gateway::GatewayConfig {
            bounds: self.bounds(config.bounds),
            windows_sign_in,
            ..config
        }
    }
}

pub async fn run(args: GatewayArgs) -> anyhow::Result<()> {
    args.rd_gateway.name_keytab_for_kerberos()?;
    if let Some(pool) = &args.rdp_default_pool {
        placement::validate_name("--rdp-default-pool", pool).map_err(anyhow::Error::msg)?;
    }
    let token = match (&args.token, &args.token_file) {
        (Some(t), _) => t.clone(),
        (None, Some(file)) => {
            crate::secret_file::read(file, "--token-file", "the broker's admin token")?
        }
        (None, None) => anyhow::bail!("no token: pass --token (DESKBROKER_TOKEN) or --token-file"),
    };
    let trust = args.tls.trust()?;
    let rd_gateway_config = args.rd_gateway.config(&args.front_door)?;
    let placer = Arc::new(
        gateway::Http::with_trust(args.broker.clone(), &token, &trust)
            .map_err(|e| anyhow::anyhow!("broker {}: {e}", args.broker))?,
    );
    let rd_gateway_tls = match args.rd_gateway.gateway_listen {
        Some(_) => Some(args.rd_gateway.own_tls()?.context(
            "--gateway-listen needs --gateway-tls-cert and --gateway-tls-key (clients speak HTTPS only)",
        )?),
        None => None,
    };
    let rdp_listener = match args.rdp_listen {
        Some(rdp_listen) => Some(crate::explain::bind(rdp_listen, "RDP").await?),
        None => None,
    };
    let rd_gateway_listener = args.rd_gateway.bind().await?;
    if let Some(l) = &rdp_listener {
        let addr = l.local_addr()?;
        tracing::info!(%addr, broker = %args.broker, "rdp front door listening");
        println!("rdp front door listening on {addr}");
    }
    if let Some(l) = &rd_gateway_listener {
        announce_rd_gateway(l)?;
    }
    deskbroker::ready::Ready {
        api: None,
        rdp: rdp_listener.as_ref().map(|l| l.local_addr()).transpose()?,
        gateway: rd_gateway_listener
            .as_ref()
            .map(|l| l.local_addr())
            .transpose()?,
    }
    .print()?;
    // A stand-alone front door's redirection key comes from its own
    // credential (random, made by the broker): never a secret a person chose.
    let config = args.front_door.config(
        args.rdp_default_pool,
        gateway::redirect::RedirectKeys::of(gateway::redirect::RedirectKey::derive(&token)),
    );
    let front_door = async {
        if let Some(l) = rdp_listener {
            gateway::serve(l, placer.clone(), config, crate::serve::shutdown_signal()).await;
            tracing::info!("rdp front door stopped");
        }
    };
    let rd_gateway = async {
        if let (Some(l), Some(tls)) = (rd_gateway_listener, rd_gateway_tls) {
            gateway::https::serve(
                l,
                Some(tls.acceptor()),
                placer.clone(),
                rd_gateway_config,
                crate::serve::shutdown_signal(),
            )
            .await;
            tracing::info!("rd gateway stopped");
        }
    };
    tokio::join!(front_door, rd_gateway);
    Ok(())
}
