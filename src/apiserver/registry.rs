//! The registry of served kinds: what the running server serves, filled at start with the
//! built-in kinds and, later, with each established CustomResourceDefinition's resource.
//!
//! Follows the apiserver's split between where objects live and how they are served
//! (`k8s.io/apiserver` v0.37.2 `pkg/endpoints/installer.go`, and apiextensions-apiserver
//! v0.37.2 `pkg/apiserver/customresource_handler.go`, which serves every version of a custom
//! resource from one storage at the storage version). An entry is one resource: its id
//! indexes storage's object maps and every watch event, and it holds the [`Kind`] of its
//! storage version and one [`Kind`] per served version.
//!
//! ```text
//!  id 0  configmaps      storage: v1 ─ served: [v1]
//!  id 1  namespaces      storage: v1 ─ served: [v1]
//!  id 13 crontabs.x.io   storage: v2 ─ served: [v1, v2]   (from a CRD)
//!  id 14 (removed)       its CRD was deleted: the id is never given again
//! ```
//!
//! # Invariants
//! 1. Ids are never reused: a removed entry leaves a hole, so an event in history or a watch
//!    that names an id always means the resource it was made for.
//! 2. No two live entries share a group and plural, nor a group and kind.
//! 3. At most [`MAX_IDS`] ids are ever given out, so the holes removed entries leave are
//!    bounded; past it a new registration is refused (a Status, never a panic).
//!
//! # Concurrency
//! None here: the registry lives in `Storage`, under its one lock, so a CRD's write and the
//! registration it causes are seen together.

use std::sync::Arc;

use super::builtin;
use super::errors::ApiError;
use super::kinds::{self, Kind};

/// The most ids a registry gives out over its life (keeps I3).
pub(crate) const MAX_IDS: usize = 4_096;

/// One served resource.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// The version objects are stored at.
    pub storage: Arc<Kind>,
    /// The versions served, in the order discovery lists them (the preferred one first).
    pub served: Vec<Arc<Kind>>,
    /// The resourceVersion of the CRD it was built from; `None` for a built-in kind.
    pub source: Option<serde_json::Value>,
}

/// The served resources, by id.
#[derive(Debug, Clone)]
pub(crate) struct Registry {
    entries: Vec<Option<Entry>>,
}

impl Registry {
    /// The built-in kinds, at the ids `kinds` names them by.
    pub fn builtin() -> Self {
        let entries = kinds::builtins()
            .into_iter()
            .chain(builtin::kinds())
            .map(|k| {
                let k = Arc::new(k);
                Some(Entry {
                    storage: k.clone(),
                    served: vec![k],
                    source: None,
                })
            })
            .collect();
        Registry { entries }
    }

    /// How many ids were given out (live or removed).
    pub fn ids(&self) -> usize {
        self.entries.len()
    }

    /// The live entry `id`.
    pub fn entry(&self, id: usize) -> Option<&Entry> {
        self.entries.get(id).and_then(Option::as_ref)
    }

    /// The storage version's kind of live entry `id`.
    pub fn get(&self, id: usize) -> Option<&Arc<Kind>> {
        self.entry(id).map(|e| &e.storage)
    }

    /// Every live entry with its id.
    pub fn live(&self) -> impl Iterator<Item = (usize, &Entry)> {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(id, e)| e.as_ref().map(|e| (id, e)))
    }

    /// The resource served at `group`, `version`, `plural`: its id and the served version's
    /// kind.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<(usize, Arc<Kind>)> {
        self.live().find_map(|(id, e)| {
            let k = e
                .served
                .iter()
                .find(|k| k.group == group && k.version == version && k.plural == plural)?;
            Some((id, k.clone()))
        })
    }

    /// The id of the resource whose kind is `kind` in `group`.
    pub fn find_kind(&self, group: &str, kind: &str) -> Option<usize> {
        self.live()
            .find(|(_, e)| e.storage.group == group && e.storage.kind == kind)
            .map(|(id, _)| id)
    }

    /// The id of the resource CRD `name` serves.
    pub fn find_crd(&self, name: &str) -> Option<usize> {
        self.live()
            .find(|(_, e)| e.storage.crd.as_deref() == Some(name))
            .map(|(id, _)| id)
    }

    /// Registers a new resource and returns its id (keeps I1, I2, I3).
    pub fn add(&mut self, entry: Entry) -> Result<usize, ApiError> {
        let s = &entry.storage;
        if self.live().any(|(_, e)| {
            e.storage.group == s.group && (e.storage.plural == s.plural || e.storage.kind == s.kind)
        }) {
            return Err(ApiError::conflict(
                &s.group,
                &s.plural,
                &s.plural,
                "another resource of the group already has this plural or kind",
            ));
        }
        if self.entries.len() >= MAX_IDS {
            return Err(ApiError::internal_error(format!(
                "this embedded server registers at most {MAX_IDS} resources over its life"
            )));
        }
        self.entries.push(Some(entry));
        Ok(self.entries.len() - 1)
    }

    /// Replaces live entry `id` (a CRD's versions changed): same group and plural.
    pub fn replace(&mut self, id: usize, entry: Entry) {
        if let Some(slot) = self.entries.get_mut(id).filter(|e| e.is_some()) {
            *slot = Some(entry);
        }
    }

    /// Removes entry `id`; its id is never given again (keeps I1).
    pub fn remove(&mut self, id: usize) {
        if let Some(slot) = self.entries.get_mut(id) {
            *slot = None;
        }
    }
}
