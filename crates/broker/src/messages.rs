//! Messages to the users of sessions (`POST …/userSessions/{id}/sendMessage`,
//! and the scaling plan's ramp-down notifications, rule A5): a message
//! waits, per session host, in a bounded queue in the broker's memory and is
//! handed to that host's agent in the answer to its next heartbeat, which
//! shows it to the user (`deskbroker agent --message-command`).
//!
//! [`Messages`] is the service: it owns the queues and takes the core only
//! to read where a session is (it changes nothing durable, so it never
//! writes or commits).
//!
//! A message is a courtesy, not a record: the queue is **not durable**. A
//! message not yet fetched is lost when the leading broker stops (a new
//! leader starts with empty queues), when it waits longer than
//! [`MESSAGE_TTL`] by the broker's clock (a host that does not beat), and when the heartbeat
//! answer that carries it is lost (delivery is at most once). What counts in
//! a ramp-down is the logoff after the wait, which does not depend on it.
//!
//! Only the host the session is on receives the message: queues are keyed
//! by pool and host, and a heartbeat (which only that host's credential, or
//! the admin, may send) takes only its own host's queue. A message whose
//! session ended, or moved to another host, before it was fetched is
//! dropped, not given to the old host.
//!
//! Bounds: [`MAX_MESSAGES_PER_HOST`] waiting per host and
//! [`MAX_QUEUED_MESSAGES`] in all; beyond either, a new message is
//! **refused** (429 `TooManyRequests`) rather than pushing out an older
//! one, so a sender learns that its message was not queued and nothing
//! already accepted is silently lost. Titles and texts are bounded
//! ([`MAX_TITLE_CHARS`], [`MAX_MESSAGE_CHARS`]) and carry no control
//! characters (but newlines in the text), so a message cannot rewrite a
//! terminal or a log line on the host.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::types::HostMessage;
use placement::TimestampMs;

use crate::core::Core;
use crate::error::BrokerError;
use crate::sync::MutexExt;

/// Longest title, in characters.
pub const MAX_TITLE_CHARS: usize = 256;
/// Longest message text, in characters.
pub const MAX_MESSAGE_CHARS: usize = 4096;
/// Messages waiting for one host at most; beyond it new ones are refused.
pub const MAX_MESSAGES_PER_HOST: usize = 64;
/// Messages waiting for all hosts at most; beyond it new ones are refused.
pub const MAX_QUEUED_MESSAGES: usize = 10_000;
/// How long a message waits for its host's heartbeat before it is dropped:
/// a notice that a session ends in N minutes is of no use much later.
pub const MESSAGE_TTL: Duration = Duration::from_secs(10 * 60);

#[derive(Debug)]
struct Queued {
    message: HostMessage,
    /// By the broker's clock.
    queued_at: TimestampMs,
}

/// The waiting messages, per (pool, host). A std mutex held for queue
/// operations only, never across an await.
#[derive(Debug, Default)]
pub struct MessageQueues {
    inner: Mutex<Queues>,
}

#[derive(Debug, Default)]
struct Queues {
    hosts: HashMap<(String, String), VecDeque<Queued>>,
    total: usize,
}

impl Queues {
    /// Drops every expired message (queues are in arrival order, so each
    /// one's expired messages are at its front).
    fn expire(&mut self, now: TimestampMs) {
        let ttl_ms = MESSAGE_TTL.as_millis() as i64;
        let mut dropped = 0;
        self.hosts.retain(|_, q| {
            while q
                .front()
                .is_some_and(|m| now.saturating_sub(m.queued_at) >= ttl_ms)
            {
                q.pop_front();
                dropped += 1;
            }
            !q.is_empty()
        });
        if dropped > 0 {
            metrics::counter!("deskbroker_messages_expired_total").increment(dropped as u64);
        }
        self.total -= dropped;
    }
}

impl MessageQueues {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queues> {
        self.inner.lock_or_recover()
    }

    /// Queues `message` for `host`, or refuses it when a bound is reached.
    pub fn push(
        &self,
        pool: &str,
        host: &str,
        message: HostMessage,
        now: TimestampMs,
    ) -> Result<(), BrokerError> {
        let mut q = self.lock();
        q.expire(now);
        if q.total >= MAX_QUEUED_MESSAGES {
            return Err(BrokerError::TooManyRequests(format!(
                "{MAX_QUEUED_MESSAGES} messages are waiting for their hosts' heartbeats; \
                 retry later"
            )));
        }
        let queue = q
            .hosts
            .entry((pool.to_string(), host.to_string()))
            .or_default();
        if queue.len() >= MAX_MESSAGES_PER_HOST {
            return Err(BrokerError::TooManyRequests(format!(
                "{MAX_MESSAGES_PER_HOST} messages are waiting for session host {host}'s next \
                 heartbeat; retry later"
            )));
        }
        queue.push_back(Queued {
            message,
            queued_at: now,
        });
        q.total += 1;
        Ok(())
    }

    /// Takes every message waiting for `host` (oldest first).
    pub fn take(&self, pool: &str, host: &str, now: TimestampMs) -> Vec<HostMessage> {
        let mut q = self.lock();
        q.expire(now);
        let Some(queue) = q.hosts.remove(&(pool.to_string(), host.to_string())) else {
            return Vec::new();
        };
        q.total -= queue.len();
        queue.into_iter().map(|m| m.message).collect()
    }

    /// Messages waiting in all.
    pub fn len(&self) -> usize {
        self.lock().total
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Checks a title or a text: not blank, at most `max` characters, no
/// control characters (newlines allowed where `newlines`).
fn check_text(what: &str, value: &str, max: usize, newlines: bool) -> Result<(), BrokerError> {
    if value.trim().is_empty() {
        return Err(BrokerError::Invalid(format!("{what}: must not be empty")));
    }
    let chars = value.chars().count();
    if chars > max {
        return Err(BrokerError::Invalid(format!(
            "{what}: {chars} characters; at most {max}"
        )));
    }
    if let Some(c) = value
        .chars()
        .find(|&c| c.is_control() && !(newlines && c == '\n'))
    {
        return Err(BrokerError::Invalid(format!(
            "{what}: contains the control character U+{:04X}; {}",
            c as u32,
            if newlines {
                "only newlines are allowed"
            } else {
                "none is allowed"
            }
        )));
    }
    Ok(())
}

/// The messages service: the queues, and the core it reads sessions from.
pub struct Messages {
    /// Read only, to find the host a session is on.
    core: Arc<Core>,
    queues: MessageQueues,
}

impl Messages {
    /// The service over `core`, with empty queues (they are not durable).
    pub fn new(core: Arc<Core>) -> Messages {
        Messages {
            core,
            queues: MessageQueues::default(),
        }
    }

    /// Queues a message for the user of session `session_id` of `pool`, for
    /// the host the session is on; its agent shows it after its next
    /// heartbeat. Refused when the title or text is out of bounds (400), the
    /// pool or session does not exist (404), or the queues are full (429).
    /// Not durable: see the module's documentation.
    pub async fn send(
        &self,
        pool: &str,
        session_id: &str,
        title: &str,
        message: &str,
    ) -> Result<(), BrokerError> {
        self.queue(pool, session_id, title, message)
            .await
            .map(|_| ())
    }

    /// [`Messages::send`], answering the message as queued and the host it
    /// waits for.
    pub async fn queue(
        &self,
        pool: &str,
        session_id: &str,
        title: &str,
        message: &str,
    ) -> Result<(HostMessage, String), BrokerError> {
        check_text("title", title, MAX_TITLE_CHARS, false)?;
        check_text("message", message, MAX_MESSAGE_CHARS, true)?;
        let (host, user) = self
            .core
            .read(pool, |p| {
                let s = p.find_session(session_id)?;
                Ok((s.host.clone(), s.user.clone()))
            })
            .await?;
        let queued = HostMessage {
            id: uuid::Uuid::now_v7().to_string(),
            session_id: session_id.to_string(),
            user,
            title: title.to_string(),
            message: message.to_string(),
        };
        self.queues
            .push(pool, &host, queued.clone(), self.core.now_ms())?;
        metrics::counter!("deskbroker_messages_queued_total").increment(1);
        tracing::info!(
            pool,
            host,
            session = session_id,
            message_id = %queued.id,
            "message queued for the session's host"
        );
        Ok((queued, host))
    }

    /// The messages waiting for `host` whose sessions are still on it, for
    /// its heartbeat's answer. Messages of sessions that ended or moved are
    /// dropped.
    pub(crate) fn take_for(&self, pool: &str, host: &str) -> Vec<HostMessage> {
        let waiting = self.queues.take(pool, host, self.core.now_ms());
        if waiting.is_empty() {
            return waiting;
        }
        let kept: Vec<HostMessage> = self
            .core
            .peek(pool, |p| {
                Ok(waiting
                    .into_iter()
                    .filter(|m| p.find_session(&m.session_id).is_ok_and(|s| s.host == host))
                    .collect())
            })
            .unwrap_or_default();
        metrics::counter!("deskbroker_messages_delivered_total").increment(kept.len() as u64);
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(id: &str) -> HostMessage {
        HostMessage {
            id: id.into(),
            session_id: "s".into(),
            user: "u".into(),
            title: "t".into(),
            message: "m".into(),
        }
    }

    #[test]
    fn a_host_takes_its_own_messages_once_in_order() {
        let q = MessageQueues::default();
        let t0: TimestampMs = 1_796_083_200_000;
        q.push("p", "h1", msg("a"), t0).unwrap();
        q.push("p", "h1", msg("b"), t0).unwrap();
        q.push("p", "h2", msg("c"), t0).unwrap();
        q.push("other", "h1", msg("d"), t0).unwrap();
        let ids = |v: Vec<HostMessage>| v.into_iter().map(|m| m.id).collect::<Vec<_>>();
        assert_eq!(ids(q.take("p", "h1", t0)), ["a", "b"]);
        assert!(q.take("p", "h1", t0).is_empty(), "taken once");
        assert_eq!(ids(q.take("p", "h2", t0)), ["c"]);
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn a_full_host_queue_refuses_and_keeps_what_it_has() {
        let q = MessageQueues::default();
        let t0: TimestampMs = 1_796_083_200_000;
        for i in 0..MAX_MESSAGES_PER_HOST {
            q.push("p", "h", msg(&i.to_string()), t0).unwrap();
        }
        let e = q.push("p", "h", msg("late"), t0).unwrap_err();
        assert_eq!(e.code(), api::ErrorCode::TooManyRequests);
        // Another host is not held back.
        q.push("p", "h2", msg("x"), t0).unwrap();
        let got = q.take("p", "h", t0);
        assert_eq!(got.len(), MAX_MESSAGES_PER_HOST);
        assert_eq!(got[0].id, "0");
    }

    #[test]
    fn the_total_bound_holds_across_hosts() {
        let q = MessageQueues::default();
        let t0: TimestampMs = 1_796_083_200_000;
        for i in 0..MAX_QUEUED_MESSAGES {
            q.push(
                "p",
                &format!("h{}", i / MAX_MESSAGES_PER_HOST),
                msg("m"),
                t0,
            )
            .unwrap();
        }
        let e = q.push("p", "fresh", msg("m"), t0).unwrap_err();
        assert_eq!(e.code(), api::ErrorCode::TooManyRequests);
        assert_eq!(q.len(), MAX_QUEUED_MESSAGES);
    }

    #[test]
    fn messages_expire() {
        let q = MessageQueues::default();
        let t0: TimestampMs = 1_796_083_200_000;
        q.push("p", "h", msg("old"), t0).unwrap();
        let ttl_ms = MESSAGE_TTL.as_millis() as i64;
        q.push("p", "h", msg("new"), t0 + ttl_ms / 2).unwrap();
        assert_eq!(q.len(), 2, "kept until its time to live is over");
        let got = q.take("p", "h", t0 + ttl_ms);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].id, "new");
        assert!(q.is_empty());
    }

    #[test]
    fn titles_and_texts_are_bounded_and_free_of_control_characters() {
        assert!(check_text("title", "Maintenance", MAX_TITLE_CHARS, false).is_ok());
        assert!(check_text("message", "line 1\nline 2", MAX_MESSAGE_CHARS, true).is_ok());
        for (value, newlines) in [
            ("", false),
            ("   ", false),
            ("a\nb", false),
            ("bell\u{7}", true),
            ("esc \u{1b}[2J", true),
            ("cr\r", true),
            ("tab\t", true),
            ("nul\0", true),
            ("del\u{7f}", true),
        ] {
            let e = check_text("x", value, 100, newlines).unwrap_err();
            assert_eq!(e.code(), api::ErrorCode::InvalidParameter, "{value:?}");
        }
        let long = "é".repeat(MAX_TITLE_CHARS + 1);
        assert!(check_text("title", &long, MAX_TITLE_CHARS, false).is_err());
        assert!(
            check_text(
                "title",
                &long[..MAX_TITLE_CHARS * 2],
                MAX_TITLE_CHARS,
                false
            )
            .is_ok()
        );
    }
}
