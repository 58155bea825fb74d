//! What an RD Gateway request asks for, read from a request head (which
//! the HTTPS front has read and bounded, `crate::https`), and the chunked
//! body of a legacy `RDG_IN_DATA` channel, strictly bounded.

use super::GATEWAY_PATH;
use crate::https::{Framing, Head, HeadError};

/// What an RD Gateway request head asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// `RDG_OUT_DATA` with `Upgrade: websocket`: the whole tunnel on this
    /// connection. The key is taken as sent (FreeRDP 2's is 15 characters
    /// and not base64: it is only ever hashed).
    WebSocket { key: String },
    /// Legacy `RDG_OUT_DATA`: the gateway's half of a tunnel (answered 200,
    /// a 10-byte seed, then the gateway's packets with no framing).
    Out { connection_id: String },
    /// Legacy `RDG_IN_DATA`: the client's half, its packets in the body.
    In { connection_id: String, body: InBody },
}

impl Request {
    /// Whether `other` asks for the same: the same kind of request, and a
    /// legacy channel's same connection id (an NTLM sign-in's second
    /// request must be its first's).
    pub fn same_kind(&self, other: &Request) -> bool {
        match (self, other) {
            (Request::WebSocket { .. }, Request::WebSocket { .. }) => true,
            (Request::Out { connection_id: a }, Request::Out { connection_id: b }) => a == b,
            (
                Request::In {
                    connection_id: a, ..
                },
                Request::In {
                    connection_id: b, ..
                },
            ) => a == b,
            _ => false,
        }
    }
}

/// How an `RDG_IN_DATA` request's body is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InBody {
    /// `Transfer-Encoding: chunked`: the packets, in chunks.
    Chunked,
    /// `Content-Length`: that many bytes of packets. FreeRDP 2 first sends
    /// an empty one (answered 200), then the chunked request on the same
    /// connection.
    Length(u64),
}

/// The longest `RDG-Connection-Id` taken (a GUID in braces is 38).
pub const MAX_CONNECTION_ID_BYTES: usize = 64;

impl Request {
    /// What `head` asks of the gateway: refused unless it is
    /// `RDG_OUT_DATA` or `RDG_IN_DATA` of [`GATEWAY_PATH`] (any case), and
    /// a legacy channel names its `RDG-Connection-Id`.
    pub fn of(head: &Head) -> Result<Request, HeadError> {
        if !head.target.eq_ignore_ascii_case(GATEWAY_PATH) {
            return Err(head.not_served());
        }
        let connection_id = || {
            head.header("RDG-Connection-Id")
                .filter(|id| {
                    !id.is_empty()
                        && id.len() <= MAX_CONNECTION_ID_BYTES
                        && id.bytes().all(|b| b.is_ascii_graphic())
                })
                .map(str::to_string)
                .ok_or(HeadError::NoConnectionId)
        };
        Ok(match head.method.as_str() {
            "RDG_OUT_DATA" => match head.websocket_key() {
                Some(key) => Request::WebSocket { key: key.into() },
                None => Request::Out {
                    connection_id: connection_id()?,
                },
            },
            "RDG_IN_DATA" => Request::In {
                connection_id: connection_id()?,
                body: match head.framing {
                    Framing::Chunked => InBody::Chunked,
                    Framing::Length(n) => InBody::Length(n),
                    Framing::None => InBody::Length(0),
                },
            },
            _ => return Err(head.not_served()),
        })
    }
}

/// Reads an `RDG_IN_DATA` body: HTTP/1.1 chunks (RFC 9112 §7.1; sizes of
/// at most 8 hex digits, lines of at most 64 bytes, extensions ignored,
/// trailers not read: the last chunk ends the tunnel), or a length.
#[derive(Debug)]
pub struct BodyReader {
    state: BodyState,
    line: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyState {
    Size,
    Data(u64),
    DataEnd(u8),
    Identity(u64),
    Done,
}

impl BodyReader {
    pub fn new(body: InBody) -> BodyReader {
        BodyReader {
            state: match body {
                InBody::Chunked => BodyState::Size,
                InBody::Length(0) => BodyState::Done,
                InBody::Length(n) => BodyState::Identity(n),
            },
            line: Vec::new(),
        }
    }

    /// Whether the body has ended.
    pub fn done(&self) -> bool {
        self.state == BodyState::Done
    }

    /// Takes the body's next bytes; appends the payload to `out`. Bytes
    /// after the end are refused.
    pub fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        while !input.is_empty() {
            match self.state {
                BodyState::Done => return Err("bytes after the end of the body".into()),
                BodyState::Identity(n) | BodyState::Data(n) => {
                    let take = (n.min(input.len() as u64)) as usize;
                    out.extend_from_slice(&input[..take]);
                    input = &input[take..];
                    let left = n - take as u64;
                    self.state = match (self.state, left) {
                        (BodyState::Identity(_), 0) => BodyState::Done,
                        (BodyState::Identity(_), n) => BodyState::Identity(n),
                        (_, 0) => BodyState::DataEnd(0),
                        (_, n) => BodyState::Data(n),
                    };
                }
                BodyState::DataEnd(seen) => {
                    let want = if seen == 0 { b'\r' } else { b'\n' };
                    if input[0] != want {
                        return Err("a chunk not followed by CR LF".into());
                    }
                    input = &input[1..];
                    self.state = if seen == 0 {
                        BodyState::DataEnd(1)
                    } else {
                        BodyState::Size
                    };
                }
                BodyState::Size => {
                    let b = input[0];
                    input = &input[1..];
                    self.line.push(b);
                    if self.line.len() > 64 {
                        return Err("a chunk size line longer than 64 bytes".into());
                    }
                    if !self.line.ends_with(b"\r\n") {
                        continue;
                    }
                    let line = &self.line[..self.line.len() - 2];
                    let hex = line.split(|&c| c == b';').next().unwrap_or_default();
                    let size = std::str::from_utf8(hex)
                        .ok()
                        .map(str::trim)
                        .filter(|h| !h.is_empty() && h.len() <= 8)
                        .and_then(|h| u64::from_str_radix(h, 16).ok())
                        .ok_or_else(|| {
                            format!("a bad chunk size {:?}", String::from_utf8_lossy(line))
                        })?;
                    self.line.clear();
                    self.state = if size == 0 {
                        BodyState::Done
                    } else {
                        BodyState::Data(size)
                    };
                }
            }
        }
        Ok(())
    }
}
