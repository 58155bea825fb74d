//! Messages for the users of this host's sessions, which the broker hands
//! over in heartbeat answers (`sendMessage`, and a scaling plan's ramp-down
//! notice): `--message-command CMD` shows each one, e.g. with `notify-send`,
//! `wall` or, on xrdp, `xmessage`.
//!
//! The command runs through `sh -c CMD` with the message in its environment
//! — `DESKBROKER_MESSAGE_TITLE`, `DESKBROKER_MESSAGE_TEXT`,
//! `DESKBROKER_USER`, `DESKBROKER_SESSION_ID` — never interpolated into the
//! command line, so no text a sender writes is ever parsed by the shell.
//! Besides these it sees only the agent's
//! [`INHERITED_ENV`](crate::orders::INHERITED_ENV) (`PATH`, `HOME`, …),
//! never the registration token or another variable the agent has.
//! It runs under [`MESSAGE_COMMAND_TIMEOUT`] with bounded output, one
//! message at a time in a task of its own, so a slow command never delays
//! a heartbeat; at most [`MAX_PENDING_MESSAGES`] wait for it, and beyond
//! that a message is dropped with a log line. Each message gives one log
//! line. Without the flag, messages are logged and dropped.

use std::time::Duration;

use api::types::HostMessage;
use tokio::sync::mpsc;

use crate::probe;

/// How long one run of the message command may take before it is killed.
pub const MESSAGE_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// What the message command may print (it is read and dropped; more is an
/// error, as with every program the agent runs).
const OUTPUT_BYTES_MAX: usize = 4 * 1024;

/// Messages received and not yet shown, at most.
pub const MAX_PENDING_MESSAGES: usize = 256;

/// Variables a message's command gets besides the message's own: the
/// watching agent names the host and its Windows session id (rule W5).
pub type Env = Vec<(&'static str, String)>;

/// Hands received messages to the message command, or logs and drops them
/// when there is none.
#[derive(Debug)]
pub struct Messenger {
    sender: Option<mpsc::Sender<(HostMessage, Env)>>,
    worker: Option<tokio::task::JoinHandle<()>>,
}

impl Messenger {
    /// Starts the worker that runs `command` (None: messages are dropped).
    pub fn start(command: Option<String>, timeout: Duration) -> Messenger {
        let Some(command) = command else {
            return Messenger {
                sender: None,
                worker: None,
            };
        };
        let (sender, mut receiver) = mpsc::channel::<(HostMessage, Env)>(MAX_PENDING_MESSAGES);
        let worker = tokio::spawn(async move {
            while let Some((m, env)) = receiver.recv().await {
                show(&command, &m, &env, timeout).await;
            }
        });
        Messenger {
            sender: Some(sender),
            worker: Some(worker),
        }
    }

    /// Takes the messages of one heartbeat answer.
    pub fn deliver(&self, messages: Vec<HostMessage>) {
        self.deliver_with(messages, |_| Env::new());
    }

    /// Takes the messages of one heartbeat answer, each with the extra
    /// variables `env` gives for it.
    pub fn deliver_with(&self, messages: Vec<HostMessage>, env: impl Fn(&HostMessage) -> Env) {
        for m in messages {
            match &self.sender {
                None => tracing::info!(
                    message_id = %m.id,
                    session = %m.session_id,
                    user = %m.user,
                    "message received for a user, not shown: the agent has no --message-command"
                ),
                Some(sender) => {
                    let extra = env(&m);
                    if let Err(e) = sender.try_send((m, extra)) {
                        let (m, _) = match e {
                            mpsc::error::TrySendError::Full(m)
                            | mpsc::error::TrySendError::Closed(m) => m,
                        };
                        tracing::warn!(
                            message_id = %m.id,
                            session = %m.session_id,
                            user = %m.user,
                            "message dropped: {MAX_PENDING_MESSAGES} messages already wait for \
                             the message command"
                        );
                    }
                }
            }
        }
    }
}

impl Drop for Messenger {
    /// Stops the worker, and a message command it is running (the probe's
    /// process group is killed when its future is dropped).
    fn drop(&mut self) {
        if let Some(w) = self.worker.take() {
            w.abort();
        }
    }
}

/// Runs `command` for message `m` once: `sh -c COMMAND` in a clean
/// environment (the agent's [`INHERITED_ENV`](crate::orders::INHERITED_ENV),
/// then `env`, then the message's variables), with no input, under
/// `timeout` and with bounded output. Ok when it exits 0.
pub async fn run(
    command: &str,
    m: &HostMessage,
    env: &[(&'static str, String)],
    timeout: Duration,
) -> Result<(), probe::ProbeError> {
    let mut all: Env = env.to_vec();
    all.extend([
        ("DESKBROKER_MESSAGE_TITLE", m.title.clone()),
        ("DESKBROKER_MESSAGE_TEXT", m.message.clone()),
        ("DESKBROKER_USER", m.user.clone()),
        ("DESKBROKER_SESSION_ID", m.session_id.clone()),
    ]);
    let cmd = crate::orders::command(command, &all);
    probe::run(cmd, timeout, OUTPUT_BYTES_MAX).await.map(|_| ())
}

/// Runs the command for one message and logs one line about it.
async fn show(command: &str, m: &HostMessage, env: &Env, timeout: Duration) {
    match run(command, m, env, timeout).await {
        Ok(_) => tracing::info!(
            message_id = %m.id,
            session = %m.session_id,
            user = %m.user,
            "message shown to the user"
        ),
        Err(e) => tracing::warn!(
            message_id = %m.id,
            session = %m.session_id,
            user = %m.user,
            "message command `{command}` {e}; the message was not shown"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: &str, title: &str, text: &str) -> HostMessage {
        HostMessage {
            id: id.into(),
            session_id: format!("session-{id}"),
            user: "alice@contoso.com".into(),
            title: title.into(),
            message: text.into(),
        }
    }

    async fn eventually_contains(path: &std::path::Path, want: &str) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            if text.contains(want) || std::time::Instant::now() > deadline {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn the_command_gets_the_message_in_its_environment_never_in_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("shown");
        let command = format!(
            "printf '%s|%s|%s|%s\\n' \"$DESKBROKER_USER\" \"$DESKBROKER_SESSION_ID\" \
             \"$DESKBROKER_MESSAGE_TITLE\" \"$DESKBROKER_MESSAGE_TEXT\" >> {}",
            out.display()
        );
        let m = Messenger::start(Some(command), Duration::from_secs(10));
        let pwned = dir.path().join("pwned");
        let hostile = format!("$(touch {0}) `touch {0}`; touch {0}", pwned.display());
        m.deliver(vec![
            message("1", "Maintenance", "Save your work"),
            message("2", &hostile, &hostile),
        ]);
        let text = eventually_contains(&out, "session-2").await;
        assert!(
            text.contains("alice@contoso.com|session-1|Maintenance|Save your work\n"),
            "{text}"
        );
        assert!(
            text.contains(&format!("|session-2|{hostile}|{hostile}")),
            "{text}"
        );
        assert!(!pwned.exists(), "a message's text was run by the shell");
    }

    #[tokio::test]
    async fn a_failing_or_hanging_command_does_not_stop_the_next_message() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("shown");
        // The first message hangs past the time limit, the second fails,
        // the third is shown.
        let command = format!(
            "case \"$DESKBROKER_MESSAGE_TITLE\" in hang) sleep 600;; fail) exit 3;; esac; \
             echo \"$DESKBROKER_MESSAGE_TITLE\" >> {}",
            out.display()
        );
        let m = Messenger::start(Some(command), Duration::from_millis(300));
        m.deliver(vec![
            message("1", "hang", "x"),
            message("2", "fail", "x"),
            message("3", "shown", "x"),
        ]);
        let text = eventually_contains(&out, "shown").await;
        assert_eq!(text, "shown\n");
    }
}
