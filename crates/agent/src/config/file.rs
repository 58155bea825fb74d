//! Reading configuration files and the secrets they name: the one TOML
//! loader of deskbroker's files (the agent's, and `serve`'s and
//! `gateway`'s), and secret files, refused when other users may read them.

use std::path::{Path, PathBuf};

use super::ConfigError;

/// Reads and parses a TOML config file into `T`: the one loader of
/// deskbroker's config files (the agent's, and `serve`'s and `gateway`'s,
/// which parse into a table and check its keys against their flags).
pub fn read_toml_file<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, ConfigError> {
    parse_toml(&read_text(path)?, path)
}

/// Parses the text of a config file; `path` only names it in errors.
pub fn parse_toml<T: serde::de::DeserializeOwned>(
    text: &str,
    path: &Path,
) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::File {
        path: path.to_path_buf(),
        message: e.message().to_string(),
    })
}

/// A file holding a secret that cannot be used: it cannot be read, or
/// other users may read it.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SecretFileError {
    #[error("cannot read {setting} {}: {message}", path.display())]
    Read {
        setting: String,
        path: PathBuf,
        message: String,
    },
    #[error(
        "{setting} {p} has mode {mode:o}: other users may read {what}. Make it readable by \
         this user only (chmod 600 {p}, or a mounted secret's mode 0400) and start again",
        p = path.display()
    )]
    Readable {
        setting: String,
        path: PathBuf,
        mode: u32,
        what: String,
    },
}

/// Refuses a file holding a secret that other users may read (any group
/// or other permission bit): a secret left readable stops the process at
/// once instead of going on working. The one check of every secret file
/// of deskbroker (`serve`'s, `gateway`'s and the agent's); `setting` and
/// `what` name the file and the secret in the error.
pub fn check_secret_file(path: &Path, setting: &str, what: &str) -> Result<(), SecretFileError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path).map_err(|e| SecretFileError::Read {
            setting: setting.to_string(),
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(SecretFileError::Readable {
                setting: setting.to_string(),
                path: path.to_path_buf(),
                mode,
                what: what.to_string(),
            });
        }
    }
    #[cfg(not(unix))]
    let _ = (path, setting, what);
    Ok(())
}

/// The first line of the secret file `path`, trimmed, once
/// [`check_secret_file`] has passed it.
pub fn read_secret_file(path: &Path, setting: &str, what: &str) -> Result<String, SecretFileError> {
    check_secret_file(path, setting, what)?;
    let text = std::fs::read_to_string(path).map_err(|e| SecretFileError::Read {
        setting: setting.to_string(),
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    Ok(text.lines().next().unwrap_or("").trim().to_string())
}

pub(super) fn read_text(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}
