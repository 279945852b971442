//! `metadata.generation` on custom resources with and without the status subresource, as the
//! API server keeps it (apiextensions-apiserver v0.36.3,
//! `pkg/registry/customresource/strategy.go`; apiserver v0.36.3,
//! `pkg/registry/generic/registry/store.go`, `markAsDeleting`). Chapter 08 shows the table;
//! these cases pin the edges.

mod apiserver_support;

use apiserver_support::{PlainWidget, Widget, WidgetSpec, install_widgets};
use controlloop::apiserver::{Cluster, ServerOptions};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn spec() -> WidgetSpec {
    WidgetSpec {
        replicas: 1,
        color: None,
    }
}

/// A client of a fresh in-process cluster that serves the tests' widgets.
async fn widget_client() -> kube::Client {
    let client = Cluster::new(ServerOptions::default()).in_process_client();
    install_widgets(&client).await;
    client
}

#[tokio::test(start_paused = true)]
async fn a_kind_without_the_status_subresource_has_no_status_endpoint() {
    let client = widget_client().await;
    let api: Api<PlainWidget> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &PlainWidget::new("p", spec()))
        .await
        .unwrap();
    let patch = Patch::Merge(json!({ "status": { "message": "x" } }));
    let err = api
        .patch_status("p", &PatchParams::default(), &patch)
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(status) => assert_eq!(status.code, 404, "{status:?}"),
        other => panic!("expected a 404 Status, got {other:?}"),
    }
    // Nothing was lost: the object is as created, at generation 1.
    assert_eq!(api.get("p").await.unwrap().metadata.generation, Some(1));
}

#[tokio::test(start_paused = true)]
async fn a_status_written_through_the_main_endpoint_is_kept_and_bumps_the_generation() {
    let client = widget_client().await;
    let api: Api<PlainWidget> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &PlainWidget::new("p", spec()))
        .await
        .unwrap();
    let patch = Patch::Merge(json!({ "status": { "observedGeneration": 1 } }));
    let p = api
        .patch("p", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, Some(2));
    assert_eq!(p.status.unwrap().observed_generation, Some(1));
}

#[tokio::test(start_paused = true)]
async fn marking_an_object_deleted_bumps_its_generation_once() {
    let client = widget_client().await;
    let api: Api<Widget> = Api::namespaced(client, "default");
    let mut w = Widget::new("w", spec());
    w.metadata.finalizers = Some(vec!["lab.controlloop.dev/hold".into()]);
    api.create(&PostParams::default(), &w).await.unwrap();
    api.delete("w", &DeleteParams::default()).await.unwrap();
    let marked = api.get("w").await.unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(marked.metadata.generation, Some(2));
    api.delete("w", &DeleteParams::default()).await.unwrap(); // already marked: no change
    assert_eq!(api.get("w").await.unwrap().metadata.generation, Some(2));
}
