//! Every check the write-storm experiments make under the real clock. Chapter 10 lists them from
//! [`BANDS`] and [`SHOWN`], so the page and the checks cannot disagree. Each band's runs are its
//! file, `book/bases/NAME.tsv` (`cargo run -- measure storms`), and the band is the rule of its
//! kind over them ([`crate::kit::basis::RULE`]).

use crate::kit::band::{Band, Reference};

/// Real clock: reconciles / `min(writes, span / cost + 1)`, for every sweep run: a same-run law,
/// the span and the cost measured in the run itself.
pub const REAL_RECONCILE_RATIO: Band<f64> = Band::law(
    0.686,
    1.374,
    "a storm's reconciles follow min(writes, span / cost + 1), with the span and the reconcile's \
     cost measured in the same run",
    "book/bases/real_reconcile_ratio.tsv",
);
/// Real clock: events / reconciles where the cost is at most the gap and the reconciles kept
/// up in fact (their median duration under the writes' mean interval; see
/// [`super::Report::behind_in_fact`]): an upper bound.
pub const REAL_COLLAPSE_AT_OR_BELOW_GAP: Band<f64> = Band::at_most(
    2.352,
    "a reconciler that keeps up merges (almost) nothing: about one reconcile per event",
    "book/bases/real_collapse_at_or_below_gap.tsv",
);
/// Real clock: the essay's run (200 writes, 1 ms, 20 ms, one worker): reconciles, shown beside
/// the reference runs and not checked. How many the count is follows the span, which follows
/// the machine; the law ([`REAL_RECONCILE_RATIO`]) carries the claim.
pub const REAL_ESSAY_RECONCILES: Reference = Reference::new(
    "the essay's storm under the real clock: reconciles",
    "the same-run law REAL_RECONCILE_RATIO, checked on the same run",
    "book/bases/real_essay_reconciles.tsv",
);
/// Real clock: span / writes − gap, in ms: what one write costs beyond the gap (an HTTP
/// round trip, plus how late a 1 ms tokio sleep wakes). Shown, not checked: it is the machine's
/// figure, not a claim of the book's, and the law divides it out (a longer span, more
/// reconciles).
pub const REAL_WRITE_OVERHEAD_MS: Reference = Reference::new(
    "what a write through the embedded server costs beyond its gap, ms",
    "nothing: it is the machine's figure; the law REAL_RECONCILE_RATIO divides it out",
    "book/bases/real_write_overhead_ms.tsv",
);
/// Real clock: converge − cost, in ms: how long after the last write the last reconcile
/// ended, beyond one reconcile's cost. An upper bound.
pub const REAL_CONVERGE_OVERHEAD_MS: Band<f64> = Band::at_most(
    198.776,
    "the controller is quiet on the last value soon after the last write",
    "book/bases/real_converge_overhead_ms.tsv",
);

/// Every band above, by name.
pub const BANDS: &[(&str, Band<f64>)] = &[
    ("REAL_RECONCILE_RATIO", REAL_RECONCILE_RATIO),
    (
        "REAL_COLLAPSE_AT_OR_BELOW_GAP",
        REAL_COLLAPSE_AT_OR_BELOW_GAP,
    ),
    ("REAL_CONVERGE_OVERHEAD_MS", REAL_CONVERGE_OVERHEAD_MS),
];

/// Every figure shown and not checked, by name.
pub const SHOWN: &[(&str, Reference)] = &[
    ("REAL_ESSAY_RECONCILES", REAL_ESSAY_RECONCILES),
    ("REAL_WRITE_OVERHEAD_MS", REAL_WRITE_OVERHEAD_MS),
];
