//! The fixture this crate's tests and the book's rig both stand on, with the `testing` feature:
//! a cluster with an informer on its ConfigMaps ([`Fixture`]), the object whose `data.value` is
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

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use parking_lot::Mutex;
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
