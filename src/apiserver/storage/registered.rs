//! Storage's side of the registry of served kinds: looking a kind up by id, and giving a new
//! resource its object map.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::{EventType, Key, Storage, Stored, meta_str};
use crate::apiserver::errors::ApiError;
use crate::apiserver::kinds::Kind;
use crate::apiserver::registry::{Entry, Registry};

impl Storage {
    /// The kind (at its storage version) of live resource `id`; 404 once it is no longer
    /// served (its CRD was deleted meanwhile).
    pub(crate) fn kind(&self, id: usize) -> Result<Arc<Kind>, ApiError> {
        self.kinds
            .get(id)
            .cloned()
            .ok_or_else(|| ApiError::not_found("", "resources", &id.to_string()))
    }

    /// The served kinds.
    pub(crate) fn registry(&self) -> &Registry {
        &self.kinds
    }

    /// Registers a new resource, with an empty object map (registry I1–I3).
    pub(crate) fn register(&mut self, entry: Entry) -> Result<usize, ApiError> {
        let id = self.kinds.add(entry)?;
        self.objects.resize_with(self.kinds.ids(), BTreeMap::new);
        Ok(id)
    }

    /// Rebuilds live resource `id` (its CRD changed), keeping its id and objects.
    pub(crate) fn reregister(&mut self, id: usize, entry: Entry) {
        self.kinds.replace(id, entry);
    }

    /// Stops serving resource `id`; its objects must be gone (registry I1).
    pub(crate) fn unregister(&mut self, id: usize) {
        self.kinds.remove(id);
        if let Some(objects) = self.objects.get_mut(id) {
            objects.clear();
        }
    }

    /// Every stored object of `kind`, parsed.
    pub(crate) fn values(&self, kind: usize) -> Vec<Value> {
        self.objects
            .get(kind)
            .into_iter()
            .flat_map(|m| m.values().map(|o| o.value()))
            .collect()
    }

    /// The keys of every stored object of `kind`.
    pub(crate) fn keys(&self, kind: usize) -> Vec<Key> {
        self.objects
            .get(kind)
            .into_iter()
            .flat_map(|m| m.keys().cloned())
            .collect()
    }

    /// A controller's write of a stored object (a status update, a deletion mark): no
    /// endpoint rules, no resourceVersion check, one revision and a MODIFIED event (keeps
    /// storage I1-I5: it is staged and committed as every write is).
    pub(crate) fn put(&mut self, kind: usize, obj: Value) -> Result<Arc<Stored>, ApiError> {
        let (key, cur) = self.stored_as(kind, &obj)?;
        let staged = self.stage(obj, Some(&cur))?;
        Ok(self.commit(kind, EventType::Modified, key, staged, Some(cur), false))
    }

    /// A controller's removal of a stored object (a CRD whose last finalizer went): one
    /// revision and a DELETED event carrying `last`.
    pub(crate) fn remove(&mut self, kind: usize, last: Value) -> Result<Arc<Stored>, ApiError> {
        let (key, cur) = self.stored_as(kind, &last)?;
        let staged = self.stage_delete(last)?;
        Ok(self.commit(kind, EventType::Deleted, key, staged, Some(cur), false))
    }

    /// The key of `obj` and the object stored there now (404 if none).
    fn stored_as(&self, kind: usize, obj: &Value) -> Result<(Key, Arc<Stored>), ApiError> {
        let key = (
            meta_str(obj, "namespace").to_string(),
            meta_str(obj, "name").to_string(),
        );
        match self.objects.get(kind).and_then(|m| m.get(&key)).cloned() {
            Some(cur) => Ok((key, cur)),
            None => Err(ApiError::not_found("", "", &key.1)),
        }
    }
}
