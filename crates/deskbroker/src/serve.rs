//! `deskbroker serve`: runs the broker (HTTP API) on the embedded SQLite
//! store in `--data-dir`.

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
    /// The admin bearer token; generated into DATA_DIR/admin.token when unset.
    #[arg(
        long = "admin-token",
        env = "DESKBROKER_ADMIN_TOKEN",
        hide_env_values = true
    )]
    pub admin_token: Option<String>,
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("cannot create data dir {}", args.data_dir.display()))?;
    let token = match args.admin_token {
        Some(t) if t.len() >= 16 => t,
        Some(_) => anyhow::bail!("DESKBROKER_ADMIN_TOKEN must be at least 16 characters"),
        None => admin_token_file(&args.data_dir)?,
    };
    let store = store::SqliteStore::open(&args.data_dir)
        .with_context(|| format!("cannot open the store in {}", args.data_dir.display()))?;
    let broker = broker::open(Arc::new(store), token)
        .await
        .context("cannot load the store")?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, data_dir = %args.data_dir.display(), "deskbroker listening");
    // Tests and scripts read this line to find a port-0 listener.
    println!("listening on http://{addr}");
    std::io::stdout().flush()?;
    broker::serve(broker, listener, shutdown_signal())
        .await
        .map_err(anyhow::Error::msg)?;
    tracing::info!("deskbroker stopped cleanly");
    Ok(())
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

async fn shutdown_signal() {
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
