//! Which token a command sends to a broker: the CLI's, `bench storm`'s
//! with `--broker`, and the development benchmarks' (crates/devbench),
//! all found the same way: the flag or `DESKBROKER_TOKEN`, else the admin
//! token file a local broker wrote in its data directory, else the one of
//! the broker the package installed (its configuration file's
//! `admin_token_file`, or `admin.token` in its `data_dir`).

use std::io;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// Where `deskbroker serve` keeps its data, and so its generated
/// `admin.token`, when `DESKBROKER_DATA_DIR` does not say otherwise.
const DEFAULT_DATA_DIR: &str = "./deskbroker-data";

/// The configuration file `serve` reads when neither `--config` nor
/// `DESKBROKER_CONFIG` names one: the one the package installs.
pub const BROKER_CONFIG: &str = "/etc/deskbroker/deskbroker.toml";

/// Where the CLI's token came from, so that an `Unauthorized` answer can say
/// which token the broker refused and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenSource {
    /// `--token`, or `DESKBROKER_TOKEN` (clap reads both; the variable is
    /// named when it holds the token that was sent).
    Given(&'static str),
    /// The admin token file of a local broker.
    File(PathBuf),
    /// Nothing given and no file: the file that was looked for first.
    Missing(PathBuf),
}

/// The token every command sends to a broker (the CLI's, and `bench`'s
/// with `--broker`): `given` (the flag or `DESKBROKER_TOKEN`), else the
/// first admin token file of [`token_files`] that exists.
pub fn admin_token(given: Option<&str>) -> anyhow::Result<Option<String>> {
    let env_token = std::env::var("DESKBROKER_TOKEN").ok();
    Ok(resolve_token(given, env_token.as_deref(), &token_files())?.0)
}

/// The data directory of a local broker: `DESKBROKER_DATA_DIR`, else
/// `./deskbroker-data`.
pub fn data_dir() -> PathBuf {
    std::env::var_os("DESKBROKER_DATA_DIR")
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_DATA_DIR), PathBuf::from)
}

/// The admin token files a command looks for, in order: `admin.token` in
/// [`data_dir`]; then, unless `DESKBROKER_DATA_DIR` names the data
/// directory, those of the broker the configuration file describes
/// (`DESKBROKER_CONFIG`, else the packaged [`BROKER_CONFIG`]): its
/// `admin_token_file`, else `admin.token` in its `data_dir`. So `sudo
/// deskbroker …` on a machine where the package runs the broker finds that
/// broker's token, and a broker started in the current directory still
/// comes first.
pub fn token_files() -> Vec<PathBuf> {
    let mut files = vec![data_dir().join("admin.token")];
    if std::env::var_os("DESKBROKER_DATA_DIR").is_none_or(|dir| dir.is_empty()) {
        let config = std::env::var_os("DESKBROKER_CONFIG")
            .filter(|p| !p.is_empty())
            .map_or_else(|| PathBuf::from(BROKER_CONFIG), PathBuf::from);
        files.extend(configured_token_file(&config));
    }
    files
}

/// The admin token file of the broker the configuration file `config`
/// describes: its `admin_token_file`, else `admin.token` in its
/// `data_dir`; None when the file cannot be read or names neither (the
/// broker itself says what is wrong with its file).
fn configured_token_file(config: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(config).ok()?;
    let table: toml::Table = text.parse().ok()?;
    let path = |key: &str| {
        table
            .get(key)
            .and_then(toml::Value::as_str)
            .filter(|p| !p.trim().is_empty())
            .map(PathBuf::from)
    };
    path("admin_token_file").or_else(|| path("data_dir").map(|dir| dir.join("admin.token")))
}

/// The token to send, and where it came from: the flag or `DESKBROKER_TOKEN`
/// (clap reads both into `given`; `env_token` is the variable's value, to
/// name it when it is the one used), else the first of `files` that
/// exists, else none (the broker then answers `Unauthorized` and the error
/// says how to give one). A file that exists but cannot be read is an
/// error that names it.
pub fn resolve_token(
    given: Option<&str>,
    env_token: Option<&str>,
    files: &[PathBuf],
) -> anyhow::Result<(Option<String>, TokenSource)> {
    if let Some(token) = given.map(str::trim).filter(|token| !token.is_empty()) {
        let name = if env_token.map(str::trim) == Some(token) {
            "DESKBROKER_TOKEN"
        } else {
            "--token"
        };
        return Ok((Some(token.to_owned()), TokenSource::Given(name)));
    }
    let first = files.first().cloned().unwrap_or_default();
    for path in files {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let token = text.trim();
                tracing::debug!(path = %path.display(), "using the admin token file");
                if token.is_empty() {
                    return Ok((None, TokenSource::Missing(path.clone())));
                }
                return Ok((Some(token.to_owned()), TokenSource::File(path.clone())));
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
            Err(err) if err.kind() == io::ErrorKind::PermissionDenied => {
                return Err(err).with_context(|| {
                    format!(
                        "cannot read the admin token file {}: it is the broker's, readable only \
                         by its user (run this command as root or as that user, or pass \
                         --token or set DESKBROKER_TOKEN)",
                        path.display()
                    )
                });
            }
            Err(err) => {
                return Err(err).with_context(|| {
                    format!(
                        "cannot read the admin token file {} (pass --token or set \
                         DESKBROKER_TOKEN)",
                        path.display()
                    )
                });
            }
        }
    }
    Ok((None, TokenSource::Missing(first)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_flag_wins_then_the_data_dir_file_then_none() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("admin.token");
        let files = [file.clone()];
        assert_eq!(
            resolve_token(None, None, &files).expect("no file is fine"),
            (None, TokenSource::Missing(file.clone()))
        );

        std::fs::write(&file, "from-file\n").expect("write token");
        assert_eq!(
            resolve_token(None, None, &files).expect("readable"),
            (
                Some("from-file".to_owned()),
                TokenSource::File(file.clone())
            )
        );
        assert_eq!(
            resolve_token(Some("from-flag"), None, &files).expect("flag"),
            (Some("from-flag".to_owned()), TokenSource::Given("--token"))
        );
        assert_eq!(
            resolve_token(Some("from-env"), Some("from-env"), &files).expect("env"),
            (
                Some("from-env".to_owned()),
                TokenSource::Given("DESKBROKER_TOKEN")
            )
        );
        // The flag wins over the variable, and is named.
        assert_eq!(
            resolve_token(Some("from-flag"), Some("from-env"), &files).expect("flag"),
            (Some("from-flag".to_owned()), TokenSource::Given("--token"))
        );
        // An empty flag or env value does not hide the file.
        assert_eq!(
            resolve_token(Some(" "), Some(" "), &files).expect("readable"),
            (
                Some("from-file".to_owned()),
                TokenSource::File(file.clone())
            )
        );
        // Nor does an empty file hide that there is no token.
        std::fs::write(&file, "\n").expect("write token");
        assert_eq!(
            resolve_token(None, None, &files).expect("readable"),
            (None, TokenSource::Missing(file))
        );
    }

    #[test]
    fn the_packaged_brokers_token_is_found_after_the_local_one() {
        let dir = tempfile::tempdir().expect("temp dir");
        let local = dir.path().join("local/admin.token");
        let packaged_dir = dir.path().join("var-lib-deskbroker");
        std::fs::create_dir_all(&packaged_dir).expect("dir");
        let config = dir.path().join("deskbroker.toml");
        std::fs::write(
            &config,
            format!(
                "listen = \"127.0.0.1:8080\"\ndata_dir = {:?}\n",
                packaged_dir
            ),
        )
        .expect("config");
        let packaged = packaged_dir.join("admin.token");
        std::fs::write(&packaged, "packaged\n").expect("token");
        let files: Vec<PathBuf> = std::iter::once(local.clone())
            .chain(configured_token_file(&config))
            .collect();
        assert_eq!(
            resolve_token(None, None, &files).expect("found"),
            (Some("packaged".to_owned()), TokenSource::File(packaged))
        );
        // A broker's own data directory here comes first.
        std::fs::create_dir_all(local.parent().expect("parent")).expect("dir");
        std::fs::write(&local, "local\n").expect("token");
        assert_eq!(
            resolve_token(None, None, &files).expect("found"),
            (Some("local".to_owned()), TokenSource::File(local))
        );
        // The file's own admin_token_file wins over its data_dir.
        let chosen = dir.path().join("chosen.token");
        std::fs::write(
            &config,
            format!(
                "data_dir = {:?}\nadmin_token_file = {:?}\n",
                packaged_dir, chosen
            ),
        )
        .expect("config");
        assert_eq!(configured_token_file(&config), Some(chosen));
        // No file, or one that names neither: nothing more to look for.
        assert_eq!(configured_token_file(&dir.path().join("none.toml")), None);
        std::fs::write(&config, "listen = \"127.0.0.1:8080\"\n").expect("config");
        assert_eq!(configured_token_file(&config), None);
    }
}
