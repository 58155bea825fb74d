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

/// Answers `GET` (or `HEAD`) for one of the page's files, and closes: the
/// listener serves one request per connection.
pub(crate) async fn serve<S: AsyncWrite + Unpin + ?Sized>(stream: &mut S, path: &str, head: bool) {
    let Some(asset) = ASSETS.iter().find(|a| a.path == path) else {
        let _ = stream
            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .await;
        let _ = stream.shutdown().await;
        return;
    };
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
         Content-Security-Policy: {CONTENT_SECURITY_POLICY}\r\n\
         X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n\
         X-Frame-Options: DENY\r\nCross-Origin-Opener-Policy: same-origin\r\n\
         Cross-Origin-Resource-Policy: same-origin\r\nCache-Control: no-cache\r\n\
         Connection: close\r\n\r\n",
        asset.content_type,
        asset.body.len()
    );
    if stream.write_all(response.as_bytes()).await.is_err() {
        return;
    }
    if !head && stream.write_all(asset.body).await.is_err() {
        return;
    }
    let _ = stream.flush().await;
    let _ = stream.shutdown().await;
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

    #[tokio::test]
    async fn the_page_is_sent_with_its_policy() {
        let mut out = Vec::new();
        serve(&mut out, PAGE, false).await;
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("script-src 'self' 'wasm-unsafe-eval'"));
        assert!(text.contains("Content-Type: text/html"));
        assert!(text.contains("<iron-remote-desktop") || text.contains("page.js"));
        let mut head = Vec::new();
        serve(&mut head, "/web/webclient_bg.wasm", true).await;
        let text = String::from_utf8_lossy(&head);
        assert!(text.contains("Content-Type: application/wasm"));
        assert!(text.ends_with("\r\n\r\n"), "HEAD has no body");
        let mut missing = Vec::new();
        serve(&mut missing, "/web/nothing", false).await;
        assert!(missing.starts_with(b"HTTP/1.1 404"));
    }
}
