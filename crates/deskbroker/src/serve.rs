//! `deskbroker serve`: runs the broker (HTTP API) on the embedded SQLite
//! store in `--data-dir`, or on PostgreSQL with `--database-url`, and with
//! `--rdp-listen` the RDP front door (crate `gateway`) in the same process,
//! stopped by the same signal.

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
    /// The admin bearer token; generated into DATA_DIR/admin.token when unset.
    #[arg(
        long = "admin-token",
        env = "DESKBROKER_ADMIN_TOKEN",
        hide_env_values = true
    )]
    pub admin_token: Option<String>,
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
    #[arg(long = "rdp-public-address", env = "DESKBROKER_RDP_PUBLIC_ADDRESS")]
    pub rdp_public_address: Option<String>,
    #[command(flatten)]
    pub front_door: crate::gateway_cmd::FrontDoorFlags,
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("cannot create data dir {}", args.data_dir.display()))?;
    if let Some(pool) = &args.rdp_default_pool {
        anyhow::ensure!(
            args.rdp_listen.is_some(),
            "--rdp-default-pool needs --rdp-listen"
        );
        placement::validate_name("--rdp-default-pool", pool).map_err(anyhow::Error::msg)?;
    }
    let token = match args.admin_token.clone() {
        Some(t) if t.len() >= 16 => {
            keep_token_file_in_step(&args.data_dir, &t)?;
            t
        }
        Some(_) => anyhow::bail!("DESKBROKER_ADMIN_TOKEN must be at least 16 characters"),
        None => admin_token_file(&args.data_dir)?,
    };
    let database_url = args.database_url.clone().filter(|u| !u.trim().is_empty());
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
    let store_name = format!("sqlite {}", args.data_dir.display());
    let front_door_config = args
        .front_door
        .config(args.rdp_default_pool.clone(), &token);
    let broker = broker::open(Arc::new(store), token)
        .await
        .context("cannot load the store")?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    let rdp_listener = bind_rdp(args.rdp_listen).await?;
    tracing::info!(%addr, store = %store_name, "deskbroker listening");
    // Tests and scripts read these lines to find port-0 listeners.
    println!("listening on http://{addr}");
    announce_rdp(rdp_listener.as_ref())?;
    *broker
        .rdp_front_door
        .write()
        .unwrap_or_else(|e| e.into_inner()) = rdp_public_address(&args, rdp_listener.as_ref())?;
    std::io::stdout().flush()?;

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
    let served = broker::serve(broker, listener, stopped(stop_rx)).await;
    let _ = stop_tx.send(true);
    if let Some(task) = front_door {
        let _ = task.await;
    }
    served.map_err(anyhow::Error::msg)?;
    tracing::info!("deskbroker stopped cleanly");
    Ok(())
}

/// `serve --database-url`: one replica among any number sharing the
/// database (see `broker::replica`). The RDP front door, if any, places
/// through this replica's own API, so that it follows the leader too.
async fn run_replica(args: ServeArgs, database_url: &str, token: String) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    let advertise_url = match &args.advertise_url {
        Some(u) => {
            anyhow::ensure!(
                u.starts_with("http://") && u.len() > "http://".len(),
                "--advertise-url must be http://HOST:PORT"
            );
            u.trim_end_matches('/').to_string()
        }
        None => {
            anyhow::ensure!(
                !addr.ip().is_unspecified(),
                "--listen {addr} is a wildcard address: set --advertise-url to how the \
                 other replicas reach this one"
            );
            format!("http://{addr}")
        }
    };
    let rdp_listener = bind_rdp(args.rdp_listen).await?;
    let rdp_public = rdp_public_address(&args, rdp_listener.as_ref())?;
    let replica = broker::replica::Replica::start(broker::replica::ReplicaConfig {
        database_url: database_url.to_string(),
        advertise_url: advertise_url.clone(),
        admin_token: token.clone(),
        rdp_front_door: rdp_public,
    })
    .await
    .map_err(anyhow::Error::msg)
    .context("cannot use the PostgreSQL database")?;
    tracing::info!(%addr, role = replica.role_name(), advertise = %advertise_url, "deskbroker replica listening");
    println!("listening on http://{addr}");
    announce_rdp(rdp_listener.as_ref())?;
    std::io::stdout().flush()?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop_tx.send(true);
    });
    let front_door = match rdp_listener {
        Some(l) => {
            let own = if addr.ip().is_unspecified() {
                let loopback = if addr.is_ipv4() { "127.0.0.1" } else { "[::1]" };
                format!("http://{loopback}:{}", addr.port())
            } else {
                format!("http://{addr}")
            };
            let own = api::BrokerUrl::parse(&own)?;
            let placer = gateway::Http::new(own, &token).map_err(|e| anyhow::anyhow!("{e}"))?;
            let config = args
                .front_door
                .config(args.rdp_default_pool.clone(), &token);
            Some(tokio::spawn(gateway::serve(
                l,
                Arc::new(placer),
                config,
                stopped(stop_rx.clone()),
            )))
        }
        None => None,
    };
    let served = broker::replica::serve(replica, listener, stopped(stop_rx)).await;
    if let Some(task) = front_door {
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
    let l = tokio::net::TcpListener::bind(rdp_addr)
        .await
        .with_context(|| format!("cannot listen for RDP on {rdp_addr}"))?;
    Ok(Some(l))
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
    let Some(l) = rdp_listener else {
        return Ok(None);
    };
    Ok(Some(match &args.rdp_public_address {
        Some(p) => p.clone(),
        None => l.local_addr()?.to_string(),
    }))
}

async fn stopped(mut rx: tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

/// Reads `DATA_DIR/admin.token`, or creates it (mode 0600) with a new
/// random token and says where it is.
fn admin_token_file(dir: &Path) -> anyhow::Result<String> {
    let path = dir.join("admin.token");
    match std::fs::read_to_string(&path) {
        Ok(t) if !t.trim().is_empty() => return Ok(t.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
    let bytes: [u8; 32] = rand::random();
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
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
