//! What both FIFOs share: the [`Queue`] operations the reflector and informer call, the
//! blocking-Pop shell around each FIFO's pure core, and [`select_fifo`], the one place that
//! turns feature gates into a FIFO. Follows client-go `tools/cache/fifo.go` (the `Queue` and
//! `QueueWithBatch` interfaces) and `newQueueFIFO` in `tools/cache/controller.go`.
//!
//! ```text
//!   reflector ──add/update/delete/replace/resync/bookmark──► Queue ──pop(process)──► informer
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
//! - `bookmark` is on the trait with a no-op default: upstream's reflector forwards bookmarks
//!   only to stores that implement `Bookmark`, which DeltaFIFO does not.

use std::{future::Future, pin::pin, sync::Arc};

use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Notify;

use super::{DeltaFifo, DeltaFifoOptions, Deltas, KeyError, Object, RealFifo, RealFifoOptions};
use super::{Store, real_fifo::RealFifoOptionsError};
use crate::features::{Feature, FeatureGates};

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
pub trait Queue<K: Object>: Send + Sync {
    /// Queues an `Added` delta.
    fn add(&self, obj: Arc<K>) -> Result<(), FifoError>;
    /// Queues an `Updated` delta.
    fn update(&self, obj: Arc<K>) -> Result<(), FifoError>;
    /// Queues a `Deleted` delta (DeltaFIFO may drop it: see [`DeltaFifo::delete`]).
    fn delete(&self, obj: Arc<K>) -> Result<(), FifoError>;
    /// A relist: the complete current list, read at `resource_version`.
    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), FifoError>;
    /// A periodic resync: replays known objects without contacting the server.
    fn resync(&self) -> Result<(), FifoError>;
    /// A watch bookmark. Only an atomic RealFIFO with bookmarks on records it.
    fn bookmark(&self, _resource_version: &str) -> Result<(), FifoError> {
        Ok(())
    }
    /// Waits for the next item (or for close), hands it to `process(deltas, is_in_initial_list)`
    /// and returns it. DeltaFIFO hands out one key's whole delta list; RealFIFO one delta.
    fn pop<E, F>(&self, process: F) -> impl Future<Output = Result<Deltas<K>, PopError<E>>> + Send
    where
        E: Send,
        F: FnOnce(&Deltas<K>, bool) -> Result<(), E> + Send;
    /// Like [`Queue::pop`], but returns `None` at once instead of waiting when nothing is
    /// queued and the FIFO is open.
    fn try_pop<E, F>(&self, process: F) -> Option<Result<Deltas<K>, PopError<E>>>
    where
        F: FnOnce(&Deltas<K>, bool) -> Result<(), E>;
    /// Closes the FIFO and wakes every waiting Pop. Items already queued are still handed out.
    fn close(&self);
    /// Whether [`Queue::close`] was called.
    fn is_closed(&self) -> bool;
    /// Whether the initial list has been popped (or an add/update/delete came first).
    fn has_synced(&self) -> bool;
    /// Resolves once [`Queue::has_synced`] is true (upstream's `Done()` channel).
    fn wait_synced(&self) -> impl Future<Output = ()> + Send;
    /// Queue depth: keys for DeltaFIFO, deltas for RealFIFO.
    fn len(&self) -> usize;
    /// Whether nothing is queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The FIFO's name, for logs.
    fn name(&self) -> &str;
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
pub(crate) struct Shell<C> {
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

/// Which FIFO an informer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum FifoKind {
    /// The legacy per-key FIFO.
    DeltaFifo,
    /// The in-order FIFO (default from 1.33).
    RealFifo,
}

/// Which FIFO, in which mode: the outcome of [`select_fifo`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct FifoChoice {
    /// DeltaFIFO or RealFIFO.
    pub kind: FifoKind,
    /// DeltaFIFO: emit `Replaced` rather than `Sync` for relist items (the informer sets it).
    pub emit_delta_type_replaced: bool,
    /// RealFIFO: one `ReplacedAll` / `SyncAll` per Replace / Resync (`AtomicFIFO`).
    pub atomic_events: bool,
    /// RealFIFO: release the lock while `process` runs (`UnlockWhileProcessingFIFO`).
    pub unlock_while_processing: bool,
    /// RealFIFO: queue bookmarks (on with atomic events).
    pub emit_bookmarks: bool,
    /// Whether the FIFO consults the informer's indexer as known objects.
    pub known_objects: bool,
    /// Whether the informer pops in batches (`InOrderInformersBatchProcess`, RealFIFO only).
    pub batch_process: bool,
    /// Whether the store reports its last sync resource version (`AtomicFIFO`).
    pub store_tracks_resource_version: bool,
}

/// The FIFO an informer runs, for the gates given: upstream's `newQueueFIFO` plus the
/// batch-processing condition of `controller.processLoop`.
///
/// - `InOrderInformers` off: a DeltaFIFO with known objects, emitting `Replaced`.
/// - on, `AtomicFIFO` off: a RealFIFO with known objects.
/// - on, `AtomicFIFO` on: an atomic RealFIFO without known objects, with bookmarks, unlocked
///   while processing if `UnlockWhileProcessingFIFO` is on.
/// - RealFIFO pops in batches when `InOrderInformersBatchProcess` is on.
pub fn select_fifo(gates: &FeatureGates) -> FifoChoice {
    let atomic_gate = gates.enabled(Feature::ATOMIC_FIFO);
    if !gates.enabled(Feature::IN_ORDER_INFORMERS) {
        return FifoChoice {
            kind: FifoKind::DeltaFifo,
            emit_delta_type_replaced: true,
            atomic_events: false,
            unlock_while_processing: false,
            emit_bookmarks: false,
            known_objects: true,
            batch_process: false,
            store_tracks_resource_version: atomic_gate,
        };
    }
    FifoChoice {
        kind: FifoKind::RealFifo,
        emit_delta_type_replaced: false,
        atomic_events: atomic_gate,
        unlock_while_processing: atomic_gate
            && gates.enabled(Feature::UNLOCK_WHILE_PROCESSING_FIFO),
        emit_bookmarks: atomic_gate,
        known_objects: !atomic_gate,
        batch_process: gates.enabled(Feature::IN_ORDER_INFORMERS_BATCH_PROCESS),
        store_tracks_resource_version: atomic_gate,
    }
}

impl FifoChoice {
    /// A one-line description, e.g. `RealFIFO (atomic, unlocked, bookmarks, batched)`.
    pub fn describe(&self) -> String {
        let mut modes = Vec::new();
        let name = match self.kind {
            FifoKind::DeltaFifo => "DeltaFIFO",
            FifoKind::RealFifo => "RealFIFO",
        };
        if self.emit_delta_type_replaced {
            modes.push("Replaced");
        }
        if self.known_objects {
            modes.push("known objects");
        }
        if self.atomic_events {
            modes.push("atomic");
        }
        if self.unlock_while_processing {
            modes.push("unlocked");
        }
        if self.emit_bookmarks {
            modes.push("bookmarks");
        }
        if self.batch_process {
            modes.push("batched");
        }
        format!("{name} ({})", modes.join(", "))
    }

    /// Builds the chosen FIFO, named after upstream (`"DeltaFIFO <type>"`, `"RealFIFO <type>"`),
    /// with `indexer` as known objects where the mode uses them.
    pub fn build<K: Object>(&self, type_name: &str, indexer: &Store<K>) -> InformerFifo<K> {
        let known: Arc<dyn super::KeyListerGetter<K>> = Arc::new(indexer.clone());
        match self.kind {
            FifoKind::DeltaFifo => InformerFifo::Delta(DeltaFifo::new(DeltaFifoOptions {
                name: format!("DeltaFIFO {type_name}"),
                known_objects: Some(known),
                emit_delta_type_replaced: self.emit_delta_type_replaced,
                ..DeltaFifoOptions::default()
            })),
            FifoKind::RealFifo => InformerFifo::Real(
                RealFifo::new(RealFifoOptions {
                    name: format!("RealFIFO {type_name}"),
                    known_objects: self.known_objects.then_some(known),
                    atomic_events: self.atomic_events,
                    unlock_while_processing: self.unlock_while_processing,
                    emit_delta_type_bookmark: self.emit_bookmarks,
                    ..RealFifoOptions::default()
                })
                .unwrap_or_else(|e: RealFifoOptionsError| {
                    unreachable!("select_fifo only yields valid RealFIFO modes: {e}")
                }),
            ),
        }
    }
}

/// The FIFO an informer runs: one of the two, behind one set of [`Queue`] operations.
pub enum InformerFifo<K> {
    /// `InOrderInformers` off.
    Delta(DeltaFifo<K>),
    /// `InOrderInformers` on.
    Real(RealFifo<K>),
}

impl<K> Clone for InformerFifo<K> {
    fn clone(&self) -> Self {
        match self {
            InformerFifo::Delta(f) => InformerFifo::Delta(f.clone()),
            InformerFifo::Real(f) => InformerFifo::Real(f.clone()),
        }
    }
}

impl<K: Object> InformerFifo<K> {
    /// The RealFIFO, for `pop_batch` (upstream's `QueueWithBatch` check).
    pub fn as_real(&self) -> Option<&RealFifo<K>> {
        match self {
            InformerFifo::Real(f) => Some(f),
            InformerFifo::Delta(_) => None,
        }
    }
}

macro_rules! each {
    ($self:ident, $f:ident => $e:expr) => {
        match $self {
            InformerFifo::Delta($f) => $e,
            InformerFifo::Real($f) => $e,
        }
    };
}

impl<K: Object> Queue<K> for InformerFifo<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), FifoError> {
        each!(self, f => f.add(obj))
    }
    fn update(&self, obj: Arc<K>) -> Result<(), FifoError> {
        each!(self, f => f.update(obj))
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), FifoError> {
        each!(self, f => f.delete(obj))
    }
    fn replace(&self, list: Vec<Arc<K>>, rv: &str) -> Result<(), FifoError> {
        each!(self, f => f.replace(list, rv))
    }
    fn resync(&self) -> Result<(), FifoError> {
        each!(self, f => f.resync())
    }
    fn bookmark(&self, rv: &str) -> Result<(), FifoError> {
        each!(self, f => Queue::bookmark(f, rv))
    }
    async fn pop<E, F>(&self, process: F) -> Result<Deltas<K>, PopError<E>>
    where
        E: Send,
        F: FnOnce(&Deltas<K>, bool) -> Result<(), E> + Send,
    {
        each!(self, f => f.pop(process).await)
    }
    fn try_pop<E, F>(&self, process: F) -> Option<Result<Deltas<K>, PopError<E>>>
    where
        F: FnOnce(&Deltas<K>, bool) -> Result<(), E>,
    {
        each!(self, f => f.try_pop(process))
    }
    fn close(&self) {
        each!(self, f => f.close())
    }
    fn is_closed(&self) -> bool {
        each!(self, f => f.is_closed())
    }
    fn has_synced(&self) -> bool {
        each!(self, f => f.has_synced())
    }
    async fn wait_synced(&self) {
        each!(self, f => f.wait_synced().await)
    }
    fn len(&self) -> usize {
        each!(self, f => f.len())
    }
    fn name(&self) -> &str {
        each!(self, f => f.name())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn cm(name: &str, _: Option<u32>) -> Arc<ConfigMap> {
        let mut c = ConfigMap::default();
        c.metadata.name = Some(name.into());
        Arc::new(c)
    }

    /// Paused clock: the timeout below costs no real time, and fires only if the Pop never
    /// wakes.
    #[tokio::test(start_paused = true)]
    async fn a_waiting_pop_wakes_when_a_delta_arrives_in_both_fifos() {
        for minor in [32, 33, 36] {
            let fifo = select_fifo(&FeatureGates::at_minor(minor).unwrap())
                .build::<ConfigMap>("cm", &Store::new());
            let consumer = fifo.clone();
            let pop = tokio::spawn(async move {
                consumer
                    .pop(|d, _| {
                        assert_eq!(d.len(), 1);
                        Ok::<_, ()>(())
                    })
                    .await
            });
            tokio::task::yield_now().await;
            assert!(
                !pop.is_finished(),
                "1.{minor}: Pop returned on an empty FIFO"
            );
            fifo.add(cm("a", None)).unwrap();
            let got = tokio::time::timeout(Duration::from_secs(1), pop)
                .await
                .expect("Pop hung: add did not wake the waiter (lost wake-up?)")
                .unwrap();
            assert_eq!(got.unwrap().len(), 1);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn wait_synced_resolves_after_the_initial_list_is_popped() {
        // DeltaFIFO, RealFIFO, atomic RealFIFO (one ReplacedAll for the whole list).
        for (minor, pops) in [(32, 2), (33, 2), (36, 1)] {
            wait_synced_after(minor, pops).await;
        }
    }

    async fn wait_synced_after(minor: u32, pops: usize) {
        let fifo = select_fifo(&FeatureGates::at_minor(minor).unwrap())
            .build::<ConfigMap>("cm", &Store::new());
        fifo.replace(vec![cm("a", None), cm("b", None)], "1")
            .unwrap();
        let waiter = fifo.clone();
        let synced = tokio::spawn(async move { waiter.wait_synced().await });
        for _ in 0..pops {
            tokio::task::yield_now().await;
            assert!(
                !synced.is_finished(),
                "1.{minor}: synced before the initial list was popped"
            );
            fifo.pop(|_, initial| {
                assert!(initial);
                Ok::<_, ()>(())
            })
            .await
            .unwrap();
        }
        tokio::time::timeout(Duration::from_secs(1), synced)
            .await
            .expect("wait_synced hung after the last initial item was popped")
            .unwrap();
    }

    /// Paused clock, as above: a waiting PopBatch wakes on the first delta, and reports the
    /// close once the FIFO is closed and empty.
    #[tokio::test(start_paused = true)]
    async fn a_waiting_pop_batch_wakes_when_a_delta_arrives() {
        let fifo = RealFifo::<ConfigMap>::atomic();
        let consumer = fifo.clone();
        let pop = tokio::spawn(async move {
            consumer
                .pop_batch(|_, _| Ok::<_, ()>(()), |_, _| Ok(()))
                .await
        });
        tokio::task::yield_now().await;
        assert!(!pop.is_finished(), "PopBatch returned on an empty FIFO");
        fifo.add(cm("a", None)).unwrap();
        let got = tokio::time::timeout(Duration::from_secs(1), pop)
            .await
            .expect("PopBatch hung: add did not wake the waiter (lost wake-up?)")
            .unwrap();
        assert_eq!(got.unwrap().len(), 1);
        fifo.close();
        let closed = fifo.pop_batch(|_, _| Ok::<_, ()>(()), |_, _| Ok(()));
        let closed = tokio::time::timeout(Duration::from_secs(1), closed)
            .await
            .expect("PopBatch hung on a closed, empty FIFO");
        assert_eq!(closed.unwrap_err(), PopError::Closed);
    }

    #[test]
    fn an_unlocked_real_fifo_lets_process_append_to_the_same_fifo() {
        let fifo = RealFifo::<ConfigMap>::atomic();
        fifo.add(cm("a", None)).unwrap();
        // Under the lock this would deadlock (the mutex is not reentrant); unlocked it appends.
        let inner = fifo.clone();
        fifo.try_pop(|_, _| inner.add(cm("b", None)))
            .unwrap()
            .unwrap();
        assert_eq!(fifo.len(), 1);
    }

    #[test]
    fn a_process_error_comes_back_and_the_item_is_gone() {
        let fifo = DeltaFifo::<ConfigMap>::new(DeltaFifoOptions::default());
        fifo.add(cm("a", None)).unwrap();
        let r = fifo.try_pop(|_, _| Err("handler failed")).unwrap();
        assert_eq!(r.unwrap_err(), PopError::Process("handler failed"));
        assert!(fifo.is_empty(), "no requeue since v0.33");
    }

    #[test]
    fn invalid_real_fifo_modes_are_errors_not_panics() {
        let err = |o: RealFifoOptions<ConfigMap>| RealFifo::new(o).err().unwrap();
        assert_eq!(
            err(RealFifoOptions::default()),
            RealFifoOptionsError::KnownObjectsRequired
        );
        assert_eq!(
            err(RealFifoOptions {
                atomic_events: true,
                known_objects: Some(Arc::new(Store::<ConfigMap>::new())),
                ..RealFifoOptions::default()
            }),
            RealFifoOptionsError::KnownObjectsWithAtomic
        );
    }
}
