//! The client side of `deskbroker-devbench rdp`: the connections it opens to a
//! target (connect, the first PDU with `Cookie: mstshash=<user>`, the
//! host's Connection Confirm) and the runs made of them, each answering one
//! JSON object of figures: [`rate_run`] (connections per second, or the
//! unloaded latency with one client) and [`throughput_run`] (bytes relayed
//! from the hosts). Every network wait is bounded ([`CONNECTION_TIMEOUT`],
//! [`IO_TIMEOUT`](super::hosts::IO_TIMEOUT)) and every run by a duration or a count.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::hosts::{
    CONNECTION_CONFIRM, LOGON_CLIENT_BYTES, LOGON_COMMAND, LOGON_HOST_BYTES, STREAM_CHUNK_BYTES,
    STREAM_COMMAND, with_timeout,
};
use super::{Endpoints, Target};
use deskbroker::benchkit::round3;

/// How long one benchmark connection may take from connect to the
/// host's whole Connection Confirm; past it, it counts as an error.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);

/// Who the connections of a run claim to be.
#[derive(Clone)]
pub enum Users {
    /// A user never seen before for every connection.
    New(Arc<AtomicU64>),
    /// Users `r0`..`rN`, in turn.
    Repeat(u64),
}

impl Users {
    fn name(&self, i: u64) -> String {
        match self {
            Users::New(next) => format!("u{}", next.fetch_add(1, Ordering::Relaxed)),
            Users::Repeat(n) => format!("r{}", i % n),
        }
    }
}

/// When a run stops starting connections.
#[derive(Clone, Copy)]
pub enum RunLimit {
    Time(Duration),
    Count(u64),
}

/// The client's first PDU: TPKT, X.224 Connection Request with a
/// `Cookie: mstshash=<user>` line, and RDP_NEG_REQ asking for TLS or
/// CredSSP (what mstsc sends, less its correlation info).
pub fn first_pdu(user: &str) -> Vec<u8> {
    let cookie = format!("Cookie: mstshash={user}\r\n");
    let length = 4 + 7 + cookie.len() + 8;
    let mut pdu = Vec::with_capacity(length);
    pdu.extend_from_slice(&[3, 0]);
    pdu.extend_from_slice(&(length as u16).to_be_bytes());
    pdu.extend_from_slice(&[(length - 5) as u8, 0xE0, 0, 0, 0, 0, 0]);
    pdu.extend_from_slice(cookie.as_bytes());
    pdu.extend_from_slice(&[1, 0, 8, 0, 3, 0, 0, 0]);
    pdu
}

/// Connects, sends `pdu` and reads the host's whole Connection Confirm.
/// Answers the open stream and the time from connect to the first byte
/// of the answer, or a short label of what failed.
async fn open(address: SocketAddr, pdu: &[u8]) -> Result<(TcpStream, Duration), String> {
    let started = Instant::now();
    let handshake = async {
        let mut stream = TcpStream::connect(address)
            .await
            .map_err(|e| format!("connect: {}", e.kind()))?;
        let _ = stream.set_nodelay(true);
        stream
            .write_all(pdu)
            .await
            .map_err(|e| format!("send: {}", e.kind()))?;
        let mut reply = [0u8; CONNECTION_CONFIRM.len()];
        let n = stream
            .read(&mut reply)
            .await
            .map_err(|e| format!("receive: {}", e.kind()))?;
        if n == 0 {
            return Err("closed before the host answered".to_string());
        }
        let first_byte = started.elapsed();
        stream
            .read_exact(&mut reply[n..])
            .await
            .map_err(|e| format!("receive: {}", e.kind()))?;
        if reply != CONNECTION_CONFIRM {
            return Err("unexpected answer".to_string());
        }
        Ok((stream, first_byte))
    };
    tokio::time::timeout(CONNECTION_TIMEOUT, handshake)
        .await
        .unwrap_or_else(|_| Err("timed out".to_string()))
}

/// After the Connection Confirm, what a client that logs on sends and
/// reads (see [`LOGON_COMMAND`]): the front door then keeps its session
/// when the connection closes (rule R4), and the user's next connection
/// is a reconnect to it (S1).
async fn log_on(mut stream: TcpStream) -> Result<(), String> {
    let mut logon = vec![0u8; LOGON_CLIENT_BYTES];
    logon[0] = LOGON_COMMAND;
    logon[1..9].copy_from_slice(&((LOGON_CLIENT_BYTES - 9) as u64).to_be_bytes());
    with_timeout(stream.write_all(&logon))
        .await
        .map_err(|e| format!("logon: {}", e.kind()))?;
    let mut answer = [0u8; LOGON_HOST_BYTES];
    with_timeout(stream.read_exact(&mut answer))
        .await
        .map_err(|e| format!("logon: {}", e.kind()))?;
    Ok(())
}

fn new_histogram() -> hdrhistogram::Histogram<u64> {
    // Nanoseconds, from 1 µs to a minute, 3 significant digits.
    hdrhistogram::Histogram::new_with_bounds(1_000, 60_000_000_000, 3).expect("valid bounds")
}

/// What one client worker of a run saw.
struct WorkerTally {
    connections: u64,
    first_byte_ns: hdrhistogram::Histogram<u64>,
    errors: BTreeMap<String, u64>,
}

/// Connections of `concurrency` clients until `limit`: connect, first
/// PDU, Connection Confirm, then (with `logon`) a logon's worth of bytes
/// each way ([`log_on`]), close. With one client and a count, this is the
/// unloaded latency run.
pub async fn rate_run(
    endpoints: &Endpoints,
    target: Target,
    users: Users,
    logon: bool,
    concurrency: u32,
    limit: RunLimit,
) -> Value {
    let next = Arc::new(AtomicU64::new(0));
    let cpu_before = endpoints.cpu_seconds(target);
    let started = Instant::now();
    let deadline = match limit {
        RunLimit::Time(d) => Some(started + d),
        RunLimit::Count(_) => None,
    };
    let count = match limit {
        RunLimit::Count(n) => n,
        RunLimit::Time(_) => u64::MAX,
    };
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let next = next.clone();
        let users = users.clone();
        let addresses: Vec<SocketAddr> = (0..endpoints.hosts.len() as u64)
            .map(|i| endpoints.address(target, i))
            .collect();
        workers.spawn(async move {
            let mut tally = WorkerTally {
                connections: 0,
                first_byte_ns: new_histogram(),
                errors: BTreeMap::new(),
            };
            loop {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    break;
                }
                let pdu = first_pdu(&users.name(i));
                let address = addresses[(i % addresses.len() as u64) as usize];
                let opened = open(address, &pdu).await;
                let done = match opened {
                    Ok((stream, first_byte)) if logon => log_on(stream).await.map(|()| first_byte),
                    Ok((_, first_byte)) => Ok(first_byte),
                    Err(e) => Err(e),
                };
                match done {
                    Ok(first_byte) => {
                        tally.connections += 1;
                        tally
                            .first_byte_ns
                            .saturating_record(first_byte.as_nanos() as u64);
                    }
                    Err(e) => *tally.errors.entry(e).or_default() += 1,
                }
            }
            tally
        });
    }
    let mut connections = 0;
    let mut first_byte_ns = new_histogram();
    let mut errors = BTreeMap::<String, u64>::new();
    while let Some(r) = workers.join_next().await {
        match r {
            Ok(t) => {
                connections += t.connections;
                let _ = first_byte_ns.add(&t.first_byte_ns);
                for (e, n) in t.errors {
                    *errors.entry(e).or_default() += n;
                }
            }
            Err(e) => {
                *errors
                    .entry(format!("client task failed: {e}"))
                    .or_default() += 1
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let cpu = cpu_used(endpoints, target, cpu_before);
    let ms = |ns: u64| round3(ns as f64 / 1e6);
    json!({
        "concurrency": concurrency,
        "connections": connections,
        "seconds": round3(seconds),
        "perSecond": (connections as f64 / seconds).round(),
        "firstByteP50Ms": ms(first_byte_ns.value_at_quantile(0.5)),
        "firstByteP99Ms": ms(first_byte_ns.value_at_quantile(0.99)),
        "firstByteMeanMs": round3(first_byte_ns.mean() / 1e6),
        "firstByteMaxMs": ms(first_byte_ns.max()),
        "proxyCpuSeconds": cpu.map(round3),
        "proxyCpuMsPer1kConnections": cpu
            .filter(|_| connections > 0)
            .map(|c| round3(c * 1e6 / connections as f64)),
        "errors": errors,
    })
}

/// `streams` long connections, each asking its host for
/// `total_bytes / streams` bytes and reading them all; answers MB/s
/// (10^6 bytes) over the wall time of the whole run.
pub async fn throughput_run(
    endpoints: &Endpoints,
    target: Target,
    users: Users,
    streams: u32,
    total_bytes: u64,
) -> Value {
    let per_stream = total_bytes / u64::from(streams);
    let cpu_before = endpoints.cpu_seconds(target);
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..u64::from(streams) {
        let address = endpoints.address(target, i);
        let pdu = first_pdu(&users.name(i));
        tasks.spawn(async move { stream_from_host(address, &pdu, per_stream).await });
    }
    let mut received = 0u64;
    let mut streams_done = 0u64;
    let mut errors = BTreeMap::<String, u64>::new();
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(Ok(n)) => {
                received += n;
                streams_done += 1;
            }
            Ok(Err(e)) => *errors.entry(e).or_default() += 1,
            Err(e) => {
                *errors
                    .entry(format!("client task failed: {e}"))
                    .or_default() += 1
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let cpu = cpu_used(endpoints, target, cpu_before);
    json!({
        "streams": streams,
        "streamsDone": streams_done,
        "bytes": received,
        "seconds": round3(seconds),
        "megabytesPerSecond": (received as f64 / seconds / 1e6).round(),
        "proxyCpuSeconds": cpu.map(round3),
        "proxyCpuSecondsPerGB": cpu
            .filter(|_| received > 0)
            .map(|c| round3(c * 1e9 / received as f64)),
        "errors": errors,
    })
}

/// One throughput connection: handshake, then `bytes` from the host.
async fn stream_from_host(address: SocketAddr, pdu: &[u8], bytes: u64) -> Result<u64, String> {
    let (mut stream, _) = open(address, pdu).await?;
    let mut command = [0u8; 9];
    command[0] = STREAM_COMMAND;
    command[1..].copy_from_slice(&bytes.to_be_bytes());
    with_timeout(stream.write_all(&command))
        .await
        .map_err(|e| format!("send: {e}"))?;
    let mut buffer = vec![0u8; STREAM_CHUNK_BYTES];
    let mut received = 0u64;
    while received < bytes {
        let n = with_timeout(stream.read(&mut buffer))
            .await
            .map_err(|e| format!("stream: {e}"))?;
        if n == 0 {
            return Err(format!("stream: closed after {received} of {bytes} bytes"));
        }
        received += n as u64;
    }
    Ok(received)
}

/// CPU seconds `target`'s process used since `before`.
fn cpu_used(endpoints: &Endpoints, target: Target, before: Option<f64>) -> Option<f64> {
    Some(endpoints.cpu_seconds(target)? - before?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_pdu_is_one_the_front_door_reads_as_the_user() {
        let pdu = first_pdu("u12345");
        let request = gateway::pdu::parse(&pdu).expect("a valid first PDU");
        assert_eq!(
            request.routing,
            Some(gateway::pdu::Routing::User("u12345".into()))
        );
        assert_eq!(request.negotiation.map(|n| n.requested_protocols), Some(3));
    }
}
