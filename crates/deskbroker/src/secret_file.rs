//! Secrets given as files (`--admin-token-file`, `--token-file`,
//! `--database-url-file`, `--oidc-client-secret-file`): only the first
//! line counts, and a file that other users may read is refused, so that a
//! secret left readable by the group or the world stops the process at
//! once instead of going on working. The check is the agent's
//! ([`agent::config::read_secret_file`]), so that every secret file of
//! deskbroker is held to the same rule and refused in the same words.

use std::path::Path;

/// The first line of `path`, trimmed, when only its owner may read it;
/// `flag` and `what` name it in errors.
pub fn read(path: &Path, flag: &str, what: &str) -> anyhow::Result<String> {
    Ok(agent::config::read_secret_file(path, flag, what)?)
}
