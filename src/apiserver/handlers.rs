//! HTTP handlers: routing, query parameters, bodies, and the verbs on each resource.
//!
//! Follows the apiserver's `endpoints/handlers` (`get.go`, `create.go`, `update.go`,
//! `patch.go`, `delete.go`, `watch.go`) and the REST paths `endpoints/installer.go` builds:
//!
//! ```text
//! /api/v1/configmaps                                   list, watch (all namespaces)
//! /api/v1/namespaces/{ns}/configmaps[/{name}]          list, watch, create | get, update, patch, delete
//! /apis/lab.controlloop.dev/v1/widgets                 list, watch (all namespaces)
//! /apis/lab.controlloop.dev/v1/namespaces/{ns}/widgets[/{name}[/status]]
//! ```
//!
//! Every handler validates fully before it takes the storage lock, and storage checks again
//! before it commits, so a rejected request changes nothing (storage I3).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, Method, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::Value;

use super::controls::{Failure, RequestRecord};
use super::errors::ApiError;
use super::kinds::{KINDS, Kind};
use super::selector::Selector;
use super::storage::{Key, Preconditions, Stored, UpdateMode};
use super::watch::{self, WatchRequest};
use super::{Cluster, discovery, protobuf};

/// Default watch timeout when the client sends none (upstream picks 30–60 min at random).
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

/// The router's single entry point: faults, dispatch, request log.
pub(crate) async fn entry(State(cluster): State<Cluster>, req: Request) -> Response {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let discovery = discovery::is_discovery_path(&segments);
    let shared = &cluster.shared;
    let decision = if discovery {
        Default::default()
    } else {
        shared.faults.lock().take()
    };
    if let Some(d) = decision.delay {
        tokio::time::sleep(d).await;
    }
    let resp = match decision.fail {
        Some((Failure::TooManyRequests, s)) => ApiError::too_many_requests(s).into_response(),
        Some((Failure::InternalError, s)) => ApiError::internal(s).into_response(),
        None => match dispatch(&cluster, &segments, req).await {
            Ok(r) => r,
            Err(e) => e.into_response(),
        },
    };
    let status = resp.status().as_u16();
    tracing::info!(target: "controlloop::apiserver", "{method} {path}{}{query} {status}", if query.is_empty() { "" } else { "?" });
    shared.log.lock().push(RequestRecord {
        method,
        path,
        query,
        status,
    });
    shared.logged.notify_waiters();
    resp
}

/// Where a resource request points.
struct Target {
    kind: usize,
    namespace: Option<String>,
    name: Option<String>,
    status: bool,
}

fn route(segments: &[&str], path: &str) -> Result<Target, ApiError> {
    let (group, version, rest) = match segments {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(ApiError::no_such_path(path)),
    };
    let (namespace, plural, name, sub) = match rest {
        [plural] => (None, *plural, None, None),
        ["namespaces", ns, plural] => (Some(*ns), *plural, None, None),
        ["namespaces", ns, plural, name] => (Some(*ns), *plural, Some(*name), None),
        ["namespaces", ns, plural, name, sub] => (Some(*ns), *plural, Some(*name), Some(*sub)),
        _ => return Err(ApiError::no_such_path(path)),
    };
    let kind = Kind::find(group, version, plural).ok_or_else(|| ApiError::no_such_path(path))?;
    let status = match sub {
        None => false,
        Some("status") if KINDS[kind].status_subresource => true,
        Some(_) => return Err(ApiError::no_such_path(path)),
    };
    Ok(Target {
        kind,
        namespace: namespace.map(str::to_string),
        name: name.map(str::to_string),
        status,
    })
}

fn json_response(code: StatusCode, body: impl Into<Body>) -> Response {
    let mut r = (code, body.into()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn object_response(code: StatusCode, obj: &Stored) -> Response {
    json_response(code, obj.json.clone())
}

async fn dispatch(
    cluster: &Cluster,
    segments: &[&str],
    req: Request,
) -> Result<Response, ApiError> {
    let path = req.uri().path().to_string();
    if segments.is_empty() {
        let paths = ["/api", "/api/v1", "/apis", "/version"];
        return Ok(json_response(
            StatusCode::OK,
            serde_json::to_vec(&serde_json::json!({"paths": paths})).expect("json"),
        ));
    }
    if let Some(doc) = discovery::document(segments, &cluster.shared.address.lock()) {
        if req.method() != Method::GET {
            return Err(ApiError::method_not_allowed(req.method().as_str(), &path));
        }
        return Ok(json_response(
            StatusCode::OK,
            serde_json::to_vec(&doc).expect("json"),
        ));
    }
    let t = route(segments, &path)?;
    let q: HashMap<String, String> =
        form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    if q.contains_key("dryRun") {
        return Err(ApiError::bad_request(
            "dryRun is not supported by this server",
        ));
    }
    let method = req.method().clone();
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
    let k = &KINDS[t.kind];
    if matches!(method, Method::POST | Method::PUT)
        && !matches!(content_type.as_str(), "application/json" | PROTOBUF)
    {
        return Err(ApiError::unsupported_media_type(&content_type));
    }
    match (&method, t.namespace.as_deref(), t.name.as_deref()) {
        (&Method::GET, ns, None) => {
            if flag(&q, "watch")? {
                start_watch(cluster, t.kind, ns, &q)
            } else {
                list(cluster, t.kind, ns, &q)
            }
        }
        (&Method::POST, Some(ns), None) => {
            let body = read_object(cluster, req, k).await?;
            let obj = k.prepare(ns, None, body)?;
            let now = cluster.now();
            let stored = cluster.write(|st| st.create(t.kind, obj, now, false))?;
            Ok(object_response(StatusCode::CREATED, &stored))
        }
        (&Method::GET, Some(ns), Some(name)) => {
            let obj = cluster.shared.storage.lock().get(t.kind, ns, name);
            obj.map(|o| object_response(StatusCode::OK, &o))
                .ok_or_else(|| ApiError::not_found(k.group, k.plural, name))
        }
        (&Method::PUT, Some(ns), Some(name)) => {
            let body = read_object(cluster, req, k).await?;
            let obj = k.prepare(ns, Some(name), body)?;
            let mode = if t.status {
                UpdateMode::Status
            } else {
                UpdateMode::Main
            };
            let stored = cluster.write(|st| st.update(t.kind, obj, mode))?;
            Ok(object_response(StatusCode::OK, &stored))
        }
        (&Method::PATCH, Some(ns), Some(name)) => {
            let patch_type = PatchType::from_content_type(&content_type, k)?;
            if patch_type == PatchType::Apply && q.get("fieldManager").is_none_or(|f| f.is_empty())
            {
                return Err(ApiError::bad_request(
                    "fieldManager is required for apply patches",
                ));
            }
            let body = read_json(cluster, req).await?;
            let mode = if t.status {
                UpdateMode::Status
            } else {
                UpdateMode::Main
            };
            let now = cluster.now();
            let (stored, created) = cluster.write(|st| {
                let Some(cur) = st.get(t.kind, ns, name) else {
                    if patch_type == PatchType::Apply && !t.status {
                        let obj = k.prepare(ns, Some(name), body)?;
                        return st.create(t.kind, obj, now, false).map(|s| (s, true));
                    }
                    return Err(ApiError::not_found(k.group, k.plural, name));
                };
                let patched = patch_type.apply(cur.value.clone(), body, k, name)?;
                let obj = k.prepare(ns, Some(name), patched)?;
                st.update(t.kind, obj, mode).map(|s| (s, false))
            })?;
            let code = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(object_response(code, &stored))
        }
        (&Method::DELETE, Some(ns), Some(name)) if !t.status => {
            let body = read_body(cluster, req).await?;
            let pre = if body.is_empty() {
                Preconditions::default()
            } else {
                let opts: Value = serde_json::from_slice(&body)
                    .map_err(|e| ApiError::bad_request(format!("malformed DeleteOptions: {e}")))?;
                let p = &opts["preconditions"];
                Preconditions {
                    uid: p["uid"].as_str().map(str::to_string),
                    resource_version: p["resourceVersion"].as_str().map(str::to_string),
                }
            };
            let now = cluster.now();
            let stored = cluster.write(|st| st.delete(t.kind, ns, name, &pre, now))?;
            let pending = !stored.value["metadata"]["deletionTimestamp"].is_null()
                && cluster
                    .shared
                    .storage
                    .lock()
                    .get(t.kind, ns, name)
                    .is_some();
            let code = if pending {
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            };
            Ok(object_response(code, &stored))
        }
        _ => Err(ApiError::method_not_allowed(method.as_str(), &path)),
    }
}

fn flag(q: &HashMap<String, String>, name: &str) -> Result<bool, ApiError> {
    match q.get(name).map(String::as_str) {
        None | Some("false") | Some("0") => Ok(false),
        Some("true") | Some("1") | Some("") => Ok(true),
        Some(v) => Err(ApiError::bad_request(format!(
            "{name}={v:?} is not a boolean"
        ))),
    }
}

fn number(q: &HashMap<String, String>, name: &str) -> Result<Option<u64>, ApiError> {
    q.get(name)
        .filter(|v| !v.is_empty())
        .map(|v| {
            v.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!("{name}={v:?} is not a non-negative integer"))
            })
        })
        .transpose()
}

fn selector(q: &HashMap<String, String>) -> Result<Selector, ApiError> {
    Selector::parse(
        q.get("labelSelector").map(String::as_str),
        q.get("fieldSelector").map(String::as_str),
    )
}

/// A resourceVersion the server has not reached yet is 504 "Too large resource version".
fn check_not_future(cluster: &Cluster, rv: u64) -> Result<(), ApiError> {
    let head = cluster.shared.storage.lock().head();
    if rv > head {
        return Err(ApiError::too_large_resource_version(rv, head));
    }
    Ok(())
}

fn list_options_invalid(message: &str) -> ApiError {
    ApiError::invalid(
        "meta.k8s.io",
        "ListOptions",
        "",
        &[("resourceVersionMatch", message.to_string())],
    )
}

/// The opaque continue token: the revision of the first page and the last key returned.
fn encode_continue(rv: u64, key: &Key) -> String {
    let raw = serde_json::json!({"v": "controlloop/1", "rv": rv, "ns": key.0, "name": key.1});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw.to_string())
}

fn decode_continue(token: &str) -> Result<(u64, Key), ApiError> {
    let bad = || ApiError::bad_request("continue: the token is not one this server issued");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rv = v["rv"].as_u64().ok_or_else(bad)?;
    let ns = v["ns"].as_str().ok_or_else(bad)?.to_string();
    let name = v["name"].as_str().ok_or_else(bad)?.to_string();
    Ok((rv, (ns, name)))
}

fn list(
    cluster: &Cluster,
    kind: usize,
    ns: Option<&str>,
    q: &HashMap<String, String>,
) -> Result<Response, ApiError> {
    let selector = selector(q)?;
    let limit = number(q, "limit")?.map(|l| l as usize);
    let rv_param = q.get("resourceVersion").map(String::as_str).unwrap_or("");
    let rv_match = q
        .get("resourceVersionMatch")
        .map(String::as_str)
        .unwrap_or("");
    if q.contains_key("sendInitialEvents") {
        return Err(list_options_invalid(
            "sendInitialEvents is forbidden for list",
        ));
    }
    if !rv_match.is_empty() && rv_param.is_empty() {
        return Err(list_options_invalid(
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ));
    }
    let rv_num = if rv_param.is_empty() {
        None
    } else {
        Some(rv_param.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!(
                "resourceVersion {rv_param:?} is not a valid resource version"
            ))
        })?)
    };
    let (at, after) = match q.get("continue").filter(|c| !c.is_empty()) {
        Some(token) => {
            if !rv_param.is_empty() {
                return Err(ApiError::bad_request(
                    "resourceVersion may not be set together with continue",
                ));
            }
            let (rv, key) = decode_continue(token)?;
            if rv < cluster.shared.storage.lock().compacted() {
                return Err(ApiError::expired(format!(
                    "the continue token is too old: its resourceVersion {rv} has been compacted; start a new list"
                )));
            }
            (Some(rv), Some(key))
        }
        None => {
            let exact = match rv_match {
                "Exact" => true,
                "NotOlderThan" => false,
                "" => limit.is_some_and(|l| l > 0) && rv_num.is_some_and(|r| r > 0),
                other => {
                    return Err(list_options_invalid(&format!(
                        "{other:?} is not Exact or NotOlderThan"
                    )));
                }
            };
            match rv_num {
                Some(0) if exact => {
                    return Err(list_options_invalid(
                        "Exact requires a resourceVersion other than 0",
                    ));
                }
                Some(r) if exact => (Some(r), None),
                Some(r) => {
                    check_not_future(cluster, r)?;
                    (None, None)
                }
                None => (None, None),
            }
        }
    };
    let page = cluster
        .shared
        .storage
        .lock()
        .list(kind, ns, at, after.as_ref(), limit, &|o| {
            selector.is_empty() || selector.matches(&o.value)
        })?;
    let k = &KINDS[kind];
    let mut meta = serde_json::json!({"resourceVersion": page.rv.to_string()});
    if let Some(key) = &page.continue_after {
        meta["continue"] = Value::String(encode_continue(page.rv, key));
    }
    let head = serde_json::json!({"kind": format!("{}List", k.kind), "apiVersion": k.api_version(), "metadata": meta});
    let head = serde_json::to_vec(&head).expect("json");
    let total: usize = page.items.iter().map(|o| o.json.len() + 1).sum();
    let mut buf = BytesMut::with_capacity(head.len() + total + 16);
    buf.put_slice(&head[..head.len() - 1]);
    buf.put_slice(b",\"items\":[");
    for (i, o) in page.items.iter().enumerate() {
        if i > 0 {
            buf.put_u8(b',');
        }
        buf.put_slice(&o.json);
    }
    buf.put_slice(b"]}");
    Ok(json_response(StatusCode::OK, buf.freeze()))
}

fn start_watch(
    cluster: &Cluster,
    kind: usize,
    ns: Option<&str>,
    q: &HashMap<String, String>,
) -> Result<Response, ApiError> {
    let selector = selector(q)?;
    let bookmarks = flag(q, "allowWatchBookmarks")?;
    let send_initial = q
        .get("sendInitialEvents")
        .map(|_| flag(q, "sendInitialEvents"))
        .transpose()?;
    let rv_match = q
        .get("resourceVersionMatch")
        .map(String::as_str)
        .unwrap_or("");
    match send_initial {
        Some(_) if rv_match != "NotOlderThan" => {
            return Err(list_options_invalid(
                "sendInitialEvents requires resourceVersionMatch=NotOlderThan",
            ));
        }
        Some(true) if !bookmarks => {
            return Err(list_options_invalid(
                "sendInitialEvents requires allowWatchBookmarks=true",
            ));
        }
        None if !rv_match.is_empty() => {
            return Err(list_options_invalid(
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is set",
            ));
        }
        _ => {}
    }
    let rv = q.get("resourceVersion").map(String::as_str).unwrap_or("");
    let rv_num = match rv {
        "" | "0" => None,
        r => Some(r.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!(
                "resourceVersion {r:?} is not a valid resource version"
            ))
        })?),
    };
    let from = match (send_initial, rv_num) {
        // Initial state first: the legacy "" / "0" watch, or a streaming list.
        (None, None) | (Some(true), _) => {
            if let Some(r) = rv_num {
                check_not_future(cluster, r)?;
            }
            None
        }
        (Some(false), None) => Some(cluster.shared.storage.lock().head()),
        (_, Some(r)) => Some(r),
    };
    let timeout = number(q, "timeoutSeconds")?
        .filter(|s| *s > 0) // 0 means "not set", as upstream
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_WATCH_TIMEOUT);
    let req = WatchRequest {
        kind,
        namespace: ns.map(str::to_string),
        selector,
        from,
        send_initial: send_initial == Some(true),
        bookmarks,
        timeout,
    };
    let body = Body::from_stream(watch::stream(Arc::clone(&cluster.shared), req));
    let mut r = (StatusCode::OK, body).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

async fn read_body(cluster: &Cluster, req: Request) -> Result<Bytes, ApiError> {
    let limit = cluster.shared.options.max_body_bytes;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(ApiError::too_large(limit));
    }
    let limited = http_body_util::Limited::new(req.into_body(), limit);
    match limited.collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(ApiError::too_large(limit)),
        Err(e) => Err(ApiError::bad_request(format!(
            "could not read the request body: {e}"
        ))),
    }
}

async fn read_json(cluster: &Cluster, req: Request) -> Result<Value, ApiError> {
    let body = read_body(cluster, req).await?;
    serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
}

/// The protobuf content type client-go uses for built-in kinds.
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// An object body, in JSON or (for ConfigMaps, as kubectl sends them) protobuf.
async fn read_object(cluster: &Cluster, req: Request, k: &Kind) -> Result<Value, ApiError> {
    let is_protobuf = req
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(PROTOBUF.as_bytes()));
    if is_protobuf {
        let body = read_body(cluster, req).await?;
        protobuf::decode(k.kind, &body)
    } else {
        read_json(cluster, req).await
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PatchType {
    Merge,
    Json,
    StrategicMerge,
    Apply,
}

impl PatchType {
    fn from_content_type(ct: &str, k: &Kind) -> Result<Self, ApiError> {
        match ct {
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/strategic-merge-patch+json" if k.strategic_merge => {
                Ok(PatchType::StrategicMerge)
            }
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchType::Apply),
            other => Err(ApiError::unsupported_media_type(other)),
        }
    }

    /// Applies the patch to the current object. A patch that cannot be decoded is 400; one
    /// that cannot be applied (a failed JSON-patch `test`, a missing path) is 422.
    fn apply(self, mut cur: Value, patch: Value, k: &Kind, name: &str) -> Result<Value, ApiError> {
        match self {
            // ConfigMap has no lists with merge keys, so its strategic merge is a merge patch.
            PatchType::Merge | PatchType::StrategicMerge | PatchType::Apply => {
                if !patch.is_object() {
                    return Err(ApiError::bad_request("a merge patch must be a JSON object"));
                }
                json_patch::merge(&mut cur, &patch);
                Ok(cur)
            }
            PatchType::Json => {
                let p: json_patch::Patch = serde_json::from_value(patch)
                    .map_err(|e| ApiError::bad_request(format!("malformed JSON patch: {e}")))?;
                json_patch::patch(&mut cur, &p).map_err(|e| {
                    ApiError::invalid(k.group, k.kind, name, &[("patch", e.to_string())])
                })?;
                Ok(cur)
            }
        }
    }
}
