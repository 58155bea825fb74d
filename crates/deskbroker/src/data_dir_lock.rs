//! The data directory's lock: `DATA_DIR/deskbroker.lock`, locked
//! exclusively (`flock`) by `serve` on the SQLite store for as long as it
//! runs, and by `restore` while it replaces the store. Two brokers on one
//! store would overwrite each other's decisions, and a restore under a
//! running broker would be overwritten by it (or corrupt it): the second
//! one is refused at once. The operating system releases the lock when
//! the process ends, however it ends, so a crash leaves nothing to clean.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::Path;

use anyhow::Context;

/// The lock file's name in the data directory.
pub const LOCK_FILE: &str = "deskbroker.lock";

/// Held while alive; the lock ends with the file's descriptor.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

/// Takes the lock of `dir` (which must exist), without waiting, and writes
/// this process's id into the file so that a refusal can name the holder.
pub fn lock(dir: &Path) -> anyhow::Result<DataDirLock> {
    let path = dir.join(LOCK_FILE);
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    owned_like_dir(&file, &path, dir)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = match holder.trim() {
                "" => String::new(),
                pid => format!(" (pid {pid})"),
            };
            anyhow::bail!(
                "another deskbroker{holder} is using the data directory {}: it holds {}",
                dir.display(),
                path.display()
            );
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("cannot lock {}", path.display()));
        }
    }
    let written = (|| -> std::io::Result<()> {
        file.set_len(0)?;
        file.rewind()?;
        writeln!(file, "{}", std::process::id())
    })();
    written.with_context(|| format!("cannot write {}", path.display()))?;
    Ok(DataDirLock { _file: file })
}

/// Gives the lock file the data directory's owner when root made it (a
/// `restore` as root into a directory the broker's user owns), so the
/// broker can open it next time.
#[cfg(unix)]
fn owned_like_dir(file: &File, path: &Path, dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    let dir_meta =
        std::fs::metadata(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?;
    if (meta.uid(), meta.gid()) != (dir_meta.uid(), dir_meta.gid()) {
        std::os::unix::fs::fchown(file, Some(dir_meta.uid()), Some(dir_meta.gid())).with_context(
            || {
                format!(
                    "cannot give {} to the owner of {} (uid {})",
                    path.display(),
                    dir.display(),
                    dir_meta.uid()
                )
            },
        )?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn owned_like_dir(_file: &File, _path: &Path, _dir: &Path) -> anyhow::Result<()> {
    Ok(())
}
