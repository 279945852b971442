//! The priority queue's cost beside the rate-limiting queue's, measured in the same run so
//! the comparison is a ratio on one machine under one load.
//!
//! Two rows per group, one per queue, both with controller-runtime v0.24's default limiter
//! (per-item exponential only), one task, keys `default/obj-NNNN` as `&'static str`:
//! - `add_get_done_1000`: add 1,000 distinct keys, then get and done each (upstream's
//!   `BenchmarkAddGetDone`);
//! - `add_duplicate`: add a key that is already queued (upstream's `BenchmarkAddOnly` after
//!   its first round: every add merges).
use std::hint::black_box;

use controlloop::{
    controller::priorityqueue::PriorityQueue,
    workqueue::{RateLimitingQueue, default_item_based_rate_limiter},
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::FutureExt;

const BATCH: usize = 1000;

fn keys() -> Vec<&'static str> {
    (0..BATCH)
        .map(|i| &*Box::leak(format!("default/obj-{i:04}").into_boxed_str()))
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

fn add_get_done(c: &mut Criterion) {
    let rt = runtime();
    let _entered = rt.enter();
    let keys = keys();
    let mut g = c.benchmark_group("priorityqueue/add_get_done_1000");
    g.throughput(Throughput::Elements(BATCH as u64));

    let rl = RateLimitingQueue::new(default_item_based_rate_limiter());
    g.bench_function("rate_limiting_queue", |b| {
        b.iter(|| {
            for k in &keys {
                rl.add(*k);
            }
            for _ in 0..BATCH {
                let k = rl.get().now_or_never().flatten().expect("a ready key");
                rl.done(black_box(&k));
            }
        })
    });

    let pq = PriorityQueue::new("");
    g.bench_function("priority_queue", |b| {
        b.iter(|| {
            for k in &keys {
                pq.add(*k);
            }
            for _ in 0..BATCH {
                let k = pq.get().now_or_never().flatten().expect("a ready key");
                pq.done(black_box(&k));
            }
        })
    });
    g.finish();
}

fn add_duplicate(c: &mut Criterion) {
    let rt = runtime();
    let _entered = rt.enter();
    let mut g = c.benchmark_group("priorityqueue/add_duplicate");

    let rl = RateLimitingQueue::new(default_item_based_rate_limiter());
    rl.add("default/web");
    g.bench_function("rate_limiting_queue", |b| {
        b.iter(|| rl.add(black_box("default/web")))
    });

    let pq = PriorityQueue::new("");
    pq.add("default/web");
    g.bench_function("priority_queue", |b| {
        b.iter(|| pq.add(black_box("default/web")))
    });
    g.finish();
}

criterion_group!(benches, add_get_done, add_duplicate);
criterion_main!(benches);
