//! DeltaFIFO, RealFIFO, the fake clientset and the informer's resync (client-go
//! `tools/cache`, `kubernetes/fake`).

use std::{
    cell::RefCell,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use controlloop::{
    cache::{
        Delta, DeltaFifo, DeltaFifoOptions, DeltaObject, Deltas, Fifo, HandlerFuncs,
        InformerOptions, ListOptions, ListPage, ListerWatcher, LwError, RealFifo, RealFifoOptions,
        SharedIndexInformer, Store, WatchOptions, WatchStream,
    },
    fake::{FakeClientset, FakeListerWatcher},
    features::FeatureGates,
};
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;

use crate::{SECOND, compare, compare_each, paused, within};

// ---------------------------------------------------------------------------------------
// DeltaFIFO and RealFIFO
// ---------------------------------------------------------------------------------------

/// A ConfigMap in `default` named `name`, with `data.v` when `v > 0`.
pub(crate) fn cm(name: &str, v: u32) -> Arc<ConfigMap> {
    Arc::new(ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        data: (v > 0).then(|| [("v".to_owned(), v.to_string())].into()),
        ..Default::default()
    })
}

pub(crate) fn obj_label(o: &ConfigMap) -> String {
    let name = o.metadata.name.clone().unwrap_or_default();
    match o.data.as_ref().and_then(|d| d.get("v")) {
        Some(v) => format!("{name} v{v}"),
        None => name,
    }
}

fn delta_label(d: &Delta<ConfigMap>) -> String {
    let what = match &d.object {
        DeltaObject::Object(o) => obj_label(o),
        DeltaObject::Tombstone(t) => format!(
            "tombstone({}: {})",
            t.key,
            t.obj.as_deref().map_or("nil".into(), obj_label)
        ),
        DeltaObject::ReplacedAll(r) => format!(
            "rv {} [{}]",
            r.resource_version,
            r.objects
                .iter()
                .map(|o| obj_label(o))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        DeltaObject::SyncAll => "all".into(),
        DeltaObject::Bookmark(b) => format!("rv {}", b.resource_version),
    };
    format!("{} {what}", d.delta_type)
}

pub(crate) fn deltas_label(ds: &[Delta<ConfigMap>]) -> String {
    format!(
        "[{}]",
        ds.iter().map(delta_label).collect::<Vec<_>>().join(", ")
    )
}

/// Pops until nothing is queued: each Pop's deltas.
fn drain_pops(f: &impl Fifo<ConfigMap>) -> Vec<String> {
    std::iter::from_fn(|| f.try_pop(|_, _| Ok::<(), ()>(())))
        .map(|r| r.expect("never fails"))
        .map(|d: Deltas<ConfigMap>| deltas_label(&d.0))
        .collect()
}

/// Pops batches until nothing is queued: each PopBatch, and whether it went to the batch or
/// the single-item function.
pub(crate) fn drain_batches(f: &RealFifo<ConfigMap>) -> Vec<String> {
    let mut pops = Vec::new();
    loop {
        let got = RefCell::new(String::new());
        let popped = f.try_pop_batch(
            |ds, _| {
                *got.borrow_mut() = format!("batch {}", deltas_label(ds));
                Ok::<(), ()>(())
            },
            |d, _| {
                *got.borrow_mut() = format!("single {}", deltas_label(&d.0));
                Ok(())
            },
        );
        match popped {
            None => return pops,
            Some(r) => {
                r.expect("never fails");
                pops.push(got.into_inner());
            }
        }
    }
}

fn indexer(objs: &[Arc<ConfigMap>]) -> Arc<Store<ConfigMap>> {
    let store = Store::new();
    for o in objs {
        store.add(o.clone()).expect("a namespaced name");
    }
    Arc::new(store)
}

/// The three FIFOs an informer builds: DeltaFIFO (before 1.33), RealFIFO with known objects
/// (1.33-1.35), atomic RealFIFO (1.36).
fn delta_fifo(known: Arc<Store<ConfigMap>>) -> DeltaFifo<ConfigMap> {
    DeltaFifo::new(DeltaFifoOptions {
        known_objects: Some(known),
        emit_delta_type_replaced: true,
        ..Default::default()
    })
}

pub(crate) fn print_pops(lines: &mut Vec<String>, fifo: &str, pops: Vec<String>) {
    lines.push(format!("{fifo}: {} pops", pops.len()));
    for (i, p) in pops.iter().enumerate() {
        lines.push(format!("  pop {}: {p}", i + 1));
    }
}

/// Runs `events` through each FIFO and drains it; the atomic RealFIFO pops as client-go
/// v0.38 does when `v038` (its batches may repeat a key).
fn through_each_fifo(
    v038: bool,
    known: impl Fn() -> Arc<Store<ConfigMap>>,
    events: impl Fn(&dyn Fn(Event)),
) -> Vec<String> {
    let mut lines = Vec::new();
    let d = delta_fifo(known());
    events(&|e| e.apply(&d));
    print_pops(&mut lines, "DeltaFIFO Pop", drain_pops(&d));
    let r = RealFifo::with_known_objects(known());
    events(&|e| e.apply(&r));
    print_pops(&mut lines, "RealFIFO Pop", drain_pops(&r));
    let a = RealFifo::new(RealFifoOptions {
        atomic_events: true,
        unlock_while_processing: true,
        emit_delta_type_bookmark: true,
        batches_repeat_keys: v038,
        ..RealFifoOptions::default()
    })
    .expect("the informer's atomic mode");
    events(&|e| e.apply(&a));
    print_pops(&mut lines, "atomic RealFIFO PopBatch", drain_batches(&a));
    lines
}

/// One producer call.
enum Event {
    Add(Arc<ConfigMap>),
    Update(Arc<ConfigMap>),
    Delete(Arc<ConfigMap>),
    Replace(Vec<Arc<ConfigMap>>, &'static str),
}

impl Event {
    fn apply(self, f: &impl Fifo<ConfigMap>) {
        match self {
            Event::Add(o) => f.add(o),
            Event::Update(o) => f.update(o),
            Event::Delete(o) => f.delete(o),
            Event::Replace(l, rv) => f.replace(l, rv),
        }
        .expect("the FIFO takes it")
    }
}

fn fifo_interleave_lines(v038: bool) -> Vec<String> {
    through_each_fifo(
        v038,
        || indexer(&[]),
        |emit| {
            emit(Event::Add(cm("alpha", 1)));
            emit(Event::Add(cm("beta", 1)));
            emit(Event::Update(cm("alpha", 2)));
            emit(Event::Update(cm("beta", 2)));
            emit(Event::Update(cm("alpha", 3)));
            emit(Event::Delete(cm("beta", 2)));
        },
    )
}

fn fifo_ghost_delete_lines(v038: bool) -> Vec<String> {
    through_each_fifo(
        v038,
        || indexer(&[]),
        |emit| emit(Event::Delete(cm("ghost", 0))),
    )
}

fn fifo_replace_deletions_lines(v038: bool) -> Vec<String> {
    through_each_fifo(
        v038,
        || indexer(&[cm("alpha", 1), cm("beta", 1), cm("gamma", 1)]),
        |emit| {
            emit(Event::Update(cm("beta", 2)));
            emit(Event::Replace(vec![cm("alpha", 5), cm("delta", 1)], "10"));
        },
    )
}

#[test]
fn fifo_interleave() {
    compare_each(
        &["fifo_interleave", "client_go_v0.37_fifo_interleave"],
        fifo_interleave_lines(false),
    );
}

#[test]
fn fifo_ghost_delete() {
    compare_each(
        &["fifo_ghost_delete", "client_go_v0.37_fifo_ghost_delete"],
        fifo_ghost_delete_lines(false),
    );
}

#[test]
fn fifo_replace_deletions() {
    compare_each(
        &[
            "fifo_replace_deletions",
            "client_go_v0.37_fifo_replace_deletions",
        ],
        fifo_replace_deletions_lines(false),
    );
}

/// The same three scenarios with the atomic RealFIFO popping as client-go v0.38 does.
#[test]
fn fifo_scenarios_on_v0_38() {
    compare(
        "client_go_v0.38_fifo_interleave",
        fifo_interleave_lines(true),
    );
    compare(
        "client_go_v0.38_fifo_ghost_delete",
        fifo_ghost_delete_lines(true),
    );
    compare(
        "client_go_v0.38_fifo_replace_deletions",
        fifo_replace_deletions_lines(true),
    );
}

/// The fake stores objects as given (no resourceVersion written, no conflict check), and
/// keeps a hidden per-resource counter that lists report and watches replay from.
#[test]
fn fake_clientset_resource_versions() {
    compare_each(
        &[
            "fake_clientset_resource_versions",
            "client_go_v0.37_fake_clientset_resource_versions",
        ],
        fake_clientset_resource_versions_lines(37),
    );
}

/// The same on client-go v0.38's fake: the delete moves the counter, and a watch that starts
/// before it replays it.
#[test]
fn fake_clientset_resource_versions_on_v0_38() {
    compare(
        "client_go_v0.38_fake_clientset_resource_versions",
        fake_clientset_resource_versions_lines(38),
    );
}

fn fake_clientset_resource_versions_lines(minor: u32) -> Vec<String> {
    let fake = FakeClientset::at_minor(minor).expect("a modelled minor");
    let rv = |o: &ConfigMap| {
        format!(
            "{:?}",
            o.metadata.resource_version.clone().unwrap_or_default()
        )
    };
    let mut lines = Vec::new();
    let list = |what: &str, lines: &mut Vec<String>| {
        let l = fake.list::<ConfigMap>(Some("default")).expect("list");
        let items: Vec<String> = l
            .items
            .iter()
            .map(|i| format!("{} rv {}", i.metadata.name.as_deref().unwrap_or(""), rv(i)))
            .collect();
        lines.push(format!(
            "{what}: list rv {:?}, items [{}]",
            l.resource_version,
            items.join(" ")
        ));
    };
    list("empty", &mut lines);
    let a = fake.create("default", &*cm("a", 1)).expect("create");
    lines.push(format!("create a: returned rv {}", rv(&a)));
    list("after create a", &mut lines);
    let mut stale = (*cm("a", 2)).clone();
    stale.metadata.resource_version = Some("stale".into());
    let a = fake.update("default", &stale).expect("no conflict check");
    lines.push(format!(
        "update a with rv \"stale\": accepted, returned rv {}",
        rv(&a)
    ));
    list("after update a", &mut lines);
    fake.create("default", &*cm("b", 1)).expect("create");
    list("after create b", &mut lines);
    fake.delete::<ConfigMap>("default", "a").expect("delete");
    list("after delete a", &mut lines);
    for from in ["", "3", "4"] {
        let mut w = fake
            .watch::<ConfigMap>(Some("default"), from)
            .expect("watch");
        let mut events = Vec::new();
        while let Some(e) = w.try_next() {
            let e = e.expect("a ConfigMap");
            events.push(format!(
                "{} {}",
                e.ty.as_str(),
                e.object.metadata.name.as_deref().unwrap_or("")
            ));
        }
        w.stop();
        lines.push(format!(
            "watch from rv {from:?} replays [{}]",
            events.join(" ")
        ));
    }
    lines
}

/// A lister-watcher that counts its calls.
struct Counting<L> {
    inner: L,
    lists: Arc<AtomicUsize>,
    watches: Arc<AtomicUsize>,
}

impl<K, L: ListerWatcher<K>> ListerWatcher<K> for Counting<L> {
    fn list(&self, options: ListOptions) -> BoxFuture<'static, Result<ListPage<K>, LwError>> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        self.inner.list(options)
    }
    fn watch(&self, options: WatchOptions) -> BoxFuture<'static, Result<WatchStream<K>, LwError>> {
        self.watches.fetch_add(1, Ordering::SeqCst);
        self.inner.watch(options)
    }
    fn is_watch_list_semantics_unsupported(&self) -> bool {
        self.inner.is_watch_list_semantics_unsupported()
    }
}

/// A resync hands the handler the cached object as both old and new, and never calls the
/// source. Upstream ran this on the real clock (resync 1 s) and recorded only the first
/// resync's delivery and the call counts right after it; here the clock is paused.
#[test]
fn informer_resync() {
    compare_each(
        &["informer_resync", "client_go_v0.37_informer_resync"],
        informer_resync_lines(InformerOptions::new(SECOND)),
    );
}

/// The same, with the informer at 1.38 (client-go v0.38).
#[test]
fn informer_resync_on_v0_38() {
    let options = InformerOptions {
        gates: FeatureGates::at_minor(38).expect("modelled"),
        ..InformerOptions::new(SECOND)
    };
    compare(
        "client_go_v0.38_informer_resync",
        informer_resync_lines(options),
    );
}

fn informer_resync_lines(options: InformerOptions) -> Vec<String> {
    paused(async {
        let fake = FakeClientset::new();
        fake.create("default", &*cm("web", 1)).expect("create");
        let (lists, watches) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let lw = Counting {
            inner: FakeListerWatcher::new(fake, Some("default")),
            lists: lists.clone(),
            watches: watches.clone(),
        };
        let informer = Arc::new(SharedIndexInformer::<ConfigMap, _>::new(lw, options));
        let (adds_tx, mut adds) = tokio::sync::mpsc::unbounded_channel();
        let (updates_tx, mut updates) = tokio::sync::mpsc::unbounded_channel();
        informer
            .add_event_handler(
                HandlerFuncs::new()
                    .on_add(move |o: Arc<ConfigMap>, _| {
                        let _ = adds_tx.send(o.metadata.name.clone().unwrap_or_default());
                    })
                    .on_update(move |old: Arc<ConfigMap>, new: Arc<ConfigMap>| {
                        let _ = updates_tx.send((old, new));
                    }),
            )
            .expect("not stopped");
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let run = tokio::spawn({
            let informer = informer.clone();
            async move {
                informer
                    .run(async {
                        let _ = stop_rx.await;
                    })
                    .await
            }
        });
        let mut lines = Vec::new();
        let name = within(10 * SECOND, "the informer's first list", adds.recv())
            .await
            .expect("handler alive");
        lines.push(format!("OnAdd {name}"));
        let (old, new) = within(10 * SECOND, "the first resync", updates.recv())
            .await
            .expect("handler alive");
        lines.push(format!(
            "resync: OnUpdate {}, old and new the same object: {}",
            new.metadata.name.as_deref().unwrap_or(""),
            Arc::ptr_eq(&old, &new)
        ));
        let rv = |o: &ConfigMap| o.metadata.resource_version.clone().unwrap_or_default();
        lines.push(format!(
            "resync: old rv {:?}, new rv {:?}",
            rv(&old),
            rv(&new)
        ));
        lines.push(format!(
            "after the resync: list calls {}, watch calls {}",
            lists.load(Ordering::SeqCst),
            watches.load(Ordering::SeqCst)
        ));
        let _ = stop_tx.send(());
        within(10 * SECOND, "informer shutdown", run)
            .await
            .expect("informer task");
        lines
    })
}
