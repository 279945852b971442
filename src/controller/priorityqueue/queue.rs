//! The priority queue: [`PriorityQueueCore`] behind one lock, with an add buffer and a task
//! that applies it, async get, a timer task that promotes waiting keys, the rate limiter and
//! metrics.
//!
//! Follows controller-runtime v0.25.3, `pkg/controller/priorityqueue/priorityqueue.go` (`New`,
//! `AddWithOpts`, `handleAddBuffer`, `lockedFlushAddBuffer`, `GetWithPriority`, `Done`,
//! `Forget`, `NumRequeues`, `ShutDown`, `Len`, `handleWaitingItems`,
//! `updateUnfinishedWorkLoop`); the same at v0.24.1 but for the hand-out's shutdown fix (see
//! the differences).
//!
//! # Model
//!
//! ```text
//!   PriorityQueue<T> (a cheap handle; clones share one queue)
//!     ├─ limiter: Arc<dyn RateLimiter>   forget, num_requeues (the flush asks the same one)
//!     └─ Shared
//!          ├─ lock ─► Locked { core, metrics, waiting_getters, buffer, limiter }
//!          ├─ shutdown: AtomicBool  read by an add without the lock
//!          ├─ getters: Notify   a getter that found nothing handed out waits here
//!          ├─ flush: Notify     wakes the flush task: an add was buffered, or shutdown
//!          ├─ timer: Notify     wakes the timer task: a waiting key added or moved, shutdown,
//!          │                    or the last handle dropped
//!          └─ stopped: Notify   shutdown broadcast (the 500 ms metrics loop)
//!
//!   add(k, opts)  push (opts, k) on the buffer; wake a waiting getter, and the flush task if
//!                 the buffer was empty (else the add that filled it has woken it already)
//!   flush         under the lock, for each buffered add in order: ask the limiter (a
//!                 rate-limited add), read the clock (a delay), apply it to the core
//!                 (upstream's lockedFlushAddBuffer); run by the flush task, by every get
//!                 before it looks for a key (handleReadyItems), and by len (Len)
//!   flush task:   flush, wake the getters it made work for, tell the timer if a waiting key
//!                 changed (upstream's handleAddBuffer)
//!   timer task:   promote_due(now) under the lock, wake one getter per promoted key, then sleep
//!                 until the next ready time or a wake-up (upstream's handleWaitingItems)
//! ```
//!
//! So an add takes effect when it is flushed, not when it is called: the limiter is asked, and
//! a delay starts, at the flush. A worker that calls `add_rate_limited` and then `forget` (the
//! mistake chapter 02 shows) forgets a failure that has not been counted yet; the flush counts
//! it afterwards, and `num_requeues` reads 1 once the flush task has run (upstream: once its
//! goroutine has). Under tokio's paused clock the flush runs at the same instant as the add.
//!
//! # Invariants
//!
//! The core's P1–P3 (see [`super::core`]), plus:
//!
//! 4. **P4** `waiting_getters` counts the `get` calls registered on `getters` that have not yet
//!    resumed or been dropped. A getter registers under the lock after finding nothing, so
//!    anything that makes a key available afterwards (an add, a promotion, a `done`) sees it
//!    and wakes it: no lost wake-up.
//! 5. **P5** A waiting key is promoted no earlier than its ready time by the runtime's clock
//!    (the timer task sleeps until the earliest one; an earlier key added meanwhile wakes it:
//!    a flush that changed a waiting key sets `waiting_changed`, and the flush task, which
//!    every buffered add wakes after it pushed, tells the timer).
//! 6. **P6** Buffered adds are applied in the order they were made, each exactly once, and
//!    none after shutdown (upstream drops them at the flush too).
//!
//! # Concurrency
//!
//! One lock guards the core, the metrics, the getter count and the add buffer: the
//! workqueue's test-and-set lock behind the `workqueue::sync` facade (shuttle's lock under the
//! `shuttle` feature). It is never held across an await. The rate limiter is asked at the
//! flush, under the lock, as upstream asks it under its queue lock: a limiter must not call
//! back into the queue. Metric calls are made under it, as the workqueue's are.
//! Notifications are sent after the lock is released.
//!
//! # Differences from upstream
//!
//! - The add buffer sits under the queue's one lock; upstream gives it a lock of its own, so
//!   its `AddWithOpts` never waits for a hand-out in progress. What an add does and when it
//!   takes effect (at the flush) are upstream's.
//! - An add also wakes one waiting getter, which flushes before it looks for a key; upstream's
//!   flush goroutine wakes its hand-out goroutine instead. Under the paused clock both hand the
//!   key out at the instant of the add.
//! - A getter takes its key under the lock; upstream's hand-out goroutine pushes keys to
//!   waiting getters over a channel. Which key goes next is the same. So the port never had
//!   v0.24.1's hang at shutdown (the hand-out goroutine blocked on a getter that had returned,
//!   holding the queue's lock; v0.25 selects on the shutdown channel too).
//! - The buffer holds one entry per key (upstream: one per call, with its keys) and keeps its
//!   capacity across flushes, so a plain add does not allocate; and only the add that finds it
//!   empty wakes the flush task (upstream signals its channel on every add, a send that finds
//!   it full does nothing). The flush that follows takes every add buffered before it, so the
//!   order and the moment adds take effect are upstream's.
//! - `shut_down` may be called more than once (upstream closes a channel, so a second call
//!   panics). `shut_down_with_drain` is `shut_down`, as upstream.
//! - The timer task and the metrics loop end when the queue is shut down *or* when its last
//!   handle is dropped (upstream's goroutines run until `ShutDown`).
//! - No 10 s state dump at log level 5 (`logState`).

use std::{
    hash::Hash,
    sync::{
        Arc, Weak,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use tokio::{sync::Notify, time::Instant};

use super::{
    core::{
        Entry, Priority, PriorityAdd, PriorityDone, PriorityGet, PriorityQueueCore, effective_after,
    },
    metrics::{PriorityQueueMetrics, Provider},
};
use crate::workqueue::{
    BuildError, Claim, ClaimQueue, DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY,
    ItemExponentialFailureRateLimiter, RateLimiter, UNFINISHED_WORK_UPDATE_PERIOD,
    sync::{Mutex, MutexGuard, lock},
    waiters::{Getters, wait_for},
};

/// How to add (upstream's `AddOpts`). The default is a plain add: ready now, priority 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddOpts {
    /// Ready after this delay (zero: now).
    pub after: Duration,
    /// Ask the rate limiter for a delay too; the shorter of the two wins unless `after` is zero.
    pub rate_limited: bool,
    /// The priority; `None` counts as 0. Higher is handed out first.
    pub priority: Option<Priority>,
}

/// Options for [`PriorityQueue::with_opts`] (upstream's `Opts[T]`).
pub struct Opts<T> {
    /// Used by rate-limited adds. Default: per-item exponential, 5 ms doubling up to 1000 s.
    pub rate_limiter: Option<Arc<dyn RateLimiter<T>>>,
    /// Where metrics go. None: no metrics.
    pub metrics_provider: Option<Provider>,
}

impl<T> Default for Opts<T> {
    fn default() -> Self {
        Opts {
            rate_limiter: None,
            metrics_provider: None,
        }
    }
}

/// A controller's work queue with priorities: each key is handed to at most one worker at a
/// time; higher priorities first, then first-ready first.
pub struct PriorityQueue<T> {
    shared: Arc<Shared<T>>,
    limiter: Arc<dyn RateLimiter<T>>,
}

impl<T> Clone for PriorityQueue<T> {
    fn clone(&self) -> Self {
        PriorityQueue {
            shared: self.shared.clone(),
            limiter: self.limiter.clone(),
        }
    }
}

struct Shared<T> {
    state: Mutex<Locked<T>>,
    /// Set by `shut_down`; an add reads it without the lock (upstream's `shutdown` atomic).
    shutdown: AtomicBool,
    /// Getters that found nothing to take wait here (keeps P4).
    getters: Notify,
    /// Wakes the flush task: an add was buffered (keeps P5, P6), or shutdown.
    flush: Arc<Notify>,
    /// Wakes the timer task. Shared with it so it can wait without keeping the queue alive.
    timer: Arc<Notify>,
    /// Woken once at shutdown, for the metrics loop.
    stopped: Notify,
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        self.timer.notify_one(); // the timer task finds the queue gone and ends
        self.flush.notify_one(); // and so does the flush task
    }
}

/// One buffered add of one key (upstream's `bufferItem`, one per key of a call).
struct Buffered<T> {
    opts: AddOpts,
    key: T,
}

struct Locked<T> {
    core: PriorityQueueCore<T>,
    /// Present only for a named queue with a provider.
    metrics: Option<PriorityQueueMetrics<T>>,
    /// Keeps P4.
    waiting_getters: usize,
    /// Adds not yet applied, oldest first (keeps P6). Its capacity is kept across flushes, so
    /// a steady stream of adds does not allocate.
    buffer: Vec<Buffered<T>>,
    /// A flush changed a waiting key since the flush task last looked: the timer must look
    /// again (keeps P5).
    waiting_changed: bool,
    /// Asked at the flush, for a rate-limited add.
    limiter: Arc<dyn RateLimiter<T>>,
}

/// What a flush did: how many keys it made ready.
#[derive(Default)]
struct Flushed {
    readied: usize,
}

impl<T: Eq + Hash + Clone> Locked<T> {
    fn add(&mut self, key: T, after: Duration, priority: Option<Priority>) -> PriorityAdd {
        match &mut self.metrics {
            // The clock is read only for a delay (a clock read can cost more than the add).
            None => self.core.add(key, after, priority, Instant::now, &mut ()),
            Some(m) => {
                let now = Instant::now();
                self.core.add(key, after, priority, || now, &mut m.at(now))
            }
        }
    }

    /// Applies every buffered add in order (upstream's `lockedFlushAddBuffer`; keeps P6): the
    /// limiter is asked now, and a delay counts from now. Once shut down the buffer is
    /// dropped, the limiter not asked.
    fn flush(&mut self) -> Flushed {
        let mut flushed = Flushed::default();
        if self.buffer.is_empty() {
            return flushed;
        }
        let mut buffer = std::mem::take(&mut self.buffer);
        for Buffered { opts, key } in buffer.drain(..) {
            if self.core.shutting_down() {
                break; // upstream checks before it asks the limiter; the rest are dropped
            }
            let after = if opts.rate_limited {
                effective_after(opts.after, Some(self.limiter.when(&key)))
            } else {
                opts.after
            };
            let outcome = self.add(key, after, opts.priority);
            flushed.readied += usize::from(outcome.readied());
            self.waiting_changed |= outcome.waiting_changed(); // keeps P5
        }
        self.buffer = buffer; // empty, with its capacity
        flushed
    }
}

impl<T: Eq + Hash + Clone> Getters for Locked<T> {
    type Out = Option<(T, Priority)>;

    /// `Some(Some(_))`: handed out. `Some(None)`: shut down. `None`: wait. Flushes first, as
    /// upstream's hand-out loop does.
    fn get_now(&mut self) -> Option<Option<(T, Priority)>> {
        self.flush();
        let got = match &mut self.metrics {
            None => self.core.get(&mut ()),
            Some(m) => self.core.get(&mut m.at(Instant::now())),
        };
        match got {
            PriorityGet::Item(key, priority) => Some(Some((key, priority))),
            PriorityGet::ShutDown => Some(None),
            PriorityGet::Empty => None,
        }
    }

    fn waiting_getters(&mut self) -> &mut usize {
        &mut self.waiting_getters
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> PriorityQueue<T> {
    /// A queue called `name` with the default limiter and no metrics.
    ///
    /// # Panics
    /// Outside a tokio runtime: its timer is a task. [`with_opts`](Self::with_opts) returns
    /// that as an error instead.
    pub fn new(name: &str) -> Self {
        Self::with_opts(name, Opts::default()).expect("PriorityQueue::new needs a tokio runtime")
    }

    /// A queue called `name` (upstream's `New(name, opts...)`). Metrics are recorded when the
    /// name is not empty and `opts` has a provider.
    pub fn with_opts(name: &str, opts: Opts<T>) -> Result<Self, BuildError> {
        Self::with_core(name, opts, PriorityQueueCore::new())
    }

    fn with_core(
        name: &str,
        opts: Opts<T>,
        core: PriorityQueueCore<T>,
    ) -> Result<Self, BuildError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| BuildError::NoRuntime {
            what: "a priority queue",
        })?;
        let limiter = opts.rate_limiter.unwrap_or_else(|| {
            Arc::new(ItemExponentialFailureRateLimiter::new(
                DEFAULT_BASE_DELAY,
                DEFAULT_MAX_DELAY,
            ))
        });
        let metrics = match (&opts.metrics_provider, name.is_empty()) {
            (Some(p), false) => Some(PriorityQueueMetrics::new(p, name)),
            _ => None,
        };
        let has_metrics = metrics.is_some();
        let (timer, flush) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let shared = Arc::new(Shared {
            state: Mutex::new(Locked {
                core,
                metrics,
                waiting_getters: 0,
                buffer: Vec::new(),
                waiting_changed: false,
                limiter: limiter.clone(),
            }),
            shutdown: AtomicBool::new(false),
            getters: Notify::new(),
            flush: flush.clone(),
            timer: timer.clone(),
            stopped: Notify::new(),
        });
        runtime.spawn(flush_loop(Arc::downgrade(&shared), flush));
        runtime.spawn(timer_loop(Arc::downgrade(&shared), timer));
        if has_metrics {
            let first = Instant::now() + UNFINISHED_WORK_UPDATE_PERIOD;
            runtime.spawn(update_unfinished_work_loop(Arc::downgrade(&shared), first));
        }
        Ok(PriorityQueue { shared, limiter })
    }
}

impl<T: Eq + Hash + Clone> PriorityQueue<T> {
    fn lock(&self) -> MutexGuard<'_, Locked<T>> {
        lock(&self.shared.state)
    }

    /// Queues `items` as `opts` says, each merged with its entry if it has one: the earlier
    /// ready time and the higher priority win. Dropped once shut down.
    ///
    /// The add is buffered and takes effect at the next flush (the flush task's, a get's or
    /// `len`'s, all at this instant under the paused clock): only then is the limiter asked
    /// and does a delay start (upstream's `AddWithOpts` and `lockedFlushAddBuffer`).
    pub fn add_with_opts(&self, opts: AddOpts, items: impl IntoIterator<Item = T>) {
        if self.shared.shutdown.load(Ordering::Acquire) {
            return;
        }
        // The caller's iterator runs before the lock is taken (it is user code). One key, the
        // common case, needs no vector.
        let mut items = items.into_iter();
        let Some(first) = items.next() else {
            return;
        };
        let rest: Vec<T> = items.collect();
        let mut s = self.lock();
        // A buffer that was not empty already has a flush coming: the add that made it
        // non-empty woke the flush task after its push, and that flush takes every add
        // buffered before it (keeps P5 with one wake-up per burst of adds).
        let wake_flush = s.buffer.is_empty();
        s.buffer.reserve(1 + rest.len());
        s.buffer.push(Buffered { opts, key: first }); // keeps P6
        s.buffer
            .extend(rest.into_iter().map(|key| Buffered { opts, key }));
        let wake_getter = s.waiting_getters > 0; // it flushes before it looks (keeps P4)
        drop(s);
        if wake_getter {
            self.shared.getters.notify_one();
        }
        if wake_flush {
            self.shared.flush.notify_one(); // keeps P5: the flush task looks after this push
        }
    }

    /// A plain add: ready now, priority 0 (or merged, as [`add_with_opts`](Self::add_with_opts)).
    pub fn add(&self, item: T) {
        self.add_with_opts(AddOpts::default(), [item]);
    }

    /// Adds `item` once `after` has passed.
    pub fn add_after(&self, item: T, after: Duration) {
        let opts = AddOpts {
            after,
            ..AddOpts::default()
        };
        self.add_with_opts(opts, [item]);
    }

    /// Adds `item` after the limiter's delay for it (which records one more failure).
    pub fn add_rate_limited(&self, item: T) {
        let opts = AddOpts {
            rate_limited: true,
            ..AddOpts::default()
        };
        self.add_with_opts(opts, [item]);
    }

    /// Waits for a key and locks it: the highest priority first, then the one ready first.
    /// Returns `None` at once after shutdown, even if keys are queued (no drain). Every `Some`
    /// must be followed by [`done`](Self::done); a [`Claim`] does that for you.
    pub async fn get_with_priority(&self) -> Option<(T, Priority)> {
        wait_for(&self.shared.state, &self.shared.getters).await
    }

    /// [`get_with_priority`](Self::get_with_priority) without the priority.
    pub async fn get(&self) -> Option<T> {
        self.get_with_priority().await.map(|(key, _)| key)
    }

    /// Like [`get_with_priority`](Self::get_with_priority), but the key comes back as a
    /// [`Claim`] that calls `done` when dropped.
    pub async fn claim_with_priority(&self) -> Option<(Claim<T, PriorityQueue<T>>, Priority)> {
        let (key, priority) = self.get_with_priority().await?;
        Some((Claim::new(self.clone(), key), priority))
    }

    /// Like [`claim_with_priority`](Self::claim_with_priority), without the priority.
    pub async fn claim(&self) -> Option<Claim<T, PriorityQueue<T>>> {
        Some(self.claim_with_priority().await?.0)
    }

    /// Returns `item` from a worker. An entry added for it while held can now be handed out.
    pub fn done(&self, item: &T) {
        let mut s = self.lock();
        if let Some(m) = &mut s.metrics {
            m.done(item, Instant::now());
        }
        let wake = s.core.done(item) == PriorityDone::ReleasedReady && s.waiting_getters > 0;
        drop(s);
        if wake {
            self.shared.getters.notify_one(); // keeps P4
        }
    }

    /// Clears `item`'s backoff history. It does **not** release a held item: call `done`.
    pub fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    /// How many times `item` was rate-limited since its last `forget`.
    pub fn num_requeues(&self, item: &T) -> usize {
        self.limiter.num_requeues(item)
    }

    /// Stops the queue: getters get `None` at once, adds are dropped, waiting keys are never
    /// promoted. What is queued is not handed out. Calling it again does nothing.
    pub fn shut_down(&self) {
        self.shared.shutdown.store(true, Ordering::Release);
        self.lock().core.shut_down();
        self.shared.getters.notify_waiters();
        self.shared.flush.notify_one();
        self.shared.timer.notify_one();
        self.shared.stopped.notify_waiters();
    }

    /// The same as [`shut_down`](Self::shut_down): upstream does not drain either ("the
    /// draining functionality is not used by controller-runtime").
    pub fn shut_down_with_drain(&self) {
        self.shut_down();
    }

    /// Whether the queue is shut down.
    pub fn shutting_down(&self) -> bool {
        self.lock().core.shutting_down()
    }

    /// Ready keys, **including** keys re-added while a worker holds them (upstream's `Len`).
    /// Keys still waiting for their delay are not counted. Flushes the buffered adds first,
    /// as upstream's `Len` does.
    pub fn len(&self) -> usize {
        let mut s = self.lock();
        s.flush();
        s.core.len()
    }

    /// Whether no key is ready.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys waiting for their delay. Flushes first, as [`len`](Self::len) does.
    pub fn waiting_len(&self) -> usize {
        let mut s = self.lock();
        s.flush();
        s.core.waiting_len()
    }

    /// Keys handed out and not yet done.
    pub fn locked_len(&self) -> usize {
        self.lock().core.locked_len()
    }

    /// `key`'s queued entry (its priority, and its ready time while it waits), if it is
    /// queued; a held key has one only if it was added again. Upstream has no such call: it
    /// is here so that tests and chapters can show at which priority a key waits. Flushes
    /// first, as [`len`](Self::len) does.
    pub fn entry(&self, key: &T) -> Option<Entry> {
        let mut s = self.lock();
        s.flush();
        s.core.entry(key)
    }
}

/// Applies the buffered adds whenever one is made, wakes the getters they made work for and
/// tells the timer about waiting keys (upstream's `handleAddBuffer`; keeps P4–P6). Holds the
/// queue weakly, so dropping its last handle ends the task too.
async fn flush_loop<T: Eq + Hash + Clone>(shared: Weak<Shared<T>>, flush: Arc<Notify>) {
    loop {
        flush.notified().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let mut s = lock(&shared.state);
        if s.core.shutting_down() {
            s.buffer.clear(); // keeps P6: nothing is applied after shutdown
            return;
        }
        let flushed = s.flush();
        // A getter that flushed before this task ran has been woken by the add already; wake
        // as many as there are keys this flush readied.
        let wake = flushed.readied.min(s.waiting_getters);
        let tell_timer = std::mem::take(&mut s.waiting_changed);
        drop(s);
        for _ in 0..wake {
            shared.getters.notify_one(); // keeps P4
        }
        if tell_timer {
            shared.timer.notify_one(); // keeps P5
        }
    }
}

/// Promotes due keys and sleeps until the next is due (keeps P5). Holds the queue weakly, so
/// dropping its last handle ends the task too.
async fn timer_loop<T: Eq + Hash + Clone>(shared: Weak<Shared<T>>, timer: Arc<Notify>) {
    loop {
        let next = {
            let Some(shared) = shared.upgrade() else {
                return;
            };
            let mut guard = lock(&shared.state);
            let s = &mut *guard;
            if s.core.shutting_down() {
                return;
            }
            let now = Instant::now();
            let promoted = match &mut s.metrics {
                None => s.core.promote_due(now, &mut ()),
                Some(m) => s.core.promote_due(now, &mut m.at(now)),
            };
            let wake = promoted.moved.min(s.waiting_getters);
            drop(guard);
            for _ in 0..wake {
                shared.getters.notify_one(); // keeps P4
            }
            promoted.next
        };
        let until_next = async {
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = timer.notified() => {}
            _ = until_next => {}
        }
    }
}

/// Sets the unfinished-work gauges every 500 ms until shutdown (upstream's
/// `updateUnfinishedWorkLoop`).
async fn update_unfinished_work_loop<T: Eq + Hash + Clone>(
    shared: Weak<Shared<T>>,
    first: Instant,
) {
    let mut ticks = tokio::time::interval_at(first, UNFINISHED_WORK_UPDATE_PERIOD);
    loop {
        ticks.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let s = lock(&shared.state);
        if s.core.shutting_down() {
            return;
        }
        if let Some(m) = &s.metrics {
            m.update_unfinished_work(Instant::now());
        }
    }
}

impl<T: Eq + Hash + Clone> ClaimQueue<T> for PriorityQueue<T> {
    fn release(&self, item: &T) {
        self.done(item);
    }
}

/// While holding a key from a [`PriorityQueue`], the calls controller-runtime makes before
/// its deferred `Done`.
impl<T: Eq + Hash + Clone> Claim<T, PriorityQueue<T>> {
    /// Clears the key's failure history (a successful reconcile). The key is still held.
    pub fn forget(&self) {
        self.queue().forget(self.item());
    }

    /// Asks for the key again as `opts` says (a requeue, at the request's priority).
    pub fn add_with_opts(&self, opts: AddOpts) {
        self.queue().add_with_opts(opts, [self.item().clone()]);
    }

    /// How many times the key has been rate-limited since its last forget.
    pub fn num_requeues(&self) -> usize {
        self.queue().num_requeues(self.item())
    }
}

impl<T> std::fmt::Debug for PriorityQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PriorityQueue").finish_non_exhaustive()
    }
}
