//! The workqueue's lock, behind a facade so a model checker can see it.
//!
//! In a normal build this is `parking_lot::Mutex`: cheap when uncontended, no poisoning (the
//! queue's state stays consistent across a panicking caller because no user code runs while the
//! lock is held). With the `shuttle` feature it is `shuttle::sync::Mutex`, so every lock
//! acquisition is a point where shuttle may switch tasks; `tests/workqueue_shuttle.rs` uses that
//! to explore interleavings of add, get, done and shut_down.

#[cfg(not(feature = "shuttle"))]
mod imp {
    pub(crate) use parking_lot::{Mutex, MutexGuard};

    pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock()
    }
}

#[cfg(feature = "shuttle")]
mod imp {
    pub(crate) use shuttle::sync::{Mutex, MutexGuard};

    pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        // No user code runs under the lock, so a poisoned lock means a bug in the queue itself.
        m.lock().expect("workqueue lock poisoned")
    }
}

pub(crate) use imp::{Mutex, MutexGuard, lock};
