//! One RDP session: the RDCleanPath exchange, the connection sequence,
//! then frames drawn and input sent.

use std::cell::RefCell;
use std::rc::Rc;

use ironrdp_connector::connection_activation::{
    ConnectionActivationFactory, ConnectionActivationState,
};
use ironrdp_connector::credssp::CredsspSequence;
use ironrdp_connector::{
    ClientConnector, ClientConnectorState, ConnectionResult, Credentials, Sequence as _, ServerName,
};
use ironrdp_displaycontrol::client::DisplayControlClient;
use ironrdp_displaycontrol::pdu::MonitorLayoutEntry;
use ironrdp_dvc::DrdynvcClient;
use ironrdp_graphics::image_processing::PixelFormat;
use ironrdp_input::Database;
use ironrdp_pdu::WriteBuf;
use ironrdp_pdu::geometry::InclusiveRectangle;
use ironrdp_rdcleanpath::{RDCleanPathMessage, RDCleanPathPdu};
use ironrdp_session::image::DecodedImage;
use ironrdp_session::{ActiveStage, ActiveStageBuilder, ActiveStageOutput};
use wasm_bindgen::Clamped;
use wasm_bindgen::JsCast as _;
use wasm_bindgen::prelude::*;
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement, ImageData};

use crate::error::{IronError, IronErrorKind};
use crate::input::InputTransaction;
use crate::socket::{self, Receiver, Sender};
use crate::{DesktopSize, Settings};

/// The desktop asked for when the page names none, and the bounds of any.
const DEFAULT_SIZE: (u16, u16) = (1024, 768);
const MIN_SIDE: u16 = 200;
const MAX_SIDE: u16 = 8192;

/// Why a session ended.
#[wasm_bindgen]
pub struct SessionTerminationInfo(String);

#[wasm_bindgen]
impl SessionTerminationInfo {
    pub fn reason(&self) -> String {
        self.0.clone()
    }
}

/// What both the frame loop and the input path use.
struct Shared {
    stage: ActiveStage,
    image: DecodedImage,
    input: Database,
    sender: Sender,
    canvas: HtmlCanvasElement,
    context: CanvasRenderingContext2d,
    canvas_resized: Option<js_sys::Function>,
    /// The desktop size the tab asked for and the host has not been sent
    /// yet: the host's display control channel may not be open yet (it
    /// opens once the host is ready, xrdp's after the logon).
    wanted: Option<Wanted>,
    ended: bool,
}

/// A size the tab asked for, in the display control's terms.
#[derive(Clone, Copy, PartialEq)]
struct Wanted {
    width: u32,
    height: u32,
    scale_factor: Option<u32>,
    physical: Option<(u32, u32)>,
}

#[wasm_bindgen]
pub struct Session {
    shared: Rc<RefCell<Shared>>,
    receiver: RefCell<Option<Receiver>>,
    activation: RefCell<Option<ConnectionActivationFactory>>,
}

fn context_of(canvas: &HtmlCanvasElement) -> Result<CanvasRenderingContext2d, IronError> {
    canvas
        .get_context("2d")
        .ok()
        .flatten()
        .and_then(|c| c.dyn_into::<CanvasRenderingContext2d>().ok())
        .ok_or_else(|| IronError::general("the canvas has no 2D context"))
}

fn connector_config(settings: &Settings, size: DesktopSize) -> ironrdp_connector::Config {
    use ironrdp_pdu::gcc::{ConnectionType, KeyboardType};
    use ironrdp_pdu::rdp::capability_sets::{MajorPlatformType, RailSupportLevel};
    use ironrdp_pdu::rdp::client_info::{PerformanceFlags, TimezoneInfo};
    ironrdp_connector::Config {
        desktop_size: ironrdp_connector::DesktopSize {
            width: size.width,
            height: size.height,
        },
        monitor_layout: None,
        desktop_scale_factor: 0,
        desktop_physical_size: None,
        desktop_orientation: None,
        device_scale_factor: None,
        monitor_extended_layout: None,
        relative_mouse_input: false,
        // TLS with the host is the gateway's. With the user's credentials,
        // CredSSP (Network Level Authentication) is offered too, and done
        // through the tunnel; without, the host's own logon screen asks.
        enable_tls: true,
        enable_credssp: !settings.password.is_empty(),
        enable_standard_rdp_security: false,
        credentials: Credentials::UsernamePassword {
            username: settings.username.clone(),
            password: settings.password.clone(),
        },
        domain: settings.domain.clone(),
        // xrdp takes a build of 419 or older for a client that cannot
        // follow a resize, and ignores the display control channel then;
        // FreeRDP's number is used.
        client_build: 2600,
        client_name: "deskbroker-web".to_string(),
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
    }
}

fn connector_err(e: impl std::fmt::Debug) -> IronError {
    IronError::general(format!("the connection sequence failed: {e:?}"))
}

/// What the gateway answers when it has reached a host.
struct Reached {
    /// The host's X.224 Connection Confirm.
    confirm: Vec<u8>,
    /// The host's certificate (the leaf of its chain), whose key CredSSP
    /// binds the credentials to.
    certificate: Option<Vec<u8>>,
    /// The host's name, as the gateway reached it.
    address: String,
}

/// The RDCleanPath exchange: the ticket and the X.224 request out, the
/// host's X.224 confirm and certificate back (or the gateway's refusal).
async fn clean_path(
    settings: &Settings,
    connector: &mut ClientConnector,
    sender: &Sender,
    receiver: &mut Receiver,
) -> Result<Reached, IronError> {
    let mut buf = WriteBuf::new();
    let written = connector.step_no_input(&mut buf).map_err(connector_err)?;
    let n = written
        .size()
        .ok_or_else(|| connector_err("no X.224 request"))?;
    let request = RDCleanPathPdu::new_request(
        buf.filled()[..n].to_vec(),
        settings.destination.clone(),
        settings.auth_token.clone(),
        None,
    )
    .map_err(|e| IronError::general(format!("encoding the request: {e}")))?;
    let der = request
        .to_der()
        .map_err(|e| IronError::general(format!("encoding the request: {e}")))?;
    sender.send(&der)?;
    let answer = receiver
        .message()
        .await
        .map_err(|e| IronError::new(IronErrorKind::ProxyConnect, e.backtrace()))?;
    let message = RDCleanPathPdu::from_der(&answer)
        .ok()
        .and_then(|p| p.into_message().ok())
        .ok_or_else(|| IronError::general("the gateway's answer is not RDCleanPath"))?;
    match message {
        RDCleanPathMessage::Response {
            x224_connection_response,
            server_cert_chain,
            server_addr,
        } => Ok(Reached {
            confirm: x224_connection_response.as_bytes().to_vec(),
            certificate: server_cert_chain.first().map(|c| c.as_bytes().to_vec()),
            address: server_addr,
        }),
        RDCleanPathMessage::GeneralErr(e) => Err(IronError::refused(
            format!(
                "the gateway refused the connection (error {})",
                e.error_code
            ),
            e.http_status_code,
            e.wsa_last_error,
            e.tls_alert_code,
        )),
        RDCleanPathMessage::NegotiationErr {
            x224_connection_response,
        } => Err(negotiation_refused(&x224_connection_response, settings)),
        _ => Err(IronError::general("an unexpected RDCleanPath message")),
    }
}

/// Why the host refused the security negotiation: with no credentials
/// given, one that requires CredSSP asks the page for them.
fn negotiation_refused(confirm: &[u8], settings: &Settings) -> IronError {
    use ironrdp_pdu::nego::{ConnectionConfirm, FailureCode};
    let failure = ironrdp_core::decode::<ironrdp_pdu::x224::X224<ConnectionConfirm>>(confirm)
        .ok()
        .and_then(|c| match c.0 {
            ConnectionConfirm::Failure { code } => Some(code),
            ConnectionConfirm::Response { .. } => None,
        });
    match failure {
        Some(FailureCode::HYBRID_REQUIRED_BY_SERVER) if settings.password.is_empty() => {
            IronError::credentials_required()
        }
        Some(code) => IronError::new(
            IronErrorKind::NegotiationFailure,
            format!("the host refused the security negotiation: {code}"),
        ),
        None => IronError::new(
            IronErrorKind::NegotiationFailure,
            "the host refused the security negotiation",
        ),
    }
}

/// CredSSP (Network Level Authentication) with the host, through the
/// tunnel: the user's credentials, bound to the key of the certificate the
/// gateway received from the host, reach the host before any session does.
/// NTLM only: a browser reaches no Kerberos KDC.
async fn credssp(
    connector: &mut ClientConnector,
    reached: &Reached,
    sender: &Sender,
    receiver: &mut Receiver,
) -> Result<(), IronError> {
    use x509_cert::der::Decode as _;
    let ClientConnectorState::Credssp { selected_protocol } = connector.state else {
        return Err(connector_err("CredSSP out of turn"));
    };
    let certificate = reached
        .certificate
        .as_deref()
        .ok_or_else(|| IronError::general("the gateway sent no certificate of the host"))?;
    let certificate = x509_cert::Certificate::from_der(certificate)
        .map_err(|e| IronError::general(format!("the host's certificate: {e}")))?;
    let key = certificate
        .tbs_certificate()
        .subject_public_key_info()
        .subject_public_key
        .raw_bytes()
        .to_vec();
    // The host's name without its port: the service principal is
    // TERMSRV/name.
    let name = reached
        .address
        .rsplit_once(':')
        .map_or(reached.address.as_str(), |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']');
    let logon = |e: &dyn std::fmt::Debug| {
        IronError::new(
            IronErrorKind::LogonFailure,
            format!("the host refused the user name or password: {e:?}"),
        )
    };
    let (mut sequence, mut request) = CredsspSequence::init(
        connector.config.credentials.clone(),
        connector.config.domain.as_deref(),
        selected_protocol,
        ServerName::new(name),
        key,
        None,
    )
    .map_err(|e| logon(&e))?;
    let mut buf = WriteBuf::new();
    loop {
        // NTLM needs no network of its own: the generator completes.
        let state = sequence
            .process_ts_request(request)
            .resolve_to_result()
            .map_err(|e| logon(&e))?;
        buf.clear();
        let written = sequence
            .handle_process_result(state, &mut buf)
            .map_err(|e| logon(&e))?;
        if let Some(n) = written.size() {
            sender.send(&buf.filled()[..n])?;
        }
        let Some(hint) = sequence.next_pdu_hint() else {
            break;
        };
        let pdu = receiver
            .pdu(hint)
            .await
            .map_err(|e| logon(&e.backtrace()))?;
        match sequence
            .decode_server_message(&pdu)
            .map_err(|e| logon(&e))?
        {
            Some(next) => request = next,
            None => break,
        }
    }
    connector.mark_credssp_as_done();
    Ok(())
}

/// Steps `sequence` until `done`, reading the host's PDUs when it asks for
/// one and sending what it writes.
async fn drive(
    sequence: &mut dyn ironrdp_connector::Sequence,
    sender: &Sender,
    receiver: &mut Receiver,
    done: &dyn Fn(&dyn ironrdp_connector::Sequence) -> bool,
) -> Result<(), IronError> {
    let mut buf = WriteBuf::new();
    while !done(sequence) {
        buf.clear();
        let written = match sequence.next_pdu_hint() {
            None => sequence.step_no_input(&mut buf),
            Some(hint) => {
                let pdu = receiver.pdu(hint).await?;
                sequence.step(&pdu, None, &mut buf)
            }
        }
        .map_err(connector_err)?;
        if let Some(n) = written.size() {
            sender.send(&buf.filled()[..n])?;
        }
    }
    Ok(())
}

fn clamp_size(size: Option<DesktopSize>) -> DesktopSize {
    let size = size.unwrap_or(DesktopSize {
        width: DEFAULT_SIZE.0,
        height: DEFAULT_SIZE.1,
    });
    DesktopSize {
        width: size.width.clamp(MIN_SIDE, MAX_SIDE),
        height: size.height.clamp(MIN_SIDE, MAX_SIDE),
    }
}

/// The host names the desktop's size; one beyond what a screen can be is
/// refused rather than allocated (8192² pixels are 256 MiB already).
fn check_size(size: ironrdp_connector::DesktopSize) -> Result<(), IronError> {
    if size.width == 0 || size.height == 0 || size.width > MAX_SIDE || size.height > MAX_SIDE {
        return Err(IronError::general(format!(
            "the host asked for a {}x{} desktop",
            size.width, size.height
        )));
    }
    Ok(())
}

pub(crate) async fn connect(settings: &Rc<RefCell<Settings>>) -> Result<Session, IronError> {
    // A copy: the builder stays free while the connection is made.
    let settings = settings.borrow().clone();
    let canvas = settings
        .canvas
        .clone()
        .ok_or_else(|| IronError::general("no canvas to draw in"))?;
    let context = context_of(&canvas)?;
    if settings.auth_token.is_empty() {
        return Err(IronError::general("no connection ticket"));
    }
    let size = clamp_size(settings.desktop_size);
    // The browser's address is unknown to the page, and unused by hosts.
    let client_addr = std::net::SocketAddr::from(([0, 0, 0, 0], 0));
    // The dynamic channels' carrier, with the display control channel on
    // it: how the desktop follows the tab's size.
    let dynamic =
        DrdynvcClient::new().with_dynamic_channel(DisplayControlClient::new(|_| Ok(Vec::new())));
    let mut connector = ClientConnector::new(connector_config(&settings, size), client_addr)
        .with_static_channel(dynamic);
    let (sender, mut receiver) = socket::open(&settings.proxy_address).await?;
    let reached = clean_path(&settings, &mut connector, &sender, &mut receiver).await?;
    let mut buf = WriteBuf::new();
    connector
        .step(&reached.confirm, None, &mut buf)
        .map_err(|e| IronError::new(IronErrorKind::NegotiationFailure, format!("{e:?}")))?;
    if !connector.should_perform_security_upgrade() {
        return Err(IronError::new(
            IronErrorKind::NegotiationFailure,
            "the host did not choose TLS",
        ));
    }
    // The gateway did the TLS with the host.
    connector.mark_security_upgrade_as_done();
    if connector.should_perform_credssp() {
        credssp(&mut connector, &reached, &sender, &mut receiver).await?;
    }
    drive(&mut connector, &sender, &mut receiver, &|s| {
        s.next_pdu_hint().is_none() && connected(s)
    })
    .await?;
    let ClientConnectorState::Connected { result } = connector.state else {
        return Err(connector_err("the sequence ended unconnected"));
    };
    start(result, &settings, canvas, context, sender, receiver)
}

fn connected(sequence: &dyn ironrdp_connector::Sequence) -> bool {
    sequence.state().name() == "Connected"
}

fn start(
    result: ConnectionResult,
    settings: &Settings,
    canvas: HtmlCanvasElement,
    context: CanvasRenderingContext2d,
    sender: Sender,
    receiver: Receiver,
) -> Result<Session, IronError> {
    check_size(result.desktop_size)?;
    let image = DecodedImage::new(
        PixelFormat::RgbA32,
        result.desktop_size.width,
        result.desktop_size.height,
    );
    canvas.set_width(u32::from(result.desktop_size.width));
    canvas.set_height(u32::from(result.desktop_size.height));
    let stage = ActiveStageBuilder {
        static_channels: result.static_channels,
        user_channel_id: result.user_channel_id,
        io_channel_id: result.io_channel_id,
        message_channel_id: result.message_channel_id,
        share_id: result.share_id,
        compression_type: result.compression_type,
        enable_server_pointer: result.enable_server_pointer,
        pointer_software_rendering: result.pointer_software_rendering,
    }
    .build();
    if let Some(callback) = &settings.cursor_callback {
        let _ = callback.call1(&settings.cursor_context, &JsValue::from_str("default"));
    }
    Ok(Session {
        shared: Rc::new(RefCell::new(Shared {
            stage,
            image,
            input: Database::new(),
            sender,
            canvas,
            context,
            canvas_resized: settings.canvas_resized.clone(),
            wanted: None,
            ended: false,
        })),
        receiver: RefCell::new(Some(receiver)),
        activation: RefCell::new(Some(result.activation_factory)),
    })
}

/// What a frame that arrives during a reactivation is.
enum Arriving {
    /// The sequence's own: the host's capabilities, its finalization
    /// messages (or an error it reports).
    ForTheSequence,
    /// Data of another channel than the I/O channel.
    ForAChannel,
    /// What has no use mid-sequence: graphics and pointers for the
    /// display being replaced, sounds, indicators, logon notices.
    Dropped,
}

fn during_reactivation(action: ironrdp_pdu::Action, frame: &[u8], io_channel: u16) -> Arriving {
    use ironrdp_pdu::rdp::headers::ShareDataPdu;
    if action == ironrdp_pdu::Action::FastPath {
        return Arriving::Dropped;
    }
    let Ok(indication) = ironrdp_pdu::mcs::decode_send_data_indication(frame) else {
        // Not channel data: the sequence judges it.
        return Arriving::ForTheSequence;
    };
    if indication.channel_id != io_channel {
        return Arriving::ForAChannel;
    }
    match ironrdp_pdu::rdp::headers::decode_share_data(indication).map(|ctx| ctx.pdu) {
        Ok(
            ShareDataPdu::Update(_)
            | ShareDataPdu::Pointer(_)
            | ShareDataPdu::PlaySound(_)
            | ShareDataPdu::SetKeyboardIndicators(_)
            | ShareDataPdu::SetKeyboardImeStatus(_)
            | ShareDataPdu::SaveSessionInfo(_),
        ) => Arriving::Dropped,
        // The Demand Active (not share data), the finalization's PDUs,
        // and anything the sequence must refuse.
        _ => Arriving::ForTheSequence,
    }
}

impl Shared {
    /// Processes one frame from the host into the session's image.
    fn process(
        &mut self,
        action: ironrdp_pdu::Action,
        frame: &[u8],
    ) -> Result<Vec<ActiveStageOutput>, IronError> {
        self.stage
            .process(&mut self.image, action, frame, None)
            .map_err(|e| IronError::general(format!("the host's data: {e:?}")))
    }

    /// Copies `region` of the session's image into the canvas.
    fn draw(&self, region: &InclusiveRectangle) -> Result<(), IronError> {
        let width = usize::from(self.image.width());
        let height = usize::from(self.image.height());
        let left = usize::from(region.left);
        let top = usize::from(region.top);
        let right = usize::from(region.right).min(width.saturating_sub(1));
        let bottom = usize::from(region.bottom).min(height.saturating_sub(1));
        if left > right || top > bottom {
            return Ok(());
        }
        let w = right - left + 1;
        let h = bottom - top + 1;
        let stride = self.image.stride();
        let data = self.image.data();
        let mut pixels = Vec::with_capacity(w * h * 4);
        for row in top..=bottom {
            let start = row * stride + left * 4;
            pixels.extend_from_slice(&data[start..start + w * 4]);
        }
        // The image's fourth byte is not an opacity: the desktop is opaque.
        for px in pixels.chunks_exact_mut(4) {
            px[3] = 0xff;
        }
        let image = ImageData::new_with_u8_clamped_array_and_sh(
            Clamped(&pixels),
            u32::try_from(w).unwrap_or(0),
            u32::try_from(h).unwrap_or(0),
        )
        .map_err(|e| IronError::general(format!("drawing: {e:?}")))?;
        self.context
            .put_image_data(&image, left as f64, top as f64)
            .map_err(|e| IronError::general(format!("drawing: {e:?}")))
    }

    /// Sends the host the size the tab asked for, once the display control
    /// channel is ready; until then the request waits.
    fn ask_for_size(&mut self) -> Result<(), IronError> {
        let Some(wanted) = self.wanted else {
            return Ok(());
        };
        let current = (
            u32::from(self.image.width()),
            u32::from(self.image.height()),
        );
        if (wanted.width, wanted.height) == current {
            self.wanted = None;
            return Ok(());
        }
        match self.stage.encode_resize(
            wanted.width,
            wanted.height,
            wanted.scale_factor,
            wanted.physical,
        ) {
            // Not ready yet: asked again after the next frame.
            None => Ok(()),
            Some(frame) => {
                self.wanted = None;
                let frame = frame.map_err(|e| IronError::general(format!("resizing: {e:?}")))?;
                self.sender.send(&frame)
            }
        }
    }

    fn send_all(&mut self, outputs: Vec<ActiveStageOutput>) -> Result<Option<String>, IronError> {
        for output in outputs {
            match output {
                ActiveStageOutput::ResponseFrame(frame) if !frame.is_empty() => {
                    self.sender.send(&frame)?;
                }
                ActiveStageOutput::GraphicsUpdate(region) => self.draw(&region)?,
                ActiveStageOutput::Terminate(reason) => return Ok(Some(reason.description())),
                _ => {}
            }
        }
        Ok(None)
    }
}

#[wasm_bindgen]
impl Session {
    /// Runs the session until the host or the user ends it.
    pub async fn run(&self) -> Result<SessionTerminationInfo, IronError> {
        let mut receiver = self
            .receiver
            .borrow_mut()
            .take()
            .ok_or_else(|| IronError::general("the session already ran"))?;
        let factory = self
            .activation
            .borrow_mut()
            .take()
            .ok_or_else(|| IronError::general("the session already ran"))?;
        loop {
            let (action, frame) = match receiver.frame().await {
                Ok(f) => f,
                Err(e) => {
                    if self.shared.borrow().ended {
                        return Ok(SessionTerminationInfo("the session was closed".into()));
                    }
                    return Ok(SessionTerminationInfo(e.backtrace()));
                }
            };
            // The session's state is borrowed for one frame, never across
            // a wait: input arrives between frames.
            let reactivate = {
                let mut guard = self.shared.borrow_mut();
                let shared = &mut *guard;
                let outputs = shared.process(action, &frame)?;
                let deactivated = outputs
                    .iter()
                    .any(|o| matches!(o, ActiveStageOutput::DeactivateAll));
                if let Some(reason) = shared.send_all(outputs)? {
                    shared.ended = true;
                    shared.sender.close();
                    return Ok(SessionTerminationInfo(reason));
                }
                // A resize the host cannot take is no reason to end the
                // session: it keeps its size, scaled to the tab.
                if !deactivated && let Err(e) = shared.ask_for_size() {
                    web_sys::console::warn_1(&JsValue::from_str(&e.backtrace()));
                }
                deactivated.then(|| shared.sender.clone())
            };
            if let Some(sender) = reactivate {
                self.reactivate(&factory, &sender, &mut receiver).await?;
            }
        }
    }

    /// The Deactivation-Reactivation Sequence: the host starts the
    /// session's display again, possibly at another size (xrdp does so
    /// after a logon, and when the tab asks for another size).
    ///
    /// The host may send output before it has finished: graphics and
    /// pointer updates once it has the client's font list (MS-RDPBCGR
    /// 1.3.1.1), and data on the other channels (the display control's)
    /// at any time. Channel data goes to its channel; graphics for the old
    /// display are dropped, and the host is asked to draw the new one
    /// whole once the sequence is done.
    async fn reactivate(
        &self,
        factory: &ConnectionActivationFactory,
        sender: &Sender,
        receiver: &mut Receiver,
    ) -> Result<(), IronError> {
        let mut sequence = factory.create();
        let io_channel = sequence.io_channel_id();
        let mut dropped = false;
        let mut buf = WriteBuf::new();
        while sequence.state().name() != "Finalized" {
            buf.clear();
            let written = if sequence.next_pdu_hint().is_none() {
                sequence.step_no_input(&mut buf)
            } else {
                let (action, frame) = receiver.frame().await?;
                match during_reactivation(action, &frame, io_channel) {
                    Arriving::ForTheSequence => sequence.step(&frame, None, &mut buf),
                    Arriving::Dropped => {
                        dropped = true;
                        continue;
                    }
                    Arriving::ForAChannel => {
                        let mut shared = self.shared.borrow_mut();
                        let outputs = shared.process(action, &frame)?;
                        shared.send_all(outputs)?;
                        continue;
                    }
                }
            }
            .map_err(connector_err)?;
            if let Some(n) = written.size() {
                sender.send(&buf.filled()[..n])?;
            }
        }
        let ConnectionActivationState::Finalized {
            desktop_size,
            share_id,
            enable_server_pointer,
            pointer_software_rendering,
            static_channel_chunk_size,
            window_support_level,
            refresh_rect_support,
            suppress_output_support,
            ..
        } = sequence.connection_activation_state()
        else {
            return Err(connector_err("the reactivation did not finish"));
        };
        check_size(desktop_size)?;
        let mut shared = self.shared.borrow_mut();
        if !shared.stage.reactivate(
            sequence.io_channel_id(),
            sequence.user_channel_id(),
            share_id,
            enable_server_pointer,
            pointer_software_rendering,
            static_channel_chunk_size,
        ) {
            return Err(connector_err("an invalid static channel chunk size"));
        }
        shared.stage.set_window_support_level(window_support_level);
        shared.image =
            DecodedImage::new(PixelFormat::RgbA32, desktop_size.width, desktop_size.height);
        shared.canvas.set_width(u32::from(desktop_size.width));
        shared.canvas.set_height(u32::from(desktop_size.height));
        if dropped {
            let frames = shared
                .stage
                .request_full_redraw(
                    desktop_size.width,
                    desktop_size.height,
                    refresh_rect_support,
                    suppress_output_support,
                )
                .map_err(|e| IronError::general(format!("asking for a redraw: {e:?}")))?;
            for frame in frames {
                shared.sender.send(&frame)?;
            }
        }
        let resized = shared.canvas_resized.clone();
        drop(shared);
        if let Some(callback) = resized {
            let _ = callback.call0(&JsValue::NULL);
        }
        Ok(())
    }

    #[wasm_bindgen(js_name = desktopSize)]
    pub fn desktop_size(&self) -> DesktopSize {
        let shared = self.shared.borrow();
        DesktopSize {
            width: shared.image.width(),
            height: shared.image.height(),
        }
    }

    #[wasm_bindgen(js_name = applyInputs)]
    pub fn apply_inputs(&self, transaction: InputTransaction) -> Result<(), IronError> {
        let mut shared = self.shared.borrow_mut();
        let shared = &mut *shared;
        let events = shared.input.apply(transaction.0);
        let outputs = shared
            .stage
            .process_fastpath_input(&mut shared.image, &events)
            .map_err(|e| IronError::general(format!("input: {e:?}")))?;
        shared.send_all(outputs).map(|_| ())
    }

    #[wasm_bindgen(js_name = releaseAllInputs)]
    pub fn release_all_inputs(&self) -> Result<(), IronError> {
        let mut shared = self.shared.borrow_mut();
        let shared = &mut *shared;
        let events = shared.input.release_all();
        let outputs = shared
            .stage
            .process_fastpath_input(&mut shared.image, &events)
            .map_err(|e| IronError::general(format!("input: {e:?}")))?;
        shared.send_all(outputs).map(|_| ())
    }

    #[wasm_bindgen(js_name = synchronizeLockKeys)]
    pub fn synchronize_lock_keys(
        &self,
        scroll_lock: bool,
        num_lock: bool,
        caps_lock: bool,
        kana_lock: bool,
    ) -> Result<(), IronError> {
        let event = ironrdp_input::synchronize_event(scroll_lock, num_lock, caps_lock, kana_lock);
        let mut shared = self.shared.borrow_mut();
        let shared = &mut *shared;
        let outputs = shared
            .stage
            .process_fastpath_input(&mut shared.image, &[event])
            .map_err(|e| IronError::general(format!("input: {e:?}")))?;
        shared.send_all(outputs).map(|_| ())
    }

    /// Asks the host to end the connection, and closes it.
    pub fn shutdown(&self) -> Result<(), IronError> {
        let mut shared = self.shared.borrow_mut();
        if let Ok(outputs) = shared.stage.graceful_shutdown() {
            let _ = shared.send_all(outputs);
        }
        shared.ended = true;
        shared.sender.close();
        Ok(())
    }

    /// There is no clipboard channel: a paste stays in the browser.
    #[wasm_bindgen(js_name = onClipboardPaste)]
    pub async fn on_clipboard_paste(&self, _data: crate::ClipboardData) -> Result<(), IronError> {
        Err(IronError::general("this client has no clipboard channel"))
    }

    /// Asks the host for a desktop of the tab's new size, through the
    /// display control channel (the host then starts the display again at
    /// that size). A host without the channel keeps the size the session
    /// opened with, and the component scales it to the tab.
    pub fn resize(
        &self,
        width: u32,
        height: u32,
        scale_factor: Option<u32>,
        physical_width: Option<u32>,
        physical_height: Option<u32>,
    ) {
        // An even width within 200..=8192, as the channel requires.
        let (width, height) = MonitorLayoutEntry::adjust_display_size(width, height);
        let mut shared = self.shared.borrow_mut();
        shared.wanted = Some(Wanted {
            width,
            height,
            scale_factor,
            physical: physical_width.zip(physical_height),
        });
        if let Err(e) = shared.ask_for_size() {
            web_sys::console::warn_1(&JsValue::from_str(&e.backtrace()));
        }
    }

    #[wasm_bindgen(js_name = supportsUnicodeKeyboardShortcuts)]
    pub fn supports_unicode_keyboard_shortcuts(&self) -> bool {
        false
    }

    #[wasm_bindgen(js_name = invokeExtension)]
    pub fn invoke_extension(&self, _ext: JsValue) -> Result<JsValue, IronError> {
        Err(IronError::general("this client has no extensions"))
    }
}
