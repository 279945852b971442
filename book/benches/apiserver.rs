//! What the embedded API server costs over real HTTP: watch delivery from a write loop to one
//! watcher, fan-out of the same writes to 100 watchers, and a list of 10,000 objects.
//!
//! Writes go through `kube::Api` over HTTP, 32 in flight; watchers are `kube::Api::watch`
//! streams over HTTP, decoding every event into a `ConfigMap`, so the figures are end to end.
use std::time::{Duration, Instant};

use controlloop::apiserver::ApiServer;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchParams};
use serde_json::json;

const KEYS: usize = 100;
const IN_FLIGHT: usize = 32;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn config_map(name: String) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name);
    c.data = Some([("v".to_string(), "0".to_string())].into());
    c
}

async fn seed(api: &Api<ConfigMap>, n: usize) {
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &config_map(format!("cm-{i:05}")))
                    .await
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<_>>()
        .await
        .expect("seed");
}

/// `n` merge patches over the `KEYS` objects, `IN_FLIGHT` at a time.
async fn write_loop(api: Api<ConfigMap>, n: usize, round: usize) {
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            let patch = Patch::Merge(json!({"data": {"v": format!("{round}-{i}")}}));
            async move {
                api.patch(
                    &format!("cm-{:05}", i % KEYS),
                    &PatchParams::default(),
                    &patch,
                )
                .await
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<_>>()
        .await
        .expect("write");
}

fn watch(c: &mut Criterion) {
    let rt = runtime();
    let _in_runtime = rt.enter(); // kube clients spawn their buffer task when built
    let server = rt.block_on(ApiServer::start()).expect("start");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    rt.block_on(seed(&api, KEYS));
    let mut g = c.benchmark_group("apiserver/watch");
    g.sample_size(10).measurement_time(Duration::from_secs(10));

    const N: usize = 1_000;
    g.throughput(Throughput::Elements(N as u64));
    let rv = server.resource_version().to_string();
    let wp = WatchParams::default().disable_bookmarks();
    let mut stream = rt.block_on(api.watch(&wp, &rv)).expect("watch").boxed();
    let mut round = 0;
    g.bench_function("events_1_watcher_http", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    round += 1;
                    let writer = tokio::spawn(write_loop(api.clone(), N, round));
                    for _ in 0..N {
                        stream
                            .try_next()
                            .await
                            .expect("event")
                            .expect("stream open");
                    }
                    writer.await.expect("writer");
                }
                start.elapsed()
            })
        })
    });
    drop(stream);

    const FAN: usize = 100;
    const M: usize = 200;
    g.throughput(Throughput::Elements((M * FAN) as u64));
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    let rv = server.resource_version().to_string();
    for _ in 0..FAN {
        let mut s = rt.block_on(api.watch(&wp, &rv)).expect("watch").boxed();
        let done = done_tx.clone();
        rt.spawn(async move {
            let mut seen = 0;
            while let Some(ev) = s.next().await {
                ev.expect("event");
                seen += 1;
                if seen % M == 0 && done.send(()).is_err() {
                    return;
                }
            }
        });
    }
    g.bench_function("fan_out_100_watchers_http", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    round += 1;
                    write_loop(api.clone(), M, round).await;
                    for _ in 0..FAN {
                        done_rx.recv().await.expect("watcher finished");
                    }
                }
                start.elapsed()
            })
        })
    });
    g.finish();
    server.close_watches();
    rt.block_on(server.shutdown());
}

fn list(c: &mut Criterion) {
    let rt = runtime();
    let _in_runtime = rt.enter(); // kube clients spawn their buffer task when built
    let server = rt.block_on(ApiServer::start()).expect("start");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    const OBJECTS: usize = 10_000;
    rt.block_on(seed(&api, OBJECTS));
    let mut g = c.benchmark_group("apiserver/list");
    g.sample_size(20)
        .throughput(Throughput::Elements(OBJECTS as u64));
    g.bench_function("list_10000_http", |b| {
        b.iter(|| {
            let l = rt.block_on(api.list(&ListParams::default())).expect("list");
            assert_eq!(l.items.len(), OBJECTS);
        })
    });
    g.finish();
    rt.block_on(server.shutdown());
}

criterion_group!(benches, watch, list);
criterion_main!(benches);
