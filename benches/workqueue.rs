//! The workqueue's speed against client-go's figures on the same machine class
//! (shared/reference/client-go-figures.md): add+get+done on distinct keys, add of a key that
//! is already queued, each with 1, 2 and 16 tasks, and the contention harness.
//!
//! Keys are pre-generated `default/obj-NNNNNNN` strings, as in client-go's benchmark. The main
//! rows use `&'static str`, which like a Go string is a pointer and a length: copying it costs
//! nothing. The `String` rows show what an owned key costs on top (an allocation per copy).
use std::{hint::black_box, time::Instant};

use controlloop::{lab::workqueue as lab, workqueue::Queue};
use criterion::{Criterion, criterion_group, criterion_main};
use futures::FutureExt;

const KEYS: usize = 1 << 16;

fn keys() -> &'static [&'static str] {
    let v: Vec<&'static str> = (0..KEYS)
        .map(|i| &*Box::leak(format!("default/obj-{i:07}").into_boxed_str()))
        .collect();
    Box::leak(v.into_boxed_slice())
}

fn get_now<T: Eq + std::hash::Hash + Clone>(q: &Queue<T>) -> T {
    q.get()
        .now_or_never()
        .expect("an item is queued")
        .expect("not shut down")
}

fn one_task(c: &mut Criterion) {
    let keys = keys();
    let q = Queue::new();
    let mut i = 0;
    c.bench_function("workqueue/add_get_done/1_task", |b| {
        b.iter(|| {
            q.add(keys[i % KEYS]);
            let k = get_now(&q);
            q.done(black_box(&k));
            i += 1;
        })
    });
    let q = Queue::new();
    q.add(keys[0]);
    c.bench_function("workqueue/add_duplicate/1_task", |b| {
        b.iter(|| q.add(black_box(keys[0])))
    });

    let owned: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    let q = Queue::new();
    c.bench_function("workqueue/add_get_done/1_task/String", |b| {
        b.iter(|| {
            q.add(owned[i % KEYS].clone());
            let k = get_now(&q);
            q.done(black_box(&k));
            i += 1;
        })
    });
    let q = Queue::new();
    q.add(owned[0].clone());
    c.bench_function("workqueue/add_duplicate/1_task/String", |b| {
        b.iter(|| q.add(black_box(owned[0].clone())))
    });
}

/// `tasks` tasks on a two-thread runtime share `iters` operations; the figure is wall time
/// divided by all operations, as client-go's parallel rows are.
fn many_tasks(c: &mut Criterion) {
    let keys = keys();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    for tasks in [2usize, 16] {
        c.bench_function(&format!("workqueue/add_get_done/{tasks}_tasks"), |b| {
            b.iter_custom(|iters| {
                let q = Queue::new();
                let per = (iters as usize).div_ceil(tasks);
                let start = Instant::now();
                rt.block_on(async {
                    let handles: Vec<_> = (0..tasks)
                        .map(|t| {
                            let q = q.clone();
                            tokio::spawn(async move {
                                for j in 0..per {
                                    q.add(keys[(t * per + j) % KEYS]);
                                    let k = q.get().await.expect("not shut down");
                                    q.done(&k);
                                }
                            })
                        })
                        .collect();
                    for h in handles {
                        h.await.unwrap();
                    }
                });
                start.elapsed() * iters as u32 / (per * tasks) as u32
            })
        });
        c.bench_function(&format!("workqueue/add_duplicate/{tasks}_tasks"), |b| {
            b.iter_custom(|iters| {
                let q = Queue::new();
                q.add(keys[0]);
                let per = (iters as usize).div_ceil(tasks);
                let start = Instant::now();
                rt.block_on(async {
                    let handles: Vec<_> = (0..tasks)
                        .map(|_| {
                            let q = q.clone();
                            tokio::spawn(async move {
                                for _ in 0..per {
                                    q.add(black_box(keys[0]));
                                }
                            })
                        })
                        .collect();
                    for h in handles {
                        h.await.unwrap();
                    }
                });
                start.elapsed() * iters as u32 / (per * tasks) as u32
            })
        });
    }
}

fn contention(c: &mut Criterion) {
    let mut g = c.benchmark_group("workqueue/contention_16x64x320k");
    g.sample_size(10);
    for v in [lab::Variant::Queue, lab::Variant::Channel] {
        g.bench_function(format!("{v:?}"), |b| {
            b.iter_custom(|iters| (0..iters).map(|_| lab::contention(v).wall).sum())
        });
    }
    g.finish();
}

criterion_group!(benches, one_task, many_tasks, contention);
criterion_main!(benches);
