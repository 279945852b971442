//! Reads: list and watch requests, and the query parameters every verb takes.
//!
//! Follows the apiserver's `endpoints/handlers/get.go` (`ListResource`) and `watch.go`, and
//! apimachinery's `ListOptions` validation (`resourceVersionMatch`, `sendInitialEvents`).
//! Parameters are parsed into ranges no later arithmetic can overflow (handlers I3), and the
//! storage lock is held only to read storage (handlers I2). A long list is sent in chunks of
//! items, as kube-apiserver's streaming collection encoding (`StreamingCollectionEncodingToJSON`,
//! on by default since 1.33) sends it, so no response holds a second copy of the whole list.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, StatusCode, header};
use serde_json::Value;

use super::json_response;
use crate::apiserver::Cluster;
use crate::apiserver::errors::ApiError;
use crate::apiserver::kinds::KINDS;
use crate::apiserver::selector::Selector;
use crate::apiserver::storage::{Key, Stored, parse_revision};
use crate::apiserver::watch::{self, WatchRequest};

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

pub(super) fn list(
    cluster: &Cluster,
    kind: usize,
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
    // Keeps I2: with a selector, storage hands over the whole range and the matching runs
    // after the lock is released.
    let page = if selector.is_empty() {
        let st = cluster.shared.storage.lock();
        st.list(kind, ns, at, after.as_ref(), limit)?
    } else {
        let all = {
            let st = cluster.shared.storage.lock();
            st.list(kind, ns, at, after.as_ref(), None)?
        };
        all.select(limit, |o| selector.matches(&o.meta))
    };
    let k = &KINDS[kind];
    let mut meta = serde_json::json!({"resourceVersion": page.rv.to_string()});
    if let Some(key) = &page.continue_after {
        meta["continue"] = Value::String(encode_continue(page.rv, key));
    }
    let head = serde_json::json!({"kind": format!("{}List", k.kind), "apiVersion": k.api_version(), "metadata": meta});
    let head = serde_json::to_vec(&head).expect("json");
    Ok(json_response(StatusCode::OK, list_body(&head, page.items)))
}

/// Items per chunk of a list response.
const LIST_CHUNK: usize = 256;

/// A list's JSON, `head` with its items spliced in, sent a chunk of [`LIST_CHUNK`] items at a
/// time: the response holds the stored objects (shared, not copied) and one chunk of bytes,
/// never the whole serialised list, as kube-apiserver's streaming collection encoding does.
/// A list that fits one chunk is sent whole.
fn list_body(head: &[u8], items: Vec<Arc<Stored>>) -> Body {
    let mut open = BytesMut::with_capacity(head.len() + 10);
    open.put_slice(&head[..head.len() - 1]);
    open.put_slice(b",\"items\":[");
    let chunk = |items: &[Arc<Stored>], first: bool, buf: &mut BytesMut| {
        for (i, o) in items.iter().enumerate() {
            if i > 0 || !first {
                buf.put_u8(b',');
            }
            buf.put_slice(&o.json);
        }
    };
    if items.len() <= LIST_CHUNK {
        chunk(&items, true, &mut open);
        open.put_slice(b"]}");
        return Body::from(open.freeze());
    }
    let n = items.len();
    let chunks = (0..n).step_by(LIST_CHUNK).map(move |start| {
        let mut buf = BytesMut::new();
        chunk(
            &items[start..n.min(start + LIST_CHUNK)],
            start == 0,
            &mut buf,
        );
        buf.freeze()
    });
    let parts = std::iter::once(open.freeze())
        .chain(chunks)
        .chain(std::iter::once(Bytes::from_static(b"]}")));
    Body::from_stream(futures::stream::iter(parts.map(Ok::<_, Infallible>)))
}

pub(super) fn start_watch(
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
    use http_body_util::BodyExt;

    fn item(i: usize) -> Arc<Stored> {
        Stored::for_test(serde_json::json!({"i": i}), 1)
    }

    #[test]
    fn a_list_sent_in_chunks_is_the_same_json_as_a_list_sent_whole() {
        let head = br#"{"kind":"ConfigMapList","metadata":{}}"#;
        for n in [0, 1, LIST_CHUNK, LIST_CHUNK + 1, 3 * LIST_CHUNK + 7] {
            let body = list_body(head, (0..n).map(item).collect());
            let bytes = futures::executor::block_on(body.collect())
                .unwrap()
                .to_bytes();
            let v: Value = serde_json::from_slice(&bytes).unwrap();
            let items = v["items"].as_array().unwrap();
            assert_eq!(items.len(), n);
            assert!(items.iter().enumerate().all(|(i, o)| o["i"] == i), "{n}");
            assert_eq!(v["kind"], "ConfigMapList");
        }
    }
}
