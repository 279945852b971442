//! The thread-safe store and indexer: the informer's local cache, which a controller reads.
//! Follows client-go `tools/cache/store.go`, `thread_safe_store.go` and `index.go`.
//!
//! ```text
//!   items:   key ──► Arc<K>                         ("default/alpha" ──► ConfigMap)
//!   indices: index name ──► index value ──► {keys}   ("namespace" ──► "default" ──► {…})
//! ```
//!
//! A [`Store`] is a cheap, cloneable handle; every clone sees the same contents. Objects are
//! stored as `Arc<K>` and handed out as clones of that `Arc`, never copied, so a reader gets
//! the very allocation the writer stored (`Arc::ptr_eq` holds). That is what lets a resync
//! replay "the same object" (the chapter on resync).
//!
//! # Invariants
//! 1. For every index name `n`, every key in `indices[n][v]` is in `items`, and `v` is among
//!    the values `indexers[n]` gives for that item; no index value maps to an empty set.
//! 2. `items` and `indices` change together, under one write lock, so a reader never sees one
//!    without the other.
//!
//! # Concurrency
//! One `parking_lot::RwLock` guards items, indices and the resource version (keeps I2). It is
//! never held across an `.await` or while calling anything but an index function.
//!
//! # Differences from upstream
//! - Index functions are infallible (`Fn(&K) -> Vec<String>`); upstream panics when one errors.
//! - `list` and `list_keys` come out in key order, not Go's random map order (§10.11 of the
//!   spec allows any order; a fixed one keeps snapshots stable).
//! - Transactions follow client-go v0.37.2 (every write applied in order) unless the store is
//!   built with [`Store::last_write_per_key`], v0.38.0-beta.0's rule. v0.38's shortcut that
//!   skips an index update when the old and new values are equal lists is the port's rule on
//!   both releases (v0.37 took it only for one value each); nothing observable differs.
//! - `last_store_sync_resource_version` is reported only when the store was built with
//!   [`Store::tracking_resource_version`] (upstream consults the `AtomicFIFO` gate inside the
//!   store; here the caller decides, from [`crate::cache::select_fifo`]).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    fmt,
    sync::Arc,
};

use parking_lot::RwLock;

use super::Object;

/// A key function could not compute a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("couldn't create key for object {object}: {reason}")]
pub struct KeyError {
    /// A short description of the object (its name, or what it was).
    pub object: String,
    /// Why no key could be made.
    pub reason: String,
}

/// Computes an object's key. The default is [`meta_namespace_key`].
pub type KeyFunc<K> = Arc<dyn Fn(&K) -> Result<String, KeyError> + Send + Sync>;

/// An index function: the index values an object files under.
pub type IndexFunc<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// `namespace/name`, or `name` for a cluster-scoped object: upstream's `MetaNamespaceKeyFunc`.
/// A missing name gives the empty name, as upstream does.
pub fn meta_namespace_key<K: kube::Resource>(obj: &K) -> String {
    let meta = obj.meta();
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => {
            // Built by hand, not with `format!`: every FIFO push, batch and indexer write
            // computes a key, and the formatting machinery costs several times the copy.
            let mut key = String::with_capacity(ns.len() + 1 + name.len());
            key.push_str(ns);
            key.push('/');
            key.push_str(name);
            key
        }
        _ => name.to_owned(),
    }
}

/// [`meta_namespace_key`] as a [`KeyFunc`].
pub fn meta_namespace_key_func<K: Object>() -> KeyFunc<K> {
    Arc::new(|obj: &K| Ok(meta_namespace_key(obj)))
}

/// The index function upstream calls `MetaNamespaceIndexFunc`: files an object under its
/// namespace.
pub fn namespace_index_func<K: Object>() -> IndexFunc<K> {
    Arc::new(|obj: &K| vec![obj.meta().namespace.clone().unwrap_or_default()])
}

/// The name upstream gives the namespace index (`cache.NamespaceIndex`).
pub const NAMESPACE_INDEX: &str = "namespace";

/// A known-objects lookup could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("known objects lookup failed for {key}: {reason}")]
pub struct LookupError {
    /// The key looked up.
    pub key: String,
    /// Why it failed.
    pub reason: String,
}

/// What the FIFOs consult about objects the informer already holds: upstream's
/// `KeyListerGetter`. [`Store`] implements it; tests may supply their own.
pub trait KeyListerGetter<K>: Send + Sync {
    /// Every key held.
    fn list_keys(&self) -> Vec<String>;
    /// The object under `key`: `Ok(None)` if absent, `Err` if the lookup itself failed.
    fn get_by_key(&self, key: &str) -> Result<Option<Arc<K>>, LookupError>;
}

/// Errors from the store's index operations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    /// `by_index` or `index_keys` named an index that was never added.
    #[error("Index with name {0} does not exist")]
    NoSuchIndex(String),
    /// `add_indexers` named an index that already exists.
    #[error("indexer conflict: {0:?}")]
    IndexerConflict(Vec<String>),
}

/// One write of [`Store::apply_batch`] (upstream's `Transaction`; its Add and Update are the
/// same write here, as [`Store::add`] is [`Store::update`]).
#[derive(Debug)]
pub enum StoreWrite<K> {
    /// [`Store::update`]: insert or replace, recording the resource version.
    Update(Arc<K>),
    /// [`Store::delete`]: remove by the object's key, recording the resource version.
    Delete(Arc<K>),
    /// [`Store::delete_by_key`]: remove a tombstone's key.
    DeleteKey(String),
}

struct Inner<K> {
    items: BTreeMap<String, Arc<K>>,
    indexers: BTreeMap<String, IndexFunc<K>>,
    /// index name → index value → keys (keeps I1).
    indices: HashMap<String, HashMap<String, BTreeSet<String>>>,
    /// The resource version of the last write, bookmark or replace.
    rv: String,
}

impl<K> Inner<K> {
    fn update_indices(&mut self, old: Option<&Arc<K>>, new: Option<&Arc<K>>, key: &str) {
        for (name, f) in &self.indexers {
            let old_vals = old.map(|o| f(o)).unwrap_or_default();
            let new_vals = new.map(|n| f(n)).unwrap_or_default();
            if old_vals == new_vals {
                continue;
            }
            let idx = self.indices.entry(name.clone()).or_default();
            for v in old_vals {
                if let Some(set) = idx.get_mut(&v) {
                    set.remove(key);
                    if set.is_empty() {
                        idx.remove(&v); // no empty sets (keeps I1)
                    }
                }
            }
            for v in new_vals {
                idx.entry(v).or_default().insert(key.to_owned());
            }
        }
    }

    /// Stores `obj` under `key`; returns the object it replaced, for the caller to drop once
    /// the lock is released.
    fn put(&mut self, key: String, obj: Arc<K>) -> Option<Arc<K>> {
        if self.indexers.is_empty() {
            // No index to update: neither the key nor the object needs a second handle.
            return self.items.insert(key, obj);
        }
        let old = self.items.insert(key.clone(), obj.clone());
        self.update_indices(old.as_ref(), Some(&obj), &key); // same lock (keeps I2)
        old
    }

    /// Removes `key`; returns the object removed, for the caller to drop once the lock is
    /// released.
    fn remove(&mut self, key: &str) -> Option<Arc<K>> {
        let old = self.items.remove(key)?;
        self.update_indices(Some(&old), None, key);
        Some(old)
    }
}

/// The thread-safe store with named indexers. Clone it to share it.
pub struct Store<K> {
    inner: Arc<RwLock<Inner<K>>>,
    key_func: KeyFunc<K>,
    track_rv: bool,
    /// client-go v0.38's transactions: only the last write of a key is applied.
    last_write_per_key: bool,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Store {
            inner: self.inner.clone(),
            key_func: self.key_func.clone(),
            track_rv: self.track_rv,
            last_write_per_key: self.last_write_per_key,
        }
    }
}

impl<K: Object> Default for Store<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K> fmt::Debug for Store<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.inner.read();
        f.debug_struct("Store")
            .field("keys", &inner.items.keys().collect::<Vec<_>>())
            .field("indexers", &inner.indexers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl<K: Object> Store<K> {
    /// An empty store keyed by [`meta_namespace_key`], with no indexers.
    pub fn new() -> Self {
        Self::with_key_func(meta_namespace_key_func())
    }

    /// An empty store with the named `indexers` (upstream `NewIndexer`).
    pub fn with_indexers(indexers: impl IntoIterator<Item = (String, IndexFunc<K>)>) -> Self {
        let s = Self::new();
        s.inner.write().indexers = indexers.into_iter().collect();
        s
    }

    /// An empty store keyed by `key_func`.
    pub fn with_key_func(key_func: KeyFunc<K>) -> Self {
        Store {
            inner: Arc::new(RwLock::new(Inner {
                items: BTreeMap::new(),
                indexers: BTreeMap::new(),
                indices: HashMap::new(),
                rv: String::new(),
            })),
            key_func,
            track_rv: false,
            last_write_per_key: false,
        }
    }

    /// This store, reporting [`Store::last_store_sync_resource_version`] (upstream does so
    /// only when `AtomicFIFO` is on; see [`crate::cache::FifoChoice::store_tracks_resource_version`]).
    pub fn tracking_resource_version(mut self, on: bool) -> Self {
        self.track_rv = on;
        self
    }

    /// This store, applying in [`Store::apply_batch`] only the last write of a key that occurs
    /// more than once, as client-go v0.38's `Transaction` does (the informer sets it from
    /// [`crate::cache::FifoChoice::batches_repeat_keys`]). Off by default: v0.37.2 applies
    /// every write in order. The contents afterwards are the same; the index functions are
    /// called only for the writes applied.
    pub fn last_write_per_key(mut self, on: bool) -> Self {
        self.last_write_per_key = on;
        self
    }

    /// The key `obj` is stored under.
    pub fn key_of(&self, obj: &K) -> Result<String, KeyError> {
        (self.key_func)(obj)
    }

    fn note_rv(inner: &mut Inner<K>, obj: &K) {
        // Reuses the buffer the previous version was in.
        copy_resource_version(&mut inner.rv, obj);
    }

    /// Inserts or replaces `obj` (upstream `Add` is `Update`).
    pub fn add(&self, obj: Arc<K>) -> Result<(), KeyError> {
        self.update(obj)
    }

    /// Inserts or replaces `obj`, and records its resource version.
    pub fn update(&self, obj: Arc<K>) -> Result<(), KeyError> {
        let key = self.key_of(&obj)?;
        let mut inner = self.inner.write();
        Self::note_rv(&mut inner, &obj);
        let old = inner.put(key, obj);
        drop(inner);
        drop(old); // the replaced object is freed outside the lock
        Ok(())
    }

    /// Removes the object with `obj`'s key (a no-op if absent), and records its resource
    /// version.
    pub fn delete(&self, obj: &K) -> Result<(), KeyError> {
        let key = self.key_of(obj)?;
        let mut inner = self.inner.write();
        Self::note_rv(&mut inner, obj);
        let old = inner.remove(&key);
        drop(inner);
        drop(old); // freed outside the lock
        Ok(())
    }

    /// Removes `key` (a no-op if absent). Use it for a tombstone, which has a key and maybe no
    /// object.
    pub fn delete_by_key(&self, key: &str) {
        let old = self.inner.write().remove(key);
        drop(old); // freed outside the lock
    }

    /// The stored object with `obj`'s key.
    pub fn get(&self, obj: &K) -> Result<Option<Arc<K>>, KeyError> {
        let key = self.key_of(obj)?;
        Ok(self.get_by_key(&key))
    }

    /// The stored object under `key`: the very `Arc` stored.
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.inner.read().items.get(key).cloned()
    }

    /// Every stored object, in key order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.inner.read().items.values().cloned().collect()
    }

    /// Every key, in order.
    pub fn list_keys(&self) -> Vec<String> {
        self.inner.read().items.keys().cloned().collect()
    }

    /// How many objects are stored.
    pub fn len(&self) -> usize {
        self.inner.read().items.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Swaps the whole contents for `list` at once, rebuilds every index, and records `rv`.
    pub fn replace(&self, list: Vec<Arc<K>>, rv: &str) -> Result<(), KeyError> {
        let keyed = list
            .into_iter()
            .map(|o| Ok((self.key_of(&o)?, o)))
            .collect::<Result<Vec<_>, KeyError>>()?; // all keys first: bad input loses nothing
        let mut inner = self.inner.write();
        inner.items.clear();
        inner.indices.clear();
        for (k, o) in keyed {
            inner.put(k, o);
        }
        inner.rv = rv.to_owned();
        Ok(())
    }

    /// Applies several writes under **one** write lock, in order (upstream's
    /// `TransactionStore.Transaction`, which the informer's batch processing uses): a reader
    /// sees either none of the batch or all of it. Every key is computed before the lock is
    /// taken; a write whose key fails is skipped and the others still apply. With
    /// [`Store::last_write_per_key`] (client-go v0.38) an earlier write of a key the batch
    /// writes again is skipped too (and reported `Ok`). The result has
    /// one entry per write, in order: upstream's `SuccessfulIndices` are the `Ok` ones.
    pub fn apply_batch(&self, writes: Vec<StoreWrite<K>>) -> Vec<Result<(), KeyError>> {
        let keyed: Vec<_> = writes
            .into_iter()
            .map(|w| match w {
                StoreWrite::Update(o) => self.key_of(&o).map(|k| (k, Some(o), true)),
                StoreWrite::Delete(o) => self.key_of(&o).map(|k| (k, Some(o), false)),
                StoreWrite::DeleteKey(k) => Ok((k, None, false)),
            })
            .collect();
        // v0.38: the index of each key's last write; an earlier write of it is skipped.
        let last: HashMap<&str, usize> = match self.last_write_per_key {
            true => keyed
                .iter()
                .enumerate()
                .filter_map(|(i, w)| Some((w.as_ref().ok()?.0.as_str(), i)))
                .collect(),
            false => HashMap::new(),
        };
        let superseded: Vec<bool> = keyed
            .iter()
            .enumerate()
            .map(|(i, w)| {
                w.as_ref()
                    .is_ok_and(|w| last.get(w.0.as_str()).is_some_and(|l| *l != i))
            })
            .collect();
        drop(last);
        let mut replaced = Vec::with_capacity(keyed.len());
        let mut inner = self.inner.write();
        let results = keyed
            .into_iter()
            .zip(superseded)
            .map(|(w, superseded)| {
                let (key, obj, upsert) = w?;
                if superseded {
                    return Ok(()); // a later write of this key in the batch stands for it
                }
                if let Some(o) = &obj {
                    Self::note_rv(&mut inner, o);
                }
                replaced.push(match (obj, upsert) {
                    (Some(o), true) => inner.put(key, o),
                    _ => inner.remove(&key),
                });
                Ok(())
            })
            .collect();
        drop(inner);
        drop(replaced); // the replaced objects are freed outside the lock
        results
    }

    /// One write, as [`Store::update`], [`Store::delete`] or [`Store::delete_by_key`].
    pub fn apply(&self, write: StoreWrite<K>) -> Result<(), KeyError> {
        match write {
            StoreWrite::Update(o) => self.update(o),
            StoreWrite::Delete(o) => self.delete(&o),
            StoreWrite::DeleteKey(k) => {
                self.delete_by_key(&k);
                Ok(())
            }
        }
    }

    /// Upstream's `Resync` on a plain store does nothing.
    pub fn resync(&self) {}

    /// Records a bookmark's resource version.
    pub fn bookmark(&self, rv: &str) {
        self.inner.write().rv = rv.to_owned();
    }

    /// The resource version of the last write, replace or bookmark; `""` unless this store
    /// tracks resource versions.
    pub fn last_store_sync_resource_version(&self) -> String {
        if !self.track_rv {
            return String::new();
        }
        self.inner.read().rv.clone()
    }

    /// The objects filed under `value` in the index `index_name`, in key order.
    pub fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, IndexError> {
        let inner = self.inner.read();
        if !inner.indexers.contains_key(index_name) {
            return Err(IndexError::NoSuchIndex(index_name.to_owned()));
        }
        Ok(inner
            .indices
            .get(index_name)
            .and_then(|idx| idx.get(value))
            .map(|keys| keys.iter().map(|k| inner.items[k].clone()).collect())
            .unwrap_or_default())
    }

    /// The keys filed under `value` in the index `index_name`, in order.
    pub fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<String>, IndexError> {
        let inner = self.inner.read();
        if !inner.indexers.contains_key(index_name) {
            return Err(IndexError::NoSuchIndex(index_name.to_owned()));
        }
        Ok(inner
            .indices
            .get(index_name)
            .and_then(|idx| idx.get(value))
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default())
    }

    /// Every value the index `index_name` currently holds, sorted.
    pub fn list_index_func_values(&self, index_name: &str) -> Vec<String> {
        let inner = self.inner.read();
        let mut v: Vec<String> = inner
            .indices
            .get(index_name)
            .map(|idx| idx.keys().cloned().collect())
            .unwrap_or_default();
        v.sort();
        v
    }

    /// Adds indexers, indexing every object already stored. A name already in use is an error
    /// and nothing is added.
    pub fn add_indexers(
        &self,
        indexers: impl IntoIterator<Item = (String, IndexFunc<K>)>,
    ) -> Result<(), IndexError> {
        let new: Vec<(String, IndexFunc<K>)> = indexers.into_iter().collect();
        let mut inner = self.inner.write();
        let clash: Vec<String> = new
            .iter()
            .filter(|(n, _)| inner.indexers.contains_key(n))
            .map(|(n, _)| n.clone())
            .collect();
        if !clash.is_empty() {
            return Err(IndexError::IndexerConflict(clash));
        }
        for (name, f) in new {
            let mut idx: HashMap<String, BTreeSet<String>> = HashMap::new();
            for (k, o) in &inner.items {
                for v in f(o) {
                    idx.entry(v).or_default().insert(k.clone());
                }
            }
            inner.indices.insert(name.clone(), idx);
            inner.indexers.insert(name, f);
        }
        Ok(())
    }
}

impl<K: Object> KeyListerGetter<K> for Store<K> {
    fn list_keys(&self) -> Vec<String> {
        Store::list_keys(self)
    }
    fn get_by_key(&self, key: &str) -> Result<Option<Arc<K>>, LookupError> {
        Ok(Store::get_by_key(self, key))
    }
}

/// An object's resourceVersion (empty when unset).
pub(crate) fn resource_version<K: kube::Resource>(obj: &K) -> String {
    obj.meta().resource_version.clone().unwrap_or_default()
}

/// [`resource_version`] into `buf`, reusing its allocation.
pub(crate) fn copy_resource_version<K: kube::Resource>(buf: &mut String, obj: &K) {
    match &obj.meta().resource_version {
        Some(rv) => buf.clone_from(rv),
        None => buf.clear(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    fn cm(ns: &str, name: &str, team: &str) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: (!ns.is_empty()).then(|| ns.into()),
                labels: Some([("team".to_owned(), team.to_owned())].into()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn team_index() -> (String, IndexFunc<ConfigMap>) {
        let f: IndexFunc<ConfigMap> = Arc::new(|o: &ConfigMap| {
            o.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("team").cloned())
                .into_iter()
                .collect()
        });
        ("team".to_owned(), f)
    }

    #[test]
    fn keys_are_namespace_slash_name_and_cluster_scoped_objects_have_just_the_name() {
        assert_eq!(meta_namespace_key(&*cm("default", "a", "x")), "default/a");
        assert_eq!(meta_namespace_key(&*cm("", "node-1", "x")), "node-1");
    }

    #[test]
    fn get_by_key_hands_out_the_very_arc_that_was_stored() {
        let s = Store::new();
        let a = cm("default", "a", "x");
        s.add(a.clone()).unwrap();
        assert!(Arc::ptr_eq(&a, &s.get_by_key("default/a").unwrap()));
    }

    #[test]
    fn an_index_follows_updates_and_deletes_and_keeps_no_empty_values() {
        let s = Store::with_indexers([team_index()]);
        s.add(cm("default", "a", "red")).unwrap();
        s.add(cm("default", "b", "red")).unwrap();
        assert_eq!(
            s.index_keys("team", "red").unwrap(),
            ["default/a", "default/b"]
        );
        s.update(cm("default", "a", "blue")).unwrap();
        assert_eq!(s.index_keys("team", "red").unwrap(), ["default/b"]);
        s.delete(&cm("default", "b", "red")).unwrap();
        assert_eq!(s.list_index_func_values("team"), ["blue"]); // keeps I1
        assert_eq!(s.by_index("team", "blue").unwrap().len(), 1);
        assert_eq!(
            s.by_index("nope", "x").unwrap_err().to_string(),
            "Index with name nope does not exist"
        );
    }

    #[test]
    fn replace_swaps_everything_and_rebuilds_indices() {
        let s = Store::with_indexers([team_index()]).tracking_resource_version(true);
        s.add(cm("default", "a", "red")).unwrap();
        s.replace(vec![cm("other", "z", "green")], "42").unwrap();
        assert_eq!(s.list_keys(), ["other/z"]);
        assert!(s.index_keys("team", "red").unwrap().is_empty());
        assert_eq!(s.index_keys("team", "green").unwrap(), ["other/z"]);
        assert_eq!(s.last_store_sync_resource_version(), "42");
        s.bookmark("43");
        assert_eq!(s.last_store_sync_resource_version(), "43");
    }

    #[test]
    fn added_indexers_index_existing_objects_and_a_clash_adds_nothing() {
        let s = Store::new();
        s.add(cm("ns1", "a", "red")).unwrap();
        s.add_indexers([(NAMESPACE_INDEX.to_owned(), namespace_index_func())])
            .unwrap();
        assert_eq!(s.index_keys(NAMESPACE_INDEX, "ns1").unwrap(), ["ns1/a"]);
        let err = s
            .add_indexers([
                team_index(),
                (NAMESPACE_INDEX.to_owned(), namespace_index_func()),
            ])
            .unwrap_err();
        assert_eq!(err, IndexError::IndexerConflict(vec!["namespace".into()]));
        assert!(s.index_keys("team", "red").is_err(), "nothing was added");
    }

    #[test]
    fn apply_batch_writes_in_order_and_reports_each_write() {
        let s = Store::with_indexers([team_index()]).tracking_resource_version(true);
        s.add(cm("ns", "gone", "red")).unwrap();
        let mut a = (*cm("ns", "a", "blue")).clone();
        a.metadata.resource_version = Some("7".into());
        let results = s.apply_batch(vec![
            StoreWrite::Update(cm("ns", "b", "red")),
            StoreWrite::DeleteKey("ns/gone".into()),
            StoreWrite::Update(Arc::new(a)),
        ]);
        assert_eq!(results, [Ok(()), Ok(()), Ok(())]);
        assert_eq!(s.list_keys(), ["ns/a", "ns/b"]);
        assert_eq!(s.index_keys("team", "red").unwrap(), ["ns/b"]);
        assert_eq!(
            s.last_store_sync_resource_version(),
            "7",
            "the last write's rv"
        );
    }

    #[test]
    fn the_resource_version_is_hidden_unless_tracked() {
        let s = Store::<ConfigMap>::new();
        s.bookmark("7");
        assert_eq!(s.last_store_sync_resource_version(), "");
    }
}
