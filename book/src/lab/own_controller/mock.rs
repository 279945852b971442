//! Chapter 19's first test written the way kube-rs documents testing a reconciler: a client
//! over tower-test's mock service, a task that expects each request the reconcile sends and
//! answers it from a script, and the reconcile called directly (kube-rs's controller-rs
//! example, `src/fixtures.rs`, kube 5.0.0).
//!
//! The script answers what its author expects the server to answer. Whether it catches
//! [`super::Bug::NotFoundIsAnError`] depends on whether it answers the cleanup's DELETE with
//! the 404 that a namespace's deletion would leave: [`Script`] has both.

use std::{sync::Arc, time::Duration};

use http::{Method, Request, Response};
use kube::{Client, client::Body};
use serde_json::json;
use tower_test::mock::{Handle, SendResponse};

use super::checks::{Failed, SITE};
use super::operator::{Ctx, FINALIZER, Operator, Probe, reconcile};
use super::site::Site;

/// What the script answers to the cleanup's DELETE of the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Script {
    /// 200: the page was there (the path its author had in mind).
    PageThere,
    /// 404: the page was already gone, as after the namespace's deletion.
    PageGone,
}

/// A site being deleted that still holds the operator's finalizer, as the cache would hand
/// it to the reconcile.
pub fn deleting_site() -> Site {
    serde_json::from_value(json!({
        "apiVersion": "demo.controlloop.dev/v1", "kind": "Site",
        "metadata": { "name": SITE, "namespace": "default", "uid": "u1", "resourceVersion": "7",
                      "generation": 2, "finalizers": [FINALIZER],
                      "deletionTimestamp": "2026-12-07T00:00:00Z" },
        "spec": { "message": "v1" }
    }))
    .expect("a Site")
}

pub fn respond(status: u16, body: serde_json::Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .body(Body::from(serde_json::to_vec(&body).expect("JSON")))
        .expect("a response")
}

pub fn status(code: u16, reason: &str) -> serde_json::Value {
    let outcome = if code < 300 { "Success" } else { "Failure" };
    json!({ "kind": "Status", "apiVersion": "v1", "status": outcome, "code": code, "reason": reason })
}

/// The mock's side of one request: the next one the client sends, checked to be `method` on a
/// path ending in `suffix` (`what`, in the error), and the means to answer it.
pub async fn expect(
    handle: &mut Handle<Request<Body>, Response<Body>>,
    method: Method,
    suffix: &str,
    what: &str,
) -> Result<SendResponse<Response<Body>>, String> {
    let (request, send) = handle
        .next_request()
        .await
        .ok_or(format!("no request: {what}"))?;
    if request.method() != method || !request.uri().path().ends_with(suffix) {
        return Err(format!(
            "expected {what}, got {} {}",
            request.method(),
            request.uri()
        ));
    }
    Ok(send)
}

// book: ch19_mock
/// The cleanup deletes the page, then the finalizer is removed: each request expected and
/// answered by the script.
pub async fn cleanup_releases_the_finalizer(op: Operator, script: Script) -> Result<(), Failed> {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "default");
    let verifier = tokio::spawn(async move {
        let mut handle = handle;
        let send = expect(
            &mut handle,
            Method::DELETE,
            "/web-page",
            "the page's DELETE",
        )
        .await?;
        send.send_response(match script {
            Script::PageThere => respond(200, status(200, "")),
            Script::PageGone => respond(404, status(404, "NotFound")),
        });
        let send = expect(
            &mut handle,
            Method::PATCH,
            "/sites/web",
            "the finalizer's removal",
        )
        .await?;
        let mut released = serde_json::to_value(deleting_site()).expect("JSON");
        released["metadata"]["finalizers"] = json!([]);
        send.send_response(respond(200, released));
        Ok(())
    });
    let ctx = Arc::new(Ctx {
        client,
        operator: op,
        probe: Arc::new(Probe::default()),
    });
    let reconciled = reconcile(Arc::new(deleting_site()), ctx).await;
    let script_ran = tokio::time::timeout(Duration::from_secs(1), verifier).await;
    let script_ran =
        script_ran.map_err(|_| Failed("the script waits for a request never sent".into()))?;
    script_ran.expect("the script's task").map_err(Failed)?;
    reconciled
        .map(|_| ())
        .map_err(|e| Failed(format!("the reconcile failed: {e}")))
}
// book: end ch19_mock
