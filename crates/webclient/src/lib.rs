//! deskbroker's browser RDP client: the WebAssembly backend of the
//! `iron-remote-desktop` web component, built on IronRDP's crates.
//!
//! The page hands this module to the component; the component builds a
//! [`SessionBuilder`], and the session opens the gateway's `/web/rdp`
//! WebSocket, does the RDCleanPath exchange with the connection ticket,
//! runs IronRDP's connection sequence over the plaintext the gateway
//! relays, then draws the host's graphics into the component's canvas and
//! sends it the user's keys and mouse.

mod error;
mod input;
mod session;
mod socket;

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::prelude::*;

pub use error::{IronError, IronErrorKind, RDCleanPathDetails};
pub use input::{DeviceEvent, InputTransaction};
pub use session::{Session, SessionTerminationInfo};

/// The size of the remote desktop, in pixels.
#[wasm_bindgen]
#[derive(Clone, Copy, Debug)]
pub struct DesktopSize {
    pub width: u16,
    pub height: u16,
}

#[wasm_bindgen]
impl DesktopSize {
    #[wasm_bindgen(constructor)]
    pub fn new(width: u16, height: u16) -> DesktopSize {
        DesktopSize { width, height }
    }
}

/// One clipboard entry.
#[wasm_bindgen]
#[derive(Clone)]
pub struct ClipboardItem {
    mime: String,
    value: JsValue,
}

#[wasm_bindgen]
impl ClipboardItem {
    #[wasm_bindgen(js_name = mimeType)]
    pub fn mime_type(&self) -> String {
        self.mime.clone()
    }

    pub fn value(&self) -> JsValue {
        self.value.clone()
    }
}

/// Clipboard contents as the web component passes them. This backend has
/// no clipboard channel: the component holds them, nothing crosses to the
/// host.
#[wasm_bindgen]
#[derive(Default)]
pub struct ClipboardData(Vec<ClipboardItem>);

/// A bound on entries: a clipboard has a handful of formats.
const MAX_CLIPBOARD_ITEMS: usize = 32;

#[wasm_bindgen]
impl ClipboardData {
    #[wasm_bindgen(constructor)]
    pub fn new() -> ClipboardData {
        ClipboardData::default()
    }

    #[wasm_bindgen(js_name = addText)]
    pub fn add_text(&mut self, mime_type: String, text: String) {
        if self.0.len() < MAX_CLIPBOARD_ITEMS {
            self.0.push(ClipboardItem {
                mime: mime_type,
                value: JsValue::from_str(&text),
            });
        }
    }

    #[wasm_bindgen(js_name = addBinary)]
    pub fn add_binary(&mut self, mime_type: String, binary: js_sys::Uint8Array) {
        if self.0.len() < MAX_CLIPBOARD_ITEMS {
            self.0.push(ClipboardItem {
                mime: mime_type,
                value: binary.into(),
            });
        }
    }

    pub fn items(&self) -> Vec<ClipboardItem> {
        self.0.clone()
    }

    #[wasm_bindgen(js_name = isEmpty)]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What a session is built from; every setter answers the builder again,
/// as the component chains them.
#[derive(Clone, Default)]
pub(crate) struct Settings {
    pub(crate) username: String,
    pub(crate) password: String,
    pub(crate) domain: Option<String>,
    pub(crate) destination: String,
    pub(crate) proxy_address: String,
    pub(crate) auth_token: String,
    pub(crate) desktop_size: Option<DesktopSize>,
    pub(crate) canvas: Option<web_sys::HtmlCanvasElement>,
    pub(crate) cursor_callback: Option<js_sys::Function>,
    pub(crate) cursor_context: JsValue,
    pub(crate) canvas_resized: Option<js_sys::Function>,
}

#[wasm_bindgen]
#[derive(Clone, Default)]
pub struct SessionBuilder(Rc<RefCell<Settings>>);

#[wasm_bindgen]
impl SessionBuilder {
    #[wasm_bindgen(constructor)]
    pub fn new() -> SessionBuilder {
        SessionBuilder::default()
    }

    pub fn username(&self, username: String) -> SessionBuilder {
        self.0.borrow_mut().username = username;
        self.clone()
    }

    pub fn destination(&self, destination: String) -> SessionBuilder {
        self.0.borrow_mut().destination = destination;
        self.clone()
    }

    #[wasm_bindgen(js_name = serverDomain)]
    pub fn server_domain(&self, domain: String) -> SessionBuilder {
        self.0.borrow_mut().domain = (!domain.is_empty()).then_some(domain);
        self.clone()
    }

    pub fn password(&self, password: String) -> SessionBuilder {
        self.0.borrow_mut().password = password;
        self.clone()
    }

    #[wasm_bindgen(js_name = proxyAddress)]
    pub fn proxy_address(&self, address: String) -> SessionBuilder {
        self.0.borrow_mut().proxy_address = address;
        self.clone()
    }

    #[wasm_bindgen(js_name = authToken)]
    pub fn auth_token(&self, token: String) -> SessionBuilder {
        self.0.borrow_mut().auth_token = token;
        self.clone()
    }

    #[wasm_bindgen(js_name = desktopSize)]
    pub fn desktop_size(&self, size: DesktopSize) -> SessionBuilder {
        self.0.borrow_mut().desktop_size = Some(size);
        self.clone()
    }

    #[wasm_bindgen(js_name = renderCanvas)]
    pub fn render_canvas(&self, canvas: web_sys::HtmlCanvasElement) -> SessionBuilder {
        self.0.borrow_mut().canvas = Some(canvas);
        self.clone()
    }

    #[wasm_bindgen(js_name = setCursorStyleCallback)]
    pub fn set_cursor_style_callback(&self, callback: js_sys::Function) -> SessionBuilder {
        self.0.borrow_mut().cursor_callback = Some(callback);
        self.clone()
    }

    #[wasm_bindgen(js_name = setCursorStyleCallbackContext)]
    pub fn set_cursor_style_callback_context(&self, context: JsValue) -> SessionBuilder {
        self.0.borrow_mut().cursor_context = context;
        self.clone()
    }

    /// Without a clipboard channel the host's clipboard never changes
    /// here: the callback is not kept.
    #[wasm_bindgen(js_name = remoteClipboardChangedCallback)]
    pub fn remote_clipboard_changed_callback(&self, _callback: js_sys::Function) -> SessionBuilder {
        self.clone()
    }

    #[wasm_bindgen(js_name = forceClipboardUpdateCallback)]
    pub fn force_clipboard_update_callback(&self, _callback: js_sys::Function) -> SessionBuilder {
        self.clone()
    }

    #[wasm_bindgen(js_name = canvasResizedCallback)]
    pub fn canvas_resized_callback(&self, callback: js_sys::Function) -> SessionBuilder {
        self.0.borrow_mut().canvas_resized = Some(callback);
        self.clone()
    }

    /// This backend knows no extensions (file transfer, …): they are not
    /// kept, and `Session::invokeExtension` refuses every call.
    pub fn extension(&self, _ext: JsValue) -> SessionBuilder {
        self.clone()
    }

    pub async fn connect(&self) -> Result<Session, IronError> {
        session::connect(&self.0).await
    }
}
