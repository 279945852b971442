//! The server's storage: objects, one etcd-like revision counter, and a bounded event history.
//!
//! Follows etcd's MVCC model as the apiserver sees it through `storage/etcd3`: every write gets
//! the next cluster-wide revision, which becomes the object's `metadata.resourceVersion`; a
//! watch from revision `r` replays the events after `r`; compaction forgets old revisions, and
//! asking for one of them is answered with 410 Expired. This is a core without I/O: the HTTP
//! layer calls it under one lock and does all serialisation of responses outside it.
//!
//! ```text
//!  revision:      1 (empty store)   2        3         4        5
//!  history:            [ compacted | ADDED a | MODIFIED a | ADDED b | DELETED a ]
//!                                   ^ events after `compacted` are kept, up to `history_limit`
//! ```
//!
//! # Invariants
//! 1. `head` only grows, by exactly one per committed write; it is every object's newest
//!    possible resourceVersion, and the resourceVersion of each stored object is the revision of
//!    the write that produced it.
//! 2. `history` holds exactly the events with revisions `compacted + 1 ..= head`, in order,
//!    one per revision: event `i` has revision `compacted + 1 + i`.
//! 3. A rejected write changes nothing: every check runs before [`Storage::commit`], the only
//!    place that mutates objects, history or `head`.
//! 4. An update that changes nothing is not a write: no revision, no event (etcd3's no-op
//!    update).
//!
//! # Concurrency
//! None here; the caller wraps `Storage` in one mutex and never holds it across an await.
//!
//! # Differences from upstream
//! - Object keys order as `(namespace, name)`, which is etcd's key order for one resource.
//! - No finalizer-free graceful deletion and no garbage collector; finalizers are honoured
//!   (deletion sets `deletionTimestamp` and bumps a kept generation, the last finalizer's
//!   removal deletes).
//! - Revisions are per server, as in one etcd; there is no watch cache in between, so every
//!   read is consistent.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::errors::ApiError;
use super::kinds::{KINDS, Kind};

/// The revision of an empty store, as in a fresh etcd. The first write gets revision 2.
pub(crate) const INITIAL_REVISION: u64 = 1;

/// One stored object, with its JSON serialised once for every reader.
#[derive(Debug)]
pub(crate) struct Stored {
    pub value: Value,
    pub json: Bytes,
    pub rv: u64,
}

impl Stored {
    fn new(mut value: Value, rv: u64) -> Arc<Self> {
        value["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        let json = Bytes::from(serde_json::to_vec(&value).expect("a JSON value serialises"));
        Arc::new(Stored { value, json, rv })
    }
}

/// What happened to an object, as a watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// The object was created.
    Added,
    /// The object was changed.
    Modified,
    /// The object was removed.
    Deleted,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed write.
#[derive(Debug)]
pub(crate) struct Event {
    pub rv: u64,
    pub kind: usize,
    pub ty: EventType,
    pub key: Key,
    /// The object after the write (for a delete: its last state, at the delete's revision).
    pub obj: Arc<Stored>,
    /// The object before the write; `None` for a create.
    pub prev: Option<Arc<Stored>>,
    /// Not delivered to watchers (a dropped event or a silent write).
    pub hidden: bool,
}

/// `(namespace, name)`.
pub(crate) type Key = (String, String);

/// Which part of an object an update may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UpdateMode {
    /// The main endpoint: for kinds with a status subresource, `status` is kept as stored.
    Main,
    /// The `/status` subresource: only `status` is taken from the body.
    Status,
}

/// Conditions a delete must meet (`DeleteOptions.preconditions`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Preconditions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

/// One page of a list.
#[derive(Debug)]
pub(crate) struct Page {
    pub items: Vec<Arc<Stored>>,
    /// The revision the page was read at.
    pub rv: u64,
    /// Set when more items follow: the key to continue after.
    pub continue_after: Option<Key>,
}

/// Objects, revisions and history. See the module docs for the invariants.
#[derive(Debug)]
pub(crate) struct Storage {
    objects: Vec<BTreeMap<Key, Arc<Stored>>>,
    head: u64,
    compacted: u64,
    history: VecDeque<Arc<Event>>,
    history_limit: usize,
    /// Writes still to be hidden from watchers (`drop_next_events`).
    drop_next: u64,
    /// Counter behind `uid`s and `generateName` suffixes, so runs are reproducible.
    serial: u64,
}

fn meta_str<'a>(v: &'a Value, field: &str) -> &'a str {
    v["metadata"][field].as_str().unwrap_or_default()
}

/// Everything but `metadata` (and the type fields): what bumps the generation. `status` counts
/// too, as upstream's `copyNonMetadata` (apiextensions-apiserver v0.36.3,
/// `pkg/registry/customresource/strategy.go`): with the status subresource the main endpoint
/// has already put the stored status back, so only a kind without it sees a status change here.
fn spec_differs(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| -> Value {
        let mut m = v.as_object().cloned().unwrap_or_default();
        for f in ["metadata", "apiVersion", "kind"] {
            m.remove(f);
        }
        Value::Object(m)
    };
    strip(a) != strip(b)
}

impl Storage {
    pub fn new(history_limit: usize) -> Self {
        Storage {
            objects: KINDS.iter().map(|_| BTreeMap::new()).collect(),
            head: INITIAL_REVISION,
            compacted: INITIAL_REVISION,
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            drop_next: 0,
            serial: 0,
        }
    }

    /// The newest revision.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// The newest revision that can no longer be watched from or read at.
    pub fn compacted(&self) -> u64 {
        self.compacted
    }

    pub fn get(&self, kind: usize, ns: &str, name: &str) -> Option<Arc<Stored>> {
        self.objects[kind]
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }

    /// Hides the next `n` writes from watchers.
    pub fn drop_next_events(&mut self, n: u64) {
        self.drop_next += n;
    }

    /// Forgets all history up to the head.
    pub fn compact(&mut self) -> u64 {
        self.history.clear();
        self.compacted = self.head; // keeps I2
        self.compacted
    }

    fn expired(&self, rv: u64) -> ApiError {
        ApiError::expired(format!(
            "too old resource version: {rv} (compacted up to {})",
            self.compacted
        ))
    }

    /// The events after revision `after`, or 410 if some were compacted away.
    pub fn events_after(&self, after: u64) -> Result<Vec<Arc<Event>>, ApiError> {
        if after < self.compacted {
            return Err(self.expired(after));
        }
        let skip = (after - self.compacted) as usize; // I2: index of revision after + 1
        Ok(self.history.iter().skip(skip).cloned().collect())
    }

    /// Checks a requested revision for a read: 410 if compacted, 504 if in the future.
    pub fn check_readable(&self, rv: u64) -> Result<(), ApiError> {
        if rv < self.compacted {
            Err(self.expired(rv))
        } else if rv > self.head {
            Err(ApiError::too_large_resource_version(rv, self.head))
        } else {
            Ok(())
        }
    }

    /// One page of `kind` objects in `ns` (all namespaces if `None`) as of revision `at`
    /// (the head if `None`), after key `after`, keeping those `keep` accepts.
    pub fn list(
        &self,
        kind: usize,
        ns: Option<&str>,
        at: Option<u64>,
        after: Option<&Key>,
        limit: Option<usize>,
        keep: &dyn Fn(&Stored) -> bool,
    ) -> Result<Page, ApiError> {
        let rv = at.unwrap_or(self.head);
        self.check_readable(rv)?;
        // The state at `rv` is the current state with the writes after `rv` undone: the first
        // later write to a key tells what the key held at `rv`.
        let later: Vec<Arc<Event>> = self.events_after(rv)?;
        let mut overlay: BTreeMap<&Key, Option<&Arc<Stored>>> = BTreeMap::new();
        for e in later.iter().filter(|e| e.kind == kind) {
            overlay.entry(&e.key).or_insert(e.prev.as_ref());
        }
        let in_scope = |k: &Key| ns.is_none_or(|n| k.0 == n) && after.is_none_or(|a| k > a);
        let current = self.objects[kind]
            .iter()
            .filter(|(k, _)| in_scope(k))
            .map(|(k, v)| (k, Some(v)));
        let undone = overlay
            .iter()
            .filter(|(k, _)| in_scope(k))
            .map(|(k, v)| (*k, *v));
        let mut merged = merge_by_key(current, undone)
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .filter(|(_, v)| keep(v));
        let limit = limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut last = None;
        for (k, v) in merged.by_ref() {
            items.push(v.clone());
            last = Some(k);
            if items.len() == limit {
                break;
            }
        }
        let more = items.len() == limit && merged.next().is_some();
        Ok(Page {
            items,
            rv,
            continue_after: if more { last.cloned() } else { None },
        })
    }

    /// The only mutation point (keeps I1, I2, I3): stores `new` (or removes the key when it is
    /// `None`), records the event, advances the head.
    fn commit(
        &mut self,
        kind: usize,
        ty: EventType,
        key: Key,
        new: Value,
        prev: Option<Arc<Stored>>,
        hidden: bool,
    ) -> Arc<Stored> {
        let rv = self.head + 1;
        let obj = Stored::new(new, rv);
        if ty == EventType::Deleted {
            self.objects[kind].remove(&key);
        } else {
            self.objects[kind].insert(key.clone(), obj.clone());
        }
        let hidden = hidden || self.drop_next > 0;
        self.drop_next = self.drop_next.saturating_sub(1);
        self.history.push_back(Arc::new(Event {
            rv,
            kind,
            ty,
            key,
            obj: obj.clone(),
            prev,
            hidden,
        }));
        while self.history.len() > self.history_limit {
            let old = self.history.pop_front().expect("non-empty");
            self.compacted = old.rv; // keeps I2
        }
        self.head = rv;
        obj
    }

    fn next_serial(&mut self) -> u64 {
        self.serial += 1;
        self.serial
    }

    /// Creates an object from a prepared body (see `Kind::prepare`).
    pub fn create(
        &mut self,
        kind: usize,
        mut obj: Value,
        now: Timestamp,
        hidden: bool,
    ) -> Result<Arc<Stored>, ApiError> {
        let k: &Kind = &KINDS[kind];
        let ns = meta_str(&obj, "namespace").to_string();
        let mut name = meta_str(&obj, "name").to_string();
        if name.is_empty() {
            let prefix = meta_str(&obj, "generateName").to_string();
            if prefix.is_empty() {
                return Err(ApiError::invalid(
                    k.group,
                    k.kind,
                    "",
                    &[("metadata.name", "name or generateName is required".into())],
                ));
            }
            name = format!(
                "{prefix}{}",
                base36(self.next_serial() * 7919 % 60_466_176, 5)
            );
            obj["metadata"]["name"] = Value::String(name.clone());
        }
        if !meta_str(&obj, "resourceVersion").is_empty() {
            return Err(ApiError::internal_error(
                "metadata.resourceVersion must not be set on an object to be created",
            ));
        }
        let key = (ns, name.clone());
        if self.objects[kind].contains_key(&key) {
            return Err(ApiError::already_exists(k.group, k.plural, &name));
        }
        let serial = self.next_serial();
        let meta = &mut obj["metadata"];
        meta["uid"] = Value::String(format!("00000000-0000-4000-8000-{serial:012x}"));
        meta["creationTimestamp"] = json!(now.to_string());
        if let Some(m) = meta.as_object_mut() {
            m.remove("deletionTimestamp");
            m.remove("generation");
        }
        if k.tracks_generation {
            obj["metadata"]["generation"] = json!(1);
        }
        if k.status_subresource
            && let Some(m) = obj.as_object_mut()
        {
            m.remove("status");
        }
        Ok(self.commit(kind, EventType::Added, key, obj, None, hidden))
    }

    /// Replaces an object, or its status, from a prepared body.
    pub fn update(
        &mut self,
        kind: usize,
        mut obj: Value,
        mode: UpdateMode,
    ) -> Result<Arc<Stored>, ApiError> {
        let k: &Kind = &KINDS[kind];
        let key = (
            meta_str(&obj, "namespace").to_string(),
            meta_str(&obj, "name").to_string(),
        );
        let name = key.1.clone();
        let Some(cur) = self.objects[kind].get(&key).cloned() else {
            return Err(ApiError::not_found(k.group, k.plural, &name));
        };
        let rv = meta_str(&obj, "resourceVersion");
        if rv.is_empty() {
            if !k.unconditional_update {
                return Err(ApiError::invalid(
                    k.group,
                    k.kind,
                    &name,
                    &[(
                        "metadata.resourceVersion",
                        "must be specified for an update".into(),
                    )],
                ));
            }
        } else if rv != cur.rv.to_string() {
            return Err(ApiError::conflict(
                k.group,
                k.plural,
                &name,
                format!(
                    "it was read at resourceVersion {rv} and has changed since (now {})",
                    cur.rv
                ),
            ));
        }
        let uid = meta_str(&obj, "uid");
        if !uid.is_empty() && uid != meta_str(&cur.value, "uid") {
            return Err(ApiError::invalid(
                k.group,
                k.kind,
                &name,
                &[("metadata.uid", "field is immutable".into())],
            ));
        }
        if mode == UpdateMode::Status {
            let status = obj.get("status").cloned();
            obj = cur.value.clone();
            match status {
                Some(s) => obj["status"] = s,
                None => {
                    obj.as_object_mut().map(|m| m.remove("status"));
                }
            }
        } else {
            // Server-owned metadata comes from storage, whatever the body says.
            for f in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ] {
                match cur.value["metadata"].get(f) {
                    Some(v) => obj["metadata"][f] = v.clone(),
                    None => {
                        obj["metadata"].as_object_mut().map(|m| m.remove(f));
                    }
                }
            }
            if k.status_subresource {
                match cur.value.get("status") {
                    Some(s) => obj["status"] = s.clone(),
                    None => {
                        obj.as_object_mut().map(|m| m.remove("status"));
                    }
                }
            }
            if k.tracks_generation && spec_differs(&obj, &cur.value) {
                let g = cur.value["metadata"]["generation"].as_i64().unwrap_or(0);
                obj["metadata"]["generation"] = json!(g + 1);
            }
        }
        obj["metadata"]["resourceVersion"] = Value::String(cur.rv.to_string());
        if obj == cur.value {
            return Ok(cur); // keeps I4
        }
        let finalizers_gone = obj["metadata"]["finalizers"]
            .as_array()
            .is_none_or(|f| f.is_empty());
        if !obj["metadata"]["deletionTimestamp"].is_null() && finalizers_gone {
            return Ok(self.commit(kind, EventType::Deleted, key, obj, Some(cur), false));
        }
        Ok(self.commit(kind, EventType::Modified, key, obj, Some(cur), false))
    }

    /// Deletes an object; one with finalizers is only marked with `deletionTimestamp`.
    pub fn delete(
        &mut self,
        kind: usize,
        ns: &str,
        name: &str,
        pre: &Preconditions,
        now: Timestamp,
    ) -> Result<Arc<Stored>, ApiError> {
        let k: &Kind = &KINDS[kind];
        let key = (ns.to_string(), name.to_string());
        let Some(cur) = self.objects[kind].get(&key).cloned() else {
            return Err(ApiError::not_found(k.group, k.plural, name));
        };
        if let Some(uid) = &pre.uid
            && uid != meta_str(&cur.value, "uid")
        {
            return Err(ApiError::conflict(
                k.group,
                k.plural,
                name,
                format!("the precondition uid {uid} does not match"),
            ));
        }
        if let Some(rv) = &pre.resource_version
            && *rv != cur.rv.to_string()
        {
            return Err(ApiError::conflict(
                k.group,
                k.plural,
                name,
                format!(
                    "the precondition resourceVersion {rv} does not match (now {})",
                    cur.rv
                ),
            ));
        }
        let has_finalizers = cur.value["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if has_finalizers {
            if !cur.value["metadata"]["deletionTimestamp"].is_null() {
                return Ok(cur);
            }
            let mut obj = cur.value.clone();
            obj["metadata"]["deletionTimestamp"] = json!(now.to_string());
            obj["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            // Marking an object deleted bumps its generation, once (apiserver v0.36.3,
            // `pkg/registry/generic/registry/store.go`, `markAsDeleting`).
            if let Some(g) = cur.value["metadata"]["generation"]
                .as_i64()
                .filter(|g| *g > 0)
            {
                obj["metadata"]["generation"] = json!(g + 1);
            }
            return Ok(self.commit(kind, EventType::Modified, key, obj, Some(cur), false));
        }
        let last = cur.value.clone();
        Ok(self.commit(kind, EventType::Deleted, key, last, Some(cur), false))
    }

    /// Writes an object (creating or replacing it, no checks on resourceVersion) whose event
    /// no watcher sees. The write still takes a revision, so a relist sees it.
    pub fn silent_write(
        &mut self,
        kind: usize,
        mut obj: Value,
        now: Timestamp,
    ) -> Result<Arc<Stored>, ApiError> {
        let key = (
            meta_str(&obj, "namespace").to_string(),
            meta_str(&obj, "name").to_string(),
        );
        match self.objects[kind].get(&key).cloned() {
            None => {
                obj["metadata"]
                    .as_object_mut()
                    .map(|m| m.remove("resourceVersion"));
                self.create(kind, obj, now, true)
            }
            Some(cur) => {
                for f in ["uid", "creationTimestamp", "generation"] {
                    if let Some(v) = cur.value["metadata"].get(f) {
                        obj["metadata"][f] = v.clone();
                    }
                }
                Ok(self.commit(kind, EventType::Modified, key, obj, Some(cur), true))
            }
        }
    }
}

/// Merges two key-sorted streams; on equal keys the second wins.
fn merge_by_key<'a, A, B, V>(a: A, b: B) -> impl Iterator<Item = (&'a Key, V)>
where
    A: Iterator<Item = (&'a Key, V)>,
    B: Iterator<Item = (&'a Key, V)>,
{
    let mut a = a.peekable();
    let mut b = b.peekable();
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some((ka, _)), Some((kb, _))) => {
            if ka < kb {
                a.next()
            } else {
                if ka == kb {
                    a.next();
                }
                b.next()
            }
        }
        (Some(_), None) => a.next(),
        (None, _) => b.next(),
    })
}

fn base36(mut n: u64, width: usize) -> String {
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = vec![b'0'; width];
    for slot in out.iter_mut().rev() {
        *slot = digits[(n % 36) as usize];
        n /= 36;
    }
    String::from_utf8(out).expect("ascii")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::kinds::CONFIGMAPS;

    fn t() -> Timestamp {
        Timestamp::UNIX_EPOCH
    }

    fn cm(name: &str, v: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "d"}, "data": {"v": v}})
    }

    fn names_at(st: &Storage, at: Option<u64>) -> Vec<(String, String)> {
        let page = st
            .list(CONFIGMAPS, None, at, None, None, &|_| true)
            .unwrap();
        page.items
            .iter()
            .map(|o| {
                (
                    o.value["metadata"]["name"].as_str().unwrap().to_string(),
                    o.value["data"]["v"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    fn pair(n: &str, v: &str) -> (String, String) {
        (n.to_string(), v.to_string())
    }

    #[test]
    fn a_list_at_an_old_revision_undoes_every_later_write() {
        let mut st = Storage::new(100);
        st.create(CONFIGMAPS, cm("a", "1"), t(), false).unwrap(); // 2
        st.create(CONFIGMAPS, cm("b", "1"), t(), false).unwrap(); // 3
        let mut a2 = cm("a", "2");
        a2["metadata"]["resourceVersion"] = json!("2");
        st.update(CONFIGMAPS, a2, UpdateMode::Main).unwrap(); // 4
        st.delete(CONFIGMAPS, "d", "b", &Preconditions::default(), t())
            .unwrap(); // 5
        st.create(CONFIGMAPS, cm("c", "1"), t(), false).unwrap(); // 6
        assert_eq!(names_at(&st, Some(3)), [pair("a", "1"), pair("b", "1")]);
        assert_eq!(names_at(&st, Some(4)), [pair("a", "2"), pair("b", "1")]);
        assert_eq!(names_at(&st, None), [pair("a", "2"), pair("c", "1")]);
    }

    #[test]
    fn the_history_bound_compacts_and_old_reads_expire() {
        let mut st = Storage::new(2);
        for n in ["a", "b", "c"] {
            st.create(CONFIGMAPS, cm(n, "1"), t(), false).unwrap(); // 2, 3, 4
        }
        assert_eq!((st.head(), st.compacted()), (4, 2)); // keeps I2
        assert_eq!(st.events_after(2).unwrap().len(), 2);
        assert_eq!(st.events_after(1).unwrap_err().code, 410);
        assert_eq!(names_at(&st, Some(2)).len(), 1);
        assert_eq!(st.check_readable(9).unwrap_err().code, 504);
    }

    #[test]
    fn a_rejected_write_and_a_no_op_update_leave_head_and_history_alone() {
        let mut st = Storage::new(10);
        let a = st.create(CONFIGMAPS, cm("a", "1"), t(), false).unwrap();
        let before = (st.head(), st.history.len());
        assert_eq!(
            st.create(CONFIGMAPS, cm("a", "1"), t(), false)
                .unwrap_err()
                .code,
            409
        );
        let mut stale = cm("a", "9");
        stale["metadata"]["resourceVersion"] = json!("1");
        assert_eq!(
            st.update(CONFIGMAPS, stale, UpdateMode::Main)
                .unwrap_err()
                .code,
            409
        );
        let same = st
            .update(CONFIGMAPS, a.value.clone(), UpdateMode::Main)
            .unwrap();
        assert_eq!(same.rv, a.rv); // keeps I4
        assert_eq!((st.head(), st.history.len()), before); // keeps I3
    }
}
