//! The workqueue's speed, row for row with client-go's workqueue benchmark: add+get+done on
//! distinct keys and an add of a key that is already queued, each with 1, 2 and 16 tasks, and
//! chapter 01's contention harness through the queue and through a channel.
//!
//! # Keys
//!
//! Keys are pre-generated `default/obj-NNNNNNN`, as in client-go's benchmark, outside the timed
//! loop. Each row runs with three key types:
//!
//! - the main rows: `&'static str`, which like a Go string is a pointer and a length: copying it
//!   costs nothing, as Go's `q.Add(key)` copies a string header;
//! - `R/String`: an owned `String` `default/obj-NNNNNNN`;
//! - `R/Request`: `controlloop::controller::Request::new("default", "obj-NNNNNNN")`, the key a
//!   controller's queue holds.
//!
//! **An add of a new key clones its owned key** (one allocation for a `String`, two for a
//! `Request`, and the matching frees), inside the timed loop: the `add_get_done` rows. That is
//! what a controller pays: its event handler builds a fresh key for every event and hands it to
//! `add`, which takes it by value; in Go the same request is a copy of two string headers and
//! allocates nothing. So those rows charge the port with an allocation client-go does not
//! make, on purpose: it is a real cost of an owned key in Rust. The `workqueue/key_clone/*`
//! rows time that clone and its free alone.
//!
//! **An add of a key that is already queued borrows it**: the `add_duplicate` rows add with
//! `Queue::add_ref` (a `&str` for a `String`, a `RequestRef` for a `Request`), as a handler
//! that holds the object's metadata can, and the queue builds an owned key only when it stores
//! one, which on these rows it never does. The main rows' `&'static str` keys are copied, as
//! before.
//!
//! # The multi-task rows
//!
//! `tasks` tasks share the operations on a two-thread runtime, and the figure is wall time
//! divided by the operations completed, as client-go's parallel rows are (GOMAXPROCS=2).
//!
//! - **Every task takes turns.** A tokio task runs until it awaits something that is not
//!   ready, and these operations never wait: without a yield, each task would run its whole
//!   share before the next one started, and the 16-task rows would measure two tasks (one per
//!   thread) back to back. So every task yields after every `TURN` (256) operations: all of
//!   them take turns on the two threads, as Go's goroutines do when they meet a contended lock.
//!   A yield on the two-thread runtime costs far more than an add (it can wake the other
//!   thread); shared by 256 operations it is a small part of each figure, where a yield every
//!   16 made the duplicate-add rows mostly a measure of the scheduler.
//! - **No run can hang.** An add+get+done task adds a key from its own slice and then gets
//!   whatever is queued; if a thread is descheduled between `get` and `done` long enough, an
//!   add merges into a held key and a get would wait for ever. The task is
//!   `controlloop_book::lab::workqueue::cycles::cycles`, whose tests show that run ending instead
//!   (and the old loop hanging); the figure divides by the operations actually completed.
//!
//! # The contention rows
//!
//! `Queue/String` and `Queue/Request` run chapter 01's harness through
//! `contention::KeyedQueue`: the same producer and workers, each add by reference to the
//! object's key (`Queue::add_ref`, which clones it only to store it), and a worker reads the
//! object's index back from the key's last seven digits.
use std::{
    hash::Hash,
    hint::black_box,
    time::{Duration, Instant},
};

use controlloop::{
    controller::{Request, RequestRef},
    workqueue::Queue,
};
use controlloop_book::lab::workqueue::{
    contention::{ADDS, KeyedQueue, through_channel, through_queue},
    cycles::{Idle, TURN, cycles},
};
use criterion::{Criterion, criterion_group, criterion_main};
use futures::FutureExt;

const KEYS: usize = 1 << 16;

/// A key type the rows run with: its name suffix and how key `i` is made.
trait Key: Eq + Hash + Clone + Send + Sync + 'static {
    /// `""` for the main rows, else `/String` or `/Request`.
    const SUFFIX: &'static str;
    fn make(i: usize) -> Self;
    /// Adds `key` as a caller that holds it without owning a copy does: by reference, for the
    /// owned kinds.
    fn add_borrowed(q: &Queue<Self>, key: &Self);
}

impl Key for &'static str {
    const SUFFIX: &'static str = "";
    fn make(i: usize) -> Self {
        Box::leak(format!("default/obj-{i:07}").into_boxed_str())
    }
    fn add_borrowed(q: &Queue<Self>, key: &Self) {
        q.add(*key)
    }
}

impl Key for String {
    const SUFFIX: &'static str = "/String";
    fn make(i: usize) -> Self {
        format!("default/obj-{i:07}")
    }
    fn add_borrowed(q: &Queue<Self>, key: &Self) {
        q.add_ref(key.as_str())
    }
}

impl Key for Request {
    const SUFFIX: &'static str = "/Request";
    fn make(i: usize) -> Self {
        Request::new("default", format!("obj-{i:07}"))
    }
    fn add_borrowed(q: &Queue<Self>, key: &Self) {
        q.add_ref(&RequestRef::from(key))
    }
}

/// The `KEYS` keys, generated once and kept for the whole run.
fn keys<K: Key>() -> &'static [K] {
    Box::leak((0..KEYS).map(K::make).collect())
}

fn get_now<T: Eq + Hash + Clone>(q: &Queue<T>) -> T {
    q.get()
        .now_or_never()
        .expect("an item is queued")
        .expect("not shut down")
}

fn one_task<K: Key>(c: &mut Criterion) {
    let keys = keys::<K>();
    let q = Queue::new();
    let mut i = 0;
    c.bench_function(
        &format!("workqueue/add_get_done/1_task{}", K::SUFFIX),
        |b| {
            b.iter(|| {
                q.add(keys[i % KEYS].clone());
                let k = get_now(&q);
                q.done(black_box(&k));
                i += 1;
            })
        },
    );
    let q = Queue::new();
    q.add(keys[0].clone());
    c.bench_function(
        &format!("workqueue/add_duplicate/1_task{}", K::SUFFIX),
        |b| b.iter(|| K::add_borrowed(&q, black_box(&keys[0]))),
    );
    if !K::SUFFIX.is_empty() {
        c.bench_function(&format!("workqueue/key_clone{}", K::SUFFIX), |b| {
            b.iter(|| black_box(black_box(&keys[0]).clone()))
        });
    }
}

fn many_tasks<K: Key>(c: &mut Criterion) {
    let keys = keys::<K>();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    for tasks in [2usize, 16] {
        let name = format!("workqueue/add_get_done/{tasks}_tasks{}", K::SUFFIX);
        c.bench_function(&name, |b| {
            b.iter_custom(|iters| {
                let q = Queue::new();
                let per = (iters as usize).div_ceil(tasks);
                let span = KEYS / tasks;
                let idle = Idle::new(tasks);
                let start = Instant::now();
                let completed: usize = rt.block_on(async {
                    let handles: Vec<_> = (0..tasks)
                        .map(|t| {
                            let slice = &keys[t * span..(t + 1) * span];
                            tokio::spawn(cycles(q.clone(), slice, per, idle.clone()))
                        })
                        .collect();
                    let mut completed = 0;
                    for h in handles {
                        completed += h.await.unwrap();
                    }
                    completed
                });
                start
                    .elapsed()
                    .mul_f64(iters as f64 / completed.max(1) as f64)
            })
        });
        let name = format!("workqueue/add_duplicate/{tasks}_tasks{}", K::SUFFIX);
        c.bench_function(&name, |b| {
            b.iter_custom(|iters| {
                let q = Queue::new();
                q.add(keys[0].clone());
                let per = (iters as usize).div_ceil(tasks);
                let start = Instant::now();
                rt.block_on(async {
                    let handles: Vec<_> = (0..tasks)
                        .map(|_| {
                            let q = q.clone();
                            tokio::spawn(async move {
                                for j in 1..=per {
                                    K::add_borrowed(&q, black_box(&keys[0]));
                                    if j % TURN == 0 {
                                        tokio::task::yield_now().await;
                                    }
                                }
                            })
                        })
                        .collect();
                    for h in handles {
                        h.await.unwrap();
                    }
                });
                start.elapsed().mul_f64(iters as f64 / (per * tasks) as f64)
            })
        });
    }
}

/// Chapter 01's real-clock harness (16 workers, 64 keys, 320,000 adds, a reconcile that
/// yields once), through the queue and through the channel: the same functions the chapter
/// runs. The `Queue/String` and `Queue/Request` rows run it with owned keys (see the module
/// docs).
fn contention(c: &mut Criterion) {
    fn yield_once(_key: usize) -> Duration {
        Duration::ZERO
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("workqueue/contention_16x64x320k");
    g.sample_size(10);
    g.bench_function("Queue", |b| {
        b.iter(|| rt.block_on(through_queue(Queue::new(), ADDS, None, yield_once)))
    });
    g.bench_function("Queue/String", |b| {
        b.iter(|| {
            let q = KeyedQueue::<String>::new();
            rt.block_on(through_queue(q, ADDS, None, yield_once))
        })
    });
    g.bench_function("Queue/Request", |b| {
        b.iter(|| {
            let q = KeyedQueue::<Request>::new();
            rt.block_on(through_queue(q, ADDS, None, yield_once))
        })
    });
    g.bench_function("Channel", |b| {
        b.iter(|| rt.block_on(through_channel(ADDS, None, yield_once)))
    });
    g.finish();
}

fn one_task_all(c: &mut Criterion) {
    one_task::<&'static str>(c);
    one_task::<String>(c);
    one_task::<Request>(c);
}

fn many_tasks_all(c: &mut Criterion) {
    many_tasks::<&'static str>(c);
    many_tasks::<String>(c);
    many_tasks::<Request>(c);
}

criterion_group!(benches, one_task_all, many_tasks_all, contention);
criterion_main!(benches);
