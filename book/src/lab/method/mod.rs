//! Chapter 05's experiments: the same check, run against two sources, measures two different
//! things.
//!
//! The claim under test is "the informer writes its cache before it calls the handlers". The
//! check, as the essay this book grew from wrote it, compares resourceVersions: in
//! `on_update`, the cached copy of the object must be at least as new as the event's object.
//! It is run against
//! - the fake-clientset emulation, which never sets a resourceVersion, and
//! - the embedded API server, which sets one on every write,
//!
//! for the faithful informer and for a deliberately broken one that calls its handlers
//! *before* writing its cache. A second check compares a payload counter instead.
//!
//! Everything runs in-process under tokio's paused clock: the counts are exact.
//!
//! The body of every `pub fn ch05_…` here is a block of `chapters/05-method.md`, and so is
//! every function such a block defines: each is a region marked `// book: NAME`, which
//! `book/tests/book_layout.rs` holds equal to the chapter's copy. The rest is the rig those blocks
//! stand on.

use std::{future::Future, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use parking_lot::Mutex;
use serde::Serialize;
use tokio::time::{Instant, sleep, sleep_until};

use crate::kit::snap;
use crate::lab::rig::{self, HOUR, Running};
use controlloop::apiserver::{Cluster, ServerOptions};
use controlloop::cache::{
    DeletedObject, HandlerFuncs, InformerOptions, ListOptions, ListPage, ListerWatcher, LwError,
    SharedIndexInformer, WatchOptions, WatchStream,
    broken::{self, Variant},
};
use controlloop::controller::{
    Event,
    predicate::{Predicate, ResourceVersionChanged},
};
use controlloop::fake::{FakeClientset, FakeListerWatcher};
use futures::future::BoxFuture;

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
    /// Updates controller-runtime's `ResourceVersionChangedPredicate` lets through.
    pub rv_changed_predicate_passes: u32,
}

impl Row {
    /// A row with nothing counted yet.
    pub fn new(source: Source, informer: Variant) -> Self {
        Row {
            source,
            informer,
            updates: 0,
            rv_indistinguishable: 0,
            rv_check_violations: 0,
            payload_check_violations: 0,
            rv_changed_predicate_passes: 0,
        }
    }
}

/// A resourceVersion as a number; empty (the fake's) parses as 0.
pub fn rv(c: &ConfigMap) -> u64 {
    c.metadata
        .resource_version
        .as_deref()
        .unwrap_or_default()
        .parse()
        .unwrap_or(0)
}

/// The payload counter the test writes, `data.n`.
pub fn n(c: &ConfigMap) -> u32 {
    c.data
        .as_ref()
        .and_then(|d| d.get("n"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// ConfigMap `default/c` carrying the counter `n = i`.
pub fn cm(i: u32) -> ConfigMap {
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

/// Whether controller-runtime's `ResourceVersionChangedPredicate` passes `old → new`.
pub fn rv_changed(old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) -> bool {
    ResourceVersionChanged.matches(&Event::Update {
        old: Some(old.clone()),
        new: Some(new.clone()),
    })
}

pub use crate::lab::rig::catch_quietly;

// The chapter's blocks, in page order: each `// book:` region is a chapter block's text.

// book: ch05_fn_check
/// Both checks in an `on_update` handler of an informer over `lw` with the resync period
/// `resync`, across `UPDATES` writes made after hour 10.5 (past a 10-hour resync check).
pub async fn check<L, W, F>(
    source: Source,
    lw: L,
    variant: Variant,
    resync: Duration,
    write: W,
) -> Row
where
    L: ListerWatcher<ConfigMap>,
    W: Fn(u32) -> F,
    F: Future<Output = ()>,
{
    let t0 = Instant::now();
    let options = InformerOptions::new(resync);
    // faithful, or handlers called before the cache is written
    let informer = Arc::new(broken::informer(lw, options, variant));
    let row = Arc::new(Mutex::new(Row::new(source, variant)));
    let (inf, r) = (informer.clone(), row.clone());
    let on_update = move |old: Arc<ConfigMap>, new: Arc<ConfigMap>| {
        let cached = inf.indexer().get(&new).unwrap().unwrap();
        let mut r = r.lock();
        r.updates += 1;
        if rv(&old) == rv(&new) {
            r.rv_indistinguishable += 1;
        }
        // The essay's check: the cache is at least as new as the event, by resourceVersion.
        if rv(&cached) < rv(&new) {
            r.rv_check_violations += 1;
        }
        // The same check on the counter the test itself wrote.
        if n(&cached) < n(&new) {
            r.payload_check_violations += 1;
        }
        if rv_changed(&old, &new) {
            r.rv_changed_predicate_passes += 1;
        }
    };
    // The handler asks for no resync of its own (a period of zero).
    let handler = HandlerFuncs::new().on_update(on_update);
    informer
        .add_event_handler_with_resync(handler, Some(Duration::ZERO))
        .unwrap();
    let running = Running::informer(&informer);
    let synced = informer.wait_synced();
    rig::within(HOUR, "an informer that never syncs", synced).await;
    sleep_until(t0 + HOUR.mul_f64(10.5)).await; // past a 10-hour resync check, if any
    for i in 1..=UPDATES {
        write(i).await;
        sleep(Duration::from_secs(1)).await;
    }
    running.stop().await;
    row.lock().clone()
}
// book: end ch05_fn_check

// book: ch05_fn_run
/// One run of `check`: `source` holds ConfigMap `c` at `n = 0`, and each write sets `n = i`.
pub async fn run(source: Source, variant: Variant, resync: Duration) -> Row {
    match source {
        Source::Fake => {
            let fake = FakeClientset::new();
            fake.create("default", &cm(0)).unwrap();
            let lw = FakeListerWatcher::new(fake.clone(), Some("default"));
            // The fake stores the object it is given, resourceVersion and all: none here.
            let write = move |i| {
                let fake = fake.clone();
                async move {
                    fake.update("default", &cm(i)).unwrap();
                }
            };
            check(source, lw, variant, resync, write).await
        }
        Source::Server => {
            let cluster = Cluster::new(ServerOptions::default());
            let api: Api<ConfigMap> = Api::namespaced(cluster.in_process_client(), "default");
            api.create(&PostParams::default(), &cm(0)).await.unwrap();
            // The server gives every write a new resourceVersion.
            let a = api.clone();
            let write = move |i| {
                let api = a.clone();
                async move {
                    let mut c = api.get("c").await.unwrap();
                    c.data = cm(i).data;
                    api.replace("c", &PostParams::default(), &c).await.unwrap();
                }
            };
            check(source, api, variant, resync, write).await
        }
    }
}
// book: end ch05_fn_run

/// Chapter 05, "Both sources, both informers".
pub fn ch05_checks() {
    // book: ch05_checks
    let mut rows = vec![];
    for source in [Source::Fake, Source::Server] {
        for informer in [Variant::Faithful, Variant::HandlersBeforeCache] {
            rows.push(rig::paused(run(source, informer, Duration::ZERO)));
        }
    }
    let [fake_ok, fake_broken, server_ok, server_broken] = &rows[..] else {
        unreachable!("four runs")
    };
    // On the fake, the RV check cannot tell the informers apart: every comparison is "" vs "".
    assert_eq!(fake_broken.rv_indistinguishable, UPDATES);
    assert_eq!(fake_broken.rv_check_violations, 0); // passes, and means nothing
    assert_eq!(fake_broken.payload_check_violations, UPDATES); // the payload check catches it
    // On the server, with real resourceVersions, the RV check catches every broken update.
    assert_eq!(server_broken.rv_check_violations, UPDATES);
    assert_eq!(server_broken.payload_check_violations, UPDATES);
    // The faithful informer passes both checks on both sources.
    for ok in [fake_ok, server_ok] {
        let found = (ok.rv_check_violations, ok.payload_check_violations);
        assert_eq!(found, (0, 0));
    }
    // Every write reached the handler in every run.
    assert!(rows.iter().all(|r| r.updates == UPDATES));
    // controller-runtime's ResourceVersionChangedPredicate drops every update of the fake.
    assert_eq!(fake_ok.rv_changed_predicate_passes, 0);
    assert_eq!(server_ok.rv_changed_predicate_passes, UPDATES);
    snap::yaml("ch05_checks", &rows, vec![]);
    // book: end ch05_checks
}

/// Chapter 05: the same faithful check with the informer's resync turned on.
pub fn ch05_with_resync() {
    // book: ch05_with_resync
    let fake = rig::paused(run(Source::Fake, Variant::Faithful, 10 * HOUR));
    let server = rig::paused(run(Source::Server, Variant::Faithful, 10 * HOUR));
    // The fake's updates keep their (empty) resourceVersion, so each is classed as a resync
    // and goes only to handlers due for one. This handler asked for none: it heard nothing.
    assert_eq!((fake.updates, fake.rv_check_violations), (0, 0));
    assert_eq!(server.updates, UPDATES);
    let table = format!(
        "fake:   {} of {UPDATES} updates reached the handler\n\
         server: {} of {UPDATES} updates reached the handler\n",
        fake.updates, server.updates
    );
    snap::text("ch05_with_resync", table);
    // book: end ch05_with_resync
}

/// Chapter 05, "When the fake's watcher falls behind": a watcher nobody reads, 101 writes.
pub fn overflow() -> String {
    // book: ch05_overflow
    let fake = FakeClientset::new();
    let _unread = fake.watch::<ConfigMap>(Some("default"), "").unwrap();
    let mut out = String::new();
    for i in 1..=101u32 {
        let mut c = cm(i);
        c.metadata.name = Some(format!("c{i}"));
        let f = fake.clone();
        match catch_quietly(move || f.create("default", &c)) {
            Ok(created) => drop(created.unwrap()),
            Err(message) => {
                out += &format!("writes 1..={}: accepted, buffered unread\n", i - 1);
                out += &format!("write {i}: the writer panicked: {message:?}\n");
            }
        }
    }
    let stored = fake.list::<ConfigMap>(Some("default")).unwrap().items.len();
    out += &format!("objects stored afterwards: {stored}\n");
    assert!(out.contains("write 101: the writer panicked: \"channel full\""));
    assert_eq!(stored, 101);
    out
    // book: end ch05_overflow
}

/// [`overflow`], snapshot `ch05_overflow`.
pub fn ch05_overflow() {
    snap::text("ch05_overflow", overflow());
}

/// A lister-watcher over a fake that deletes `gone` from it when the informer opens its watch:
/// the delete lands after the informer's list and before its watch.
#[derive(Clone, Debug)]
pub struct DeleteBeforeWatch(pub FakeListerWatcher, pub FakeClientset);

impl ListerWatcher<ConfigMap> for DeleteBeforeWatch {
    fn list(&self, o: ListOptions) -> BoxFuture<'static, Result<ListPage<ConfigMap>, LwError>> {
        self.0.list(o)
    }
    fn watch(
        &self,
        o: WatchOptions,
    ) -> BoxFuture<'static, Result<WatchStream<ConfigMap>, LwError>> {
        let _ = self.1.delete::<ConfigMap>("default", "gone"); // the second watch finds it gone
        self.0.watch(o)
    }
    fn is_watch_list_semantics_unsupported(&self) -> bool {
        true
    }
}

/// Chapter 05, "A delete between the list and the watch": an informer on client-go 1.`minor`'s
/// fake, with `gone` deleted after its list and before its watch.
pub fn delete_between_list_and_watch(minor: u32) -> String {
    rig::paused(async move {
        // book: ch05_lost_delete
        let fake = FakeClientset::at_minor(minor).unwrap();
        for name in ["gone", "kept"] {
            let mut c = cm(1);
            c.metadata.name = Some(name.into());
            fake.create("default", &c).unwrap();
        }
        let lw = DeleteBeforeWatch(FakeListerWatcher::new(fake.clone(), Some("default")), fake);
        let informer = Arc::new(SharedIndexInformer::new(
            lw,
            InformerOptions::new(Duration::ZERO),
        ));
        let deletes = Arc::new(Mutex::new(Vec::new()));
        let heard = deletes.clone();
        let on_delete = move |d: DeletedObject<ConfigMap>| {
            heard
                .lock()
                .extend(d.object().and_then(|o| o.metadata.name.clone()))
        };
        informer
            .add_event_handler(HandlerFuncs::new().on_delete(on_delete))
            .unwrap();
        let running = Running::informer(&informer);
        sleep(HOUR).await; // an hour of virtual time: nothing more comes
        running.stop().await;
        let mut held = informer.indexer().list_keys();
        held.sort();
        format!(
            "1.{minor}: the informer holds {held:?}; its handler heard deletes of {:?}\n",
            deletes.lock()
        )
        // book: end ch05_lost_delete
    })
}

/// [`delete_between_list_and_watch`] on 1.37 and 1.38, snapshot `ch05_lost_delete`.
pub fn ch05_lost_delete() {
    let text = [37, 38].map(delete_between_list_and_watch).concat();
    snap::text("ch05_lost_delete", &text);
}
