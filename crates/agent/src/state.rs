//! The agent's state file, `STATE_DIR/agent.json`: which broker, pool and
//! name it registered as, and the host credential it got. On start, a state
//! file for the same broker, pool and name means "already registered": the
//! agent uses the credential and does not register again (a registration
//! token is typically short-lived; the credential is not).
//!
//! The credential is a secret: the file is written with mode 0600 (the
//! directory 0700 when the agent creates it), through a temporary file and
//! a rename, so a crash never leaves half a file.

use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The state file's name inside the state directory.
pub const STATE_FILE: &str = "agent.json";

/// What the state file holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedState {
    pub broker: String,
    pub host_pool: String,
    pub name: String,
    pub host_credential: String,
}

impl SavedState {
    /// Whether this state is about the given broker, pool and host. URLs
    /// compare without a trailing `/`, so `http://b:1` is `http://b:1/`.
    pub fn is_for(&self, broker: &str, host_pool: &str, name: &str) -> bool {
        self.broker.trim_end_matches('/') == broker.trim_end_matches('/')
            && self.host_pool == host_pool
            && self.name == name
    }
}

/// The state file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("state file {}: {source}", path.display())]
pub struct StateError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

/// The state file of a state directory.
#[derive(Debug, Clone)]
pub struct StateFile {
    path: PathBuf,
}

impl StateFile {
    pub fn new(state_dir: &Path) -> StateFile {
        StateFile {
            path: state_dir.join(STATE_FILE),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn error(&self, source: io::Error) -> StateError {
        StateError {
            path: self.path.clone(),
            source,
        }
    }

    /// Creates the state directory (mode 0700) if needed, and checks that a
    /// file can be written there, so that a read-only or missing directory
    /// is reported at start, not after the first registration.
    pub fn prepare(&self) -> Result<(), StateError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| self.error(e))?;
        let probe = dir.join(".agent.json.check");
        std::fs::write(&probe, b"").map_err(|e| self.error(e))?;
        let _ = std::fs::remove_file(&probe);
        Ok(())
    }

    /// The saved state; `Ok(None)` when there is none. A file that is not
    /// a state file is an error (the caller logs it and registers anew).
    pub fn load(&self) -> Result<Option<SavedState>, StateError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.error(e)),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| self.error(io::Error::new(io::ErrorKind::InvalidData, e)))
    }

    /// Writes the state durably, mode 0600.
    pub fn save(&self, state: &SavedState) -> Result<(), StateError> {
        let tmp = self.path.with_extension("json.tmp");
        let write = || -> io::Result<()> {
            let _ = std::fs::remove_file(&tmp);
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            let mut text = serde_json::to_string_pretty(state).map_err(io::Error::other)?;
            text.push('\n');
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            if let Some(dir) = self.path.parent() {
                std::fs::File::open(dir)?.sync_all()?;
            }
            Ok(())
        };
        write().map_err(|e| self.error(e))
    }

    /// Forgets the credential (it was revoked).
    pub fn remove(&self) -> Result<(), StateError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.error(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn state() -> SavedState {
        SavedState {
            broker: "http://127.0.0.1:8080/".into(),
            host_pool: "farm".into(),
            name: "h7".into(),
            host_credential: "dbh_secret".into(),
        }
    }

    #[test]
    fn saved_state_round_trips_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let file = StateFile::new(&dir.path().join("nested/state"));
        file.prepare().unwrap();
        let mode = std::fs::metadata(dir.path().join("nested/state"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        assert_eq!(file.load().unwrap(), None);

        file.save(&state()).unwrap();
        assert_eq!(file.load().unwrap(), Some(state()));
        let mode = std::fs::metadata(file.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let text = std::fs::read_to_string(file.path()).unwrap();
        assert!(
            text.contains("\"hostCredential\": \"dbh_secret\""),
            "{text}"
        );

        file.remove().unwrap();
        assert_eq!(file.load().unwrap(), None);
        file.remove().unwrap();
    }

    #[test]
    fn a_corrupt_state_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = StateFile::new(dir.path());
        std::fs::write(file.path(), "{not json").unwrap();
        let err = file.load().unwrap_err();
        assert!(err.to_string().starts_with("state file "), "{err}");
    }

    #[test]
    fn state_matches_broker_pool_and_name() {
        let s = state();
        assert!(s.is_for("http://127.0.0.1:8080", "farm", "h7"));
        assert!(!s.is_for("http://127.0.0.1:8081/", "farm", "h7"));
        assert!(!s.is_for("http://127.0.0.1:8080/", "farm2", "h7"));
        assert!(!s.is_for("http://127.0.0.1:8080/", "farm", "h8"));
    }
}
