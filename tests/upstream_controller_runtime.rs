//! Ports of controller-runtime's controller tests (`pkg/internal/controller/
//! controller_test.go`, v0.22.5 and v0.24.1), rewritten by hand. Each test names the upstream
//! case it follows. The decision table runs under both [`Release`]s (and so on both default
//! queues: the rate-limiting queue with the bucket, the priority queue without); where the
//! releases differ, the test says which does what.
//!
//! Upstream checks its fake queue's counters (AddRateLimited, AddAfter, Forget). Here the
//! reconciler follows a script of outcomes under tokio's paused clock, and the test reads what
//! those calls *do*: when the next reconcile comes (the default limiter backs off 5 ms, 10 ms,
//! 20 ms … per failure), and the queue's `num_requeues` once the script has run. The priority
//! tests read the entry the priority queue holds for the requeued key.

mod controller_support;

use std::{
    collections::VecDeque,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use controller_support::{Informer, Log, block_on_capturing, informer, spawn_run, until, within};
use controlloop::{
    cache::HandlerPanic,
    controller::{
        Builder, Context, ContextError, Controller, Event, MetricsSnapshot, Outcome,
        ReconcileError, ReconcileResult as Res, Reconciler, Release, Request, predicate::Predicate,
    },
    testing::{Fixture, RunningInformer},
};
use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);

struct Run {
    /// Gaps between consecutive reconciles of the object.
    gaps: Vec<Duration>,
    /// `num_requeues` after the script ran and the controller was idle for an hour.
    num_requeues: usize,
    metrics: MetricsSnapshot,
}

/// Runs the script on one object ("a") plus, if `other` is set, a second object ("b") that
/// always succeeds, under `release`, and returns the timing of "a"'s reconciles.
fn run_script(release: Release, script: Vec<Outcome>, other: bool) -> (Run, usize) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(async move {
            let objects: &[&str] = if other { &["a", "b"] } else { &["a"] };
            let mut f = Fixture::in_process(objects).await;
            let script = Arc::new(Mutex::new(VecDeque::from(script)));
            let calls: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
            let (s, c) = (script.clone(), calls.clone());
            let controller = Controller::builder("upstream")
                .release(release)
                .build(
                    &f.informer,
                    move |req: Request, _ctx: Context<ConfigMap>| {
                        c.lock().push((req.name.clone(), Instant::now()));
                        let outcome = if req.name == "a" {
                            s.lock().pop_front().unwrap_or(Ok(Res::done()))
                        } else {
                            Ok(Res::done())
                        };
                        async move { outcome }
                    },
                )
                .unwrap();
            f.run_informer();
            let run = tokio::spawn({
                let c = controller.clone();
                async move { c.run(futures::future::pending()).await }
            });
            tokio::time::timeout(Duration::from_secs(7200), async {
                while !script.lock().is_empty() {
                    tokio::time::sleep(MS).await;
                }
            })
            .await
            .expect("the script never ran out: a requeue never came back?");
            tokio::time::sleep(Duration::from_secs(3600)).await;
            let times: Vec<Instant> = calls
                .lock()
                .iter()
                .filter(|(n, _)| n == "a")
                .map(|(_, t)| *t)
                .collect();
            let others = calls.lock().iter().filter(|(n, _)| n == "b").count();
            let r = Run {
                gaps: times.windows(2).map(|w| w[1] - w[0]).collect(),
                num_requeues: controller
                    .queue()
                    .num_requeues(&Request::new("default", "a")),
                metrics: controller.metrics(),
            };
            controller.shutdown();
            tokio::time::timeout(Duration::from_secs(10), run)
                .await
                .expect("run never returned after shutdown")
                .unwrap()
                .unwrap();
            f.stop().await.unwrap();
            (r, others)
        })
}

/// Upstream: "should requeue a Request if there is an error and continue processing items".
#[test]
fn should_requeue_a_request_if_there_is_an_error_and_continue_processing_items() {
    for release in Release::ALL {
        let (run, others) = run_script(
            release,
            vec![
                Err(ReconcileError::retry("expected error")),
                Ok(Res::done()),
            ],
            true,
        );
        assert_eq!(
            run.gaps,
            vec![5 * MS],
            "{release}: rate-limited, back after the 5 ms base delay"
        );
        assert_eq!(run.num_requeues, 0, "{release}: the success forgot");
        assert_eq!(others, 1, "{release}: the other item was processed too");
        assert_eq!(
            (run.metrics.errors, run.metrics.success),
            (1, 2),
            "{release}"
        );
    }
}

/// Upstream: "should not requeue a Request if there is a terminal error".
#[test]
fn should_not_requeue_a_request_if_there_is_a_terminal_error() {
    for release in Release::ALL {
        let (run, _) = run_script(
            release,
            vec![Err(ReconcileError::terminal("expected error"))],
            false,
        );
        assert!(
            run.gaps.is_empty(),
            "{release}: reconciled again: {:?}",
            run.gaps
        );
        assert_eq!(run.metrics.terminal_errors, 1, "{release}");
    }
}

/// Upstream: "should not reset backoff until there's a non-error result".
#[test]
fn should_not_reset_backoff_until_theres_a_non_error_result() {
    for release in Release::ALL {
        let (run, _) = run_script(
            release,
            vec![
                Err(ReconcileError::retry("1")),
                Err(ReconcileError::retry("2")),
                Err(ReconcileError::retry("3")),
                Err(ReconcileError::terminal("4")), // neither requeues nor forgets
            ],
            false,
        );
        assert_eq!(
            run.gaps,
            vec![5 * MS, 10 * MS, 20 * MS],
            "{release}: exponential backoff"
        );
        assert_eq!(
            run.num_requeues, 3,
            "{release}: the terminal error kept the failure count"
        );
    }
}

/// Upstream: "should requeue a Request if the Result sets Requeue:true".
#[test]
fn should_requeue_a_request_if_the_result_sets_requeue_true() {
    for release in Release::ALL {
        let (run, _) = run_script(
            release,
            vec![Ok(Res::requeue()), Ok(Res::requeue()), Ok(Res::done())],
            false,
        );
        assert_eq!(
            run.gaps,
            vec![5 * MS, 10 * MS],
            "{release}: requeue backs off, no forget between"
        );
        assert_eq!(run.num_requeues, 0, "{release}: the final success forgot");
        assert_eq!(run.metrics.requeue, 2, "{release}");
    }
}

/// Upstream: "should requeue a Request after a duration (but not rate-limited) if the Result
/// sets RequeueAfter (regardless of Requeue)".
#[test]
fn should_requeue_after_a_duration_but_not_rate_limited_if_the_result_sets_requeue_after() {
    let after = Res {
        requeue: true,
        ..Res::requeue_after(Duration::from_secs(1))
    };
    for release in Release::ALL {
        let (run, _) = run_script(
            release,
            vec![
                Err(ReconcileError::retry("builds a backoff")),
                Ok(after),
                Ok(Res::done()),
            ],
            false,
        );
        assert_eq!(
            run.gaps,
            vec![5 * MS, Duration::from_secs(1)],
            "{release}: exactly the asked delay"
        );
        assert_eq!(
            run.num_requeues, 0,
            "{release}: requeue_after forgot the earlier failure"
        );
        assert_eq!(run.metrics.requeue_after, 1, "{release}");
        assert_eq!(run.metrics.requeue, 0, "{release}: requeue_after wins");
    }
}

/// Upstream: "should perform error behavior if error is not nil, regardless of RequeueAfter".
/// In Rust an error carries no `Result` at all, so "regardless" holds by construction; what
/// remains to check is that the error's backoff applies, not some requeue delay.
#[test]
fn should_perform_error_behavior_if_error_is_not_nil_regardless_of_requeue_after() {
    for release in Release::ALL {
        let (run, _) = run_script(
            release,
            vec![
                Ok(Res::requeue_after(Duration::from_secs(60))),
                Err(ReconcileError::retry("x")),
            ],
            false,
        );
        assert_eq!(run.gaps, vec![Duration::from_secs(60), 5 * MS], "{release}");
        assert_eq!(run.num_requeues, 0, "{release}");
        assert_eq!(run.metrics.errors, 1, "{release}");
    }
}

// ---- Reconciler: ReconciliationTimeout (v0.22.5 and v0.24.1) and reconcile_timeouts_total
// (v0.24.1 only) ----

/// Runs `builder`'s controller over `names` until `done` holds for its metrics, then shuts it
/// down; returns the metrics.
fn run_until(
    builder: Builder<ConfigMap>,
    names: &[&str],
    reconciler: impl Reconciler<ConfigMap>,
    done: impl Fn(&MetricsSnapshot) -> bool,
) -> MetricsSnapshot {
    block_on_capturing(async {
        let informer = informer(names, vec![], HandlerPanic::Crash);
        let c = builder.build(&informer, reconciler).unwrap();
        let running = RunningInformer::start(&informer);
        let run = spawn_run(&c);
        until("the reconciles never finished", || done(&c.metrics())).await;
        c.shutdown();
        within("run never returned after shutdown", run)
            .await
            .unwrap()
            .unwrap();
        running.stop().await.unwrap();
        c.metrics()
    })
    .0
}

/// A reconciler that waits for its context to end, records why, and returns that as a
/// terminal error (upstream returns `ctx.Err()`; terminal here so nothing retries).
fn waits_for_its_context(seen: &Log<Option<ContextError>>) -> impl Reconciler<ConfigMap> {
    let seen = seen.clone();
    move |_req: Request, ctx: Context<ConfigMap>| {
        let seen = seen.clone();
        async move {
            within("the context was never cancelled", ctx.cancelled()).await;
            seen.lock().push(ctx.err());
            Err(ReconcileError::terminal(ctx.err().expect("cancelled")))
        }
    }
}

/// Upstream: "should time out if ReconciliationTimeout is set" (one nanosecond), and
/// "reconcile_timeouts should increment when ReconciliationTimeout context timeout hits
/// DeadlineExceeded". v0.24.
#[test]
fn should_time_out_if_reconciliation_timeout_is_set() {
    let seen: Log<Option<ContextError>> = Arc::default();
    let m = run_until(
        Controller::builder("timeouts").reconciliation_timeout(Duration::from_nanos(1)),
        &["bar"],
        waits_for_its_context(&seen),
        |m| m.errors == 1,
    );
    assert_eq!(*seen.lock(), [Some(ContextError::DeadlineExceeded)]);
    assert_eq!((m.timeouts, m.terminal_errors), (1, 1));
}

/// Upstream: "should increment multiple times when multiple reconciles timeout" (v0.24).
#[test]
fn reconcile_timeouts_should_increment_multiple_times_when_multiple_reconciles_timeout() {
    let seen: Log<Option<ContextError>> = Arc::default();
    let m = run_until(
        Controller::builder("timeouts").reconciliation_timeout(Duration::from_nanos(1)),
        &["bar0", "bar1", "bar2"],
        waits_for_its_context(&seen),
        |m| m.errors == 3,
    );
    assert_eq!(seen.lock().len(), 3);
    assert_eq!(m.timeouts, 3);
}

/// Upstream: "should not increment when user code cancels context earlier than the
/// ReconciliationTimeout": the reconciler's own 1 ms deadline ends its wait; the controller's
/// 10 s deadline never fires.
#[test]
fn reconcile_timeouts_should_not_increment_when_user_code_cancels_earlier() {
    let seen: Log<Option<ContextError>> = Arc::default();
    let s = seen.clone();
    let m = run_until(
        Controller::builder("timeouts").reconciliation_timeout(Duration::from_secs(10)),
        &["bar"],
        move |_req: Request, ctx: Context<ConfigMap>| {
            let s = s.clone();
            async move {
                let mine = ctx.cancellation_token().child_token();
                let _ = tokio::time::timeout(Duration::from_millis(1), mine.cancelled()).await;
                mine.cancel(); // "user cancellation"
                s.lock().push(ctx.err());
                Err(ReconcileError::terminal("user cancellation"))
            }
        },
        |m| m.errors == 1,
    );
    assert_eq!(
        *seen.lock(),
        [None],
        "the controller's context was not cancelled"
    );
    assert_eq!(m.timeouts, 0);
}

/// Upstream: "should not increment when reconciliation completes before timeout".
#[test]
fn reconcile_timeouts_should_not_increment_when_reconciliation_completes_before_timeout() {
    let m = run_until(
        Controller::builder("timeouts").reconciliation_timeout(Duration::from_secs(10)),
        &["bar"],
        |_req: Request, _ctx: Context<ConfigMap>| async { Ok(Res::done()) },
        |m| m.success == 1,
    );
    assert_eq!(m.timeouts, 0);
}

/// Upstream: "should not increment when parent context is cancelled": the controller stops
/// while the reconcile waits; its context ends `Canceled`, not `DeadlineExceeded`.
#[test]
fn reconcile_timeouts_should_not_increment_when_parent_context_is_cancelled() {
    let seen: Log<Option<ContextError>> = Arc::default();
    let m = run_until(
        Controller::builder("timeouts").reconciliation_timeout(Duration::from_secs(10)),
        &["bar"],
        waits_for_its_context(&seen),
        |m| m.active_workers == 1, // then run_until shuts the controller down
    );
    assert_eq!(*seen.lock(), [Some(ContextError::Canceled)]);
    assert_eq!((m.timeouts, m.terminal_errors), (0, 1));
}

/// Upstream: "should not increment when ReconciliationTimeout is zero" and "should not
/// configure a timeout if ReconciliationTimeout is zero": no deadline at all.
#[test]
fn should_not_configure_a_timeout_if_reconciliation_timeout_is_zero() {
    let deadlines: Log<Option<tokio::time::Instant>> = Arc::default();
    let d = deadlines.clone();
    let m = run_until(
        Controller::builder("timeouts").reconciliation_timeout(Duration::ZERO),
        &["bar"],
        move |_req: Request, ctx: Context<ConfigMap>| {
            d.lock().push(ctx.deadline());
            async { Ok(Res::done()) }
        },
        |m| m.success == 1,
    );
    assert_eq!(*deadlines.lock(), [None]);
    assert_eq!(m.timeouts, 0);
}

/// v0.22.5 has `ReconciliationTimeout` (the context gets the deadline) but no
/// `reconcile_timeouts_total` (added in v0.23): the same timeout is not counted.
#[test]
fn v0_22_times_out_the_same_but_has_no_timeouts_metric() {
    let seen: Log<Option<ContextError>> = Arc::default();
    let m = run_until(
        Controller::builder("timeouts")
            .release(Release::V0_22)
            .reconciliation_timeout(Duration::from_nanos(1)),
        &["bar"],
        waits_for_its_context(&seen),
        |m| m.errors == 1,
    );
    assert_eq!(*seen.lock(), [Some(ContextError::DeadlineExceeded)]);
    assert_eq!(m.timeouts, 0);
}

// ---- Start ----

/// Upstream: "should not error when controller Start context is cancelled during Sources
/// WaitForSync". The informer never runs, so the cache never syncs; the stop comes after 1 s,
/// well inside the 10 s `CacheSyncTimeout`, and `run` returns `Ok` then. Both releases.
#[test]
fn should_not_error_when_start_is_stopped_during_wait_for_sync() {
    for release in Release::ALL {
        block_on_capturing(async {
            let informer = informer(&["a"], vec![], HandlerPanic::Crash);
            let c = Controller::builder("start")
                .release(release)
                .cache_sync_timeout(Duration::from_secs(10))
                .build(&informer, |_req: Request, _ctx: Context<ConfigMap>| async {
                    Ok(Res::done())
                })
                .unwrap();
            let started = tokio::time::Instant::now();
            let r = within(
                "run ignored its stop while waiting for the cache",
                c.run(tokio::time::sleep(Duration::from_secs(1))),
            )
            .await;
            assert_eq!(r, Ok(()), "{release}");
            assert_eq!(started.elapsed(), Duration::from_secs(1));
        });
    }
}

/// Counts the creates that reach the controller's handler.
struct CountCreates(Arc<AtomicU64>);

impl Predicate<ConfigMap> for CountCreates {
    fn matches(&self, event: &Event<ConfigMap>) -> bool {
        if let Event::Create { .. } = event {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        true
    }
}

/// Builds a controller on an informer that has already synced 1000 objects, so its handler
/// gets them replayed by its own listener task, and returns how many had reached the handler
/// when the first reconcile started.
fn handled_at_first_reconcile(release: Release) -> u64 {
    const N: u64 = 1000;
    block_on_capturing(async {
        let names: Vec<String> = (0..N).map(|i| format!("o{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let informer: Arc<Informer> = informer(&refs, vec![], HandlerPanic::Crash);
        let running = RunningInformer::start(&informer);
        within("the informer never synced", informer.wait_synced()).await;
        let handled = Arc::new(AtomicU64::new(0));
        let first: Log<u64> = Arc::default();
        let (h, f) = (handled.clone(), first.clone());
        let c = Controller::builder("order")
            .release(release)
            .with_predicate(CountCreates(handled.clone()))
            .build(&informer, move |_req: Request, _ctx: Context<ConfigMap>| {
                f.lock().push(h.load(Ordering::SeqCst));
                async { Ok(Res::done()) }
            })
            .unwrap();
        let run = spawn_run(&c);
        until("not every object was reconciled", || {
            c.metrics().success == N
        })
        .await;
        c.shutdown();
        within("run never returned", run).await.unwrap().unwrap();
        running.stop().await.unwrap();
        assert_eq!(handled.load(Ordering::SeqCst), N);
        first.lock()[0]
    })
    .0
}

/// Upstream (v0.24.1): "should not call Reconcile until all event handlers have processed
/// initial objects". Upstream blocks its handler on a channel for a second; here the handler's
/// listener task is simply behind: tokio's cooperative budget makes it yield every so many
/// deliveries, so the controller's task runs while the replay is still arriving. v0.24 waits
/// for its handler's registration to sync, so the first reconcile sees all 1000 handled.
#[test]
fn should_not_call_reconcile_until_all_event_handlers_have_processed_initial_objects() {
    assert_eq!(handled_at_first_reconcile(Release::V0_24), 1000);
}

/// The same start under v0.22, which waits only for the informer's `HasSynced` (already true
/// for a late handler): its first reconcile runs while the handler has seen only part of the
/// initial list. The race that v0.23's "Delay reconciliation until handlers sync" closed.
#[test]
fn v0_22_can_reconcile_before_its_handler_has_the_initial_list() {
    let at_first = handled_at_first_reconcile(Release::V0_22);
    assert!(at_first < 1000, "{at_first}");
}
