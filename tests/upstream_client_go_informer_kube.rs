//! Conformance items 29 and 31 again, through `kube::Client` against the embedded API server
//! instead of a scripted source: the same informer, reflector and FIFO, fed by real list and
//! watch responses with real resourceVersions. `tests/upstream_client_go_informer.rs` has the
//! scripted versions, which control every response; these check that the wire path gives the
//! same behaviour.
//!
//! The client talks to the server in-process (its router as a tower `Service` behind
//! `kube::Client::new`), so tokio's paused clock drives the resync ticks and backoffs exactly;
//! over a socket the paused clock would jump while a request is in flight.

use std::{sync::Arc, time::Duration};

use controlloop::apiserver::{Cluster, RequestRecord, ServerOptions};
use controlloop::cache::{HandlerFuncs, InformerOptions, SharedIndexInformer};
use controlloop::features::FeatureGates;
use controlloop::testing::RunningInformer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use parking_lot::Mutex;

const S: fn(u64) -> Duration = Duration::from_secs;

fn cm(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        data: Some([("v".to_string(), "1".to_string())].into()),
        ..Default::default()
    }
}

/// Records notifications as lines; an update whose old and new are one `Arc` is a resync.
fn recorder() -> (HandlerFuncs<ConfigMap>, Arc<Mutex<Vec<String>>>) {
    let log = Arc::new(Mutex::new(vec![]));
    let (a, u) = (log.clone(), log.clone());
    let name = |c: &ConfigMap| c.metadata.name.clone().unwrap_or_default();
    let h = HandlerFuncs::new()
        .on_add(move |c, _| a.lock().push(format!("add {}", name(&c))))
        .on_update(move |old, new| {
            let kind = if Arc::ptr_eq(&old, &new) {
                "resync"
            } else {
                "update"
            };
            u.lock().push(format!("{kind} {}", name(&new)))
        });
    (h, log)
}

/// The list requests the reflector made, as their `resourceVersion` parameter.
fn list_rvs(log: &[RequestRecord]) -> Vec<String> {
    log.iter()
        .filter(|r| r.method == "GET" && r.path.ends_with("/configmaps") && !r.is_watch())
        .map(|r| {
            r.query
                .split('&')
                .find_map(|p| p.strip_prefix("resourceVersion="))
                .unwrap_or("<none>")
                .to_owned()
        })
        .collect()
}

/// Items 29 and 31 in one timeline, at Kubernetes 1.34 (plain lists: the streaming list is on
/// by default only from 1.35):
/// - `TestReflectorResyncWithResourceVersion`: the first list asks for RV "0", the relist after
///   the watch is expired asks for the last RV the reflector saw.
/// - `TestSharedInformerWatchDisruption`: after that relist, a listener not due for resync gets
///   only the changed and the new object; a listener due for resync also gets the unchanged one.
#[tokio::test(start_paused = true)]
async fn after_an_expired_watch_the_relist_is_at_the_last_rv_and_only_due_listeners_see_unchanged_objects()
 {
    let cluster = Cluster::new(ServerOptions::default());
    let api: Api<ConfigMap> = Api::namespaced(cluster.in_process_client(), "default");
    for name in ["cm1", "cm2"] {
        api.create(&PostParams::default(), &cm(name)).await.unwrap();
    }

    let mut options = InformerOptions::new(S(1));
    options.gates = FeatureGates::at_minor(34).unwrap();
    let informer = Arc::new(SharedIndexInformer::new(api.clone(), options));
    let (h1, no_resync) = recorder();
    let (h2, resync) = recorder();
    informer
        .add_event_handler_with_resync(h1, Some(S(0)))
        .unwrap();
    informer
        .add_event_handler_with_resync(h2, Some(S(1)))
        .unwrap();
    let running = RunningInformer::start(&informer);
    tokio::time::timeout(S(60), informer.wait_synced())
        .await
        .expect("informer never synced: the initial list never reached the FIFO?");
    // Past the first resync check: from now on the first listener is never due.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let last_seen = cluster.resource_version();

    // Two writes the watch never delivers, then the server expires the watch.
    cluster.drop_next_events(2);
    api.patch(
        "cm2",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"data": {"v": "2"}})),
    )
    .await
    .unwrap();
    api.create(&PostParams::default(), &cm("cm3"))
        .await
        .unwrap();
    cluster.expire_watches();
    tokio::time::timeout(S(60), async {
        while informer.indexer().get_by_key("default/cm3").is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("cm3 never reached the cache: no relist after the expired watch?");
    running
        .stop()
        .await
        .expect("the informer's task does not panic");

    assert_eq!(
        list_rvs(&cluster.requests()),
        ["0".to_string(), last_seen.to_string()],
        "first list at \"0\", the relist at the last resourceVersion seen"
    );
    let after_initial = |log: &Arc<Mutex<Vec<String>>>| {
        log.lock()
            .iter()
            .skip(2)
            .filter(|l| !l.starts_with("resync"))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(after_initial(&no_resync), ["update cm2", "add cm3"]);
    assert_eq!(
        after_initial(&resync),
        ["update cm1", "update cm2", "add cm3"]
    );
}
