//! Runs the programs the agent asks for its data — the operator's
//! `--load-script` and `--sessions-command` (through `sh -c`), and
//! `loginctl` — with a time limit and a bound on what they may print.
//!
//! A probe runs in its own process group, so that on a time-out the shell
//! *and* whatever it started are killed: a `sleep 100` left behind by a
//! killed `sh` would keep the output pipe open and pile up, one per sample.

use std::io;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt as _};
use tokio::process::Command;

/// How long one probe may run before it is killed.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// How much of a probe's standard error is kept for the log line (the rest
/// is read and dropped, so a chatty probe does not block on a full pipe).
const STDERR_BYTES_MAX: usize = 4 * 1024;

/// Why a probe gave no usable output.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The program could not be started; `NotFound` means it is not
    /// installed.
    #[error("cannot start it: {0}")]
    Spawn(#[source] io::Error),
    #[error("timed out after {0:?} and was killed")]
    Timeout(Duration),
    #[error("{status}{stderr}")]
    Failed { status: ExitStatus, stderr: String },
    #[error("printed more than {0} bytes")]
    TooMuchOutput(usize),
    #[error("cannot read its output: {0}")]
    Read(#[source] io::Error),
}

/// A `sh -c COMMAND` command, ready for [`run`].
pub fn shell(command: &str) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(command);
    cmd
}

/// Runs `cmd` with no input and returns its standard output when it exits
/// with status 0 within `timeout` having printed at most `stdout_bytes_max`
/// bytes. Output that is not UTF-8 is converted lossily (the parsers then
/// refuse what they do not understand).
pub async fn run(
    mut cmd: Command,
    timeout: Duration,
    stdout_bytes_max: usize,
) -> Result<String, ProbeError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        // If the agent stops while a probe runs, the probe stops too.
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(ProbeError::Spawn)?;
    let mut group = GroupGuard(child.id().and_then(|p| i32::try_from(p).ok()));
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(ProbeError::Read(io::Error::other("no pipes to the probe")));
    };

    let finished = tokio::time::timeout(timeout, async {
        let (out, err) = tokio::join!(read_at_most(stdout, stdout_bytes_max), read_stderr(stderr));
        (out, err, child.wait().await)
    })
    .await;

    match finished {
        Err(_elapsed) => {
            group.kill();
            let _ = child.kill().await;
            Err(ProbeError::Timeout(timeout))
        }
        Ok((out, err, status)) => {
            // Waited for: the pid may now be reused, never signal it again.
            group.disarm();
            let status = status.map_err(ProbeError::Read)?;
            let (stdout, too_much) = out.map_err(ProbeError::Read)?;
            // First: having stopped reading, the probe may have died of
            // SIGPIPE, which is not its fault.
            if too_much {
                return Err(ProbeError::TooMuchOutput(stdout_bytes_max));
            }
            if !status.success() {
                let stderr = String::from_utf8_lossy(&err);
                let first_line = stderr.lines().map(str::trim).find(|l| !l.is_empty());
                return Err(ProbeError::Failed {
                    status,
                    stderr: first_line.map(|l| format!(": {l}")).unwrap_or_default(),
                });
            }
            Ok(String::from_utf8_lossy(&stdout).into_owned())
        }
    }
}

/// Kills a probe's process group unless disarmed: on a time-out, and when
/// the agent stops (the run future is dropped) while a probe runs.
/// `kill_on_drop` alone would kill only the shell and leave its children.
/// Armed only while the probe has not been waited for, so its pid is still
/// its own (a zombie at worst) and names its process group.
struct GroupGuard(Option<i32>);

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            // ESRCH when everything has exited already: nothing to do.
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
    }

    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reads at most `max` bytes, then stops reading (a probe that goes on
/// writing gets `SIGPIPE`). The flag says whether there was more.
async fn read_at_most(r: impl AsyncRead + Unpin, max: usize) -> io::Result<(Vec<u8>, bool)> {
    let mut buf = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    r.take(limit).read_to_end(&mut buf).await?;
    let too_much = buf.len() > max;
    buf.truncate(max);
    Ok((buf, too_much))
}

/// Keeps the start of standard error and drains the rest.
async fn read_stderr(r: impl AsyncRead + Unpin) -> Vec<u8> {
    let mut r = r;
    let mut buf = Vec::new();
    let limit = u64::try_from(STDERR_BYTES_MAX).unwrap_or(u64::MAX);
    let _ = (&mut r).take(limit).read_to_end(&mut buf).await;
    let _ = tokio::io::copy(&mut r, &mut tokio::io::sink()).await;
    buf
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    const MAX: usize = 1024;

    #[tokio::test]
    async fn output_of_a_successful_command() {
        let out = run(shell("echo 42; echo warn >&2"), PROBE_TIMEOUT, MAX)
            .await
            .unwrap();
        assert_eq!(out, "42\n");
    }

    #[tokio::test]
    async fn a_failing_command_says_its_status_and_first_stderr_line() {
        let err = run(
            shell("echo first >&2; echo second >&2; exit 3"),
            PROBE_TIMEOUT,
            MAX,
        )
        .await
        .unwrap_err();
        assert_eq!(err.to_string(), "exit status: 3: first");
    }

    #[tokio::test]
    async fn a_missing_program_is_a_spawn_error() {
        let err = run(Command::new("/nonexistent/loginctl"), PROBE_TIMEOUT, MAX)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ProbeError::Spawn(e) if e.kind() == io::ErrorKind::NotFound),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn too_much_output_is_refused() {
        let err = run(shell("yes 1234567890 | head -c 5000"), PROBE_TIMEOUT, MAX)
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "printed more than 1024 bytes");
    }

    #[tokio::test]
    async fn a_slow_command_and_its_children_are_killed_on_time() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("child.pid");
        // The background child keeps stdout open: only killing the whole
        // process group ends the read.
        let command = format!("sleep 30 & echo $! > {}; wait", marker.display());
        let started = Instant::now();
        let err = run(shell(&command), Duration::from_millis(500), MAX)
            .await
            .unwrap_err();
        assert!(matches!(err, ProbeError::Timeout(_)), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(err.to_string(), "timed out after 500ms and was killed");

        let child: i32 = std::fs::read_to_string(&marker)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // The orphaned `sleep` is reaped by init; wait until its /proc entry
        // is gone or shows a zombie.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat"));
            match stat {
                Err(_) => break,
                Ok(s)
                    if s.rsplit_once(')')
                        .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')) =>
                {
                    break;
                }
                Ok(s) => {
                    assert!(Instant::now() < deadline, "child {child} still alive: {s}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
}
