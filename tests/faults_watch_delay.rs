//! The watch delay (`Cluster::delay_watch_events`): the server answers a write at once and
//! delivers its event later, so an informer's cache stays behind its own writes. In-process,
//! under tokio's paused clock: every instant is exact.

use std::{sync::Arc, time::Duration};

use controlloop::apiserver::{Cluster, ServerOptions};
use controlloop::cache::{HandlerFuncs, InformerOptions, SharedIndexInformer};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use tokio::time::Instant;

fn cm(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

async fn set(api: &Api<ConfigMap>, v: u64) {
    let patch = serde_json::json!({ "data": { "v": v.to_string() } });
    api.patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("a merge patch");
}

#[tokio::test(start_paused = true)]
async fn a_watch_delay_holds_each_event_for_the_delay_in_force_at_its_write_and_keeps_the_order() {
    let cluster = Cluster::new(ServerOptions::default());
    let api: Api<ConfigMap> = Api::namespaced(cluster.in_process_client(), "default");
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let informer = Arc::new(SharedIndexInformer::new(
        api.clone(),
        InformerOptions::new(Duration::ZERO),
    ));
    let start = Instant::now();
    let heard: Arc<Mutex<Vec<(String, u128)>>> = Arc::default();
    let h = heard.clone();
    informer
        .add_event_handler(
            HandlerFuncs::new().on_update(move |_, new: Arc<ConfigMap>| {
                let v = new
                    .data
                    .as_ref()
                    .map(|d| d["v"].clone())
                    .unwrap_or_default();
                h.lock().push((v, start.elapsed().as_millis()));
            }),
        )
        .unwrap();
    let running = informer.clone();
    let task = tokio::spawn(async move { running.run(std::future::pending()).await });
    tokio::time::sleep(Duration::from_millis(10)).await; // listed and watching
    cluster.delay_watch_events(Duration::from_millis(300));
    set(&api, 1).await; // written at 10 ms, heard at 310 ms
    let answered = api.get("a").await.unwrap(); // the server has it at once...
    assert_eq!(answered.data.unwrap()["v"], "1");
    let cached = informer.indexer().get_by_key("default/a").unwrap();
    assert!(cached.data.is_none(), "...the cache does not, for 300 ms");
    tokio::time::sleep(Duration::from_millis(10)).await;
    cluster.delay_watch_events(Duration::ZERO);
    set(&api, 2).await; // written at 20 ms, undelayed, yet behind write 1
    tokio::time::sleep(Duration::from_millis(400)).await;
    set(&api, 3).await; // written at 420 ms: heard at once
    tokio::time::sleep(Duration::from_millis(1)).await;
    let heard = heard.lock().clone();
    assert_eq!(
        heard,
        [("1".into(), 310), ("2".into(), 310), ("3".into(), 420)],
        "each event at its delay, none before an earlier one"
    );
    task.abort();
}
