//! The WebSocket to `/web/rdp`: binary messages in, reassembled into RDP
//! PDUs; bytes out as they are written.

use std::cell::RefCell;
use std::rc::Rc;

use futures_channel::mpsc;
use futures_util::StreamExt as _;
use ironrdp_pdu::{Action, PduHint};
use wasm_bindgen::JsCast as _;
use wasm_bindgen::prelude::*;
use web_sys::{BinaryType, CloseEvent, MessageEvent, WebSocket};

use crate::error::{IronError, IronErrorKind};

/// What the socket's handlers report, in order.
enum Event {
    Open,
    Data(Vec<u8>),
    Closed(String),
}

/// The most bytes held that do not yet form a whole PDU: more than any
/// RDP PDU can be (a fast-path PDU is at most 32 KiB, an X.224 one 64 KiB).
const MAX_PENDING: usize = 1 << 17;

/// The sending half, shared by the session and the input path.
#[derive(Clone)]
pub(crate) struct Sender {
    ws: WebSocket,
    closed: Rc<RefCell<bool>>,
}

impl Sender {
    pub(crate) fn send(&self, bytes: &[u8]) -> Result<(), IronError> {
        if *self.closed.borrow() {
            return Err(IronError::general("the connection is closed"));
        }
        self.ws
            .send_with_u8_array(bytes)
            .map_err(|e| IronError::general(format!("sending failed: {e:?}")))
    }

    pub(crate) fn close(&self) {
        *self.closed.borrow_mut() = true;
        let _ = self.ws.close();
    }
}

/// The receiving half: whole PDUs out of the stream of messages.
pub(crate) struct Receiver {
    events: mpsc::UnboundedReceiver<Event>,
    pending: Vec<u8>,
    // The handlers live as long as the socket is read.
    _handlers: Handlers,
}

struct Handlers {
    ws: WebSocket,
    _open: Closure<dyn FnMut()>,
    _message: Closure<dyn FnMut(MessageEvent)>,
    _close: Closure<dyn FnMut(CloseEvent)>,
    _error: Closure<dyn FnMut()>,
}

impl Drop for Handlers {
    fn drop(&mut self) {
        self.ws.set_onopen(None);
        self.ws.set_onmessage(None);
        self.ws.set_onclose(None);
        self.ws.set_onerror(None);
        let _ = self.ws.close();
    }
}

/// Opens the socket and waits until it is open.
pub(crate) async fn open(url: &str) -> Result<(Sender, Receiver), IronError> {
    let ws = WebSocket::new(url).map_err(|e| {
        IronError::new(
            IronErrorKind::ProxyConnect,
            format!("cannot open {url}: {e:?}"),
        )
    })?;
    ws.set_binary_type(BinaryType::Arraybuffer);
    // Unbounded: a browser's WebSocket cannot be paused, so a bound here
    // could only drop the session's bytes. The gateway bounds each message
    // (64 KiB), and the session reads them as fast as they are drawn.
    let (tx, events) = mpsc::unbounded();
    let on_open = {
        let tx = tx.clone();
        Closure::<dyn FnMut()>::new(move || {
            let _ = tx.unbounded_send(Event::Open);
        })
    };
    let on_message = {
        let tx = tx.clone();
        Closure::<dyn FnMut(MessageEvent)>::new(move |e: MessageEvent| {
            if let Ok(buf) = e.data().dyn_into::<js_sys::ArrayBuffer>() {
                let _ = tx.unbounded_send(Event::Data(js_sys::Uint8Array::new(&buf).to_vec()));
            } else {
                let _ = tx.unbounded_send(Event::Closed("a text message".into()));
            }
        })
    };
    let on_close = {
        let tx = tx.clone();
        Closure::<dyn FnMut(CloseEvent)>::new(move |e: CloseEvent| {
            let _ = tx.unbounded_send(Event::Closed(format!(
                "the connection closed (code {})",
                e.code()
            )));
        })
    };
    let on_error = Closure::<dyn FnMut()>::new(move || {
        let _ = tx.unbounded_send(Event::Closed("the connection failed".into()));
    });
    ws.set_onopen(Some(on_open.as_ref().unchecked_ref()));
    ws.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    ws.set_onclose(Some(on_close.as_ref().unchecked_ref()));
    ws.set_onerror(Some(on_error.as_ref().unchecked_ref()));
    let mut receiver = Receiver {
        events,
        pending: Vec::new(),
        _handlers: Handlers {
            ws: ws.clone(),
            _open: on_open,
            _message: on_message,
            _close: on_close,
            _error: on_error,
        },
    };
    match receiver.events.next().await {
        Some(Event::Open) => {}
        Some(Event::Closed(why)) => {
            return Err(IronError::new(IronErrorKind::ProxyConnect, why));
        }
        Some(Event::Data(_)) | None => {
            return Err(IronError::new(
                IronErrorKind::ProxyConnect,
                "the connection failed",
            ));
        }
    }
    let sender = Sender {
        ws,
        closed: Rc::new(RefCell::new(false)),
    };
    Ok((sender, receiver))
}

impl Receiver {
    /// The next binary message as it came.
    pub(crate) async fn message(&mut self) -> Result<Vec<u8>, IronError> {
        if !self.pending.is_empty() {
            return Ok(std::mem::take(&mut self.pending));
        }
        match self.events.next().await {
            Some(Event::Data(d)) => Ok(d),
            Some(Event::Closed(why)) => Err(IronError::general(why)),
            Some(Event::Open) | None => Err(IronError::general("the connection closed")),
        }
    }

    async fn more(&mut self) -> Result<(), IronError> {
        match self.events.next().await {
            Some(Event::Data(d)) => {
                if self.pending.len() + d.len() > MAX_PENDING {
                    return Err(IronError::general("the host sent an oversized PDU"));
                }
                self.pending.extend_from_slice(&d);
                Ok(())
            }
            Some(Event::Closed(why)) => Err(IronError::general(why)),
            Some(Event::Open) | None => Err(IronError::general("the connection closed")),
        }
    }

    /// The next PDU the hint delimits.
    pub(crate) async fn pdu(&mut self, hint: &dyn PduHint) -> Result<Vec<u8>, IronError> {
        loop {
            let size = hint
                .find_size(&self.pending)
                .map_err(|e| IronError::general(format!("a malformed PDU: {e}")))?;
            if let Some((_, n)) = size
                && self.pending.len() >= n
            {
                return Ok(self.pending.drain(..n).collect());
            }
            self.more().await?;
        }
    }

    /// The next fast-path or X.224 frame.
    pub(crate) async fn frame(&mut self) -> Result<(Action, Vec<u8>), IronError> {
        loop {
            let info = ironrdp_pdu::find_size(&self.pending)
                .map_err(|e| IronError::general(format!("a malformed PDU: {e}")))?;
            if let Some(info) = info
                && self.pending.len() >= info.length
            {
                return Ok((info.action, self.pending.drain(..info.length).collect()));
            }
            self.more().await?;
        }
    }
}
