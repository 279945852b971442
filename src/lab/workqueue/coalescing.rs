//! Chapter 01's walk through the two sets: 100,000 adds of one key, a worker holding it while
//! 200 more arrive, then `done`.
//!
//! Follows client-go v0.36.3 `util/workqueue/queue.go` (`Add`, `Get`, `Done`, and the depth
//! metric of `metrics.go`, which counts the dirty set).

use crate as controlloop;

/// The walk, recording `len` and the depth metric after each step (snapshot
/// `ch01_coalescing`).
pub fn ch01_coalescing() {
    controlloop::lab::rig::paused(async {
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
        controlloop::book::snap::text("ch01_coalescing", table);
        // book: end ch01_coalescing
    });
}
