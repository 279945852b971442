//! The controller's queue: controller-runtime's priority queue or client-go's rate-limiting
//! queue behind one type. Follows controller-runtime v0.25.3's `Controller.Queue` field
//! (`pkg/internal/controller/controller.go`, a `priorityqueue.PriorityQueue[request]`, which
//! holds a classic queue in `priorityQueueWrapper`) and `NewQueue`'s default
//! (`pkg/controller/controller.go`, `NewTypedUnmanaged`).
//!
//! ```text
//!  Builder ─ use_priority_queue (default: Release::queue_kind) ─► QueueKind
//!     │                                                              │
//!     │ with_rate_limiter (default: QueueKind::default_rate_limiter) ▼
//!     └──────────────────────────────────────────────► RequestQueue::Priority(PriorityQueue)
//!                                                      RequestQueue::RateLimiting(RateLimitingQueue)
//! ```
//!
//! Every call the controller and its source make goes through [`RequestQueue`]'s methods, so
//! the worker loop is one loop for both. For the rate-limiting queue they do what upstream's
//! `priorityQueueWrapper` does:
//!
//! | call | [`PriorityQueue`] | [`RateLimitingQueue`] (upstream's wrapper) |
//! |---|---|---|
//! | `add_with_opts` | as documented there | `rate_limited` → `add_rate_limited`; else `after > 0` → `add_after`; else `add`. The priority is dropped |
//! | `get_with_priority` | the key and its priority | the key and priority 0 |
//! | `done` (a [`Claim`]'s drop) | unlocks | `done` |
//! | `forget`, `num_requeues` | the limiter | the limiter |
//! | `shut_down` | no drain | getters drain what is queued first |
//! | `len` | ready keys, held ones included | queued keys |
//!
//! Experiments may reach either queue itself ([`RequestQueue::as_priority`],
//! [`RequestQueue::as_rate_limiting`]).
//!
//! # Invariants
//!
//! None beyond each queue's own: every method dispatches to the queue it holds.
//!
//! # Concurrency
//!
//! Each queue's own (one lock each, never held across an await). Cloning shares the queue.
//!
//! # Differences from upstream
//!
//! - Upstream builds the queue when the controller starts; here it is built with the
//!   controller (the source needs it to register its handler).
//! - Upstream's interface is open (any `NewQueue`); here it is one of the two queues.

use std::{sync::Arc, time::Duration};

use super::{
    Request,
    priorityqueue::{AddOpts, Opts, Priority, PriorityQueue, Provider},
    release::{QueueKind, Release},
};
use crate::workqueue::{
    BuildError, Claim, ClaimQueue, MetricsProvider, QueueConfig, RateLimiter, RateLimitingQueue,
};

/// A controller's queue of [`Request`]s: either kind, with one interface.
#[derive(Debug, Clone)]
pub enum RequestQueue {
    /// client-go's rate-limiting queue (upstream's `priorityQueueWrapper`: priorities
    /// ignored, handed out at 0).
    RateLimiting(RateLimitingQueue<Request>),
    /// controller-runtime's priority queue.
    Priority(PriorityQueue<Request>),
}

impl RequestQueue {
    /// A queue of `kind` called `name`, with `limiter` and, if given, metrics to `provider`
    /// (upstream's default `NewQueue`). Needs a tokio runtime.
    pub fn new(
        kind: QueueKind,
        name: &str,
        limiter: Box<dyn RateLimiter<Request>>,
        provider: Option<Provider>,
    ) -> Result<Self, BuildError> {
        Ok(match kind {
            QueueKind::RateLimiting => {
                let config = QueueConfig {
                    name: name.to_owned(),
                    metrics_provider: provider.map(plain),
                };
                RequestQueue::RateLimiting(RateLimitingQueue::with_config(
                    BoxedLimiter(limiter),
                    config,
                )?)
            }
            QueueKind::Priority => {
                let opts = Opts {
                    rate_limiter: Some(Arc::from(limiter)),
                    metrics_provider: provider,
                };
                RequestQueue::Priority(PriorityQueue::with_opts(name, opts)?)
            }
        })
    }

    /// The queue a controller of `release` builds when nothing is configured: its default
    /// kind and limiter, no metrics. Needs a tokio runtime.
    pub fn for_release(release: Release) -> Result<Self, BuildError> {
        Self::new(
            release.queue_kind(),
            "",
            release.default_rate_limiter(),
            None,
        )
    }

    /// Which queue this is.
    pub fn kind(&self) -> QueueKind {
        match self {
            RequestQueue::RateLimiting(_) => QueueKind::RateLimiting,
            RequestQueue::Priority(_) => QueueKind::Priority,
        }
    }

    /// The priority queue, if this is one.
    pub fn as_priority(&self) -> Option<&PriorityQueue<Request>> {
        match self {
            RequestQueue::Priority(q) => Some(q),
            RequestQueue::RateLimiting(_) => None,
        }
    }

    /// The rate-limiting queue, if this is one.
    pub fn as_rate_limiting(&self) -> Option<&RateLimitingQueue<Request>> {
        match self {
            RequestQueue::RateLimiting(q) => Some(q),
            RequestQueue::Priority(_) => None,
        }
    }

    /// Queues `items` as `opts` says. The rate-limiting queue ignores the priority and maps
    /// the rest to `add_rate_limited`, `add_after` or `add` (upstream's wrapper).
    pub fn add_with_opts(&self, opts: AddOpts, items: impl IntoIterator<Item = Request>) {
        match self {
            RequestQueue::RateLimiting(q) => {
                for item in items {
                    if opts.rate_limited {
                        q.add_rate_limited(item);
                    } else if !opts.after.is_zero() {
                        q.add_after(item, opts.after);
                    } else {
                        q.add(item);
                    }
                }
            }
            RequestQueue::Priority(q) => q.add_with_opts(opts, items),
        }
    }

    /// Waits for a key and hands it out with its priority (always 0 from the rate-limiting
    /// queue); `None` once shut down — at once for the priority queue, once drained for the
    /// rate-limiting queue. Every `Some` must be followed by `done`, which a
    /// [`claim_with_priority`](Self::claim_with_priority) claim does when dropped.
    pub async fn get_with_priority(&self) -> Option<(Request, Priority)> {
        match self {
            RequestQueue::RateLimiting(q) => q.get().await.map(|key| (key, 0)),
            RequestQueue::Priority(q) => q.get_with_priority().await,
        }
    }

    /// [`get_with_priority`](Self::get_with_priority), as a [`Claim`] that calls `done` when
    /// dropped, and the priority.
    pub async fn claim_with_priority(&self) -> Option<(Claim<Request, RequestQueue>, Priority)> {
        let (key, priority) = self.get_with_priority().await?;
        Some((Claim::new(self.clone(), key), priority))
    }

    /// [`get_with_priority`](Self::get_with_priority) without the priority, as a [`Claim`]
    /// that calls `done` when dropped.
    pub async fn claim(&self) -> Option<Claim<Request, RequestQueue>> {
        Some(self.claim_with_priority().await?.0)
    }

    /// Returns a key from a worker.
    pub fn done(&self, request: &Request) {
        match self {
            RequestQueue::RateLimiting(q) => q.done(request),
            RequestQueue::Priority(q) => q.done(request),
        }
    }

    /// Clears `request`'s backoff history (it does not release a held key).
    pub fn forget(&self, request: &Request) {
        match self {
            RequestQueue::RateLimiting(q) => q.forget(request),
            RequestQueue::Priority(q) => q.forget(request),
        }
    }

    /// How many times `request` was rate-limited since its last forget.
    pub fn num_requeues(&self, request: &Request) -> usize {
        match self {
            RequestQueue::RateLimiting(q) => q.num_requeues(request),
            RequestQueue::Priority(q) => q.num_requeues(request),
        }
    }

    /// Keys waiting to be handed out, in each queue's own sense: the rate-limiting queue's
    /// queued keys; the priority queue's ready keys, a held key's new entry included.
    pub fn len(&self) -> usize {
        match self {
            RequestQueue::RateLimiting(q) => q.len(),
            RequestQueue::Priority(q) => q.len(),
        }
    }

    /// Whether [`len`](Self::len) is zero.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops handing out work (the rate-limiting queue hands out what is queued first).
    pub fn shut_down(&self) {
        match self {
            RequestQueue::RateLimiting(q) => q.shut_down(),
            RequestQueue::Priority(q) => q.shut_down(),
        }
    }

    /// A plain add: ready now, priority 0 (what a `Generic` source or a custom handler does).
    pub fn add(&self, request: Request) {
        self.add_with_opts(AddOpts::default(), [request]);
    }

    /// Adds `request` once `after` has passed.
    pub fn add_after(&self, request: Request, after: Duration) {
        let opts = AddOpts {
            after,
            ..AddOpts::default()
        };
        self.add_with_opts(opts, [request]);
    }

    /// Adds `request` after the limiter's delay for it (one more failure).
    pub fn add_rate_limited(&self, request: Request) {
        let opts = AddOpts {
            rate_limited: true,
            ..AddOpts::default()
        };
        self.add_with_opts(opts, [request]);
    }

    /// Keys waiting for a delay (an `add_after` or a rate-limited add) to pass.
    pub fn waiting_len(&self) -> usize {
        match self {
            RequestQueue::RateLimiting(q) => q.waiting_len(),
            RequestQueue::Priority(q) => q.waiting_len(),
        }
    }

    /// Whether the queue has been shut down.
    pub fn shutting_down(&self) -> bool {
        match self {
            RequestQueue::RateLimiting(q) => q.shutting_down(),
            RequestQueue::Priority(q) => q.shutting_down(),
        }
    }

    /// Shuts the queue down; the rate-limiting queue then waits until no key is held, the
    /// priority queue does not wait (upstream: "the draining functionality is not used by
    /// controller-runtime").
    pub async fn shut_down_with_drain(&self) {
        match self {
            RequestQueue::RateLimiting(q) => q.shut_down_with_drain().await,
            RequestQueue::Priority(q) => q.shut_down_with_drain(),
        }
    }
}

impl ClaimQueue<Request> for RequestQueue {
    fn release(&self, item: &Request) {
        self.done(item);
    }
}

/// A workqueue provider from either kind: a per-priority provider is one too.
fn plain(provider: Provider) -> Arc<dyn MetricsProvider> {
    match provider {
        Provider::Plain(p) => p,
        Provider::WithPriority(p) => p,
    }
}

/// A boxed limiter as the sized limiter `RateLimitingQueue` takes.
struct BoxedLimiter(Box<dyn RateLimiter<Request>>);

impl RateLimiter<Request> for BoxedLimiter {
    fn when(&self, item: &Request) -> Duration {
        self.0.when(item)
    }
    fn forget(&self, item: &Request) {
        self.0.forget(item)
    }
    fn num_requeues(&self, item: &Request) -> usize {
        self.0.num_requeues(item)
    }
}
