//! Secrets given as files (`--admin-token-file`, `--token-file`,
//! `--database-url-file`, `--oidc-client-secret-file`): only the first
//! line counts, and a file that other users may read is refused, so that a
//! secret left readable by the group or the world stops the process at
//! once instead of going on working.

use std::path::Path;

use anyhow::Context;

/// The first line of `path`, trimmed, when only its owner may read it;
/// `flag` and `what` name it in errors.
pub fn read(path: &Path, flag: &str, what: &str) -> anyhow::Result<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path)
            .with_context(|| format!("cannot read {flag} {}", path.display()))?;
        let mode = meta.permissions().mode() & 0o777;
        anyhow::ensure!(
            mode & 0o077 == 0,
            "{flag} {} has mode {mode:o}: other users may read {what}. Make it readable by \
             this user only (chmod 600 {0}, or a mounted secret's mode 0400) and start again",
            path.display()
        );
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {flag} {}", path.display()))?;
    Ok(text.lines().next().unwrap_or("").trim().to_string())
}
