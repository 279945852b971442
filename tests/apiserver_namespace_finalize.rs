//! A namespace's end as kube-apiserver v1.37.2 and kube-controller-manager's namespace
//! controller give it (kubernetes `pkg/registry/core/namespace/storage/storage.go`,
//! `pkg/registry/core/namespace/strategy.go`,
//! `pkg/controller/namespace/deletion/namespaced_resources_deleter.go`): another controller's
//! token in `spec.finalizers` keeps a deleted namespace Terminating until a PUT to
//! `/finalize` empties it; `metadata.finalizers` hold it as they hold any object; the
//! controller's five conditions name what remains.

mod apiserver_support;

use apiserver_support::*;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

fn namespaces(server: &controlloop::apiserver::ApiServer) -> Api<Namespace> {
    Api::all(server.client())
}

async fn call(
    server: &controlloop::apiserver::ApiServer,
    method: &str,
    path: &str,
    body: Value,
) -> (u16, Value) {
    let body = if body.is_null() {
        vec![]
    } else {
        serde_json::to_vec(&body).unwrap()
    };
    let (code, answer, _) = send(&no_retry(server), method, path, "application/json", body).await;
    (code, answer)
}

/// `status.conditions` as `(type, status, reason)`, in order.
fn conditions(ns: &Value) -> Vec<(String, String, String)> {
    ns["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let s = |f: &str| c[f].as_str().unwrap_or_default().to_owned();
            (s("type"), s("status"), s("reason"))
        })
        .collect()
}

fn condition_message(ns: &Value, ty: &str) -> String {
    ns["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == ty)
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// The field of a 422's first cause.
fn first_cause(status: &Value) -> &str {
    status["details"]["causes"][0]["field"]
        .as_str()
        .unwrap_or_default()
}

const NS: &str = "/api/v1/namespaces";

#[tokio::test]
async fn another_controllers_token_keeps_a_deleted_namespace_until_finalize_empties_it() {
    let server = server().await;
    let (code, created) = call(
        &server,
        "POST",
        NS,
        json!({"metadata": {"name": "team"}, "spec": {"finalizers": ["example.com/x"]}}),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(
        created["spec"]["finalizers"],
        json!(["example.com/x", "kubernetes"]),
        "PrepareForCreate appends the kubernetes token"
    );
    create(&cms(&server, "team"), &cm("a", &[], "1")).await;
    let (code, deleted) = call(&server, "DELETE", &format!("{NS}/team"), Value::Null).await;
    assert_eq!(
        (code, deleted["status"]["phase"].as_str()),
        (200, Some("Terminating"))
    );
    // The controller has emptied it and taken its own token; the other one holds it.
    assert!(cms(&server, "team").get_opt("a").await.unwrap().is_none());
    let (code, held) = call(&server, "GET", &format!("{NS}/team"), Value::Null).await;
    assert_eq!(code, 200, "{held}");
    assert_eq!(held["spec"]["finalizers"], json!(["example.com/x"]));
    assert_eq!(held["status"]["phase"], "Terminating");
    assert_eq!(
        conditions(&held),
        [
            (
                "NamespaceDeletionDiscoveryFailure",
                "False",
                "ResourcesDiscovered"
            ),
            (
                "NamespaceDeletionGroupVersionParsingFailure",
                "False",
                "ParsedGroupVersions"
            ),
            ("NamespaceDeletionContentFailure", "False", "ContentDeleted"),
            ("NamespaceContentRemaining", "False", "ContentRemoved"),
            (
                "NamespaceFinalizersRemaining",
                "False",
                "ContentHasNoFinalizers"
            ),
        ]
        .map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned()))
    );
    // A second delete answers the namespace, unchanged: spec.finalizers is not empty.
    let (code, again) = call(&server, "DELETE", &format!("{NS}/team"), Value::Null).await;
    assert_eq!(code, 200);
    assert_eq!(
        again["metadata"]["resourceVersion"],
        held["metadata"]["resourceVersion"]
    );
    // The main endpoint never changes spec.finalizers.
    let mut body = held.clone();
    body["spec"]["finalizers"] = json!([]);
    body["metadata"]["labels"]["touched"] = json!("yes");
    let (code, updated) = call(&server, "PUT", &format!("{NS}/team"), body).await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["spec"]["finalizers"], json!(["example.com/x"]));
    // `/finalize` does; status comes from storage whatever the body says.
    let mut body = updated.clone();
    body["spec"]["finalizers"] = json!([]);
    body["status"] = json!({"phase": "Active"});
    let (code, last) = call(&server, "PUT", &format!("{NS}/team/finalize"), body).await;
    assert_eq!(code, 200, "{last}");
    assert_eq!(last["kind"], "Namespace");
    assert_eq!(
        last["metadata"]["resourceVersion"], updated["metadata"]["resourceVersion"],
        "the update deleted it: answered at the version it was read at, as upstream"
    );
    assert_eq!(last["status"]["phase"], "Terminating");
    let (code, _) = call(&server, "GET", &format!("{NS}/team"), Value::Null).await;
    assert_eq!(
        code, 404,
        "both finalizer lists empty: the namespace is gone"
    );
}

#[tokio::test]
async fn finalize_serves_put_only_and_checks_each_finalizer_name() {
    let server = server().await;
    namespace(&server, "team").await;
    let ns: Value = serde_json::to_value(namespaces(&server).get("team").await.unwrap()).unwrap();
    for method in ["GET", "PATCH", "DELETE", "POST"] {
        let (code, status) = call(&server, method, &format!("{NS}/team/finalize"), json!({})).await;
        assert_eq!(
            (code, status["reason"].as_str()),
            (405, Some("MethodNotAllowed")),
            "{method}: {status}"
        );
    }
    let mut body = ns.clone();
    body["spec"]["finalizers"] = json!(["kubernetes", "bogus"]);
    let (code, status) = call(&server, "PUT", &format!("{NS}/team/finalize"), body).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["details"]["causes"][0]["field"],
        "spec.finalizers[1]"
    );
    assert!(
        status["details"]["causes"][0]["message"]
            .as_str()
            .unwrap()
            .contains("neither a standard finalizer name nor is it fully qualified"),
        "{status}"
    );
    let (code, status) = call(
        &server,
        "POST",
        NS,
        json!({"metadata": {"name": "bad"}, "spec": {"finalizers": ["bogus"]}}),
    )
    .await;
    assert_eq!(
        (code, first_cause(&status)),
        (422, "spec.finalizers"),
        "{status}"
    );
    // On a namespace not being deleted, /finalize writes the list and nothing is deleted.
    let mut body = ns.clone();
    body["spec"]["finalizers"] = json!([]);
    let (code, written) = call(&server, "PUT", &format!("{NS}/team/finalize"), body).await;
    assert_eq!(
        (code, &written["spec"]["finalizers"]),
        (200, &Value::Null),
        "an empty list is not written: {written}"
    );
    assert_eq!(written["status"]["phase"], "Active");
}

#[tokio::test]
async fn a_namespace_finalized_before_its_delete_keeps_its_objects_until_deleted_again() {
    let server = server().await;
    namespace(&server, "team").await;
    create(&cms(&server, "team"), &cm("a", &[], "1")).await;
    let mut body: Value =
        serde_json::to_value(namespaces(&server).get("team").await.unwrap()).unwrap();
    body["spec"]["finalizers"] = json!([]);
    let (code, _) = call(&server, "PUT", &format!("{NS}/team/finalize"), body).await;
    assert_eq!(code, 200);
    // The first delete only marks it; the controller finds it finalized and does nothing.
    let (code, marked) = call(&server, "DELETE", &format!("{NS}/team"), Value::Null).await;
    assert_eq!(
        (code, marked["status"]["phase"].as_str()),
        (200, Some("Terminating"))
    );
    assert!(cms(&server, "team").get_opt("a").await.unwrap().is_some());
    assert!(marked["status"]["conditions"].is_null(), "{marked}");
    // A second delete finds spec.finalizers empty: the namespace is deleted as any object.
    let (code, gone) = call(&server, "DELETE", &format!("{NS}/team"), Value::Null).await;
    assert_eq!(
        (code, gone["kind"].as_str()),
        (200, Some("Namespace")),
        "{gone}"
    );
    let (code, _) = call(&server, "GET", &format!("{NS}/team"), Value::Null).await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn metadata_finalizers_hold_a_namespace_as_they_hold_any_object() {
    let server = server().await;
    let (code, _) = call(
        &server,
        "POST",
        NS,
        json!({"metadata": {"name": "team", "finalizers": ["example.com/m"]}}),
    )
    .await;
    assert_eq!(code, 201);
    let (code, _) = call(&server, "DELETE", &format!("{NS}/team"), Value::Null).await;
    assert_eq!(code, 200);
    let (_, held) = call(&server, "GET", &format!("{NS}/team"), Value::Null).await;
    assert!(
        held["spec"]["finalizers"].is_null(),
        "the controller took its token (an empty list is not written): {held}"
    );
    assert_eq!(held["metadata"]["finalizers"], json!(["example.com/m"]));
    // No new finalizer on an object being deleted (ValidateObjectMetaUpdate).
    let mut body = held.clone();
    body["metadata"]["finalizers"] = json!(["example.com/m", "example.com/n"]);
    let (code, status) = call(&server, "PUT", &format!("{NS}/team"), body).await;
    assert_eq!(
        (code, first_cause(&status)),
        (422, "metadata.finalizers"),
        "{status}"
    );
    // Its last metadata finalizer's removal deletes it.
    let mut body = held.clone();
    body["metadata"]["finalizers"] = json!([]);
    let (code, _) = call(&server, "PUT", &format!("{NS}/team"), body).await;
    assert_eq!(code, 200);
    let (code, _) = call(&server, "GET", &format!("{NS}/team"), Value::Null).await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn the_conditions_name_the_content_finalizers_hold_and_clear_when_it_goes() {
    let server = server().await;
    namespace(&server, "team").await;
    let api = cms(&server, "team");
    for name in ["h1", "h2"] {
        let mut held = cm(name, &[], "1");
        held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
        create(&api, &held).await;
    }
    namespaces(&server)
        .delete("team", &DeleteParams::default())
        .await
        .unwrap();
    let (_, ns) = call(&server, "GET", &format!("{NS}/team"), Value::Null).await;
    assert_eq!(
        condition_message(&ns, "NamespaceContentRemaining"),
        "Some resources are remaining: configmaps. has 2 resource instances"
    );
    assert_eq!(
        condition_message(&ns, "NamespaceFinalizersRemaining"),
        "Some content in the namespace has finalizers remaining: example.com/hold in 2 resource instances"
    );
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    for name in ["h1", "h2"] {
        let mut done = api.get(name).await.unwrap();
        done.metadata.finalizers = None;
        api.replace(name, &PostParams::default(), &done)
            .await
            .unwrap();
    }
    let (code, _) = call(&server, "GET", &format!("{NS}/team"), Value::Null).await;
    assert_eq!(
        code, 404,
        "the last object gone: the controller finalizes, the namespace goes"
    );
}
