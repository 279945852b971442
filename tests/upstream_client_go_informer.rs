//! Ports of client-go's reflector and shared-informer tests (`tools/cache/reflector_test.go`,
//! `shared_informer_test.go`, `controller_test.go`), conformance items 28–33 of the
//! upstream-semantics reference. Each case names the upstream test it follows.
//!
//! Like upstream's, these drive a scripted list-watch source (client-go's `testLW`), so each
//! case controls exactly what every list and watch returns. Time is tokio's paused clock: the
//! backoffs and resync ticks are exact and take no real time. The same machinery over HTTP
//! against the embedded API server is exercised by `tests/faults_informer.rs`.

use std::{sync::Arc, time::Duration};

use controlloop::cache::{
    HandlerFuncs, HandlerPanic, InformerOptions, ListPage, LwError, RecordingStore, Reflector,
    ReflectorOptions, ReflectorPhase, ReflectorStep, Scripted, ScriptedListerWatcher,
    ScriptedWatch, SharedIndexInformer, WatchEvent,
};
use controlloop::features::{Feature, FeatureGates};
use controlloop::klog;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ObjectMeta;
use parking_lot::Mutex;

const S: fn(u64) -> Duration = Duration::from_secs;

fn pod(name: &str, rv: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            resource_version: Some(rv.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

type R = Reflector<Pod, ScriptedListerWatcher<Pod>, RecordingStore<Pod>>;

fn reflector(lw: &ScriptedListerWatcher<Pod>, options: ReflectorOptions) -> R {
    Reflector::new(lw.clone(), RecordingStore::new(), options)
}

/// Steps until the reflector has tried to open a watch (or has run `max` steps).
async fn step_until_watching(r: &mut R, max: usize) {
    for _ in 0..max {
        let step = tokio::time::timeout(S(3600), r.step())
            .await
            .expect("reflector step hung: a scripted watch left open?");
        if matches!(
            step,
            ReflectorStep::WatchStarted { .. } | ReflectorStep::WatchStartFailed(_)
        ) {
            return;
        }
    }
    panic!("reflector did not reach a watch in {max} steps");
}

/// Records the non-resync notifications a handler receives, as lines.
fn recorder() -> (HandlerFuncs<Pod>, Arc<Mutex<Vec<String>>>) {
    let log = Arc::new(Mutex::new(vec![]));
    let (a, u, d) = (log.clone(), log.clone(), log.clone());
    let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
    let h = HandlerFuncs::new()
        .on_add(move |p, _| a.lock().push(format!("add {}", name(&p))))
        .on_update(move |old, new| {
            let kind = if Arc::ptr_eq(&old, &new) {
                "resync"
            } else {
                "update"
            };
            u.lock().push(format!("{kind} {}", name(&new)))
        })
        .on_delete(move |p| {
            d.lock().push(format!(
                "delete {}",
                p.object().map(|p| name(p)).unwrap_or_default()
            ))
        });
    (h, log)
}

async fn drain() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

// ---- item 31: the RVs a reflector lists at ----

/// `TestReflectorResyncWithResourceVersion`: the relist uses the last RV seen.
#[tokio::test(start_paused = true)]
async fn reflector_relists_at_the_last_synced_resource_version() {
    let lw = ScriptedListerWatcher::new();
    lw.push_list(Ok(ListPage::new("10", vec![pod("a", "1")])));
    lw.push_list(Ok(ListPage::new("10", vec![pod("a", "1")])));
    lw.push_watch(ScriptedWatch::Fail(LwError::Other("closed".into())));
    let mut r = reflector(&lw, ReflectorOptions::default());
    step_until_watching(&mut r, 10).await;
    step_until_watching(&mut r, 10).await;
    assert_eq!(lw.list_rvs(), ["0", "10"]);
}

/// `TestReflectorFullListIfExpired`: a continuation page that expires makes the pager fall
/// back to one full list at the original RV.
#[tokio::test(start_paused = true)]
async fn reflector_full_lists_when_a_continuation_page_expires() {
    let lw = ScriptedListerWatcher::new();
    lw.on_list(|o| {
        let pods: Vec<Pod> = (0..8)
            .map(|i| pod(&format!("pod-{i}"), &i.to_string()))
            .collect();
        match (
            o.resource_version.as_str(),
            o.continue_token.as_deref(),
            o.limit,
        ) {
            ("0", None, Some(4)) => Ok(ListPage::new("10", pods[0..4].to_vec())),
            ("10", None, Some(4)) => Ok(ListPage {
                items: pods[0..4].to_vec(),
                resource_version: "11".into(),
                continue_token: Some("C1".into()),
            }),
            ("", Some("C1"), Some(4)) => Err(LwError::Expired("too old".into())),
            ("10", None, None) => Ok(ListPage::new("11", pods)),
            other => Err(LwError::Other(format!("unexpected list options {other:?}"))),
        }
    });
    lw.push_watch(ScriptedWatch::Fail(LwError::Other("stop".into())));
    let options = ReflectorOptions {
        page_size: Some(4),
        ..Default::default()
    };
    let mut r = reflector(&lw, options);
    step_until_watching(&mut r, 10).await;
    assert_eq!(r.store().keys().len(), 4);
    step_until_watching(&mut r, 10).await;
    assert_eq!(r.store().keys().len(), 8);
    assert_eq!(lw.list_rvs(), ["0", "10", "", "10"]);
}

/// `TestReflectorFullListIfTooLarge`: "too large resource version" makes the next list ask
/// for `""`, at once.
#[tokio::test(start_paused = true)]
async fn reflector_lists_at_the_empty_rv_after_too_large_resource_version() {
    let lw = ScriptedListerWatcher::new();
    let version = Arc::new(Mutex::new(30));
    let v = version.clone();
    lw.on_list(move |o| match o.resource_version.as_str() {
        "0" => Ok(ListPage::new("20", vec![])),
        "20" | "30" | "40" => Err(LwError::TooLargeResourceVersion(
            "Too large resource version".into(),
        )),
        "" => {
            let mut v = v.lock();
            let rv = v.to_string();
            *v += 10;
            Ok(ListPage::new(&rv, vec![]))
        }
        other => Err(LwError::Other(format!("unexpected RV {other}"))),
    });
    for _ in 0..4 {
        lw.push_watch(ScriptedWatch::Fail(LwError::Other("stop".into())));
    }
    let mut r = reflector(&lw, ReflectorOptions::default());
    for _ in 0..4 {
        step_until_watching(&mut r, 10).await;
    }
    assert_eq!(lw.list_rvs(), ["0", "20", "", "30", "", "40", ""]);
}

// ---- item 32: 429 and 500 ----

/// `TestBackoffOnTooManyRequests` / `TestNoRelistOnTooManyRequests`: four 429s on watch, then
/// a watch that works: 5 watch calls, exactly 1 list, each retry after a backoff step.
#[tokio::test(start_paused = true)]
async fn too_many_requests_on_watch_backs_off_and_never_relists() {
    let lw = ScriptedListerWatcher::new();
    lw.push_list(Ok(ListPage::new("1", vec![])));
    for _ in 0..4 {
        lw.push_watch(ScriptedWatch::Fail(LwError::TooManyRequests(
            "slow down".into(),
        )));
    }
    let mut r = reflector(&lw, ReflectorOptions::default());
    let mut backoffs = 0;
    loop {
        match r.step().await {
            ReflectorStep::WatchStarted { .. } => break,
            ReflectorStep::BackedOff(_) => backoffs += 1,
            _ => {}
        }
    }
    assert_eq!(lw.watch_calls().len(), 5);
    assert_eq!(lw.list_calls().len(), 1);
    assert_eq!(backoffs, 4);
}

/// `TestRetryInternalError`, `MaxInternalErrorRetryDuration` 0: a watch ending in a 500 is
/// not retried in place; the reflector relists.
#[tokio::test(start_paused = true)]
async fn an_internal_error_relists_when_in_place_retries_are_off() {
    let lw = ScriptedListerWatcher::new();
    lw.on_list(|_| Ok(ListPage::new("1", vec![])));
    lw.push_watch(ScriptedWatch::Stream(vec![
        Scripted::After(S(5)),
        Scripted::Event(WatchEvent::Error(LwError::Internal("boom".into()))),
    ]));
    let mut r = reflector(&lw, ReflectorOptions::default());
    step_until_watching(&mut r, 5).await;
    assert!(matches!(
        r.step().await,
        ReflectorStep::WatchEnded(LwError::Internal(_))
    ));
    assert_eq!(r.phase(), ReflectorPhase::BackoffThenList);
}

/// `TestRetryInternalError`, 30 s: internal-error watches are re-opened in place (no list)
/// until 30 s have passed since the first one; then the reflector relists.
#[tokio::test(start_paused = true)]
async fn internal_errors_are_rewatched_in_place_for_the_retry_window() {
    let lw = ScriptedListerWatcher::new();
    lw.on_list(|_| Ok(ListPage::new("1", vec![])));
    for _ in 0..10 {
        lw.push_watch(ScriptedWatch::Stream(vec![
            Scripted::After(S(5)),
            Scripted::Event(WatchEvent::Error(LwError::Internal("boom".into()))),
        ]));
    }
    let options = ReflectorOptions {
        max_internal_error_retry_duration: S(30),
        ..Default::default()
    };
    let mut r = reflector(&lw, options);
    let t0 = tokio::time::Instant::now();
    loop {
        r.step().await;
        if r.phase() == ReflectorPhase::BackoffThenList {
            break;
        }
    }
    // Errors at 5, 10, …, 35 s: the first at 5 s opens the window, the one at 40 s is the
    // first more than 30 s later.
    assert_eq!(t0.elapsed(), S(40));
    assert_eq!(lw.list_calls().len(), 1);
    assert_eq!(lw.watch_calls().len(), 8);
}

// ---- item 33 ----

/// `TestWatchTimeout`: the timeout falls in `[min, 2 min]`; a minimum under 5 min is ignored;
/// 30 min is honoured.
#[tokio::test(start_paused = true)]
async fn watch_timeouts_honour_only_minimums_above_five_minutes() {
    for (min, expected) in [(None, 300), (Some(S(1)), 300), (Some(S(1800)), 1800)] {
        let lw = ScriptedListerWatcher::new();
        lw.push_list(Ok(ListPage::new("10", vec![])));
        let mut options = ReflectorOptions::default();
        if let Some(m) = min {
            options.min_watch_timeout = m;
        }
        let mut r = reflector(&lw, options);
        step_until_watching(&mut r, 3).await;
        let t = lw.watch_calls()[0].timeout_seconds;
        assert!(
            (expected..=2 * expected).contains(&t),
            "min {min:?}: timeout {t} not in [{expected}, {}]",
            2 * expected
        );
    }
}

// ---- item 28 ----

/// `TestResyncCheckPeriod`: handlers added before start lower the check period; each keeps
/// its own effective period.
#[test]
fn handlers_added_before_start_lower_the_resync_check_period() {
    let lw = ScriptedListerWatcher::<Pod>::new();
    let informer = SharedIndexInformer::new(lw, InformerOptions::new(S(12 * 3600)));
    informer
        .add_event_handler_with_resync(HandlerFuncs::new(), Some(S(0)))
        .unwrap();
    assert_eq!(informer.resync_check_period(), S(12 * 3600));
    informer
        .add_event_handler_with_resync(HandlerFuncs::new(), Some(S(60)))
        .unwrap();
    assert_eq!(informer.resync_check_period(), S(60));
    informer
        .add_event_handler_with_resync(HandlerFuncs::new(), Some(S(55)))
        .unwrap();
    assert_eq!(informer.resync_check_period(), S(55));
    informer
        .add_event_handler_with_resync(HandlerFuncs::new(), Some(S(5)))
        .unwrap();
    assert_eq!(informer.resync_check_period(), S(5));
    assert_eq!(
        informer.handler_resync_periods(),
        [S(0), S(60), S(55), S(5)]
    );
}

/// `TestListenerResyncPeriods`: only listeners due for resync receive resync updates.
#[tokio::test(start_paused = true)]
async fn only_listeners_due_for_resync_receive_resync_updates() {
    let lw = ScriptedListerWatcher::new().without_watch_list();
    lw.push_list(Ok(ListPage::new(
        "1",
        vec![pod("pod1", "1"), pod("pod2", "2")],
    )));
    let informer = SharedIndexInformer::new(lw, InformerOptions::new(S(1)));
    let (h1, every_second) = recorder();
    let (h2, every_two) = recorder();
    let (h3, never) = recorder();
    informer
        .add_event_handler_with_resync(h1, Some(S(1)))
        .unwrap();
    informer
        .add_event_handler_with_resync(h2, Some(S(2)))
        .unwrap();
    informer
        .add_event_handler_with_resync(h3, Some(S(0)))
        .unwrap();
    informer
        .run(tokio::time::sleep(Duration::from_millis(2500)))
        .await;
    drain().await;
    let resyncs = |log: &Arc<Mutex<Vec<String>>>| {
        log.lock()
            .iter()
            .filter(|l| l.starts_with("resync"))
            .count()
    };
    assert_eq!(resyncs(&every_second), 4, "2 ticks × 2 pods");
    assert_eq!(resyncs(&every_two), 2, "1 tick × 2 pods");
    assert_eq!(resyncs(&never), 0);
    assert_eq!(never.lock().len(), 2, "but it saw both adds");
}

// ---- item 29 ----

/// `TestSharedInformerWatchDisruption`: after a relist, a listener that is not due for resync
/// receives only the changed and the new objects; a due listener also gets the unchanged one.
#[tokio::test(start_paused = true)]
async fn after_a_relist_a_listener_not_due_for_resync_sees_only_changes() {
    for minor in [32, 36] {
        let lw = ScriptedListerWatcher::new().without_watch_list();
        lw.push_list(Ok(ListPage::new(
            "1",
            vec![pod("pod1", "1"), pod("pod2", "2")],
        )));
        lw.push_list(Ok(ListPage::new(
            "4",
            vec![pod("pod1", "1"), pod("pod2", "3"), pod("pod3", "4")],
        )));
        lw.push_watch(ScriptedWatch::Stream(vec![
            Scripted::After(Duration::from_millis(2500)),
            Scripted::Event(WatchEvent::Error(LwError::Other("connection reset".into()))),
        ]));
        let mut options = InformerOptions::new(S(1));
        options.gates = FeatureGates::at_minor(minor).unwrap();
        let informer = SharedIndexInformer::new(lw, options);
        let (h1, no_resync) = recorder();
        let (h2, resync) = recorder();
        informer
            .add_event_handler_with_resync(h1, Some(S(0)))
            .unwrap();
        informer
            .add_event_handler_with_resync(h2, Some(S(1)))
            .unwrap();
        informer.run(tokio::time::sleep(S(10))).await;
        drain().await;
        let after_list = |log: &Arc<Mutex<Vec<String>>>| {
            log.lock()
                .iter()
                .skip(2) // the two initial adds
                .filter(|l| !l.starts_with("resync"))
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(
            after_list(&no_resync),
            ["update pod2", "add pod3"],
            "1.{minor}"
        );
        assert_eq!(
            after_list(&resync),
            ["update pod1", "update pod2", "add pod3"],
            "1.{minor}"
        );
    }
}

// ---- item 30 ----

/// `TestReplaceEvents`: atomic and non-atomic Replace give the same events and the same cache.
#[tokio::test(start_paused = true)]
async fn atomic_and_non_atomic_replace_give_the_same_events_and_cache() {
    let mut results = vec![];
    for atomic in [true, false] {
        let lw = ScriptedListerWatcher::new().without_watch_list();
        lw.push_list(Ok(ListPage::new(
            "1",
            vec![pod("a", "1"), pod("b", "2"), pod("c", "3")],
        )));
        lw.push_list(Ok(ListPage::new(
            "5",
            vec![pod("b", "2"), pod("c", "4"), pod("d", "5")],
        )));
        lw.push_watch(ScriptedWatch::Stream(vec![
            Scripted::After(S(2)),
            Scripted::Event(WatchEvent::Error(LwError::Expired("gone".into()))),
        ]));
        let mut options = InformerOptions::new(Duration::ZERO);
        options
            .gates
            .set_for_testing(Feature::ATOMIC_FIFO, atomic)
            .unwrap();
        let informer = SharedIndexInformer::new(lw, options);
        assert_eq!(informer.fifo_choice().atomic_events, atomic);
        let (h, log) = recorder();
        informer.add_event_handler(h).unwrap();
        informer.run(tokio::time::sleep(S(10))).await;
        drain().await;
        let keys = informer.indexer().list_keys();
        results.push((log.lock().clone(), keys));
    }
    assert_eq!(results[0], results[1]);
    assert_eq!(
        results[0].0[3..],
        ["delete a", "update b", "update c", "add d"]
    );
}

// ---- handler panics (`processorListener.run`, `utilruntime.HandleCrashWithLogger`) ----

fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
}

/// An informer over `pods` (one list, then a watch that stays open) with `policy`.
fn panicking_informer(
    pods: usize,
    policy: HandlerPanic,
) -> Arc<SharedIndexInformer<Pod, ScriptedListerWatcher<Pod>>> {
    let lw = ScriptedListerWatcher::new().without_watch_list();
    let items = (1..=pods).map(|i| pod(&format!("pod{i}"), "1")).collect();
    lw.push_list(Ok(ListPage::new("1", items)));
    Arc::new(SharedIndexInformer::new(
        lw,
        InformerOptions {
            handler_panic: policy,
            ..InformerOptions::new(S(1))
        },
    ))
}

/// A handler whose every add panics with "fake panic", recording when each call came.
fn panicking_handler() -> (HandlerFuncs<Pod>, Arc<Mutex<Vec<tokio::time::Instant>>>) {
    let calls = Arc::new(Mutex::new(vec![]));
    let c = calls.clone();
    let h = HandlerFuncs::new().on_add(move |_, _| {
        c.lock().push(tokio::time::Instant::now());
        panic!("fake panic");
    });
    (h, calls)
}

async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    tokio::time::timeout(S(60), async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what}"))
}

const OBSERVED: &str = r#"E] "Observed a panic" panic="fake panic""#;

/// `TestEventPanics` "simple" (`utilruntime.ReallyCrash = false`, here
/// `HandlerPanic::LogAndContinue`): the panic is logged as upstream's `logPanic` logs it, the
/// informer syncs, and the handler never does: the initial add it panicked on was never
/// delivered (upstream's comment on its own test: "the handler never syncs when the callback
/// panics").
#[test]
fn event_panics_are_logged_and_the_panicking_handler_never_syncs() {
    let ((), lines) = klog::capture(|| {
        paused_runtime().block_on(async {
            let informer = panicking_informer(1, HandlerPanic::LogAndContinue);
            let (h, calls) = panicking_handler();
            let reg = informer.add_event_handler(h).unwrap();
            let checks = async {
                tokio::time::timeout(S(60), informer.wait_synced())
                    .await
                    .expect("the informer never synced: the initial list was not popped?");
                until("the handler was never called", || calls.lock().len() == 1).await;
                tokio::time::sleep(S(30)).await;
                assert!(
                    !reg.has_synced(),
                    "a skipped initial add counted as delivered"
                );
                assert_eq!((reg.panics(), informer.handler_panics()), (1, 1));
                assert_eq!(reg.crash(), None, "LogAndContinue never crashes");
            };
            tokio::join!(informer.run(tokio::time::sleep(S(60))), checks);
        })
    });
    assert_eq!(
        lines.iter().filter(|l| *l == OBSERVED).count(),
        1,
        "{lines:#?}"
    );
}

/// `TestEventPanics` "many": five pods, two handlers that panic on every add. Each panic is
/// logged once per handler, and each handler waits one second after each panic before its next
/// notification, so the fifth call comes four seconds after the first (exactly, in paused time;
/// upstream checks at least).
#[test]
fn every_event_panic_is_logged_and_each_listener_sleeps_a_second_after_it() {
    let ((), lines) = klog::capture(|| {
        paused_runtime().block_on(async {
            let informer = panicking_informer(5, HandlerPanic::LogAndContinue);
            let (h1, calls1) = panicking_handler();
            let (h2, calls2) = panicking_handler();
            let (r1, r2) = (
                informer.add_event_handler(h1).unwrap(),
                informer.add_event_handler(h2).unwrap(),
            );
            informer.run(tokio::time::sleep(S(60))).await;
            for (calls, reg) in [(calls1, r1), (calls2, r2)] {
                let calls = calls.lock();
                assert_eq!((calls.len(), reg.panics()), (5, 5));
                assert_eq!(
                    calls[4] - calls[0],
                    S(4),
                    "processorListener's sleepAfterCrash"
                );
                assert!(!reg.has_synced());
            }
            assert_eq!(informer.handler_panics(), 10);
        })
    });
    assert_eq!(
        lines.iter().filter(|l| *l == OBSERVED).count(),
        10,
        "{lines:#?}"
    );
}

/// Upstream's default, `utilruntime.ReallyCrash = true` (apimachinery's `TestHandleCrash`:
/// `HandleCrash` re-panics): the panic is logged, then re-raised. The process would die; here
/// the informer stops, its `run` resumes the handler's own panic, no handler gets anything
/// more, and every registration reports the crash.
#[test]
fn a_handler_panic_crashes_the_informer_by_default() {
    let ((), lines) = klog::capture(|| {
        paused_runtime().block_on(async {
            assert_eq!(
                InformerOptions::new(S(1)).handler_panic,
                HandlerPanic::Crash
            );
            let informer = panicking_informer(3, HandlerPanic::default());
            let (h, calls) = panicking_handler();
            let (bystander, seen) = recorder();
            let reg = informer.add_event_handler(h).unwrap();
            let other = informer.add_event_handler(bystander).unwrap();
            let run = tokio::spawn({
                let informer = informer.clone();
                async move { informer.run(futures::future::pending()).await }
            });
            let crashed = tokio::time::timeout(S(60), other.crashed())
                .await
                .expect("the other registration never heard of the crash");
            assert_eq!(crashed, "fake panic");
            let joined = tokio::time::timeout(S(60), run)
                .await
                .expect("run never returned after the handler panicked");
            let payload = joined.expect_err("run returned normally").into_panic();
            assert_eq!(payload.downcast_ref::<&str>(), Some(&"fake panic"));
            tokio::time::sleep(S(60)).await;
            assert_eq!(
                calls.lock().len(),
                1,
                "the panicking handler got more after the crash"
            );
            assert!(seen.lock().len() <= 3);
            assert_eq!((reg.panics(), informer.handler_panics()), (1, 1));
            assert_eq!(informer.crash().as_deref(), Some("fake panic"));
            assert!(
                informer.add_event_handler(HandlerFuncs::new()).is_err(),
                "a crashed informer is stopped"
            );
        })
    });
    assert_eq!(
        lines.iter().filter(|l| *l == OBSERVED).count(),
        1,
        "{lines:#?}"
    );
}
