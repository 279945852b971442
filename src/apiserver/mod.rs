//! An embedded Kubernetes API server that speaks the real wire protocol.
//!
//! Follows kube-apiserver as a client sees it (`k8s.io/apiserver/pkg/endpoints`,
//! `pkg/storage/etcd3`): REST paths, JSON bodies, `Status` errors, one etcd-like revision
//! counter as `resourceVersion`, and chunked watch streams. It is the other end of the wire:
//! it shares only Kubernetes types with the rest of the crate and imports nothing from the
//! client side, so any client (kube-rs, client-go, kubectl) can talk to it. Its state is in
//! memory only.
//!
//! Two ways in, one router:
//!
//! ```text
//!   ApiServer::start()  ──►  127.0.0.1:PORT (hyper, `serve`) ─┐
//!                                                             ├──►  router ──► storage (one mutex)
//!   Cluster::in_process_client() ── tower Service ────────────┘                  │
//!                                                                               └─► watch signal
//! ```
//!
//! - Over HTTP, for real-clock runs and real clients:
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use controlloop::apiserver::ApiServer;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams};
//!
//! let server = ApiServer::start().await.unwrap();
//! // In memory only: a new server starts above any revision an earlier one issued.
//! let first = server.resource_version();
//! let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("hello".into());
//! let created = cms.create(&PostParams::default(), &cm).await.unwrap();
//! assert_eq!(created.metadata.resource_version, Some((first + 1).to_string()));
//! server.shutdown().await;
//! # });
//! ```
//!
//! - In-process, through the same router as a tower `Service` behind `kube::Client::new`,
//!   which works under tokio's paused clock (a real socket does not: while a request is on
//!   the wire the runtime looks idle and the paused clock jumps ahead):
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true)
//! #     .build().unwrap().block_on(async {
//! use controlloop::apiserver::Cluster;
//! use controlloop::resources::{Widget, WidgetSpec};
//! use kube::api::{Api, PostParams};
//!
//! let cluster = Cluster::new(Default::default());
//! let widgets: Api<Widget> = Api::namespaced(cluster.in_process_client(), "default");
//! let w = Widget::new("w", WidgetSpec { replicas: 1, color: None });
//! let w = widgets.create(&PostParams::default(), &w).await.unwrap();
//! assert_eq!(w.metadata.generation, Some(1));
//! # });
//! ```
//!
//! # Invariants
//! 1. Every write takes the storage lock once, checks, commits and then publishes the new
//!    head on the watch signal; watchers read events from storage history, never from the
//!    writer (storage I1–I6, watch I1–I4).
//! 2. No lock is held across an await, and the storage lock is held only for storage calls:
//!    decoding, patching, selector matching and serialisation happen outside it (handlers I2).
//! 3. Whatever a client sends, memory stays bounded in bytes: request bodies
//!    (`max_body_bytes`), decoded JSON (127 levels) and YAML (100 levels, alias and size
//!    budgets, `yaml`), patch results (patch I1, I2), stored objects and their total (storage
//!    I5, which charges what storage holds: each object's JSON, kept once, and the few
//!    metadata fields reads select on), history (storage I2), the request log (controls I1),
//!    open watches (watch I4), requests in flight and connections (serve I1, I4). Every
//!    rejection is a `Status`.
//! 4. A list or watch response never copies a stored object of 16 KiB or more: such objects
//!    are sent as the stored bytes themselves (`frames`). What one request holds of its own,
//!    whether or not its client reads, is therefore bounded whatever the objects' size:
//!    - the chunk being framed: at most 256 KiB plus one object under 16 KiB of copies;
//!    - hyper's write queue, which stops taking chunks from the body at 16 buffers or about
//!      408 KiB queued (copies only for small objects and framing; large objects are shared);
//!    - hyper's read buffer, 8 KiB (up to about 408 KiB for a long request head);
//!    - one batch of references to stored objects (at most 256 objects, or 1 MiB of them),
//!      which keeps an object that is replaced meanwhile alive until the batch is sent, and a
//!      task of a few KiB.
//!
//!    So under 1 MiB of copies per connection, plus at most one batch of objects kept alive.
//!    `tests/apiserver_memory_streams.rs` measures it with 1 MiB objects: the resident set
//!    grows by no more than a few KiB per unread list or watch.
//! 5. No request holds a worker thread for long: selector matching yields to other tasks
//!    every 4,096 requirement checks (`selector::Turns`), selectors are capped (256
//!    requirements, 64 KiB), a list gives up at the request deadline (504), and watches do not
//!    count against the limits on requests in flight (serve I4).
//!
//! # Concurrency
//! `Shared::storage` (a `parking_lot::Mutex`) guards objects, revisions and history. The
//! request log and the fault switch have their own small mutexes. Watchers wait on a
//! `tokio::sync::watch` channel carrying the head revision and the close/bookmark epochs, and
//! each holds a permit of the `watches` semaphore. On a socket, the connection table (`serve`)
//! has its own mutex.
//!
//! # Differences from upstream
//! - No authentication, admission webhooks, watch cache, API priority and fairness (the
//!   in-flight limits of `--max-requests-inflight` stand in, on the socket only), server-side
//!   tables or OpenAPI documents; see each module for its own list.
//! - Server-side apply (`application/apply-patch+yaml`) is refused with 415
//!   UnsupportedMediaType, saying that field ownership (`managedFields`) is not implemented:
//!   applying without it would silently do something other than kube-apiserver does.
//!   Client-side `kubectl apply` (a strategic merge patch, with its last-applied annotation)
//!   works.
//! - No garbage collector: `ownerReferences` are kept and served, but nothing collects an
//!   owner's dependents, so after a delete (`propagationPolicy: Background`, the default)
//!   they stay, where kube-controller-manager's collector would delete them shortly after.
//!   `Foreground` and `Orphan` (and `orphanDependents: true`) are refused with 422
//!   FieldValueNotSupported, saying so: without a collector they would be plain deletes.
//! - Strategic merge patch follows upstream for the built-in kinds (`strategic`), and is 415
//!   for custom resources, as upstream.
//! - Namespaces are objects (`default`, `kube-system`, `kube-public`, `kube-node-lease` exist
//!   at start, part of the initial state at the first revision); a create into a missing
//!   namespace is 404 and into a terminating one 403, as the namespace lifecycle admission
//!   answers. The namespace controller's work is done at once: deleting a namespace deletes
//!   its objects (an object with finalizers is only marked, and holds the namespace in
//!   `Terminating` until its last finalizer goes), then the namespace. `namespaces/finalize`
//!   is not served.
//! - No persistence: a restarted server has lost every object. A server on a socket starts its
//!   revisions above any an earlier run could have issued, so resuming from an old revision
//!   is 410 Expired, as after compaction ([`ServerOptions::first_revision`]). A test can
//!   restart a server with its data kept ([`Cluster::restart`]): the same rule holds, every
//!   revision it served before is compacted and every watch ends.
//! - kubectl works (`get`, `get -w`, `create`, `replace`, `apply` (client-side), `label`,
//!   `patch`, `delete`); it sends ConfigMaps as protobuf, which the `protobuf` module decodes
//!   for that kind only. No OpenAPI documents are served, so `kubectl … -f FILE` needs
//!   `--validate=false`, `kubectl apply --server-side` is refused (above), and `kubectl get`
//!   prints NAME and AGE only (no server-side tables).
//! - A name or namespace in the body that differs from the path is a 400 BadRequest, as the
//!   real handlers answer; 422 Invalid is for objects that fail validation (missing or
//!   malformed name, bad labels, schema type errors, an update without resourceVersion on a
//!   custom resource, a finalizer added to an object being deleted).

mod controls;
mod discovery;
mod errors;
mod frames;
mod handlers;
mod kinds;
mod options;
mod patch;
mod protobuf;
mod selector;
mod serve;
mod storage;
mod strategic;
mod validation;
mod watch;
mod yaml;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use parking_lot::Mutex;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use controls::{Failure, RequestRecord};
pub use discovery::KUBERNETES_VERSION;
pub use errors::ApiError;
pub use options::ServerOptions;
pub use storage::EventType;
pub use watch::INITIAL_EVENTS_END;

use controls::RequestLog;
use kinds::{KINDS, Kind};
use storage::{INITIAL_REVISION, Storage};

/// What watchers wait on.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Signal {
    /// The newest revision.
    head: u64,
    /// Bumped by `close_watches`: every watch open at the time ends.
    closes: u64,
    /// Bumped by `expire_watches`: every watch open at the time gets ERROR 410, then ends.
    expires: u64,
    /// Bumped by `send_bookmarks`: every watch allowing bookmarks gets one.
    bookmarks: u64,
}

/// State shared by the router, the watchers and the handles.
pub(crate) struct Shared {
    storage: Mutex<Storage>,
    signal: tokio::sync::watch::Sender<Signal>,
    options: ServerOptions,
    /// Why a separate mutex: the log is appended after every response and read by tests,
    /// and must never wait for a storage write. Bounded in bytes (controls I1).
    log: Mutex<RequestLog>,
    /// One permit per open watch (watch I4): a full semaphore answers 429.
    watches: Arc<tokio::sync::Semaphore>,
    /// The number of open watches, for [`Cluster::wait_for_open_watches`].
    open_watches: tokio::sync::watch::Sender<usize>,
    /// Woken after every append to `log`, so a test can wait for a request instead of polling.
    logged: tokio::sync::Notify,
    faults: Mutex<controls::Faults>,
    /// `host:port` for the `/api` discovery document; empty in-process.
    address: Mutex<String>,
    epoch: Timestamp,
    started: tokio::time::Instant,
}

/// The embedded cluster: storage, watch hub, router and test controls, without a socket.
///
/// Cheap to clone; every clone is the same cluster.
#[derive(Clone)]
pub struct Cluster {
    shared: Arc<Shared>,
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
    let k = &KINDS[kinds::NAMESPACES];
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

fn kind_of<K: kube::Resource<DynamicType = ()>>() -> Result<usize, ApiError> {
    Kind::find(&K::group(&()), &K::version(&()), &K::plural(&())).ok_or_else(|| {
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

    /// The router, usable as a tower `Service` or served by hyper.
    pub fn router(&self) -> Router {
        Router::new()
            .fallback(handlers::entry)
            .with_state(self.clone())
    }

    /// A `kube::Client` that calls the router in-process: no socket, works under paused time.
    /// It has no retry layer. Call it inside a tokio runtime: the client spawns a task.
    pub fn in_process_client(&self) -> kube::Client {
        kube::Client::new(self.router(), "default")
    }

    fn now(&self) -> Timestamp {
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
    fn write<T>(&self, f: impl FnOnce(&mut Storage) -> Result<T, ApiError>) -> Result<T, ApiError> {
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
        let kind = kind_of::<K>()?;
        let value = serde_json::to_value(obj).map_err(|e| ApiError::bad_request(e.to_string()))?;
        let ns = if KINDS[kind].namespaced {
            value["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_string()
        } else {
            String::new()
        };
        let prepared = KINDS[kind].prepare(&ns, None, value)?;
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
        let Ok(kind) = kind_of::<K>() else { return 0 };
        self.shared.storage.lock().count(kind)
    }
}

/// Serves any `router` on `listener` the way [`ApiServer`] serves the API: HTTP/1.1 with
/// `options`' header-read and write timeouts, its connection cap (idle connections closed to
/// make room) and its limits on requests in flight, until `shutdown` completes; then waits for
/// the requests being answered. The book's site server (`controlloop --serve`) runs on it.
pub async fn serve_router(
    listener: tokio::net::TcpListener,
    router: Router,
    options: &ServerOptions,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    serve::serve(listener, router, serve::Limits::of(options), shutdown).await
}

/// A running API server on 127.0.0.1, with the test controls of its [`Cluster`].
#[derive(Debug)]
pub struct ApiServer {
    cluster: Cluster,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl std::ops::Deref for ApiServer {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        &self.cluster
    }
}

impl ApiServer {
    /// Starts a server on an ephemeral port with default options.
    pub async fn start() -> std::io::Result<Self> {
        Self::start_with(ServerOptions::default()).await
    }

    /// Starts a server with `options`.
    ///
    /// Its state is in memory only. Unless `options.first_revision` is set, its revisions start
    /// above any an earlier run could have issued, so a client that saw an earlier run gets
    /// 410 Expired for its old resourceVersions and relists (see [`ServerOptions`]).
    pub async fn start_with(mut options: ServerOptions) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", options.port)).await?;
        let addr = listener.local_addr()?;
        options.first_revision = options
            .first_revision
            .or_else(|| Some(options::revision_after_earlier_runs()));
        let limits = serve::Limits::of(&options);
        let cluster = Cluster::new(options);
        *cluster.shared.address.lock() = addr.to_string();
        let (stop, stopped) = oneshot::channel::<()>();
        let router = cluster.router();
        let stopped = async {
            let _ = stopped.await;
        };
        let task = tokio::spawn(serve::serve(listener, router, limits, stopped));
        Ok(ApiServer {
            cluster,
            addr,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kube `Config` for this server, to adjust (e.g. `default_retry = false`) before
    /// building a client with `kube::Client::try_from`.
    pub fn config(&self) -> kube::Config {
        kube::Config::new(self.url().parse().expect("a valid URL"))
    }

    /// A ready `kube::Client` over HTTP, with kube's default settings (including its retry
    /// of 429/503/504). Call it inside a tokio runtime: the client spawns a task.
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config()).expect("a plain-HTTP client always builds")
    }

    /// The cluster behind the server (also reachable through `Deref`).
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Ends open watches, stops accepting connections and waits for in-flight requests.
    pub async fn shutdown(mut self) {
        self.stop_now();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// Serves until the task ends (used by `controlloop apiserver`).
    pub async fn wait(mut self) -> std::io::Result<()> {
        match self.task.take() {
            Some(task) => task.await.map_err(std::io::Error::other)?,
            None => Ok(()),
        }
    }

    fn stop_now(&mut self) {
        self.cluster.close_watches();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.stop_now();
    }
}
