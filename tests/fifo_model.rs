//! DeltaFIFO and RealFIFO against reference models small enough to be obviously right.
//!
//! proptest generates sequences of producer calls (add, update, delete, replace, resync,
//! bookmark), Pops and batch Pops whose processing may fail, closes, and changes to the known
//! objects (including lookups that fail and listed keys that are gone), over five names and
//! one name whose key cannot be made. Each sequence runs on the FIFO and on its model
//! (`cores_support/delta_fifo.rs`, `cores_support/real_fifo.rs`, written from client-go v0.36.3
//! `tools/cache/delta_fifo.go` and `the_real_fifo.go`) in every mode upstream accepts,
//! comparing every result and the whole queue after every step, then closes both and drains
//! them. Each run prints its seed (`FUZZ_SEED=<seed>` replays it, `FUZZ_CASES=<n>` lengthens
//! it). The same checks run the `cargo fuzz` targets `delta_fifo` and `real_fifo` (`fuzz/`),
//! whose committed seeds are replayed here.

#[path = "cores_support/mod.rs"]
mod cores;
#[path = "cores_support/runner.rs"]
mod runner;

use std::cell::RefCell;

use controlloop::cache::{DeltaFifo, RealFifo};
use cores::fifo::{BAD, FifoOp, Known, Ob, Reached};
use cores::{delta_fifo, real_fifo};
use proptest::prelude::*;

fn ob() -> impl Strategy<Value = Ob> {
    // The unkeyable name one time in twelve.
    (prop_oneof![11 => 0..BAD, 1 => Just(BAD)], 0u8..8).prop_map(|(key, ver)| Ob { key, ver })
}

fn op() -> impl Strategy<Value = FifoOp> {
    let known = prop_oneof![
        Just(Known::Absent),
        Just(Known::Failing),
        Just(Known::Phantom),
        (0u8..8).prop_map(Known::Present),
    ];
    prop_oneof![
        3 => ob().prop_map(FifoOp::Add),
        2 => ob().prop_map(FifoOp::Update),
        2 => ob().prop_map(FifoOp::Delete),
        2 => (prop::collection::vec(ob(), 0..5), 0u8..4).prop_map(|(l, rv)| FifoOp::Replace(l, rv)),
        1 => Just(FifoOp::Resync),
        1 => (0u8..4).prop_map(FifoOp::Bookmark),
        2 => prop::bool::weighted(0.2).prop_map(|fail| FifoOp::Pop { fail }),
        2 => prop::bool::weighted(0.2).prop_map(|fail| FifoOp::PopBatch { fail }),
        1 => Just(FifoOp::Close),
        3 => (0..BAD, known).prop_map(|(k, known)| FifoOp::Known(k, known)),
    ]
}

fn ops() -> impl Strategy<Value = Vec<FifoOp>> {
    prop::collection::vec(op(), 1..100)
}

fn delta_config() -> impl Strategy<Value = delta_fifo::Config> {
    (any::<bool>(), any::<bool>()).prop_map(|(known, emit_replaced)| delta_fifo::Config {
        known,
        emit_replaced,
    })
}

fn real_config() -> impl Strategy<Value = real_fifo::Config> {
    (any::<bool>(), any::<bool>(), any::<bool>(), 1usize..5).prop_map(
        |(atomic, bookmarks, unlock, batch_size)| real_fifo::Config {
            atomic,
            bookmarks: atomic && bookmarks,
            unlock: atomic && unlock,
            batch_size,
        },
    )
}

/// Every kind of delta, both tombstones, failed processing, errors, suppressed deletes and
/// grouped deltas occur in a default run: the generator is not stuck on one branch.
#[test]
fn delta_fifo_behaves_like_the_reference_model() {
    let reached = RefCell::new(Reached::default());
    runner::holds(
        "delta_fifo",
        512,
        (delta_config(), ops()),
        |(config, ops)| {
            let r = delta_fifo::check(config, &ops, DeltaFifo::new)?;
            reached.borrow_mut().merge(r);
            Ok(())
        },
    );
    let r = reached.into_inner();
    eprintln!("delta_fifo reached: {r:?}");
    // Added, Updated, Deleted, Replaced, Sync (ReplacedAll, SyncAll, Bookmark are RealFIFO's).
    let types = [0, 1, 2, 3, 5].map(|t| r.popped[t]);
    assert!(
        types.iter().all(|&n| n > 0)
            && r.tombstones.iter().all(|&n| n > 0)
            && [r.initial, r.failed, r.errors, r.suppressed, r.grouped]
                .iter()
                .all(|&n| n > 0),
        "a branch was never reached: {r:?}"
    );
}

/// Every kind of delta, both tombstones, batches, failed processing and errors occur in a
/// default run.
#[test]
fn real_fifo_behaves_like_the_reference_model() {
    let reached = RefCell::new(Reached::default());
    runner::holds("real_fifo", 512, (real_config(), ops()), |(config, ops)| {
        let r = real_fifo::check(config, &ops, RealFifo::new)?;
        reached.borrow_mut().merge(r);
        Ok(())
    });
    let r = reached.into_inner();
    eprintln!("real_fifo reached: {r:?}");
    assert!(
        r.popped.iter().all(|&n| n > 0)
            && r.tombstones.iter().all(|&n| n > 0)
            && [r.initial, r.failed, r.errors, r.batches]
                .iter()
                .all(|&n| n > 0),
        "a branch was never reached: {r:?}"
    );
}

/// The DeltaFIFO without relist deletions is caught: a relist that leaves a queued or known
/// key out queues no tombstone for it.
#[test]
fn the_model_check_catches_a_delta_fifo_without_relist_deletions() {
    let (message, _) = runner::finds(
        "delta_fifo broken",
        512,
        (delta_config(), ops()),
        |(config, ops)| {
            delta_fifo::check(config, &ops, DeltaFifo::without_relist_deletions).map(drop)
        },
    );
    // Either the relist itself leaves a key unqueued (or the sync count short), or the next
    // Pop of a queued key lacks the tombstone the model carries.
    let at_replace = message.contains("(Replace(") && message.contains("state:");
    let at_pop = message.contains("pop:") && message.contains("Tomb(");
    assert!(at_replace || at_pop, "caught for another reason: {message}");
}

/// The RealFIFO whose batches cross the initial-list boundary is caught: a batch takes an
/// event queued after the first relist.
#[test]
fn the_model_check_catches_a_real_fifo_batching_across_the_initial_list() {
    let (message, _) = runner::finds(
        "real_fifo broken",
        512,
        (real_config(), ops()),
        |(config, ops)| {
            real_fifo::check(config, &ops, RealFifo::with_batches_across_the_initial_list).map(drop)
        },
    );
    assert!(
        message.contains("(PopBatch")
            && message.contains("pop:")
            && message.contains("initial: true"),
        "caught for another reason: {message}"
    );
}

/// The committed seeds of both `cargo fuzz` targets pass, against the real FIFOs.
#[test]
fn the_fuzz_seeds_pass() {
    for (name, data) in runner::corpus("delta_fifo") {
        let (config, ops) = delta_fifo::decode(&data);
        assert!(!ops.is_empty(), "delta_fifo/{name}: decodes to nothing");
        if let Err(e) = delta_fifo::check(config, &ops, DeltaFifo::new) {
            panic!("delta_fifo/{name}: {e}");
        }
    }
    for (name, data) in runner::corpus("real_fifo") {
        let (config, ops) = real_fifo::decode(&data);
        assert!(!ops.is_empty(), "real_fifo/{name}: decodes to nothing");
        if let Err(e) = real_fifo::check(config, &ops, RealFifo::new) {
            panic!("real_fifo/{name}: {e}");
        }
    }
}

/// Every operation decodes from some byte, for both targets: the fuzzers can reach them all.
#[test]
fn every_operation_decodes_from_some_byte() {
    let mut kinds = std::collections::BTreeSet::new();
    for first in 0..=255u8 {
        for op in cores::Bytes::new(&[first, 1, 1, 1]).ops(cores::fifo::decode_op) {
            kinds.insert(
                format!("{op:?}")
                    .split(['(', ' '])
                    .next()
                    .unwrap()
                    .to_owned(),
            );
        }
    }
    assert_eq!(kinds.len(), 10, "{kinds:?}");
}
