//! A faithful port of controller-runtime's priority queue: the default controller queue since
//! v0.23, with priorities, per-key delays, one worker per key, and rate limiting.
//!
//! Follows controller-runtime v0.25.3, `pkg/controller/priorityqueue/` (`priorityqueue.go`,
//! `metrics.go`), which pairs with client-go v0.37 (its `go.mod` requires `k8s.io/client-go
//! v0.37.0`); v0.24.1's queue is the same but for one fix at shutdown (see
//! [`Release`](crate::controller::Release)). It knows nothing of Kubernetes: it queues any
//! `T: Eq + Hash + Clone`.
//!
//! # Which type solves which problem
//!
//! | you need | use | upstream |
//! |---|---|---|
//! | a controller queue with priorities | [`PriorityQueue`] | `priorityqueue.New` |
//! | add with a delay, rate limit or priority | [`PriorityQueue::add_with_opts`] + [`AddOpts`] | `AddWithOpts` |
//! | take work, never forget `done` | [`PriorityQueue::claim_with_priority`] → [`Claim`](crate::workqueue::Claim) | `GetWithPriority` + `defer Done` |
//! | one worker loop over either queue | [`RequestQueue`](crate::controller::RequestQueue) | `PriorityQueue[T]` + `priorityQueueWrapper` |
//! | depth per priority | [`Provider::WithPriority`], [`InMemoryPriorityMetrics`] | `MetricsProviderWithPriority` |
//!
//! ```
//! use controlloop::controller::priorityqueue::{AddOpts, PriorityQueue};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true)
//! #     .build().unwrap().block_on(async {
//! let queue = PriorityQueue::new("example");
//! let low = AddOpts { priority: Some(-100), ..AddOpts::default() };
//! queue.add_with_opts(low, ["default/from-the-initial-list"]);
//! queue.add("default/just-changed"); // priority 0
//! let (claim, priority) = queue.claim_with_priority().await.unwrap();
//! assert_eq!((*claim, priority), ("default/just-changed", 0)); // the higher priority first
//!
//! queue.add("default/just-changed"); // changed again while a worker holds it...
//! assert_eq!(queue.len(), 2); // ...queued and counted (client-go's queue would say 1)...
//! let (next, _) = queue.claim_with_priority().await.unwrap();
//! assert_eq!(*next, "default/from-the-initial-list"); // ...but not handed out while held
//! # });
//! ```
//!
//! # Model
//!
//! Each key is in at most one place: *waiting* (it has a ready time), *ready* (ordered by
//! priority, then by when it became ready), or *locked* (a worker holds it) — and a locked key
//! may also have a fresh entry waiting or ready, which is handed out only after `done`. Adds of
//! a key already queued merge: **the earlier ready time and the higher priority win**; a raise
//! moves it to the back of its new priority. Details and the exact order: `PriorityQueueCore`
//! (`core.rs`, public with the `testing` feature).
//!
//! # Invariants
//!
//! P1–P3 (the entries and the two trees agree, counters are unique) on `PriorityQueueCore`;
//! P4 (no lost wake-up) and P5 (no key ready before its time) on [`PriorityQueue`]. Debug builds
//! check them.
//!
//! # Concurrency
//!
//! One lock around the core and the add buffer (the workqueue's lock facade, so shuttle can
//! replace it), never held across an await; a flush task applies buffered adds and a timer
//! task promotes waiting keys. See [`PriorityQueue`].
//!
//! # Differences from client-go's rate-limiting queue
//!
//! What a controller sees change when its queue becomes this one:
//!
//! | | client-go queue ([`crate::workqueue`]) | this queue |
//! |---|---|---|
//! | order | FIFO | priority, then first ready; a raise goes to the back of its new level |
//! | `len` while a re-added key is held | 0 (the key is only dirty) | 1 (the new entry is ready, just not handed out) |
//! | `add_after` for a key already ready | the delayed add still happens later (and coalesces only if the key is still queued then) | nothing: ready stays ready |
//! | `add_after` for a key already waiting | the earlier ready time wins | the same |
//! | a reconcile that ends with `RequeueAfter` (or a retryable error) while its object changed again | runs again now (the change) and again after the delay | runs again now only: the requeue merges into the ready entry (the limiter still counts the failure) |
//! | `add_rate_limited` | waits `limiter.when` | the same; with `after` too, the shorter of the two unless `after` is zero |
//! | shutdown | getters drain the queue, then `None` | getters get `None` at once; queued keys are dropped |
//! | `shut_down_with_drain` | waits for held keys | the same as `shut_down` |
//! | depth metric | size of the dirty set | ready keys (held ones included), per priority |
//! | retries metric | every `add_after`, zero delays too | adds with a non-zero delay |
//! | limiter asked once shut down | yes | no |
//! | `forget` without `done` | the key stays processing: later adds sit in dirty, `len` 0 | the key stays locked: later adds sit in `ready`, `len` counts them, no worker gets them |
//! | `done` without `forget` | backoff keeps growing | the same |
//!
//! # Differences between controller-runtime v0.22 and v0.24 (the queue)
//!
//! The queue's share of the full list in [`Release`](crate::controller::Release)'s docs.
//!
//! - **Which queue**: `UsePriorityQueue` defaults to false at v0.22.5 and to true at v0.23.0
//!   and later (`pkg/controller/controller.go`, `NewTypedUnmanaged`).
//! - **Default rate limiter**: with the priority queue, per-item exponential 5 ms..1000 s only;
//!   without it, also a 10 qps / burst 100 bucket (`default_controller_rate_limiter`). So a
//!   default v0.24 controller no longer delays a mass of failures behind a shared bucket.
//! - **The priority queue itself** changed between v0.22.5 and v0.23.0: v0.22 keeps one tree
//!   ordered by priority, then ready-before-waiting, then ready time, then insertion counter,
//!   and a raised priority keeps its old counter (it jumps ahead of keys already at the new
//!   level); v0.23+ keeps two trees, gives a raised key a fresh counter ("follows FIFO order in
//!   the new priority queue when item priority changes") and a fresh counter when it becomes
//!   ready by time, and buffers adds. This port is the v0.23+ queue.
//! - **Depth metric labels**: since v0.23.0 controller-runtime's Prometheus provider labels at
//!   most 25 distinct priorities, then `"exceeded_cardinality_limit"`
//!   (`pkg/internal/metrics/workqueue.go`); not ported (see [`Provider`]).
//! - **`Result::priority`** (v0.23+ `reconcile.Result.Priority`): the priority of any requeue,
//!   error requeues included (in the port an error carries no result, so it keeps the
//!   request's); absent, the request keeps the priority it was handed out with.
//! - **Low priority for unchanged objects** (both versions, only with the priority queue):
//!   a create from the informer's initial list, and an update whose old and new resource
//!   versions are equal (a resync), are added at `LowPriority` (-100) by
//!   `EnqueueRequestForObject` and the other handlers.
//!
//! # Differences from upstream
//!
//! On `PriorityQueueCore`, [`PriorityQueue`] and [`Provider`]; the ones a controller could
//! notice: a second `shut_down` does not panic, and no provider means no metrics. Adds are
//! buffered as upstream's are (the limiter is asked, and a delay starts, when the buffer is
//! flushed).

#[cfg(feature = "broken")]
pub mod broken;
mod core;
mod metrics;
mod queue;
#[cfg(test)]
mod tests;

pub use core::{Entry, Priority};
// The pure core, stepped by the model tests and the book: public with the `testing` feature
// only.
#[cfg(feature = "testing")]
pub use core::{Observer, PriorityAdd, PriorityDone, PriorityGet, PriorityQueueCore, Promoted};
pub use metrics::{
    DepthMetricWithPriority, InMemoryPriorityMetrics, MetricsProviderWithPriority,
    PriorityMetricsSnapshot, Provider,
};
pub use queue::{AddOpts, Opts, PriorityQueue};
