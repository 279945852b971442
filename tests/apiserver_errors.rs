//! Every error the embedded API server answers, over real HTTP through `kube::Client`: the
//! HTTP code, the `Status` reason, and — for every one — that storage is unchanged afterwards
//! and that the server still answers (the fingerprint after each case is two more requests).
//! Hostile requests too large for this table's 4 KiB body limit are in `apiserver_hostile.rs`.

mod apiserver_support;

use apiserver_support::*;
use controlloop::apiserver::{ApiServer, Failure, ServerOptions};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

/// `(what, method, path, content type, body, expected code, expected reason)`.
type Case = (
    &'static str,
    &'static str,
    String,
    &'static str,
    Vec<u8>,
    u16,
    &'static str,
);

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const WIDGETS: &str = "/apis/lab.controlloop.dev/v1/namespaces/default/widgets";
const JSON: &str = "application/json";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

fn body(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

#[tokio::test]
async fn every_rejected_request_answers_a_status_and_changes_nothing() {
    let server = ApiServer::start_with(ServerOptions {
        max_body_bytes: 4096,
        ..Default::default()
    })
    .await
    .unwrap();
    let api = cms(&server, "default");
    let client = no_retry(&server);
    install_widgets(&server.client()).await;
    create(&api, &cm("a", &[], "1")).await;
    let ws: Api<Widget> = Api::namespaced(server.client(), "default");
    ws.create(&PostParams::default(), &widget("w", 1))
        .await
        .unwrap();
    create(&api, &cm("b", &[], "1")).await;
    let first_page = api.list(&ListParams::default().limit(1)).await.unwrap();
    create(&api, &cm("c", &[], "1")).await;
    server.compact();
    let old_token = first_page.metadata.continue_.unwrap();

    let cm_a = |extra: Value| {
        let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        json_patch::merge(&mut v, &extra);
        body(v)
    };
    let big = "x".repeat(5000);
    let cases: Vec<Case> = vec![
        (
            "malformed JSON",
            "POST",
            CMS.into(),
            JSON,
            b"{not json".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "body of another kind",
            "POST",
            CMS.into(),
            JSON,
            body(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "z"}})),
            400,
            "BadRequest",
        ),
        (
            "wrong type for a built-in field",
            "POST",
            CMS.into(),
            JSON,
            body(json!({"metadata": {"name": "z"}, "data": 3})),
            400,
            "BadRequest",
        ),
        (
            "limit is not a number",
            "GET",
            format!("{CMS}?limit=abc"),
            JSON,
            vec![],
            400,
            "BadRequest",
        ),
        (
            "bad label selector",
            "GET",
            format!("{CMS}?labelSelector=a%20b"),
            JSON,
            vec![],
            400,
            "BadRequest",
        ),
        (
            "unsupported field selector",
            "GET",
            format!("{CMS}?fieldSelector=spec.x%3D1"),
            JSON,
            vec![],
            400,
            "BadRequest",
        ),
        (
            "name in body differs from path",
            "PUT",
            format!("{CMS}/a"),
            JSON,
            body(json!({"metadata": {"name": "b"}})),
            400,
            "BadRequest",
        ),
        (
            "namespace in body differs from path",
            "POST",
            CMS.into(),
            JSON,
            body(json!({"metadata": {"name": "z", "namespace": "other"}})),
            400,
            "BadRequest",
        ),
        (
            "continue with resourceVersion",
            "GET",
            format!("{CMS}?continue={old_token}&resourceVersion=3"),
            JSON,
            vec![],
            400,
            "BadRequest",
        ),
        (
            "a dry run other than All",
            "POST",
            format!("{CMS}?dryRun=Server"),
            JSON,
            body(json!({"metadata": {"name": "z"}})),
            422,
            "Invalid",
        ),
        (
            "unknown resource",
            "GET",
            "/api/v1/namespaces/default/nonexistents".into(),
            JSON,
            vec![],
            404,
            "NotFound",
        ),
        (
            "unknown group",
            "GET",
            "/apis/nope.dev/v1/namespaces/default/things".into(),
            JSON,
            vec![],
            404,
            "NotFound",
        ),
        (
            "unknown name",
            "GET",
            format!("{CMS}/missing"),
            JSON,
            vec![],
            404,
            "NotFound",
        ),
        (
            "update of a missing name",
            "PUT",
            format!("{CMS}/missing"),
            JSON,
            body(json!({"metadata": {"name": "missing"}})),
            404,
            "NotFound",
        ),
        (
            "delete of a missing name",
            "DELETE",
            format!("{CMS}/missing"),
            JSON,
            vec![],
            404,
            "NotFound",
        ),
        (
            "create on the all-namespaces path",
            "POST",
            "/api/v1/configmaps".into(),
            JSON,
            cm_a(json!({})),
            405,
            "MethodNotAllowed",
        ),
        (
            "create of an existing name",
            "POST",
            CMS.into(),
            JSON,
            cm_a(json!({})),
            409,
            "AlreadyExists",
        ),
        (
            "update with a stale resourceVersion",
            "PUT",
            format!("{CMS}/a"),
            JSON,
            cm_a(json!({"metadata": {"resourceVersion": "1"}, "data": {"x": "y"}})),
            409,
            "Conflict",
        ),
        (
            "delete with a stale precondition",
            "DELETE",
            format!("{CMS}/a"),
            JSON,
            body(json!({"preconditions": {"resourceVersion": "1"}})),
            409,
            "Conflict",
        ),
        (
            "continue token older than compaction",
            "GET",
            format!("{CMS}?limit=1&continue={old_token}"),
            JSON,
            vec![],
            410,
            "Expired",
        ),
        (
            "body over the limit",
            "POST",
            CMS.into(),
            JSON,
            cm_a(json!({"metadata": {"name": "big"}, "data": {"x": big}})),
            413,
            "RequestEntityTooLarge",
        ),
        (
            "strategic merge on a custom resource",
            "PATCH",
            format!("{WIDGETS}/w"),
            "application/strategic-merge-patch+json",
            body(json!({})),
            415,
            "UnsupportedMediaType",
        ),
        (
            "YAML body that decodes to an object without a name",
            "POST",
            CMS.into(),
            "application/yaml",
            b"metadata: {}".to_vec(),
            422,
            "Invalid",
        ),
        (
            "a body type the server does not read",
            "POST",
            CMS.into(),
            "application/xml",
            b"<metadata/>".to_vec(),
            415,
            "UnsupportedMediaType",
        ),
        (
            "missing name",
            "POST",
            CMS.into(),
            JSON,
            body(json!({"metadata": {}})),
            422,
            "Invalid",
        ),
        (
            "malformed name",
            "POST",
            CMS.into(),
            JSON,
            body(json!({"metadata": {"name": "Not_Valid"}})),
            422,
            "Invalid",
        ),
        (
            "malformed label",
            "POST",
            CMS.into(),
            JSON,
            body(json!({"metadata": {"name": "z", "labels": {"a": "-bad-"}}})),
            422,
            "Invalid",
        ),
        (
            "schema type error in a custom resource",
            "POST",
            WIDGETS.into(),
            JSON,
            body(json!({"metadata": {"name": "v"}, "spec": {"replicas": "three"}})),
            422,
            "Invalid",
        ),
        (
            "custom resource update without resourceVersion",
            "PUT",
            format!("{WIDGETS}/w"),
            JSON,
            body(json!({"metadata": {"name": "w"}, "spec": {"replicas": 5}})),
            422,
            "Invalid",
        ),
        (
            "failed JSON patch test",
            "PATCH",
            format!("{CMS}/a"),
            "application/json-patch+json",
            body(json!([{"op": "test", "path": "/data/v", "value": "no"}])),
            422,
            "Invalid",
        ),
        // Names and namespaces, whatever their source.
        (
            "generateName with a slash",
            "POST",
            CMS.into(),
            JSON,
            body(json!({"metadata": {"generateName": "a/"}})),
            422,
            "Invalid",
        ),
        (
            "generateName that is no DNS subdomain",
            "POST",
            CMS.into(),
            JSON,
            body(json!({"metadata": {"generateName": "Web-"}})),
            422,
            "Invalid",
        ),
        (
            "name '..' in the path, percent-encoded",
            "GET",
            format!("{CMS}/%2E%2E"),
            JSON,
            vec![],
            400,
            "BadRequest",
        ),
        (
            "name with a percent sign in the path",
            "DELETE",
            format!("{CMS}/a%25b"),
            JSON,
            vec![],
            400,
            "BadRequest",
        ),
        (
            "malformed percent-escape in the path",
            "GET",
            format!("{CMS}/a%zz"),
            JSON,
            vec![],
            400,
            "BadRequest",
        ),
        (
            "namespace that is no DNS label",
            "POST",
            "/api/v1/namespaces/Bad_NS/configmaps".into(),
            JSON,
            body(json!({"metadata": {"name": "z"}})),
            422,
            "Invalid",
        ),
        (
            "label value over 63 characters",
            "POST",
            CMS.into(),
            JSON,
            body(json!({"metadata": {"name": "z", "labels": {"a": "v".repeat(64)}}})),
            422,
            "Invalid",
        ),
        (
            "label key name over 63 characters",
            "POST",
            CMS.into(),
            JSON,
            body(json!({"metadata": {"name": "z", "labels": {"k".repeat(64): "v"}}})),
            422,
            "Invalid",
        ),
        (
            "annotation key that is no qualified name",
            "POST",
            CMS.into(),
            JSON,
            body(json!({"metadata": {"name": "z", "annotations": {"a b": "v"}}})),
            422,
            "Invalid",
        ),
        (
            "finalizer that is no qualified name",
            "POST",
            CMS.into(),
            JSON,
            body(json!({"metadata": {"name": "z", "finalizers": ["x/y/z"]}})),
            422,
            "Invalid",
        ),
        // Numbers, tokens and selectors in the query.
        (
            "limit beyond 64 bits",
            "GET",
            format!("{CMS}?limit=99999999999999999999"),
            JSON,
            vec![],
            400,
            "BadRequest",
        ),
        (
            "resourceVersion that is no number",
            "GET",
            format!("{CMS}?resourceVersion=abc"),
            JSON,
            vec![],
            400,
            "BadRequest",
        ),
        (
            "negative resourceVersion on a watch",
            "GET",
            format!("{CMS}?watch=true&resourceVersion=-1"),
            JSON,
            vec![],
            400,
            "BadRequest",
        ),
        (
            "continue token this server never issued",
            "GET",
            format!("{CMS}?limit=1&continue=bm90IGEgdG9rZW4"),
            JSON,
            vec![],
            400,
            "BadRequest",
        ),
        (
            "timeoutSeconds beyond 64 bits",
            "GET",
            format!("{CMS}?watch=true&timeoutSeconds=100000000000000000000"),
            JSON,
            vec![],
            400,
            "BadRequest",
        ),
        (
            "gracePeriodSeconds that is no integer",
            "DELETE",
            format!("{CMS}/a?gracePeriodSeconds=soon"),
            JSON,
            vec![],
            400,
            "BadRequest",
        ),
        (
            "unknown propagationPolicy",
            "DELETE",
            format!("{CMS}/a"),
            JSON,
            body(json!({"propagationPolicy": "Sometimes"})),
            422,
            "Invalid",
        ),
        (
            "malformed DeleteOptions",
            "DELETE",
            format!("{CMS}/a"),
            JSON,
            b"{".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "empty set in a label selector",
            "GET",
            format!("{CMS}?labelSelector=x%20in%20()"),
            JSON,
            vec![],
            400,
            "BadRequest",
        ),
        (
            "label selector comparing with a non-integer",
            "GET",
            format!("{CMS}?labelSelector=x%3Ey"),
            JSON,
            vec![],
            400,
            "BadRequest",
        ),
        // Depth: decoded bodies and patch results are at most 127 levels deep.
        (
            "JSON body nested 200 levels deep",
            "POST",
            CMS.into(),
            JSON,
            format!("{}{}", "[".repeat(200), "]".repeat(200)).into_bytes(),
            400,
            "BadRequest",
        ),
        (
            "JSON patch that would nest 128 levels deep",
            "PATCH",
            format!("{CMS}/a"),
            "application/json-patch+json",
            body(json!([{"op": "add", "path": "/x".repeat(127), "value": {}}])),
            422,
            "Invalid",
        ),
        (
            "server-side apply, which needs field ownership the server does not keep",
            "PATCH",
            format!("{CMS}/a?fieldManager=test"),
            "application/apply-patch+yaml",
            body(json!({"data": {"x": "y"}})),
            415,
            "UnsupportedMediaType",
        ),
        // The protobuf envelope kubectl sends.
        (
            "truncated protobuf body",
            "POST",
            CMS.into(),
            PROTOBUF,
            b"k8s\0\x12\xff\x01".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "protobuf envelope naming another kind",
            "POST",
            CMS.into(),
            PROTOBUF,
            b"k8s\0\x0a\x08\x12\x06Secret\x12\x00".to_vec(),
            400,
            "BadRequest",
        ),
    ];
    for (what, method, path, ct, b, code, reason) in cases {
        let before = fingerprint(&server, &client).await;
        let (got, status, _) = send(&client, method, &path, ct, b).await;
        assert_eq!(
            (got, status["reason"].as_str()),
            (code, Some(reason)),
            "{what}: {status}"
        );
        assert_eq!(status["kind"], "Status", "{what}");
        assert_eq!(status["code"], code, "{what}");
        assert_eq!(
            fingerprint(&server, &client).await,
            before,
            "{what} changed storage"
        );
    }
}

#[tokio::test]
async fn the_fault_switch_answers_429_and_500_with_retry_after_and_changes_nothing() {
    let server = server().await;
    let api = cms(&server, "default");
    create(&api, &cm("a", &[], "1")).await;
    let client = no_retry(&server);
    let before = fingerprint(&server, &client).await;
    server.fail_next_requests(1, Failure::TooManyRequests, 7);
    let (code, status, headers) = send(
        &client,
        "POST",
        CMS,
        JSON,
        body(json!({"metadata": {"name": "z"}})),
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (429, Some("TooManyRequests"))
    );
    assert_eq!(headers["retry-after"], "7");
    assert_eq!(status["details"]["retryAfterSeconds"], 7);
    server.fail_next_requests(1, Failure::InternalError, 2);
    let (code, status, headers) = send(&client, "DELETE", &format!("{CMS}/a"), JSON, vec![]).await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (500, Some("InternalError"))
    );
    assert_eq!(headers["retry-after"], "2");
    assert_eq!(
        fingerprint(&server, &client).await,
        before,
        "a failed request changed storage"
    );
    let (code, _, _) = send(&client, "GET", &format!("{CMS}/a"), JSON, vec![]).await;
    assert_eq!(code, 200, "the switch fails only the next n requests");
}

#[tokio::test]
async fn kube_api_errors_carry_the_status_reason() {
    let server = server().await;
    let client = server.client();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create(&api, &cm("a", &[], "1")).await;
    let before = fingerprint(&server, &client).await;
    let err = api
        .create(&PostParams::default(), &cm("a", &[], "2"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists"),
        "{err}"
    );
    let err = api.get("nope").await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 404 && s.reason == "NotFound"),
        "{err}"
    );
    let err = api
        .create(&PostParams::default(), &ConfigMap::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422 && s.reason == "Invalid"),
        "{err}"
    );
    assert_eq!(fingerprint(&server, &client).await, before);
}
