//! The queue's state machine against a reference model small enough to be obviously right.
//!
//! proptest generates sequences of add / get / done / shut_down / shut_down_with_drain over a
//! handful of keys and runs them on [`QueueCore`] and on the model (`cores_support/queue.rs`,
//! written from client-go v0.36.3 `util/workqueue/queue.go`) side by side, comparing every
//! outcome and observable after every step, then shuts both down and drains them. Debug builds
//! also check the core's invariants I1–I3 after every mutation. Each run prints its seed
//! (`FUZZ_SEED=<seed>` replays it, `FUZZ_CASES=<n>` lengthens it) and a failure shows the
//! minimised sequence. The same check runs the `cargo fuzz` target `queue_core` (`fuzz/`),
//! whose committed seeds are replayed here.

#[path = "cores_support/mod.rs"]
mod cores;
#[path = "cores_support/runner.rs"]
mod runner;

use std::cell::RefCell;

use controlloop::workqueue::QueueCore;
use cores::queue::{KEYS, QueueOp, Reached, check, decode};
use proptest::prelude::*;

fn op() -> impl Strategy<Value = QueueOp> {
    prop_oneof![
        4 => (0..KEYS).prop_map(QueueOp::Add),
        3 => Just(QueueOp::Get),
        3 => any::<usize>().prop_map(QueueOp::Done),
        1 => (0..KEYS).prop_map(QueueOp::StrayDone),
        1 => Just(QueueOp::ShutDown),
        1 => Just(QueueOp::ShutDownWithDrain),
    ]
}

fn ops() -> impl Strategy<Value = Vec<QueueOp>> {
    prop::collection::vec(op(), 1..120)
}

/// Every outcome of `add` and `done`, and the end of a drain, occurs in a default run: the
/// generator is not stuck on one branch.
#[test]
fn the_core_behaves_like_the_reference_model() {
    let reached = RefCell::new(Reached::default());
    runner::holds("queue_core", 512, ops(), |ops| {
        let r = check(&ops, QueueCore::new())?;
        reached.borrow_mut().merge(r);
        Ok(())
    });
    let r = reached.into_inner();
    eprintln!("queue_core reached: {r:?}");
    assert!(
        r.adds.iter().chain(&r.dones).all(|&n| n > 0) && r.drains_ended > 0,
        "a branch was never reached: {r:?}"
    );
}

/// The broken variant is caught by the same check: without a processing set, a held key is
/// handed out again.
#[cfg(feature = "broken")]
#[test]
fn the_model_check_catches_the_queue_without_a_processing_set() {
    use controlloop::workqueue::broken::QueueCoreWithoutProcessingSet;
    let (message, minimal) = runner::finds("queue_core broken", 512, ops(), |ops| {
        check(&ops, QueueCoreWithoutProcessingSet::new()).map(drop)
    });
    // The first step that shows it: a get that leaves nothing processing, or a stray done
    // that the broken queue cannot tell from a real one.
    let at_get = message.contains("(Get): state") && message.contains("processing: 0");
    let at_stray = message.contains("the core gives Released, the model NotProcessing");
    assert!(at_get || at_stray, "caught for another reason: {message}");
    assert!(minimal.len() <= 2, "not minimised: {minimal:?}");
}

/// The committed seeds of the `cargo fuzz` target pass, and every byte string decodes.
#[test]
fn the_fuzz_seeds_pass() {
    for (name, data) in runner::corpus("queue_core") {
        let ops = decode(&data);
        assert!(!ops.is_empty(), "{name}: decodes to nothing");
        if let Err(e) = check(&ops, QueueCore::new()) {
            panic!("{name}: {e}");
        }
    }
}
