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
//! 4. A sweep handles at most [`SWEEP_STEP`] objects per hold of the storage lock; the
//!    request that deleted the namespace runs the steps, yielding between them, in a task of
//!    its own, and answers once the last has run.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::{EventType, Key, Storage, Stored};
use crate::apiserver::kinds::{
    NAMESPACE_FINALIZER, NAMESPACES, holds_finalizers as holds, omit_empty_spec_finalizers,
};

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

/// Objects one step of a sweep handles at most before the storage lock is released, so that
/// no request holds it for long (module I5 of `apiserver`) whatever a namespace holds (keeps I4).
pub(crate) const SWEEP_STEP: usize = 1024;

/// Where the namespace controller's sync of one namespace has got to, between the steps it
/// runs in (each under the storage lock once), and what it found left (objects whose
/// finalizers keep them).
#[derive(Debug, Default)]
pub(crate) struct Sweep {
    /// The kind being swept (an id in the registry).
    kind: usize,
    /// The last name handled in that kind.
    after: Option<String>,
    /// Objects left, as `("plural.group", count)`.
    remaining: Vec<(String, usize)>,
    /// Their finalizers, as `(finalizer, count)`.
    by_finalizer: Vec<(String, usize)>,
}

fn count(list: &mut Vec<(String, usize)>, name: &str) {
    match list.iter_mut().find(|(n, _)| n == name) {
        Some((_, c)) => *c += 1,
        None => list.push((name.to_owned(), 1)),
    }
}

impl Storage {
    /// The namespace controller's sync of `ns` in one go: for a namespace the server already
    /// knows to be empty (the last object has just left it), so it deletes nothing.
    fn sync_namespace(&mut self, ns: &str, now: Timestamp) {
        let mut sweep = Sweep::default();
        while self.sync_namespace_step(ns, now, &mut sweep, usize::MAX) {}
    }

    /// One step of the namespace controller's sync of `ns` (`namespacedResourcesDeleter.Delete`):
    /// deletes up to `budget` of its objects (one with finalizers is only marked), continuing
    /// from `sweep`; returns whether more remain. The last step writes the conditions and,
    /// once nothing remains, removes the `kubernetes` finalizer from `spec.finalizers`, which
    /// deletes the namespace if no finalizer holds it (keeps I1–I3).
    pub fn sync_namespace_step(
        &mut self,
        ns: &str,
        now: Timestamp,
        sweep: &mut Sweep,
        budget: usize,
    ) -> bool {
        if self.dry_run {
            return false;
        }
        let key: Key = (String::new(), ns.to_string());
        let Some(cur) = self.objects[NAMESPACES].get(&key) else {
            return false;
        };
        if !cur.meta.deleting || !holds(&cur.value(), "spec") {
            return false; // keeps I1
        }
        let mut handled = 0;
        self.syncing = true;
        while sweep.kind < self.kinds.ids() && handled < budget {
            let kind = sweep.kind;
            let Some(k) = self.kinds.get(kind).cloned() else {
                sweep.kind += 1; // an id whose resource is gone
                sweep.after = None;
                continue;
            };
            let names = if k.namespaced {
                self.names_after(kind, ns, sweep.after.as_deref(), budget - handled)
            } else {
                Vec::new()
            };
            if names.is_empty() {
                sweep.kind += 1;
                sweep.after = None;
                continue;
            }
            handled += names.len();
            for name in &names {
                // A delete of a stored object with no preconditions is refused by nothing;
                // one already being deleted is left as it is (keeps I2).
                let _ = self.delete(kind, ns, name, &Default::default(), now);
                if let Some(left) = self.get(kind, ns, name) {
                    count(&mut sweep.remaining, &format!("{}.{}", k.plural, k.group));
                    for f in left.value()["metadata"]["finalizers"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                    {
                        count(&mut sweep.by_finalizer, f);
                    }
                }
            }
            sweep.after = names.last().cloned();
        }
        self.syncing = false;
        if sweep.kind < self.kinds.ids() {
            return true;
        }
        // What was left may have gone since it was counted, a step or more ago.
        if self.holds_nothing(ns) {
            sweep.remaining.clear();
            sweep.by_finalizer.clear();
        }
        self.write_conditions(&key, &sweep.remaining, &sweep.by_finalizer, now);
        if sweep.remaining.is_empty() {
            self.remove_kubernetes_finalizer(&key);
        }
        false
    }

    /// Whether no namespaced object is stored in `ns`: one step into each kind's keys.
    fn holds_nothing(&self, ns: &str) -> bool {
        let from = (ns.to_string(), String::new());
        self.kinds.live().all(|(kind, e)| {
            !e.storage.namespaced
                || self.objects[kind]
                    .range(&from..)
                    .next()
                    .is_none_or(|(key, _)| key.0 != ns)
        })
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
        let empty = self.holds_nothing(ns);
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

    /// The names of at most `limit` of `kind`'s objects in `ns`, in key order, after `after`.
    fn names_after(&self, kind: usize, ns: &str, after: Option<&str>, limit: usize) -> Vec<String> {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let from = match after {
            Some(name) => Excluded((ns.to_string(), name.to_string())),
            None => Included((ns.to_string(), String::new())),
        };
        self.objects[kind]
            .range((from, Unbounded))
            .take_while(|(key, _)| key.0 == ns)
            .take(limit)
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
        omit_empty_spec_finalizers(&mut obj);
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
