//! Model checking the queue's concurrent shell with shuttle.
//!
//! Built only with `--features shuttle` (CI: one step of `.ci/run`), which swaps the queue's
//! lock for shuttle's, so every lock acquisition is a point where shuttle may switch tasks.
//! Each test runs a small scenario (two or three tasks over add / claim / done / shut_down)
//! under thousands of random schedules. A failing schedule panics with a seed that
//! `shuttle::replay` reproduces exactly.
//!
//! What is checked in every schedule:
//! - no two workers hold the key at once (the same-key detector);
//! - level-triggering: the last add is seen by some reconcile that starts after it;
//! - no deadlock or lost wake-up: shuttle fails a schedule in which every task is blocked.
//!
//! The broken queue (no processing set) runs the same scenario under `should_panic`: the
//! checker must find a schedule in which two workers hold the key.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering::SeqCst},
};

use controlloop::workqueue::{Claim, ClaimQueue, Queue};
use shuttle::future::{block_on, spawn, yield_now};

/// The calls the scenario makes: the faithful queue and the broken one both answer them.
trait ShellUnderTest: ClaimQueue<u8> + Clone + Send + Sync + 'static {
    fn add(&self, key: u8);
    fn claim(&self) -> impl std::future::Future<Output = Option<Claim<u8, Self>>> + Send;
    fn shut_down(&self);
    async fn shut_down_with_drain(&self);
    fn len(&self) -> usize;
}

impl ShellUnderTest for Queue<u8> {
    fn add(&self, key: u8) {
        Queue::add(self, key);
    }
    fn claim(&self) -> impl std::future::Future<Output = Option<Claim<u8, Self>>> + Send {
        Queue::claim(self)
    }
    fn shut_down(&self) {
        Queue::shut_down(self);
    }
    async fn shut_down_with_drain(&self) {
        Queue::shut_down_with_drain(self).await;
    }
    fn len(&self) -> usize {
        Queue::len(self)
    }
}

#[cfg(feature = "broken")]
use controlloop::workqueue::broken::QueueWithoutProcessingSet;

#[cfg(feature = "broken")]
impl ShellUnderTest for QueueWithoutProcessingSet<u8> {
    fn add(&self, key: u8) {
        QueueWithoutProcessingSet::add(self, key);
    }
    fn claim(&self) -> impl std::future::Future<Output = Option<Claim<u8, Self>>> + Send {
        QueueWithoutProcessingSet::claim(self)
    }
    fn shut_down(&self) {
        QueueWithoutProcessingSet::shut_down(self);
    }
    async fn shut_down_with_drain(&self) {
        // Nothing is ever held, so there is nothing to drain.
        QueueWithoutProcessingSet::shut_down(self);
    }
    fn len(&self) -> usize {
        QueueWithoutProcessingSet::len(self)
    }
}

const SCHEDULES: usize = 3_000;

/// Two workers, one producer adding key 1 three times, then shutdown (with or without drain).
fn scenario<Q: ShellUnderTest>(make: fn() -> Q, drain: bool) {
    block_on(async move {
        let q = make();
        let holders = Arc::new(AtomicUsize::new(0));
        let added = Arc::new(AtomicUsize::new(0));
        let latest_seen = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (q, holders) = (q.clone(), holders.clone());
                let (added, latest_seen) = (added.clone(), latest_seen.clone());
                spawn(async move {
                    while let Some(claim) = q.claim().await {
                        assert_eq!(*claim, 1);
                        let before = holders.fetch_add(1, SeqCst);
                        assert_eq!(before, 0, "two workers hold key 1 at once");
                        latest_seen.fetch_max(added.load(SeqCst), SeqCst);
                        yield_now().await; // the reconcile
                        holders.fetch_sub(1, SeqCst);
                        drop(claim); // done
                    }
                })
            })
            .collect();
        for _ in 0..3 {
            added.fetch_add(1, SeqCst);
            q.add(1);
            yield_now().await;
        }
        if drain {
            q.shut_down_with_drain().await;
        } else {
            q.shut_down();
        }
        for w in workers {
            w.await.expect("worker panicked");
        }
        assert_eq!(
            latest_seen.load(SeqCst),
            3,
            "the last add was never reconciled (lost in dirty?)"
        );
        assert_eq!(q.len(), 0);
    });
}

#[test]
fn two_workers_never_hold_one_key_and_the_last_add_is_reconciled() {
    shuttle::check_random(|| scenario(Queue::new, false), SCHEDULES);
}

#[test]
fn the_same_holds_with_shut_down_with_drain() {
    shuttle::check_random(|| scenario(Queue::new, true), SCHEDULES);
}

#[test]
fn pct_schedules_find_no_double_hold_either() {
    shuttle::check_pct(|| scenario(Queue::new, false), SCHEDULES, 3);
}

#[cfg(feature = "broken")]
#[test]
#[should_panic(expected = "two workers hold key 1 at once")]
fn the_checker_catches_a_queue_without_its_processing_set() {
    shuttle::check_random(
        || scenario(QueueWithoutProcessingSet::new, false),
        SCHEDULES,
    );
}
