//! The HTTP side of an RD Gateway connection: its request head, and the
//! chunked body of a legacy `RDG_IN_DATA` channel, both strictly bounded.
//!
//! How long a request's body is must be read the same way here and by any
//! proxy in front, or bytes one of them takes for a body the other takes
//! for the next request on the connection (request smuggling). So a head
//! whose framing could be read two ways is refused (400, then the
//! connection is closed): `Transfer-Encoding` other than one `chunked`,
//! `Transfer-Encoding` with `Content-Length`, more than one
//! `Content-Length`, or one that is not plain digits. The browser's
//! requests (the page, its files and `/web/rdp`) have no body: one with a
//! body (`Content-Length` above 0, or any `Transfer-Encoding`) is refused
//! the same way, never read as the next request.

use std::time::Duration;

use super::{GATEWAY_PATH, MAX_HEAD_BYTES};
use tokio::io::{AsyncRead, AsyncReadExt};

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
    /// `GET /web/rdp` with `Upgrade: websocket`: a browser's RDCleanPath
    /// connection (`crate::web`), served on the same listener.
    WebRdp { key: String },
    /// `GET` or `HEAD` of the browser's page or one of its files
    /// (`crate::web::page`).
    WebPage(crate::web::page::PageRequest),
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

/// Why a request head is not an RD Gateway request.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("the request head is longer than {MAX_HEAD_BYTES} bytes")]
    TooLong,
    #[error("not an HTTP request head: {0}")]
    Malformed(String),
    #[error("{0} {1} is not an RD Gateway request")]
    NotGateway(String, String),
    #[error("a legacy request without a usable RDG-Connection-Id")]
    NoConnectionId,
    #[error("no byte of the request head for {} s", .0.as_secs_f32())]
    Idle(Duration),
    #[error("closed before a request began")]
    Closed,
    /// The body's length could be read two ways (see the module's
    /// documentation).
    #[error("the request's body length is ambiguous: {0}")]
    Framing(&'static str),
    /// A request of the browser's (the page, its files, `/web/rdp`) that
    /// carries a body.
    #[error("{0} {1} with a body (the browser's requests have none)")]
    Body(String, String),
}

/// How a request's body is delimited (RFC 9112 §6.3), read strictly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    /// Neither `Transfer-Encoding` nor `Content-Length`: no body.
    None,
    Length(u64),
    Chunked,
}

/// The longest `Content-Length` value taken: 19 digits always fit a u64.
const MAX_CONTENT_LENGTH_DIGITS: usize = 19;

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

/// The longest `If-None-Match` read (the page's tags are 34 bytes; a
/// browser sends back the one it was given).
const MAX_IF_NONE_MATCH_BYTES: usize = 256;

/// The longest `RDG-Connection-Id` taken (a GUID in braces is 38).
pub const MAX_CONNECTION_ID_BYTES: usize = 64;

/// Reads an HTTP request head from `bytes`: `Ok(None)` while incomplete,
/// else the request and how many bytes the head took.
pub fn parse_head(bytes: &[u8]) -> Result<Option<(Request, usize)>, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
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
    let method = request.method.unwrap_or_default();
    let path = request.path.unwrap_or_default();
    let not_gateway = || HeadError::NotGateway(method.to_string(), path.to_string());
    let framing = framing(request.headers)?;
    // The browser's requests have no body (see the module's documentation).
    let bodiless = || match framing {
        Framing::None | Framing::Length(0) => Ok(()),
        Framing::Length(_) | Framing::Chunked => {
            Err(HeadError::Body(method.to_string(), path.to_string()))
        }
    };
    let header = |name: &str| {
        request
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .and_then(|h| std::str::from_utf8(h.value).ok())
            .map(str::trim)
    };
    let websocket_key = || {
        header("Sec-WebSocket-Key")
            .filter(|k| !k.is_empty() && k.len() <= 64)
            .filter(|_| header("Upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket")))
            .map(str::to_string)
    };
    // The browser's door: its path, with or without a query.
    let bare_path = path.split_once('?').map_or(path, |(p, _)| p);
    if method == "GET" && bare_path == crate::web::PATH {
        let key = websocket_key().ok_or_else(not_gateway)?;
        bodiless()?;
        return Ok(Some((Request::WebRdp { key }, taken)));
    }
    if (method == "GET" || method == "HEAD")
        && crate::web::page::is_page(bare_path)
        && header("Upgrade").is_none()
    {
        bodiless()?;
        // HTTP/1.1 keeps the connection unless the client says otherwise.
        let keep_alive = request.version == Some(1)
            && !header("Connection").is_some_and(|c| {
                c.split(',')
                    .any(|token| token.trim().eq_ignore_ascii_case("close"))
            });
        let request = Request::WebPage(crate::web::page::PageRequest {
            path: bare_path.to_string(),
            head: method == "HEAD",
            if_none_match: header("If-None-Match")
                .filter(|v| v.len() <= MAX_IF_NONE_MATCH_BYTES)
                .map(str::to_string),
            gzip: header("Accept-Encoding").is_some_and(crate::web::page::takes_gzip),
            keep_alive,
        });
        return Ok(Some((request, taken)));
    }
    if !path.eq_ignore_ascii_case(GATEWAY_PATH) {
        return Err(not_gateway());
    }
    let connection_id = || {
        header("RDG-Connection-Id")
            .filter(|id| {
                !id.is_empty()
                    && id.len() <= MAX_CONNECTION_ID_BYTES
                    && id.bytes().all(|b| b.is_ascii_graphic())
            })
            .map(str::to_string)
            .ok_or(HeadError::NoConnectionId)
    };
    let request = match method {
        "RDG_OUT_DATA" => match websocket_key() {
            Some(key) => Request::WebSocket { key },
            None => Request::Out {
                connection_id: connection_id()?,
            },
        },
        "RDG_IN_DATA" => Request::In {
            connection_id: connection_id()?,
            body: match framing {
                Framing::Chunked => InBody::Chunked,
                Framing::Length(n) => InBody::Length(n),
                Framing::None => InBody::Length(0),
            },
        },
        _ => return Err(not_gateway()),
    };
    Ok(Some((request, taken)))
}

/// Reads a request head off `stream`, after the bytes already read
/// (`buf`), within [`MAX_HEAD_BYTES`], each read within `idle`. Returns the
/// request and whatever bytes came after the head.
pub(super) async fn read_head<S: AsyncRead + Unpin + ?Sized>(
    stream: &mut S,
    mut buf: Vec<u8>,
    idle: Duration,
) -> Result<(Request, Vec<u8>), HeadError> {
    loop {
        if let Some((request, taken)) = parse_head(&buf)? {
            return Ok((request, buf.split_off(taken)));
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
