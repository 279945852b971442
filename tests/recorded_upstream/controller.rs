//! controller-runtime's requeue decisions and default limiter (v0.22 and v0.24).

use std::time::Duration;

use controlloop::{
    controller::{
        Outcome, QueueKind, ReconcileError, ReconcileResult, Release, Request, RequestQueue, decide,
    },
    workqueue::{RateLimiter, RateLimitingQueue, default_controller_rate_limiter},
};

use crate::{SECOND, WEB, compare, go_duration, paused, within};

// ---------------------------------------------------------------------------------------
// controller-runtime
// ---------------------------------------------------------------------------------------

/// The queue calls for each reconcile outcome: the port's `decide` (which its controller
/// applies, keeps I2 of `controller`), applied as the controller applies it to a
/// rate-limiting queue holding the request, then `done`. Upstream's calls were logged by a
/// queue wrapper inside a running controller with `UsePriorityQueue=false`.
fn requeue_lines() -> Vec<String> {
    let thirty = Duration::from_secs(30);
    let cases: Vec<(&str, Outcome)> = vec![
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
    ];
    paused(async {
        let mut lines = Vec::new();
        for (name, outcome) in cases {
            let q = RequestQueue::RateLimiting(RateLimitingQueue::new(
                default_controller_rate_limiter(),
            ));
            let (namespace, object) = WEB.split_once('/').expect("namespace/name");
            q.add(Request::new(namespace, object));
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

/// The requeue decisions are the same code in v0.22.5 and v0.24.1; both recordings agree.
#[test]
fn controller_runtime_v0_22_requeue() {
    compare("controller_runtime_v0.22_requeue", requeue_lines());
}

#[test]
fn controller_runtime_v0_24_requeue() {
    compare("controller_runtime_v0.24_requeue", requeue_lines());
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

/// v0.24 made the priority queue the default, and with it the exponential-only limiter: the
/// port's default release builds the same.
#[test]
fn controller_runtime_v0_24_default_limiter() {
    compare(
        "controller_runtime_v0.24_default_limiter",
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
