//! The configuration file of `serve` and `gateway`: TOML whose keys are
//! the command's flags, named with underscores (`data_dir = "/var/lib/
//! deskbroker"`), read with the agent's loader
//! ([`agent::config::read_toml_file`]). A file is read only when it is
//! named, by `--config FILE` or `DESKBROKER_CONFIG`: never one the command
//! was not told about, such as the file the package installs in
//! `/etc/deskbroker`. A program's behaviour must not depend on a file
//! nobody named: a broker started by hand or by a test on a machine where
//! the package is installed would otherwise take the installed broker's
//! ports and data directory. The packaged systemd units name their files
//! (`--config /etc/deskbroker/deskbroker.toml` for `serve`,
//! `/etc/deskbroker/gateway.toml` for `gateway`).
//!
//! Precedence is flags, then `DESKBROKER_*` variables, then the file, then
//! defaults. The file's settings become flags appended to the command line
//! for those not given on it nor in the environment, so that clap parses
//! and validates every source alike; each value is first checked with its
//! flag's own parser, so that a bad one is reported with the file and key.
//!
//! Unknown keys are refused, naming the key and the file (a typo must not
//! pass silently). Secrets never sit in the file, which is often readable
//! by more people than a secret should be: the file names a file holding
//! each (`admin_token_file`, `token_file`, `database_url_file` for a URL
//! with a password, `oidc_client_secret_file`).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use agent::ConfigError;

/// The variable naming the config file.
pub const CONFIG_ENV: &str = "DESKBROKER_CONFIG";
/// The commands that read a config file.
const COMMANDS: [&str; 2] = ["serve", "gateway"];

/// Settings that are secrets, and the key that names a file holding each.
const INLINE_SECRETS: [(&str, &str); 2] =
    [("admin_token", "admin_token_file"), ("token", "token_file")];

/// A command line with the config file's settings appended as flags.
pub struct WithFile {
    pub argv: Vec<OsString>,
    /// The file read, and the flags (long names) that came from it.
    pub from_file: Option<(PathBuf, Vec<String>)>,
}

impl WithFile {
    /// Says which file and key a clap error is about, when the flag it
    /// names came from the config file; None otherwise.
    pub fn explain(&self, e: &clap::Error) -> Option<String> {
        let (path, longs) = self.from_file.as_ref()?;
        let Some(clap::error::ContextValue::String(arg)) =
            e.get(clap::error::ContextKind::InvalidArg)
        else {
            return None;
        };
        let long = arg.strip_prefix("--")?.split([' ', '=']).next()?;
        longs.iter().any(|l| l == long).then(|| {
            let said = e.to_string();
            let said = said.lines().next().unwrap_or_default();
            format!(
                "config file {}: `{}`: {}",
                path.display(),
                long.replace('-', "_"),
                said.strip_prefix("error: ").unwrap_or(said)
            )
        })
    }
}

/// `argv` with the settings of the config file (if any) appended as flags,
/// for `serve` and `gateway`; any other command line is answered as it is.
pub fn apply(argv: Vec<OsString>, root: &clap::Command) -> Result<WithFile, ConfigError> {
    let unchanged = |argv| {
        Ok(WithFile {
            argv,
            from_file: None,
        })
    };
    let Some(name) = argv.get(1).and_then(|a| a.to_str()) else {
        return unchanged(argv);
    };
    if !COMMANDS.contains(&name) {
        return unchanged(argv);
    }
    let name = name.to_string();
    let given: Vec<OsString> = argv[2..]
        .iter()
        .take_while(|a| *a != "--")
        .cloned()
        .collect();
    let given: Vec<&OsStr> = given.iter().map(OsString::as_os_str).collect();
    if given
        .iter()
        .any(|a| ["-h", "--help", "-V", "--version"].contains(&a.to_str().unwrap_or_default()))
    {
        return unchanged(argv);
    }
    let Some(path) = config_path(&given, std::env::var_os(CONFIG_ENV)) else {
        return unchanged(argv);
    };
    let table: toml::Table = agent::config::read_toml_file(&path)?;
    let mut root = root.clone();
    root.build();
    let command = root
        .find_subcommand(&name)
        .expect("serve and gateway are subcommands");
    let mut flags = argv.clone();
    let mut longs = Vec::new();
    for (key, value) in settings(&table) {
        let more = flag_of(command, &root, &path, &key, value, &given)?;
        if !more.is_empty() {
            longs.push(key.replace('_', "-"));
        }
        flags.extend(more);
    }
    Ok(WithFile {
        argv: flags,
        from_file: Some((path, longs)),
    })
}

/// The file's settings as flag names and values: a table's keys are
/// named after it (`[directory]` `url = …` is `directory_url`), so that
/// the settings of one feature sit together in the file.
fn settings(table: &toml::Table) -> Vec<(String, &toml::Value)> {
    let mut out = Vec::new();
    for (key, value) in table {
        match value {
            toml::Value::Table(inner) => {
                out.extend(inner.iter().map(|(k, v)| (format!("{key}_{k}"), v)))
            }
            _ => out.push((key.clone(), value)),
        }
    }
    out
}

/// `--config FILE` or `--config=FILE`, else `DESKBROKER_CONFIG` (`env`);
/// None when neither names a file: no other file is ever read.
fn config_path(given: &[&OsStr], env: Option<OsString>) -> Option<PathBuf> {
    let mut args = given.iter();
    while let Some(a) = args.next() {
        if *a == "--config" {
            return args.next().map(PathBuf::from);
        }
        if let Some(p) = a.to_str().and_then(|a| a.strip_prefix("--config=")) {
            return Some(PathBuf::from(p));
        }
    }
    env.filter(|p| !p.is_empty()).map(PathBuf::from)
}

/// The flag(s) standing for `key = value` of the file `path`: none when
/// the flag is given on the command line or its variable is set.
fn flag_of(
    command: &clap::Command,
    root: &clap::Command,
    path: &Path,
    key: &str,
    value: &toml::Value,
    given: &[&OsStr],
) -> Result<Vec<OsString>, ConfigError> {
    let refuse = |message: String| ConfigError::File {
        path: path.to_path_buf(),
        message,
    };
    if let Some((_, file_key)) = INLINE_SECRETS.iter().find(|(k, _)| *k == key) {
        return Err(refuse(format!(
            "`{key}` is a secret, never kept in the config file: put it in a file only the \
             broker's user may read (chmod 600) and set `{file_key}` to that file"
        )));
    }
    if key == "database_url" && value.as_str().is_some_and(url_has_password) {
        return Err(refuse(
            "`database_url` holds a password, a secret never kept in the config file: put \
             the URL in a file only the broker's user may read (chmod 600) and set \
             `database_url_file` to that file"
                .into(),
        ));
    }
    let long = key.replace('_', "-");
    let arg = (key != "config" && !key.contains('-'))
        .then(|| {
            command
                .get_arguments()
                .chain(root.get_arguments().filter(|a| a.is_global_set()))
                .find(|a| a.get_long() == Some(long.as_str()) && !a.is_hide_set())
        })
        .flatten()
        .filter(|a| {
            !matches!(
                a.get_action(),
                clap::ArgAction::Help | clap::ArgAction::Version
            )
        });
    let Some(arg) = arg else {
        return Err(refuse(format!(
            "unknown key `{key}` (the keys are the flags of `{}`, named with underscores)",
            command.get_name()
        )));
    };
    let flag = format!("--{long}");
    // Given on the command line or in the environment, it wins; and so
    // does a setting there that excludes this one (DESKBROKER_ADMIN_TOKEN
    // over the file's admin_token_file).
    if given_elsewhere(arg, given)
        || command
            .get_arg_conflicts_with(arg)
            .iter()
            .any(|other| given_elsewhere(other, given))
    {
        return Ok(Vec::new());
    }
    let takes_no_value = matches!(
        arg.get_action(),
        clap::ArgAction::SetTrue | clap::ArgAction::SetFalse
    );
    // A flag given more than once (`kdc_proxy_realm = ["…", "…"]`): one
    // flag an item.
    if let toml::Value::Array(items) = value
        && matches!(arg.get_action(), clap::ArgAction::Append)
    {
        return items
            .iter()
            .map(|item| match item {
                toml::Value::String(s) => Ok(format!("{flag}={s}").into()),
                _ => Err(refuse(format!("`{key}` must be a list of strings"))),
            })
            .collect();
    }
    let text = match value {
        toml::Value::Boolean(b) if takes_no_value => {
            return Ok(if *b { vec![flag.into()] } else { Vec::new() });
        }
        _ if takes_no_value => {
            return Err(refuse(format!("`{key}` must be true or false")));
        }
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(n) => n.to_string(),
        toml::Value::Float(x) => x.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        _ => {
            return Err(refuse(format!(
                "`{key}` must be a string, a number or true/false (a list only for a \
                 setting that may be given more than once)"
            )));
        }
    };
    Ok(vec![format!("{flag}={text}").into()])
}

/// Whether `arg` is given on the command line or by its variable.
fn given_elsewhere(arg: &clap::Arg, given: &[&OsStr]) -> bool {
    let on_command_line = arg.get_long().is_some_and(|long| {
        let flag = format!("--{long}");
        given.iter().any(|a| {
            a.to_str()
                .is_some_and(|a| a == flag || a.starts_with(&format!("{flag}=")))
        })
    });
    let in_environment = arg
        .get_env()
        .and_then(std::env::var_os)
        .is_some_and(|v| !v.is_empty());
    on_command_line || in_environment
}

/// Whether a `postgres://user:password@…` URL holds a password.
fn url_has_password(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    authority
        .rsplit_once('@')
        .is_some_and(|(user_info, _)| user_info.contains(':'))
        || url.contains("password=")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_in_database_urls_are_seen() {
        for (url, has) in [
            ("postgres://u:p@h/db", true),
            ("postgres://u@h/db", false),
            ("postgres://h:5432/db", false),
            ("postgresql://u@h/db?password=x", true),
            ("postgres://u:p%40x@h:5432/db?sslmode=require", true),
        ] {
            assert_eq!(url_has_password(url), has, "{url}");
        }
    }

    /// Nothing is read unless named: not the packaged file, even where
    /// the package is installed; `--config` wins over the variable.
    #[test]
    fn a_tables_keys_are_named_after_it() {
        let table: toml::Table = toml::from_str(
            "listen = \"127.0.0.1:1\"\n[directory]\nurl = [\"ldaps://a\", \"ldaps://b\"]\nbase_dn = \"DC=x\"\n",
        )
        .unwrap();
        let mut keys: Vec<String> = settings(&table).into_iter().map(|(k, _)| k).collect();
        keys.sort();
        assert_eq!(keys, ["directory_base_dn", "directory_url", "listen"]);
    }

    #[test]
    fn a_file_is_read_only_when_named() {
        let os = |s: &str| OsString::from(s);
        let none: [&OsStr; 0] = [];
        assert_eq!(config_path(&none, None), None);
        assert_eq!(config_path(&none, Some(os(""))), None);
        let listen = [OsStr::new("--listen"), OsStr::new("127.0.0.1:0")];
        assert_eq!(config_path(&listen, None), None);
        assert_eq!(
            config_path(&none, Some(os("/x/env.toml"))),
            Some(PathBuf::from("/x/env.toml"))
        );
        let named = [OsStr::new("--config"), OsStr::new("/x/flag.toml")];
        assert_eq!(
            config_path(&named, Some(os("/x/env.toml"))),
            Some(PathBuf::from("/x/flag.toml"))
        );
        let named = [OsStr::new("--config=/x/eq.toml")];
        assert_eq!(config_path(&named, None), Some(PathBuf::from("/x/eq.toml")));
    }

    /// With nothing named, the command line is answered as it is, whatever
    /// files exist on the machine.
    #[test]
    fn nothing_named_leaves_the_command_line_alone() {
        use clap::CommandFactory as _;
        if std::env::var_os(CONFIG_ENV).is_some() {
            return;
        }
        let argv: Vec<OsString> = ["deskbroker", "serve", "--listen", "127.0.0.1:0"]
            .map(OsString::from)
            .to_vec();
        let with = apply(argv.clone(), &crate::Args::command()).unwrap();
        assert_eq!(with.argv, argv);
        assert!(with.from_file.is_none());
    }

    /// A setting that may be given more than once takes a list in the
    /// file, one flag an item; a list anywhere else, or of anything but
    /// strings, is refused naming the key.
    #[test]
    fn a_list_gives_a_repeatable_flag_once_an_item() {
        use clap::CommandFactory as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.toml");
        let argv = |command: &str| -> Vec<OsString> {
            ["deskbroker", command, "--config", path.to_str().unwrap()]
                .map(OsString::from)
                .to_vec()
        };
        std::fs::write(
            &path,
            "kdc_proxy_realm = [\"A.TEST=dc1:88\", \"B.TEST=dc2,dc3\"]\n",
        )
        .unwrap();
        for command in ["serve", "gateway"] {
            let with = apply(argv(command), &crate::Args::command()).unwrap();
            let flags: Vec<_> = with.argv[4..].to_vec();
            assert_eq!(
                flags,
                [
                    "--kdc-proxy-realm=A.TEST=dc1:88",
                    "--kdc-proxy-realm=B.TEST=dc2,dc3"
                ]
                .map(OsString::from),
                "{command}"
            );
        }
        for (text, says) in [
            ("kdc_proxy_realm = [1]\n", "must be a list of strings"),
            (
                "rdp_listen = [\"127.0.0.1:0\"]\n",
                "a list only for a setting",
            ),
        ] {
            std::fs::write(&path, text).unwrap();
            let e = apply(argv("serve"), &crate::Args::command())
                .err()
                .expect("refused")
                .to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    /// Each packaged unit names the file the package installs for its
    /// command (nothing else would make the unit read it), each command
    /// its own (a gateway never reads the broker's).
    #[test]
    fn each_packaged_unit_names_the_file_the_package_installs_for_it() {
        let manifest = include_str!("../Cargo.toml");
        for (unit, command, example) in [
            (
                include_str!("../../../deploy/deskbroker.service"),
                "serve",
                "deskbroker.toml",
            ),
            (
                include_str!("../../../deploy/deskbroker-gateway.service"),
                "gateway",
                "gateway.toml",
            ),
        ] {
            let path = format!("/etc/deskbroker/{example}");
            let asset = format!("[\"../../deploy/{example}\", \"{}\"", &path[1..]);
            assert!(manifest.contains(&asset), "{command}: no asset {asset}");
            let exec = unit
                .lines()
                .find(|l| l.starts_with("ExecStart="))
                .unwrap_or_default();
            assert!(
                exec.contains(&format!("deskbroker {command} --config {path}")),
                "{command}: the unit does not name {path}: {exec}"
            );
        }
    }
}
