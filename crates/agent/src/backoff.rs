//! Exponential backoff with jitter for calls to a broker that is down:
//! 1 s, doubling, at most 60 s, each delay drawn between half and all of
//! that ("equal jitter"), so a farm of agents that lost the broker together
//! does not come back in lockstep, yet none waits less than half the step.

use std::time::Duration;

/// The first delay after a failure.
pub const INITIAL_DELAY: Duration = Duration::from_secs(1);

/// The longest delay between two attempts.
pub const MAX_DELAY: Duration = Duration::from_secs(60);

/// Counts consecutive failures and says how long to wait after each.
#[derive(Debug, Default, Clone)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    /// Consecutive failures since the last success.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Records a failure and returns the delay before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        let d = delay(self.failures, rand::random::<f64>());
        self.failures = self.failures.saturating_add(1);
        d
    }

    /// Records a success: the next failure waits [`INITIAL_DELAY`] again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

/// The delay after `failures` earlier consecutive failures, for a random
/// `fraction` in `[0, 1)`: the step is `min(1 s × 2^failures, 60 s)` and the
/// delay `step × (1 + fraction) / 2`.
pub fn delay(failures: u32, fraction: f64) -> Duration {
    let step = INITIAL_DELAY
        .checked_mul(1u32.checked_shl(failures).unwrap_or(u32::MAX))
        .unwrap_or(MAX_DELAY)
        .min(MAX_DELAY);
    step.mul_f64((1.0 + fraction.clamp(0.0, 1.0)) / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_double_up_to_a_minute() {
        // With fraction 1.0 the delay is the whole step.
        let steps: Vec<u64> = (0..9).map(|n| delay(n, 1.0).as_secs()).collect();
        assert_eq!(steps, vec![1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(delay(40, 1.0), MAX_DELAY);
        assert_eq!(delay(u32::MAX, 1.0), MAX_DELAY);
    }

    #[test]
    fn jitter_keeps_at_least_half_the_step() {
        assert_eq!(delay(0, 0.0), Duration::from_millis(500));
        assert_eq!(delay(3, 0.5), Duration::from_secs(6));
        assert_eq!(delay(10, 0.0), Duration::from_secs(30));
        let mut b = Backoff::default();
        for n in 0..20 {
            let d = b.next_delay();
            let step = delay(n, 1.0);
            assert!(d >= step / 2 && d <= step, "failure {n}: {d:?}");
        }
        assert_eq!(b.failures(), 20);
        b.reset();
        assert!(b.next_delay() <= INITIAL_DELAY);
    }
}
