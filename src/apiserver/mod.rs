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
//! use k8s_openapi::api::apps::v1::Deployment;
//! use kube::api::{Api, PostParams};
//!
//! let cluster = Cluster::new(Default::default());
//! let deployments: Api<Deployment> = Api::namespaced(cluster.in_process_client(), "default");
//! let d: Deployment = serde_json::from_value(serde_json::json!({
//!     "metadata": {"name": "web"},
//!     "spec": {
//!         "selector": {"matchLabels": {"app": "web"}},
//!         "template": {
//!             "metadata": {"labels": {"app": "web"}},
//!             "spec": {"containers": [{"name": "web", "image": "nginx"}]},
//!         },
//!     },
//! }))
//! .unwrap();
//! let d = deployments.create(&PostParams::default(), &d).await.unwrap();
//! assert_eq!(d.metadata.generation, Some(1));
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
//!    open watches (watch I4), requests in flight and connections (serve I1, I4), a CRD's
//!    schema (32 levels, 4,096 nodes: `schema` I1) and the resources registered over the
//!    server's life (4,096: `registry` I3). Every rejection is a `Status`.
//! 4. A list or watch response never copies a stored object of 16 KiB or more: such objects
//!    are sent as the stored bytes themselves (`frames`). The one exception is an object that
//!    an update takes out of a watch's selection: its previous state is encoded anew at the
//!    update's revision, one object at a time. The other is a custom resource read through
//!    a version other than its storage version, or whose schema has defaults: each object
//!    is converted (and defaulted) anew, one at a time, as upstream's read path does. What
//!    one request holds of its own,
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
//!    requirements, 64 KiB), a list gives up at the request deadline (504), a namespace's
//!    delete sweeps its objects 1,024 per hold of the storage lock (storage's `namespaces`
//!    I4), and watches do not count against the limits on requests in flight (serve I4).
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
//! - Strategic merge patch follows upstream for ConfigMaps, Namespaces and Leases
//!   (`strategic`), and is 415 for custom resources, as upstream. It is 415 for
//!   CustomResourceDefinitions and the kinds of `builtin` too, where upstream serves it:
//!   JSON merge and JSON patches work.
//! - The built-in kinds are ConfigMap, Namespace, Lease, CustomResourceDefinition, and the
//!   kinds operators own (`builtin`): Secret, ServiceAccount,
//!   Service, Pod, Event (core/v1 and `events.k8s.io/v1`), Deployment, StatefulSet,
//!   DaemonSet and Job, with the defaults kube-apiserver applies and their strategies' rules
//!   (`builtin` lists what differs). Nothing runs their controllers, as in envtest.
//! - The kinds served are a registry (`registry`) filled at start with the built-in kinds and
//!   then by each established CustomResourceDefinition (`customresourcedefinition`,
//!   `crd_controllers`, `schema`): their docs list what a CRD can and cannot ask for. A
//!   conversion webhook is refused with 422, naming it; CEL validation rules are evaluated
//!   (`schema`), and a rule calling one of Kubernetes' own CEL functions is refused by name.
//!   A CRD's `scale` subresource is served, and a Deployment's and a StatefulSet's (`scale`:
//!   `kubectl scale` and an autoscaler's scale client work).
//! - Namespaces are objects (`default`, `kube-system`, `kube-public`, `kube-node-lease` exist
//!   at start, part of the initial state at the first revision); a create into a missing
//!   namespace is 404 and into a terminating one 403, as the namespace lifecycle admission
//!   answers. Deleting a namespace marks it `Terminating`; kube-controller-manager's namespace
//!   controller, whose work the server does at once in the same request, then deletes its
//!   objects one by one (one DELETED event each; an object with finalizers is only marked),
//!   writes its five deletion conditions, and once nothing is left removes the `kubernetes`
//!   finalizer from `spec.finalizers`. The namespace is gone when neither `spec.finalizers`
//!   nor `metadata.finalizers` holds it; another controller's token in `spec.finalizers` is
//!   removed through `PUT /api/v1/namespaces/{name}/finalize` (the only verb it serves), as
//!   upstream. What upstream does later, at the controller's pace (a sync after its informer
//!   sees the change, a retry 15 s after content with finalizers), the server does in the
//!   write that makes it due: the last object leaving a namespace being deleted syncs it.
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

mod builtin;
mod cluster;
mod controls;
mod crd_controllers;
mod customresourcedefinition;
mod discovery;
mod errors;
mod field_validation;
mod frames;
mod handlers;
mod kinds;
mod options;
mod patch;
mod protobuf;
mod registry;
mod scale;
mod schema;
mod selector;
mod serve;
mod storage;
mod strategic;
mod strategy;
mod validation;
mod watch;
mod yaml;

use std::net::SocketAddr;

use axum::Router;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use cluster::Cluster;
pub use controls::{Failure, RequestRecord};
pub use discovery::KUBERNETES_VERSION;
pub use errors::ApiError;
pub use options::ServerOptions;
pub use storage::EventType;
pub use watch::INITIAL_EVENTS_END;

use cluster::Shared;

impl Cluster {
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
