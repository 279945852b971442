//! Chapter 07's experiment: one write storm, two controllers side by side — the
//! level-triggered [`Controller`](controlloop::controller::Controller) (a queue of keys) and an
//! edge-triggered one that queues each event's payload — and what the second one loses.
//!
//! No upstream file: the edge-triggered design is the one client-go and controller-runtime
//! avoid. It is built here from the very same parts (the same informer, the same
//! [`RateLimitingQueue`], the same worker loop over the claim API); the only change is what goes
//! into the queue.
//!
//! ```text
//!                          ┌► informer ─► EnqueueRequestForObject ─► queue of Request ─► read the cache,
//!  writer: replicas 1..=N  │                                                              set replicas
//!  ──► API server ─watch───┤
//!                          └► informer ─► the event's payload ─────► queue of Payload ─► apply the change
//!                                                                                        the event carried
//!  each controller drives its own Downstream: the world it manages (replicas per widget)
//! ```
//!
//! The two designs exist once, in [`crate::lab::designs::trigger`] ([`start_level`],
//! [`start_edge`]), each run in the rig's controller [`Process`]: chapter 07 runs them unarmed ([`Design::unarmed`]), and chapter 12's
//! fault matrix arms their [`Hooks`] ([`Design::armed`]).
//!
//! Everything runs under tokio's paused clock against the embedded server in-process, so every
//! number in a [`Report`] is exact and the same on every run.
//!
//! # Invariants
//! 1. Both designs see the same writes, pay the same cost per reconcile (one [`Downstream`]
//!    command of `cost` each) and retry a failed command through `add_rate_limited`.
//! 2. The edge design's queue is a real `RateLimitingQueue`: it deduplicates equal items and
//!    never hands one item to two workers. Its payloads are simply never equal (each carries
//!    its event's resourceVersion), so neither guarantee ever applies.
//! 3. A killed controller loses everything in memory (informer cache, queue, workers); only
//!    the cluster and the downstreams survive (the rig's [`Process`] keeps this).
//!
//! # Concurrency
//! One current-thread runtime. The downstream's state is a `parking_lot` mutex, never held
//! across an await; the command's cost is a tokio sleep taken with the lock released, so two
//! workers can be inside one key's command at once — which the same-key detector counts.

mod storm;

use controlloop::{
    controller::Request,
    workqueue::{RateLimitingQueue, default_controller_rate_limiter},
};

pub use crate::lab::designs::trigger::{
    Armed, Backlog, Backoff, Change, Command, Config, Design, Downstream, Heard, Hooks, NAMESPACE,
    NoFaults, OBJECT, Payload, Process, QueuePayloads, Running, Unavailable, edge_worker,
    start_edge, start_level, unarmed,
};
pub use storm::{Before, Outcome, Params, Report, bill, check, edge, run, run_async, storms};

/// Three updates of one widget, queued as keys and as payloads: how many items each queue
/// holds (chapter 07's first block).
pub fn queue_items() -> String {
    crate::lab::rig::paused(async {
        // book: ch07_queue_items
        let keys = RateLimitingQueue::new(default_controller_rate_limiter());
        let payloads = RateLimitingQueue::new(default_controller_rate_limiter());
        for (rv, (from, to)) in [(10, (0, 1)), (11, (1, 2)), (12, (2, 3))] {
            let request = Request::new("default", "w");
            keys.add(request.clone()); // equal to the one waiting, if any: merged
            let change = Change::Updated { from, to };
            let resource_version = rv.to_string(); // each event's own: never equal
            payloads.add(Payload {
                request,
                resource_version,
                change,
            });
        }
        assert_eq!((keys.len(), payloads.len()), (1, 3));
        format!(
            "three updates of one widget\n  queue of keys:     {} item(s)\n  queue of payloads: {} item(s)",
            keys.len(),
            payloads.len()
        )
        // book: end ch07_queue_items
    })
}
