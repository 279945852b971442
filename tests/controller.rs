//! The controller's public behaviour, against the embedded API server in-process, under
//! tokio's paused clock: every timing below is virtual, so each test is exact and instant.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use controlloop::controller::{
    Context, Controller, ControllerError, LOW_PRIORITY, QueueKind, ReconcileError,
    ReconcileResult as Res, Release, Request, RequestQueue, SyncWait,
    priorityqueue::{InMemoryPriorityMetrics, Provider},
};
use k8s_openapi::api::core::v1::ConfigMap;

use controlloop::testing::{Fixture, Recorder, set_value, value_of};

mod controller_support;
use controller_support::{runtime, until, within};

/// The reconciler never sees the event: it reads the object from the cache, so a reconcile
/// that starts after three writes acts on the third value, once.
#[test]
fn the_reconciler_reads_the_current_object_from_the_cache() {
    runtime().block_on(async {
        let mut f = Fixture::in_process(&["a"]).await;
        let recorder = Recorder::new();
        let rec = recorder.clone();
        let c = Controller::builder("t")
            .build(&f.informer, move |req: Request, ctx: Context<ConfigMap>| {
                let rec = rec.clone();
                async move {
                    rec.act(
                        ctx.get(&req).and_then(|cm| value_of(&cm)),
                        Duration::from_millis(50),
                    )
                    .await;
                    Ok(Res::done())
                }
            })
            .unwrap();
        f.run_informer();
        let run = tokio::spawn({
            let c = c.clone();
            async move { c.run(futures::future::pending()).await }
        });
        until("initial reconcile never ran", || {
            recorder.observations().len() == 1
        })
        .await;
        let api = f.api.clone();
        set_value(&api, "a", 1).await.unwrap(); // starts a reconcile of 1
        tokio::time::sleep(Duration::from_millis(10)).await;
        for v in 2..=3 {
            set_value(&api, "a", v).await.unwrap(); // both arrive while it runs
        }
        until("the dirty key was never re-queued by done()?", || {
            recorder.observations().len() == 3
        })
        .await;
        let values: Vec<_> = recorder.observations().iter().map(|o| o.value).collect();
        assert_eq!(values, vec![Some(0), Some(1), Some(3)]);
        assert_eq!(recorder.max_in_flight(), 1);
        c.shutdown();
        within("run never returned after shutdown", run)
            .await
            .unwrap()
            .unwrap();
        f.stop().await.unwrap();
    });
}

/// A panic inside the reconciler is recovered as `ReconcileError::Panic` (controller-runtime's
/// default), counted, and retried with backoff; the key is released in between.
#[test]
fn a_panicking_reconciler_is_recovered_and_retried() {
    runtime().block_on(async {
        let mut f = Fixture::in_process(&["a"]).await;
        let calls = Arc::new(AtomicU64::new(0));
        let n = calls.clone();
        let c = Controller::builder("t")
            .build(
                &f.informer,
                move |_req: Request, _ctx: Context<ConfigMap>| {
                    let first = n.fetch_add(1, Ordering::SeqCst) == 0;
                    async move {
                        if first {
                            panic!("boom");
                        }
                        Ok(Res::done())
                    }
                },
            )
            .unwrap();
        f.run_informer();
        let run = tokio::spawn({
            let c = c.clone();
            async move { c.run(futures::future::pending()).await }
        });
        until("the panicked key was never retried", || {
            calls.load(Ordering::SeqCst) == 2
        })
        .await;
        tokio::time::sleep(Duration::from_millis(1)).await;
        let m = c.metrics();
        assert_eq!((m.panics, m.errors, m.success), (1, 1, 1));
        assert_eq!(c.queue().num_requeues(&Request::new("default", "a")), 0);
        c.shutdown();
        within("run never returned", run).await.unwrap().unwrap();
        f.stop().await.unwrap();
    });
}

/// Whether a stopped controller's queue holds no key: the rate-limiting queue's drain waits
/// for held keys (and would hang on one); the priority queue's does not wait, so its count of
/// locked keys is read instead.
async fn assert_no_key_is_held(queue: &RequestQueue, hang: &str) {
    match queue {
        RequestQueue::RateLimiting(q) => within(hang, q.shut_down_with_drain()).await,
        RequestQueue::Priority(q) => assert_eq!(q.locked_len(), 0, "{hang}"),
    }
}

/// With `recover_panic(false)` the panic reaches `run`, as upstream re-panics; the key was
/// still released on the way (the claim's drop runs while unwinding). Both releases' queues.
#[test]
fn an_unrecovered_panic_reaches_run_and_still_releases_the_key() {
    for release in Release::ALL {
        an_unrecovered_panic_on(release);
    }
}

fn an_unrecovered_panic_on(release: Release) {
    runtime().block_on(async {
        let mut f = Fixture::in_process(&["a"]).await;
        let c = Controller::builder("t")
            .release(release)
            .recover_panic(false)
            .build(
                &f.informer,
                |_req: Request, _ctx: Context<ConfigMap>| async {
                    if true {
                        panic!("unrecovered");
                    }
                    Ok(Res::done())
                },
            )
            .unwrap();
        f.run_informer();
        let run = tokio::spawn({
            let c = c.clone();
            async move { c.run(futures::future::pending()).await }
        });
        let joined = within("run never returned after the panic", run).await;
        assert!(joined.unwrap_err().is_panic());
        assert_no_key_is_held(
            c.queue(),
            "the key is still held: was the claim not dropped while unwinding?",
        )
        .await;
        f.stop().await.unwrap();
    });
}

/// Shutdown under v0.24 (the default, whose priority queue hands out nothing once shut down)
/// stops taking work but lets the reconcile in flight finish; v0.22 drains the queue instead
/// (`tests/faults_controller.rs`).
#[test]
fn shutdown_waits_for_the_reconcile_in_flight_and_takes_no_more() {
    runtime().block_on(async {
        let mut f = Fixture::in_process(&["a", "b"]).await;
        let recorder = Recorder::new();
        let rec = recorder.clone();
        let c = Controller::builder("t")
            .release(Release::V0_24)
            .build(
                &f.informer,
                move |_req: Request, _ctx: Context<ConfigMap>| {
                    let rec = rec.clone();
                    async move {
                        rec.act(None, Duration::from_millis(100)).await;
                        Ok(Res::done())
                    }
                },
            )
            .unwrap();
        f.run_informer();
        let started = tokio::time::Instant::now();
        let run = tokio::spawn({
            let c = c.clone();
            async move { c.run(futures::future::pending()).await }
        });
        until("no reconcile started", || recorder.in_flight() == 1).await;
        c.shutdown();
        within("run never returned", run).await.unwrap().unwrap();
        assert_eq!(
            recorder.observations().len(),
            1,
            "the second key was not taken"
        );
        assert!(
            started.elapsed() >= Duration::from_millis(100),
            "returned before the reconcile ended"
        );
        f.stop().await.unwrap();
    });
}

/// Several workers run several keys at once, never more than `max_concurrent_reconciles`, and
/// never one key twice (the queue's processing set).
#[test]
fn workers_run_distinct_keys_in_parallel_up_to_the_limit() {
    runtime().block_on(async {
        let names: Vec<String> = (0..12).map(|i| format!("o{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut f = Fixture::in_process(&refs).await;
        let in_flight = Arc::new(AtomicU64::new(0));
        let peak = Arc::new(AtomicU64::new(0));
        let (i, p) = (in_flight.clone(), peak.clone());
        let c = Controller::builder("t")
            .max_concurrent_reconciles(4)
            .build(
                &f.informer,
                move |_req: Request, _ctx: Context<ConfigMap>| {
                    let (i, p) = (i.clone(), p.clone());
                    async move {
                        p.fetch_max(i.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        i.fetch_sub(1, Ordering::SeqCst);
                        Ok(Res::done())
                    }
                },
            )
            .unwrap();
        f.run_informer();
        let started = tokio::time::Instant::now();
        let run = tokio::spawn({
            let c = c.clone();
            async move { c.run(futures::future::pending()).await }
        });
        until("not every key was reconciled", || c.metrics().success == 12).await;
        assert_eq!(peak.load(Ordering::SeqCst), 4);
        // The workers start at the cache-sync wait's second look, 100 ms in (client-go's
        // `WaitForCacheSync` polls every 100 ms, and its first look came before the informer's
        // list); then 12 keys x 10 ms on 4 workers: 30 ms (plus the 1 ms polling of `until`);
        // serial: 120.
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(130) && took <= Duration::from_millis(131),
            "{took:?}"
        );
        c.shutdown();
        within("run never returned", run).await.unwrap().unwrap();
        f.stop().await.unwrap();
    });
}

/// How long after `run` the first reconcile starts, for each way of waiting for the cache:
/// controller-runtime's poll waits for its next look, 100 ms after the first, which came before
/// the informer's list; client-go v0.37's `WaitFor` ends at the sync, at 0 ms here (the list
/// takes no virtual time). Each of the two gates of v0.24+ is waited for in turn.
#[test]
fn a_done_checker_wait_starts_the_workers_at_the_sync_not_at_the_next_poll() {
    let first_reconcile = |wait: SyncWait, release: Release| {
        runtime().block_on(async {
            let mut f = Fixture::in_process(&["a"]).await;
            let started = tokio::time::Instant::now();
            let (tx, rx) = tokio::sync::oneshot::channel();
            let tx = std::sync::Mutex::new(Some(tx));
            let c = Controller::builder("t")
                .release(release)
                .sync_wait(wait)
                .build(
                    &f.informer,
                    move |_req: Request, _ctx: Context<ConfigMap>| {
                        if let Some(tx) = tx.lock().unwrap().take() {
                            let _ = tx.send(started.elapsed());
                        }
                        async { Ok(Res::done()) }
                    },
                )
                .unwrap();
            f.run_informer();
            let run = tokio::spawn({
                let c = c.clone();
                async move { c.run(futures::future::pending()).await }
            });
            let at = within("no reconcile ever started", rx).await.unwrap();
            c.shutdown();
            within("run never returned", run).await.unwrap().unwrap();
            f.stop().await.unwrap();
            at
        })
    };
    for release in [Release::V0_22, Release::V0_24, Release::V0_25] {
        assert_eq!(
            first_reconcile(SyncWait::default(), release),
            Duration::from_millis(100),
            "{release:?}"
        );
        assert_eq!(
            first_reconcile(SyncWait::DoneChecker, release),
            Duration::ZERO,
            "{release:?}"
        );
    }
}

/// A controller follows controller-runtime v0.25 unless told otherwise.
#[test]
fn the_default_release_is_v0_25_and_the_builder_sets_another() {
    runtime().block_on(async {
        let f = Fixture::in_process(&[]).await;
        let noop = |_req: Request, _ctx: Context<ConfigMap>| async { Ok(Res::done()) };
        let c = Controller::builder("t").build(&f.informer, noop).unwrap();
        assert_eq!(c.release(), Release::V0_25);
        for release in [Release::V0_22, Release::V0_24] {
            let c = Controller::builder("u")
                .release(release)
                .build(&f.informer, noop)
                .unwrap();
            assert_eq!(c.release(), release);
        }
        f.stop().await.unwrap();
    });
}

/// controller-runtime v0.24.1 refuses a second `Start` but keeps the controller's mutex
/// locked, so a third call blocks for ever; v0.25.3 unlocks first
/// (`pkg/internal/controller/controller.go`, `Start`). The port keeps no lock: every later
/// call is refused at once, on every release (the v0.25.3 behaviour; `Release` item 3 of the
/// v0.24 to v0.25 list).
#[test]
fn a_controller_started_twice_refuses_again_and_again_on_every_release() {
    runtime().block_on(async {
        let mut f = Fixture::in_process(&["a"]).await;
        f.run_informer();
        for release in Release::ALL {
            let noop = |_req: Request, _ctx: Context<ConfigMap>| async { Ok(Res::done()) };
            let c = Controller::builder("t")
                .release(release)
                .build(&f.informer, noop)
                .unwrap();
            let first = tokio::spawn({
                let c = c.clone();
                async move { c.run(futures::future::pending()).await }
            });
            tokio::task::yield_now().await; // the first run has started
            for _ in 0..2 {
                let again = within(
                    "a second or third start hung (v0.24.1's lock left held)",
                    c.run(futures::future::pending()),
                )
                .await;
                assert_eq!(again, Err(ControllerError::AlreadyStarted), "{release}");
            }
            first.abort();
        }
        f.stop().await.unwrap();
    });
}

/// Upstream's start-up errors: a nameless controller, a second start, a cache that never syncs.
#[test]
fn start_up_errors_are_upstreams() {
    runtime().block_on(async {
        let f = Fixture::in_process(&[]).await;
        let noop = |_req: Request, _ctx: Context<ConfigMap>| async { Ok(Res::done()) };
        let err = Controller::builder("").build(&f.informer, noop).err();
        assert_eq!(err, Some(ControllerError::NoName));
        let c = Controller::builder("t")
            .cache_sync_timeout(Duration::from_secs(5))
            .build(&f.informer, noop)
            .unwrap();
        // The informer never runs, so the cache never syncs.
        let r = c.run(futures::future::pending()).await;
        assert_eq!(
            r,
            Err(ControllerError::CacheSyncTimeout(Duration::from_secs(5)))
        );
        assert_eq!(
            c.run(futures::future::pending()).await,
            Err(ControllerError::AlreadyStarted)
        );
        f.stop().await.unwrap();
    });
}

/// A terminal error is neither retried nor forgotten.
#[test]
fn a_terminal_error_is_not_retried() {
    runtime().block_on(async {
        let mut f = Fixture::in_process(&["a"]).await;
        let c = Controller::builder("t")
            .build(
                &f.informer,
                |_req: Request, _ctx: Context<ConfigMap>| async {
                    Err(ReconcileError::terminal("bad spec"))
                },
            )
            .unwrap();
        f.run_informer();
        let run = tokio::spawn({
            let c = c.clone();
            async move { c.run(futures::future::pending()).await }
        });
        until("the reconcile never ran", || c.metrics().errors == 1).await;
        tokio::time::sleep(Duration::from_secs(3600)).await;
        let m = c.metrics();
        assert_eq!((m.errors, m.terminal_errors), (1, 1), "retried: {m:?}");
        c.shutdown();
        within("run never returned", run).await.unwrap().unwrap();
        f.stop().await.unwrap();
    });
}

/// Release item 1 and 2: each release builds its own default queue, and the default limiter
/// follows the queue, not the release; `use_priority_queue` picks either under either. The
/// limiter shows in 101 fresh rate-limited adds: the bucket (burst 100) holds the 101st back
/// 100 ms, the exponential alone lets every one go after 5 ms.
#[test]
fn each_release_builds_its_own_default_queue() {
    runtime().block_on(async {
        let f = Fixture::in_process(&[]).await;
        let noop = |_req: Request, _ctx: Context<ConfigMap>| async { Ok(Res::done()) };
        let cases = [
            (Release::V0_24, None, QueueKind::Priority, 0),
            (Release::V0_22, None, QueueKind::RateLimiting, 1),
            (Release::V0_24, Some(false), QueueKind::RateLimiting, 1),
            (Release::V0_22, Some(true), QueueKind::Priority, 0),
        ];
        for (release, pq, kind, held_back) in cases {
            let mut b = Controller::builder("t").release(release);
            if let Some(on) = pq {
                b = b.use_priority_queue(on);
            }
            let c = b.build(&f.informer, noop).unwrap();
            assert_eq!(c.queue().kind(), kind, "{release} {pq:?}");
            for i in 0..101 {
                c.queue()
                    .add_rate_limited(Request::new("default", format!("o{i}")));
            }
            tokio::time::sleep(Duration::from_millis(6)).await;
            assert_eq!(c.queue().waiting_len(), held_back, "{release} {pq:?}");
            assert_eq!(c.queue().len(), 101 - held_back, "{release} {pq:?}");
            c.queue().shut_down();
        }
        f.stop().await.unwrap();
    });
}

/// Release item 15: the controller's queue reports its metrics under the controller's name,
/// each queue its own. The default (v0.24) priority queue records depth per priority, here
/// the initial list's two keys at `LOW_PRIORITY`; v0.22's rate-limiting queue records one
/// depth, whatever the priority. No worker runs, so both keys stay queued.
#[test]
fn each_release_reports_its_own_queue_metrics() {
    for release in Release::ALL {
        runtime().block_on(async {
            let mut f = Fixture::in_process(&["a", "b"]).await;
            let metrics = InMemoryPriorityMetrics::new();
            let c = Controller::builder("queue-metrics")
                .release(release)
                .with_queue_metrics(Provider::WithPriority(metrics.clone()))
                .build(
                    &f.informer,
                    |_req: Request, _ctx: Context<ConfigMap>| async { Ok(Res::done()) },
                )
                .unwrap();
            f.run_informer();
            until("the initial list never reached the queue", || {
                c.queue().len() == 2
            })
            .await;
            let m = metrics
                .snapshot("queue-metrics")
                .expect("no metrics recorded");
            let per_priority: Vec<(i64, i64)> = m.depth.into_iter().collect();
            match release {
                Release::V0_24 | Release::V0_25 => {
                    assert_eq!(per_priority, [(LOW_PRIORITY, 2)]);
                    assert_eq!(m.base.depth, 0, "the plain gauge is not used");
                }
                Release::V0_22 => {
                    assert!(per_priority.is_empty(), "{per_priority:?}");
                    assert_eq!(m.base.depth, 2);
                }
            }
            assert_eq!(m.base.adds, 2, "{release}");
            f.stop().await.unwrap();
        });
    }
}

/// Release item 3: what a stop does to queued keys follows the queue. Three keys, one
/// worker, a stop during the first reconcile: the rate-limiting queue hands out the other two
/// (drained, contexts cancelled), the priority queue none, under either release.
#[test]
fn the_drain_at_shutdown_follows_the_queue_not_the_release() {
    let cases = [
        (Release::V0_22, None, 3),
        (Release::V0_24, None, 1),
        (Release::V0_22, Some(true), 1),
        (Release::V0_24, Some(false), 3),
    ];
    for (release, pq, reconciled) in cases {
        runtime().block_on(async {
            let mut f = Fixture::in_process(&["a", "b", "c"]).await;
            let recorder = Recorder::new();
            let rec = recorder.clone();
            let mut b = Controller::builder("t").release(release);
            if let Some(on) = pq {
                b = b.use_priority_queue(on);
            }
            let c = b
                .build(
                    &f.informer,
                    move |_req: Request, _ctx: Context<ConfigMap>| {
                        let rec = rec.clone();
                        async move {
                            rec.act(None, Duration::from_millis(10)).await;
                            Ok(Res::done())
                        }
                    },
                )
                .unwrap();
            f.run_informer();
            let run = tokio::spawn({
                let c = c.clone();
                async move { c.run(futures::future::pending()).await }
            });
            until("no reconcile started", || recorder.in_flight() == 1).await;
            c.shutdown();
            within("run never returned", run).await.unwrap().unwrap();
            let n = recorder.observations().len();
            assert_eq!(n, reconciled, "{release} {pq:?}");
            f.stop().await.unwrap();
        });
    }
}
