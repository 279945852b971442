//! Namespaces are objects, as in kube-apiserver: `default` and the `kube-*` namespaces exist at
//! start, `/api/v1/namespaces` is served, a create into a missing namespace is 404 (the
//! namespace lifecycle admission), into one being deleted 403, and deleting a namespace
//! deletes what it holds, then the namespace.

mod apiserver_support;

use apiserver_support::*;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

fn namespaces(server: &controlloop::apiserver::ApiServer) -> Api<Namespace> {
    Api::all(server.client())
}

#[tokio::test]
async fn default_and_kube_system_exist_at_start_and_namespaces_are_listed() {
    let server = server().await;
    let api = namespaces(&server);
    let list = within("a list", api.list(&ListParams::default()))
        .await
        .unwrap();
    let names: Vec<String> = list
        .items
        .iter()
        .map(|n| n.metadata.name.clone().unwrap())
        .collect();
    for want in ["default", "kube-system"] {
        assert!(names.iter().any(|n| n == want), "{names:?}");
    }
    let default = api.get("default").await.unwrap();
    assert_eq!(default.status.unwrap().phase.as_deref(), Some("Active"));
    assert_eq!(
        default.metadata.labels.unwrap()["kubernetes.io/metadata.name"],
        "default"
    );
    assert!(default.metadata.uid.is_some() && default.metadata.creation_timestamp.is_some());
    // The initial namespaces take no revision: a fresh store is still at 1.
    assert_eq!(server.resource_version(), 1);
    // Discovery says namespaces are cluster-scoped.
    let (code, doc, _) = send(
        &no_retry(&server),
        "GET",
        "/api/v1",
        "application/json",
        vec![],
    )
    .await;
    assert_eq!(code, 200);
    let ns = doc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "namespaces")
        .expect("namespaces are discoverable");
    assert_eq!(ns["namespaced"], false);
}

#[tokio::test]
async fn a_create_into_a_missing_namespace_is_404_and_stores_nothing() {
    let server = server().await;
    let client = no_retry(&server);
    let before = fingerprint(&server, &client).await;
    let (code, status, _) = send(
        &client,
        "POST",
        "/api/v1/namespaces/nowhere/configmaps",
        "application/json",
        serde_json::to_vec(&json!({"metadata": {"name": "a"}})).unwrap(),
    )
    .await;
    assert_eq!(
        (
            code,
            status["reason"].as_str(),
            status["details"]["kind"].as_str()
        ),
        (404, Some("NotFound"), Some("namespaces")),
        "{status}"
    );
    assert_eq!(status["details"]["name"], "nowhere");
    assert_eq!(fingerprint(&server, &client).await, before);
    // Once the namespace exists, the same create succeeds.
    namespace(&server, "nowhere").await;
    create(&cms(&server, "nowhere"), &cm("a", &[], "1")).await;
    // A list of a namespace that does not exist is empty, not an error (as upstream).
    let none = cms(&server, "missing")
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(none.items.is_empty());
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_objects_then_the_namespace() {
    let server = server().await;
    namespace(&server, "team").await;
    let api = cms(&server, "team");
    create(&api, &cm("a", &[], "1")).await;
    let mut held = cm("held", &[], "1");
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    create(&api, &held).await;
    let ns = namespaces(&server);
    let answer = ns.delete("team", &DeleteParams::default()).await.unwrap();
    let terminating = answer.left().expect("the namespace, Terminating");
    assert_eq!(
        terminating.status.unwrap().phase.as_deref(),
        Some("Terminating")
    );
    // The object without finalizers is gone; the one with a finalizer is marked deleted, and
    // keeps the namespace Terminating.
    assert!(api.get_opt("a").await.unwrap().is_none());
    let marked = api.get("held").await.unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some());
    let still = ns.get("team").await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_some());
    // No new content in a namespace being deleted: 403, naming why.
    let client = no_retry(&server);
    let (code, status, _) = send(
        &client,
        "POST",
        "/api/v1/namespaces/team/configmaps",
        "application/json",
        serde_json::to_vec(&json!({"metadata": {"name": "late"}})).unwrap(),
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (403, Some("Forbidden")),
        "{status}"
    );
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("being deleted")
    );
    // The last finalizer's removal deletes the object, and with it the namespace.
    let mut done = marked;
    done.metadata.finalizers = None;
    api.replace("held", &PostParams::default(), &done)
        .await
        .unwrap();
    assert!(ns.get_opt("team").await.unwrap().is_none());
    assert_eq!(server.object_count::<ConfigMap>(), 0);
}

#[tokio::test]
async fn the_initial_namespaces_may_not_be_deleted_and_names_are_labels() {
    let server = server().await;
    let client = no_retry(&server);
    for name in ["default", "kube-system"] {
        let (code, status, _) = send(
            &client,
            "DELETE",
            &format!("/api/v1/namespaces/{name}"),
            "application/json",
            vec![],
        )
        .await;
        assert_eq!(
            (code, status["reason"].as_str()),
            (403, Some("Forbidden")),
            "{status}"
        );
    }
    // A namespace name is a DNS label: no dots.
    let (code, status, _) = send(
        &client,
        "POST",
        "/api/v1/namespaces",
        "application/json",
        serde_json::to_vec(&json!({"metadata": {"name": "a.b"}})).unwrap(),
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (422, Some("Invalid")),
        "{status}"
    );
    // `spec.finalizers` belong to the server: an update cannot drop `kubernetes`.
    namespace(&server, "mine").await;
    let ns = namespaces(&server);
    let mut n = ns.get("mine").await.unwrap();
    assert_eq!(
        n.spec.as_ref().unwrap().finalizers.as_deref(),
        Some(&["kubernetes".to_string()][..])
    );
    n.spec.as_mut().unwrap().finalizers = None;
    let kept = ns
        .replace("mine", &PostParams::default(), &n)
        .await
        .unwrap();
    assert_eq!(
        kept.spec.unwrap().finalizers.as_deref(),
        Some(&["kubernetes".to_string()][..])
    );
}

/// A length-delimited protobuf field (`n`, wire type 2) of at most 127 bytes.
fn tag(n: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![(n << 3) | 2, bytes.len() as u8];
    out.extend_from_slice(bytes);
    out
}

#[tokio::test]
async fn a_namespace_sent_as_protobuf_is_created_as_kubectl_sends_it() {
    let server = server().await;
    // `kubectl create namespace team`: the protobuf envelope of a Namespace named `team`.
    let ns = tag(1, &tag(1, b"team"));
    let type_meta = [tag(1, b"v1"), tag(2, b"Namespace")].concat();
    let body = [b"k8s\0".to_vec(), tag(1, &type_meta), tag(2, &ns)].concat();
    let (code, made, _) = send(
        &no_retry(&server),
        "POST",
        "/api/v1/namespaces",
        "application/vnd.kubernetes.protobuf",
        body,
    )
    .await;
    assert_eq!(
        (code, made["metadata"]["name"].as_str()),
        (201, Some("team")),
        "{made}"
    );
    assert_eq!(made["status"]["phase"], "Active");
    create(&cms(&server, "team"), &cm("inside", &[], "1")).await;
}
