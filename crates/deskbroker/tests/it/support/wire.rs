//! RDP on the wire, for the doors' tests: the first PDU a real client
//! sends, fake session hosts that echo (and count), reading the front
//! door's refusal, and what a logon looks like to it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// A fake RDP host: reads the first PDU, answers `CC` (its "Connection
/// Confirm"), then echoes. Answers its address.
pub async fn echo_host() -> String {
    echo_host_counting().await.0
}

/// [`echo_host`], with the count of connections it accepted (each one the
/// front door dialled for a client).
pub async fn echo_host_counting() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("addr").to_string();
    let dialled = Arc::new(AtomicUsize::new(0));
    let counter = dialled.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut header = [0u8; 4];
                if s.read_exact(&mut header).await.is_err() {
                    return;
                }
                let len = usize::from(u16::from_be_bytes([header[2], header[3]]));
                let mut rest = vec![0u8; len.saturating_sub(4)];
                if s.read_exact(&mut rest).await.is_err() {
                    return;
                }
                if s.write_all(b"CC").await.is_err() {
                    return;
                }
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (address, dialled)
}

/// An X.224 Connection Request with `line` as its cookie or routing token
/// and an RDP_NEG_REQ asking for TLS or CredSSP, as mstsc sends it.
pub fn first_pdu(line: &str) -> Vec<u8> {
    let mut body = vec![0xE0, 0, 0, 0, 0, 0];
    body.extend_from_slice(line.as_bytes());
    body.extend_from_slice(b"\r\n");
    body.extend_from_slice(&[0x01, 0x00, 0x08, 0x00, 0x03, 0x00, 0x00, 0x00]);
    let mut pdu = vec![3, 0, 0, 0];
    let total = (4 + 1 + body.len()) as u16;
    pdu[2..4].copy_from_slice(&total.to_be_bytes());
    pdu.push(body.len() as u8);
    pdu.extend_from_slice(&body);
    pdu
}

/// Opens a front-door connection with `line`; answers it once the host's
/// `CC` came back, or `None` when the front door refused it instead (its
/// RDP Negotiation Failure, then the close; see [`refusal`]).
pub async fn open(front_door: &str, line: &str) -> Option<TcpStream> {
    let mut c = TcpStream::connect(front_door).await.expect("connect");
    c.write_all(&first_pdu(line)).await.expect("write");
    let mut cc = [0u8; 2];
    match tokio::time::timeout(PATIENCE, c.read_exact(&mut cc)).await {
        Ok(Ok(_)) if &cc == b"CC" => Some(c),
        Ok(Ok(_)) => {
            let code = refusal(&mut c, cc).await;
            assert!(
                (1001..=1003).contains(&code),
                "{line:?}: told an unknown failure code {code}"
            );
            None
        }
        Ok(Err(_)) => None,
        Err(_) => panic!("the front door neither relayed nor closed {line:?}"),
    }
}

/// Reads the rest of the front door's refusal, whose first two bytes are
/// `start`: an X.224 Connection Confirm with an RDP Negotiation Failure,
/// then the close; answers its failure code.
pub async fn refusal(c: &mut TcpStream, start: [u8; 2]) -> u32 {
    let mut answer = [0u8; 19];
    answer[..2].copy_from_slice(&start);
    tokio::time::timeout(PATIENCE, c.read_exact(&mut answer[2..]))
        .await
        .expect("the refusal in time")
        .expect("the whole refusal");
    assert_eq!(
        answer[..15],
        [3, 0, 0, 19, 14, 0xD0, 0, 0, 0, 0, 0, 3, 0, 8, 0],
        "not a Connection Confirm with an RDP Negotiation Failure"
    );
    let mut more = [0u8; 1];
    let closed = tokio::time::timeout(PATIENCE, c.read(&mut more))
        .await
        .expect("closed in time");
    assert!(matches!(closed, Ok(0) | Err(_)), "bytes after the refusal");
    u32::from_le_bytes([answer[15], answer[16], answer[17], answer[18]])
}

/// Plays a logon as far as the front door can see one (rule S9's
/// evidence): enough bytes both ways through the echoing host.
pub async fn log_on(c: &mut TcpStream) {
    let n = gateway::front_door::LOGON_EVIDENCE_HOST_BYTES as usize;
    let bytes = vec![0x42; n];
    c.write_all(&bytes).await.expect("write");
    let mut back = vec![0; n];
    tokio::time::timeout(PATIENCE, c.read_exact(&mut back))
        .await
        .expect("in time")
        .expect("echo");
}
