//! The workqueue's lock, behind a facade so a model checker can see it.
//!
//! In a normal build this is a test-and-set lock (`spin::mutex::SpinMutex` with a yielding
//! back-off). Critical sections are a few hash-set operations (tens of nanoseconds) and never
//! run user code or await, which is the case where spinning beats parking: an uncontended
//! lock and unlock is one compare-and-swap and one release store (the book's
//! `book/benches/floor.rs` times it as `floor/lock`), where parking_lot's pair is two atomic
//! read-modify-writes. No poisoning: no user code runs under it. With the `shuttle` feature it is `shuttle::sync::Mutex`, so every lock
//! acquisition is a point where shuttle may switch tasks; `tests/workqueue_shuttle.rs` uses that
//! to explore interleavings of add, get, done and shut_down.

#[cfg(not(feature = "shuttle"))]
mod imp {
    /// Test-and-set: lock is one compare-and-swap, unlock a plain release store. A waiter
    /// yields its thread between attempts, so a preempted holder gets a core back.
    pub(crate) type Mutex<T> = spin::mutex::SpinMutex<T, spin::relax::Yield>;
    pub(crate) type MutexGuard<'a, T> = spin::mutex::SpinMutexGuard<'a, T>;

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
