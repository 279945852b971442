//! Ports of controller-runtime v0.22's worker-loop tests (`pkg/internal/controller/
//! controller_test.go`, conformance checklist item 36), rewritten by hand. Each test names the
//! upstream case it follows.
//!
//! Upstream checks its fake queue's counters (AddRateLimited, AddAfter, Forget). Here the
//! reconciler follows a script of outcomes under tokio's paused clock, and the test reads what
//! those calls *do*: when the next reconcile comes (the default limiter backs off 5 ms, 10 ms,
//! 20 ms … per failure), and the queue's `num_requeues` once the script has run.

use std::{collections::VecDeque, sync::Arc, time::Duration};

use controlloop::{
    controller::{Context, Controller, Error, MetricsSnapshot, Outcome, Request, Result as Res},
    lab::rig::{Backend, Fixture},
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
/// always succeeds, and returns the timing of "a"'s reconciles.
fn run_script(script: Vec<Outcome>, other: bool) -> (Run, usize) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(async move {
            let mut f = Fixture::new(&Backend::InProcess).await.unwrap();
            f.target.create("a", 0).await.unwrap();
            if other {
                f.target.create("b", 0).await.unwrap();
            }
            let script = Arc::new(Mutex::new(VecDeque::from(script)));
            let calls: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
            let (s, c) = (script.clone(), calls.clone());
            let controller = Controller::builder("upstream")
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
            f.stop().await;
            (r, others)
        })
}

/// Upstream: "should requeue a Request if there is an error and continue processing items".
#[test]
fn should_requeue_a_request_if_there_is_an_error_and_continue_processing_items() {
    let (run, others) = run_script(
        vec![Err(Error::retry("expected error")), Ok(Res::done())],
        true,
    );
    assert_eq!(
        run.gaps,
        vec![5 * MS],
        "rate-limited: back after the 5 ms base delay"
    );
    assert_eq!(run.num_requeues, 0, "the success forgot the failure");
    assert_eq!(others, 1, "the other item was processed too");
    assert_eq!((run.metrics.errors, run.metrics.success), (1, 2));
}

/// Upstream: "should not requeue a Request if there is a terminal error".
#[test]
fn should_not_requeue_a_request_if_there_is_a_terminal_error() {
    let (run, _) = run_script(vec![Err(Error::terminal("expected error"))], false);
    assert!(
        run.gaps.is_empty(),
        "never reconciled again: {:?}",
        run.gaps
    );
    assert_eq!(run.metrics.terminal_errors, 1);
}

/// Upstream: "should not reset backoff until there's a non-error result".
#[test]
fn should_not_reset_backoff_until_theres_a_non_error_result() {
    let (run, _) = run_script(
        vec![
            Err(Error::retry("1")),
            Err(Error::retry("2")),
            Err(Error::retry("3")),
            Err(Error::terminal("4")), // neither requeues nor forgets
        ],
        false,
    );
    assert_eq!(
        run.gaps,
        vec![5 * MS, 10 * MS, 20 * MS],
        "exponential backoff"
    );
    assert_eq!(
        run.num_requeues, 3,
        "the terminal error kept the failure count"
    );
}

/// Upstream: "should requeue a Request if the Result sets Requeue:true".
#[test]
fn should_requeue_a_request_if_the_result_sets_requeue_true() {
    let (run, _) = run_script(
        vec![Ok(Res::requeue()), Ok(Res::requeue()), Ok(Res::done())],
        false,
    );
    assert_eq!(
        run.gaps,
        vec![5 * MS, 10 * MS],
        "requeue backs off: no forget between"
    );
    assert_eq!(run.num_requeues, 0, "the final success forgot");
    assert_eq!(run.metrics.requeue, 2);
}

/// Upstream: "should requeue a Request after a duration (but not rate-limited) if the Result
/// sets RequeueAfter (regardless of Requeue)".
#[test]
fn should_requeue_after_a_duration_but_not_rate_limited_if_the_result_sets_requeue_after() {
    let after = Res {
        requeue: true,
        requeue_after: Duration::from_secs(1),
    };
    let (run, _) = run_script(
        vec![
            Err(Error::retry("builds a backoff")),
            Ok(after),
            Ok(Res::done()),
        ],
        false,
    );
    assert_eq!(
        run.gaps,
        vec![5 * MS, Duration::from_secs(1)],
        "exactly the asked delay"
    );
    assert_eq!(
        run.num_requeues, 0,
        "requeue_after forgot the earlier failure"
    );
    assert_eq!(run.metrics.requeue_after, 1);
    assert_eq!(run.metrics.requeue, 0, "requeue_after wins over requeue");
}

/// Upstream: "should perform error behavior if error is not nil, regardless of RequeueAfter".
/// In Rust an error carries no `Result` at all, so "regardless" holds by construction; what
/// remains to check is that the error's backoff applies, not some requeue delay.
#[test]
fn should_perform_error_behavior_if_error_is_not_nil_regardless_of_requeue_after() {
    let (run, _) = run_script(
        vec![
            Ok(Res::requeue_after(Duration::from_secs(60))),
            Err(Error::retry("x")),
        ],
        false,
    );
    assert_eq!(run.gaps, vec![Duration::from_secs(60), 5 * MS]);
    assert_eq!(run.num_requeues, 0);
    assert_eq!(run.metrics.errors, 1);
}
