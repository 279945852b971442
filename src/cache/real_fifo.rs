//! RealFIFO: the in-order informer queue (default from Kubernetes 1.33). Follows client-go
//! `tools/cache/the_real_fifo.go` at v0.37.2 (unchanged since v0.36), and v0.38.0-beta.0's
//! `PopBatch` when asked ([`RealFifoOptions::batches_repeat_keys`]).
//!
//! ```text
//!   items: [Added a1, Added b1, Updated a2, Updated b2, Updated a3]   one delta each, arrival order
//!   Pop      ──► [Added a1]                      exactly one delta
//!   PopBatch ──► [Added a1, Added b1]            consecutive, distinct keys, ≤ batch_size
//! ```
//!
//! Every producer call appends. There is no per-key map, no dedup and no suppression of a
//! Delete for an object nobody knew: the informer sees every event in the order it arrived.
//!
//! # Invariants
//! 1. `items` is in arrival order; nothing is ever reordered, merged or dropped before a Pop.
//! 2. A batch never crosses the initial-list boundary: while `initial_population_count > 0`,
//!    it holds only items at indices below it.
//! 3. A batch holds only batchable types (or one non-batchable delta alone) and at most
//!    `batch_size` deltas. Up to client-go v0.37 (the default) it also holds each key at most
//!    once and ends after a delta whose key could not be made; with
//!    [`RealFifoOptions::batches_repeat_keys`] (v0.38) it does neither, and computes no key.
//! 4. Once synced, always synced.
//!
//! # Concurrency
//! One mutex guards the core (see [`crate::cache::fifo`]). `process` runs under it unless
//! `unlock_while_processing` is on and fewer than `2 × batch_size` deltas are queued; then
//! producers may append while the informer processes, so Pops must come from one task.
//!
//! # Differences from upstream
//! - No transformer, metrics or slow-Pop traces.
//! - Invalid option combinations are a [`RealFifoOptionsError`], not a panic.
//! - `batch_size` is an option (upstream: a private field, 1000, set directly by its tests).
//! - When `resync` cannot queue a known object's Sync, it returns that failure, as v0.38
//!   does; v0.37.2 wrapped an unrelated earlier error. Unreachable with a key function that
//!   agrees with itself.

use std::{
    collections::{HashSet, VecDeque},
    sync::Arc,
};

use parking_lot::MutexGuard;

use super::fifo::{
    Fifo, FifoError, PopError, Shell, key_of_object,
    sealed::{FifoShell, PopCore, Queued},
    tombstone,
};
use super::{
    BookmarkInfo, Delta, DeltaObject, DeltaType, Deltas, KeyFunc, KeyListerGetter, Object,
    ReplacedAllInfo, meta_namespace_key_func,
};

/// Upstream's `defaultBatchSize`.
pub(crate) const DEFAULT_BATCH_SIZE: usize = 1000;

/// How to build a [`RealFifo`] (upstream `RealFIFOOptions`).
pub struct RealFifoOptions<K> {
    /// For logs; default `"RealFIFO"`.
    pub name: String,
    /// Default [`crate::cache::meta_namespace_key`].
    pub key_function: Option<KeyFunc<K>>,
    /// The informer's indexer. Required unless `atomic_events`; forbidden with it.
    pub known_objects: Option<Arc<dyn KeyListerGetter<K>>>,
    /// One `ReplacedAll` per Replace and one `SyncAll` per Resync (`AtomicFIFO`).
    pub atomic_events: bool,
    /// Release the lock while processing (`UnlockWhileProcessingFIFO`); needs `atomic_events`.
    pub unlock_while_processing: bool,
    /// Queue bookmarks; needs `atomic_events`.
    pub emit_delta_type_bookmark: bool,
    /// The largest batch `pop_batch` hands out; default 1000 (upstream's `defaultBatchSize`).
    pub batch_size: usize,
    /// client-go v0.38's `PopBatch`: a batch no longer ends at a key it already holds, nor
    /// after a delta whose key fails (keeps I3). Default off: v0.37.2's rule.
    pub batches_repeat_keys: bool,
}

impl<K> Default for RealFifoOptions<K> {
    fn default() -> Self {
        RealFifoOptions {
            name: "RealFIFO".to_owned(),
            key_function: None,
            known_objects: None,
            atomic_events: false,
            unlock_while_processing: false,
            emit_delta_type_bookmark: false,
            batch_size: DEFAULT_BATCH_SIZE,
            batches_repeat_keys: false,
        }
    }
}

/// An option combination upstream rejects (it panics with "coding error: …").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RealFifoOptionsError {
    /// Atomic events with known objects.
    #[error("knownObjects must not be provided when AtomicEvents is true")]
    KnownObjectsWithAtomic,
    /// Unlocking without atomic events.
    #[error("UnlockWhileProcessing must be false when AtomicEvents is false")]
    UnlockWithoutAtomic,
    /// Neither atomic events nor known objects.
    #[error("knownObjects must be provided when AtomicEvents is false")]
    KnownObjectsRequired,
    /// Bookmarks without atomic events.
    #[error("EmitDeltaTypeBookmark must be false when AtomicEvents is false")]
    BookmarkWithoutAtomic,
    /// A batch size of zero could never hand anything out.
    #[error("batch_size must be at least 1")]
    ZeroBatchSize,
}

pub struct Core<K> {
    items: VecDeque<Delta<K>>,
    populated: bool,
    initial_population_count: usize,
    synced: bool,
    closed: bool,
    key_fn: KeyFunc<K>,
    known: Option<Arc<dyn KeyListerGetter<K>>>,
    atomic: bool,
    unlock: bool,
    emit_bookmark: bool,
    batch_size: usize,
    /// v0.38's batches: no key computed, repeats allowed (keeps I3).
    repeat_keys: bool,
    /// False only in the deliberately broken variant
    /// ([`RealFifo::with_batches_across_the_initial_list`]).
    batches_stop_at_initial_list: bool,
}

impl<K: Object> Core<K> {
    fn check_synced(&mut self) {
        if self.populated && self.initial_population_count == 0 {
            self.synced = true; // keeps I4
        }
    }

    fn push(&mut self, delta_type: DeltaType, object: DeltaObject<K>) -> Result<(), FifoError> {
        key_of_object(&self.key_fn, &object)?; // an unkeyable object is refused, not queued
        self.items.push_back(Delta { delta_type, object }); // keeps I1
        Ok(())
    }

    fn producer(&mut self, delta_type: DeltaType, obj: Arc<K>) -> Result<(), FifoError> {
        self.populated = true;
        self.check_synced();
        self.push(delta_type, DeltaObject::Object(obj))
    }

    fn replace(&mut self, list: Vec<Arc<K>>, rv: &str) -> Result<(), FifoError> {
        if self.atomic {
            self.items.push_back(Delta {
                delta_type: DeltaType::ReplacedAll,
                object: DeltaObject::ReplacedAll(ReplacedAllInfo {
                    resource_version: rv.to_owned(),
                    objects: list,
                }),
            });
        } else {
            self.reconcile_replacement(list)?;
        }
        if !self.populated {
            self.populated = true;
            self.initial_population_count = self.items.len(); // everything queued so far
            self.check_synced();
        }
        Ok(())
    }

    /// Non-atomic Replace: deletions first, then one `Replaced` per item.
    fn reconcile_replacement(&mut self, list: Vec<Arc<K>>) -> Result<(), FifoError> {
        let new_keys = list
            .iter()
            .map(|o| (self.key_fn)(o))
            .collect::<Result<HashSet<_>, _>>()?; // all keys before queueing anything
        let mut queued_keys: Vec<String> = Vec::new();
        let mut last: std::collections::HashMap<String, usize> = Default::default();
        for (i, d) in self.items.iter().enumerate() {
            let k = key_of_object(&self.key_fn, &d.object)?;
            if last.insert(k.clone(), i).is_none() {
                queued_keys.push(k);
            }
        }
        for k in &queued_keys {
            if new_keys.contains(k) {
                continue;
            }
            let newest = &self.items[last[k]];
            if newest.delta_type == DeltaType::Deleted {
                continue; // its deletion is already queued
            }
            let obj = newest.object.unwrapped_object();
            self.push(DeltaType::Deleted, tombstone(k.clone(), obj))?;
        }
        if let Some(known) = self.known.clone() {
            for k in known.list_keys() {
                if new_keys.contains(&k) || last.contains_key(&k) {
                    continue;
                }
                let obj = match known.get_by_key(&k) {
                    Ok(o) => o,
                    Err(e) => {
                        tracing::error!(key = %k, error = %e, "Error during lookup, placing DeleteFinalStateUnknown marker without object");
                        None
                    }
                };
                if obj.is_none() {
                    tracing::error!(key = %k, "Key does not exist in known objects store, placing DeleteFinalStateUnknown marker without object");
                }
                self.push(DeltaType::Deleted, tombstone(k, obj))?;
            }
        }
        for item in list {
            self.push(DeltaType::Replaced, DeltaObject::Object(item))?;
        }
        Ok(())
    }

    fn resync(&mut self) -> Result<(), FifoError> {
        if self.atomic {
            self.items.push_back(Delta {
                delta_type: DeltaType::SyncAll,
                object: DeltaObject::SyncAll,
            });
            return Ok(());
        }
        let Some(known) = self.known.clone() else {
            return Ok(());
        };
        let queued = self
            .items
            .iter()
            .map(|d| key_of_object(&self.key_fn, &d.object))
            .collect::<Result<HashSet<_>, _>>()?;
        for k in known.list_keys() {
            if queued.contains(&k) {
                continue;
            }
            match known.get_by_key(&k) {
                // The very Arc the indexer holds, untransformed.
                Ok(Some(o)) => self.push(DeltaType::Sync, DeltaObject::Object(o))?,
                Ok(None) => {
                    tracing::error!(key = %k, "Key does not exist in known objects store, unable to queue object for sync")
                }
                Err(e) => tracing::error!(key = %k, error = %e, "Unable to queue object for sync"),
            }
        }
        Ok(())
    }

    fn bookmark(&mut self, rv: &str) {
        if self.emit_bookmark {
            self.items.push_back(Delta {
                delta_type: DeltaType::Bookmark,
                object: DeltaObject::Bookmark(BookmarkInfo {
                    resource_version: rv.to_owned(),
                }),
            });
        }
    }

    /// Counts processed initial-list items *after* processing, as upstream.
    ///
    /// `>=` for `>` is an equivalent mutant: at a count of zero the subtraction keeps it zero,
    /// and `check_synced` finds what the last change to `populated` or the count already did.
    fn finish(&mut self, n: usize) {
        if self.initial_population_count > 0 {
            self.initial_population_count = self.initial_population_count.saturating_sub(n);
            self.check_synced();
        }
    }

    /// How many head deltas the next batch takes (keeps I2, I3). Needs a non-empty queue.
    fn batch_len(&self) -> usize {
        // Sized for a full batch up front, with the crate's fast hasher: this set is rebuilt
        // for every batch.
        let mut unique = hashbrown::HashSet::with_capacity(self.items.len().min(self.batch_size));
        let mut n = 0;
        for (i, item) in self.items.iter().enumerate().take(self.batch_size) {
            if self.batches_stop_at_initial_list
                && self.initial_population_count > 0
                && i >= self.initial_population_count
            {
                break; // keeps I2
            }
            if !item.delta_type.is_batchable() {
                if n == 0 {
                    n = 1; // alone
                }
                break;
            }
            if self.repeat_keys {
                n += 1; // v0.38: no key, so neither a repeat nor a key error ends the batch
                continue;
            }
            match key_of_object(&self.key_fn, &item.object) {
                Err(_) => {
                    n += 1; // the broken delta is included and ends the batch
                    break;
                }
                Ok(id) => {
                    if !unique.insert(id) {
                        break; // a repeated key starts the next batch
                    }
                    n += 1;
                }
            }
        }
        n
    }

    fn should_unlock(&self) -> bool {
        self.unlock && self.items.len() < self.batch_size * 2
    }
}

/// The in-order informer FIFO. Clone it to share it between producer and consumer.
pub struct RealFifo<K> {
    shell: Arc<Shell<Core<K>>>,
    name: Arc<str>,
}

impl<K> Clone for RealFifo<K> {
    fn clone(&self) -> Self {
        RealFifo {
            shell: self.shell.clone(),
            name: self.name.clone(),
        }
    }
}

/// Runs `f` with the lock released if the FIFO is in unlocked mode, held otherwise.
fn processing<K: Object, R>(core: &mut MutexGuard<'_, Core<K>>, f: impl FnOnce() -> R) -> R {
    if core.should_unlock() {
        MutexGuard::unlocked(core, f)
    } else {
        f()
    }
}

impl<K: Object> RealFifo<K> {
    /// A RealFIFO built from `opts`, or the reason the combination is invalid.
    pub fn new(opts: RealFifoOptions<K>) -> Result<Self, RealFifoOptionsError> {
        use RealFifoOptionsError::*;
        if opts.atomic_events {
            if opts.known_objects.is_some() {
                return Err(KnownObjectsWithAtomic);
            }
        } else if opts.unlock_while_processing {
            return Err(UnlockWithoutAtomic);
        } else if opts.known_objects.is_none() {
            return Err(KnownObjectsRequired);
        } else if opts.emit_delta_type_bookmark {
            return Err(BookmarkWithoutAtomic);
        }
        if opts.batch_size == 0 {
            return Err(ZeroBatchSize);
        }
        Ok(RealFifo {
            shell: Arc::new(Shell::new(Core {
                items: VecDeque::new(),
                populated: false,
                initial_population_count: 0,
                synced: false,
                closed: false,
                key_fn: opts.key_function.unwrap_or_else(meta_namespace_key_func),
                known: opts.known_objects,
                atomic: opts.atomic_events,
                unlock: opts.unlock_while_processing,
                emit_bookmark: opts.emit_delta_type_bookmark,
                batch_size: opts.batch_size,
                repeat_keys: opts.batches_repeat_keys,
                batches_stop_at_initial_list: true,
            })),
            name: opts.name.into(),
        })
    }

    /// **Deliberately broken**: a RealFIFO whose `pop_batch` ignores the initial-list boundary
    /// (breaks I2). A batch then carries events that arrived after the first relist, flagged
    /// as part of the initial list, and the FIFO reports synced only after handing them out. It
    /// exists so that the model checks (`tests/fifo_model.rs`) can show their detectors firing.
    pub fn with_batches_across_the_initial_list(
        opts: RealFifoOptions<K>,
    ) -> Result<Self, RealFifoOptionsError> {
        let fifo = Self::new(opts)?;
        fifo.shell.with(|c| c.batches_stop_at_initial_list = false);
        Ok(fifo)
    }

    /// A RealFIFO in the non-atomic mode of 1.33–1.35, consulting `known`.
    pub fn with_known_objects(known: Arc<dyn KeyListerGetter<K>>) -> Self {
        Self::new(RealFifoOptions {
            known_objects: Some(known),
            ..RealFifoOptions::default()
        })
        .expect("known objects without atomic events is a valid mode")
    }

    /// A RealFIFO in the 1.36 informer mode: atomic, unlocked while processing, bookmarks.
    pub fn atomic() -> Self {
        Self::new(RealFifoOptions {
            atomic_events: true,
            unlock_while_processing: true,
            emit_delta_type_bookmark: true,
            ..RealFifoOptions::default()
        })
        .expect("atomic without known objects is a valid mode")
    }

    /// The queued deltas, oldest first (upstream's test helper `getItems`).
    pub fn queued(&self) -> Vec<Delta<K>> {
        self.shell.read(|c| c.items.iter().cloned().collect())
    }

    /// The key of a delta's object (upstream `keyOf`).
    pub fn key_of(&self, obj: &DeltaObject<K>) -> Result<String, super::KeyError> {
        self.shell.read(|c| key_of_object(&c.key_fn, obj))
    }

    #[allow(clippy::type_complexity)]
    fn attempt_batch<E, FB, FS>(
        fs: &mut Option<(FB, FS)>,
        core: &mut MutexGuard<'_, Core<K>>,
    ) -> Option<Result<Vec<Delta<K>>, PopError<E>>>
    where
        FB: FnOnce(&[Delta<K>], bool) -> Result<(), E>,
        FS: FnOnce(&Deltas<K>, bool) -> Result<(), E>,
    {
        if core.items.is_empty() {
            return core.closed.then_some(Err(PopError::Closed));
        }
        let is_in_initial_list = !core.synced;
        let n = core.batch_len();
        let batch: Vec<Delta<K>> = core.items.drain(..n).collect();
        let (process_batch, process_single) = fs.take().expect("one batch per PopBatch");
        let (r, batch) = if n == 1 {
            let single = Deltas(batch);
            let r = processing(core, || process_single(&single, is_in_initial_list));
            (r, single.0)
        } else {
            let r = processing(core, || process_batch(&batch, is_in_initial_list));
            (r, batch)
        };
        core.finish(n);
        Some(r.map(|()| batch).map_err(PopError::Process))
    }

    /// Waits for deltas, takes a batch from the head (see the invariants), and hands it to
    /// `process_batch`, or to `process_single` when it holds one delta. Returns the batch.
    pub async fn pop_batch<E, FB, FS>(
        &self,
        process_batch: FB,
        process_single: FS,
    ) -> Result<Vec<Delta<K>>, PopError<E>>
    where
        E: Send,
        FB: FnOnce(&[Delta<K>], bool) -> Result<(), E> + Send,
        FS: FnOnce(&Deltas<K>, bool) -> Result<(), E> + Send,
    {
        let mut fs = Some((process_batch, process_single));
        self.shell
            .wait_until(|core| Self::attempt_batch(&mut fs, core))
            .await
    }

    /// Like [`RealFifo::pop_batch`], without waiting: `None` if nothing is queued and the FIFO
    /// is open.
    pub fn try_pop_batch<E, FB, FS>(
        &self,
        process_batch: FB,
        process_single: FS,
    ) -> Option<Result<Vec<Delta<K>>, PopError<E>>>
    where
        FB: FnOnce(&[Delta<K>], bool) -> Result<(), E>,
        FS: FnOnce(&Deltas<K>, bool) -> Result<(), E>,
    {
        let mut fs = Some((process_batch, process_single));
        self.shell
            .try_once(|core| Self::attempt_batch(&mut fs, core))
    }
}

impl<K: Object> Fifo<K> for RealFifo<K> {
    /// A batch when asked (upstream's `QueueWithBatch`), else one delta.
    async fn pop_next<E, FB, FS>(
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
        if batch {
            self.pop_batch(process_batch, process_single)
                .await
                .map(drop)
        } else {
            Fifo::pop(self, process_single).await.map(drop)
        }
    }

    fn add(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.shell.with(|c| c.producer(DeltaType::Added, obj))
    }

    fn update(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.shell.with(|c| c.producer(DeltaType::Updated, obj))
    }

    /// Always queues `Deleted`, even for an object nobody knew.
    fn delete(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.shell.with(|c| c.producer(DeltaType::Deleted, obj))
    }

    /// Atomic: one `ReplacedAll`. Otherwise tombstones first, then one `Replaced` per item.
    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), FifoError> {
        self.shell.with(|c| c.replace(list, resource_version))
    }

    /// Atomic: one `SyncAll`. Otherwise `Sync` for each known key with nothing queued.
    fn resync(&self) -> Result<(), FifoError> {
        self.shell.with(|c| c.resync())
    }

    fn bookmark(&self, resource_version: &str) -> Result<(), FifoError> {
        self.shell.with(|c| c.bookmark(resource_version));
        Ok(())
    }

    /// The number of queued deltas (not keys).
    fn len(&self) -> usize {
        self.shell.read(|c| c.items.len())
    }
}

impl<K> Queued for RealFifo<K> {
    type Item = K;
}

impl<K: Object> FifoShell<K> for RealFifo<K> {
    type Core = Core<K>;
    fn shell(&self) -> &Shell<Core<K>> {
        &self.shell
    }
    fn fifo_name(&self) -> &str {
        &self.name
    }
}

impl<K: Object> PopCore<K> for Core<K> {
    fn is_closed(&self) -> bool {
        self.closed
    }
    fn close(&mut self) {
        self.closed = true;
    }
    fn has_synced(&self) -> bool {
        self.synced
    }
    fn attempt<E, F>(
        core: &mut MutexGuard<'_, Self>,
        process: &mut Option<F>,
    ) -> Option<Result<Deltas<K>, PopError<E>>>
    where
        F: FnOnce(&Deltas<K>, bool) -> Result<(), E>,
    {
        let Some(delta) = core.items.pop_front() else {
            return core.closed.then_some(Err(PopError::Closed));
        };
        let is_in_initial_list = !core.synced;
        let deltas = Deltas(vec![delta]);
        let process = process.take().expect("a Pop processes at most one item");
        let r = processing(core, || process(&deltas, is_in_initial_list));
        core.finish(1);
        Some(r.map(|()| deltas).map_err(PopError::Process))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;
    use crate::cache::{KeyError, Store};

    fn cm(name: &str) -> Arc<ConfigMap> {
        let mut c = ConfigMap::default();
        c.metadata.name = Some(name.into());
        Arc::new(c)
    }

    fn names(deltas: &[Delta<ConfigMap>]) -> Vec<String> {
        deltas
            .iter()
            .map(|d| d.object.object().unwrap().metadata.name.clone().unwrap())
            .collect()
    }

    /// Upstream's `whileProcessing_locked`: the lock is released only in unlocked mode and
    /// while fewer than twice the batch size are queued. Single-threaded runs cannot see the
    /// difference, so the rule is read from the core.
    #[test]
    fn process_runs_unlocked_only_in_unlocked_mode_below_twice_the_batch_size() {
        let unlocked_with = |unlock: bool, queued: usize| {
            let fifo = RealFifo::<ConfigMap>::new(RealFifoOptions {
                atomic_events: true,
                unlock_while_processing: unlock,
                batch_size: 3,
                ..RealFifoOptions::default()
            })
            .unwrap();
            for i in 0..queued {
                fifo.add(cm(&i.to_string())).unwrap();
            }
            fifo.shell.read(|c| c.should_unlock())
        };
        assert!(unlocked_with(true, 5), "5 < 2 × 3: unlocked");
        assert!(!unlocked_with(true, 6), "6 = 2 × 3: held");
        assert!(!unlocked_with(false, 0), "locked mode: always held");
    }

    /// A delta whose key can no longer be made ends its batch and is part of it (upstream's
    /// PopBatch). Unreachable with a key function that always agrees with itself, so this one
    /// changes its mind after the deltas are queued.
    #[test]
    fn a_delta_whose_key_fails_ends_its_batch() {
        let refuse = Arc::new(AtomicBool::new(false));
        let r = refuse.clone();
        let key_function: KeyFunc<ConfigMap> = Arc::new(move |o: &ConfigMap| {
            let name = o.metadata.name.clone().unwrap_or_default();
            if name == "b" && r.load(Ordering::SeqCst) {
                return Err(KeyError {
                    object: name,
                    reason: "refused".into(),
                });
            }
            Ok(name)
        });
        let fifo = RealFifo::new(RealFifoOptions {
            key_function: Some(key_function),
            known_objects: Some(Arc::new(Store::<ConfigMap>::new())),
            ..RealFifoOptions::default()
        })
        .unwrap();
        for n in ["a", "b", "c"] {
            fifo.add(cm(n)).unwrap();
        }
        refuse.store(true, Ordering::SeqCst);
        let batch = fifo
            .try_pop_batch(|_, _| Ok::<_, ()>(()), |_, _| Ok(()))
            .unwrap()
            .unwrap();
        assert_eq!(names(&batch), ["a", "b"]);
    }

    /// The waiting `pop_batch`: it sleeps until deltas arrive, hands a batch of several to
    /// `process_batch` and a lone delta to `process_single`, and reports a close.
    #[tokio::test(start_paused = true)]
    async fn pop_batch_waits_hands_out_batches_and_reports_a_close() {
        use std::time::Duration;
        let fifo = RealFifo::<ConfigMap>::atomic();
        let popper = fifo.clone();
        let waiting = tokio::spawn(async move {
            popper
                .pop_batch(
                    |_, _| Err::<(), _>("batch"),
                    |d, _| {
                        assert_eq!(names(&d.0), ["a"]);
                        Ok(())
                    },
                )
                .await
        });
        tokio::task::yield_now().await;
        assert!(
            !waiting.is_finished(),
            "pop_batch returned with nothing queued"
        );
        fifo.add(cm("a")).unwrap();
        let single = tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("pop_batch missed the wake-up of an add")
            .unwrap()
            .unwrap();
        assert_eq!(names(&single), ["a"]);

        fifo.add(cm("b")).unwrap();
        fifo.add(cm("c")).unwrap();
        let seen = std::sync::Mutex::new(Vec::new());
        let batch = tokio::time::timeout(
            Duration::from_secs(1),
            fifo.pop_batch(
                |b, _| {
                    seen.lock().unwrap().extend(names(b));
                    Ok::<_, ()>(())
                },
                |_, _| panic!("two deltas are a batch"),
            ),
        )
        .await
        .expect("pop_batch hung with deltas queued")
        .unwrap();
        assert_eq!(names(&batch), ["b", "c"]);
        assert_eq!(*seen.lock().unwrap(), ["b", "c"]);

        fifo.close();
        let closed = tokio::time::timeout(
            Duration::from_secs(1),
            fifo.pop_batch(|_, _| Ok::<_, ()>(()), |_, _| Ok(())),
        )
        .await
        .expect("pop_batch hung on a closed, empty FIFO");
        assert!(
            matches!(closed, Err(PopError::Closed)),
            "a closed, empty FIFO: {closed:?}"
        );
    }

    #[test]
    fn the_named_constructors_build_upstream_modes() {
        let known = RealFifo::<ConfigMap>::with_known_objects(Arc::new(Store::new()));
        known.replace(vec![cm("a")], "7").unwrap();
        assert_eq!(known.queued()[0].delta_type, DeltaType::Replaced);

        let atomic = RealFifo::<ConfigMap>::atomic();
        atomic.replace(vec![cm("a")], "7").unwrap();
        atomic.bookmark("8").unwrap();
        let types: Vec<DeltaType> = atomic.queued().iter().map(|d| d.delta_type).collect();
        assert_eq!(types, [DeltaType::ReplacedAll, DeltaType::Bookmark]);
        assert!(atomic.shell.read(|c| c.unlock), "1.36 informers unlock");
        assert_eq!(atomic.key_of(&DeltaObject::Object(cm("a"))).unwrap(), "a");
        assert!(atomic.key_of(&DeltaObject::SyncAll).is_err());
    }
}
