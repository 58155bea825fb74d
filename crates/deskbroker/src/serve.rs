//! `deskbroker serve`: runs the broker (HTTP API) on the embedded SQLite
//! store in `--data-dir`, or on PostgreSQL with `--database-url`, and with
//! `--rdp-listen` the RDP front door (crate `gateway`) in the same process,
//! stopped by the same signal.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;

/// Flags of `deskbroker serve` (see `shared/spec/api.md`).
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
    /// admin token). One broker process per database for now: a second one
    /// is refused.
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
    let token = match args.admin_token {
        Some(t) if t.len() >= 16 => t,
        Some(_) => anyhow::bail!("DESKBROKER_ADMIN_TOKEN must be at least 16 characters"),
        None => admin_token_file(&args.data_dir)?,
    };
    let (store, store_name) = open_store(args.database_url.as_deref(), &args.data_dir).await?;
    let broker = broker::open(store, token)
        .await
        .context("cannot load the store")?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    let rdp_listener = match args.rdp_listen {
        Some(rdp_addr) => Some(
            tokio::net::TcpListener::bind(rdp_addr)
                .await
                .with_context(|| format!("cannot listen for RDP on {rdp_addr}"))?,
        ),
        None => None,
    };
    tracing::info!(%addr, store = %store_name, "deskbroker listening");
    // Tests and scripts read these lines to find port-0 listeners.
    println!("listening on http://{addr}");
    if let Some(l) = &rdp_listener {
        let rdp_addr = l.local_addr()?;
        tracing::info!(%rdp_addr, default_pool = ?args.rdp_default_pool, "rdp front door listening");
        println!("rdp front door listening on {rdp_addr}");
        let public = args
            .rdp_public_address
            .clone()
            .unwrap_or_else(|| rdp_addr.to_string());
        *broker
            .rdp_front_door
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(public);
    }
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
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let front_door = rdp_listener.map(|l| {
        let placer = Arc::new(gateway::InProcess::new(broker.clone()));
        let config = gateway::Config::new(args.rdp_default_pool.clone());
        tokio::spawn(gateway::serve(l, placer, config, stopped(stop_rx.clone())))
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

/// The store to use: PostgreSQL for a `postgres://` database URL,
/// otherwise SQLite in the data dir; and how to name it in logs (never
/// with a password).
async fn open_store(
    database_url: Option<&str>,
    data_dir: &Path,
) -> anyhow::Result<(Arc<dyn store::Store>, String)> {
    match database_url.filter(|u| !u.trim().is_empty()) {
        Some(url) if store::postgres::is_postgres_url(url) => {
            let store = store::PostgresStore::connect(url)
                .await
                .context("cannot open the PostgreSQL store")?;
            let name = format!("postgres {}", store.target());
            Ok((Arc::new(store), name))
        }
        Some(_) => anyhow::bail!(
            "--database-url must start with postgres:// or postgresql:// \
             (leave it unset for the embedded SQLite store)"
        ),
        None => {
            let store = store::SqliteStore::open(data_dir)
                .with_context(|| format!("cannot open the store in {}", data_dir.display()))?;
            Ok((Arc::new(store), format!("sqlite {}", data_dir.display())))
        }
    }
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
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut f = options
        .open(&path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    writeln!(f, "{token}")?;
    f.sync_all()?;
    eprintln!("admin token written to {}", path.display());
    Ok(token)
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
