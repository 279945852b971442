//! An emulation of client-go's fake clientset: an in-memory list/watch source, not HTTP.
//!
//! The fake is client-side code in client-go (`kubernetes/fake`), so it lives beside the client
//! side here and shares nothing with the embedded server. An informer reaches it, like any
//! cluster, only through a [`ListerWatcher`](crate::cache::ListerWatcher):
//! [`FakeListerWatcher`] is that adapter.
//!
//! Follows `k8s.io/client-go/testing/fixture.go` (the `ObjectTracker` behind
//! `kubernetes/fake.NewSimpleClientset`) and `apimachinery/pkg/watch.RaceFreeFakeWatcher`, at
//! the pinned **client-go v0.37** (v0.37.2; its fake behaves as v0.36.3's). The chapters that contrast with the seed use it to show
//! what a test on the fake cannot see.
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

use std::collections::{BTreeMap, HashMap};
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

#[derive(Default)]
struct Tracker {
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

/// client-go's fake clientset (`NewSimpleClientset`) at v0.37, as a list/watch source.
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
    /// An empty fake.
    pub fn new() -> Self {
        Self::default()
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

    /// Removes an object at once (finalizers are ignored). The counter does not move.
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
    /// them panic here, as upstream's do.
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
        for ((n, _), (version, v)) in t.objects.get(&res).into_iter().flatten() {
            if ns.is_none_or(|ns| ns == n) && *version > from {
                send(&tx, EventType::Added, v.clone());
            }
        }
        t.watchers.entry(res).or_default().push(Sender {
            namespace: ns.unwrap_or_default().to_string(),
            tx,
        });
        Ok(FakeWatch {
            rx,
            _k: PhantomData,
        })
    }
}

/// A watch on the fake. Dropping it (or [`FakeWatch::stop`]) stops it; later sends are
/// ignored, and the tracker keeps the dead entry, as upstream does.
#[derive(Debug)]
pub struct FakeWatch<K> {
    rx: mpsc::Receiver<(EventType, Arc<Value>)>,
    _k: PhantomData<fn() -> K>,
}

impl<K: DeserializeOwned> FakeWatch<K> {
    /// The next event; `None` once stopped and drained.
    pub async fn next(&mut self) -> Option<Result<FakeEvent<K>, FakeError>> {
        let (ty, v) = self.rx.recv().await?;
        Some(from_value(&v).map(|object| FakeEvent { ty, object }))
    }

    /// The next event if one is buffered.
    pub fn try_next(&mut self) -> Option<Result<FakeEvent<K>, FakeError>> {
        let (ty, v) = self.rx.try_recv().ok()?;
        Some(from_value(&v).map(|object| FakeEvent { ty, object }))
    }

    /// How many events are buffered (at most [`DEFAULT_CHAN_SIZE`]).
    pub fn buffered(&self) -> usize {
        self.rx.len()
    }

    /// Stops the watch: buffered events can still be read, new ones are dropped.
    pub fn stop(&mut self) {
        self.rx.close();
    }
}
