//! The write gate: a client whose writes pass only while an elector leads. Follows
//! kubernetes/client-go v0.38.0-beta.0 `tools/leaderelection/writegate.go` and the places
//! `leaderelection.go` opens and closes it; reached through
//! [`LeaderElector::write_gate`](super::LeaderElector::write_gate).
//!
//! ```text
//!  request ─ GET, HEAD, OPTIONS, TRACE ─────────────────────────► the inner service
//!          ─ any other method ─ gate closed ─► WriteGateClosed (the inner service is not called)
//!                             ─ gate open ───► the inner service, raced against the gate's
//!                                              closing: closed first ─► WriteGateClosed
//! ```
//!
//! # Invariants
//! 1. The gate is open from the moment the elector acquires the lease until its run ends: after
//!    the renew loop gave up or was stopped, and after the release if `release_on_cancel`,
//!    before the leading token is cancelled. It starts closed. Under `Recovery` it is open
//!    only while the elector leads: closed when a renewal has failed for the renew deadline
//!    or the lease is seen lost, and before any release; open again when the lease is
//!    recovered (`recovery.rs`).
//! 2. Opening an open gate and closing a closed one change nothing.
//! 3. A write whose response has not arrived when the gate closes is abandoned (its inner
//!    future dropped) and fails with [`LeaderElectionError::WriteGateClosed`]; a read is never
//!    refused or cancelled by the gate.
//!
//! # Differences from upstream
//! - Upstream's gate wraps an `http.RoundTripper` (`WriteGate()` returns a wrapper function for
//!   a rest config); this one wraps any tower `Service` of HTTP requests, the layer under a
//!   `kube::Client` (`kube::Client::new(elector.write_gate(service), namespace)`).
//! - Upstream ties a write's response body to the gate until the body is closed; here a write
//!   that has its response is done: the gate does not cut the body's reading short. kube reads
//!   a response's body whole before returning it.
//! - A caller that gives up a write drops its future, so the inner future is dropped with it
//!   and there is no error to report (upstream reports the caller's `context.Canceled`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use tower_service::Service;

/// A boxed error, as a `kube::Client`'s service may return.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The gate's state, shared by the elector and every service it gates: `Some` while open,
/// with a token cancelled when it closes (keeps I3).
#[derive(Debug, Clone, Default)]
pub(crate) struct Gate(Arc<Mutex<Option<CancellationToken>>>);

impl Gate {
    /// Lets writes through (keeps I2).
    pub(crate) fn open(&self) {
        let mut g = self.0.lock();
        if g.is_none() {
            *g = Some(CancellationToken::new());
        }
    }

    /// Refuses new writes and abandons those in flight (keeps I2, I3).
    pub(crate) fn close(&self) {
        if let Some(token) = self.0.lock().take() {
            token.cancel();
        }
    }

    /// `inner`, gated: a refused or abandoned write fails with `refused()` (the elector's
    /// `WriteGateClosed`).
    pub(crate) fn wrap<S>(&self, inner: S, refused: fn() -> BoxError) -> Gated<S> {
        Gated {
            gate: self.clone(),
            inner,
            refused,
        }
    }
}

/// RFC 9110's safe methods: the only ones a closed gate lets through.
fn is_safe(method: &http::Method) -> bool {
    matches!(
        *method,
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS | http::Method::TRACE
    )
}

/// A service whose writes pass only while its gate is open.
#[derive(Debug, Clone)]
pub(crate) struct Gated<S> {
    gate: Gate,
    inner: S,
    refused: fn() -> BoxError,
}

impl<S, B> Service<http::Request<B>> for Gated<S>
where
    S: Service<http::Request<B>>,
    S::Response: 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if is_safe(req.method()) {
            let read = self.inner.call(req);
            return Box::pin(async move { read.await.map_err(Into::into) });
        }
        let refused = self.refused;
        let Some(closing) = self.gate.0.lock().clone() else {
            drop(req); // refused: the inner service never sees it
            return Box::pin(async move { Err(refused()) });
        };
        let write = self.inner.call(req);
        Box::pin(async move {
            tokio::select! {
                biased;
                () = closing.cancelled() => Err(refused()),
                r = write => r.map_err(Into::into),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tower::{ServiceExt, service_fn};

    use super::*;

    /// Part of client-go v0.38.0-beta.0 `TestWriteGateMethods` (`writegate_test.go`) that an
    /// elector cannot repeat: opening an open gate and closing a closed one change nothing
    /// (keeps I2).
    #[tokio::test]
    async fn opening_and_closing_are_idempotent() {
        let gate = Gate::default();
        let ok = service_fn(|_: http::Request<()>| async { Ok::<_, Infallible>(()) });
        let post = || {
            let req = http::Request::post("/").body(()).unwrap();
            gate.wrap(ok, || "refused".into()).oneshot(req)
        };
        assert!(post().await.is_err(), "the gate starts closed");
        gate.open();
        gate.open();
        assert!(post().await.is_ok(), "after open");
        gate.close();
        gate.close();
        assert!(post().await.is_err(), "after close");
        gate.open();
        assert!(post().await.is_ok(), "after reopen");
    }
}
