//! Helpers shared by the `apiserver_*` test files.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use controlloop::apiserver::{ApiServer, ServerOptions};
use futures::{Stream, StreamExt};
use http::Request;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube::client::Body;
use serde_json::Value;

pub mod widget;

// Each test file uses its own few of them.
#[allow(unused_imports)]
pub use widget::{PlainWidget, Widget, WidgetSpec, WidgetStatus};

/// Real-clock tests never sleep; they wait for an event, at most this long.
pub const WAIT: Duration = Duration::from_secs(10);

/// Awaits `fut`, failing with `hang` (the suspected cause) if it takes longer than [`WAIT`].
pub async fn within<T>(hang: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out after {WAIT:?}: {hang}"))
}

/// A ConfigMap with the given name, labels and one data entry.
pub fn cm(name: &str, labels: &[(&str, &str)], value: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    if !labels.is_empty() {
        c.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        );
    }
    c.data = Some([("v".to_string(), value.to_string())].into());
    c
}

/// A Widget with the given name and replica count.
pub fn widget(name: &str, replicas: i32) -> Widget {
    Widget::new(
        name,
        WidgetSpec {
            replicas,
            color: None,
        },
    )
}

/// Installs the tests' custom resources on the cluster of `client` as a user does: the
/// CustomResourceDefinitions of [`Widget`] and [`PlainWidget`] POSTed, then a wait until both
/// are `Established` and the two seconds after it in which the server holds a create of the
/// new resource, as kube-apiserver does.
pub async fn install_widgets(client: &kube::Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in widget::crds() {
        within(
            "a CRD create never answered",
            api.create(&PostParams::default(), &crd),
        )
        .await
        .expect("the CRD was not created");
    }
    for crd in widget::crds() {
        let name = crd.metadata.name.unwrap();
        within("the CRD was never established", async {
            while !widget::established(&api.get(&name).await.expect("the CRD is there")) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
    }
    tokio::time::sleep(widget::CREATE_HOLD).await;
}

/// A server as [`server`] starts it, serving the tests' custom resources ([`install_widgets`]).
pub async fn widget_server() -> ApiServer {
    let server = server().await;
    install_widgets(&server.client()).await;
    server
}

/// Creates the namespace `name` on `server` (only `default` and the `kube-*` ones exist at
/// start, and a create into a missing namespace is 404, as upstream).
pub async fn namespace(server: &ApiServer, name: &str) {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(server.client());
    let mut ns = k8s_openapi::api::core::v1::Namespace::default();
    ns.metadata.name = Some(name.into());
    within(
        "a namespace create never answered",
        api.create(&PostParams::default(), &ns),
    )
    .await
    .expect("the namespace was not created");
}

/// The ConfigMaps API of `ns` on `server`.
pub fn cms(server: &ApiServer, ns: &str) -> Api<ConfigMap> {
    Api::namespaced(server.client(), ns)
}

/// Creates a ConfigMap and returns it as stored.
pub async fn create(api: &Api<ConfigMap>, c: &ConfigMap) -> ConfigMap {
    within(
        "create never answered",
        api.create(&PostParams::default(), c),
    )
    .await
    .expect("create failed")
}

/// The next watch event, as `(type, name, resourceVersion)`; bookmarks have an empty name.
pub async fn next_event<S>(stream: &mut S, hang: &str) -> (String, String, String)
where
    S: Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
{
    let ev = within(hang, stream.next())
        .await
        .unwrap_or_else(|| panic!("the watch ended: {hang}"))
        .expect("watch event failed to decode");
    summarize(ev)
}

/// `(type, name, resourceVersion)` of an event; an ERROR gives `("ERROR", reason, code)`.
pub fn summarize(ev: WatchEvent<ConfigMap>) -> (String, String, String) {
    let obj = |ty: &str, c: ConfigMap| {
        (
            ty.to_string(),
            c.metadata.name.unwrap_or_default(),
            c.metadata.resource_version.unwrap_or_default(),
        )
    };
    match ev {
        WatchEvent::Added(c) => obj("ADDED", c),
        WatchEvent::Modified(c) => obj("MODIFIED", c),
        WatchEvent::Deleted(c) => obj("DELETED", c),
        WatchEvent::Bookmark(b) => {
            let end = b
                .metadata
                .annotations
                .contains_key("k8s.io/initial-events-end");
            let ty = if end {
                "BOOKMARK(initial-events-end)"
            } else {
                "BOOKMARK"
            };
            (ty.to_string(), String::new(), b.metadata.resource_version)
        }
        WatchEvent::Error(e) => ("ERROR".into(), e.reason, e.code.to_string()),
    }
}

/// A boxed watch stream on `api` from `rv`, failing the test if the watch does not open.
pub async fn open_watch(
    api: &Api<ConfigMap>,
    wp: &WatchParams,
    rv: &str,
) -> std::pin::Pin<Box<dyn Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Send>> {
    within("the watch never opened", api.watch(wp, rv))
        .await
        .expect("watch refused")
        .boxed()
}

/// Starts a server whose revisions count from 1, as a fresh etcd's do, so a test can name
/// them; failing the test if it cannot bind. (`ApiServer::start` itself starts above any
/// revision an earlier run issued: `tests/apiserver_hostile.rs` covers that.)
pub async fn server() -> ApiServer {
    server_with(ServerOptions::default()).await
}

/// Like [`server`], with `options` (whose `first_revision` defaults to 1 here).
pub async fn server_with(options: ServerOptions) -> ApiServer {
    let options = ServerOptions {
        first_revision: options.first_revision.or(Some(1)),
        ..options
    };
    within("the server never started", ApiServer::start_with(options))
        .await
        .expect("bind 127.0.0.1")
}

/// What storage holds: the head revision and every object, as JSON (the widgets: `null` on a
/// server that does not serve them).
pub async fn fingerprint(server: &ApiServer, client: &kube::Client) -> (u64, Value, Value) {
    let cms: Api<ConfigMap> = Api::all(client.clone());
    let ws: Api<Widget> = Api::all(client.clone());
    let a = serde_json::to_value(cms.list(&ListParams::default()).await.unwrap().items).unwrap();
    let b = match ws.list(&ListParams::default()).await {
        Ok(list) => serde_json::to_value(list.items).unwrap(),
        Err(kube::Error::Api(s)) if s.code == 404 => Value::Null,
        Err(e) => panic!("the widgets' list failed: {e}"),
    };
    (server.resource_version(), a, b)
}

/// A kube client for `server` that does not retry 429s, so the test sees them.
pub fn no_retry(server: &ApiServer) -> kube::Client {
    let mut cfg = server.config();
    cfg.default_retry = false;
    kube::Client::try_from(cfg).unwrap()
}

/// Sends a raw request through a kube client; returns code, Status, headers.
pub async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    ct: &str,
    body: Vec<u8>,
) -> (u16, Value, http::HeaderMap) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", ct)
        .body(Body::from(body))
        .unwrap();
    let resp = within("request never answered", client.send(req))
        .await
        .unwrap();
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    let status: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (parts.status.as_u16(), status, parts.headers)
}
