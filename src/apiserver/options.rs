//! The server's settings and bounds, with kube-apiserver's and etcd's defaults where they exist.
//!
//! Follows kubernetes v1.36 `staging/src/k8s.io/apiserver/pkg/server/config.go`
//! (`MaxRequestBodyBytes` 3 MiB, `JSONPatchMaxCopyBytes` 3 MiB, `RequestTimeout` 60 s),
//! `server/options/server_run_options.go` (`MaxRequestsInFlight` 400,
//! `MaxMutatingRequestsInFlight` 200),
//! `server/secure_serving.go` (`ReadHeaderTimeout` 32 s) and etcd's server defaults
//! (`--max-request-bytes` 1.5 MiB, `--quota-backend-bytes` 2 GiB).
//!
//! Where kube-apiserver 1.38 answers differently, [`ServerOptions::kube_apiserver_minor`]
//! chooses (kubernetes v1.38.0-beta.0, `staging/src/k8s.io/apiserver/pkg/registry/generic/
//! registry/store.go`, `finalizeDelete`); 1.37 is the default.
//!
//! # Differences from upstream
//! - The state is in memory only: stopping the server loses it. So that no client can resume
//!   a watch across a restart from a revision this run never served, a server on a socket
//!   starts its revisions above any an earlier run could have issued, with everything before
//!   them compacted (a 410, as after compaction). etcd does the same when a snapshot is restored
//!   with `etcdutl snapshot restore --bump-revision --mark-compacted`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::jiff::Timestamp;

use super::storage::INITIAL_REVISION;

/// How the server is set up. `Default` is what a test wants, with upstream's bounds.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Port to bind on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Events kept for watch resumption and consistent pages; older ones are compacted.
    /// Upstream's watch cache keeps at most 102,400 (`defaultUpperBoundCapacity`, apiserver
    /// v0.37.2 `pkg/storage/cacher/watch_cache_history.go`), enough for a watcher of a kind
    /// to see a namespace of that many objects deleted one by one without relisting.
    pub history: usize,
    /// Bytes of events kept (each event's JSON plus a small overhead); older ones are
    /// compacted, whatever `history` allows.
    pub history_bytes: usize,
    /// Largest accepted request body (upstream: 3 MiB).
    pub max_body_bytes: usize,
    /// Largest stored object, as JSON (etcd's request limit: 1.5 MiB); larger is 413.
    pub max_object_bytes: usize,
    /// The most bytes all stored objects may take, as JSON (etcd's default quota: 2 GiB);
    /// a write beyond it is 500 "database space exceeded".
    pub max_storage_bytes: usize,
    /// Bytes of request log kept; older records are dropped.
    pub request_log_bytes: usize,
    /// Open watches at once; one more is 429.
    pub max_watches: usize,
    /// Connections served at once on the socket (capped below the file descriptor limit,
    /// which the server raises to the hard limit at start). When all are open, the connection
    /// idle longest is closed to make room; when none is idle, a few more are answered 429 and
    /// the rest are closed.
    pub max_connections: usize,
    /// Read-only requests being answered at once on the socket (upstream's
    /// `--max-requests-inflight`, 400); one more is 429. Watches do not count.
    pub max_requests_inflight: usize,
    /// Mutating requests being answered at once on the socket (upstream's
    /// `--max-mutating-requests-inflight`, 200); one more is 429.
    pub max_mutating_requests_inflight: usize,
    /// Time a connection has to send a complete request head once it is ready for one
    /// (upstream: 32 s); also how long an idle keep-alive connection stays open.
    pub header_read_timeout: Duration,
    /// Time a write to a connection may stay blocked before the connection is closed.
    pub write_timeout: Duration,
    /// Time a request body has to arrive (upstream's request timeout: 60 s); later is 504.
    pub request_timeout: Duration,
    /// Period of the bookmarks sent to watches that allow them (upstream: about 1 min).
    pub bookmark_interval: Duration,
    /// Wall-clock time of server start for `creationTimestamp`; later times add tokio time,
    /// so under a paused clock timestamps are reproducible. `None`: the system clock.
    pub epoch: Option<Timestamp>,
    /// The revision of the empty store, and the newest compacted one. `None`: 1 for
    /// [`Cluster::new`](super::Cluster::new), as in a fresh etcd, and for a server on a socket
    /// a revision above any an earlier run could have issued (see the module docs).
    pub first_revision: Option<u64>,
    /// The kube-apiserver minor whose answers the server gives where 1.37 and 1.38 differ: 37
    /// (default: kube-apiserver v1.37.2, the release the conformance suite holds the server
    /// to) or 38 (kubernetes v1.38.0-beta.0, not yet released, so not held to a real server):
    /// from 38, the `Status` that answers a delete carries `metadata.resourceVersion`, the
    /// delete's revision (the current one for a dry run), and an update or patch that removes
    /// the last finalizer of an object being deleted, so deletes it, answers the object at the
    /// delete's revision (1.37: at the revision it was read at).
    pub kube_apiserver_minor: u32,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            port: 0,
            history: 100 * 1024,
            history_bytes: 64 * 1024 * 1024,
            max_body_bytes: 3 * 1024 * 1024,
            max_object_bytes: 3 * 1024 * 1024 / 2,
            max_storage_bytes: 2 * 1024 * 1024 * 1024,
            request_log_bytes: 16 * 1024 * 1024,
            max_watches: 4096,
            max_connections: 16 * 1024,
            max_requests_inflight: 400,
            max_mutating_requests_inflight: 200,
            header_read_timeout: Duration::from_secs(32),
            write_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(60),
            bookmark_interval: Duration::from_secs(60),
            epoch: None,
            first_revision: None,
            kube_apiserver_minor: 37,
        }
    }
}

/// A first revision above any that an earlier run on this machine could have issued: the
/// wall clock in nanoseconds since 1970. An earlier run started at a smaller reading and cannot
/// have committed more writes than nanoseconds have passed since (unless the clock was set
/// back by more than that run lasted). The value fits `i64` until 2262, so clients that parse
/// resourceVersions as signed integers read it too.
pub(crate) fn revision_after_earlier_runs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| u64::try_from(d.as_nanos()).ok())
        .unwrap_or(INITIAL_REVISION)
        .max(INITIAL_REVISION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_revision_follows_the_wall_clock_in_nanoseconds() {
        let earlier = revision_after_earlier_runs();
        let later = revision_after_earlier_runs();
        assert!(
            later >= earlier && earlier > 1_600_000_000_000_000_000,
            "{earlier}"
        );
        assert!(earlier < i64::MAX as u64);
    }
}
