//! The informer against a scripted source, in paused time, with each FIFO the gates can
//! select.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;

use super::*;
use crate::cache::lister_watcher::{
    WatchEvent,
    scripted::{Scripted, ScriptedListerWatcher, ScriptedWatch, page},
};
use crate::cache::reflector::tests::cm;

/// Records what a handler saw, as lines; `same` marks an update whose old and new are one Arc.
fn recorder() -> (HandlerFuncs<ConfigMap>, Arc<Mutex<Vec<String>>>) {
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

fn options(minor: u32, resync: Duration) -> InformerOptions {
    InformerOptions {
        gates: FeatureGates::at_minor(minor).unwrap(),
        ..InformerOptions::new(resync)
    }
}

/// Runs `informer` for `for_` of virtual time.
async fn run_for<L: ListerWatcher<ConfigMap>>(
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
        lw.push_list(Ok(page("10", vec![cm("a", "5")])));
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
        lw.push_list(Ok(page("10", vec![cm("a", "5")])));
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
        lw.push_list(Ok(page("10", vec![cm("a", "5"), cm("b", "6")])));
        lw.push_list(Ok(page("20", vec![cm("b", "6")])));
        lw.push_watch(ScriptedWatch::Stream(vec![Scripted::Event(
            WatchEvent::Error(crate::cache::lister_watcher::LwError::Expired(
                "gone".into(),
            )),
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
    lw.push_list(Ok(page("10", vec![cm("a", "5"), cm("b", "6")])));
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
    lw.push_list(Ok(page("1", vec![])));
    let informer = SharedIndexInformer::new(lw, options(36, Duration::ZERO));
    informer
        .run(tokio::time::sleep(Duration::from_secs(1)))
        .await;
    assert_eq!(
        informer.add_event_handler(HandlerFuncs::new()).err(),
        Some(InformerError::Stopped)
    );
}

#[tokio::test(start_paused = true)]
async fn the_broken_variants_break_what_they_claim_to() {
    // DeepCopyOnResync: the resync's old and new are no longer one Arc.
    let lw = ScriptedListerWatcher::new().without_watch_list();
    lw.push_list(Ok(page("10", vec![cm("a", "5")])));
    let mut o = options(36, Duration::from_secs(60));
    o.variant = Variant::DeepCopyOnResync;
    let informer = SharedIndexInformer::new(lw.clone(), o);
    let (h, log) = recorder();
    informer.add_event_handler(h).unwrap();
    run_for(&informer, Duration::from_secs(61)).await;
    assert_eq!(*log.lock(), ["add a initial=true", "update a"]);

    // RelistOnResync: the resync lists again.
    let lw = ScriptedListerWatcher::new().without_watch_list();
    lw.on_list(|_| Ok(page("10", vec![cm("a", "5")])));
    let mut o = options(36, Duration::from_secs(60));
    o.variant = Variant::RelistOnResync;
    let informer = SharedIndexInformer::new(lw.clone(), o);
    informer.add_event_handler(HandlerFuncs::new()).unwrap();
    run_for(&informer, Duration::from_secs(185)).await;
    assert_eq!(lw.list_calls().len(), 4);
}
