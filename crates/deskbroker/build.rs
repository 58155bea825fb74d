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
    // Only files that exist: cargo runs a build script again at every
    // build while one it watches is missing (`packed-refs` often is).
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for name in watched {
        if let Some(p) = git(&["rev-parse", "--git-path", &name])
            && std::path::Path::new(&p).exists()
        {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
