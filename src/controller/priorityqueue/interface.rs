//! What a controller needs from its queue, met by both the priority queue and client-go's
//! rate-limiting queue, so one worker loop can run on either.
//!
//! Follows controller-runtime v0.24.1: the `PriorityQueue[T]` interface
//! (`pkg/controller/priorityqueue/priorityqueue.go`) as the controller's `Queue` field uses it,
//! and `priorityQueueWrapper` (`pkg/internal/controller/controller.go`), which makes a classic
//! queue fit that interface.
//!
//! # Model
//!
//! The worker loop and the event handlers make exactly these calls
//! (`processNextWorkItem`, `reconcileHandler`, `pkg/handler`):
//!
//! | call | [`PriorityQueue`] | [`RateLimitingQueue`] (upstream's wrapper) |
//! |---|---|---|
//! | `add_with_opts` | as documented there | `rate_limited` → `add_rate_limited`; else `after > 0` → `add_after`; else `add`. The priority is dropped |
//! | `get_with_priority` | the key and its priority | the key and priority 0 |
//! | `done` (via [`Release`], a [`Claim`]'s drop) | unlocks | `done` |
//! | `forget`, `num_requeues` | the limiter | the limiter |
//! | `shut_down` | no drain | getters drain what is queued first |
//! | `len` | ready keys, held ones included | queued keys |
//!
//! # Invariants
//!
//! None beyond each queue's own.
//!
//! # Concurrency
//!
//! The futures are `Send`, so a worker holding one can be a spawned task.
//!
//! # Differences from upstream
//!
//! Upstream's interface also includes the whole `TypedRateLimitingInterface` (`Add`,
//! `AddAfter`, `AddRateLimited`, `Get`, `ShutDownWithDrain`, `ShuttingDown`); the controller
//! does not need them, so this trait leaves them to the types.

use std::{future::Future, hash::Hash};

use super::{
    core::Priority,
    queue::{AddOpts, PriorityQueue},
};
use crate::workqueue::{Claim, Queue, RateLimitingQueue, Release};

/// The smallest queue interface controller-runtime's worker loop and handlers use.
pub trait ControllerQueue<T>: Release<T> + Clone + Send + Sync + 'static {
    /// Queues `items` as `opts` says.
    fn add_with_opts(&self, opts: AddOpts, items: impl IntoIterator<Item = T>);

    /// Waits for a key and hands it out with its priority; `None` once shut down (and, for the
    /// classic queue, drained).
    fn get_with_priority(&self) -> impl Future<Output = Option<(T, Priority)>> + Send;

    /// Clears `item`'s backoff history.
    fn forget(&self, item: &T);

    /// How many times `item` was rate-limited since its last forget.
    fn num_requeues(&self, item: &T) -> usize;

    /// Stops handing out work.
    fn shut_down(&self);

    /// How many keys wait to be handed out (each queue's own meaning; see the table above).
    fn len(&self) -> usize;

    /// Whether `len` is zero.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// [`get_with_priority`](Self::get_with_priority), as a [`Claim`] that calls `done` when
    /// dropped (upstream's `defer c.Queue.Done(obj)`).
    fn claim_with_priority(&self) -> impl Future<Output = Option<(Claim<T, Self>, Priority)>> + Send
    where
        T: Send,
    {
        async move {
            let (key, priority) = self.get_with_priority().await?;
            Some((Claim::new(self.clone(), key), priority))
        }
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> ControllerQueue<T> for PriorityQueue<T> {
    fn add_with_opts(&self, opts: AddOpts, items: impl IntoIterator<Item = T>) {
        PriorityQueue::add_with_opts(self, opts, items);
    }
    fn get_with_priority(&self) -> impl Future<Output = Option<(T, Priority)>> + Send {
        PriorityQueue::get_with_priority(self)
    }
    fn forget(&self, item: &T) {
        PriorityQueue::forget(self, item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        PriorityQueue::num_requeues(self, item)
    }
    fn shut_down(&self) {
        PriorityQueue::shut_down(self);
    }
    fn len(&self) -> usize {
        PriorityQueue::len(self)
    }
}

/// upstream's `priorityQueueWrapper`: the classic queue, with priorities ignored.
impl<T: Eq + Hash + Clone + Send + Sync + 'static> ControllerQueue<T> for RateLimitingQueue<T> {
    fn add_with_opts(&self, opts: AddOpts, items: impl IntoIterator<Item = T>) {
        for item in items {
            if opts.rate_limited {
                RateLimitingQueue::add_rate_limited(self, item);
            } else if !opts.after.is_zero() {
                self.add_after(item, opts.after);
            } else {
                Queue::add(self, item);
            }
        }
    }
    async fn get_with_priority(&self) -> Option<(T, Priority)> {
        Queue::get(self).await.map(|key| (key, 0))
    }
    fn forget(&self, item: &T) {
        RateLimitingQueue::forget(self, item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        RateLimitingQueue::num_requeues(self, item)
    }
    fn shut_down(&self) {
        Queue::shut_down(self);
    }
    fn len(&self) -> usize {
        Queue::len(self)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::workqueue::ItemExponentialFailureRateLimiter;

    /// One function, both queues: what the wrapper turns each kind of add into.
    async fn drive<Q: ControllerQueue<&'static str>>(q: Q) -> Vec<(&'static str, Priority)> {
        q.add_with_opts(AddOpts::default(), ["plain"]);
        let later = AddOpts {
            after: Duration::from_secs(1),
            priority: Some(7),
            ..AddOpts::default()
        };
        q.add_with_opts(later, ["later"]);
        let limited = AddOpts {
            rate_limited: true,
            priority: Some(9),
            ..AddOpts::default()
        };
        q.add_with_opts(limited, ["limited"]);
        let mut out = vec![];
        for _ in 0..3 {
            let (claim, p) = tokio::time::timeout(Duration::from_secs(10), q.claim_with_priority())
                .await
                .expect("get hung: an add was lost")
                .expect("not shut down");
            out.push((*claim, p));
        }
        assert_eq!(q.num_requeues(&"limited"), 1);
        q.forget(&"limited");
        assert_eq!(q.num_requeues(&"limited"), 0);
        out
    }

    /// How many times `web` is handed out when it changes during a reconcile that then asks
    /// for `RequeueAfter(1 s)` (controller-runtime's Forget + AddWithOpts{After}, before Done).
    async fn reconciles_after_change_and_requeue_after<Q: ControllerQueue<&'static str>>(
        q: Q,
    ) -> usize {
        q.add_with_opts(AddOpts::default(), ["web"]);
        let (claim, _) = q.claim_with_priority().await.expect("web was queued");
        q.add_with_opts(AddOpts::default(), ["web"]); // the object changed meanwhile
        q.forget(&claim);
        let later = AddOpts {
            after: Duration::from_secs(1),
            ..AddOpts::default()
        };
        q.add_with_opts(later, ["web"]);
        drop(claim); // done
        let mut handed_out = 0;
        while let Ok(Some((claim, _))) =
            tokio::time::timeout(Duration::from_secs(10), q.claim_with_priority()).await
        {
            handed_out += 1;
            drop(claim);
        }
        handed_out
    }

    #[tokio::test(start_paused = true)]
    async fn the_priority_queue_absorbs_a_requeue_after_into_a_pending_change() {
        let pq = PriorityQueue::new("");
        assert_eq!(reconciles_after_change_and_requeue_after(pq).await, 1);
        let rl = RateLimitingQueue::new(limiter());
        assert_eq!(
            reconciles_after_change_and_requeue_after(rl).await,
            2,
            "client-go: now (the change) and after 1 s (the requeue)"
        );
    }

    fn limiter() -> ItemExponentialFailureRateLimiter<&'static str> {
        ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1))
    }

    #[tokio::test(start_paused = true)]
    async fn the_priority_queue_reports_priorities_and_the_wrapper_reports_zero() {
        let pq = PriorityQueue::with_opts(
            "",
            super::super::queue::Opts {
                rate_limiter: Some(std::sync::Arc::new(limiter())),
                metrics_provider: None,
            },
        )
        .unwrap();
        assert_eq!(
            drive(pq).await,
            [("plain", 0), ("limited", 9), ("later", 7)]
        );
        let rl = RateLimitingQueue::new(limiter());
        assert_eq!(
            drive(rl).await,
            [("plain", 0), ("limited", 0), ("later", 0)]
        );
    }
}
