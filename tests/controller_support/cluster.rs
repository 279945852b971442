//! An embedded cluster with an informer on its ConfigMaps: the ports' own fixture for tests
//! that run a controller against a real list/watch path, in-process under the paused clock.
#![allow(dead_code)] // each test file that includes it uses a part of it

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use controlloop::{
    apiserver::{Cluster, ServerOptions},
    cache::{InformerOptions, SharedIndexInformer},
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use parking_lot::Mutex;

/// The namespace every object of the fixture lives in.
pub const NAMESPACE: &str = "default";

/// The value a test ConfigMap carries in `data.value`.
pub fn value_of(cm: &ConfigMap) -> Option<u64> {
    cm.data.as_ref()?.get("value")?.parse().ok()
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

/// The embedded server, called in-process, and an informer on its ConfigMaps in [`NAMESPACE`].
pub struct Fixture {
    /// The ConfigMaps of [`NAMESPACE`].
    pub api: Api<ConfigMap>,
    /// The informer (built, not running until [`Fixture::run_informer`]).
    pub informer: Arc<SharedIndexInformer<ConfigMap, Api<ConfigMap>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Fixture {
    /// A fresh in-process cluster holding `objects`, each with value 0.
    pub async fn with(objects: &[&str]) -> Fixture {
        let cluster = Cluster::new(ServerOptions::default());
        let api = Api::namespaced(cluster.in_process_client(), NAMESPACE);
        for name in objects {
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some((*name).to_owned()),
                    namespace: Some(NAMESPACE.to_owned()),
                    ..Default::default()
                },
                data: Some(BTreeMap::from([("value".to_owned(), "0".to_owned())])),
                ..Default::default()
            };
            api.create(&PostParams::default(), &cm)
                .await
                .expect("the embedded server takes a create");
        }
        let informer = Arc::new(SharedIndexInformer::new(
            api.clone(),
            InformerOptions::new(Duration::ZERO),
        ));
        Fixture {
            api,
            informer,
            stop: None,
            task: None,
        }
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

    /// Stops the informer.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .expect("the informer stops within 10 s of its stop signal: a deadlock in run?")
                .expect("the informer's task does not panic");
        }
    }
}

/// What one reconcile acted on.
#[derive(Debug, Clone, Copy)]
pub struct Observation {
    /// The value it read; `None` if the object was missing.
    pub value: Option<u64>,
}

/// Records what reconcilers acted on, and how many ran at once.
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

    /// Acts on `value` for `cost` (a tokio sleep: virtual time under a paused clock).
    pub async fn act(&self, value: Option<u64>, cost: Duration) {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        if !cost.is_zero() {
            tokio::time::sleep(cost).await;
        }
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.observations.lock().push(Observation { value });
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
