//! The errors the web component reads: a kind, a message, and the
//! gateway's RDCleanPath error when it refused.

use wasm_bindgen::prelude::*;

#[wasm_bindgen]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IronErrorKind {
    General = 0,
    WrongPassword = 1,
    LogonFailure = 2,
    AccessDenied = 3,
    RDCleanPath = 4,
    ProxyConnect = 5,
    NegotiationFailure = 6,
}

/// The gateway's refusal: the HTTP status it gave, or the host's socket
/// or TLS error.
#[wasm_bindgen]
#[derive(Clone, Copy, Debug, Default)]
pub struct RDCleanPathDetails {
    http: Option<u16>,
    wsa: Option<u16>,
    tls: Option<u8>,
}

#[wasm_bindgen]
impl RDCleanPathDetails {
    #[wasm_bindgen(getter, js_name = httpStatusCode)]
    pub fn http_status_code(&self) -> Option<u16> {
        self.http
    }

    #[wasm_bindgen(getter, js_name = wsaErrorCode)]
    pub fn wsa_error_code(&self) -> Option<u16> {
        self.wsa
    }

    #[wasm_bindgen(getter, js_name = tlsAlertCode)]
    pub fn tls_alert_code(&self) -> Option<u8> {
        self.tls
    }
}

#[wasm_bindgen]
#[derive(Debug)]
pub struct IronError {
    kind: IronErrorKind,
    message: String,
    details: Option<RDCleanPathDetails>,
    /// The host asks for the user's credentials before it opens a session
    /// (Network Level Authentication), and none were given.
    credentials_required: bool,
}

impl IronError {
    pub(crate) fn new(kind: IronErrorKind, message: impl Into<String>) -> IronError {
        IronError {
            kind,
            message: message.into(),
            details: None,
            credentials_required: false,
        }
    }

    /// The host requires Network Level Authentication: the page must ask
    /// the user for credentials and connect again with them.
    pub(crate) fn credentials_required() -> IronError {
        IronError {
            credentials_required: true,
            ..IronError::new(
                IronErrorKind::NegotiationFailure,
                "the host asks for the user name and password before the session \
                 (Network Level Authentication)",
            )
        }
    }

    pub(crate) fn general(message: impl Into<String>) -> IronError {
        IronError::new(IronErrorKind::General, message)
    }

    pub(crate) fn refused(
        message: impl Into<String>,
        http: Option<u16>,
        wsa: Option<u16>,
        tls: Option<u8>,
    ) -> IronError {
        IronError {
            kind: IronErrorKind::RDCleanPath,
            message: message.into(),
            details: Some(RDCleanPathDetails { http, wsa, tls }),
            credentials_required: false,
        }
    }
}

#[wasm_bindgen]
impl IronError {
    /// What went wrong, in words (the web component's name for it).
    pub fn backtrace(&self) -> String {
        self.message.clone()
    }

    pub fn kind(&self) -> IronErrorKind {
        self.kind
    }

    /// Whether the host asks for credentials first (then the page asks
    /// the user, and connects again with them).
    #[wasm_bindgen(js_name = credentialsRequired)]
    pub fn credentials_required_flag(&self) -> bool {
        self.credentials_required
    }

    #[wasm_bindgen(js_name = rdcleanpathDetails)]
    pub fn rdcleanpath_details(&self) -> Option<RDCleanPathDetails> {
        self.details
    }
}
