//! The cluster an experiment talks to: where it is ([`Backend`]), a client for it ([`Target`]),
//! and a running informer on it ([`Fixture`]). The subject (one ConfigMap whose `data.value` is
//! a counter) and the informer's fixture are the library's own test fixture
//! (`controlloop::testing`), which the library's tests stand on too.

use std::{path::PathBuf, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};

use super::RigError;
use controlloop::{
    apiserver::{ApiServer, Cluster, ServerOptions},
    cache::SharedIndexInformer,
    controller::predicate::Predicate,
    testing,
};

use super::widget::{Widget, WidgetSpec, install_widgets};

// The namespace the experiment writes in, the object's counter, a ConfigMap carrying one, and
// the write that sets it: the library's.
pub use controlloop::testing::{NAMESPACE, object, set_value, value_of};

/// The name of the object the experiment writes.
pub const OBJECT: &str = "controlloop-burst";

/// A fresh embedded server, in-process, that serves the book's custom resources: their
/// CustomResourceDefinitions POSTed and established ([`install_widgets`]), as a user installs
/// them on a cluster. Its request log is cleared, so that it holds the experiment's requests
/// only.
pub async fn widget_cluster() -> Cluster {
    let cluster = Cluster::new(ServerOptions::default());
    install_widgets(&cluster.in_process_client())
        .await
        .expect("the book's CRDs install on a fresh embedded server");
    cluster.clear_requests();
    cluster
}

/// A fresh embedded server ([`widget_cluster`]), its widgets' API in [`NAMESPACE`], and a
/// widget `name` (one replica) to create on it.
pub async fn fresh_widget(name: &str) -> (Cluster, Api<Widget>, Widget) {
    let cluster = widget_cluster().await;
    let api: Api<Widget> = Api::namespaced(cluster.in_process_client(), NAMESPACE);
    let spec = WidgetSpec {
        replicas: 1,
        color: None,
    };
    (cluster, api, Widget::new(name, spec))
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
    /// The library's fixture on the target's client: the informer and its task.
    shared: testing::Fixture,
}

impl Fixture {
    /// Starts `backend` and builds (but does not run) an informer on it.
    pub async fn new(backend: &Backend) -> Result<Fixture, RigError> {
        let target = Target::start(backend).await?;
        let shared = testing::Fixture::new(target.client());
        Ok(Fixture {
            target,
            informer: shared.informer.clone(),
            shared,
        })
    }

    /// Runs the informer in a task (once).
    pub fn run_informer(&mut self) {
        self.shared.run_informer();
    }

    /// Stops the informer and the embedded server. An informer a handler's panic crashed has
    /// stopped already, with nothing left to wait for.
    pub async fn stop(self) {
        let _ = self.shared.stop().await;
        self.target.stop().await;
    }
}
