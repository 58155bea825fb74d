//! The data directory's permissions: its user's alone (0700), and the
//! store's files 0600, also when the broker is started by hand rather than
//! by the packaged unit (whose UMask=0077 has it so).

use std::path::Path;

use anyhow::Context;

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
pub(super) fn private_database_files(dir: &Path) -> anyhow::Result<()> {
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
pub(super) fn make_private(path: &Path, mode: u32) -> anyhow::Result<()> {
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
