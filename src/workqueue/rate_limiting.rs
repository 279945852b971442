//! The rate-limiting queue: a [`DelayingQueue`] whose delays come from a [`RateLimiter`].
//!
//! Follows `util/workqueue/rate_limiting_queue.go` (`rateLimitingType`).
//!
//! # Model
//!
//! ```text
//!   add_rate_limited(x) = add_after(x, limiter.when(x))   when() runs first, even if shut down
//!   forget(x)           = limiter.forget(x)               backoff history only: x stays held
//!   num_requeues(x)     = limiter.num_requeues(x)
//! ```
//!
//! `forget` is not `done`: it never releases a held key, and it does not cancel a pending
//! delayed add. A worker must still call `done` (or hold a [`Claim`], which does).
//!
//! # Invariants
//!
//! Those of the queue ([`super::queue_core`]), the delaying queue ([`super::delaying`]) and
//! the limiter ([`super::rate_limiter`]); this layer adds none.
//!
//! # Concurrency
//!
//! The limiter has its own lock, taken before (never inside) the queue's.
//!
//! # Differences from upstream
//!
//! None in behaviour. [`claim`](RateLimitingQueue::claim) is an addition.

use std::{hash::Hash, ops::Deref, sync::Arc, time::Duration};

use super::{
    claim::{Claim, ClaimQueue},
    delaying::DelayingQueue,
    queue::{BuildError, QueueConfig},
    rate_limiter::RateLimiter,
};

/// A [`DelayingQueue`] with per-item backoff. Derefs to it for add, add_after, get, done and
/// shutdown.
pub struct RateLimitingQueue<T> {
    delaying: DelayingQueue<T>,
    limiter: Arc<dyn RateLimiter<T>>,
}

impl<T> Clone for RateLimitingQueue<T> {
    fn clone(&self) -> Self {
        RateLimitingQueue {
            delaying: self.delaying.clone(),
            limiter: self.limiter.clone(),
        }
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> RateLimitingQueue<T> {
    /// An unnamed queue without metrics, backed off by `limiter`.
    ///
    /// # Panics
    /// Outside a tokio runtime (see [`DelayingQueue::new`]).
    pub fn new(limiter: impl RateLimiter<T> + 'static) -> Self {
        Self::with_config(limiter, QueueConfig::default())
            .expect("RateLimitingQueue::new needs a tokio runtime")
    }

    /// A named queue, optionally with metrics, backed off by `limiter`.
    pub fn with_config(
        limiter: impl RateLimiter<T> + 'static,
        config: QueueConfig,
    ) -> Result<Self, BuildError> {
        Ok(RateLimitingQueue {
            delaying: DelayingQueue::with_config(config)?,
            limiter: Arc::new(limiter),
        })
    }

    /// Adds `item` once the limiter says so. The limiter records the failure first, even if
    /// the queue is shutting down (as upstream).
    pub fn add_rate_limited(&self, item: T) {
        let delay = self.limiter.when(&item);
        self.delaying.add_after(item, delay);
    }

    /// Clears `item`'s backoff history. It does **not** release a held item: call `done`.
    pub fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    /// How many times `item` was rate-limited since its last `forget`.
    pub fn num_requeues(&self, item: &T) -> usize {
        self.limiter.num_requeues(item)
    }

    /// Like `get`, but the key comes back as a [`Claim`] that calls `done` when dropped, and
    /// through which `forget`, `add_rate_limited` and `add_after` can be called while held.
    pub async fn claim(&self) -> Option<Claim<T, RateLimitingQueue<T>>> {
        let item = self.get().await?;
        Some(Claim::new(self.clone(), item))
    }
}

impl<T: Eq + Hash + Clone> ClaimQueue<T> for RateLimitingQueue<T> {
    fn release(&self, item: &T) {
        self.done(item);
    }
}

impl<T> Deref for RateLimitingQueue<T> {
    type Target = DelayingQueue<T>;
    fn deref(&self) -> &DelayingQueue<T> {
        &self.delaying
    }
}

impl<T> std::fmt::Debug for RateLimitingQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitingQueue").finish_non_exhaustive()
    }
}

/// While holding a key from a [`RateLimitingQueue`], the calls controller-runtime makes before
/// its deferred `Done`.
impl<T: Eq + Hash + Clone + Send + Sync + 'static> Claim<T, RateLimitingQueue<T>> {
    /// Clears the key's failure history (a successful reconcile). The key is still held.
    pub fn forget(&self) {
        self.queue().forget(self.item());
    }

    /// Asks for the key again after the limiter's backoff (a failed reconcile).
    pub fn add_rate_limited(&self) {
        self.queue().add_rate_limited(self.item().clone());
    }

    /// Asks for the key again after `delay` (`RequeueAfter`).
    pub fn add_after(&self, delay: Duration) {
        self.queue().add_after(self.item().clone(), delay);
    }

    /// How many times the key has been rate-limited since its last forget.
    pub fn num_requeues(&self) -> usize {
        self.queue().num_requeues(self.item())
    }
}
