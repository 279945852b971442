//! controller-runtime's requeue decisions and default limiter (v0.22 and v0.24).

use std::time::Duration;

use controlloop::{
    controller::{Action, Error, Outcome, Result as ReconcileResult, decide},
    lab::rig::within,
    workqueue::{
        ItemExponentialFailureRateLimiter, RateLimiter, RateLimitingQueue,
        default_controller_rate_limiter,
    },
};

use crate::{SECOND, WEB, body, compare, go_duration, paused};

// ---------------------------------------------------------------------------------------
// controller-runtime
// ---------------------------------------------------------------------------------------

/// The queue calls for each reconcile outcome: the port's `decide` (which its controller
/// applies, keeps I2 of `controller`), applied to a rate-limiting queue holding the request,
/// then `done`. Upstream's calls were logged by a queue wrapper inside a running controller.
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
                requeue_after: thirty,
            }),
        ),
        ("error", Err(Error::retry("boom"))),
        // The port's outcome is a Result: an error carries no Result, which is what upstream
        // does with one (ignores it).
        (
            "error + Result{RequeueAfter: 30s}",
            Err(Error::retry("boom")),
        ),
        ("TerminalError", Err(Error::terminal("boom"))),
        ("panic", Err(Error::Panic("boom".into()))),
    ];
    paused(async {
        let mut lines = Vec::new();
        for (name, outcome) in cases {
            let q = RateLimitingQueue::new(default_controller_rate_limiter());
            q.add(WEB.to_string());
            let req = within(SECOND, "get", q.get()).await.expect("queued");
            let mut calls = Vec::new();
            for action in decide(&outcome).1 {
                match action {
                    Action::Forget => {
                        q.forget(&req);
                        calls.push("Forget".to_string());
                    }
                    Action::AddAfter(d) => {
                        q.add_after(req.clone(), d);
                        calls.push(format!("AddAfter {}", go_duration(d)));
                    }
                    Action::AddRateLimited => {
                        q.add_rate_limited(req.clone());
                        calls.push("AddRateLimited".to_string());
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

/// What controller-runtime passes as the limiter with the priority queue: exponential only.
/// The port has no priority queue; this is its limiter at those parameters.
fn priority_queue_limiter() -> ItemExponentialFailureRateLimiter<String> {
    ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1000))
}

/// The three cases as recorded: `unset` is the limiter for an unconfigured controller;
/// without the priority queue it is the port's [`default_controller_rate_limiter`], with it
/// [`priority_queue_limiter`].
fn default_limiter_lines(unset: &dyn RateLimiter<String>) -> Vec<String> {
    let mut lines = vec!["UsePriorityQueue unset:".to_string()];
    limiter_ranges(&mut lines, unset);
    lines.push("UsePriorityQueue=false:".to_string());
    limiter_ranges(&mut lines, &default_controller_rate_limiter::<String>());
    lines.push("UsePriorityQueue=true:".to_string());
    limiter_ranges(&mut lines, &priority_queue_limiter());
    lines
}

/// The port follows v0.22: an unconfigured controller (v0.22's default: no priority queue)
/// gets [`default_controller_rate_limiter`], which is what the port's `Controller` uses.
#[test]
fn controller_runtime_v0_22_default_limiter() {
    let lines = default_limiter_lines(&default_controller_rate_limiter::<String>());
    compare("controller_runtime_v0.22_default_limiter", lines);
}

/// v0.24 made the priority queue, and with it the exponential-only limiter, the default.
/// The port follows v0.22 here (a named difference: README, "Which upstream it follows"), so
/// the unset case is rendered with the limiter v0.24 picks, not with the port's default.
#[test]
fn controller_runtime_v0_24_default_limiter() {
    compare(
        "controller_runtime_v0.24_default_limiter",
        default_limiter_lines(&priority_queue_limiter()),
    );
}

/// The named difference, shown: the port's default limiter is not v0.24's.
#[test]
fn the_ports_default_limiter_is_v0_22s_not_v0_24s() {
    let port = default_limiter_lines(&default_controller_rate_limiter::<String>());
    let path = format!(
        "{}/upstream/recorded/controller_runtime_v0.24_default_limiter.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let v024 = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let port: String = port.iter().map(|l| format!("{l}\n")).collect();
    assert_ne!(
        body(&v024),
        port,
        "v0.24's default now matches the port's: update the README"
    );
}
