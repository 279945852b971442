//! Faults between an informer and the embedded API server, over HTTP through `kube::Client`,
//! on the real clock. Each test is named after its fault. The server's request log says
//! exactly which lists and watches the reflector made.
//!
//! No test sleeps: each waits for the notification it needs, under a timeout that names what
//! it suspects when it fires. The reflector's backoff is shortened to 10–100 ms (with its
//! jitter) so retries do not cost seconds; what is under test is *which* requests follow a
//! fault, not how long the backoff is (the paused-clock tests pin that).

use std::{sync::Arc, time::Duration};

use controlloop::apiserver::{ApiServer, Failure, RequestRecord};
use controlloop::cache::{BackoffConfig, HandlerFuncs, InformerOptions, SharedIndexInformer};
use controlloop::testing::RunningInformer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(10);

fn cm(name: &str, v: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        data: Some([("v".to_string(), v.to_string())].into()),
        ..Default::default()
    }
}

/// A list: a plain LIST, or a streaming list (a watch with `sendInitialEvents=true`, the
/// default at 1.36 through the `WatchListClient` gate).
fn is_list(r: &RequestRecord) -> bool {
    r.method == "GET"
        && r.path.ends_with("/configmaps")
        && (!r.is_watch() || r.query.contains("sendInitialEvents=true"))
}
/// A watch request of either kind.
fn is_watch(r: &RequestRecord) -> bool {
    r.method == "GET" && r.is_watch() && r.path.ends_with("/configmaps")
}

struct Running {
    server: ApiServer,
    api: Api<ConfigMap>,
    events: mpsc::UnboundedReceiver<String>,
    informer: RunningInformer,
}

impl Running {
    async fn start() -> Self {
        let server = ApiServer::start().await.expect("server did not start");
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        api.create(&PostParams::default(), &cm("a", "1"))
            .await
            .unwrap();
        let mut options = InformerOptions::new(Duration::ZERO);
        options.reflector.backoff = BackoffConfig {
            initial: Duration::from_millis(10),
            cap: Duration::from_millis(100),
            ..Default::default()
        };
        let informer = Arc::new(SharedIndexInformer::new(api.clone(), options));
        let (tx, events) = mpsc::unbounded_channel();
        let (t1, t2) = (tx.clone(), tx);
        let v = |c: &ConfigMap| {
            c.data
                .as_ref()
                .and_then(|d| d.get("v").cloned())
                .unwrap_or_default()
        };
        informer
            .add_event_handler(
                HandlerFuncs::new()
                    .on_add(move |o: Arc<ConfigMap>, _| {
                        let _ = t1.send(format!(
                            "add {} {}",
                            o.metadata.name.clone().unwrap(),
                            v(&o)
                        ));
                    })
                    .on_update(move |_, n: Arc<ConfigMap>| {
                        let _ = t2.send(format!(
                            "update {} {}",
                            n.metadata.name.clone().unwrap(),
                            v(&n)
                        ));
                    }),
            )
            .unwrap();
        let mut r = Running {
            server,
            api,
            events,
            informer: RunningInformer::start(&informer),
        };
        r.expect("add a 1", "initial list never delivered").await;
        r.wait_for_watches(1).await;
        r
    }

    async fn expect(&mut self, line: &str, suspect: &str) {
        let got = tokio::time::timeout(WAIT, async {
            loop {
                match self.events.recv().await {
                    Some(l) if l == line => return,
                    Some(_) => {}
                    None => panic!("handler channel closed while waiting for {line:?}"),
                }
            }
        })
        .await;
        got.unwrap_or_else(|_| panic!("no {line:?} within {WAIT:?}: {suspect}"));
    }

    fn count(&self, f: fn(&RequestRecord) -> bool) -> usize {
        self.server
            .cluster()
            .requests()
            .iter()
            .filter(|r| f(r))
            .count()
    }

    /// Waits until the server has answered `n` watch requests (a watch is logged when it
    /// starts streaming).
    async fn wait_for_watches(&self, n: usize) {
        let cluster = self.server.cluster();
        let enough = |log: &[RequestRecord]| log.iter().filter(|r| is_watch(r)).count() >= n;
        tokio::time::timeout(WAIT, cluster.wait_for_requests(enough))
            .await
            .unwrap_or_else(|_| panic!("fewer than {n} watches: reflector stuck in backoff?"));
    }

    /// Sets `a` to 2 with its watch event dropped: only a relist can bring it into the cache.
    async fn hidden_write(&self) {
        self.server.cluster().drop_next_events(1);
        let mut c = self.api.get("a").await.unwrap();
        c.data = Some([("v".to_string(), "2".to_string())].into());
        self.api
            .replace("a", &PostParams::default(), &c)
            .await
            .unwrap();
    }

    async fn stop(self) {
        self.informer
            .stop()
            .await
            .expect("the informer's task does not panic");
        self.server.shutdown().await;
    }
}

#[tokio::test]
async fn watch_410_in_the_stream_relists() {
    let mut r = Running::start().await;
    // A write the client never sees, then compaction past it.
    r.hidden_write().await;
    r.server.cluster().compact();
    // The server's watchers never fall behind on their own, so the watch is dropped: the
    // reflector re-watches from its last resourceVersion, now compacted away, and the server
    // answers in the stream with ERROR 410, as kube-apiserver does.
    r.server.cluster().close_watches();
    r.expect(
        "update a 2",
        "the 410 did not lead to a relist that finds the hidden write",
    )
    .await;
    let lists: Vec<String> = r
        .server
        .cluster()
        .requests()
        .iter()
        .filter(|q| is_list(q))
        .map(|q| q.query.clone())
        .collect();
    // At 1.36 both are streaming lists; the relist asks for the last resourceVersion seen
    // (a list "not older than" it is still valid after a compaction), not "".
    assert_eq!(
        lists.len(),
        2,
        "exactly one relist after the 410: {lists:#?}"
    );
    assert!(lists[0].ends_with("resourceVersion="), "{}", lists[0]);
    assert!(!lists[1].ends_with("resourceVersion="), "{}", lists[1]);
    r.stop().await;
}

/// The server expires the open watch itself (ERROR 410 in the stream, as when etcd compacted
/// past the revision the watch was reading): the reflector must relist, and the relist finds a
/// write whose event the watch never delivered.
#[tokio::test]
async fn watch_410_mid_stream_relists() {
    let mut r = Running::start().await;
    r.hidden_write().await;
    r.server.cluster().expire_watches();
    r.expect(
        "update a 2",
        "the 410 mid-stream did not lead to a relist that finds the hidden write",
    )
    .await;
    assert_eq!(r.count(is_list), 2, "exactly one relist after the 410");
    r.stop().await;
}

/// The API server restarts with its data kept (`Cluster::restart`): every watch is cut, and the
/// new server refuses to resume one from a revision the old one served. The reflector's resume
/// gets 410, and its one relist finds a write the old watch never delivered.
#[tokio::test]
async fn server_restarted_with_data_kept_relists() {
    let mut r = Running::start().await;
    r.hidden_write().await;
    let before = r.server.cluster().resource_version();
    let head = r.server.cluster().restart();
    assert_eq!(head, before + 1, "the restart skips one revision");
    r.expect(
        "update a 2",
        "the restart did not lead to a relist that finds the hidden write",
    )
    .await;
    assert_eq!(r.count(is_list), 2, "exactly one relist after the restart");
    // The data was kept: what the relist read is what was stored before the restart.
    let a = r.api.get("a").await.unwrap();
    assert_eq!(a.metadata.resource_version, Some(before.to_string()));
    r.stop().await;
}

#[tokio::test]
async fn watch_closed_rewatches_without_relisting() {
    let mut r = Running::start().await;
    r.server.cluster().close_watches();
    r.wait_for_watches(2).await;
    r.api
        .create(&PostParams::default(), &cm("b", "1"))
        .await
        .unwrap();
    r.expect("add b 1", "the re-opened watch does not deliver")
        .await;
    assert_eq!(r.count(is_list), 1, "a closed watch must not relist");
    r.stop().await;
}

#[tokio::test]
async fn too_many_requests_then_success_gives_exactly_one_list() {
    let mut r = Running::start().await;
    r.server
        .cluster()
        .fail_next_requests(4, Failure::TooManyRequests, 0);
    r.server.cluster().close_watches();
    // 4 failed watches (logged with 429), then one that streams.
    r.wait_for_watches(6).await;
    let statuses: Vec<u16> = r
        .server
        .cluster()
        .requests()
        .iter()
        .filter(|q| is_watch(q))
        .map(|q| q.status)
        .collect();
    assert_eq!(statuses, [200, 429, 429, 429, 429, 200]);
    r.api
        .create(&PostParams::default(), &cm("b", "1"))
        .await
        .unwrap();
    r.expect("add b 1", "the watch after the 429s does not deliver")
        .await;
    assert_eq!(r.count(is_list), 1, "429 must never cause a relist");
    r.stop().await;
}
