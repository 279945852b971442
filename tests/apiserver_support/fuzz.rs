//! The fuzzing harness shared by `tests/fuzz_apiserver.rs` (proptest, on stable, in
//! `cargo test`) and the `cargo fuzz` targets in `fuzz/` (which include this file by path).
//!
//! Each input becomes one HTTP request sent in-process to a fresh seeded cluster's router, and
//! the answer is checked against what the server promises whatever a client sends:
//! 1. it answers (no panic, no hang: every await has a timeout);
//! 2. a rejection (4xx/5xx) is a Kubernetes `Status` whose `code` is the HTTP code, and never
//!    a 500, except upstream's own for a create that carries a resourceVersion (the quota and
//!    the fault switch, the other 500s, are not reachable here);
//! 3. a rejection changed nothing: the head revision and every object are as before;
//! 4. the server still answers a read afterwards.
#![allow(dead_code)]

use std::cell::RefCell;
use std::time::Duration;

use bytes::Bytes;
use controlloop::apiserver::{Cluster, ServerOptions};
use http::Request;
use http_body_util::{BodyExt, Full};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_encode};
use serde_json::{Value, json};
use tower::ServiceExt;

/// Which decoder an input exercises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A JSON object body (create, update, status update).
    JsonBody,
    /// The protobuf envelope kubectl sends for ConfigMaps.
    Protobuf,
    /// A patch body of every patch type.
    Patch,
    /// A query string on list, watch, get and delete.
    Query,
    /// A label (and field) selector.
    Selector,
    /// A request path, percent-escapes and all.
    Path,
    /// A YAML object body (create, update, status update).
    Yaml,
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const WIDGETS: &str = "/apis/lab.controlloop.dev/v1/namespaces/default/widgets";

/// Bytes kept as they are in a path: the unreserved characters, `/` and `%` (so malformed
/// escapes reach the server).
const PATH_KEEP: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/')
    .remove(b'%');

thread_local! {
    // Paused time, as the lab's experiments run: everything is in memory, so whenever the
    // runtime is idle the clock jumps to the next timer, and a request that waits forever is
    // a timeout after no real time at all.
    static RT: RefCell<tokio::runtime::Runtime> = RefCell::new(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("a runtime"),
    );
}

/// Runs `f` on this thread's runtime, failing if it takes longer than `limit` (virtual time).
fn block_on<T>(what: &str, limit: Duration, f: impl std::future::Future<Output = T>) -> T {
    RT.with(|rt| {
        rt.borrow()
            .block_on(async { tokio::time::timeout(limit, f).await })
            .unwrap_or_else(|_| panic!("{what}: no answer within {limit:?} (a hang)"))
    })
}

/// What a response was: its code, and its body unless it is a watch stream.
struct Answer {
    code: u16,
    body: Option<Bytes>,
}

/// Reads the first few chunks of a watch stream (each at most a second of virtual time): each
/// must be lines of `{"type": …, "object": …}`, an ERROR carrying a `Status`.
async fn read_watch(body: axum::body::Body) -> Result<(), String> {
    let mut body = body;
    for _ in 0..3 {
        let Ok(frame) = tokio::time::timeout(Duration::from_secs(1), body.frame()).await else {
            return Ok(()); // waiting for writes, as a watch does
        };
        let Some(frame) = frame else { return Ok(()) };
        let frame = frame.map_err(|e| format!("the watch stream failed: {e}"))?;
        let Some(data) = frame.data_ref() else {
            continue;
        };
        for line in data.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let ev: Value = serde_json::from_slice(line)
                .map_err(|e| format!("a watch event that is no JSON ({e})"))?;
            let ok = match ev["type"].as_str() {
                Some("ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK") => ev["object"].is_object(),
                Some("ERROR") => ev["object"]["kind"] == "Status",
                _ => false,
            };
            if !ok {
                return Err(format!("a malformed watch event: {ev}"));
            }
        }
    }
    Ok(())
}

async fn call(cluster: &Cluster, req: Request<Full<Bytes>>) -> Result<Answer, String> {
    // As the server reads it: a GET of a collection whose first `watch` parameter is "true",
    // "1" or empty (on a named object `watch` means nothing, as upstream).
    let collection = ["/configmaps", "/widgets"]
        .iter()
        .any(|c| req.uri().path().ends_with(c));
    let watch = collection
        && form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes())
            .find(|(k, _)| k == "watch")
            .is_some_and(|(_, v)| matches!(v.as_ref(), "true" | "1" | ""));
    let resp = cluster
        .router()
        .oneshot(req)
        .await
        .expect("the router is infallible");
    let code = resp.status().as_u16();
    if watch && code == 200 {
        read_watch(resp.into_body()).await?;
        return Ok(Answer { code, body: None });
    }
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("the body failed: {e}"))?
        .to_bytes();
    Ok(Answer {
        code,
        body: Some(body),
    })
}

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// The CustomResourceDefinition of the harness's Widget (`lab.controlloop.dev/v1`, namespaced,
/// the status subresource): what a user POSTs before writing one.
fn widget_crd() -> Value {
    let int = |format: &str| json!({"type": "integer", "format": format});
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.lab.controlloop.dev"},
        "spec": {"group": "lab.controlloop.dev", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget",
                "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "required": ["spec"],
                    "properties": {
                        "spec": {"type": "object", "required": ["replicas"], "properties": {
                            "replicas": int("int32"),
                            "color": {"type": "string", "nullable": true}}},
                        "status": {"type": "object", "nullable": true, "properties": {
                            "observedGeneration": {"type": "integer", "format": "int64",
                                "nullable": true},
                            "readyReplicas": {"type": "integer", "format": "int32",
                                "default": 0},
                            "message": {"type": "string", "nullable": true}}}}}}}]}})
}

/// How long after its CRD is established the server holds a create of the new resource, as
/// kube-apiserver does.
const CREATE_HOLD: Duration = Duration::from_secs(2);

/// A fresh cluster that serves Widgets (their CRD POSTed, established and past the create
/// hold), with a ConfigMap `seed` and a Widget `w` to patch, update and delete.
async fn seeded() -> Cluster {
    let cluster = Cluster::new(ServerOptions::default());
    let crd = request(
        "POST",
        CRDS,
        "application/json",
        serde_json::to_vec(&widget_crd()).unwrap(),
    )
    .expect("a valid CRD request");
    let installed = call(&cluster, crd).await.map(|a| a.code);
    assert_eq!(installed, Ok(201), "the Widget CRD was not created");
    tokio::time::sleep(CREATE_HOLD).await;
    let seed = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "seed", "labels": {"app": "web", "n": "5"}, "annotations": {"a": "b"}},
        "data": {"k": "v", "big": "x".repeat(1_000)}});
    let w = json!({"apiVersion": "lab.controlloop.dev/v1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {"replicas": 1, "color": "red"}});
    for (path, body) in [(CMS, seed), (WIDGETS, w)] {
        let req = request(
            "POST",
            path,
            "application/json",
            serde_json::to_vec(&body).unwrap(),
        )
        .expect("a valid seed request");
        let seeded = call(&cluster, req).await.map(|a| a.code);
        assert_eq!(seeded, Ok(201), "seeding failed");
    }
    cluster
}

/// Everything storage holds, as the server answers it.
async fn state(cluster: &Cluster) -> (u64, Value, Value) {
    let mut lists = Vec::new();
    for path in ["/api/v1/configmaps", "/apis/lab.controlloop.dev/v1/widgets"] {
        let req = request("GET", path, "application/json", Vec::new()).unwrap();
        let a = call(cluster, req).await.expect("a list");
        assert_eq!(a.code, 200, "the server no longer answers a list");
        let v: Value = serde_json::from_slice(&a.body.unwrap()).expect("a list is JSON");
        lists.push(v["items"].clone());
    }
    let items = lists.pop().unwrap();
    (cluster.resource_version(), lists.pop().unwrap(), items)
}

fn request(method: &str, uri: &str, ct: &str, body: Vec<u8>) -> Option<Request<Full<Bytes>>> {
    Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", ct)
        .body(Full::new(Bytes::from(body)))
        .ok()
}

/// Percent-encodes `b` except `&` and `=`, so the bytes keep a query's shape.
fn query_of(b: &[u8]) -> String {
    b.split(|c| *c == b'&')
        .map(|pair| {
            pair.splitn(2, |c| *c == b'=')
                .map(|part| percent_encode(part, NON_ALPHANUMERIC).to_string())
                .collect::<Vec<_>>()
                .join("=")
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// The request an input stands for: its first byte picks the variant, the rest is the payload.
pub fn build(target: Target, data: &[u8]) -> Option<Request<Full<Bytes>>> {
    let (pick, rest) = data.split_first().map_or((0, data), |(p, r)| (*p, r));
    let seed = format!("{CMS}/seed");
    match target {
        Target::JsonBody | Target::Yaml => {
            let (method, path) = match pick % 5 {
                0 => ("POST", CMS.to_string()),
                1 => ("POST", WIDGETS.to_string()),
                2 => ("PUT", seed),
                3 => ("PUT", format!("{WIDGETS}/w")),
                _ => ("PUT", format!("{WIDGETS}/w/status")),
            };
            let ct = if target == Target::Yaml {
                "application/yaml"
            } else {
                "application/json"
            };
            request(method, &path, ct, rest.to_vec())
        }
        Target::Protobuf => {
            let body = if pick % 2 == 0 {
                [b"k8s\0".as_slice(), rest].concat()
            } else {
                rest.to_vec()
            };
            let (method, path) = if pick % 4 < 2 {
                ("POST", CMS.to_string())
            } else {
                ("PUT", seed)
            };
            request(method, &path, "application/vnd.kubernetes.protobuf", body)
        }
        Target::Patch => {
            let ct = [
                "application/merge-patch+json",
                "application/json-patch+json",
                "application/strategic-merge-patch+json",
                "application/apply-patch+yaml",
                "application/json",
            ][usize::from(pick % 5)];
            let path = match (pick / 5) % 4 {
                0 => seed,
                1 => format!("{WIDGETS}/w"),
                2 => format!("{WIDGETS}/w/status"),
                _ => format!("{CMS}/missing"),
            };
            request(
                "PATCH",
                &format!("{path}?fieldManager=fuzz"),
                ct,
                rest.to_vec(),
            )
        }
        Target::Query => {
            let (method, path) = match pick % 6 {
                0 => ("GET", CMS.to_string()),
                1 => ("GET", "/api/v1/configmaps".to_string()),
                2 => ("GET", WIDGETS.to_string()),
                3 => ("GET", seed),
                4 => ("DELETE", format!("{WIDGETS}/w")),
                _ => ("GET", format!("{CMS}?watch=true")),
            };
            let sep = if path.contains('?') { '&' } else { '?' };
            request(
                method,
                &format!("{path}{sep}{}", query_of(rest)),
                "application/json",
                Vec::new(),
            )
        }
        Target::Selector => {
            let param = if pick % 2 == 0 {
                "labelSelector"
            } else {
                "fieldSelector"
            };
            let watch = if pick % 4 >= 2 { "&watch=true" } else { "" };
            let sel = percent_encode(rest, NON_ALPHANUMERIC);
            request(
                "GET",
                &format!("{CMS}?{param}={sel}{watch}"),
                "application/json",
                Vec::new(),
            )
        }
        Target::Path => {
            let method = ["GET", "PUT", "DELETE", "PATCH", "POST"][usize::from(pick % 5)];
            let path = format!("/{}", percent_encode(rest, PATH_KEEP));
            request(
                method,
                &path,
                "application/merge-patch+json",
                b"{}".to_vec(),
            )
        }
    }
}

/// Sends the request `data` stands for to a fresh cluster and checks the promises in the
/// module docs. Returns the HTTP code, or `None` for bytes that make no valid HTTP request.
pub fn check(target: Target, data: &[u8]) -> Result<Option<u16>, String> {
    let Some(req) = build(target, data) else {
        return Ok(None);
    };
    let what = format!("{} {}", req.method(), req.uri());
    block_on(&what, Duration::from_secs(20), async {
        let cluster = seeded().await;
        let before = state(&cluster).await;
        let answer = call(&cluster, req)
            .await
            .map_err(|e| format!("{what}: {e}"))?;
        let code = answer.code;
        if code >= 400 {
            let body = answer.body.unwrap_or_default();
            let status: Value = serde_json::from_slice(&body)
                .map_err(|e| format!("{what}: {code} with a body that is no JSON ({e})"))?;
            if status["kind"] != "Status"
                || status["code"] != json!(code)
                || !status["reason"].is_string()
            {
                return Err(format!(
                    "{what}: {code} without a matching Status: {status}"
                ));
            }
            let upstreams_own = status["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("metadata.resourceVersion must not be set"));
            if code == 500 && !upstreams_own {
                return Err(format!("{what}: an internal error: {status}"));
            }
        } else if let Some(body) = &answer.body {
            serde_json::from_slice::<Value>(body)
                .map_err(|e| format!("{what}: {code} with a body that is no JSON ({e})"))?;
        }
        // Keeps 4 (these are two more requests) and 3.
        let after = state(&cluster).await;
        if code >= 400 && after != before {
            return Err(format!("{what}: rejected with {code}, but storage changed"));
        }
        Ok(Some(code))
    })
}
