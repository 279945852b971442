//! Chapter 01's real-clock contention harness: its bands and the figures it shows beside their
//! reference runs.
//!
//! The real-clock run's checks. The durable claims (0 violations through the queue, one
//! reconcile per add through the channel, at least one reconcile per key) are asserted exactly
//! and are not here.

use crate::kit::band::{Band, Reference};

/// The queue's reconciles per add, out of 320,000 adds over 64 keys: shown, not checked.
/// How far the queue merges swings with how often the workers keep pace with the producer,
/// which is the machine's doing (quiet runs of its file fall into two groups, near 0.0003
/// and from 0.01 to 0.022). That it merges at all is the same-run law asserted on every
/// run: at least one reconcile per key, fewer reconciles than adds.
pub const QUEUE_RECONCILES_PER_ADD: Reference = Reference::new(
    "the queue's reconciles per add",
    "the same-run law asserted on every run: 64 <= reconciles < adds",
    "book/bases/queue_reconciles_per_add.tsv",
);
/// Channel same-key violations: shown, not checked. Its runs include 0, so "more than 0" is
/// carried by the fixed-schedule run under virtual time.
pub const CHANNEL_VIOLATIONS: Reference = Reference::new(
    "how often a channel handed a held key to a second worker",
    "the fixed-schedule run under virtual time (more than 0 through the channel, exactly)",
    "book/bases/channel_violations.tsv",
);

/// Every band of the harness, by name, for the book's table of bands: none, for no figure of
/// this harness survives every machine.
pub const BANDS: &[(&str, Band<f64>)] = &[];

/// Every figure shown and not checked, by name.
pub const SHOWN: &[(&str, Reference)] = &[
    ("QUEUE_RECONCILES_PER_ADD", QUEUE_RECONCILES_PER_ADD),
    ("CHANNEL_VIOLATIONS", CHANNEL_VIOLATIONS),
];
