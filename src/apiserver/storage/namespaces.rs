//! A namespace's end: the namespace registry's rules for `spec.finalizers` and the work of
//! kube-controller-manager's namespace controller, which the server does at once.
//!
//! Follows kubernetes v1.37.2: `pkg/registry/core/namespace/storage/storage.go` (the first
//! delete marks the namespace Terminating; a later one deletes it only once
//! `spec.finalizers` is empty; an update that empties both finalizer lists of a namespace being
//! deleted deletes it), `pkg/registry/core/namespace/strategy.go` (the `finalize`
//! subresource writes `spec.finalizers` and metadata, never `status`) and
//! `pkg/controller/namespace/deletion/namespaced_resources_deleter.go` with
//! `status_condition_utils.go` (the controller's sync, below).
//!
//! ```text
//!  DELETE ns ──► Terminating ──► sync: delete every object in it ──► conditions ──┐
//!                                     (one write and one event each)               │
//!        objects with finalizers remain: ContentRemaining, FinalizersRemaining ◄───┤
//!        none remain: `kubernetes` leaves spec.finalizers (the controller's /finalize)
//!                     ──► deleted, unless spec.finalizers or metadata.finalizers hold it
//! ```
//!
//! # Invariants
//! 1. The sync runs only for a namespace being deleted whose `spec.finalizers` is not empty
//!    (upstream's `finalized` check: a namespace finalized by hand keeps its objects).
//! 2. Each object is deleted by its own write, with its own event, as the controller's
//!    `deletecollection` does; nothing here compacts what a watcher needs beyond the history's
//!    own bounds (storage I2).
//! 3. The conditions are written only when one changes (`updateConditions`), and a condition's
//!    `lastTransitionTime` moves only when its status does.

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use std::sync::Arc;

use super::{EventType, Key, Storage, Stored};
use crate::apiserver::kinds::{KINDS, NAMESPACE_FINALIZER, NAMESPACES};
use crate::apiserver::validation::is_qualified_name;

/// The finalizers a name without a `/` may be (`IsStandardFinalizerName`).
const STANDARD_FINALIZERS: [&str; 3] = [NAMESPACE_FINALIZER, "orphan", "foregroundDeletion"];

/// The five conditions the namespace controller keeps, in its order, each with the reason and
/// message it has when nothing is wrong (`okReasons`, `okMessages`).
const CONDITIONS: [(&str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
];

/// `validateFinalizerName` on each of a namespace's `spec.finalizers`: a qualified name, and
/// one without a `/` must be a standard finalizer. `indexed`: the finalize subresource names
/// each entry (`spec.finalizers[i]`), create and update the list (`spec.finalizers`).
pub(crate) fn spec_finalizer_causes(ns: &Value, indexed: bool) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, f) in ns["spec"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = f.as_str().unwrap_or_default();
        let field = if indexed {
            format!("spec.finalizers[{i}]")
        } else {
            "spec.finalizers".to_owned()
        };
        if !is_qualified_name(name) {
            out.push((
                field.clone(),
                format!("Invalid value: {name:?}: not a qualified name"),
            ));
        }
        if !name.contains('/') && !STANDARD_FINALIZERS.contains(&name) {
            out.push((
                field,
                format!(
                    "Invalid value: {name:?}: name is neither a standard finalizer name nor is it fully qualified"
                ),
            ));
        }
    }
    out
}

/// Whether `v[field]["finalizers"]` is a non-empty list.
pub(super) fn holds(v: &Value, field: &str) -> bool {
    v[field]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty())
}

impl Storage {
    /// The namespace controller's sync of `ns` (`namespacedResourcesDeleter.Delete`), done at
    /// once: every object in it is deleted (one with finalizers is only marked), the
    /// conditions are written, and once nothing remains the `kubernetes` finalizer leaves
    /// `spec.finalizers`, which deletes the namespace if no finalizer holds it (keeps I1–I3).
    pub(super) fn sync_namespace(&mut self, ns: &str, now: Timestamp) {
        if self.dry_run {
            return;
        }
        let key: Key = (String::new(), ns.to_string());
        let Some(cur) = self.objects[NAMESPACES].get(&key) else {
            return;
        };
        if !cur.meta.deleting || !holds(&cur.value(), "spec") {
            return; // keeps I1
        }
        let mut remaining: Vec<(String, usize)> = Vec::new();
        let mut by_finalizer: Vec<(String, usize)> = Vec::new();
        for (kind, k) in KINDS.iter().enumerate() {
            if !k.namespaced {
                continue;
            }
            self.syncing = true;
            for name in self.names_in(kind, ns) {
                // A delete of a stored object with no preconditions is refused by nothing;
                // one already being deleted is left as it is (keeps I2).
                let _ = self.delete(kind, ns, &name, &Default::default(), now);
            }
            self.syncing = false;
            let left = self.names_in(kind, ns);
            if left.is_empty() {
                continue;
            }
            remaining.push((format!("{}.{}", k.plural, k.group), left.len()));
            for name in &left {
                let Some(o) = self.get(kind, ns, name) else {
                    continue;
                };
                for f in o.value()["metadata"]["finalizers"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                {
                    match by_finalizer.iter_mut().find(|(n, _)| n == f) {
                        Some((_, c)) => *c += 1,
                        None => by_finalizer.push((f.to_owned(), 1)),
                    }
                }
            }
        }
        self.write_conditions(&key, &remaining, &by_finalizer, now);
        if remaining.is_empty() {
            self.remove_kubernetes_finalizer(&key);
        }
    }

    /// When an object leaves a namespace being deleted and it was the last, the controller's
    /// next sync finds the namespace empty. Cheap for any other delete: a lookup and, for a
    /// namespace being deleted, one step into each kind's keys.
    pub(super) fn content_left(&mut self, ns: &str, now: Timestamp) {
        if self.syncing {
            return; // the sync itself looks once it has deleted everything
        }
        let deleting = self.objects[NAMESPACES]
            .get(&(String::new(), ns.to_string()))
            .is_some_and(|n| n.meta.deleting);
        let from = (ns.to_string(), String::new());
        let empty = KINDS.iter().enumerate().all(|(kind, k)| {
            !k.namespaced
                || self.objects[kind]
                    .range(&from..)
                    .next()
                    .is_none_or(|(key, _)| key.0 != ns)
        });
        if deleting && empty {
            self.sync_namespace(ns, now);
        }
    }

    /// The stored namespace at `key`, and its value to change.
    fn namespace(&self, key: &Key) -> Option<(Arc<Stored>, Value)> {
        let cur = self.objects[NAMESPACES].get(key).cloned()?;
        let v = cur.value();
        Some((cur, v))
    }

    /// The names of `kind`'s objects in `ns`.
    fn names_in(&self, kind: usize, ns: &str) -> Vec<String> {
        let from = (ns.to_string(), String::new());
        self.objects[kind]
            .range(&from..)
            .take_while(|(key, _)| key.0 == ns)
            .map(|(key, _)| key.1.clone())
            .collect()
    }

    /// `namespaceConditionUpdater.Update` and the status update after it (keeps I3).
    fn write_conditions(
        &mut self,
        key: &Key,
        remaining: &[(String, usize)],
        by_finalizer: &[(String, usize)],
        now: Timestamp,
    ) {
        let Some((cur, mut obj)) = self.namespace(key) else {
            return;
        };
        let mut conditions: Vec<Value> = obj["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let list = |items: &[(String, usize)], what: &str| {
            let mut parts: Vec<String> = items
                .iter()
                .map(|(n, c)| format!("{n} {what} {c} resource instances"))
                .collect();
            parts.sort();
            parts.join(", ")
        };
        for (ty, ok_reason, ok_message) in CONDITIONS {
            let (status, reason, message) = match ty {
                "NamespaceContentRemaining" if !remaining.is_empty() => (
                    "True",
                    "SomeResourcesRemain",
                    format!("Some resources are remaining: {}", list(remaining, "has")),
                ),
                "NamespaceFinalizersRemaining" if !by_finalizer.is_empty() => (
                    "True",
                    "SomeFinalizersRemain",
                    format!(
                        "Some content in the namespace has finalizers remaining: {}",
                        list(by_finalizer, "in")
                    ),
                ),
                _ => ("False", ok_reason, ok_message.to_owned()),
            };
            match conditions.iter_mut().find(|c| c["type"] == ty) {
                None => conditions.push(json!({
                    "type": ty, "status": status, "lastTransitionTime": now.to_string(),
                    "reason": reason, "message": message,
                })),
                Some(c) => {
                    if c["status"] != status {
                        c["lastTransitionTime"] = json!(now.to_string());
                    }
                    c["status"] = json!(status);
                    c["reason"] = json!(reason);
                    c["message"] = json!(message);
                }
            }
        }
        obj["status"]["conditions"] = Value::Array(conditions);
        if obj == cur.value() {
            return; // keeps I3
        }
        if let Ok(staged) = self.stage(obj, Some(&cur)) {
            self.commit(
                NAMESPACES,
                EventType::Modified,
                key.clone(),
                staged,
                Some(cur),
                false,
            );
        }
    }

    /// The controller's `finalizeNamespace`: `spec.finalizers` without `kubernetes`, sorted
    /// and without repeats, written through the finalize rules: the namespace is deleted if
    /// neither finalizer list holds it any more (`ShouldDeleteNamespaceDuringUpdate`).
    fn remove_kubernetes_finalizer(&mut self, key: &Key) {
        let Some((cur, mut obj)) = self.namespace(key) else {
            return;
        };
        let mut left: Vec<String> = obj["spec"]["finalizers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|f| *f != NAMESPACE_FINALIZER)
            .map(str::to_owned)
            .collect();
        left.sort();
        left.dedup();
        obj["spec"]["finalizers"] = json!(left);
        if obj == cur.value() {
            return; // etcd3's no-op update (storage I4)
        }
        let gone = left.is_empty() && !holds(&obj, "metadata");
        let staged = if gone {
            self.stage_delete(obj)
        } else {
            self.stage(obj, Some(&cur))
        };
        let ty = if gone {
            EventType::Deleted
        } else {
            EventType::Modified
        };
        if let Ok(staged) = staged {
            self.commit(NAMESPACES, ty, key.clone(), staged, Some(cur), false);
        }
    }
}
