//! **Deliberately wrong** informers, for showing a detector firing: never use one for work.
//!
//! No upstream file. The book's method and resync chapters check the informer's promises (the
//! cache is written before a handler hears of the write; a resync hands handlers the very
//! object the cache holds; a resync never talks to the server) and show each check failing on
//! an informer that breaks it. Each variant here plugs into the informer's one seam (the points
//! upstream's `Config` leaves open: how a change is processed, and the queue the reflector
//! writes into), so the faithful informer never branches on them.
//!
//! ```
//! use controlloop::cache::{InformerOptions, ScriptedListerWatcher, broken::{self, Variant}};
//! use k8s_openapi::api::core::v1::ConfigMap;
//!
//! let lw = ScriptedListerWatcher::<ConfigMap>::new();
//! let options = InformerOptions::new(std::time::Duration::ZERO);
//! let informer = broken::informer(lw, options, Variant::HandlersBeforeCache);
//! assert!(!informer.has_synced()); // built, not yet run
//! ```

use std::sync::Arc;

use super::{
    InformerFifo, InformerOptions, ListerWatcher, Object, ReflectorStore, ReflectorStoreError,
    SharedIndexInformer, Store, StoreWrite,
    shared_informer::{Faithful, Notification, Seam, SharedProcessor},
};

/// Which informer [`informer`] builds. Every variant but [`Variant::Faithful`] is
/// **deliberately wrong**.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum Variant {
    /// The port of upstream ([`SharedIndexInformer::new`]).
    #[default]
    Faithful,
    /// Calls handlers synchronously *before* writing the indexer: a handler that reads the
    /// cache sees the state before the change it was told about.
    HandlersBeforeCache,
    /// Hands a resync's handlers a deep copy as `new`, not the object the cache holds.
    DeepCopyOnResync,
    /// Relists from the server instead of replaying the cache at a resync: its FIFO refuses
    /// every resync, and a refused resync ends the reflector's watch, so it relists after its
    /// backoff.
    RelistOnResync,
}

/// An informer over `lw`: the faithful one, or the broken `variant`.
pub fn informer<K, L>(
    lw: L,
    options: InformerOptions,
    variant: Variant,
) -> SharedIndexInformer<K, L>
where
    K: Object + Clone,
    L: ListerWatcher<K>,
{
    let seam: Arc<dyn Seam<K>> = match variant {
        Variant::Faithful => Arc::new(Faithful),
        Variant::HandlersBeforeCache => Arc::new(HandlersBeforeCache),
        Variant::DeepCopyOnResync => Arc::new(DeepCopyOnResync),
        Variant::RelistOnResync => Arc::new(RelistOnResync),
    };
    SharedIndexInformer::with_seam(lw, options, seam)
}

/// Calls every handler at once, on this thread, bypassing the listeners' buffers.
fn deliver_now<K: Object>(processor: &SharedProcessor<K>, n: Notification<K>) {
    for h in processor.handlers() {
        match n.clone() {
            Notification::Add { obj, initial } => h.on_add(obj, initial),
            Notification::Update { old, new } => h.on_update(old, new),
            Notification::Delete(d) => h.on_delete(d),
        }
    }
}

/// [`Variant::HandlersBeforeCache`].
struct HandlersBeforeCache;

impl<K: Object + Clone> Seam<K> for HandlersBeforeCache {
    fn write_then_notify(
        &self,
        indexer: &Store<K>,
        processor: &SharedProcessor<K>,
        write: StoreWrite<K>,
        n: Notification<K>,
    ) -> Result<(), super::KeyError> {
        deliver_now(processor, n); // the mistake: the handlers first
        indexer.apply(write)
    }

    fn write_batch_then_notify(
        &self,
        indexer: &Store<K>,
        processor: &SharedProcessor<K>,
        writes: Vec<StoreWrite<K>>,
        notes: Vec<Notification<K>>,
    ) -> Result<(), super::KeyError> {
        for n in notes {
            deliver_now(processor, n); // the mistake: the handlers first
        }
        indexer
            .apply_batch(writes)
            .into_iter()
            .find_map(Result::err)
            .map_or(Ok(()), Err)
    }
}

/// [`Variant::DeepCopyOnResync`].
struct DeepCopyOnResync;

impl<K: Object + Clone> Seam<K> for DeepCopyOnResync {
    fn notify(&self, processor: &SharedProcessor<K>, n: Notification<K>) {
        let n = match n {
            Notification::Update { old, new } if Arc::ptr_eq(&old, &new) => Notification::Update {
                new: Arc::new((*new).clone()), // the mistake: a copy, not the cached object
                old,
            },
            n => n,
        };
        Faithful.notify(processor, n);
    }
}

/// [`Variant::RelistOnResync`].
struct RelistOnResync;

impl<K: Object + Clone> Seam<K> for RelistOnResync {
    fn reflector_store(&self, fifo: InformerFifo<K>) -> Box<dyn ReflectorStore<K>> {
        Box::new(RefusesResync(fifo))
    }
}

/// A FIFO that refuses every resync.
struct RefusesResync<K>(InformerFifo<K>);

impl<K: Object> ReflectorStore<K> for RefusesResync<K> {
    fn add(&self, obj: K) -> Result<(), ReflectorStoreError> {
        self.0.add(Arc::new(obj)).map_err(Into::into)
    }
    fn update(&self, obj: K) -> Result<(), ReflectorStoreError> {
        self.0.update(Arc::new(obj)).map_err(Into::into)
    }
    fn delete(&self, obj: K) -> Result<(), ReflectorStoreError> {
        self.0.delete(Arc::new(obj)).map_err(Into::into)
    }
    fn replace(&self, list: Vec<K>, resource_version: String) -> Result<(), ReflectorStoreError> {
        let list = list.into_iter().map(Arc::new).collect();
        self.0.replace(list, &resource_version).map_err(Into::into)
    }
    fn resync(&self) -> Result<(), ReflectorStoreError> {
        // the mistake: no replay of the cache; the reflector relists instead
        Err(ReflectorStoreError::Refused("a resync relists".into()))
    }
    fn bookmark(&self, resource_version: &str) {
        ReflectorStore::bookmark(&self.0, resource_version);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::cache::{
        HandlerFuncs, ListPage, ScriptedListerWatcher,
        reflector::tests::cm,
        shared_informer::tests::{options, recorder, run_for},
    };

    #[tokio::test(start_paused = true)]
    async fn the_broken_variants_break_what_they_claim_to() {
        // DeepCopyOnResync: the resync's old and new are no longer one Arc.
        let lw = ScriptedListerWatcher::new().without_watch_list();
        lw.push_list(Ok(ListPage::new("10", vec![cm("a", "5")])));
        let o = options(36, Duration::from_secs(60));
        let deep_copy = informer(lw.clone(), o, Variant::DeepCopyOnResync);
        let (h, log) = recorder();
        deep_copy.add_event_handler(h).unwrap();
        run_for(&deep_copy, Duration::from_secs(61)).await;
        assert_eq!(*log.lock(), ["add a initial=true", "update a"]);

        // RelistOnResync: each resync lists again (after the reflector's backoff).
        let lw = ScriptedListerWatcher::new().without_watch_list();
        lw.on_list(|_| Ok(ListPage::new("10", vec![cm("a", "5")])));
        let o = options(36, Duration::from_secs(60));
        let relisting = informer(lw.clone(), o, Variant::RelistOnResync);
        relisting.add_event_handler(HandlerFuncs::new()).unwrap();
        // The first list at 0 s; every resync tick (60 s after each list) is refused, and the
        // reflector relists after its backoff (about a second): lists at 0, ~61 and ~122 s.
        run_for(&relisting, Duration::from_secs(150)).await;
        assert_eq!(lw.list_calls().len(), 3);
        // The faithful informer never lists again on a resync.
        let lw = ScriptedListerWatcher::new().without_watch_list();
        lw.on_list(|_| Ok(ListPage::new("10", vec![cm("a", "5")])));
        let faithful = informer(
            lw.clone(),
            options(36, Duration::from_secs(60)),
            Variant::Faithful,
        );
        faithful.add_event_handler(HandlerFuncs::new()).unwrap();
        run_for(&faithful, Duration::from_secs(150)).await;
        assert_eq!(lw.list_calls().len(), 1);
    }
}
