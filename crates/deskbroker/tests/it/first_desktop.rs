//! The walkthrough docs/first-desktop.md, run as written: every ```sh and
//! ```toml block of it follows a marker (`<!-- step: NAME … -->` for a step
//! this test runs, `<!-- not run: NAME: WHY -->` for one it cannot), and
//! the test runs the steps in order with the real `deskbroker` binary, the
//! packaged deploy/deskbroker.toml and deploy/agent.toml edited as the
//! steps say, a real xrdp with its session manager and a desktop
//! ([`DesktopUser`], [`Sesman`], [`Xrdp`]), and a real xfreerdp that opens
//! the `.rdp` file the walkthrough's step wrote and logs on through the
//! front door. It asserts that the desktop was drawn in the client's
//! window and that `deskbroker session list` shows the session. A renamed
//! flag, a removed configuration key (the doc's toml blocks may only set
//! keys the packaged file offers, commented or not) or a changed output
//! makes it fail.
//!
//! So that it needs no root-owned /etc, no fixed ports and no system user,
//! the commands are run with these substitutions, and with nothing else
//! changed (the doc's source comment lists them too):
//!
//! | in the walkthrough | in the test |
//! |---|---|
//! | `deskbroker` | the test's binary, first on `PATH` |
//! | `/etc/deskbroker` | a temporary directory holding copies of deploy/deskbroker.toml and deploy/agent.toml (0600), also named by `DESKBROKER_CONFIG` for the CLI, which reads /etc/deskbroker/deskbroker.toml by default |
//! | `/var/lib/deskbroker`, `/var/lib/deskbroker-agent` | temporary directories (the agent's, its default `state_dir`, is set in the copy of agent.toml) |
//! | `:8080` (the API) | a free port, also in `DESKBROKER_URL` for the CLI, whose default (checked) is `http://127.0.0.1:8080` (not for the steps that run a service: the agent would take it over its file's `broker`) |
//! | `0.0.0.0:3390`, `:3390` (the front door) | `127.0.0.1` and a free port |
//! | `:3389` (xrdp) | the port of the test's xrdp |
//! | `desktop.example.com` | `127.0.0.1` |
//! | `alice` | the test's desktop user, `deskbroker-web` |
//! | `runuser -u deskbroker -- `, ` -o deskbroker -g deskbroker` | dropped: the test runs everything as itself (root, which its desktop user needs) |
//!
//! The client's password goes to xfreerdp's standard input, as
//! `/from-stdin:force` asks for it; its display is the test's Xvfb, whose
//! frame buffer the test reads to see the desktop.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::desktop::{DESKTOP_RGB, DesktopUser, Sesman, USER};
use crate::{Killed, PATIENCE, Xrdp, eventually_blocking, require};

const DOC: &str = "docs/first-desktop.md";

/// The steps this test must find and run, in this order: what the
/// walkthrough promises a newcomer.
const RUN: [&str; 12] = [
    "broker-config",
    "broker-start",
    "broker-check",
    "token",
    "pool",
    "registration-token",
    "agent-config",
    "agent-start",
    "host-check",
    "rdp-file",
    "connect",
    "session-list",
];

/// How long a held step (a service) may take to say it is ready, and a
/// command to finish: each does so in seconds; this bounds a stuck one.
const STEP: Duration = Duration::from_secs(120);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One marked block of the walkthrough.
#[derive(Debug, Clone)]
struct Block {
    name: String,
    /// `None` for a step the test cannot run: why not.
    not_run: Option<String>,
    lang: String,
    body: String,
    held: bool,
    until: Option<String>,
    expect: Vec<String>,
    file: Option<String>,
}

/// Every fenced block of `text` with its marker: a ```sh or ```toml block
/// without one is an error (a command the test would silently skip).
fn blocks(text: &str) -> Result<Vec<Block>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(lang) = lines[i].strip_prefix("```") else {
            i += 1;
            continue;
        };
        let lang = lang.trim().to_string();
        let start = i;
        let mut body = String::new();
        i += 1;
        while i < lines.len() && !lines[i].starts_with("```") {
            body.push_str(lines[i]);
            body.push('\n');
            i += 1;
        }
        if i == lines.len() {
            return Err(format!("the block at line {} does not end", start + 1));
        }
        i += 1;
        if lang != "sh" && lang != "toml" {
            // Output shown to the reader (```text), not a command.
            continue;
        }
        let marker = lines[..start]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim())
            .unwrap_or_default();
        let block = parse_marker(marker, &lang, body).ok_or_else(|| {
            format!(
                "the ```{lang} block at line {} has no `<!-- step: NAME -->` or \
                 `<!-- not run: NAME: WHY -->` marker above it",
                start + 1
            )
        })?;
        out.push(block);
    }
    Ok(out)
}

fn parse_marker(marker: &str, lang: &str, body: String) -> Option<Block> {
    let inner = marker.strip_prefix("<!--")?.strip_suffix("-->")?.trim();
    let mut block = Block {
        name: String::new(),
        not_run: None,
        lang: lang.to_string(),
        body,
        held: false,
        until: None,
        expect: Vec::new(),
        file: None,
    };
    if let Some(rest) = inner.strip_prefix("not run:") {
        let (name, why) = rest.split_once(':')?;
        block.name = name.trim().to_string();
        block.not_run = Some(why.trim().to_string());
        return (!block.name.is_empty() && !why.trim().is_empty()).then_some(block);
    }
    let rest = inner.strip_prefix("step:")?.trim();
    let (name, mut rest) = rest.split_once(' ').unwrap_or((rest, ""));
    block.name = name.to_string();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        if let Some(r) = rest.strip_prefix("held") {
            block.held = true;
            rest = r;
            continue;
        }
        let (key, r) = rest.split_once('=')?;
        let quote = r.chars().next()?;
        let (value, r) = if quote == '"' || quote == '\'' {
            let r = &r[1..];
            let end = r.find(quote)?;
            (r[..end].to_string(), &r[end + 1..])
        } else {
            let end = r.find(' ').unwrap_or(r.len());
            (r[..end].to_string(), &r[end..])
        };
        match key {
            "until" => block.until = Some(value),
            "expect" => block.expect.push(value),
            "file" => block.file = Some(value),
            _ => return None,
        }
        rest = r;
    }
    Some(block)
}

/// Replaces, left to right, each occurrence of a pattern of `table` (the
/// first that matches at a place) by its value; what a replacement put in
/// is not looked at again.
fn substitute(text: &str, table: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = text;
    'scan: while let Some(c) = rest.chars().next() {
        for (from, to) in table {
            if let Some(r) = rest.strip_prefix(from.as_str()) {
                out.push_str(to);
                rest = r;
                continue 'scan;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Sets each `key = value` line of `block` in the configuration `file`:
/// on the line that sets the key, or that shows it commented out (`# key
/// = …`). A key the file does not offer fails: the walkthrough may only
/// ask for what the packaged file has.
fn apply_toml(file: &Path, block: &str, packaged: &str) {
    let text = std::fs::read_to_string(file).expect("read the configuration");
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for line in block.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, _) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("{DOC}: not a `key = value` line: {line:?}"));
        let key = key.trim();
        let sets = |l: &str| {
            let l = l.trim_start();
            let l = l.strip_prefix('#').map_or(l, str::trim_start);
            l.strip_prefix(key)
                .is_some_and(|r| r.trim_start().starts_with('='))
        };
        let at = lines.iter().position(|l| sets(l)).unwrap_or_else(|| {
            panic!("{DOC} sets `{key}`, which the packaged {packaged} does not offer")
        });
        lines[at] = line.to_string();
    }
    std::fs::write(file, lines.join("\n") + "\n").expect("write the configuration");
}

/// The logical lines of a shell block: continuation lines joined, blank
/// and comment lines dropped.
fn commands(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in body.lines() {
        if current.is_empty() && (line.trim().is_empty() || line.trim_start().starts_with('#')) {
            continue;
        }
        current.push_str(line);
        current.push('\n');
        let t = line.trim_end();
        if !(t.ends_with('\\') || t.ends_with('|') || t.ends_with("&&")) {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// What every command of the walkthrough runs with.
struct Stage {
    root: PathBuf,
    env: Vec<(String, String)>,
    table: Vec<(String, String)>,
    held: BTreeMap<String, (Killed, PathBuf)>,
}

impl Stage {
    fn command(&self, script: &str) -> Command {
        let mut c = Command::new("bash");
        c.args(["-euo", "pipefail", "-c", script])
            .current_dir(self.root.join("home"))
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }

    /// Runs `script` to its end; answers its output (stdout and stderr).
    fn run(&self, name: &str, script: &str) -> String {
        let log = self.root.join("logs").join(format!("{name}.log"));
        let out = std::fs::File::create(&log).expect("step log");
        let mut child = self
            .command(script)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .expect("start bash");
        let Some(status) = eventually_blocking(STEP, || child.try_wait().expect("wait")) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("step {name} did not finish within {STEP:?}: {script}");
        };
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            status.success(),
            "step {name} failed ({status}):\n{script}\nit said:\n{said}"
        );
        said
    }

    /// Starts `script`'s one command, kept running until the test ends,
    /// with `input` on its standard input; waits until its output holds
    /// `until`.
    fn hold(&mut self, name: &str, command: &str, input: Option<&str>, until: Option<&str>) {
        let log = self.root.join("logs").join(format!("{name}.log"));
        let out = std::fs::File::create(&log).expect("step log");
        // exec: the process the test holds (and stops, by its pid) is the
        // command itself.
        // The CLI's DESKBROKER_URL stays out of services: the agent would
        // take it over the broker its configuration file names.
        let mut child = self
            .command(&format!("exec {command}"))
            .env_remove("DESKBROKER_URL")
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .expect("start bash");
        if let Some(input) = input {
            let mut stdin = child.stdin.take().expect("stdin");
            stdin.write_all(input.as_bytes()).expect("write stdin");
        }
        let mut process = Killed(child);
        if let Some(until) = until {
            let said = eventually_blocking(STEP, || {
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                if said.contains(until) {
                    return Ok(said);
                }
                if let Ok(Some(status)) = process.0.try_wait() {
                    panic!("step {name} exited ({status}) before saying {until:?}:\n{said}");
                }
                Err(said)
            });
            if let Err(said) = said {
                panic!("step {name} did not say {until:?} within {STEP:?}:\n{said}");
            }
        }
        self.held.insert(name.to_string(), (process, log));
    }

    fn held_log(&self, name: &str) -> String {
        self.held
            .get(name)
            .and_then(|(_, log)| std::fs::read_to_string(log).ok())
            .unwrap_or_default()
    }
}

/// An X display for xfreerdp whose frame buffer the test can read:
/// Xvfb keeps it in an XWD file (`-fbdir`).
struct FrameBuffer {
    _process: Killed,
    name: String,
    file: PathBuf,
}

impl FrameBuffer {
    fn start(dir: &Path) -> FrameBuffer {
        let xvfb = require("Xvfb", "xvfb");
        std::fs::create_dir_all(dir).expect("fb dir");
        let mut child = Command::new(xvfb)
            .args(["-displayfd", "1", "-nolisten", "tcp", "-fbdir"])
            .arg(dir)
            .args(["-screen", "0", "1024x768x24"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start Xvfb");
        let stdout = child.stdout.take().expect("stdout");
        let process = Killed(child);
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
            .expect("Xvfb prints its display number");
        let number = line.trim().to_string();
        assert!(
            !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()),
            "Xvfb did not start: {line:?}"
        );
        FrameBuffer {
            _process: process,
            name: format!(":{number}"),
            file: dir.join("Xvfb_screen0"),
        }
    }

    /// The share of the screen's pixels within 8 of `rgb` on each channel,
    /// read from the XWD file (None until it can be read).
    fn share(&self, rgb: [u8; 3]) -> Option<f64> {
        let data = std::fs::read(&self.file).ok()?;
        let field = |i: usize| -> Option<u32> {
            Some(u32::from_be_bytes(
                data.get(i * 4..i * 4 + 4)?.try_into().ok()?,
            ))
        };
        let (header, width, height) = (field(0)? as usize, field(4)?, field(5)?);
        let (lsb_first, bpp, stride) = (field(7)? == 0, field(11)?, field(12)? as usize);
        let masks = [field(14)?, field(15)?, field(16)?];
        let start = header + field(19)? as usize * 12;
        if bpp != 32 || width == 0 || height == 0 || masks.contains(&0) {
            return None;
        }
        let mut near = 0u64;
        for y in 0..height as usize {
            for x in 0..width as usize {
                let at = start + y * stride + x * 4;
                let bytes: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
                let pixel = if lsb_first {
                    u32::from_le_bytes(bytes)
                } else {
                    u32::from_be_bytes(bytes)
                };
                let close = masks.iter().zip(rgb).all(|(mask, want)| {
                    let v = (pixel & mask) >> mask.trailing_zeros();
                    (i64::from(v) - i64::from(want)).abs() <= 8
                });
                near += u64::from(close);
            }
        }
        Some(near as f64 / (f64::from(width) * f64::from(height)))
    }
}

/// The walkthrough's blocks, checked: every command block is marked, the
/// names are unique, and the steps of [`RUN`] are there, in that order.
fn walkthrough() -> Vec<Block> {
    let text = std::fs::read_to_string(repo().join(DOC)).expect("read the walkthrough");
    let blocks = blocks(&text).unwrap_or_else(|e| panic!("{DOC}: {e}"));
    let mut names: Vec<&str> = blocks.iter().map(|b| b.name.as_str()).collect();
    let run: Vec<&str> = blocks
        .iter()
        .filter(|b| b.not_run.is_none())
        .map(|b| b.name.as_str())
        .collect();
    assert_eq!(run, RUN, "{DOC}: the steps the test runs");
    names.sort_unstable();
    let count = names.len();
    names.dedup();
    assert_eq!(names.len(), count, "{DOC}: two blocks share a name");
    blocks
}

#[test]
fn the_walkthroughs_marks_cover_every_command_block() {
    let blocks = blocks("```sh\nls\n```\n").expect_err("an unmarked block");
    assert!(blocks.contains("no `<!-- step: NAME -->`"), "{blocks}");
    let b = blocks_of(
        "<!-- step: a held until=\"x y\" expect='\"k\":1' expect=z -->\n```sh\nrun\n```\n",
    );
    assert_eq!(
        (b.held, b.until.as_deref(), b.expect.clone()),
        (
            true,
            Some("x y"),
            vec!["\"k\":1".to_string(), "z".to_string()]
        )
    );
    assert_eq!(
        substitute(
            "a:3390 b:33890",
            &[
                (":3390".into(), ":1".into()),
                (":3389".into(), ":3390".into())
            ]
        ),
        "a:1 b:33900"
    );
    // The shipped walkthrough itself parses, with the steps the test runs.
    walkthrough();
}

fn blocks_of(text: &str) -> Block {
    blocks(text).expect("parses").remove(0)
}

/// The steps the test cannot run still name what is shipped: the package
/// file of this version, and the units the package installs.
#[test]
fn the_walkthroughs_steps_that_are_not_run_name_what_is_shipped() {
    let blocks = walkthrough();
    let changelog =
        std::fs::read_to_string(repo().join("deploy/debian/changelog")).expect("changelog");
    let version = changelog
        .lines()
        .next()
        .and_then(|l| l.split_once('(')?.1.split_once(')'))
        .map(|(v, _)| v.to_string())
        .expect("the changelog's version");
    let install = blocks
        .iter()
        .find(|b| b.name == "install")
        .expect("an install step");
    assert!(
        install
            .body
            .contains(&format!("apt install ./deskbroker_{version}_")),
        "{DOC}: the install step names another version than {version}: {}",
        install.body
    );
    for b in blocks.iter().filter(|b| b.not_run.is_some()) {
        for line in b.body.lines() {
            let Some(rest) = line.trim().strip_prefix("systemctl enable --now ") else {
                continue;
            };
            let unit = rest.split_whitespace().next().expect("a unit");
            if unit.starts_with("deskbroker") {
                assert!(
                    repo().join(format!("deploy/{unit}.service")).is_file(),
                    "{DOC}: step {} starts {unit}, which is not a packaged unit",
                    b.name
                );
            }
        }
    }
}

#[test]
fn the_first_desktop_walkthrough_reaches_a_desktop_as_written() {
    let blocks = walkthrough();
    let xrdp = require("xrdp", "xrdp");
    let openssl = require("openssl", "openssl");
    require("xfreerdp", "freerdp2-x11");
    require("curl", "curl");
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    for d in ["etc/deskbroker", "var/lib", "home", "logs"] {
        std::fs::create_dir_all(root.join(d)).expect("mkdir");
    }

    // The desktop: the test's user, xrdp's session manager, and an xrdp on
    // a free loopback port (xrdp's 3389 in the walkthrough).
    let user = DesktopUser::prepare();
    let sesman = Sesman::start(&root.join("sesman"));
    let host = Xrdp::start(&xrdp, &openssl, &root.join("xrdp"));
    let xrdp_port = host.address.rsplit_once(':').expect("port").1.to_string();
    let screen = FrameBuffer::start(&root.join("fb"));

    // The CLI's default broker is the packaged listen address, which the
    // test moves to a free port and names in DESKBROKER_URL.
    let help = Command::new(crate::exe())
        .args(["hostpool", "list", "--help"])
        .output()
        .expect("deskbroker --help");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("[default: http://127.0.0.1:8080]"),
        "the CLI's default broker changed:\n{help}"
    );
    let packaged = std::fs::read_to_string(repo().join("deploy/deskbroker.toml")).expect("read");
    assert!(
        packaged
            .lines()
            .any(|l| l.trim() == "listen = \"127.0.0.1:8080\""),
        "the packaged broker no longer listens on 127.0.0.1:8080"
    );

    let api_port = crate::free_port();
    let door_port = crate::free_port();
    let at = |p: &str| root.join(p).display().to_string();
    let table: Vec<(String, String)> = [
        ("runuser -u deskbroker -- ", String::new()),
        (" -o deskbroker -g deskbroker", String::new()),
        ("/etc/deskbroker", at("etc/deskbroker")),
        ("/var/lib/deskbroker", at("var/lib/deskbroker")),
        ("0.0.0.0:3390", format!("127.0.0.1:{door_port}")),
        (":3390", format!(":{door_port}")),
        (":8080", format!(":{api_port}")),
        (":3389", format!(":{xrdp_port}")),
        ("desktop.example.com", "127.0.0.1".to_string()),
        ("alice", USER.to_string()),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b))
    .collect();

    let bin_dir = Path::new(crate::exe()).parent().expect("bin dir");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
    );
    let env = vec![
        ("PATH".to_string(), path),
        ("HOME".to_string(), at("home")),
        ("DISPLAY".to_string(), screen.name.clone()),
        (
            "DESKBROKER_CONFIG".to_string(),
            at("etc/deskbroker/deskbroker.toml"),
        ),
        (
            "DESKBROKER_URL".to_string(),
            format!("http://127.0.0.1:{api_port}"),
        ),
    ];
    // What the package installs in /etc/deskbroker, as it installs it.
    for (file, mode) in [("deskbroker.toml", 0o644), ("agent.toml", 0o600)] {
        let text = std::fs::read_to_string(repo().join("deploy").join(file)).expect("read");
        let copy = root.join("etc/deskbroker").join(file);
        std::fs::write(&copy, substitute(&text, &table)).expect("write");
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }
    // The agent's default state directory, /var/lib/deskbroker-agent, is
    // not in its file: the copy names the test's (its commented default
    // line, set).
    let agent_state = root.join("var/lib/deskbroker-agent");
    apply_toml(
        &root.join("etc/deskbroker/agent.toml"),
        &format!("state_dir = \"{}\"\n", agent_state.display()),
        "deploy/agent.toml",
    );

    let mut stage = Stage {
        root: root.clone(),
        env,
        table,
        held: BTreeMap::new(),
    };
    for b in blocks.iter().filter(|b| b.not_run.is_none()) {
        let body = substitute(&b.body, &stage.table);
        eprintln!("first desktop: step {}", b.name);
        let said = if let Some(file) = &b.file {
            assert_eq!(b.lang, "toml", "{DOC}: step {} names a file", b.name);
            let target = substitute(file, &stage.table);
            let packaged = format!(
                "deploy/{}",
                Path::new(file).file_name().expect("a file").display()
            );
            apply_toml(Path::new(&target), &body, &packaged);
            String::new()
        } else if b.held {
            let mut cmds = commands(&body);
            let last = cmds.pop().expect("a held step has a command");
            let mut said = String::new();
            if !cmds.is_empty() {
                said = stage.run(&format!("{}-setup", b.name), &cmds.concat());
            }
            let input = (b.name == "connect").then(|| format!("{}\n", user.password));
            let until = b.until.as_deref().map(|u| substitute(u, &stage.table));
            stage.hold(&b.name, last.trim(), input.as_deref(), until.as_deref());
            said + &stage.held_log(&b.name)
        } else {
            stage.run(&b.name, &body)
        };
        for want in &b.expect {
            let want = substitute(want, &stage.table);
            assert!(
                said.contains(&want),
                "{DOC}: step {} did not say {want:?}; it said:\n{said}",
                b.name
            );
        }
        if b.name == "connect" {
            // The desktop: xrdp logged the user on, and the client's window
            // shows the user's desktop (its root window's colour).
            let reached = eventually_blocking(PATIENCE, || {
                host.log()
                    .contains(&format!("login successful for user {USER}"))
                    && screen.share(DESKTOP_RGB).is_some_and(|s| s > 0.5)
            });
            assert!(
                reached,
                "no desktop in the client's window (its colour covers {:?}); the client said:\n{}\n\
                 xrdp's log:\n{}\nsesman's log:\n{}",
                screen.share(DESKTOP_RGB),
                stage.held_log("connect"),
                host.log(),
                sesman.log()
            );
            eprintln!(
                "first desktop: the desktop covers {:.0}% of the client's screen",
                screen.share(DESKTOP_RGB).unwrap_or(0.0) * 100.0
            );
        }
        if !said.is_empty() {
            eprintln!("{}", said.trim_end());
        }
    }
    // The client closes: the desktop lives on, and the agent's next
    // heartbeat shows the session Disconnected, as the walkthrough says.
    let session = "deskbroker session list --host-pool desktops\n";
    assert!(
        stage
            .run("session-before-close", session)
            .contains("Active"),
        "the session is Active while the client is connected"
    );
    drop(stage.held.remove("connect"));
    let kept = eventually_blocking(PATIENCE * 2, || {
        stage
            .run("session-after-close", session)
            .contains("Disconnected")
    });
    assert!(
        kept,
        "after the client closed, the session list said:\n{}",
        stage.run("session-after-close", session)
    );
    // The agent kept its host credential where the test put its state,
    // not in the machine's /var/lib/deskbroker-agent.
    assert!(
        agent_state.join("agent.json").is_file(),
        "the agent kept no credential in {}",
        agent_state.display()
    );
}
