//! The fake session hosts of `deskbroker-devbench rdp`: loopback listeners,
//! tasks of the benchmark process. Each connection reads the client's first
//! PDU (TPKT, length-delimited), answers an X.224 Connection Confirm, then
//! waits for the client to close, or for a 9-byte command (a command byte
//! and a u64 byte count): [`STREAM_COMMAND`] streams that many bytes to
//! the client, [`LOGON_COMMAND`] reads that many and answers a logon's
//! worth. Every wait is bounded by [`IO_TIMEOUT`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How long any single read or write may wait for progress (hosts and
/// clients alike), so a stuck peer never hangs the benchmark.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest first PDU a host accepts (the X.224 length indicator is one
/// byte, so a real Connection Request is at most 259 bytes).
pub const MAX_FIRST_PDU_BYTES: usize = 259;
/// Bytes per read or write when streaming (hosts and clients).
pub const STREAM_CHUNK_BYTES: usize = 256 * 1024;
/// What a host answers to a Connection Request: TPKT (19 bytes), X.224
/// Connection Confirm (LI 14, code 0xD0, dst-ref 0, src-ref 0x1234,
/// class 0) and RDP_NEG_RSP selecting PROTOCOL_SSL.
pub const CONNECTION_CONFIRM: [u8; 19] = [
    3, 0, 0, 19, 14, 0xD0, 0, 0, 0x12, 0x34, 0, 2, 0, 8, 0, 1, 0, 0, 0,
];
/// The command byte asking a host to stream: `D` and a u64 count (BE).
pub const STREAM_COMMAND: u8 = b'D';
/// The command byte of a logon: `L` and a u64 count (BE) of the bytes the
/// client sends next; the host reads them and answers
/// [`LOGON_HOST_BYTES`]. It stands for the TLS handshake and the logon of
/// a real client, so that the front door keeps the session when the
/// connection closes (rule R4's evidence of a logon: at least 1024 bytes
/// from the host and 512 from the client after the first PDU).
pub const LOGON_COMMAND: u8 = b'L';
/// What a client sends after its first PDU to log on, the command
/// included (R4 asks for 512).
pub const LOGON_CLIENT_BYTES: usize = 1024;
/// What a host answers a logon with (R4 asks for 1024, the Connection
/// Confirm counted).
pub const LOGON_HOST_BYTES: usize = 2048;

/// Bounds one read or write by [`IO_TIMEOUT`].
pub async fn with_timeout<T>(
    io: impl std::future::Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    tokio::time::timeout(IO_TIMEOUT, io)
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}

/// The session hosts: loopback listeners whose accept loops end when
/// this is dropped.
pub struct Hosts {
    pub addresses: Vec<SocketAddr>,
    /// First PDUs that were not TPKT or too long: should stay 0.
    pub bad_requests: Arc<AtomicU64>,
    _accepting: tokio::task::JoinSet<()>,
}

impl Hosts {
    pub async fn start(n: u16) -> anyhow::Result<Hosts> {
        let bad_requests = Arc::new(AtomicU64::new(0));
        let mut accepting = tokio::task::JoinSet::new();
        let mut addresses = Vec::new();
        for _ in 0..n {
            let listener = TcpListener::bind("127.0.0.1:0")
                .await
                .context("cannot start a session host on 127.0.0.1")?;
            addresses.push(listener.local_addr()?);
            let bad_requests = bad_requests.clone();
            accepting.spawn(async move {
                loop {
                    match listener.accept().await {
                        Ok((stream, _)) => {
                            let bad_requests = bad_requests.clone();
                            tokio::spawn(async move {
                                if host_connection(stream).await.is_err() {
                                    bad_requests.fetch_add(1, Ordering::Relaxed);
                                }
                            });
                        }
                        // Out of descriptors, most likely: pause, go on.
                        Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                    }
                }
            });
        }
        Ok(Hosts {
            addresses,
            bad_requests,
            _accepting: accepting,
        })
    }
}

/// One connection to a session host. Errs only on a malformed first
/// PDU; a peer that goes away (a health check, a client that closed) is
/// a normal end.
async fn host_connection(mut stream: TcpStream) -> Result<(), ()> {
    let _ = stream.set_nodelay(true);
    let mut header = [0u8; 4];
    if with_timeout(stream.read_exact(&mut header)).await.is_err() {
        return Ok(()); // a health check, or a client that gave up
    }
    let length = usize::from(u16::from_be_bytes([header[2], header[3]]));
    if header[0] != 3 || !(4..=MAX_FIRST_PDU_BYTES).contains(&length) {
        return Err(());
    }
    let mut rest = vec![0u8; length - 4];
    if with_timeout(stream.read_exact(&mut rest)).await.is_err()
        || with_timeout(stream.write_all(&CONNECTION_CONFIRM))
            .await
            .is_err()
    {
        return Ok(());
    }
    let mut command = [0u8; 9];
    if with_timeout(stream.read_exact(&mut command)).await.is_err() {
        return Ok(()); // the client closed after the confirm
    }
    let count = u64::from_be_bytes(command[1..].try_into().map_err(|_| ())?);
    match command[0] {
        STREAM_COMMAND => {}
        LOGON_COMMAND if count <= LOGON_CLIENT_BYTES as u64 => {
            let mut logon = vec![0u8; count as usize];
            if with_timeout(stream.read_exact(&mut logon)).await.is_ok() {
                let _ = with_timeout(stream.write_all(&[0u8; LOGON_HOST_BYTES])).await;
                // Wait for the client to close (bounded).
                let _ = with_timeout(stream.read(&mut command)).await;
            }
            return Ok(());
        }
        _ => return Err(()),
    }
    let mut remaining = count;
    let chunk = vec![0u8; STREAM_CHUNK_BYTES];
    while remaining > 0 {
        let n = remaining.min(chunk.len() as u64) as usize;
        if with_timeout(stream.write_all(&chunk[..n])).await.is_err() {
            return Ok(());
        }
        remaining -= n as u64;
    }
    // Wait for the client to close (bounded), so the last bytes are read.
    let _ = with_timeout(stream.read(&mut command)).await;
    Ok(())
}
