//! How a tunnel's packets travel: WebSocket frames, or a legacy pair of
//! HTTP channels (an `RDG_OUT_DATA` response and an `RDG_IN_DATA` chunked
//! body) matched by their connection id.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Bytes, Message};

use super::GatewayConfig;
use super::head::{BodyReader, InBody, Request};
use crate::door::{Outcome, Report};
use crate::front_door::RELAY_BUFFER_BYTES;
use crate::https::{BoxIo, HeadError, answer_status, read_head, within};
use crate::sources::SourceGuard;
use crate::tsgu::packet::MAX_PACKET_BYTES;

/// How much tungstenite reads at once from a WebSocket tunnel.
const WEBSOCKET_READ_BUFFER_BYTES: usize = 16 * 1024;

/// The WebSocket frames' bounds: a message holds at most a few packets.
pub(super) fn websocket_config() -> WebSocketConfig {
    WebSocketConfig::default()
        // tungstenite zero-fills up to its read buffer size before every
        // read: with its default of 128 KiB, each small RDP packet from the
        // client cost a 128 KiB memset (15 % of a storm's CPU, measured).
        // 16 KiB is one TLS record; a larger frame still grows the buffer.
        .read_buffer_size(WEBSOCKET_READ_BUFFER_BYTES)
        .max_message_size(Some(4 * MAX_PACKET_BYTES))
        .max_frame_size(Some(4 * MAX_PACKET_BYTES))
}

/// Legacy OUT channels waiting for their IN channel, by connection id,
/// bounded in total and per source (see [`MAX_WAITING_OUT_CHANNELS`](super::MAX_WAITING_OUT_CHANNELS)).
#[derive(Default)]
pub struct Pairing {
    waiting: std::sync::Mutex<PairingTable>,
}

#[derive(Default)]
struct PairingTable {
    /// Each waiting OUT channel: its source, its own number (so that it
    /// removes only itself), and where its IN channel is to be sent.
    channels: HashMap<String, Waiting>,
    /// How many OUT channels each source has waiting.
    per_source: HashMap<IpAddr, usize>,
    next: u64,
}

/// An OUT channel waiting for its IN channel.
struct Waiting {
    source: IpAddr,
    number: u64,
    /// The Windows-signed-in user of the OUT channel, whom its IN channel
    /// must be signed in as too (None: a ticket client's).
    user: Option<String>,
    sender: oneshot::Sender<InHalf>,
}

impl PairingTable {
    fn forget(&mut self, source: IpAddr) {
        if let Some(n) = self.per_source.get_mut(&source) {
            *n -= 1;
            if *n == 0 {
                self.per_source.remove(&source);
            }
        }
    }
}

/// An IN channel handed to its OUT channel: the stream, the body bytes
/// already read, and the body's framing.
pub(super) struct InHalf {
    pub(super) stream: BoxIo,
    pub(super) rest: Vec<u8>,
    pub(super) body: InBody,
    /// The IN connection's own per-source count, kept while it lives.
    pub(super) source: SourceGuard,
}

impl Pairing {
    fn lock(&self) -> std::sync::MutexGuard<'_, PairingTable> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers an OUT channel of `source` under `id`: its number, or why
    /// it may not wait (`deskbroker_rdg_tunnels_total`'s detail).
    pub(super) fn register(
        &self,
        id: &str,
        source: IpAddr,
        user: Option<&str>,
        sender: oneshot::Sender<InHalf>,
        config: &GatewayConfig,
    ) -> Result<u64, &'static str> {
        let mut table = self.lock();
        if table.channels.contains_key(id) {
            return Err("an RDG-Connection-Id already waiting");
        }
        if table.channels.len() >= config.max_waiting_out_channels {
            return Err("too many OUT channels waiting");
        }
        let mine = table.per_source.get(&source).copied().unwrap_or(0);
        if mine >= config.max_waiting_out_channels_per_source {
            return Err("too many OUT channels of this source waiting");
        }
        table.next += 1;
        let number = table.next;
        let user = user.map(str::to_string);
        let waiting = Waiting {
            source,
            number,
            user,
            sender,
        };
        table.channels.insert(id.to_string(), waiting);
        *table.per_source.entry(source).or_insert(0) += 1;
        Ok(number)
    }

    /// Takes the OUT channel waiting under `id` for its IN channel,
    /// signed in as `user`: an OUT channel of a Windows-signed-in user
    /// pairs only with an IN channel of the same user (and is left waiting
    /// for it otherwise).
    fn take(&self, id: &str, user: Option<&str>) -> Option<oneshot::Sender<InHalf>> {
        let mut table = self.lock();
        let waiting = table.channels.get(id)?;
        if waiting.user.is_some() && waiting.user.as_deref() != user {
            return None;
        }
        let waiting = table.channels.remove(id)?;
        table.forget(waiting.source);
        Some(waiting.sender)
    }

    /// Removes OUT channel `number` under `id` if it still waits.
    pub(super) fn cancel(&self, id: &str, number: u64) {
        let mut table = self.lock();
        if table.channels.get(id).is_some_and(|w| w.number == number)
            && let Some(waiting) = table.channels.remove(id)
        {
            table.forget(waiting.source);
        }
    }
}

/// How the tunnel's packets travel.
pub(super) enum Link {
    /// Both ways in binary WebSocket messages on one connection.
    Ws(Box<WebSocketStream<BoxIo>>),
    /// The client's packets in the body of `RDG_IN_DATA`, the gateway's raw
    /// on the `RDG_OUT_DATA` connection.
    Legacy {
        out: BoxIo,
        input: BoxIo,
        body: BodyReader,
        buf: Vec<u8>,
        _in_source: SourceGuard,
    },
}

impl Link {
    /// The client's next bytes of packets; `None` when it has gone.
    pub(super) async fn recv(&mut self) -> Result<Option<Vec<u8>>, String> {
        match self {
            Link::Ws(ws) => loop {
                match ws.next().await {
                    None | Some(Ok(Message::Close(_))) => return Ok(None),
                    Some(Err(e)) => return Err(format!("websocket: {e}")),
                    Some(Ok(Message::Binary(bytes))) => return Ok(Some(bytes.to_vec())),
                    Some(Ok(_)) => {} // ping (answered by the library), pong, text
                }
            },
            Link::Legacy {
                input, body, buf, ..
            } => loop {
                if !buf.is_empty() {
                    let mut out = Vec::new();
                    body.feed(buf, &mut out)?;
                    buf.clear();
                    if !out.is_empty() {
                        return Ok(Some(out));
                    }
                }
                if body.done() {
                    return Ok(None);
                }
                buf.reserve(RELAY_BUFFER_BYTES);
                match input.read_buf(buf).await {
                    Ok(0) => return Ok(None),
                    Ok(_) => {}
                    Err(e) => return Err(format!("in channel: {e}")),
                }
            },
        }
    }

    pub(super) async fn send(&mut self, bytes: Vec<u8>) -> Result<(), String> {
        match self {
            Link::Ws(ws) => ws
                .send(Message::Binary(Bytes::from(bytes)))
                .await
                .map_err(|e| format!("websocket: {e}")),
            Link::Legacy { out, .. } => out
                .write_all(&bytes)
                .await
                .map_err(|e| format!("out channel: {e}")),
        }
    }

    pub(super) async fn close(&mut self) {
        match self {
            Link::Ws(ws) => {
                let _ = WebSocketStream::close(ws, None).await;
            }
            Link::Legacy { out, input, .. } => {
                let _ = out.shutdown().await;
                let _ = input.shutdown().await;
            }
        }
    }
}

/// An `RDG_IN_DATA` connection: after FreeRDP's empty request (answered
/// 200), its chunked one; then handed to its OUT channel's task.
#[allow(clippy::too_many_arguments)]
pub(super) async fn in_channel(
    mut stream: BoxIo,
    mut rest: Vec<u8>,
    (connection_id, user): (String, Option<String>),
    mut body: InBody,
    (deadline, idle): (Instant, Duration),
    pairing: &Pairing,
    source: SourceGuard,
    report: &mut Report,
) -> Outcome {
    if body == InBody::Length(0) {
        let answer = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        match within(idle, deadline, "answering RDG_IN_DATA", report, answer).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                report.detail = Some(e.to_string());
                return Outcome::BadRequest;
            }
            Err(outcome) => return outcome,
        }
        let next = async {
            let (head, rest) = read_head(&mut stream, rest, idle).await?;
            Ok::<_, HeadError>((Request::of(&head)?, rest))
        };
        match tokio::time::timeout_at(deadline.into(), next).await {
            Ok(Ok((
                Request::In {
                    connection_id: again,
                    body: b,
                },
                r,
            ))) if again == connection_id => {
                body = b;
                rest = r;
            }
            Ok(Ok(_)) => {
                answer_status(&mut stream, "400 Bad Request").await;
                report.detail = Some("the second RDG_IN_DATA is not the first's".into());
                return Outcome::BadRequest;
            }
            Ok(Err(e @ HeadError::Idle(_))) => {
                report.detail = Some(e.to_string());
                return Outcome::Idle;
            }
            Ok(Err(e)) => {
                answer_status(&mut stream, "400 Bad Request").await;
                report.detail = Some(e.to_string());
                return Outcome::BadRequest;
            }
            Err(_) => return Outcome::Timeout,
        }
    }
    let Some(out) = pairing.take(&connection_id, user.as_deref()) else {
        answer_status(&mut stream, "404 Not Found").await;
        report.detail = Some(format!(
            "no RDG_OUT_DATA of this user waits for {connection_id}"
        ));
        return Outcome::BadRequest;
    };
    // The IN channel is never answered by a host: not a handshake to count.
    source.answered();
    match out.send(InHalf {
        stream,
        rest,
        body,
        source,
    }) {
        Ok(()) => Outcome::Paired,
        Err(_) => Outcome::Timeout,
    }
}
