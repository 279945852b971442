//! Watch streams: chunked JSON lines of ADDED, MODIFIED, DELETED, BOOKMARK and ERROR events.
//!
//! Follows the apiserver's watch path (`endpoints/handlers/watch.go` serving events from
//! `storage/cacher`): a watch starts either from a resourceVersion (replaying the history after
//! it) or from "now" with the current state sent first as synthetic ADDED events; with
//! `sendInitialEvents=true` (the streaming list) that initial state ends with a BOOKMARK
//! annotated `k8s.io/initial-events-end: "true"`. A watch from a compacted resourceVersion is
//! answered with HTTP 200 and a single ERROR event carrying a 410 Expired `Status`.
//!
//! ```text
//!  subscribe ──► (initial ADDED…, end-bookmark) ──► loop { wait for: new head | bookmark tick |
//!                                                          close | timeout }
//!                                                   new head ──► events after pos, filtered
//! ```
//!
//! # Invariants
//! 1. A watcher subscribes to the head signal *before* it reads its starting point, so no write
//!    between the two is missed.
//! 2. `pos` is the revision of the last event the watcher has considered (delivered or
//!    filtered out); every bookmark carries `pos`, so resuming from a bookmark loses nothing.
//! 3. Every event is serialised once by storage; a watcher only frames it.
//! 4. A watcher buffers nothing of its own: it reads at most [`EVENT_BATCH`] events (and
//!    [`INITIAL_CHUNK`] initial objects, read from storage a batch at a time at the revision
//!    the watch started from) per step from shared storage, frames them with a `Chunker`
//!    (large objects are shared, not copied: at most `CHUNK_BYTES` of copied framing and small
//!    objects per chunk), and reads the next batch only when the client has taken the previous
//!    chunks. It holds one of the server's `max_watches` permits until it ends.
//! 5. An event with a watch delay ([`Cluster::delay_watch_events`]) is framed no earlier than
//!    its commit plus the delay in force then, and never before an earlier event: events
//!    keep their order, so a delay that shrinks holds a later event behind an earlier one.
//!
//! [`Cluster::delay_watch_events`]: super::Cluster::delay_watch_events
//!
//! # Concurrency
//! The storage lock is taken only to read a batch of events or the initial state; filtering
//! and framing run after it is released.
//!
//! # Differences from upstream
//! - No watch cache: events come straight from the storage history. A slow watcher is
//!   *bounded* rather than buffered: it holds no queue (I4), so it costs the same however far
//!   behind it is; once the history bound passes its position it gets 410 Expired, and over
//!   HTTP a connection whose writes stall for `write_timeout` is closed (the watch cache
//!   instead closes a watcher whose buffer stays full). Open watches are capped at
//!   `max_watches`; one more is answered 429 TooManyRequests with `Retry-After`, as API
//!   priority and fairness answers when it rejects a request.
//! - A watch from a resourceVersion the server has not reached yet simply waits for it (etcd's
//!   behaviour); the watch cache would answer "Too large resource version" after a few seconds.
//!   A streaming list from such a version is refused at once with that 504.
//! - A watcher waiting out a watch delay answers a close, an expiry or its timeout only
//!   once the delayed event has gone out.
//! - Periodic bookmarks come every `bookmark_interval` (upstream: about once a minute), and
//!   on demand through [`Cluster::send_bookmarks`](super::Cluster::send_bookmarks).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures::Stream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use super::Shared;
use super::errors::ApiError;
use super::frames::Chunker;
use super::kinds::Kind;
use super::selector::{Selector, Turns};
use super::storage::{Event, EventType, Key, Stored};

/// What a watch asks for, parsed from the query.
#[derive(Debug)]
pub(crate) struct WatchRequest {
    /// The resource's id in the registry.
    pub kind: usize,
    /// The kind at the version the watch was asked for.
    pub def: std::sync::Arc<Kind>,
    pub namespace: Option<String>,
    pub selector: Selector,
    /// `None` for "" or "0": start now, with the current state first.
    pub from: Option<u64>,
    pub send_initial: bool,
    pub bookmarks: bool,
    pub timeout: Duration,
}

/// The annotation that ends the initial events of a streaming list.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

fn frame(buf: &mut BytesMut, ty: &str, obj: &[u8]) {
    buf.put_slice(b"{\"type\":\"");
    buf.put_slice(ty.as_bytes());
    buf.put_slice(b"\",\"object\":");
    buf.put_slice(obj);
    buf.put_slice(b"}\n");
}

/// Frames one event of a stored object: the object's bytes are shared, not copied, when large
/// (keeps I3, I4).
fn frame_shared(out: &mut Chunker, ty: &str, k: &Kind, obj: &Stored) {
    out.copy(b"{\"type\":\"");
    out.copy(ty.as_bytes());
    out.copy(b"\",\"object\":");
    out.share(&k.present(&obj.json));
    out.copy(b"}\n");
}

/// Frames the DELETED event of an object that an update took out of a watcher's selection:
/// the object as it last matched, at the update's revision (upstream's cacher sends it so, and
/// so does its etcd watcher). It is encoded anew, once per watcher that sees it leave.
fn frame_left(out: &mut Chunker, k: &Kind, prev: &Stored, rv: u64) {
    let mut obj = k.present_value(prev.value());
    obj["metadata"]["resourceVersion"] = serde_json::Value::String(rv.to_string());
    let json = Bytes::from(serde_json::to_vec(&obj).expect("a stored object serialises"));
    out.copy(b"{\"type\":\"DELETED\",\"object\":");
    out.share(&json);
    out.copy(b"}\n");
}

fn bookmark(k: &Kind, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = serde_json::json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = serde_json::json!({INITIAL_EVENTS_END: "true"});
    }
    let obj = serde_json::json!({"kind": k.kind, "apiVersion": k.api_version(), "metadata": meta});
    let mut buf = BytesMut::new();
    frame(
        &mut buf,
        "BOOKMARK",
        &serde_json::to_vec(&obj).expect("json"),
    );
    buf.freeze()
}

/// The ERROR event for a failure after the stream started (HTTP status is already 200).
pub(crate) fn error_event(e: &ApiError) -> Bytes {
    let mut buf = BytesMut::new();
    frame(
        &mut buf,
        "ERROR",
        &serde_json::to_vec(&e.status()).expect("json"),
    );
    buf.freeze()
}

impl WatchRequest {
    fn in_scope(&self, obj: &Stored) -> bool {
        let ns_ok = self
            .namespace
            .as_deref()
            .is_none_or(|ns| &*obj.meta.namespace == ns);
        ns_ok && (self.selector.is_empty() || self.selector.matches(&obj.meta))
    }

    /// Frames `e` for this watcher, if it sees it. An object that starts or stops matching the
    /// selector is seen as ADDED or DELETED, as the apiserver's filtered watch does (a DELETED
    /// one with its previous content: [`frame_left`]).
    fn frame_event(&self, out: &mut Chunker, e: &Event) {
        if e.hidden || e.kind != self.kind {
            return;
        }
        let now = self.in_scope(&e.obj);
        let before = e.prev.as_ref().is_some_and(|p| self.in_scope(p));
        let ty = match e.ty {
            EventType::Added if now => EventType::Added,
            EventType::Deleted if before => EventType::Deleted,
            EventType::Modified => match (before, now) {
                (true, true) => EventType::Modified,
                (false, true) => EventType::Added,
                (true, false) => {
                    if let Some(prev) = &e.prev {
                        frame_left(out, &self.def, prev, e.rv);
                    }
                    return;
                }
                (false, false) => return,
            },
            _ => return,
        };
        frame_shared(out, ty.as_str(), &self.def, &e.obj);
    }
}

/// A watcher's slot: one of the server's `max_watches` permits, counted in
/// `Shared::open_watches` for as long as it lives (keeps I4).
pub(crate) struct Slot {
    _permit: OwnedSemaphorePermit,
    shared: Arc<Shared>,
}

impl Slot {
    /// Takes a slot, or answers 429 TooManyRequests when all are taken.
    pub fn take(shared: &Arc<Shared>) -> Result<Slot, ApiError> {
        let permit = Arc::clone(&shared.watches)
            .try_acquire_owned()
            .map_err(|_| ApiError::too_many_requests(1))?;
        shared.open_watches.send_modify(|n| *n += 1);
        Ok(Slot {
            _permit: permit,
            shared: Arc::clone(shared),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.shared
            .open_watches
            .send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Items per chunk when sending initial state, so a large list streams rather than buffers.
pub(crate) const INITIAL_CHUNK: usize = 256;

/// Events read from storage per chunk (keeps I4).
pub(crate) const EVENT_BATCH: usize = 256;

/// The body of a watch response. Errors that are known before streaming (bad parameters) are
/// returned by the caller as plain HTTP errors; an expired start is sent as an ERROR event.
pub(crate) fn stream(
    shared: Arc<Shared>,
    req: WatchRequest,
    slot: Slot,
) -> impl Stream<Item = Result<Bytes, Infallible>> {
    async_stream::stream! {
        let _slot = slot; // keeps I4: released when the stream ends or is dropped
        let mut signal = shared.signal.subscribe(); // keeps I1
        let start = *signal.borrow_and_update();
        // An instant the clock cannot represent is "never": no arithmetic on the client's
        // timeoutSeconds can overflow.
        let deadline = Instant::now().checked_add(req.timeout);
        let every = shared.options.bookmark_interval;
        let mut tick = tokio::time::interval_at(Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut bookmarks_seen = start.bookmarks;
        // The state to start from: the objects at the head now, read a batch at a time
        // (keeps I4), or a revision to replay the history after.
        let (start_rv, replay_initial) = {
            let st = shared.storage.lock();
            match req.from {
                None => (Ok(st.head()), true),
                Some(rv) => (st.check_readable(rv.min(st.head())).map(|()| rv), false),
            }
        };
        let mut pos = match start_rv {
            Err(e) => {
                yield Ok(error_event(&e));
                return;
            }
            Ok(rv) => rv,
        };
        // Matching work yields to other tasks a turn at a time (keeps the server responsive
        // whatever the selector and the number of objects).
        let mut turns = Turns::default();
        if replay_initial {
            let mut after: Option<Key> = None;
            loop {
                let batch = shared.storage.lock().scan(
                    req.kind,
                    req.namespace.as_deref(),
                    pos,
                    after.as_ref(),
                    INITIAL_CHUNK,
                    usize::MAX,
                );
                let batch = match batch {
                    Ok(b) => b,
                    Err(e) => {
                        // Compacted past the initial state before it was sent: a 410, as when
                        // the watch cache can no longer serve the revision.
                        yield Ok(error_event(&e));
                        return;
                    }
                };
                let mut out = Chunker::default();
                for o in &batch.items {
                    if req.in_scope(o) {
                        frame_shared(&mut out, "ADDED", &req.def, o);
                        // A completed chunk goes out at once (keeps I4: one chunk of copies).
                        for chunk in out.take() {
                            yield Ok(chunk);
                        }
                    }
                    turns.matched(&req.selector).await;
                }
                after = batch.items.last().map(|o| o.key());
                out.flush();
                for chunk in out.take() {
                    yield Ok(chunk);
                }
                if !batch.more {
                    break;
                }
            }
            if req.send_initial {
                yield Ok(bookmark(&req.def, pos, true));
            }
        }
        let mut want_bookmark = false;
        loop {
            // Deliver what follows `pos` (at first: the history a resumed watch replays), one
            // batch per chunk; a full batch means more may follow at once.
            let events = shared.storage.lock().events_after(pos, EVENT_BATCH);
            let full = events.as_ref().is_ok_and(|e| e.len() == EVENT_BATCH);
            match events {
                Err(e) => {
                    yield Ok(error_event(&e));
                    return;
                }
                Ok(events) => {
                    let mut out = Chunker::default();
                    for e in &events {
                        // A delayed event waits for its instant, after what came before it
                        // has gone out (keeps I5).
                        if let Some(at) = e.visible_at.filter(|at| *at > Instant::now()) {
                            out.flush();
                            for chunk in out.take() {
                                yield Ok(chunk);
                            }
                            tokio::time::sleep_until(at).await;
                        }
                        req.frame_event(&mut out, e);
                        for chunk in out.take() {
                            yield Ok(chunk);
                        }
                        turns.matched(&req.selector).await;
                        turns.matched(&req.selector).await;
                    }
                    if let Some(last) = events.last() {
                        pos = pos.max(last.rv); // keeps I2
                    }
                    drop(events);
                    if want_bookmark && req.bookmarks {
                        out.copy(&bookmark(&req.def, pos, false));
                    }
                    want_bookmark = false;
                    out.flush();
                    for chunk in out.take() {
                        yield Ok(chunk);
                    }
                }
            }
            // A resource no longer served (its CRD was deleted): once every event up to now
            // has gone out (its objects' DELETED among them), the watch ends, as upstream
            // tears down the resource's storage.
            if !full && shared.storage.lock().registry().entry(req.kind).is_none() {
                return;
            }
            // Catching up: go on reading unless something else (a close, an expiry, a bookmark
            // request, the deadline) wants attention first.
            let signalled = signal.has_changed().unwrap_or(true);
            if full && !signalled && deadline.is_none_or(|d| Instant::now() < d) {
                continue;
            }
            tokio::select! {
                biased;
                changed = signal.changed() => {
                    let now = *signal.borrow_and_update();
                    if changed.is_err() || now.closes != start.closes {
                        return;
                    }
                    if now.expires != start.expires {
                        let e = ApiError::expired(format!(
                            "too old resource version: {pos} (the watch was expired by the server)"
                        ));
                        yield Ok(error_event(&e));
                        return;
                    }
                    if now.bookmarks != bookmarks_seen {
                        bookmarks_seen = now.bookmarks;
                        want_bookmark = true;
                    }
                }
                _ = tick.tick(), if req.bookmarks => want_bookmark = true,
                _ = sleep_until(deadline) => return,
            }
        }
    }
}

/// Sleeps until `deadline`, or forever if there is none.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
