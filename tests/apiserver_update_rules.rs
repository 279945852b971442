//! The rules kube-apiserver keeps on an update that a user's test relies on, each pinned
//! against the embedded server in-process, under the paused clock: an immutable ConfigMap,
//! the metadata only the server sets, owner references sent twice.

mod apiserver_support;

use apiserver_support::{send, within};
use controlloop::apiserver::{Cluster, ServerOptions};
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";

fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

/// A client of a fresh cluster, in-process.
fn client() -> kube::Client {
    Cluster::new(ServerOptions::default()).in_process_client()
}

/// The `(field, reason, message)` of each cause of a 422.
fn causes(status: &Value) -> Vec<(String, String, String)> {
    status["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let s = |f: &str| c[f].as_str().unwrap_or_default().to_owned();
            (s("field"), s("reason"), s("message"))
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn an_immutable_config_map_keeps_its_data_binary_data_and_immutability() {
    let client = client();
    let body = json!({"metadata": {"name": "frozen"}, "immutable": true,
                      "data": {"k": "v"}, "binaryData": {"b": "MQ=="}});
    let (code, created, _) = send(&client, "POST", CMS, JSON, bytes(&body)).await;
    assert_eq!(code, 201, "{created}");
    let forbidden = "Forbidden: field is immutable when `immutable` is set";
    let at = format!("{CMS}/frozen");
    // Each of the three fields, by update and by patch: 422 Invalid, one cause each,
    // FieldValueForbidden, in upstream's order (immutable, data, binaryData).
    let cases = [
        (json!({"data": {"k": "w"}}), vec!["data"]),
        (json!({"binaryData": {"b": "Mg=="}}), vec!["binaryData"]),
        (json!({"immutable": false}), vec!["immutable"]),
        (json!({"immutable": null}), vec!["immutable"]),
        (
            json!({"immutable": false, "data": null, "binaryData": null}),
            vec!["immutable", "data", "binaryData"],
        ),
    ];
    for (patch, fields) in cases {
        let (code, status, _) = within(
            "a patch of an immutable ConfigMap never answered",
            send(&client, "PATCH", &at, MERGE, bytes(&patch)),
        )
        .await;
        assert_eq!(
            (code, status["reason"].as_str()),
            (422, Some("Invalid")),
            "{patch}"
        );
        let want: Vec<(String, String, String)> = fields
            .iter()
            .map(|f| {
                (
                    f.to_string(),
                    "FieldValueForbidden".into(),
                    forbidden.into(),
                )
            })
            .collect();
        assert_eq!(causes(&status), want, "{patch}");
        let mut replaced = created.clone();
        json_patch::merge(&mut replaced, &patch);
        let (code, status, _) = send(&client, "PUT", &at, JSON, bytes(&replaced)).await;
        assert_eq!(code, 422, "{patch}: {status}");
        assert_eq!(causes(&status), want, "{patch}");
    }
    // What is not frozen still changes: metadata (a label), and the same data sent back.
    let (code, labelled, _) = send(
        &client,
        "PATCH",
        &at,
        MERGE,
        bytes(&json!({"metadata": {"labels": {"l": "1"}}, "data": {"k": "v"}})),
    )
    .await;
    assert_eq!(code, 200, "{labelled}");
    assert_eq!(labelled["data"], json!({"k": "v"}));
    // An empty map is no map: a ConfigMap stored without data accepts `data: {}` sent back.
    let body = json!({"metadata": {"name": "empty"}, "immutable": true});
    assert_eq!(send(&client, "POST", CMS, JSON, bytes(&body)).await.0, 201);
    let (code, status, _) = send(
        &client,
        "PATCH",
        &format!("{CMS}/empty"),
        MERGE,
        bytes(&json!({"data": {}, "metadata": {"labels": {"l": "1"}}})),
    )
    .await;
    assert_eq!(code, 200, "{status}");
    // A mutable ConfigMap may become immutable, and is then frozen.
    let body = json!({"metadata": {"name": "thaw"}, "data": {"k": "v"}});
    assert_eq!(send(&client, "POST", CMS, JSON, bytes(&body)).await.0, 201);
    let thaw = format!("{CMS}/thaw");
    let freeze = json!({"immutable": true, "data": {"k": "last"}});
    assert_eq!(
        send(&client, "PATCH", &thaw, MERGE, bytes(&freeze)).await.0,
        200
    );
    let (code, status, _) = send(
        &client,
        "PATCH",
        &thaw,
        MERGE,
        bytes(&json!({"data": {"k": "x"}})),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    // Deleting it is not an update: allowed.
    let (code, status, _) = send(&client, "DELETE", &thaw, JSON, Vec::new()).await;
    assert_eq!(code, 200, "{status}");
}

#[tokio::test(start_paused = true)]
async fn an_update_may_not_set_a_deletion_timestamp_the_object_lacks() {
    let client = client();
    let body = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
    let (code, created, _) = send(&client, "POST", CMS, JSON, bytes(&body)).await;
    assert_eq!(code, 201, "{created}");
    let at = format!("{CMS}/a");
    let when = "2026-01-01T00:00:00Z";
    // By patch and by update: 422, FieldValueInvalid on metadata.deletionTimestamp, the value
    // sent named; nothing stored.
    let patch = json!({"metadata": {"deletionTimestamp": when}});
    let (code, status, _) = within(
        "a patch setting deletionTimestamp never answered",
        send(&client, "PATCH", &at, MERGE, bytes(&patch)),
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (422, Some("Invalid")),
        "{status}"
    );
    let want = vec![(
        "metadata.deletionTimestamp".to_owned(),
        "FieldValueInvalid".to_owned(),
        format!("Invalid value: \"{when}\": field is immutable"),
    )];
    assert_eq!(causes(&status), want);
    let mut replaced = created.clone();
    replaced["metadata"]["deletionTimestamp"] = json!(when);
    let (code, status, _) = send(&client, "PUT", &at, JSON, bytes(&replaced)).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(causes(&status), want);
    // The grace period likewise.
    let patch = json!({"metadata": {"deletionGracePeriodSeconds": 30}});
    let (code, status, _) = send(&client, "PATCH", &at, MERGE, bytes(&patch)).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        causes(&status)[0].2,
        "Invalid value: 30: field is immutable",
        "{status}"
    );
    let (_, now, _) = send(&client, "GET", &at, JSON, Vec::new()).await;
    assert_eq!(
        now["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    assert!(now["metadata"]["deletionTimestamp"].is_null(), "{now}");
    // An object being deleted keeps the timestamp it has, whatever the body says (and an
    // update that omits it is no change to it).
    let body = json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}});
    assert_eq!(send(&client, "POST", CMS, JSON, bytes(&body)).await.0, 201);
    let held = format!("{CMS}/held");
    assert_eq!(
        send(&client, "DELETE", &held, JSON, Vec::new()).await.0,
        200
    );
    let (_, marked, _) = send(&client, "GET", &held, JSON, Vec::new()).await;
    let stamp = marked["metadata"]["deletionTimestamp"].clone();
    assert!(stamp.is_string(), "{marked}");
    let patch = json!({"metadata": {"deletionTimestamp": when, "labels": {"l": "1"}}});
    let (code, kept, _) = send(&client, "PATCH", &held, MERGE, bytes(&patch)).await;
    assert_eq!(code, 200, "{kept}");
    assert_eq!(kept["metadata"]["deletionTimestamp"], stamp);
}

#[tokio::test(start_paused = true)]
async fn owner_references_sent_twice_are_stored_once() {
    let client = client();
    let owner = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "o",
                       "uid": "00000000-0000-4000-8000-000000000001"});
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "p",
                       "uid": "00000000-0000-4000-8000-000000000001", "controller": true});
    // The same reference twice, and a second one with the same uid that differs: the
    // identical copy goes, the different one stays (upstream compares whole references).
    let body = json!({"metadata": {"name": "a", "ownerReferences": [owner, owner, other]}});
    let (code, created, _) = within(
        "a create with duplicate owners never answered",
        send(&client, "POST", CMS, JSON, bytes(&body)),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(
        created["metadata"]["ownerReferences"],
        json!([owner, other])
    );
    let (code, patched, _) = send(
        &client,
        "PATCH",
        &format!("{CMS}/a"),
        MERGE,
        bytes(&json!({"metadata": {"ownerReferences": [other, other]}})),
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["metadata"]["ownerReferences"], json!([other]));
    let mut replaced = patched.clone();
    replaced["metadata"]["ownerReferences"] = json!([owner, owner]);
    let (code, updated, _) =
        send(&client, "PUT", &format!("{CMS}/a"), JSON, bytes(&replaced)).await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["metadata"]["ownerReferences"], json!([owner]));
}

#[tokio::test(start_paused = true)]
async fn delete_collection_deletes_the_selected_objects_one_by_one() {
    use apiserver_support::{next_event, open_watch};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, DeleteParams, ListParams, WatchParams};
    let client = client();
    for (name, app, finalizer) in [
        ("a", "web", false),
        ("b", "web", false),
        ("c", "db", false),
        ("f", "web", true),
    ] {
        let mut body = json!({"metadata": {"name": name, "labels": {"app": app}}});
        if finalizer {
            body["metadata"]["finalizers"] = json!(["example.com/hold"]);
        }
        assert_eq!(send(&client, "POST", CMS, JSON, bytes(&body)).await.0, 201);
    }
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut events = open_watch(&api, &WatchParams::default(), &rv).await;
    // A dry run lists them and deletes nothing.
    let dry = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    let web = ListParams::default().labels("app=web");
    within(
        "a dry-run deletecollection never answered",
        api.delete_collection(&dry, &web),
    )
    .await
    .unwrap()
    .left()
    .expect("a list of what would go");
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        4
    );
    // The answer is the list as it was read: the three selected objects, before deletion.
    let listed = within(
        "deletecollection never answered",
        api.delete_collection(&DeleteParams::default(), &web),
    )
    .await
    .unwrap()
    .left()
    .expect("a list, as kube-apiserver answers");
    let names: Vec<_> = listed
        .items
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["a", "b", "f"]);
    assert!(
        listed
            .items
            .iter()
            .all(|c| c.metadata.deletion_timestamp.is_none())
    );
    // One event per object, in order: a watcher sees each go (and the held one marked).
    let mut seen = Vec::new();
    for _ in 0..3 {
        let (ty, name, _) =
            next_event(&mut events, "deletecollection sent no event for an object").await;
        seen.push((ty, name));
    }
    let want = [("DELETED", "a"), ("DELETED", "b"), ("MODIFIED", "f")];
    assert_eq!(seen, want.map(|(t, n)| (t.to_owned(), n.to_owned())));
    let left: Vec<_> = api.list(&ListParams::default()).await.unwrap().items;
    let left: Vec<_> = left
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(left, ["c", "f"]);
    // With a limit, one page goes, and the answer carries the continue token.
    for name in ["p1", "p2"] {
        let body = json!({"metadata": {"name": name, "labels": {"page": "x"}}});
        assert_eq!(send(&client, "POST", CMS, JSON, bytes(&body)).await.0, 201);
    }
    let (code, page, _) = send(
        &client,
        "DELETE",
        &format!("{CMS}?labelSelector=page%3Dx&limit=1"),
        JSON,
        Vec::new(),
    )
    .await;
    assert_eq!(code, 200, "{page}");
    assert_eq!(page["items"].as_array().map(Vec::len), Some(1), "{page}");
    assert!(page["metadata"]["continue"].is_string(), "{page}");
    let (_, rest, _) = send(
        &client,
        "GET",
        &format!("{CMS}?labelSelector=page%3Dx"),
        JSON,
        Vec::new(),
    )
    .await;
    assert_eq!(rest["items"][0]["metadata"]["name"], "p2", "{rest}");
    // Only inside a namespace: across namespaces, and on namespaces, it is 405 as upstream.
    for path in ["/api/v1/configmaps", "/api/v1/namespaces"] {
        let (code, status, _) = send(&client, "DELETE", path, JSON, Vec::new()).await;
        assert_eq!(
            (code, status["reason"].as_str()),
            (405, Some("MethodNotAllowed")),
            "{path}"
        );
        assert_eq!(status["details"], json!({}), "{path}");
    }
    // Bad options are refused before anything is deleted.
    let (code, status, _) = send(
        &client,
        "DELETE",
        &format!("{CMS}?labelSelector=%3D%3D"),
        JSON,
        Vec::new(),
    )
    .await;
    assert_eq!(code, 400, "{status}");
    let (code, status, _) = send(
        &client,
        "DELETE",
        CMS,
        JSON,
        bytes(&json!({"propagationPolicy": "Sometimes"})),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        3
    );
}

#[tokio::test(start_paused = true)]
async fn a_create_in_a_terminating_namespace_carries_the_namespace_terminating_cause() {
    let client = client();
    let ns = json!({"metadata": {"name": "going"}});
    assert_eq!(
        send(&client, "POST", "/api/v1/namespaces", JSON, bytes(&ns))
            .await
            .0,
        201
    );
    let in_ns = "/api/v1/namespaces/going/configmaps";
    // An object with a finalizer holds the namespace in Terminating.
    let held = json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}});
    assert_eq!(
        send(&client, "POST", in_ns, JSON, bytes(&held)).await.0,
        201
    );
    let (code, status, _) = within(
        "the namespace delete never answered",
        send(
            &client,
            "DELETE",
            "/api/v1/namespaces/going",
            JSON,
            Vec::new(),
        ),
    )
    .await;
    assert_eq!(code, 200, "{status}");
    let (code, status, _) = send(
        &client,
        "POST",
        in_ns,
        JSON,
        bytes(&json!({"metadata": {"name": "new"}})),
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (403, Some("Forbidden")),
        "{status}"
    );
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "NamespaceTerminating", "field": "metadata.namespace",
                "message": "namespace going is being terminated"}]),
        "{status}"
    );
    assert_eq!(status["details"]["name"], "new", "{status}");
    assert_eq!(status["details"]["kind"], "configmaps", "{status}");
    // kube's client reads it as client-go's HasStatusCause would.
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), "going");
    let mut c = k8s_openapi::api::core::v1::ConfigMap::default();
    c.metadata.name = Some("typed".into());
    match api.create(&Default::default(), &c).await {
        Err(kube::Error::Api(s)) => {
            let causes = s.details.map(|d| d.causes).unwrap_or_default();
            assert!(
                causes.iter().any(|c| c.reason == "NamespaceTerminating"),
                "{causes:?}"
            );
        }
        other => panic!("expected a 403 Status, got {other:?}"),
    }
}

/// The `Warning` headers of an answer.
fn warnings(headers: &http::HeaderMap) -> Vec<String> {
    headers
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn field_validation_refuses_warns_or_ignores_unknown_and_duplicate_fields() {
    let client = client();
    let body = br#"{"metadata": {"name": "a", "bogus": 1}, "bogus": {"x": 1}, "data": {"k": "1", "k": "2"}}"#;
    // Strict: 400, every field named, nothing stored.
    let (code, status, _) = within(
        "a strict create never answered",
        send(
            &client,
            "POST",
            &format!("{CMS}?fieldValidation=Strict"),
            JSON,
            body.to_vec(),
        ),
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (400, Some("BadRequest")),
        "{status}"
    );
    let message = status["message"].as_str().unwrap();
    for field in [
        r#"unknown field "metadata.bogus""#,
        r#"unknown field "bogus""#,
        r#"duplicate field "data.k""#,
    ] {
        assert!(message.contains(field), "{field}: {message}");
    }
    assert!(
        message.starts_with(
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: "
        ),
        "{message}"
    );
    assert_eq!(
        send(&client, "GET", &format!("{CMS}/a"), JSON, Vec::new())
            .await
            .0,
        404
    );
    // Warn, and no directive (the default): written, the last duplicate wins, one warning each.
    for query in ["?fieldValidation=Warn", ""] {
        let (code, created, headers) = send(
            &client,
            "POST",
            &format!("{CMS}{query}"),
            JSON,
            body.to_vec(),
        )
        .await;
        assert_eq!(code, 201, "{query}: {created}");
        assert_eq!(created["data"], json!({"k": "2"}));
        assert!(created.get("bogus").is_none());
        // (The unknown fields come in key order; upstream names them in the body's order.)
        let mut got = warnings(&headers);
        got.sort();
        assert_eq!(
            got,
            [
                r#"299 - "duplicate field \"data.k\"""#,
                r#"299 - "unknown field \"bogus\"""#,
                r#"299 - "unknown field \"metadata.bogus\"""#,
            ],
            "{query}"
        );
        assert_eq!(
            send(&client, "DELETE", &format!("{CMS}/a"), JSON, Vec::new())
                .await
                .0,
            200
        );
    }
    // Ignore: written, nothing said.
    let (code, _, headers) = send(
        &client,
        "POST",
        &format!("{CMS}?fieldValidation=Ignore"),
        JSON,
        body.to_vec(),
    )
    .await;
    assert_eq!(code, 201);
    assert!(warnings(&headers).is_empty());
    // An update: Strict is 400; a patch: Strict is 422 with one cause on `patch`, Warn warns.
    let (code, status, _) = send(
        &client,
        "PUT",
        &format!("{CMS}/a?fieldValidation=Strict"),
        JSON,
        bytes(&json!({"metadata": {"name": "a"}, "bogus": 1})),
    )
    .await;
    assert_eq!(code, 400, "{status}");
    let (code, status, _) = send(
        &client,
        "PATCH",
        &format!("{CMS}/a?fieldValidation=Strict"),
        MERGE,
        bytes(&json!({"bogus": 1})),
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (422, Some("Invalid")),
        "{status}"
    );
    assert_eq!(status["details"]["causes"][0]["field"], "patch", "{status}");
    assert_eq!(
        status["details"]["causes"][0]["reason"], "FieldValueInvalid",
        "{status}"
    );
    let (code, _, headers) = send(
        &client,
        "PATCH",
        &format!("{CMS}/a"),
        MERGE,
        bytes(&json!({"bogus": 1})),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(warnings(&headers), [r#"299 - "unknown field \"bogus\"""#]);
    // A directive upstream does not take: 422 on the verb's options, before anything else.
    for (method, path, options) in [
        ("POST", CMS.to_owned(), "CreateOptions"),
        ("PUT", format!("{CMS}/a"), "UpdateOptions"),
        ("PATCH", format!("{CMS}/a"), "PatchOptions"),
    ] {
        let ct = if method == "PATCH" { MERGE } else { JSON };
        let (code, status, _) = send(
            &client,
            method,
            &format!("{path}?fieldValidation=strict"),
            ct,
            bytes(&json!({"metadata": {"name": "a"}})),
        )
        .await;
        assert_eq!(code, 422, "{method}: {status}");
        assert_eq!(status["details"]["kind"], options, "{status}");
        assert_eq!(
            causes(&status),
            [(
                "fieldValidation".to_owned(),
                "FieldValueNotSupported".to_owned(),
                r#"Unsupported value: "strict": supported values: "", "Ignore", "Strict", "Warn""#
                    .to_owned()
            )]
        );
    }
}

#[tokio::test(start_paused = true)]
async fn an_object_leaving_a_watched_selection_is_deleted_with_its_previous_content() {
    use apiserver_support::open_watch;
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, WatchEvent, WatchParams};
    let client = client();
    let body = json!({"metadata": {"name": "a", "labels": {"app": "web"}}, "data": {"k": "v"}});
    let (code, created, _) = send(&client, "POST", CMS, JSON, bytes(&body)).await;
    assert_eq!(code, 201, "{created}");
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut web = open_watch(&api, &WatchParams::default().labels("app=web"), &rv).await;
    let mut all = open_watch(&api, &WatchParams::default(), &rv).await;
    let patch = json!({"metadata": {"labels": {"app": "db"}}, "data": {"k": "w"}});
    let (code, moved, _) = send(&client, "PATCH", &format!("{CMS}/a"), MERGE, bytes(&patch)).await;
    assert_eq!(code, 200, "{moved}");
    let moved_rv = moved["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    // The selected watch: DELETED, with the labels and data it last matched with, at the
    // update's resourceVersion.
    let ev = within("the selected watch never saw the object leave", web.next())
        .await
        .unwrap()
        .unwrap();
    let WatchEvent::Deleted(gone) = ev else {
        panic!("expected DELETED, got {ev:?}");
    };
    assert_eq!(gone.metadata.labels.unwrap()["app"], "web");
    assert_eq!(gone.data.unwrap()["k"], "v");
    assert_eq!(
        gone.metadata.resource_version.as_deref(),
        Some(moved_rv.as_str())
    );
    // An unfiltered watch sees the update itself.
    let ev = within("the unfiltered watch never saw the update", all.next())
        .await
        .unwrap()
        .unwrap();
    let WatchEvent::Modified(now) = ev else {
        panic!("expected MODIFIED, got {ev:?}");
    };
    assert_eq!(now.metadata.labels.unwrap()["app"], "db");
}
