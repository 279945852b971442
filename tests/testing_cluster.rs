//! `controlloop::testing::TestCluster`, the front door for testing a controller of your own:
//! apply from YAML and from typed values (create, then replace), a wait on the paused clock that
//! returns as soon as its condition holds, and a failed wait's message with the server's objects
//! and requests.

use std::time::Duration;

use controlloop::testing::{TestCluster, TestError};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta, Patch, PatchParams};

/// Every await here ends within this much of the paused clock, or the test names the hang.
const LIMIT: Duration = Duration::from_secs(7200);

async fn bounded<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .unwrap_or_else(|_| panic!("{what} did not end: a request the server never answered?"))
}

const OBJECTS: &str = "\
apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: web
  namespace: shop
data:
  replicas: '1'
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: leader
spec:
  holderIdentity: a
";

#[tokio::test(start_paused = true)]
async fn yaml_is_applied_in_order_each_to_its_scope_and_a_second_apply_replaces() {
    let cluster = TestCluster::new();
    let stored = bounded("the first apply", cluster.apply_yaml(OBJECTS))
        .await
        .unwrap();
    let names: Vec<_> = stored
        .iter()
        .map(|o| {
            let m = &o.metadata;
            format!(
                "{}/{}",
                m.namespace.as_deref().unwrap_or("-"),
                m.name.as_deref().unwrap()
            )
        })
        .collect();
    // The Namespace is cluster-scoped; the Lease, namespaced and given none, goes to default.
    assert_eq!(names, ["-/shop", "shop/web", "default/leader"]);

    let again = OBJECTS.replace("replicas: '1'", "replicas: '2'");
    bounded("the second apply", cluster.apply_yaml(&again))
        .await
        .unwrap();
    let web: ConfigMap = Api::namespaced(cluster.client(), "shop")
        .get("web")
        .await
        .unwrap();
    assert_eq!(web.data.unwrap()["replicas"], "2");
    let leases: Api<Lease> = Api::namespaced(cluster.client(), "default");
    assert_eq!(
        leases
            .get("leader")
            .await
            .unwrap()
            .spec
            .unwrap()
            .holder_identity
            .as_deref(),
        Some("a")
    );
}

#[tokio::test(start_paused = true)]
async fn a_typed_object_is_created_then_replaced() {
    let cluster = TestCluster::new();
    let mut ns = Namespace {
        metadata: ObjectMeta {
            name: Some("team".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let created = bounded("create", cluster.apply(&ns)).await.unwrap();
    ns.metadata.labels = Some([("tier".to_string(), "gold".to_string())].into());
    let replaced = bounded("replace", cluster.apply(&ns)).await.unwrap();
    assert_ne!(
        created.metadata.resource_version,
        replaced.metadata.resource_version
    );
    assert_eq!(replaced.metadata.labels.unwrap()["tier"], "gold");
}

#[tokio::test(start_paused = true)]
async fn yaml_naming_nothing_served_and_broken_yaml_are_errors() {
    let cluster = TestCluster::new();
    let unknown = "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n";
    let err = bounded("apply", cluster.apply_yaml(unknown))
        .await
        .unwrap_err();
    assert!(
        matches!(err, TestError::NotServed(ref k) if k == "example.com/v1/Gadget"),
        "{err}"
    );
    let err = bounded("apply", cluster.apply_yaml("kind: ["))
        .await
        .unwrap_err();
    assert!(matches!(err, TestError::Yaml(_)), "{err}");
}

#[tokio::test(start_paused = true)]
async fn a_wait_returns_when_the_condition_holds_an_hour_of_clock_later() {
    let cluster = TestCluster::new();
    cluster.apply_yaml(OBJECTS).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), "shop");
    let writer = api.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        let patch = serde_json::json!({ "data": { "replicas": "3" } });
        writer
            .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    });
    let start = tokio::time::Instant::now();
    let three = |cm: &ConfigMap| cm.data.as_ref().is_some_and(|d| d["replicas"] == "3");
    let real = std::time::Instant::now();
    let cm = bounded(
        "the wait",
        cluster.wait_until(&api, "web", Duration::from_secs(7000), three),
    )
    .await
    .unwrap();
    assert_eq!(cm.data.unwrap()["replicas"], "3");
    assert_eq!(start.elapsed(), Duration::from_secs(3600)); // at the write, not at a poll
    assert!(
        real.elapsed() < Duration::from_secs(30),
        "an hour of clock took {:?}",
        real.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_wait_that_times_out_shows_the_objects_and_the_requests() {
    let cluster = TestCluster::new();
    cluster.apply_yaml(OBJECTS).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), "shop");
    let never = |cm: &ConfigMap| cm.data.as_ref().is_some_and(|d| d["replicas"] == "9");
    let err = bounded(
        "the wait",
        cluster.wait_until(&api, "web", Duration::from_secs(60), never),
    )
    .await
    .unwrap_err();
    let TestError::Timeout { within, dump, .. } = &err else {
        panic!("not a timeout: {err}");
    };
    assert_eq!(*within, Duration::from_secs(60));
    assert!(dump.contains("configmaps shop/web rv "), "{dump}");
    assert!(dump.contains("namespaces /shop rv "), "{dump}");
    assert!(
        dump.contains("POST /api/v1/namespaces/shop/configmaps 201"),
        "{dump}"
    );
    assert!(err.to_string().contains("did not hold within 60s"), "{err}");
}

const GADGETS: &str = "\
apiVersion: example.com/v1
kind: Gadget
metadata:
  name: g
spec:
  size: 3
  colour: blue
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
";

#[tokio::test(start_paused = true)]
async fn a_stream_s_custom_resource_definition_is_applied_before_its_objects() {
    let cluster = TestCluster::new();
    let stored = bounded("the apply", cluster.apply_yaml(GADGETS))
        .await
        .unwrap();
    let kinds: Vec<_> = stored
        .iter()
        .map(|o| o.types.as_ref().unwrap().kind.as_str())
        .collect();
    assert_eq!(kinds, ["CustomResourceDefinition", "Gadget"]);
    // Served by the CRD's schema: `colour` is not in it, so it was pruned.
    assert_eq!(stored[1].data["spec"], serde_json::json!({ "size": 3 }));
}
