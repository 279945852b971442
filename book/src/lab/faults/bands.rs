//! Chapter 12's band: the fault matrix's one real-clock figure.

use crate::kit::band::{Band, Reference};

/// The level design's reconciles under the slow handler (real clock): an upper bound, for the
/// claim is that the level design merges the events a slow handler lets pile up (the edge
/// design pays one reconcile per event).
pub const SLOW_HANDLER_RECONCILES: Band<u64> = Band::at_most(
    94,
    "behind a slow event handler, the level-triggered design merges events: far fewer \
     reconciles than the edge-triggered design's one per event",
    "book/bases/slow_handler_reconciles.tsv",
);

/// Every band above, by name (chapter 10's table).
pub const BANDS: &[(&str, Band<u64>)] = &[("SLOW_HANDLER_RECONCILES", SLOW_HANDLER_RECONCILES)];

/// Every figure shown and not checked, by name: none.
pub const SHOWN: &[(&str, Reference)] = &[];
