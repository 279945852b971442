//! DeltaFIFO: the legacy informer queue, which groups deltas per key. Follows client-go
//! `tools/cache/delta_fifo.go` at v0.37.2 (unchanged since v0.36).
//!
//! ```text
//!   queue: [ "default/alpha", "default/beta" ]          keys, first-arrival order
//!   items: alpha ──► [Added a1, Updated a2, Updated a3]  all deltas of one key, oldest first
//!          beta  ──► [Added b1, Updated b2]
//!   Pop ──► the head key's whole list
//! ```
//!
//! Nothing is discarded except one thing: a second consecutive `Deleted` for the same key
//! (I3). What is lost is the *interleaving across keys*: a key keeps the place it took when it
//! first arrived, so a later delta for it jumps ahead of earlier deltas for other keys.
//!
//! # Invariants
//! 1. A key is in `queue` exactly when it is in `items`, and at most once.
//! 2. Every list in `items` is non-empty.
//! 3. Of the last two deltas of a key, at most one is `Deleted` (the dedup rule: the older is
//!    kept, unless it is a tombstone).
//! 4. Once synced, always synced; synced means `populated && initial_population_count == 0`.
//!
//! # Concurrency
//! One mutex guards the core (see [`crate::cache::fifo`]). `process` runs under it, so a
//! producer waits while the informer handles a Pop, as upstream.
//!
//! # Differences from upstream
//! - No transformer, no trace logging of slow Pops.
//! - Replace queues deletions for queued keys in queue order (upstream: Go map order, which is
//!   unspecified) and for known keys in `list_keys` order.
//! - [`DeltaFifo::len`] returns the number of queued keys (what `len(ListKeys())` gave before
//!   v0.33 removed `ListKeys`, and the `Depth` in upstream's slow-Pop trace).

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::Arc,
};

use parking_lot::MutexGuard;

use super::fifo::{
    Fifo, FifoError, PopError, Shell, key_of_object,
    sealed::{FifoShell, PopCore, Queued},
    tombstone,
};
use super::{
    Delta, DeltaObject, DeltaType, Deltas, KeyError, KeyFunc, KeyListerGetter, Object,
    meta_namespace_key_func,
};

/// Upstream's `ErrZeroLengthDeltasObject` message.
pub const ERR_ZERO_LENGTH_DELTAS: &str = "0 length Deltas object; can't get key";

/// How to build a [`DeltaFifo`] (upstream `DeltaFIFOOptions`).
pub struct DeltaFifoOptions<K> {
    /// For logs; default `"DeltaFIFO"`.
    pub name: String,
    /// Default [`crate::cache::meta_namespace_key`].
    pub key_function: Option<KeyFunc<K>>,
    /// The informer's indexer, consulted by Delete, Replace and Resync.
    pub known_objects: Option<Arc<dyn KeyListerGetter<K>>>,
    /// Emit `Replaced` (not `Sync`) for relist items. The informer sets it.
    pub emit_delta_type_replaced: bool,
}

impl<K> Default for DeltaFifoOptions<K> {
    fn default() -> Self {
        DeltaFifoOptions {
            name: "DeltaFIFO".to_owned(),
            key_function: None,
            known_objects: None,
            emit_delta_type_replaced: false,
        }
    }
}

pub struct Core<K> {
    items: HashMap<String, Vec<Delta<K>>>,
    queue: VecDeque<String>,
    populated: bool,
    initial_population_count: usize,
    synced: bool,
    closed: bool,
    key_fn: KeyFunc<K>,
    known: Option<Arc<dyn KeyListerGetter<K>>>,
    emit_replaced: bool,
    /// False only in the deliberately broken variant ([`DeltaFifo::without_relist_deletions`]).
    relist_deletions: bool,
}

/// Of the last two deltas, drop one if both are deletions (keeps I3).
fn dedup_deltas<K>(deltas: &mut Vec<Delta<K>>) {
    let n = deltas.len();
    if n < 2 {
        return;
    }
    let (older, newer) = (&deltas[n - 2], &deltas[n - 1]);
    if older.delta_type != DeltaType::Deleted || newer.delta_type != DeltaType::Deleted {
        return;
    }
    if older.object.tombstone().is_some() {
        deltas.swap_remove(n - 2); // keep the newer: the tombstone knew less
    } else {
        deltas.pop(); // keep the older: it has more information
    }
}

impl<K: Object> Core<K> {
    fn check_synced(&mut self) {
        if self.populated && self.initial_population_count == 0 {
            self.synced = true; // keeps I4: never reset
        }
    }

    fn queue_action(&mut self, delta_type: DeltaType, obj: DeltaObject<K>) -> Result<(), KeyError> {
        let id = key_of_object(&self.key_fn, &obj)?;
        let list = self.items.entry(id.clone()).or_default();
        let was_new = list.is_empty();
        list.push(Delta {
            delta_type,
            object: obj,
        });
        dedup_deltas(list);
        if was_new {
            self.queue.push_back(id); // an existing key keeps its place (keeps I1)
        }
        Ok(())
    }

    fn producer(&mut self, delta_type: DeltaType, obj: Arc<K>) -> Result<(), FifoError> {
        self.populated = true;
        self.check_synced();
        Ok(self.queue_action(delta_type, DeltaObject::Object(obj))?)
    }

    fn delete(&mut self, obj: Arc<K>) -> Result<(), FifoError> {
        let id = (self.key_fn)(&obj)?;
        self.populated = true;
        self.check_synced();
        let queued = self.items.contains_key(&id);
        let unknown = match &self.known {
            None => true,
            // A lookup error does not suppress the delete.
            Some(known) => matches!(known.get_by_key(&id), Ok(None)),
        };
        if unknown && !queued {
            // The ghost: never known, not queued. Presumably deleted by a relist already.
            return Ok(());
        }
        Ok(self.queue_action(DeltaType::Deleted, DeltaObject::Object(obj))?)
    }

    fn replace(&mut self, list: Vec<Arc<K>>) -> Result<(), FifoError> {
        let action = if self.emit_replaced {
            DeltaType::Replaced
        } else {
            DeltaType::Sync
        };
        let mut keys = HashSet::with_capacity(list.len());
        for item in list {
            keys.insert((self.key_fn)(&item)?);
            self.queue_action(action, DeltaObject::Object(item))?;
        }
        let queued_deletions = if self.relist_deletions {
            self.queue_relist_deletions(&keys)?
        } else {
            0
        };
        if !self.populated {
            self.populated = true;
            self.initial_population_count = keys.len() + queued_deletions;
            self.check_synced();
        }
        Ok(())
    }

    /// Replace's tombstones: for queued keys, then for known keys, missing from the relist's
    /// `keys`. Returns how many it queued.
    fn queue_relist_deletions(&mut self, keys: &HashSet<String>) -> Result<usize, FifoError> {
        let mut queued_deletions = 0;
        // Queued keys missing from the list: a tombstone with the newest queued object.
        let missing: Vec<String> = self
            .queue
            .iter()
            .filter(|k| !keys.contains(*k))
            .cloned()
            .collect();
        for k in missing {
            let newest = self.items[&k]
                .last()
                .and_then(|d| d.object.unwrapped_object());
            queued_deletions += 1;
            self.queue_action(DeltaType::Deleted, tombstone(k, newest))?;
        }
        // Known keys missing from the list and not queued.
        if let Some(known) = self.known.clone() {
            for k in known.list_keys() {
                if keys.contains(&k) || self.items.get(&k).is_some_and(|d| !d.is_empty()) {
                    continue;
                }
                let obj = match known.get_by_key(&k) {
                    Ok(Some(o)) => Some(o),
                    Ok(None) => {
                        tracing::info!(key = %k, "Key does not exist in known objects store, placing DeleteFinalStateUnknown marker without object");
                        None
                    }
                    Err(e) => {
                        tracing::error!(key = %k, error = %e, "Unexpected error during lookup, placing DeleteFinalStateUnknown marker without object");
                        None
                    }
                };
                queued_deletions += 1;
                self.queue_action(DeltaType::Deleted, tombstone(k, obj))?;
            }
        }
        Ok(queued_deletions)
    }

    fn resync(&mut self) -> Result<(), FifoError> {
        let Some(known) = self.known.clone() else {
            return Ok(());
        };
        for k in known.list_keys() {
            let obj = match known.get_by_key(&k) {
                Ok(Some(o)) => o,
                Ok(None) => {
                    tracing::info!(key = %k, "Key does not exist in known objects store, unable to queue object for sync");
                    continue;
                }
                Err(e) => {
                    tracing::error!(key = %k, error = %e, "Unexpected error during lookup, unable to queue object for sync");
                    continue;
                }
            };
            let id = (self.key_fn)(&obj)?;
            if self.items.get(&id).is_some_and(|d| !d.is_empty()) {
                continue; // a pending event is newer than the cache
            }
            // The very Arc the indexer holds: the informer later sees old == new.
            self.queue_action(DeltaType::Sync, DeltaObject::Object(obj))?;
        }
        Ok(())
    }

    /// Takes the head key's deltas. The initial count drops *before* processing, as upstream.
    fn take_next(&mut self) -> Option<(Deltas<K>, bool)> {
        while let Some(id) = self.queue.pop_front() {
            let is_in_initial_list = !self.synced;
            if self.initial_population_count > 0 {
                self.initial_population_count -= 1;
                self.check_synced();
            }
            match self.items.remove(&id) {
                Some(d) => return Some((Deltas(d), is_in_initial_list)),
                None => {
                    tracing::error!(id = %id, "Inconceivable! Item was in f.queue but not f.items; ignoring")
                }
            }
        }
        None
    }
}

/// The legacy per-key informer FIFO. Clone it to share it between producer and consumer.
pub struct DeltaFifo<K> {
    shell: Arc<Shell<Core<K>>>,
    name: Arc<str>,
}

impl<K> Clone for DeltaFifo<K> {
    fn clone(&self) -> Self {
        DeltaFifo {
            shell: self.shell.clone(),
            name: self.name.clone(),
        }
    }
}

impl<K: Object> DeltaFifo<K> {
    /// A DeltaFIFO built from `opts`.
    pub fn new(opts: DeltaFifoOptions<K>) -> Self {
        DeltaFifo {
            shell: Arc::new(Shell::new(Core {
                items: HashMap::new(),
                queue: VecDeque::new(),
                populated: false,
                initial_population_count: 0,
                synced: false,
                closed: false,
                key_fn: opts.key_function.unwrap_or_else(meta_namespace_key_func),
                known: opts.known_objects,
                emit_replaced: opts.emit_delta_type_replaced,
                relist_deletions: true,
            })),
            name: opts.name.into(),
        }
    }

    /// **Deliberately broken**: a DeltaFIFO whose Replace queues the relisted items and no
    /// tombstone at all, neither for queued keys nor for known keys missing from the list. An
    /// object deleted while the watch was down then stays in the informer's cache for ever. It
    /// exists so that the model checks (`tests/fifo_model.rs`) can show their detectors firing.
    pub fn without_relist_deletions(opts: DeltaFifoOptions<K>) -> Self {
        let fifo = Self::new(opts);
        fifo.shell.with(|c| c.relist_deletions = false);
        fifo
    }

    /// The key of a delta's object: a tombstone's key, or the key function's.
    pub fn key_of(&self, obj: &DeltaObject<K>) -> Result<String, KeyError> {
        self.shell.read(|c| key_of_object(&c.key_fn, obj))
    }

    /// The key of a delta list: its newest delta's. An empty list is an error.
    pub fn key_of_deltas(&self, deltas: &Deltas<K>) -> Result<String, KeyError> {
        match deltas.newest() {
            Some(d) => self.key_of(&d.object),
            None => Err(KeyError {
                object: "Deltas[]".into(),
                reason: ERR_ZERO_LENGTH_DELTAS.into(),
            }),
        }
    }

    /// The queued keys in Pop order (upstream's test helper `listKeys`).
    pub fn queued_keys(&self) -> Vec<String> {
        self.shell.read(|c| c.queue.iter().cloned().collect())
    }
}

impl<K: Object> Fifo<K> for DeltaFifo<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.shell.with(|c| c.producer(DeltaType::Added, obj))
    }

    fn update(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.shell.with(|c| c.producer(DeltaType::Updated, obj))
    }

    /// Queues `Deleted`, unless the object is in neither the queue nor known objects (with no
    /// known objects: not in the queue). Then nothing is queued and `Ok` is returned.
    fn delete(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.shell.with(|c| c.delete(obj))
    }

    /// Queues `Replaced` (or `Sync`) for each item, then tombstones for queued keys and for
    /// known keys missing from the list. `resource_version` is ignored, as upstream.
    fn replace(&self, list: Vec<Arc<K>>, _resource_version: &str) -> Result<(), FifoError> {
        self.shell.with(|c| c.replace(list))
    }

    /// Queues `Sync` with the known-objects `Arc` for every known key that has nothing queued.
    fn resync(&self) -> Result<(), FifoError> {
        self.shell.with(|c| c.resync())
    }

    /// The number of queued keys.
    fn len(&self) -> usize {
        self.shell.read(|c| c.queue.len())
    }
}

impl<K> Queued for DeltaFifo<K> {
    type Item = K;
}

impl<K: Object> FifoShell<K> for DeltaFifo<K> {
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
        if let Some((deltas, initial)) = core.take_next() {
            let process = process.take().expect("a Pop processes at most one item");
            // Under the FIFO lock, as upstream: producers wait for the handler.
            return Some(match process(&deltas, initial) {
                Ok(()) => Ok(deltas),
                Err(e) => Err(PopError::Process(e)),
            });
        }
        core.closed.then_some(Err(PopError::Closed))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;
    use crate::cache::Delta;

    fn cm(name: &str) -> Arc<ConfigMap> {
        let mut c = ConfigMap::default();
        c.metadata.name = Some(name.into());
        c.metadata.namespace = Some("ns".into());
        Arc::new(c)
    }

    /// Upstream's `KeyOf`: a tombstone's own key, an object's through the key function, a
    /// delta list's from its newest delta, and an error for an empty list.
    #[test]
    fn key_of_reads_tombstones_and_the_newest_delta() {
        let fifo = DeltaFifo::<ConfigMap>::new(DeltaFifoOptions::default());
        assert_eq!(fifo.key_of(&DeltaObject::Object(cm("a"))).unwrap(), "ns/a");
        assert_eq!(
            fifo.key_of(&tombstone("gone".into(), None)).unwrap(),
            "gone"
        );
        let deltas = Deltas(vec![
            Delta::new(DeltaType::Added, cm("a")),
            Delta::tombstone("ns/b", None),
        ]);
        assert_eq!(fifo.key_of_deltas(&deltas).unwrap(), "ns/b");
        let err = fifo.key_of_deltas(&Deltas::default()).unwrap_err();
        assert_eq!(err.reason, ERR_ZERO_LENGTH_DELTAS);
    }
}
