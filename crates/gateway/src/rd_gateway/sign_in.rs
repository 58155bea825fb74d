//! Windows sign-in of an RD Gateway request (rule AD2,
//! `crate::windows_sign_in`), before the tunnel's upgrade (or its 200):
//!
//! - a ticket client (`RDG-Auth-Scheme: PAA`) goes on as it is;
//! - `Authorization: Negotiate <Kerberos>` is checked at once;
//! - `Authorization: NTLM <NEGOTIATE message>` (or the same message under
//!   `Negotiate`, as it is or inside SPNEGO, as Windows sends it when it
//!   gets no Kerberos ticket) is answered `401` with the
//!   domain's challenge on the same connection, kept open; the client's
//!   next request there, the same request with its AUTHENTICATE message,
//!   is judged by the domain and, signed in, goes on as the request;
//! - a request with none of these is answered `401` with the schemes the
//!   gateway takes, and closed.
//!
//! A refused sign-in is answered `401` (and audited), a source or user
//! over its failures `429`, a sign-in that could not be checked `503`.

use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;

use crate::door::{Outcome, Report};
use crate::https::{BoxIo, Head, HeadError, answer_status, read_head};
use crate::placer::Placer;
use crate::sources::SourceGuard;
use crate::windows_sign_in::{SignInError, SignedIn, WindowsSignIn, ntlm, refusal};

/// A request after its sign-in: the user (None: a ticket client, or a
/// legacy IN channel that brought no sign-in), and the head the request
/// goes on with (an NTLM sign-in's second request) and what was read past
/// it.
pub(crate) struct Signed {
    pub signed_in: Option<SignedIn>,
    pub head: Head,
    pub rest: Vec<u8>,
}

/// Signs the request `head` in, as the module says. `optional`: a request
/// without `Authorization` goes on unsigned rather than challenged (a
/// legacy IN channel, which joins its OUT channel's tunnel).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn sign_in<P: Placer>(
    sign_in: &WindowsSignIn,
    placer: &P,
    (head, rest): (Head, Vec<u8>),
    stream: &mut BoxIo,
    source: &SourceGuard,
    (deadline, idle): (Instant, Duration),
    optional: bool,
    report: &mut Report,
) -> Result<Signed, Outcome> {
    if head
        .header("RDG-Auth-Scheme")
        .is_some_and(|s| s.trim().eq_ignore_ascii_case("PAA"))
    {
        return Ok(Signed {
            signed_in: None,
            head,
            rest,
        });
    }
    let Some((scheme, token)) = authorization(&head) else {
        if optional {
            return Ok(Signed {
                signed_in: None,
                head,
                rest,
            });
        }
        answer_status(stream, &challenge(sign_in)).await;
        report.detail = Some("no ticket and no Windows sign-in: challenged".into());
        return Err(Outcome::SignInChallenged);
    };
    let ntlm = scheme.eq_ignore_ascii_case("NTLM") || ntlm::wrapping(&token).is_some();
    if ntlm && sign_in.takes_ntlm() {
        let second = ntlm_handshake(sign_in, &head, rest, &scheme, &token, stream, source, idle);
        let second = tokio::time::timeout_at(deadline.into(), second)
            .await
            .map_err(|_| Outcome::Timeout)?;
        return match second {
            Ok((signed_in, head, rest)) => signed(signed_in, head, rest, source, report),
            Err(Failed::Sign(e, claimed)) => {
                let failed = (e, claimed, true);
                Err(refused(sign_in, placer, failed, stream, source, report).await)
            }
            Err(Failed::Head(e)) => {
                answer_status(stream, "400 Bad Request").await;
                report.detail = Some(format!("the NTLM sign-in's second request: {e}"));
                Err(Outcome::BadRequest)
            }
        };
    }
    let signed_in = if scheme.eq_ignore_ascii_case("Negotiate") && !ntlm {
        sign_in.accept(source.key(), &token).await
    } else {
        Err(SignInError::Refused(format!(
            "the {scheme} scheme is not taken here"
        )))
    };
    match signed_in {
        Ok(signed_in) => signed(signed_in, head, rest, source, report),
        Err(e) => {
            let failed = (e, None, false);
            Err(refused(sign_in, placer, failed, stream, source, report).await)
        }
    }
}

/// A signed-in request: logged (the user, never the exchange).
fn signed(
    signed_in: SignedIn,
    head: Head,
    rest: Vec<u8>,
    source: &SourceGuard,
    report: &mut Report,
) -> Result<Signed, Outcome> {
    tracing::info!(user = %signed_in.user, source = %source.key(), "rd gateway: Windows sign-in");
    report.user = Some(signed_in.user.clone());
    Ok(Signed {
        signed_in: Some(signed_in),
        head,
        rest,
    })
}

/// How an NTLM handshake failed: a sign-in error (and the user its
/// answer claimed), or a second request that could not be read.
enum Failed {
    Sign(SignInError, Option<String>),
    Head(HeadError),
}

/// Both legs of NTLM on this connection: the challenge answered `401`
/// (kept open), then the same request again with the client's answer.
#[allow(clippy::too_many_arguments)]
async fn ntlm_handshake(
    sign_in: &WindowsSignIn,
    first: &Head,
    rest: Vec<u8>,
    scheme: &str,
    token: &str,
    stream: &mut BoxIo,
    source: &SourceGuard,
    idle: Duration,
) -> Result<(SignedIn, Head, Vec<u8>), Failed> {
    let (handshake, challenge) = sign_in
        .ntlm_challenge(source.key(), token)
        .await
        .map_err(|e| Failed::Sign(e, None))?;
    // A body of the first request is not read (FreeRDP's carries none);
    // a request with one cannot go on.
    if !matches!(
        first.framing,
        crate::https::Framing::None | crate::https::Framing::Length(0)
    ) {
        let e = SignInError::Refused("an NTLM first request with a body".into());
        return Err(Failed::Sign(e, None));
    }
    let answer = format!(
        "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: {scheme} {challenge}\r\n\
         Content-Length: 0\r\n\r\n"
    );
    let write = async {
        stream.write_all(answer.as_bytes()).await?;
        stream.flush().await
    };
    if let Err(e) = write.await {
        let e = SignInError::Refused(format!("answering the NTLM challenge: {e}"));
        return Err(Failed::Sign(e, None));
    }
    let (head, rest) = read_head(stream, rest, idle).await.map_err(Failed::Head)?;
    let same = head.method == first.method
        && head.target.eq_ignore_ascii_case(&first.target)
        && head.header("RDG-Connection-Id") == first.header("RDG-Connection-Id");
    if !same {
        let e = SignInError::Refused("the NTLM answer came on another request".into());
        return Err(Failed::Sign(e, None));
    }
    let token = match authorization(&head) {
        Some((s, token)) if s.eq_ignore_ascii_case(scheme) => token,
        _ => {
            let e = SignInError::Refused("the NTLM answer is missing".into());
            return Err(Failed::Sign(e, None));
        }
    };
    let claimed = sign_in.ntlm_claimed_user(&token);
    match sign_in.ntlm_finish(source.key(), handshake, &token).await {
        Ok(signed_in) => Ok((signed_in, head, rest)),
        Err(e) => Err(Failed::Sign(e, claimed)),
    }
}

/// Answers a failed sign-in (its error, the user it claimed, and whether
/// it was NTLM), audits a refusal, and says the outcome.
async fn refused<P: Placer>(
    sign_in: &WindowsSignIn,
    placer: &P,
    (e, claimed, ntlm): (SignInError, Option<String>, bool),
    stream: &mut BoxIo,
    source: &SourceGuard,
    report: &mut Report,
) -> Outcome {
    report.user = claimed.clone();
    match e {
        SignInError::Refused(_) => {
            answer_status(stream, &challenge(sign_in)).await;
            report.detail = Some(format!("Windows sign-in refused: {e}"));
            placer
                .sign_in_refused(source.key(), claimed.as_deref(), reason(&e, ntlm))
                .await;
            Outcome::SignInRefused
        }
        SignInError::Throttled(_) => {
            answer_status(stream, "429 Too Many Requests\r\nRetry-After: 60").await;
            report.detail = Some(e.to_string());
            Outcome::SignInThrottled
        }
        SignInError::Unavailable(_) => {
            answer_status(stream, "503 Service Unavailable\r\nRetry-After: 10").await;
            report.detail = Some(e.to_string());
            tracing::warn!(source = %source.key(), "rd gateway: {e}");
            Outcome::SignInUnavailable
        }
    }
}

/// `Authorization`'s scheme and token, when it has both.
fn authorization(head: &Head) -> Option<(String, String)> {
    let (scheme, token) = head.header("Authorization")?.trim().split_once(' ')?;
    Some((scheme.to_string(), token.trim().to_string()))
}

/// The `401` status line and the schemes the gateway takes.
pub(crate) fn challenge(sign_in: &WindowsSignIn) -> String {
    let mut status = "401 Unauthorized".to_string();
    for scheme in sign_in.schemes() {
        status.push_str("\r\nWWW-Authenticate: ");
        status.push_str(scheme);
    }
    status
}

/// The audit log's reason for a refused sign-in (`refusal`): its kind,
/// not its details. `ntlm`: the sign-in was NTLM (else Kerberos).
fn reason(e: &SignInError, ntlm: bool) -> &'static str {
    let SignInError::Refused(why) = e else {
        return refusal::MALFORMED_TOKEN;
    };
    if why.contains("not base64") || why.contains("too long") {
        refusal::MALFORMED_TOKEN
    } else if ntlm {
        refusal::NTLM_REFUSED
    } else if why.contains("is for") {
        refusal::FOREIGN_TICKET
    } else {
        refusal::KERBEROS_REFUSED
    }
}

/// `response` (a head ending in an empty line) with the sign-in's answer,
/// `WWW-Authenticate: Negotiate <reply>` (RFC 4559 §5: the gateway's
/// proof of itself), when there is one.
pub(super) fn with_reply(mut response: String, reply: Option<&str>) -> String {
    if let Some(reply) = reply
        && response.ends_with("\r\n\r\n")
    {
        response.truncate(response.len() - 2);
        response.push_str(&format!("WWW-Authenticate: Negotiate {reply}\r\n\r\n"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_audited_by_its_kind() {
        let refused = |why: &str| SignInError::Refused(why.into());
        let ntlm_type = refused("an NTLM message of type 3 where type 1 belongs");
        assert_eq!(reason(&ntlm_type, true), refusal::NTLM_REFUSED);
        let domain = refused("the domain refused the NTLM sign-in: NA NT_STATUS_LOGON_FAILURE");
        assert_eq!(reason(&domain, true), refusal::NTLM_REFUSED);
        let foreign = refused("the ticket is for HTTP/other@X, not for HTTP/gw");
        assert_eq!(reason(&foreign, false), refusal::FOREIGN_TICKET);
        let garbage = refused("the Negotiate token is not base64");
        assert_eq!(reason(&garbage, false), refusal::MALFORMED_TOKEN);
        assert_eq!(reason(&garbage, true), refusal::MALFORMED_TOKEN);
        let replay = refused("the Kerberos ticket was refused: a replay");
        assert_eq!(reason(&replay, false), refusal::KERBEROS_REFUSED);
        for kind in [ntlm_type, domain, foreign, garbage, replay] {
            for ntlm in [true, false] {
                assert!(refusal::ALL.contains(&reason(&kind, ntlm)));
            }
        }
    }
}
