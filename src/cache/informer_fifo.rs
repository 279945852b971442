//! The FIFO an informer runs: [`select_fifo`], the one place that turns feature gates into a
//! FIFO, and [`InformerFifo`], the chosen one behind one set of operations. Follows client-go
//! `newQueueFIFO` in `tools/cache/controller.go` and the batch-processing condition of
//! `controller.processLoop`.

use std::sync::Arc;

use super::{
    Delta, DeltaFifo, DeltaFifoOptions, Deltas, Fifo, FifoError, KeyListerGetter, Object, PopError,
    RealFifo, RealFifoOptions, RealFifoOptionsError, ReflectorStoreError, Store,
};
use crate::features::{Feature, FeatureGates, V038_BATCHES};

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
    /// client-go v0.38's batches (emulated 1.38 and later): the RealFIFO's batch may hold a
    /// key more than once and no longer ends after a delta whose key fails; the informer
    /// takes a delta's old object from the batch and skips a delta whose key fails; the store's
    /// transaction applies only the last write of each key. Off up to 1.37 (client-go v0.37.2).
    pub batches_repeat_keys: bool,
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
    let batches_repeat_keys = gates.emulated_version() >= V038_BATCHES;
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
            batches_repeat_keys,
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
        batches_repeat_keys,
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
        let known: Arc<dyn KeyListerGetter<K>> = Arc::new(indexer.clone());
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
                    batches_repeat_keys: self.batches_repeat_keys,
                    ..RealFifoOptions::default()
                })
                .unwrap_or_else(|e: RealFifoOptionsError| {
                    unreachable!("select_fifo only yields valid RealFIFO modes: {e}")
                }),
            ),
        }
    }
}

/// The FIFO an informer runs: one of the two, with the [`Fifo`] operations of each.
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

macro_rules! each {
    ($self:ident, $f:ident => $e:expr) => {
        match $self {
            InformerFifo::Delta($f) => $e,
            InformerFifo::Real($f) => $e,
        }
    };
}

/// The [`Fifo`] operations, on whichever FIFO was chosen.
impl<K: Object> InformerFifo<K> {
    /// Queues an `Added` delta ([`Fifo::add`]).
    pub fn add(&self, obj: Arc<K>) -> Result<(), FifoError> {
        each!(self, f => Fifo::add(f, obj))
    }
    /// Queues an `Updated` delta ([`Fifo::update`]).
    pub fn update(&self, obj: Arc<K>) -> Result<(), FifoError> {
        each!(self, f => Fifo::update(f, obj))
    }
    /// Queues a `Deleted` delta ([`Fifo::delete`]).
    pub fn delete(&self, obj: Arc<K>) -> Result<(), FifoError> {
        each!(self, f => Fifo::delete(f, obj))
    }
    /// A relist ([`Fifo::replace`]).
    pub fn replace(&self, list: Vec<Arc<K>>, rv: &str) -> Result<(), FifoError> {
        each!(self, f => Fifo::replace(f, list, rv))
    }
    /// A periodic resync ([`Fifo::resync`]).
    pub fn resync(&self) -> Result<(), FifoError> {
        each!(self, f => Fifo::resync(f))
    }
    /// A watch bookmark ([`Fifo::bookmark`]).
    pub fn bookmark(&self, rv: &str) -> Result<(), FifoError> {
        each!(self, f => Fifo::bookmark(f, rv))
    }
    /// Waits for the next item and processes it ([`Fifo::pop`]).
    pub async fn pop<E, F>(&self, process: F) -> Result<Deltas<K>, PopError<E>>
    where
        E: Send,
        F: FnOnce(&Deltas<K>, bool) -> Result<(), E> + Send,
    {
        each!(self, f => Fifo::pop(f, process).await)
    }
    /// A Pop that does not wait ([`Fifo::try_pop`]).
    pub fn try_pop<E, F>(&self, process: F) -> Option<Result<Deltas<K>, PopError<E>>>
    where
        F: FnOnce(&Deltas<K>, bool) -> Result<(), E>,
    {
        each!(self, f => Fifo::try_pop(f, process))
    }
    /// One Pop of the informer's loop; the chosen FIFO decides whether it is a batch
    /// ([`Fifo::pop_next`]).
    pub async fn pop_next<E, FB, FS>(
        &self,
        batch: bool,
        process_batch: FB,
        process_single: FS,
    ) -> Result<(), PopError<E>>
    where
        E: Send,
        FB: FnOnce(&[Delta<K>], bool) -> Result<(), E> + Send,
        FS: FnOnce(&Deltas<K>, bool) -> Result<(), E> + Send,
    {
        each!(self, f => Fifo::pop_next(f, batch, process_batch, process_single).await)
    }
    /// A [`Self::pop_next`] that does not wait, for tests that step an informer one Pop at a
    /// time.
    #[cfg(test)]
    pub(crate) fn try_pop_next<E, FB, FS>(
        &self,
        batch: bool,
        process_batch: FB,
        process_single: FS,
    ) -> Option<Result<(), PopError<E>>>
    where
        FB: FnOnce(&[Delta<K>], bool) -> Result<(), E>,
        FS: FnOnce(&Deltas<K>, bool) -> Result<(), E>,
    {
        match self {
            InformerFifo::Real(f) if batch => f
                .try_pop_batch(process_batch, process_single)
                .map(|r| r.map(drop)),
            _ => self.try_pop(process_single).map(|r| r.map(drop)),
        }
    }
    /// Closes the FIFO ([`Fifo::close`]).
    pub fn close(&self) {
        each!(self, f => Fifo::close(f))
    }
    /// Whether it is closed ([`Fifo::is_closed`]).
    pub fn is_closed(&self) -> bool {
        each!(self, f => Fifo::is_closed(f))
    }
    /// Whether the initial list has been popped ([`Fifo::has_synced`]).
    pub fn has_synced(&self) -> bool {
        each!(self, f => Fifo::has_synced(f))
    }
    /// Resolves once it has synced ([`Fifo::wait_synced`]).
    pub async fn wait_synced(&self) {
        each!(self, f => Fifo::wait_synced(f).await)
    }
    /// Queue depth ([`Fifo::len`]).
    pub fn len(&self) -> usize {
        each!(self, f => Fifo::len(f))
    }
    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The FIFO's name ([`Fifo::name`]).
    pub fn name(&self) -> &str {
        each!(self, f => Fifo::name(f))
    }
}

/// The chosen FIFO is the reflector's store, as each FIFO is.
impl<K: Object> super::ReflectorStore<K> for InformerFifo<K> {
    fn add(&self, obj: K) -> Result<(), ReflectorStoreError> {
        each!(self, f => super::ReflectorStore::add(f, obj))
    }
    fn update(&self, obj: K) -> Result<(), ReflectorStoreError> {
        each!(self, f => super::ReflectorStore::update(f, obj))
    }
    fn delete(&self, obj: K) -> Result<(), ReflectorStoreError> {
        each!(self, f => super::ReflectorStore::delete(f, obj))
    }
    fn replace(&self, list: Vec<K>, resource_version: String) -> Result<(), ReflectorStoreError> {
        each!(self, f => super::ReflectorStore::replace(f, list, resource_version))
    }
    fn resync(&self) -> Result<(), ReflectorStoreError> {
        each!(self, f => super::ReflectorStore::resync(f))
    }
    fn bookmark(&self, resource_version: &str) {
        each!(self, f => super::ReflectorStore::bookmark(f, resource_version))
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
            let popped = fifo.pop(|_, initial| {
                assert!(initial);
                Ok::<_, ()>(())
            });
            tokio::time::timeout(Duration::from_secs(1), popped)
                .await
                .expect("pop hung with the initial list queued: did replace queue it?")
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
