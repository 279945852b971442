//! A [`ReflectorStore`] that records every call and keeps the objects in a map: what the
//! reflector's tests read to see exactly what a reflector did to its store.

use std::{collections::BTreeMap, sync::Arc};

use parking_lot::Mutex;

use super::{ReflectorStore, ReflectorStoreError, object_key, resource_version};

/// One call a reflector made on its store, by key and resourceVersion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreCall {
    /// `add(key)` of an object at `rv`.
    Add(String, String),
    /// `update(key)` at `rv`.
    Update(String, String),
    /// `delete(key)`.
    Delete(String),
    /// `replace(keys, rv)`.
    Replace(Vec<String>, String),
    /// `resync()`.
    Resync,
    /// `bookmark(rv)`.
    Bookmark(String),
}

struct Inner<K> {
    calls: Vec<StoreCall>,
    objects: BTreeMap<String, K>,
}

/// Records calls; clones share the record.
pub struct RecordingStore<K> {
    inner: Arc<Mutex<Inner<K>>>,
}

impl<K> Clone for RecordingStore<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<K> Default for RecordingStore<K> {
    fn default() -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                calls: vec![],
                objects: BTreeMap::new(),
            })),
        }
    }
}

impl<K: Clone> RecordingStore<K> {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
    /// Every call so far.
    pub fn calls(&self) -> Vec<StoreCall> {
        self.inner.lock().calls.clone()
    }
    /// The keys currently held, sorted.
    pub fn keys(&self) -> Vec<String> {
        self.inner.lock().objects.keys().cloned().collect()
    }
    /// How many `replace` calls (lists) the store has seen.
    pub fn replaces(&self) -> usize {
        self.calls()
            .iter()
            .filter(|c| matches!(c, StoreCall::Replace(..)))
            .count()
    }
}

impl<K: kube::Resource + Clone + Send> ReflectorStore<K> for RecordingStore<K> {
    fn add(&self, obj: K) -> Result<(), ReflectorStoreError> {
        let mut g = self.inner.lock();
        let k = object_key(&obj);
        g.calls
            .push(StoreCall::Add(k.clone(), resource_version(&obj)));
        g.objects.insert(k, obj);
        Ok(())
    }
    fn update(&self, obj: K) -> Result<(), ReflectorStoreError> {
        let mut g = self.inner.lock();
        let k = object_key(&obj);
        g.calls
            .push(StoreCall::Update(k.clone(), resource_version(&obj)));
        g.objects.insert(k, obj);
        Ok(())
    }
    fn delete(&self, obj: K) -> Result<(), ReflectorStoreError> {
        let mut g = self.inner.lock();
        let k = object_key(&obj);
        g.calls.push(StoreCall::Delete(k.clone()));
        g.objects.remove(&k);
        Ok(())
    }
    fn replace(&self, list: Vec<K>, resource_version: String) -> Result<(), ReflectorStoreError> {
        let mut g = self.inner.lock();
        let keys = list.iter().map(object_key).collect();
        g.calls.push(StoreCall::Replace(keys, resource_version));
        g.objects = list.into_iter().map(|o| (object_key(&o), o)).collect();
        Ok(())
    }
    fn resync(&self) -> Result<(), ReflectorStoreError> {
        self.inner.lock().calls.push(StoreCall::Resync);
        Ok(())
    }
    fn bookmark(&self, resource_version: &str) {
        self.inner
            .lock()
            .calls
            .push(StoreCall::Bookmark(resource_version.into()));
    }
}
