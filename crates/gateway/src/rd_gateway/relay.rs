//! A channel's relay: DATA packets to the host, the host's bytes back as
//! DATA packets, under rule R4's idle bounds.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::link::Link;
use super::tunnel::{Tunnel, send};
use crate::door::{Outcome, Report, logon_evidence};
use crate::front_door::RELAY_BUFFER_BYTES;
use crate::tsgu::Action;
use crate::tsgu::hresult::S_OK;
use crate::tsgu::packet::{self};

/// DATA payloads to the host, the host's bytes back as DATA packets, until
/// either side closes: the client with CLOSE_CHANNEL (answered) or by
/// leaving, the host by closing (the gateway then sends CLOSE_CHANNEL).
pub(super) async fn relay(
    mut ws: Link,
    host: TcpStream,
    tunnel: &mut Tunnel,
    (idle, idle_without_logon): (Duration, Duration),
    report: &mut Report,
) -> Outcome {
    let (mut host_read, mut host_write) = host.into_split();
    let mut buffer = Vec::with_capacity(RELAY_BUFFER_BYTES);
    let mut out = Vec::with_capacity(RELAY_BUFFER_BYTES + 64);
    // Rule R4's idle bound: only data counts (a tunnel's keepalives carry
    // no session), the shorter bound until the channel shows a logon.
    let mut seen = (0u64, 0u64);
    let mut last = Instant::now();
    let ended: Result<(), String> = loop {
        buffer.clear();
        let carried = (report.client_to_host_bytes, report.host_to_client_bytes);
        if carried != seen {
            seen = carried;
            last = Instant::now();
        }
        let logon_seen = logon_evidence(report, 0);
        let limit = if logon_seen { idle } else { idle_without_logon };
        tokio::select! {
            () = tokio::time::sleep_until((last + limit).into()) => {
                let what = if logon_seen { "" } else { " without evidence of a logon" };
                break Err(format!("no data either way for {limit:?}{what}"));
            }
            packet = tunnel.next(&mut ws) => {
                let packet = match packet {
                    Ok(Some(p)) => p,
                    Ok(None) => break Ok(()),
                    Err(e) => break Err(e),
                };
                match tunnel.server.receive(packet) {
                    Ok(Action::Relay(data)) => {
                        report.client_to_host_bytes += data.len() as u64;
                        metrics::counter!("deskbroker_rdg_bytes_total", "direction" => "client_to_host")
                            .increment(data.len() as u64);
                        if let Err(e) = host_write.write_all(&data).await {
                            break Err(format!("host: {e}"));
                        }
                    }
                    Ok(Action::Send(p)) => {
                        if let Err(e) = send(&mut ws, &p).await {
                            break Err(e);
                        }
                    }
                    Ok(Action::Close { send: reply }) => {
                        if let Some(p) = reply {
                            let _ = send(&mut ws, &p).await;
                        }
                        break Ok(());
                    }
                    Ok(_) => {}
                    Err(refusal) => {
                        if let Some(p) = &refusal.reply {
                            let _ = send(&mut ws, p).await;
                        }
                        break Err(refusal.to_string());
                    }
                }
            }
            read = host_read.read_buf(&mut buffer) => match read {
                Ok(0) | Err(_) => {
                    // The host closed: tell the client, and stop.
                    if let Ok(p) = tunnel.server.close(S_OK) {
                        let _ = send(&mut ws, &p).await;
                    }
                    break Ok(());
                }
                Ok(n) => {
                    report.host_to_client_bytes += n as u64;
                    metrics::counter!("deskbroker_rdg_bytes_total", "direction" => "host_to_client")
                        .increment(n as u64);
                    out.clear();
                    packet::encode_data(&buffer, &mut out);
                    if let Err(e) = ws.send(std::mem::take(&mut out)).await {
                        break Err(e);
                    }
                }
            },
        }
    };
    let _ = host_write.shutdown().await;
    ws.close().await;
    if let Err(e) = ended {
        report.detail = Some(format!("relay ended: {e}"));
    }
    Outcome::Relayed
}
