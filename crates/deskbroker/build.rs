//! Gives the binary the commit it is built from, for `deskbroker
//! --version`: `git rev-parse --short HEAD`, or "unknown" when this is not
//! a git checkout (a source tarball) or git is missing; never a build
//! failure.

use std::process::Command;

fn main() {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git").args(args).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=DESKBROKER_GIT_COMMIT={commit}");
    // Built again when HEAD moves: HEAD itself (a checkout) and the
    // branch it names (a commit); in a worktree these live in git's
    // directories, which git tells.
    for path in ["HEAD", "packed-refs"] {
        if let Some(p) = git(&["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(p) = git(&["rev-parse", "--git-path", &branch])
    {
        println!("cargo:rerun-if-changed={p}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
