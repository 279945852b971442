//! kube-apiserver's rules that a client can run into, each pinned against the embedded server:
//! finalizers on an object being deleted, the body of a delete, how a resourceVersion is
//! parsed, how patches retry, which methods exist.

mod apiserver_support;

use std::sync::Arc;
use std::time::Duration;

use apiserver_support::*;
use controlloop::apiserver::{Cluster, ServerOptions};
use http::Request;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tower::ServiceExt;

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const JSON: &str = "application/json";

fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

#[tokio::test]
async fn no_finalizer_may_be_added_to_an_object_being_deleted() {
    let server = server().await;
    let api = cms(&server, "default");
    let mut c = cm("a", &[], "1");
    c.metadata.finalizers = Some(vec!["one.example.com/x".into()]);
    create(&api, &c).await;
    api.delete("a", &DeleteParams::default()).await.unwrap();
    let deleting = api.get("a").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    let client = no_retry(&server);
    let before = fingerprint(&server, &client).await;
    // By update, and by patch: both are 422 Invalid, field metadata.finalizers, Forbidden.
    let mut more = deleting.clone();
    more.metadata.finalizers = Some(vec!["one.example.com/x".into(), "two.example.com/y".into()]);
    let (code, status, _) = send(
        &client,
        "PUT",
        &format!("{CMS}/a"),
        JSON,
        bytes(&serde_json::to_value(&more).unwrap()),
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (422, Some("Invalid")),
        "{status}"
    );
    let cause = &status["details"]["causes"][0];
    assert_eq!(
        (cause["field"].as_str(), cause["reason"].as_str()),
        (Some("metadata.finalizers"), Some("FieldValueForbidden")),
        "{status}"
    );
    let (code, status, _) = send(
        &client,
        "PATCH",
        &format!("{CMS}/a"),
        "application/merge-patch+json",
        bytes(&json!({"metadata": {"finalizers": ["one.example.com/x", "three.example.com/z"]}})),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        fingerprint(&server, &client).await,
        before,
        "a refused write changed storage"
    );
    // Removing one is what a deleting object's controllers do: allowed, and the last one's
    // removal deletes the object.
    let mut none = deleting;
    none.metadata.finalizers = None;
    api.replace("a", &PostParams::default(), &none)
        .await
        .unwrap();
    assert!(api.get_opt("a").await.unwrap().is_none());
}

#[tokio::test]
async fn a_delete_whose_body_is_another_kind_is_400_and_deletes_nothing() {
    let server = server().await;
    let api = cms(&server, "default");
    let made = create(&api, &cm("a", &[], "1")).await;
    let client = no_retry(&server);
    // A whole ConfigMap as the body (a client mixing up its arguments): upstream's decoder
    // knows only DeleteOptions here.
    let (code, status, _) = send(
        &client,
        "DELETE",
        &format!("{CMS}/a"),
        JSON,
        bytes(&serde_json::to_value(&made).unwrap()),
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (400, Some("BadRequest")),
        "{status}"
    );
    assert!(
        api.get_opt("a").await.unwrap().is_some(),
        "the object was deleted anyway"
    );
    // DeleteOptions, with or without its type fields, are options.
    let (code, status, _) = send(
        &client,
        "DELETE",
        &format!("{CMS}/a"),
        JSON,
        bytes(&json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})),
    )
    .await;
    assert_eq!(code, 200, "{status}");
}

#[tokio::test]
async fn a_resource_version_is_decimal_digits_as_upstream_parses_it() {
    let server = server().await;
    let api = cms(&server, "default");
    create(&api, &cm("a", &[], "1")).await;
    let client = no_retry(&server);
    // `strconv.ParseUint` takes no sign and no spaces; Rust's `u64::from_str` takes `+5`.
    for rv in ["%2B2", "+2", "%202", "2%20", "-2", "0x2", "2.0"] {
        for query in [
            format!("resourceVersion={rv}"),
            format!("resourceVersion={rv}&resourceVersionMatch=NotOlderThan"),
            format!("watch=true&resourceVersion={rv}"),
        ] {
            let (code, status, _) =
                send(&client, "GET", &format!("{CMS}?{query}"), JSON, vec![]).await;
            assert_eq!(
                (code, status["reason"].as_str()),
                (400, Some("BadRequest")),
                "{query}: {status}"
            );
        }
    }
    // On a create, upstream's versioner cannot read `+5` and so ignores it (a readable one,
    // other than 0, is refused): the object is created.
    let mut c = cm("b", &[], "1");
    c.metadata.resource_version = Some("+5".into());
    let made = api.create(&PostParams::default(), &c).await.unwrap();
    assert_ne!(made.metadata.resource_version.as_deref(), Some("+5"));
    let mut c = cm("c", &[], "1");
    c.metadata.resource_version = Some("5".into());
    let err = api.create(&PostParams::default(), &c).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 500),
        "{err}"
    );
}

#[tokio::test]
async fn connect_is_405_method_not_allowed() {
    let server = server().await;
    create(&cms(&server, "default"), &cm("a", &[], "1")).await;
    // The authority form (`CONNECT host:port`) is what a proxy client sends; it names no
    // path, and must not be answered with the root document and a tunnel.
    let authority = server.addr().to_string();
    for path in [
        authority,
        format!("{CMS}/a"),
        CMS.to_string(),
        "/version".into(),
        "/".into(),
    ] {
        let mut conn = within(
            "no connection",
            tokio::net::TcpStream::connect(server.addr()),
        )
        .await
        .unwrap();
        conn.write_all(
            format!("CONNECT {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut got = Vec::new();
        let _ = within(
            "no answer to CONNECT",
            tokio::io::AsyncReadExt::read_to_end(&mut conn, &mut got),
        )
        .await;
        let got = String::from_utf8_lossy(&got);
        assert!(got.starts_with("HTTP/1.1 405"), "{path}: {got}");
        assert!(
            got.contains("\"reason\":\"MethodNotAllowed\""),
            "{path}: {got}"
        );
    }
    // In-process too: the router answers it the same way.
    let cluster = Cluster::new(ServerOptions::default());
    let req = Request::builder()
        .method("CONNECT")
        .uri(format!("{CMS}/a"))
        .body(axum::body::Body::empty())
        .unwrap();
    let resp = cluster.router().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 405);
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let status: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status["reason"], "MethodNotAllowed");
}

/// Writers racing on one object: each patch (no resourceVersion in it) must apply, however
/// often the object changes between its read and its commit, as kube-apiserver's
/// `GuaranteedUpdate` retries without a bound. A large object widens the window between
/// read and commit, so attempts collide often.
#[test]
fn patches_without_a_precondition_retry_until_they_apply() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let cluster = Cluster::new(ServerOptions::default());
        let api: Api<ConfigMap> = Api::namespaced(cluster.in_process_client(), "default");
        let mut c = cm("a", &[], "1");
        let big: std::collections::BTreeMap<String, String> = (0..4_000)
            .map(|i| (format!("k{i}"), "x".repeat(100)))
            .collect();
        c.data = Some(big);
        within("create", api.create(&PostParams::default(), &c))
            .await
            .unwrap();
        let writers = 24;
        let each = 6;
        let failures = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for w in 0..writers {
            let api = api.clone();
            let failures = Arc::clone(&failures);
            tasks.push(tokio::spawn(async move {
                for i in 0..each {
                    let patch = json!({"data": {format!("w{w}-{i}"): "1"}});
                    let r = api
                        .patch("a", &PatchParams::default(), &Patch::Merge(&patch))
                        .await;
                    if let Err(e) = r {
                        failures.lock().push(format!("w{w}-{i}: {e}"));
                    }
                }
            }));
        }
        for t in tasks {
            tokio::time::timeout(Duration::from_secs(120), t)
                .await
                .expect("the writers never finished: a patch retry that never ends")
                .unwrap();
        }
        let failures = failures.lock().clone();
        assert!(
            failures.is_empty(),
            "{} patches failed: {:?}",
            failures.len(),
            &failures[..failures.len().min(5)]
        );
        let data = api.get("a").await.unwrap().data.unwrap();
        let written = data.keys().filter(|k| k.starts_with('w')).count();
        assert_eq!(written, writers * each, "a patch was lost");
    });
}

#[tokio::test]
async fn dry_run_all_answers_what_a_write_would_store_and_stores_nothing() {
    let server = server().await;
    let api = cms(&server, "default");
    let made = create(&api, &cm("a", &[], "1")).await;
    let client = no_retry(&server);
    let before = fingerprint(&server, &client).await;
    // A create: the object as it would be, with a uid and a generated name, no revision.
    let (code, obj, _) = send(
        &client,
        "POST",
        &format!("{CMS}?dryRun=All"),
        JSON,
        bytes(&json!({"metadata": {"generateName": "dry-"}, "data": {"k": "v"}})),
    )
    .await;
    assert_eq!(code, 201, "{obj}");
    assert!(
        obj["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("dry-")
    );
    assert!(obj["metadata"]["uid"].is_string());
    assert!(obj["metadata"].get("resourceVersion").is_none(), "{obj}");
    // A create that would fail still fails: the checks all run.
    let (code, _, _) = send(
        &client,
        "POST",
        &format!("{CMS}?dryRun=All"),
        JSON,
        bytes(&json!({"metadata": {"name": "a"}})),
    )
    .await;
    assert_eq!(code, 409);
    // An update, a patch and a delete: answered as the object would be, at its revision.
    let mut changed = made.clone();
    changed.data = Some([("v".to_string(), "2".to_string())].into());
    let (code, obj, _) = send(
        &client,
        "PUT",
        &format!("{CMS}/a?dryRun=All"),
        JSON,
        bytes(&serde_json::to_value(&changed).unwrap()),
    )
    .await;
    assert_eq!((code, obj["data"]["v"].as_str()), (200, Some("2")), "{obj}");
    assert_eq!(
        obj["metadata"]["resourceVersion"],
        json!(made.metadata.resource_version)
    );
    let (code, obj, _) = send(
        &client,
        "PATCH",
        &format!("{CMS}/a?dryRun=All"),
        "application/strategic-merge-patch+json",
        bytes(&json!({"metadata": {"finalizers": ["x.io/y"]}})),
    )
    .await;
    assert_eq!(
        (code, obj["metadata"]["finalizers"][0].as_str()),
        (200, Some("x.io/y"))
    );
    let (code, _, _) = send(
        &client,
        "DELETE",
        &format!("{CMS}/a"),
        JSON,
        bytes(&json!({"dryRun": ["All"]})),
    )
    .await;
    assert_eq!(code, 200);
    let (code, _, _) = send(
        &client,
        "DELETE",
        &format!("{CMS}/a?dryRun=All"),
        JSON,
        vec![],
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        fingerprint(&server, &client).await,
        before,
        "a dry run wrote"
    );
    // Only `All` is a dry run.
    let (code, status, _) = send(
        &client,
        "POST",
        &format!("{CMS}?dryRun=Server"),
        JSON,
        bytes(&json!({"metadata": {"name": "b"}})),
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (422, Some("Invalid")),
        "{status}"
    );
}

#[tokio::test]
async fn yaml_bodies_are_accepted_for_create_and_update_within_bounds() {
    let server = server().await;
    let client = no_retry(&server);
    let yaml = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yml\n  labels: {app: web}\ndata:\n  k: hello\n";
    let (code, obj, _) = send(&client, "POST", CMS, "application/yaml", yaml.to_vec()).await;
    assert_eq!(
        (code, obj["data"]["k"].as_str()),
        (201, Some("hello")),
        "{obj}"
    );
    let update = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yml\n  resourceVersion: \"{}\"\ndata:\n  k: again\n",
        obj["metadata"]["resourceVersion"].as_str().unwrap()
    );
    let (code, obj, _) = send(
        &client,
        "PUT",
        &format!("{CMS}/yml"),
        "application/yaml; charset=utf-8",
        update.into_bytes(),
    )
    .await;
    assert_eq!(
        (code, obj["data"]["k"].as_str()),
        (200, Some("again")),
        "{obj}"
    );
    // An alias bomb, nesting past the bound and two documents are 400s that store nothing.
    let mut bomb =
        String::from("metadata: {name: bomb}\ndata:\n  a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..9u8 {
        let (p, t) = ((b'a' + i - 1) as char, (b'a' + i) as char);
        bomb.push_str(&format!(
            "  {t}: &{t} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        ));
    }
    let deep = format!(
        "metadata: {{name: deep}}\ndata: {}x{}\n",
        "[".repeat(200),
        "]".repeat(200)
    );
    let before = fingerprint(&server, &client).await;
    for body in [
        bomb.into_bytes(),
        deep.into_bytes(),
        b"metadata: {name: a}\n---\nmetadata: {name: b}\n".to_vec(),
    ] {
        let (code, status, _) = send(&client, "POST", CMS, "application/yaml", body).await;
        assert_eq!(
            (code, status["reason"].as_str()),
            (400, Some("BadRequest")),
            "{status}"
        );
    }
    assert_eq!(fingerprint(&server, &client).await, before);
}

#[tokio::test]
async fn a_delete_pending_on_finalizers_is_200_unless_cascading_was_asked_for() {
    let server = server().await;
    let api = cms(&server, "default");
    let client = no_retry(&server);
    for (name, body, want) in [
        ("plain", vec![], 200),
        ("cascading", bytes(&json!({"orphanDependents": false})), 202),
    ] {
        let mut c = cm(name, &[], "1");
        c.metadata.finalizers = Some(vec!["x.io/hold".into()]);
        create(&api, &c).await;
        let (code, obj, _) = send(&client, "DELETE", &format!("{CMS}/{name}"), JSON, body).await;
        assert_eq!(code, want, "{name}: {obj}");
        assert!(obj["metadata"]["deletionTimestamp"].is_string(), "{obj}");
    }
}
