//! Where a RealFIFO batch ends, and what a store transaction writes (client-go
//! `tools/cache/the_real_fifo.go` `PopBatch`, `thread_safe_store.go` `Transaction`): the
//! scenarios recorded on both v0.37 and v0.38, whose bodies differ between them, are run by
//! chapter 13's experiments and compared with both recordings in
//! `book/tests/recorded_upstream.rs`; here, which informer follows which.

use controlloop::{
    cache::{InformerOptions, select_fifo},
    features::FeatureGates,
};

use crate::SECOND;

/// The informer at 1.38 builds its FIFO and store as v0.38's, at 1.37 as v0.37.2's.
#[test]
fn the_informer_follows_v0_38_batches_only_at_1_38() {
    let at = |minor| select_fifo(&FeatureGates::at_minor(minor).expect("modelled"));
    assert!(!at(37).batches_repeat_keys);
    assert!(at(38).batches_repeat_keys);
    assert!(
        !InformerOptions::new(SECOND)
            .gates
            .emulated_version()
            .minor
            .eq(&38)
    );
}
