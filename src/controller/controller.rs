//! The controller: an informer's events in, keys through a priority or rate-limiting queue,
//! reconciles out.
//! Follows controller-runtime's `pkg/internal/controller/controller.go` (the worker loop,
//! `Start`, `Reconcile`) and `pkg/internal/source/kind.go` (the cache-sync gate, which waits
//! with client-go's 100 ms `WaitForCacheSync` poll), at v0.22.5, v0.24.1 and v0.25.3:
//! [`Release`] picks between them. The informer side (`event_handler.go`) is
//! the private `controller::source` module.
//!
//! ```text
//!  SharedIndexInformer ─on_add/on_update/on_delete─► Event ─predicates─► EventHandler
//!        │ (indexer written first)                                         │ Request
//!        ▼                                                                 ▼
//!     indexer ◄── Context::get(&request) ── worker × N ◄─claim── RequestQueue
//!                                             │            (request, priority)  (priority queue
//!                                             │                                  or rate-limiting)
//!                                             └─ decide(result) ─► forget / add_with_opts
//!                                                  {after | rate_limited, priority}, then done
//!
//!  run:  sync gate (Release::sync_gate) ─► workers ─► stop: cancel contexts, shut the queue
//!        down; V0_22 workers drain what is queued, V0_24+ workers stop ─► wait for workers
//! ```
//!
//! # Invariants
//! 1. Every key a worker takes is released (`done`) exactly once, whatever the reconciler does
//!    (returns, errors, panics): the worker holds a [`Claim`], whose drop is the `done`.
//! 2. The queue actions for a result are exactly those of [`decide`], applied while the key
//!    is still held, so `done` runs after any forget or re-add (upstream's deferred `Done`).
//!    Every re-add is at [`Release::requeue_priority`]: the priority the key was handed out
//!    with, unless the result sets one.
//! 3. A reconciler never sees an event: it gets a [`Request`] and a [`Context`] whose only
//!    view of the object is the informer's indexer.
//! 4. No two workers hold the same request at once (the queue's processing set).
//! 5. Once the controller stops — [`Controller::shutdown`], `run`'s stop future, `run`'s
//!    future dropped, or its informer crashed — every reconcile context is cancelled and the
//!    queue is shut down. No reconcile is abandoned at an `.await`: workers run on their own
//!    tasks, and a dropped `run` leaves them to finish as a stopped controller does. Only
//!    [`Controller::abort`], a modelled process kill, abandons them.
//!
//! # Concurrency
//! Workers are tokio tasks, one per `max_concurrent_reconciles`, each looping claim →
//! reconcile → decide → done. The counters in [`ControllerMetrics`] are atomics; no lock is
//! held across an await. Cancellation is one tokio-util `CancellationToken` per controller,
//! with a child per reconcile.
//!
//! # Differences from upstream
//! - Dropping `run`'s future is the port's `ctx` cancellation: the workers are left running
//!   (detached) until they stop as after [`Controller::shutdown`]; nothing waits for them.
//! - An event handler panic that crashes the informer ([`HandlerPanic::Crash`], upstream's
//!   default) ends the process upstream. Here the informer stops and re-raises it, and a
//!   controller fed by it stops: `run` returns [`ControllerError::InformerCrashed`], while
//!   waiting for the cache or after its workers have stopped.
//! - An unrecovered reconciler panic (`recover_panic(false)`) also ends the process upstream.
//!   Here `run` stops the controller, aborts the other workers' reconciles and resumes the
//!   panic.
//! - The queue is built with the controller, not when it starts ([`RequestQueue`]).
//! - No reconcile IDs, loggers, leader election, warm-up or reconcile-time histogram.
//! - Only one source (the informer of the reconciled kind); upstream allows many.
//!
//! [`HandlerPanic::Crash`]: crate::cache::HandlerPanic::Crash

use std::{
    future::Future,
    panic::AssertUnwindSafe,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use futures::{FutureExt, future::BoxFuture};
use parking_lot::Mutex;
use tokio::{
    task::{AbortHandle, JoinSet},
    time::Instant,
};
use tokio_util::sync::CancellationToken;

use super::{
    Outcome, ReconcileError, Request,
    context::Context,
    handler::{EnqueueRequestForObject, EventHandler},
    metrics::{ControllerMetrics, MetricsSnapshot, ResultLabel},
    predicate::Predicate,
    priorityqueue::{AddOpts, Priority, Provider},
    queue::RequestQueue,
    release::{Release, SyncGate},
    source::Source,
};
use crate::{
    cache::{
        HandlerRegistration, InformerError, ListerWatcher, Object, SharedIndexInformer, Store,
        panic_message, wait_for_cache_sync,
    },
    klog,
    workqueue::{BuildError, Claim, RateLimiter},
};

/// One queue call the controller makes for a result, in the order it makes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Action {
    /// `queue.forget(req)`: clear the backoff history.
    Forget,
    /// `queue.add_after(req, d)`: look again after `d`, not rate-limited.
    AddAfter(Duration),
    /// `queue.add_rate_limited(req)`: look again after the limiter's backoff.
    AddRateLimited,
}

impl Action {
    /// The add this action makes at `priority` (upstream's `AddWithOpts{…, Priority}`); `None`
    /// for [`Action::Forget`]. A rate-limiting queue maps it back to `add_after` or
    /// `add_rate_limited` and drops the priority.
    pub fn opts(self, priority: Priority) -> Option<AddOpts> {
        let priority = Some(priority);
        match self {
            Action::Forget => None,
            Action::AddAfter(after) => Some(AddOpts {
                after,
                priority,
                ..AddOpts::default()
            }),
            Action::AddRateLimited => Some(AddOpts {
                rate_limited: true,
                priority,
                ..AddOpts::default()
            }),
        }
    }
}

/// The queue calls for one reconcile's outcome (upstream `reconcileHandler`, the same at
/// v0.22 and v0.24). The `done` that follows is not listed: it always happens (I1).
///
/// | outcome | actions | label |
/// |---|---|---|
/// | terminal error | none: no requeue, and no forget | error |
/// | other error (result ignored) | add_rate_limited | error |
/// | `requeue_after > 0` (wins over `requeue`) | forget, add_after | requeue_after |
/// | `requeue` | add_rate_limited, **no** forget | requeue |
/// | otherwise | forget | success |
pub fn decide(outcome: &Outcome) -> (ResultLabel, Vec<Action>) {
    match outcome {
        Err(e) if e.is_terminal() => (ResultLabel::Error, vec![]),
        Err(_) => (ResultLabel::Error, vec![Action::AddRateLimited]),
        Ok(r) if !r.requeue_after.is_zero() => (
            ResultLabel::RequeueAfter,
            vec![Action::Forget, Action::AddAfter(r.requeue_after)],
        ),
        Ok(r) if r.requeue => (ResultLabel::Requeue, vec![Action::AddRateLimited]),
        Ok(_) => (ResultLabel::Success, vec![Action::Forget]),
    }
}

/// The user's code: given a request and the cache, drive the world towards the object.
pub trait Reconciler<K>: Send + Sync + 'static {
    /// Reconciles one object.
    fn reconcile(&self, request: Request, ctx: Context<K>) -> BoxFuture<'static, Outcome>;
}

impl<K, F, Fut> Reconciler<K> for F
where
    F: Fn(Request, Context<K>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    fn reconcile(&self, request: Request, ctx: Context<K>) -> BoxFuture<'static, Outcome> {
        Box::pin(self(request, ctx))
    }
}

/// Why a controller could not be built or run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControllerError {
    /// Upstream: "must specify Name for Controller".
    #[error("must specify a name for the controller")]
    NoName,
    /// The informer refused the handler (it has stopped).
    #[error("cannot watch: {0}")]
    Watch(#[source] InformerError),
    /// Building the queue failed (no tokio runtime).
    #[error("cannot build the queue: {0}")]
    Queue(#[source] BuildError),
    /// The cache did not sync in time (upstream's `CacheSyncTimeout`).
    #[error("timed out after {0:?} waiting for the cache to sync")]
    CacheSyncTimeout(Duration),
    /// `run` was called twice (upstream: "controller was started more than once").
    #[error("controller was started more than once")]
    AlreadyStarted,
    /// An event handler of the controller's informer panicked under
    /// [`HandlerPanic::Crash`](crate::cache::HandlerPanic::Crash): the
    /// informer stopped, so the controller did too (upstream: the process crashed).
    #[error("the informer crashed: an event handler panicked: {0}")]
    InformerCrashed(String),
}

/// How [`Controller::run`] waits for its informer's cache before starting workers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SyncWait {
    /// controller-runtime's: its `Kind` source waits with client-go's `WaitForCacheSync`,
    /// which looks at once and then every 100 ms (controller-runtime v0.25.3
    /// `pkg/internal/source/kind.go`; client-go v0.37.2 `tools/cache/shared_informer.go`). A
    /// cache that syncs just after the first look is waited for until the next tick: a cold
    /// start takes at least 100 ms.
    #[default]
    Poll,
    /// client-go v0.37's `WaitFor` on the `HasSyncedChecker`s of the informer and of the
    /// controller's handler registration: each wait ends when its sync happens. **A
    /// difference from controller-runtime**, which the caller opts into: no pinned release's
    /// `Kind` source waits this way. What the workers see once they start is the same.
    DoneChecker,
}

/// How to build a [`Controller`]. Defaults are controller-runtime's, at [`Release::V0_25`].
pub struct Builder<K> {
    name: String,
    release: Release,
    max_concurrent_reconciles: usize,
    recover_panic: bool,
    cache_sync_timeout: Duration,
    sync_wait: SyncWait,
    reconciliation_timeout: Option<Duration>,
    predicates: Vec<Box<dyn Predicate<K>>>,
    handler: Box<dyn EventHandler<K>>,
    /// `None`: the release's default ([`Release::queue_kind`]).
    use_priority_queue: Option<bool>,
    /// `None`: the queue kind's default ([`QueueKind::default_rate_limiter`]).
    ///
    /// [`QueueKind::default_rate_limiter`]: super::QueueKind::default_rate_limiter
    rate_limiter: Option<Box<dyn RateLimiter<Request>>>,
    queue_metrics: Option<Provider>,
}

impl<K: Object + Clone> Builder<K> {
    /// Which controller-runtime release to follow (default [`Release::V0_25`]); see
    /// [`Release`] for what it changes.
    pub fn release(mut self, release: Release) -> Self {
        self.release = release;
        self
    }
    /// Whether to build controller-runtime's priority queue (upstream `UsePriorityQueue`;
    /// default: the release's, true from v0.23). The default rate limiter follows it.
    pub fn use_priority_queue(mut self, on: bool) -> Self {
        self.use_priority_queue = Some(on);
        self
    }
    /// Workers (upstream `MaxConcurrentReconciles`, default 1; 0 is raised to 1).
    pub fn max_concurrent_reconciles(mut self, n: usize) -> Self {
        self.max_concurrent_reconciles = n.max(1);
        self
    }
    /// Whether a panicking reconciler becomes an [`ReconcileError::Panic`] (default true) or takes the
    /// worker down with it (the key is still released, I1). Counted either way.
    pub fn recover_panic(mut self, on: bool) -> Self {
        self.recover_panic = on;
        self
    }
    /// How long `run` waits for the cache (default 2 min).
    pub fn cache_sync_timeout(mut self, d: Duration) -> Self {
        self.cache_sync_timeout = d;
        self
    }
    /// How `run` waits for the cache: [`SyncWait::Poll`], controller-runtime's, by default.
    pub fn sync_wait(mut self, wait: SyncWait) -> Self {
        self.sync_wait = wait;
        self
    }
    /// Each reconcile's deadline (upstream `ReconciliationTimeout`; default none, and zero
    /// means none). When it passes, the reconcile's [`Context`] is cancelled with
    /// [`ContextError::DeadlineExceeded`](super::ContextError::DeadlineExceeded); the
    /// reconcile is *not* stopped, and what it returns is handled as usual.
    pub fn reconciliation_timeout(mut self, d: Duration) -> Self {
        self.reconciliation_timeout = Some(d).filter(|d| !d.is_zero());
        self
    }
    /// Adds a predicate; an event must pass all of them.
    pub fn with_predicate(mut self, p: impl Predicate<K> + 'static) -> Self {
        self.predicates.push(Box::new(p));
        self
    }
    /// Replaces [`EnqueueRequestForObject`] with another handler.
    pub fn with_handler(mut self, h: impl EventHandler<K> + 'static) -> Self {
        self.handler = Box::new(h);
        self
    }
    /// Replaces the default limiter (exponential alone for the priority queue; with the
    /// token bucket for the rate-limiting queue: [`QueueKind::default_rate_limiter`]).
    ///
    /// [`QueueKind::default_rate_limiter`]: super::QueueKind::default_rate_limiter
    pub fn with_rate_limiter(mut self, l: impl RateLimiter<Request> + 'static) -> Self {
        self.rate_limiter = Some(Box::new(l));
        self
    }
    /// Sends the queue's metrics to `provider`, under the controller's name. A
    /// [`Provider::WithPriority`] gives the priority queue its depth per priority (what
    /// controller-runtime's own provider does); the rate-limiting queue uses either as a
    /// plain workqueue provider.
    pub fn with_queue_metrics(mut self, provider: Provider) -> Self {
        self.queue_metrics = Some(provider);
        self
    }

    /// Builds the controller and registers its handler with `informer` (upstream
    /// `Watch(source.Kind(...))`). Needs a tokio runtime (the queue's delay loop).
    pub fn build<L: ListerWatcher<K>>(
        self,
        informer: &SharedIndexInformer<K, L>,
        reconciler: impl Reconciler<K>,
    ) -> std::result::Result<Controller<K>, ControllerError> {
        if self.name.is_empty() {
            return Err(ControllerError::NoName);
        }
        let kind = match self.use_priority_queue {
            Some(true) => super::QueueKind::Priority,
            Some(false) => super::QueueKind::RateLimiting,
            None => self.release.queue_kind(),
        };
        let limiter = self
            .rate_limiter
            .unwrap_or_else(|| kind.default_rate_limiter());
        let queue = RequestQueue::new(kind, &self.name, limiter, self.queue_metrics)
            .map_err(ControllerError::Queue)?;
        let metrics = Arc::new(ControllerMetrics::default());
        let source = Source {
            predicates: self.predicates,
            handler: self.handler,
            queue: queue.clone(),
            metrics: metrics.clone(),
        };
        let registration = informer
            .add_event_handler(source)
            .map_err(ControllerError::Watch)?;
        Ok(Controller {
            inner: Arc::new(Inner {
                name: self.name,
                release: self.release,
                max_concurrent_reconciles: self.max_concurrent_reconciles,
                recover_panic: self.recover_panic,
                cache_sync_timeout: self.cache_sync_timeout,
                sync_wait: self.sync_wait,
                reconciliation_timeout: self.reconciliation_timeout,
                queue,
                indexer: informer.indexer().clone(),
                reconciler: Arc::new(reconciler),
                registration,
                metrics,
                started: AtomicBool::new(false),
                stop: CancellationToken::new(),
                workers: Mutex::new(vec![]),
            }),
        })
    }
}

/// A controller for objects of kind `K`. Build it with [`Controller::builder`], then
/// [`run`](Controller::run) it while its informer runs. Cloning shares the controller.
pub struct Controller<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for Controller<K> {
    fn clone(&self) -> Self {
        Controller {
            inner: self.inner.clone(),
        }
    }
}

struct Inner<K> {
    name: String,
    release: Release,
    max_concurrent_reconciles: usize,
    recover_panic: bool,
    cache_sync_timeout: Duration,
    sync_wait: SyncWait,
    reconciliation_timeout: Option<Duration>,
    queue: RequestQueue,
    indexer: Store<K>,
    reconciler: Arc<dyn Reconciler<K>>,
    registration: HandlerRegistration,
    metrics: Arc<ControllerMetrics>,
    started: AtomicBool,
    /// The controller's `ctx`: cancelled when it stops (keeps I5); each reconcile's context
    /// is a child of it.
    stop: CancellationToken,
    /// The workers' tasks, for [`Controller::abort`] only.
    workers: Mutex<Vec<AbortHandle>>,
}

type Held = Claim<Request, RequestQueue>;

impl<K: Object + Clone> Controller<K> {
    /// A builder with controller-runtime's defaults: [`Release::V0_25`] and so its priority
    /// queue with the exponential limiter, 1 worker, panics recovered, a 2 min cache sync
    /// timeout waited for with [`SyncWait::Poll`], no reconciliation timeout, [`EnqueueRequestForObject`], no predicates, no
    /// queue metrics.
    pub fn builder(name: impl Into<String>) -> Builder<K> {
        Builder {
            name: name.into(),
            release: Release::default(),
            max_concurrent_reconciles: 1,
            recover_panic: true,
            cache_sync_timeout: Duration::from_secs(120),
            sync_wait: SyncWait::Poll,
            reconciliation_timeout: None,
            predicates: vec![],
            handler: Box::new(EnqueueRequestForObject),
            use_priority_queue: None,
            rate_limiter: None,
            queue_metrics: None,
        }
    }

    /// The controller's name (also its queue's).
    pub fn name(&self) -> &str {
        &self.inner.name
    }
    /// The release it follows.
    pub fn release(&self) -> Release {
        self.inner.release
    }
    /// The queue, for experiments that watch it (or add to it, like a `Generic` source).
    pub fn queue(&self) -> &RequestQueue {
        &self.inner.queue
    }
    /// The controller's counters.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.inner.metrics.snapshot()
    }

    /// Stops the controller (upstream: `Start`'s context is cancelled): every reconcile's
    /// [`Context`] is cancelled and the queue is shut down. With the rate-limiting queue
    /// ([`Release::V0_22`]'s default) the workers then take the keys still queued (their
    /// contexts already cancelled) until it is empty; with the priority queue
    /// ([`Release::V0_24`]'s) they take no more. [`run`](Controller::run) returns
    /// once every worker has finished its reconcile (keeps I5).
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }

    /// Kills the controller the way a process kill would, for experiments that model one:
    /// [`shutdown`](Self::shutdown), then every worker's task is aborted, so each reconcile in
    /// flight is dropped at whatever `.await` it had reached and never returns. The keys they
    /// held are released (their claims drop) but not re-queued. Unlike `shutdown`, this breaks
    /// I5's "no reconcile is abandoned" on purpose.
    pub fn abort(&self) {
        self.inner.shutdown();
        for worker in self.inner.workers.lock().drain(..) {
            worker.abort();
        }
    }

    /// Waits for the cache to sync (what "synced" means depends on [`Release::sync_gate`]),
    /// then runs the workers (one tokio task each) until [`shutdown`](Self::shutdown), `stop`
    /// completes, or the informer crashes, and waits for them (upstream `Start`). A stop while
    /// waiting for the cache still starts the workers, as upstream does. Dropping the returned
    /// future stops the controller too, and leaves its workers to finish on their own.
    /// With `recover_panic(false)`, a reconciler's panic is resumed here.
    pub async fn run(
        &self,
        stop: impl Future<Output = ()>,
    ) -> std::result::Result<(), ControllerError> {
        let inner = &self.inner;
        if inner.started.swap(true, Ordering::SeqCst) {
            return Err(ControllerError::AlreadyStarted);
        }
        let mut guard = StopOnDrop {
            inner: inner.clone(),
            workers: JoinSet::new(),
        };
        tokio::pin!(stop);
        tokio::select! {
            synced = inner.wait_for_sync() => synced?,
            _ = &mut stop => inner.shutdown(),
        }
        for w in 0..inner.max_concurrent_reconciles {
            let worker = guard.workers.spawn(Inner::worker(inner.clone(), w));
            inner.workers.lock().push(worker);
        }
        let (mut panic, mut crash) = (None, None);
        loop {
            tokio::select! {
                joined = guard.workers.join_next() => match joined {
                    None => break,
                    Some(Err(e)) if e.is_panic() => {
                        // An unrecovered reconciler panic: upstream's process is gone, so stop
                        // everything at once and re-raise.
                        inner.shutdown();
                        guard.workers.abort_all();
                        panic.get_or_insert(e.into_panic());
                    }
                    Some(_) => {}
                },
                _ = &mut stop, if !inner.stop.is_cancelled() => inner.shutdown(),
                message = inner.registration.crashed(), if crash.is_none() => {
                    inner.shutdown();
                    crash = Some(message);
                }
            }
        }
        if let Some(p) = panic {
            std::panic::resume_unwind(p);
        }
        crash.map_or(Ok(()), |m| Err(ControllerError::InformerCrashed(m)))
    }
}

/// upstream's `ActiveWorkers` gauge with its deferred decrement: down again however the
/// reconcile ends, an abort included.
struct ActiveWorker<'a>(&'a ControllerMetrics);

impl<'a> ActiveWorker<'a> {
    fn start(metrics: &'a ControllerMetrics) -> Self {
        metrics.active_workers.fetch_add(1, Ordering::SeqCst);
        ActiveWorker(metrics)
    }
}

impl Drop for ActiveWorker<'_> {
    fn drop(&mut self) {
        self.0.active_workers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Stops the controller when `run` ends or its future is dropped (keeps I5), and then leaves
/// any worker still running to finish alone instead of aborting it at an `.await`.
struct StopOnDrop<K: Object + Clone> {
    inner: Arc<Inner<K>>,
    workers: JoinSet<()>,
}

impl<K: Object + Clone> Drop for StopOnDrop<K> {
    fn drop(&mut self) {
        self.inner.shutdown();
        self.workers.detach_all();
    }
}

impl<K: Object + Clone> Inner<K> {
    fn shutdown(&self) {
        self.stop.cancel();
        self.queue.shut_down();
    }

    /// upstream's source `WaitForSync` under `CacheSyncTimeout`, per [`Release::sync_gate`]:
    /// the cache's `WaitForCacheSync`, then (v0.23+) the handler registration's. With
    /// [`SyncWait::Poll`] each is a client-go [`wait_for_cache_sync`] that looks at once and
    /// then every 100 ms; with [`SyncWait::DoneChecker`] each ends when its sync happens. A
    /// crashed informer ends the wait at once.
    async fn wait_for_sync(&self) -> std::result::Result<(), ControllerError> {
        let reg = &self.registration;
        let handler = self.release.sync_gate() == SyncGate::Handler;
        let synced = async {
            match self.sync_wait {
                SyncWait::Poll => {
                    wait_for_cache_sync(|| reg.informer_has_synced()).await;
                    if handler {
                        wait_for_cache_sync(|| reg.has_synced()).await;
                    }
                }
                SyncWait::DoneChecker => {
                    reg.wait_informer_synced().await;
                    if handler {
                        reg.wait_synced().await;
                    }
                }
            }
        };
        tokio::select! {
            biased; // a crash that has happened wins over a sync
            message = reg.crashed() => Err(ControllerError::InformerCrashed(message)),
            r = tokio::time::timeout(self.cache_sync_timeout, synced) => r
                .map_err(|_| ControllerError::CacheSyncTimeout(self.cache_sync_timeout)),
        }
    }

    /// upstream's worker goroutine: `for c.processNextWorkItem(ctx) {}`. After shutdown the
    /// rate-limiting queue still hands out what is queued, then `None`; the priority queue
    /// `None` at once.
    async fn worker(self: Arc<Self>, worker: usize) {
        while let Some((claim, priority)) = self.queue.claim_with_priority().await {
            self.process(claim, priority, worker).await;
        }
    }

    /// upstream `processNextWorkItem` + `reconcileHandler`. `claim` is dropped at the end,
    /// after the actions: that drop is the deferred `Done` (I1, I2).
    async fn process(&self, claim: Held, priority: Priority, worker: usize) {
        let request = claim.item().clone();
        let deadline = self.reconciliation_timeout.map(|d| Instant::now() + d);
        let ctx = Context::new(self.indexer.clone(), worker, &self.stop, deadline);
        let active = ActiveWorker::start(&self.metrics);
        let outcome = self.reconcile(request, ctx).await;
        drop(active);
        let outcome = match outcome {
            Ok(o) => o,
            Err(panic) => std::panic::resume_unwind(panic), // claim drops while unwinding: I1
        };
        let (label, actions) = decide(&outcome);
        if let Err(e) = &outcome {
            tracing::warn!(controller = %self.name, request = %claim.item(), error = %e, "Reconciler error");
        }
        self.metrics.record(label, &outcome);
        let priority = self.release.requeue_priority(&outcome, priority); // keeps I2
        for action in actions {
            match action.opts(priority) {
                None => self.queue.forget(claim.item()),
                Some(opts) => self.queue.add_with_opts(opts, [claim.item().clone()]),
            }
        }
        drop(claim); // Done (keeps I1, after the actions: I2)
    }

    /// upstream `Controller.Reconcile`: runs the reconciler under its deadline, counts every
    /// panic, and turns one into [`ReconcileError::Panic`] when `recover_panic` is on; otherwise hands
    /// it back to be resumed. The deadline only cancels the context: the reconciler's return
    /// value still decides.
    async fn reconcile(
        &self,
        request: Request,
        ctx: Context<K>,
    ) -> std::result::Result<Outcome, Box<dyn std::any::Any + Send>> {
        let reconciler = self.reconciler.clone();
        let deadline = ctx.deadline();
        let timer = ctx.clone();
        // The call itself may panic before returning a future: catch both.
        let run = AssertUnwindSafe(async move { reconciler.reconcile(request, ctx).await });
        let run = run.catch_unwind();
        tokio::pin!(run);
        let result = match deadline {
            None => run.await,
            Some(at) => tokio::select! {
                biased;
                r = &mut run => r,
                _ = tokio::time::sleep_until(at) => {
                    timer.expire();
                    run.await
                }
            },
        };
        match result {
            Ok(outcome) => {
                if timer.err() == Some(super::ContextError::DeadlineExceeded)
                    && self.release.counts_reconcile_timeouts()
                {
                    self.metrics.timed_out();
                }
                Ok(outcome)
            }
            Err(panic) => {
                self.metrics.panicked(); // counted before RecoverPanic is looked at
                let message = panic_message(&*panic);
                if self.recover_panic {
                    // utilruntime.PanicHandlers: logPanic
                    klog::error(
                        "Observed a panic",
                        None,
                        &[("panic", message.as_str().into())],
                    );
                    Ok(Err(ReconcileError::Panic(message)))
                } else {
                    tracing::info!("Observed a panic in reconciler: {message}");
                    Err(panic)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The result table of `reconcileHandler`, as a pure function.
    use super::*;
    use crate::controller::ReconcileResult;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn decide_follows_the_result_table() {
        use Action::*;
        let cases: Vec<(Outcome, ResultLabel, Vec<Action>)> = vec![
            (
                Ok(ReconcileResult::done()),
                ResultLabel::Success,
                vec![Forget],
            ),
            (
                Ok(ReconcileResult::requeue_after(ms(50))),
                ResultLabel::RequeueAfter,
                vec![Forget, AddAfter(ms(50))],
            ),
            (
                Ok(ReconcileResult::requeue()),
                ResultLabel::Requeue,
                vec![AddRateLimited],
            ),
            (
                Ok(ReconcileResult {
                    requeue: true,
                    ..ReconcileResult::requeue_after(ms(7))
                }),
                ResultLabel::RequeueAfter,
                vec![Forget, AddAfter(ms(7))],
            ),
            (
                Err(ReconcileError::retry("x")),
                ResultLabel::Error,
                vec![AddRateLimited],
            ),
            (
                Err(ReconcileError::Panic("p".into())),
                ResultLabel::Error,
                vec![AddRateLimited],
            ),
            (
                Err(ReconcileError::terminal("x")),
                ResultLabel::Error,
                vec![],
            ),
        ];
        for (outcome, label, actions) in cases {
            assert_eq!(decide(&outcome), (label, actions), "for {outcome:?}");
        }
    }

    #[test]
    fn requeue_never_forgets_so_repeated_requeues_back_off() {
        let (_, actions) = decide(&Ok(ReconcileResult::requeue()));
        assert!(!actions.contains(&Action::Forget));
    }

    #[test]
    fn forget_always_comes_before_the_delayed_add() {
        let (_, actions) = decide(&Ok(ReconcileResult::requeue_after(ms(1))));
        assert_eq!(actions.first(), Some(&Action::Forget));
    }
}
