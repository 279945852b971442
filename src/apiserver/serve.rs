//! Serving the router on a TCP socket: HTTP/1.1 connections with timeouts, a connection table
//! that closes idle connections under pressure, and upstream's limit on requests in flight.
//!
//! Follows kube-apiserver's `staging/src/k8s.io/apiserver/pkg/server/secure_serving.go`, whose
//! `http.Server` has `ReadHeaderTimeout` 32 s and `IdleTimeout` 90 s, and
//! `staging/src/k8s.io/apiserver/pkg/server/filters/maxinflight.go` (kubernetes v1.37.2):
//! at most `--max-requests-inflight` (400) read-only and `--max-mutating-requests-inflight`
//! (200) mutating requests at once, long-running requests (watches) not counted, one more is
//! 429 with `Retry-After: 1`.
//!
//! ```text
//!  accept ──► table full? ── no ────────────────────────────────► hyper HTTP/1 ──► gate ──► router
//!                 │                                                  (header timer,     │
//!                 └─ yes ──► close the connection idle longest ──────┘  write timeout)  │
//!                              none idle ──► an overflow slot? ── yes ──► one 429, close │
//!                                                         └─ no ──► close at once        │
//!  gate: a watch passes; any other request takes a read-only or a mutating slot ─────────┘
//!        for as long as its response is being sent, or is answered 429 if none is free
//! ```
//!
//! # Invariants
//! 1. At most `max_connections` connections are in the table (capped below the process's
//!    file descriptor limit), and at most [`OVERFLOW`] more are being answered 429; any further
//!    connection is closed as soon as it is accepted.
//! 2. A connection is *idle* while no request of it is being answered: from its accept, or from
//!    the end of its last response, until hyper hands the router its next complete request
//!    head. A connection that is slow to send a request head is idle. When the table is full,
//!    the connection idle longest is closed to make room, so idle and header-slow connections
//!    can never lock a new client out: a new connection is refused only when every connection
//!    in the table is answering a request (and those are bounded, 4), or by the limits below.
//! 3. A connection that has not sent a complete request head within `header_read_timeout` of
//!    being ready for one is closed; so is one whose writes have been blocked for
//!    `write_timeout` (a client that stopped reading).
//! 4. At most `max_requests_inflight` read-only and `max_mutating_requests_inflight` mutating
//!    requests are being answered at once; a request counts until its response body has been
//!    sent or dropped. Watches do not count (upstream's long-running requests); they have their
//!    own cap (`max_watches`).
//! 5. No HTTP is parsed or written here: hyper does all of it.
//!
//! # Concurrency
//! One task accepts; every connection is its own task, holding its entry in the table (a
//! `parking_lot` mutex, taken for an insert, a removal, or a scan when the table is full).
//! An entry's state is atomics the connection's requests update without the table's lock.
//! Shutdown stops accepting, then asks every connection to finish its request and close.
//!
//! # Differences from upstream
//! - hyper starts its header timer as soon as a connection waits for a request, so an idle
//!   keep-alive connection is closed after `header_read_timeout` (32 s) rather than Go's
//!   separate 90 s `IdleTimeout`.
//! - kube-apiserver caps requests in flight, not connections; here connections are capped too
//!   (a file descriptor each), and closing idle connections when the table is full stands in
//!   for Go's unbounded accept. Every client is 127.0.0.1, so connections are not told apart by
//!   client; the one idle longest goes first.
//! - API priority and fairness (on by default upstream) is not modelled; the in-flight limits
//!   are the ones kube-apiserver applies when it is off. Nobody is exempt (upstream exempts
//!   `system:masters`; there is no authentication here). The in-process router
//!   (`Cluster::in_process_client`) has no in-flight limit.
//! - Writes have a timeout (Go's `WriteTimeout` is unset upstream); it is how a watcher that
//!   stopped reading is dropped (see `watch`).
//! - Plain HTTP/1.1 only (no TLS, no HTTP/2); hyper's default limit on the request head
//!   (about 400 KiB) stands in for Go's 1 MiB `MaxHeaderBytes`, and a request hyper cannot
//!   parse is answered by hyper (as Go's `net/http` answers it), not with a `Status`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{Method, Request};
use hyper::body::{Frame, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_io_timeout::TimeoutStream;
use tower_service::Service as _;

use super::errors::ApiError;

/// Connections answered 429 at once beyond the table (keeps I1).
pub(crate) const OVERFLOW: usize = 64;

/// File descriptors kept free of connections: the listener, files, the runtime, and the
/// overflow connections.
const FD_RESERVE: u64 = 64 + OVERFLOW as u64;

/// The connection bounds (keeps I1–I4).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub write_timeout: Duration,
    pub max_requests_inflight: usize,
    pub max_mutating_requests_inflight: usize,
}

/// The process's file descriptor limit after raising the soft limit to the hard one, as far
/// as the system allows; `None` where it cannot be read. Done once per process, and logged.
pub(crate) fn fd_limit() -> Option<u64> {
    static LIMIT: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        #[cfg(unix)]
        {
            let before = rlimit::Resource::NOFILE.get().ok().map(|(soft, _)| soft);
            match rlimit::increase_nofile_limit(u64::MAX) {
                Ok(now) => {
                    tracing::info!(
                        target: "controlloop::apiserver",
                        "file descriptor limit: {now} (was {})",
                        before.map_or_else(|| "unknown".to_string(), |b| b.to_string())
                    );
                    Some(now)
                }
                Err(e) => {
                    tracing::warn!(
                        target: "controlloop::apiserver",
                        "file descriptor limit not raised ({e}); it stays {before:?}"
                    );
                    before
                }
            }
        }
        #[cfg(not(unix))]
        {
            None
        }
    })
}

/// The connection cap in effect: `wanted`, but below the file descriptor limit (keeps I1).
pub(crate) fn connection_cap(wanted: usize) -> usize {
    match fd_limit() {
        Some(fds) => {
            let room = usize::try_from(fds.saturating_sub(FD_RESERVE)).unwrap_or(usize::MAX);
            wanted.min(room.max(1))
        }
        None => wanted,
    }
}

/// One connection's entry in the table.
struct Conn {
    /// Requests of it being answered now (0 or 1 for HTTP/1).
    busy: AtomicUsize,
    /// When it last became idle, in nanoseconds since the server started.
    idle_since: AtomicU64,
    /// Wakes the connection's task to close it (keeps I2).
    close: Notify,
}

/// The connections being served, by id (keeps I1, I2).
struct Table {
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    cap: usize,
    started: Instant,
}

impl Table {
    fn now(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Adds a connection if there is room, closing the connection idle longest when the table
    /// is full; `None` when every connection is answering a request.
    fn admit(&self, id: u64) -> Option<Arc<Conn>> {
        let mut conns = self.conns.lock();
        if conns.len() >= self.cap {
            let victim = conns
                .iter()
                .filter(|(_, c)| c.busy.load(Ordering::Acquire) == 0)
                .min_by_key(|(_, c)| c.idle_since.load(Ordering::Acquire))
                .map(|(id, _)| *id)?;
            let gone = conns.remove(&victim).expect("a listed connection");
            gone.close.notify_one();
        }
        let conn = Arc::new(Conn {
            busy: AtomicUsize::new(0),
            idle_since: AtomicU64::new(self.now()),
            close: Notify::new(),
        });
        conns.insert(id, Arc::clone(&conn));
        Some(conn)
    }

    fn remove(&self, id: u64) {
        self.conns.lock().remove(&id);
    }
}

/// Marks a connection busy while one of its responses is being answered, and holds the
/// request's in-flight slot (keeps I2, I4).
struct Busy {
    conn: Arc<Conn>,
    table: Arc<Table>,
    _slot: Option<OwnedSemaphorePermit>,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.conn
            .idle_since
            .store(self.table.now(), Ordering::Release);
        self.conn.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its [`Busy`] until it has been sent (or dropped).
struct Tracked {
    inner: Body,
    _busy: Busy,
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Upstream's `LongRunningRequestCheck` for the served resources: a watch (a GET whose first
/// `watch` parameter is true, as the router reads it).
fn is_long_running<B>(req: &Request<B>) -> bool {
    req.method() == Method::GET
        && form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes())
            .find(|(k, _)| k == "watch")
            .is_some_and(|(_, v)| matches!(v.as_ref(), "true" | "1" | ""))
}

/// The in-flight slots (keeps I4).
struct Inflight {
    read_only: Arc<Semaphore>,
    mutating: Arc<Semaphore>,
}

/// The service every connection runs: the in-flight limit and the busy mark around the router.
#[derive(Clone)]
struct Gate {
    router: Router,
    conn: Arc<Conn>,
    table: Arc<Table>,
    inflight: Arc<Inflight>,
}

impl hyper::service::Service<Request<hyper::body::Incoming>> for Gate {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn call(&self, req: Request<hyper::body::Incoming>) -> Self::Future {
        self.conn.busy.fetch_add(1, Ordering::AcqRel);
        let slot = if is_long_running(&req) {
            Ok(None)
        } else {
            let read_only = matches!(*req.method(), Method::GET | Method::HEAD);
            let pool = if read_only {
                &self.inflight.read_only
            } else {
                &self.inflight.mutating
            };
            Arc::clone(pool).try_acquire_owned().map(Some)
        };
        let busy = |slot| Busy {
            conn: Arc::clone(&self.conn),
            table: Arc::clone(&self.table),
            _slot: slot,
        };
        match slot {
            Err(_) => {
                let busy = busy(None);
                Box::pin(async move {
                    let resp = ApiError::too_many_requests(1).into_response();
                    Ok(track(resp, busy))
                })
            }
            Ok(slot) => {
                let busy = busy(slot);
                // The router is always ready (axum's `Router::poll_ready`).
                let mut router = self.router.clone();
                Box::pin(async move {
                    let resp = match router.call(req.map(Body::new)).await {
                        Ok(r) => r,
                        Err(never) => match never {},
                    };
                    Ok(track(resp, busy))
                })
            }
        }
    }
}

fn track(resp: Response, busy: Busy) -> Response {
    resp.map(|inner| Body::new(Tracked { inner, _busy: busy }))
}

impl Limits {
    /// The bounds `options` sets.
    pub fn of(options: &super::ServerOptions) -> Limits {
        Limits {
            max_connections: options.max_connections,
            header_read_timeout: options.header_read_timeout,
            write_timeout: options.write_timeout,
            max_requests_inflight: options.max_requests_inflight,
            max_mutating_requests_inflight: options.max_mutating_requests_inflight,
        }
    }
}

/// Serves `router` on `listener` until `stop` completes, then drains the open connections.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    stop: impl Future<Output = ()>,
) -> std::io::Result<()> {
    // Durations the clock can add to an instant without overflow.
    let cap = |d: Duration| d.min(Duration::from_secs(365 * 24 * 3600));
    let graceful = GracefulShutdown::new();
    let table = Arc::new(Table {
        conns: Mutex::new(HashMap::new()),
        cap: connection_cap(limits.max_connections).max(1),
        started: Instant::now(),
    });
    tracing::info!(
        target: "controlloop::apiserver",
        "serving at most {} connections ({} asked)",
        table.cap,
        limits.max_connections
    );
    let inflight = Arc::new(Inflight {
        read_only: Arc::new(Semaphore::new(limits.max_requests_inflight)),
        mutating: Arc::new(Semaphore::new(limits.max_mutating_requests_inflight)),
    });
    let overflow = Arc::new(Semaphore::new(OVERFLOW));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(cap(limits.header_read_timeout)) // keeps I3
        // Queue the body's chunks as they are instead of copying them into one buffer: a
        // chunk may be a stored object's own bytes (see `frames`), and hyper would otherwise
        // copy up to its buffer size plus a whole chunk per connection.
        .writev(true);
    let mut refuse = http.clone();
    refuse.keep_alive(false);
    tokio::pin!(stop);
    let mut next_id = 0u64;
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
        timed.set_write_timeout(Some(cap(limits.write_timeout))); // keeps I3
        let io = TokioIo::new(Box::pin(timed));
        next_id = next_id.wrapping_add(1);
        let id = next_id;
        if let Some(conn) = table.admit(id) {
            let gate = Gate {
                router: router.clone(),
                conn: Arc::clone(&conn),
                table: Arc::clone(&table),
                inflight: Arc::clone(&inflight),
            };
            let served = graceful.watch(http.serve_connection(io, gate));
            let table = Arc::clone(&table);
            tokio::spawn(async move {
                tokio::select! {
                    _ = served => {}
                    // Closed to make room (keeps I2): dropping the connection closes it.
                    _ = conn.close.notified() => {}
                }
                table.remove(id); // keeps I1
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
