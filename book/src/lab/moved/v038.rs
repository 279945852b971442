//! Chapter 13, "1.37 → 1.38": the scenarios recorded on client-go v0.37.2 and v0.38.0-beta.0
//! whose bodies differ, each run on this crate at 1.37 and at 1.38 (the informer's gates from
//! `FeatureGates::at_minor`), printed as the recorder prints them, so that each side's text is
//! compared with its tag's recording whole. Each function's body is a chapter block, verbatim.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;

use crate::lab::fifo::{batches, cm};
use crate::lab::rig;
use controlloop::cache::{
    Fifo, HandlerFuncs, InformerOptions, KeyError, RealFifo, RealFifoOptions, SharedIndexInformer,
    Store, StoreWrite, select_fifo,
};
use controlloop::fake::{FakeClientset, FakeListerWatcher};
use controlloop::features::{Feature, FeatureGates, PreRelease};

/// `x v2`: a ConfigMap as the recordings name it.
pub fn label(o: &ConfigMap) -> String {
    let name = o.metadata.name.clone().unwrap_or_default();
    match o.data.as_ref().and_then(|d| d.get("v")) {
        Some(v) => format!("{name} v{v}"),
        None => name,
    }
}

/// The index `v`: a ConfigMap's `data.v`.
pub fn by_value(o: &ConfigMap) -> Vec<String> {
    vec![
        o.data
            .as_ref()
            .and_then(|d| d.get("v"))
            .cloned()
            .unwrap_or_default(),
    ]
}

// book: ch13_fn_batches
/// Where a batch ends: a key that repeats, then a key that fails once queued, through the
/// RealFIFO an informer builds at 1.`minor`.
pub fn batch_boundaries(minor: u32) -> String {
    let choice = select_fifo(&FeatureGates::at_minor(minor).unwrap());
    let options = || RealFifoOptions {
        atomic_events: choice.atomic_events,
        unlock_while_processing: choice.unlock_while_processing,
        emit_delta_type_bookmark: choice.emit_bookmarks,
        batches_repeat_keys: choice.batches_repeat_keys, // from 1.38 on
        ..RealFifoOptions::default()
    };
    let fifo = RealFifo::new(options()).unwrap();
    for o in [
        cm("a", Some(2)),
        cm("b", Some(2)),
        cm("a", Some(3)),
        cm("c", Some(2)),
    ] {
        fifo.update(o).unwrap();
    }
    let mut text = batches("a repeats: updates a v2, b v2, a v3, c v2", &fifo);
    // A key function that fails for `broken` once armed: after the FIFO has queued it.
    let armed = Arc::new(AtomicBool::new(false));
    let on = armed.clone();
    let key = move |o: &ConfigMap| match o.metadata.name.clone().unwrap_or_default() {
        n if n == "broken" && on.load(Ordering::SeqCst) => Err(KeyError {
            reason: format!("no key for {n}"),
            object: n,
        }),
        n => Ok(format!("default/{n}")),
    };
    let fifo = RealFifo::new(RealFifoOptions {
        key_function: Some(Arc::new(key)),
        ..options()
    })
    .unwrap();
    for o in [cm("a", Some(2)), cm("broken", Some(2)), cm("c", Some(2))] {
        fifo.update(o).unwrap();
    }
    armed.store(true, Ordering::SeqCst);
    text += &batches("no key for broken: updates a v2, broken v2, c v2", &fifo);
    text
}
// book: end ch13_fn_batches

// book: ch13_fn_transaction
/// One store transaction that writes x twice, on the store an informer builds at 1.`minor`,
/// holding x v1, with an index function that logs the objects it is called with.
pub fn transaction(minor: u32) -> String {
    let choice = select_fifo(&FeatureGates::at_minor(minor).unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let by_v = Arc::new(move |o: &ConfigMap| {
        log.lock().push(label(o)); // each write: the old object, then the new
        by_value(o)
    });
    let store = Store::with_indexers([("v".to_owned(), by_v as _)])
        .last_write_per_key(choice.batches_repeat_keys); // from 1.38 on
    store.add(cm("x", Some(1))).unwrap();
    seen.lock().clear();
    let results = store.apply_batch(vec![
        StoreWrite::Update(cm("x", Some(2))),
        StoreWrite::Update(cm("x", Some(3))),
        StoreWrite::Update(cm("y", Some(1))), // y is new: an add
    ]);
    let failed = results.iter().any(Result::is_err);
    let mut text = format!("transaction: update x v2, update x v3, add y v1; error: {failed}\n");
    text += &format!("the index function saw: {}\n", seen.lock().join(", "));
    let held = ["x", "y"].map(|n| store.get_by_key(&format!("default/{n}")).map(|o| label(&o)));
    text += &format!(
        "the store afterwards: {}\n",
        held.map(Option::unwrap_or_default).join(", ")
    );
    for v in ["1", "2", "3"] {
        let keys = store.index_keys("v", v).unwrap();
        text += &format!("index v={v}: [{}]\n", keys.join(" "));
    }
    text
}
// book: end ch13_fn_transaction

/// The batch-processing gates, in the recording's order.
pub const BATCH_GATES: [Feature; 4] = [
    Feature::IN_ORDER_INFORMERS,
    Feature::ATOMIC_FIFO,
    Feature::UNLOCK_WHILE_PROCESSING_FIFO,
    Feature::IN_ORDER_INFORMERS_BATCH_PROCESS,
];

/// The recording's first line: the batch gates as 1.`minor` enables them.
pub fn gates_line(gates: &FeatureGates) -> String {
    let on = BATCH_GATES.map(|f| {
        format!(
            "{} {}",
            f.name(),
            if gates.enabled(f) { "on" } else { "off" }
        )
    });
    format!(
        "gates, as this release enables them standalone: {}\n",
        on.join(", ")
    )
}

// book: ch13_fn_same_object
/// A shared informer at 1.`minor` whose processing finds x updated twice at once: its store's
/// index function and its update handler log what they are given.
pub fn same_object(minor: u32) -> String {
    let gates = FeatureGates::at_minor(minor).unwrap();
    let mut text = gates_line(&gates);
    text += &rig::paused(async {
        let fake = FakeClientset::new();
        for n in ["gate", "x"] {
            fake.create("default", &*cm(n, Some(1))).unwrap();
        }
        let options = InformerOptions {
            gates,
            ..InformerOptions::new(Duration::ZERO)
        };
        let lw = FakeListerWatcher::new(fake.clone(), Some("default"));
        let informer = Arc::new(SharedIndexInformer::<ConfigMap, _>::new(lw, options));
        let trail = Arc::new(Mutex::new(None::<Vec<String>>)); // None: not logging yet
        let log = trail.clone();
        let by_v = Arc::new(move |o: &ConfigMap| {
            if let (Some(l), false) = (log.lock().as_mut(), label(o).starts_with("gate")) {
                l.push(format!("index {}", label(o))); // each write: the old object, then the new
            }
            by_value(o)
        });
        informer
            .indexer()
            .add_indexers([("v".to_owned(), by_v as _)])
            .unwrap();
        let log = trail.clone();
        let on_update = move |old: Arc<ConfigMap>, new: Arc<ConfigMap>| {
            if let (Some(l), false) = (log.lock().as_mut(), label(&new).starts_with("gate")) {
                l.push(format!(
                    "handler: OnUpdate old {}, new {}",
                    label(&old),
                    label(&new)
                ));
            }
        };
        informer
            .add_event_handler(HandlerFuncs::new().on_update(on_update))
            .unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let i = informer.clone();
        let run = tokio::spawn(async move {
            i.run(async {
                let _ = stopped.await;
            })
            .await
        });
        rig::settle(
            Duration::from_secs(10),
            Duration::ZERO,
            "the initial sync",
            || informer.has_synced(),
        )
        .await
        .unwrap();
        *trail.lock() = Some(Vec::new());
        for o in [cm("gate", Some(2)), cm("x", Some(2)), cm("x", Some(3))] {
            fake.update("default", &*o).unwrap(); // no yield: the reflector queues all three at once
        }
        tokio::time::sleep(Duration::from_secs(1)).await; // all processed and delivered
        let logged = trail.lock().take().unwrap_or_default();
        let (indexed, handled): (Vec<String>, Vec<String>) =
            logged.into_iter().partition(|l| l.starts_with("index "));
        let indexed: Vec<&str> = indexed.iter().map(|l| &l["index ".len()..]).collect();
        let mut text = String::from(
            "shared informer (NewSharedIndexInformer; its handlers run on the listener's goroutine):\n",
        );
        text += "  held on the gate: update x v2, update x v3\n";
        text += &format!(
            "  the store's index function saw (each write: the old object, then the new): {}\n",
            indexed.join(", ")
        );
        text += &handled
            .iter()
            .map(|h| format!("  {h}\n"))
            .collect::<String>();
        let x = informer.indexer().get_by_key("default/x").unwrap();
        text += &format!("  the store afterwards: {}\n", label(&x));
        let _ = stop.send(());
        rig::within(Duration::from_secs(10), "the informer's shutdown", run)
            .await
            .unwrap();
        text
    });
    text
}
// book: end ch13_fn_same_object

/// The fake clientset's resourceVersions at client-go 1.`minor`, printed as
/// `client_go_v0.MINOR_fake_clientset_resource_versions` is: what a list reports and a watch
/// replays after creates, a stale update and a delete.
pub fn fake_resource_versions(minor: u32) -> String {
    let fake = FakeClientset::at_minor(minor).unwrap();
    let rv = |o: &ConfigMap| {
        format!(
            "{:?}",
            o.metadata.resource_version.clone().unwrap_or_default()
        )
    };
    let list = |what: &str| {
        let l = fake.list::<ConfigMap>(Some("default")).unwrap();
        let items: Vec<String> = l
            .items
            .iter()
            .map(|i| {
                format!(
                    "{} rv {}",
                    i.metadata.name.clone().unwrap_or_default(),
                    rv(i)
                )
            })
            .collect();
        format!(
            "{what}: list rv {:?}, items [{}]\n",
            l.resource_version,
            items.join(" ")
        )
    };
    let mut text = list("empty");
    let a = fake.create("default", &*cm("a", None)).unwrap();
    text += &format!("create a: returned rv {}\n", rv(&a));
    text += &list("after create a");
    let mut stale = (*cm("a", Some(2))).clone();
    stale.metadata.resource_version = Some("stale".into());
    let a = fake.update("default", &stale).unwrap(); // no conflict check
    text += &format!(
        "update a with rv \"stale\": accepted, returned rv {}\n",
        rv(&a)
    );
    text += &list("after update a");
    fake.create("default", &*cm("b", None)).unwrap();
    text += &list("after create b");
    fake.delete::<ConfigMap>("default", "a").unwrap();
    text += &list("after delete a");
    for from in ["", "3", "4"] {
        let mut w = fake.watch::<ConfigMap>(Some("default"), from).unwrap();
        let events: Vec<String> = std::iter::from_fn(|| w.try_next())
            .map(|e| {
                let e = e.unwrap();
                format!(
                    "{} {}",
                    e.ty.as_str(),
                    e.object.metadata.name.unwrap_or_default()
                )
            })
            .collect();
        text += &format!("watch from rv {from:?} replays [{}]\n", events.join(" "));
    }
    text
}

/// The informer gates' specs at each emulated minor from 1.32 to 1.`minor`, and what
/// standalone client-go at 1.`minor` enables, printed as
/// `client_go_v0.MINOR_feature_gates` is.
pub fn feature_gates(minor: u32) -> String {
    let gates = [
        Feature::ATOMIC_FIFO,
        Feature::IN_ORDER_INFORMERS,
        Feature::IN_ORDER_INFORMERS_BATCH_PROCESS,
        Feature::UNLOCK_WHILE_PROCESSING_FIFO,
        Feature::WATCH_LIST_CLIENT,
    ];
    let on = |b: bool| if b { "on" } else { "off" };
    let mut text = String::new();
    for emulated in 32..=minor {
        let at = FeatureGates::at_minor(emulated).unwrap();
        for f in gates {
            let s = at.spec(f).unwrap();
            let maturity = match s.pre_release {
                PreRelease::PreAlpha => "PreAlpha",
                p => crate::lab::fifo::maturity(p),
            };
            let locked = if s.lock_to_default { "yes" } else { "no" };
            text += &format!(
                "1.{emulated} {}: {maturity} default={} locked={locked}\n",
                f.name(),
                on(s.default)
            );
        }
    }
    let standalone = FeatureGates::at_minor(minor).unwrap();
    for f in gates {
        text += &format!("standalone {}: {}\n", f.name(), on(standalone.enabled(f)));
    }
    text
}
