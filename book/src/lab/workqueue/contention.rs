//! Chapter 01's same-key harness: 16 workers, 64 keys, a per-key holder counter as the
//! detector, run through the workqueue, through the workqueue without its processing set, and
//! through a channel.
//!
//! Follows the shape of the client-go figures it is compared with (client-go v0.36.3
//! `util/workqueue/queue.go` against a buffered Go channel): one producer adds keys round-robin,
//! workers take a key, reconcile, release it, and the detector flags every moment two workers
//! hold one key.
//!
//! Two runs use the same harness ([`through_queue`], [`through_channel`]):
//! - [`ch01_contention_virtual`]: under the paused clock on one thread, with one slow object.
//!   The schedule is fixed, so the detector fires (or not) the same way on every run and every
//!   machine: that run carries the durable claim "0 through the queue, more than 0 through the
//!   channel".
//! - [`ch01_contention_real`]: client-go's shape under the real clock on two threads, for its
//!   figures. How far the queue merges and how often the channel hands a held key out depend
//!   on the machine and the scheduler (runs of the channel have seen 0), so both are shown
//!   beside their reference runs and not checked ([`bands`]); the same-run law (at least one
//!   reconcile per key, fewer reconciles than adds) is asserted on every run.
//!
//! # Invariants
//!
//! 1. A detector's holder count for a key is the number of reconciles of that key in flight.
//! 2. Every run joins all its workers before it returns its [`Counts`] (with a bounded wait).

use std::{future::Future, ops::Deref};

use controlloop::workqueue::{Claim, broken::QueueWithoutProcessingSet};

use super::bands;

use crate as controlloop_book;
use crate::kit::{
    band::{Reference, Shown},
    measured, snap,
};

/// The calls the harness makes on a queue: the faithful [`Queue`] and the deliberately broken
/// [`QueueWithoutProcessingSet`] both answer them.
pub trait WorkQueue: Clone + Send + Sync + 'static {
    /// What a worker holds while it reconciles: releasing it is `done`.
    type Claim: Deref<Target = usize> + Send;
    /// Queues `key`.
    fn add(&self, key: usize);
    /// Waits for a key; `None` once shut down and drained.
    fn claim(&self) -> impl Future<Output = Option<Self::Claim>> + Send;
    /// Stops handing out new work once what is queued is drained.
    fn shut_down(&self);
}

impl WorkQueue for Queue<usize> {
    type Claim = Claim<usize, Queue<usize>>;
    fn add(&self, key: usize) {
        Queue::add(self, key);
    }
    fn claim(&self) -> impl Future<Output = Option<Self::Claim>> + Send {
        Queue::claim(self)
    }
    fn shut_down(&self) {
        Queue::shut_down(self);
    }
}

impl WorkQueue for QueueWithoutProcessingSet<usize> {
    type Claim = Claim<usize, QueueWithoutProcessingSet<usize>>;
    fn add(&self, key: usize) {
        QueueWithoutProcessingSet::add(self, key);
    }
    fn claim(&self) -> impl Future<Output = Option<Self::Claim>> + Send {
        QueueWithoutProcessingSet::claim(self)
    }
    fn shut_down(&self) {
        QueueWithoutProcessingSet::shut_down(self);
    }
}

// book: ch01_harness
use controlloop::workqueue::Queue;
use controlloop_book::lab::rig::within;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::time::Duration;
use tokio::sync::{Mutex, mpsc};

/// Workers taking keys (client-go's figures used 16).
pub const WORKERS: usize = 16;
/// Objects, added round-robin: key `i % KEYS` is the object the `i`-th add is about.
pub const KEYS: usize = 64;
/// Adds in the real-clock run.
pub const ADDS: usize = 320_000;
/// The channel's buffer.
pub const CHANNEL_CAPACITY: usize = 1024;

/// How long a reconcile of a key holds it; zero means one yield to the scheduler.
pub type Cost = fn(usize) -> Duration;

/// The detector: for each key, how many workers hold it right now.
pub struct Detector {
    holders: Vec<AtomicU64>,
    violations: AtomicU64,
    reconciles: AtomicU64,
}

/// What one run counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Reconciles the workers ran.
    pub reconciles: u64,
    /// Times a worker took a key that another worker still held.
    pub violations: u64,
}

impl Detector {
    /// A detector for `keys` keys, none of them held.
    pub fn new(keys: usize) -> Detector {
        Detector {
            holders: (0..keys).map(|_| AtomicU64::new(0)).collect(),
            violations: AtomicU64::new(0),
            reconciles: AtomicU64::new(0),
        }
    }

    /// Reconciles `key`, holding it for `cost`.
    pub async fn reconcile(&self, key: usize, cost: Duration) {
        if self.holders[key].fetch_add(1, SeqCst) > 0 {
            self.violations.fetch_add(1, SeqCst); // another worker holds it: two writers
        }
        if cost.is_zero() {
            tokio::task::yield_now().await; // a real reconcile awaits the API server
        } else {
            tokio::time::sleep(cost).await;
        }
        self.holders[key].fetch_sub(1, SeqCst);
        self.reconciles.fetch_add(1, SeqCst);
    }

    /// What it counted so far.
    pub fn counts(&self) -> Counts {
        Counts {
            reconciles: self.reconciles.load(SeqCst),
            violations: self.violations.load(SeqCst),
        }
    }
}

/// A worker on the queue: claim a key, reconcile it, release it (dropping the claim is `done`).
pub async fn queue_worker(queue: impl WorkQueue, detector: Arc<Detector>, cost: Cost) {
    while let Some(claim) = queue.claim().await {
        detector.reconcile(*claim, cost(*claim)).await;
    }
}

/// A worker on the channel: receive the next event, reconcile its key.
pub async fn channel_worker(
    events: Arc<Mutex<mpsc::Receiver<usize>>>,
    detector: Arc<Detector>,
    cost: Cost,
) {
    loop {
        let next = events.lock().await.recv().await;
        let Some(key) = next else { break };
        detector.reconcile(key, cost(key)).await;
    }
}

/// One run through `queue`: the workers claim keys while this task adds `adds` keys
/// round-robin, one every `gap` (`None`: as fast as it can), then shuts the queue down.
pub async fn through_queue(
    queue: impl WorkQueue,
    adds: usize,
    gap: Option<Duration>,
    cost: Cost,
) -> Counts {
    let detector = Arc::new(Detector::new(KEYS));
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| tokio::spawn(queue_worker(queue.clone(), detector.clone(), cost)))
        .collect();
    for i in 0..adds {
        queue.add(i % KEYS); // object i % KEYS changed
        if let Some(gap) = gap {
            tokio::time::sleep(gap).await;
        }
    }
    queue.shut_down(); // the workers drain what is queued, then stop
    for worker in workers {
        let joined = within(Duration::from_secs(600), "a queue worker", worker).await;
        joined.expect("a queue worker panicked");
    }
    detector.counts()
}

/// The same run through a channel: every add is an event, and any free worker takes it.
pub async fn through_channel(adds: usize, gap: Option<Duration>, cost: Cost) -> Counts {
    let detector = Arc::new(Detector::new(KEYS));
    let (events, receiver) = mpsc::channel(CHANNEL_CAPACITY);
    let receiver = Arc::new(Mutex::new(receiver));
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| tokio::spawn(channel_worker(receiver.clone(), detector.clone(), cost)))
        .collect();
    for i in 0..adds {
        events.send(i % KEYS).await.expect("the workers are alive");
        if let Some(gap) = gap {
            tokio::time::sleep(gap).await;
        }
    }
    drop(events); // closed: the workers drain what is buffered, then stop
    for worker in workers {
        let joined = within(Duration::from_secs(600), "a channel worker", worker).await;
        joined.expect("a channel worker panicked");
    }
    detector.counts()
}
// book: end ch01_harness

/// The deterministic run: one slow object, under the paused clock.
pub fn ch01_contention_virtual() {
    controlloop_book::lab::rig::paused(async {
        // book: ch01_contention_virtual
        use controlloop::workqueue::{Queue, broken::QueueWithoutProcessingSet};
        use controlloop_book::lab::workqueue::contention::{KEYS, through_channel, through_queue};
        use std::time::Duration;
        // Each of 64 objects changes once every 64 ms: one add per millisecond, round-robin.
        let (adds, gap) = (100 * KEYS, Some(Duration::from_millis(1)));
        // Object 0 takes 100 ms to reconcile, every other object 1 ms.
        fn cost(key: usize) -> Duration {
            Duration::from_millis(if key == 0 { 100 } else { 1 })
        }

        let queue = through_queue(Queue::new(), adds, gap, cost).await;
        let broken = through_queue(QueueWithoutProcessingSet::new(), adds, gap, cost).await;
        let channel = through_channel(adds, gap, cost).await;

        // Durable: the queue never hands a held key to a second worker...
        assert_eq!(queue.violations, 0);
        // ...while the channel and the queue without its processing set do, every time object 0's
        // next event arrives (64 ms after the last) while that one is still reconciled (100 ms).
        assert!(channel.violations > 0 && broken.violations > 0);
        assert_eq!((channel.violations, broken.violations), (99, 99));
        // The queue keeps object 0's events that arrive while it is held in `dirty`, and reconciles
        // it again when it is done: back to back, 65 times for its 100 events.
        assert_eq!(queue.reconciles, 63 * 100 + 65);
        assert_eq!(channel.reconciles, adds as u64);
        controlloop_book::lab::workqueue::contention::record_virtual(queue, broken, channel, adds);
        // book: end ch01_contention_virtual
    });
}

/// The real-clock run, repeated (2 runs under `cargo test`, 10 under `cargo run`).
pub fn ch01_contention_real() {
    // book: ch01_contention_real
    use controlloop::workqueue::Queue;
    use controlloop_book::kit::measured::command_run;
    use controlloop_book::lab::rig;
    use controlloop_book::lab::workqueue::{
        bands,
        contention::{ADDS, KEYS, through_channel, through_queue},
    };
    use std::time::{Duration, Instant};
    // client-go's shape: a reconcile that yields once, and adds as fast as they can be made.
    fn yield_once(_key: usize) -> Duration {
        Duration::ZERO
    }
    let runs = if command_run() { 10 } else { 2 }; // 10 under `cargo run`
    let (mut queue_runs, mut channel_runs) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let start = Instant::now();
        let queue = rig::real(through_queue(Queue::new(), ADDS, None, yield_once));
        queue_runs.push((queue, start.elapsed()));
        let start = Instant::now();
        let channel = rig::real(through_channel(ADDS, None, yield_once));
        channel_runs.push((channel, start.elapsed()));

        // Durable, on every run: the queue hands no held key out, and coalesces, but never below
        // one reconcile per key; the channel delivers every add.
        assert_eq!(queue.violations, 0);
        assert!(KEYS as u64 <= queue.reconciles && queue.reconciles < ADDS as u64);
        assert_eq!(channel.reconciles, ADDS as u64);
        // How far the queue merges, and how often the channel hands a held key out, are the
        // machine's doing: shown beside the reference runs, not checked.
        let per_add = queue.reconciles as f64 / ADDS as f64;
        bands::QUEUE_RECONCILES_PER_ADD.show(per_add);
        bands::CHANNEL_VIOLATIONS.show(channel.violations);
    }
    controlloop_book::lab::workqueue::contention::record_real(&queue_runs, &channel_runs);
    // book: end ch01_contention_real
}

/// The essay's figures beside this harness's reference runs, with the verdict the harnesses
/// allow (snapshot `ch01_essay`).
pub fn ch01_essay() {
    // book: ch01_essay
    use controlloop_book::kit::basis::Basis;
    use controlloop_book::lab::workqueue::{bands, contention::ADDS};
    use std::fmt::Write;
    // The essay's figures: Go, under its race detector, with more work per reconcile.
    let essay_queue_reconciles = 148_497;
    let essay_channel_violations = 21_940;

    // Another harness: its figures are placed among this harness's runs, and not judged by them.
    let why = "not comparable: the harnesses differ";
    let mut table = String::new();
    for (figure, value, basis) in [
        (
            "queue reconciles per add",
            essay_queue_reconciles as f64 / ADDS as f64,
            bands::QUEUE_RECONCILES_PER_ADD.basis,
        ),
        (
            "channel violations",
            essay_channel_violations as f64,
            bands::CHANNEL_VIOLATIONS.basis,
        ),
    ] {
        let runs = Basis::of_file(basis).expect("the runs of this harness");
        writeln!(table, "{figure}: {}; {why}", runs.beside(value)).unwrap();
    }
    controlloop_book::kit::snap::text("ch01_essay", table);
    // book: end ch01_essay
}

/// Writes the virtual run's table (exact: the schedule is fixed).
pub fn record_virtual(queue: Counts, broken: Counts, channel: Counts, adds: usize) {
    let mut table = format!(
        "{:<30} {:>5} {:>11} {:>11}\n",
        "handout", "adds", "reconciles", "violations"
    );
    for (name, c) in [
        ("queue", queue),
        ("queue without processing set", broken),
        ("channel", channel),
    ] {
        table.push_str(&format!(
            "{name:<30} {adds:>5} {:>11} {:>11}\n",
            c.reconciles, c.violations
        ));
    }
    snap::text("ch01_contention_virtual", table);
}

/// One variant's real-clock runs, as the snapshot pins them.
#[derive(Debug, serde::Serialize)]
struct Pinned {
    adds: usize,
    reconciles: Figure,
    violations: Figure,
}

/// The queue's real-clock runs, as the snapshot pins them.
#[derive(Debug, serde::Serialize)]
struct PinnedQueue {
    adds: usize,
    reconciles_per_add: Shown<f64>,
    violations: Figure,
}

/// A durable number (exact) or a run-specific one (its reference runs).
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
enum Figure {
    Exact(u64),
    Shown(Shown<u64>),
}

impl Figure {
    /// The one value every run had; panics if two runs differ.
    fn exact(runs: &[(Counts, Duration)], what: &str, f: fn(&Counts) -> u64) -> Figure {
        let first = f(&runs[0].0);
        assert!(runs.iter().all(|(c, _)| f(c) == first), "{what} varies");
        Figure::Exact(first)
    }

    /// Every run's figure shown beside the reference runs (nothing checked).
    fn shown(runs: &[(Counts, Duration)], reference: Reference, f: fn(&Counts) -> u64) -> Figure {
        let shown: Vec<_> = runs.iter().map(|(c, _)| reference.show(f(c))).collect();
        Figure::Shown(shown[0])
    }
}

/// Every run's reconciles per add, shown beside the reference runs (nothing checked).
fn per_add_shown(runs: &[(Counts, Duration)], reference: Reference) -> Shown<f64> {
    let shown: Vec<_> = runs
        .iter()
        .map(|(c, _)| reference.show(c.reconciles as f64 / ADDS as f64))
        .collect();
    shown[0]
}

/// Writes the real-clock runs' snapshot (durable numbers exact, run-specific ones as their
/// bands) and this run's measured values for the site.
pub fn record_real(queue: &[(Counts, Duration)], channel: &[(Counts, Duration)]) {
    #[derive(serde::Serialize)]
    struct Report {
        queue: PinnedQueue,
        channel: Pinned,
    }
    let report = Report {
        queue: PinnedQueue {
            adds: ADDS,
            reconciles_per_add: per_add_shown(queue, bands::QUEUE_RECONCILES_PER_ADD),
            violations: Figure::exact(queue, "queue violations", |c| c.violations),
        },
        channel: Pinned {
            adds: ADDS,
            reconciles: Figure::exact(channel, "channel reconciles", |c| c.reconciles),
            violations: Figure::shown(channel, bands::CHANNEL_VIOLATIONS, |c| c.violations),
        },
    };
    let written = measured::record("ch01_contention_real", measured_table(queue, channel));
    written.expect("chapters/measured is writable");
    snap::yaml("ch01_contention_real", &report, vec![]);
}

/// Min / median / max of each figure over the runs, as a Markdown table.
pub fn measured_table(queue: &[(Counts, Duration)], channel: &[(Counts, Duration)]) -> String {
    fn spread(mut v: Vec<f64>, digits: usize) -> String {
        v.sort_by(f64::total_cmp);
        let pick = |i: usize| format!("{:.digits$}", v[i]);
        format!(
            "{} / {} / {}",
            pick(0),
            pick(v.len() / 2),
            pick(v.len() - 1)
        )
    }
    let mut out = format!(
        "| {} runs of each (min / median / max) | reconciles | violations | wall ms |\n|---|---|---|---|\n",
        queue.len()
    );
    for (name, runs) in [("queue", queue), ("channel", channel)] {
        let col = |f: &dyn Fn(&(Counts, Duration)) -> f64, digits| {
            spread(runs.iter().map(f).collect(), digits)
        };
        out.push_str(&format!(
            "| {name} | {} | {} | {} |\n",
            col(&|(c, _)| c.reconciles as f64, 0),
            col(&|(c, _)| c.violations as f64, 0),
            col(&|(_, d)| d.as_secs_f64() * 1e3, 1),
        ));
    }
    out
}

/// A key type the harness can run with besides `usize`: the benchmark's `String` and
/// `Request` rows (`workqueue/contention_16x64x320k/Queue/{String,Request}`). Object `i`'s key
/// is `default/obj-NNNNNNN` (seven digits), and a worker reads the object's index back from
/// the key's last seven digits, which costs a few nanoseconds and no hash.
pub trait HarnessKey: Eq + std::hash::Hash + Clone + Send + Sync + 'static {
    /// The key of object `i`.
    fn for_object(i: usize) -> Self;
    /// The object a key names (the inverse of [`for_object`](Self::for_object)).
    fn object(&self) -> usize;
    /// Adds this key to `queue` by reference ([`Queue::add_ref`]), as a handler that holds the
    /// object's metadata can: the queue builds its own copy only when it stores one.
    fn add_to(&self, queue: &Queue<Self>);
}

fn digits(s: &str) -> usize {
    let b = s.as_bytes();
    b[b.len() - 7..]
        .iter()
        .fold(0, |n, d| n * 10 + usize::from(d - b'0'))
}

impl HarnessKey for String {
    fn for_object(i: usize) -> Self {
        format!("default/obj-{i:07}")
    }
    fn object(&self) -> usize {
        digits(self)
    }
    fn add_to(&self, queue: &Queue<Self>) {
        queue.add_ref(self.as_str())
    }
}

impl HarnessKey for controlloop::controller::Request {
    fn for_object(i: usize) -> Self {
        controlloop::controller::Request::new("default", format!("obj-{i:07}"))
    }
    fn object(&self) -> usize {
        digits(&self.name)
    }
    fn add_to(&self, queue: &Queue<Self>) {
        queue.add_ref(&controlloop::controller::RequestRef::from(self))
    }
}

/// The harness's queue with keys of type `K`: `add(i)` adds object `i`'s pre-generated key by
/// reference ([`HarnessKey::add_to`]), so an add that coalesces builds nothing and one that
/// stores the key clones it once; a worker's claim reads the object back from its key.
pub struct KeyedQueue<K> {
    queue: Queue<K>,
    keys: Arc<[K]>,
}

impl<K> Clone for KeyedQueue<K> {
    fn clone(&self) -> Self {
        KeyedQueue {
            queue: self.queue.clone(),
            keys: self.keys.clone(),
        }
    }
}

impl<K: HarnessKey> KeyedQueue<K> {
    /// A new queue, with the keys of objects `0..KEYS` generated now.
    pub fn new() -> Self {
        KeyedQueue {
            queue: Queue::new(),
            keys: (0..KEYS).map(K::for_object).collect(),
        }
    }
}

impl<K: HarnessKey> Default for KeyedQueue<K> {
    fn default() -> Self {
        Self::new()
    }
}

/// A [`KeyedQueue`]'s claim: the held key, and the object it names.
pub struct KeyedClaim<K: HarnessKey> {
    _claim: Claim<K, Queue<K>>,
    object: usize,
}

impl<K: HarnessKey> Deref for KeyedClaim<K> {
    type Target = usize;
    fn deref(&self) -> &usize {
        &self.object
    }
}

impl<K: HarnessKey> WorkQueue for KeyedQueue<K> {
    type Claim = KeyedClaim<K>;
    fn add(&self, key: usize) {
        self.keys[key].add_to(&self.queue);
    }
    async fn claim(&self) -> Option<Self::Claim> {
        let claim = self.queue.claim().await?;
        let object = claim.object();
        Some(KeyedClaim {
            _claim: claim,
            object,
        })
    }
    fn shut_down(&self) {
        self.queue.shut_down();
    }
}

#[cfg(test)]
mod keyed_tests {
    use super::*;
    use controlloop::controller::Request;

    #[test]
    fn a_key_names_its_object_back() {
        for i in [0, 7, 63, 1_234_567] {
            assert_eq!(String::for_object(i).object(), i);
            assert_eq!(Request::for_object(i).object(), i);
        }
        assert_eq!(String::for_object(42), "default/obj-0000042");
        assert_eq!(
            Request::for_object(42),
            Request::new("default", "obj-0000042")
        );
    }

    #[test]
    fn the_harness_runs_with_owned_keys() {
        crate::lab::rig::paused(async {
            fn one_ms(_: usize) -> Duration {
                Duration::from_millis(1)
            }
            let gap = Some(Duration::from_millis(1));
            let s = through_queue(KeyedQueue::<String>::new(), 4 * KEYS, gap, one_ms).await;
            let r = through_queue(KeyedQueue::<Request>::new(), 4 * KEYS, gap, one_ms).await;
            assert_eq!(s, r);
            assert_eq!(s.violations, 0);
            assert_eq!(s.reconciles, 4 * KEYS as u64);
        });
    }
}
