//! End-to-end tests of the real `deskbroker-devbench` binary, on tiny
//! loads, against the real `deskbroker` binary (built here, as
//! `deskbroker-devbench` finds it beside itself in `target/`).

mod directory;
mod http_script;
mod negotiate;
mod rdp;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

/// The `deskbroker-devbench` binary cargo built for these tests.
pub fn devbench() -> &'static str {
    env!("CARGO_BIN_EXE_deskbroker-devbench")
}

/// The `deskbroker` binary the benchmarks start. A test binary sees only
/// its own package's binaries, so this one is built here with the cargo
/// that builds the tests, into the same target directory and profile
/// (cargo makes it only if it is out of date), and its path is taken from
/// cargo's own report of what it built: never a stale binary.
pub fn deskbroker() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let profile_dir = Path::new(devbench()).parent().expect("profile directory");
        let target_dir = profile_dir.parent().expect("target directory");
        let mut cargo = Command::new(env!("CARGO"));
        // What cargo sets for this test's own package is not the build's:
        // inherited, it would change the fingerprints of build scripts
        // that watch it (ring's watches CARGO_MANIFEST_DIR) and rebuild
        // half the dependencies at every run, and again at the next
        // ordinary build.
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if key.starts_with("CARGO_PKG_")
                || key.starts_with("CARGO_BIN_EXE_")
                || matches!(
                    &*key,
                    "CARGO_MANIFEST_DIR"
                        | "CARGO_MANIFEST_PATH"
                        | "CARGO_CRATE_NAME"
                        | "CARGO_PRIMARY_PACKAGE"
                        | "CARGO_TARGET_TMPDIR"
                        | "OUT_DIR"
                )
            {
                cargo.env_remove(&*key);
            }
        }
        cargo
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["build", "--quiet", "--message-format=json"])
            .args(["-p", "deskbroker", "--bin", "deskbroker", "--target-dir"])
            .arg(target_dir);
        match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => {}
            Some(profile) => {
                cargo.args(["--profile", profile]);
            }
        }
        let out = cargo.output().expect("run cargo build -p deskbroker");
        assert!(
            out.status.success(),
            "cargo build -p deskbroker failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "deskbroker")
            .find_map(|m| m["executable"].as_str().map(PathBuf::from))
            .expect("cargo reports the deskbroker binary it built")
    })
}

/// Runs `deskbroker-devbench ARGS` against [`deskbroker`], with
/// `DESKBROKER_DATA_DIR` set to `data_dir` and no `DESKBROKER_TOKEN`;
/// answers (success, stdout, stderr).
pub fn run(data_dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(devbench())
        .args(args)
        .env("DESKBROKER_BIN", deskbroker())
        .env("DESKBROKER_DATA_DIR", data_dir)
        .env_remove("DESKBROKER_TOKEN")
        .env_remove("DESKBROKER_URL")
        .output()
        .expect("run deskbroker-devbench");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
