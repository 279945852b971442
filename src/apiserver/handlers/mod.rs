//! HTTP handlers: routing, query parameters, bodies, and the verbs on each resource.
//!
//! Follows the apiserver's `endpoints/handlers` (`get.go`, `create.go`, `update.go`,
//! `patch.go`, `delete.go`, `watch.go`) and the REST paths `endpoints/installer.go` builds:
//!
//! ```text
//! /api/v1/configmaps                                   list, watch (all namespaces)
//! /api/v1/namespaces/{ns}/configmaps[/{name}]          list, watch, create, deletecollection | get, update, patch, delete
//! /apis/coordination.k8s.io/v1/namespaces/{ns}/leases[/{name}]
//! /apis/apiextensions.k8s.io/v1/customresourcedefinitions[/{name}[/status]]
//! /apis/{group}/{version}/[namespaces/{ns}/]{plural}[/{name}[/status]]   each CRD's resource
//! ```
//!
//! The resource a path names is looked up in the registry (`registry`) under the storage
//! lock, once; the handler then works with that version's kind.
//!
//! # Invariants
//! 1. Every handler parses and validates fully before it takes the storage lock, and storage
//!    checks again before it commits, so a rejected request changes nothing (storage I3).
//! 2. The storage lock is held only for storage calls: decoding, patching, selector matching
//!    and serialisation run outside it. A patch is a read-modify-write: it reads the object,
//!    patches a copy without the lock, and commits only if the object is still at the
//!    resourceVersion it read, and otherwise reads and patches again, without a bound on
//!    attempts but within the request deadline (as kube-apiserver's `GuaranteedUpdate` does).
//! 3. Every number taken from a request is parsed into a range that no later arithmetic can
//!    overflow: counts saturate, durations use checked instants.
//!
//! # Differences from upstream
//! - The path is percent-decoded as Go's `net/http` does before kube-apiserver splits it, but a
//!   malformed escape is answered with a 400 `Status` rather than Go's plain-text 400.
//! - A repeated query parameter takes its first value, as upstream's parameter codec does.

mod reads;
mod respond;

use respond::json_response;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode, header};
use http_body_util::BodyExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use serde_json::Value;

use super::controls::{Failure, RequestRecord};
use super::crd_controllers;
use super::errors::ApiError;
use super::field_validation::{self, Directive};
use super::kinds::{CRDS, Kind, NAMESPACES};
use super::patch::PatchType;
use super::registry::Registry;
use super::storage::{Preconditions, SWEEP_STEP, Storage, Stored, Sweep, UpdateMode};
use super::validation;
use super::{Cluster, discovery, protobuf, yaml};
use reads::{flag, list, signed, start_watch};

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
    /// The resource's id in the registry.
    kind: usize,
    /// The kind at the version the path names.
    def: Arc<Kind>,
    namespace: Option<String>,
    name: Option<String>,
    /// Which part of the object a write changes: the object, `/status`, or a namespace's
    /// `/finalize`.
    mode: UpdateMode,
    /// The path is the object's `/scale` subresource (`mode` is then `Main`).
    scale: bool,
}

fn route(reg: &Registry, segments: &[&str], path: &str) -> Result<Target, ApiError> {
    let (group, version, rest) = match segments {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(ApiError::no_such_path(path)),
    };
    let (namespace, plural, name, sub) = match rest {
        [plural] => (None, *plural, None, None),
        // A namespace itself and its subresources (`status`, `finalize`): no resource is
        // called so, which tells them from `/namespaces/{ns}/{resource}`.
        ["namespaces", name] => (None, "namespaces", Some(*name), None),
        ["namespaces", name, sub @ ("status" | "finalize")] => {
            (None, "namespaces", Some(*name), Some(*sub))
        }
        ["namespaces", ns, plural] => (Some(*ns), *plural, None, None),
        ["namespaces", ns, plural, name] => (Some(*ns), *plural, Some(*name), None),
        ["namespaces", ns, plural, name, sub] => (Some(*ns), *plural, Some(*name), Some(*sub)),
        [plural, name] => (None, *plural, Some(*name), None),
        [plural, name, sub] => (None, *plural, Some(*name), Some(*sub)),
        _ => return Err(ApiError::no_such_path(path)),
    };
    let (kind, def) = reg
        .find(group, version, plural)
        .ok_or_else(|| ApiError::no_such_path(path))?;
    // A namespaced object is addressed inside its namespace, a cluster-scoped one outside any;
    // a cluster-scoped kind's objects are stored under the empty namespace.
    let namespace = match (def.namespaced, namespace, name) {
        (true, None, Some(_)) | (false, Some(_), _) => return Err(ApiError::no_such_path(path)),
        (true, ns, _) => ns,
        (false, None, _) => Some(""),
    };
    let scale = sub == Some("scale") && def.scale.is_some();
    let mode = match sub {
        None => UpdateMode::Main,
        Some("scale") if scale => UpdateMode::Main,
        Some("status") if def.status_subresource => UpdateMode::Status,
        Some("finalize") if kind == NAMESPACES => UpdateMode::Finalize,
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
        def,
        namespace: namespace.map(str::to_string),
        name: name.map(str::to_string),
        mode,
        scale,
    })
}

/// `obj` as `k` serves it (a custom resource read through another version is converted).
fn object_response(code: StatusCode, k: &Kind, obj: &Stored) -> Response {
    json_response(code, k.present(&obj.json))
}

/// After a write to `kind`: the CRD controllers' work, if the write was to a CRD or to a
/// resource whose CRD is being deleted (`crd_controllers` I2).
fn after_write(st: &mut Storage, kind: usize, now: k8s_openapi::jiff::Timestamp) {
    let terminating = st.registry().get(kind).is_some_and(|k| k.terminating);
    if kind == CRDS || terminating {
        crd_controllers::sync(st, now);
    }
}

/// A create of a custom resource: refused while its CRD is being deleted (403, as upstream's
/// `forbidCreateAdmission`), and held until two seconds after its CRD was established, as
/// upstream's handler holds it.
async fn admit_create(k: &Kind, name: &str) -> Result<(), ApiError> {
    if k.terminating {
        return Err(ApiError::forbidden(
            &k.group,
            &k.plural,
            name,
            "create not allowed while custom resource definition is terminating".into(),
        ));
    }
    if let Some(at) = k.established_at {
        tokio::time::sleep_until(at + crd_controllers::JUST_CREATED).await;
    }
    Ok(())
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
    // No resource here has a CONNECT subresource (exec, attach, port-forward and proxy are
    // for pods, nodes and services), so CONNECT is 405 wherever it points, the root and a
    // bare `host:port` (which names no path) included.
    if req.method() == Method::CONNECT {
        return Err(ApiError::method_not_allowed(
            "CONNECT",
            req.uri().to_string().as_str(),
        ));
    }
    if segments.is_empty() {
        if req.method() != Method::GET {
            return Err(ApiError::method_not_allowed(req.method().as_str(), "/"));
        }
        let paths = [
            "/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version",
        ];
        return Ok(json_response(
            StatusCode::OK,
            serde_json::to_vec(&serde_json::json!({"paths": paths})).expect("json"),
        ));
    }
    // The health endpoints kube-apiserver serves, as plain text: this server is ready as soon
    // as it answers.
    if let ["readyz" | "livez" | "healthz"] = segments {
        if req.method() != Method::GET {
            return Err(ApiError::method_not_allowed(req.method().as_str(), &path));
        }
        let mut r = (StatusCode::OK, "ok").into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        return Ok(r);
    }
    // The registry is copied out (its kinds are shared, not copied) so that the document is
    // built without the storage lock (keeps I2).
    let address = cluster.shared.address.lock().clone();
    let registry = cluster.shared.storage.lock().registry().clone();
    let doc = discovery::document(&registry, segments, &address);
    if let Some(doc) = doc {
        if req.method() != Method::GET {
            return Err(ApiError::method_not_allowed(req.method().as_str(), &path));
        }
        return Ok(json_response(
            StatusCode::OK,
            serde_json::to_vec(&doc).expect("json"),
        ));
    }
    let t = route(cluster.shared.storage.lock().registry(), segments, &path)?;
    let q = query_map(req.uri().query());
    let method = req.method().clone();
    // `dryRun` is a write's option (CreateOptions, UpdateOptions, PatchOptions, DeleteOptions);
    // reads ignore it, as upstream's parameter codec ignores parameters a verb does not take.
    let dry_run = match method {
        Method::POST => dry_run(req.uri().query(), "CreateOptions")?,
        Method::PUT => dry_run(req.uri().query(), "UpdateOptions")?,
        Method::PATCH => dry_run(req.uri().query(), "PatchOptions")?,
        Method::DELETE => dry_run(req.uri().query(), "DeleteOptions")?,
        _ => false,
    };
    // `fieldValidation`, validated with the rest of the write's options (422 on an unknown
    // directive); reads ignore it.
    let field_value = q.get("fieldValidation").map(String::as_str);
    let fields = match method {
        Method::POST => Directive::of(field_value, "CreateOptions")?,
        Method::PUT => Directive::of(field_value, "UpdateOptions")?,
        Method::PATCH => Directive::of(field_value, "PatchOptions")?,
        _ => Directive::Ignore,
    };
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
    let k: &Kind = &t.def;
    if matches!(method, Method::POST | Method::PUT)
        && !matches!(content_type.as_str(), "application/json" | YAML | PROTOBUF)
    {
        return Err(ApiError::unsupported_media_type_because(
            &content_type,
            "accepted body types: application/json, application/yaml, and for ConfigMaps application/vnd.kubernetes.protobuf",
        ));
    }
    let mode = t.mode;
    if t.scale {
        let (ns, name) = (t.namespace.as_deref(), t.name.as_deref());
        let (Some(ns), Some(name)) = (ns, name) else {
            return Err(ApiError::no_such_path(&path));
        };
        return scale(cluster, &t, ns, name, req, &content_type, dry_run).await;
    }
    // `namespaces/finalize` serves PUT only (its REST has no getter, so no GET or PATCH).
    if mode == UpdateMode::Finalize && method != Method::PUT {
        return Err(ApiError::method_not_allowed(method.as_str(), &path));
    }
    match (&method, t.namespace.as_deref(), t.name.as_deref()) {
        (&Method::GET, ns, None) => {
            if flag(&q, "watch")? {
                start_watch(cluster, t.kind, &t.def, ns, &q)
            } else {
                list(cluster, t.kind, &t.def, ns, &q).await
            }
        }
        (&Method::POST, Some(ns), None) => {
            let (body, duplicates) = read_object(cluster, req, k, fields).await?;
            let body = without_status(k, UpdateMode::Main, body);
            let (obj, warnings) = prepare_checked(k, ns, None, body, duplicates, fields)?;
            admit_create(k, obj["metadata"]["name"].as_str().unwrap_or_default()).await?;
            let now = cluster.now();
            let stored = cluster.write(|st| {
                if dry_run {
                    st.dry_run(|st| st.create(t.kind, obj, now, false))
                } else {
                    let stored = st.create(t.kind, obj, now, false)?;
                    after_write(st, t.kind, now);
                    Ok(stored)
                }
            })?;
            Ok(warned(
                object_response(StatusCode::CREATED, k, &stored),
                &warnings,
            ))
        }
        (&Method::GET, Some(ns), Some(name)) => {
            let obj = cluster.shared.storage.lock().get(t.kind, ns, name);
            obj.map(|o| object_response(StatusCode::OK, k, &o))
                .ok_or_else(|| ApiError::not_found(&k.group, &k.plural, name))
        }
        (&Method::PUT, Some(ns), Some(name)) => {
            let (body, duplicates) = read_object(cluster, req, k, fields).await?;
            let body = without_status(k, mode, body);
            let (obj, warnings) = prepare_checked(k, ns, Some(name), body, duplicates, fields)?;
            let now = cluster.now();
            let stored = cluster.write(|st| {
                if dry_run {
                    st.dry_run(|st| st.update(t.kind, obj, mode, now))
                } else {
                    let stored = st.update(t.kind, obj, mode, now)?;
                    after_write(st, t.kind, now);
                    Ok(stored)
                }
            })?;
            Ok(warned(
                object_response(StatusCode::OK, k, &stored),
                &warnings,
            ))
        }
        (&Method::PATCH, Some(ns), Some(name)) => {
            let patch_type = PatchType::from_content_type(&content_type, k)?;
            let patch = patch_type.parse(read_json(cluster, req).await?)?;
            let write = PatchWrite {
                mode,
                dry_run,
                fields,
            };
            let edit = |cur| patch.apply(cur, k, name);
            let (stored, warnings) = patch_object(cluster, &t, ns, name, &edit, write).await?;
            Ok(warned(
                object_response(StatusCode::OK, k, &stored),
                &warnings,
            ))
        }
        (&Method::DELETE, Some(ns), Some(name)) if mode == UpdateMode::Main => {
            let body = read_body(cluster, req).await?;
            let (pre, cascade, body_dry_run) = delete_options(&body, &q)?;
            let dry_run = dry_run || body_dry_run;
            let now = cluster.now();
            if t.kind == CRDS {
                // A CRD's delete marks it; the finalizer controller removes it once its
                // instances are gone. The answer is the marked CRD.
                let marked = cluster.write(|st| {
                    if dry_run {
                        st.dry_run(|st| crd_controllers::mark_deleted(st, name, &pre, now))
                    } else {
                        let marked = crd_controllers::mark_deleted(st, name, &pre, now)?;
                        after_write(st, t.kind, now);
                        Ok(marked)
                    }
                })?;
                return Ok(object_response(StatusCode::OK, k, &marked));
            }
            let stored = cluster.write(|st| {
                if dry_run {
                    st.dry_run(|st| st.delete(t.kind, ns, name, &pre, now))
                } else {
                    let stored = st.delete(t.kind, ns, name, &pre, now)?;
                    after_write(st, t.kind, now);
                    Ok(stored)
                }
            })?;
            if t.kind == NAMESPACES && !dry_run {
                sync_namespace(cluster, name, now).await;
            }
            // Upstream answers 200 whether the object is gone or only marked deleted, except
            // that a delete asking for cascading (`orphanDependents: false`) that did not
            // remove the object at once is 202 (`endpoints/handlers/delete.go`).
            let pending = stored.meta.deleting
                && cluster
                    .shared
                    .storage
                    .lock()
                    .get(t.kind, ns, name)
                    .is_some();
            let code = if pending && cascade {
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            };
            if pending || k.returns_deleted_object {
                return Ok(object_response(code, k, &stored));
            }
            // Gone at once: upstream's `finalizeDelete` answers a Status naming what went
            // (`details.kind` is the resource, as upstream sets it). From kube-apiserver 1.38
            // its metadata carries the deleted object's resourceVersion as storage returns it:
            // the delete's revision, or for a dry run the object's own.
            let uid = serde_json::from_slice::<Value>(&stored.json)
                .ok()
                .and_then(|o| o["metadata"]["uid"].as_str().map(str::to_owned));
            let mut details = serde_json::json!({"name": name, "kind": k.plural, "uid": uid});
            if !k.group.is_empty() {
                details["group"] = k.group.clone().into();
            }
            let mut metadata = serde_json::json!({});
            if cluster.shared.options.kube_apiserver_minor >= 38 {
                metadata["resourceVersion"] = stored.rv.to_string().into();
            }
            let status = serde_json::json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": metadata,
                "status": "Success",
                "details": details,
            });
            Ok(json_response(code, status.to_string()))
        }
        // `deletecollection`, on a namespaced kind inside one namespace (upstream serves it
        // nowhere else: 405 there).
        (&Method::DELETE, Some(ns), None) if k.namespaced => {
            let body = read_body(cluster, req).await?;
            let (pre, _, body_dry_run) = delete_options(&body, &q)?;
            delete_collection(cluster, &t, ns, &q, &pre, dry_run || body_dry_run).await
        }
        _ => Err(ApiError::method_not_allowed(method.as_str(), &path)),
    }
}

/// The namespace controller's sync of a namespace being deleted, run before the delete is
/// answered (so a client finds the namespace's end done, as the module docs say): in steps of
/// [`SWEEP_STEP`] objects, each under the storage lock once, yielding between them so other
/// requests and watchers run. It runs in a task of its own: a client that goes away mid-way
/// does not leave the namespace half swept.
async fn sync_namespace(cluster: &Cluster, name: &str, now: k8s_openapi::jiff::Timestamp) {
    let cluster = cluster.clone();
    let name = name.to_owned();
    let task = tokio::spawn(async move {
        let mut sweep = Sweep::default();
        while cluster
            .write(|st| Ok(st.sync_namespace_step(&name, now, &mut sweep, SWEEP_STEP)))
            .unwrap_or(false)
        {
            tokio::task::yield_now().await;
        }
    });
    let _ = task.await;
}

/// `deletecollection` (`endpoints/handlers/delete.go`, the registry's `DeleteCollection`):
/// the objects the list options select are listed as a list with the same query would answer
/// them, then deleted one by one, each its own write with its own DELETED event (or, for one
/// with finalizers, its mark); one already gone is skipped. The answer is the list as it was
/// read. With `limit`, only that page is deleted, and the answer carries its continue token.
///
/// The listed page is held in memory whole, as upstream holds it: at most what storage holds
/// (storage I5).
async fn delete_collection(
    cluster: &Cluster,
    t: &Target,
    ns: &str,
    q: &HashMap<String, String>,
    pre: &Preconditions,
    dry_run: bool,
) -> Result<Response, ApiError> {
    let kind = t.kind;
    let listed = list(cluster, kind, &t.def, Some(ns), q).await?;
    let body = listed
        .into_body()
        .collect()
        .await
        .map_err(|e| ApiError::timeout(format!("the objects to delete could not be listed: {e}")))?
        .to_bytes();
    let page: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::internal_error(format!("the list to delete is not JSON: {e}")))?;
    let now = cluster.now();
    for item in page["items"].as_array().into_iter().flatten() {
        let Some(name) = item["metadata"]["name"].as_str() else {
            continue;
        };
        let done = cluster.write(|st| {
            if dry_run {
                st.dry_run(|st| st.delete(kind, ns, name, pre, now))
            } else {
                let stored = st.delete(kind, ns, name, pre, now)?;
                after_write(st, kind, now);
                Ok(stored)
            }
        });
        match done {
            Ok(_) => {}
            Err(e) if e.code == 404 => {} // deleted meanwhile: upstream skips it too
            Err(e) => return Err(e),
        }
    }
    Ok(json_response(StatusCode::OK, body))
}

/// The first pause after a patch found the object changed under it; it doubles with every
/// further attempt, up to [`PATCH_BACKOFF_MAX`].
const PATCH_BACKOFF: Duration = Duration::from_millis(1);

/// The longest pause between two attempts of a patch.
const PATCH_BACKOFF_MAX: Duration = Duration::from_millis(100);

/// Applies `patch` to the object without holding the storage lock, and commits it only if
/// the object is still the one it read (keeps I2; patch I3).
///
/// As kube-apiserver's `GuaranteedUpdate`, a patch that carries no resourceVersion
/// precondition is re-applied to the new object for as long as the object keeps changing
/// under it: there is no bound on attempts, only the request deadline (`request_timeout`,
/// then 504). Attempts after the first wait a little, doubling each time, so that writers
/// racing for one object spread out. A patch that sets `metadata.resourceVersion` is a
/// precondition: storage answers 409 once the object has moved past it.
async fn patch_object(
    cluster: &Cluster,
    t: &Target,
    ns: &str,
    name: &str,
    edit: &(dyn Fn(Value) -> Result<Value, ApiError> + Sync),
    write: PatchWrite,
) -> Result<(Arc<Stored>, Vec<String>), ApiError> {
    let PatchWrite {
        mode,
        dry_run,
        fields,
    } = write;
    let k: &Kind = &t.def;
    let deadline = tokio::time::Instant::now().checked_add(cluster.shared.options.request_timeout);
    let mut pause = PATCH_BACKOFF;
    loop {
        let read = cluster.shared.storage.lock().get(t.kind, ns, name);
        let Some(cur) = read else {
            return Err(ApiError::not_found(&k.group, &k.plural, name));
        };
        let patched = edit(k.present_value(cur.value()))?;
        let patched = without_status(k, mode, patched);
        let (obj, warnings) = if fields == Directive::Ignore {
            (k.prepare(ns, Some(name), patched)?, Vec::new())
        } else {
            let obj = k.prepare(ns, Some(name), patched.clone())?;
            let unknown = field_validation::unknown_fields(&patched, &obj, DROPPED);
            (obj, fields.on_patch(unknown)?)
        };
        let at = cluster.now();
        let done = cluster.write(|st| {
            if st.get(t.kind, ns, name).is_none_or(|now| now.rv != cur.rv) {
                return Ok(None); // changed between the read and the commit: read again
            }
            if dry_run {
                st.dry_run(|st| st.update(t.kind, obj, mode, at)).map(Some)
            } else {
                let stored = st.update(t.kind, obj, mode, at)?;
                after_write(st, t.kind, at);
                Ok(Some(stored))
            }
        })?;
        if let Some(stored) = done {
            return Ok((stored, warnings));
        }
        if deadline.is_some_and(|d| tokio::time::Instant::now() + pause >= d) {
            return Err(ApiError::timeout(format!(
                "the patch could not be applied within {:?}: the object kept changing",
                cluster.shared.options.request_timeout
            )));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(PATCH_BACKOFF_MAX);
    }
}

/// The `/scale` subresource of a custom resource whose CRD declares one (`scale` I1 to I3):
/// `GET` the object's `Scale`, `PUT` one, or `PATCH` it (merge, JSON or strategic merge patch,
/// which a `Scale` serves as a built-in type); a write changes the object's spec replicas
/// field through the object's own update and answers with the new `Scale`.
async fn scale(
    cluster: &Cluster,
    t: &Target,
    ns: &str,
    name: &str,
    req: Request,
    content_type: &str,
    dry_run: bool,
) -> Result<Response, ApiError> {
    let k: &Kind = &t.def;
    let paths = k.scale.clone().expect("routed only for kinds with scale");
    let scale_of = |obj: &Value| {
        paths
            .scale_of(obj)
            .map_err(|e| ApiError::internal_cause(&e))
    };
    let method = req.method().clone();
    let new_scale: Box<dyn Fn(Value) -> Result<Value, ApiError> + Send + Sync> = match method {
        Method::GET => {
            let read = cluster.shared.storage.lock().get(t.kind, ns, name);
            let cur = read.ok_or_else(|| ApiError::not_found(&k.group, &k.plural, name))?;
            let (scale, found) = scale_of(&k.present_value(cur.value()))?;
            if !found {
                return Err(ApiError::internal_cause(&format!(
                    "the spec replicas field {:?} does not exist",
                    paths.spec_replicas
                )));
            }
            return Ok(json_response(StatusCode::OK, scale.to_string()));
        }
        Method::PUT => {
            let body = read_json(cluster, req).await?;
            let given = body["metadata"]["name"].as_str().unwrap_or(name);
            if given != name {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({given}) does not match the name in the path ({name})"
                )));
            }
            if !body.is_object() || body.get("kind").is_some_and(|v| v != "Scale") {
                return Err(ApiError::bad_request(
                    "the body of a scale subresource write must be an autoscaling/v1 Scale",
                ));
            }
            Box::new(move |_| Ok(body.clone()))
        }
        Method::PATCH => {
            let patch_type = match content_type {
                // A Scale is a built-in type without lists: a strategic merge patch merges as
                // a merge patch does.
                "application/strategic-merge-patch+json" => PatchType::Merge,
                other => PatchType::from_content_type(other, k)?,
            };
            let patch = patch_type.parse(read_json(cluster, req).await?)?;
            let (kind, name) = (t.def.clone(), name.to_string());
            Box::new(move |base| patch.apply(base, &kind, &name))
        }
        _ => {
            return Err(ApiError::method_not_allowed(
                method.as_str(),
                req.uri().path(),
            ));
        }
    };
    let edit = |mut obj: Value| {
        let base = paths
            .patch_base(&obj)
            .map_err(|e| ApiError::internal_cause(&e))?;
        let scale = new_scale(base)?;
        let causes = paths.scale_causes(&scale);
        if !causes.is_empty() {
            let causes: Vec<(&str, &str, String)> = causes
                .iter()
                .map(|(f, r, m)| (f.as_str(), *r, m.clone()))
                .collect();
            return Err(ApiError::invalid_causes(
                "autoscaling",
                "Scale",
                name,
                &causes,
            ));
        }
        paths
            .apply(&mut obj, &scale)
            .map_err(ApiError::bad_request)?;
        Ok(obj)
    };
    let write = PatchWrite {
        mode: UpdateMode::Main,
        dry_run,
        fields: Directive::Ignore,
    };
    let (stored, _) = patch_object(cluster, t, ns, name, &edit, write).await?;
    let (scale, _) = scale_of(&k.present_value(stored.value()))?;
    Ok(json_response(StatusCode::OK, scale.to_string()))
}

/// How a patch is written: to the object or its status, for real or as a dry run, and what
/// it does with unknown fields.
struct PatchWrite {
    mode: UpdateMode,
    dry_run: bool,
    fields: Directive,
}

/// What `Kind::prepare` removes from a body on purpose: not unknown fields.
const DROPPED: &[&str] = &[
    "metadata.managedFields",
    "metadata.selfLink",
    "metadata.namespace",
];

/// A custom resource's body on its main endpoint, when its CRD installs the status
/// subresource: `status` is dropped before validation, since the write keeps the stored
/// status whatever the body says (the custom resource strategy's `PrepareForUpdate` runs
/// before its `Validate` upstream, so a body's status is never validated there).
fn without_status(k: &Kind, mode: UpdateMode, mut body: Value) -> Value {
    if mode == UpdateMode::Main
        && k.status_subresource
        && k.crd.is_some()
        && let Some(m) = body.as_object_mut()
    {
        m.remove("status");
    }
    body
}

/// `Kind::prepare`, and the unknown and `duplicates` fields of a create's or an update's
/// body dealt with as `fields` says: the object and the warnings to send, or a strict
/// refusal (400).
fn prepare_checked(
    k: &Kind,
    ns: &str,
    name: Option<&str>,
    body: Value,
    duplicates: Vec<String>,
    fields: Directive,
) -> Result<(Value, Vec<String>), ApiError> {
    if fields == Directive::Ignore {
        return Ok((k.prepare(ns, name, body)?, Vec::new()));
    }
    let obj = k.prepare(ns, name, body.clone())?;
    let mut problems = field_validation::unknown_fields(&body, &obj, DROPPED);
    problems.extend(duplicates);
    let warnings = fields.on_write(&k.kind, &k.version, problems)?;
    Ok((obj, warnings))
}

/// `resp` with one `Warning` header per warning.
fn warned(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        if let Some(v) = field_validation::warning(w) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

/// The values `dryRun` may take (`ValidateDryRun`): only `All`.
const DRY_RUN_ALL: &str = "All";

/// Whether the query asks for a dry run: every `dryRun` value must be `All` (422 otherwise, on
/// the verb's options kind, as `ValidateDryRun` answers). A repeated parameter counts every
/// value.
fn dry_run(query: Option<&str>, options: &str) -> Result<bool, ApiError> {
    let mut asked = false;
    for (k, v) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        if k != "dryRun" {
            continue;
        }
        check_dry_run(&v, options)?;
        asked = true;
    }
    Ok(asked)
}

fn check_dry_run(value: &str, options: &str) -> Result<(), ApiError> {
    if value == DRY_RUN_ALL {
        return Ok(());
    }
    Err(ApiError::invalid_with_reason(
        "meta.k8s.io",
        options,
        "",
        "FieldValueNotSupported",
        &[(
            "dryRun",
            format!("Unsupported value: {value:?}: supported values: {DRY_RUN_ALL:?}"),
        )],
    ))
}

/// `DeleteOptions` from the body, or else from the query, validated as
/// `ValidateDeleteOptions` does (422): the preconditions, whether the delete asks for
/// cascading (`orphanDependents: false`), and whether the body asks for a dry run. A policy
/// only a garbage collector could honour is refused ([`refuse_without_collector`]); nothing
/// else has an effect: the served kinds have no graceful deletion.
fn delete_options(
    body: &[u8],
    q: &HashMap<String, String>,
) -> Result<(Preconditions, bool, bool), ApiError> {
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
        let raw: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("malformed DeleteOptions: {e}")))?;
        // Upstream decodes the body with the meta group's codecs, which know no other kind:
        // a body of another kind (a whole object, say) is a 400, never read as options.
        match raw.get("kind") {
            None | Some(Value::Null) => {}
            Some(Value::String(k)) if k.is_empty() || k == "DeleteOptions" => {}
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "the body of a delete must be DeleteOptions, not kind {other}"
                )));
            }
        }
        serde_json::from_value(raw)
            .map_err(|e| ApiError::bad_request(format!("malformed DeleteOptions: {e}")))?
    };
    let dry_run = opts.dry_run.clone().unwrap_or_default();
    for v in &dry_run {
        check_dry_run(v, "DeleteOptions")?;
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
    refuse_without_collector(&opts)?;
    let p = opts.preconditions.unwrap_or_default();
    let pre = Preconditions {
        uid: p.uid,
        resource_version: p.resource_version,
    };
    Ok((
        pre,
        opts.orphan_dependents == Some(false),
        !dry_run.is_empty(),
    ))
}

/// The one propagation policy this server keeps: `Background`, the default, where the owner
/// goes at once and its dependents are left to the garbage collector (here: none, so they
/// stay, a named difference in the module's docs).
const PROPAGATION_KEPT: &str = "Background";

/// Refuses what only a garbage collector could do (422, FieldValueNotSupported, as upstream
/// answers a value it does not support): `Foreground` (the owner waits, marked, until its
/// blocking dependents are gone) and `Orphan` (the collector strips the dependents'
/// ownerReferences first), and the deprecated `orphanDependents: true`. Done without a
/// collector, either would be a plain delete: something other than kube-apiserver does.
fn refuse_without_collector(opts: &DeleteOptions) -> Result<(), ApiError> {
    let asked = match (&opts.propagation_policy, opts.orphan_dependents) {
        (Some(p), _) if p != PROPAGATION_KEPT => ("propagationPolicy", format!("{p:?}")),
        (_, Some(true)) => ("orphanDependents", "true".to_owned()),
        _ => return Ok(()),
    };
    let (field, value) = asked;
    Err(ApiError::invalid_with_reason(
        "meta.k8s.io",
        "DeleteOptions",
        "",
        "FieldValueNotSupported",
        &[(
            field,
            format!(
                "Unsupported value: {value}: supported values: {PROPAGATION_KEPT:?} (this \
                 embedded server has no garbage collector; run a real control plane for \
                 foreground and orphan deletion)"
            ),
        )],
    ))
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
    parse_json(&read_body(cluster, req).await?)
}

fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
}

/// The protobuf content type client-go uses for built-in kinds.
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The YAML content type upstream's serializer accepts for request bodies.
const YAML: &str = "application/yaml";

/// An object body, in JSON, YAML (see `yaml`) or (for ConfigMaps, as kubectl sends them)
/// protobuf, and the fields a JSON body sends twice (unless `fields` ignores them).
async fn read_object(
    cluster: &Cluster,
    req: Request,
    k: &Kind,
    fields: Directive,
) -> Result<(Value, Vec<String>), ApiError> {
    let ct = req
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.as_bytes().to_vec())
        .unwrap_or_default();
    let body = read_body(cluster, req).await?;
    if ct.starts_with(PROTOBUF.as_bytes()) {
        Ok((protobuf::decode(&k.kind, &body)?, Vec::new()))
    } else if ct.starts_with(YAML.as_bytes()) {
        let value = yaml::decode(&body, cluster.shared.options.max_body_bytes)?;
        Ok((value, Vec::new()))
    } else {
        let value = parse_json(&body)?;
        let duplicates = if fields == Directive::Ignore {
            Vec::new()
        } else {
            field_validation::duplicate_fields(&body)
        };
        Ok((value, duplicates))
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
        let reg = Registry::builtin();
        let e = route(
            &reg,
            &["api", "v1", "namespaces", "d", "configmaps", ".."],
            "/p",
        )
        .err()
        .unwrap();
        assert_eq!(e.code, 400);
        let e = route(
            &reg,
            &["api", "v1", "namespaces", "d", "configmaps", "a%b"],
            "/p",
        )
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
        // No garbage collector: only Background is kept, the rest refused and named.
        assert!(delete_options(b"", &q("propagationPolicy=Background")).is_ok());
        for (body, query) in [
            (&b""[..], "propagationPolicy=Foreground"),
            (&br#"{"propagationPolicy": "Orphan"}"#[..], ""),
            (&br#"{"orphanDependents": true}"#[..], ""),
        ] {
            let e = delete_options(body, &q(query)).unwrap_err();
            assert_eq!((e.code, e.reason), (422, "Invalid"), "{query}");
            assert!(e.message.contains("no garbage collector"), "{}", e.message);
        }
        assert_eq!(
            delete_options(br#"{"gracePeriodSeconds": "x"}"#, &q(""))
                .unwrap_err()
                .code,
            400
        );
        let (pre, cascade, dry) =
            delete_options(br#"{"preconditions": {"uid": "u"}}"#, &q("")).unwrap();
        assert_eq!(
            (pre.uid.as_deref(), cascade, dry),
            (Some("u"), false, false)
        );
        let (_, cascade, dry) =
            delete_options(br#"{"orphanDependents": false, "dryRun": ["All"]}"#, &q("")).unwrap();
        assert!(cascade && dry);
        let e = delete_options(br#"{"dryRun": ["Some"]}"#, &q("")).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            dry_run(Some("dryRun=All&dryRun=x"), "CreateOptions")
                .unwrap_err()
                .code,
            422
        );
        assert!(dry_run(Some("dryRun=All"), "CreateOptions").unwrap());
        assert!(!dry_run(Some("pretty=1"), "CreateOptions").unwrap());
    }
}
