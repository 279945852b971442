//! Chapter 04's "What relists", on a real server: an informer whose watch ends without the
//! server choosing to (a [`Relay`] in front of kube-apiserver cuts its connection), while
//! writes go on past it, and whether the reflector resumes its watch or lists again.
//!
//! The embedded server can drop events and expire watches at will; a real one does neither.
//! Here the watch ends because its connection does, and what decides between a resumed watch
//! and a relist is whether the server can still serve the watch from the last version the
//! informer saw: kube-apiserver's watch cache usually can; etcd cannot once it has compacted
//! that version (`--etcd-compaction-interval`), and with `--watch-cache=false` the resumed
//! watch goes to etcd.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use tokio::time::Instant;

use super::versions::wait_compacted;
use crate::lab::rig::{
    self, Backend, NAMESPACE, OBJECT, RigError, Target,
    relay::{Relay, kubeconfig_via, server_addr},
    set_value, value_of,
};
use controlloop::cache::{
    InformerOptions, ListOptions, ListPage, ListerWatcher, LwError, SharedIndexInformer,
    WatchOptions, WatchStream,
};

/// A lister-watcher that counts what the reflector asks of it.
pub struct Counted<L> {
    inner: L,
    /// Lists the server answered, and watches with `sendInitialEvents` it opened (a streaming
    /// list is a list too); a request that failed on the way is not counted.
    pub lists: Arc<AtomicU64>,
    /// Watches the server opened that resume from a resourceVersion.
    pub watches: Arc<AtomicU64>,
}

impl<L> Counted<L> {
    /// Counts `inner`'s lists and watches.
    pub fn new(inner: L) -> Self {
        Counted {
            inner,
            lists: Arc::default(),
            watches: Arc::default(),
        }
    }
}

impl<K: Send + 'static, L: ListerWatcher<K>> ListerWatcher<K> for Counted<L> {
    fn list(&self, options: ListOptions) -> BoxFuture<'static, Result<ListPage<K>, LwError>> {
        let first = options.continue_token.is_none();
        let (lists, listed) = (self.lists.clone(), self.inner.list(options));
        Box::pin(async move {
            let page = listed.await;
            if first && page.is_ok() {
                lists.fetch_add(1, Ordering::SeqCst);
            }
            page
        })
    }
    fn watch(&self, options: WatchOptions) -> BoxFuture<'static, Result<WatchStream<K>, LwError>> {
        let counter = if options.send_initial_events {
            self.lists.clone()
        } else {
            self.watches.clone()
        };
        let opened = self.inner.watch(options);
        Box::pin(async move {
            let stream = opened.await;
            if stream.is_ok() {
                counter.fetch_add(1, Ordering::SeqCst);
            }
            stream
        })
    }
    fn is_watch_list_semantics_unsupported(&self) -> bool {
        self.inner.is_watch_list_semantics_unsupported()
    }
}

/// How the informer's watch ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Cut {
    /// Its connection is cut and the next one accepted: the watch resumes at once.
    Closed,
    /// Its connection is cut and every new one refused (the relay stops listening) until etcd
    /// has compacted the last version the informer saw.
    PastCompaction,
}

/// What one run saw.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Relisted {
    /// The fault.
    pub cut: Cut,
    /// Lists after the first.
    pub relists: u64,
    /// Watches opened after the first.
    pub resumed_watches: u64,
    /// Whether the cache ended on the last value written while the watch was down.
    pub caught_up: bool,
    /// From letting connections through again to the cache holding the last value, ms.
    pub recovery_ms: f64,
    /// How long etcd took to compact the informer's last version (PastCompaction), ms.
    pub compaction_ms: Option<f64>,
}

/// Writes made while the watch is down.
pub const WRITES: u64 = 5;

/// One run on the real cluster of `kubeconfig`: an informer through a relay, its watch ended
/// by `cut`, [`WRITES`] writes made directly meanwhile.
pub async fn run(kubeconfig: &std::path::Path, cut: Cut) -> Result<Relisted, RigError> {
    let bad = |message: String| RigError::Kubeconfig {
        path: kubeconfig.to_path_buf(),
        message,
    };
    let direct = Target::start(&Backend::Kubeconfig(kubeconfig.to_path_buf())).await?;
    direct.create(OBJECT, 0).await?;
    let relay = Relay::start(server_addr(kubeconfig).map_err(bad)?).await?;
    let via = kubeconfig_via(
        kubeconfig,
        relay.addr(),
        crate::repo().join(format!(
            "target/controlplane/relay-{}.kubeconfig",
            std::process::id()
        )),
    )
    .map_err(bad)?;
    let through = Target::start(&Backend::Kubeconfig(via.clone())).await?;
    let lw = Counted::new(Api::<ConfigMap>::namespaced(through.client(), NAMESPACE));
    let (lists, watches) = (lw.lists.clone(), lw.watches.clone());
    let informer = Arc::new(SharedIndexInformer::new(
        lw,
        InformerOptions::new(Duration::ZERO),
    ));
    let running = rig::Running::informer(&informer);
    rig::within(
        Duration::from_secs(60),
        "the informer's first list",
        informer.wait_synced(),
    )
    .await;
    let key = format!("{NAMESPACE}/{OBJECT}");
    let cached = |informer: &SharedIndexInformer<ConfigMap, Counted<Api<ConfigMap>>>| {
        informer
            .indexer()
            .get_by_key(&key)
            .and_then(|c| value_of(&c))
    };
    let last_seen = informer
        .indexer()
        .get_by_key(&key)
        .and_then(|c| c.metadata.resource_version.clone())
        .unwrap_or_default();
    // book: ch14_cut
    let (lists0, watches0) = (lists.load(Ordering::SeqCst), watches.load(Ordering::SeqCst));
    let api = direct.api();
    if cut == Cut::PastCompaction {
        relay.close();
    }
    relay.cut();
    for v in 1..=WRITES {
        set_value(&api, OBJECT, v).await?;
    }
    let mut compaction_ms = None;
    if cut == Cut::PastCompaction {
        // Until etcd has compacted the version the informer last saw.
        let t = Instant::now();
        wait_compacted(&api, &last_seen, "the relay's server").await?;
        compaction_ms = Some(t.elapsed().as_secs_f64() * 1000.0);
        relay.reopen().await?;
    }
    // book: end ch14_cut
    let t = Instant::now();
    let caught_up = rig::settle(
        Duration::from_secs(60),
        Duration::ZERO,
        "the informer catching up after its watch ended",
        || cached(&informer) == Some(WRITES),
    )
    .await
    .is_ok();
    let recovery_ms = t.elapsed().as_secs_f64() * 1000.0;
    running.stop().await;
    let _ = std::fs::remove_file(via);
    Ok(Relisted {
        cut,
        relists: lists.load(Ordering::SeqCst) - lists0,
        resumed_watches: watches.load(Ordering::SeqCst) - watches0,
        caught_up,
        recovery_ms: (recovery_ms * 10.0).round() / 10.0,
        compaction_ms: compaction_ms.map(|m| (m * 10.0).round() / 10.0),
    })
}
