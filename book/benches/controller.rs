//! The controller's cost: reconciles per second over 10,000 objects with 16 workers, and the
//! latency from a server write to the start of the reconcile it causes.
//!
//! Both run against the embedded API server in-process (no socket), on a two-thread runtime
//! with the real clock, with a reconciler that reads the object from the cache and returns.
use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use controlloop::controller::{Context, Controller, ReconcileResult as Res, Request};
use controlloop_book::lab::rig::{self, Backend, Fixture, value_of};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::ConfigMap;
use tokio::sync::watch;

const OBJECTS: u64 = 10_000;
const WORKERS: usize = 16;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// 10,000 objects in the cache; each iteration queues all 10,000 keys and waits until 16
/// workers have reconciled them all.
fn throughput(c: &mut Criterion) {
    let rt = runtime();
    let (controller, done, _f) = rt.block_on(async {
        let mut f = Fixture::new(&Backend::InProcess).await.unwrap();
        for i in 0..OBJECTS {
            f.target.create(&format!("o{i}"), i).await.unwrap();
        }
        let done = Arc::new(AtomicU64::new(0));
        let d = done.clone();
        let controller = Controller::builder("bench")
            .max_concurrent_reconciles(WORKERS)
            .build(&f.informer, move |req: Request, ctx: Context<ConfigMap>| {
                let seen = ctx.get(&req).and_then(|cm| value_of(&cm)).is_some();
                d.fetch_add(seen as u64, Ordering::Relaxed);
                async { Ok(Res::done()) }
            })
            .unwrap();
        f.run_informer();
        let c = controller.clone();
        tokio::spawn(async move { c.run(futures::future::pending()).await });
        while done.load(Ordering::Relaxed) < OBJECTS {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        (controller, done, f)
    });
    let requests: Vec<Request> = (0..OBJECTS)
        .map(|i| Request::new(rig::NAMESPACE, format!("o{i}")))
        .collect();
    let mut g = c.benchmark_group("controller");
    g.throughput(Throughput::Elements(OBJECTS));
    g.sample_size(10);
    g.bench_function("reconcile_10000_objects_16_workers", |b| {
        b.iter(|| {
            rt.block_on(async {
                let target = done.load(Ordering::Relaxed) + OBJECTS;
                for r in &requests {
                    controller.queue().add(r.clone());
                }
                while done.load(Ordering::Relaxed) < target {
                    tokio::task::yield_now().await;
                }
            })
        })
    });
    g.finish();
}

/// One write to the server, timed until the reconcile it causes starts.
fn write_to_reconcile(c: &mut Criterion) {
    let rt = runtime();
    let (tx, rx) = watch::channel::<Option<(u64, Instant)>>(None);
    let f = rt.block_on(async {
        let mut f = Fixture::new(&Backend::InProcess).await.unwrap();
        f.target.create(rig::OBJECT, 0).await.unwrap();
        let controller = Controller::builder("latency")
            .build(&f.informer, move |req: Request, ctx: Context<ConfigMap>| {
                if let Some(v) = ctx.get(&req).and_then(|cm| value_of(&cm)) {
                    tx.send_replace(Some((v, Instant::now())));
                }
                async { Ok(Res::done()) }
            })
            .unwrap();
        f.run_informer();
        tokio::spawn(async move { controller.run(futures::future::pending()).await });
        f
    });
    let api = f.target.api();
    let mut value = 0;
    let mut g = c.benchmark_group("controller");
    g.bench_function("server_write_to_reconcile_start", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    value += 1;
                    let mut rx = rx.clone();
                    let sent = Instant::now();
                    rig::set_value(&api, rig::OBJECT, value).await.unwrap();
                    let started = loop {
                        rx.changed().await.unwrap();
                        if let Some((v, at)) = *rx.borrow()
                            && v == value
                        {
                            break at;
                        }
                    };
                    total += started - sent;
                }
                total
            })
        })
    });
    g.finish();
}

criterion_group!(benches, throughput, write_to_reconcile);
criterion_main!(benches);
