//! The cluster an experiment talks to: where it is ([`Backend`]), a client for it ([`Target`]),
//! and a running informer on it ([`Fixture`]).

use std::{collections::BTreeMap, path::PathBuf, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};

use super::RigError;
use controlloop::{
    apiserver::{ApiServer, Cluster, ServerOptions},
    cache::{InformerOptions, SharedIndexInformer},
    controller::predicate::Predicate,
    resources::{Widget, WidgetSpec},
};

/// The namespace the experiment writes in.
pub const NAMESPACE: &str = "default";
/// The name of the object the experiment writes.
pub const OBJECT: &str = "controlloop-burst";

/// A fresh embedded server, its widgets' API in [`NAMESPACE`], and a widget `name` (one
/// replica) to create on it.
pub fn fresh_widget(name: &str) -> (Cluster, Api<Widget>, Widget) {
    let cluster = Cluster::new(ServerOptions::default());
    let api: Api<Widget> = Api::namespaced(cluster.in_process_client(), NAMESPACE);
    let spec = WidgetSpec {
        replicas: 1,
        color: None,
    };
    (cluster, api, Widget::new(name, spec))
}

/// The counter an object carries: `data.value` parsed as an integer.
pub fn value_of(cm: &ConfigMap) -> Option<u64> {
    cm.data.as_ref()?.get("value")?.parse().ok()
}

/// The namespace the runs that leave objects behind them use on a real control plane, so that
/// nothing of theirs reaches a watch of [`NAMESPACE`] (where the storms watch every ConfigMap).
pub const ASIDE: &str = "controlloop-aside";

/// Creates namespace `name` unless it exists (and is not terminating).
pub async fn ensure_namespace(client: &kube::Client, name: &str) -> Result<(), kube::Error> {
    use k8s_openapi::api::core::v1::Namespace;
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
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
    /// The embedded API server in-process, every watch event delivered this long after its
    /// write (`Cluster::delay_watch_events`): a watch that lags, the broken variant the latency
    /// bounds fire on.
    InProcessBehind(Duration),
    /// The embedded API server on a 127.0.0.1 socket, over HTTP: the real list/watch path.
    Http,
    /// A real cluster, through this kubeconfig file (its current context). Real clock only.
    Kubeconfig(PathBuf),
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
            Backend::InProcess | Backend::InProcessBehind(_) => {
                let cluster = Cluster::new(ServerOptions::default());
                if let Backend::InProcessBehind(delay) = backend {
                    cluster.delay_watch_events(*delay);
                }
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
                // Without a TLS stack kube would refuse an https server too, but only with
                // "TLS required but no TLS stack selected": say which feature gives one.
                if !super::real::TLS && config.cluster_url.scheme_str() == Some("https") {
                    return Err(RigError::NoTls {
                        path: path.clone(),
                        server: config.cluster_url.to_string(),
                    });
                }
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

/// An informer on the objects of kind `K` in [`NAMESPACE`], listed and watched through
/// `kube::Api`: ConfigMaps for every storm ([`Fixture`]), widgets for every controller
/// [`Process`](super::Process).
pub type Informer<K = ConfigMap> = SharedIndexInformer<K, Api<K>>;

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
