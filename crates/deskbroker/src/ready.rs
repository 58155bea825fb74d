//! The ready line: once every listener of `deskbroker serve` or
//! `deskbroker gateway` is bound, the command prints one line on standard
//! output, `ready ` and a JSON object with the address of each:
//!
//! ```text
//! ready {"api":"http://127.0.0.1:8080","rdp":"127.0.0.1:3390","gateway":"127.0.0.1:8443"}
//! ```
//!
//! `api` is the HTTP API's URL (`http://` or `https://`), `rdp` the RDP
//! front door's `host:port`, `gateway` the RD Gateway's; a key is absent
//! when the command does not listen there. It comes after the lines
//! written for people ("listening on …"), which may change; this one is for
//! programs: a supervisor, a script, the tests and benchmarks, which learn
//! the ports a `:0` listener was given from it, all through
//! [`Ready::parse`]. Keys may be added; a reader ignores those it does not
//! know.

use std::io::{BufRead as _, Write as _};
use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What a line starts with when it is the ready line.
pub const PREFIX: &str = "ready ";

/// The addresses a command listens on, once all are bound.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct Ready {
    /// The HTTP API's URL, `http://ADDR` or `https://ADDR`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// The RDP front door's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdp: Option<SocketAddr>,
    /// The RD Gateway's address (MS-TSGU and the browser's `/web/rdp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<SocketAddr>,
}

impl Ready {
    /// The line, without its newline.
    pub fn line(&self) -> String {
        let json = serde_json::to_string(self).expect("a Ready is always JSON");
        format!("{PREFIX}{json}")
    }

    /// Prints the line on standard output and flushes it, so that a
    /// reader on a pipe sees it at once.
    pub fn print(&self) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", self.line())?;
        out.flush()
    }

    /// The ready line's addresses, when `line` is one (surrounding blanks
    /// and the newline allowed); None for any other line, and for a line
    /// that starts like one but is not a JSON object of addresses.
    pub fn parse(line: &str) -> Option<Ready> {
        let json = line.trim().strip_prefix(PREFIX)?;
        match serde_json::from_str(json).ok()? {
            object @ serde_json::Value::Object(_) => serde_json::from_value(object).ok(),
            _ => None,
        }
    }

    /// Reads `stdout` (a child's piped standard output) on a thread of its
    /// own until the ready line, and answers it with the lines printed
    /// before it; `Err` says how the child failed to print it within
    /// `within` (it stopped, or is stuck). The thread then keeps reading,
    /// so that the child never writes to a closed pipe.
    pub fn wait(
        stdout: impl std::io::Read + Send + 'static,
        within: Duration,
    ) -> Result<(Ready, Vec<String>), String> {
        let mut stdout = std::io::BufReader::new(stdout);
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        std::thread::spawn(move || {
            let mut before = Vec::new();
            let ready = loop {
                let mut line = String::new();
                match stdout.read_line(&mut line) {
                    Ok(0) | Err(_) => break None,
                    Ok(_) => match Ready::parse(&line) {
                        Some(ready) => break Some(ready),
                        None => before.push(line.trim().to_string()),
                    },
                }
            };
            let _ = tx.send((ready, before));
            std::io::copy(&mut stdout, &mut std::io::sink())
        });
        match rx.recv_timeout(within) {
            Ok((Some(ready), before)) => Ok((ready, before)),
            Ok((None, before)) => Err(format!(
                "stopped without printing its ready line, after {before:?}"
            )),
            Err(_) => Err(format!("did not print its ready line within {within:?}")),
        }
    }

    /// The API's URL; panics when the command does not serve the API
    /// (for tests and benchmarks, which know what they started).
    pub fn api_url(&self) -> &str {
        self.api.as_deref().expect("the ready line names no API")
    }

    /// The RDP front door's address; panics when there is none (for tests
    /// and benchmarks, which know what they started).
    pub fn rdp_addr(&self) -> SocketAddr {
        self.rdp.expect("the ready line names no RDP front door")
    }

    /// The RD Gateway's address; panics when there is none (for tests and
    /// benchmarks, which know what they started).
    pub fn gateway_addr(&self) -> SocketAddr {
        self.gateway.expect("the ready line names no RD Gateway")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_answers_the_ready_line_and_the_lines_before_it() {
        let out = "listening on http://127.0.0.1:1\nrdp front door listening on 127.0.0.1:2\n\
                   ready {\"api\":\"http://127.0.0.1:1\",\"rdp\":\"127.0.0.1:2\"}\nlater\n";
        let (ready, before) =
            Ready::wait(std::io::Cursor::new(out), Duration::from_secs(60)).unwrap();
        assert_eq!(ready.api_url(), "http://127.0.0.1:1");
        assert_eq!(ready.rdp_addr(), "127.0.0.1:2".parse().unwrap());
        assert_eq!(ready.gateway, None);
        assert_eq!(
            before,
            [
                "listening on http://127.0.0.1:1",
                "rdp front door listening on 127.0.0.1:2"
            ]
        );
        let e = Ready::wait(
            std::io::Cursor::new("listening on x\n"),
            Duration::from_secs(60),
        )
        .unwrap_err();
        assert!(e.contains("stopped without printing its ready line"), "{e}");
    }

    #[test]
    fn a_ready_line_reads_back_as_written_and_other_lines_are_not_one() {
        let all = Ready {
            api: Some("https://127.0.0.1:8080".into()),
            rdp: Some("127.0.0.1:3390".parse().unwrap()),
            gateway: Some("[::1]:8443".parse().unwrap()),
        };
        assert_eq!(
            all.line(),
            r#"ready {"api":"https://127.0.0.1:8080","rdp":"127.0.0.1:3390","gateway":"[::1]:8443"}"#
        );
        assert_eq!(Ready::parse(&format!("{}\n", all.line())), Some(all));
        let rdp_only = Ready {
            rdp: Some("127.0.0.1:1".parse().unwrap()),
            ..Ready::default()
        };
        assert_eq!(rdp_only.line(), r#"ready {"rdp":"127.0.0.1:1"}"#);
        assert_eq!(Ready::parse(&rdp_only.line()), Some(rdp_only));
        // Keys added later are ignored by older readers.
        assert_eq!(
            Ready::parse(r#"ready {"api":"http://h:1","later":true}"#),
            Some(Ready {
                api: Some("http://h:1".into()),
                ..Ready::default()
            })
        );
        for other in [
            "listening on http://127.0.0.1:8080",
            "ready",
            "ready {",
            r#"ready {"rdp":"not an address"}"#,
            r#"ready ["api"]"#,
        ] {
            assert_eq!(Ready::parse(other), None, "{other}");
        }
    }
}
