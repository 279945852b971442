//! Strategic merge patch against the embedded API server, as kube-apiserver applies it: merge
//! lists of primitives (`metadata.finalizers`) and merge lists keyed by a field
//! (`metadata.ownerReferences`, by `uid`) are merged, never replaced, and the directives
//! (`$patch`, `$deleteFromPrimitiveList`, `$setElementOrder`, `$retainKeys`) do what upstream's
//! `strategicpatch` package does. Custom resources refuse it (415), as upstream.
//!
//! The last tests are properties (proptest): whatever a client sends as a strategic merge
//! patch, the server answers (a `Status` for a refusal, which changes nothing); and patching an
//! object with the two-way patch from it to another, then with the patch back, gives the
//! object back, as upstream's `CreateTwoWayMergePatch` guarantees.

mod apiserver_support;

use std::collections::BTreeMap;

use apiserver_support::*;
use controlloop::apiserver::{Cluster, ServerOptions};
use http::Request;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};
use tower::ServiceExt;

const SMP: &str = "application/strategic-merge-patch+json";

fn owner(uid: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Widget", "name": name, "uid": uid})
}

/// A ConfigMap `a` with `meta` merged into its metadata, created on `api`.
async fn seeded(api: &Api<ConfigMap>, meta: Value) -> ConfigMap {
    let mut c = serde_json::to_value(cm("a", &[], "1")).unwrap();
    json_patch::merge(&mut c["metadata"], &meta);
    create(api, &serde_json::from_value(c).unwrap()).await
}

async fn smp(api: &Api<ConfigMap>, patch: Value) -> kube::Result<ConfigMap> {
    within(
        "a strategic merge patch never answered",
        api.patch("a", &PatchParams::default(), &Patch::Strategic(patch)),
    )
    .await
}

fn finalizers(c: &ConfigMap) -> Vec<String> {
    c.metadata.finalizers.clone().unwrap_or_default()
}

fn owner_uids(c: &ConfigMap) -> Vec<String> {
    c.metadata
        .owner_references
        .iter()
        .flatten()
        .map(|o| o.uid.clone())
        .collect()
}

#[tokio::test]
async fn a_controller_adding_its_finalizer_keeps_the_finalizers_of_others() {
    let server = server().await;
    let api = cms(&server, "default");
    seeded(&api, json!({"finalizers": ["one.example.com/cleanup"]})).await;
    let mine = json!({"metadata": {"finalizers": ["two.example.com/cleanup"]}});
    let patched = smp(&api, mine).await.unwrap();
    // The patch's item first, then the item only the object had (upstream's order).
    assert_eq!(
        finalizers(&patched),
        ["two.example.com/cleanup", "one.example.com/cleanup"]
    );
    // Adding it again changes nothing: a merge list of primitives is a set.
    let again = smp(
        &api,
        json!({"metadata": {"finalizers": ["two.example.com/cleanup"]}}),
    )
    .await
    .unwrap();
    assert_eq!(
        again.metadata.resource_version, patched.metadata.resource_version,
        "a no-op patch is no write"
    );
    // Removing its own with the deletion list leaves the other's.
    let removed = smp(
        &api,
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["two.example.com/cleanup"]}}),
    )
    .await
    .unwrap();
    assert_eq!(finalizers(&removed), ["one.example.com/cleanup"]);
}

#[tokio::test]
async fn owner_references_merge_by_uid() {
    let server = server().await;
    let api = cms(&server, "default");
    seeded(
        &api,
        json!({"ownerReferences": [owner("u1", "first"), owner("u2", "second")]}),
    )
    .await;
    // A new uid is appended; a known uid is merged into its item, field by field.
    let patched = smp(
        &api,
        json!({"metadata": {"ownerReferences": [
            {"uid": "u2", "name": "renamed"},
            owner("u3", "third"),
        ]}}),
    )
    .await
    .unwrap();
    assert_eq!(owner_uids(&patched), ["u1", "u2", "u3"]);
    let refs = patched.metadata.owner_references.clone().unwrap();
    assert_eq!(
        (refs[1].name.as_str(), refs[1].kind.as_str()),
        ("renamed", "Widget")
    );
    // `$patch: delete` removes one item by its key.
    let deleted = smp(
        &api,
        json!({"metadata": {"ownerReferences": [{"$patch": "delete", "uid": "u1"}]}}),
    )
    .await
    .unwrap();
    assert_eq!(owner_uids(&deleted), ["u2", "u3"]);
    // `$patch: replace` makes the patch's items the whole list.
    let replaced = smp(
        &api,
        json!({"metadata": {"ownerReferences": [owner("u9", "only"), {"$patch": "replace"}]}}),
    )
    .await
    .unwrap();
    assert_eq!(owner_uids(&replaced), ["u9"]);
}

#[tokio::test]
async fn set_element_order_retain_keys_and_object_directives_apply() {
    let server = server().await;
    let api = cms(&server, "default");
    let mut c = cm("a", &[], "1");
    c.data = Some(BTreeMap::from([
        ("a".to_string(), "1".to_string()),
        ("b".to_string(), "2".to_string()),
    ]));
    c.metadata.finalizers = Some(vec!["x.io/a".into(), "x.io/b".into(), "x.io/c".into()]);
    create(&api, &c).await;
    let reordered = smp(
        &api,
        json!({"metadata": {"$setElementOrder/finalizers": ["x.io/c", "x.io/a", "x.io/b"]}}),
    )
    .await
    .unwrap();
    assert_eq!(finalizers(&reordered), ["x.io/c", "x.io/a", "x.io/b"]);
    let retained = smp(&api, json!({"data": {"$retainKeys": ["b", "c"], "c": "3"}}))
        .await
        .unwrap();
    assert_eq!(
        retained.data.unwrap(),
        BTreeMap::from([
            ("b".to_string(), "2".to_string()),
            ("c".to_string(), "3".to_string())
        ])
    );
    let replaced = smp(&api, json!({"data": {"$patch": "replace", "z": "26"}}))
        .await
        .unwrap();
    assert_eq!(
        replaced.data.unwrap(),
        BTreeMap::from([("z".to_string(), "26".to_string())])
    );
}

#[tokio::test]
async fn malformed_directives_are_refused_and_change_nothing() {
    let server = server().await;
    let api = cms(&server, "default");
    seeded(
        &api,
        json!({"finalizers": ["x.io/a"], "ownerReferences": [owner("u1", "first")]}),
    )
    .await;
    let client = no_retry(&server);
    let path = "/api/v1/namespaces/default/configmaps/a";
    for (patch, code, says) in [
        (
            json!({"metadata": {"ownerReferences": [{"name": "no uid"}]}}),
            400,
            "no merge key",
        ),
        (
            json!({"metadata": {"$patch": "merge"}}),
            400,
            "not a directive",
        ),
        (
            json!({"metadata": {"$setElementOrder/finalizers": ["x.io/z"], "finalizers": ["x.io/b"]}}),
            400,
            "contradicts",
        ),
        (
            json!({"metadata": {"$deleteFromPrimitiveListfinalizers": ["x.io/a"]}}),
            400,
            "is not of the form",
        ),
        (json!([1, 2]), 400, "must be a JSON object"),
    ] {
        let before = fingerprint(&server, &client).await;
        let (got, status, _) = send(
            &client,
            "PATCH",
            path,
            SMP,
            serde_json::to_vec(&patch).unwrap(),
        )
        .await;
        assert_eq!(
            (got, status["kind"].as_str()),
            (code, Some("Status")),
            "{patch}: {status}"
        );
        let message = status["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{patch}: {message}");
        assert_eq!(
            fingerprint(&server, &client).await,
            before,
            "{patch}: storage changed"
        );
    }
}

#[tokio::test]
async fn custom_resources_refuse_strategic_merge_patch_with_415() {
    let server = widget_server().await;
    let ws: Api<Widget> = Api::namespaced(server.client(), "default");
    ws.create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    let (code, status, _) = send(
        &no_retry(&server),
        "PATCH",
        "/apis/lab.controlloop.dev/v1/namespaces/default/widgets/w",
        SMP,
        serde_json::to_vec(&json!({"spec": {"replicas": 2}})).unwrap(),
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("not supported for custom resources"),
        "{message}"
    );
    assert_eq!(ws.get("w").await.unwrap().spec.replicas, 1);
}

#[tokio::test]
async fn a_finalizer_added_by_strategic_merge_patch_survives_a_delete_until_removed() {
    let server = server().await;
    let api = cms(&server, "default");
    seeded(&api, json!({"finalizers": ["one.example.com/x"]})).await;
    smp(
        &api,
        json!({"metadata": {"finalizers": ["two.example.com/x"]}}),
    )
    .await
    .unwrap();
    api.delete("a", &DeleteParams::default()).await.unwrap();
    let one = smp(
        &api,
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["one.example.com/x"]}}),
    )
    .await
    .unwrap();
    assert_eq!(
        finalizers(&one),
        ["two.example.com/x"],
        "the other finalizer holds it"
    );
    smp(
        &api,
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["two.example.com/x"]}}),
    )
    .await
    .unwrap();
    assert!(
        api.get_opt("a").await.unwrap().is_none(),
        "the last finalizer's removal deletes"
    );
}

// ---- Properties ------------------------------------------------------------------------------

/// What a generated ConfigMap varies: labels, annotations, data, finalizers (unique) and owner
/// references (unique uids, at most one controller).
#[derive(Debug, Clone)]
struct Shape {
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    data: BTreeMap<String, String>,
    finalizers: Vec<String>,
    owners: Vec<(String, String, bool)>,
}

fn shape() -> impl Strategy<Value = Shape> {
    let map = |keys: Vec<&'static str>| {
        let val = proptest::sample::select(vec!["", "1", "two", "v3"]);
        proptest::collection::btree_map(
            proptest::sample::select(keys).prop_map(str::to_string),
            val.prop_map(str::to_string),
            0..4,
        )
    };
    let meta_keys = vec!["a", "b", "c", "app", "x.io/k"];
    let fins =
        proptest::sample::subsequence(vec!["f.io/a", "f.io/b", "f.io/c", "f.io/d", "e"], 0..5)
            .prop_shuffle()
            .prop_map(|v| v.into_iter().map(str::to_string).collect::<Vec<_>>());
    let owners = proptest::sample::subsequence(vec!["u1", "u2", "u3", "u4"], 0..4)
        .prop_shuffle()
        .prop_flat_map(|uids| {
            let n = uids.len();
            (
                Just(uids),
                proptest::collection::vec(proptest::sample::select(vec!["n1", "n2"]), n),
                proptest::option::of(0..n.max(1)),
            )
        })
        .prop_map(|(uids, names, controller)| {
            uids.into_iter()
                .zip(names)
                .enumerate()
                .map(|(i, (u, n))| (u.to_string(), n.to_string(), controller == Some(i)))
                .collect::<Vec<_>>()
        });
    (
        map(meta_keys.clone()),
        map(meta_keys),
        map(vec!["a", "b", "c", "d", "x.k"]),
        fins,
        owners,
    )
        .prop_map(|(labels, annotations, data, finalizers, owners)| Shape {
            labels,
            annotations,
            data,
            finalizers,
            owners,
        })
}

fn owner_json((uid, name, controller): &(String, String, bool)) -> Value {
    let mut o = owner(uid, name);
    if *controller {
        o["controller"] = json!(true);
    }
    o
}

impl Shape {
    fn object(&self) -> Value {
        let mut meta = json!({"name": "a"});
        if !self.labels.is_empty() {
            meta["labels"] = json!(self.labels);
        }
        if !self.annotations.is_empty() {
            meta["annotations"] = json!(self.annotations);
        }
        if !self.finalizers.is_empty() {
            meta["finalizers"] = json!(self.finalizers);
        }
        if !self.owners.is_empty() {
            meta["ownerReferences"] = Value::Array(self.owners.iter().map(owner_json).collect());
        }
        let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta});
        if !self.data.is_empty() {
            obj["data"] = json!(self.data);
        }
        obj
    }

    /// What the server holds that this shape decides, read back from a stored object.
    fn of(v: &Value) -> Value {
        let m = &v["metadata"];
        let empty_is_absent = |x: &Value| match x {
            Value::Array(a) if a.is_empty() => Value::Null,
            Value::Object(o) if o.is_empty() => Value::Null,
            other => other.clone(),
        };
        json!({
            "labels": empty_is_absent(&m["labels"]),
            "annotations": empty_is_absent(&m["annotations"]),
            "data": empty_is_absent(&v["data"]),
            "finalizers": empty_is_absent(&m["finalizers"]),
            "ownerReferences": empty_is_absent(&m["ownerReferences"]),
        })
    }
}

/// The patch of a map field from `a` to `b`: changed and new keys, removed keys as null.
fn map_diff(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Option<Value> {
    let mut p = serde_json::Map::new();
    for (k, v) in b {
        if a.get(k) != Some(v) {
            p.insert(k.clone(), json!(v));
        }
    }
    for k in a.keys().filter(|k| !b.contains_key(*k)) {
        p.insert(k.clone(), Value::Null);
    }
    (!p.is_empty()).then_some(Value::Object(p))
}

/// The two-way strategic merge patch from `a` to `b`, written the way upstream's
/// `CreateTwoWayMergePatch` writes one for these fields: new and changed items of a merge
/// list, a parallel deletion list (or `$patch: delete` items) for removed ones, and
/// `$setElementOrder` for the new order; a list emptied is null.
fn two_way(a: &Shape, b: &Shape) -> Value {
    let mut meta = serde_json::Map::new();
    if let Some(p) = map_diff(&a.labels, &b.labels) {
        meta.insert("labels".into(), p);
    }
    if let Some(p) = map_diff(&a.annotations, &b.annotations) {
        meta.insert("annotations".into(), p);
    }
    if a.finalizers != b.finalizers {
        if b.finalizers.is_empty() {
            meta.insert("finalizers".into(), Value::Null);
        } else {
            let added: Vec<&String> = b
                .finalizers
                .iter()
                .filter(|f| !a.finalizers.contains(f))
                .collect();
            let gone: Vec<&String> = a
                .finalizers
                .iter()
                .filter(|f| !b.finalizers.contains(f))
                .collect();
            if !added.is_empty() {
                meta.insert("finalizers".into(), json!(added));
            }
            if !gone.is_empty() {
                meta.insert("$deleteFromPrimitiveList/finalizers".into(), json!(gone));
            }
            meta.insert("$setElementOrder/finalizers".into(), json!(b.finalizers));
        }
    }
    if a.owners != b.owners {
        if b.owners.is_empty() {
            meta.insert("ownerReferences".into(), Value::Null);
        } else {
            let mut items = Vec::new();
            for o in &b.owners {
                match a.owners.iter().find(|x| x.0 == o.0) {
                    Some(old) if old == o => {}
                    Some(old) => {
                        let mut item = owner_json(o);
                        if old.2 && !o.2 {
                            item["controller"] = Value::Null;
                        }
                        items.push(item);
                    }
                    None => items.push(owner_json(o)),
                }
            }
            for o in a
                .owners
                .iter()
                .filter(|x| !b.owners.iter().any(|y| y.0 == x.0))
            {
                items.push(json!({"$patch": "delete", "uid": o.0}));
            }
            if !items.is_empty() {
                meta.insert("ownerReferences".into(), Value::Array(items));
            }
            let order: Vec<Value> = b.owners.iter().map(|o| json!({"uid": o.0})).collect();
            meta.insert(
                "$setElementOrder/ownerReferences".into(),
                Value::Array(order),
            );
        }
    }
    let mut patch = json!({});
    if !meta.is_empty() {
        patch["metadata"] = Value::Object(meta);
    }
    if let Some(p) = map_diff(&a.data, &b.data) {
        patch["data"] = p;
    }
    patch
}

/// Sends one request to `cluster`'s router in-process; returns the code and the body as JSON.
async fn call(cluster: &Cluster, method: &str, path: &str, ct: &str, body: &Value) -> (u16, Value) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", ct)
        .body(axum::body::Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap();
    let resp = cluster
        .router()
        .oneshot(req)
        .await
        .expect("the router is infallible");
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[test]
fn a_two_way_patch_and_its_inverse_give_the_object_back() {
    let rt = paused();
    let mut runner = TestRunner::new(Config {
        cases: 96,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&(shape(), shape()), |(a, b)| {
        rt.block_on(async {
            let cluster = Cluster::new(ServerOptions::default());
            let (code, created) =
                call(&cluster, "POST", CMS, "application/json", &a.object()).await;
            prop_assert_eq!(code, 201, "{}", created);
            let forward = two_way(&a, &b);
            let (code, there) = call(&cluster, "PATCH", &format!("{CMS}/a"), SMP, &forward).await;
            prop_assert_eq!(code, 200, "{} gave {}", forward, there);
            prop_assert_eq!(
                Shape::of(&there),
                Shape::of(&b.object()),
                "forward patch {}",
                forward
            );
            let back = two_way(&b, &a);
            let (code, again) = call(&cluster, "PATCH", &format!("{CMS}/a"), SMP, &back).await;
            prop_assert_eq!(code, 200, "{} gave {}", back, again);
            prop_assert_eq!(
                Shape::of(&again),
                Shape::of(&created),
                "inverse patch {}",
                back
            );
            Ok(())
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Patch values built from the directive grammar, mixed with ordinary values.
fn hostile_patch() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        Just(json!("f.io/a")),
        Just(json!("u1")),
        Just(json!(1)),
        Just(json!(1.5)),
        Just(json!(true)),
        Just(json!("delete")),
        Just(json!("replace")),
        Just(json!("merge")),
    ];
    let key = proptest::sample::select(vec![
        "$patch",
        "$retainKeys",
        "$setElementOrder/finalizers",
        "$setElementOrder/ownerReferences",
        "$deleteFromPrimitiveList/finalizers",
        "$deleteFromPrimitiveList/ownerReferences",
        "$setElementOrder/data",
        "$deleteFromPrimitiveList",
        "finalizers",
        "ownerReferences",
        "uid",
        "name",
        "labels",
        "data",
        "metadata",
        "k",
    ]);
    leaf.prop_recursive(4, 40, 5, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::btree_map(key.clone().prop_map(str::to_string), inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[test]
fn any_strategic_merge_patch_is_answered_and_a_refusal_changes_nothing() {
    let rt = paused();
    let mut runner = TestRunner::new(Config {
        cases: 256,
        failure_persistence: None,
        ..Config::default()
    });
    let seed = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "a", "labels": {"app": "web"}, "finalizers": ["f.io/a", "f.io/b"],
        "ownerReferences": [owner("u1", "n1"), owner("u2", "n2")]}, "data": {"k": "v"}});
    let (accepted, refused) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
    let result = runner.run(&hostile_patch(), |patch| {
        rt.block_on(async {
            let cluster = Cluster::new(ServerOptions::default());
            let (code, _) = call(&cluster, "POST", CMS, "application/json", &seed).await;
            prop_assert_eq!(code, 201);
            let (_, before) = call(
                &cluster,
                "GET",
                &format!("{CMS}/a"),
                "application/json",
                &Value::Null,
            )
            .await;
            let answer = tokio::time::timeout(
                std::time::Duration::from_secs(60),
                call(&cluster, "PATCH", &format!("{CMS}/a"), SMP, &patch),
            )
            .await;
            let Ok((code, body)) = answer else {
                return Err(TestCaseError::fail(format!("{patch}: no answer (a hang)")));
            };
            let (_, after) = call(
                &cluster,
                "GET",
                &format!("{CMS}/a"),
                "application/json",
                &Value::Null,
            )
            .await;
            if code >= 400 {
                refused.set(refused.get() + 1);
                prop_assert_eq!(&body["kind"], "Status", "{}", patch);
                prop_assert_eq!(&body["code"], &json!(code), "{}", patch);
                prop_assert!(code != 500, "{} gave a 500: {}", patch, body);
                prop_assert_eq!(
                    &after,
                    &before,
                    "{} was refused but changed the object",
                    patch
                );
            } else {
                accepted.set(accepted.get() + 1);
                prop_assert_eq!(code, 200, "{}: {}", patch, body);
                prop_assert_eq!(&after, &body, "{}: the answer is not what is stored", patch);
            }
            Ok(())
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(
        accepted.get() > 0 && refused.get() > 0,
        "one-sided: {} accepted, {} refused",
        accepted.get(),
        refused.get()
    );
}
