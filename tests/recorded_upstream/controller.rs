//! controller-runtime's requeue decisions, default limiter and default queue (v0.22, v0.24
//! and v0.25).

use std::{sync::Arc, time::Duration};

use controlloop::{
    controller::{
        Outcome, QueueKind, ReconcileError, ReconcileResult, Release, Request, RequestQueue,
        decide,
        priorityqueue::{AddOpts, Opts, PriorityQueue},
    },
    workqueue::{RateLimiter, RateLimitingQueue, default_controller_rate_limiter},
};
use tokio::time::Instant;

use crate::{SECOND, WEB, compare, compare_each, go_duration, paused, settle, within};

// ---------------------------------------------------------------------------------------
// controller-runtime
// ---------------------------------------------------------------------------------------

/// The queue calls for each reconcile outcome: the port's `decide` (which its controller
/// applies, keeps I2 of `controller`), applied as the controller applies it to a
/// rate-limiting queue holding the request, then `done`. Upstream's calls were logged by a
/// queue wrapper inside a running controller with `UsePriorityQueue=false`.
fn requeue_lines() -> Vec<String> {
    paused(async {
        let mut lines = Vec::new();
        for (name, outcome) in outcomes() {
            let q = RequestQueue::RateLimiting(RateLimitingQueue::new(
                default_controller_rate_limiter(),
            ));
            q.add(web());
            let (req, _) = within(SECOND, "get", q.get_with_priority())
                .await
                .expect("queued");
            let mut calls = Vec::new();
            for action in decide(&outcome).1 {
                // What the controller does with each action: forget, or an AddWithOpts that
                // upstream's wrapper (here `RequestQueue::RateLimiting`) turns
                // into the classic call the recording logged.
                match action.opts(0) {
                    None => {
                        q.forget(&req);
                        calls.push("Forget".to_string());
                    }
                    Some(opts) => {
                        q.add_with_opts(opts, [req.clone()]);
                        calls.push(if opts.rate_limited {
                            "AddRateLimited".to_string()
                        } else {
                            format!("AddAfter {}", go_duration(opts.after))
                        });
                    }
                }
            }
            q.done(&req);
            calls.push("Done".to_string());
            lines.push(format!(
                "{name}: {}; num_requeues {}",
                calls.join(", "),
                q.num_requeues(&req)
            ));
            q.shut_down();
        }
        lines
    })
}

/// `default/web` as a request.
fn web() -> Request {
    let (namespace, object) = WEB.split_once('/').expect("namespace/name");
    Request::new(namespace, object)
}

/// The reconcile outcomes the recordings run, in their order, under their names.
fn outcomes() -> Vec<(&'static str, Outcome)> {
    let thirty = Duration::from_secs(30);
    vec![
        ("Result{}", Ok(ReconcileResult::done())),
        ("Result{Requeue: true}", Ok(ReconcileResult::requeue())),
        (
            "Result{RequeueAfter: 30s}",
            Ok(ReconcileResult::requeue_after(thirty)),
        ),
        (
            "Result{Requeue: true, RequeueAfter: 30s}",
            Ok(ReconcileResult {
                requeue: true,
                ..ReconcileResult::requeue_after(thirty)
            }),
        ),
        ("error", Err(ReconcileError::retry("boom"))),
        // The port's outcome is a Result: an error carries no Result, which is what upstream
        // does with one (ignores it).
        (
            "error + Result{RequeueAfter: 30s}",
            Err(ReconcileError::retry("boom")),
        ),
        ("TerminalError", Err(ReconcileError::terminal("boom"))),
        ("panic", Err(ReconcileError::Panic("boom".into()))),
    ]
}

/// The requeue decisions are the same code in v0.22.5, v0.24.1 and v0.25.3; the recordings
/// agree.
#[test]
fn controller_runtime_requeue_on_every_release() {
    compare_each(
        &[
            "controller_runtime_v0.22_requeue",
            "controller_runtime_v0.24_requeue",
            "controller_runtime_v0.25_requeue",
        ],
        requeue_lines(),
    );
}

/// How the recording's logging queue prints an `AddWithOpts` call.
fn opts_call(o: AddOpts) -> String {
    let mut parts = Vec::new();
    if o.rate_limited {
        parts.push("RateLimited".to_string());
    }
    if !o.after.is_zero() {
        parts.push(format!("After {}", go_duration(o.after)));
    }
    if let Some(p) = o.priority {
        parts.push(format!("Priority {p}"));
    }
    format!("AddWithOpts{{{}}}", parts.join(", "))
}

/// The same outcomes on the priority queue, built as the controller's default `NewQueue`
/// builds it with the limiter the release hands it; the actions are applied at the
/// priority the request was handed out with (upstream passes it on every requeue). Then
/// `done`, the queue's tasks settle (the recording's `synctest.Wait`: the add is flushed and
/// the limiter asked), `num_requeues`, and the next hand-out within an hour.
fn requeue_priority_queue_lines(release: Release) -> Vec<String> {
    paused(async {
        let mut lines = Vec::new();
        for (name, outcome) in outcomes() {
            let opts = Opts {
                rate_limiter: Some(Arc::from(release.default_rate_limiter::<Request>())),
                metrics_provider: None,
            };
            let q = PriorityQueue::with_opts("pq-requeue", opts).expect("inside a runtime");
            q.add(web()); // the source's add
            let (req, priority) = within(SECOND, "the first get", q.get_with_priority())
                .await
                .expect("queued");
            let first = Instant::now();
            let mut calls = Vec::new();
            for action in decide(&outcome).1 {
                match action.opts(release.requeue_priority(&outcome, priority)) {
                    None => {
                        q.forget(&req);
                        calls.push("Forget".to_string());
                    }
                    Some(opts) => {
                        q.add_with_opts(opts, [req.clone()]);
                        calls.push(opts_call(opts));
                    }
                }
            }
            q.done(&req);
            calls.push("Done".to_string());
            settle().await;
            let n = q.num_requeues(&req);
            let hour = Duration::from_secs(3600);
            let next = match tokio::time::timeout(hour, q.get_with_priority()).await {
                Ok(Some((again, p))) => {
                    q.done(&again);
                    format!(
                        "second reconcile {} after the first was handed out, at priority {p}",
                        go_duration(first.elapsed())
                    )
                }
                Ok(None) => panic!("{name}: the queue shut down"),
                Err(_) => "no second reconcile within 1h".to_string(),
            };
            lines.push(format!(
                "{name}: {}; num_requeues {n}; {next}",
                calls.join(", ")
            ));
            q.shut_down();
        }
        lines
    })
}

#[test]
fn controller_runtime_requeue_priority_queue_on_every_release() {
    for (release, name) in [
        (
            Release::V0_22,
            "controller_runtime_v0.22_requeue_priority_queue",
        ),
        (
            Release::V0_24,
            "controller_runtime_v0.24_requeue_priority_queue",
        ),
        (
            Release::V0_25,
            "controller_runtime_v0.25_requeue_priority_queue",
        ),
    ] {
        compare(name, requeue_priority_queue_lines(release));
    }
}

/// A limiter's first failure for 120 fresh requests, runs of equal delays merged.
fn limiter_ranges(lines: &mut Vec<String>, l: &dyn RateLimiter<String>) {
    let delays: Vec<String> = paused(async {
        (1..=120)
            .map(|i| go_duration(l.when(&format!("default/obj-{i:03}"))))
            .collect()
    });
    let mut i = 0;
    while i < delays.len() {
        let j = i + delays[i..].iter().take_while(|d| **d == delays[i]).count();
        if j == i + 1 {
            lines.push(format!("  request {:03}: {}", i + 1, delays[i]));
        } else {
            lines.push(format!("  requests {:03}-{:03}: {}", i + 1, j, delays[i]));
        }
        i = j;
    }
}

/// The three cases as recorded, each rendered from the limiter the port's controller builds
/// for it ([`QueueKind::default_rate_limiter`] of the queue the builder picks): `unset` is the
/// release's own queue ([`Release::queue_kind`]), then `use_priority_queue(false)` and
/// `use_priority_queue(true)`.
fn default_limiter_lines(unset: QueueKind) -> Vec<String> {
    let mut lines = vec!["UsePriorityQueue unset:".to_string()];
    limiter_ranges(&mut lines, &*unset.default_rate_limiter());
    lines.push("UsePriorityQueue=false:".to_string());
    limiter_ranges(&mut lines, &*QueueKind::RateLimiting.default_rate_limiter());
    lines.push("UsePriorityQueue=true:".to_string());
    limiter_ranges(&mut lines, &*QueueKind::Priority.default_rate_limiter());
    lines
}

/// v0.22: an unconfigured controller builds the rate-limiting queue, and with it the limiter
/// with the 10 qps / burst 100 bucket.
#[test]
fn controller_runtime_v0_22_default_limiter() {
    compare(
        "controller_runtime_v0.22_default_limiter",
        default_limiter_lines(Release::V0_22.queue_kind()),
    );
}

/// v0.24 made the priority queue the default, and with it the exponential-only limiter; v0.25
/// kept both: the port's v0.24 and its default release build the same.
#[test]
fn controller_runtime_v0_24_default_limiter() {
    compare(
        "controller_runtime_v0.24_default_limiter",
        default_limiter_lines(Release::V0_24.queue_kind()),
    );
}

#[test]
fn controller_runtime_v0_25_default_limiter() {
    assert_eq!(Release::default(), Release::V0_25);
    compare(
        "controller_runtime_v0.25_default_limiter",
        default_limiter_lines(Release::default().queue_kind()),
    );
}

/// The comparison fires when the port's default is the wrong release's: rendering v0.24's
/// unset case with the rate-limiting queue's limiter (the port before it followed v0.24)
/// fails, and the diff shows the bucket's delays where upstream has none.
#[test]
fn a_v0_24_default_with_v0_22s_limiter_fails_the_comparison() {
    let broken = default_limiter_lines(QueueKind::RateLimiting);
    let failed = std::panic::catch_unwind(|| {
        compare("controller_runtime_v0.24_default_limiter", broken);
    })
    .expect_err("v0.22's limiter passed as v0.24's default");
    let message = failed
        .downcast_ref::<String>()
        .expect("a formatted panic message");
    assert!(
        message
            .contains("-  requests 001-120: 5ms\n+  requests 001-100: 5ms\n+  request 101: 100ms"),
        "{message}"
    );
}
