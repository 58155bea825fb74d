//! A throwaway PostgreSQL cluster of the nemesis's own: it stops and
//! restarts the server, which no shared server may suffer. `initdb` in a
//! temporary directory, trust authentication, listening on 127.0.0.1 only
//! on a free port, its socket in its own directory; run as the `postgres`
//! user (or `nobody`) when the test runs as root, since PostgreSQL refuses
//! root (as `scripts/test` does). Dropping it stops the server
//! (`pg_ctl stop -m immediate`, then SIGKILL of its own postmaster pid if
//! that failed) and deletes the directory, also when the test panics.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How long `pg_ctl` may wait for the server to start or stop: crash
/// recovery after an immediate stop takes well under a second here.
const PG_CTL_WAIT_SECONDS: &str = "60";

pub struct Cluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    /// Who runs the server (None: this process's own user).
    user: Option<String>,
    pub port: u16,
}

/// The newest server's `bin` directory: Debian keeps initdb and pg_ctl
/// under /usr/lib/postgresql/VERSION/bin, elsewhere they are on PATH.
fn find_bin() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            Some((version, e.path().join("bin")))
        })
        .filter(|(_, bin)| bin.join("initdb").is_file() && bin.join("pg_ctl").is_file())
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file())
    })
}

fn running_as_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// `id -u NAME` and `id -g NAME`, when that user exists.
fn ids_of(user: &str) -> Option<(u32, u32)> {
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").args([flag, user]).output().ok()?;
        out.status.success().then_some(())?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    Some((id("-u")?, id("-g")?))
}

impl Cluster {
    /// Makes and starts a cluster; panics saying what is missing when no
    /// PostgreSQL server is installed.
    pub fn start() -> Cluster {
        let bin = find_bin().unwrap_or_else(|| {
            panic!(
                "the nemesis test needs a PostgreSQL server of its own (it restarts it), and \
                 no initdb/pg_ctl was found in /usr/lib/postgresql/*/bin or on PATH: install \
                 Debian's `postgresql` package (scripts/install-test-deps.sh does)"
            )
        });
        let dir = tempfile::Builder::new()
            .prefix("deskbroker-nemesis-pg.")
            .tempdir()
            .expect("a temporary directory for the cluster");
        let user = running_as_root().then(|| {
            let name = if ids_of("postgres").is_some() {
                "postgres"
            } else {
                "nobody"
            };
            let (uid, gid) = ids_of(name).expect("the cluster's user");
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .expect("give the cluster's directory to its user");
            name.to_string()
        });
        let mut cluster = Cluster {
            bin,
            dir,
            user,
            port: 0,
        };
        let data = cluster.data();
        cluster
            .run(
                "initdb",
                &[
                    "-D",
                    data.to_str().expect("utf-8 path"),
                    "-U",
                    "postgres",
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--no-locale",
                    "--no-sync",
                ],
            )
            .unwrap_or_else(|e| panic!("initdb failed: {e}"));
        let mut last = String::new();
        for _ in 0..10 {
            cluster.port = crate::free_port();
            match cluster.start_server() {
                Ok(()) => return cluster,
                // The port was taken meanwhile: another one.
                Err(e) => last = e,
            }
        }
        panic!("the nemesis's PostgreSQL did not start: {last}");
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("log")
    }

    /// `postgres://postgres@127.0.0.1:PORT/db`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Runs one of the server's programs as the cluster's user.
    fn run(&self, program: &str, args: &[&str]) -> Result<(), String> {
        let path = self.bin.join(program);
        let mut command = match &self.user {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&path);
                c
            }
            None => Command::new(&path),
        };
        let out = command
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", path.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{program} {}: {}{}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                tail(&self.log(), 10)
            ))
        }
    }

    /// `pg_ctl start -w` on this cluster's port.
    pub fn start_server(&self) -> Result<(), String> {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c max_connections=200 \
             -c shared_buffers=32MB",
            self.port,
            self.dir.path().display()
        );
        let data = self.data();
        let log = self.log();
        self.run(
            "pg_ctl",
            &[
                "-D",
                data.to_str().expect("utf-8 path"),
                "-l",
                log.to_str().expect("utf-8 path"),
                "-w",
                "-t",
                PG_CTL_WAIT_SECONDS,
                "-o",
                &options,
                "start",
            ],
        )
    }

    /// `pg_ctl stop -m MODE -w` (`fast`: every session is ended cleanly;
    /// `immediate`: the server stops as if it crashed, and recovers from
    /// its WAL at the next start).
    pub fn stop_server(&self, mode: &str) -> Result<(), String> {
        let data = self.data();
        self.run(
            "pg_ctl",
            &[
                "-D",
                data.to_str().expect("utf-8 path"),
                "-m",
                mode,
                "-w",
                "-t",
                PG_CTL_WAIT_SECONDS,
                "stop",
            ],
        )
    }

    /// The postmaster's pid, from its pid file, while it runs.
    fn postmaster_pid(&self) -> Option<i32> {
        let text = std::fs::read_to_string(self.data().join("postmaster.pid")).ok()?;
        text.lines()
            .next()?
            .trim()
            .parse()
            .ok()
            .filter(|pid| *pid > 0)
    }

    /// Creates database `name` (run once, at the start).
    pub async fn create_database(&self, name: &str) {
        let (client, conn) = tokio_postgres::connect(&self.url("postgres"), tokio_postgres::NoTls)
            .await
            .expect("connect to the nemesis's PostgreSQL");
        tokio::spawn(conn);
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create the nemesis's database");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.stop_server("immediate").is_err()
            && let Some(pid) = self.postmaster_pid()
        {
            // Our own postmaster, by its own pid: its children exit with it.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// The last `n` lines of the file at `path` (empty when unreadable).
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
