//! An emulation of client-go's fake clientset: an in-memory list/watch source, not HTTP.
//!
//! The fake is client-side code in client-go (`kubernetes/fake`), so it lives beside the client
//! side here and shares nothing with the embedded server. An informer reaches it, like any
//! cluster, only through a [`ListerWatcher`](crate::cache::ListerWatcher):
//! [`FakeListerWatcher`] is that adapter.
//!
//! Follows `k8s.io/client-go/testing/fixture.go` (the `ObjectTracker` behind
//! `kubernetes/fake.NewSimpleClientset`) and `apimachinery/pkg/watch.RaceFreeFakeWatcher`, at
//! the pinned **client-go v0.37** (v0.37.2; its fake behaves as v0.36.3's), and at client-go
//! v0.38.0-beta.0 when built with [`FakeClientset::at_minor`]`(38)`. The chapters that contrast
//! with the seed use it to show what a test on the fake cannot see.
//!
//! What the fake does, and the real server does not:
//! - it stores objects exactly as given: `metadata.resourceVersion` is **never set** (nor
//!   `uid`, `generation`, `creationTimestamp`);
//! - it performs **no conflict check**: an update with a stale or empty resourceVersion wins;
//! - each watcher's buffer holds **100 events**, and a write that finds it full **panics**
//!   with "channel full", on the writer's thread, as upstream's `RaceFreeFakeWatcher` does.
//!
//! What v0.36 added, and this models: a *hidden* per-resource counter. `list` reports it as the
//! list's resourceVersion (`"1"` if nothing was ever stored), and `watch(rv)` first replays as
//! ADDED every existing object stored after `rv` (all of them for `""`). Deletes do not move
//! the counter. Before v0.36 a watch replayed nothing and list versions were empty.
//!
//! What v0.38 changes (`testing/fixture.go` at v0.38.0-beta.0), at [`FakeClientset::at_minor`]`(38)`:
//! a delete moves the counter too, and the last 100 deletions per resource are kept. A watch
//! from `rv` (not `""` or `"0"`) first replays as DELETED every kept deletion after `rv` in its
//! namespace, then the ADDED objects. If a deletion after `rv` was already dropped, or the
//! replay would not fit the 100-event buffer, the watch instead sends one error event, a 410
//! "too old resource version", and ends ([`FakeError::Expired`]), where v0.37 panicked or lost
//! the deletion.
//!
//! ```
//! use controlloop::fake::FakeClientset;
//! use k8s_openapi::api::core::v1::ConfigMap;
//!
//! let fake = FakeClientset::new();
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("a".into());
//! fake.create("default", &cm).unwrap();
//! cm.metadata.resource_version = Some("stale".into());
//! fake.update("default", &cm).unwrap(); // no conflict check
//! let list = fake.list::<ConfigMap>(Some("default")).unwrap();
//! assert_eq!(list.items[0].metadata.resource_version.as_deref(), Some("stale"));
//! assert_eq!(list.resource_version, "3"); // hidden counter: 1, then 2 and 3
//! assert!(fake.is_watch_list_semantics_unsupported());
//! ```
//!
//! # Invariants
//! 1. Stored objects are exactly what the caller passed (namespace filled in if empty).
//! 2. A change is sent to the watchers of its namespace and to the all-namespace watchers,
//!    in the order the changes were made, under the tracker lock.
//!
//! # Concurrency
//! One `parking_lot::Mutex` guards objects, counters and watchers. A panic for a full channel
//! unwinds through the guard, which unlocks (upstream's deferred unlock).
//!
//! # Differences from upstream
//! - Objects are typed through serde rather than a runtime scheme; one tracker serves any
//!   `kube::Resource` type.
//! - `NewClientset`'s field-managed tracker (server-side apply) is not modelled.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::marker::PhantomData;
use std::sync::Arc;

use kube::Resource;
use parking_lot::Mutex;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::mpsc;

mod lister_watcher;

// The fake's watch events carry apimachinery's `watch.EventType`, as far as the tracker sends
// it: the same three types the embedded server's watches send.
use crate::watch_event::EventType;

pub use lister_watcher::FakeListerWatcher;

/// The watch buffer size: apimachinery's `watch.DefaultChanSize`.
pub const DEFAULT_CHAN_SIZE: usize = 100;

/// The fake's errors, named after the apimachinery errors the tracker returns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FakeError {
    /// Create of a name that exists.
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists {
        /// The resource (plural).
        resource: String,
        /// The object name.
        name: String,
    },
    /// Update, get or delete of a name that does not exist.
    #[error("{resource} \"{name}\" not found")]
    NotFound {
        /// The resource (plural).
        resource: String,
        /// The object name.
        name: String,
    },
    /// The object's namespace differs from the request's.
    #[error("request namespace {request:?} does not match object namespace {object:?}")]
    NamespaceMismatch {
        /// The namespace of the call.
        request: String,
        /// The namespace in the object.
        object: String,
    },
    /// A watch resourceVersion that is not an integer.
    #[error("invalid resourceVersion {0:?}: must be an integer")]
    InvalidResourceVersion(String),
    /// client-go v0.38: the watch's history is gone (410 Gone, reason Expired), sent as the
    /// watch's only event.
    #[error("too old resource version: {0}")]
    Expired(u64),
    /// A client-go minor whose fake is not modelled.
    #[error("the fake clientset of client-go v0.{0} is not modelled (v0.36 to v0.38 are)")]
    UnmodelledMinor(u32),
    /// The object could not be converted to or from JSON.
    #[error("object (de)serialisation failed: {0}")]
    Serde(String),
}

/// A list, as the fake returns it.
#[derive(Debug, Clone)]
pub struct FakeList<K> {
    /// The objects, exactly as stored.
    pub items: Vec<K>,
    /// The hidden counter of the resource (`"1"` if nothing was ever stored).
    pub resource_version: String,
}

/// One event from a fake watch.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeEvent<K> {
    /// ADDED, MODIFIED or DELETED.
    pub ty: EventType,
    /// The object, as stored.
    pub object: K,
}

struct Sender {
    namespace: String,
    tx: mpsc::Sender<(EventType, Arc<Value>)>,
}

/// `(namespace, name)` -> (hidden version, object), for one resource.
type Objects = BTreeMap<(String, String), (u64, Arc<Value>)>;

/// How many deletions client-go v0.38's tracker keeps per resource (`maxTrackedDeletions`: the
/// buffer of a new watch).
const MAX_TRACKED_DELETIONS: usize = DEFAULT_CHAN_SIZE;

/// One kept deletion: the version the delete took, the namespace, the object as it was.
type Deletion = (u64, String, Arc<Value>);

#[derive(Default)]
struct Tracker {
    /// client-go v0.38's tracker: deletes move the counter and are replayed.
    v038: bool,
    /// resource -> the kept deletions, oldest first (v0.38).
    deletions: HashMap<String, VecDeque<Deletion>>,
    /// resource -> the version of the newest deletion dropped from `deletions` (v0.38).
    compacted: HashMap<String, u64>,
    /// resource -> (namespace, name) -> (hidden version, object).
    objects: HashMap<String, Objects>,
    /// resource -> the hidden counter.
    versions: HashMap<String, u64>,
    /// resource -> watchers; stopped ones are never removed (upstream).
    watchers: HashMap<String, Vec<Sender>>,
}

impl Tracker {
    fn notify(&self, resource: &str, ns: &str, ty: EventType, obj: &Arc<Value>) {
        for w in self.watchers.get(resource).into_iter().flatten() {
            if w.namespace == ns || w.namespace.is_empty() {
                send(&w.tx, ty, obj.clone());
            }
        }
    }
}

/// A non-blocking send, as `RaceFreeFakeWatcher` does: a stopped watcher ignores it, a full
/// buffer is a panic.
fn send(tx: &mpsc::Sender<(EventType, Arc<Value>)>, ty: EventType, obj: Arc<Value>) {
    match tx.try_send((ty, obj)) {
        Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
        Err(mpsc::error::TrySendError::Full(_)) => panic!("channel full"),
    }
}

/// client-go's fake clientset (`NewSimpleClientset`) at v0.37 (or, from
/// [`FakeClientset::at_minor`], at another modelled minor), as a list/watch source.
#[derive(Clone, Default)]
pub struct FakeClientset {
    tracker: Arc<Mutex<Tracker>>,
}

impl std::fmt::Debug for FakeClientset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeClientset").finish_non_exhaustive()
    }
}

fn resource<K: Resource<DynamicType = ()>>() -> String {
    format!("{}/{}", K::api_version(&()), K::plural(&()))
}

fn to_value<K: Serialize>(obj: &K) -> Result<Value, FakeError> {
    serde_json::to_value(obj).map_err(|e| FakeError::Serde(e.to_string()))
}

fn from_value<K: DeserializeOwned>(v: &Value) -> Result<K, FakeError> {
    K::deserialize(v).map_err(|e| FakeError::Serde(e.to_string()))
}

impl FakeClientset {
    /// An empty fake, as client-go v0.37's.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty fake as client-go `v0.{minor}`'s: 36 and 37 behave alike, 38 moves the
    /// counter on deletes and replays them (see the module docs).
    ///
    /// ```
    /// use controlloop::fake::{FakeClientset, FakeError};
    /// use k8s_openapi::api::core::v1::ConfigMap;
    ///
    /// let fake = FakeClientset::at_minor(38)?;
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("a".into());
    /// fake.create("default", &cm)?;
    /// let listed = fake.list::<ConfigMap>(Some("default"))?.resource_version; // "2"
    /// fake.delete::<ConfigMap>("default", "a")?;
    /// assert_eq!(fake.list::<ConfigMap>(Some("default"))?.resource_version, "3");
    /// let mut w = fake.watch::<ConfigMap>(Some("default"), &listed)?;
    /// assert_eq!(w.try_next().unwrap()?.ty.as_str(), "DELETED");
    /// assert!(matches!(FakeClientset::at_minor(35), Err(FakeError::UnmodelledMinor(35))));
    /// # Ok::<(), FakeError>(())
    /// ```
    pub fn at_minor(minor: u32) -> Result<Self, FakeError> {
        match minor {
            36 | 37 => Ok(Self::new()),
            38 => Ok(Self {
                tracker: Arc::new(Mutex::new(Tracker {
                    v038: true,
                    ..Tracker::default()
                })),
            }),
            _ => Err(FakeError::UnmodelledMinor(minor)),
        }
    }

    /// Always true: reflectors never try a streaming list against the fake.
    pub fn is_watch_list_semantics_unsupported(&self) -> bool {
        true
    }

    fn put<K>(&self, ns: &str, obj: &K, replace: bool) -> Result<K, FakeError>
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    {
        let res = resource::<K>();
        let mut v = to_value(obj)?;
        let obj_ns = v["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if obj_ns.is_empty() {
            v["metadata"]["namespace"] = Value::String(ns.to_string());
        } else if obj_ns != ns {
            return Err(FakeError::NamespaceMismatch {
                request: ns.into(),
                object: obj_ns,
            });
        }
        let name = v["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let mut t = self.tracker.lock();
        let version = t.versions.get(&res).copied().unwrap_or(1) + 1;
        let key = (ns.to_string(), name.clone());
        let exists = t.objects.get(&res).is_some_and(|m| m.contains_key(&key));
        let ty = match (exists, replace) {
            (true, false) => {
                return Err(FakeError::AlreadyExists {
                    resource: res,
                    name,
                });
            }
            (false, true) => {
                return Err(FakeError::NotFound {
                    resource: res,
                    name,
                });
            }
            (true, true) => EventType::Modified,
            (false, false) => EventType::Added,
        };
        let v = Arc::new(v);
        t.versions.insert(res.clone(), version);
        t.objects
            .entry(res.clone())
            .or_default()
            .insert(key, (version, v.clone()));
        t.notify(&res, ns, ty, &v); // keeps I2
        from_value(&v)
    }

    /// Stores a new object unchanged. An existing name is `AlreadyExists`.
    pub fn create<K>(&self, ns: &str, obj: &K) -> Result<K, FakeError>
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    {
        self.put(ns, obj, false)
    }

    /// Replaces an object unchanged, with no resourceVersion check. A missing name is
    /// `NotFound`.
    pub fn update<K>(&self, ns: &str, obj: &K) -> Result<K, FakeError>
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    {
        self.put(ns, obj, true)
    }

    /// Removes an object at once (finalizers are ignored). The counter does not move; at v0.38
    /// it does, and the deletion is kept for watches that start before it.
    pub fn delete<K>(&self, ns: &str, name: &str) -> Result<(), FakeError>
    where
        K: Resource<DynamicType = ()>,
    {
        let res = resource::<K>();
        let mut t = self.tracker.lock();
        let removed = t
            .objects
            .get_mut(&res)
            .and_then(|m| m.remove(&(ns.to_string(), name.to_string())));
        match removed {
            None => Err(FakeError::NotFound {
                resource: res,
                name: name.into(),
            }),
            Some((_, v)) => {
                if t.v038 {
                    let version = t.versions.get(&res).copied().unwrap_or(1) + 1;
                    t.versions.insert(res.clone(), version);
                    let kept = t.deletions.entry(res.clone()).or_default();
                    kept.push_back((version, ns.to_string(), v.clone()));
                    if kept.len() > MAX_TRACKED_DELETIONS {
                        let (dropped, _, _) = kept.pop_front().expect("more than the bound");
                        t.compacted.insert(res.clone(), dropped);
                    }
                }
                t.notify(&res, ns, EventType::Deleted, &v);
                Ok(())
            }
        }
    }

    /// Gets an object as stored.
    pub fn get<K>(&self, ns: &str, name: &str) -> Result<K, FakeError>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let res = resource::<K>();
        let t = self.tracker.lock();
        let found = t
            .objects
            .get(&res)
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())));
        match found {
            Some((_, v)) => from_value(v),
            None => Err(FakeError::NotFound {
                resource: res,
                name: name.into(),
            }),
        }
    }

    /// Lists objects in `ns` (all namespaces if `None`), with the hidden counter as the
    /// list's resourceVersion.
    pub fn list<K>(&self, ns: Option<&str>) -> Result<FakeList<K>, FakeError>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let res = resource::<K>();
        let t = self.tracker.lock();
        let rv = t.versions.get(&res).copied().unwrap_or(1);
        let items = t
            .objects
            .get(&res)
            .into_iter()
            .flatten()
            .filter(|((n, _), _)| ns.is_none_or(|ns| ns == n))
            .map(|(_, (_, v))| from_value(v))
            .collect::<Result<_, _>>()?;
        Ok(FakeList {
            items,
            resource_version: rv.to_string(),
        })
    }

    /// Opens a watch in `ns` (all namespaces if `None`). Existing objects stored after
    /// `resource_version` (all of them for `""`) are replayed as ADDED first; more than 100 of
    /// them panic here, as upstream's do. At v0.38 the kept deletions after a non-zero
    /// `resource_version` come before them, and a history that is gone or does not fit the
    /// buffer makes a watch whose only event is [`FakeError::Expired`].
    pub fn watch<K>(
        &self,
        ns: Option<&str>,
        resource_version: &str,
    ) -> Result<FakeWatch<K>, FakeError>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let from = if resource_version.is_empty() {
            0
        } else {
            resource_version
                .parse::<u64>()
                .map_err(|_| FakeError::InvalidResourceVersion(resource_version.into()))?
        };
        let res = resource::<K>();
        let (tx, rx) = mpsc::channel(DEFAULT_CHAN_SIZE);
        let mut t = self.tracker.lock();
        let in_ns = |n: &String| ns.is_none_or(|ns| ns == n);
        let mut replay = Vec::new();
        if t.v038 && from > 0 {
            let deleted = t.deletions.get(&res).into_iter().flatten();
            replay.extend(
                deleted
                    .filter(|(version, n, _)| *version > from && in_ns(n))
                    .map(|(_, _, v)| (EventType::Deleted, v.clone())),
            );
        }
        let stored = t.objects.get(&res).into_iter().flatten();
        replay.extend(
            stored
                .filter(|((n, _), (version, _))| *version > from && in_ns(n))
                .map(|(_, (_, v))| (EventType::Added, v.clone())),
        );
        let compacted = t.compacted.get(&res).copied().unwrap_or(0);
        if t.v038 && from > 0 && (from < compacted || replay.len() > DEFAULT_CHAN_SIZE) {
            drop(tx); // never registered: the watch ends after its error
            return Ok(FakeWatch {
                rx,
                expired: Some(from),
                _k: PhantomData,
            });
        }
        for (ty, v) in replay {
            send(&tx, ty, v);
        }
        t.watchers.entry(res).or_default().push(Sender {
            namespace: ns.unwrap_or_default().to_string(),
            tx,
        });
        Ok(FakeWatch {
            rx,
            expired: None,
            _k: PhantomData,
        })
    }
}

/// A watch on the fake. Dropping it (or [`FakeWatch::stop`]) stops it; later sends are
/// ignored, and the tracker keeps the dead entry, as upstream does.
#[derive(Debug)]
pub struct FakeWatch<K> {
    rx: mpsc::Receiver<(EventType, Arc<Value>)>,
    /// v0.38: the watch's only event is this expired error (the resourceVersion it asked for).
    expired: Option<u64>,
    _k: PhantomData<fn() -> K>,
}

impl<K: DeserializeOwned> FakeWatch<K> {
    /// The next event; `None` once stopped and drained.
    pub async fn next(&mut self) -> Option<Result<FakeEvent<K>, FakeError>> {
        if let Some(rv) = self.expired.take() {
            return Some(Err(FakeError::Expired(rv)));
        }
        let (ty, v) = self.rx.recv().await?;
        Some(from_value(&v).map(|object| FakeEvent { ty, object }))
    }

    /// The next event if one is buffered.
    pub fn try_next(&mut self) -> Option<Result<FakeEvent<K>, FakeError>> {
        if let Some(rv) = self.expired.take() {
            return Some(Err(FakeError::Expired(rv)));
        }
        let (ty, v) = self.rx.try_recv().ok()?;
        Some(from_value(&v).map(|object| FakeEvent { ty, object }))
    }

    /// How many events are buffered (at most [`DEFAULT_CHAN_SIZE`]).
    pub fn buffered(&self) -> usize {
        self.rx.len() + usize::from(self.expired.is_some())
    }

    /// Stops the watch: buffered events can still be read, new ones are dropped.
    pub fn stop(&mut self) {
        self.rx.close();
    }
}
