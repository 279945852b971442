//! Rate limiters: how long a key waits before it is handed out again.
//!
//! Follows `util/workqueue/default_rate_limiters.go`, and for the token bucket the
//! reservation arithmetic of `golang.org/x/time/rate` (`Limiter.reserveN`, `advance`).
//!
//! # Model
//!
//! ```text
//!   when(item) ─► a delay, and (usually) one more recorded failure for `item`
//!   forget(item) ─► clears `item`'s failures       num_requeues(item) ─► its failure count
//!
//!   ItemExponentialFailure  base · 2^failures, capped at max   (per item)
//!   ItemFastSlow            fast for the first n failures, then slow   (per item)
//!   Bucket                  qps / burst token bucket, shared by all items
//!   MaxOf                   asks every child (all advance), returns the longest
//!   WithMaxWait             caps another limiter's delay
//! ```
//!
//! [`default_controller_rate_limiter`] is controller-runtime v0.22's default (= client-go's
//! `DefaultTypedControllerRateLimiter`): max of exponential 5 ms..1000 s and a 10 qps / 100
//! burst bucket.
//!
//! # Invariants
//!
//! 1. **R1** Exponential delays never overflow: any failure count gives at most `max`.
//! 2. **R2** A bucket reservation always takes one token, going into debt when none is left;
//!    it is never cancelled.
//!
//! # Concurrency
//!
//! Each limiter has its own `std::sync::Mutex` (held for a few arithmetic operations, never
//! across an await). `MaxOf` locks its children one after the other, never two at once.
//!
//! # Differences from upstream
//!
//! - Exponential backoff uses checked integer arithmetic on nanoseconds instead of float64
//!   with an overflow guard; results are the same for every base that is not a power of two
//!   nanoseconds, and correct (capped) where upstream's guard can slip.
//! - Time is `tokio::time::Instant`, so under a paused clock bucket delays are exact.
//! - Constructors validate their input and return [`InvalidLimiter`] instead of panicking
//!   later.

use std::{collections::HashMap, hash::Hash, sync::Mutex, time::Duration};

use tokio::time::Instant;

/// Decides how long an item waits before it is handed out again.
pub trait RateLimiter<T>: Send + Sync {
    /// The delay for `item` now; records one more failure for it.
    fn when(&self, item: &T) -> Duration;
    /// Stops tracking `item`: its failure history is cleared.
    fn forget(&self, item: &T);
    /// How many failures `item` has recorded.
    fn num_requeues(&self, item: &T) -> usize;
}

/// A limiter's parameters were unusable.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InvalidLimiter {
    /// A token bucket's rate must be a positive, finite number of tokens per second.
    #[error("bucket rate {0} qps must be positive and finite")]
    Rate(f64),
    /// A token bucket's burst must be at least 1.
    #[error("bucket burst must be at least 1")]
    Burst,
}

fn locked<V>(m: &Mutex<V>) -> std::sync::MutexGuard<'_, V> {
    m.lock().expect("rate limiter lock poisoned")
}

/// Per-item failure counters, shared by the two per-item limiters.
struct Failures<T>(Mutex<HashMap<T, usize>>);

impl<T: Eq + Hash + Clone> Failures<T> {
    fn new() -> Self {
        Failures(Mutex::new(HashMap::new()))
    }
    /// Returns the count before this failure, and records the failure.
    fn record(&self, item: &T) -> usize {
        let mut m = locked(&self.0);
        let n = m.entry(item.clone()).or_insert(0);
        let before = *n;
        *n = n.saturating_add(1);
        before
    }
    fn forget(&self, item: &T) {
        locked(&self.0).remove(item);
    }
    fn count(&self, item: &T) -> usize {
        locked(&self.0).get(item).copied().unwrap_or(0)
    }
}

/// `base · 2^failures`, capped at `max`, per item
/// (client-go's `TypedItemExponentialFailureRateLimiter`).
pub struct ItemExponentialFailureRateLimiter<T> {
    failures: Failures<T>,
    base: Duration,
    max: Duration,
}

impl<T: Eq + Hash + Clone> ItemExponentialFailureRateLimiter<T> {
    /// Starts at `base`, doubles on each failure, never exceeds `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        ItemExponentialFailureRateLimiter {
            failures: Failures::new(),
            base,
            max,
        }
    }

    /// The delay after `exp` earlier failures (keeps R1).
    pub fn delay_for(&self, exp: usize) -> Duration {
        let base = self.base.as_nanos();
        let scaled = u32::try_from(exp)
            .ok()
            .and_then(|e| 1u128.checked_shl(e))
            .and_then(|factor| base.checked_mul(factor));
        match scaled {
            Some(ns) if ns <= self.max.as_nanos() => {
                Duration::new((ns / 1_000_000_000) as u64, (ns % 1_000_000_000) as u32)
            }
            _ => self.max,
        }
    }
}

impl<T: Eq + Hash + Clone + Send + Sync> RateLimiter<T> for ItemExponentialFailureRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        self.delay_for(self.failures.record(item))
    }
    fn forget(&self, item: &T) {
        self.failures.forget(item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        self.failures.count(item)
    }
}

/// `fast` for the first `max_fast_attempts` failures of an item, `slow` after
/// (client-go's `TypedItemFastSlowRateLimiter`).
pub struct ItemFastSlowRateLimiter<T> {
    failures: Failures<T>,
    fast: Duration,
    slow: Duration,
    max_fast_attempts: usize,
}

impl<T: Eq + Hash + Clone> ItemFastSlowRateLimiter<T> {
    /// Fast delays for `max_fast_attempts` failures, then slow ones.
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: usize) -> Self {
        ItemFastSlowRateLimiter {
            failures: Failures::new(),
            fast,
            slow,
            max_fast_attempts,
        }
    }
}

impl<T: Eq + Hash + Clone + Send + Sync> RateLimiter<T> for ItemFastSlowRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let count = self.failures.record(item).saturating_add(1);
        if count <= self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
    }
    fn forget(&self, item: &T) {
        self.failures.forget(item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        self.failures.count(item)
    }
}

/// A token bucket shared by all items (client-go's `TypedBucketRateLimiter` over
/// `rate.Limiter`). It starts full.
pub struct BucketRateLimiter {
    state: Mutex<Bucket>,
}

struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    /// When `tokens` was last brought up to date. None: never (the bucket is full).
    last: Option<Instant>,
}

impl Bucket {
    /// x/time/rate's `durationFromTokens`: truncated to whole nanoseconds.
    fn duration_from_tokens(&self, tokens: f64) -> Duration {
        let ns = 1e9 * (tokens / self.qps);
        if ns >= u64::MAX as f64 {
            Duration::MAX
        } else {
            Duration::from_nanos(ns as u64)
        }
    }

    /// x/time/rate's `tokensFromDuration`: whole seconds and nanoseconds apart, for rounding.
    fn tokens_from_duration(&self, d: Duration) -> f64 {
        d.as_secs() as f64 * self.qps + f64::from(d.subsec_nanos()) * self.qps / 1e9
    }

    /// x/time/rate's `advance`: the tokens at `now`, refilled but capped at the burst.
    fn advance(&self, now: Instant) -> (Instant, f64) {
        let max_elapsed = self.duration_from_tokens(self.burst - self.tokens);
        let elapsed = match self.last {
            Some(last) if now < last => return (last, self.tokens),
            Some(last) => (now - last).min(max_elapsed),
            None => max_elapsed,
        };
        let tokens = (self.tokens + self.tokens_from_duration(elapsed)).min(self.burst);
        (now, tokens)
    }

    /// x/time/rate's `reserveN(now, 1, forever)` (keeps R2): takes a token, maybe into debt,
    /// and returns how long until it is really there.
    fn reserve(&mut self, now: Instant) -> Duration {
        let (now, tokens) = self.advance(now);
        let tokens = tokens - 1.0;
        let wait = if tokens < 0.0 {
            self.duration_from_tokens(-tokens)
        } else {
            Duration::ZERO
        };
        self.last = Some(now);
        self.tokens = tokens;
        wait
    }
}

impl BucketRateLimiter {
    /// `qps` tokens per second, at most `burst` saved up; starts full.
    pub fn new(qps: f64, burst: u32) -> Result<Self, InvalidLimiter> {
        if !(qps.is_finite() && qps > 0.0) {
            return Err(InvalidLimiter::Rate(qps));
        }
        if burst == 0 {
            return Err(InvalidLimiter::Burst);
        }
        Ok(BucketRateLimiter {
            state: Mutex::new(Bucket {
                qps,
                burst: f64::from(burst),
                tokens: 0.0,
                last: None,
            }),
        })
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        locked(&self.state).reserve(Instant::now())
    }
    fn forget(&self, _item: &T) {}
    fn num_requeues(&self, _item: &T) -> usize {
        0
    }
}

/// The longest delay of several limiters; every child advances on every call
/// (client-go's `TypedMaxOfRateLimiter`).
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> MaxOfRateLimiter<T> {
    /// The max of `limiters` (0 when there are none).
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        MaxOfRateLimiter { limiters }
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        // Every child is asked, so every child's state advances: no short-circuit.
        self.limiters
            .iter()
            .map(|l| l.when(item))
            .fold(Duration::ZERO, Duration::max)
    }
    fn forget(&self, item: &T) {
        self.limiters.iter().for_each(|l| l.forget(item));
    }
    fn num_requeues(&self, item: &T) -> usize {
        self.limiters
            .iter()
            .map(|l| l.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

/// Caps another limiter's delay at `max_delay` (client-go's `TypedWithMaxWaitRateLimiter`).
pub struct WithMaxWaitRateLimiter<T> {
    inner: Box<dyn RateLimiter<T>>,
    max_delay: Duration,
}

impl<T> WithMaxWaitRateLimiter<T> {
    /// `inner`, never waiting longer than `max_delay`.
    pub fn new(inner: Box<dyn RateLimiter<T>>, max_delay: Duration) -> Self {
        WithMaxWaitRateLimiter { inner, max_delay }
    }
}

impl<T> RateLimiter<T> for WithMaxWaitRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        self.inner.when(item).min(self.max_delay)
    }
    fn forget(&self, item: &T) {
        self.inner.forget(item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        self.inner.num_requeues(item)
    }
}

/// The exponential limiter's base in [`default_controller_rate_limiter`].
pub const DEFAULT_BASE_DELAY: Duration = Duration::from_millis(5);
/// The exponential limiter's ceiling in [`default_controller_rate_limiter`].
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(1000);
/// The bucket's rate in [`default_controller_rate_limiter`].
pub const DEFAULT_QPS: f64 = 10.0;
/// The bucket's burst in [`default_controller_rate_limiter`].
pub const DEFAULT_BURST: u32 = 100;

/// controller-runtime v0.22's default limiter (client-go's
/// `DefaultTypedControllerRateLimiter`): the max of per-item exponential backoff from 5 ms to
/// 1000 s and one 10 qps / burst 100 bucket for all items.
pub fn default_controller_rate_limiter<T>() -> MaxOfRateLimiter<T>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    let bucket = BucketRateLimiter::new(DEFAULT_QPS, DEFAULT_BURST)
        .expect("the default bucket's constants are valid");
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            DEFAULT_BASE_DELAY,
            DEFAULT_MAX_DELAY,
        )),
        Box::new(bucket),
    ])
}

/// client-go's `DefaultTypedItemBasedRateLimiter`: exponential from 1 ms to 1000 s.
pub fn default_item_based_rate_limiter<T>() -> ItemExponentialFailureRateLimiter<T>
where
    T: Eq + Hash + Clone,
{
    ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), DEFAULT_MAX_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_starts_full_then_goes_into_debt_by_a_tenth_of_a_second_per_call() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let b = BucketRateLimiter::new(10.0, 100).unwrap();
            let delays: Vec<Duration> =
                (0..102).map(|_| RateLimiter::<()>::when(&b, &())).collect();
            assert!(delays[..100].iter().all(|d| d.is_zero()));
            assert_eq!(delays[100], Duration::from_millis(100));
            assert_eq!(delays[101], Duration::from_millis(200));
            tokio::time::advance(Duration::from_millis(250)).await;
            // 2.5 tokens refilled against a debt of 2: half a token left, so the next call
            // waits for the other half.
            assert_eq!(RateLimiter::<()>::when(&b, &()), Duration::from_millis(50));
        });
    }

    #[test]
    fn bad_bucket_parameters_are_errors() {
        assert_eq!(
            BucketRateLimiter::new(0.0, 1).err(),
            Some(InvalidLimiter::Rate(0.0))
        );
        assert_eq!(
            BucketRateLimiter::new(10.0, 0).err(),
            Some(InvalidLimiter::Burst)
        );
    }
}
