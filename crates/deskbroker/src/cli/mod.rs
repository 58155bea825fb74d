//! The az-style command-line client of the broker's HTTP API:
//! `deskbroker hostpool …`, `sessionhost …`, `session …` and `connect`
//! (the README's worked example shows each).
//!
//! This module holds what the command groups share: the global options
//! (`--broker`, `--token`, `--output`), the token (found by the package's
//! library, `deskbroker::token`), and how an answer is printed. Each group
//! lives in its own file with its flags and the request it makes; `client`
//! speaks HTTP and `output` (also in the library) formats.

pub mod app;
pub mod audit;
pub mod client;
pub mod connect;
pub mod credential;
pub mod hostpool;
pub mod scalingplan;
pub mod session;
pub mod sessionhost;
pub mod user;

/// The output formats, shared with `bench` and the development benchmarks
/// (the package's library).
pub use deskbroker::output;

use std::io::{self, Write as _};
use std::path::PathBuf;

use anyhow::Context as _;
use serde_json::{Map, Value};

use client::Client;
use deskbroker::token::{TokenSource, resolve_token, token_files};
use output::{Columns, OutputFormat};

/// The options every CLI command takes. They are `global`, so they may be
/// written before or after the subcommand (`deskbroker hostpool list -o json`
/// and `deskbroker hostpool -o json list` both work). They are not on the
/// top-level command because `serve` and `bench` have options of their own.
#[derive(clap::Args, Clone)]
#[command(next_help_heading = "Global Options")]
pub struct GlobalArgs {
    /// Base URL of the broker's HTTP API.
    #[arg(
        long,
        global = true,
        env = "DESKBROKER_URL",
        default_value = "http://127.0.0.1:8080",
        value_name = "URL"
    )]
    pub broker: String,

    /// Admin token of the broker. Default: the contents of
    /// $DESKBROKER_DATA_DIR/admin.token (./deskbroker-data/admin.token) if it exists.
    #[arg(
        long,
        global = true,
        env = "DESKBROKER_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,

    /// Output format.
    #[arg(
        long,
        short = 'o',
        global = true,
        value_enum,
        default_value_t = OutputFormat::Table
    )]
    pub output: OutputFormat,

    #[command(flatten)]
    pub tls: TlsArgs,
}

/// How a client trusts an `https://` broker, the same flags for the CLI,
/// `gateway` and `bench` (the agent has them in its config): the system's
/// roots by default.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct TlsArgs {
    /// Trust this PEM CA certificate (a private CA) for the broker's
    /// certificate, instead of the system's roots.
    #[arg(
        long = "ca-cert",
        global = true,
        env = "DESKBROKER_CA_CERT",
        value_name = "FILE"
    )]
    pub ca_cert: Option<PathBuf>,
    /// Accept only the broker certificate with this SHA-256 fingerprint
    /// (what `deskbroker serve` prints for a self-signed one).
    #[arg(
        long = "tls-fingerprint",
        global = true,
        env = "DESKBROKER_TLS_FINGERPRINT",
        value_name = "SHA256"
    )]
    pub tls_fingerprint: Option<String>,
}

impl TlsArgs {
    /// The trust these flags say; refuses both at once, a bad fingerprint
    /// or an unreadable CA file.
    pub fn trust(&self) -> anyhow::Result<api::Trust> {
        Ok(api::Trust::from_flags(
            self.ca_cert.as_deref(),
            self.tls_fingerprint.as_deref(),
        )?)
    }
}

/// What a command needs to run: the client, the output format, and where
/// the token came from (for the error when the broker refuses it).
pub struct Context {
    pub client: Client,
    pub output: OutputFormat,
    token_source: TokenSource,
}

impl Context {
    pub fn new(global: &GlobalArgs) -> anyhow::Result<Self> {
        let env_token = std::env::var("DESKBROKER_TOKEN").ok();
        let (token, token_source) = resolve_token(
            global.token.as_deref(),
            env_token.as_deref(),
            &token_files(),
        )?;
        Ok(Context {
            client: Client::with_trust(&global.broker, token, &global.tls.trust()?)?,
            output: global.output,
            token_source,
        })
    }

    /// A command's outcome, with an `Unauthorized` answer explained: which
    /// token was refused (where it came from) and how to give the right one.
    /// The most common case: the broker was restarted with
    /// `DESKBROKER_ADMIN_TOKEN` while the CLI still read an older token.
    pub fn explain(&self, outcome: anyhow::Result<()>) -> anyhow::Result<()> {
        outcome.map_err(|err| {
            let unauthorized = err
                .downcast_ref::<api::ClientError>()
                .is_some_and(|e| e.code() == Some(api::ErrorCode::Unauthorized));
            if unauthorized {
                anyhow::anyhow!("{err:#}; {}", unauthorized_hint(&self.token_source))
            } else {
                err
            }
        })
    }

    /// Prints an answer: its `warnings` to stderr as `warning: …` lines, then
    /// the answer itself to stdout in the chosen format. A `null` answer (a
    /// DELETE's 204) prints nothing, as az prints nothing for a delete.
    pub fn print(&self, answer: &Value, columns: Columns) -> anyhow::Result<()> {
        print_warnings(answer);
        if answer.is_null() {
            return Ok(());
        }
        write_stdout(&output::render(answer, self.output, columns))
    }
}

/// What to do about an `Unauthorized` answer, given where the token came
/// from.
fn unauthorized_hint(source: &TokenSource) -> String {
    match source {
        TokenSource::Given(name) => format!(
            "the token came from {name} and is neither this broker's admin token nor a \
             credential it knows (revoked or expired?): pass the admin token the broker was \
             started with (its DESKBROKER_ADMIN_TOKEN, or the admin.token file in its data \
             dir) or a valid credential (`deskbroker credential create`) with --token or \
             DESKBROKER_TOKEN"
        ),
        TokenSource::File(path) => format!(
            "the token came from {}, which does not hold this broker's admin token (was the \
             broker started with DESKBROKER_ADMIN_TOKEN, or on another data dir?): pass \
             --token or set DESKBROKER_TOKEN, or set DESKBROKER_DATA_DIR to the broker's \
             data dir",
            path.display()
        ),
        TokenSource::Missing(path) => format!(
            "no token was given and there is no {}: pass --token or set DESKBROKER_TOKEN, \
             or set DESKBROKER_DATA_DIR to the broker's data dir",
            path.display()
        ),
    }
}

/// The broker's warnings on an answer (for example rule P5: `DepthFirst` with
/// the default session limit) go to stderr, so they are seen but never mix
/// with the data a script reads from stdout.
fn print_warnings(answer: &Value) {
    let Some(warnings) = answer.get("warnings").and_then(Value::as_array) else {
        return;
    };
    for warning in warnings {
        let text = match warning {
            Value::String(text) => text.clone(),
            // A structured warning: show its message, else the whole object.
            other => other
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| other.to_string(), str::to_owned),
        };
        eprintln!("warning: {}", output::inert(&text));
    }
}

/// Writes to stdout; a closed pipe (`deskbroker … | head -1`) is not an error.
fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut stdout = io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(err) if err.kind() != io::ErrorKind::BrokenPipe => {
            Err(err).context("cannot write to stdout")
        }
        _ => Ok(()),
    }
}

/// A request body holding only the fields the user gave: on PATCH a missing
/// field means "leave as is", on PUT "use the default", and the API refuses
/// fields it does not know, so nothing else may be sent.
#[derive(Default)]
pub struct Body(Map<String, Value>);

impl Body {
    /// Sets `key` when `value` was given.
    pub fn set(&mut self, key: &str, value: Option<impl Into<Value>>) -> &mut Self {
        if let Some(value) = value {
            self.0.insert(key.to_owned(), value.into());
        }
        self
    }

    /// Sets `key` to the nested object `object` when it holds any field, so
    /// that a group of flags none of which was given sends nothing (the
    /// broker then keeps, on PATCH, or defaults, on PUT, the whole group).
    pub fn set_object(&mut self, key: &str, object: Body) -> &mut Self {
        if !object.is_empty() {
            self.0.insert(key.to_owned(), object.into_value());
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn into_value(self) -> Value {
        Value::Object(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unauthorized_answer_says_where_the_token_came_from() {
        let refused = |source: TokenSource| {
            let ctx = Context {
                client: Client::with_trust("http://127.0.0.1:1", None, &api::Trust::system())
                    .expect("client"),
                output: OutputFormat::Table,
                token_source: source,
            };
            let err = anyhow::Error::from(api::ClientError::Api {
                status: 401,
                code: api::ErrorCode::Unauthorized,
                message: "bearer token is not valid".to_owned(),
            });
            format!("{:#}", ctx.explain(Err(err)).expect_err("still an error"))
        };
        let from_file = refused(TokenSource::File(PathBuf::from("d/admin.token")));
        assert!(
            from_file.starts_with(
                "Unauthorized: bearer token is not valid; the token came from d/admin.token"
            ),
            "{from_file}"
        );
        assert!(from_file.contains("DESKBROKER_TOKEN"), "{from_file}");
        let from_env = refused(TokenSource::Given("DESKBROKER_TOKEN"));
        assert!(
            from_env.contains("the token came from DESKBROKER_TOKEN"),
            "{from_env}"
        );
        let missing = refused(TokenSource::Missing(PathBuf::from("d/admin.token")));
        assert!(
            missing.contains("no token was given and there is no d/admin.token"),
            "{missing}"
        );
        // Other errors pass unchanged.
        let ctx = Context {
            client: Client::with_trust("http://127.0.0.1:1", None, &api::Trust::system())
                .expect("client"),
            output: OutputFormat::Table,
            token_source: TokenSource::Missing(PathBuf::from("d/admin.token")),
        };
        let other = ctx
            .explain(Err(anyhow::Error::from(api::ClientError::Api {
                status: 404,
                code: api::ErrorCode::HostPoolNotFound,
                message: "host pool p not found".to_owned(),
            })))
            .expect_err("an error");
        assert_eq!(
            format!("{other:#}"),
            "HostPoolNotFound: host pool p not found"
        );
    }

    #[test]
    fn body_holds_only_given_fields() {
        let mut body = Body::default();
        body.set("maxSessionLimit", Some(10))
            .set("description", None::<String>)
            .set("assignedUser", Some(Value::Null));
        assert_eq!(
            body.into_value(),
            serde_json::json!({"maxSessionLimit": 10, "assignedUser": null})
        );
    }

    #[test]
    fn nested_objects_are_sent_only_when_they_hold_a_field() {
        let mut given = Body::default();
        given.set("cpuThreshold", Some(90));
        let mut body = Body::default();
        body.set_object("loadIndexSettings", given)
            .set_object("logonStormSettings", Body::default());
        assert_eq!(
            body.into_value(),
            serde_json::json!({"loadIndexSettings": {"cpuThreshold": 90}})
        );
    }
}
