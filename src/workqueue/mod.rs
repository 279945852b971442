//! A faithful port of client-go's workqueue: coalescing, one worker per key, delays and
//! backoff, for any key type.
//!
//! Follows `k8s.io/client-go/util/workqueue` at v0.37 (Kubernetes 1.37; no file changed since
//! v0.36), and the way
//! controller-runtime v0.22 drives it (`pkg/internal/controller/controller.go`). It knows
//! nothing of Kubernetes: it queues any `T: Eq + Hash + Clone`.
//!
//! # Which type solves which problem
//!
//! | you need | use | upstream |
//! |---|---|---|
//! | hand keys to workers, one worker per key, repeated adds merged | [`Queue`] | `Typed[T]` |
//! | add a key you hold by reference, built only if it is stored | [`Queue::add_ref`] ([`KeyRef`]) | — (a Go string is shared) |
//! | never forget a `done`, even on `?` or a panic | [`Queue::claim`] → [`Claim`] | `defer Done` |
//! | add a key later | [`DelayingQueue`] (`add_after`) | `delayingType` |
//! | retry with backoff | [`RateLimitingQueue`] (`add_rate_limited`, `forget`) | `rateLimitingType` |
//! | choose the backoff | [`RateLimiter`] and its limiters | `default_rate_limiters.go` |
//! | watch it work | [`MetricsProvider`] ([`InMemoryMetrics`]) | `metrics.go` |
//!
//! ```
//! use controlloop::workqueue::Queue;
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let queue = Queue::new();
//! for _ in 0..1_000 {
//!     queue.add("default/web"); // a thousand changes to one object...
//! }
//! assert_eq!(queue.len(), 1); // ...are one piece of work
//! let claim = queue.claim().await.unwrap();
//! queue.add("default/web"); // changed again while a worker holds it
//! assert_eq!(queue.len(), 0); // not queued: no second worker may take it
//! drop(claim); // done: the change that arrived meanwhile is queued, once
//! assert_eq!(queue.len(), 1);
//! # });
//! ```
//!
//! # The invariant
//!
//! Three structures: the queue (order), `dirty` (needs work) and `processing` (held by a
//! worker). **Every queued item is dirty and not processing.** The numbered invariants are on
//! `QueueCore` (`queue_core.rs`); debug builds check them after every mutation of a small queue.
//!
//! # Layout
//!
//! - `queue_core.rs` (`QueueCore`, public with the `testing` feature): the state machine, no
//!   locks or time (tested against a model).
//! - `queue.rs`: the async shell around it ([`Queue`]): one lock, waiter wake-ups, shutdown,
//!   metrics.
//! - `claim.rs` ([`Claim`]), `delaying.rs` ([`DelayingQueue`]), `rate_limiting.rs`
//!   ([`RateLimitingQueue`]), `rate_limiter.rs` ([`RateLimiter`] and the limiters), `metrics.rs`
//!   ([`MetricsProvider`]). Each type is reachable by one path: `controlloop::workqueue::Name`,
//!   as in client-go's flat `workqueue` package.
//! - `sync`: the lock facade that lets shuttle model-check the shell; `waiters`: the waiting
//!   getters' protocol, shared with the priority queue.
//! - `broken` (feature `broken`): deliberately wrong queues, for showing detectors firing.

#[cfg(feature = "broken")]
pub mod broken;
mod claim;
mod delaying;
mod metrics;
mod queue;
mod queue_core;
mod rate_limiter;
mod rate_limiting;
pub(crate) mod sync; // also the priority queue's lock (controller::priorityqueue)
pub(crate) mod waiters; // also the priority queue's getters

pub use claim::{Claim, ClaimQueue};
pub use delaying::DelayingQueue;
pub use metrics::{
    CounterMetric, GaugeMetric, HistogramMetric, InMemoryMetrics, MetricsProvider,
    QueueMetricsSnapshot, SettableGaugeMetric,
};
pub(crate) use queue::UNFINISHED_WORK_UPDATE_PERIOD;
pub use queue::{BuildError, Queue, QueueConfig};
pub use queue_core::KeyRef;
// The pure core, stepped by the model tests, the fuzz targets and the book: public with the
// `testing` feature only.
#[cfg(feature = "testing")]
pub use queue_core::{QueueAdd, QueueCore, QueueDone, QueueGet};
pub use rate_limiter::{
    BucketRateLimiter, DEFAULT_BASE_DELAY, DEFAULT_BURST, DEFAULT_MAX_DELAY, DEFAULT_QPS,
    InvalidLimiter, ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter,
    RateLimiter, WithMaxWaitRateLimiter, default_controller_rate_limiter,
    default_item_based_rate_limiter,
};
pub use rate_limiting::RateLimitingQueue;
