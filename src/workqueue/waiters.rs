//! The waiter protocol both queues share: a getter that found nothing to hand out registers
//! under the queue's lock, and an add that makes work available wakes one registered getter.
//!
//! No upstream file: client-go's `Typed[T].Get` and controller-runtime's priority queue
//! `GetWithPriority` both block on a condition (a `sync.Cond`, a channel). Here both wait on a
//! `tokio::sync::Notify` through [`wait_for`], which keeps the count of registered getters
//! that the adds read.
//!
//! # Invariants
//!
//! 1. **W1** [`Getters::waiting_getters`] counts the `wait_for` calls that are registered on
//!    the `Notify` and have not yet resumed or been dropped. A getter registers (enables its
//!    `Notified`) under the lock after it saw nothing to hand out, so an add that makes work
//!    available after that sees the count and wakes it: no lost wake-up. Each queue's own
//!    invariant (workqueue I5, priority queue P4) is this one.
//!
//! # Concurrency
//!
//! The lock is the queue's own (the `sync` facade). It is never held across the await.

use std::pin::pin;

use tokio::sync::Notify;

use super::sync::{Mutex, lock};

/// What a queue's locked state offers a waiting getter.
pub(crate) trait Getters {
    /// What a getter receives: an item, or the news that the queue is shut down.
    type Out;
    /// Hands something out now, or `None` when the getter must wait.
    fn get_now(&mut self) -> Option<Self::Out>;
    /// The count of registered getters (keeps W1).
    fn waiting_getters(&mut self) -> &mut usize;
}

/// Waits until `state` hands something out, registering on `getters` while it waits.
pub(crate) async fn wait_for<S: Getters>(state: &Mutex<S>, getters: &Notify) -> S::Out {
    if let Some(out) = lock(state).get_now() {
        return out;
    }
    let mut waiting = Waiting {
        state,
        counted: false,
    };
    loop {
        let mut notified = pin!(getters.notified());
        {
            let mut s = lock(state);
            if waiting.counted {
                *s.waiting_getters() -= 1;
                waiting.counted = false;
            }
            if let Some(out) = s.get_now() {
                return out;
            }
            notified.as_mut().enable();
            *s.waiting_getters() += 1; // keeps W1: registered before the lock is released
            waiting.counted = true;
        }
        notified.await;
    }
}

/// Un-counts a waiting getter whose future is dropped while it waits (keeps W1).
struct Waiting<'a, S: Getters> {
    state: &'a Mutex<S>,
    counted: bool,
}

impl<S: Getters> Drop for Waiting<'_, S> {
    fn drop(&mut self) {
        if self.counted {
            *lock(self.state).waiting_getters() -= 1;
        }
    }
}
