//! The front's table of routes: which requests each endpoint takes, by
//! method, path and upgrade, and the handler that answers them.
//!
//! A new endpoint is one more line of [`routes`] and a handler: an async
//! function that takes the [`Exchange`] (the connection with its head read,
//! and what the listener shares) and says whether it closed the connection
//! or hands it back for the next request ([`Served`]). The routes do not
//! overlap; the first that takes a head serves it.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Instant;

use super::{BoxIo, Front, Head, HeadError};
use crate::door::{Outcome, Report};
use crate::placer::Placer;
use crate::rd_gateway::GatewayConfig;
use crate::sources::SourceGuard;

/// Which paths a route takes.
#[derive(Clone, Copy, Debug)]
pub enum Path {
    /// This path exactly, with or without a query.
    Is(&'static str),
    /// This request target (path and query together), in any case: how
    /// MS-TSGU clients name the gateway.
    TargetIgnoringCase(&'static str),
    /// The paths (without a query) this function takes.
    Where(fn(&str) -> bool),
}

impl Path {
    fn takes(&self, head: &Head) -> bool {
        match self {
            Path::Is(path) => head.path() == *path,
            Path::TargetIgnoringCase(target) => head.target.eq_ignore_ascii_case(target),
            Path::Where(takes) => takes(head.path()),
        }
    }
}

/// Whether a route's requests upgrade the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upgrade {
    /// `Upgrade: websocket` (any case), and only that.
    WebSocket,
    /// No `Upgrade` header at all.
    None,
    /// With or without one: the endpoint reads it.
    Either,
}

impl Upgrade {
    fn takes(self, head: &Head) -> bool {
        match self {
            Upgrade::WebSocket => head.upgrades_to_websocket(),
            Upgrade::None => head.header("Upgrade").is_none(),
            Upgrade::Either => true,
        }
    }
}

/// A handler's answer, boxed so that every route's fits in one table.
pub(crate) type Handled<'a> = Pin<Box<dyn Future<Output = Served> + Send + 'a>>;

/// One endpoint of the front: the requests it takes, and who answers them.
pub(crate) struct Route<P> {
    /// The endpoint's name, for people reading the table and its tests.
    pub name: &'static str,
    pub methods: &'static [&'static str],
    pub path: Path,
    pub upgrade: Upgrade,
    pub handler: for<'a> fn(Exchange<'a, P>) -> Handled<'a>,
}

/// The table: every endpoint the listener serves.
pub(crate) fn routes<P: Placer>(config: &GatewayConfig) -> Vec<Route<P>> {
    let mut routes = vec![
        Route {
            name: "rd gateway",
            methods: &["RDG_OUT_DATA", "RDG_IN_DATA"],
            path: Path::TargetIgnoringCase(crate::rd_gateway::GATEWAY_PATH),
            upgrade: Upgrade::Either,
            handler: |x| Box::pin(crate::rd_gateway::serve_request(x)),
        },
        Route {
            name: "web rdp",
            methods: &["GET"],
            path: Path::Is(crate::web::PATH),
            upgrade: Upgrade::WebSocket,
            handler: |x| Box::pin(crate::web::serve_request(x)),
        },
        Route {
            name: "web page",
            methods: &["GET", "HEAD"],
            path: Path::Where(crate::web::page::is_page),
            upgrade: Upgrade::None,
            handler: |x| Box::pin(crate::web::page::serve_request(x)),
        },
    ];
    // Without Windows sign-in there is no feed: its users sign in with
    // their domain accounts.
    if config.windows_sign_in.is_some() {
        routes.push(Route {
            name: "workspace feed",
            methods: &["GET", "HEAD"],
            path: Path::Where(crate::feed::is_feed_path),
            upgrade: Upgrade::None,
            handler: |x| Box::pin(crate::feed::serve_request(x)),
        });
    }
    // Without a realm there is no KDC proxy: `/KdcProxy` is refused as any
    // unknown path is.
    if config.kdc_proxy.serves_any() {
        routes.push(Route {
            name: "kdc proxy",
            methods: &["POST"],
            path: Path::Is(crate::kdc_proxy::PATH),
            upgrade: Upgrade::None,
            handler: |x| Box::pin(crate::kdc_proxy::serve_request(x)),
        });
    }
    routes
}

/// The route that takes `head`, if one does.
pub(crate) fn find<'r, P>(routes: &'r [Route<P>], head: &Head) -> Option<&'r Route<P>> {
    routes.iter().find(|r| {
        r.methods.contains(&head.method.as_str()) && r.path.takes(head) && r.upgrade.takes(head)
    })
}

/// One request handed to its endpoint: the connection, its head, and what
/// the listener shares.
pub(crate) struct Exchange<'a, P> {
    pub front: &'a Front<P>,
    pub head: Head,
    pub stream: BoxIo,
    /// The bytes read after the head.
    pub rest: Vec<u8>,
    /// The connection's count against its source, kept while it lives.
    pub source: SourceGuard,
    pub peer: SocketAddr,
    /// When the request's setup must be done (`GatewayConfig::setup_timeout`).
    pub deadline: Instant,
    /// Whether the endpoint may keep the connection for another request
    /// (within [`super::MAX_REQUESTS_PER_CONNECTION`]).
    pub may_keep_alive: bool,
    pub report: &'a mut Report,
}

impl<P> Exchange<'_, P> {
    /// Refuses the request `400 Bad Request` for `e`, and closes.
    pub(crate) async fn refuse(mut self, e: HeadError) -> Served {
        Served::Closed(super::refuse(&mut self.stream, e, self.report).await)
    }
}

/// What an endpoint did with its connection.
pub(crate) enum Served {
    /// Closed it (or took it for good), with this outcome.
    Closed(Outcome),
    /// Answered and kept it: the front reads the next request.
    Kept(Kept),
}

/// A connection handed back to the front for its next request.
pub(crate) struct Kept {
    pub stream: BoxIo,
    pub rest: Vec<u8>,
    pub source: SourceGuard,
    /// The connection's outcome if no request follows.
    pub outcome: Outcome,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::https::parse_head;

    fn route_of(head: &str) -> Option<&'static str> {
        let (head, _) = parse_head(head.as_bytes())
            .expect("a head")
            .expect("complete");
        let routes = routes::<crate::Http>(&GatewayConfig::default());
        find(&routes, &head).map(|r| r.name)
    }

    /// With a realm configured, `POST /KdcProxy` reaches the KDC proxy,
    /// and nothing else does; without one it reaches nothing.
    #[test]
    fn the_kdc_proxy_is_routed_only_when_a_realm_is_configured() {
        let realm = "EXAMPLE.COM=127.0.0.1:88".parse().expect("realm");
        let config = GatewayConfig {
            kdc_proxy: crate::kdc_proxy::KdcProxyConfig::with_realms(vec![realm]).expect("ok"),
            ..GatewayConfig::default()
        };
        let routes = routes::<crate::Http>(&config);
        let kerberos = "Content-Type: application/kerberos\r\nContent-Length: 5\r\n";
        for (start, headers, want) in [
            ("POST /KdcProxy", kerberos, Some("kdc proxy")),
            ("POST /KdcProxy?x", kerberos, Some("kdc proxy")),
            ("POST /KdcProxy", "", Some("kdc proxy")),
            ("GET /KdcProxy", "", None),
            ("POST /kdcproxy", kerberos, None),
            ("POST /KdcProxy/", kerberos, None),
            ("POST /KdcProxy", "Upgrade: websocket\r\n", None),
            ("GET /web", "", Some("web page")),
        ] {
            let text = format!("{start} HTTP/1.1\r\nHost: gw\r\n{headers}\r\n");
            let (head, _) = parse_head(text.as_bytes())
                .expect("a head")
                .expect("complete");
            assert_eq!(find(&routes, &head).map(|r| r.name), want, "{text:?}");
        }
        assert_eq!(
            route_of("POST /KdcProxy HTTP/1.1\r\nHost: gw\r\n\r\n"),
            None
        );
    }

    #[test]
    fn each_path_reaches_its_endpoint_and_no_other() {
        let ws = "Connection: Upgrade\r\nUpgrade: WebSocket\r\nSec-WebSocket-Key: abc==\r\n";
        let id = "RDG-Connection-Id: {37f51d44-8eea-f654-2cdf-caa345ae8fc9}\r\n";
        for (start, headers, want) in [
            (
                "RDG_OUT_DATA /remoteDesktopGateway/",
                ws,
                Some("rd gateway"),
            ),
            (
                "RDG_OUT_DATA /remoteDesktopGateway/",
                id,
                Some("rd gateway"),
            ),
            ("RDG_IN_DATA /remotedesktopgateway/", id, Some("rd gateway")),
            ("GET /remoteDesktopGateway/", ws, None),
            ("RDG_OUT_DATA /remoteDesktopGateway/?a", id, None),
            ("RDG_OUT_DATA /web/rdp", ws, None),
            ("GET /web/rdp", ws, Some("web rdp")),
            ("GET /web/rdp?session=1", ws, Some("web rdp")),
            ("GET /web/rdp", "", None),
            ("GET /web/rdp", "Upgrade: h2c\r\n", None),
            ("POST /web/rdp", ws, None),
            ("GET /WEB/RDP", ws, None),
            ("GET /web/rdp/", ws, None),
            ("GET /web", "", Some("web page")),
            ("HEAD /web", "", Some("web page")),
            ("GET /web/webclient_bg.wasm?v=1", "", Some("web page")),
            ("GET /favicon.ico", "", Some("web page")),
            ("GET /web", ws, None),
            ("POST /web", "", None),
            ("GET /web/", "", None),
            ("GET /web/../web", "", None),
            ("GET /web/page.js/x", "", None),
            ("GET /", "", None),
            ("POST /KdcProxy", "", None),
        ] {
            let head = format!("{start} HTTP/1.1\r\nHost: gw\r\n{headers}\r\n");
            assert_eq!(route_of(&head), want, "{head:?}");
        }
    }
}
