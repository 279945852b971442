//! The read a reviewer wants to save: a reconciler's lookup of its object.
//!
//! Three ways to read one Widget out of 10,000:
//! - `indexer_get_by_key`: the informer's indexer (`Store::get_by_key`), filled by a real
//!   informer from the embedded server — what a controller-runtime reconciler reads;
//! - `get_in_process`: `Api::get` to the embedded server through its router as a tower
//!   `Service` (no socket): the request and JSON costs without the network;
//! - `get_http`: `Api::get` over a loopback HTTP socket: the cheapest real GET there is.
//!
//! The two GETs run on the tokio runtime through criterion's async support (one `block_on`
//! around the whole timed loop, not one per GET); the indexer read is a plain call.

use std::{hint::black_box, sync::Arc, time::Duration};

use controlloop::apiserver::{ApiServer, Cluster};
use controlloop::cache::{InformerOptions, SharedIndexInformer};
use controlloop_book::lab::rig::{Widget, WidgetSpec, widget::install_widgets};
use criterion::{Criterion, criterion_group, criterion_main};
use kube::api::{Api, PostParams};

const OBJECTS: usize = 10_000;

async fn fill(api: &Api<Widget>) {
    for i in 0..OBJECTS {
        let spec = WidgetSpec {
            replicas: 1,
            color: None,
        };
        api.create(&PostParams::default(), &Widget::new(&format!("w{i}"), spec))
            .await
            .expect("creating a widget");
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (server, in_process, informer) = rt.block_on(async {
        let server = ApiServer::start().await.expect("server starts");
        install_widgets(&server.client())
            .await
            .expect("the book's CRDs install");
        let http: Api<Widget> = Api::namespaced(server.client(), "default");
        fill(&http).await;
        let cluster: &Cluster = server.cluster();
        let in_process: Api<Widget> = Api::namespaced(cluster.in_process_client(), "default");
        let informer = Arc::new(SharedIndexInformer::new(
            http.clone(),
            InformerOptions::new(Duration::ZERO),
        ));
        let inf = informer.clone();
        tokio::spawn(async move { inf.run(futures::future::pending()).await });
        tokio::time::timeout(Duration::from_secs(60), informer.wait_synced())
            .await
            .expect("informer never synced");
        assert_eq!(informer.indexer().list().len(), OBJECTS);
        (server, in_process, informer)
    });
    let http: Api<Widget> = rt.block_on(async { Api::namespaced(server.client(), "default") });
    let mut g = c.benchmark_group("indexer_read");
    let mut i = 0usize;
    g.bench_function("indexer_get_by_key", |b| {
        b.iter(|| {
            i = (i + 7919) % OBJECTS;
            black_box(informer.indexer().get_by_key(&format!("default/w{i}")))
        })
    });
    g.bench_function("get_in_process", |b| {
        b.to_async(&rt).iter(|| {
            i = (i + 7919) % OBJECTS;
            let (api, name) = (&in_process, format!("w{i}"));
            async move { black_box(api.get(&name).await.unwrap()) }
        })
    });
    g.bench_function("get_http", |b| {
        b.to_async(&rt).iter(|| {
            i = (i + 7919) % OBJECTS;
            let (api, name) = (&http, format!("w{i}"));
            async move { black_box(api.get(&name).await.unwrap()) }
        })
    });
    g.finish();
    rt.block_on(server.shutdown());
}

criterion_group!(benches, bench);
criterion_main!(benches);
