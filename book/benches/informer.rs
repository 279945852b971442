//! Informer throughput: events per second from an API-server write to the handler.
//!
//! One server, one informer (the 1.36 default: streaming list, atomic RealFIFO), one handler
//! that counts. Each iteration merge-patches each of 100 ConfigMaps once and waits until the
//! handler has seen all 100 updates. Two transports to the same embedded server:
//! - `http`: `kube::Client` over a real loopback socket;
//! - `in_process`: `kube::Client` over the server's router as a tower `Service` (no socket).
//!
//! The writes are sequential, so each figure includes one write round trip per event; the
//! informer is not the only thing measured, and the chapter says so.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use controlloop::apiserver::{ApiServer, Cluster, ServerOptions};
use controlloop::cache::{HandlerFuncs, InformerOptions, SharedIndexInformer};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use tokio::sync::Notify;

const OBJECTS: u64 = 100;

struct Rig {
    api: Api<ConfigMap>,
    seen: Arc<AtomicU64>,
    notify: Arc<Notify>,
    round: u64,
}

async fn rig(client: kube::Client) -> Rig {
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    for i in 0..OBJECTS {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("c{i}")),
                ..Default::default()
            },
            ..Default::default()
        };
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    let informer = Arc::new(SharedIndexInformer::new(
        api.clone(),
        InformerOptions::new(Duration::ZERO),
    ));
    let seen = Arc::new(AtomicU64::new(0));
    let notify = Arc::new(Notify::new());
    let (s, n) = (seen.clone(), notify.clone());
    informer
        .add_event_handler(HandlerFuncs::new().on_update(move |_, _: Arc<ConfigMap>| {
            s.fetch_add(1, Ordering::SeqCst);
            n.notify_one();
        }))
        .unwrap();
    let inf = informer.clone();
    tokio::spawn(async move { inf.run(futures::future::pending()).await });
    tokio::time::timeout(Duration::from_secs(30), informer.wait_synced())
        .await
        .expect("informer never synced");
    Rig {
        api,
        seen,
        notify,
        round: 0,
    }
}

impl Rig {
    /// One round: update every object once, wait for every update event.
    async fn round(&mut self) {
        self.round += 1;
        let target = self.round * OBJECTS;
        for i in 0..OBJECTS {
            let patch = serde_json::json!({"data": {"round": self.round.to_string()}});
            self.api
                .patch(
                    &format!("c{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .unwrap();
        }
        tokio::time::timeout(Duration::from_secs(30), async {
            while self.seen.load(Ordering::SeqCst) < target {
                self.notify.notified().await;
            }
        })
        .await
        .expect("handler never saw every update: events lost between server and handler?");
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("informer_write_to_handler");
    g.throughput(Throughput::Elements(OBJECTS));
    g.sample_size(10);

    let server = rt.block_on(ApiServer::start()).unwrap();
    let mut http = rt.block_on(async { rig(server.client()).await });
    g.bench_function("http", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                rt.block_on(http.round());
            }
            start.elapsed()
        })
    });

    let cluster = Cluster::new(ServerOptions::default());
    let mut in_process = rt.block_on(async { rig(cluster.in_process_client()).await });
    g.bench_function("in_process", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                rt.block_on(in_process.round());
            }
            start.elapsed()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
