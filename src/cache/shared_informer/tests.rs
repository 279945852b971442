//! The informer against a scripted source, in paused time, with each FIFO the gates can
//! select.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;

use super::*;
use crate::cache::reflector::tests::cm;
use crate::cache::{ListPage, Scripted, ScriptedListerWatcher, ScriptedWatch, WatchEvent};

/// Records what a handler saw, as lines; `same` marks an update whose old and new are one Arc.
pub(crate) fn recorder() -> (HandlerFuncs<ConfigMap>, Arc<Mutex<Vec<String>>>) {
    let log = Arc::new(Mutex::new(vec![]));
    let (a, u, d) = (log.clone(), log.clone(), log.clone());
    let name = |o: &ConfigMap| o.metadata.name.clone().unwrap_or_default();
    let h = HandlerFuncs::new()
        .on_add(move |o, init| a.lock().push(format!("add {} initial={init}", name(&o))))
        .on_update(move |old, new| {
            let same = if Arc::ptr_eq(&old, &new) { " same" } else { "" };
            u.lock().push(format!("update {}{same}", name(&new)))
        })
        .on_delete(move |o| {
            let t = if o.is_tombstone() { " tombstone" } else { "" };
            d.lock().push(format!(
                "delete {}{t}",
                o.object().map(|o| name(o)).unwrap_or_default()
            ))
        });
    (h, log)
}

pub(crate) fn options(minor: u32, resync: Duration) -> InformerOptions {
    InformerOptions {
        gates: FeatureGates::at_minor(minor).unwrap(),
        ..InformerOptions::new(resync)
    }
}

/// Runs `informer` for `for_` of virtual time.
pub(crate) async fn run_for<L: ListerWatcher<ConfigMap>>(
    informer: &SharedIndexInformer<ConfigMap, L>,
    for_: Duration,
) {
    informer.run(tokio::time::sleep(for_)).await;
    // Let the listener tasks drain their buffers.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_resync_replays_the_cache_as_same_arc_updates_without_contacting_the_source() {
    for minor in [32, 36] {
        let lw = ScriptedListerWatcher::new().without_watch_list();
        lw.push_list(Ok(ListPage::new("10", vec![cm("a", "5")])));
        let informer =
            SharedIndexInformer::new(lw.clone(), options(minor, Duration::from_secs(60)));
        let (h, log) = recorder();
        let reg = informer.add_event_handler(h).unwrap();
        run_for(&informer, Duration::from_secs(185)).await;
        assert_eq!(
            *log.lock(),
            [
                "add a initial=true",
                "update a same",
                "update a same",
                "update a same"
            ],
            "at 1.{minor}"
        );
        assert_eq!(lw.list_calls().len(), 1, "a resync never lists");
        assert_eq!(lw.watch_calls().len(), 1, "a resync never watches");
        assert!(reg.has_synced() && informer.has_synced());
    }
}

#[tokio::test(start_paused = true)]
async fn a_handler_reads_a_cache_at_least_as_new_as_its_event() {
    for minor in [32, 36] {
        let lw = ScriptedListerWatcher::new().without_watch_list();
        lw.push_list(Ok(ListPage::new("10", vec![cm("a", "5")])));
        lw.push_watch(ScriptedWatch::Stream(vec![
            Scripted::Event(WatchEvent::Modified(cm("a", "11"))),
            Scripted::Event(WatchEvent::Added(cm("b", "12"))),
            Scripted::Event(WatchEvent::Deleted(cm("a", "13"))),
            Scripted::Hang,
        ]));
        let informer = Arc::new(SharedIndexInformer::new(
            lw.clone(),
            options(minor, Duration::ZERO),
        ));
        let seen = Arc::new(Mutex::new(vec![]));
        let (inf, s) = (informer.clone(), seen.clone());
        // Handlers run on their own task, so by the time one runs the cache may be *newer*
        // than its event (here: already deleted), never older.
        let h = HandlerFuncs::new().on_update(move |_, new: Arc<ConfigMap>| {
            let cached = inf.indexer().get(&new).unwrap();
            let rv = |o: &ConfigMap| o.metadata.resource_version.clone().unwrap();
            s.lock().push(cached.map_or("gone".into(), |c| rv(&c)));
        });
        informer.add_event_handler(h).unwrap();
        run_for(&informer, Duration::from_secs(1)).await;
        assert_eq!(*seen.lock(), ["gone"], "at 1.{minor}");
        assert_eq!(informer.indexer().list_keys(), ["ns/b"]);
    }
}

#[tokio::test(start_paused = true)]
async fn a_relist_that_drops_an_object_delivers_a_tombstone() {
    for minor in [32, 36] {
        let lw = ScriptedListerWatcher::new().without_watch_list();
        lw.push_list(Ok(ListPage::new("10", vec![cm("a", "5"), cm("b", "6")])));
        lw.push_list(Ok(ListPage::new("20", vec![cm("b", "6")])));
        lw.push_watch(ScriptedWatch::Stream(vec![Scripted::Event(
            WatchEvent::Error(crate::cache::LwError::Expired("gone".into())),
        )]));
        let informer = SharedIndexInformer::new(lw.clone(), options(minor, Duration::ZERO));
        let (h, log) = recorder();
        informer.add_event_handler(h).unwrap();
        run_for(&informer, Duration::from_secs(5)).await;
        let log = log.lock();
        assert!(
            log.contains(&"delete a tombstone".to_string()),
            "at 1.{minor}: {log:?}"
        );
        // With resync off every listener is "syncing": the unchanged b is delivered again.
        assert!(
            log.contains(&"update b".to_string()),
            "at 1.{minor}: {log:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_handler_added_after_start_gets_the_cache_replayed_as_initial_adds() {
    let lw = ScriptedListerWatcher::new().without_watch_list();
    lw.push_list(Ok(ListPage::new("10", vec![cm("a", "5"), cm("b", "6")])));
    let informer = Arc::new(SharedIndexInformer::new(
        lw.clone(),
        options(36, Duration::ZERO),
    ));
    let inf = informer.clone();
    let late = async move {
        tokio::time::timeout(Duration::from_secs(5), inf.wait_synced())
            .await
            .expect("informer never synced: initial list not popped?");
        let (h, log) = recorder();
        let reg = inf.add_event_handler(h).unwrap();
        tokio::time::timeout(Duration::from_secs(5), reg.wait_synced())
            .await
            .expect("late handler never synced: replay not delivered?");
        log
    };
    let (log, ()) = tokio::join!(
        late,
        informer.run(tokio::time::sleep(Duration::from_secs(10)))
    );
    assert_eq!(*log.lock(), ["add a initial=true", "add b initial=true"]);
}

#[tokio::test(start_paused = true)]
async fn a_stopped_informer_refuses_new_handlers() {
    let lw = ScriptedListerWatcher::<ConfigMap>::new().without_watch_list();
    lw.push_list(Ok(ListPage::new("1", vec![])));
    let informer = SharedIndexInformer::new(lw, options(36, Duration::ZERO));
    informer
        .run(tokio::time::sleep(Duration::from_secs(1)))
        .await;
    assert_eq!(
        informer.add_event_handler(HandlerFuncs::new()).err(),
        Some(InformerError::Stopped)
    );
}

/// Steps the informer by hand, one Pop at a time, letting the handlers' tasks run between
/// Pops. Queues `a` and `b` at rv 1, then updates to both at rv 2 *before* any processing,
/// and returns the handler's log plus, for each update of `a`, the rv of `b` the cache held
/// when `a`'s handler ran.
///
/// Pops until the FIFO is empty, letting the handler tasks run after each Pop; the number of
/// Pops.
async fn step_until_drained<L: ListerWatcher<ConfigMap>>(
    informer: &SharedIndexInformer<ConfigMap, L>,
    fifo: &InformerFifo<ConfigMap>,
    minor: u32,
) -> usize {
    let mut pops = 0;
    while let Some(r) = informer.try_process_next(fifo) {
        r.unwrap_or_else(|e| panic!("at 1.{minor}: processing failed: {e}"));
        pops += 1;
        assert!(pops < 100, "at 1.{minor}: the FIFO never drains");
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }
    pops
}

/// Technique: stepping with `try_process_next` instead of `run` fixes where the handler
/// tasks get to run (between Pops), so what a handler reads is deterministic, not a race.
async fn step_two_updates(minor: u32) -> (Vec<String>, Vec<String>) {
    let lw = ScriptedListerWatcher::<ConfigMap>::new().without_watch_list();
    let informer = Arc::new(SharedIndexInformer::new(lw, options(minor, Duration::ZERO)));
    let (h, log) = recorder();
    informer.add_event_handler(h).unwrap();
    let seen = Arc::new(Mutex::new(vec![]));
    let (inf, s) = (informer.clone(), seen.clone());
    let probe = HandlerFuncs::new().on_update(move |_, new: Arc<ConfigMap>| {
        if new.metadata.name.as_deref() == Some("a") {
            let b = inf.indexer().get_by_key("ns/b").expect("b is cached");
            s.lock().push(b.metadata.resource_version.clone().unwrap());
        }
    });
    informer.add_event_handler(probe).unwrap();
    informer.processor.start_listeners();
    let fifo = informer.fifo_choice().build("cm", informer.indexer());
    let arc = |name, rv| Arc::new(cm(name, rv));
    fifo.replace(vec![arc("a", "1"), arc("b", "1")], "1")
        .unwrap();
    fifo.update(arc("a", "2")).unwrap();
    fifo.update(arc("b", "2")).unwrap();
    step_until_drained(&informer, &fifo, minor).await;
    let log = log.lock().clone();
    let seen = seen.lock().clone();
    (log, seen)
}

#[tokio::test(start_paused = true)]
async fn in_batch_mode_the_first_handler_already_sees_the_second_objects_new_state() {
    let choice = select_fifo(&FeatureGates::at_minor(36).unwrap());
    assert!(choice.batch_process, "1.36 batches by default");
    let (_, b_seen_by_a) = step_two_updates(36).await;
    assert_eq!(
        b_seen_by_a,
        ["2"],
        "a's update and b's update are one batch: both written before any handler runs"
    );
}

#[tokio::test(start_paused = true)]
async fn in_single_mode_the_first_handler_still_sees_the_second_objects_old_state() {
    let choice = select_fifo(&FeatureGates::at_minor(34).unwrap());
    assert!(
        !choice.batch_process,
        "1.34 predates InOrderInformersBatchProcess"
    );
    let (_, b_seen_by_a) = step_two_updates(34).await;
    assert_eq!(
        b_seen_by_a,
        ["1"],
        "one delta per Pop: b is written only after a's handler ran"
    );
}

#[tokio::test(start_paused = true)]
async fn batch_and_single_mode_deliver_the_same_events_in_the_same_order() {
    let expected = [
        "add a initial=true",
        "add b initial=true",
        "update a",
        "update b",
    ];
    for minor in [34, 36] {
        let (log, _) = step_two_updates(minor).await;
        assert_eq!(log, expected, "stepped, at 1.{minor}");
    }

    // The same through `run`, fed by a watch: updates, an add, a delete, a repeated key.
    let mut logs = vec![];
    for minor in [34, 36] {
        let lw = ScriptedListerWatcher::new().without_watch_list();
        lw.push_list(Ok(ListPage::new("10", vec![cm("a", "5"), cm("b", "6")])));
        lw.push_watch(ScriptedWatch::Stream(vec![
            Scripted::Event(WatchEvent::Modified(cm("a", "11"))),
            Scripted::Event(WatchEvent::Modified(cm("b", "12"))),
            Scripted::Event(WatchEvent::Added(cm("c", "13"))),
            Scripted::Event(WatchEvent::Deleted(cm("a", "14"))),
            Scripted::Event(WatchEvent::Modified(cm("b", "15"))),
            Scripted::Hang,
        ]));
        let informer = SharedIndexInformer::new(lw, options(minor, Duration::ZERO));
        let (h, log) = recorder();
        let reg = informer.add_event_handler(h).unwrap();
        tokio::time::timeout(
            Duration::from_secs(30),
            run_for(&informer, Duration::from_secs(5)),
        )
        .await
        .unwrap_or_else(|_| panic!("at 1.{minor}: run never returned (process loop stuck?)"));
        assert!(reg.has_synced(), "at 1.{minor}: never synced");
        assert_eq!(
            informer.indexer().list_keys(),
            ["ns/b", "ns/c"],
            "at 1.{minor}"
        );
        logs.push(log.lock().clone());
    }
    assert_eq!(
        logs[0],
        [
            "add a initial=true",
            "add b initial=true",
            "update a",
            "update b",
            "add c initial=false",
            "delete a",
            "update b"
        ]
    );
    assert_eq!(logs[0], logs[1], "1.34 (single) and 1.36 (batched) differ");
}

/// client-go v0.38's `processDeltasInBatch` (1.38): a batch may hold one object several times;
/// each delta's old object is the previous delta of that key in the batch, and a key deleted
/// earlier in the batch comes back as an add. At 1.37 the FIFO ends the batch at the repeat,
/// and the same events come out one Pop each.
#[tokio::test(start_paused = true)]
async fn at_1_38_a_batch_repeating_a_key_takes_each_old_object_from_the_batch() {
    for (minor, want_pops) in [(37, 4), (38, 1)] {
        let lw = ScriptedListerWatcher::<ConfigMap>::new().without_watch_list();
        let informer = Arc::new(SharedIndexInformer::new(lw, options(minor, Duration::ZERO)));
        let olds = Arc::new(Mutex::new(vec![]));
        let o = olds.clone();
        let (h, log) = recorder();
        informer.add_event_handler(h).unwrap();
        let probe = HandlerFuncs::new().on_update(move |old: Arc<ConfigMap>, _| {
            o.lock()
                .push(old.metadata.resource_version.clone().unwrap());
        });
        informer.add_event_handler(probe).unwrap();
        informer.processor.start_listeners();
        let fifo = informer.fifo_choice().build("cm", informer.indexer());
        let arc = |name, rv| Arc::new(cm(name, rv));
        fifo.replace(vec![arc("a", "1")], "1").unwrap();
        assert!(
            informer.try_process_next(&fifo).is_some(),
            "the initial list"
        );
        fifo.update(arc("a", "2")).unwrap();
        fifo.update(arc("a", "3")).unwrap();
        fifo.delete(arc("a", "3")).unwrap();
        fifo.add(arc("a", "4")).unwrap();
        let pops = step_until_drained(&informer, &fifo, minor).await;
        assert_eq!(pops, want_pops, "at 1.{minor}: Pops after the initial list");
        assert_eq!(*olds.lock(), ["1", "2"], "at 1.{minor}: old objects");
        let log = log.lock().clone();
        assert_eq!(
            log[log.len() - 4..],
            ["update a", "update a", "delete a", "add a initial=false"],
            "at 1.{minor}"
        );
        let a = informer.indexer().get_by_key("ns/a").expect("a is cached");
        assert_eq!(a.metadata.resource_version.as_deref(), Some("4"));
    }
}
