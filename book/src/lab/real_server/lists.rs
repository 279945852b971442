//! What a list, and an informer's relist, of 10,000 objects cost: on the embedded server, on
//! kube-apiserver with its watch cache, and on one with `--watch-cache=false`.
//!
//! kube-apiserver serves a list from its watch cache when the request allows it
//! (`k8s.io/apiserver` v0.37.2, `pkg/storage/cacher/delegator.go`, `ShouldDelegateList`): with
//! the cache on, `resourceVersion=0` is served from memory at once, and a list without a
//! resourceVersion too, once the cache has caught up with etcd (consistent reads from cache,
//! GA since 1.34). With `--watch-cache=false` every list goes to etcd, page by page.

use std::{sync::Arc, time::Duration};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use tokio::time::Instant;

use crate::lab::rig::{self, Backend, RigError, Target, ensure_namespace};
use controlloop::cache::{InformerOptions, SharedIndexInformer};

/// The namespace the lists fill (never `default`, where the storms' informers list).
pub const NAMESPACE: &str = "controlloop-lists";

/// How many objects.
pub const OBJECTS: usize = 10_000;

/// One backend's list costs, ms.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ListCosts {
    /// Which server.
    pub server: String,
    /// Creating the objects (16 writes in flight).
    pub fill_ms: f64,
    /// One list without a resourceVersion (the most recent, a consistent read).
    pub list_ms: f64,
    /// One list at resourceVersion 0 (any version: from the watch cache when there is one).
    pub list_rv0_ms: f64,
    /// The same list in pages of 500 (client-go's pager), and how many pages.
    pub paged_ms: f64,
    /// Pages the paged list took.
    pub pages: usize,
    /// An informer's initial list, to synced (what a relist after a 410 costs again).
    pub informer_sync_ms: f64,
    /// Objects each list returned (all the same, or the run fails).
    pub items: usize,
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0 * 10.0).round() / 10.0
}

/// Fills [`NAMESPACE`] on `backend` with [`OBJECTS`] ConfigMaps (those already there are
/// kept), then measures each list once.
pub async fn run(backend: &Backend, server: &str) -> Result<ListCosts, RigError> {
    let target = Target::start(backend).await?;
    let client = target.client();
    // Both servers serve Namespaces, and a create into a missing one is 404 on both.
    ensure_namespace(&client, NAMESPACE).await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let t = Instant::now();
    let made = stream::iter(0..OBJECTS)
        .map(|i| {
            let api = api.clone();
            async move {
                let mut cm = rig::object(&format!("o-{i:05}"), i as u64);
                cm.metadata.namespace = Some(NAMESPACE.into());
                match api.create(&PostParams::default(), &cm).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                    Err(e) => Err(e),
                }
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    made.into_iter().collect::<Result<Vec<()>, _>>()?;
    let fill_ms = ms(t.elapsed());

    // book: ch14_lists
    let t = Instant::now();
    let all = api.list(&ListParams::default()).await?;
    let list_ms = ms(t.elapsed());
    let items = all.items.len();

    let t = Instant::now();
    let any = api.list(&ListParams::default().match_any()).await?;
    let list_rv0_ms = ms(t.elapsed());
    assert_eq!(
        any.items.len(),
        items,
        "{server}: RV=0 listed another count"
    );

    let t = Instant::now();
    let (mut pages, mut paged, mut token) = (0, 0, None::<String>);
    loop {
        let mut lp = ListParams::default().limit(500);
        if let Some(c) = &token {
            lp = lp.continue_token(c);
        }
        let page = api.list(&lp).await?;
        pages += 1;
        paged += page.items.len();
        token = page.metadata.continue_.filter(|c| !c.is_empty());
        if token.is_none() {
            break;
        }
    }
    let paged_ms = ms(t.elapsed());
    assert_eq!(paged, items, "{server}: the pages listed another count");
    // book: end ch14_lists

    let informer = Arc::new(SharedIndexInformer::new(
        api.clone(),
        InformerOptions::new(Duration::ZERO),
    ));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let t = Instant::now();
    let task = {
        let informer = informer.clone();
        tokio::spawn(async move {
            informer
                .run(async {
                    let _ = stopped.await;
                })
                .await
        })
    };
    rig::within(
        Duration::from_secs(120),
        "an informer's initial list of 10,000 objects",
        informer.wait_synced(),
    )
    .await;
    let informer_sync_ms = ms(t.elapsed());
    assert_eq!(informer.indexer().list().len(), items);
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    target.stop().await;
    Ok(ListCosts {
        server: server.to_owned(),
        fill_ms,
        list_ms,
        list_rv0_ms,
        paged_ms,
        pages,
        informer_sync_ms,
        items,
    })
}

/// Deletes [`NAMESPACE`] on a real cluster (its namespace controller removes the objects).
pub async fn clean(backend: &Backend) -> Result<(), RigError> {
    let target = Target::start(backend).await?;
    let nss: Api<Namespace> = Api::all(target.client());
    let _ = nss.delete(NAMESPACE, &DeleteParams::default()).await;
    Ok(())
}
