//! The typed workqueue: [`QueueCore`] behind one lock, with async `get` and shutdown.
//!
//! Follows `util/workqueue/queue.go` (`Typed[T]`, `NewTypedWithConfig`).
//!
//! # Model
//!
//! ```text
//!   Queue<T> (a cheap handle; clones share one queue)
//!     └─ Shared
//!          ├─ lock ─► Locked { core: QueueCore (queue, dirty, processing, flags),
//!          │                   metrics, waiting_getters }
//!          ├─ getters: Notify   one waiter woken per item queued, only if someone waits
//!          ├─ drained: Notify   shut_down_with_drain waits here for processing to empty
//!          └─ stopped: Notify   shutdown broadcast (delaying loop, metrics loop)
//! ```
//!
//! # Invariants
//!
//! The core's I1–I4 (see [`super::queue_core`]), plus:
//!
//! 5. **I5** `waiting_getters` counts the `get` calls that are registered on `getters` and
//!    have not yet resumed or been dropped, so an add that queues an item wakes one: no lost
//!    wake-up (the waiter protocol's W1, kept by `waiters::wait_for`).
//!
//! # Concurrency
//!
//! One lock guards the core, the metrics bookkeeping and the waiter count. It is a
//! test-and-set lock (the `workqueue::sync` facade; it swaps in shuttle's for model checking),
//! never held across an await and never while user code runs. Notifications are sent after
//! the lock is released. There is one lock, so there is no lock order to get wrong.
//!
//! # Differences from upstream
//!
//! - [`Queue::pause`] and [`Queue::resume`] are client-go v0.38's `Pause`/`Resume`, ported on
//!   every release (they are new methods; nothing calls them unless asked). The delaying and
//!   rate-limiting queues deref to the queue, so they are pausable too, as v0.38's are.
//! - `get` is async; it returns `None` once shut down and drained (upstream: `shutdown=true`).
//! - Wake-ups go through `tokio::sync::Notify` instead of a condition variable, and only when
//!   a getter waits.
//! - Time comes from `tokio::time::Instant`, so a paused runtime clock drives the metrics.
//! - `shut_down_with_drain` ends at the first moment the processing set is empty (core I4).
//!   Upstream's waiter re-checks `processing` only once it has the lock back, so a `Get`
//!   that takes a just re-queued item first can keep it waiting until the next `Done`.

use std::{hash::Hash, pin::pin, sync::Arc, time::Duration};

use tokio::{sync::Notify, time::Instant};

use super::{
    claim::{Claim, ClaimQueue},
    metrics::{MetricsProvider, QueueMetrics},
    queue_core::{KeyRef, QueueAdd, QueueCore, QueueGet},
    sync::{Mutex, MutexGuard, lock},
    waiters::{Getters, wait_for},
};

/// How often the unfinished-work and longest-running-processor gauges are updated.
pub(crate) const UNFINISHED_WORK_UPDATE_PERIOD: Duration = Duration::from_millis(500);

/// Options for [`Queue::with_config`] (client-go's `TypedQueueConfig`).
#[derive(Clone, Default)]
pub struct QueueConfig {
    /// The queue's name. Metrics are recorded only for a named queue with a provider.
    pub name: String,
    /// Where metrics go. None: no metrics.
    pub metrics_provider: Option<Arc<dyn MetricsProvider>>,
}

/// Why a queue could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The queue needs a background task but was built outside a tokio runtime.
    #[error("{what} needs a tokio runtime for its background task; build it inside one")]
    NoRuntime {
        /// What needed the task.
        what: &'static str,
    },
}

/// A work queue of keys: each key is handed to at most one worker at a time, and any number
/// of adds while it waits or is held collapse into one more hand-out.
pub struct Queue<T> {
    pub(crate) shared: Arc<Shared<T>>,
}

impl<T> Clone for Queue<T> {
    fn clone(&self) -> Self {
        Queue {
            shared: self.shared.clone(),
        }
    }
}

pub(crate) struct Shared<T> {
    state: Mutex<Locked<T>>,
    /// Getters that found the queue empty wait here.
    getters: Notify,
    /// shut_down_with_drain waits here for the processing set to empty.
    drained: Notify,
    /// Woken once at shutdown, for the background loops.
    stopped: Notify,
}

struct Locked<T> {
    core: QueueCore<T>,
    /// Present only for a named queue with a provider.
    metrics: Option<QueueMetrics<T>>,
    /// Keeps I5 (through `waiters::wait_for`).
    waiting_getters: usize,
}

impl<T: Eq + Hash + Clone> Default for Queue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Eq + Hash + Clone> Queue<T> {
    /// An unnamed queue without metrics. Needs no runtime until `get` waits.
    pub fn new() -> Self {
        Self::from_core(QueueCore::new(), None)
    }

    fn from_core(core: QueueCore<T>, metrics: Option<QueueMetrics<T>>) -> Self {
        Queue {
            shared: Arc::new(Shared {
                state: Mutex::new(Locked {
                    core,
                    metrics,
                    waiting_getters: 0,
                }),
                getters: Notify::new(),
                drained: Notify::new(),
                stopped: Notify::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Locked<T>> {
        lock(&self.shared.state)
    }

    /// Marks `item` as needing work. Dropped while shutting down; coalesced if already dirty;
    /// kept dirty (not queued) while a worker holds it.
    pub fn add(&self, item: T) {
        let mut guard = self.lock();
        let s = &mut *guard;
        let outcome = match &mut s.metrics {
            None => s.core.add(item),
            Some(m) => {
                let copy = item.clone();
                let outcome = s.core.add(item);
                if outcome.entered_dirty() {
                    m.add(&copy, Instant::now());
                }
                outcome
            }
        };
        self.added(guard, outcome);
    }

    /// [`add`](Self::add) by a borrowed form of the item, which is made only if the queue
    /// stores it: an add that coalesces allocates nothing.
    ///
    /// ```
    /// use controlloop::workqueue::Queue;
    ///
    /// let queue: Queue<String> = Queue::new();
    /// let name = String::from("default/web");
    /// queue.add_ref(name.as_str()); // the queue stores its own copy
    /// queue.add_ref(name.as_str()); // coalesces: nothing is built
    /// assert_eq!(queue.len(), 1);
    /// ```
    pub fn add_ref<Q: KeyRef<T> + ?Sized>(&self, key: &Q) {
        let mut guard = self.lock();
        let s = &mut *guard;
        let outcome = s.core.add_ref(key);
        if let Some(m) = &mut s.metrics
            && outcome.entered_dirty()
        {
            m.add(&key.to_key(), Instant::now());
        }
        self.added(guard, outcome);
    }

    /// After an add: wakes a getter if the item was queued and one waits (keeps I5).
    fn added(&self, guard: MutexGuard<'_, Locked<T>>, outcome: QueueAdd) {
        let wake = outcome == QueueAdd::Queued && guard.waiting_getters > 0;
        drop(guard);
        if wake {
            self.shared.getters.notify_one();
        }
    }

    /// Items waiting to be handed out (not those held, nor those dirty while held).
    pub fn len(&self) -> usize {
        self.lock().core.len()
    }

    /// Whether nothing is waiting to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Items in the dirty set: waiting to be handed out, or added again while held.
    pub fn dirty_len(&self) -> usize {
        self.lock().core.dirty_len()
    }

    /// Items in the processing set: held by a worker, not yet `done`.
    pub fn processing_len(&self) -> usize {
        self.lock().core.processing_len()
    }

    /// Waits for an item and marks it processing. After shutdown it still returns every
    /// queued item, then `None`. Every `Some` must be followed by [`done`](Self::done);
    /// [`claim`](Self::claim) does that for you.
    pub async fn get(&self) -> Option<T> {
        wait_for(&self.shared.state, &self.shared.getters).await
    }

    /// Like [`get`](Self::get), but returns a [`Claim`] that calls `done` when dropped.
    pub async fn claim(&self) -> Option<Claim<T, Queue<T>>> {
        let item = self.get().await?;
        Some(Claim::new(self.clone(), item))
    }

    /// Returns `item` from a worker. If it was added while held, it is queued again, once.
    pub fn done(&self, item: &T) {
        let mut s = self.lock();
        if let Some(m) = &mut s.metrics {
            m.done(item, Instant::now());
        }
        let outcome = s.core.done(item);
        let wake_getter = outcome.requeued() && s.waiting_getters > 0;
        // Also when the last held item was re-queued (client-go signals then too): the
        // drain is over either way (core I4).
        let wake_drain = outcome.emptied_processing() && s.core.shutting_down();
        drop(s);
        if wake_getter {
            self.shared.getters.notify_one();
        }
        if wake_drain {
            self.shared.drained.notify_waiters();
        }
    }

    /// Pauses the queue (client-go v0.38 `Pause`): `get` waits, even with items queued, until
    /// [`resume`](Self::resume); `add` and `done` keep working. A shutdown while paused makes
    /// every `get` return `None` at once, leaving the queued items unhanded.
    pub fn pause(&self) {
        self.lock().core.pause();
    }

    /// Resumes a paused queue (client-go v0.38 `Resume`), waking every waiting getter; does
    /// nothing if the queue is not paused.
    pub fn resume(&self) {
        let was_paused = self.lock().core.resume();
        if was_paused {
            self.shared.getters.notify_waiters();
        }
    }

    /// Stops accepting adds. Getters drain what is queued, then receive `None`. Does not wait
    /// for workers; releases a waiting [`shut_down_with_drain`](Self::shut_down_with_drain).
    pub fn shut_down(&self) {
        self.lock().core.shut_down(false);
        self.wake_all_after_shutdown();
    }

    /// Like [`shut_down`](Self::shut_down), then waits until no item is processing. It does
    /// not wait for queued items, and it waits forever if a worker never calls `done`. It
    /// returns at the first moment nothing is processing, even if that `done` re-queued a
    /// dirty item and a getter took it again at once (core I4).
    pub async fn shut_down_with_drain(&self) {
        self.lock().core.shut_down(true);
        self.wake_all_after_shutdown();
        loop {
            let mut notified = pin!(self.shared.drained.notified());
            {
                let s = self.lock();
                if !s.core.draining() {
                    return;
                }
                notified.as_mut().enable();
            }
            notified.await;
        }
    }

    fn wake_all_after_shutdown(&self) {
        self.shared.getters.notify_waiters();
        self.shared.drained.notify_waiters();
        self.shared.stopped.notify_waiters();
    }

    /// Whether a shutdown has started.
    pub fn shutting_down(&self) -> bool {
        self.lock().core.shutting_down()
    }

    /// Resolves once a shutdown has started.
    pub(crate) async fn stopped(&self) {
        loop {
            let mut notified = pin!(self.shared.stopped.notified());
            notified.as_mut().enable();
            if self.shutting_down() {
                return;
            }
            notified.await;
        }
    }

    /// Records one retry (an `add_after` call), if the queue has metrics.
    pub(crate) fn record_retry(&self) {
        if let Some(m) = &self.lock().metrics {
            m.retry();
        }
    }
}

impl<T: Eq + Hash + Clone + Send + 'static> Queue<T> {
    /// A queue with a name and optionally metrics. With metrics it starts the 500 ms
    /// unfinished-work loop, which needs a tokio runtime ([`BuildError::NoRuntime`] otherwise).
    pub fn with_config(config: QueueConfig) -> Result<Self, BuildError> {
        let metrics = match (&config.metrics_provider, config.name.is_empty()) {
            (Some(p), false) => Some(QueueMetrics::new(p.as_ref(), &config.name)),
            _ => None,
        };
        let has_metrics = metrics.is_some();
        let queue = Self::from_core(QueueCore::new(), metrics);
        if has_metrics {
            let handle =
                tokio::runtime::Handle::try_current().map_err(|_| BuildError::NoRuntime {
                    what: "a queue with metrics",
                })?;
            // The first tick is 500 ms after construction, not after the task first runs.
            let first = Instant::now() + UNFINISHED_WORK_UPDATE_PERIOD;
            handle.spawn(update_unfinished_work_loop(
                Arc::downgrade(&queue.shared),
                first,
            ));
        }
        Ok(queue)
    }
}

/// Sets the unfinished-work gauges every 500 ms until shutdown (client-go's
/// `updateUnfinishedWorkLoop`). Holds the queue weakly, so a dropped queue ends it too.
async fn update_unfinished_work_loop<T: Eq + Hash + Clone>(
    shared: std::sync::Weak<Shared<T>>,
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

impl<T: Eq + Hash + Clone> Getters for Locked<T> {
    type Out = Option<T>;

    /// `Some(Some(item))`: handed out. `Some(None)`: shut down and drained. `None`: wait.
    fn get_now(&mut self) -> Option<Option<T>> {
        match self.core.get() {
            QueueGet::Item(item) => {
                if let Some(m) = &mut self.metrics {
                    m.get(&item, Instant::now());
                }
                Some(Some(item))
            }
            QueueGet::ShutDown => Some(None),
            QueueGet::Empty => None,
        }
    }

    fn waiting_getters(&mut self) -> &mut usize {
        &mut self.waiting_getters
    }
}

impl<T: Eq + Hash + Clone> ClaimQueue<T> for Queue<T> {
    fn release(&self, item: &T) {
        self.done(item);
    }
}

impl<T> std::fmt::Debug for Queue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue").finish_non_exhaustive()
    }
}
