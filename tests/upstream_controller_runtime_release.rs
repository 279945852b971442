//! What changes for a controller between controller-runtime v0.22.5 and v0.24.1, run on both
//! [`Release`]s: the priority a requeue keeps or takes (ports of v0.24.1's
//! `pkg/internal/controller/controller_test.go` priority cases, each named after its upstream
//! test), the low priority of unchanged objects (`pkg/handler/eventhandler.go`), and what the
//! priority queue does to a requeue that meets a change. The numbers in the test docs are the
//! items of `src/controller/release.rs`'s difference list.
//!
//! Every run is under tokio's paused clock against a scripted informer source
//! (`tests/controller_support`), with a bound on every await that could hang.

mod controller_support;

use std::{sync::Arc, time::Duration};

use controller_support::{
    Informer, Log, block_on_capturing, cm, informer, informer_with, req, spawn_run, until, within,
};
use controlloop::{
    cache::{HandlerPanic, InformerOptions, Scripted, WatchEvent},
    controller::{
        Builder, Context, Controller, LOW_PRIORITY, Outcome, ReconcileError,
        ReconcileResult as Res, Release, Request,
        priorityqueue::{AddOpts, Entry, Priority},
    },
    testing::RunningInformer,
    workqueue::ItemExponentialFailureRateLimiter,
};
use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;

const MS: Duration = Duration::from_millis(1);
const HOUR: Duration = Duration::from_secs(3600);

// ---- Result.Priority (item 8) ----

/// Queues "a" at priority 10 (as upstream's tests do), runs one reconcile of it that returns
/// `outcome`, and returns the entry the queue then holds for "a", if any. The limiter waits
/// an hour, so a rate-limited requeue is still waiting when the entry is read.
fn requeued_entry(builder: Builder<ConfigMap>, outcome: Outcome) -> Option<Entry> {
    block_on_capturing(async {
        let informer = informer(&[], vec![], HandlerPanic::Crash);
        let outcome = Mutex::new(Some(outcome));
        let c = builder
            .use_priority_queue(true)
            .with_rate_limiter(ItemExponentialFailureRateLimiter::new(HOUR, HOUR))
            .build(&informer, move |_req: Request, _ctx: Context<ConfigMap>| {
                let o = outcome.lock().take().expect("reconciled twice");
                async move { o }
            })
            .unwrap();
        let at_ten = AddOpts {
            priority: Some(10),
            ..AddOpts::default()
        };
        c.queue().add_with_opts(at_ten, [req("a")]);
        let running = RunningInformer::start(&informer);
        let run = spawn_run(&c);
        until("the reconcile never ran", || c.metrics().reconciles() == 1).await;
        let entry = c.queue().as_priority().unwrap().entry(&req("a"));
        c.shutdown();
        within("run never returned", run).await.unwrap().unwrap();
        running.stop().await.unwrap();
        entry
    })
    .0
}

/// The priority "a" is requeued at after `outcome`, under `release`'s controller (on the
/// priority queue, which v0.22 builds only when asked).
fn requeued_at(release: Release, outcome: Outcome) -> Priority {
    let entry = requeued_entry(Controller::builder("priority").release(release), outcome)
        .expect("a was not requeued");
    assert!(entry.ready_at.is_some(), "the requeue is not delayed");
    entry.priority
}

/// Upstream: "should retain the priority when the reconciler requests a requeue", "…with
/// RequeueAfter" and "…when there was an error": each requeue is added at the priority the
/// request was handed out with. Both releases.
#[test]
fn should_retain_the_priority_when_the_reconciler_requests_a_requeue() {
    for release in Release::ALL {
        let cases = [
            ("Requeue", Ok(Res::requeue())),
            ("RequeueAfter", Ok(Res::requeue_after(HOUR))),
            ("error", Err(ReconcileError::retry("oups"))),
        ];
        for (what, outcome) in cases {
            assert_eq!(requeued_at(release, outcome), 10, "{release}, {what}");
        }
    }
}

/// Upstream (v0.24.1): "should use the priority from Result when the reconciler requests a
/// requeue" and "…with RequeueAfter". v0.22 has no `Result.Priority`: the same results keep
/// the request's priority.
#[test]
fn should_use_the_priority_from_result_when_the_reconciler_requests_a_requeue() {
    let cases = [
        ("Requeue", Res::requeue().with_priority(99)),
        ("RequeueAfter", Res::requeue_after(HOUR).with_priority(99)),
    ];
    for (what, result) in cases {
        assert_eq!(requeued_at(Release::V0_24, Ok(result)), 99, "{what}");
        assert_eq!(requeued_at(Release::V0_22, Ok(result)), 10, "{what}");
    }
}

/// Upstream (v0.24.1): "should use the priority from Result when there was an error" returns
/// `Result{Priority: 99}` beside an error and expects 99. A Rust reconcile returns a result or
/// an error, never both, so the port's error requeue keeps the request's priority: a named
/// difference (`controller::reconcile`).
#[test]
fn an_error_carries_no_result_so_its_requeue_keeps_the_requests_priority() {
    assert_eq!(
        requeued_at(Release::V0_24, Err(ReconcileError::retry("oups"))),
        10
    );
}

/// A success leaves nothing queued under either release: `forget`, no add.
#[test]
fn a_success_requeues_nothing() {
    for release in Release::ALL {
        let builder = Controller::builder("p").release(release);
        assert_eq!(requeued_entry(builder, Ok(Res::done())), None, "{release}");
    }
}

// ---- Low priority for unchanged objects (item 14) ----

/// An informer that lists `names` at resourceVersion 1, plays `watch`, and resyncs every
/// `resync`.
fn resyncing_informer(
    names: &[&str],
    watch: Vec<Scripted<ConfigMap>>,
    resync: Duration,
) -> Arc<Informer> {
    informer_with(names, watch, InformerOptions::new(resync))
}

/// The priority at which each event's request reaches the controller's queue: the initial
/// list's create (t = 0), a change (rv 1 → 2, t = 1 s), the resync (t = 10 s: old and new
/// both at rv 2) and a delete (t = 11 s). No worker runs; the test takes each key itself.
fn queued_priorities(builder: Builder<ConfigMap>) -> Vec<(&'static str, Priority)> {
    block_on_capturing(async {
        let watch = vec![
            Scripted::After(Duration::from_secs(1)),
            Scripted::Event(WatchEvent::Modified(cm("a", "2"))),
            Scripted::After(Duration::from_secs(10)),
            Scripted::Event(WatchEvent::Deleted(cm("a", "3"))),
        ];
        let informer = resyncing_informer(&["a"], watch, Duration::from_secs(10));
        let c = builder
            .build(&informer, |_req: Request, _ctx: Context<ConfigMap>| async {
                Ok(Res::done())
            })
            .unwrap();
        let running = RunningInformer::start(&informer);
        let mut seen = vec![];
        for what in ["initial create", "change", "resync", "delete"] {
            let (key, priority) = within(
                "no request arrived: an event was lost",
                c.queue().get_with_priority(),
            )
            .await
            .expect("not shut down");
            c.queue().done(&key);
            seen.push((what, priority));
        }
        running.stop().await.unwrap();
        seen
    })
    .0
}

/// Upstream: `addToQueueCreate` / `addToQueueUpdate` (`pkg/handler/eventhandler.go`, the same
/// at both tags), as the port's controller applies them: on a priority queue, the initial
/// list and the resync are `LowPriority`; changes and deletes are 0. A rate-limiting queue
/// hands everything out at 0 (upstream's wrapper). So v0.24 gets the low priorities by
/// default, and v0.22 only with `use_priority_queue(true)`.
#[test]
fn initial_list_and_resync_requests_are_low_priority_on_a_priority_queue() {
    let low = [
        ("initial create", LOW_PRIORITY),
        ("change", 0),
        ("resync", LOW_PRIORITY),
        ("delete", 0),
    ];
    let flat = [
        ("initial create", 0),
        ("change", 0),
        ("resync", 0),
        ("delete", 0),
    ];
    let builder = || Controller::builder("handlers");
    assert_eq!(queued_priorities(builder()), low, "v0.24 (default)");
    assert_eq!(queued_priorities(builder().release(Release::V0_22)), flat);
    assert_eq!(
        queued_priorities(builder().release(Release::V0_22).use_priority_queue(true)),
        low
    );
    assert_eq!(
        queued_priorities(builder().use_priority_queue(false)),
        flat,
        "v0.24 on the rate-limiting queue"
    );
}

/// When these controllers' first reconcile starts: at once on every release, because these
/// tests let the informer sync before the controller starts, so the cache-sync wait's first
/// look finds it synced. (Where the informer's task and that first look race, a look that finds
/// it unsynced waits for the next poll, and the first reconcile starts 100 ms in.)
fn first_reconcile(_release: Release) -> Duration {
    Duration::ZERO
}

/// The order a one-worker controller reconciles "a", "b", "c" (all from the initial list)
/// when "c" changes 5 ms into "a"'s 10 ms reconcile (which starts at [`first_reconcile`]).
fn order_when_one_object_changes(release: Release) -> Vec<String> {
    block_on_capturing(async {
        let watch = vec![
            Scripted::After(first_reconcile(release) + 5 * MS),
            Scripted::Event(WatchEvent::Modified(cm("c", "2"))),
        ];
        let informer = informer(&["a", "b", "c"], watch, HandlerPanic::Crash);
        let order: Log<String> = Arc::default();
        let o = order.clone();
        let c = Controller::builder("order")
            .release(release)
            .build(&informer, move |req: Request, _ctx: Context<ConfigMap>| {
                o.lock().push(req.name);
                async {
                    tokio::time::sleep(10 * MS).await;
                    Ok(Res::done())
                }
            })
            .unwrap();
        let running = RunningInformer::start(&informer);
        // Synced before the controller looks, so that its first look finds the informer
        // synced on every run (see `first_reconcile`).
        within("the informer never synced", informer.wait_synced()).await;
        let run = spawn_run(&c);
        until("not every object was reconciled", || {
            c.metrics().success == 3
        })
        .await;
        c.shutdown();
        within("run never returned", run).await.unwrap().unwrap();
        running.stop().await.unwrap();
        order.lock().clone()
    })
    .0
}

/// Why the low priority exists: a controller starting over many existing objects serves a
/// real change before the rest of its initial list. Under v0.24 the change to "c" raises it
/// from `LowPriority` to 0 and it goes next; under v0.22 (FIFO) it waits its turn.
#[test]
fn a_change_overtakes_the_initial_list_on_the_priority_queue() {
    for release in [Release::V0_24, Release::V0_25] {
        assert_eq!(
            order_when_one_object_changes(release),
            ["a", "c", "b"],
            "{release}"
        );
    }
    assert_eq!(
        order_when_one_object_changes(Release::V0_22),
        ["a", "b", "c"]
    );
}

// ---- A requeue meets a change (item 6) ----

/// How many times "a" is reconciled in an hour when it changes 5 ms into its first, 10 ms
/// reconcile (which starts at [`first_reconcile`]), and that reconcile returns
/// `RequeueAfter(1 s)`; later reconciles succeed.
fn reconciles_when_a_requeue_after_meets_a_change(release: Release) -> Vec<Duration> {
    block_on_capturing(async {
        let watch = vec![
            Scripted::After(first_reconcile(release) + 5 * MS),
            Scripted::Event(WatchEvent::Modified(cm("a", "2"))),
        ];
        let informer = informer(&["a"], watch, HandlerPanic::Crash);
        let at: Log<tokio::time::Instant> = Arc::default();
        let a = at.clone();
        let c = Controller::builder("absorb")
            .release(release)
            .build(&informer, move |_req: Request, _ctx: Context<ConfigMap>| {
                let first = a.lock().is_empty();
                a.lock().push(tokio::time::Instant::now());
                async move {
                    if first {
                        tokio::time::sleep(10 * MS).await;
                        return Ok(Res::requeue_after(Duration::from_secs(1)));
                    }
                    Ok(Res::done())
                }
            })
            .unwrap();
        let started = tokio::time::Instant::now();
        let running = RunningInformer::start(&informer);
        within("the informer never synced", informer.wait_synced()).await; // as above
        let run = spawn_run(&c);
        tokio::time::sleep(HOUR).await;
        c.shutdown();
        within("run never returned", run).await.unwrap().unwrap();
        running.stop().await.unwrap();
        let at = at.lock().clone();
        at.iter().map(|t| *t - started).collect()
    })
    .0
}

/// On the priority queue a requeue for a key that is already ready merges into it (ready
/// stays ready): the change and the `RequeueAfter` are one reconcile, right after the first.
/// client-go's queue keeps them apart: the change now, the requeue a second later.
#[test]
fn a_requeue_after_is_absorbed_by_a_change_during_the_reconcile_on_the_priority_queue() {
    let s = Duration::from_secs(1);
    for release in [Release::V0_24, Release::V0_25] {
        let first = first_reconcile(release);
        assert_eq!(
            reconciles_when_a_requeue_after_meets_a_change(release),
            [first, first + 10 * MS],
            "{release}"
        );
    }
    assert_eq!(
        reconciles_when_a_requeue_after_meets_a_change(Release::V0_22),
        [Duration::ZERO, 10 * MS, 10 * MS + s]
    );
}
