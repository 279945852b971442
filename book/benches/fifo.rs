//! What the informer's FIFOs cost: deltas per second through add + pop for both FIFOs (in the
//! modes an informer runs them), and one Replace of 10,000 objects (a relist).
use std::{hint::black_box, sync::Arc};

use controlloop::cache::Store;
use controlloop::features::FeatureGates;
use controlloop_book::lab::fifo::{cm, informer_fifo};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::ConfigMap;

const KEYS: usize = 100;
const DELTAS: usize = 1_000;
const RELIST: usize = 10_000;

fn objects(n: usize) -> Vec<Arc<ConfigMap>> {
    (0..n).map(|i| cm(&format!("cm-{i}"), Some(1))).collect()
}

/// 1,000 updates over 100 keys, then popped until empty: DeltaFIFO (1.32) pops 100 lists,
/// RealFIFO (1.33, 1.36) pops 1,000 single deltas.
fn add_pop(c: &mut Criterion) {
    let objs = objects(KEYS);
    let mut g = c.benchmark_group("fifo/add_pop");
    g.throughput(Throughput::Elements(DELTAS as u64));
    for minor in [32, 33, 36] {
        let label = match minor {
            32 => "DeltaFIFO_1.32",
            33 => "RealFIFO_1.33",
            _ => "RealFIFO_atomic_1.36",
        };
        g.bench_function(label, |b| {
            b.iter_batched(
                || informer_fifo(minor).1,
                |fifo| {
                    for i in 0..DELTAS {
                        fifo.update(objs[i % KEYS].clone()).unwrap();
                    }
                    let mut n = 0;
                    while let Some(r) = fifo.try_pop(|_, _| Ok::<(), ()>(())) {
                        n += r.unwrap().len();
                    }
                    assert_eq!(n, DELTAS);
                    black_box(n)
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

/// One Replace of 10,000 objects into a fresh informer FIFO whose indexer already holds them
/// (a relist of an unchanged cache).
fn replace(c: &mut Criterion) {
    let objs = objects(RELIST);
    let mut g = c.benchmark_group("fifo/replace_10k");
    g.throughput(Throughput::Elements(RELIST as u64));
    for minor in [32, 33, 36] {
        let label = match minor {
            32 => "DeltaFIFO_1.32",
            33 => "RealFIFO_1.33",
            _ => "RealFIFO_atomic_1.36",
        };
        g.bench_function(label, |b| {
            b.iter_batched(
                || {
                    let store = Store::new();
                    store.replace(objs.clone(), "1").unwrap();
                    let gates = FeatureGates::at_minor(minor).unwrap();
                    let fifo =
                        controlloop::cache::select_fifo(&gates).build("*v1.ConfigMap", &store);
                    (fifo, objs.clone())
                },
                |(fifo, list)| {
                    fifo.replace(list, "2").unwrap();
                    black_box(fifo.len())
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, add_pop, replace);
criterion_main!(benches);
