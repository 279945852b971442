//! Ports of client-go's FIFO tests (`tools/cache/delta_fifo_test.go`,
//! `tools/cache/the_real_fifo_test.go`, client-go v0.36.0), rewritten by hand against this
//! crate's API. Each test names the upstream test it follows; the conformance numbers are
//! those of §9 of the spec (items 18–27).
//!
//! Upstream's `testFifoObject{name, val}` becomes a cluster-scoped `ConfigMap` named `name`
//! with `data.val`, so its key is just the name, as with upstream's `testFifoObjectKeyFunc`.
//! Upstream's `literalListerGetter` becomes [`Literal`], a known-objects list in the order
//! given.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use controlloop::cache::{
    Delta, DeltaFifo, DeltaFifoOptions, DeltaObject, DeltaType, Deltas, Fifo, KeyError, KeyFunc,
    KeyListerGetter, LookupError, PopError, RealFifo, RealFifoOptions, ReplacedAllInfo,
    meta_namespace_key,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;

use DeltaType::*;

type Obj = Arc<ConfigMap>;
/// Expected Pops or batches, each a list of deltas.
type Batches = Vec<Vec<Delta<ConfigMap>>>;

/// A HasSynced case: name, replaces, add first?, then for each FIFO the pops and the result.
struct SyncCase {
    name: &'static str,
    replaces: Vec<Vec<Obj>>,
    add: bool,
    delta: (usize, bool),
    real: (usize, bool),
}

fn obj(name: &str, val: i64) -> Obj {
    Arc::new(ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some([("val".to_owned(), val.to_string())].into()),
        ..Default::default()
    })
}

fn val(o: &ConfigMap) -> i64 {
    o.data.as_ref().unwrap()["val"].parse().unwrap()
}

fn d(t: DeltaType, o: &Obj) -> Delta<ConfigMap> {
    Delta::new(t, o.clone())
}

fn tomb(key: &str, o: Option<&Obj>) -> Delta<ConfigMap> {
    Delta::tombstone(key, o.cloned())
}

/// Upstream's `literalListerGetter`: known objects, in the order given.
struct Literal(Vec<Obj>);

impl KeyListerGetter<ConfigMap> for Literal {
    fn list_keys(&self) -> Vec<String> {
        self.0.iter().map(|o| meta_namespace_key(&**o)).collect()
    }
    fn get_by_key(&self, key: &str) -> Result<Option<Obj>, LookupError> {
        Ok(self
            .0
            .iter()
            .find(|o| meta_namespace_key(&***o) == key)
            .cloned())
    }
}

fn known(objs: &[Obj]) -> Option<Arc<dyn KeyListerGetter<ConfigMap>>> {
    Some(Arc::new(Literal(objs.to_vec())))
}

fn delta_fifo(known_objects: Option<Arc<dyn KeyListerGetter<ConfigMap>>>) -> DeltaFifo<ConfigMap> {
    DeltaFifo::new(DeltaFifoOptions {
        known_objects,
        ..DeltaFifoOptions::default()
    })
}

fn real_fifo(known_objects: &[Obj]) -> RealFifo<ConfigMap> {
    RealFifo::with_known_objects(Arc::new(Literal(known_objects.to_vec())))
}

/// Upstream's `pop2`: the deltas and `isInInitialList`. Panics if nothing is queued.
fn pop2(q: &impl Fifo<ConfigMap>) -> (Deltas<ConfigMap>, bool) {
    let mut initial = None;
    let deltas = q
        .try_pop(|_, i| {
            initial = Some(i);
            Ok::<(), ()>(())
        })
        .expect("Pop would block: nothing queued")
        .expect("process never fails here");
    (deltas, initial.unwrap())
}

/// Upstream's `Pop(queue)`.
fn pop(q: &impl Fifo<ConfigMap>) -> Vec<Delta<ConfigMap>> {
    pop2(q).0.0
}

/// Upstream's `testPop`: the newest object's `val`.
fn pop_val(q: &impl Fifo<ConfigMap>) -> i64 {
    let deltas = pop(q);
    val(deltas.last().unwrap().object.object().unwrap())
}

// ---- item 18 -------------------------------------------------------------------------------

/// `TestDeltaFIFO_detectLineJumpers`: a re-added key keeps its place; its newest value pops.
#[test]
fn delta_fifo_a_readded_key_keeps_its_place_and_pops_its_newest_value() {
    let f = delta_fifo(None);
    for (n, v) in [
        ("foo", 10),
        ("bar", 1),
        ("foo", 11),
        ("foo", 13),
        ("zab", 30),
    ] {
        f.add(obj(n, v)).unwrap();
    }
    assert_eq!(pop_val(&f), 13);
    f.add(obj("foo", 14)).unwrap(); // foo must not jump back in line
    assert_eq!([pop_val(&f), pop_val(&f), pop_val(&f)], [1, 30, 14]);
}

/// `TestRealFIFO_detectLineJumpers`: every event comes out in arrival order.
#[test]
fn real_fifo_delivers_every_event_in_arrival_order() {
    let f = real_fifo(&[]);
    for (n, v) in [
        ("foo", 10),
        ("bar", 1),
        ("foo", 11),
        ("foo", 13),
        ("zab", 30),
    ] {
        f.add(obj(n, v)).unwrap();
    }
    assert_eq!(pop_val(&f), 10);
    f.add(obj("foo", 14)).unwrap();
    let rest: Vec<i64> = (0..5).map(|_| pop_val(&f)).collect();
    assert_eq!(rest, [1, 11, 13, 30, 14]);
}

// ---- item 19 -------------------------------------------------------------------------------

/// `TestDeltaFIFOW_ReplaceMakesDeletionsForObjectsOnlyInQueue`: the exact delta sequences,
/// with and without known objects, including a single Delete after several Replaces.
#[test]
fn delta_fifo_replace_makes_deletions_for_objects_only_in_the_queue() {
    let o = obj("foo", 2);
    let o2 = obj("foo", 3);
    type Ops = fn(&DeltaFifo<ConfigMap>, &Obj, &Obj);
    let cases: Vec<(&str, bool, Ops, Vec<Delta<ConfigMap>>)> = vec![
        (
            "Added object should be deleted on Replace",
            false,
            |f, o, _| {
                f.add(o.clone()).unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![d(Added, &o), tomb("foo", Some(&o))],
        ),
        (
            "Replaced object should have only a single Delete",
            true,
            |f, o, _| {
                f.add(o.clone()).unwrap();
                f.replace(vec![o.clone()], "0").unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![d(Added, &o), d(Replaced, &o), tomb("foo", Some(&o))],
        ),
        (
            "Deleted object should have only a single Delete",
            false,
            |f, o, _| {
                f.add(o.clone()).unwrap();
                f.delete(o.clone()).unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![d(Added, &o), d(Deleted, &o)],
        ),
        (
            "Synced objects should have a single delete",
            false,
            |f, o, _| {
                f.add(o.clone()).unwrap();
                f.replace(vec![o.clone()], "0").unwrap();
                f.replace(vec![o.clone()], "0").unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![
                d(Added, &o),
                d(Sync, &o),
                d(Sync, &o),
                tomb("foo", Some(&o)),
            ],
        ),
        (
            "Added objects should have a single delete on multiple Replaces",
            false,
            |f, o, _| {
                f.add(o.clone()).unwrap();
                f.replace(vec![], "0").unwrap();
                f.replace(vec![], "1").unwrap();
            },
            vec![d(Added, &o), tomb("foo", Some(&o))],
        ),
        (
            "Added and deleted and added object should be deleted",
            false,
            |f, o, o2| {
                f.add(o.clone()).unwrap();
                f.delete(o.clone()).unwrap();
                f.add(o2.clone()).unwrap();
                f.replace(vec![], "0").unwrap();
            },
            vec![
                d(Added, &o),
                d(Deleted, &o),
                d(Added, &o2),
                tomb("foo", Some(&o2)),
            ],
        ),
    ];
    for (name, emit_replaced, ops, expected) in cases {
        for known_objects in [known(&[]), None] {
            let with = known_objects.is_some();
            let f = DeltaFifo::new(DeltaFifoOptions {
                known_objects,
                emit_delta_type_replaced: emit_replaced,
                ..DeltaFifoOptions::default()
            });
            ops(&f, &o, &o2);
            assert_eq!(pop(&f), expected, "{name} (known objects: {with})");
            assert!(f.is_empty(), "{name}: no extra deltas");
        }
    }
}

// ---- item 20 -------------------------------------------------------------------------------

fn foo_bar_baz() -> Vec<Obj> {
    vec![obj("foo", 5), obj("bar", 6), obj("baz", 7)]
}

fn assert_pops(f: &impl Fifo<ConfigMap>, expected: Batches) {
    for (i, e) in expected.into_iter().enumerate() {
        assert_eq!(pop(f), e, "pop #{}", i + 1);
    }
}

/// `TestDeltaFIFO_ReplaceMakesDeletions`: tombstones for known objects missing from the list,
/// and a tombstone that carries the newest queued object.
#[test]
fn delta_fifo_replace_makes_tombstones_with_the_newest_known_state() {
    // A pre-existing Delete.
    let f = delta_fifo(known(&foo_bar_baz()));
    f.delete(obj("baz", 10)).unwrap();
    f.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_pops(
        &f,
        vec![
            vec![d(Deleted, &obj("baz", 10))],
            vec![d(Sync, &obj("foo", 5))],
            vec![tomb("bar", Some(&obj("bar", 6)))],
        ],
    );

    // Starting with an Add instead of a Delete.
    let f = delta_fifo(known(&foo_bar_baz()));
    f.add(obj("baz", 10)).unwrap();
    f.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_pops(
        &f,
        vec![
            vec![
                d(Added, &obj("baz", 10)),
                tomb("baz", Some(&obj("baz", 10))),
            ],
            vec![d(Sync, &obj("foo", 5))],
            vec![tomb("bar", Some(&obj("bar", 6)))],
        ],
    );

    // Deleting and recreating in the queue, then deleting by Replace: the newest queued object.
    let f = delta_fifo(known(&foo_bar_baz()));
    f.delete(obj("bar", 6)).unwrap();
    f.add(obj("bar", 100)).unwrap();
    f.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_pops(
        &f,
        vec![
            vec![
                d(Deleted, &obj("bar", 6)),
                d(Added, &obj("bar", 100)),
                tomb("bar", Some(&obj("bar", 100))),
            ],
            vec![d(Sync, &obj("foo", 5))],
            vec![tomb("baz", Some(&obj("baz", 7)))],
        ],
    );

    // Syncing first, so the delete uses the latest version.
    let f = delta_fifo(known(&foo_bar_baz()));
    f.replace(vec![obj("bar", 100), obj("foo", 5)], "0")
        .unwrap();
    f.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_pops(
        &f,
        vec![
            vec![
                d(Sync, &obj("bar", 100)),
                tomb("bar", Some(&obj("bar", 100))),
            ],
            vec![d(Sync, &obj("foo", 5)), d(Sync, &obj("foo", 5))],
            vec![tomb("baz", Some(&obj("baz", 7)))],
        ],
    );

    // Without known objects.
    let f = delta_fifo(None);
    f.add(obj("baz", 10)).unwrap();
    f.replace(vec![obj("foo", 5)], "0").unwrap();
    assert_pops(
        &f,
        vec![
            vec![
                d(Added, &obj("baz", 10)),
                tomb("baz", Some(&obj("baz", 10))),
            ],
            vec![d(Sync, &obj("foo", 5))],
        ],
    );
}

/// `TestDeltaFIFO_ReplaceMakesDeletionsReplaced` / `TestDeltaFIFO_ReplaceDeltaType`: with
/// the emit-Replaced option, relist items are `Replaced`, not `Sync`.
#[test]
fn delta_fifo_emits_replaced_when_asked() {
    let f = DeltaFifo::new(DeltaFifoOptions {
        known_objects: known(&foo_bar_baz()),
        emit_delta_type_replaced: true,
        ..DeltaFifoOptions::default()
    });
    f.delete(obj("baz", 10)).unwrap();
    f.replace(vec![obj("foo", 6)], "0").unwrap();
    assert_pops(
        &f,
        vec![
            vec![d(Deleted, &obj("baz", 10))],
            vec![d(Replaced, &obj("foo", 6))],
            vec![tomb("bar", Some(&obj("bar", 6)))],
        ],
    );
}

// ---- item 21 -------------------------------------------------------------------------------

/// `TestDeltaFIFO_UpdateResyncRace` and `TestRealFIFO_UpdateResyncRace`: Resync skips keys
/// with queued events.
#[test]
fn resync_skips_keys_that_already_have_queued_events_in_both_fifos() {
    let df = delta_fifo(known(&[obj("foo", 5)]));
    let rf = real_fifo(&[obj("foo", 5)]);
    df.update(obj("foo", 6)).unwrap();
    rf.update(obj("foo", 6)).unwrap();
    df.resync().unwrap();
    rf.resync().unwrap();
    assert_eq!(pop(&df), [d(Updated, &obj("foo", 6))]);
    assert_eq!(pop(&rf), [d(Updated, &obj("foo", 6))]);
    assert!(df.is_empty() && rf.is_empty());
}

/// `TestDeltaFIFO_Resync`, with the property the resync chapter needs: the Sync delta carries
/// the very `Arc` the known-objects store holds.
#[test]
fn resync_queues_the_known_objects_own_arc_in_both_fifos() {
    let held = obj("foo", 5);
    let f = delta_fifo(known(std::slice::from_ref(&held)));
    f.resync().unwrap();
    let deltas = pop(&f);
    assert_eq!(deltas, [d(Sync, &held)]);
    assert!(Arc::ptr_eq(deltas[0].object.object().unwrap(), &held));

    // `TestRealFIFO_Resync`: the same for RealFIFO in its non-atomic mode.
    let r = real_fifo(std::slice::from_ref(&held));
    r.resync().unwrap();
    let deltas = pop(&r);
    assert_eq!(deltas, [d(Sync, &held)]);
    assert!(Arc::ptr_eq(deltas[0].object.object().unwrap(), &held));
}

// ---- item 22 -------------------------------------------------------------------------------

/// `TestDeltaFIFO_HasSynced` and `TestRealFIFO_HasSynced`: the sync rules.
#[test]
fn has_synced_follows_the_initial_list_in_both_fifos() {
    let two = || vec![obj("a", 1), obj("b", 2)];
    let dup = || vec![obj("a", 1), obj("a", 2)];
    let case = |name, replaces, add, delta, real| SyncCase {
        name,
        replaces,
        add,
        delta,
        real,
    };
    let cases = vec![
        case("nothing", vec![], false, (0, false), (0, false)),
        case("an add", vec![], true, (0, true), (0, true)),
        case(
            "an empty replace",
            vec![vec![]],
            false,
            (0, true),
            (0, true),
        ),
        case(
            "a replace of two",
            vec![two()],
            false,
            (0, false),
            (0, false),
        ),
        case(
            "a replace of two, one pop",
            vec![two()],
            false,
            (1, false),
            (1, false),
        ),
        case(
            "a replace of two, two pops",
            vec![two()],
            false,
            (2, true),
            (2, true),
        ),
        // Duplicate keys: DeltaFIFO counts the key once; RealFIFO queued both deltas.
        case(
            "a replace with a duplicate key",
            vec![dup()],
            false,
            (1, true),
            (2, true),
        ),
    ];
    for c in cases {
        let df = delta_fifo(None);
        let rf = real_fifo(&[]);
        for r in &c.replaces {
            df.replace(r.clone(), "0").unwrap();
            rf.replace(r.clone(), "0").unwrap();
        }
        if c.add {
            df.add(obj("a", 1)).unwrap();
            rf.add(obj("a", 1)).unwrap();
        }
        (0..c.delta.0).for_each(|_| drop(pop(&df)));
        (0..c.real.0).for_each(|_| drop(pop(&rf)));
        assert_eq!(df.has_synced(), c.delta.1, "DeltaFIFO: {}", c.name);
        assert_eq!(rf.has_synced(), c.real.1, "RealFIFO: {}", c.name);
    }
    // The duplicate-key case really is one pop short of synced for RealFIFO.
    let rf = real_fifo(&[]);
    rf.replace(vec![obj("a", 1), obj("a", 2)], "0").unwrap();
    pop(&rf);
    assert!(!rf.has_synced());
}

/// `TestDeltaFIFO_HasSyncedCorrectOnDeletion`: tombstones from the initial Replace count as
/// initial-list items.
#[test]
fn delta_fifo_initial_tombstones_count_as_initial_list_items() {
    let f = delta_fifo(known(&foo_bar_baz()));
    f.replace(vec![obj("foo", 5)], "0").unwrap();
    let expected = vec![
        vec![d(Sync, &obj("foo", 5))],
        vec![tomb("bar", Some(&obj("bar", 6)))],
        vec![tomb("baz", Some(&obj("baz", 7)))],
    ];
    for e in expected {
        assert!(!f.has_synced());
        let (got, initial) = pop2(&f);
        assert_eq!(got.0, e);
        assert!(initial, "expected an initial-list item");
    }
    assert!(f.has_synced());
}

// ---- item 23 -------------------------------------------------------------------------------

/// `TestDeltaFIFO_KeyOf` / `TestRealFIFO_KeyOf`: keys from objects, tombstones, and a Deltas'
/// newest delta.
#[test]
fn key_of_reads_objects_tombstones_and_the_newest_delta() {
    let f = delta_fifo(None);
    let r = real_fifo(&[]);
    let a = DeltaObject::Object(obj("A", 0));
    let b = tomb("B", None).object;
    assert_eq!(f.key_of(&a).unwrap(), "A");
    assert_eq!(r.key_of(&a).unwrap(), "A");
    assert_eq!(f.key_of(&b).unwrap(), "B");
    assert_eq!(r.key_of(&b).unwrap(), "B");
    let c = Deltas(vec![d(Added, &obj("C", 0))]);
    let dd = Deltas(vec![tomb("D", None)]);
    assert_eq!(f.key_of_deltas(&c).unwrap(), "C");
    assert_eq!(f.key_of_deltas(&dd).unwrap(), "D");
    let err = f.key_of_deltas(&Deltas(vec![])).unwrap_err();
    assert!(err.to_string().contains("0 length Deltas object"), "{err}");
}

// ---- item 24 -------------------------------------------------------------------------------

async fn every_waiting_pop_returns_closed(q: impl Fifo<ConfigMap> + Clone + 'static) {
    let pops: Vec<_> = (0..10)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move { q.pop(|_, _| Ok::<(), ()>(())).await })
        })
        .collect();
    tokio::task::yield_now().await; // let every Pop start waiting (upstream: runtime.Gosched)
    q.close();
    for p in pops {
        let r = tokio::time::timeout(Duration::from_millis(500), p)
            .await
            .expect("Pop hung after Close: Close did not wake every waiter?")
            .unwrap();
        assert_eq!(r.unwrap_err(), PopError::Closed);
    }
}

/// `TestDeltaFIFO_PopShouldUnblockWhenClosed`.
#[tokio::test(start_paused = true)]
async fn delta_fifo_close_unblocks_every_waiting_pop() {
    every_waiting_pop_returns_closed(delta_fifo(known(&[obj("foo", 5)]))).await;
}

/// `TestRealFIFO_PopShouldUnblockWhenClosed`.
#[tokio::test(start_paused = true)]
async fn real_fifo_close_unblocks_every_waiting_pop() {
    every_waiting_pop_returns_closed(real_fifo(&[obj("foo", 5)])).await;
}

// ---- item 25 -------------------------------------------------------------------------------

/// `TestRealFIFO_HasSyncedCorrectOnDeletion`: RealFIFO queues Replace's deletions *before* the
/// Replaced items.
#[test]
fn real_fifo_queues_replace_deletions_before_the_replaced_items() {
    let f = real_fifo(&foo_bar_baz());
    f.replace(vec![obj("foo", 5)], "0").unwrap();
    let expected = vec![
        tomb("bar", Some(&obj("bar", 6))),
        tomb("baz", Some(&obj("baz", 7))),
        d(Replaced, &obj("foo", 5)),
    ];
    for e in expected {
        assert!(!f.has_synced());
        let (got, initial) = pop2(&f);
        assert_eq!(got.0, [e]);
        assert!(initial, "expected an initial-list item");
    }
    assert!(f.has_synced());
}

// ---- item 26 -------------------------------------------------------------------------------

fn batched_fifo(
    known: &[Obj],
    batch_size: usize,
    key_function: Option<KeyFunc<ConfigMap>>,
) -> RealFifo<ConfigMap> {
    RealFifo::new(RealFifoOptions {
        known_objects: Some(Arc::new(Literal(known.to_vec()))),
        batch_size,
        key_function,
        ..RealFifoOptions::default()
    })
    .unwrap()
}

/// Pops batches until the FIFO is empty: each batch, and whether it was initial-list.
fn drain_batches(f: &RealFifo<ConfigMap>) -> Vec<(Vec<Delta<ConfigMap>>, bool)> {
    let mut out = Vec::new();
    loop {
        let initial = std::cell::Cell::new(false);
        let got = f.try_pop_batch(
            |_, i| {
                initial.set(i);
                Ok::<(), ()>(())
            },
            |_, i| {
                initial.set(i);
                Ok(())
            },
        );
        match got {
            None => return out,
            Some(b) => out.push((b.unwrap(), initial.get())),
        }
    }
}

/// `TestRealFIFO_PopMultipleDeltaInBatch`: batches split at the initial-list boundary, at a
/// duplicate key and at the batch size.
#[test]
fn real_fifo_batches_split_at_the_initial_list_a_repeated_key_and_the_batch_size() {
    const UNLIMITED: usize = 999_999;
    let [o1, o2, o3, o4] = ["foo1", "foo2", "foo3", "foo4"].map(|n| obj(n, 5));
    let r = |o: &Obj| d(Replaced, o);
    let u = |o: &Obj| d(Updated, o);
    // (name, initial list, updates after it, batch size, expected batches)
    type BatchCase = (&'static str, Vec<Obj>, Vec<Obj>, usize, Batches);
    let cases: Vec<BatchCase> = vec![
        (
            "non-split: pop unique items should work",
            vec![o1.clone(), o2.clone(), o3.clone()],
            vec![],
            UNLIMITED,
            vec![vec![r(&o1), r(&o2), r(&o3)]],
        ),
        (
            "split due to initial list",
            vec![o1.clone(), o2.clone()],
            vec![o3.clone(), o4.clone()],
            2,
            vec![vec![r(&o1), r(&o2)], vec![u(&o3), u(&o4)]],
        ),
        (
            "split due to non-unique#1",
            vec![o1.clone()],
            vec![o1.clone(), o1.clone()],
            UNLIMITED,
            vec![vec![r(&o1)], vec![u(&o1)], vec![u(&o1)]],
        ),
        (
            "split due to non-unique#2",
            vec![o1.clone(), o2.clone()],
            vec![o2.clone(), o3.clone()],
            UNLIMITED,
            vec![vec![r(&o1), r(&o2)], vec![u(&o2), u(&o3)]],
        ),
        (
            "split due to non-unique#3",
            vec![o1.clone(), o2.clone(), o3.clone()],
            vec![o2.clone()],
            UNLIMITED,
            vec![vec![r(&o1), r(&o2), r(&o3)], vec![u(&o2)]],
        ),
        (
            "split due to batch size#1",
            vec![o1.clone(), o2.clone(), o3.clone()],
            vec![],
            2,
            vec![vec![r(&o1), r(&o2)], vec![r(&o3)]],
        ),
        (
            "split due to batch size#2",
            vec![],
            vec![o1.clone(), o2.clone(), o3.clone()],
            2,
            vec![vec![u(&o1), u(&o2)], vec![u(&o3)]],
        ),
        (
            "split due to batch size#3",
            vec![o1.clone(), o2.clone(), o3.clone()],
            vec![o4.clone()],
            2,
            vec![vec![r(&o1), r(&o2)], vec![r(&o3)], vec![u(&o4)]],
        ),
    ];
    for (name, initial, updates, batch_size, expected) in cases {
        let f = batched_fifo(&initial, batch_size, None);
        f.replace(initial.clone(), "123").unwrap();
        for o in updates {
            f.update(o).unwrap();
        }
        let got = drain_batches(&f);
        let batches: Vec<_> = got.iter().map(|(b, _)| b.clone()).collect();
        assert_eq!(batches, expected, "{name}");
        let initial_items: Vec<Obj> = got
            .iter()
            .filter(|(_, i)| *i)
            .flat_map(|(b, _)| b.iter().map(|d| d.object.object().unwrap().clone()))
            .collect();
        assert_eq!(initial_items, initial, "{name}: initial-list items");
    }
}

/// `TestRealFIFO_PopBrokenItemsInBatch`: a delta whose key cannot be made is included and
/// closes its batch. Upstream appends the broken items past its key function; here the key
/// function starts failing for foo3/foo4 only after they are queued.
#[test]
fn real_fifo_a_key_error_closes_the_batch_after_the_broken_delta() {
    let [ok1, ok2, bad3, bad4] = ["foo1", "foo2", "foo3", "foo4"].map(|n| obj(n, 5));
    let a = |o: &Obj| d(Added, o);
    let cases: Vec<(&str, Vec<Obj>, Batches)> = vec![
        (
            "1st item is broken",
            vec![bad3.clone()],
            vec![vec![a(&bad3)]],
        ),
        (
            "nth item is broken",
            vec![ok1.clone(), ok2.clone(), bad3.clone()],
            vec![vec![a(&ok1), a(&ok2), a(&bad3)]],
        ),
        (
            "multiple nth items are broken",
            vec![ok1.clone(), ok2.clone(), bad3.clone(), bad4.clone()],
            vec![vec![a(&ok1), a(&ok2), a(&bad3)], vec![a(&bad4)]],
        ),
        (
            "mixed 1st and nth items are broken",
            vec![bad3.clone(), ok1.clone(), bad4.clone()],
            vec![vec![a(&bad3)], vec![a(&ok1), a(&bad4)]],
        ),
    ];
    for (name, incoming, expected) in cases {
        let broken = Arc::new(AtomicBool::new(false));
        let flag = broken.clone();
        let key_fn: KeyFunc<ConfigMap> = Arc::new(move |o: &ConfigMap| {
            let name = meta_namespace_key(o);
            if flag.load(Ordering::SeqCst) && (name == "foo3" || name == "foo4") {
                return Err(KeyError {
                    object: name,
                    reason: "test key func error".into(),
                });
            }
            Ok(name)
        });
        let f = batched_fifo(&[], 999_999, Some(key_fn));
        for o in incoming {
            f.add(o).unwrap();
        }
        broken.store(true, Ordering::SeqCst);
        let batches: Vec<_> = drain_batches(&f).into_iter().map(|(b, _)| b).collect();
        assert_eq!(batches, expected, "{name}");
    }
}

// ---- item 27 -------------------------------------------------------------------------------

fn atomic_fifo() -> RealFifo<ConfigMap> {
    RealFifo::new(RealFifoOptions {
        atomic_events: true,
        emit_delta_type_bookmark: true,
        ..RealFifoOptions::default()
    })
    .unwrap()
}

fn replaced_all(rv: &str, objects: &[Obj]) -> Delta<ConfigMap> {
    Delta {
        delta_type: ReplacedAll,
        object: DeltaObject::ReplacedAll(ReplacedAllInfo {
            resource_version: rv.into(),
            objects: objects.to_vec(),
        }),
    }
}

fn pop_all(f: &RealFifo<ConfigMap>) -> Vec<Delta<ConfigMap>> {
    (0..f.len()).flat_map(|_| pop(f)).collect()
}

/// `TestRealFIFO_ReplaceAtomic`: exactly one ReplacedAll per Replace, in order, bookmarks kept.
#[test]
fn atomic_real_fifo_queues_one_replaced_all_per_replace_in_order() {
    let o = obj("foo", 2);
    let f = atomic_fifo();
    f.replace(vec![], "123").unwrap();
    assert_eq!(pop_all(&f), [replaced_all("123", &[])]);

    let f = atomic_fifo();
    f.add(o.clone()).unwrap();
    f.replace(vec![], "123").unwrap();
    assert_eq!(pop_all(&f), [d(Added, &o), replaced_all("123", &[])]);

    let f = atomic_fifo();
    f.add(o.clone()).unwrap();
    f.replace(vec![o.clone()], "10").unwrap();
    f.replace(vec![o.clone()], "20").unwrap();
    f.replace(vec![], "56").unwrap();
    assert_eq!(
        pop_all(&f),
        [
            d(Added, &o),
            replaced_all("10", std::slice::from_ref(&o)),
            replaced_all("20", std::slice::from_ref(&o)),
            replaced_all("56", &[]),
        ]
    );

    let f = atomic_fifo();
    Fifo::bookmark(&f, "123").unwrap();
    f.replace(vec![], "1234").unwrap();
    let got = pop_all(&f);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].delta_type, Bookmark);
    assert_eq!(got[1], replaced_all("1234", &[]));
    assert!(f.is_empty());
}

/// `TestRealFIFO_ResyncAtomic`: exactly one SyncAll per Resync, after what was queued.
#[test]
fn atomic_real_fifo_queues_one_sync_all_per_resync() {
    let f = atomic_fifo();
    f.resync().unwrap();
    assert_eq!(
        pop_all(&f).iter().map(|d| d.delta_type).collect::<Vec<_>>(),
        [SyncAll]
    );
    let f = atomic_fifo();
    f.add(obj("foo", 2)).unwrap();
    f.resync().unwrap();
    let got = pop_all(&f);
    assert_eq!(got[0], d(Added, &obj("foo", 2)));
    assert_eq!(got[1].delta_type, SyncAll);
    assert_eq!(got.len(), 2);
}

// ---- the ghost (the chapter's claim; upstream `TestDeltaFIFO_enqueueingNoLister`) -----------

/// `TestDeltaFIFO_enqueueingNoLister` / `_enqueueingWithLister`: DeltaFIFO drops a Delete for
/// an object neither queued nor known, and queues one for a known object.
#[test]
fn delta_fifo_drops_the_ghost_delete_and_real_fifo_queues_it() {
    let f = delta_fifo(None);
    f.add(obj("foo", 10)).unwrap();
    f.update(obj("bar", 15)).unwrap();
    f.add(obj("qux", 17)).unwrap();
    f.delete(obj("qux", 18)).unwrap();
    f.delete(obj("baz", 20)).unwrap(); // baz does not exist: nothing is queued
    assert_eq!([pop_val(&f), pop_val(&f), pop_val(&f)], [10, 15, 18]);
    assert!(f.is_empty());

    let f = delta_fifo(known(&foo_bar_baz()));
    f.delete(obj("baz", 20)).unwrap(); // baz is known: the deletion is queued
    assert_eq!(pop_val(&f), 20);

    let r = real_fifo(&[]);
    r.delete(obj("baz", 20)).unwrap();
    assert_eq!(pop(&r), [d(Deleted, &obj("baz", 20))]);
}
