//! The reflector's backoff: apimachinery's `wait.Backoff{800ms, cap 30s, factor 2, jitter
//! 1.0}` with `DelayWithReset(clock, 2m)`, as `tools/cache/reflector.go` configures it, on the
//! crate's one port of `wait` ([`crate::wait`]).
//!
//! The base delay doubles from 800 ms (0.8, 1.6, 3.2, 6.4, 12.8, 25.6 s) and then stays at the
//! 30 s cap; each delay adds up to 100 % jitter, so it lies in `[base, 2 × base)`. The sequence
//! starts again when more than two minutes have passed since it last started.
//!
//! Time is tokio's ([`tokio::time::Instant`]), so under a paused clock every delay is exact,
//! and the jitter comes from a seeded [`StdRng`] the caller owns, so a virtual-time run is
//! the same run every time.

use std::time::Duration;

use rand::{RngExt, rngs::StdRng};
use tokio::time::Instant;

use crate::wait::{Backoff, DelayWithReset};

/// The knobs of the backoff.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffConfig {
    /// The first base delay (800 ms).
    pub initial: Duration,
    /// The largest base delay (30 s).
    pub cap: Duration,
    /// Growth per step (2.0).
    pub factor: f64,
    /// Jitter as a fraction of the base delay (1.0: up to +100 %).
    pub jitter: f64,
    /// Restart the sequence when more than this has passed since it last started (2 min).
    pub reset_after: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(800),
            cap: Duration::from_secs(30),
            factor: 2.0,
            jitter: 1.0,
            reset_after: Duration::from_secs(120),
        }
    }
}

/// The backoff's state: the config as apimachinery's `wait.Backoff` (steps unbounded, as
/// upstream's `math.MaxInt32`) under `DelayWithReset`.
#[derive(Debug, Clone)]
pub(crate) struct RelistBackoff {
    jitter: f64,
    delay: DelayWithReset,
}

impl RelistBackoff {
    /// A backoff that has not started.
    pub(crate) fn new(config: BackoffConfig) -> Self {
        let backoff = Backoff {
            duration: config.initial,
            factor: config.factor,
            jitter: config.jitter,
            steps: u32::MAX,
            cap: config.cap,
        };
        Self {
            jitter: config.jitter,
            delay: DelayWithReset::new(backoff, config.reset_after),
        }
    }

    /// The next delay at time `now`, with jitter drawn from `rng` (only when the jitter is on,
    /// so a run without jitter leaves `rng` to the watch timeouts).
    pub(crate) fn next_delay(&mut self, now: Instant, rng: &mut StdRng) -> Duration {
        let random = if self.jitter > 0.0 {
            rng.random::<f64>()
        } else {
            0.0
        };
        let d = self.delay.step(now, random);
        // tokio's timer has millisecond resolution: whole milliseconds keep paused-clock runs
        // exact (a sleep lasts exactly the delay reported).
        Duration::from_millis(d.as_millis() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn base_delays_double_from_800ms_to_the_30s_cap_each_with_up_to_full_jitter() {
        let mut b = RelistBackoff::new(BackoffConfig::default());
        let mut rng = StdRng::seed_from_u64(7);
        let now = Instant::now();
        let bases = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0];
        for base in bases {
            let d = b.next_delay(now, &mut rng).as_secs_f64();
            assert!(
                d >= base && d < 2.0 * base,
                "delay {d} not in [{base}, {})",
                2.0 * base
            );
        }
    }

    #[test]
    fn without_jitter_the_sequence_is_exact_and_restarts_after_two_minutes() {
        let config = BackoffConfig {
            jitter: 0.0,
            ..Default::default()
        };
        let mut b = RelistBackoff::new(config);
        let mut rng = StdRng::seed_from_u64(0);
        let t0 = Instant::now();
        let ms = |d: Duration| d.as_millis();
        assert_eq!(ms(b.next_delay(t0, &mut rng)), 800);
        assert_eq!(ms(b.next_delay(t0, &mut rng)), 1600);
        // 2 min after the start, not after the last failure: still the same sequence.
        assert_eq!(
            ms(b.next_delay(t0 + Duration::from_secs(120), &mut rng)),
            3200
        );
        assert_eq!(
            ms(b.next_delay(t0 + Duration::from_secs(121), &mut rng)),
            800
        );
    }

    #[test]
    fn the_same_seed_gives_the_same_delays() {
        let run = || {
            let mut b = RelistBackoff::new(BackoffConfig::default());
            let mut rng = StdRng::seed_from_u64(42);
            let now = Instant::now();
            (0..5)
                .map(|_| b.next_delay(now, &mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }
}
