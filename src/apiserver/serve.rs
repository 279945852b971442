//! Serving the router on a TCP socket: HTTP/1.1 connections with timeouts and a cap.
//!
//! Follows kube-apiserver's `staging/src/k8s.io/apiserver/pkg/server/secure_serving.go`, whose
//! `http.Server` has `ReadHeaderTimeout` 32 s and `IdleTimeout` 90 s, with hyper's settings:
//!
//! ```text
//!  accept ──► a connection slot free?  ── yes ──► hyper HTTP/1 (header timer, write timeout) ──► router
//!                       │
//!                       └─ no ──► an overflow slot free? ── yes ──► one 429 Status, then close
//!                                                └─ no ──► close at once
//! ```
//!
//! # Invariants
//! 1. At most `max_connections` connections are served by the router at once, and at most as
//!    many more are being answered 429; any further connection is closed as soon as it is
//!    accepted. Each slot is released when its connection ends.
//! 2. A connection that has not sent a complete request head within `header_read_timeout` of
//!    being ready for one (accepted, or idle after a response) is closed; so is one whose
//!    writes have been blocked for `write_timeout` (a client that stopped reading).
//! 3. No HTTP is parsed or written here: hyper does all of it.
//!
//! # Concurrency
//! One task accepts; every connection is its own task holding its slot (a semaphore permit).
//! Shutdown stops accepting, then asks every connection to finish its request and close.
//!
//! # Differences from upstream
//! - hyper starts its header timer as soon as a connection waits for a request, so an idle
//!   keep-alive connection is closed after `header_read_timeout` (32 s) rather than Go's
//!   separate 90 s `IdleTimeout`.
//! - kube-apiserver caps requests in flight, not connections; here connections are capped too,
//!   and the connections over the cap get a 429 TooManyRequests `Status` with `Retry-After`.
//! - Writes have a timeout (Go's `WriteTimeout` is unset upstream); it is how a watcher that
//!   stopped reading is dropped (see `watch`).
//! - Plain HTTP/1.1 only (no TLS, no HTTP/2); hyper's default limit on the request head
//!   (about 400 KiB) stands in for Go's 1 MiB `MaxHeaderBytes`, and a request hyper cannot
//!   parse is answered by hyper (as Go's `net/http` answers it), not with a `Status`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::response::IntoResponse;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, oneshot};
use tokio_io_timeout::TimeoutStream;

use super::errors::ApiError;

/// The connection bounds (keeps I1, I2).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub write_timeout: Duration,
}

/// Serves `router` on `listener` until `stop` fires, then drains the open connections.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    stop: oneshot::Receiver<()>,
) -> std::io::Result<()> {
    // Durations the clock can add to an instant without overflow.
    let cap = |d: Duration| d.min(Duration::from_secs(365 * 24 * 3600));
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let overflow = Arc::new(Semaphore::new(limits.max_connections));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(cap(limits.header_read_timeout)) // keeps I2
        // Queue the body's chunks as they are instead of copying them into one buffer: a
        // chunk may be a stored object's own bytes (see `frames`), and hyper would otherwise
        // copy up to its buffer size plus a whole chunk per connection.
        .writev(true);
    let mut refuse = http.clone();
    refuse.keep_alive(false);
    tokio::pin!(stop);
    loop {
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    // Out of file descriptors and the like: back off as Go's server does.
                    tracing::warn!(target: "controlloop::apiserver", "accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        let mut timed = TimeoutStream::new(tcp);
        timed.set_write_timeout(Some(cap(limits.write_timeout))); // keeps I2
        let io = TokioIo::new(Box::pin(timed));
        if let Ok(slot) = Arc::clone(&slots).try_acquire_owned() {
            let conn =
                graceful.watch(http.serve_connection(io, TowerToHyperService::new(router.clone())));
            tokio::spawn(async move {
                let _ = conn.await;
                drop(slot); // keeps I1
            });
        } else if let Ok(slot) = Arc::clone(&overflow).try_acquire_owned() {
            let busy = hyper::service::service_fn(|_| async {
                Ok::<_, Infallible>(ApiError::too_many_requests(1).into_response())
            });
            let conn = graceful.watch(refuse.serve_connection(io, busy));
            tokio::spawn(async move {
                let _ = conn.await;
                drop(slot);
            });
        }
        // Otherwise `io` is dropped here, closing the connection (keeps I1).
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
