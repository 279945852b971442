//! The priority queue's cost beside the rate-limiting queue's, measured in the same run so
//! the comparison is a ratio on one machine under one load.
//!
//! Two rows per group, one per queue, both with controller-runtime v0.24's default limiter
//! (per-item exponential only), one task, keys `default/obj-NNNN`:
//! - `add_get_done_1000`: add 1,000 distinct keys, then get and done each (upstream's
//!   `BenchmarkAddGetDone`);
//! - `add_duplicate`: add a key that is already queued, `default/web` (upstream's
//!   `BenchmarkAddOnly` after its first round: every add merges). The priority queue buffers
//!   an add and merges it at the next flush, which upstream's flush goroutine runs beside the
//!   adds. Here nothing drives the runtime, so the flush task never runs: every 1,000th add the
//!   row calls `len`, which flushes, and each add's figure includes its share of that flush
//!   (the merge itself). A row that never flushed would time a buffer growing without bound
//!   (and its page faults), not a merge.
//!
//! Each row runs with three key types, pre-generated outside the timed loop: `&'static str`
//! (the main rows; a copy is free, as a Go string header's is), `R/String` (an owned `String`
//! with the same text) and `R/Request` (`Request::new("default", "obj-NNNN")`, or
//! `Request::new("default", "web")`). As in `benches/workqueue.rs`, **every add clones its
//! owned key** inside the timed loop: a controller's event handler builds a fresh `Request` for
//! every event and hands it over by value, an allocation (two for a `Request`) that Go's string
//! headers do not need.
use std::{hash::Hash, hint::black_box};

use controlloop::{
    controller::{Request, priorityqueue::PriorityQueue},
    workqueue::{RateLimitingQueue, default_item_based_rate_limiter},
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::FutureExt;

const BATCH: usize = 1000;

/// A key type the rows run with: its name suffix and how a key is made from its name.
trait Key: Eq + Hash + Clone + Send + Sync + 'static {
    /// `""` for the main rows, else `/String` or `/Request`.
    const SUFFIX: &'static str;
    /// The key of object `name` in namespace `default`.
    fn make(name: &str) -> Self;
}

impl Key for &'static str {
    const SUFFIX: &'static str = "";
    fn make(name: &str) -> Self {
        Box::leak(format!("default/{name}").into_boxed_str())
    }
}

impl Key for String {
    const SUFFIX: &'static str = "/String";
    fn make(name: &str) -> Self {
        format!("default/{name}")
    }
}

impl Key for Request {
    const SUFFIX: &'static str = "/Request";
    fn make(name: &str) -> Self {
        Request::new("default", name)
    }
}

fn keys<K: Key>() -> Vec<K> {
    (0..BATCH)
        .map(|i| K::make(&format!("obj-{i:04}")))
        .collect()
}

/// Both queues spawn a timer task at construction, so they are built inside a runtime; the
/// benchmarks themselves never wait (every get finds a ready key).
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn add_get_done<K: Key>(c: &mut Criterion) {
    let rt = runtime();
    let _entered = rt.enter();
    let keys = keys::<K>();
    let mut g = c.benchmark_group("priorityqueue/add_get_done_1000");
    g.throughput(Throughput::Elements(BATCH as u64));

    let rl = RateLimitingQueue::new(default_item_based_rate_limiter());
    g.bench_function(format!("rate_limiting_queue{}", K::SUFFIX), |b| {
        b.iter(|| {
            for k in &keys {
                rl.add(k.clone());
            }
            for _ in 0..BATCH {
                let k = rl.get().now_or_never().flatten().expect("a ready key");
                rl.done(black_box(&k));
            }
        })
    });

    let pq = PriorityQueue::new("");
    g.bench_function(format!("priority_queue{}", K::SUFFIX), |b| {
        b.iter(|| {
            for k in &keys {
                pq.add(k.clone());
            }
            for _ in 0..BATCH {
                let k = pq.get().now_or_never().flatten().expect("a ready key");
                pq.done(black_box(&k));
            }
        })
    });
    g.finish();
}

fn add_duplicate<K: Key>(c: &mut Criterion) {
    let rt = runtime();
    let _entered = rt.enter();
    let key = K::make("web");
    let mut g = c.benchmark_group("priorityqueue/add_duplicate");

    let rl = RateLimitingQueue::new(default_item_based_rate_limiter());
    rl.add(key.clone());
    g.bench_function(format!("rate_limiting_queue{}", K::SUFFIX), |b| {
        b.iter(|| rl.add(black_box(&key).clone()))
    });

    let pq = PriorityQueue::new("");
    pq.add(key.clone());
    let mut adds = 0usize;
    g.bench_function(format!("priority_queue{}", K::SUFFIX), |b| {
        b.iter(|| {
            pq.add(black_box(&key).clone());
            adds += 1;
            if adds.is_multiple_of(BATCH) {
                black_box(pq.len()); // flushes the buffered adds: each merges
            }
        })
    });
    g.finish();
}

fn all(c: &mut Criterion) {
    add_get_done::<&'static str>(c);
    add_get_done::<String>(c);
    add_get_done::<Request>(c);
    add_duplicate::<&'static str>(c);
    add_duplicate::<String>(c);
    add_duplicate::<Request>(c);
}

criterion_group!(benches, all);
criterion_main!(benches);
