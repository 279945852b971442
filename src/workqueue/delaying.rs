//! The delaying queue: [`Queue`] plus `add_after`, which adds an item once its delay is over.
//!
//! Follows `util/workqueue/delaying_queue.go` (`delayingType`, `AddAfter`, `waitingLoop`).
//!
//! # Model
//!
//! ```text
//!   add_after(x, d)  d = 0 ──────────────────────────────► queue.add(x)
//!                    d > 0 ──► waiting: one entry per item, ready_at = now + d
//!                                 (an earlier ready_at replaces a later one; a later one
//!                                  is dropped)
//!   waiting task: sleeps until the earliest ready_at (or a new earlier entry, or shutdown),
//!                 then queue.add(x) for every entry that is due.
//! ```
//!
//! # Invariants
//!
//! 1. **D1** Each item has at most one live entry in `waiting`, holding its earliest
//!    requested `ready_at`. Superseded heap entries are skipped when they surface.
//! 2. **D2** An item is added no earlier than its `ready_at` (by the runtime's clock).
//!
//! # Concurrency
//!
//! `waiting` has its own small lock, never held together with the queue's lock: the task
//! collects due items under it, releases it, then adds them.
//!
//! # Differences from upstream
//!
//! - `add_after` inserts into `waiting` directly (upstream sends on a channel buffered to 1000
//!   that blocks when full); a new earliest entry wakes the task at once, so there is no 10 s
//!   heartbeat.
//! - The task stops on any shutdown, including `shut_down_with_drain` (upstream's loop notices
//!   the drain within its 10 s heartbeat). Waiting items are dropped, as upstream.
//! - Delays are `Duration`, so there is no negative delay: zero adds at once.

use std::{
    cmp::Ordering,
    collections::{BinaryHeap, HashMap},
    hash::Hash,
    ops::Deref,
    pin::pin,
    sync::Arc,
    time::Duration,
};

use parking_lot::Mutex;
use tokio::{sync::Notify, time::Instant};

use super::queue::{BuildError, Queue, QueueConfig};

/// A [`Queue`] with `add_after`. Derefs to the queue for add, get, done and shutdown.
pub struct DelayingQueue<T> {
    queue: Queue<T>,
    waiting: Arc<Waiting<T>>,
}

impl<T> Clone for DelayingQueue<T> {
    fn clone(&self) -> Self {
        DelayingQueue {
            queue: self.queue.clone(),
            waiting: self.waiting.clone(),
        }
    }
}

struct Waiting<T> {
    heap: Mutex<WaitingItems<T>>,
    /// Wakes the waiting task when a new earliest entry arrives. One waiter (the task), so a
    /// wake-up sent while it is busy is kept as a permit and not lost.
    wake: Notify,
}

struct WaitingItems<T> {
    heap: BinaryHeap<Entry<T>>,
    /// The live entry of each item (keeps D1).
    live: HashMap<T, (Instant, u64)>,
    next_seq: u64,
}

struct Entry<T> {
    ready_at: Instant,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.ready_at, self.seq) == (other.ready_at, other.seq)
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Entry<T> {
    /// Reversed, so the std max-heap pops the earliest `ready_at` first (ties: first added).
    fn cmp(&self, other: &Self) -> Ordering {
        (other.ready_at, other.seq).cmp(&(self.ready_at, self.seq))
    }
}

impl<T: Eq + Hash + Clone> WaitingItems<T> {
    /// Keeps D1. Returns whether the entry is now the earliest.
    fn insert(&mut self, item: T, ready_at: Instant) -> bool {
        if let Some(&(current, _)) = self.live.get(&item)
            && current <= ready_at
        {
            return false; // a later ready_at for a waiting item is dropped
        }
        self.next_seq += 1;
        let seq = self.next_seq;
        self.live.insert(item.clone(), (ready_at, seq));
        self.heap.push(Entry {
            ready_at,
            seq,
            item,
        });
        self.heap.peek().is_some_and(|e| e.seq == seq)
    }

    fn is_live(&self, e: &Entry<T>) -> bool {
        self.live.get(&e.item) == Some(&(e.ready_at, e.seq))
    }

    /// Removes and returns every live entry due at `now`, and the next ready time.
    fn take_due(&mut self, now: Instant) -> (Vec<T>, Option<Instant>) {
        let mut due = Vec::new();
        while let Some(top) = self.heap.peek() {
            let live = self.is_live(top);
            if live && top.ready_at > now {
                return (due, Some(top.ready_at));
            }
            let e = self.heap.pop().expect("peeked");
            if live {
                self.live.remove(&e.item);
                due.push(e.item);
            }
        }
        (due, None)
    }

    fn clear(&mut self) {
        self.heap.clear();
        self.live.clear();
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> DelayingQueue<T> {
    /// An unnamed delaying queue without metrics.
    ///
    /// # Panics
    /// Outside a tokio runtime: its waiting loop is a task. [`with_config`](Self::with_config)
    /// returns that as an error instead.
    pub fn new() -> Self {
        Self::with_config(QueueConfig::default()).expect("DelayingQueue::new needs a tokio runtime")
    }

    /// A delaying queue over a new [`Queue`] built from `config`.
    pub fn with_config(config: QueueConfig) -> Result<Self, BuildError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| BuildError::NoRuntime {
            what: "a delaying queue",
        })?;
        let queue = Queue::with_config(config)?;
        let waiting = Arc::new(Waiting {
            heap: Mutex::new(WaitingItems {
                heap: BinaryHeap::new(),
                live: HashMap::new(),
                next_seq: 0,
            }),
            wake: Notify::new(),
        });
        runtime.spawn(waiting_loop(queue.clone(), waiting.clone()));
        Ok(DelayingQueue { queue, waiting })
    }

    /// Adds `item` after `delay`. Counts a retry (zero delays too). A zero delay adds at once;
    /// for an item already waiting, the earlier of the two ready times wins.
    pub fn add_after(&self, item: T, delay: Duration) {
        if self.queue.shutting_down() {
            return;
        }
        self.queue.record_retry();
        if delay.is_zero() {
            self.queue.add(item);
            return;
        }
        let ready_at = Instant::now() + delay;
        if self.waiting.heap.lock().insert(item, ready_at) {
            self.waiting.wake.notify_one();
        }
    }

    /// How many items wait for their delay (not counted in `len`).
    pub fn waiting_len(&self) -> usize {
        self.waiting.heap.lock().live.len()
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> Default for DelayingQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Moves due items into the queue, and sleeps until the next one is due (keeps D2).
async fn waiting_loop<T: Eq + Hash + Clone>(queue: Queue<T>, waiting: Arc<Waiting<T>>) {
    let mut stopped = pin!(queue.stopped());
    loop {
        if queue.shutting_down() {
            break;
        }
        let (due, next) = waiting.heap.lock().take_due(Instant::now());
        for item in due {
            queue.add(item);
        }
        let until_next = async {
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = &mut stopped => break,
            _ = waiting.wake.notified() => {}
            _ = until_next => {}
        }
    }
    waiting.heap.lock().clear(); // waiting items are dropped at shutdown
}

impl<T> Deref for DelayingQueue<T> {
    type Target = Queue<T>;
    fn deref(&self) -> &Queue<T> {
        &self.queue
    }
}

impl<T> std::fmt::Debug for DelayingQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelayingQueue").finish_non_exhaustive()
    }
}
