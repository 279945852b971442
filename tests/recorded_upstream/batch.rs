//! Where a RealFIFO batch ends, and what a store transaction writes (client-go
//! `tools/cache/the_real_fifo.go` `PopBatch`, `thread_safe_store.go` `Transaction`): the
//! scenarios recorded on both v0.37 and v0.38, whose bodies differ between them.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use std::time::Duration;

use controlloop::{
    cache::{
        Fifo, HandlerFuncs, InformerOptions, KeyError, KeyFunc, RealFifo, RealFifoOptions,
        SharedIndexInformer, Store, StoreWrite, select_fifo,
    },
    fake::{FakeClientset, FakeListerWatcher},
    features::{Feature, FeatureGates},
};
use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;

use crate::cache::{cm, drain_batches, obj_label, print_pops};
use crate::{SECOND, compare, compare_until, paused, settle, within};

/// The options an informer gives its atomic RealFIFO (AtomicEvents, UnlockWhileProcessing,
/// EmitDeltaTypeBookmark), as `base` sets the rest.
fn informer_fifo(base: RealFifoOptions<ConfigMap>) -> RealFifoOptions<ConfigMap> {
    RealFifoOptions {
        atomic_events: true,
        unlock_while_processing: true,
        emit_delta_type_bookmark: true,
        ..base
    }
}

/// The namespaced key, except that once `armed` it fails for the ConfigMap named `name`: a
/// delta queued with a key whose key fails when the batch is built.
fn key_fails_for(name: &'static str, armed: Arc<AtomicBool>) -> KeyFunc<ConfigMap> {
    Arc::new(move |o: &ConfigMap| {
        let n = o.metadata.name.clone().unwrap_or_default();
        if armed.load(Ordering::SeqCst) && n == name {
            return Err(KeyError {
                object: n.clone(),
                reason: format!("no key for {n}"),
            });
        }
        Ok(format!("default/{n}"))
    })
}

/// `fifo_batch_boundaries`: the batches of a repeated key, then of a key that fails once
/// queued. `base` is the release's RealFIFO options.
pub(crate) fn fifo_batch_boundaries_lines(
    base: impl Fn() -> RealFifoOptions<ConfigMap>,
) -> Vec<String> {
    let mut lines = Vec::new();
    let repeated = RealFifo::new(informer_fifo(base())).expect("valid options");
    for o in [cm("a", 2), cm("b", 2), cm("a", 3), cm("c", 2)] {
        repeated.update(o).expect("queued");
    }
    let what = "a repeats: updates a v2, b v2, a v3, c v2";
    print_pops(&mut lines, what, drain_batches(&repeated));
    let armed = Arc::new(AtomicBool::new(false));
    let broken = RealFifo::new(RealFifoOptions {
        key_function: Some(key_fails_for("broken", armed.clone())),
        ..informer_fifo(base())
    })
    .expect("valid options");
    for o in [cm("a", 2), cm("broken", 2), cm("c", 2)] {
        broken.update(o).expect("queued");
    }
    armed.store(true, Ordering::SeqCst);
    let what = "no key for broken: updates a v2, broken v2, c v2";
    print_pops(&mut lines, what, drain_batches(&broken));
    lines
}

/// `store_transaction_repeated_key`: one transaction writing x twice, on a store holding x v1
/// whose index function logs what it is called with. `store` builds the release's store.
pub(crate) fn store_transaction_lines(
    store: impl Fn(Store<ConfigMap>) -> Store<ConfigMap>,
) -> Vec<String> {
    let seen = Arc::new(Mutex::new(None::<Vec<String>>));
    let log = seen.clone();
    let index = Arc::new(move |o: &ConfigMap| {
        if let Some(l) = log.lock().as_mut() {
            l.push(obj_label(o));
        }
        let v = o.data.as_ref().and_then(|d| d.get("v")).cloned();
        vec![v.unwrap_or_default()]
    });
    let idx = store(Store::with_indexers([("v".to_owned(), index as _)]));
    idx.add(cm("x", 1)).expect("a namespaced name");
    *seen.lock() = Some(Vec::new());
    let results = idx.apply_batch(vec![
        StoreWrite::Update(cm("x", 2)),
        StoreWrite::Update(cm("x", 3)),
        StoreWrite::Update(cm("y", 1)),
    ]);
    let failed = results.iter().any(Result::is_err);
    let mut lines = vec![
        format!("transaction: update x v2, update x v3, add y v1; error: {failed}"),
        format!(
            "the index function saw: {}",
            seen.lock().take().unwrap_or_default().join(", ")
        ),
    ];
    let held: Vec<String> = ["x", "y"]
        .iter()
        .map(|n| match idx.get_by_key(&format!("default/{n}")) {
            Some(o) => obj_label(&o),
            None => format!("{n} absent"),
        })
        .collect();
    lines.push(format!("the store afterwards: {}", held.join(", ")));
    for v in ["1", "2", "3"] {
        let keys = idx.index_keys("v", v).expect("the index exists");
        lines.push(format!("index v={v}: [{}]", keys.join(" ")));
    }
    lines
}

#[test]
fn fifo_batch_boundaries() {
    compare(
        "client_go_v0.37_fifo_batch_boundaries",
        fifo_batch_boundaries_lines(RealFifoOptions::default),
    );
}

#[test]
fn store_transaction_repeated_key() {
    compare(
        "client_go_v0.37_store_transaction_repeated_key",
        store_transaction_lines(|s| s),
    );
}

/// The batch-processing gates, in the recording's order.
const BATCH_GATES: [Feature; 4] = [
    Feature::IN_ORDER_INFORMERS,
    Feature::ATOMIC_FIFO,
    Feature::UNLOCK_WHILE_PROCESSING_FIFO,
    Feature::IN_ORDER_INFORMERS_BATCH_PROCESS,
];

/// `informer_batch_same_object`, its shared-informer part: x updated twice behind a held
/// update of gate, the store's index function and the handler logging what they see, under
/// `gates`. The recorder holds the informer's processing in the index function until the
/// writes are queued; here the writes are made without yielding, so the reflector queues all
/// three before the informer's task pops (one runtime thread: it cannot run in between).
pub(crate) fn informer_batch_same_object_lines(gates: FeatureGates) -> Vec<String> {
    let on: Vec<String> = BATCH_GATES
        .iter()
        .map(|f| {
            format!(
                "{} {}",
                f.name(),
                if gates.enabled(*f) { "on" } else { "off" }
            )
        })
        .collect();
    let mut lines = vec![format!(
        "gates, as this release enables them standalone: {}",
        on.join(", ")
    )];
    lines.extend(paused(async {
        let fake = FakeClientset::new();
        for n in ["gate", "x"] {
            fake.create("default", &*cm(n, 1)).expect("create");
        }
        let informer = Arc::new(SharedIndexInformer::<ConfigMap, _>::new(
            FakeListerWatcher::new(fake.clone(), Some("default")),
            InformerOptions {
                gates,
                ..InformerOptions::new(Duration::ZERO)
            },
        ));
        let trail = Arc::new(Mutex::new(None::<Vec<String>>));
        let log = trail.clone();
        let index = Arc::new(move |o: &ConfigMap| {
            if o.metadata.name.as_deref() != Some("gate")
                && let Some(l) = log.lock().as_mut()
            {
                l.push(format!("index {}", obj_label(o)));
            }
            vec![o.data.as_ref().and_then(|d| d.get("v")).cloned().unwrap_or_default()]
        });
        informer
            .indexer()
            .add_indexers([("v".to_owned(), index as _)])
            .expect("a new index");
        let log = trail.clone();
        informer
            .add_event_handler(HandlerFuncs::new().on_update(
                move |old: Arc<ConfigMap>, new: Arc<ConfigMap>| {
                    if new.metadata.name.as_deref() != Some("gate")
                        && let Some(l) = log.lock().as_mut()
                    {
                        let (o, n) = (obj_label(&old), obj_label(&new));
                        l.push(format!("handler: OnUpdate old {o}, new {n}"));
                    }
                },
            ))
            .expect("not stopped");
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let run = tokio::spawn({
            let informer = informer.clone();
            async move { informer.run(async { let _ = stop_rx.await; }).await }
        });
        within(10 * SECOND, "the informer's initial sync", async {
            while !informer.has_synced() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
        settle().await;
        *trail.lock() = Some(Vec::new());
        for o in [cm("gate", 2), cm("x", 2), cm("x", 3)] {
            fake.update("default", &*o).expect("update"); // no yield in between
        }
        tokio::time::sleep(SECOND).await; // everything queued is processed and delivered
        let logged = trail.lock().take().unwrap_or_default();
        let (indexed, handled): (Vec<String>, Vec<String>) =
            logged.into_iter().partition(|l| l.starts_with("index "));
        let indexed: Vec<&str> = indexed.iter().map(|l| &l["index ".len()..]).collect();
        let mut lines = vec![
            "shared informer (NewSharedIndexInformer; its handlers run on the listener's goroutine):"
                .to_owned(),
            "  held on the gate: update x v2, update x v3".to_owned(),
            format!(
                "  the store's index function saw (each write: the old object, then the new): {}",
                indexed.join(", ")
            ),
        ];
        lines.extend(handled.iter().map(|h| format!("  {h}")));
        let x = informer.indexer().get_by_key("default/x").expect("x is cached");
        lines.push(format!("  the store afterwards: {}", obj_label(&x)));
        let _ = stop_tx.send(());
        within(10 * SECOND, "informer shutdown", run)
            .await
            .expect("informer task");
        lines
    }));
    lines
}

/// Up to the inline informer: the port has no informer whose handler runs on its processing
/// task (upstream's `NewInformerWithOptions`), so the recording's second part is not run.
#[test]
fn informer_batch_same_object() {
    compare_until(
        "client_go_v0.37_informer_batch_same_object",
        "informer of NewInformerWithOptions",
        informer_batch_same_object_lines(FeatureGates::at_minor(37).expect("modelled")),
    );
}

/// client-go v0.38's batches, selected as the informer selects them at 1.38.
fn v038_fifo() -> RealFifoOptions<ConfigMap> {
    RealFifoOptions {
        batches_repeat_keys: true,
        ..RealFifoOptions::default()
    }
}

#[test]
fn fifo_batch_boundaries_on_v0_38() {
    compare(
        "client_go_v0.38_fifo_batch_boundaries",
        fifo_batch_boundaries_lines(v038_fifo),
    );
}

#[test]
fn store_transaction_repeated_key_on_v0_38() {
    compare(
        "client_go_v0.38_store_transaction_repeated_key",
        store_transaction_lines(|s| s.last_write_per_key(true)),
    );
}

#[test]
fn informer_batch_same_object_on_v0_38() {
    compare_until(
        "client_go_v0.38_informer_batch_same_object",
        "informer of NewInformerWithOptions",
        informer_batch_same_object_lines(FeatureGates::at_minor(38).expect("modelled")),
    );
}

/// The informer at 1.38 builds its FIFO and store as v0.38's, at 1.37 as v0.37.2's.
#[test]
fn the_informer_follows_v0_38_batches_only_at_1_38() {
    let at = |minor| select_fifo(&FeatureGates::at_minor(minor).expect("modelled"));
    assert!(!at(37).batches_repeat_keys);
    assert!(at(38).batches_repeat_keys);
    assert!(
        !InformerOptions::new(SECOND)
            .gates
            .emulated_version()
            .minor
            .eq(&38)
    );
}

/// The release is what the comparison holds: the port at 1.37 fails the v0.38 recording, on
/// the line where v0.38 stops ending a batch at the repeated key.
#[test]
#[should_panic(expected = "+a repeats: updates a v2, b v2, a v3, c v2: 2 pops")]
fn the_v0_37_batches_fail_the_v0_38_recording() {
    compare(
        "client_go_v0.38_fifo_batch_boundaries",
        fifo_batch_boundaries_lines(RealFifoOptions::default),
    );
}
