//! `deskbroker backup` and `deskbroker restore`: a consistent copy of the
//! embedded SQLite store, taken while the broker runs, and putting one
//! back in a data directory no broker is using (`store::sqlite_backup`
//! does the copying). PostgreSQL stores are backed up with the server's
//! own tools (`pg_dump`, `pg_restore`; docs/operations.md).

use std::path::PathBuf;

use anyhow::Context;

/// Flags of `deskbroker backup`.
#[derive(clap::Args, Debug, Clone)]
pub struct BackupArgs {
    /// Data directory of the store to copy (its broker may be running).
    #[arg(long, env = "DESKBROKER_DATA_DIR", default_value = "./deskbroker-data")]
    pub data_dir: PathBuf,
    /// The backup file to write (mode 0600: it holds credential hashes and
    /// the broker's signing keys).
    #[arg(long, value_name = "FILE")]
    pub output: PathBuf,
    /// Replace FILE if it exists.
    #[arg(long)]
    pub force: bool,
}

/// Flags of `deskbroker restore`.
#[derive(clap::Args, Debug, Clone)]
pub struct RestoreArgs {
    /// A backup made by `deskbroker backup` (or a store file of a stopped
    /// broker).
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
    /// Data directory to restore into; no broker may be using it.
    #[arg(long, env = "DESKBROKER_DATA_DIR", default_value = "./deskbroker-data")]
    pub data_dir: PathBuf,
    /// Replace the store the data directory already holds.
    #[arg(long)]
    pub force: bool,
}

pub fn backup(args: BackupArgs) -> anyhow::Result<()> {
    let copied = store::sqlite_backup::backup(&args.data_dir, &args.output, args.force)
        .with_context(|| format!("cannot back up the store in {}", args.data_dir.display()))?;
    println!(
        "backed up {} to {} (schema version {}, {} bytes, integrity check ok)",
        args.data_dir
            .join(store::sqlite_backup::DATABASE_FILE)
            .display(),
        args.output.display(),
        copied.schema_version,
        copied.bytes
    );
    Ok(())
}

pub fn restore(args: RestoreArgs) -> anyhow::Result<()> {
    let dir = &args.data_dir;
    let refused = || format!("cannot restore into {}", dir.display());
    // The input first: a bad file must not cost the data dir anything.
    let found = store::sqlite_backup::check(&args.input).with_context(refused)?;
    crate::serve::private_data_dir(dir)?;
    let _lock = crate::data_dir_lock::lock(dir)
        .context("stop the broker before restoring")
        .with_context(refused)?;
    let target = dir.join(store::sqlite_backup::DATABASE_FILE);
    if target.exists() && !args.force {
        anyhow::bail!(
            "{}: {} already holds a store; pass --force to replace it",
            refused(),
            target.display()
        );
    }
    store::sqlite_backup::restore(&args.input, dir).with_context(refused)?;
    println!(
        "restored {} into {} (schema version {}{})",
        args.input.display(),
        target.display(),
        found.schema_version,
        if found.schema_version < store::sqlite_backup::schema_version() {
            format!(
                "; the next `serve` migrates it to {}",
                store::sqlite_backup::schema_version()
            )
        } else {
            String::new()
        }
    );
    Ok(())
}
