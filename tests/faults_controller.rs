//! Faults around a running controller, each test named after its fault: a panicking event
//! handler, a stop in the middle of a burst, a dropped `run`, a reconcile past its deadline, a
//! reconciler panic. Each runs under tokio's paused clock against a scripted informer source
//! (`tests/controller_support`), and every await that could hang has a bound naming the
//! deadlock it suspects. Where the two controller-runtime releases differ, the test runs
//! both and says which does what.

mod controller_support;

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use controller_support::*;
use controlloop::{
    cache::{HandlerPanic, Scripted, WatchEvent},
    controller::{
        Context, ContextError, Controller, ControllerError, Event, ReconcileError,
        ReconcileResult as Res, Release, Request,
    },
    testing::RunningInformer,
};
use k8s_openapi::api::core::v1::ConfigMap;
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);
const OBSERVED: &str = r#"E] "Observed a panic" panic="predicate panicked on b""#;

/// A reconciler that counts its calls and succeeds.
fn counting(
    calls: &Arc<AtomicU64>,
) -> impl Fn(Request, Context<ConfigMap>) -> futures::future::Ready<controlloop::controller::Outcome>
+ Send
+ Sync
+ 'static {
    let calls = calls.clone();
    move |_req, _ctx| {
        calls.fetch_add(1, Ordering::SeqCst);
        futures::future::ready(Ok(Res::done()))
    }
}

/// Upstream's default (`HandleCrash` re-raises): a handler that panics on an initial-list
/// object crashes the informer, and the controller waiting for that sync stops at once with
/// the panic's text, under either release. Before, the panic ended only the listener's task:
/// nothing was logged by the port, later events to the handler were dropped, and `run` waited
/// its whole `CacheSyncTimeout` for a sync that could not come.
#[test]
fn handler_panic_in_initial_list_is_reported() {
    for release in Release::ALL {
        let ((), lines) = block_on_capturing(async {
            let informer = informer(&["a", "b", "c"], vec![], HandlerPanic::default());
            let calls = Arc::new(AtomicU64::new(0));
            let c = Controller::builder("faults")
                .release(release)
                .with_predicate(PanicOn(initial_create_of("b")))
                .build(&informer, counting(&calls))
                .unwrap();
            let running = RunningInformer::start(&informer);
            let started = Instant::now();
            let run = spawn_run(&c);
            let r = within("run kept waiting for a sync that cannot come", run)
                .await
                .unwrap();
            assert_eq!(
                r,
                Err(ControllerError::InformerCrashed(
                    "predicate panicked on b".into()
                )),
                "{release}"
            );
            assert_eq!(started.elapsed(), Duration::ZERO, "{release}: not at once");
            let ended = running.stop().await;
            let payload = ended
                .expect_err("the informer did not re-raise")
                .into_panic();
            assert_eq!(
                payload.downcast_ref::<String>().map(String::as_str),
                Some("predicate panicked on b")
            );
            assert_eq!(informer.handler_panics(), 1);
            // v0.24 never starts a worker. v0.22 may, if the informer synced before the
            // crash; then it drains at most "a" (queued before "b" panicked).
            let most = u64::from(release == Release::V0_22);
            assert!(
                calls.load(Ordering::SeqCst) <= most,
                "{release}: reconciled"
            );
        });
        assert_eq!(
            lines.iter().filter(|l| *l == OBSERVED).count(),
            1,
            "{lines:#?}"
        );
    }
}

/// With upstream's `ReallyCrash = false` (`HandlerPanic::LogAndContinue`) the panicked initial
/// add is skipped and never counts as delivered. v0.24 waits for its handler to sync, so it
/// times out after `CacheSyncTimeout`; v0.22 waits only for the informer, so it starts and
/// reconciles every object but the skipped one. The panic is logged either way.
#[test]
fn a_skipped_initial_add_holds_the_v0_24_gate_shut_but_not_v0_22s() {
    for release in Release::ALL {
        let ((), lines) = block_on_capturing(async {
            let informer = informer(&["a", "b", "c"], vec![], HandlerPanic::LogAndContinue);
            let seen: Log<String> = Arc::default();
            let s = seen.clone();
            let c = Controller::builder("faults")
                .release(release)
                .cache_sync_timeout(Duration::from_secs(30))
                .with_predicate(PanicOn(initial_create_of("b")))
                .build(&informer, move |req: Request, _ctx: Context<ConfigMap>| {
                    s.lock().push(req.name);
                    async { Ok(Res::done()) }
                })
                .unwrap();
            let running = RunningInformer::start(&informer);
            let run = spawn_run(&c);
            match release {
                Release::V0_24 | Release::V0_25 => {
                    let r = within("run outlived its cache sync timeout", run).await;
                    assert_eq!(
                        r.unwrap(),
                        Err(ControllerError::CacheSyncTimeout(Duration::from_secs(30)))
                    );
                    assert!(
                        seen.lock().is_empty(),
                        "reconciled before the handler synced"
                    );
                }
                Release::V0_22 => {
                    until("v0.22 never reconciled", || seen.lock().len() == 2).await;
                    assert_eq!(*seen.lock(), ["a", "c"]);
                    c.shutdown();
                    within("run never returned", run).await.unwrap().unwrap();
                }
            }
            assert_eq!(informer.handler_panics(), 1);
            running
                .stop()
                .await
                .expect("LogAndContinue never re-raises");
        });
        assert_eq!(
            lines.iter().filter(|l| *l == OBSERVED).count(),
            1,
            "{lines:#?}"
        );
    }
}

/// A handler panic after the controller has started (on a watch event) crashes the informer
/// too, and the running controller stops with the panic's text instead of running on with a
/// cache that no longer moves.
#[test]
fn handler_panic_after_sync_stops_the_running_controller() {
    block_on_capturing(async {
        let watch = vec![
            Scripted::After(Duration::from_secs(10)),
            Scripted::Event(WatchEvent::Modified(cm("b", "2"))),
        ];
        let informer = informer(&["a", "b"], watch, HandlerPanic::Crash);
        let calls = Arc::new(AtomicU64::new(0));
        let c = Controller::builder("faults")
            .with_predicate(PanicOn(|e: &Event<ConfigMap>| {
                matches!(e, Event::Update { .. })
            }))
            .build(&informer, counting(&calls))
            .unwrap();
        let running = RunningInformer::start(&informer);
        let started = Instant::now();
        let r = within("run never noticed the crash", spawn_run(&c)).await;
        assert_eq!(
            r.unwrap(),
            Err(ControllerError::InformerCrashed(
                "predicate panicked on b".into()
            ))
        );
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2,
            "the initial list was reconciled"
        );
        assert!(
            running.stop().await.is_err(),
            "the informer did not re-raise"
        );
    });
}

/// What one reconcile saw of its context.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    name: String,
    started: Instant,
    at_start: Option<ContextError>,
    at_end: Option<ContextError>,
}

impl Seen {
    /// What the tests compare: the request and what its context said.
    fn view(&self) -> (&str, Option<ContextError>, Option<ContextError>) {
        (&self.name, self.at_start, self.at_end)
    }
}

/// A reconciler that records its context at start and end; it waits for cancellation (at most
/// an hour) when `wait` picks the request, else `cost`.
fn recording(
    log: &Log<Seen>,
    wait: fn(&str) -> bool,
    cost: Duration,
) -> impl Fn(
    Request,
    Context<ConfigMap>,
) -> futures::future::BoxFuture<'static, controlloop::controller::Outcome>
+ Send
+ Sync
+ 'static {
    let log = log.clone();
    move |req: Request, ctx: Context<ConfigMap>| {
        let log = log.clone();
        Box::pin(async move {
            let (started, at_start) = (Instant::now(), ctx.err());
            if wait(&req.name) {
                let _ = tokio::time::timeout(HANG, ctx.cancelled()).await;
            } else {
                tokio::time::sleep(cost).await;
            }
            log.lock().push(Seen {
                name: req.name,
                started,
                at_start,
                at_end: ctx.err(),
            });
            Ok(Res::done())
        })
    }
}

/// Dropping `run`'s future is the port's context cancellation: the reconcile in flight is not
/// abandoned at its `.await` but sees its context cancelled, returns, and its result is
/// handled and its key released. Then each release's shutdown follows: v0.22's worker goes on
/// to the key still queued (its context already cancelled), v0.24's takes no more.
#[test]
fn dropping_run_cancels_reconcilers() {
    for release in Release::ALL {
        block_on_capturing(async {
            let informer = informer(&["a", "b"], vec![], HandlerPanic::Crash);
            let log: Log<Seen> = Arc::default();
            let c = Controller::builder("faults")
                .release(release)
                .build(&informer, recording(&log, |n| n == "a", 10 * MS))
                .unwrap();
            let running = RunningInformer::start(&informer);
            tokio::select! {
                r = c.run(futures::future::pending()) => panic!("run returned on its own: {r:?}"),
                _ = until("no reconcile started", || c.metrics().active_workers == 1) => {}
            } // run's future is dropped here, with "a" in flight
            until(
                "the reconcile in flight never saw its context cancelled",
                || !log.lock().is_empty(),
            )
            .await;
            let a = ("a", None, Some(ContextError::Canceled));
            within(
                "a key is still held: was a worker aborted mid-reconcile?",
                c.queue().shut_down_with_drain(),
            )
            .await;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let b = (
                "b",
                Some(ContextError::Canceled),
                Some(ContextError::Canceled),
            );
            let expected = match release {
                Release::V0_22 => vec![a, b],
                Release::V0_24 | Release::V0_25 => vec![a],
            };
            let log = log.lock().clone();
            let views: Vec<_> = log.iter().map(Seen::view).collect();
            assert_eq!(views, expected, "{release}");
            assert_eq!(c.metrics().success, expected.len() as u64, "{release}");
            running.stop().await.unwrap();
        });
    }
}

/// Stopping a controller with a burst queued, v0.22: the queue is shut down, not abandoned.
/// The worker finishes the reconcile in flight and then takes every key still queued (client
/// -go's `Get` hands them out until the queue is empty), each with its context already
/// cancelled; `run` returns after the last.
#[test]
fn shutdown_mid_burst_drains_the_queue() {
    let (log, took) = shutdown_mid_burst(Release::V0_22);
    assert_eq!(log.len(), 5);
    assert_eq!(log[0].view(), ("a", None, Some(ContextError::Canceled)));
    assert!(
        log[1..]
            .iter()
            .all(|s| s.at_start == Some(ContextError::Canceled)),
        "{log:#?}"
    );
    assert_eq!(
        took,
        50 * MS,
        "five reconciles of 10 ms, one after the other"
    );
}

/// The same stop under v0.24, whose default queue (the priority queue) reports the shutdown
/// to `GetWithPriority` at once: the reconcile in flight finishes, no other key is taken.
#[test]
fn shutdown_mid_burst_under_v0_24_takes_no_more_keys() {
    let (log, took) = shutdown_mid_burst(Release::V0_24);
    assert_eq!(log.len(), 1, "{log:#?}");
    assert_eq!(log[0].at_end, Some(ContextError::Canceled));
    assert_eq!(took, 10 * MS);
}

/// Five keys, one worker, 10 ms reconciles; `shutdown` during the first. Returns what the
/// reconciles saw and how long `run` took from the start of the first reconcile.
fn shutdown_mid_burst(release: Release) -> (Vec<Seen>, Duration) {
    block_on_capturing(async {
        let names = ["a", "b", "c", "d", "e"];
        let informer = informer(&names, vec![], HandlerPanic::Crash);
        let log: Log<Seen> = Arc::default();
        let c = Controller::builder("faults")
            .release(release)
            .build(&informer, recording(&log, |_| false, 10 * MS))
            .unwrap();
        let running = RunningInformer::start(&informer);
        let run = spawn_run(&c);
        until("no reconcile started", || c.metrics().active_workers == 1).await;
        c.shutdown();
        within("run never returned after shutdown", run)
            .await
            .unwrap()
            .unwrap();
        let ended = Instant::now();
        running.stop().await.unwrap();
        let log = log.lock().clone();
        let took = ended - log[0].started;
        (log, took)
    })
    .0
}

/// `ReconciliationTimeout`: at the deadline the reconcile's context is cancelled with
/// `DeadlineExceeded`, and that is all. The reconcile goes on; what it returns decides (here
/// an error, so a backoff requeue 5 ms later), and v0.24 counts a timeout where v0.22 has no
/// such metric.
#[test]
fn a_reconcile_past_its_deadline_is_cancelled_and_its_result_still_decides() {
    for release in Release::ALL {
        block_on_capturing(async {
            let informer = informer(&["a"], vec![], HandlerPanic::Crash);
            let seen: Log<(Instant, Option<ContextError>)> = Arc::default();
            let s = seen.clone();
            let c = Controller::builder("faults")
                .release(release)
                .reconciliation_timeout(Duration::from_millis(100))
                .build(&informer, move |_req: Request, ctx: Context<ConfigMap>| {
                    let s = s.clone();
                    async move {
                        let first = s.lock().is_empty();
                        if first {
                            within("the deadline never cancelled the context", ctx.cancelled())
                                .await;
                        }
                        s.lock().push((Instant::now(), ctx.err()));
                        if first {
                            Err(ReconcileError::retry("gave up at the deadline"))
                        } else {
                            Ok(Res::done())
                        }
                    }
                })
                .unwrap();
            let started = Instant::now();
            let run = spawn_run(&c); // its sync wait looks first, before the informer lists...
            let running = RunningInformer::start(&informer);
            until("the error was never retried", || seen.lock().len() == 2).await;
            let seen = seen.lock().clone();
            // ...and again 100 ms later (client-go's `WaitForCacheSync` polls every 100 ms):
            // the first reconcile starts then.
            let first = started + 100 * MS;
            assert_eq!(
                seen[0],
                (first + 100 * MS, Some(ContextError::DeadlineExceeded)),
                "{release}"
            );
            assert_eq!(seen[1], (first + 105 * MS, None), "not the 5 ms backoff");
            let m = c.metrics();
            let timeouts = u64::from(release >= Release::V0_24);
            assert_eq!(
                (m.errors, m.success, m.timeouts),
                (1, 1, timeouts),
                "{release}"
            );
            c.shutdown();
            within("run never returned", run).await.unwrap().unwrap();
            running.stop().await.unwrap();
        });
    }
}

/// `reconcile_panics_total` counts every panic: upstream increments it before it looks at
/// `RecoverPanic` (v0.22.5 and v0.24.1 alike). The port used to count only recovered ones.
#[test]
fn an_unrecovered_reconciler_panic_is_counted() {
    for recover in [true, false] {
        block_on_capturing(async {
            let informer = informer(&["a"], vec![], HandlerPanic::Crash);
            let c = Controller::builder("faults")
                .recover_panic(recover)
                .build(&informer, |_req: Request, _ctx: Context<ConfigMap>| async {
                    if true {
                        panic!("reconciler panic");
                    }
                    Ok(Res::done())
                })
                .unwrap();
            let running = RunningInformer::start(&informer);
            let run = spawn_run(&c);
            if recover {
                // Recovered: an error result, retried; stop after the first.
                until("the reconciler never ran", || c.metrics().errors >= 1).await;
                c.shutdown();
            } // unrecovered: run ends by itself, re-raising the panic
            let joined = within("run never returned", run).await;
            assert_eq!(
                joined.is_err(),
                !recover,
                "an unrecovered panic reaches run"
            );
            let m = c.metrics();
            assert_eq!(m.panics, 1, "recover_panic({recover}): {m:?}");
            assert_eq!(
                m.errors,
                u64::from(recover),
                "only a recovered panic is a result"
            );
            running.stop().await.unwrap();
        });
    }
}

/// A worker that never finishes keeps `run` waiting, as upstream's `wg.Wait()` does; the
/// cancelled context is the only signal, and a reconciler that ignores it is on its own.
#[test]
fn a_reconciler_that_ignores_cancellation_holds_run_until_it_returns() {
    block_on_capturing(async {
        let informer = informer(&["a"], vec![], HandlerPanic::Crash);
        let started: Log<Instant> = Arc::default();
        let s = started.clone();
        let c = Controller::builder("faults")
            .build(&informer, move |_req: Request, _ctx: Context<ConfigMap>| {
                s.lock().push(Instant::now());
                async {
                    tokio::time::sleep(Duration::from_secs(60)).await; // never looks at ctx
                    Ok(Res::done())
                }
            })
            .unwrap();
        let running = RunningInformer::start(&informer);
        let run = spawn_run(&c);
        until("no reconcile started", || c.metrics().active_workers == 1).await;
        c.shutdown();
        within("run never returned", run).await.unwrap().unwrap();
        assert_eq!(started.lock()[0].elapsed(), Duration::from_secs(60));
        running.stop().await.unwrap();
    });
}

/// A modelled process kill (`Controller::abort`, what the book's restart experiments use) is
/// the one stop that does abandon a reconcile at its `.await`: it never returns, its result is
/// never handled, and its key is released unreconciled, as a killed process's would be gone.
/// Contrast `dropping_run_cancels_reconcilers`.
#[test]
fn abort_abandons_the_reconcile_in_flight() {
    block_on_capturing(async {
        let informer = informer(&["a"], vec![], HandlerPanic::Crash);
        let log: Log<Seen> = Arc::default();
        let c = Controller::builder("faults")
            .build(&informer, recording(&log, |_| true, MS))
            .unwrap();
        let running = RunningInformer::start(&informer);
        let run = spawn_run(&c);
        until("no reconcile started", || c.metrics().active_workers == 1).await;
        c.abort();
        within("run never returned after abort", run)
            .await
            .unwrap()
            .unwrap();
        within(
            "the aborted reconcile still holds its key",
            c.queue().shut_down_with_drain(),
        )
        .await;
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(log.lock().is_empty(), "the aborted reconcile returned");
        let m = c.metrics();
        assert_eq!((m.reconciles(), m.active_workers), (0, 0));
        running.stop().await.unwrap();
    });
}
