//! The web console (issue 7): a static page and its ES modules, embedded
//! in the binary so that `http://BROKER/` works on a machine with no
//! internet and nothing else installed. The files hold no data and no
//! secret, so they are served without authentication; everything the page
//! shows comes from the public `/api/v1` with the admin token the user
//! types in (kept in the tab's `sessionStorage`, sent only as an
//! `Authorization` header). The console has no route of its own into the
//! broker: what it can do, a script can do with the same token.
//!
//! Every answer carries a strict Content-Security-Policy (this origin
//! only, no inline script or style, no framing, forms cannot navigate) and
//! an `ETag`; `Cache-Control: no-cache` makes browsers revalidate, so a new
//! binary's console is picked up at once and an unchanged one costs a 304.

use std::sync::LazyLock;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

use crate::error::ApiError;

/// The policy sent with every console file: scripts, styles and requests
/// only to this origin; no plugins, no framing, no form navigation (forms
/// are handled by script, so a token typed in can never end up in a URL).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// One embedded file of `crates/broker/console/`.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

/// The console's files, all of them: a name not listed here is a 404.
const ASSETS: &[Asset] = &[
    Asset {
        name: "index.html",
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("../../console/index.html"),
    },
    Asset {
        name: "console.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../../console/console.css"),
    },
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../console/app.js"),
    },
    Asset {
        name: "api.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../console/api.js"),
    },
    Asset {
        name: "dom.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../console/dom.js"),
    },
    Asset {
        name: "favicon.svg",
        content_type: "image/svg+xml",
        body: include_bytes!("../../console/favicon.svg"),
    },
];

/// Strong validators of the assets, computed once from their bytes.
static ETAGS: LazyLock<Vec<String>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| {
            let digest = Sha256::digest(a.body);
            let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
            format!("\"{hex}\"")
        })
        .collect()
});

/// `/` (the page) and `/console/{file}` (its modules, style and icon).
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/console/{file}", get(file))
}

async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

async fn file(Path(name): Path<String>, headers: HeaderMap) -> Response {
    serve(&name, &headers)
}

fn serve(name: &str, request: &HeaderMap) -> Response {
    let Some(i) = ASSETS.iter().position(|a| a.name == name) else {
        // The contract's error shape, as for any other unknown path.
        let missing = ApiError::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("no file {name} in the deskbroker console"),
        );
        return (security_headers(), missing).into_response();
    };
    let asset = &ASSETS[i];
    let etag = &ETAGS[i];
    let mut headers = security_headers();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(etag) {
        headers.insert(header::ETAG, v);
    }
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    if fresh {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    (StatusCode::OK, headers, asset.body).into_response()
}

fn security_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_the_page_imports_is_embedded() {
        // The page and its modules name each other by path; a file that is
        // referenced but not embedded would be a 404 in the browser.
        for a in ASSETS {
            let text = String::from_utf8_lossy(a.body);
            for (i, _) in text.match_indices("/console/") {
                let rest = &text[i + "/console/".len()..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '-'))
                    .unwrap_or(rest.len());
                let name = &rest[..end];
                assert!(
                    ASSETS.iter().any(|x| x.name == name),
                    "{} refers to /console/{name}, which is not embedded",
                    a.name
                );
            }
            for (i, _) in text.match_indices("from './") {
                let rest = &text[i + "from './".len()..];
                let name = &rest[..rest.find('\'').unwrap_or(rest.len())];
                assert!(
                    ASSETS.iter().any(|x| x.name == name),
                    "{} imports ./{name}, which is not embedded",
                    a.name
                );
            }
        }
    }

    #[test]
    fn etags_are_distinct_and_quoted() {
        let tags = &*ETAGS;
        for (i, t) in tags.iter().enumerate() {
            assert!(t.starts_with('"') && t.ends_with('"'), "{t}");
            assert!(!tags[..i].contains(t), "{} shares an ETag", ASSETS[i].name);
        }
    }
}
