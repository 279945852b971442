//! Chapter 05's experiment: the same check, run against two sources, measures two different
//! things.
//!
//! The claim under test is "the informer writes its cache before it calls the handlers". The
//! check, as the seed essay wrote it, compares resourceVersions: in `on_update`, the cached
//! copy of the object must be at least as new as the event's object. It is run against
//! - the fake-clientset emulation, which never sets a resourceVersion, and
//! - the embedded API server, which sets one on every write,
//!
//! for the faithful informer and for a deliberately broken one that calls its handlers
//! *before* writing its cache. A second check compares a payload counter instead.
//!
//! Everything runs in-process under tokio's paused clock: the counts are exact.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use parking_lot::Mutex;
use serde::Serialize;

use crate::apiserver::{Cluster, ServerOptions};
use crate::cache::{
    lister_watcher::ListerWatcher,
    shared_informer::{HandlerFuncs, InformerOptions, SharedIndexInformer, Variant},
};
use crate::fake::{FakeClientset, FakeListerWatcher};

/// How many updates each run makes.
pub const UPDATES: u32 = 5;

/// Where the objects come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Source {
    /// The fake-clientset emulation (client-go v0.36's `NewSimpleClientset`).
    Fake,
    /// The embedded API server, in-process.
    Server,
}

/// One run of both checks.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The source.
    pub source: Source,
    /// The informer.
    pub informer: Variant,
    /// `on_update` calls checked.
    pub updates: u32,
    /// Of those, how many had equal old and new resourceVersions when parsed (both empty
    /// counts as equal): comparisons that cannot tell anything apart.
    pub rv_indistinguishable: u32,
    /// Violations found by the resourceVersion check.
    pub rv_check_violations: u32,
    /// Violations found by the payload check.
    pub payload_check_violations: u32,
}

/// A resourceVersion as a number; empty (the fake's) parses as 0.
fn rv(c: &ConfigMap) -> u64 {
    c.metadata
        .resource_version
        .as_deref()
        .unwrap_or_default()
        .parse()
        .unwrap_or(0)
}

/// The payload counter the test writes.
fn n(c: &ConfigMap) -> u32 {
    c.data
        .as_ref()
        .and_then(|d| d.get("n"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn cm(i: u32) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some("c".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        data: Some([("n".to_string(), i.to_string())].into()),
        ..Default::default()
    }
}

/// Runs both checks for one source and informer.
pub fn run(source: Source, informer: Variant) -> Row {
    crate::lab::rig::paused(async move {
        match source {
            Source::Fake => {
                let fake = FakeClientset::new();
                fake.create("default", &cm(0)).expect("create");
                let lw = FakeListerWatcher::new(fake.clone(), Some("default"));
                let write = move |i: u32| {
                    let fake = fake.clone();
                    async move {
                        fake.update("default", &cm(i)).expect("update");
                    }
                };
                check(lw, informer, write).await
            }
            Source::Server => {
                let cluster = Cluster::new(ServerOptions::default());
                let api: Api<ConfigMap> = Api::namespaced(cluster.in_process_client(), "default");
                api.create(&PostParams::default(), &cm(0))
                    .await
                    .expect("create");
                let a = api.clone();
                let write = move |i: u32| {
                    let api = a.clone();
                    async move {
                        let mut c = api.get("c").await.expect("get");
                        c.data = cm(i).data;
                        api.replace("c", &PostParams::default(), &c)
                            .await
                            .expect("replace");
                    }
                };
                let mut row = check(api, informer, write).await;
                row.source = Source::Server;
                row
            }
        }
    })
}

async fn check<L, W, F>(lw: L, variant: Variant, write: W) -> Row
where
    L: ListerWatcher<ConfigMap>,
    W: Fn(u32) -> F,
    F: Future<Output = ()>,
{
    let mut options = InformerOptions::new(std::time::Duration::ZERO);
    options.variant = variant;
    let informer = Arc::new(SharedIndexInformer::new(lw, options));
    let row = Arc::new(Mutex::new(Row {
        source: Source::Fake,
        informer: variant,
        updates: 0,
        rv_indistinguishable: 0,
        rv_check_violations: 0,
        payload_check_violations: 0,
    }));
    let (inf, r) = (informer.clone(), row.clone());
    informer
        .add_event_handler(HandlerFuncs::new().on_update(
            move |old: Arc<ConfigMap>, new: Arc<ConfigMap>| {
                let cached = inf.indexer().get(&new).ok().flatten().expect("cached");
                let mut r = r.lock();
                r.updates += 1;
                if rv(&old) == rv(&new) {
                    r.rv_indistinguishable += 1;
                }
                // The seed's check: the cache is at least as new as the event, by RV.
                if rv(&cached) < rv(&new) {
                    r.rv_check_violations += 1;
                }
                // The same check on the payload the test itself wrote.
                if n(&cached) < n(&new) {
                    r.payload_check_violations += 1;
                }
            },
        ))
        .expect("informer not stopped");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let inf = informer.clone();
    let running = tokio::spawn(async move {
        inf.run(async {
            let _ = stopped.await;
        })
        .await
    });
    tokio::time::timeout(std::time::Duration::from_secs(60), informer.wait_synced())
        .await
        .expect("informer never synced: list or initial pop stuck?");
    for i in 1..=UPDATES {
        write(i).await;
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    let _ = stop.send(());
    running.await.expect("informer task");
    let row = row.lock().clone();
    assert_eq!(row.updates, UPDATES, "every write reached the handler");
    row
}

/// All four runs, in the chapter's order.
pub fn table() -> Vec<Row> {
    let mut rows = vec![];
    for source in [Source::Fake, Source::Server] {
        for informer in [Variant::Faithful, Variant::HandlersBeforeCache] {
            rows.push(run(source, informer));
        }
    }
    rows
}

/// What happens when the fake receives more writes than its watcher has read: each watcher
/// buffers 100 events; write 101 finds the buffer full. Returns one line per outcome.
pub fn overflow() -> String {
    let fake = FakeClientset::new();
    let _watch = fake.watch::<ConfigMap>(Some("default"), "").expect("watch");
    let mut out = String::new();
    for i in 1..=101u32 {
        let mut c = cm(i);
        c.metadata.name = Some(format!("c{i}"));
        let f = fake.clone();
        let r = catch_quietly(move || f.create("default", &c).map(|_| ()));
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => out += &format!("write {i}: error {e}\n"),
            Err(p) => {
                let msg = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                out += &format!("writes 1..={}: accepted, buffered unread\n", i - 1);
                out += &format!("write {i}: the writer panicked: {msg:?}\n");
            }
        }
    }
    let stored = fake
        .list::<ConfigMap>(Some("default"))
        .expect("list")
        .items
        .len();
    out += &format!("objects stored afterwards: {stored}\n");
    out
}

/// The `cargo run` entry: chapter 05's claims and snapshots.
pub fn experiment() {
    let rows = table();
    crate::book::snap::yaml("ch05_checks", &rows, vec![]);
    crate::book::snap::text("ch05_overflow", overflow());
}

/// Runs `f`, catching a panic without printing it: the overflow is the expected outcome here,
/// and the panic's message is reported in the experiment's output instead. The panic hook is
/// process-wide, so it is swapped only around this one call.
fn catch_quietly<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    r
}
