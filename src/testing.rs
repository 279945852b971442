//! Testing a controller of your own ([`TestCluster`]: a cluster for one test, objects applied
//! from YAML or typed values, a wait with a deadline on the clock, and a dump of the server when
//! it fails), and the fixture this crate's tests and the book's rig both stand on, with the
//! `testing` feature: a cluster with an informer on its ConfigMaps ([`Fixture`]), the object whose `data.value` is
//! a counter ([`object`], [`set_value`], [`value_of`]), an informer run in a task until it is
//! stopped ([`RunningInformer`]), a [`Recorder`] of what reconciles acted on, and a lease lock
//! that can be cut off from its server ([`CutOff`]).
//!
//! Not a port: it follows no upstream file. It sits on top of the ports and the clusters (it
//! wires [`crate::apiserver`] to [`crate::cache`]), and none of them imports it.
//!
//! ```
//! use controlloop::testing::{Fixture, set_value, value_of};
//! use std::time::Duration;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true)
//! #     .build().unwrap().block_on(async {
//! let mut f = Fixture::in_process(&["web"]).await; // an embedded cluster, "web" at value 0
//! f.run_informer();
//! set_value(&f.api, "web", 7).await.unwrap();
//! let cached = || f.informer.indexer().get_by_key("default/web").and_then(|cm| value_of(&cm));
//! tokio::time::timeout(Duration::from_secs(60), async {
//!     while cached() != Some(7) {
//!         tokio::time::sleep(Duration::from_millis(1)).await; // virtual time: costs nothing
//!     }
//! })
//! .await
//! .expect("the write never reached the cache: the informer's watch is stuck?");
//! f.stop().await.expect("the informer did not panic");
//! # });
//! ```

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use std::fmt::Debug;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DynamicObject, GroupVersionKind, ObjectMeta, Patch, PatchParams, PostParams, WatchParams,
};
use kube::discovery::{Discovery, Scope, verbs};
use parking_lot::Mutex;
use serde::{Serialize, de::DeserializeOwned};
use tokio::{sync::oneshot, task::JoinError, time::Instant};

use crate::{
    apiserver::{Cluster, ServerOptions},
    cache::{InformerOptions, ListerWatcher, Object, SharedIndexInformer},
    leaderelection::{LeaderElectionRecord, LockError, ResourceLock},
};

/// The namespace every object of the fixture lives in.
pub const NAMESPACE: &str = "default";

/// How long [`RunningInformer::stop`] waits for the informer's task: it stops at its stop
/// signal, so a longer wait is a deadlock (virtual time on a paused clock).
const STOP_LIMIT: Duration = Duration::from_secs(60);

/// The counter an object carries: `data.value` parsed as an integer.
pub fn value_of(cm: &ConfigMap) -> Option<u64> {
    cm.data.as_ref()?.get("value")?.parse().ok()
}

/// A ConfigMap `name` in [`NAMESPACE`] carrying `value` in `data.value`.
pub fn object(name: &str, value: u64) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(NAMESPACE.to_owned()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("value".to_owned(), value.to_string())])),
        ..Default::default()
    }
}

/// Sets `name`'s value with a merge patch (one write, one watch event).
pub async fn set_value(
    api: &Api<ConfigMap>,
    name: &str,
    value: u64,
) -> Result<ConfigMap, kube::Error> {
    let patch = serde_json::json!({ "data": { "value": value.to_string() } });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

/// An informer on the ConfigMaps of [`NAMESPACE`], listed and watched through `kube::Api`
/// (built, not running until [`Fixture::run_informer`]): what a controller test starts from.
/// Controllers built on [`Fixture::informer`] before it runs see the initial list as creates.
pub struct Fixture {
    /// The ConfigMaps of [`NAMESPACE`].
    pub api: Api<ConfigMap>,
    /// The informer, with no resync.
    pub informer: Arc<SharedIndexInformer<ConfigMap, Api<ConfigMap>>>,
    running: Option<RunningInformer>,
}

impl Fixture {
    /// An informer on the ConfigMaps of [`NAMESPACE`] of the cluster `client` talks to: the
    /// embedded one, or a real one.
    pub fn new(client: kube::Client) -> Fixture {
        let api = Api::namespaced(client, NAMESPACE);
        let informer = Arc::new(SharedIndexInformer::new(
            api.clone(),
            InformerOptions::new(Duration::ZERO),
        ));
        Fixture {
            api,
            informer,
            running: None,
        }
    }

    /// A fresh embedded cluster, called in-process (so it runs under the paused clock), holding
    /// the [`object`]s `objects`, each at value 0.
    ///
    /// # Panics
    ///
    /// If the embedded server refuses a create (two equal names).
    pub async fn in_process(objects: &[&str]) -> Fixture {
        let f = Fixture::new(Cluster::new(ServerOptions::default()).in_process_client());
        for name in objects {
            f.api
                .create(&PostParams::default(), &object(name, 0))
                .await
                .expect("the embedded server takes a create");
        }
        f
    }

    /// Runs the informer in a task (once).
    pub fn run_informer(&mut self) {
        if self.running.is_none() {
            self.running = Some(RunningInformer::start(&self.informer));
        }
    }

    /// Stops the informer, if it runs: see [`RunningInformer::stop`].
    pub async fn stop(self) -> Result<(), JoinError> {
        match self.running {
            Some(running) => running.stop().await,
            None => Ok(()),
        }
    }
}

/// An informer running in its own task until [`RunningInformer::stop`].
pub struct RunningInformer {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningInformer {
    /// Starts `informer.run` in a task.
    pub fn start<K, L>(informer: &Arc<SharedIndexInformer<K, L>>) -> RunningInformer
    where
        K: Object + Clone,
        L: ListerWatcher<K>,
    {
        let (stop, stopped) = oneshot::channel::<()>();
        let informer = informer.clone();
        let task = tokio::spawn(async move {
            informer
                .run(async {
                    let _ = stopped.await;
                })
                .await
        });
        RunningInformer { stop, task }
    }

    /// Stops the informer and returns how its task ended: `Err` with the panic if an event
    /// handler's panic crashed it (the informer re-raises it).
    ///
    /// # Panics
    ///
    /// If the task has not ended a minute after its stop signal (of virtual time, on a paused
    /// clock): a deadlock.
    pub async fn stop(self) -> Result<(), JoinError> {
        let _ = self.stop.send(());
        tokio::time::timeout(STOP_LIMIT, self.task)
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "the informer did not stop within {STOP_LIMIT:?} of its stop signal: \
                     a deadlock in SharedIndexInformer::run?"
                )
            })
    }
}

/// One reconcile as a [`Recorder`] saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    /// When the reconcile started.
    pub started: Instant,
    /// When it finished.
    pub finished: Instant,
    /// The value it acted on; `None` if the object was missing.
    pub value: Option<u64>,
}

/// Records what reconcilers acted on, and how many ran at once: above 1 for one object breaks
/// the single-writer guarantee.
#[derive(Default)]
pub struct Recorder {
    observations: Mutex<Vec<Observation>>,
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
}

impl Recorder {
    /// A recorder to share between workers.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Acts on `value` for `cost` (a tokio sleep: virtual time under a paused clock), and
    /// records the reconcile.
    pub async fn act(&self, value: Option<u64>, cost: Duration) {
        let started = Instant::now();
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        if !cost.is_zero() {
            tokio::time::sleep(cost).await;
        }
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.observations.lock().push(Observation {
            started,
            finished: Instant::now(),
            value,
        });
    }

    /// The value the last finished reconcile acted on; `None` before the first.
    pub fn last_value(&self) -> Option<Option<u64>> {
        self.observations.lock().last().map(|o| o.value)
    }

    /// Every finished reconcile, in finishing order.
    pub fn observations(&self) -> Vec<Observation> {
        self.observations.lock().clone()
    }

    /// Reconciles running now.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// The most reconciles that ever ran at once.
    pub fn max_in_flight(&self) -> u64 {
        self.max_in_flight.load(Ordering::SeqCst)
    }
}

/// A cluster for one test of your own controller: the embedded API server under tokio's clock,
/// a [`kube::Client`] for it, objects applied from YAML or typed values, a wait for a condition
/// with a deadline on the (paused) clock, and, when a wait fails, what the server held and the
/// requests it answered.
///
/// ```
/// use controlloop::testing::TestCluster;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::{Api, Patch, PatchParams};
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true)
/// #     .build().unwrap().block_on(async {
/// // In a test of your own: #[tokio::test(start_paused = true)]
/// let cluster = TestCluster::new();
/// cluster
///     .apply_yaml(
///         "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: default}\n\
///          data: {replicas: '1'}\n",
///     )
///     .await
///     .unwrap();
/// let api: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
/// // Your controller would run here, on `cluster.client()`; this test changes the object itself.
/// let patch = serde_json::json!({ "data": { "replicas": "3" } });
/// api.patch("web", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
/// let scaled = |cm: &ConfigMap| cm.data.as_ref().and_then(|d| d.get("replicas")).is_some_and(|r| r == "3");
/// let cm = cluster.wait_until(&api, "web", Duration::from_secs(3600), scaled).await.unwrap();
/// assert_eq!(cm.metadata.generation, None); // a ConfigMap keeps no generation
/// # });
/// ```
pub struct TestCluster {
    server: Cluster,
    client: kube::Client,
}

/// Why a [`TestCluster`] call failed. A wait that ran out of time carries the server's objects
/// and its request log, so the test's failure message shows what the controller saw.
#[derive(Debug, thiserror::Error)]
pub enum TestError {
    /// The YAML could not be read as Kubernetes objects.
    #[error("the YAML is not a list of Kubernetes objects: {0}")]
    Yaml(String),
    /// An object's `apiVersion` and `kind` name nothing the server serves.
    #[error("the server serves no {0}")]
    NotServed(String),
    /// The server refused a request (its `Status` is inside).
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// The condition did not hold within the deadline.
    #[error("{what} did not hold within {within:?} of the clock\n{dump}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// The deadline.
        within: Duration,
        /// The server's objects and its newest requests when the wait gave up.
        dump: String,
    },
}

/// How many of the newest requests a failure's dump shows.
const DUMP_REQUESTS: usize = 40;

/// How long [`TestCluster::wait_until`] waits before it watches again after a watch that ended
/// without an event.
const WATCH_RETRY: Duration = Duration::from_millis(100);

impl TestCluster {
    /// An embedded API server with the default options, and a client for it in process.
    pub fn new() -> TestCluster {
        TestCluster::with_options(ServerOptions::default())
    }

    /// An embedded API server with `options`.
    pub fn with_options(options: ServerOptions) -> TestCluster {
        let server = Cluster::new(options);
        let client = server.in_process_client();
        TestCluster { server, client }
    }

    /// A client for the server, for the controller under test and for the test itself.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The server itself: its test controls (dropped events, closed watches, failures) and its
    /// request log.
    pub fn server(&self) -> &Cluster {
        &self.server
    }

    /// Creates each object of a YAML stream (documents separated by `---`), or replaces it if
    /// it exists, as `kubectl apply` would for objects it created; returns the objects as the
    /// server stored them. CustomResourceDefinitions go first, the rest in the stream's order;
    /// a namespaced object without a namespace goes to `default`.
    pub async fn apply_yaml(&self, yaml: &str) -> Result<Vec<DynamicObject>, TestError> {
        let documents: Vec<serde_json::Value> =
            serde_saphyr::from_str_multiple(yaml).map_err(|e| TestError::Yaml(e.to_string()))?;
        let mut documents: Vec<_> = documents.into_iter().filter(|d| !d.is_null()).collect();
        // CustomResourceDefinitions first, so that the stream's custom objects are served.
        documents.sort_by_key(|d| d["kind"] != "CustomResourceDefinition");
        let mut stored = Vec::new();
        for document in documents {
            let object: DynamicObject =
                serde_json::from_value(document).map_err(|e| TestError::Yaml(e.to_string()))?;
            stored.push(self.apply_dynamic(object).await?);
        }
        Ok(stored)
    }

    /// Creates `object`, or replaces it if it exists; returns it as the server stored it.
    pub async fn apply<K>(&self, object: &K) -> Result<K, TestError>
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned + Serialize,
    {
        let mut value = serde_json::to_value(object).map_err(|e| TestError::Yaml(e.to_string()))?;
        value["apiVersion"] = K::api_version(&()).into();
        value["kind"] = K::kind(&()).into();
        let dynamic = serde_json::from_value(value).map_err(|e| TestError::Yaml(e.to_string()))?;
        let stored = self.apply_dynamic(dynamic).await?;
        let value = serde_json::to_value(stored).map_err(|e| TestError::Yaml(e.to_string()))?;
        serde_json::from_value(value).map_err(|e| TestError::Yaml(e.to_string()))
    }

    async fn apply_dynamic(&self, object: DynamicObject) -> Result<DynamicObject, TestError> {
        let types = object
            .types
            .clone()
            .ok_or_else(|| TestError::Yaml("an object without apiVersion and kind".into()))?;
        let (group, version) = match types.api_version.split_once('/') {
            Some((group, version)) => (group.to_string(), version.to_string()),
            None => (String::new(), types.api_version.clone()),
        };
        let gvk = GroupVersionKind::gvk(&group, &version, &types.kind);
        let (resource, capabilities) = kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .map_err(|_| TestError::NotServed(format!("{}/{}", types.api_version, types.kind)))?;
        let api: Api<DynamicObject> = match capabilities.scope {
            Scope::Namespaced => {
                let namespace = object.metadata.namespace.as_deref().unwrap_or(NAMESPACE);
                Api::namespaced_with(self.client(), namespace, &resource)
            }
            Scope::Cluster => Api::all_with(self.client(), &resource),
        };
        let name = object.metadata.name.clone().unwrap_or_default();
        match api.create(&PostParams::default(), &object).await {
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let current = api.get(&name).await?;
                let mut next = object;
                next.metadata.resource_version = current.metadata.resource_version;
                Ok(api.replace(&name, &PostParams::default(), &next).await?)
            }
            created => Ok(created?),
        }
    }

    /// Waits until the object `name` of `api` exists and `condition` holds for it, re-reading it
    /// at each change the server reports; fails with [`TestError::Timeout`] (and the dump) if
    /// `within` passes first. Under a paused clock, an hour's deadline costs no real time.
    pub async fn wait_until<K, F>(
        &self,
        api: &Api<K>,
        name: &str,
        within: Duration,
        condition: F,
    ) -> Result<K, TestError>
    where
        K: kube::Resource + Clone + DeserializeOwned + Debug,
        F: Fn(&K) -> bool,
    {
        let params = WatchParams::default().fields(&format!("metadata.name={name}"));
        let wait = async {
            loop {
                let current = api.get_opt(name).await?;
                if let Some(object) = current.as_ref().filter(|o| condition(o)) {
                    return Ok::<K, TestError>(object.clone());
                }
                let version = match &current {
                    Some(object) => object.meta().resource_version.clone().unwrap_or_default(),
                    None => "0".to_string(),
                };
                // An event means: read again. A watch that ends or fails without one waits a
                // moment first, so that a server refusing watches cannot spin the wait.
                let mut events = api.watch(&params, &version).await?.boxed();
                if !matches!(events.next().await, Some(Ok(_))) {
                    tokio::time::sleep(WATCH_RETRY).await;
                }
            }
        };
        match tokio::time::timeout(within, wait).await {
            Ok(result) => result,
            Err(_) => Err(TestError::Timeout {
                what: format!("the condition on {name}"),
                within,
                dump: self.dump().await,
            }),
        }
    }

    /// What the server holds (every object of every resource it serves, as `resource
    /// namespace/name resourceVersion`) and its newest requests, for a failure message.
    pub async fn dump(&self) -> String {
        let mut out = String::from("objects:\n");
        match Discovery::new(self.client()).run().await {
            Ok(discovery) => {
                for group in discovery.groups() {
                    for (resource, capabilities) in group.recommended_resources() {
                        if !capabilities.supports_operation(verbs::LIST) {
                            continue;
                        }
                        let api: Api<DynamicObject> = Api::all_with(self.client(), &resource);
                        match api.list(&Default::default()).await {
                            Ok(list) => {
                                for o in list.items {
                                    let m = &o.metadata;
                                    out.push_str(&format!(
                                        "  {} {}/{} rv {}\n",
                                        resource.plural,
                                        m.namespace.as_deref().unwrap_or(""),
                                        m.name.as_deref().unwrap_or(""),
                                        m.resource_version.as_deref().unwrap_or(""),
                                    ));
                                }
                            }
                            Err(e) => out.push_str(&format!("  {}: {e}\n", resource.plural)),
                        }
                    }
                }
            }
            Err(e) => out.push_str(&format!("  discovery failed: {e}\n")),
        }
        let requests = self.server.requests();
        out.push_str(&format!(
            "the newest {} of {} requests:\n",
            requests.len().min(DUMP_REQUESTS),
            requests.len()
        ));
        for r in &requests[requests.len().saturating_sub(DUMP_REQUESTS)..] {
            let query = if r.query.is_empty() {
                String::new()
            } else {
                format!("?{}", r.query)
            };
            out.push_str(&format!(
                "  {} {}{} {}\n",
                r.method, r.path, query, r.status
            ));
        }
        out
    }
}

impl Default for TestCluster {
    fn default() -> Self {
        TestCluster::new()
    }
}

/// A lock whose every request fails at once while it is cut off, as a replica's requests do
/// when a partition separates it from the API server (the recorders' reactor on client-go's
/// fake clientset does the same).
pub struct CutOff<L> {
    /// The lock the requests go to while connected.
    pub lock: L,
    /// Set: cut off.
    pub cut: Arc<std::sync::atomic::AtomicBool>,
}

impl<L> CutOff<L> {
    /// `lock`, connected; `cut` cuts it off while it is set.
    pub fn new(lock: L, cut: Arc<std::sync::atomic::AtomicBool>) -> Self {
        CutOff { lock, cut }
    }

    fn refused(&self) -> Result<(), LockError> {
        if self.cut.load(Ordering::SeqCst) {
            let status = kube::core::Status::failure("the API server is unreachable", "");
            return Err(LockError::Api(kube::Error::Api(status.boxed())));
        }
        Ok(())
    }
}

impl<L: ResourceLock> ResourceLock for CutOff<L> {
    async fn get(&self) -> Result<(LeaderElectionRecord, Vec<u8>), LockError> {
        self.refused()?;
        self.lock.get().await
    }
    async fn create(&self, record: LeaderElectionRecord) -> Result<(), LockError> {
        self.refused()?;
        self.lock.create(record).await
    }
    async fn update(&self, record: LeaderElectionRecord) -> Result<(), LockError> {
        self.refused()?;
        self.lock.update(record).await
    }
    fn record_event(&self, event: &str) {
        self.lock.record_event(event);
    }
    fn identity(&self) -> &str {
        self.lock.identity()
    }
    fn describe(&self) -> String {
        self.lock.describe()
    }
}
