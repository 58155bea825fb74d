//! `deskbroker serve`: runs the broker (HTTP API) on the embedded SQLite
//! store in `--data-dir`, or on PostgreSQL with `--database-url`, and with
//! `--rdp-listen` the RDP front door and with `--gateway-listen` the RD
//! Gateway (MS-TSGU over HTTPS, and the browser's `/web/rdp`; both crate
//! `gateway`) in the same process, stopped by the same signal. HTTPS with
//! `--tls-cert`/`--tls-key`, or with a self-signed certificate generated
//! into the data directory when it listens beyond loopback without them
//! (`--insecure-http` to refuse TLS).
//!
//! Startup runs in one order: the flags (`args`), then what they ask of the
//! machine and are checked against (the data directory's permissions in
//! `private`, its lock, the admin token's policy in `admin_token`), then one
//! build (`build`) that binds every listener (`listeners`), opens the
//! broker, announces the addresses (for people, then the ready line for
//! programs) and serves until a signal. A replica on PostgreSQL differs
//! from a broker on SQLite only in its store and its lease (`Backend`):
//! it checks how the other replicas reach it, elects a leader, and its
//! doors place through its own API so that they follow the leader.

use std::sync::Arc;

use anyhow::Context;

mod admin_token;
mod args;
mod directory;
mod listeners;
mod private;

pub use args::ServeArgs;
pub(crate) use private::private_data_dir;

use listeners::{
    announce_rdp, announce_ready, announce_tls, bind_rd_gateway, bind_rdp, gateway_public_address,
    listener_tls, listening, rdp_public_address,
};

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    args.directory.name_keytab_for_kerberos()?;
    args.rd_gateway.name_keytab_for_kerberos()?;
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
    let token = admin_token::admin_token(&args)?;
    let backend = match database_url {
        Some(url) => {
            anyhow::ensure!(
                store::postgres::is_postgres_url(&url),
                "--database-url must start with postgres:// or postgresql:// \
                 (leave it unset for the embedded SQLite store)"
            );
            Backend::Replica { database_url: url }
        }
        None => {
            let store = store::SqliteStore::open(&args.data_dir)
                .with_context(|| format!("cannot open the store in {}", args.data_dir.display()))?;
            private::private_database_files(&args.data_dir)?;
            Backend::Sqlite(store)
        }
    };
    build(args, token, backend).await
}

/// Where the broker keeps its state: the only thing, with the lease that
/// comes with a shared database, in which a replica differs.
enum Backend {
    /// The embedded store of the data directory, this broker's alone.
    Sqlite(store::SqliteStore),
    /// A PostgreSQL database any number of replicas share (see
    /// `broker::replica`): one leads under a lease, the others forward to it.
    Replica { database_url: String },
}

/// A `Backend` with what a replica needs to join the others: how it
/// trusts the leader's certificate and how they reach it.
enum Joined {
    Sqlite(store::SqliteStore),
    Replica {
        database_url: String,
        leader_trust: api::Trust,
        advertise_url: String,
    },
}

/// A broker, opened on its `Backend`.
enum Opened {
    Single(Arc<broker::Broker>),
    /// A replica, and the keys of redirection tokens its front door honours
    /// (the database's, filled once this replica leads).
    Replica(
        Arc<broker::replica::Replica>,
        gateway::redirect::RedirectKeys,
    ),
}

/// Binds every listener, opens the broker on `backend`, announces the
/// addresses and serves until SIGTERM or SIGINT (or until the API stops
/// on its own: the store failed), stopping the doors with it.
async fn build(args: ServeArgs, token: String, backend: Backend) -> anyhow::Result<()> {
    let listener = crate::explain::bind(args.listen, "the API").await?;
    let addr = listener.local_addr()?;
    let tls = listener_tls(&args, addr)?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    // How the other replicas reach this one, checked before anything else
    // is bound.
    let backend = match backend {
        Backend::Replica { database_url } => Joined::Replica {
            database_url,
            leader_trust: api::Trust::from_flags(
                args.ca_cert.as_deref(),
                args.tls_fingerprint.as_deref(),
            )?,
            advertise_url: advertise_url(&args, scheme, addr)?,
        },
        Backend::Sqlite(store) => Joined::Sqlite(store),
    };
    let portal = args.portal.portal(scheme, addr)?;
    let directory = args.directory.directory()?;
    let rd_gateway_config = args.rd_gateway.config(&args.front_door)?;
    let rdp_listener = bind_rdp(args.rdp_listen).await?;
    let rd_gateway = bind_rd_gateway(&args, tls.as_ref(), addr).await?;
    let settings = broker::Settings {
        rdp_front_door: rdp_public_address(&args, rdp_listener.as_ref())?,
        rd_gateway: gateway_public_address(&args, rd_gateway.as_ref().map(|(l, _)| l))?,
        portal,
        directory,
        ..args::broker_settings(&args, token.clone())
    };
    let opened = match backend {
        Joined::Sqlite(store) => {
            let store_name = format!("sqlite {}", args.data_dir.display());
            let broker = broker::open(Arc::new(store), settings)
                .await
                .context("cannot load the store")?;
            tracing::info!(%addr, store = %store_name, scheme, "deskbroker listening");
            Opened::Single(broker)
        }
        Joined::Replica {
            database_url,
            leader_trust,
            advertise_url,
        } => {
            let redirect_keys = gateway::redirect::RedirectKeys::default();
            let replica = broker::replica::Replica::start(broker::replica::ReplicaConfig {
                database_url,
                advertise_url: advertise_url.clone(),
                leader_trust,
                settings,
                redirect_keys: redirect_keys.clone(),
                leader_lease: std::time::Duration::from_secs(args.leader_lease),
            })
            .await
            .map_err(anyhow::Error::msg)
            .context("cannot use the PostgreSQL database")?;
            tracing::info!(%addr, role = replica.role_name(), advertise = %advertise_url, "deskbroker replica listening");
            Opened::Replica(replica, redirect_keys)
        }
    };
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

    // One signal stops everything: the HTTP API finishes in-flight
    // requests, the doors stop accepting (relayed connections are dropped
    // with the process). If the API stops on its own, so do the doors.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stop_tx = Arc::new(stop_tx);
    {
        let stop_tx = stop_tx.clone();
        tokio::spawn(async move {
            shutdown_signal().await;
            let _ = stop_tx.send(true);
        });
    }
    let doors = Doors {
        args: &args,
        rdp: rdp_listener,
        rd_gateway,
        rd_gateway_config,
        stop: stop_rx.clone(),
    };
    let (served, what) = match opened {
        Opened::Single(broker) => {
            let redirect_keys = broker.keys().redirect_keys();
            let doors = doors.spawn(
                || Ok(Arc::new(broker::front_door::InProcess::new(broker.clone()))),
                redirect_keys,
            )?;
            let served = broker::serve(broker, listening(listener, tls), stopped(stop_rx)).await;
            doors.stop(&stop_tx).await;
            (served, "deskbroker")
        }
        Opened::Replica(replica, redirect_keys) => {
            // The doors place through this replica's own API, trusting
            // exactly the certificate it serves (across SIGHUP reloads),
            // so that they follow the leader too.
            let own = own_api(scheme, addr, tls.as_ref(), &token);
            let doors = doors.spawn(|| own().map(Arc::new), redirect_keys)?;
            let served =
                broker::replica::serve(replica, listening(listener, tls), stopped(stop_rx)).await;
            doors.stop(&stop_tx).await;
            (served, "deskbroker replica")
        }
    };
    served.map_err(anyhow::Error::msg)?;
    tracing::info!("{what} stopped cleanly");
    Ok(())
}

/// How the other replicas reach this one: `--advertise-url`, else the
/// listen address when it is not a wildcard.
fn advertise_url(
    args: &ServeArgs,
    scheme: &str,
    addr: std::net::SocketAddr,
) -> anyhow::Result<String> {
    match &args.advertise_url {
        Some(u) => {
            anyhow::ensure!(
                ["http://", "https://"]
                    .iter()
                    .any(|p| u.starts_with(p) && u.len() > p.len()),
                "--advertise-url must be http://HOST:PORT or https://HOST:PORT"
            );
            Ok(u.trim_end_matches('/').to_string())
        }
        None => {
            anyhow::ensure!(
                !addr.ip().is_unspecified(),
                "--listen {addr} is a wildcard address: set --advertise-url to how the \
                 other replicas reach this one"
            );
            Ok(format!("{scheme}://{addr}"))
        }
    }
}

/// A client of this replica's own API (at loopback when it listens on a
/// wildcard address), with the admin token, trusting the certificate it
/// serves now (read again at each connection, across SIGHUP reloads).
fn own_api(
    scheme: &'static str,
    addr: std::net::SocketAddr,
    tls: Option<&Arc<broker::tls::Tls>>,
    token: &str,
) -> impl Fn() -> anyhow::Result<gateway::Http> + use<> {
    let tls = tls.cloned();
    let token = token.to_string();
    move || {
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
    }
}

/// The doors' bound listeners, before they serve.
struct Doors<'a> {
    args: &'a ServeArgs,
    rdp: Option<tokio::net::TcpListener>,
    rd_gateway: Option<(tokio::net::TcpListener, Arc<broker::tls::Tls>)>,
    rd_gateway_config: gateway::rd_gateway::GatewayConfig,
    stop: tokio::sync::watch::Receiver<bool>,
}

/// The doors, serving until told to stop.
struct Serving {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Doors<'_> {
    /// Serves each door with a placer of its own from `placer`, the front
    /// door honouring redirection tokens signed with `redirect_keys`.
    fn spawn<P: gateway::Placer>(
        self,
        placer: impl Fn() -> anyhow::Result<Arc<P>>,
        redirect_keys: gateway::redirect::RedirectKeys,
    ) -> anyhow::Result<Serving> {
        let mut tasks = Vec::new();
        if let Some((l, gateway_tls)) = self.rd_gateway {
            tasks.push(tokio::spawn(gateway::https::serve(
                l,
                Some(gateway_tls.acceptor()),
                placer()?,
                self.rd_gateway_config,
                stopped(self.stop.clone()),
            )));
        }
        if let Some(l) = self.rdp {
            let config = self
                .args
                .front_door
                .config(self.args.rdp_default_pool.clone(), redirect_keys);
            tasks.push(tokio::spawn(gateway::serve(
                l,
                placer()?,
                config,
                stopped(self.stop.clone()),
            )));
        }
        Ok(Serving { tasks })
    }
}

impl Serving {
    /// Tells the doors to stop (the API has), and waits for them.
    async fn stop(self, stop: &tokio::sync::watch::Sender<bool>) {
        let _ = stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

async fn stopped(mut rx: tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

/// Completes on SIGINT or SIGTERM (systemd's stop).
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
