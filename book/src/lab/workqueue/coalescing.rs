//! Chapter 01's walk through the two sets: 100,000 adds of one key, a worker holding it while
//! 200 more arrive, then `done`.
//!
//! Follows client-go v0.36.3 `util/workqueue/queue.go` (`Add`, `Get`, `Done`, and the depth
//! metric of `metrics.go`, which counts the dirty set); then the same walk on the queue a
//! controller builds, under each controller-runtime release ([`controller_queue`]).

use crate as controlloop_book;
use controlloop::controller::{QueueKind, Release, Request, RequestQueue};

/// The walk, recording `len` and the depth metric after each step (snapshot
/// `ch01_coalescing`).
pub fn ch01_coalescing() {
    controlloop_book::lab::rig::paused(async {
        // book: ch01_coalescing
        use controlloop::workqueue::{InMemoryMetrics, Queue, QueueConfig};
        use std::fmt::Write;
        let metrics = InMemoryMetrics::new(); // client-go's depth gauge: the size of the dirty set
        let queue = Queue::with_config(QueueConfig {
            name: "ch01".into(),
            metrics_provider: Some(metrics.clone()),
        })
        .unwrap();
        let mut table = String::from("step                                 len  depth\n");
        let mut row = |step: &str, queue: &Queue<&str>| {
            let depth = metrics.snapshot("ch01").unwrap().depth;
            writeln!(table, "{step:<36} {:>3} {depth:>6}", queue.len()).unwrap();
        };

        for _ in 0..100_000 {
            queue.add("default/web"); // a hundred thousand changes to one object...
        }
        row("100000 adds of default/web", &queue);
        assert_eq!(queue.len(), 1); // ...are one piece of work

        let claim = queue.claim().await.unwrap(); // a worker takes it
        row("a worker claims it", &queue);
        for _ in 0..200 {
            queue.add("default/web"); // the object changes while the worker holds it
        }
        row("200 adds while the worker holds it", &queue);
        assert_eq!(queue.len(), 0); // not queued: no second worker may take it

        drop(claim); // done: the key goes back, once
        row("the worker is done", &queue);
        assert_eq!(queue.len(), 1);

        let again = queue.claim().await.unwrap();
        row("a second claim takes it", &queue);
        drop(again);
        queue.shut_down();
        assert!(
            queue.claim().await.is_none(),
            "two claims drained 100,200 adds"
        );
        assert_eq!(metrics.snapshot("ch01").unwrap().adds, 2); // two adds entered `dirty`
        controlloop_book::kit::snap::text("ch01_coalescing", table);
        // book: end ch01_coalescing
    });
}

// book: ch01_controller_queue
/// The walk on the queue a controller of `release` builds: client-go's rate-limiting queue
/// (v0.22) or controller-runtime's priority queue (v0.24, v0.25). Returns the table of `len`.
pub async fn controller_queue(release: Release) -> String {
    use futures::FutureExt;
    use std::fmt::Write;
    let queue = RequestQueue::for_release(release).unwrap();
    let web = Request::new("default", "web");
    let mut table = String::from("step                                 len\n");
    let mut row = |step: &str, queue: &RequestQueue| {
        writeln!(table, "{step:<36} {:>3}", queue.len()).unwrap();
    };

    for _ in 0..100_000 {
        queue.add(web.clone()); // a hundred thousand changes to one object...
    }
    row("100000 adds of default/web", &queue);
    assert_eq!(queue.len(), 1, "{release}"); // ...are one piece of work, on both queues

    let claim = queue.claim().await.unwrap(); // a worker takes it
    row("a worker claims it", &queue);
    for _ in 0..200 {
        queue.add(web.clone()); // the object changes while the worker holds it
    }
    row("200 adds while the worker holds it", &queue);
    // On both queues no second worker may take it while it is held...
    assert!(queue.claim().now_or_never().is_none(), "{release}");
    // ...but only client-go's queue keeps it out of `len`.
    let counted = queue.kind() == QueueKind::Priority;
    assert_eq!(queue.len(), usize::from(counted), "{release}");

    drop(claim); // done: the key goes back, once
    row("the worker is done", &queue);
    assert_eq!(queue.len(), 1, "{release}");
    let again = queue.claim().await.unwrap(); // a second claim takes it...
    row("a second claim takes it", &queue);
    drop(again);
    let hour = std::time::Duration::from_secs(3600);
    let third = tokio::time::timeout(hour, queue.claim()).await; // ...and nothing is left
    writeln!(table, "a third get within 1h: returned {}", third.is_ok()).unwrap();
    assert!(third.is_err(), "{release}: two claims served every add");
    queue.shut_down();
    table
}
// book: end ch01_controller_queue

/// [`controller_queue`] under both releases; the book's release is the snapshot
/// (`ch01_controller_queue`).
pub fn ch01_controller_queue() {
    controlloop_book::lab::rig::paused(async {
        for release in Release::ALL {
            controller_queue(release).await;
        }
        let table = controller_queue(Release::default()).await;
        controlloop_book::kit::snap::text("ch01_controller_queue", table);
    });
}
