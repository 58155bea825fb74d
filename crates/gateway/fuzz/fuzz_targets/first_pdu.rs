//! Fuzzes the first-PDU parser (rule R6): any bytes either parse or are
//! refused with a typed error, never a panic; what parses fits the bounds;
//! and reading from a socket agrees with parsing the same bytes.

#![no_main]

use gateway::pdu::{self, MAX_FIRST_PDU_BYTES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if pdu::parse(data).is_ok() {
        assert!(data.len() <= MAX_FIRST_PDU_BYTES);
        assert_eq!(
            usize::from(u16::from_be_bytes([data[2], data[3]])),
            data.len()
        );
    }
    let _ = pdu::first_pdu_length(&[
        data.first().copied().unwrap_or(0),
        data.get(1).copied().unwrap_or(0),
        data.get(2).copied().unwrap_or(0),
        data.get(3).copied().unwrap_or(0),
    ]);
    // The socket reader reads exactly the announced PDU and parses it the same way.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let read = runtime.block_on(async {
        let mut reader = data;
        pdu::read_first_pdu(&mut reader, std::time::Duration::from_secs(1)).await
    });
    if let Ok((bytes, request)) = read {
        assert!(data.starts_with(&bytes));
        assert_eq!(pdu::parse(&bytes), Ok(request));
    }
});
