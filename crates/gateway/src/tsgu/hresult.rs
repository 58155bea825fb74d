//! The status codes of MS-TSGU (2.2.6): the HRESULTs an RD Gateway puts in
//! the `errorCode`/`statusCode` field of its answers.
//!
//! Every refusal is sent as a full HRESULT, severity bit set
//! (`0x8007_59xx`), never as the bare `HRESULT_CODE` (`0x59xx`) the RPC
//! transport uses for its faults: clients test the answer with `FAILED()`,
//! and FreeRDP 2 carries on as if the tunnel were open when the severity bit
//! is clear.

/// Success.
pub const S_OK: u32 = 0;
/// Anything unexpected, including a packet out of order (the protocol's
/// catch-all: "if any unexpected error occurs … E_PROXY_INTERNALERROR").
pub const E_PROXY_INTERNALERROR: u32 = 0x8007_59D8;
/// The resource authorization policy refuses this resource: here, the
/// resource named at channel create is not the pool the token is for.
pub const E_PROXY_RAP_ACCESSDENIED: u32 = 0x8007_59DA;
/// The gateway could not connect to the session host.
pub const E_PROXY_TS_CONNECTFAILED: u32 = 0x8007_59DD;
/// The gateway is at its connection limit.
pub const E_PROXY_MAXCONNECTIONSREACHED: u32 = 0x8007_59E6;
/// The client's protocol version or capabilities do not match the gateway's.
pub const E_PROXY_CAPABILITYMISMATCH: u32 = 0x8007_59E9;
/// The tunnel create packet carried no usable PAA cookie.
pub const E_PROXY_COOKIE_BADPACKET: u32 = 0x8007_59F7;
/// The PAA cookie (the access token) was refused.
pub const E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED: u32 = 0x8007_59F8;
/// The client offers no authentication method the gateway accepts (this
/// gateway takes pre-authenticated access tokens, PAA, only).
pub const E_PROXY_UNSUPPORTED_AUTHENTICATION_METHOD: u32 = 0x8007_59F9;

/// The code's name, for logs and metrics labels.
pub fn name(code: u32) -> &'static str {
    match code {
        S_OK => "S_OK",
        E_PROXY_INTERNALERROR => "E_PROXY_INTERNALERROR",
        E_PROXY_RAP_ACCESSDENIED => "E_PROXY_RAP_ACCESSDENIED",
        E_PROXY_TS_CONNECTFAILED => "E_PROXY_TS_CONNECTFAILED",
        E_PROXY_MAXCONNECTIONSREACHED => "E_PROXY_MAXCONNECTIONSREACHED",
        E_PROXY_CAPABILITYMISMATCH => "E_PROXY_CAPABILITYMISMATCH",
        E_PROXY_COOKIE_BADPACKET => "E_PROXY_COOKIE_BADPACKET",
        E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED => {
            "E_PROXY_COOKIE_AUTHENTICATION_ACCESS_DENIED"
        }
        E_PROXY_UNSUPPORTED_AUTHENTICATION_METHOD => "E_PROXY_UNSUPPORTED_AUTHENTICATION_METHOD",
        _ => "other",
    }
}

/// Whether a client reads `code` as a failure (`FAILED()`: the severity bit).
pub fn failed(code: u32) -> bool {
    code & 0x8000_0000 != 0
}
