//! Fuzzes the MS-TSGU (RD Gateway) decoder and state machine: any bytes,
//! fed whole or cut in two anywhere, decode to the same packets and the
//! same error, never a panic; the decoder never holds more than one
//! packet; whatever decodes re-encodes to the same packet; and no order of
//! packets panics the gateway's state machine.

#![no_main]

use gateway::tsgu::packet::{self, MAX_PACKET_BYTES};
use gateway::tsgu::{Action, Decoder, Packet, PacketError, Server, ServerConfig};
use libfuzzer_sys::fuzz_target;

fn decode(pieces: &[&[u8]]) -> (Vec<Packet>, Option<PacketError>) {
    let mut decoder = Decoder::new();
    let mut packets = Vec::new();
    for piece in pieces {
        let mut input = *piece;
        loop {
            match decoder.decode(&mut input) {
                Ok(Some(p)) => packets.push(p),
                Ok(None) => break,
                Err(e) => return (packets, Some(e)),
            }
        }
        assert!(input.is_empty());
        assert!(decoder.buffered() <= MAX_PACKET_BYTES);
    }
    (packets, None)
}

fuzz_target!(|data: &[u8]| {
    // The first byte chooses where to cut the rest.
    let Some((&cut, stream)) = data.split_first() else {
        return;
    };
    let at = usize::from(cut) % (stream.len() + 1);
    let whole = decode(&[stream]);
    assert_eq!(decode(&[&stream[..at], &stream[at..]]), whole);

    if let Ok(p) = packet::decode_packet(stream) {
        let again = p.to_bytes().expect("a decoded packet encodes");
        assert_eq!(packet::decode_packet(&again), Ok(p));
    }

    let mut server = Server::new(ServerConfig::default());
    for p in whole.0 {
        match server.receive(p) {
            Ok(Action::CheckToken { .. }) => {
                server.accept_token(1).expect("a decision was asked");
            }
            Ok(Action::OpenChannel { .. }) => {
                server.accept_channel(1).expect("a decision was asked");
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
});
