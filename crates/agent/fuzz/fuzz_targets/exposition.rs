//! Fuzzes the reader of the Prometheus text format and what the watching
//! agent makes of it: any bytes either read or are refused with a typed
//! error, never a panic; what reads honours the bounds; and a report made
//! from it (sessions, names, load) never panics either.

#![no_main]

use std::collections::HashSet;

use agent::exposition::{self, Keep, LIMITS};
use agent::windows::config::Names;
use agent::windows::report::{self, Counters};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(samples) = exposition::parse(text, &LIMITS, |_| Keep::Whole) else {
        return;
    };
    for s in &samples {
        assert!(s.labels.len() <= LIMITS.labels_per_series_max);
        assert!(
            s.labels
                .iter()
                .all(|(_, v)| v.len() <= LIMITS.label_value_bytes_max)
        );
    }
    let names = Names {
        domains: [("CONTOSO".to_string(), "contoso.com".to_string())].into(),
        default_domain: Some("contoso.com".to_string()),
    };
    let mut counters = Counters::default();
    let wanted: Vec<_> = samples
        .into_iter()
        .filter(|s| report::wanted(&s.name) != Keep::Nothing)
        .collect();
    for _ in 0..2 {
        let r = report::interpret(&wanted, &mut counters, &names, &HashSet::new());
        if let Some(cpu) = r.metrics.cpu_percent {
            assert!((0.0..=100.0).contains(&cpu));
        }
    }
});
