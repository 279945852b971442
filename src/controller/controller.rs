//! The controller: an informer's events in, keys through a rate-limiting queue, reconciles out.
//! Follows controller-runtime v0.22's `pkg/internal/controller/controller.go` (the worker loop)
//! and `pkg/internal/source/event_handler.go` (informer callbacks to events).
//!
//! ```text
//!  SharedIndexInformer ─on_add/on_update/on_delete─► Event ─predicates─► EventHandler
//!        │ (indexer written first)                                         │ Request
//!        ▼                                                                 ▼
//!     indexer ◄── Context::get(&request) ── worker × N ◄─claim── RateLimitingQueue<Request>
//!                                             │
//!                                             └─ decide(result) ─► forget / add_after /
//!                                                                  add_rate_limited, then done
//! ```
//!
//! # Invariants
//! 1. Every key a worker takes is released (`done`) exactly once, whatever the reconciler does
//!    (returns, errors, panics): the worker holds a [`Claim`], whose drop is the `done`.
//! 2. The queue actions for a result are exactly those of [`decide`], applied while the key
//!    is still held, so `done` runs after any forget or re-add (upstream's deferred `Done`).
//! 3. A reconciler never sees an event: it gets a [`Request`] and a [`Context`] whose only
//!    view of the object is the informer's indexer.
//! 4. No two workers hold the same request at once (the queue's processing set).
//!
//! # Concurrency
//! Workers are tokio tasks, one per `max_concurrent_reconciles`, each looping claim →
//! reconcile → decide → done. The counters in [`ControllerMetrics`] are atomics; no lock is
//! held across an await.
//!
//! # Differences from upstream
//! - On shutdown upstream shuts the queue down and its workers keep draining queued items
//!   (with a cancelled context); here workers stop taking work at once and only finish the
//!   reconciles already running. The keys left in the queue are lost either way.
//! - No reconcile IDs, loggers, leader election, warm-up or reconciliation timeout.
//! - Only one source (the informer of the reconciled kind); upstream allows many.

use std::{
    future::Future,
    panic::AssertUnwindSafe,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use futures::{FutureExt, future::BoxFuture};
use tokio::sync::watch;

use super::{
    Error, Event, Request, Result as ReconcileResult,
    handler::{EnqueueRequestForObject, EventHandler},
    predicate::Predicate,
};
use crate::{
    cache::{
        Object, Store,
        lister_watcher::ListerWatcher,
        shared_informer::{
            DeletedObject, HandlerRegistration, ResourceEventHandler, SharedIndexInformer,
        },
    },
    workqueue::{
        Claim, QueueConfig, RateLimiter, RateLimitingQueue, default_controller_rate_limiter,
    },
};

/// What a reconcile returns.
pub type Outcome = std::result::Result<ReconcileResult, Error>;

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

/// The `result` label of upstream's `controller_runtime_reconcile_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum ResultLabel {
    /// No error, nothing asked.
    Success,
    /// No error, `requeue_after > 0`.
    RequeueAfter,
    /// No error, `requeue` set.
    Requeue,
    /// Any error, terminal or not.
    Error,
}

/// The queue calls for one reconcile's outcome (upstream `reconcileHandler`, v0.22). The
/// `done` that follows is not listed: it always happens (I1).
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

/// What a reconciler can see besides the request: the informer's cache, and which worker it
/// runs on. There is deliberately no event in here (keeps I3).
pub struct Context<K> {
    indexer: Store<K>,
    worker: usize,
}

impl<K> Clone for Context<K> {
    fn clone(&self) -> Self {
        Context {
            indexer: self.indexer.clone(),
            worker: self.worker,
        }
    }
}

impl<K: Object> Context<K> {
    /// The object the request names, as the cache holds it *now*; `None` if it is gone.
    pub fn get(&self, request: &Request) -> Option<Arc<K>> {
        self.indexer.get_by_key(&request.key())
    }
    /// The whole cache, for reconcilers that read other objects.
    pub fn indexer(&self) -> &Store<K> {
        &self.indexer
    }
    /// Which worker (0-based) runs this reconcile.
    pub fn worker(&self) -> usize {
        self.worker
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

/// Counters a controller keeps (upstream's `controller_runtime_*` metrics for one
/// controller). Read them with [`ControllerMetrics::snapshot`].
#[derive(Debug, Default)]
pub struct ControllerMetrics {
    events: AtomicU64,
    enqueued: AtomicU64,
    success: AtomicU64,
    requeue_after: AtomicU64,
    requeue: AtomicU64,
    errors: AtomicU64,
    terminal_errors: AtomicU64,
    panics: AtomicU64,
    active_workers: AtomicU64,
}

/// A copy of a controller's counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct MetricsSnapshot {
    /// Informer callbacks that reached the controller (before predicates).
    pub events: u64,
    /// Requests the handler added to the queue (after predicates; before coalescing).
    pub enqueued: u64,
    /// `reconcile_total{result="success"}`.
    pub success: u64,
    /// `reconcile_total{result="requeue_after"}`.
    pub requeue_after: u64,
    /// `reconcile_total{result="requeue"}`.
    pub requeue: u64,
    /// `reconcile_errors_total` (= `reconcile_total{result="error"}`), terminal ones included.
    pub errors: u64,
    /// `terminal_reconcile_errors_total`.
    pub terminal_errors: u64,
    /// `reconcile_panics_total`.
    pub panics: u64,
    /// `active_workers`: reconciles running now.
    pub active_workers: u64,
}

impl MetricsSnapshot {
    /// Every reconcile that finished, whatever its result.
    pub fn reconciles(&self) -> u64 {
        self.success + self.requeue_after + self.requeue + self.errors
    }
}

impl ControllerMetrics {
    /// The counters now.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let l = |c: &AtomicU64| c.load(Ordering::SeqCst);
        MetricsSnapshot {
            events: l(&self.events),
            enqueued: l(&self.enqueued),
            success: l(&self.success),
            requeue_after: l(&self.requeue_after),
            requeue: l(&self.requeue),
            errors: l(&self.errors),
            terminal_errors: l(&self.terminal_errors),
            panics: l(&self.panics),
            active_workers: l(&self.active_workers),
        }
    }

    fn record(&self, label: ResultLabel, outcome: &Outcome) {
        let c = match label {
            ResultLabel::Success => &self.success,
            ResultLabel::RequeueAfter => &self.requeue_after,
            ResultLabel::Requeue => &self.requeue,
            ResultLabel::Error => &self.errors,
        };
        c.fetch_add(1, Ordering::SeqCst);
        match outcome {
            Err(e) if e.is_terminal() => {
                self.terminal_errors.fetch_add(1, Ordering::SeqCst);
            }
            Err(Error::Panic(_)) => {
                self.panics.fetch_add(1, Ordering::SeqCst);
            }
            _ => {}
        }
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
    Watch(String),
    /// Building the queue failed (no tokio runtime).
    #[error("cannot build the queue: {0}")]
    Queue(String),
    /// The cache did not sync in time (upstream's `CacheSyncTimeout`).
    #[error("timed out after {0:?} waiting for the cache to sync")]
    CacheSyncTimeout(Duration),
    /// `run` was called twice (upstream: "controller was started more than once").
    #[error("controller was started more than once")]
    AlreadyStarted,
}

/// How to build a [`Controller`]. Defaults are controller-runtime v0.22's.
pub struct Builder<K> {
    name: String,
    max_concurrent_reconciles: usize,
    recover_panic: bool,
    cache_sync_timeout: Duration,
    predicates: Vec<Box<dyn Predicate<K>>>,
    handler: Box<dyn EventHandler<K>>,
    rate_limiter: Box<dyn RateLimiter<Request>>,
    queue_config: QueueConfig,
}

impl<K: Object + Clone> Builder<K> {
    /// Workers (upstream `MaxConcurrentReconciles`, default 1; 0 is raised to 1).
    pub fn max_concurrent_reconciles(mut self, n: usize) -> Self {
        self.max_concurrent_reconciles = n.max(1);
        self
    }
    /// Whether a panicking reconciler becomes an [`Error::Panic`] (default true) or takes the
    /// worker down with it (the key is still released, I1).
    pub fn recover_panic(mut self, on: bool) -> Self {
        self.recover_panic = on;
        self
    }
    /// How long `run` waits for the cache (default 2 min).
    pub fn cache_sync_timeout(mut self, d: Duration) -> Self {
        self.cache_sync_timeout = d;
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
    /// Replaces the default limiter (`default_controller_rate_limiter`).
    pub fn with_rate_limiter(mut self, l: impl RateLimiter<Request> + 'static) -> Self {
        self.rate_limiter = Box::new(l);
        self
    }
    /// Sets the queue's metrics provider (its name is the controller's).
    pub fn with_queue_metrics(
        mut self,
        provider: Arc<dyn crate::workqueue::MetricsProvider>,
    ) -> Self {
        self.queue_config.metrics_provider = Some(provider);
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
        let mut queue_config = self.queue_config;
        queue_config.name = self.name.clone();
        let limiter = BoxedLimiter(self.rate_limiter);
        let queue = RateLimitingQueue::with_config(limiter, queue_config)
            .map_err(|e| ControllerError::Queue(e.to_string()))?;
        let metrics = Arc::new(ControllerMetrics::default());
        let source = Source {
            predicates: self.predicates,
            handler: self.handler,
            queue: queue.clone(),
            metrics: metrics.clone(),
        };
        let registration = informer
            .add_event_handler(source)
            .map_err(|e| ControllerError::Watch(e.to_string()))?;
        Ok(Controller {
            inner: Arc::new(Inner {
                name: self.name,
                max_concurrent_reconciles: self.max_concurrent_reconciles,
                recover_panic: self.recover_panic,
                cache_sync_timeout: self.cache_sync_timeout,
                queue,
                indexer: informer.indexer().clone(),
                reconciler: Arc::new(reconciler),
                registration,
                metrics,
                started: AtomicBool::new(false),
                stop: watch::channel(false).0,
            }),
        })
    }
}

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

/// The informer handler: callbacks → [`Event`] → predicates → handler → queue (upstream's
/// `EventHandler` adapter in `pkg/internal/source`).
struct Source<K> {
    predicates: Vec<Box<dyn Predicate<K>>>,
    handler: Box<dyn EventHandler<K>>,
    queue: RateLimitingQueue<Request>,
    metrics: Arc<ControllerMetrics>,
}

impl<K: Object> Source<K> {
    fn deliver(&self, event: Event<K>) {
        self.metrics.events.fetch_add(1, Ordering::SeqCst);
        if !self.predicates.iter().all(|p| p.matches(&event)) {
            return;
        }
        self.handler.handle(&event, &mut |request| {
            self.metrics.enqueued.fetch_add(1, Ordering::SeqCst);
            self.queue.add(request);
        });
    }
}

impl<K: Object> ResourceEventHandler<K> for Source<K> {
    fn on_add(&self, object: Arc<K>, is_in_initial_list: bool) {
        self.deliver(Event::Create {
            object,
            is_in_initial_list,
        });
    }
    fn on_update(&self, old: Arc<K>, new: Arc<K>) {
        self.deliver(Event::Update {
            old: Some(old),
            new: Some(new),
        });
    }
    fn on_delete(&self, deleted: DeletedObject<K>) {
        let delete_state_unknown = deleted.is_tombstone();
        match deleted.object() {
            Some(object) => self.deliver(Event::Delete {
                object: object.clone(),
                delete_state_unknown,
            }),
            // Upstream drops a tombstone without an object, with an error log.
            None => tracing::error!("DeletedFinalStateUnknown without an object; dropped"),
        }
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
    max_concurrent_reconciles: usize,
    recover_panic: bool,
    cache_sync_timeout: Duration,
    queue: RateLimitingQueue<Request>,
    indexer: Store<K>,
    reconciler: Arc<dyn Reconciler<K>>,
    registration: HandlerRegistration,
    metrics: Arc<ControllerMetrics>,
    started: AtomicBool,
    /// Set to true by [`Controller::shutdown`]; workers watch it between reconciles.
    stop: watch::Sender<bool>,
}

type Held = Claim<Request, RateLimitingQueue<Request>>;

impl<K: Object + Clone> Controller<K> {
    /// A builder with controller-runtime's defaults: 1 worker, panics recovered, a 2 min cache
    /// sync timeout, [`EnqueueRequestForObject`], no predicates, and
    /// `default_controller_rate_limiter` (the v0.22 default with the classic queue).
    pub fn builder(name: impl Into<String>) -> Builder<K> {
        Builder {
            name: name.into(),
            max_concurrent_reconciles: 1,
            recover_panic: true,
            cache_sync_timeout: Duration::from_secs(120),
            predicates: vec![],
            handler: Box::new(EnqueueRequestForObject),
            rate_limiter: Box::new(default_controller_rate_limiter()),
            queue_config: QueueConfig::default(),
        }
    }

    /// The controller's name (also its queue's).
    pub fn name(&self) -> &str {
        &self.inner.name
    }
    /// The queue, for experiments that watch it (or add to it, like a `Generic` source).
    pub fn queue(&self) -> &RateLimitingQueue<Request> {
        &self.inner.queue
    }
    /// The controller's counters.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.inner.metrics.snapshot()
    }

    /// Asks a running controller to stop: workers take no more work, reconciles in flight
    /// finish, then [`run`](Controller::run) returns.
    pub fn shutdown(&self) {
        self.inner.stop.send_replace(true);
        self.inner.queue.shut_down();
    }

    /// Waits for the cache to sync, then runs the workers (one tokio task each) until
    /// [`shutdown`](Self::shutdown) or `stop` completes, and waits for in-flight reconciles
    /// (upstream `Start`). With `recover_panic(false)`, a reconciler's panic is resumed here
    /// once the other workers have stopped.
    pub async fn run(
        &self,
        stop: impl Future<Output = ()>,
    ) -> std::result::Result<(), ControllerError> {
        let inner = &self.inner;
        if inner.started.swap(true, Ordering::SeqCst) {
            return Err(ControllerError::AlreadyStarted);
        }
        tokio::time::timeout(inner.cache_sync_timeout, inner.registration.wait_synced())
            .await
            .map_err(|_| ControllerError::CacheSyncTimeout(inner.cache_sync_timeout))?;
        let mut workers = tokio::task::JoinSet::new();
        for w in 0..inner.max_concurrent_reconciles {
            workers.spawn(Inner::worker(inner.clone(), w));
        }
        let mut panic = None;
        tokio::pin!(stop);
        loop {
            tokio::select! {
                joined = workers.join_next() => match joined {
                    None => break,
                    Some(Err(e)) if e.is_panic() => {
                        // A worker died of an unrecovered panic: stop the others, then re-raise.
                        self.shutdown();
                        panic.get_or_insert(e.into_panic());
                    }
                    Some(_) => {}
                },
                _ = &mut stop, if !*inner.stop.borrow() => self.shutdown(),
            }
        }
        if let Some(p) = panic {
            std::panic::resume_unwind(p);
        }
        Ok(())
    }
}

impl<K: Object + Clone> Inner<K> {
    async fn worker(self: Arc<Self>, worker: usize) {
        let mut stopped = self.stop.subscribe();
        loop {
            if *stopped.borrow_and_update() {
                return;
            }
            let claim = tokio::select! {
                c = self.queue.claim() => c,
                _ = stopped.changed() => return,
            };
            let Some(claim) = claim else { return };
            if *stopped.borrow() {
                return; // dropping the claim releases the key (I1)
            }
            self.process(claim, worker).await;
        }
    }

    /// upstream `processNextWorkItem` + `reconcileHandler`. `claim` is dropped at the end,
    /// after the actions: that drop is the deferred `Done` (I1, I2).
    async fn process(&self, claim: Held, worker: usize) {
        let request = claim.item().clone();
        let ctx = Context {
            indexer: self.indexer.clone(),
            worker,
        };
        self.metrics.active_workers.fetch_add(1, Ordering::SeqCst);
        let outcome = self.reconcile(request, ctx).await;
        self.metrics.active_workers.fetch_sub(1, Ordering::SeqCst);
        let outcome = match outcome {
            Ok(o) => o,
            Err(panic) => std::panic::resume_unwind(panic), // claim drops while unwinding: I1
        };
        let (label, actions) = decide(&outcome);
        if let Err(e) = &outcome {
            tracing::warn!(controller = %self.name, request = %claim.item(), error = %e, "Reconciler error");
        }
        self.metrics.record(label, &outcome);
        for action in actions {
            match action {
                Action::Forget => claim.forget(),
                Action::AddAfter(d) => claim.add_after(d),
                Action::AddRateLimited => claim.add_rate_limited(),
            }
        }
        drop(claim); // Done (keeps I1, after the actions: I2)
    }

    /// Runs the reconciler, turning a panic into [`Error::Panic`] when `recover_panic` is on;
    /// otherwise hands the panic back to be resumed.
    async fn reconcile(
        &self,
        request: Request,
        ctx: Context<K>,
    ) -> std::result::Result<Outcome, Box<dyn std::any::Any + Send>> {
        let reconciler = self.reconciler.clone();
        // The call itself may panic before returning a future: catch both.
        let run = AssertUnwindSafe(async move { reconciler.reconcile(request, ctx).await });
        match run.catch_unwind().await {
            Ok(outcome) => Ok(outcome),
            Err(panic) if self.recover_panic => Ok(Err(Error::Panic(panic_message(&*panic)))),
            Err(panic) => Err(panic),
        }
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

#[cfg(test)]
mod tests {
    //! The result table of `reconcileHandler`, as a pure function.
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn decide_follows_the_v0_22_result_table() {
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
                    requeue_after: ms(7),
                }),
                ResultLabel::RequeueAfter,
                vec![Forget, AddAfter(ms(7))],
            ),
            (
                Err(Error::retry("x")),
                ResultLabel::Error,
                vec![AddRateLimited],
            ),
            (
                Err(Error::Panic("p".into())),
                ResultLabel::Error,
                vec![AddRateLimited],
            ),
            (Err(Error::terminal("x")), ResultLabel::Error, vec![]),
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

    #[test]
    fn panic_messages_keep_their_text() {
        assert_eq!(panic_message(&"boom"), "boom");
        assert_eq!(panic_message(&String::from("bang")), "bang");
        assert_eq!(panic_message(&42u8), "non-string panic payload");
    }
}
