//! A request head on the HTTPS listener, read strictly and within bounds,
//! before anything routes it.
//!
//! How long a request's body is must be read the same way here and by any
//! proxy in front, or bytes one of them takes for a body the other takes
//! for the next request on the connection (request smuggling). So a head
//! whose framing could be read two ways is refused (400, then the
//! connection is closed), whatever it asks for: `Transfer-Encoding` other
//! than one `chunked`, `Transfer-Encoding` with `Content-Length`, more than
//! one `Content-Length`, or one that is not plain digits. An endpoint whose
//! requests have no body (the browser's page and `/web/rdp`) refuses one
//! that carries a body the same way ([`Head::bodiless`]), never reading it
//! as the next request.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use super::MAX_HEAD_BYTES;

/// The most header fields read from one head.
const MAX_HEADERS: usize = 32;

/// The longest `Content-Length` value taken: 19 digits always fit a u64.
const MAX_CONTENT_LENGTH_DIGITS: usize = 19;

/// The longest `Sec-WebSocket-Key` taken (a genuine one is 24 bytes;
/// FreeRDP 2's is 15).
const MAX_WEBSOCKET_KEY_BYTES: usize = 64;

/// One request head: its request line, its header fields and how its body
/// is framed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    /// The method as sent (`GET`, `RDG_OUT_DATA`, …).
    pub method: String,
    /// The request target as sent: the path and any query.
    pub target: String,
    /// The minor version of HTTP/1.x.
    pub version: u8,
    /// The header fields in order: each name, and its value trimmed
    /// (`None` when it is not UTF-8).
    headers: Vec<(String, Option<String>)>,
    /// How the request's body is delimited.
    pub framing: Framing,
}

/// How a request's body is delimited (RFC 9112 §6.3), read strictly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// Neither `Transfer-Encoding` nor `Content-Length`: no body.
    None,
    /// `Content-Length`: that many bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// Why a request head is refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("the request head is longer than {MAX_HEAD_BYTES} bytes")]
    TooLong,
    #[error("not an HTTP request head: {0}")]
    Malformed(String),
    /// No endpoint of the listener takes this method, path and upgrade.
    #[error("{0} {1} is not served here")]
    NotServed(String, String),
    #[error("a legacy request without a usable RDG-Connection-Id")]
    NoConnectionId,
    #[error("a WebSocket upgrade without a usable Sec-WebSocket-Key")]
    NoWebSocketKey,
    #[error("no byte of the request head for {} s", .0.as_secs_f32())]
    Idle(Duration),
    #[error("closed before a request began")]
    Closed,
    /// The body's length could be read two ways (see the module's
    /// documentation).
    #[error("the request's body length is ambiguous: {0}")]
    Framing(&'static str),
    /// A request whose endpoint takes no body, with one.
    #[error("{0} {1} with a body (the browser's requests have none)")]
    Body(String, String),
}

impl Head {
    /// The value of the first header field named `name` (any case), when
    /// it is UTF-8.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| v.as_deref())
    }

    /// The path: the target without its query.
    pub fn path(&self) -> &str {
        self.target
            .split_once('?')
            .map_or(self.target.as_str(), |(p, _)| p)
    }

    /// Whether the head asks to upgrade to a WebSocket (`Upgrade:
    /// websocket`).
    pub fn upgrades_to_websocket(&self) -> bool {
        self.header("Upgrade")
            .is_some_and(|u| u.eq_ignore_ascii_case("websocket"))
    }

    /// The `Sec-WebSocket-Key` of a WebSocket upgrade, taken as sent
    /// (it is only ever hashed): `None` without an upgrade, or with a key
    /// empty or over 64 bytes.
    pub fn websocket_key(&self) -> Option<&str> {
        self.header("Sec-WebSocket-Key")
            .filter(|k| !k.is_empty() && k.len() <= MAX_WEBSOCKET_KEY_BYTES)
            .filter(|_| self.upgrades_to_websocket())
    }

    /// Refuses a head that carries a body (an empty one is none), for an
    /// endpoint whose requests have none (see the module's documentation).
    pub fn bodiless(&self) -> Result<(), HeadError> {
        match self.framing {
            Framing::None | Framing::Length(0) => Ok(()),
            Framing::Length(_) | Framing::Chunked => {
                Err(HeadError::Body(self.method.clone(), self.target.clone()))
            }
        }
    }

    /// Whether the client keeps the connection for another request:
    /// HTTP/1.1 does, unless it says `Connection: close`.
    pub fn keep_alive(&self) -> bool {
        self.version == 1
            && !self.header("Connection").is_some_and(|c| {
                c.split(',')
                    .any(|token| token.trim().eq_ignore_ascii_case("close"))
            })
    }

    /// The refusal of a head no endpoint takes.
    pub fn not_served(&self) -> HeadError {
        HeadError::NotServed(self.method.clone(), self.target.clone())
    }
}

/// Reads the body's framing from `headers`, refusing any that a proxy
/// could read otherwise (see the module's documentation).
fn framing(headers: &[httparse::Header<'_>]) -> Result<Framing, HeadError> {
    let named = |name: &'static str| {
        headers
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name))
            .map(|h| std::str::from_utf8(h.value).map(str::trim))
    };
    let encodings: Vec<_> = named("Transfer-Encoding").collect();
    let lengths: Vec<_> = named("Content-Length").collect();
    match (encodings.as_slice(), lengths.as_slice()) {
        ([], []) => Ok(Framing::None),
        ([Ok(coding)], []) if coding.eq_ignore_ascii_case("chunked") => Ok(Framing::Chunked),
        ([_], []) => Err(HeadError::Framing("a Transfer-Encoding other than chunked")),
        ([], [length]) => length
            .ok()
            .filter(|l| {
                !l.is_empty()
                    && l.len() <= MAX_CONTENT_LENGTH_DIGITS
                    && l.bytes().all(|b| b.is_ascii_digit())
            })
            .and_then(|l| l.parse().ok())
            .map(Framing::Length)
            .ok_or(HeadError::Framing("a Content-Length that is not a number")),
        ([], _) => Err(HeadError::Framing("more than one Content-Length")),
        (_, []) => Err(HeadError::Framing("more than one Transfer-Encoding")),
        _ => Err(HeadError::Framing(
            "both Transfer-Encoding and Content-Length",
        )),
    }
}

/// Reads an HTTP request head from `bytes`: `Ok(None)` while incomplete,
/// else the head and how many bytes it took. At most [`MAX_HEAD_BYTES`]
/// and 32 header fields; a body's framing that could be read two ways is
/// refused here, before any endpoint sees the head.
pub fn parse_head(bytes: &[u8]) -> Result<Option<(Head, usize)>, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let taken = match request.parse(bytes) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if bytes.len() >= MAX_HEAD_BYTES => {
            return Err(HeadError::TooLong);
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(HeadError::Malformed(e.to_string())),
    };
    if taken > MAX_HEAD_BYTES {
        return Err(HeadError::TooLong);
    }
    let framing = framing(request.headers)?;
    let head = Head {
        method: request.method.unwrap_or_default().to_string(),
        target: request.path.unwrap_or_default().to_string(),
        version: request.version.unwrap_or_default(),
        headers: request
            .headers
            .iter()
            .map(|h| {
                let value = std::str::from_utf8(h.value).ok().map(str::trim);
                (h.name.to_string(), value.map(str::to_string))
            })
            .collect(),
        framing,
    };
    Ok(Some((head, taken)))
}

/// Reads a request head off `stream`, after the bytes already read
/// (`buf`), within [`MAX_HEAD_BYTES`], each read within `idle`. Returns the
/// head and whatever bytes came after it.
pub(crate) async fn read_head<S: AsyncRead + Unpin + ?Sized>(
    stream: &mut S,
    mut buf: Vec<u8>,
    idle: Duration,
) -> Result<(Head, Vec<u8>), HeadError> {
    loop {
        if let Some((head, taken)) = parse_head(&buf)? {
            return Ok((head, buf.split_off(taken)));
        }
        if buf.len() >= MAX_HEAD_BYTES {
            return Err(HeadError::TooLong);
        }
        let n = tokio::time::timeout(idle, stream.read_buf(&mut buf))
            .await
            .map_err(|_| HeadError::Idle(idle))?
            .map_err(|e| HeadError::Malformed(e.to_string()))?;
        if n == 0 {
            if buf.is_empty() {
                return Err(HeadError::Closed);
            }
            return Err(HeadError::Malformed("closed before the head ended".into()));
        }
    }
}
