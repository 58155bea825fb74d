//! Backups of the embedded SQLite store, and restoring one.
//!
//! [`backup`] copies the store of a running broker with SQLite's online
//! backup API: it reads one consistent snapshot (a read transaction, which
//! in WAL mode never holds the broker's writer up) into a temporary file
//! next to the output, checks it with `PRAGMA integrity_check`, and only
//! then gives it the output's name, so that a failed backup leaves no file
//! that looks like one. [`check`] tells whether a file is a store this
//! deskbroker can open, and [`restore`] puts one in place in a data
//! directory (the caller makes sure no broker is using it).

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::StoreError;
pub use crate::sqlite::DATABASE_FILE;
use crate::sqlite::MIGRATIONS;

/// The newest schema version this deskbroker knows (and migrates to).
pub fn schema_version() -> usize {
    MIGRATIONS.len()
}

/// How many times a backup tries again when the broker's checkpointer
/// holds the lock the first read needs (it does for a few milliseconds
/// when the WAL starts over), and how long it waits between tries.
const BACKUP_BUSY_RETRIES: u32 = 100;
const BACKUP_BUSY_SLEEP: Duration = Duration::from_millis(50);

/// What a backup, a check or a restore found in a store file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSummary {
    /// Its schema version (how many migrations it has had).
    pub schema_version: usize,
    /// Its size in bytes.
    pub bytes: u64,
}

/// Copies the store in `data_dir` (which a broker may be writing) to
/// `output`, consistently. Refuses to replace an existing `output` unless
/// `overwrite`. The copy is a single file (no WAL), mode 0600: it holds the
/// hashes of every credential and the broker's signing keys.
pub fn backup(data_dir: &Path, output: &Path, overwrite: bool) -> Result<StoreSummary, StoreError> {
    let source_path = data_dir.join(DATABASE_FILE);
    if !source_path.is_file() {
        return Err(task(format!(
            "{} holds no deskbroker store (no {DATABASE_FILE})",
            data_dir.display()
        )));
    }
    if !overwrite && output.exists() {
        return Err(task(format!(
            "{} already exists: pass --force to replace it",
            output.display()
        )));
    }
    // Read-only: a backup never writes to the store it copies (SQLite
    // still shares the WAL index with the broker, as any reader does).
    let source = Connection::open_with_flags(
        &source_path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    source.busy_timeout(Duration::from_secs(5))?;
    let tmp = temporary_next_to(output)?;
    let copied = (|| {
        copy_into(&source, &tmp.path)?;
        let found = check(&tmp.path)?;
        publish(&tmp.path, output, overwrite)?;
        Ok(found)
    })();
    drop(tmp);
    copied
}

/// Checks that `file` is a whole deskbroker store this deskbroker can
/// open: SQLite's integrity check passes, its schema version is one this
/// deskbroker knows, and it has every table of that version.
pub fn check(file: &Path) -> Result<StoreSummary, StoreError> {
    let not_a_store = |why: String| {
        task(format!(
            "{} is not a deskbroker store: {why}",
            file.display()
        ))
    };
    let bytes = std::fs::metadata(file)
        .map_err(|e| task(format!("cannot read {}: {e}", file.display())))?
        .len();
    let conn = Connection::open_with_flags(
        file,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(|e| not_a_store(e.to_string()))?;
    let integrity: Vec<String> = conn
        .prepare("PRAGMA integrity_check")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(|e| not_a_store(e.to_string()))?;
    if integrity != ["ok"] {
        return Err(not_a_store(format!(
            "SQLite's integrity check failed: {}",
            integrity.join("; ")
        )));
    }
    let schema_version = match usize::try_from(version) {
        Ok(0) => return Err(not_a_store("it has no deskbroker schema".into())),
        Ok(v) if v <= MIGRATIONS.len() => v,
        _ => {
            return Err(StoreError::NewerSchema {
                found: version,
                known: MIGRATIONS.len(),
            });
        }
    };
    let tables = table_names(&conn)?;
    let missing: Vec<String> = tables_of_version(schema_version)?
        .into_iter()
        .filter(|t| !tables.contains(t))
        .collect();
    if !missing.is_empty() {
        return Err(not_a_store(format!(
            "schema version {schema_version} has tables it lacks: {}",
            missing.join(", ")
        )));
    }
    Ok(StoreSummary {
        schema_version,
        bytes,
    })
}

/// Puts the store `input` in place in `data_dir`, replacing the store
/// there if any (with its WAL). The caller has checked `input` and holds
/// the data directory's lock, so that no broker is using the store.
pub fn restore(input: &Path, data_dir: &Path) -> Result<StoreSummary, StoreError> {
    let found = check(input)?;
    let source = Connection::open_with_flags(
        input,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let target = data_dir.join(DATABASE_FILE);
    let tmp = temporary_next_to(&target)?;
    copy_into(&source, &tmp.path)?;
    drop(source);
    owned_like(&tmp.path, data_dir)?;
    // The WAL and its index belong to the store being replaced: left in
    // place, SQLite would apply that store's last commits to this one.
    for suffix in ["-wal", "-shm"] {
        let mut name = target.clone().into_os_string();
        name.push(suffix);
        match std::fs::remove_file(PathBuf::from(name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(task(format!(
                    "cannot remove the old store's {suffix} file: {e}"
                )));
            }
            _ => {}
        }
    }
    publish(&tmp.path, &target, true)?;
    drop(tmp);
    Ok(found)
}

/// Gives `file` the owner and group of `dir` when they differ: a restore
/// run as root into the data directory of a broker that runs as its own
/// user (as the package's does) must leave a store that broker can open.
/// Only root can give a file away, and only root can have made a file in
/// another user's private directory, so this fails only where it must.
#[cfg(unix)]
fn owned_like(file: &Path, dir: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::MetadataExt as _;
    let (dir_meta, file_meta) = match (std::fs::metadata(dir), std::fs::metadata(file)) {
        (Ok(d), Ok(f)) => (d, f),
        (Err(e), _) | (_, Err(e)) => {
            return Err(task(format!(
                "cannot read the owner of {}: {e}",
                dir.display()
            )));
        }
    };
    if (dir_meta.uid(), dir_meta.gid()) == (file_meta.uid(), file_meta.gid()) {
        return Ok(());
    }
    std::os::unix::fs::chown(file, Some(dir_meta.uid()), Some(dir_meta.gid())).map_err(|e| {
        task(format!(
            "cannot give the restored store to the owner of {} (uid {}): {e}",
            dir.display(),
            dir_meta.uid()
        ))
    })
}

#[cfg(not(unix))]
fn owned_like(_file: &Path, _dir: &Path) -> Result<(), StoreError> {
    Ok(())
}

/// Copies the database of `source` into a new file `path` with the online
/// backup API, in one step (one read transaction: a consistent snapshot),
/// trying again while the source is busy; then makes it a single file
/// (journal mode DELETE) and flushes it.
fn copy_into(source: &Connection, path: &Path) -> Result<(), StoreError> {
    let mut dest = Connection::open(path)?;
    {
        let backup = rusqlite::backup::Backup::new(source, &mut dest)?;
        let mut tries = 0;
        loop {
            match backup.step(-1)? {
                rusqlite::backup::StepResult::Done => break,
                rusqlite::backup::StepResult::More => continue,
                rusqlite::backup::StepResult::Busy | rusqlite::backup::StepResult::Locked => {
                    tries += 1;
                    if tries > BACKUP_BUSY_RETRIES {
                        return Err(task(
                            "the store stayed locked: try again (is a restore running?)".into(),
                        ));
                    }
                    std::thread::sleep(BACKUP_BUSY_SLEEP);
                }
                // The enum is non-exhaustive: anything new is a failure.
                _ => return Err(task("the backup step answered something unknown".into())),
            }
        }
    }
    let mode: String = dest.query_row("PRAGMA journal_mode=DELETE", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("delete") {
        return Err(task(format!("the copy stayed in journal mode {mode}")));
    }
    dest.close().map_err(|(_, e)| StoreError::Sqlite(e))?;
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| task(format!("cannot flush {}: {e}", path.display())))
}

/// Gives `tmp` the name `target`, replacing a file there only when
/// `overwrite` (otherwise, if one appeared meanwhile, refusing), and makes
/// the rename durable.
fn publish(tmp: &Path, target: &Path, overwrite: bool) -> Result<(), StoreError> {
    let moved = if overwrite {
        std::fs::rename(tmp, target)
    } else {
        // A hard link fails if the target exists: no race with another
        // writer of that name.
        std::fs::hard_link(tmp, target).and_then(|()| std::fs::remove_file(tmp))
    };
    moved.map_err(|e| task(format!("cannot write {}: {e}", target.display())))?;
    let dir = target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| task(format!("cannot flush {}: {e}", dir.display())))
}

/// A new, empty file next to `target` (same directory, so the rename is
/// atomic), mode 0600, removed when dropped unless renamed meanwhile.
struct Temporary {
    path: PathBuf,
}

impl Drop for Temporary {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let mut journal = self.path.clone().into_os_string();
        journal.push("-journal");
        let _ = std::fs::remove_file(PathBuf::from(journal));
    }
}

fn temporary_next_to(target: &Path) -> Result<Temporary, StoreError> {
    let name = target
        .file_name()
        .ok_or_else(|| task(format!("{} names no file", target.display())))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let path = target.with_file_name(tmp_name);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    // A stale file of a crashed run may have other permissions: start anew.
    let _ = std::fs::remove_file(&path);
    options
        .open(&path)
        .map_err(|e| task(format!("cannot create {}: {e}", path.display())))?;
    Ok(Temporary { path })
}

/// The tables of a store at `version`: those its migrations create.
fn tables_of_version(version: usize) -> Result<Vec<String>, StoreError> {
    let conn = Connection::open_in_memory()?;
    for sql in &MIGRATIONS[..version] {
        conn.execute_batch(sql)?;
    }
    table_names(&conn)
}

fn table_names(conn: &Connection) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
         ORDER BY name",
    )?;
    let names = stmt
        .query_map([], |r| r.get(0))?
        .collect::<Result<Vec<String>, _>>()?;
    Ok(names)
}

fn task(message: String) -> StoreError {
    StoreError::File(message)
}
