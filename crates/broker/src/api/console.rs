//! The web console: a static page and its ES modules, embedded
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
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

use super::error::ApiError;

/// The policy sent with every console file: scripts, styles and requests
/// only to this origin; no plugins, no framing, no form navigation (forms
/// are handled by script, so a token typed in can never end up in a URL).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// Sent with every answer of the console, a missing file's too.
const SECURITY_HEADERS: [(HeaderName, HeaderValue); 4] = security_headers(CONTENT_SECURITY_POLICY);

/// The headers every page the broker serves to a browser carries (the
/// console's, the portal's): `policy`, no sniffing, no referrer, no framing.
pub(crate) const fn security_headers(policy: &'static str) -> [(HeaderName, HeaderValue); 4] {
    [
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(policy),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
    ]
}

/// The console's files, all of them: a name not listed here is a 404.
const FILES: [(&str, &[u8]); 10] = [
    ("index.html", include_bytes!("../../console/index.html")),
    ("console.css", include_bytes!("../../console/console.css")),
    ("app.js", include_bytes!("../../console/app.js")),
    ("api.js", include_bytes!("../../console/api.js")),
    ("dom.js", include_bytes!("../../console/dom.js")),
    ("records.js", include_bytes!("../../console/records.js")),
    ("dayone.js", include_bytes!("../../console/dayone.js")),
    ("users.js", include_bytes!("../../console/users.js")),
    ("workspace.js", include_bytes!("../../console/workspace.js")),
    ("favicon.svg", include_bytes!("../../console/favicon.svg")),
];

/// One embedded file of `crates/broker/console/` with its headers.
struct Asset {
    name: &'static str,
    body: &'static [u8],
    content_type: HeaderValue,
    /// A strong validator: the start of the file's SHA-256, quoted.
    etag: HeaderValue,
}

/// The files with their headers, computed once.
static ASSETS: LazyLock<Vec<Asset>> = LazyLock::new(|| {
    FILES
        .iter()
        .map(|&(name, body)| {
            let digest = Sha256::digest(body);
            let hex = hex::encode(&digest[..12]);
            Asset {
                name,
                body,
                content_type: HeaderValue::from_static(content_type(name)),
                etag: HeaderValue::from_str(&format!("\"{hex}\"")).expect("hex is a header value"),
            }
        })
        .collect()
});

/// The media type of a console file, from its extension.
fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("svg") => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

/// `/` (the page) and `/console/{file}` (its modules, style and icon).
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(serve))
        .route("/console/{file}", get(serve))
}

/// One console file: `/console/{file}`, or `index.html` for `/`.
async fn serve(file: Option<Path<String>>, request: HeaderMap) -> Response {
    let name = file.as_ref().map_or("index.html", |Path(f)| f.as_str());
    let Some(asset) = ASSETS.iter().find(|a| a.name == name) else {
        // The contract's error shape, as for any other unknown path.
        let missing = ApiError::new(
            api::ErrorCode::NotFound,
            format!("no file {name} in the deskbroker console"),
        );
        return (SECURITY_HEADERS, missing).into_response();
    };
    let validators = [
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (header::ETAG, asset.etag.clone()),
    ];
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .map(str::trim)
                .any(|t| t == "*" || t.as_bytes() == asset.etag.as_bytes())
        });
    if fresh {
        return (StatusCode::NOT_MODIFIED, SECURITY_HEADERS, validators).into_response();
    }
    (
        SECURITY_HEADERS,
        validators,
        [(header::CONTENT_TYPE, asset.content_type.clone())],
        asset.body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_the_page_imports_is_embedded() {
        // The page and its modules name each other by path; a file that is
        // referenced but not embedded would be a 404 in the browser.
        for a in ASSETS.iter() {
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
    fn etags_are_distinct_and_quoted_and_every_file_has_its_type() {
        for (i, a) in ASSETS.iter().enumerate() {
            let t = a.etag.to_str().unwrap();
            assert!(t.starts_with('"') && t.ends_with('"'), "{t}");
            assert!(
                ASSETS[..i].iter().all(|b| b.etag != a.etag),
                "{} shares an ETag",
                a.name
            );
            assert_ne!(
                a.content_type, "application/octet-stream",
                "{}: no media type for its extension",
                a.name
            );
        }
    }
}
