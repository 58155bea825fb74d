//! The broker's one reading of the time of day. Every rule that depends on
//! the date (Pending expiry, heartbeat loss, ticket and token lifetimes,
//! scaling plans' phases, the audit log's retention) reads it from the
//! [`Clock`] the [`crate::core::Core`] was built with, so a test can hold time
//! still and move it on instead of sleeping through it.
//!
//! Durations the broker waits out on its own (timeouts, retry pauses, the
//! writer's batching) are tokio's, not this clock's: they bound work, they
//! do not decide rules.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use placement::TimestampMs;

/// Milliseconds since the Unix epoch: the system's, or a manual time a
/// test sets.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    manual: Option<Arc<AtomicI64>>,
}

impl Clock {
    /// The system's time of day (what every running broker uses).
    pub fn system() -> Clock {
        Clock { manual: None }
    }

    /// A time that stands still at `start_ms` until [`Clock::advance`]
    /// moves it; clones share it.
    pub fn manual(start_ms: TimestampMs) -> Clock {
        Clock {
            manual: Some(Arc::new(AtomicI64::new(start_ms))),
        }
    }

    /// Now, in milliseconds since the Unix epoch (0 if the system's clock
    /// reads before it).
    pub fn now_ms(&self) -> TimestampMs {
        match &self.manual {
            Some(ms) => ms.load(Ordering::SeqCst),
            None => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as TimestampMs)
                .unwrap_or(0),
        }
    }

    /// Now, in whole seconds since the Unix epoch (tickets count seconds).
    pub fn now_secs(&self) -> u64 {
        self.now_ms().max(0) as u64 / 1000
    }

    /// Moves a manual clock on by `by`; the system's clock cannot be
    /// moved, so this does nothing to it.
    pub fn advance(&self, by: Duration) {
        if let Some(ms) = &self.manual {
            ms.fetch_add(by.as_millis() as i64, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told_and_its_clones_follow() {
        let clock = Clock::manual(1_000);
        let seen_by_other = clock.clone();
        assert_eq!(clock.now_ms(), 1_000);
        clock.advance(Duration::from_millis(2_500));
        assert_eq!(seen_by_other.now_ms(), 3_500);
        assert_eq!(seen_by_other.now_secs(), 3);
    }

    #[test]
    fn the_system_clock_reads_the_time_of_day() {
        let clock = Clock::system();
        let before = clock.now_ms();
        clock.advance(Duration::from_secs(3_600));
        // 2020-01-01 as a floor: the system's time, and not moved an hour.
        assert!(before > 1_577_836_800_000);
        assert!(clock.now_ms() < before + 3_600_000);
    }
}
