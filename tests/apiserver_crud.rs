//! The embedded API server's verbs, through `kube::Api` over real HTTP: get, list (selectors,
//! all namespaces, limit/continue), create, update, patch, delete, and the rules for
//! resourceVersion and generation.

mod apiserver_support;

use apiserver_support::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn every_write_takes_the_next_cluster_wide_resource_version() {
    let server = server().await;
    assert_eq!(
        server.resource_version(),
        1,
        "an empty store is at revision 1, like etcd"
    );
    let a = create(&cms(&server, "default"), &cm("a", &[], "1")).await;
    let b = create(&cms(&server, "kube-public"), &cm("b", &[], "1")).await;
    // A custom resource's objects count on the same revision as every other kind's; its CRD's
    // writes (the create, then the status the naming and establishing controllers write)
    // take revisions too.
    install_widgets(&server.client()).await;
    let installed = server.resource_version();
    assert!(installed > 3, "the CRDs' writes took revisions");
    let w: Api<Widget> = Api::namespaced(server.client(), "default");
    let w = w
        .create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let rvs: Vec<_> = [a.metadata, b.metadata, w.metadata]
        .into_iter()
        .map(|m| m.resource_version.unwrap())
        .collect();
    let last = (installed + 1).to_string();
    assert_eq!(rvs, ["2", "3", last.as_str()]);
    let list = cms(&server, "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(
        list.metadata.resource_version.as_deref(),
        Some(last.as_str())
    );
    let empty: Api<ConfigMap> = Api::namespaced(server.client(), "empty");
    let list = empty.list(&ListParams::default()).await.unwrap();
    assert!(list.items.is_empty());
    assert_eq!(
        list.metadata.resource_version.as_deref(),
        Some(last.as_str()),
        "an empty list still has an RV"
    );
}

#[tokio::test]
async fn list_filters_by_namespace_and_label_selector() {
    let server = server().await;
    create(&cms(&server, "default"), &cm("a", &[("app", "web")], "1")).await;
    create(&cms(&server, "default"), &cm("b", &[("app", "db")], "1")).await;
    create(
        &cms(&server, "kube-system"),
        &cm("c", &[("app", "web")], "1"),
    )
    .await;
    let names = |l: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        l.items
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect()
    };
    let all: Api<ConfigMap> = Api::all(server.client());
    assert_eq!(
        names(all.list(&ListParams::default()).await.unwrap()),
        ["a", "b", "c"]
    );
    let web = ListParams::default().labels("app=web");
    assert_eq!(names(all.list(&web).await.unwrap()), ["a", "c"]);
    assert_eq!(
        names(cms(&server, "default").list(&web).await.unwrap()),
        ["a"]
    );
    let not_web = ListParams::default().labels("app notin (web)");
    assert_eq!(names(all.list(&not_web).await.unwrap()), ["b"]);
    let by_name = ListParams::default().fields("metadata.name=c");
    assert_eq!(names(all.list(&by_name).await.unwrap()), ["c"]);
}

#[tokio::test]
async fn limit_and_continue_page_through_a_consistent_snapshot() {
    let server = server().await;
    let api = cms(&server, "default");
    for i in 0..5 {
        create(&api, &cm(&format!("cm-{i}"), &[], "1")).await;
    }
    let first = api.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(first.items.len(), 2);
    let token = first.metadata.continue_.clone().expect("more pages");
    let snapshot_rv = first.metadata.resource_version.clone();
    // Changes after the first page do not show in later pages: they are read at its revision.
    api.delete("cm-3", &DeleteParams::default()).await.unwrap();
    create(&api, &cm("cm-9", &[], "1")).await;
    let mut names: Vec<String> = first
        .items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect();
    let mut token = Some(token);
    while let Some(t) = token {
        let page = api
            .list(&ListParams::default().limit(2).continue_token(&t))
            .await
            .unwrap();
        assert_eq!(page.metadata.resource_version, snapshot_rv);
        names.extend(page.items.into_iter().map(|c| c.metadata.name.unwrap()));
        token = page.metadata.continue_.filter(|c| !c.is_empty());
    }
    assert_eq!(names, ["cm-0", "cm-1", "cm-2", "cm-3", "cm-4"]);
}

#[tokio::test]
async fn a_continue_token_from_before_a_compaction_is_410_expired() {
    let server = server().await;
    let api = cms(&server, "default");
    for i in 0..3 {
        create(&api, &cm(&format!("cm-{i}"), &[], "1")).await;
    }
    let first = api.list(&ListParams::default().limit(1)).await.unwrap();
    create(&api, &cm("later", &[], "1")).await;
    server.compact();
    let rv_before = server.resource_version();
    let token = first.metadata.continue_.unwrap();
    let err = api
        .list(&ListParams::default().limit(1).continue_token(&token))
        .await
        .unwrap_err();
    let kube::Error::Api(s) = err else {
        panic!("not an API error: {err}")
    };
    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    assert_eq!(server.resource_version(), rv_before);
}

#[tokio::test]
async fn update_with_a_stale_resource_version_is_409_conflict() {
    let server = server().await;
    let api = cms(&server, "default");
    let v1 = create(&api, &cm("a", &[], "1")).await;
    let mut first = v1.clone();
    first.data = Some([("v".to_string(), "first".to_string())].into());
    let v2 = api
        .replace("a", &PostParams::default(), &first)
        .await
        .unwrap();
    assert_eq!(v2.metadata.resource_version.as_deref(), Some("3"));
    let mut stale = v1.clone();
    stale.data = Some([("v".to_string(), "stale".to_string())].into());
    let err = api
        .replace("a", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    let kube::Error::Api(s) = err else {
        panic!("not an API error: {err}")
    };
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    let now = api.get("a").await.unwrap();
    assert_eq!(
        now.data.unwrap()["v"],
        "first",
        "the stale write changed nothing"
    );
    assert_eq!(server.resource_version(), 3);
}

#[tokio::test]
async fn an_update_that_changes_nothing_takes_no_revision() {
    let server = server().await;
    let api = cms(&server, "default");
    let v1 = create(&api, &cm("a", &[], "1")).await;
    let same = api.replace("a", &PostParams::default(), &v1).await.unwrap();
    assert_eq!(same.metadata.resource_version, v1.metadata.resource_version);
    assert_eq!(server.resource_version(), 2);
}

#[tokio::test]
async fn merge_and_json_patches_write_through_the_same_checks_and_apply_is_refused() {
    let server = server().await;
    let api = cms(&server, "default");
    create(&api, &cm("a", &[], "1")).await;
    let pp = PatchParams::default();
    let merged = api
        .patch("a", &pp, &Patch::Merge(json!({"data": {"w": "2"}})))
        .await
        .unwrap();
    assert_eq!(merged.data.clone().unwrap().len(), 2);
    let patch: json_patch::Patch =
        serde_json::from_value(json!([{"op": "replace", "path": "/data/v", "value": "9"}]))
            .unwrap();
    let patched = api
        .patch("a", &pp, &Patch::Json::<()>(patch))
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["v"], "9");
    let stale = json!({"metadata": {"resourceVersion": "2"}, "data": {"v": "x"}});
    let err = api.patch("a", &pp, &Patch::Merge(stale)).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(s) if s.code == 409),
        "a patch carrying an old RV conflicts"
    );
    // Server-side apply needs field ownership, which the server does not keep: it is refused
    // with a Status that says so, and nothing is created.
    let before = server.resource_version();
    let err = api
        .patch(
            "b",
            &PatchParams::apply("test"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 415
            && s.reason == "UnsupportedMediaType"
            && s.message.contains("server-side apply is not implemented")),
        "{err}"
    );
    assert_eq!(server.resource_version(), before, "a refused apply wrote");
    assert!(api.get_opt("b").await.unwrap().is_none());
}

#[tokio::test]
async fn widget_generation_moves_with_the_spec_and_never_with_status() {
    let server = widget_server().await;
    let api: Api<Widget> = Api::namespaced(server.client(), "default");
    let mut w = widget("w", 1);
    w.status = Some(WidgetStatus {
        ready_replicas: 7,
        ..Default::default()
    });
    let w = api.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(w.metadata.generation, Some(1));
    assert_eq!(
        w.status, None,
        "create drops status when the status subresource is on"
    );

    let status = json!({"status": {"observedGeneration": 1, "readyReplicas": 1}});
    let w = api
        .patch_status("w", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    assert_eq!(
        w.metadata.generation,
        Some(1),
        "a status write does not bump the generation"
    );
    assert_eq!(w.status.as_ref().unwrap().ready_replicas, 1);

    let mut via_main = w.clone();
    via_main.status = Some(WidgetStatus {
        ready_replicas: 99,
        ..Default::default()
    });
    via_main.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
    let w = api
        .replace("w", &PostParams::default(), &via_main)
        .await
        .unwrap();
    assert_eq!(
        w.metadata.generation,
        Some(1),
        "a metadata-only change keeps the generation"
    );
    assert_eq!(
        w.status.as_ref().unwrap().ready_replicas,
        1,
        "the main endpoint ignores status"
    );

    let spec = json!({"spec": {"replicas": 3}});
    let w = api
        .patch("w", &PatchParams::default(), &Patch::Merge(spec))
        .await
        .unwrap();
    assert_eq!(
        w.metadata.generation,
        Some(2),
        "a spec change bumps the generation"
    );

    let mut status_only = w.clone();
    status_only.spec.replicas = 50;
    status_only.status = Some(WidgetStatus {
        observed_generation: Some(2),
        ready_replicas: 3,
        message: None,
    });
    let w = api
        .replace_status("w", &PostParams::default(), &status_only)
        .await
        .unwrap();
    assert_eq!(
        (w.spec.replicas, w.metadata.generation),
        (3, Some(2)),
        "/status ignores the spec"
    );
    assert_eq!(w.status.unwrap().observed_generation, Some(2));
}

/// kube-apiserver 1.38 (kubernetes v1.38.0-beta.0, apiserver `registry/generic/registry/
/// store.go`, `finalizeDelete`) puts the deleted object's resourceVersion, as storage returns
/// it, into the `Status` that answers a delete: the delete's revision, or for a dry run the
/// object's current one; 1.37 leaves `metadata` empty. And an update that deletes (the last
/// finalizer removed) answers the object at the delete's revision, where 1.37 answers it at
/// the revision it was read at. The server follows the minor it is given
/// (`ServerOptions::kube_apiserver_minor`, 37 by default).
#[tokio::test]
async fn deletes_answer_at_the_delete_revision_from_1_38() {
    use controlloop::apiserver::{Cluster, ServerOptions};
    for (minor, want_rv) in [(37, false), (38, true)] {
        let options = ServerOptions {
            kube_apiserver_minor: minor,
            ..ServerOptions::default()
        };
        let cluster = Cluster::new(options);
        let api: Api<ConfigMap> = Api::namespaced(cluster.in_process_client(), "default");
        let created = create(&api, &cm("plain", &[], "1")).await;
        let created_rv = created.metadata.resource_version.unwrap();
        let status_rv = async |params: &DeleteParams| {
            let answer = api.delete("plain", params).await.unwrap();
            let status = answer.right().expect("a Status, not the ConfigMap");
            status.metadata.and_then(|m| m.resource_version)
        };
        let dry = DeleteParams {
            dry_run: true,
            ..DeleteParams::default()
        };
        let dry_rv = status_rv(&dry).await;
        let gone_rv = status_rv(&DeleteParams::default()).await;
        let deleted_at = cluster.resource_version().to_string(); // the delete's revision
        assert_ne!(created_rv, deleted_at);
        if want_rv {
            assert_eq!(dry_rv, Some(created_rv), "1.{minor}: a dry run's");
            assert_eq!(gone_rv, Some(deleted_at), "1.{minor}: the delete's");
        } else {
            assert_eq!((dry_rv, gone_rv), (None, None), "1.{minor}");
        }

        // A patch removing the last finalizer of an object being deleted deletes it
        // (`deleteWithoutFinalizers`); 1.38 answers the object at the delete's revision, 1.37
        // at the one it was read at.
        let mut held = cm("held", &[], "1");
        held.metadata.finalizers = Some(vec!["lab.controlloop.dev/hold".into()]);
        create(&api, &held).await;
        api.delete("held", &DeleteParams::default()).await.unwrap();
        let marked_rv = api.get("held").await.unwrap().metadata.resource_version;
        let release = json!({"metadata": {"finalizers": null}});
        let (params, release) = (PatchParams::default(), Patch::Merge(release));
        let patched = api.patch("held", &params, &release).await.unwrap();
        let answered_rv = patched.metadata.resource_version;
        assert!(api.get_opt("held").await.unwrap().is_none(), "deleted");
        let deleted_at = Some(cluster.resource_version().to_string());
        assert_ne!(marked_rv, deleted_at);
        let want = if want_rv { deleted_at } else { marked_rv };
        assert_eq!(answered_rv, want, "1.{minor}: the deleting patch's answer");
    }
}

#[tokio::test]
async fn delete_removes_at_once_unless_finalizers_hold_the_object() {
    let server = server().await;
    let api = cms(&server, "default");
    create(&api, &cm("plain", &[], "1")).await;
    let gone = api.delete("plain", &DeleteParams::default()).await.unwrap();
    // Gone at once: a Status naming it, as kube-apiserver answers for a ConfigMap
    // (`finalizeDelete`); a custom resource would come back as the object.
    let status = gone.right().expect("a Status, not the ConfigMap");
    let details = status.details.expect("details");
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("plain", "configmaps")
    );
    assert!(api.get_opt("plain").await.unwrap().is_none());

    let mut held = cm("held", &[], "1");
    held.metadata.finalizers = Some(vec!["lab.controlloop.dev/hold".into()]);
    create(&api, &held).await;
    api.delete("held", &DeleteParams::default()).await.unwrap();
    let marked = api.get("held").await.unwrap();
    assert!(
        marked.metadata.deletion_timestamp.is_some(),
        "deletion waits for the finalizer"
    );
    let release = json!({"metadata": {"finalizers": null}});
    api.patch("held", &PatchParams::default(), &Patch::Merge(release))
        .await
        .unwrap();
    assert!(
        api.get_opt("held").await.unwrap().is_none(),
        "removing the last finalizer deletes"
    );
}
