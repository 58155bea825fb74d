//! The documented `message_command` and `logoff_command` examples, run as
//! written: each is read from its fenced block in the docs (found by the
//! `<!-- tested: NAME … -->` line above it) or from its commented line in
//! deploy/agent.toml, parsed as the agent parses its config file, and run
//! the way the agent runs it ([`agent::messages::run`],
//! [`agent::orders::run_command`]) with hostile user names, session ids and
//! texts. The tools they call (`ssh`, `msg`, `logoff`, `pkill`, `wall`,
//! `pwsh`, `tstool.py`) are stand-ins on `PATH` that record their
//! arguments and standard input; the `ssh` stand-in then runs its remote
//! command line through `sh -c`, as the host's shell would parse it.
//! Nothing a value holds may run, and the text must arrive as written.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent::messages;
use agent::orders;
use api::types::HostMessage;

/// A failure bound for a loaded machine: the examples exit at once.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The tools the examples call, each a recording stand-in.
const TOOLS: [&str; 8] = [
    "ssh",
    "msg",
    "logoff",
    "pkill",
    "wall",
    "pwsh",
    "tstool.py",
    "sudo",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read_doc(doc: &str) -> String {
    std::fs::read_to_string(repo().join(doc)).unwrap_or_else(|e| panic!("{doc}: {e}"))
}

/// The ```toml block below the line `<!-- tested: NAME …` of `doc`.
fn block(doc: &str, name: &str) -> String {
    let text = read_doc(doc);
    let marker = format!("<!-- tested: {name} ");
    let at = text
        .find(&marker)
        .unwrap_or_else(|| panic!("{doc} has no example marked {marker:?}"));
    let rest = &text[at..];
    let fence = "```toml\n";
    let open = rest.find(fence).expect("a toml block follows the marker") + fence.len();
    let body = &rest[open..];
    let close = body.find("\n```").expect("the block ends");
    body[..=close].to_string()
}

/// The commented `# message_command = …` line of `doc`, uncommented.
fn commented_message_command(doc: &str) -> String {
    let text = read_doc(doc);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("# message_command = "))
        .unwrap_or_else(|| panic!("{doc} has no commented message_command"));
    format!("message_command = {line}\n")
}

/// The example's commands, parsed as the agent parses its `--config` file.
fn commands(doc: &str, toml: &str) -> (Option<String>, Option<String>) {
    let f = agent::config::FileConfig::parse(toml, Path::new(doc)).expect("the example parses");
    (f.message_command, f.logoff_command)
}

/// One recorded run of a stand-in.
#[derive(Debug)]
struct Call {
    tool: String,
    argv: Vec<String>,
    stdin: String,
    /// `ssh` only: the remote command line it was asked to run.
    remote: Option<String>,
}

/// A directory of stand-ins and of what they recorded, and the file that
/// a hostile value would create if anything ran it.
struct Stage {
    dir: tempfile::TempDir,
}

impl Stage {
    fn new() -> Stage {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        let calls = dir.path().join("calls");
        std::fs::create_dir(&bin).unwrap();
        std::fs::create_dir(&calls).unwrap();
        for tool in TOOLS {
            let mut script = format!(
                "#!/bin/sh\n# A stand-in for {tool}: records its arguments and standard input.\n\
                 d=$(mktemp -d '{}/{tool}.XXXXXX') || exit 99\n\
                 : > \"$d/argv\"\n[ $# -eq 0 ] || printf '%s\\0' \"$@\" > \"$d/argv\"\n\
                 cat > \"$d/stdin\"\n",
                calls.display()
            );
            match tool {
                // The options the examples give take a value; the first
                // other word is the destination, and the rest is joined
                // into one line for the remote shell, as ssh does.
                "ssh" => script.push_str(
                    "while [ $# -gt 0 ]; do\n\
                     \x20 case $1 in -[bcDEeFIiJLlmOopQRSWw]) shift 2;; -*) shift;; *) break;; esac\n\
                     done\nshift\nprintf '%s' \"$*\" > \"$d/remote\"\n\
                     exec sh -c \"$*\" < \"$d/stdin\"\n",
                ),
                // tstool.py says OK when the call succeeded.
                "tstool.py" => script.push_str("echo '[*] ...OK'\n"),
                _ => {}
            }
            write_executable(&bin.join(tool), &script);
        }
        Stage { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Where a hostile value writes if it runs.
    fn pwned(&self) -> PathBuf {
        self.path("pwned")
    }

    /// `PATH` with the stand-ins first, then `more` directories, then the
    /// agent's own.
    fn path_var(&self, more: &[&Path]) -> String {
        let mut dirs = vec![self.path("bin").display().to_string()];
        dirs.extend(more.iter().map(|d| d.display().to_string()));
        dirs.push(std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()));
        dirs.join(":")
    }

    fn calls(&self) -> Vec<Call> {
        let mut calls = Vec::new();
        for entry in std::fs::read_dir(self.path("calls")).unwrap() {
            let d = entry.unwrap().path();
            let name = d.file_name().unwrap().to_string_lossy().into_owned();
            let tool = name.rsplit_once('.').unwrap().0.to_string();
            let argv = std::fs::read_to_string(d.join("argv")).unwrap();
            let argv = argv
                .strip_suffix('\0')
                .map(|a| a.split('\0').map(str::to_string).collect())
                .unwrap_or_default();
            calls.push(Call {
                tool,
                argv,
                stdin: std::fs::read_to_string(d.join("stdin")).unwrap(),
                remote: std::fs::read_to_string(d.join("remote")).ok(),
            });
        }
        calls
    }

    /// The one call of `tool`.
    fn only(&self, tool: &str) -> Call {
        let mut calls: Vec<Call> = self
            .calls()
            .into_iter()
            .filter(|c| c.tool == tool)
            .collect();
        assert_eq!(calls.len(), 1, "{tool} ran once: {:?}", self.calls());
        calls.remove(0)
    }
}

fn write_executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Values that run `touch PWNED` if a shell parses them as code, in the
/// ways a shell (or cmd.exe) would.
fn hostile(pwned: &Path) -> Vec<String> {
    let p = pwned.display();
    vec![
        format!("$(touch {p})"),
        format!("`touch {p}`"),
        format!("'; touch {p}; '"),
        format!("\"; touch {p}; \""),
        format!("x\ntouch {p}\n"),
        format!("x; touch {p}"),
        format!("x | touch {p}"),
        format!("x && touch {p} & rem"),
        format!("-o ProxyCommand=touch {p}"),
        format!("%PATH% \\\" ^& touch {p}"),
    ]
}

/// Windows session ids that are no decimal number.
fn hostile_ids(pwned: &Path) -> Vec<String> {
    let p = pwned.display();
    vec![
        String::new(),
        format!("5; touch {p}"),
        format!("$(touch {p})"),
        format!("5`touch {p}`"),
        format!("5 & touch {p}"),
        "5\n6".into(),
        "-5".into(),
        "5 6".into(),
        "\u{ff15}".into(),
    ]
}

fn message(user: &str, title: &str, text: &str) -> HostMessage {
    HostMessage {
        id: "m1".into(),
        session_id: "s1".into(),
        user: user.into(),
        title: title.into(),
        message: text.into(),
    }
}

/// What the watching agent gives a command about a session on rdsh01.
fn windows_env(stage: &Stage, user: &str, windows_session_id: &str) -> orders::Env {
    vec![
        ("PATH", stage.path_var(&[])),
        ("DESKBROKER_HOST", "rdsh01".into()),
        ("DESKBROKER_HOST_ADDRESS", "10.0.0.11:3389".into()),
        ("DESKBROKER_USER", user.into()),
        ("DESKBROKER_SESSION_ID", "s1".into()),
        ("DESKBROKER_WINDOWS_SESSION_ID", windows_session_id.into()),
    ]
}

/// An OpenSSH example: the text reaches `msg` on its standard input,
/// verbatim; the remote command lines hold fixed words and the checked
/// session id only; a session id that is not a number reaches no host.
async fn openssh_example_is_safe(doc: &str, name: &str) {
    let (message_command, logoff_command) = commands(doc, &block(doc, name));
    let message_command = message_command.expect("a message_command");
    let logoff_command = logoff_command.expect("a logoff_command");
    for i in 0..hostile(Path::new("x")).len() {
        // A stage of its own for each value, so that each run's calls are
        // counted alone.
        let stage = Stage::new();
        let value = &hostile(&stage.pwned())[i];
        let m = message(value, value, value);
        let env = windows_env(&stage, value, "5");
        messages::run(&message_command, &m, &env, TIMEOUT)
            .await
            .unwrap_or_else(|e| panic!("{name}: message {value:?}: {e}"));
        let ssh = stage.only("ssh");
        assert!(
            ssh.argv.iter().any(|a| a == "deskbroker@10.0.0.11"),
            "{ssh:?}"
        );
        assert_eq!(ssh.remote.as_deref(), Some("msg 5 /TIME:300"), "{name}");
        let msg = stage.only("msg");
        assert_eq!(msg.argv, ["5", "/TIME:300"], "{name}");
        assert_eq!(msg.stdin, format!("{value}\n\n{value}\n"), "{name}");

        orders::run_command(&logoff_command, &env, TIMEOUT)
            .await
            .unwrap_or_else(|e| panic!("{name}: logoff of {value:?}: {e}"));
        let ssh: Vec<Call> = stage
            .calls()
            .into_iter()
            .filter(|c| c.tool == "ssh")
            .collect();
        assert!(
            ssh.iter().any(|c| c.remote.as_deref() == Some("logoff 5")),
            "{ssh:?}"
        );
        assert_eq!(stage.only("logoff").argv, ["5"], "{name}");
        assert!(!stage.pwned().exists(), "{name}: {value:?} ran");
    }
    for i in 0..hostile_ids(Path::new("x")).len() {
        let stage = Stage::new();
        let id = &hostile_ids(&stage.pwned())[i];
        let env = windows_env(&stage, "alice@contoso.com", id);
        let m = message("alice@contoso.com", "Maintenance", "Save your work");
        assert!(
            messages::run(&message_command, &m, &env, TIMEOUT)
                .await
                .is_err(),
            "{name}: message with id {id:?}"
        );
        assert!(
            orders::run_command(&logoff_command, &env, TIMEOUT)
                .await
                .is_err(),
            "{name}: logoff with id {id:?}"
        );
        assert!(stage.calls().is_empty(), "{name}: {:?}", stage.calls());
        assert!(!stage.pwned().exists(), "{name}: {id:?} ran");
    }
}

#[tokio::test]
async fn the_windows_runbooks_openssh_example_passes_text_and_ids_as_data() {
    openssh_example_is_safe("docs/windows.md", "windows-openssh").await;
}

#[tokio::test]
async fn the_agent_guides_openssh_example_passes_text_and_ids_as_data() {
    openssh_example_is_safe("docs/agent.md", "windows-openssh-full").await;
}

#[tokio::test]
async fn the_tstool_example_passes_each_value_as_one_argument() {
    let doc = "docs/agent.md";
    let (message_command, logoff_command) = commands(doc, &block(doc, "windows-tstool"));
    let (message_command, logoff_command) = (message_command.unwrap(), logoff_command.unwrap());
    let stage = Stage::new();
    for value in hostile(&stage.pwned()) {
        let env = windows_env(&stage, &value, "5");
        let m = message(&value, &value, &value);
        messages::run(&message_command, &m, &env, TIMEOUT)
            .await
            .unwrap();
        orders::run_command(&logoff_command, &env, TIMEOUT)
            .await
            .unwrap();
        let mut calls = stage.calls();
        calls.sort_by_key(|c| c.argv.len());
        let head = [
            "-k",
            "-no-pass",
            "-target-ip",
            "10.0.0.11",
            "contoso.com/svc-deskbroker@rdsh01.contoso.com",
        ];
        let args = |rest: &[&str]| -> Vec<String> {
            head.iter().chain(rest).map(|s| (*s).to_string()).collect()
        };
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert_eq!(calls[0].argv, args(&["logoff", "-session", "5"]));
        let title = format!("-title={value}");
        let text = format!("-message={value}");
        assert_eq!(
            calls[1].argv,
            args(&["msg", "-session", "5", &title, &text])
        );
        assert!(!stage.pwned().exists(), "{value:?} ran");
        for d in std::fs::read_dir(stage.path("calls")).unwrap() {
            std::fs::remove_dir_all(d.unwrap().path()).unwrap();
        }
    }
    for id in hostile_ids(&stage.pwned()) {
        let env = windows_env(&stage, "alice@contoso.com", &id);
        let m = message("alice@contoso.com", "t", "x");
        assert!(
            messages::run(&message_command, &m, &env, TIMEOUT)
                .await
                .is_err()
        );
        assert!(
            orders::run_command(&logoff_command, &env, TIMEOUT)
                .await
                .is_err()
        );
        assert!(stage.calls().is_empty(), "{id:?}: {:?}", stage.calls());
    }
    assert!(!stage.pwned().exists());
}

#[tokio::test]
async fn the_powershell_example_keeps_values_out_of_its_script() {
    let doc = "docs/agent.md";
    let (message_command, logoff_command) = commands(doc, &block(doc, "windows-pwsh"));
    let (message_command, logoff_command) = (message_command.unwrap(), logoff_command.unwrap());
    let stage = Stage::new();
    for value in hostile(&stage.pwned()) {
        let env = windows_env(&stage, &value, "5");
        let m = message(&value, &value, &value);
        messages::run(&message_command, &m, &env, TIMEOUT)
            .await
            .unwrap();
        orders::run_command(&logoff_command, &env, TIMEOUT)
            .await
            .unwrap();
        let calls = stage.calls();
        assert_eq!(calls.len(), 2, "{calls:?}");
        for c in &calls {
            assert_eq!(c.tool, "pwsh");
            assert_eq!(c.argv.len(), 4, "{c:?}");
            assert_eq!(c.argv[..3], ["-NoProfile", "-NonInteractive", "-Command"]);
            // The script is the example's own text: the values reach it
            // only through $env:.
            assert!(message_command.contains(&c.argv[3]) || logoff_command.contains(&c.argv[3]));
            assert!(!c.argv[3].contains(&value), "{c:?}");
        }
        assert!(!stage.pwned().exists(), "{value:?} ran");
        for d in std::fs::read_dir(stage.path("calls")).unwrap() {
            std::fs::remove_dir_all(d.unwrap().path()).unwrap();
        }
    }
    for id in hostile_ids(&stage.pwned()) {
        let env = windows_env(&stage, "alice@contoso.com", &id);
        let m = message("alice@contoso.com", "t", "x");
        assert!(
            messages::run(&message_command, &m, &env, TIMEOUT)
                .await
                .is_err()
        );
        assert!(
            orders::run_command(&logoff_command, &env, TIMEOUT)
                .await
                .is_err()
        );
        assert!(stage.calls().is_empty(), "{id:?}: {:?}", stage.calls());
    }
    assert!(!stage.pwned().exists());
}

/// What the Linux agent gives a logoff command for `user`'s order.
fn linux_env(path: String, user: &str) -> orders::Env {
    vec![
        ("PATH", path),
        ("DESKBROKER_HOST", "h7".into()),
        ("DESKBROKER_HOST_ADDRESS", "10.0.0.7:3389".into()),
        ("DESKBROKER_USER", user.into()),
        ("DESKBROKER_SESSION_ID", "s1".into()),
    ]
}

#[tokio::test]
async fn the_xrdp_logoff_example_kills_only_a_persons_processes() {
    let doc = "docs/agent.md";
    let (_, logoff_command) = commands(doc, &block(doc, "xrdp-pkill"));
    let logoff_command = logoff_command.expect("a logoff_command");
    let stage = Stage::new();
    let p = stage.pwned();
    let p = p.display();
    // Names `id` resolves to a system account or to nothing, numbers that
    // `pkill -u` would take as uids, options, and shell code.
    let names = [
        "0@contoso.com".to_string(),
        "0".into(),
        "00@x".into(),
        "root".into(),
        "root@contoso.com".into(),
        "nobody@contoso.com".into(),
        "-1".into(),
        "-1@x".into(),
        "-u@x".into(),
        "1000@x".into(),
        "@contoso.com".into(),
        String::new(),
        "$(id)".into(),
        format!("$(touch {p})@x"),
        format!("`touch {p}`"),
        format!("'; touch {p}; '"),
        format!("alice\ntouch {p}"),
        "alice,root".into(),
        "alice root".into(),
    ];
    for name in &names {
        let env = linux_env(stage.path_var(&[]), name);
        let outcome = orders::run_command(&logoff_command, &env, TIMEOUT).await;
        assert!(outcome.is_err(), "{name:?} was accepted");
        assert!(stage.calls().is_empty(), "{name:?}: {:?}", stage.calls());
    }
    assert!(!stage.pwned().exists(), "a user name ran");

    // A person's account: its uid, and only it, is given to pkill. This
    // machine's `id` is replaced for the one name the test needs to exist.
    let people = stage.path("people");
    std::fs::create_dir(&people).unwrap();
    write_executable(
        &people.join("id"),
        "#!/bin/sh\n[ \"$*\" = '-u -- alice' ] && echo 1001 && exit 0\nexit 1\n",
    );
    let env = linux_env(stage.path_var(&[&people]), "alice@contoso.com");
    orders::run_command(&logoff_command, &env, TIMEOUT)
        .await
        .expect("alice is logged off");
    assert_eq!(stage.only("pkill").argv, ["-KILL", "-u", "1001"]);
}

#[tokio::test]
async fn the_commented_wall_examples_show_the_text_as_written() {
    for doc in ["deploy/agent.toml", "docs/agent.md"] {
        let (message_command, _) = commands(doc, &commented_message_command(doc));
        let message_command = message_command.expect("a message_command");
        let stage = Stage::new();
        for value in hostile(&stage.pwned()) {
            let env = vec![("PATH", stage.path_var(&[]))];
            let m = message(&value, &value, &value);
            messages::run(&message_command, &m, &env, TIMEOUT)
                .await
                .unwrap();
            let wall = stage.only("wall");
            assert!(wall.argv.is_empty(), "{doc}: {wall:?}");
            assert_eq!(wall.stdin, format!("{value}\n\n{value}\n"), "{doc}");
            std::fs::remove_dir_all(stage.path("calls")).unwrap();
            std::fs::create_dir(stage.path("calls")).unwrap();
        }
        assert!(!stage.pwned().exists(), "{doc}: a message ran");
    }
}

#[tokio::test]
async fn the_notification_example_runs_only_as_a_persons_account() {
    let doc = "docs/autoscale.md";
    let (message_command, _) = commands(doc, &block(doc, "notify-send"));
    let message_command = message_command.expect("a message_command");
    let stage = Stage::new();
    let p = stage.pwned();
    let p = p.display();
    // `sudo -u '#0'` is root: names that are numbers, options, system
    // accounts or shell code never reach sudo.
    let names = [
        "#0@contoso.com".to_string(),
        "0@x".into(),
        "root@contoso.com".into(),
        "nobody@contoso.com".into(),
        "-u@x".into(),
        "@contoso.com".into(),
        format!("$(touch {p})@x"),
        format!("`touch {p}`"),
    ];
    for name in &names {
        let env = vec![("PATH", stage.path_var(&[]))];
        let outcome =
            messages::run(&message_command, &message(name, "t", "x"), &env, TIMEOUT).await;
        assert!(outcome.is_err(), "{name:?} was accepted");
        assert!(stage.calls().is_empty(), "{name:?}: {:?}", stage.calls());
    }

    // A person's account: sudo gets its uid, and the title and text as
    // two arguments, verbatim, whatever they hold.
    let people = stage.path("people");
    std::fs::create_dir(&people).unwrap();
    write_executable(
        &people.join("id"),
        "#!/bin/sh\n[ \"$*\" = '-u -- alice' ] && echo 1001 && exit 0\nexit 1\n",
    );
    for value in hostile(&stage.pwned()) {
        let env = vec![("PATH", stage.path_var(&[&people]))];
        let m = message("alice@contoso.com", &value, &value);
        messages::run(&message_command, &m, &env, TIMEOUT)
            .await
            .expect("shown to alice");
        assert_eq!(
            stage.only("sudo").argv,
            [
                "-u",
                "#1001",
                "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1001/bus",
                "notify-send",
                "--",
                value.as_str(),
                value.as_str(),
            ]
        );
        std::fs::remove_dir_all(stage.path("calls")).unwrap();
        std::fs::create_dir(stage.path("calls")).unwrap();
    }
    assert!(!stage.pwned().exists(), "a message ran");
}
