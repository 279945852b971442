//! Every band the write-storm experiments pin. Chapter 10 lists them from [`ALL`], so the
//! page and the checks cannot disagree. Each band's runs are its file, `book/bases/NAME.tsv`
//! (`cargo run -- measure storms`), and the band is the rule over them
//! ([`crate::kit::basis::RULE`]).

use crate::kit::band::Band;

/// Real clock: reconciles / `min(writes, span / cost + 1)`, for every sweep run.
pub const REAL_RECONCILE_RATIO: Band<f64> =
    Band::new(0.406, 2.296, "book/bases/real_reconcile_ratio.tsv");
/// Real clock: events / reconciles where the cost is at most the gap and the reconciles kept
/// up in fact (their median duration under the writes' mean interval; see
/// [`super::Report::behind_in_fact`]).
pub const REAL_COLLAPSE_AT_OR_BELOW_GAP: Band<f64> =
    Band::new(0.5, 2.352, "book/bases/real_collapse_at_or_below_gap.tsv");
/// Real clock: the essay's run (200 writes, 1 ms, 20 ms, one worker): reconciles.
pub const REAL_ESSAY_RECONCILES: Band<u64> =
    Band::new(14, 90, "book/bases/real_essay_reconciles.tsv");
/// Real clock: span / writes − gap, in ms: what one write costs beyond the gap (an HTTP
/// round trip, plus how late a 1 ms tokio sleep wakes).
pub const REAL_WRITE_OVERHEAD_MS: Band<f64> =
    Band::new(0.762, 11.902, "book/bases/real_write_overhead_ms.tsv");
/// Real clock: converge − cost, in ms: how long after the last write the last reconcile
/// ended, beyond one reconcile's cost.
pub const REAL_CONVERGE_OVERHEAD_MS: Band<f64> =
    Band::new(0.0, 190.408, "book/bases/real_converge_overhead_ms.tsv");

/// Every band above, by name (the `f64` view of integer bands).
pub const ALL: &[(&str, Band<f64>)] = &[
    ("REAL_RECONCILE_RATIO", REAL_RECONCILE_RATIO),
    (
        "REAL_COLLAPSE_AT_OR_BELOW_GAP",
        REAL_COLLAPSE_AT_OR_BELOW_GAP,
    ),
    (
        "REAL_ESSAY_RECONCILES",
        Band::new(
            REAL_ESSAY_RECONCILES.lo as f64,
            REAL_ESSAY_RECONCILES.hi as f64,
            REAL_ESSAY_RECONCILES.basis,
        ),
    ),
    ("REAL_WRITE_OVERHEAD_MS", REAL_WRITE_OVERHEAD_MS),
    ("REAL_CONVERGE_OVERHEAD_MS", REAL_CONVERGE_OVERHEAD_MS),
];
