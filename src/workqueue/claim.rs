//! Taking work safely: a [`Claim`] is a held key that calls `done` when it goes away.
//!
//! No upstream file: this is the Rust shape of controller-runtime's
//! `defer c.Queue.Done(obj)` right after `Get` (`pkg/internal/controller/controller.go`,
//! `processNextWorkItem`).
//!
//! # Model
//!
//! ```text
//!   queue.claim().await ──► Some(Claim) ──┬─ claim.done()        (explicit, consumes it)
//!                                         ├─ drop(claim)         (end of scope, `?`, return)
//!                                         └─ panic unwinding     (drop runs during unwind)
//!                                              all three call queue.done(item) exactly once
//! ```
//!
//! # Invariants
//!
//! 1. **C1** A claim releases its item exactly once: `done` consumes the claim, and `Drop`
//!    releases only an item not yet released. A released claim cannot be used again; the
//!    compiler refuses:
//!
//! ```compile_fail
//! # async fn worker(queue: controlloop::workqueue::Queue<&'static str>) {
//! let claim = queue.claim().await.unwrap();
//! claim.done();
//! let key: &str = *claim; // error[E0382]: use of moved value: `claim`
//! # }
//! ```
//!
//! # Concurrency
//!
//! A claim owns a handle to its queue, so it is `'static` when `T` is and can move into a
//! spawned task.
//!
//! # Differences from upstream
//!
//! Upstream leaves the Done to the caller. Leaking is still safe Rust: `std::mem::forget` on a
//! claim skips its `Drop`, and the key stays in the processing set for good (chapter "Forget is
//! not Done" runs it).

use std::{fmt, ops::Deref};

/// What a [`Claim`] needs from the queue it came from: a way to give its key back.
pub trait ClaimQueue<T> {
    /// Calls the queue's `done` for `item`.
    fn release(&self, item: &T);
}

/// A key held by a worker. Derefs to the key; releases it (calls `done`) when dropped or
/// when [`done`](Claim::done) is called, whichever comes first.
#[must_use = "dropping a claim releases its key at once"]
pub struct Claim<T, Q: ClaimQueue<T>> {
    queue: Q,
    /// `Some` until released (keeps C1).
    item: Option<T>,
}

impl<T, Q: ClaimQueue<T>> Claim<T, Q> {
    pub(crate) fn new(queue: Q, item: T) -> Self {
        Claim {
            queue,
            item: Some(item),
        }
    }

    /// The held key.
    pub fn item(&self) -> &T {
        self.item
            .as_ref()
            .expect("C1: an unreleased claim holds its item")
    }

    /// The queue this claim came from.
    pub fn queue(&self) -> &Q {
        &self.queue
    }

    /// Releases the key now (calls `done`). Consumes the claim, so it cannot be used again.
    pub fn done(mut self) {
        self.release_now();
    }

    fn release_now(&mut self) {
        if let Some(item) = self.item.take() {
            self.queue.release(&item);
        }
    }
}

impl<T, Q: ClaimQueue<T>> Drop for Claim<T, Q> {
    fn drop(&mut self) {
        self.release_now(); // keeps C1: a no-op after `done`
    }
}

impl<T, Q: ClaimQueue<T>> Deref for Claim<T, Q> {
    type Target = T;
    fn deref(&self) -> &T {
        self.item()
    }
}

impl<T: fmt::Debug, Q: ClaimQueue<T>> fmt::Debug for Claim<T, Q> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Claim").field(&self.item).finish()
    }
}
