//! The browser's door (`/web/rdp` on the RD Gateway's listener) seen
//! from a test: a pool and host it may reach, a ticket, the WebSocket over
//! TLS and its first RDCleanPath request, a fake host that counts the
//! connections it accepts, and the `/web` URL's parts.

use ironrdp_connector::{ClientConnector, Credentials, DesktopSize, Sequence};
use ironrdp_pdu::WriteBuf;
use ironrdp_rdcleanpath::RDCleanPathPdu;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_tungstenite::WebSocketStream;

use super::*;

pub type Socket = WebSocketStream<TlsStream<TcpStream>>;

/// A pool reachable through the doors, DepthFirst, two sessions a host.
pub async fn pool(app: &App, name: &str, allow_front_door: bool) {
    app.ok(
        "PUT",
        &format!("/api/v1/hostPools/{name}"),
        Some(
            json!({"hostPoolType": "Pooled", "loadBalancerType": "DepthFirst",
                    "maxSessionLimit": 2, "allowFrontDoor": allow_front_door,
                    "allowedAddressRanges": ["127.0.0.0/8"]}),
        ),
        201,
    )
    .await;
}

pub async fn host(app: &App, pool: &str, name: &str, address: &str) {
    app.ok(
        "PUT",
        &format!("/api/v1/hostPools/{pool}/sessionHosts/{name}"),
        Some(json!({ "address": address })),
        201,
    )
    .await;
}

/// The ticket of `user`'s RD Gateway connection file for `pool`, as the
/// portal hands it out.
pub async fn ticket(app: &App, pool: &str, user: &str) -> String {
    let file = app
        .ok(
            "GET",
            &format!("/api/v1/hostPools/{pool}/rdpFile?user={user}&gateway=true"),
            None,
            200,
        )
        .await;
    let file = file.as_str().expect("an .rdp file").to_string();
    file.split("\r\n")
        .find_map(|l| l.strip_prefix("gatewayaccesstoken:s:"))
        .unwrap_or_else(|| panic!("no access token in {file:?}"))
        .to_string()
}

/// A session "host" that accepts connections and counts them, and says
/// nothing: where refused requests must never arrive.
pub struct CountingHost {
    pub address: String,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl CountingHost {
    pub async fn start() -> CountingHost {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("addr").to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                held.push(stream);
            }
        });
        CountingHost {
            address,
            accepted,
            task,
        }
    }

    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for CountingHost {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Opens `wss://gateway/web/rdp` (the gateway's certificate is the data
/// dir's self-signed one: any is taken, as a browser told to trust it).
pub async fn open(gateway: &str) -> Result<Socket, String> {
    let tls = tls(gateway).await?;
    let (ws, _) = tokio_tungstenite::client_async(format!("wss://{gateway}/web/rdp"), tls)
        .await
        .map_err(|e| format!("websocket: {e}"))?;
    Ok(ws)
}

/// A TLS connection to the gateway's listener, taking any certificate.
pub async fn tls(gateway: &str) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
    let tcp = TcpStream::connect(gateway)
        .await
        .map_err(|e| e.to_string())?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let verifier = api::tls::SignatureChecked::new(provider.clone(), |_, _, _, _, _| {
        Ok(tokio_rustls::rustls::client::danger::ServerCertVerified::assertion())
    });
    let config = tokio_rustls::rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    let name = tokio_rustls::rustls::pki_types::ServerName::try_from("localhost").expect("name");
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS: {e}"))
}

/// One session of `user` in `pool`: its id and host.
pub async fn session_id(app: &App, pool: &str, user: &str) -> (String, String) {
    let v = app
        .ok(
            "GET",
            &format!("/api/v1/hostPools/{pool}/userSessions?user={user}"),
            None,
            200,
        )
        .await;
    let sessions = v["value"].as_array().cloned().unwrap_or_default();
    assert_eq!(sessions.len(), 1, "{v}");
    (
        sessions[0]["id"].as_str().expect("id").to_string(),
        sessions[0]["sessionHost"]
            .as_str()
            .expect("host")
            .to_string(),
    )
}

/// An RDCleanPath request with the connector's X.224 request for `user`.
pub fn request(ticket: Option<&str>, destination: &str) -> RDCleanPathPdu {
    let x224 = x224_request(&mut connector("alice"));
    let mut pdu = RDCleanPathPdu::new_request(
        x224,
        destination.to_string(),
        ticket.unwrap_or_default().to_string(),
        None,
    )
    .expect("request");
    if ticket.is_none() {
        pdu.proxy_auth = None;
    }
    pdu
}

/// The ticket in a webUrl's fragment, after the page's own decoding
/// (`URLSearchParams`), and the page's address before the fragment.
pub fn split(url: &str) -> (String, String) {
    let (page, fragment) = url.split_once('#').expect("a fragment");
    let parsed = reqwest::Url::parse(&format!("https://x/?{fragment}")).expect("a query");
    let ticket = parsed
        .query_pairs()
        .find(|(k, _)| k == "ticket")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| panic!("no ticket in {url}"));
    (page.to_string(), ticket)
}

/// Opens the browser's door with `ticket` and sends its request, as the
/// page does; answers the open socket (the host is a silent one, so no
/// answer is awaited).
pub async fn knock(gateway: &str, ticket: &str) -> impl std::any::Any + use<> {
    use futures_util::SinkExt;
    let mut ws = open(gateway).await.expect("the socket opens");
    let der = request(Some(ticket), "ignored.example:3389")
        .to_der()
        .expect("encode");
    ws.send(tokio_tungstenite::tungstenite::Message::Binary(der.into()))
        .await
        .expect("send");
    ws
}

/// IronRDP's connector as the browser's wasm sets it up: TLS, no NLA
/// (xrdp has none), `user` in the X.224 cookie.
pub fn connector(user: &str) -> ClientConnector {
    use ironrdp_pdu::gcc::{ConnectionType, KeyboardType};
    use ironrdp_pdu::rdp::capability_sets::{MajorPlatformType, RailSupportLevel};
    use ironrdp_pdu::rdp::client_info::{PerformanceFlags, TimezoneInfo};
    let config = ironrdp_connector::Config {
        desktop_size: DesktopSize {
            width: 1024,
            height: 768,
        },
        monitor_layout: None,
        desktop_scale_factor: 0,
        desktop_physical_size: None,
        desktop_orientation: None,
        device_scale_factor: None,
        monitor_extended_layout: None,
        relative_mouse_input: false,
        enable_tls: true,
        enable_credssp: false,
        enable_standard_rdp_security: false,
        credentials: Credentials::UsernamePassword {
            username: user.to_string(),
            password: "not-used".to_string(),
        },
        domain: None,
        client_build: 0,
        client_name: "deskbroker-test".to_string(),
        keyboard_type: KeyboardType::IBM_ENHANCED,
        keyboard_subtype: 0,
        keyboard_functional_keys_count: 12,
        keyboard_layout: 0,
        connection_type: ConnectionType::Lan,
        ime_file_name: String::new(),
        bitmap: None,
        dig_product_id: String::new(),
        client_dir: "C:\\Windows\\System32\\mstscax.dll".to_string(),
        alternate_shell: String::new(),
        work_dir: String::new(),
        remote_application_mode: false,
        rail_support_level: RailSupportLevel::empty(),
        platform: MajorPlatformType::UNIX,
        hardware_id: None,
        request_data: None,
        autologon: false,
        enable_audio_playback: false,
        enable_audio_capture: false,
        performance_flags: PerformanceFlags::default(),
        license_cache: None,
        timezone_info: TimezoneInfo::default(),
        compression_type: None,
        enable_server_pointer: false,
        pointer_software_rendering: true,
        multitransport_flags: None,
        support_dyn_vc_gfx_protocol: false,
    };
    let browser: SocketAddr = "127.0.0.1:33899".parse().expect("addr");
    ClientConnector::new(config, browser)
}

/// The X.224 Connection Request the connector starts with.
pub fn x224_request(connector: &mut ClientConnector) -> Vec<u8> {
    let mut buf = WriteBuf::new();
    let written = connector.step_no_input(&mut buf).expect("X.224 request");
    buf.filled()[..written.size().expect("bytes")].to_vec()
}
