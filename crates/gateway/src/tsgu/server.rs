//! The gateway's side of one MS-TSGU tunnel, as a state machine with no IO.
//!
//! ```text
//! Start --HANDSHAKE_REQUEST--> Handshaken --TUNNEL_CREATE--> CheckingToken
//!   --accept_token--> TunnelCreated --TUNNEL_AUTH--> Authorized
//!   --CHANNEL_CREATE--> OpeningChannel --accept_channel--> Open
//!   Open: DATA relayed both ways, KEEPALIVE
//!   Open --CLOSE_CHANNEL--> Closed          (client closes; answered)
//!   Open --close()--> Closing --CLOSE_CHANNEL_RESPONSE--> Closed   (gateway closes)
//! ```
//!
//! The caller feeds it the client's packets ([`Server::receive`]) and does
//! what each [`Action`] says. Two steps need a decision the machine cannot
//! take alone: whether the access token is good ([`Action::CheckToken`],
//! answered with [`Server::accept_token`] or [`Server::refuse_token`]) and
//! where the channel goes ([`Action::OpenChannel`]: place the user, dial the
//! host, then [`Server::accept_channel`] or [`Server::refuse_channel`]).
//!
//! A packet out of order, or one only a gateway sends, is a [`Refusal`]:
//! the answer of the matching kind carrying E_PROXY_INTERNALERROR where
//! there is one (so the client reports an error rather than hanging), and
//! then the tunnel is over ([`State::Closed`]).

use super::hresult::{
    E_PROXY_CAPABILITYMISMATCH, E_PROXY_COOKIE_BADPACKET, E_PROXY_INTERNALERROR,
    E_PROXY_RAP_ACCESSDENIED, E_PROXY_UNSUPPORTED_AUTHENTICATION_METHOD, S_OK,
};
use super::packet::{
    CHANNEL_PROTOCOL_RDP, ChannelCreate, ChannelResponse, HTTP_CAPABILITY_IDLE_TIMEOUT,
    HTTP_EXTENDED_AUTH_PAA, HTTP_TUNNEL_REDIR_ENABLE_ALL, HandshakeRequest, HandshakeResponse,
    Packet, TunnelAuthResponse, TunnelCreate, TunnelResponse,
};

/// The protocol version this gateway speaks (HTTP transport 1.0).
pub const VERSION_MAJOR: u8 = 1;
pub const VERSION_MINOR: u8 = 0;

/// What the gateway tells every client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// Minutes of idleness after which the gateway ends a tunnel, told to
    /// the client in the tunnel auth response (0: never).
    pub idle_timeout_minutes: u32,
    /// HTTP_TUNNEL_REDIR_* flags: the device redirection the gateway allows.
    pub redirection_flags: u32,
}

impl Default for ServerConfig {
    /// No idle timeout; device redirection left to the session host.
    fn default() -> ServerConfig {
        ServerConfig {
            idle_timeout_minutes: 0,
            redirection_flags: HTTP_TUNNEL_REDIR_ENABLE_ALL,
        }
    }
}

/// Where a tunnel is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Start,
    Handshaken,
    /// The client sent its token; the caller is checking it.
    CheckingToken,
    TunnelCreated,
    Authorized,
    /// The client named its resource; the caller is placing and dialling.
    OpeningChannel,
    Open,
    /// The gateway sent CLOSE_CHANNEL and awaits the client's answer.
    Closing,
    Closed,
}

/// What the caller does after a packet from the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send this packet to the client.
    Send(Packet),
    /// Check this access token (the PAA cookie), then call
    /// [`Server::accept_token`] or [`Server::refuse_token`].
    CheckToken { token: String },
    /// Open a channel to this resource (the client's `/v:` or `full
    /// address`, verbatim), then call [`Server::accept_channel`] or
    /// [`Server::refuse_channel`]. Alternate resources are not offered: a
    /// gateway that places picks the host itself.
    OpenChannel { resource: String, port: u16 },
    /// Relay these bytes to the session host.
    Relay(Vec<u8>),
    /// Nothing to do (a keepalive; data arriving after the gateway closed).
    Nothing,
    /// The tunnel is over: send this packet, if any, then close the connection.
    Close { send: Option<Packet> },
}

/// A packet the gateway refuses: answer with `reply`, if any, then close.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason} ({})", super::hresult::name(*code))]
pub struct Refusal {
    /// The HRESULT sent to the client (in `reply`).
    pub code: u32,
    /// Why, for logs and metrics labels.
    pub reason: &'static str,
    pub reply: Option<Packet>,
}

/// A decision asked of the machine in a state that has no such decision
/// pending: a bug of the caller, refused rather than obeyed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{operation} is not possible in state {state:?}")]
pub struct StateError {
    pub operation: &'static str,
    pub state: State,
}

/// One tunnel, from the gateway's side.
#[derive(Clone, Debug)]
pub struct Server {
    state: State,
    config: ServerConfig,
    /// The client signed in over HTTP (Windows sign-in, rule AD2): it may
    /// go without an access token.
    signed_in: bool,
}

impl Server {
    pub fn new(config: ServerConfig) -> Server {
        Server {
            state: State::Start,
            config,
            signed_in: false,
        }
    }

    /// A tunnel whose client signed in over HTTP (rule AD2): its handshake
    /// may offer no extended authentication, and its tunnel needs no access
    /// token (one it sends anyway is checked, and decides).
    pub fn signed_in(config: ServerConfig) -> Server {
        Server {
            signed_in: true,
            ..Server::new(config)
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    /// Takes the client's next packet.
    pub fn receive(&mut self, packet: Packet) -> Result<Action, Refusal> {
        let r = self.step(packet);
        if r.is_err() {
            self.state = State::Closed;
        }
        r
    }

    fn step(&mut self, packet: Packet) -> Result<Action, Refusal> {
        match (self.state, packet) {
            (State::Start, Packet::HandshakeRequest(p)) => self.handshake(&p),
            (State::Handshaken, Packet::TunnelCreate(p)) => self.tunnel_create(p),
            (State::TunnelCreated, Packet::TunnelAuth(_)) => {
                self.state = State::Authorized;
                Ok(Action::Send(Packet::TunnelAuthResponse(
                    TunnelAuthResponse {
                        error_code: S_OK,
                        redirection_flags: Some(self.config.redirection_flags),
                        idle_timeout_minutes: Some(self.config.idle_timeout_minutes),
                        soh_response: None,
                    },
                )))
            }
            (State::Authorized, Packet::ChannelCreate(p)) => self.channel_create(p),
            (State::Open, Packet::Data(data)) => Ok(Action::Relay(data)),
            // The client may still be sending when the gateway closes.
            (State::Closing, Packet::Data(_)) => Ok(Action::Nothing),
            (
                State::Handshaken
                | State::CheckingToken
                | State::TunnelCreated
                | State::Authorized
                | State::OpeningChannel
                | State::Open
                | State::Closing,
                Packet::Keepalive,
            ) => Ok(Action::Nothing),
            (State::Open | State::Closing, Packet::CloseChannel { .. }) => {
                self.state = State::Closed;
                Ok(Action::Close {
                    send: Some(Packet::CloseChannelResponse { status_code: S_OK }),
                })
            }
            (State::Closing, Packet::CloseChannelResponse { .. }) => {
                self.state = State::Closed;
                Ok(Action::Close { send: None })
            }
            (_, packet) => Err(out_of_order(&packet)),
        }
    }

    fn handshake(&mut self, p: &HandshakeRequest) -> Result<Action, Refusal> {
        let refuse = |code, reason| Refusal {
            code,
            reason,
            reply: Some(handshake_response(code)),
        };
        if p.version_major != VERSION_MAJOR {
            return Err(refuse(E_PROXY_CAPABILITYMISMATCH, "protocol version"));
        }
        let paa = p.extended_auth & HTTP_EXTENDED_AUTH_PAA != 0;
        if !paa && !self.signed_in {
            return Err(refuse(
                E_PROXY_UNSUPPORTED_AUTHENTICATION_METHOD,
                "no access token offered",
            ));
        }
        self.state = State::Handshaken;
        let mut answer = handshake_response(S_OK);
        if let Packet::HandshakeResponse(r) = &mut answer
            && !paa
        {
            r.extended_auth = 0;
        }
        Ok(Action::Send(answer))
    }

    fn tunnel_create(&mut self, p: TunnelCreate) -> Result<Action, Refusal> {
        let refuse = |code, reason| Refusal {
            code,
            reason,
            reply: Some(tunnel_response(code, None)),
        };
        if p.reauth_context.is_some() {
            // Reauthentication is a capability this gateway never offers.
            return Err(refuse(E_PROXY_CAPABILITYMISMATCH, "reauthentication"));
        }
        match p.paa_cookie {
            Some(token) if !token.is_empty() => {
                self.state = State::CheckingToken;
                Ok(Action::CheckToken { token })
            }
            _ if self.signed_in => {
                self.state = State::TunnelCreated;
                Ok(Action::Send(tunnel_response(S_OK, Some(1))))
            }
            _ => Err(refuse(E_PROXY_COOKIE_BADPACKET, "no access token")),
        }
    }

    fn channel_create(&mut self, p: ChannelCreate) -> Result<Action, Refusal> {
        let refuse = |code, reason| Refusal {
            code,
            reason,
            reply: Some(channel_response(code, None)),
        };
        if p.protocol != CHANNEL_PROTOCOL_RDP {
            return Err(refuse(E_PROXY_CAPABILITYMISMATCH, "not RDP"));
        }
        // The decoder guarantees at least one resource.
        let resource = p.resources.into_iter().next().unwrap_or_default();
        if resource.is_empty() {
            return Err(refuse(E_PROXY_RAP_ACCESSDENIED, "empty resource name"));
        }
        self.state = State::OpeningChannel;
        Ok(Action::OpenChannel {
            resource,
            port: p.port,
        })
    }

    fn expect(&self, state: State, operation: &'static str) -> Result<(), StateError> {
        if self.state == state {
            Ok(())
        } else {
            Err(StateError {
                operation,
                state: self.state,
            })
        }
    }

    /// The token is good: the tunnel exists. Returns the answer to send.
    pub fn accept_token(&mut self, tunnel_id: u32) -> Result<Packet, StateError> {
        self.expect(State::CheckingToken, "accept_token")?;
        self.state = State::TunnelCreated;
        Ok(tunnel_response(S_OK, Some(tunnel_id)))
    }

    /// The token is refused with `code` (an E_PROXY_* HRESULT): send the
    /// answer returned, then close.
    pub fn refuse_token(&mut self, code: u32) -> Result<Packet, StateError> {
        self.expect(State::CheckingToken, "refuse_token")?;
        self.state = State::Closed;
        Ok(tunnel_response(code, None))
    }

    /// The channel is open to a host: send the answer returned, then relay.
    pub fn accept_channel(&mut self, channel_id: u32) -> Result<Packet, StateError> {
        self.expect(State::OpeningChannel, "accept_channel")?;
        self.state = State::Open;
        Ok(channel_response(S_OK, Some(channel_id)))
    }

    /// No channel (refused, or no host reachable): send the answer
    /// returned, then close.
    pub fn refuse_channel(&mut self, code: u32) -> Result<Packet, StateError> {
        self.expect(State::OpeningChannel, "refuse_channel")?;
        self.state = State::Closed;
        Ok(channel_response(code, None))
    }

    /// The gateway ends an open channel (the host went away, shutdown):
    /// send the packet returned and wait for the client's answer.
    pub fn close(&mut self, status_code: u32) -> Result<Packet, StateError> {
        self.expect(State::Open, "close")?;
        self.state = State::Closing;
        Ok(Packet::CloseChannel { status_code })
    }

    /// A keepalive to send while the channel is open (the client answers
    /// with one of its own).
    pub fn keepalive(&self) -> Result<Packet, StateError> {
        self.expect(State::Open, "keepalive")?;
        Ok(Packet::Keepalive)
    }
}

fn handshake_response(code: u32) -> Packet {
    Packet::HandshakeResponse(HandshakeResponse {
        error_code: code,
        version_major: VERSION_MAJOR,
        version_minor: VERSION_MINOR,
        server_version: 0,
        extended_auth: HTTP_EXTENDED_AUTH_PAA,
    })
}

fn tunnel_response(code: u32, tunnel_id: Option<u32>) -> Packet {
    Packet::TunnelResponse(TunnelResponse {
        server_version: 0,
        status_code: code,
        tunnel_id,
        capabilities: tunnel_id.map(|_| HTTP_CAPABILITY_IDLE_TIMEOUT),
        consent_message: None,
    })
}

fn channel_response(code: u32, channel_id: Option<u32>) -> Packet {
    Packet::ChannelResponse(ChannelResponse {
        error_code: code,
        channel_id,
        udp_port: None,
        authn_cookie: None,
    })
}

/// The refusal of a packet that is not expected now: the answer of its
/// kind, if it has one, with E_PROXY_INTERNALERROR.
fn out_of_order(packet: &Packet) -> Refusal {
    let code = E_PROXY_INTERNALERROR;
    let reply = match packet {
        Packet::HandshakeRequest(_) => Some(handshake_response(code)),
        Packet::TunnelCreate(_) => Some(tunnel_response(code, None)),
        Packet::TunnelAuth(_) => Some(Packet::TunnelAuthResponse(TunnelAuthResponse {
            error_code: code,
            redirection_flags: None,
            idle_timeout_minutes: None,
            soh_response: None,
        })),
        Packet::ChannelCreate(_) => Some(channel_response(code, None)),
        _ => None,
    };
    Refusal {
        code,
        reason: "out of order",
        reply,
    }
}
