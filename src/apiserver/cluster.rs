//! The embedded cluster's state: [`Cluster`] (storage, watch hub and test controls) and what
//! the router, the watchers and the handles share. The router itself is built above it
//! (`Cluster::router` in the parent), so the handlers stand on this file and never on the
//! module that names them. Follows kube-apiserver's generic registry over etcd
//! (`k8s.io/apiserver`, v0.37) as the parent module describes.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use parking_lot::Mutex;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::controls::{self, Failure, RequestLog, RequestRecord};
use super::errors::ApiError;
use super::kinds;
use super::options::ServerOptions;
use super::storage::{self, INITIAL_REVISION, Storage};

/// What watchers wait on.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Signal {
    /// The newest revision.
    pub(super) head: u64,
    /// Bumped by `close_watches`: every watch open at the time ends.
    pub(super) closes: u64,
    /// Bumped by `expire_watches`: every watch open at the time gets ERROR 410, then ends.
    pub(super) expires: u64,
    /// Bumped by `send_bookmarks`: every watch allowing bookmarks gets one.
    pub(super) bookmarks: u64,
}

/// State shared by the router, the watchers and the handles.
pub(crate) struct Shared {
    pub(super) storage: Mutex<Storage>,
    pub(super) signal: tokio::sync::watch::Sender<Signal>,
    pub(super) options: ServerOptions,
    /// Why a separate mutex: the log is appended after every response and read by tests,
    /// and must never wait for a storage write. Bounded in bytes (controls I1).
    pub(super) log: Mutex<RequestLog>,
    /// One permit per open watch (watch I4): a full semaphore answers 429.
    pub(super) watches: Arc<tokio::sync::Semaphore>,
    /// The number of open watches, for [`Cluster::wait_for_open_watches`].
    pub(super) open_watches: tokio::sync::watch::Sender<usize>,
    /// Woken after every append to `log`, so a test can wait for a request instead of polling.
    pub(super) logged: tokio::sync::Notify,
    pub(super) faults: Mutex<controls::Faults>,
    /// `host:port` for the `/api` discovery document; empty in-process.
    pub(super) address: Mutex<String>,
    pub(super) epoch: Timestamp,
    pub(super) started: tokio::time::Instant,
}

/// The embedded cluster: storage, watch hub, router and test controls, without a socket.
///
/// Cheap to clone; every clone is the same cluster.
#[derive(Clone)]
pub struct Cluster {
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("resource_version", &self.resource_version())
            .finish()
    }
}

/// The namespaces a fresh cluster has ([`kinds::INITIAL_NAMESPACES`]), stored as part of its
/// initial state: at the first revision, with no event, and with `uid`s of their own so that
/// every later object's `uid` and generated name are what they would be without them.
fn seed_namespaces(storage: &mut Storage, epoch: Timestamp) {
    let k = storage
        .kind(kinds::NAMESPACES)
        .expect("namespaces are built in");
    let created = Timestamp::from_second(epoch.as_second()).unwrap_or(epoch);
    for (i, name) in kinds::INITIAL_NAMESPACES.iter().enumerate() {
        let body = serde_json::json!({"metadata": {"name": name}});
        let mut ns = k.prepare("", None, body).expect("a valid namespace");
        k.prepare_for_create(&mut ns);
        ns["metadata"]["uid"] = serde_json::json!(format!("00000000-0000-4000-a000-{i:012x}"));
        ns["metadata"]["creationTimestamp"] = serde_json::json!(created.to_string());
        storage.seed(kinds::NAMESPACES, ns);
    }
}

pub(super) fn kind_of<K: kube::Resource<DynamicType = ()>>(
    storage: &Storage,
) -> Result<usize, ApiError> {
    let found = storage.registry().find_kind(&K::group(&()), &K::kind(&()));
    found.ok_or_else(|| {
        ApiError::bad_request(format!("the server does not serve {}", K::plural(&())))
    })
}

impl Cluster {
    /// A new, empty cluster (revision 1, like a fresh etcd, unless
    /// [`ServerOptions::first_revision`] says otherwise).
    pub fn new(options: ServerOptions) -> Self {
        let first = options.first_revision.unwrap_or(INITIAL_REVISION);
        let (signal, _) = tokio::sync::watch::channel(Signal {
            head: first,
            ..Signal::default()
        });
        let limits = storage::Limits {
            history: options.history,
            history_bytes: options.history_bytes,
            max_object_bytes: options.max_object_bytes,
            max_storage_bytes: options.max_storage_bytes,
            kube_apiserver_minor: options.kube_apiserver_minor,
        };
        let epoch = options.epoch.unwrap_or_else(Timestamp::now);
        let mut storage = Storage::new(limits, first);
        seed_namespaces(&mut storage, epoch);
        Cluster {
            shared: Arc::new(Shared {
                storage: Mutex::new(storage),
                signal,
                epoch,
                log: Mutex::new(RequestLog::new(options.request_log_bytes)),
                watches: Arc::new(tokio::sync::Semaphore::new(options.max_watches)),
                open_watches: tokio::sync::watch::Sender::new(0),
                options,
                logged: tokio::sync::Notify::new(),
                faults: Mutex::new(controls::Faults::default()),
                address: Mutex::new(String::new()),
                started: tokio::time::Instant::now(),
            }),
        }
    }

    pub(super) fn now(&self) -> Timestamp {
        let elapsed = tokio::time::Instant::now() - self.shared.started;
        let d = SignedDuration::try_from(elapsed).unwrap_or(SignedDuration::ZERO);
        let t = self
            .shared
            .epoch
            .checked_add(d)
            .unwrap_or(self.shared.epoch);
        // metav1.Time has whole seconds on the wire.
        Timestamp::from_second(t.as_second()).unwrap_or(t)
    }

    /// Runs one storage write and publishes the new head (keeps I1).
    pub(super) fn write<T>(
        &self,
        f: impl FnOnce(&mut Storage) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let (out, head) = {
            let mut st = self.shared.storage.lock();
            let out = f(&mut st)?;
            (out, st.head())
        };
        self.shared.signal.send_if_modified(|s| {
            let moved = s.head != head;
            s.head = head;
            moved
        });
        Ok(out)
    }

    /// The newest resourceVersion (etcd's revision). An empty cluster is at 1.
    pub fn resource_version(&self) -> u64 {
        self.shared.storage.lock().head()
    }

    /// The requests answered so far, oldest first: the newest that fit in
    /// [`ServerOptions::request_log_bytes`] (older ones are dropped, see
    /// [`Cluster::requests_dropped`]).
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.log.lock().records().to_vec()
    }

    /// How many request records were dropped to keep the log within its byte bound.
    pub fn requests_dropped(&self) -> u64 {
        self.shared.log.lock().dropped()
    }

    /// Waits until `done` holds for the request log, re-checking after every logged request.
    /// Put a timeout around it: it waits for as long as no matching request comes.
    pub async fn wait_for_requests(&self, mut done: impl FnMut(&[RequestRecord]) -> bool) {
        loop {
            // Register before checking, so a request logged in between still wakes us.
            let notified = self.shared.logged.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if done(self.shared.log.lock().records()) {
                return;
            }
            notified.await;
        }
    }

    /// The watches open now (at most [`ServerOptions::max_watches`]).
    pub fn open_watches(&self) -> usize {
        *self.shared.open_watches.borrow()
    }

    /// Waits until `done` holds for the number of open watches, re-checking whenever a watch
    /// opens or ends. Put a timeout around it.
    pub async fn wait_for_open_watches(&self, mut done: impl FnMut(usize) -> bool) {
        let mut open = self.shared.open_watches.subscribe();
        // The sender lives as long as the cluster, which `self` keeps alive.
        let _ = open.wait_for(|n| done(*n)).await;
    }

    /// Empties the request log.
    pub fn clear_requests(&self) {
        self.shared.log.lock().clear();
    }

    /// The next `n` writes happen, and take revisions, but no watcher sees their events.
    pub fn drop_next_events(&self, n: u64) {
        self.shared.storage.lock().drop_next_events(n);
    }

    /// From now on, every write's event reaches watchers `delay` after the write (tokio's
    /// clock), in order; `Duration::ZERO` ends the delay for later writes. Lists and gets are
    /// not delayed: a client that wrote sees its write in the response at once and on the
    /// server, while its informer's cache is `delay` behind, as behind a busy watch cache or a
    /// slow link.
    pub fn delay_watch_events(&self, delay: Duration) {
        self.shared.storage.lock().delay_watch_events(delay);
    }

    /// Ends every open watch stream cleanly, as an apiserver restart or a load balancer does.
    pub fn close_watches(&self) {
        self.shared.signal.send_modify(|s| s.closes += 1);
    }

    /// Sends every open watch an ERROR event carrying a 410 Expired `Status`, then ends it: what
    /// a client sees when the server has compacted past the revision its watch was reading.
    /// A client must relist; resuming the watch at its last resourceVersion cannot help.
    pub fn expire_watches(&self) {
        self.shared.signal.send_modify(|s| s.expires += 1);
    }

    /// Sends a BOOKMARK now to every open watch that allows them.
    pub fn send_bookmarks(&self) {
        self.shared.signal.send_modify(|s| s.bookmarks += 1);
    }

    /// Compacts all history: watches and continue tokens from older revisions get 410.
    /// Open watchers that are behind get an ERROR 410 event. Returns the compacted revision.
    pub fn compact(&self) -> u64 {
        let rv = self.shared.storage.lock().compact();
        self.shared.signal.send_modify(|_| {});
        rv
    }

    /// Restarts the server with its data kept (etcd survives): every open watch ends, and the
    /// new server never resumes one from a revision the old one served (410 Expired, as after
    /// compaction), so every informer relists. Objects and their resourceVersions are kept;
    /// the head moves on by one revision. Returns the new head.
    pub fn restart(&self) -> u64 {
        let head = self.shared.storage.lock().restart();
        self.shared.signal.send_modify(|s| {
            s.head = head;
            s.closes += 1;
        });
        head
    }

    /// Writes `obj` (create or replace, no resourceVersion check) without any watch event.
    /// The write takes a revision, so a relist sees it; a resync of a cache cannot.
    pub fn silent_write<K>(&self, obj: &K) -> Result<K, ApiError>
    where
        K: kube::Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    {
        let (kind, k) = {
            let st = self.shared.storage.lock();
            let kind = kind_of::<K>(&st)?;
            (kind, st.kind(kind)?)
        };
        let value = serde_json::to_value(obj).map_err(|e| ApiError::bad_request(e.to_string()))?;
        let ns = if k.namespaced {
            value["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_string()
        } else {
            String::new()
        };
        let prepared = k.prepare(&ns, None, value)?;
        let now = self.now();
        let stored = self.write(|st| st.silent_write(kind, prepared, now))?;
        serde_json::from_slice(&stored.json).map_err(|e| ApiError::bad_request(e.to_string()))
    }

    /// Fails the next `n` resource requests (discovery is exempt) with 429 or 500 and a
    /// `Retry-After` of `retry_after_secs`.
    pub fn fail_next_requests(&self, n: usize, failure: Failure, retry_after_secs: u64) {
        self.shared
            .faults
            .lock()
            .fail_next(n, failure, retry_after_secs);
    }

    /// Delays the next `n` resource requests by `delay` (tokio time) before answering.
    pub fn slow_next_requests(&self, n: usize, delay: Duration) {
        self.shared.faults.lock().slow_next(n, delay);
    }

    /// The number of `kind` objects stored, for checks that a rejected request changed nothing.
    pub fn object_count<K: kube::Resource<DynamicType = ()>>(&self) -> usize {
        let st = self.shared.storage.lock();
        let Ok(kind) = kind_of::<K>(&st) else {
            return 0;
        };
        st.count(kind)
    }
}
