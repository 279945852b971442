//! The queue's state machine against a reference model small enough to be obviously right.
//!
//! proptest generates sequences of add / get / done / shut_down over a handful of keys and
//! runs them on [`QueueCore`] and on the model side by side, comparing every observable
//! (what `get` returns, `len`, the dirty and processing sizes) after every step. Debug builds
//! also check the core's invariants I1–I3 after every mutation. proptest prints the failing
//! case's seed and a minimised sequence.

use std::collections::{BTreeSet, VecDeque};

use controlloop::workqueue::queue_core::{Get, QueueCore};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Add(u8),
    Get,
    /// Done for the n-th held item (modulo how many are held); a no-op when none is.
    Done(usize),
    /// Done for a key that may not be held (misuse): must change nothing.
    StrayDone(u8),
    ShutDown,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..6).prop_map(Op::Add),
        3 => Just(Op::Get),
        3 => any::<usize>().prop_map(Op::Done),
        1 => (0u8..6).prop_map(Op::StrayDone),
        1 => Just(Op::ShutDown),
    ]
}

/// The reference: a list for the queue, two ordered sets, written for clarity, not speed.
#[derive(Default)]
struct Model {
    queue: VecDeque<u8>,
    dirty: BTreeSet<u8>,
    processing: BTreeSet<u8>,
    shutting_down: bool,
}

impl Model {
    fn add(&mut self, k: u8) {
        if self.shutting_down || self.dirty.contains(&k) {
            return;
        }
        self.dirty.insert(k);
        if !self.processing.contains(&k) {
            self.queue.push_back(k);
        }
    }
    fn get(&mut self) -> Get<u8> {
        match self.queue.pop_front() {
            Some(k) => {
                self.dirty.remove(&k);
                self.processing.insert(k);
                Get::Item(k)
            }
            None if self.shutting_down => Get::ShutDown,
            None => Get::Empty,
        }
    }
    fn done(&mut self, k: u8) {
        if self.processing.remove(&k) && self.dirty.contains(&k) {
            self.queue.push_back(k);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_core_behaves_like_the_reference_model(ops in prop::collection::vec(op(), 1..120)) {
        let mut core = QueueCore::new();
        let mut model = Model::default();
        let mut held: Vec<u8> = Vec::new();
        for op in ops {
            match op {
                Op::Add(k) => { core.add(k); model.add(k); }
                Op::Get => {
                    let got = core.get();
                    prop_assert_eq!(&got, &model.get());
                    if let Get::Item(k) = got {
                        prop_assert!(!held.contains(&k), "{} handed out twice", k);
                        held.push(k);
                    }
                }
                Op::Done(i) if !held.is_empty() => {
                    let k = held.remove(i % held.len());
                    core.done(&k);
                    model.done(k);
                }
                Op::Done(_) => {}
                Op::StrayDone(k) => {
                    if !held.contains(&k) {
                        core.done(&k);
                        model.done(k);
                    }
                }
                Op::ShutDown => { core.shut_down(false); model.shutting_down = true; }
            }
            prop_assert_eq!(core.len(), model.queue.len());
            prop_assert_eq!(core.dirty_len(), model.dirty.len());
            prop_assert_eq!(core.processing_len(), model.processing.len());
            prop_assert!(core.check_invariants().is_ok());
        }
    }
}

/// The broken variant is caught by the same comparison: without a processing set, a held key
/// is handed out again.
#[test]
fn the_model_comparison_catches_the_queue_without_a_processing_set() {
    let mut core = QueueCore::without_processing_set();
    let mut model = Model::default();
    core.add(1u8);
    model.add(1);
    assert_eq!(core.get(), model.get());
    core.add(1);
    model.add(1);
    assert_ne!(
        core.get(),
        model.get(),
        "the broken queue hands out a held key"
    );
}
