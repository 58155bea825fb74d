//! What a hostile Windows host (or anyone on the path to its exporter) can
//! make the watching agent do, through the agent's own scraper and
//! reader: a redirect is not followed, an answer's text does not reach
//! what every reader of the pool sees, a session id that is not a number
//! reaches no command, and an answer built to cost memory is refused
//! within its bounds.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agent::config::{AgentArgs, FileConfig};
use agent::exposition::{self, LIMITS};
use agent::windows::config::{Names, WatchConfig};
use agent::windows::report::{self, Counters};
use agent::windows::scrape;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A loopback HTTP server that answers every request with `answer` and
/// counts the requests it got.
async fn serve(answer: String) -> (String, Arc<AtomicU64>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(AtomicU64::new(0));
    let counted = requests.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let answer = answer.clone();
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                counted.fetch_add(1, Ordering::SeqCst);
                let _ = socket.write_all(answer.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (base, requests)
}

fn watch_config(metrics_url: &str) -> WatchConfig {
    let text = format!(
        r#"
broker = "http://127.0.0.1:1"
host_pool = "win"
state_dir = "/nonexistent"

[[windows_host]]
name = "rdsh01"
address = "10.0.0.11:3389"
metrics_url = "{metrics_url}"
timeout = 10
"#
    );
    let file = FileConfig::parse(&text, Path::new("agent.toml")).unwrap();
    WatchConfig::resolve(AgentArgs::default(), file).unwrap()
}

fn ok(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
}

/// An exporter that redirects, to any address and scheme, is a failed
/// scrape that says so with the status alone: the agent asks nothing of
/// the place it points to, and no text of any answer reaches the error
/// (which the broker keeps as the host's `scrapeError`, for every reader
/// of the pool).
#[tokio::test]
async fn a_redirect_is_not_followed_and_no_answer_text_reaches_the_error() {
    // What a cloud's metadata service, or any internal page, would say.
    let (inside, asked) = serve(ok("db_password: hunter2-s3cret\n")).await;
    for status in [
        "301 Moved Permanently",
        "302 Found",
        "307 Temporary Redirect",
    ] {
        let (exporter, _) = serve(format!(
            "HTTP/1.1 {status}\r\nLocation: {inside}/latest/user-data\r\n\
             Content-Length: 0\r\nConnection: close\r\n\r\n"
        ))
        .await;
        let config = watch_config(&format!("{exporter}/metrics"));
        let targets = scrape::targets(&config.hosts).unwrap();
        let e = targets[0].scrape().await.unwrap_err().to_string();
        assert!(e.contains("redirected, not followed"), "{status}: {e}");
        assert!(!e.contains("latest") && !e.contains("127.0.0.1"), "{e}");
        assert!(!e.contains("hunter2"), "{e}");
    }
    assert_eq!(asked.load(Ordering::SeqCst), 0, "the redirect was followed");

    // Straight from the exporter too: the error names the line, not what
    // is on it.
    let (exporter, _) = serve(ok("# user-data\ndb_password: hunter2-s3cret\n")).await;
    let config = watch_config(&format!("{exporter}/metrics"));
    let targets = scrape::targets(&config.hosts).unwrap();
    let error = targets[0].scrape().await.unwrap_err();
    let e = error.to_string();
    assert!(e.contains("line 2"), "{e}");
    assert!(!e.contains("hunter2"), "{e}");
    // The agent's log may say more: the text at fault (here the value).
    assert_eq!(error.detail(), Some("hunter2-s3cret"));
}

fn names() -> Names {
    Names {
        domains: [("CONTOSO".to_string(), "contoso.com".to_string())].into(),
        default_domain: None,
    }
}

const WHOLE: &str = concat!(
    "windows_exporter_collector_success{collector=\"terminal_services\"} 1\n",
    "windows_exporter_collector_timeout{collector=\"terminal_services\"} 0\n",
);

fn build(version: &str) -> String {
    format!(
        "windows_exporter_build_info{{branch=\"HEAD\",version=\"{}\"}} 1\n",
        exposition::escape_label_value(version)
    )
}

fn session(id: &str, user: &str) -> String {
    format!(
        "windows_terminal_services_session_info{{host=\"\",id=\"{}\",session_name=\"RDP-Tcp 0\",\
         state=\"active\",user=\"{}\"}} 1\n",
        exposition::escape_label_value(id),
        exposition::escape_label_value(user)
    )
}

/// Windows session ids are decimal numbers, and the one of a user's
/// session reaches the `logoff_command` and `message_command` as
/// `DESKBROKER_WINDOWS_SESSION_ID`: any other `id` is a problem, and that
/// session is listed without one.
#[test]
fn a_session_id_that_is_not_a_decimal_number_is_refused() {
    let hostile = [
        "1; calc",
        "$(id)",
        " 2",
        "2 ",
        "-1",
        "+3",
        "0x10",
        "３",
        "1\n2",
        "",
        "123456789012345678901234567890",
    ];
    for id in hostile {
        let text = format!(
            "{}{WHOLE}{}{}",
            build("0.31.1"),
            session(id, "CONTOSO\\alice"),
            session("7", "CONTOSO\\bob")
        );
        let samples = exposition::parse(&text, &LIMITS, report::wanted).unwrap();
        let r = report::interpret(
            &samples,
            &mut Counters::default(),
            &names(),
            &HashSet::new(),
        );
        // Both users are still on the host...
        let users: Vec<String> = r
            .sessions
            .as_ref()
            .expect("a list")
            .iter()
            .map(|s| s.user.clone())
            .collect();
        assert_eq!(users, ["alice@contoso.com", "bob@contoso.com"], "{id:?}");
        // ...alice without a session id, bob with his.
        let listed = format!("{:?}", r.listed);
        let escaped = format!("{id:?}");
        assert!(
            !listed.contains(&escaped[1..escaped.len() - 1]) || id.is_empty(),
            "{id:?}: {listed}"
        );
        assert!(listed.contains("\"7\""), "{listed}");
        assert!(
            r.problems
                .iter()
                .any(|p| p.contains("not a decimal number")),
            "{id:?}: {:?}",
            r.problems
        );
        // The problem does not repeat the id.
        for p in &r.problems {
            assert!(!p.contains("calc") && !p.contains("$(id)"), "{p}");
        }
    }
    // The ids Windows gives are read as they are.
    for id in ["0", "2", "65536", "4294967295"] {
        let text = format!(
            "{}{WHOLE}{}",
            build("0.31.1"),
            session(id, "CONTOSO\\alice")
        );
        let samples = exposition::parse(&text, &LIMITS, report::wanted).unwrap();
        let r = report::interpret(
            &samples,
            &mut Counters::default(),
            &names(),
            &HashSet::new(),
        );
        assert!(
            format!("{:?}", r.listed).contains(&format!("\"{id}\"")),
            "{id}: {:?}",
            r.listed
        );
        assert!(
            !r.problems.iter().any(|p| p.contains("decimal")),
            "{:?}",
            r.problems
        );
    }
}

/// A version label is the exporter's text: the problem an old or odd one
/// makes says what the agent needs, not what the exporter wrote.
#[test]
fn an_exporters_version_text_is_not_repeated() {
    for version in ["0.30.5 DB_PASSWORD=hunter2", "hunter2", "v0.29.0-hunter2"] {
        let text = format!(
            "{}{WHOLE}{}",
            build(version),
            session("2", "CONTOSO\\alice")
        );
        let samples = exposition::parse(&text, &LIMITS, report::wanted).unwrap();
        let r = report::interpret(
            &samples,
            &mut Counters::default(),
            &names(),
            &HashSet::new(),
        );
        assert_eq!(r.sessions, None);
        assert!(!r.problems.is_empty());
        for p in &r.problems {
            assert!(!p.contains("hunter2"), "{p}");
        }
    }
}

/// An answer of the largest size, of series the agent never reads, keeps
/// nothing.
#[test]
fn an_answer_of_other_series_keeps_nothing() {
    let line = "windows_process_handles{creating_process_id=\"4\",process=\"svchost\",\
                process_id=\"1234\",pad=\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"} 12\n";
    let text = line.repeat(scrape::BODY_BYTES_MAX / line.len());
    assert!(text.len() > scrape::BODY_BYTES_MAX - line.len());
    let kept = exposition::parse(&text, &LIMITS, report::wanted).unwrap();
    assert!(kept.is_empty(), "{} samples kept", kept.len());
}

/// Of the series the agent reads, it keeps the labels it reads: a host
/// that adds labels to them costs the agent a pass over them, not memory.
#[test]
fn only_the_labels_the_report_reads_are_kept() {
    let pad = "x".repeat(200);
    let mut text = String::new();
    for core in 0..64 {
        for mode in ["dpc", "idle", "interrupt", "privileged", "user"] {
            text.push_str(&format!(
                "windows_cpu_time_total{{core=\"0,{core}\",mode=\"{mode}\",a=\"{pad}\",\
                 b=\"{pad}\",c=\"{pad}\"}} 1\n"
            ));
        }
    }
    let kept = exposition::parse(&text, &LIMITS, report::wanted).unwrap();
    assert_eq!(kept.len(), 320);
    for s in &kept {
        let names: Vec<&str> = s.labels.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["mode"], "{s:?}");
    }
}

/// What one answer may make the agent keep is bounded: an answer of
/// nothing but samples the report reads, more of them than any host has,
/// is refused whole, not kept.
#[test]
fn an_answer_that_would_keep_too_much_is_refused() {
    // Many small samples: CPU modes of ever more cores, within 4 MiB.
    let mut text = String::new();
    let mut core = 0u64;
    while text.len() < scrape::BODY_BYTES_MAX - 100 {
        text.push_str(&format!(
            "windows_cpu_time_total{{core=\"0,{core}\",mode=\"user\"}} 1\n"
        ));
        core += 1;
    }
    match exposition::parse(&text, &LIMITS, report::wanted) {
        Ok(kept) => panic!("{} samples kept", kept.len()),
        Err(e) => assert!(e.to_string().contains("more than"), "{e}"),
    }

    // Fewer, larger samples: sessions of users with long names.
    let user = format!("CONTOSO\\{}", "u".repeat(1000));
    let mut text = String::new();
    let mut id = 0u64;
    while text.len() < scrape::BODY_BYTES_MAX - 2000 {
        text.push_str(&session(&id.to_string(), &user));
        id += 1;
    }
    match exposition::parse(&text, &LIMITS, report::wanted) {
        Ok(kept) => panic!("{} samples kept", kept.len()),
        Err(e) => assert!(e.to_string().contains("more than"), "{e}"),
    }
}

/// The line bound ends the text only at its true end: an empty line at
/// the bound with more after it is a line too many, not the end.
#[test]
fn an_empty_line_past_the_line_bound_does_not_end_the_text() {
    let mut text = "# HELP\n".repeat(LIMITS.lines_max);
    text.push('\n');
    text.push_str(&format!("{}{WHOLE}", build("0.31.1")));
    text.push_str(&session("2", "CONTOSO\\alice"));
    let read = exposition::parse(&text, &LIMITS, report::wanted);
    assert!(read.is_err(), "read {:?}", read.map(|s| s.len()));

    // Exactly the bound, with its final newline, reads.
    let mut text = "# HELP\n".repeat(LIMITS.lines_max - 1);
    text.push_str(&session("2", "CONTOSO\\alice"));
    let read = exposition::parse(&text, &LIMITS, report::wanted).unwrap();
    assert_eq!(read.len(), 1);
}
