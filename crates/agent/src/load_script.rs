//! `--load-script`: the operator's own load index (rule H3). The script runs
//! through `sh -c` at every sample and prints an integer ≥ 0, reported as
//! `customLoadIndex`. A script that fails, times out or prints anything else
//! is logged in one line and the last good value is reported again, so one
//! bad run does not make the host look idle (or unknown) to the broker.

use std::time::Duration;

use crate::probe::{self, PROBE_TIMEOUT, ProbeError};

/// A load index is a short number: anything longer is junk.
const OUTPUT_BYTES_MAX: usize = 1024;

/// Why one run of the load script gave no value.
#[derive(Debug, thiserror::Error)]
pub enum LoadScriptError {
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error("printed {0:?}, not an integer >= 0")]
    Junk(String),
}

/// Reads the script's output: one integer ≥ 0, blanks around it allowed.
pub fn parse_load_index(stdout: &str) -> Result<i64, LoadScriptError> {
    let text = stdout.trim();
    match text.parse::<i64>() {
        Ok(v) if v >= 0 => Ok(v),
        _ => {
            let shown: String = text.chars().take(80).collect();
            Err(LoadScriptError::Junk(shown))
        }
    }
}

/// The load script and its last good value.
#[derive(Debug)]
pub struct LoadScript {
    command: String,
    timeout: Duration,
    last_good: Option<i64>,
}

impl LoadScript {
    pub fn new(command: String) -> LoadScript {
        LoadScript::with_timeout(command, PROBE_TIMEOUT)
    }

    /// Tests use a shorter time limit than the 10 s of production.
    pub fn with_timeout(command: String, timeout: Duration) -> LoadScript {
        LoadScript {
            command,
            timeout,
            last_good: None,
        }
    }

    /// Runs the script once and returns the value to report: this run's, or
    /// the last good one when this run failed (`None` if none ever worked).
    pub async fn sample(&mut self) -> Option<i64> {
        match self.run_once().await {
            Ok(v) => self.last_good = Some(v),
            Err(e) => {
                let kept = match self.last_good {
                    Some(v) => format!("keeping the last good value {v}"),
                    None => "no customLoadIndex reported".to_string(),
                };
                tracing::warn!("load script `{}` {e}; {kept}", self.command);
            }
        }
        self.last_good
    }

    async fn run_once(&self) -> Result<i64, LoadScriptError> {
        let out = probe::run(probe::shell(&self.command), self.timeout, OUTPUT_BYTES_MAX).await?;
        parse_load_index(&out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_output_is_one_integer_at_least_zero() {
        for (out, want) in [("42\n", Some(42)), ("  0 \n", Some(0)), ("250", Some(250))] {
            assert_eq!(parse_load_index(out).ok(), want, "{out:?}");
        }
        for out in [
            "",
            "-1",
            "4.2",
            "42 43",
            "high",
            "0x10",
            "99999999999999999999",
        ] {
            let err = parse_load_index(out).unwrap_err();
            assert!(
                err.to_string().ends_with("not an integer >= 0"),
                "{out:?}: {err}"
            );
        }
    }

    /// Writes an executable script into `dir` and returns its path.
    fn script(dir: &Path, name: &str, body: &str) -> String {
        use std::os::unix::fs::PermissionsExt as _;
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    }

    #[tokio::test]
    async fn the_last_good_value_survives_failures_timeouts_and_junk() {
        let dir = tempfile::tempdir().unwrap();
        // The script prints what the file `value` says, or runs what it says.
        let value = dir.path().join("value");
        let path = script(
            dir.path(),
            "load.sh",
            &format!("eval \"$(cat {})\"", value.display()),
        );
        let mut load = LoadScript::with_timeout(path, Duration::from_millis(500));
        let set = |cmd: &str| std::fs::write(&value, cmd).unwrap();

        set("exit 1");
        assert_eq!(load.sample().await, None, "never good: nothing to report");

        set("echo 37");
        assert_eq!(load.sample().await, Some(37));

        for bad in [
            "echo broken >&2; exit 2",
            "echo lots",
            "echo -5",
            "sleep 5; echo 1",
            "echo",
        ] {
            set(bad);
            assert_eq!(load.sample().await, Some(37), "after {bad:?}");
        }

        set("echo 61");
        assert_eq!(load.sample().await, Some(61));
    }

    #[tokio::test]
    async fn a_missing_script_reports_nothing() {
        let mut load = LoadScript::new("/nonexistent/load.sh".into());
        assert_eq!(load.sample().await, None);
    }
}
