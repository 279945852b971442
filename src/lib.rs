//! # controlloop
//!
//! Faithful Rust ports of the Kubernetes controller machinery — client-go's workqueue, FIFOs,
//! reflector and shared informer, controller-runtime's controller and priority queue — and an
//! embedded Kubernetes API server to run them against, in-process, under tokio's paused clock.
//!
//! With it you can test your own controller's behaviour exactly: hours of resyncs and
//! backoffs in milliseconds, the same result on every run, no cluster and no sockets. The
//! ports follow upstream's *behaviour* (client-go v0.37, controller-runtime v0.25 by default,
//! v0.24 and v0.22 selectable with [`controller::Release`]); each module names the upstream file
//! it follows and lists where it differs.
//!
//! | module | what | upstream |
//! |---|---|---|
//! | [`workqueue`] | the queue a controller's workers take keys from, its delays and rate limiters | client-go `util/workqueue` |
//! | [`cache`] | the store, DeltaFIFO and RealFIFO, the reflector and the shared informer | client-go `tools/cache` |
//! | [`features`] | the versioned feature gates that choose the informer's behaviour | client-go `features` |
//! | [`controller`] | requests, results, predicates, handlers, the controller and its priority queue | controller-runtime `pkg/...` |
//! | [`apiserver`] | an embedded API server: HTTP on 127.0.0.1, or in-process as a `kube::Client` | kube-apiserver, as far as controllers see it |
//! | [`fake`] | client-go's fake clientset | client-go `kubernetes/fake` |
//! | [`leaderelection`] | one replica leads, on a Lease; the others wait to take over | client-go `tools/leaderelection` |
//! | [`retry`] | a read-modify-write run again after a 409 Conflict | client-go `util/retry` |
//!
//! ## The workqueue: many changes, one piece of work, one worker per key
//!
//! ```
//! use controlloop::workqueue::Queue;
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let queue = Queue::new();
//! for _ in 0..1_000 {
//!     queue.add("default/web"); // a thousand changes to one object...
//! }
//! assert_eq!(queue.len(), 1); // ...are one piece of work
//! let claim = queue.claim().await.unwrap(); // a worker holds it
//! queue.add("default/web"); // it changes again meanwhile
//! assert_eq!(queue.len(), 0); // not queued: no second worker may take it
//! drop(claim); // done
//! assert_eq!(queue.len(), 1); // the change is queued, once
//! # });
//! ```
//!
//! ## The informer: a cache of the cluster, and handlers that hear of each change
//!
//! ```
//! use std::{sync::Arc, time::Duration};
//! use controlloop::{
//!     apiserver::{Cluster, ServerOptions},
//!     cache::{HandlerFuncs, InformerOptions, SharedIndexInformer},
//! };
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true)
//! #     .build().unwrap().block_on(async {
//! let cluster = Cluster::new(ServerOptions::default());
//! let api: Api<ConfigMap> = Api::namespaced(cluster.in_process_client(), "default");
//! let informer = Arc::new(SharedIndexInformer::new(api.clone(), InformerOptions::new(Duration::ZERO)));
//! let (tx, mut added) = tokio::sync::mpsc::unbounded_channel();
//! informer
//!     .add_event_handler(HandlerFuncs::new().on_add(move |cm: Arc<ConfigMap>, _| {
//!         tx.send(cm.metadata.name.clone()).unwrap();
//!     }))
//!     .unwrap();
//! let running = informer.clone();
//! tokio::spawn(async move { running.run(std::future::pending()).await });
//!
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("web".into());
//! api.create(&PostParams::default(), &cm).await.unwrap();
//! assert_eq!(added.recv().await.unwrap().as_deref(), Some("web"));
//! assert_eq!(informer.indexer().list().len(), 1); // the cache was written first
//! # });
//! ```
//!
//! ## The controller: a reconciler that reads state, not events
//!
//! ```
//! use std::{sync::Arc, time::Duration};
//! use controlloop::{
//!     apiserver::{Cluster, ServerOptions},
//!     cache::{InformerOptions, SharedIndexInformer},
//!     controller::{Context, Controller, ReconcileResult, Request},
//! };
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true)
//! #     .build().unwrap().block_on(async {
//! let cluster = Cluster::new(ServerOptions::default());
//! let api: Api<ConfigMap> = Api::namespaced(cluster.in_process_client(), "default");
//! let informer = Arc::new(SharedIndexInformer::new(api.clone(), InformerOptions::new(Duration::ZERO)));
//! let (tx, mut reconciled) = tokio::sync::mpsc::unbounded_channel();
//! let controller = Controller::builder("configmaps")
//!     .build(&informer, move |req: Request, ctx: Context<ConfigMap>| {
//!         let seen = ctx.get(&req).is_some(); // the object, from the informer's cache
//!         tx.send((req.name.clone(), seen)).unwrap();
//!         async { Ok(ReconcileResult::done()) }
//!     })
//!     .unwrap();
//! let running = informer.clone();
//! tokio::spawn(async move { running.run(std::future::pending()).await });
//! tokio::spawn(async move { controller.run(std::future::pending()).await });
//!
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("web".into());
//! api.create(&PostParams::default(), &cm).await.unwrap();
//! assert_eq!(reconciled.recv().await, Some(("web".to_owned(), true)));
//! # });
//! ```
//!
//! ## The embedded API server: in-process under virtual time, or on 127.0.0.1
//!
//! In-process ([`apiserver::Cluster::in_process_client`]) is what virtual-time tests use: a
//! request on a real socket looks like an idle runtime to the paused clock. The same server
//! listens on 127.0.0.1 for kubectl and other real clients ([`apiserver::ApiServer::start`]).
//! Its state is in memory only.
//!
//! ```
//! use controlloop::apiserver::{Cluster, ServerOptions};
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true)
//! #     .build().unwrap().block_on(async {
//! let cluster = Cluster::new(ServerOptions::default());
//! let api: Api<ConfigMap> = Api::namespaced(cluster.in_process_client(), "default");
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("web".into());
//! let mut read = api.create(&PostParams::default(), &cm).await.unwrap();
//! let stale = read.clone();
//! read.data = Some([("colour".to_owned(), "blue".to_owned())].into());
//! api.replace("web", &PostParams::default(), &read).await.unwrap();
//! // A write from a stale resourceVersion is refused, as kube-apiserver refuses it.
//! let err = api.replace("web", &PostParams::default(), &stale).await.unwrap_err();
//! assert!(matches!(err, kube::Error::Api(s) if s.code == 409));
//! # });
//! ```
//!
//! ## Testing your own controller
//!
//! With the `testing` feature (`controlloop = { version = "…", features = ["testing"] }` under
//! `[dev-dependencies]`), `testing::TestCluster` is the front door: an embedded API server
//! under the test's clock, a `kube::Client` for your controller and your test, objects applied
//! from YAML or typed values, and a wait whose deadline is on the clock, whose failure prints
//! what the server held and the requests it answered:
//!
//! ```no_run
//! use controlloop::testing::TestCluster;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::Api;
//! use std::time::Duration;
//! # mod my_operator { pub async fn run(_client: kube::Client) {} }
//! # const WEB: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n";
//!
//! #[tokio::test(start_paused = true)] // an hour of requeues takes no real time
//! async fn my_controller_scales_web() {
//!     let cluster = TestCluster::new();
//!     cluster.apply_yaml(WEB).await.unwrap(); // your fixtures: CRDs, objects
//!     tokio::spawn(my_operator::run(cluster.client())); // your controller, on this client
//!     let api: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
//!     let scaled = |cm: &ConfigMap| cm.data.as_ref().is_some_and(|d| d["replicas"] == "3");
//!     cluster.wait_until(&api, "web", Duration::from_secs(3600), scaled).await.unwrap();
//! }
//! ```
//!
//! ## Deliberately wrong variants
//!
//! With the `broken` feature, each port has a `broken` module: a queue without its processing
//! set, a priority queue that hands out locked keys, informers that call handlers before the
//! cache is written or relist on resync. They exist to show a check catching the bug; the
//! faithful code never branches on them.
//!
//! ## For tests
//!
//! With the `testing` feature, what exists only for tests and the book is public: the queue
//! cores stepped one operation at a time (`workqueue::QueueCore`,
//! `controller::priorityqueue::PriorityQueueCore`), a scripted lister-watcher and a store that
//! records a reflector's calls (`cache::ScriptedListerWatcher`, `cache::RecordingStore`),
//! `klog::capture`, and in `testing`, beside `TestCluster`, the fixture this crate's own tests
//! stand on: an embedded cluster with an informer on its ConfigMaps, and a recorder of what
//! reconciles acted on.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod apiserver;
pub mod cache;
pub mod controller;
pub mod fake;
pub mod features;
// klog's line format, which the ports log through: a namespace of its own with the `testing`
// feature, for its `capture` (tests and the book compare the lines a run logs with upstream's).
#[cfg(feature = "testing")]
pub mod klog;
#[cfg(not(feature = "testing"))]
mod klog;
pub mod leaderelection;
pub mod retry;
#[cfg(feature = "testing")]
pub mod testing;
mod wait;
mod watch_event;
pub mod workqueue;
