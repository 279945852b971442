//! Reads: list and watch requests, and the query parameters every verb takes.
//!
//! Follows the apiserver's `endpoints/handlers/get.go` (`ListResource`) and `watch.go`, and
//! apimachinery's `ListOptions` validation (`resourceVersionMatch`, `sendInitialEvents`).
//! Parameters are parsed into ranges no later arithmetic can overflow (handlers I3), and the
//! storage lock is held only to read storage (handlers I2). A list reads storage a batch at a
//! time at one revision, seeking to the key after the last one read, and a long list streams,
//! as kube-apiserver's streaming collection encoding (`StreamingCollectionEncodingToJSON`, on
//! by default since 1.33) sends it: no response holds a copy of the list or of a large object
//! (module I4). With a `limit`, the page's end is found first (nothing kept but its key), so
//! that the continue token leads the response as upstream writes it.
//!
//! # Differences from upstream
//! - A streaming list that passes the request deadline, or whose revision is compacted while
//!   it streams (more than `history` writes during one list), is cut off: the status line is
//!   already sent, so the connection ends without the closing chunk. Before the first byte,
//!   either is a `Status` (504, 410).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use http::{HeaderValue, StatusCode, header};
use serde_json::Value;
use tokio::time::Instant;

use super::respond::json_response;
use crate::apiserver::errors::ApiError;
use crate::apiserver::frames::Chunker;
use crate::apiserver::kinds::Kind;
use crate::apiserver::selector::{Selector, Turns};
use crate::apiserver::storage::{Batch, Key, Stored, parse_revision};
use crate::apiserver::watch::{self, WatchRequest};
use crate::apiserver::{Cluster, Shared};

/// Default watch timeout when the client sends none (upstream picks 30–60 min at random).
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

pub(super) fn flag(q: &HashMap<String, String>, name: &str) -> Result<bool, ApiError> {
    match q.get(name).map(String::as_str) {
        None | Some("false") | Some("0") => Ok(false),
        Some("true") | Some("1") | Some("") => Ok(true),
        Some(v) => Err(ApiError::bad_request(format!(
            "{name}={v:?} is not a boolean"
        ))),
    }
}

/// A non-negative integer parameter (keeps I3: any u64 is accepted, and every use of it
/// saturates or is checked).
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

/// An `int64` parameter, as upstream's parameter codec reads `gracePeriodSeconds`.
pub(super) fn signed(q: &HashMap<String, String>, name: &str) -> Result<Option<i64>, ApiError> {
    q.get(name)
        .filter(|v| !v.is_empty())
        .map(|v| {
            v.parse::<i64>()
                .map_err(|_| ApiError::bad_request(format!("{name}={v:?} is not a 64-bit integer")))
        })
        .transpose()
}

fn selector(q: &HashMap<String, String>) -> Result<Selector, ApiError> {
    Selector::parse(
        q.get("labelSelector").map(String::as_str),
        q.get("fieldSelector").map(String::as_str),
    )
}

fn resource_version(q: &HashMap<String, String>) -> Result<Option<u64>, ApiError> {
    match q.get("resourceVersion").map(String::as_str).unwrap_or("") {
        "" => Ok(None),
        r => parse_revision(r).map(Some).ok_or_else(|| {
            ApiError::bad_request(format!(
                "resourceVersion {r:?} is not a valid resource version (decimal digits only)"
            ))
        }),
    }
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

pub(super) async fn list(
    cluster: &Cluster,
    kind: usize,
    def: &Arc<Kind>,
    ns: Option<&str>,
    q: &HashMap<String, String>,
) -> Result<Response, ApiError> {
    let selector = selector(q)?;
    // Keeps I3: a limit beyond the address space is "no limit".
    let limit = number(q, "limit")?.map(|l| usize::try_from(l).unwrap_or(usize::MAX));
    let rv_num = resource_version(q)?;
    let rv_match = q
        .get("resourceVersionMatch")
        .map(String::as_str)
        .unwrap_or("");
    if q.contains_key("sendInitialEvents") {
        return Err(list_options_invalid(
            "sendInitialEvents is forbidden for list",
        ));
    }
    if !rv_match.is_empty() && rv_num.is_none() {
        return Err(list_options_invalid(
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ));
    }
    let (at, after) = match q.get("continue").filter(|c| !c.is_empty()) {
        Some(token) => {
            if rv_num.is_some() {
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
    // The revision the whole list reads at: the one asked for, the continue token's, or the
    // head now. Compacted (410) and future (504) revisions are refused before any byte is sent.
    let rv = {
        let st = cluster.shared.storage.lock();
        let rv = at.unwrap_or(st.head());
        st.check_readable(rv)?;
        rv
    };
    let deadline = Instant::now().checked_add(cluster.shared.options.request_timeout);
    let cursor = Cursor {
        shared: Arc::clone(&cluster.shared),
        kind,
        def: Arc::clone(def),
        ns: ns.map(str::to_string),
        rv,
        selector,
        deadline,
    };
    // With a limit, the page's last item is found first (keys only, nothing kept), so that
    // the continue token can lead the response as upstream writes it.
    let (end, token) = match limit.filter(|l| *l > 0) {
        Some(limit) => match cursor.nth_match(after.clone(), limit).await? {
            Some(last) => {
                let more = cursor.any_match_after(&last).await?;
                let token = more.then(|| encode_continue(rv, &last));
                (more.then_some(last), token)
            }
            None => (None, None),
        },
        None => (None, None),
    };
    let k = def;
    let mut meta = serde_json::json!({"resourceVersion": rv.to_string()});
    if let Some(token) = token {
        meta["continue"] = Value::String(token);
    } else if k.crd.is_some() {
        // An unstructured list (a custom resource's) writes its empty continue token.
        meta["continue"] = Value::String(String::new());
    }
    let head =
        serde_json::json!({"kind": k.list_kind, "apiVersion": k.api_version(), "metadata": meta});
    let head = serde_json::to_vec(&head).expect("json");
    Ok(json_response(
        StatusCode::OK,
        list_body(cursor, &head, after, end).await?,
    ))
}

/// Keys read from storage per lock hold.
const SCAN_ITEMS: usize = 256;

/// Object bytes read from storage per lock hold (the batch is references, not copies; this
/// bounds how much of replaced objects a batch can keep alive).
const SCAN_BYTES: usize = 1024 * 1024;

/// A list this small (in items and bytes) is sent as one body, as it was read.
const WHOLE_ITEMS: usize = 256;

/// See [`WHOLE_ITEMS`].
const WHOLE_BYTES: usize = crate::apiserver::frames::CHUNK_BYTES;

/// Where a list reads: one kind and namespace at one revision, through a selector. Reads
/// storage one batch at a time, yields to the runtime after every turn's worth of selector
/// matching (`Turns`), and gives up at the request deadline.
struct Cursor {
    shared: Arc<Shared>,
    kind: usize,
    /// The kind at the version the list was asked for: each object is presented as it.
    def: Arc<Kind>,
    ns: Option<String>,
    rv: u64,
    selector: Selector,
    deadline: Option<Instant>,
}

impl Cursor {
    /// The next batch after `after`.
    fn batch(&self, after: Option<&Key>) -> Result<Batch, ApiError> {
        self.shared.storage.lock().scan(
            self.kind,
            self.ns.as_deref(),
            self.rv,
            after,
            SCAN_ITEMS,
            SCAN_BYTES,
        )
    }

    /// Whether the selector keeps `o`; a match charges `turns`, which yields to other tasks
    /// once a turn's worth of matching is done.
    async fn keeps(&self, o: &Stored, turns: &mut Turns) -> bool {
        if self.selector.is_empty() {
            return true;
        }
        let keep = self.selector.matches(&o.meta);
        turns.matched(&self.selector).await;
        keep
    }

    /// Between two batches: 504 past the deadline.
    fn pause(&self) -> Result<(), ApiError> {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(ApiError::timeout(format!(
                "the list was not completed within {:?}",
                self.shared.options.request_timeout
            )));
        }
        Ok(())
    }

    /// The key of the `n`-th object (from 1) after `after` that the selector keeps, if there
    /// are that many.
    async fn nth_match(&self, mut after: Option<Key>, n: usize) -> Result<Option<Key>, ApiError> {
        let mut seen = 0usize;
        let mut turns = Turns::default();
        loop {
            let batch = self.batch(after.as_ref())?;
            for o in &batch.items {
                if self.keeps(o, &mut turns).await {
                    seen += 1;
                    if seen == n {
                        return Ok(Some(o.key()));
                    }
                }
            }
            if !batch.more {
                return Ok(None);
            }
            after = batch.items.last().map(|o| o.key());
            self.pause()?;
        }
    }

    /// Whether any object after `after` is kept.
    async fn any_match_after(&self, after: &Key) -> Result<bool, ApiError> {
        Ok(self.nth_match(Some(after.clone()), 1).await?.is_some())
    }
}

/// A list's JSON, `head` with its items spliced in, for the objects after `after` up to and
/// including `end` (to the end if `None`). A list of at most [`WHOLE_ITEMS`] items and
/// [`WHOLE_BYTES`] is sent as one body. A longer one streams, a batch at a time from
/// storage, framed by a [`Chunker`]: the response holds one batch of references to stored
/// objects and at most one chunk of copied bytes, never a copy of a large object or of the
/// whole list, as kube-apiserver's streaming collection encoding (on by default since 1.33)
/// sends lists. A streaming list that passes the request deadline, or whose revision is
/// compacted under it, is cut off (the connection ends without the closing chunk).
async fn list_body(
    cursor: Cursor,
    head: &[u8],
    after: Option<Key>,
    end: Option<Key>,
) -> Result<Body, ApiError> {
    let mut out = Chunker::default();
    out.copy(&head[..head.len() - 1]);
    out.copy(b",\"items\":[");
    let mut first = true;
    let mut count = 0usize;
    let mut after = after;
    // Read the first batches here: a small list is sent whole, and an early error is still a
    // `Status`.
    let mut pending: Vec<Arc<Stored>> = Vec::new();
    let mut done = false;
    let mut bytes = 0usize;
    let mut turns = Turns::default();
    while !done && pending.len() <= WHOLE_ITEMS && bytes <= WHOLE_BYTES {
        let batch = cursor.batch(after.as_ref())?;
        after = batch.items.last().map(|o| o.key());
        done = !batch.more;
        for o in batch.items {
            let past_end = end.as_ref().is_some_and(|e| o.key() > *e);
            if past_end {
                done = true;
                break;
            }
            if cursor.keeps(&o, &mut turns).await {
                bytes = bytes.saturating_add(o.json.len());
                pending.push(o);
            }
        }
        if !done {
            cursor.pause()?;
        }
    }
    for o in pending.drain(..) {
        if !first {
            out.copy(b",");
        }
        first = false;
        out.share(&cursor.def.present(&o.json));
        count += 1;
    }
    if done && count <= WHOLE_ITEMS && bytes <= WHOLE_BYTES {
        out.copy(b"]}");
        return Ok(Body::from(out.into_bytes()));
    }
    let stream = async_stream::stream! {
        for chunk in out.take() {
            yield Ok::<_, std::io::Error>(chunk);
        }
        let mut out = out;
        let mut first = first;
        let mut after = after;
        let mut done = done;
        while !done {
            if let Err(e) = cursor.pause() {
                yield Err(cut_off(&e));
                return;
            }
            let batch = match cursor.batch(after.as_ref()) {
                Ok(b) => b,
                Err(e) => {
                    yield Err(cut_off(&e));
                    return;
                }
            };
            after = batch.items.last().map(|o| o.key());
            done = !batch.more;
            for o in &batch.items {
                if end.as_ref().is_some_and(|e| o.key() > *e) {
                    done = true;
                    break;
                }
                if cursor.keeps(o, &mut turns).await {
                    if !first {
                        out.copy(b",");
                    }
                    first = false;
                    out.share(&cursor.def.present(&o.json));
                    // A completed chunk goes out at once: one chunk of copies at a time.
                    for chunk in out.take() {
                        yield Ok(chunk);
                    }
                }
            }
            drop(batch);
            out.flush();
            for chunk in out.take() {
                yield Ok(chunk);
            }
        }
        out.copy(b"]}");
        out.flush();
        for chunk in out.take() {
            yield Ok(chunk);
        }
    };
    Ok(Body::from_stream(stream))
}

/// The error that ends a list already being sent: the status line is out, so the only way to
/// tell the client is to end the body early.
fn cut_off(e: &ApiError) -> std::io::Error {
    tracing::warn!(target: "controlloop::apiserver", "a list was cut off: {e}");
    std::io::Error::other(e.to_string())
}

pub(super) fn start_watch(
    cluster: &Cluster,
    kind: usize,
    def: &Arc<Kind>,
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
    // "" and "0" both mean "start now, with the current state first".
    let rv_num = resource_version(q)?.filter(|r| *r != 0);
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
    // Keeps I3: any number of seconds is accepted; the watcher's deadline is a checked instant.
    let timeout = number(q, "timeoutSeconds")?
        .filter(|s| *s > 0) // 0 means "not set", as upstream
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_WATCH_TIMEOUT);
    let slot = watch::Slot::take(&cluster.shared)?;
    let req = WatchRequest {
        kind,
        def: Arc::clone(def),
        namespace: ns.map(str::to_string),
        selector,
        from,
        send_initial: send_initial == Some(true),
        bookmarks,
        timeout,
    };
    let body = Body::from_stream(watch::stream(Arc::clone(&cluster.shared), req, slot));
    let mut r = (StatusCode::OK, body).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::ServerOptions;
    use crate::apiserver::kinds::CONFIGMAPS;
    use http_body_util::BodyExt;

    fn cluster_with(n: usize, value_bytes: usize) -> Cluster {
        let cluster = Cluster::new(ServerOptions::default());
        cluster.shared.storage.lock().seed(
            crate::apiserver::kinds::NAMESPACES,
            serde_json::json!({"metadata": {"name": "d"}}),
        );
        for i in 0..n {
            let obj = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("c{i:05}"), "namespace": "d", "labels": {"i": (i % 3).to_string()}},
                "data": {"v": "x".repeat(value_bytes)}});
            let now = cluster.now();
            cluster
                .write(|st| st.create(CONFIGMAPS, obj, now, false))
                .unwrap();
        }
        cluster
    }

    async fn names(cluster: &Cluster, query: &str) -> (Vec<String>, Value) {
        let q: HashMap<String, String> = form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        let k = Arc::new(crate::apiserver::kinds::builtin(CONFIGMAPS));
        let resp = list(cluster, CONFIGMAPS, &k, Some("d"), &q).await.unwrap();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        let names = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        (names, v["metadata"].clone())
    }

    #[tokio::test]
    async fn a_streamed_list_is_the_same_json_as_a_list_sent_whole() {
        for (n, bytes) in [
            (0, 10),
            (1, 10),
            (WHOLE_ITEMS, 10),
            (WHOLE_ITEMS + 1, 10),
            (3 * SCAN_ITEMS + 7, 10),
            (40, 20_000),
        ] {
            let cluster = cluster_with(n, bytes);
            let (all, meta) = names(&cluster, "").await;
            assert_eq!(all.len(), n);
            assert!(all.windows(2).all(|w| w[0] < w[1]), "{n}: out of order");
            assert!(meta.get("continue").is_none());
            let (some, _) = names(&cluster, "labelSelector=i%3D1").await;
            assert_eq!(some.len(), n / 3 + usize::from(n % 3 > 1), "{n}");
        }
    }

    #[tokio::test]
    async fn pages_follow_each_other_and_their_token_leads_the_response() {
        let cluster = cluster_with(3 * SCAN_ITEMS + 7, 10);
        let mut token = String::new();
        let mut seen = Vec::new();
        loop {
            let q = if token.is_empty() {
                "limit=100&labelSelector=i!%3D2".to_string()
            } else {
                format!("limit=100&labelSelector=i!%3D2&continue={token}")
            };
            let (page, meta) = names(&cluster, &q).await;
            assert!(page.len() <= 100);
            seen.extend(page);
            match meta["continue"].as_str() {
                Some(t) => token = t.to_string(),
                None => break,
            }
        }
        let (all, _) = names(&cluster, "labelSelector=i!%3D2").await;
        assert_eq!(seen, all);
    }
}
