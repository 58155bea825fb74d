//! Which token a command sends to a broker: the CLI's, `bench storm`'s
//! with `--broker`, and the development benchmarks' (crates/devbench),
//! all found the same way: the flag or `DESKBROKER_TOKEN`, else the admin
//! token file a local broker wrote in its data directory.

use std::io;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// Where `deskbroker serve` keeps its data, and so its generated
/// `admin.token`, when `DESKBROKER_DATA_DIR` does not say otherwise.
const DEFAULT_DATA_DIR: &str = "./deskbroker-data";

/// Where the CLI's token came from, so that an `Unauthorized` answer can say
/// which token the broker refused and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenSource {
    /// `--token`, or `DESKBROKER_TOKEN` (clap reads both; the variable is
    /// named when it holds the token that was sent).
    Given(&'static str),
    /// The admin token file of a local broker.
    File(PathBuf),
    /// Nothing given and no file: the file that was looked for.
    Missing(PathBuf),
}

/// The token every command sends to a broker (the CLI's, and `bench`'s
/// with `--broker`): `given` (the flag or `DESKBROKER_TOKEN`), else the
/// admin token file of `DESKBROKER_DATA_DIR` (default `./deskbroker-data`).
pub fn admin_token(given: Option<&str>) -> anyhow::Result<Option<String>> {
    let env_token = std::env::var("DESKBROKER_TOKEN").ok();
    Ok(resolve_token(given, env_token.as_deref(), &data_dir())?.0)
}

/// The data directory of a local broker: `DESKBROKER_DATA_DIR`, else
/// `./deskbroker-data`.
pub fn data_dir() -> PathBuf {
    std::env::var_os("DESKBROKER_DATA_DIR")
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_DATA_DIR), PathBuf::from)
}

/// The token to send, and where it came from: the flag or `DESKBROKER_TOKEN`
/// (clap reads both into `given`; `env_token` is the variable's value, to
/// name it when it is the one used), else the admin token file of a local
/// broker when there is one, else none (the broker then answers
/// `Unauthorized` and the error says how to give one).
pub fn resolve_token(
    given: Option<&str>,
    env_token: Option<&str>,
    data_dir: &Path,
) -> anyhow::Result<(Option<String>, TokenSource)> {
    if let Some(token) = given.map(str::trim).filter(|token| !token.is_empty()) {
        let name = if env_token.map(str::trim) == Some(token) {
            "DESKBROKER_TOKEN"
        } else {
            "--token"
        };
        return Ok((Some(token.to_owned()), TokenSource::Given(name)));
    }
    let path = data_dir.join("admin.token");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let token = text.trim();
            tracing::debug!(path = %path.display(), "using the admin token file");
            if token.is_empty() {
                Ok((None, TokenSource::Missing(path)))
            } else {
                Ok((Some(token.to_owned()), TokenSource::File(path)))
            }
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok((None, TokenSource::Missing(path))),
        Err(err) => Err(err).with_context(|| {
            format!(
                "cannot read the admin token file {} (pass --token or set DESKBROKER_TOKEN)",
                path.display()
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_flag_wins_then_the_data_dir_file_then_none() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("admin.token");
        assert_eq!(
            resolve_token(None, None, dir.path()).expect("no file is fine"),
            (None, TokenSource::Missing(file.clone()))
        );

        std::fs::write(&file, "from-file\n").expect("write token");
        assert_eq!(
            resolve_token(None, None, dir.path()).expect("readable"),
            (
                Some("from-file".to_owned()),
                TokenSource::File(file.clone())
            )
        );
        assert_eq!(
            resolve_token(Some("from-flag"), None, dir.path()).expect("flag"),
            (Some("from-flag".to_owned()), TokenSource::Given("--token"))
        );
        assert_eq!(
            resolve_token(Some("from-env"), Some("from-env"), dir.path()).expect("env"),
            (
                Some("from-env".to_owned()),
                TokenSource::Given("DESKBROKER_TOKEN")
            )
        );
        // The flag wins over the variable, and is named.
        assert_eq!(
            resolve_token(Some("from-flag"), Some("from-env"), dir.path()).expect("flag"),
            (Some("from-flag".to_owned()), TokenSource::Given("--token"))
        );
        // An empty flag or env value does not hide the file.
        assert_eq!(
            resolve_token(Some(" "), Some(" "), dir.path()).expect("readable"),
            (
                Some("from-file".to_owned()),
                TokenSource::File(file.clone())
            )
        );
        // Nor does an empty file hide that there is no token.
        std::fs::write(&file, "\n").expect("write token");
        assert_eq!(
            resolve_token(None, None, dir.path()).expect("readable"),
            (None, TokenSource::Missing(file))
        );
    }
}
