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
//! # Invariants
//! 1. Every handler parses and validates fully before it takes the storage lock, and storage
//!    checks again before it commits, so a rejected request changes nothing (storage I3).
//! 2. The storage lock is held only for storage calls: decoding, patching, selector matching
//!    and serialisation run outside it. A patch is a read-modify-write: it reads the object,
//!    patches a copy without the lock, and commits only if the object is still at the
//!    resourceVersion it read, retrying a bounded number of times otherwise (as kube-apiserver's
//!    `GuaranteedUpdate` does).
//! 3. Every number taken from a request is parsed into a range that no later arithmetic can
//!    overflow: counts saturate, durations use checked instants.
//!
//! # Differences from upstream
//! - The path is percent-decoded as Go's `net/http` does before kube-apiserver splits it, but a
//!   malformed escape is answered with a 400 `Status` rather than Go's plain-text 400.
//! - A repeated query parameter takes its first value, as upstream's parameter codec does.

mod reads;

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode, header};
use http_body_util::BodyExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use serde_json::Value;

use super::controls::{Failure, RequestRecord};
use super::errors::{ApiError, group_resource};
use super::kinds::{KINDS, Kind};
use super::patch::{Patch, PatchType};
use super::storage::{Preconditions, Stored, UpdateMode};
use super::validation;
use super::{Cluster, discovery, protobuf};
use reads::{flag, list, signed, start_watch};

/// How many times a patch is re-applied when the object changed under it (keeps I2).
const MAX_PATCH_ATTEMPTS: usize = 5;

/// The router's single entry point: faults, dispatch, request log.
pub(crate) async fn entry(State(cluster): State<Cluster>, req: Request) -> Response {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let decoded = decode_path(&path);
    let segments: Vec<&str> = match &decoded {
        Ok(p) => p.split('/').filter(|s| !s.is_empty()).collect(),
        Err(_) => Vec::new(),
    };
    let discovery = decoded.is_ok() && discovery::is_discovery_path(&segments);
    let shared = &cluster.shared;
    let decision = if discovery {
        Default::default()
    } else {
        shared.faults.lock().take()
    };
    if let Some(d) = decision.delay {
        tokio::time::sleep(d).await;
    }
    let resp = match (decision.fail, &decoded) {
        (Some((Failure::TooManyRequests, s)), _) => ApiError::too_many_requests(s).into_response(),
        (Some((Failure::InternalError, s)), _) => ApiError::internal(s).into_response(),
        (None, Err(e)) => e.clone().into_response(),
        (None, Ok(_)) => match dispatch(&cluster, &segments, req).await {
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

/// The path with `%XX` escapes decoded, as Go's `net/http` gives it to kube-apiserver (so
/// `%2F` separates segments). A `%` not followed by two hex digits, or bytes that are not
/// UTF-8, are a 400.
fn decode_path(raw: &str) -> Result<String, ApiError> {
    let b = raw.as_bytes();
    let malformed = b.iter().enumerate().any(|(i, &c)| {
        c == b'%'
            && !(b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    });
    if malformed {
        return Err(ApiError::bad_request(format!(
            "the path {raw:?} has a malformed percent-escape"
        )));
    }
    percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map(|p| p.into_owned())
        .map_err(|_| ApiError::bad_request("the path is not UTF-8 once percent-decoded"))
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
    // `NamespaceKeyFunc`: a name that cannot be a path segment names nothing.
    if let Some(name) = name
        && let Some(why) = validation::path_segment_name(name)
    {
        return Err(ApiError::invalid_name_parameter(name, &why));
    }
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

/// The query parameters; a repeated one keeps its first value.
fn query_map(q: Option<&str>) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for (k, v) in form_urlencoded::parse(q.unwrap_or_default().as_bytes()).into_owned() {
        out.entry(k).or_insert(v);
    }
    out
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
    let doc = discovery::document(segments, &cluster.shared.address.lock());
    if let Some(doc) = doc {
        if req.method() != Method::GET {
            return Err(ApiError::method_not_allowed(req.method().as_str(), &path));
        }
        return Ok(json_response(
            StatusCode::OK,
            serde_json::to_vec(&doc).expect("json"),
        ));
    }
    let t = route(segments, &path)?;
    let q = query_map(req.uri().query());
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
    let mode = if t.status {
        UpdateMode::Status
    } else {
        UpdateMode::Main
    };
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
            let stored = cluster.write(|st| st.update(t.kind, obj, mode))?;
            Ok(object_response(StatusCode::OK, &stored))
        }
        (&Method::PATCH, Some(ns), Some(name)) => {
            let patch_type = PatchType::from_content_type(&content_type, k)?;
            let apply = patch_type == PatchType::Apply;
            if apply && q.get("fieldManager").is_none_or(|f| f.is_empty()) {
                return Err(ApiError::required_option(
                    "PatchOptions",
                    "fieldManager",
                    "is required for apply patch",
                ));
            }
            let patch = patch_type.parse(read_json(cluster, req).await?)?;
            let (stored, created) = patch_object(cluster, &t, ns, name, &patch, apply, mode)?;
            let code = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(object_response(code, &stored))
        }
        (&Method::DELETE, Some(ns), Some(name)) if !t.status => {
            let body = read_body(cluster, req).await?;
            let pre = delete_options(&body, &q)?;
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

/// What one read-modify-write attempt of a patch ended in.
enum Attempt {
    Done(Arc<Stored>, bool),
    /// The object changed (or appeared) between the read and the commit: read again.
    Stale,
}

/// Applies `patch` to the object without holding the storage lock, and commits it only if
/// the object is still the one it read (keeps I2; patch I3).
///
/// A server-side `apply` creates a missing object (upstream's apply does, and no other
/// manager can own its fields yet); an apply to an existing object is 501 NotImplemented,
/// because nothing here records field ownership (`metadata.managedFields`): a merge in its
/// place would let a second manager silently take a field kube-apiserver refuses it with
/// 409 Conflict, and `force=true` would keep fields the applier no longer sets.
fn patch_object(
    cluster: &Cluster,
    t: &Target,
    ns: &str,
    name: &str,
    patch: &Patch,
    apply: bool,
    mode: UpdateMode,
) -> Result<(Arc<Stored>, bool), ApiError> {
    let k = &KINDS[t.kind];
    let create = apply && !t.status;
    for _ in 0..MAX_PATCH_ATTEMPTS {
        let read = cluster.shared.storage.lock().get(t.kind, ns, name);
        let now = cluster.now();
        let attempt = match read {
            None if create => {
                let Patch::Merge(body) = patch else {
                    unreachable!("apply patches parse as merge patches")
                };
                let obj = k.prepare(ns, Some(name), body.clone())?;
                cluster.write(|st| {
                    if st.get(t.kind, ns, name).is_some() {
                        return Ok(Attempt::Stale);
                    }
                    st.create(t.kind, obj, now, false)
                        .map(|s| Attempt::Done(s, true))
                })?
            }
            None => return Err(ApiError::not_found(k.group, k.plural, name)),
            Some(_) if apply => {
                return Err(ApiError::not_implemented(format!(
                    "server-side apply to an existing object is not implemented by the embedded \
                     API server: it records no field ownership (metadata.managedFields), so it \
                     cannot tell another manager's field (409 Conflict) from this one's; send a \
                     merge patch (application/merge-patch+json) to change {} \"{name}\"",
                    group_resource(k.group, k.plural)
                )));
            }
            Some(cur) => {
                let patched = patch.apply(cur.value.clone(), k, name)?;
                let obj = k.prepare(ns, Some(name), patched)?;
                cluster.write(|st| {
                    if st.get(t.kind, ns, name).is_none_or(|now| now.rv != cur.rv) {
                        return Ok(Attempt::Stale);
                    }
                    st.update(t.kind, obj, mode)
                        .map(|s| Attempt::Done(s, false))
                })?
            }
        };
        if let Attempt::Done(stored, created) = attempt {
            return Ok((stored, created));
        }
    }
    Err(ApiError::conflict(
        k.group,
        k.plural,
        name,
        format!(
            "the object kept changing while the patch was applied ({MAX_PATCH_ATTEMPTS} attempts)"
        ),
    ))
}

/// `DeleteOptions` from the body, or else from the query, validated as
/// `ValidateDeleteOptions` does (422). Only the preconditions have an effect: the served kinds
/// have no graceful deletion and no dependents.
fn delete_options(body: &[u8], q: &HashMap<String, String>) -> Result<Preconditions, ApiError> {
    let opts: DeleteOptions = if body.is_empty() {
        DeleteOptions {
            grace_period_seconds: signed(q, "gracePeriodSeconds")?,
            propagation_policy: q.get("propagationPolicy").cloned(),
            orphan_dependents: q
                .get("orphanDependents")
                .map(|_| flag(q, "orphanDependents"))
                .transpose()?,
            ..Default::default()
        }
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("malformed DeleteOptions: {e}")))?
    };
    if opts.dry_run.as_ref().is_some_and(|d| !d.is_empty()) {
        return Err(ApiError::bad_request(
            "dryRun is not supported by this server",
        ));
    }
    let mut causes = Vec::new();
    if opts.orphan_dependents.is_some() && opts.propagation_policy.is_some() {
        causes.push((
            "propagationPolicy",
            "orphanDependents and propagationPolicy cannot both be set".to_string(),
        ));
    }
    if let Some(p) = &opts.propagation_policy
        && !matches!(p.as_str(), "Foreground" | "Background" | "Orphan")
    {
        causes.push((
            "propagationPolicy",
            format!("{p:?} is not Foreground, Background or Orphan"),
        ));
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "DeleteOptions",
            "",
            &causes,
        ));
    }
    let p = opts.preconditions.unwrap_or_default();
    Ok(Preconditions {
        uid: p.uid,
        resource_version: p.resource_version,
    })
}

/// The body, at most `max_body_bytes` (413) and read within `request_timeout` (504, as
/// upstream's timeout filter answers).
async fn read_body(cluster: &Cluster, req: Request) -> Result<Bytes, ApiError> {
    let options = &cluster.shared.options;
    let limit = options.max_body_bytes;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::too_large(limit));
    }
    let limited = http_body_util::Limited::new(req.into_body(), limit);
    match tokio::time::timeout(options.request_timeout, limited.collect()).await {
        Err(_) => Err(ApiError::timeout(format!(
            "the request body was not received within {:?}",
            options.request_timeout
        ))),
        Ok(Ok(c)) => Ok(c.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(ApiError::too_large(limit)),
        Ok(Err(e)) => Err(ApiError::bad_request(format!(
            "could not read the request body: {e}"
        ))),
    }
}

/// A JSON body; serde_json refuses nesting deeper than 127 levels (a 400), so every decoded
/// value is bounded in depth as well as in size.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_percent_decoded_and_malformed_escapes_are_400() {
        assert_eq!(decode_path("/a%2Fb/%41").unwrap(), "/a/b/A");
        for bad in ["/a%", "/a%2", "/a%zz", "/%C3%28"] {
            assert_eq!(decode_path(bad).unwrap_err().code, 400, "{bad}");
        }
    }

    #[test]
    fn a_name_that_is_no_path_segment_is_400_and_a_repeated_parameter_keeps_its_first_value() {
        let e = route(&["api", "v1", "namespaces", "d", "configmaps", ".."], "/p")
            .err()
            .unwrap();
        assert_eq!(e.code, 400);
        let e = route(&["api", "v1", "namespaces", "d", "configmaps", "a%b"], "/p")
            .err()
            .unwrap();
        assert_eq!(e.code, 400);
        let q = query_map(Some("limit=1&limit=2"));
        assert_eq!(q["limit"], "1");
    }

    #[test]
    fn delete_options_are_validated_like_upstream() {
        let q = |s: &str| query_map(Some(s));
        assert!(delete_options(b"", &q("gracePeriodSeconds=-5")).is_ok());
        assert_eq!(
            delete_options(b"", &q("gracePeriodSeconds=99999999999999999999"))
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(
            delete_options(b"", &q("propagationPolicy=Sometimes"))
                .unwrap_err()
                .code,
            422
        );
        let both = br#"{"orphanDependents": true, "propagationPolicy": "Orphan"}"#;
        assert_eq!(delete_options(both, &q("")).unwrap_err().code, 422);
        assert_eq!(
            delete_options(br#"{"gracePeriodSeconds": "x"}"#, &q(""))
                .unwrap_err()
                .code,
            400
        );
        let pre = delete_options(br#"{"preconditions": {"uid": "u"}}"#, &q("")).unwrap();
        assert_eq!(pre.uid.as_deref(), Some("u"));
    }
}
