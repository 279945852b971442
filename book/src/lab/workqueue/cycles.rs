//! The add+get+done task of the workqueue benchmark's multi-task rows (`book/benches/workqueue.rs`),
//! kept here so that its two properties are tested: its tasks take turns, and a run cannot hang.
//!
//! Follows the shape of client-go v0.36.3's parallel workqueue benchmark rows: each of `tasks`
//! tasks adds a key and then gets whatever is queued, and marks it done.
//!
//! # Invariants
//!
//! 1. **Turns.** A tokio task runs until it awaits something that is not ready, and a queued
//!    item is always ready: without a yield, each task would run its whole share before the
//!    next one started, and a row named "16 tasks" would measure two tasks (one per thread)
//!    back to back. Every task yields after every [`TURN`] cycles.
//! 2. **No hang.** A task adds a key from its own slice of keys and then gets whatever is
//!    queued. If another thread holds that key (taken by `get`, not yet `done`) long enough for
//!    the task to add it twice, the second add merges into the first: the run has one item
//!    fewer than gets, and some get would wait for ever. So a task that finds nothing queued
//!    counts itself [`Idle`] while it waits, a finished task stays idle, and the task that
//!    makes every task idle shuts the queue down, which wakes every waiter with `None`. A task
//!    waits only while another task is busy, and every busy task ends its cycle, so a run ends.
//!
//! # Concurrency
//!
//! One atomic counter per run, touched only when a task finds the queue empty or finishes:
//! the common path (an item is queued) is exactly add, get, done.

use std::{
    hash::Hash,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering::SeqCst},
    },
};

use futures::FutureExt;

use controlloop::workqueue::Queue;

/// Cycles a task runs between two yields (keeps I1).
pub const TURN: usize = 256;

/// How many of a run's tasks are waiting on an empty queue or finished (keeps I2).
#[derive(Debug)]
pub struct Idle {
    count: AtomicUsize,
    tasks: usize,
}

impl Idle {
    /// A counter for a run of `tasks` tasks, none idle.
    pub fn new(tasks: usize) -> Arc<Idle> {
        Arc::new(Idle {
            count: AtomicUsize::new(0),
            tasks,
        })
    }

    /// This task is about to wait, or has finished. The last task to become idle shuts the
    /// queue down: nobody is left to add what a waiter waits for.
    pub fn enter<T: Eq + Hash + Clone>(&self, queue: &Queue<T>) {
        if self.count.fetch_add(1, SeqCst) + 1 == self.tasks {
            queue.shut_down();
        }
    }

    /// This task got an item and is busy again.
    pub fn leave(&self) {
        self.count.fetch_sub(1, SeqCst);
    }
}

/// One task of an add+get+done row: `per` cycles over its own `slice` of keys, yielding every
/// [`TURN`] cycles. Returns the cycles it completed (fewer than `per` only if an add was
/// merged away and the run ended early).
pub async fn cycles<T: Eq + Hash + Clone>(
    queue: Queue<T>,
    slice: &[T],
    per: usize,
    idle: Arc<Idle>,
) -> usize {
    let mut completed = 0;
    for j in 0..per {
        queue.add(slice[j % slice.len()].clone());
        let got = match queue.get().now_or_never() {
            Some(got) => got,
            None => {
                // Another task took the item this one added: wait, counted as idle.
                idle.enter(&queue);
                let got = queue.get().await;
                idle.leave();
                got
            }
        };
        let Some(key) = got else { break }; // shut down: every other task is idle
        queue.done(&key);
        completed += 1;
        if completed % TURN == 0 {
            tokio::task::yield_now().await;
        }
    }
    idle.enter(&queue);
    completed
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::lab::rig::{paused, within};

    /// A key held by a worker that never comes back (a thread descheduled between `get` and
    /// `done`, made permanent): a task that adds it merges its add into the held key's `dirty`
    /// mark, and its get finds nothing.
    fn queue_with_a_held_key() -> Queue<&'static str> {
        let queue = Queue::new();
        queue.add("default/obj-0");
        let held = queue.get().now_or_never().flatten();
        assert_eq!(held, Some("default/obj-0"));
        queue
    }

    #[test]
    fn every_task_completes_its_share_when_nothing_is_lost() {
        paused(async {
            let queue = Queue::new();
            let idle = Idle::new(2);
            let a = tokio::spawn({
                let (queue, idle) = (queue.clone(), idle.clone());
                async move { cycles(queue, &["a-0", "a-1"], 100, idle).await }
            });
            let b = cycles(queue.clone(), &["b-0", "b-1"], 100, idle).await;
            let a = within(Duration::from_secs(1), "task a", a).await.unwrap();
            assert_eq!((a, b), (100, 100));
            assert!(
                queue.shutting_down(),
                "the last task to finish shut the queue down"
            );
        });
    }

    #[test]
    fn a_merged_add_ends_the_run_instead_of_hanging() {
        paused(async {
            let queue = queue_with_a_held_key();
            let idle = Idle::new(2);
            let stuck = tokio::spawn({
                let (queue, idle) = (queue.clone(), idle.clone());
                async move { cycles(queue, &["default/obj-0"], 100, idle).await }
            });
            let other = cycles(queue.clone(), &["b-0", "b-1"], 100, idle).await;
            let stuck = within(Duration::from_secs(1), "the stuck task", stuck).await;
            // The other task ran its share; the stuck one's first add was merged away, so it
            // completed nothing, and returned when the other finished.
            assert_eq!((stuck.unwrap(), other), (0, 100));
        });
    }

    /// The broken variant: a task that simply awaits its get and never yields, as the
    /// benchmark's rows once did.
    async fn plain(queue: Queue<&'static str>, keys: &'static [&'static str], per: usize) -> usize {
        let mut completed = 0;
        for j in 0..per {
            queue.add(keys[j % keys.len()]);
            let Some(k) = queue.get().await else { break };
            queue.done(&k);
            completed += 1;
        }
        completed
    }

    #[test]
    fn without_the_idle_count_the_same_run_hangs() {
        paused(async {
            let queue = queue_with_a_held_key();
            let stuck = plain(queue.clone(), &["default/obj-0"], 100);
            let waited = tokio::time::timeout(Duration::from_secs(3600), stuck).await;
            assert!(
                waited.is_err(),
                "the merged add left a get waiting for an hour"
            );
        });
    }

    /// Runs two tasks on one thread and returns the order in which they started and ended.
    fn start_and_end_order(with_turns: bool) -> Vec<&'static str> {
        paused(async {
            let queue = Queue::new();
            let idle = Idle::new(2);
            let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
            let run = |name: &'static str, keys: &'static [&'static str]| {
                let (queue, idle, order) = (queue.clone(), idle.clone(), order.clone());
                tokio::spawn(async move {
                    order.lock().push(name);
                    let n = if with_turns {
                        cycles(queue, keys, 10 * TURN, idle).await
                    } else {
                        plain(queue, keys, 10 * TURN).await
                    };
                    order.lock().push(name);
                    assert_eq!(n, 10 * TURN);
                })
            };
            let (a, b) = (run("a", &["a-0", "a-1"]), run("b", &["b-0", "b-1"]));
            within(Duration::from_secs(1), "task a", a).await.unwrap();
            within(Duration::from_secs(1), "task b", b).await.unwrap();
            order.lock().clone()
        })
    }

    #[test]
    fn tasks_take_turns() {
        // With turns, the second task starts long before the first one ends...
        assert_eq!(start_and_end_order(true), ["a", "b", "a", "b"]);
        // ...without them, it starts only when the first has run its whole share.
        assert_eq!(start_and_end_order(false), ["a", "a", "b", "b"]);
    }
}
