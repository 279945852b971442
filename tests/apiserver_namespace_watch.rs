//! Deleting a namespace of many objects, as a watcher sees it: one DELETED event per object
//! and no 410, as kube-controller-manager's namespace controller deletes them one by one
//! (kubernetes v1.37.2 `pkg/controller/namespace/deletion/namespaced_resources_deleter.go`)
//! and kube-apiserver's watch cache keeps up to 102,400 events (apiserver v0.37.2
//! `pkg/storage/cacher/watch_cache_history.go`). In-process, under tokio's paused clock: the
//! informer's list and watch are exact, and the count of its lists is the proof it did not
//! relist.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use controlloop::apiserver::{Cluster, ServerOptions};
use controlloop::cache::{DeletedObject, HandlerFuncs, InformerOptions, SharedIndexInformer};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams, WatchEvent, WatchParams};

const OBJECTS: usize = 12_000;

async fn within<T>(hang: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(600), fut)
        .await
        .unwrap_or_else(|_| panic!("suspected deadlock: {hang}"))
}

fn named<K: kube::Resource + Default>(name: &str, ns: Option<&str>) -> K {
    let mut k = K::default();
    *k.meta_mut() = ObjectMeta {
        name: Some(name.into()),
        namespace: ns.map(str::to_owned),
        ..Default::default()
    };
    k
}

/// Creates the namespace `big` with [`OBJECTS`] ConfigMaps (written without events: no
/// watch is open yet).
async fn fill(cluster: &Cluster, namespaces: &Api<Namespace>) {
    namespaces
        .create(&PostParams::default(), &named("big", None))
        .await
        .unwrap();
    for i in 0..OBJECTS {
        cluster
            .silent_write(&named::<ConfigMap>(&format!("cm-{i:05}"), Some("big")))
            .expect("a ConfigMap is stored");
    }
}

/// The informer's lists of ConfigMaps: a plain list, or (client-go v0.37's default, the
/// WatchListClient gate) a watch that starts with the initial state (`sendInitialEvents`).
/// A watch that resumes is not one.
fn lists(cluster: &Cluster) -> usize {
    cluster
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path.ends_with("/configmaps"))
        .filter(|r| !r.is_watch() || r.query.contains("sendInitialEvents=true"))
        .count()
}

#[tokio::test(start_paused = true)]
async fn deleting_a_namespace_of_12000_objects_sends_one_deleted_each_and_no_410() {
    let cluster = Cluster::new(ServerOptions::default());
    let client = cluster.in_process_client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    fill(&cluster, &namespaces).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "big");
    let from = cluster.resource_version().to_string();

    // An informer on the namespace's ConfigMaps, listed and watching.
    let informer = Arc::new(SharedIndexInformer::new(
        api.clone(),
        InformerOptions::new(Duration::ZERO),
    ));
    let deletes = Arc::new(AtomicUsize::new(0));
    let d = deletes.clone();
    informer
        .add_event_handler(
            HandlerFuncs::new().on_delete(move |_: DeletedObject<ConfigMap>| {
                d.fetch_add(1, Ordering::Relaxed);
            }),
        )
        .unwrap();
    let running = informer.clone();
    let task = tokio::spawn(async move { running.run(std::future::pending()).await });
    within("the informer never listed the namespace", async {
        while informer.indexer().list().len() < OBJECTS {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    within(
        "the informer never opened its watch",
        cluster.wait_for_open_watches(|n| n >= 1),
    )
    .await;
    assert_eq!(lists(&cluster), 1, "{:?}", cluster.requests());
    let watches_before = cluster.requests().iter().filter(|r| r.is_watch()).count();

    // A raw watch from before the delete, beside it.
    let mut raw = api
        .watch(&WatchParams::default().timeout(290), &from)
        .await
        .unwrap()
        .boxed();

    let answer = namespaces
        .delete("big", &DeleteParams::default())
        .await
        .unwrap();
    assert!(answer.is_left(), "the namespace, Terminating");
    assert!(namespaces.get_opt("big").await.unwrap().is_none());

    let mut deleted = 0;
    within("the raw watch stopped short of the deletes", async {
        while deleted < OBJECTS {
            match raw.next().await.expect("the watch ended early").unwrap() {
                WatchEvent::Deleted(_) => deleted += 1,
                WatchEvent::Error(e) => panic!("the watch failed: {e:?}"),
                other => panic!("an event other than DELETED: {other:?}"),
            }
        }
    })
    .await;
    within("the informer's store never emptied", async {
        while !informer.indexer().list().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    within("the handler never heard every delete", async {
        while deletes.load(Ordering::Relaxed) < OBJECTS {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert_eq!(deleted, OBJECTS, "one DELETED per object");
    assert_eq!(
        deletes.load(Ordering::Relaxed),
        OBJECTS,
        "one delete handled per object"
    );
    assert_eq!(lists(&cluster), 1, "the informer never relisted");
    let watches = cluster.requests().iter().filter(|r| r.is_watch()).count();
    assert_eq!(
        watches,
        watches_before + 1,
        "the raw watch only: the informer's watch never ended"
    );
    task.abort();
}

/// The sweep runs in steps, each under the storage lock once, and yields between them: a
/// namespace of any size holds the lock for one step's objects at a time.
#[tokio::test(start_paused = true)]
async fn a_namespace_is_swept_in_steps_that_let_other_tasks_run_between_them() {
    let cluster = Cluster::new(ServerOptions::default());
    let namespaces: Api<Namespace> = Api::all(cluster.in_process_client());
    fill(&cluster, &namespaces).await;
    let delete = {
        let namespaces = namespaces.clone();
        tokio::spawn(async move { namespaces.delete("big", &DeleteParams::default()).await })
    };
    let mut seen = Vec::new();
    within("the sweep never finished", async {
        while !delete.is_finished() {
            seen.push(cluster.object_count::<ConfigMap>());
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(delete.await.unwrap().is_ok());
    let between: Vec<usize> = seen
        .iter()
        .copied()
        .filter(|n| 0 < *n && *n < OBJECTS)
        .collect();
    assert!(
        between.len() >= OBJECTS / 1024 - 1,
        "other tasks ran between the sweep's steps: {between:?}"
    );
    assert_eq!(cluster.object_count::<ConfigMap>(), 0);
    assert!(namespaces.get_opt("big").await.unwrap().is_none());
}
