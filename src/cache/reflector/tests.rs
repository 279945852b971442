//! The reflector's transitions, one step at a time, against a scripted source and a
//! recording store. All in paused time: backoffs and timeouts take no real time and are exact.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;

use super::*;
use crate::cache::{ListPage, Scripted, ScriptedListerWatcher, ScriptedWatch};

/// A ConfigMap `ns/name` at resourceVersion `rv` (shared with the informer's tests).
pub(crate) fn cm(name: &str, rv: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            resource_version: Some(rv.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

type R = Reflector<ConfigMap, ScriptedListerWatcher<ConfigMap>, RecordingStore<ConfigMap>>;

fn reflector(lw: &ScriptedListerWatcher<ConfigMap>, options: ReflectorOptions) -> R {
    Reflector::new(lw.clone(), RecordingStore::new(), options)
}

async fn step(r: &mut R) -> ReflectorStep {
    tokio::time::timeout(Duration::from_secs(3600), r.step())
        .await
        .expect("step hung: a watch the script left open, or a timer never armed?")
}

fn ev(e: WatchEvent<ConfigMap>) -> Scripted<ConfigMap> {
    Scripted::Event(e)
}

#[tokio::test(start_paused = true)]
async fn the_first_list_asks_for_rv_0_and_the_watch_starts_at_the_lists_rv() {
    let lw = ScriptedListerWatcher::new();
    lw.push_list(Ok(ListPage::new("10", vec![cm("a", "5")])));
    let mut r = reflector(&lw, ReflectorOptions::default());
    assert_eq!(r.phase(), ReflectorPhase::List);
    assert!(matches!(
        step(&mut r).await,
        ReflectorStep::Listed { items: 1, .. }
    ));
    assert_eq!(r.phase(), ReflectorPhase::OpenWatch);
    assert_eq!(
        step(&mut r).await,
        ReflectorStep::WatchStarted {
            resource_version: "10".into()
        }
    );
    assert_eq!(lw.list_rvs(), ["0"]);
    assert_eq!(lw.watch_calls()[0].resource_version, "10");
    assert!(lw.watch_calls()[0].allow_bookmarks);
    assert_eq!(
        r.store().calls(),
        [StoreCall::Replace(vec!["ns/a".into()], "10".into())]
    );
}

#[tokio::test(start_paused = true)]
async fn a_normal_watch_close_rewatches_at_the_last_rv_without_relisting() {
    let lw = ScriptedListerWatcher::new();
    lw.push_list(Ok(ListPage::new("10", vec![])));
    lw.push_watch(ScriptedWatch::Stream(vec![
        Scripted::After(Duration::from_secs(300)),
        ev(WatchEvent::Modified(cm("a", "11"))),
    ]));
    let mut r = reflector(&lw, ReflectorOptions::default());
    step(&mut r).await; // list
    step(&mut r).await; // watch
    assert_eq!(step(&mut r).await, ReflectorStep::Event("modified"));
    assert_eq!(step(&mut r).await, ReflectorStep::WatchClosed);
    assert_eq!(r.phase(), ReflectorPhase::OpenWatch);
    step(&mut r).await;
    assert_eq!(lw.list_calls().len(), 1, "a watch timeout must not relist");
    assert_eq!(lw.watch_calls()[1].resource_version, "11");
}

#[tokio::test(start_paused = true)]
async fn a_410_mid_watch_backs_off_then_relists_at_the_last_rv() {
    let lw = ScriptedListerWatcher::new();
    lw.push_list(Ok(ListPage::new("10", vec![cm("a", "5")])));
    lw.push_list(Ok(ListPage::new("20", vec![cm("b", "15")])));
    lw.push_watch(ScriptedWatch::Stream(vec![
        ev(WatchEvent::Modified(cm("a", "12"))),
        ev(WatchEvent::Error(LwError::Expired("gone".into()))),
    ]));
    let mut r = reflector(&lw, ReflectorOptions::default());
    step(&mut r).await;
    step(&mut r).await;
    step(&mut r).await; // modified
    assert!(matches!(
        step(&mut r).await,
        ReflectorStep::WatchEnded(LwError::Expired(_))
    ));
    assert_eq!(r.phase(), ReflectorPhase::BackoffThenList);
    let t0 = tokio::time::Instant::now();
    let ReflectorStep::BackedOff(d) = step(&mut r).await else {
        panic!("expected a backoff step before the relist")
    };
    assert!(d >= Duration::from_millis(800) && d < Duration::from_millis(1600));
    assert_eq!(t0.elapsed(), d);
    assert!(matches!(step(&mut r).await, ReflectorStep::Listed { .. }));
    // The relist asks for the last RV seen, not "": a list at X means "not older than X".
    assert_eq!(lw.list_rvs(), ["0", "12"]);
    assert_eq!(r.store().keys(), ["ns/b"]);
}

#[tokio::test(start_paused = true)]
async fn a_429_when_opening_a_watch_backs_off_and_rewatches_without_relisting() {
    let lw = ScriptedListerWatcher::new();
    lw.push_list(Ok(ListPage::new("10", vec![])));
    lw.push_watch(ScriptedWatch::Fail(LwError::TooManyRequests("slow".into())));
    let mut r = reflector(&lw, ReflectorOptions::default());
    step(&mut r).await;
    assert!(matches!(
        step(&mut r).await,
        ReflectorStep::WatchStartFailed(_)
    ));
    assert_eq!(r.phase(), ReflectorPhase::BackoffThenWatch);
    assert!(matches!(step(&mut r).await, ReflectorStep::BackedOff(_)));
    assert!(matches!(
        step(&mut r).await,
        ReflectorStep::WatchStarted { .. }
    ));
    assert_eq!(lw.list_calls().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn another_watch_start_error_backs_off_and_relists() {
    let lw = ScriptedListerWatcher::new();
    lw.push_list(Ok(ListPage::new("10", vec![])));
    lw.push_list(Ok(ListPage::new("11", vec![])));
    lw.push_watch(ScriptedWatch::Fail(LwError::Other(
        "connection reset".into(),
    )));
    let mut r = reflector(&lw, ReflectorOptions::default());
    step(&mut r).await;
    step(&mut r).await;
    assert_eq!(r.phase(), ReflectorPhase::BackoffThenList);
    step(&mut r).await;
    step(&mut r).await;
    assert_eq!(lw.list_rvs(), ["0", "10"]);
}

#[tokio::test(start_paused = true)]
async fn a_list_that_fails_with_410_is_retried_at_once_at_the_empty_rv() {
    let lw = ScriptedListerWatcher::new();
    lw.push_list(Ok(ListPage::new("10", vec![])));
    lw.push_list(Err(LwError::Expired("compacted".into())));
    lw.push_list(Ok(ListPage::new("30", vec![])));
    lw.push_watch(ScriptedWatch::Fail(LwError::Other("drop".into())));
    let mut r = reflector(&lw, ReflectorOptions::default());
    step(&mut r).await; // list
    step(&mut r).await; // watch fails → backoff
    step(&mut r).await; // backoff
    let t = tokio::time::Instant::now();
    assert!(matches!(step(&mut r).await, ReflectorStep::Listed { .. }));
    assert_eq!(
        t.elapsed(),
        Duration::ZERO,
        "no backoff before the \"\" retry"
    );
    assert_eq!(lw.list_rvs(), ["0", "10", ""]);
    assert_eq!(r.last_sync_resource_version(), "30");
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_closes_at_once_with_no_events_is_an_error_and_relists() {
    let lw = ScriptedListerWatcher::new();
    lw.push_list(Ok(ListPage::new("10", vec![])));
    lw.push_watch(ScriptedWatch::Stream(vec![]));
    let mut r = reflector(&lw, ReflectorOptions::default());
    step(&mut r).await;
    step(&mut r).await;
    assert!(matches!(step(&mut r).await, ReflectorStep::WatchEnded(_)));
    assert_eq!(r.phase(), ReflectorPhase::BackoffThenList);
}

#[tokio::test(start_paused = true)]
async fn bookmarks_move_the_rv_and_reach_the_store() {
    let lw = ScriptedListerWatcher::new();
    lw.push_list(Ok(ListPage::new("10", vec![])));
    lw.push_watch(ScriptedWatch::Stream(vec![
        ev(WatchEvent::Added(cm("a", "11"))),
        ev(WatchEvent::Bookmark {
            resource_version: "40".into(),
            initial_events_end: false,
        }),
        Scripted::Hang,
    ]));
    let mut r = reflector(&lw, ReflectorOptions::default());
    for _ in 0..4 {
        step(&mut r).await;
    }
    assert_eq!(r.last_sync_resource_version(), "40");
    assert_eq!(
        r.store().calls()[1..],
        [
            StoreCall::Add("ns/a".into(), "11".into()),
            StoreCall::Bookmark("40".into())
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_at_rv_0_keeps_its_rv_until_a_non_added_event() {
    let lw = ScriptedListerWatcher::new();
    lw.push_list(Ok(ListPage::new("", vec![]))); // a source with no RVs
    lw.push_watch(ScriptedWatch::Stream(vec![
        ev(WatchEvent::Added(cm("b", "9"))),
        ev(WatchEvent::Added(cm("a", "7"))),
        ev(WatchEvent::Modified(cm("a", "12"))),
        Scripted::Hang,
    ]));
    let mut r = reflector(&lw, ReflectorOptions::default());
    step(&mut r).await;
    step(&mut r).await;
    step(&mut r).await;
    step(&mut r).await;
    assert_eq!(r.last_sync_resource_version(), "", "keeps I5");
    step(&mut r).await;
    assert_eq!(r.last_sync_resource_version(), "12");
}

#[tokio::test(start_paused = true)]
async fn the_streaming_list_replaces_once_and_keeps_its_watch_open() {
    let lw = ScriptedListerWatcher::new();
    lw.push_watch(ScriptedWatch::Stream(vec![
        ev(WatchEvent::Added(cm("a", "3"))),
        ev(WatchEvent::Added(cm("b", "4"))),
        ev(WatchEvent::Bookmark {
            resource_version: "9".into(),
            initial_events_end: true,
        }),
        ev(WatchEvent::Modified(cm("a", "10"))),
        Scripted::Hang,
    ]));
    let options = ReflectorOptions {
        use_watch_list: true,
        ..Default::default()
    };
    let mut r = reflector(&lw, options);
    assert_eq!(
        step(&mut r).await,
        ReflectorStep::Listed {
            resource_version: "9".into(),
            items: 2,
            streamed: true
        }
    );
    assert_eq!(r.phase(), ReflectorPhase::Watching);
    assert_eq!(step(&mut r).await, ReflectorStep::Event("modified"));
    assert!(lw.list_calls().is_empty());
    assert_eq!(lw.watch_calls().len(), 1);
    assert!(lw.watch_calls()[0].send_initial_events);
    assert_eq!(r.store().replaces(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_source_without_streaming_lists_gets_a_plain_list_whatever_the_gate() {
    let lw = ScriptedListerWatcher::new().without_watch_list();
    lw.push_list(Ok(ListPage::new("1", vec![])));
    let options = ReflectorOptions {
        use_watch_list: true,
        ..Default::default()
    };
    let mut r = reflector(&lw, options);
    assert!(matches!(
        step(&mut r).await,
        ReflectorStep::Listed {
            streamed: false,
            ..
        }
    ));
    assert!(lw.watch_calls().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_failed_streaming_list_falls_back_to_a_plain_list() {
    let lw = ScriptedListerWatcher::new();
    lw.push_watch(ScriptedWatch::Fail(LwError::Other("not supported".into())));
    lw.push_list(Ok(ListPage::new("5", vec![cm("a", "5")])));
    let options = ReflectorOptions {
        use_watch_list: true,
        ..Default::default()
    };
    let mut r = reflector(&lw, options);
    assert!(matches!(
        step(&mut r).await,
        ReflectorStep::Listed {
            streamed: false,
            items: 1,
            ..
        }
    ));
}

#[tokio::test(start_paused = true)]
async fn the_resync_timer_fires_each_period_while_watching_and_restarts_on_relist() {
    let lw = ScriptedListerWatcher::new();
    lw.push_list(Ok(ListPage::new("10", vec![])));
    lw.push_list(Ok(ListPage::new("11", vec![])));
    lw.push_watch(ScriptedWatch::Stream(vec![
        Scripted::After(Duration::from_secs(25)),
        ev(WatchEvent::Error(LwError::Expired("gone".into()))),
    ]));
    let options = ReflectorOptions {
        resync_period: Duration::from_secs(10),
        backoff: BackoffConfig {
            jitter: 0.0,
            ..Default::default()
        },
        ..Default::default()
    };
    let t0 = tokio::time::Instant::now();
    let mut r = reflector(&lw, options);
    step(&mut r).await; // list at t=0
    step(&mut r).await; // watch
    assert_eq!(
        step(&mut r).await,
        ReflectorStep::ResyncTick { resynced: true }
    );
    assert_eq!(t0.elapsed(), Duration::from_secs(10));
    step(&mut r).await; // second tick at 20 s
    assert!(matches!(step(&mut r).await, ReflectorStep::WatchEnded(_))); // 25 s
    assert_eq!(
        step(&mut r).await,
        ReflectorStep::BackedOff(Duration::from_millis(800))
    );
    step(&mut r).await; // relist at 25.8 s restarts the timer
    step(&mut r).await; // watch
    assert_eq!(
        step(&mut r).await,
        ReflectorStep::ResyncTick { resynced: true }
    );
    assert_eq!(t0.elapsed(), Duration::from_millis(35_800));
    let resyncs = r
        .store()
        .calls()
        .iter()
        .filter(|c| **c == StoreCall::Resync)
        .count();
    assert_eq!(resyncs, 3);
}

#[tokio::test(start_paused = true)]
async fn should_resync_false_skips_the_store_resync() {
    let lw = ScriptedListerWatcher::new();
    lw.push_list(Ok(ListPage::new("10", vec![])));
    let options = ReflectorOptions {
        resync_period: Duration::from_secs(10),
        should_resync: Some(Arc::new(|| false)),
        ..Default::default()
    };
    let mut r = reflector(&lw, options);
    step(&mut r).await;
    step(&mut r).await;
    assert_eq!(
        step(&mut r).await,
        ReflectorStep::ResyncTick { resynced: false }
    );
    assert!(!r.store().calls().contains(&StoreCall::Resync));
}

#[tokio::test(start_paused = true)]
async fn watch_timeouts_are_random_between_five_and_ten_minutes_and_seeded() {
    let timeouts = |seed| async move {
        let lw = ScriptedListerWatcher::new();
        lw.push_list(Ok(ListPage::new("1", vec![])));
        for _ in 0..5 {
            lw.push_watch(ScriptedWatch::Stream(vec![
                Scripted::After(Duration::from_secs(2)),
                ev(WatchEvent::Modified(cm("a", "2"))),
            ]));
        }
        let mut r = reflector(
            &lw,
            ReflectorOptions {
                seed,
                ..Default::default()
            },
        );
        for _ in 0..16 {
            step(&mut r).await;
        }
        lw.watch_calls()
            .iter()
            .map(|w| w.timeout_seconds)
            .collect::<Vec<_>>()
    };
    let a = timeouts(1).await;
    assert!(a.len() >= 5);
    assert!(a.iter().all(|t| (300..600).contains(t)), "{a:?}");
    assert_eq!(
        a,
        timeouts(1).await,
        "the same seed gives the same timeouts"
    );
    assert_ne!(a, timeouts(2).await);
}
