//! The browser's page (rule WEB1): `GET /web`, the desktop in a tab. The
//! page, its script and the RDP client (WebAssembly) are built into the
//! binary; `scripts/build-web` makes them (see `docs/web.md`).

use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::door::Outcome;
use crate::https::{Exchange, Head, HeadError, Kept, Served};

/// The page's address.
pub const PAGE: &str = "/web";

/// What the page may do: its own scripts, and compile its own WebAssembly
/// (`wasm-unsafe-eval`; no `eval` of strings); talk only to its origin
/// (`/web/rdp`); no inline script, no frames, no forms, no plugins.
/// Styles allow inline: the web component sets its canvas's size through
/// `style` attributes.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; \
     script-src 'self' 'wasm-unsafe-eval'; connect-src 'self'; \
     style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// What an answer over HTTPS tells the browser: this host is reached over
/// HTTPS only, for a year (as the browser next sees it). Not its
/// subdomains: the gateway does not own the domain it is named in.
pub const STRICT_TRANSPORT_SECURITY: &str = "max-age=31536000";

struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

// A static, not a const: a const's bytes are copied into each function
// that uses it, and the binary carried the page twice.
static ASSETS: &[Asset] = &[
    Asset {
        path: PAGE,
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("page/index.html"),
    },
    Asset {
        path: "/web/page.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("page/page.js"),
    },
    Asset {
        path: "/web/page.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("page/page.css"),
    },
    Asset {
        path: "/web/iron-remote-desktop.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("page/iron-remote-desktop.js"),
    },
    Asset {
        path: "/web/webclient.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("page/webclient.js"),
    },
    Asset {
        path: "/web/webclient_bg.wasm",
        content_type: "application/wasm",
        body: include_bytes!("page/webclient_bg.wasm"),
    },
];

/// Whether `path` (without its query) is one of the page's files.
pub fn is_page(path: &str) -> bool {
    ASSETS.iter().any(|a| a.path == path) || path == FAVICON
}

/// What every browser asks of a site it shows a page of. The page has no
/// icon of its own: the answer is a plain 404, not the refusal (and log
/// line) of a request that is not the gateway's.
const FAVICON: &str = "/favicon.ico";

/// The most time one answer may take to be written whole (the 2.6 MB of
/// WebAssembly at 10 KB/s), and the longest the client may take no byte
/// of it: a client that stops reading does not hold its connection.
const ANSWER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);
const WRITE_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// The pieces an answer is written in, each within [`WRITE_IDLE_TIMEOUT`].
const WRITE_PIECE_BYTES: usize = 64 * 1024;

async fn write_within<S: AsyncWrite + Unpin + ?Sized>(
    stream: &mut S,
    bytes: &[u8],
) -> std::io::Result<()> {
    tokio::time::timeout(WRITE_IDLE_TIMEOUT, stream.write_all(bytes))
        .await
        .map_err(std::io::Error::other)?
}

/// A request for the page or one of its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    /// The path, without its query.
    pub path: String,
    /// `HEAD`: the answer without its body.
    pub head: bool,
    /// The client's `If-None-Match`: the tag of the copy it has.
    pub if_none_match: Option<String>,
    /// Whether the client takes a gzipped body (`Accept-Encoding`).
    pub gzip: bool,
    /// Whether the client keeps the connection for another request.
    pub keep_alive: bool,
}

/// The longest `If-None-Match` read (the page's tags are 34 bytes; a
/// browser sends back the one it was given).
const MAX_IF_NONE_MATCH_BYTES: usize = 256;

impl PageRequest {
    /// The request `head` makes of the page: refused when it carries a
    /// body (the browser's requests have none).
    pub fn of(head: &Head) -> Result<PageRequest, HeadError> {
        head.bodiless()?;
        Ok(PageRequest {
            path: head.path().to_string(),
            head: head.method == "HEAD",
            if_none_match: head
                .header("If-None-Match")
                .filter(|v| v.len() <= MAX_IF_NONE_MATCH_BYTES)
                .map(str::to_string),
            gzip: head.header("Accept-Encoding").is_some_and(takes_gzip),
            keep_alive: head.keep_alive(),
        })
    }
}

/// A `GET` or `HEAD` of the page or one of its files, its head read by the
/// front: answered, and the connection kept for the next request when the
/// client keeps it and the front allows one more.
pub(crate) async fn serve_request<P>(mut x: Exchange<'_, P>) -> Served {
    let page = match PageRequest::of(&x.head) {
        Ok(page) => page,
        Err(e) => return x.refuse(e).await,
    };
    let keep = page.keep_alive && x.may_keep_alive;
    if !serve(&mut x.stream, &page, keep, x.front.https).await {
        return Served::Closed(Outcome::WebPage);
    }
    Served::Kept(Kept {
        stream: x.stream,
        rest: x.rest,
        source: x.source,
        outcome: Outcome::WebPage,
    })
}

/// One file as sent: its bytes, as they are or gzipped, and their entity
/// tag (a hash of the file, with `-gz` for the gzipped bytes: two
/// representations, two tags), so that a browser revalidates its copy
/// (`Cache-Control: no-cache`) and gets 304 with no body while the binary
/// serves the same file.
struct Representation {
    body: Vec<u8>,
    tag: String,
}

/// Whether an `Accept-Encoding` value takes gzip (named, or `*`, without
/// `q=0`).
pub fn takes_gzip(accept_encoding: &str) -> bool {
    accept_encoding.split(',').any(|coding| {
        let mut parts = coding.split(';').map(str::trim);
        let name = parts.next().unwrap_or_default();
        let refused = parts.any(|p| {
            p.strip_prefix("q=")
                .is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0))
        });
        (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
    })
}

/// The gzipped representation of every file, made once, on the first
/// request that takes one (about 0.1 s for the 2.6 MB of WebAssembly).
static GZIPPED: std::sync::OnceLock<Vec<Representation>> = std::sync::OnceLock::new();

fn gzipped() -> &'static [Representation] {
    use std::io::Write as _;
    GZIPPED.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| {
                let mut encoder =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                // Writing to a Vec cannot fail.
                let body = encoder
                    .write_all(a.body)
                    .and_then(|()| encoder.finish())
                    .unwrap_or_default();
                Representation {
                    body,
                    tag: tag_of(a.body, "-gz"),
                }
            })
            .collect()
    })
}

/// Makes the page's gzipped files ahead of the first request for them.
pub(crate) fn prepare() {
    gzipped();
}

fn tag_of(body: &[u8], suffix: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(body);
    format!("\"{}{suffix}\"", hex::encode(&digest[..16]))
}

/// The tag of a file as it is.
fn etag(asset: &Asset) -> &'static str {
    static TAGS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let tags = TAGS.get_or_init(|| ASSETS.iter().map(|a| tag_of(a.body, "")).collect());
    &tags[index_of(asset)]
}

fn index_of(asset: &Asset) -> usize {
    ASSETS
        .iter()
        .position(|a| a.path == asset.path)
        .unwrap_or_default()
}

/// Whether `If-None-Match` names `tag` (weakly, as RFC 9110 §13.1.2 has
/// it), or is `*`.
fn matches(if_none_match: &str, tag: &str) -> bool {
    if_none_match.split(',').map(str::trim).any(|candidate| {
        candidate == "*" || candidate.strip_prefix("W/").unwrap_or(candidate) == tag
    })
}

/// Answers `request`: the file with its policy, 304 when the client's copy
/// is current, 404 for any other path; over HTTPS (`https`), each with
/// [`STRICT_TRANSPORT_SECURITY`]. Answers whether the connection stays
/// open for another request: `keep` (the client's wish, within the
/// listener's bound), for a file that was found and written whole.
pub(crate) async fn serve<S: AsyncWrite + Unpin + ?Sized>(
    stream: &mut S,
    request: &PageRequest,
    keep: bool,
    https: bool,
) -> bool {
    let hsts = if https {
        format!("Strict-Transport-Security: {STRICT_TRANSPORT_SECURITY}\r\n")
    } else {
        String::new()
    };
    let Some(asset) = ASSETS.iter().find(|a| a.path == request.path) else {
        let answer = format!(
            "HTTP/1.1 404 Not Found\r\n{hsts}Content-Length: 0\r\nConnection: close\r\n\r\n"
        );
        let _ = stream.write_all(answer.as_bytes()).await;
        let _ = stream.shutdown().await;
        return false;
    };
    let (tag, full_body, encoding) = if request.gzip {
        // Made when the listener started; a request that comes first
        // makes them off the runtime's threads.
        let all = match GZIPPED.get() {
            Some(all) => all.as_slice(),
            None => tokio::task::spawn_blocking(gzipped)
                .await
                .unwrap_or_else(|_| gzipped()),
        };
        let gz = &all[index_of(asset)];
        (
            gz.tag.as_str(),
            gz.body.as_slice(),
            "Content-Encoding: gzip\r\n",
        )
    } else {
        (etag(asset), asset.body, "")
    };
    let current = request
        .if_none_match
        .as_deref()
        .is_some_and(|m| matches(m, tag));
    let (status, length) = if current {
        ("304 Not Modified", None)
    } else {
        ("200 OK", Some(full_body.len()))
    };
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {}\r\nETag: {tag}\r\n{encoding}Vary: Accept-Encoding\r\n\
         Content-Security-Policy: {CONTENT_SECURITY_POLICY}\r\n\
         X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n\
         X-Frame-Options: DENY\r\nCross-Origin-Opener-Policy: same-origin\r\n\
         Cross-Origin-Resource-Policy: same-origin\r\nCache-Control: no-cache\r\n{hsts}",
        asset.content_type,
    );
    if let Some(length) = length {
        response.push_str(&format!("Content-Length: {length}\r\n"));
    }
    response.push_str(if keep {
        "Connection: keep-alive\r\n\r\n"
    } else {
        "Connection: close\r\n\r\n"
    });
    let body = if request.head || current {
        &[][..]
    } else {
        full_body
    };
    let written = tokio::time::timeout(ANSWER_TIMEOUT, async {
        write_within(stream, response.as_bytes()).await?;
        for piece in body.chunks(WRITE_PIECE_BYTES) {
            write_within(stream, piece).await?;
        }
        tokio::time::timeout(WRITE_IDLE_TIMEOUT, stream.flush())
            .await
            .map_err(std::io::Error::other)?
    })
    .await;
    if !matches!(written, Ok(Ok(()))) {
        return false;
    }
    if !keep {
        let _ = stream.shutdown().await;
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_pages_files_are_served() {
        assert!(is_page("/web"));
        assert!(is_page("/web/webclient_bg.wasm"));
        assert!(!is_page("/web/"));
        assert!(!is_page("/web/rdp"));
        assert!(!is_page("/web/../etc/passwd"));
        assert!(!is_page("/web/page.js/"));
    }

    fn get(path: &str) -> PageRequest {
        PageRequest {
            path: path.to_string(),
            head: false,
            if_none_match: None,
            gzip: false,
            keep_alive: true,
        }
    }

    #[tokio::test]
    async fn a_browser_that_takes_gzip_gets_the_file_gzipped_under_its_own_tag() {
        use std::io::Read as _;
        for (value, takes) in [
            ("gzip, deflate, br", true),
            ("br;q=1.0, GZIP;q=0.5", true),
            ("*", true),
            ("gzip;q=0", false),
            ("deflate", false),
            ("", false),
        ] {
            assert_eq!(takes_gzip(value), takes, "{value:?}");
        }
        let mut plain = Vec::new();
        serve(&mut plain, &get("/web/webclient_bg.wasm"), true, false).await;
        let mut out = Vec::new();
        let request = PageRequest {
            gzip: true,
            ..get("/web/webclient_bg.wasm")
        };
        serve(&mut out, &request, true, false).await;
        let split = out
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a head")
            + 4;
        let head = String::from_utf8_lossy(&out[..split]).to_string();
        assert!(head.contains("Content-Encoding: gzip\r\n"), "{head}");
        assert!(head.contains("Vary: Accept-Encoding\r\n"), "{head}");
        let tag = head
            .lines()
            .find_map(|l| l.strip_prefix("ETag: "))
            .expect("a tag");
        assert!(tag.ends_with("-gz\""), "{tag}");
        let body = &out[split..];
        assert!(body.len() * 2 < plain.len(), "{} bytes gzipped", body.len());
        let mut unzipped = Vec::new();
        flate2::read::GzDecoder::new(body)
            .read_to_end(&mut unzipped)
            .expect("gunzip");
        assert!(plain.ends_with(&unzipped) && unzipped.len() > 1_000_000);
        // The gzipped copy revalidates under its own tag.
        let mut again = Vec::new();
        let request = PageRequest {
            if_none_match: Some(tag.to_string()),
            ..request
        };
        serve(&mut again, &request, true, false).await;
        assert!(again.starts_with(b"HTTP/1.1 304 Not Modified\r\n"));
    }

    #[tokio::test]
    async fn the_page_is_sent_with_its_policy() {
        let mut out = Vec::new();
        assert!(!serve(&mut out, &get(PAGE), false, false).await);
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("script-src 'self' 'wasm-unsafe-eval'"));
        assert!(text.contains("Content-Type: text/html"));
        assert!(text.contains("<iron-remote-desktop") || text.contains("page.js"));
        let mut head = Vec::new();
        let request = PageRequest {
            head: true,
            ..get("/web/webclient_bg.wasm")
        };
        assert!(serve(&mut head, &request, true, false).await);
        let text = String::from_utf8_lossy(&head);
        assert!(text.contains("Content-Type: application/wasm"));
        assert!(text.ends_with("\r\n\r\n"), "HEAD has no body");
        let mut missing = Vec::new();
        assert!(!serve(&mut missing, &get("/web/nothing"), true, false).await);
        assert!(missing.starts_with(b"HTTP/1.1 404"));
    }

    /// Over HTTPS every answer tells the browser to come back over HTTPS
    /// only (this host, not its domain's others); over plain HTTP (behind
    /// a proxy that does TLS) the proxy's answer is the one that counts.
    #[tokio::test]
    async fn answers_over_https_carry_strict_transport_security() {
        let hsts = "\r\nStrict-Transport-Security: max-age=31536000\r\n";
        let current = {
            let mut first = Vec::new();
            serve(&mut first, &get(PAGE), true, true).await;
            let text = String::from_utf8_lossy(&first).to_string();
            text.lines()
                .find_map(|l| l.strip_prefix("ETag: "))
                .expect("an ETag")
                .to_string()
        };
        let requests = [
            get(PAGE),
            PageRequest {
                head: true,
                ..get("/web/webclient_bg.wasm")
            },
            PageRequest {
                if_none_match: Some(current),
                ..get(PAGE)
            },
            get("/web/nothing"),
        ];
        for request in &requests {
            let mut out = Vec::new();
            serve(&mut out, request, true, true).await;
            let text = String::from_utf8_lossy(&out);
            let head = &text[..text.find("\r\n\r\n").expect("a head") + 2];
            assert!(head.contains(hsts), "{request:?}: {head}");
            assert!(!head.contains("includeSubDomains"), "{head}");
            let mut plain = Vec::new();
            serve(&mut plain, request, true, false).await;
            let text = String::from_utf8_lossy(&plain);
            assert!(!text.contains("Strict-Transport-Security"), "{text}");
        }
    }

    /// A client that never reads: the answer gives up at the write bound,
    /// and the connection is not kept.
    #[tokio::test(start_paused = true)]
    async fn a_client_that_stops_reading_does_not_hold_the_connection() {
        let (mut server, _client) = tokio::io::duplex(4096);
        let request = get("/web/webclient_bg.wasm");
        assert!(!serve(&mut server, &request, true, false).await);
    }

    #[tokio::test]
    async fn a_current_copy_is_answered_304_without_its_body() {
        let mut first = Vec::new();
        assert!(serve(&mut first, &get("/web/webclient.js"), true, false).await);
        let text = String::from_utf8_lossy(&first);
        let tag = text
            .lines()
            .find_map(|l| l.strip_prefix("ETag: "))
            .expect("an ETag")
            .to_string();
        assert!(text.contains("Connection: keep-alive"), "{text}");
        for sent in [
            tag.clone(),
            format!("W/{tag}"),
            format!("\"x\", {tag}"),
            "*".into(),
        ] {
            let mut again = Vec::new();
            let request = PageRequest {
                if_none_match: Some(sent.clone()),
                ..get("/web/webclient.js")
            };
            assert!(serve(&mut again, &request, true, false).await);
            let text = String::from_utf8_lossy(&again);
            assert!(
                text.starts_with("HTTP/1.1 304 Not Modified\r\n"),
                "{sent}: {text}"
            );
            assert!(text.ends_with("\r\n\r\n"), "a 304 has no body");
            assert!(!text.contains("Content-Length"), "{text}");
        }
        // Another file's tag, or a stale one: the whole file.
        let mut stale = Vec::new();
        let request = PageRequest {
            if_none_match: Some("\"0123\"".into()),
            ..get("/web/webclient.js")
        };
        serve(&mut stale, &request, true, false).await;
        assert!(stale.starts_with(b"HTTP/1.1 200 OK"));
        assert!(stale.len() > first.len() / 2);
    }
}
