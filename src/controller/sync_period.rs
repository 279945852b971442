//! The resync period controller-runtime's cache gives each informer: its `SyncPeriod` times a
//! factor drawn in [0.9, 1.1), so informers of one cache do not all resync at the same instant.
//! Follows controller-runtime v0.25.3 `pkg/cache/internal/informers.go`
//! (`calculateResyncPeriod`, called once per informer the cache creates; the same at v0.22.5
//! and v0.24.1), and `pkg/cache/cache.go` (`SyncPeriod`, default 10 hours).
//!
//! ```text
//!   SyncPeriod { base: 10h, seed }   next() ─► 10h × (u / 5 + 0.9) in ms, u uniform in [0, 1)
//!      one call per informer ─────────────────► each in [9h, 11h), different per informer
//! ```
//!
//! A controller that watches its own kind and an owned kind through one cache therefore
//! resyncs the two at two unrelated periods P₁ and P₂, and a run's timeline is k·P, not
//! k × 10 h. What does not depend on the draw is the count of resyncs in a window and which
//! reconciles they cause; the book records those, and the range.
//!
//! # Invariants
//!
//! 1. Every period [`SyncPeriod::next`] returns lies in [`SyncPeriod::range`]: at least
//!    0.9 × base and below 1.1 × base.
//! 2. The same seed gives the same sequence of periods.
//!
//! # Concurrency
//!
//! The generator sits behind a `parking_lot::Mutex`, held only for one draw.
//!
//! # Differences from upstream
//!
//! - Upstream draws from `math/rand`'s global source, which a caller cannot seed; here the
//!   generator is seeded ([`SyncPeriod::seeded`]), so a virtual-time run repeats exactly. A
//!   run that wants upstream's unpredictability seeds from the system ([`SyncPeriod::new`]).
//! - Upstream's cache creates informers itself; the port has no controller-runtime cache, so
//!   whoever builds an informer for a controller asks [`SyncPeriod::next`] for its period.
//! - The period is drawn to the millisecond, upstream's to the nanosecond: tokio's timers fire
//!   on whole milliseconds, so a period with a fraction of one would resync a little after
//!   k·P, and a timeline could not say "at k·P".

use std::{ops::Range, time::Duration};

use parking_lot::Mutex;
use rand::{RngExt, SeedableRng, rngs::StdRng};

/// controller-runtime's default `SyncPeriod` (`pkg/cache/cache.go`: 10 hours).
pub const DEFAULT_SYNC_PERIOD: Duration = Duration::from_secs(10 * 3600);

/// A cache's `SyncPeriod` and the generator that jitters it per informer.
#[derive(Debug)]
pub struct SyncPeriod {
    base: Duration,
    rng: Mutex<StdRng>,
}

impl SyncPeriod {
    /// `base`, jittered from a generator seeded by the system (upstream's unseeded draw).
    pub fn new(base: Duration) -> Self {
        SyncPeriod {
            base,
            rng: Mutex::new(rand::make_rng()),
        }
    }

    /// `base`, jittered from a generator seeded with `seed` (keeps I2).
    pub fn seeded(base: Duration, seed: u64) -> Self {
        SyncPeriod {
            base,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
        }
    }

    /// The period before jitter.
    pub fn base(&self) -> Duration {
        self.base
    }

    /// Where every jittered period lies: [0.9 × base, 1.1 × base).
    pub fn range(&self) -> Range<Duration> {
        self.base.mul_f64(0.9)..self.base.mul_f64(1.1)
    }

    /// One informer's resync period (upstream's `calculateResyncPeriod`): the base times a
    /// factor uniform in [0.9, 1.1), in whole milliseconds (keeps I1).
    pub fn next(&self) -> Duration {
        let u: f64 = self.rng.lock().random();
        let factor = u / 5.0 + 0.9;
        let period = Duration::from_millis((self.base.as_millis() as f64 * factor) as u64);
        period.clamp(
            self.range().start,
            self.range().end - Duration::from_millis(1),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_period_lies_in_the_range_and_they_differ() {
        let sync = SyncPeriod::seeded(DEFAULT_SYNC_PERIOD, 7);
        let periods: Vec<Duration> = (0..1000).map(|_| sync.next()).collect();
        let range = sync.range();
        assert_eq!(
            range,
            Duration::from_secs(9 * 3600)..Duration::from_secs(11 * 3600)
        );
        assert!(periods.iter().all(|p| range.contains(p)), "keeps I1");
        assert!(
            periods.windows(2).any(|w| w[0] != w[1]),
            "jittered per informer"
        );
        let (lo, hi) = (periods.iter().min().unwrap(), periods.iter().max().unwrap());
        assert!(
            *lo < Duration::from_secs(9 * 3600 + 360),
            "the draw reaches the bottom"
        );
        assert!(*hi > Duration::from_secs(11 * 3600 - 360), "and the top");
    }

    #[test]
    fn a_seed_repeats_its_periods() {
        let draw = |seed| {
            let s = SyncPeriod::seeded(DEFAULT_SYNC_PERIOD, seed);
            [s.next(), s.next(), s.next()]
        };
        assert_eq!(draw(1), draw(1), "keeps I2");
        assert_ne!(draw(1), draw(2));
    }
}
