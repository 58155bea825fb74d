//! `deskbroker generate`: shell completions and manual pages written from
//! the command line's own definition, so that they always say what this
//! binary accepts. The Debian package (`scripts/package`) runs it on the
//! binary it ships. It is of no use to anyone else, so it is no subcommand
//! of the CLI: `main` hands it its own parser before the CLI's, which keeps
//! it out of `--help` and out of the completions and pages it writes.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use clap_complete::Shell;

/// The first argument that selects this command instead of the CLI.
pub const COMMAND: &str = "generate";

/// The shells completions are written for, and what each file is named
/// (`clap_complete`'s names: `deskbroker.bash`, `_deskbroker`,
/// `deskbroker.fish`).
const SHELLS: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

/// Writes shell completions or manual pages, for packages.
#[derive(Parser, Debug)]
#[command(name = "deskbroker-generate", bin_name = "deskbroker generate")]
struct GenerateArgs {
    #[command(subcommand)]
    what: What,
}

#[derive(clap::Subcommand, Debug)]
enum What {
    /// Shell completions for bash, zsh and fish: DIR/deskbroker.bash,
    /// DIR/_deskbroker and DIR/deskbroker.fish.
    Completions {
        /// The directory to write to (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
    /// Manual pages (section 1): DIR/deskbroker.1, and one page a
    /// subcommand (deskbroker-serve.1, deskbroker-hostpool-create.1, …).
    Man {
        /// The directory to write to (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

/// Runs `deskbroker generate …` (the process's arguments) for `command`,
/// the binary's whole command line (`Args::command()`).
pub fn main(command: clap::Command) -> ExitCode {
    let args = GenerateArgs::parse_from(std::env::args_os().skip(1));
    match run(args, command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Writes what `args` asks for; prints the path of each file written.
fn run(args: GenerateArgs, command: clap::Command) -> anyhow::Result<()> {
    match args.what {
        What::Completions { out } => {
            for path in completions(command, &out)? {
                println!("{}", path.display());
            }
        }
        What::Man { out } => {
            for path in man_pages(command, &out)? {
                println!("{}", path.display());
            }
        }
    }
    Ok(())
}

/// Writes the completion script of every shell of [`SHELLS`] into `out`;
/// answers the files written.
fn completions(mut command: clap::Command, out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    create_dir(out)?;
    let name = command.get_name().to_string();
    SHELLS
        .iter()
        .map(|&shell| {
            clap_complete::generate_to(shell, &mut command, &name, out).with_context(|| {
                format!(
                    "cannot write the {shell} completions into {}",
                    out.display()
                )
            })
        })
        .collect()
}

/// Writes a manual page for the command and each of its subcommands that
/// `--help` shows (hidden ones and `help` get none) into `out`; answers the
/// files written, sorted.
fn man_pages(command: clap::Command, out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    create_dir(out)?;
    let mut command = command.disable_help_subcommand(true);
    command.build();
    let mut written = Vec::new();
    let mut todo = vec![command];
    while let Some(command) = todo.pop() {
        todo.extend(
            command
                .get_subcommands()
                .filter(|c| !c.is_hide_set())
                .cloned(),
        );
        let page = clap_mangen::Man::new(command)
            .source(format!("deskbroker {}", env!("CARGO_PKG_VERSION")))
            .manual("deskbroker manual");
        let path = page
            .generate_to(out)
            .with_context(|| format!("cannot write a manual page into {}", out.display()))?;
        written.push(path);
    }
    written.sort();
    Ok(written)
}

fn create_dir(out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The subcommands `deskbroker --help` lists, by name.
    fn visible_subcommands() -> Vec<String> {
        crate::Args::command()
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
            .map(|c| c.get_name().to_string())
            .collect()
    }

    #[test]
    fn completions_cover_every_visible_subcommand() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("new/completions");
        let written = completions(crate::Args::command(), &out).unwrap();
        let names: Vec<_> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["deskbroker.bash", "_deskbroker", "deskbroker.fish"]);
        for path in &written {
            let script = read(path);
            for name in visible_subcommands() {
                assert!(script.contains(&name), "{}: no {name}", path.display());
            }
            // Nested subcommands and their flags are completed too.
            for word in ["registration-token", "host-pool", "allow-new-session"] {
                assert!(script.contains(word), "{}: no {word}", path.display());
            }
        }
    }

    #[test]
    fn man_pages_cover_every_visible_subcommand() {
        let dir = tempfile::tempdir().unwrap();
        let written = man_pages(crate::Args::command(), dir.path()).unwrap();
        let names: Vec<_> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert!(names.contains(&"deskbroker.1".to_string()), "{names:?}");
        for name in visible_subcommands() {
            let page = format!("deskbroker-{name}.1");
            assert!(names.contains(&page), "no {page} in {names:?}");
        }
        assert!(
            names.contains(&"deskbroker-hostpool-create.1".to_string()),
            "{names:?}"
        );
        assert!(!names.iter().any(|n| n.ends_with("-help.1")), "{names:?}");

        let serve = read(&dir.path().join("deskbroker-serve.1"));
        assert!(serve.starts_with(".ie"), "not roff: {serve:.80}");
        let title = format!(
            ".TH deskbroker-serve 1  \"deskbroker {}\"",
            env!("CARGO_PKG_VERSION")
        );
        assert!(serve.contains(&title), "{serve:.300}");
        // Options are documented with the variable that sets them.
        assert!(serve.contains("DESKBROKER_DATA_DIR"), "{serve}");
        let top = read(&dir.path().join("deskbroker.1"));
        assert!(top.contains("deskbroker\\-hostpool(1)"), "{top}");
    }

    #[test]
    fn generate_is_no_subcommand_of_the_cli() {
        let cli = crate::Args::command();
        assert!(cli.find_subcommand("hostpool").is_some());
        assert!(cli.find_subcommand(COMMAND).is_none());
        let help = cli.clone().render_help().to_string();
        assert!(!help.contains(COMMAND), "{help}");
        let line = ["deskbroker", COMMAND, "man", "--out", "d"];
        assert!(crate::Args::try_parse_from(line).is_err());
        // Its own parser, which main hands the arguments after the binary's name.
        let args = GenerateArgs::try_parse_from(&line[1..]).unwrap();
        assert!(matches!(args.what, What::Man { out } if out == Path::new("d")));
        assert!(GenerateArgs::try_parse_from([COMMAND, "man"]).is_err());
        assert!(GenerateArgs::try_parse_from([COMMAND, "nothing", "--out", "d"]).is_err());
    }

    #[test]
    fn an_unwritable_directory_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        let out = file.join("man");
        let err = man_pages(crate::Args::command(), &out).unwrap_err();
        assert!(
            format!("{err:#}").contains(&out.display().to_string()),
            "{err:#}"
        );
    }
}
