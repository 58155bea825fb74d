//! A real Active Directory domain controller for tests and benchmarks
//! ([`domain::Domain`]), and the few helpers it waits and writes files
//! with, which the end-to-end tests of the `deskbroker` package share:
//! [`PATIENCE`], [`eventually_blocking`] (polling with a deadline, never
//! fixed sleeps), [`write_secret`], [`free_port`] and [`require`].
//!
//! Not shipped: the `deskbroker` package's `it` tests and
//! `deskbroker-devbench directory` use it.

pub mod domain;
mod forward;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long to wait for anything a working setup does in a second or two
/// (a broker answering, a session reaching a state, a host's TLS
/// handshake): generous, so that a slow machine does not fail a test; a
/// test that passes never waits it out.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// How often polling with a deadline tries again.
pub const POLL: Duration = Duration::from_millis(50);

/// What a check of [`eventually_blocking`] answers: whether it holds yet.
/// A `bool` holds when true; an `Option` when `Some` (the value found); a
/// `Result` when `Ok` (and an `Err` says what was seen instead, for the
/// message of a test that waited in vain).
pub trait Holds {
    fn holds(&self) -> bool;
}

impl Holds for bool {
    fn holds(&self) -> bool {
        *self
    }
}

impl<T> Holds for Option<T> {
    fn holds(&self) -> bool {
        self.is_some()
    }
}

impl<T, E> Holds for Result<T, E> {
    fn holds(&self) -> bool {
        self.is_ok()
    }
}

/// Runs `check` every [`POLL`] until what it answers holds or `timeout`
/// passes, blocking the thread between tries; answers its last answer
/// (`true`, `Some`, `Ok` when it held).
pub fn eventually_blocking<T: Holds>(timeout: Duration, mut check: impl FnMut() -> T) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        let answer = check();
        if answer.holds() || Instant::now() >= deadline {
            return answer;
        }
        std::thread::sleep(POLL);
    }
}

/// Writes a secret file (a token, a password) readable by its owner only
/// (0600): the broker refuses one that others may read.
pub fn write_secret(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write the secret file");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod 600");
}

/// A free loopback port (released for the program that will bind it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The path of `program`, looked for on `PATH` and in the sbin
/// directories; panics, naming the Debian `package` to install, if it is
/// not installed.
pub fn require(program: &str, package: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from));
    for dir in dirs {
        let candidate = dir.join(program);
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "`{program}` (Debian package {package}) is not installed: run \
         scripts/install-test-deps.sh"
    );
}
