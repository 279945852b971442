//! The rig every experiment stands on: the runtime and its clock, a cluster to talk to, a
//! writer, and a recorder of what reconcilers observed.
//!
//! A chapter block hides these lines (rustdoc's `# `) because they do not carry its claim:
//!
//! ```
//! # use controlloop_book::lab::rig;
//! rig::paused(async {
//!     let start = tokio::time::Instant::now();
//!     tokio::time::sleep(std::time::Duration::from_secs(3600)).await; // no real time passes
//!     assert_eq!(start.elapsed().as_secs(), 3600);
//! });
//! ```
//!
//! The essay's storm is defined here once ([`ESSAY`]: 200 writes, 1 ms apart, 20 ms per
//! reconcile); [`settle`] waits for quiet on the runtime's clock, and [`Named`] is the predicate
//! that keeps a storm's controller on its one object.
//!
//! The subject is one ConfigMap whose `data.value` is a counter. ConfigMaps exist on every
//! cluster, so the same experiment runs against the embedded server and against a real
//! cluster through a kubeconfig, unchanged.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use tokio::time::Instant;

use controlloop::{
    apiserver::{ApiServer, Cluster, ServerOptions},
    cache::{InformerOptions, SharedIndexInformer},
    controller::predicate::Predicate,
};

/// Runs `future` to completion on a current-thread runtime whose clock is paused (tokio's
/// virtual time): sleeps and timeouts take no real time and fire in a fixed order, so a run is
/// exact and repeats exactly. The embedded server must be called in-process
/// ([`Backend::InProcess`]): a request in flight on a real socket looks like an idle runtime to
/// the paused clock.
pub fn paused<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime with a paused clock builds")
        .block_on(future)
}

/// Runs `future` to completion on a two-thread runtime with the machine's clock: what a real
/// controller process runs on, for the experiments whose figures are pinned as bands.
pub fn real<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a two-thread runtime builds")
        .block_on(future)
}

/// Waits at most `limit` (virtual time on a paused clock) for `fut`, naming the suspected
/// deadlock if it does not finish.
pub async fn within<F: std::future::Future>(limit: Duration, what: &str, fut: F) -> F::Output {
    tokio::time::timeout(limit, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} hung for {limit:?}"))
}

/// One write storm: how many writes, how far apart, and what one reconcile of them costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Storm {
    /// How many writes (values `1..=writes`).
    pub writes: u64,
    /// The wait between two writes.
    #[serde(serialize_with = "millis")]
    pub gap: Duration,
    /// How long one reconcile works (a tokio sleep).
    #[serde(serialize_with = "millis")]
    pub cost: Duration,
}

/// Serialises a duration as milliseconds (what every table of the book prints).
fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

/// The essay's storm: 200 writes, 1 ms apart, behind a reconciler that works 20 ms. Every
/// experiment that runs "the essay's storm" (chapters 06, 07 and 09, the `burst` command)
/// starts from this one definition.
pub const ESSAY: Storm = Storm {
    writes: 200,
    gap: Duration::from_millis(1),
    cost: Duration::from_millis(20),
};

/// The namespace the experiment writes in.
pub const NAMESPACE: &str = "default";
/// The name of the object the experiment writes.
pub const OBJECT: &str = "controlloop-burst";

/// The counter an object carries: `data.value` parsed as an integer.
pub fn value_of(cm: &ConfigMap) -> Option<u64> {
    cm.data.as_ref()?.get("value")?.parse().ok()
}

/// A ConfigMap `namespace/name` carrying `value`.
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

/// Where the experiment's cluster is.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum Backend {
    /// The embedded API server called in-process (its router as a tower `Service` behind
    /// `kube::Client::new`): no socket, everything in memory, so it runs under virtual time.
    InProcess,
    /// The embedded API server on a 127.0.0.1 socket, over HTTP: the real list/watch path.
    Http,
    /// A real cluster, through this kubeconfig file (its current context). Real clock only.
    Kubeconfig(PathBuf),
}

/// Why a cluster could not be reached or set up.
#[derive(Debug, thiserror::Error)]
pub enum RigError {
    /// The embedded server did not start.
    #[error("the embedded API server did not start: {0}")]
    ServerStart(#[from] std::io::Error),
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A request to the cluster failed.
    #[error("request to the cluster failed: {0}")]
    Api(#[from] kube::Error),
    /// A wait for quiet ([`settle`]) ran out of time.
    #[error("{what}: not settled within {limit:?}")]
    Stalled {
        /// What was awaited, and what is suspected when it does not come.
        what: String,
        /// How long it waited.
        limit: Duration,
    },
}

/// Waits until `quiet()` has held for `hold` without a break (`hold` zero: once), polling
/// every millisecond of the runtime's clock; fails with [`RigError::Stalled`] naming `what`
/// after `limit`.
pub async fn settle(
    limit: Duration,
    hold: Duration,
    what: &str,
    mut quiet: impl FnMut() -> bool,
) -> Result<(), RigError> {
    let mut since: Option<Instant> = None;
    let waited = tokio::time::timeout(limit, async {
        loop {
            match (quiet(), since) {
                (false, _) => since = None,
                (true, None) if hold.is_zero() => return,
                (true, None) => since = Some(Instant::now()),
                (true, Some(t)) if Instant::now() - t >= hold => return,
                (true, Some(_)) => {}
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
    waited.map_err(|_| RigError::Stalled {
        what: what.to_owned(),
        limit,
    })
}

/// A running cluster of one of the [`Backend`] kinds, and a client for it.
pub struct Target {
    client: kube::Client,
    /// The embedded cluster's controls (`drop_next_events`, `close_watches`…); `None` for a
    /// real cluster.
    pub cluster: Option<Cluster>,
    server: Option<ApiServer>,
}

impl Target {
    /// Starts (or connects to) the backend.
    pub async fn start(backend: &Backend) -> Result<Target, RigError> {
        match backend {
            Backend::InProcess => {
                let cluster = Cluster::new(ServerOptions::default());
                Ok(Target {
                    client: cluster.in_process_client(),
                    cluster: Some(cluster),
                    server: None,
                })
            }
            Backend::Http => {
                let server = ApiServer::start().await?;
                Ok(Target {
                    client: server.client(),
                    cluster: Some(server.cluster().clone()),
                    server: Some(server),
                })
            }
            Backend::Kubeconfig(path) => {
                let err = |message: String| RigError::Kubeconfig {
                    path: path.clone(),
                    message,
                };
                let kc =
                    kube::config::Kubeconfig::read_from(path).map_err(|e| err(e.to_string()))?;
                let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
                    .await
                    .map_err(|e| err(e.to_string()))?;
                let client = kube::Client::try_from(config).map_err(|e| err(e.to_string()))?;
                Ok(Target {
                    client,
                    cluster: None,
                    server: None,
                })
            }
        }
    }

    /// A client for the cluster.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The ConfigMaps of [`NAMESPACE`].
    pub fn api(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    /// Creates `name` with `value`, or (on a real cluster where it survived an earlier run)
    /// sets its value.
    pub async fn create(&self, name: &str, value: u64) -> Result<ConfigMap, RigError> {
        match self
            .api()
            .create(&PostParams::default(), &object(name, value))
            .await
        {
            Ok(cm) => Ok(cm),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                Ok(set_value(&self.api(), name, value).await?)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Stops the embedded server, if there is one.
    pub async fn stop(self) {
        if let Some(server) = self.server {
            server.shutdown().await;
        }
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

/// What a burst of writes did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Burst {
    /// Writes acknowledged by the server.
    pub issued: u64,
    /// When the first write was sent.
    pub started: Instant,
    /// When the last write was acknowledged.
    pub finished: Instant,
}

impl Burst {
    /// From the first write sent to the last acknowledged.
    pub fn span(&self) -> Duration {
        self.finished - self.started
    }
}

/// Writes the values `1..=writes` to `name`, waiting `gap` between writes (no wait after the
/// last; a zero gap writes back to back).
pub async fn write_burst(
    api: &Api<ConfigMap>,
    name: &str,
    writes: u64,
    gap: Duration,
) -> Result<Burst, kube::Error> {
    let started = Instant::now();
    for v in 1..=writes {
        set_value(api, name, v).await?;
        if v < writes && !gap.is_zero() {
            tokio::time::sleep(gap).await;
        }
    }
    Ok(Burst {
        issued: writes,
        started,
        finished: Instant::now(),
    })
}

/// One reconcile as a recorder saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    /// When the reconcile started.
    pub started: Instant,
    /// When it finished.
    pub finished: Instant,
    /// The value it acted on; `None` if the object was missing.
    pub value: Option<u64>,
}

/// Records what reconcilers acted on, and flags two reconciles of one object at once.
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

    // book: ch11_recorder_act
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
    // book: end ch11_recorder_act

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

    /// The most reconciles of the (one) object that ever ran at once: above 1 breaks the
    /// single-writer guarantee.
    pub fn max_in_flight(&self) -> u64 {
        self.max_in_flight.load(Ordering::SeqCst)
    }
}

/// A predicate that passes only the events of the object called `.0`: a real namespace holds
/// other ConfigMaps (`kube-root-ca.crt` in every one), and a storm is about one object.
#[derive(Debug, Clone, Copy)]
pub struct Named(pub &'static str);

impl Named {
    fn is<K: kube::Resource>(&self, object: Option<&K>) -> bool {
        object.is_some_and(|o| o.meta().name.as_deref() == Some(self.0))
    }
}

impl<K: kube::Resource + Send + Sync> Predicate<K> for Named {
    fn create(&self, object: &K, _: bool) -> bool {
        self.is(Some(object))
    }
    fn update(&self, old: Option<&K>, new: Option<&K>) -> bool {
        self.is(new.or(old))
    }
    fn delete(&self, object: &K, _: bool) -> bool {
        self.is(Some(object))
    }
    fn generic(&self, object: &K) -> bool {
        self.is(Some(object))
    }
}

/// The informer every storm uses: ConfigMaps of [`NAMESPACE`], listed and watched through
/// `kube::Api`, no resync.
pub type Informer = SharedIndexInformer<ConfigMap, Api<ConfigMap>>;

/// A backend with an informer running on it: what every controller experiment starts from.
/// Build controllers on [`Fixture::informer`] *before* the informer has synced if they must see
/// the initial list as creates; later ones get it replayed.
pub struct Fixture {
    /// The cluster.
    pub target: Target,
    /// The running informer.
    pub informer: Arc<Informer>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Fixture {
    /// Starts `backend` and builds (but does not run) an informer on it.
    pub async fn new(backend: &Backend) -> Result<Fixture, RigError> {
        let target = Target::start(backend).await?;
        let informer = Arc::new(SharedIndexInformer::new(
            target.api(),
            InformerOptions::new(Duration::ZERO),
        ));
        Ok(Fixture {
            target,
            informer,
            stop: None,
            task: None,
        })
    }

    /// Runs the informer in a task (once).
    pub fn run_informer(&mut self) {
        if self.task.is_some() {
            return;
        }
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let informer = self.informer.clone();
        self.stop = Some(tx);
        self.task = Some(tokio::spawn(async move {
            informer
                .run(async {
                    let _ = rx.await;
                })
                .await
        }));
    }

    /// Stops the informer and the embedded server.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
        self.target.stop().await;
    }
}
