//! Rules A9 and A10 for manual power actions: the `command` driver run
//! for real (a command appending `$DESKBROKER_ACTION $DESKBROKER_HOST` to a
//! file), each action recorded Pending then with its outcome, retries
//! after a failure, a hanging command killed after its timeout, and an
//! action a restart interrupted recorded Failed, never run again.

use std::path::PathBuf;

use broker::testkit::Kit;

/// A file power commands append to, in a directory of its own.
pub struct PowerLog {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl PowerLog {
    pub fn new() -> PowerLog {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("power.log");
        PowerLog { _dir: dir, path }
    }

    /// A path beside the log (a gate file, say).
    pub fn beside(&self, name: &str) -> PathBuf {
        self.path.with_file_name(name)
    }

    /// A command that appends its action and host to the log.
    pub fn command(&self) -> String {
        format!(
            "echo \"$DESKBROKER_ACTION $DESKBROKER_HOST\" >> '{}'",
            self.path.display()
        )
    }

    /// The lines written so far, in order.
    pub fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.path)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The lines written so far, sorted.
    pub fn sorted(&self) -> Vec<String> {
        let mut v = self.lines();
        v.sort();
        v
    }
}

/// A broker that runs power commands (`serve --allow-power-commands`)
/// and evaluates scaling plans every second.
pub async fn kit_with_power() -> Kit {
    Kit::open_with(|s| {
        s.allow_power_commands = true;
        s.autoscale_interval = broker::autoscale::MIN_AUTOSCALE_INTERVAL;
    })
    .await
}
