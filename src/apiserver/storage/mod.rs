//! The server's storage: objects, one etcd-like revision counter, and a bounded event history.
//!
//! Follows etcd's MVCC model as the apiserver sees it through `storage/etcd3`: every write gets
//! the next cluster-wide revision, which becomes the object's `metadata.resourceVersion`; a
//! watch from revision `r` replays the events after `r`; compaction forgets old revisions, and
//! asking for one of them is answered with 410 Expired. This is a core without I/O: the HTTP
//! layer calls it under one lock and does all parsing, patching, filtering and serialisation
//! of responses outside it.
//!
//! ```text
//!  revision:      F (first, empty)  F+1      F+2       F+3      F+4
//!  history:            [ compacted | ADDED a | MODIFIED a | ADDED b | DELETED a ]
//!                                   ^ events after `compacted` are kept, up to `history`
//!                                     events and `history_bytes` bytes
//! ```
//!
//! # Invariants
//! 1. `head` only grows, by exactly one per committed write (and by one on
//!    [`Storage::restart`], which compacts everything it skips); it is every object's newest
//!    possible resourceVersion, and the resourceVersion of each stored object is the revision of
//!    the write that produced it. The first revision is `compacted`: nothing before it can be
//!    read or watched from (410), whatever an earlier run of the server issued.
//! 2. `history` holds exactly the events with revisions `compacted + 1 ..= head`, in order,
//!    one per revision: event `i` has revision `compacted + 1 + i`. It never holds more than
//!    `history` events, nor (beyond its newest event) more than `history_bytes` bytes.
//! 3. A rejected write changes nothing: every check runs before [`Storage::commit`], the only
//!    place that mutates objects, history or `head`.
//! 4. An update that changes nothing is not a write: no revision, no event (etcd3's no-op
//!    update).
//! 5. Every stored object serialises to at most `max_object_bytes`, and all stored objects
//!    together are charged at most `max_storage_bytes` (`stored_bytes` is their sum); a write
//!    over either bound is refused. Deletes are always allowed. What is charged is what is
//!    held: an object is kept as its JSON only (parsed again when a write needs it), plus its
//!    namespace, name and labels for reads to select on, each charged with its allocation
//!    overhead ([`ENTRY_OVERHEAD`], [`LABEL_OVERHEAD`]).
//! 6. Every stored name passed the kind's name rule (a DNS subdomain, so a path segment),
//!    including names generated from `generateName`.
//!
//! # Concurrency
//! None here; the caller wraps `Storage` in one mutex and never holds it across an await.
//!
//! # Differences from upstream
//! - Object keys order as `(namespace, name)`, which is etcd's key order for one resource; a
//!   cluster-scoped object's namespace is empty.
//! - A dry run ([`Storage::dry_run`]) runs every check and returns what would be stored,
//!   without committing, as upstream's `DryRunnableStorage`: a created object has no
//!   resourceVersion, an updated or deleted one keeps the stored one.
//! - No finalizer-free graceful deletion and no garbage collector; finalizers are honoured
//!   (deletion sets `deletionTimestamp` and bumps a kept generation, the last finalizer's
//!   removal deletes).
//! - Revisions are per server, as in one etcd; there is no watch cache in between, so every
//!   read is consistent.
//! - An object over `max_object_bytes` is refused with 413 RequestEntityTooLarge; upstream
//!   passes etcd's "request is too large" through as a 500. A write past `max_storage_bytes`
//!   is a 500 InternalError, as etcd's "database space exceeded" is upstream; the quota counts
//!   the stored JSON of current objects, not history (which has its own bound).

mod namespaces;
mod read;
mod registered;

pub(crate) use namespaces::{SWEEP_STEP, Sweep};
pub(crate) use read::Batch;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::errors::ApiError;
use super::kinds::{
    INITIAL_NAMESPACES, Kind, NAMESPACES, holds_finalizers, omit_empty_spec_finalizers,
};
use super::registry::Registry;
use super::validation;

/// The revision of an empty store, as in a fresh etcd. The first write gets revision 2.
pub(crate) const INITIAL_REVISION: u64 = 1;

/// How many generated names a create tries before giving up with AlreadyExists
/// (`maxNameGenerationCreateAttempts`, kubernetes `registry/generic/registry/store.go`).
const MAX_NAME_GENERATION_ATTEMPTS: usize = 8;

/// Bytes charged for an event or an object beyond its JSON and its [`Meta`]'s strings: the
/// `Arc`s, the `Bytes` handle, the map entry and the key's two strings (their allocator
/// chunks included).
const ENTRY_OVERHEAD: usize = 256;

/// Bytes charged per label held parsed in [`Meta`], beyond its key and value: two boxed
/// strings (16 bytes each, plus the allocator's chunk header and rounding).
const LABEL_OVERHEAD: usize = 64;

/// The bounds storage keeps (see the invariants).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub history: usize,
    pub history_bytes: usize,
    pub max_object_bytes: usize,
    pub max_storage_bytes: usize,
    /// [`ServerOptions::kube_apiserver_minor`](crate::apiserver::ServerOptions::kube_apiserver_minor):
    /// from 38, an update that deletes answers at the delete's revision.
    pub kube_apiserver_minor: u32,
}

/// One stored object: its JSON, serialised once for every reader, and the few metadata fields
/// reads select on. The parsed object is not kept (keeps I5: what is charged is what is held);
/// a writer that needs it parses the JSON again ([`Stored::value`]).
#[derive(Debug)]
pub(crate) struct Stored {
    pub json: Bytes,
    pub rv: u64,
    pub meta: Meta,
}

/// What list, watch and selectors read of an object without parsing it.
#[derive(Debug, Default)]
pub(crate) struct Meta {
    pub namespace: Box<str>,
    pub name: Box<str>,
    /// `metadata.labels`, sorted by key.
    pub labels: Box<[(Box<str>, Box<str>)]>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
}

impl Meta {
    fn of(value: &Value) -> Meta {
        let m = &value["metadata"];
        let s = |f: &str| Box::<str>::from(m[f].as_str().unwrap_or_default());
        let mut labels: Vec<(Box<str>, Box<str>)> = m["labels"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.as_str().into(), v.as_str().unwrap_or_default().into()))
            .collect();
        labels.sort();
        Meta {
            namespace: s("namespace"),
            name: s("name"),
            labels: labels.into_boxed_slice(),
            deleting: !m["deletionTimestamp"].is_null(),
        }
    }

    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()
            .map(|i| self.labels[i].1.as_ref())
    }

    /// The bytes its strings take, as charged (keeps I5).
    fn bytes(&self) -> usize {
        self.labels
            .iter()
            .map(|(k, v)| k.len() + v.len() + LABEL_OVERHEAD)
            .sum::<usize>()
            .saturating_add(self.namespace.len() + self.name.len())
    }
}

impl Stored {
    fn new(mut value: Value, rv: u64) -> Arc<Self> {
        value["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        let json = Bytes::from(serde_json::to_vec(&value).expect("a JSON value serialises"));
        let meta = Meta::of(&value);
        Arc::new(Stored { json, rv, meta })
    }

    /// The object, parsed from its stored JSON.
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.json).expect("stored JSON is JSON")
    }

    /// The key it is stored under.
    pub fn key(&self) -> Key {
        (self.meta.namespace.to_string(), self.meta.name.to_string())
    }

    /// A stand-in for tests of the readers: `value` as stored at revision `rv`.
    #[cfg(test)]
    pub fn for_test(value: Value, rv: u64) -> Arc<Self> {
        let json = Bytes::from(serde_json::to_vec(&value).expect("a JSON value serialises"));
        let meta = Meta::of(&value);
        Arc::new(Stored { json, rv, meta })
    }
}

pub use crate::watch_event::EventType;

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
    /// Not delivered before this instant (tokio's clock): the commit's time plus the watch
    /// delay in force then (`delay_watch_events`); `None` without one.
    pub visible_at: Option<tokio::time::Instant>,
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
    /// A namespace's `/finalize` subresource: everything but `status` is taken from the body,
    /// `spec.finalizers` included (`namespaceFinalizeStrategy`).
    Finalize,
}

/// Conditions a delete must meet (`DeleteOptions.preconditions`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Preconditions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

/// Objects, revisions and history. See the module docs for the invariants.
#[derive(Debug)]
pub(crate) struct Storage {
    objects: Vec<BTreeMap<Key, Arc<Stored>>>,
    head: u64,
    compacted: u64,
    history: VecDeque<Arc<Event>>,
    /// The bytes charged for `history` (each event's JSON plus [`ENTRY_OVERHEAD`]).
    history_bytes: usize,
    /// The bytes charged for `objects` (keeps I5).
    stored_bytes: usize,
    limits: Limits,
    /// Writes still to be hidden from watchers (`drop_next_events`).
    drop_next: u64,
    /// How long after its commit each event reaches watchers (`delay_watch_events`).
    watch_delay: std::time::Duration,
    /// Counter behind `uid`s and `generateName` suffixes, so runs are reproducible.
    serial: u64,
    /// Writes are checked and staged but not committed (`dryRun=All`); set only for the
    /// duration of one write ([`Storage::dry_run`]).
    dry_run: bool,
    /// The namespace controller's sync is deleting a namespace's objects (`namespaces`): a
    /// delete does not start another sync.
    syncing: bool,
    /// The served kinds; `objects` has one map per id it ever gave out.
    kinds: Registry,
}

/// The bytes an object is charged: its JSON, its [`Meta`] and [`ENTRY_OVERHEAD`] (keeps I5).
fn cost(o: &Stored) -> usize {
    o.json
        .len()
        .saturating_add(o.meta.bytes())
        .saturating_add(ENTRY_OVERHEAD)
}

/// A resourceVersion as upstream's `APIObjectVersioner.ParseResourceVersion` reads it
/// (`strconv.ParseUint`, base 10): decimal digits only, no sign, no spaces, within `u64`.
/// `None` for anything else, including `+5`, which Rust's own `u64` parser would accept.
pub(crate) fn parse_revision(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u64>().ok()
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
    /// An empty store whose first revision is `first` (keeps I1: `first` is also the
    /// compacted revision, so nothing before it is readable).
    pub fn new(limits: Limits, first: u64) -> Self {
        let kinds = Registry::builtin();
        Storage {
            objects: (0..kinds.ids()).map(|_| BTreeMap::new()).collect(),
            kinds,
            head: first,
            compacted: first,
            history: VecDeque::new(),
            history_bytes: 0,
            stored_bytes: 0,
            limits: Limits {
                history: limits.history.max(1),
                ..limits
            },
            drop_next: 0,
            watch_delay: std::time::Duration::ZERO,
            serial: 0,
            dry_run: false,
            syncing: false,
        }
    }

    /// Runs `write` with every commit skipped: checks, name generation and staging happen, and
    /// the object the write would store is returned, but nothing changes (keeps I3).
    pub fn dry_run<T>(&mut self, write: impl FnOnce(&mut Self) -> T) -> T {
        self.dry_run = true;
        let out = write(self);
        self.dry_run = false;
        out
    }

    /// The newest revision.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// The newest revision that can no longer be watched from or read at.
    pub fn compacted(&self) -> u64 {
        self.compacted
    }

    /// The bytes charged for the history (at most `history_bytes` plus one event).
    #[cfg(test)]
    pub fn history_bytes(&self) -> usize {
        self.history_bytes
    }

    pub fn get(&self, kind: usize, ns: &str, name: &str) -> Option<Arc<Stored>> {
        self.objects[kind]
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
    }

    /// Hides the next `n` writes from watchers.
    pub fn drop_next_events(&mut self, n: u64) {
        self.drop_next = self.drop_next.saturating_add(n);
    }

    /// Delays every later write's event by `delay` (zero: none) on its way to watchers.
    pub fn delay_watch_events(&mut self, delay: std::time::Duration) {
        self.watch_delay = delay;
    }

    /// Forgets all history up to the head.
    pub fn compact(&mut self) -> u64 {
        self.history.clear();
        self.history_bytes = 0;
        self.compacted = self.head; // keeps I2
        self.compacted
    }

    /// A restart with the data kept: the head moves one revision past every revision the old
    /// server served, and all of them are compacted (I2 holds: the history is empty). A watch
    /// resumed from any of them gets 410, as from a kube-apiserver whose new watch cache
    /// starts above it. The one revision a write does not take (an exception to I1, as etcd's
    /// `--bump-revision --mark-compacted`). Returns the new head.
    pub fn restart(&mut self) -> u64 {
        self.head = self.head.saturating_add(1);
        self.compact()
    }

    /// Serialises `new` at the next revision and checks it against the size bounds (keeps I5):
    /// 413 for an object over `max_object_bytes`, 500 when storage would pass its quota.
    /// `replaces` is the object it takes the place of, whose bytes are given back.
    fn stage(&self, new: Value, replaces: Option<&Stored>) -> Result<Arc<Stored>, ApiError> {
        let rv = self
            .head
            .checked_add(1)
            .ok_or_else(|| ApiError::internal_error("the revision counter is exhausted"))?;
        let obj = Stored::new(new, rv);
        let limit = self.limits.max_object_bytes;
        if obj.json.len() > limit {
            return Err(ApiError::entity_too_large(format!(
                "the object would be {} bytes, more than the limit of {limit} bytes",
                obj.json.len()
            )));
        }
        let after = self
            .stored_bytes
            .saturating_sub(replaces.map_or(0, cost))
            .saturating_add(cost(&obj));
        if after > self.limits.max_storage_bytes && after > self.stored_bytes {
            return Err(ApiError::internal_error(format!(
                "database space exceeded: storing this would use {after} bytes, more than the quota of {} bytes",
                self.limits.max_storage_bytes
            )));
        }
        Ok(obj)
    }

    /// The last state of an object being deleted, at the next revision: never refused by the
    /// size bounds, since a delete frees space (keeps I5).
    fn stage_delete(&self, last: Value) -> Result<Arc<Stored>, ApiError> {
        let rv = self
            .head
            .checked_add(1)
            .ok_or_else(|| ApiError::internal_error("the revision counter is exhausted"))?;
        Ok(Stored::new(last, rv))
    }

    /// The only mutation point (keeps I1, I2, I3, I5): stores `obj` (or removes the key for a
    /// delete), records the event, advances the head. `obj` comes from [`Storage::stage`] or,
    /// for a delete, from [`Stored::new`] at the next revision.
    fn commit(
        &mut self,
        kind: usize,
        ty: EventType,
        key: Key,
        obj: Arc<Stored>,
        prev: Option<Arc<Stored>>,
        hidden: bool,
    ) -> Arc<Stored> {
        if self.dry_run {
            return dry(ty, &obj, prev.as_deref());
        }
        let rv = obj.rv;
        debug_assert_eq!(Some(rv), self.head.checked_add(1));
        self.stored_bytes = self
            .stored_bytes
            .saturating_sub(prev.as_deref().map_or(0, cost));
        if ty == EventType::Deleted {
            self.objects[kind].remove(&key);
        } else {
            self.stored_bytes = self.stored_bytes.saturating_add(cost(&obj));
            self.objects[kind].insert(key.clone(), obj.clone());
        }
        let hidden = hidden || self.drop_next > 0;
        self.drop_next = self.drop_next.saturating_sub(1);
        self.history_bytes = self.history_bytes.saturating_add(cost(&obj));
        self.history.push_back(Arc::new(Event {
            rv,
            kind,
            ty,
            key,
            obj: obj.clone(),
            prev,
            hidden,
            visible_at: (!self.watch_delay.is_zero())
                .then(|| tokio::time::Instant::now() + self.watch_delay),
        }));
        // The newest event always stays, so a watcher at the head never sees 410 for it.
        while self.history.len() > self.limits.history
            || (self.history_bytes > self.limits.history_bytes && self.history.len() > 1)
        {
            let old = self.history.pop_front().expect("non-empty");
            self.history_bytes = self.history_bytes.saturating_sub(cost(&old.obj));
            self.compacted = old.rv; // keeps I2
        }
        self.head = rv;
        obj
    }

    fn next_serial(&mut self) -> u64 {
        self.serial = self.serial.wrapping_add(1);
        self.serial
    }

    /// A name for `generateName` `prefix` not yet taken in `ns`; like upstream, up to eight
    /// candidates are tried before AlreadyExists. Names are checked like any other (keeps I6).
    fn generate_name(&mut self, kind: usize, ns: &str, prefix: &str) -> Result<String, ApiError> {
        let k = self.kind(kind)?;
        let mut name = String::new();
        for _ in 0..MAX_NAME_GENERATION_ATTEMPTS {
            // 7919 is prime to 36^5, so successive serials give distinct suffixes.
            let n = (self.next_serial() % 60_466_176) * 7919 % 60_466_176;
            name = validation::generated_name(prefix, &base36(n, validation::GENERATED_SUFFIX_LEN));
            if !self.objects[kind].contains_key(&(ns.to_string(), name.clone())) {
                if let Some(m) = k.name_rule.check(&name, false) {
                    return Err(ApiError::invalid(
                        &k.group,
                        &k.kind,
                        &name,
                        &[("metadata.name", m)],
                    ));
                }
                return Ok(name);
            }
        }
        Err(ApiError::already_exists(&k.group, &k.plural, &name))
    }

    /// Creates an object from a prepared body (see `Kind::prepare`).
    pub fn create(
        &mut self,
        kind: usize,
        mut obj: Value,
        now: Timestamp,
        hidden: bool,
    ) -> Result<Arc<Stored>, ApiError> {
        let k = self.kind(kind)?;
        let ns = meta_str(&obj, "namespace").to_string();
        let mut name = meta_str(&obj, "name").to_string();
        if k.namespaced {
            self.check_namespace_open(&k, &ns, &name)?;
        }
        if name.is_empty() {
            let prefix = meta_str(&obj, "generateName").to_string();
            if prefix.is_empty() {
                return Err(ApiError::invalid(
                    &k.group,
                    &k.kind,
                    "",
                    &[("metadata.name", "name or generateName is required".into())],
                ));
            }
            name = self.generate_name(kind, &ns, &prefix)?;
            obj["metadata"]["name"] = Value::String(name.clone());
        } else if let Some(m) = k.name_rule.check(&name, false) {
            return Err(ApiError::invalid(
                &k.group,
                &k.kind,
                &name,
                &[("metadata.name", m)],
            )); // keeps I6
        }
        // etcd3's store refuses a create carrying a resourceVersion with a plain error (a 500);
        // one it cannot parse as a revision it ignores, as upstream does.
        if parse_revision(meta_str(&obj, "resourceVersion")).is_some_and(|rv| rv != 0) {
            return Err(ApiError::internal_error(
                "metadata.resourceVersion must not be set on an object to be created",
            ));
        }
        let key = (ns, name.clone());
        if self.objects[kind].contains_key(&key) {
            return Err(ApiError::already_exists(&k.group, &k.plural, &name));
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
        k.prepare_for_create(&mut obj);
        let staged = self.stage(obj, None)?;
        Ok(self.commit(kind, EventType::Added, key, staged, None, hidden))
    }

    /// The namespace lifecycle admission's rule for a create in `ns`: the namespace exists
    /// (else 404, naming the namespace) and is not being deleted (else 403, with the
    /// `NamespaceTerminating` cause on `metadata.namespace` that client-go's controllers look
    /// for, as `HasStatusCause` reads it).
    fn check_namespace_open(&self, k: &Kind, ns: &str, name: &str) -> Result<(), ApiError> {
        match self.objects[NAMESPACES].get(&(String::new(), ns.to_string())) {
            None => Err(ApiError::not_found("", "namespaces", ns)),
            Some(n) if n.meta.deleting => {
                let mut e = ApiError::forbidden(
                    &k.group,
                    &k.plural,
                    name,
                    format!(
                        "the namespace {ns} is being deleted, so nothing new may be created in it"
                    ),
                );
                if let Some(d) = e.details.as_mut() {
                    d["causes"] = json!([{
                        "reason": "NamespaceTerminating",
                        "message": format!("namespace {ns} is being terminated"),
                        "field": "metadata.namespace",
                    }]);
                }
                Err(e)
            }
            Some(_) => Ok(()),
        }
    }

    /// Stores `obj` as part of the initial state, at the first revision: no event, no revision
    /// taken, as if it had been there before the store's history began (the initial
    /// namespaces). `obj` is prepared; its `uid` and `creationTimestamp` are set by the caller.
    pub fn seed(&mut self, kind: usize, obj: Value) {
        let stored = Stored::new(obj, self.head);
        self.stored_bytes = self.stored_bytes.saturating_add(cost(&stored));
        self.objects[kind].insert(stored.key(), stored);
    }

    /// Replaces an object, or its status, from a prepared body.
    pub fn update(
        &mut self,
        kind: usize,
        mut obj: Value,
        mode: UpdateMode,
        now: Timestamp,
    ) -> Result<Arc<Stored>, ApiError> {
        let k = self.kind(kind)?;
        let key = (
            meta_str(&obj, "namespace").to_string(),
            meta_str(&obj, "name").to_string(),
        );
        let name = key.1.clone();
        let Some(cur) = self.objects[kind].get(&key).cloned() else {
            return Err(ApiError::not_found(&k.group, &k.plural, &name));
        };
        let cur_v = cur.value();
        let rv = meta_str(&obj, "resourceVersion");
        if rv.is_empty() {
            if !k.unconditional_update {
                return Err(ApiError::invalid(
                    &k.group,
                    &k.kind,
                    &name,
                    &[(
                        "metadata.resourceVersion",
                        "must be specified for an update".into(),
                    )],
                ));
            }
        } else if rv != cur.rv.to_string() {
            return Err(ApiError::conflict(
                &k.group,
                &k.plural,
                &name,
                format!(
                    "it was read at resourceVersion {rv} and has changed since (now {})",
                    cur.rv
                ),
            ));
        }
        let uid = meta_str(&obj, "uid");
        if !uid.is_empty() && uid != meta_str(&cur_v, "uid") {
            return Err(ApiError::invalid(
                &k.group,
                &k.kind,
                &name,
                &[("metadata.uid", "field is immutable".into())],
            ));
        }
        if mode == UpdateMode::Status {
            obj = k.status_write(&obj, &cur_v);
        } else {
            // `ValidateObjectMetaUpdate`, then the kind's own update rules, in upstream's order.
            let mut causes = Vec::new();
            if !cur_v["metadata"]["deletionTimestamp"].is_null() {
                validation::no_new_finalizers(&obj["metadata"], &cur_v["metadata"], &mut causes);
            }
            validation::deletion_fields_kept(&mut obj["metadata"], &cur_v["metadata"], &mut causes);
            let meta_len = causes.len();
            k.validate_update(&obj, &cur_v, &mut causes);
            let rules = causes.split_off(meta_len);
            // A built-in kind's own rules for the object, checked here rather than in
            // `Kind::prepare` so that they come in upstream's order with the update rules.
            let own = k.validate_updated(&obj);
            let own = own.iter().map(|(f, r, m)| (f.as_str(), *r, m.clone()));
            let rules = rules.into_iter();
            // The finalize subresource checks each of `spec.finalizers` by name.
            let finalize = match mode {
                UpdateMode::Finalize => validation::spec_finalizer_causes(&obj, true),
                _ => Vec::new(),
            };
            let mut all: Vec<(&str, &str, String)> = causes;
            if k.update_rules_first() {
                all.extend(rules.chain(own));
            } else {
                all.extend(own.chain(rules));
            }
            all.extend(
                finalize
                    .iter()
                    .map(|(f, m)| (f.as_str(), "FieldValueInvalid", m.clone())),
            );
            if !all.is_empty() {
                return Err(ApiError::invalid_causes(&k.group, &k.kind, &name, &all));
            }
            // Server-owned metadata comes from storage, whatever the body says.
            for f in ["uid", "creationTimestamp", "generation"] {
                match cur_v["metadata"].get(f) {
                    Some(v) => obj["metadata"][f] = v.clone(),
                    None => {
                        obj["metadata"].as_object_mut().map(|m| m.remove(f));
                    }
                }
            }
            if k.status_subresource {
                match cur_v.get("status") {
                    Some(s) => obj["status"] = s.clone(),
                    None => {
                        obj.as_object_mut().map(|m| m.remove("status"));
                    }
                }
            }
            if mode == UpdateMode::Finalize {
                k.canonicalize(&mut obj);
                omit_empty_spec_finalizers(&mut obj);
            } else {
                k.prepare_for_update(&mut obj, &cur_v);
            }
            if k.tracks_generation && spec_differs(&obj, &cur_v) {
                let g = cur_v["metadata"]["generation"].as_i64().unwrap_or(0);
                obj["metadata"]["generation"] = json!(g.saturating_add(1));
            }
        }
        k.validate_rules_update(&obj, &cur_v)?;
        obj["metadata"]["resourceVersion"] = Value::String(cur.rv.to_string());
        if obj == cur_v {
            return Ok(cur); // keeps I4
        }
        // A namespace also waits for its `spec.finalizers` (`ShouldDeleteNamespaceDuringUpdate`).
        let finalizers_gone =
            !holds_finalizers(&obj, "metadata") && !holds_finalizers(&obj, "spec");
        if !obj["metadata"]["deletionTimestamp"].is_null() && finalizers_gone {
            // Upstream's store deletes the object instead (`deleteWithoutFinalizers`) and
            // answers the update's object at the version it was read at; from kube-apiserver
            // 1.38, at the delete's revision (the read one for a dry run).
            let ns = key.0.clone();
            let last = self.stage_delete(obj.clone())?;
            let deleted = self.commit(
                kind,
                EventType::Deleted,
                key,
                last,
                Some(cur.clone()),
                false,
            );
            if k.namespaced {
                self.content_left(&ns, now);
            }
            let at = if self.limits.kube_apiserver_minor >= 38 {
                deleted.rv
            } else {
                cur.rv
            };
            return Ok(Stored::new(obj, at));
        }
        let staged = self.stage(obj, Some(&cur))?;
        Ok(self.commit(kind, EventType::Modified, key, staged, Some(cur), false))
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
        let k = self.kind(kind)?;
        let key = (ns.to_string(), name.to_string());
        let Some(cur) = self.objects[kind].get(&key).cloned() else {
            return Err(ApiError::not_found(&k.group, &k.plural, name));
        };
        if kind == NAMESPACES && INITIAL_NAMESPACES.contains(&name) {
            return Err(ApiError::forbidden(
                &k.group,
                &k.plural,
                name,
                "this namespace may never be deleted".into(),
            ));
        }
        let cur_v = cur.value();
        if let Some(uid) = &pre.uid
            && uid != meta_str(&cur_v, "uid")
        {
            return Err(ApiError::conflict(
                &k.group,
                &k.plural,
                name,
                format!("the precondition uid {uid} does not match"),
            ));
        }
        if let Some(rv) = &pre.resource_version
            && *rv != cur.rv.to_string()
        {
            return Err(ApiError::conflict(
                &k.group,
                &k.plural,
                name,
                format!(
                    "the precondition resourceVersion {rv} does not match (now {})",
                    cur.rv
                ),
            ));
        }
        if kind == NAMESPACES && !cur.meta.deleting {
            // The namespace registry's first delete: mark it Terminating; the namespace
            // controller (here, at once) empties it and then finalizes it.
            let mut obj = cur_v;
            obj["metadata"]["deletionTimestamp"] = json!(now.to_string());
            obj["status"]["phase"] = json!("Terminating");
            // The caller runs the controller's sync next, in steps (`sync_namespace_step`).
            let staged = self.stage(obj, Some(&cur))?;
            return Ok(self.commit(kind, EventType::Modified, key, staged, Some(cur), false));
        }
        // A later delete of a namespace removes it only once `spec.finalizers` is empty; then
        // it is deleted as any object is (its metadata.finalizers may still hold it).
        if kind == NAMESPACES && holds_finalizers(&cur_v, "spec") {
            return Ok(cur);
        }
        let has_finalizers = cur_v["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if has_finalizers {
            if !cur_v["metadata"]["deletionTimestamp"].is_null() {
                return Ok(cur);
            }
            let mut obj = cur_v.clone();
            obj["metadata"]["deletionTimestamp"] = json!(now.to_string());
            obj["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            // Marking an object deleted bumps its generation, once (apiserver v0.36.3,
            // `pkg/registry/generic/registry/store.go`, `markAsDeleting`).
            if let Some(g) = cur_v["metadata"]["generation"].as_i64().filter(|g| *g > 0) {
                obj["metadata"]["generation"] = json!(g + 1);
            }
            let staged = self.stage(obj, Some(&cur))?;
            return Ok(self.commit(kind, EventType::Modified, key, staged, Some(cur), false));
        }
        let last = self.stage_delete(cur_v.clone())?;
        let last = self.commit(kind, EventType::Deleted, key, last, Some(cur), false);
        if k.namespaced {
            self.content_left(ns, now);
        }
        Ok(last)
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
                let cur_v = cur.value();
                for f in ["uid", "creationTimestamp", "generation"] {
                    if let Some(v) = cur_v["metadata"].get(f) {
                        obj["metadata"][f] = v.clone();
                    }
                }
                let staged = self.stage(obj, Some(&cur))?;
                Ok(self.commit(kind, EventType::Modified, key, staged, Some(cur), true))
            }
        }
    }
}

/// What a dry-run write answers (apiserver v0.37.2 `pkg/registry/generic/registry/dryrun.go`):
/// the object as the write would have stored it, at no revision: a create has no
/// resourceVersion, an update or delete keeps the stored object's.
fn dry(ty: EventType, obj: &Stored, prev: Option<&Stored>) -> Arc<Stored> {
    let mut v = obj.value();
    match (ty, prev) {
        (EventType::Added, _) | (_, None) => {
            if let Some(m) = v["metadata"].as_object_mut() {
                m.remove("resourceVersion");
            }
        }
        (_, Some(p)) => v["metadata"]["resourceVersion"] = json!(p.rv.to_string()),
    }
    let rv = prev.map_or(0, |p| p.rv);
    let json = Bytes::from(serde_json::to_vec(&v).expect("a JSON value serialises"));
    let meta = Meta::of(&v);
    Arc::new(Stored { json, rv, meta })
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

    fn store(history: usize) -> Storage {
        let limits = Limits {
            history,
            history_bytes: usize::MAX,
            max_object_bytes: usize::MAX,
            max_storage_bytes: usize::MAX,
            kube_apiserver_minor: 37,
        };
        with_namespace(Storage::new(limits, INITIAL_REVISION))
    }

    /// `st` with the namespace `d` the tests write in.
    fn with_namespace(mut st: Storage) -> Storage {
        st.seed(NAMESPACES, json!({"metadata": {"name": "d"}}));
        st
    }

    fn names_at(st: &Storage, at: Option<u64>) -> Vec<(String, String)> {
        let page = st.list(CONFIGMAPS, None, at, None, None).unwrap();
        page.items
            .iter()
            .map(|o| {
                (
                    o.value()["metadata"]["name"].as_str().unwrap().to_string(),
                    o.value()["data"]["v"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    fn pair(n: &str, v: &str) -> (String, String) {
        (n.to_string(), v.to_string())
    }

    #[test]
    fn a_list_at_an_old_revision_undoes_every_later_write() {
        let mut st = store(100);
        st.create(CONFIGMAPS, cm("a", "1"), t(), false).unwrap(); // 2
        st.create(CONFIGMAPS, cm("b", "1"), t(), false).unwrap(); // 3
        let mut a2 = cm("a", "2");
        a2["metadata"]["resourceVersion"] = json!("2");
        st.update(CONFIGMAPS, a2, UpdateMode::Main, t()).unwrap(); // 4
        st.delete(CONFIGMAPS, "d", "b", &Preconditions::default(), t())
            .unwrap(); // 5
        st.create(CONFIGMAPS, cm("c", "1"), t(), false).unwrap(); // 6
        assert_eq!(names_at(&st, Some(3)), [pair("a", "1"), pair("b", "1")]);
        assert_eq!(names_at(&st, Some(4)), [pair("a", "2"), pair("b", "1")]);
        assert_eq!(names_at(&st, None), [pair("a", "2"), pair("c", "1")]);
    }

    #[test]
    fn the_history_bound_compacts_and_old_reads_expire() {
        let mut st = store(2);
        for n in ["a", "b", "c"] {
            st.create(CONFIGMAPS, cm(n, "1"), t(), false).unwrap(); // 2, 3, 4
        }
        assert_eq!((st.head(), st.compacted()), (4, 2)); // keeps I2
        assert_eq!(st.events_after(2, usize::MAX).unwrap().len(), 2);
        assert_eq!(st.events_after(1, 9).unwrap_err().code, 410);
        assert_eq!(names_at(&st, Some(2)).len(), 1);
        assert_eq!(st.check_readable(9).unwrap_err().code, 504);
    }

    #[test]
    fn a_rejected_write_and_a_no_op_update_leave_head_and_history_alone() {
        let mut st = store(10);
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
            st.update(CONFIGMAPS, stale, UpdateMode::Main, t())
                .unwrap_err()
                .code,
            409
        );
        let same = st
            .update(CONFIGMAPS, a.value(), UpdateMode::Main, t())
            .unwrap();
        assert_eq!(same.rv, a.rv); // keeps I4
        assert_eq!((st.head(), st.history.len()), before); // keeps I3
    }

    #[test]
    fn a_store_starting_late_has_compacted_everything_before_its_first_revision() {
        let limits = store(10).limits;
        let mut st = with_namespace(Storage::new(limits, 1_000_000));
        assert_eq!(st.events_after(999_999, 9).unwrap_err().code, 410); // keeps I1
        let a = st.create(CONFIGMAPS, cm("a", "1"), t(), false).unwrap();
        assert_eq!(a.rv, 1_000_001);
        assert_eq!(st.events_after(1_000_000, 9).unwrap().len(), 1);
        assert_eq!(st.check_readable(5).unwrap_err().code, 410);
    }

    #[test]
    fn a_restart_keeps_the_objects_and_refuses_every_revision_it_served() {
        let mut st = store(10);
        let a = st.create(CONFIGMAPS, cm("a", "1"), t(), false).unwrap(); // 2
        st.create(CONFIGMAPS, cm("b", "1"), t(), false).unwrap(); // 3
        assert_eq!(st.restart(), 4);
        assert_eq!((st.head(), st.compacted()), (4, 4)); // keeps I1, I2
        for served in 1..=3 {
            assert_eq!(st.events_after(served, 9).unwrap_err().code, 410);
            assert_eq!(st.check_readable(served).unwrap_err().code, 410);
        }
        let kept = st.get(CONFIGMAPS, "d", "a").expect("the data is kept");
        assert_eq!(kept.rv, a.rv);
        assert_eq!(st.events_after(4, 9).unwrap().len(), 0);
        let c = st.create(CONFIGMAPS, cm("c", "1"), t(), false).unwrap();
        assert_eq!(c.rv, 5);
        assert_eq!(st.events_after(4, 9).unwrap().len(), 1);
    }

    #[test]
    fn history_is_bounded_in_bytes_as_well_as_events() {
        let mut st = store(1_000);
        st.limits.history_bytes = 3 * (ENTRY_OVERHEAD + 10_200);
        for i in 0..20 {
            st.create(
                CONFIGMAPS,
                cm(&format!("c{i}"), &"x".repeat(10_000)),
                t(),
                false,
            )
            .unwrap();
        }
        assert!(st.history.len() <= 3, "{}", st.history.len()); // keeps I2
        assert!(st.history_bytes() <= st.limits.history_bytes);
        assert_eq!(st.compacted() + st.history.len() as u64, st.head());
        assert_eq!(st.events_after(2, 99).unwrap_err().code, 410);
    }

    #[test]
    fn an_object_over_the_size_limit_is_413_and_the_quota_refuses_growth_but_not_deletes() {
        let mut st = store(10);
        st.limits.max_object_bytes = 2_000;
        assert_eq!(
            st.create(CONFIGMAPS, cm("big", &"x".repeat(3_000)), t(), false)
                .unwrap_err()
                .code,
            413
        );
        // Room for two objects beside the namespace `d`.
        st.limits.max_storage_bytes = st.stored_bytes + 2 * (ENTRY_OVERHEAD + 1_300);
        st.create(CONFIGMAPS, cm("a", &"x".repeat(1_000)), t(), false)
            .unwrap();
        st.create(CONFIGMAPS, cm("b", &"x".repeat(1_000)), t(), false)
            .unwrap();
        let before = (st.head(), st.stored_bytes);
        let e = st
            .create(CONFIGMAPS, cm("c", &"x".repeat(1_000)), t(), false)
            .unwrap_err();
        assert_eq!((e.code, before), (500, (st.head(), st.stored_bytes))); // keeps I3, I5
        st.delete(CONFIGMAPS, "d", "a", &Preconditions::default(), t())
            .unwrap();
        st.create(CONFIGMAPS, cm("c", &"x".repeat(1_000)), t(), false)
            .unwrap();
    }

    #[test]
    fn generated_names_are_checked_and_retried_past_taken_ones() {
        let mut st = store(10);
        let mut g = cm("", "1");
        g["metadata"]["generateName"] = json!("web-");
        let first = st.create(CONFIGMAPS, g.clone(), t(), false).unwrap();
        let name = first.value()["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(name.starts_with("web-") && name.len() == 9, "{name}");
        // The next serial's name is taken by hand: the create tries the one after.
        st.serial = 0;
        let second = st.create(CONFIGMAPS, g.clone(), t(), false).unwrap();
        assert_ne!(
            second.value()["metadata"]["name"],
            first.value()["metadata"]["name"]
        );
        g["metadata"]["generateName"] = json!("a/");
        let e = st.create(CONFIGMAPS, g, t(), false).unwrap_err();
        assert_eq!(e.code, 422); // keeps I6
        let mut slash = cm("x", "1");
        slash["metadata"]["name"] = json!("a/b");
        assert_eq!(
            st.create(CONFIGMAPS, slash, t(), false).unwrap_err().code,
            422
        );
    }
}
