//! The browser's page (rule WEB1): `GET /web`, the desktop in a tab. The
//! page, its script and the RDP client (WebAssembly) are built into the
//! binary; `scripts/build-web` makes them (see `docs/web.md`).

use tokio::io::{AsyncWrite, AsyncWriteExt};

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

struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const ASSETS: &[Asset] = &[
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
    ASSETS.iter().any(|a| a.path == path)
}

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
    /// Whether the client keeps the connection for another request.
    pub keep_alive: bool,
}

/// Each file's entity tag: a hash of its bytes, so that a browser
/// revalidates its copy (`Cache-Control: no-cache`) and gets 304 with no
/// body while the binary serves the same file.
fn etag(asset: &Asset) -> &'static str {
    use sha2::Digest as _;
    static TAGS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| {
                let digest = sha2::Sha256::digest(a.body);
                let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
                format!("\"{hex}\"")
            })
            .collect()
    });
    let index = ASSETS
        .iter()
        .position(|a| a.path == asset.path)
        .unwrap_or_default();
    &tags[index]
}

/// Whether `If-None-Match` names `tag` (weakly, as RFC 9110 §13.1.2 has
/// it), or is `*`.
fn matches(if_none_match: &str, tag: &str) -> bool {
    if_none_match.split(',').map(str::trim).any(|candidate| {
        candidate == "*" || candidate.strip_prefix("W/").unwrap_or(candidate) == tag
    })
}

/// Answers `request`: the file with its policy, 304 when the client's copy
/// is current, 404 for any other path. Answers whether the connection
/// stays open for another request: `keep` (the client's wish, within the
/// listener's bound), for a file that was found and written whole.
pub(crate) async fn serve<S: AsyncWrite + Unpin + ?Sized>(
    stream: &mut S,
    request: &PageRequest,
    keep: bool,
) -> bool {
    let Some(asset) = ASSETS.iter().find(|a| a.path == request.path) else {
        let _ = stream
            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .await;
        let _ = stream.shutdown().await;
        return false;
    };
    let tag = etag(asset);
    let current = request
        .if_none_match
        .as_deref()
        .is_some_and(|m| matches(m, tag));
    let (status, length) = if current {
        ("304 Not Modified", None)
    } else {
        ("200 OK", Some(asset.body.len()))
    };
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {}\r\nETag: {tag}\r\n\
         Content-Security-Policy: {CONTENT_SECURITY_POLICY}\r\n\
         X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n\
         X-Frame-Options: DENY\r\nCross-Origin-Opener-Policy: same-origin\r\n\
         Cross-Origin-Resource-Policy: same-origin\r\nCache-Control: no-cache\r\n",
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
        asset.body
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
            keep_alive: true,
        }
    }

    #[tokio::test]
    async fn the_page_is_sent_with_its_policy() {
        let mut out = Vec::new();
        assert!(!serve(&mut out, &get(PAGE), false).await);
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
        assert!(serve(&mut head, &request, true).await);
        let text = String::from_utf8_lossy(&head);
        assert!(text.contains("Content-Type: application/wasm"));
        assert!(text.ends_with("\r\n\r\n"), "HEAD has no body");
        let mut missing = Vec::new();
        assert!(!serve(&mut missing, &get("/web/nothing"), true).await);
        assert!(missing.starts_with(b"HTTP/1.1 404"));
    }

    /// A client that never reads: the answer gives up at the write bound,
    /// and the connection is not kept.
    #[tokio::test(start_paused = true)]
    async fn a_client_that_stops_reading_does_not_hold_the_connection() {
        let (mut server, _client) = tokio::io::duplex(4096);
        let request = get("/web/webclient_bg.wasm");
        assert!(!serve(&mut server, &request, true).await);
    }

    #[tokio::test]
    async fn a_current_copy_is_answered_304_without_its_body() {
        let mut first = Vec::new();
        assert!(serve(&mut first, &get("/web/webclient.js"), true).await);
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
            assert!(serve(&mut again, &request, true).await);
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
        serve(&mut stale, &request, true).await;
        assert!(stale.starts_with(b"HTTP/1.1 200 OK"));
        assert!(stale.len() > first.len() / 2);
    }
}
