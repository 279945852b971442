//! What both FIFOs share: the [`Fifo`] operations the reflector and informer call, and the
//! blocking-Pop shell around each FIFO's pure core. Follows client-go `tools/cache/fifo.go`
//! (the `Queue` and `QueueWithBatch` interfaces).
//!
//! ```text
//!   reflector ──add/update/delete/replace/resync/bookmark──► Fifo ──pop(process)──► informer
//!                                                   (DeltaFifo | RealFifo, chosen by select_fifo)
//! ```
//!
//! # Invariants
//! 1. Every state change is followed by a wake-up of every waiting Pop (upstream's
//!    `cond.Broadcast`), so a Pop never sleeps while an item or a close is pending.
//! 2. A waiting Pop registers for the wake-up *before* it looks at the state, so a change made
//!    between its look and its sleep cannot be missed.
//!
//! # Concurrency
//! Each FIFO is a `parking_lot::Mutex` around its core plus a `tokio::sync::Notify`. The mutex
//! is never held across an `.await`; a Pop's `process` callback runs while it is held (upstream's
//! process-under-lock), except for RealFIFO with `unlock_while_processing`.
//!
//! # Differences from upstream
//! - Pop is `async` and takes a synchronous `process`; the Go version blocks a goroutine on a
//!   condition variable.
//! - `try_pop` (a Pop that does not wait) is an addition, for step-by-step tests and benchmarks.
//! - The trait is called `Fifo`, not `Queue`, so that it is not mistaken for the workqueue's
//!   `Queue`.
//! - `bookmark` is on the trait with a no-op default: upstream's reflector forwards bookmarks
//!   only to stores that implement `Bookmark`, which DeltaFIFO does not.

use std::{future::Future, pin::pin, sync::Arc};

use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Notify;

use self::sealed::PopCore;
use super::{Delta, Deltas, KeyError, Object};

/// Upstream's `ErrFIFOClosed` message, shared by both FIFOs.
pub const ERR_FIFO_CLOSED: &str = "DeltaFIFO: manipulating with closed queue";

/// Why a Pop handed out nothing, or what its `process` said.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PopError<E> {
    /// The FIFO is closed and empty.
    #[error("DeltaFIFO: manipulating with closed queue")]
    Closed,
    /// `process` failed. The item is gone from the FIFO, as upstream (no requeue since v0.33).
    #[error("process failed: {0}")]
    Process(E),
}

/// Errors from the producer side of a FIFO.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FifoError {
    /// An object's key could not be computed; nothing was queued for it.
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// The operations a FIFO offers its producer (the reflector) and its consumer (the
/// informer): upstream's `Queue` (`ReflectorStore` + `Pop` + `HasSynced` + `Close`).
///
/// A FIFO provides its producer side; the consumer side (pop, close, synced) is the same for
/// both FIFOs and is provided here, over the FIFO's core behind its lock.
pub trait Fifo<K: Object>: sealed::FifoShell<K> + Send + Sync {
    /// Queues an `Added` delta.
    fn add(&self, obj: Arc<K>) -> Result<(), FifoError>;
    /// Queues an `Updated` delta.
    fn update(&self, obj: Arc<K>) -> Result<(), FifoError>;
    /// Queues a `Deleted` delta (DeltaFIFO may drop it: see `delete` on
    /// [`DeltaFifo`](super::DeltaFifo)).
    fn delete(&self, obj: Arc<K>) -> Result<(), FifoError>;
    /// A relist: the complete current list, read at `resource_version`.
    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), FifoError>;
    /// A periodic resync: replays known objects without contacting the server.
    fn resync(&self) -> Result<(), FifoError>;
    /// Queue depth: keys for DeltaFIFO, deltas for RealFIFO.
    fn len(&self) -> usize;

    /// A watch bookmark. Only an atomic RealFIFO with bookmarks on records it.
    fn bookmark(&self, _resource_version: &str) -> Result<(), FifoError> {
        Ok(())
    }
    /// Waits for the next item (or for close), hands it to `process(deltas, is_in_initial_list)`
    /// and returns it. DeltaFIFO hands out one key's whole delta list; RealFIFO one delta.
    fn pop<E, F>(&self, process: F) -> impl Future<Output = Result<Deltas<K>, PopError<E>>> + Send
    where
        E: Send,
        F: FnOnce(&Deltas<K>, bool) -> Result<(), E> + Send,
    {
        let mut process = Some(process);
        self.shell()
            .wait_until(move |core| sealed::PopCore::attempt(core, &mut process))
    }
    /// Like [`Fifo::pop`], but returns `None` at once instead of waiting when nothing is
    /// queued and the FIFO is open.
    fn try_pop<E, F>(&self, process: F) -> Option<Result<Deltas<K>, PopError<E>>>
    where
        F: FnOnce(&Deltas<K>, bool) -> Result<(), E>,
    {
        let mut process = Some(process);
        self.shell()
            .try_once(|core| sealed::PopCore::attempt(core, &mut process))
    }
    /// One Pop of the informer's loop (upstream `processLoop`'s body). The FIFO decides its
    /// shape: asked for a `batch`, a FIFO that pops batches (upstream's `QueueWithBatch`:
    /// RealFIFO) hands several deltas to `process_batch` and a lone one to `process_single`;
    /// otherwise, and for every other FIFO, it is a [`Fifo::pop`] into `process_single`.
    fn pop_next<E, FB, FS>(
        &self,
        batch: bool,
        process_batch: FB,
        process_single: FS,
    ) -> impl Future<Output = Result<(), PopError<E>>> + Send
    where
        E: Send,
        FB: FnOnce(&[Delta<K>], bool) -> Result<(), E> + Send,
        FS: FnOnce(&Deltas<K>, bool) -> Result<(), E> + Send,
    {
        drop((batch, process_batch));
        let pop = self.pop(process_single);
        async move { pop.await.map(drop) }
    }
    /// Closes the FIFO and wakes every waiting Pop. Items already queued are still handed out.
    fn close(&self) {
        self.shell().with(|c| c.close());
    }
    /// Whether [`Fifo::close`] was called.
    fn is_closed(&self) -> bool {
        self.shell().read(|c| c.is_closed())
    }
    /// Whether the initial list has been popped (or an add/update/delete came first).
    fn has_synced(&self) -> bool {
        self.shell().read(|c| c.has_synced())
    }
    /// Resolves once [`Fifo::has_synced`] is true (upstream's `Done()` channel).
    fn wait_synced(&self) -> impl Future<Output = ()> + Send {
        self.shell().wait_until(|c| c.has_synced().then_some(()))
    }
    /// Whether nothing is queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The FIFO's name, for logs.
    fn name(&self) -> &str {
        self.fifo_name()
    }
}

/// The core accessor the provided [`Fifo`] methods stand on. Sealed: only the crate's two FIFOs
/// implement it.
pub(crate) mod sealed {
    use parking_lot::MutexGuard;

    use super::{Deltas, PopError, Shell};

    /// A FIFO's lock-and-wake shell, and its name.
    pub trait FifoShell<K> {
        /// The FIFO's pure core.
        type Core: PopCore<K> + Send;
        /// The shell around the core.
        fn shell(&self) -> &Shell<Self::Core>;
        /// The FIFO's name.
        fn fifo_name(&self) -> &str;
    }

    /// The objects a FIFO queues, named without a type parameter, so that one blanket
    /// `ReflectorStore` impl covers every FIFO beside the other stores' impls.
    pub trait Queued {
        /// The object type.
        type Item;
    }

    /// What a Pop needs from a FIFO's core.
    pub trait PopCore<K>: Sized {
        /// Whether the FIFO is closed.
        fn is_closed(&self) -> bool;
        /// Closes it.
        fn close(&mut self);
        /// Whether the initial list has been popped.
        fn has_synced(&self) -> bool;
        /// One Pop attempt under the lock: the next item, processed by `process`; the news
        /// that the FIFO is closed and empty; or `None` (wait).
        fn attempt<E, F>(
            core: &mut MutexGuard<'_, Self>,
            process: &mut Option<F>,
        ) -> Option<Result<Deltas<K>, PopError<E>>>
        where
            F: FnOnce(&Deltas<K>, bool) -> Result<(), E>;
    }
}

/// The key of a delta's object: a tombstone's own key, or the key function's. The atomic-mode
/// payloads have no key (upstream: "object has no meta").
pub(crate) fn key_of_object<K>(
    key_fn: &super::KeyFunc<K>,
    obj: &super::DeltaObject<K>,
) -> Result<String, KeyError> {
    use super::DeltaObject;
    match obj {
        DeltaObject::Object(o) => key_fn(o),
        DeltaObject::Tombstone(t) => Ok(t.key.clone()),
        DeltaObject::ReplacedAll(_) | DeltaObject::SyncAll | DeltaObject::Bookmark(_) => {
            Err(KeyError {
                object: "an atomic-mode payload".into(),
                reason: "object has no meta".into(),
            })
        }
    }
}

/// A tombstone delta object.
pub(crate) fn tombstone<K>(key: String, obj: Option<Arc<K>>) -> super::DeltaObject<K> {
    super::DeltaObject::Tombstone(super::DeletedFinalStateUnknown { key, obj })
}

/// The lock, the wake-up, and the blocking-wait loop around a FIFO's core.
pub struct Shell<C> {
    state: Mutex<C>,
    changed: Notify,
}

impl<C> Shell<C> {
    pub(crate) fn new(core: C) -> Self {
        Shell {
            state: Mutex::new(core),
            changed: Notify::new(),
        }
    }

    /// Runs `f` on the core under the lock, then wakes every waiter (keeps I1).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut C) -> R) -> R {
        let r = f(&mut self.state.lock());
        self.changed.notify_waiters();
        r
    }

    /// Reads the core under the lock.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&C) -> R) -> R {
        f(&self.state.lock())
    }

    /// Tries `attempt` under the lock until it yields; sleeps between tries.
    pub(crate) async fn wait_until<R>(
        &self,
        mut attempt: impl FnMut(&mut MutexGuard<'_, C>) -> Option<R>,
    ) -> R {
        loop {
            let mut notified = pin!(self.changed.notified());
            notified.as_mut().enable(); // register before looking (keeps I2)
            let done = {
                let mut guard = self.state.lock();
                attempt(&mut guard)
            };
            if let Some(r) = done {
                self.changed.notify_waiters(); // a pop may have changed the synced state
                return r;
            }
            notified.await;
        }
    }

    /// One try of `attempt`, without waiting.
    pub(crate) fn try_once<R>(
        &self,
        attempt: impl FnOnce(&mut MutexGuard<'_, C>) -> Option<R>,
    ) -> Option<R> {
        let r = attempt(&mut self.state.lock());
        if r.is_some() {
            self.changed.notify_waiters();
        }
        r
    }
}
