//! Every check chapter 11's real-clock runs make. The module serves three chapter files, so
//! its lists are per part: chapter 10 lists them from [`storm`] (the first part's) and
//! [`findings`] (the third's; the second pins none), beside the write-storm checks of chapter
//! 06 that they mirror. Each band's runs are its file, `book/bases/NAME.tsv` (`cargo run -- measure kube`,
//! `… measure latency`), and the band is the rule of its kind over them
//! ([`crate::kit::basis::RULE`]).

use crate::kit::band::{Band, Reference};

/// kube-runtime, real clock: reconciles / `min(writes, span / cost + 1)` over its sweeps: a
/// same-run law.
pub const KUBE_REAL_RECONCILE_RATIO: Band<f64> = Band::law(
    0.59,
    1.272,
    "kube-runtime's reconciles follow min(writes, span / cost + 1), with the span and the cost \
     measured in the same run",
    "book/bases/kube_real_reconcile_ratio.tsv",
);
/// kube-runtime, real clock: events / reconciles where the cost is at most the gap: an upper
/// bound.
pub const KUBE_REAL_COLLAPSE_AT_OR_BELOW_GAP: Band<f64> = Band::at_most(
    3.03,
    "a kube-runtime reconciler that keeps up merges few events",
    "book/bases/kube_real_collapse_at_or_below_gap.tsv",
);
/// kube-runtime, real clock: the essay's storm (200 writes, 1 ms, 20 ms, one slot): reconciles,
/// shown beside the reference runs; the law carries the claim.
pub const KUBE_REAL_ESSAY_RECONCILES: Reference = Reference::new(
    "kube-runtime's essay storm under the real clock: reconciles",
    "the same-run law KUBE_REAL_RECONCILE_RATIO, checked on the sweeps of the same sitting",
    "book/bases/kube_real_essay_reconciles.tsv",
);
/// Real clock, in-process: median write → reconcile start, kube-runtime minus this crate, ms.
/// An upper bound: the whole tick kube-runtime waits is carried exactly under virtual time.
pub const REAL_LATENCY_P50_GAP_MS: Band<f64> = Band::at_most(
    6.004,
    "kube-runtime starts a reconcile at most a few milliseconds after this crate's controller",
    "book/bases/real_latency_p50_gap_ms.tsv",
);

/// The first part's lists ("What carries over to kube-rs").
pub mod storm {
    use super::{
        Band, KUBE_REAL_COLLAPSE_AT_OR_BELOW_GAP, KUBE_REAL_ESSAY_RECONCILES,
        KUBE_REAL_RECONCILE_RATIO, Reference,
    };

    /// Every band of the storm part, by name.
    pub const BANDS: &[(&str, Band<f64>)] = &[
        ("KUBE_REAL_RECONCILE_RATIO", KUBE_REAL_RECONCILE_RATIO),
        (
            "KUBE_REAL_COLLAPSE_AT_OR_BELOW_GAP",
            KUBE_REAL_COLLAPSE_AT_OR_BELOW_GAP,
        ),
    ];

    /// Every figure of the storm part shown and not checked, by name.
    pub const SHOWN: &[(&str, Reference)] =
        &[("KUBE_REAL_ESSAY_RECONCILES", KUBE_REAL_ESSAY_RECONCILES)];
}

/// The third part's lists ("What running kube-rs found").
pub mod findings {
    use super::{Band, REAL_LATENCY_P50_GAP_MS, Reference};

    /// Every band of the findings part, by name.
    pub const BANDS: &[(&str, Band<f64>)] = &[("REAL_LATENCY_P50_GAP_MS", REAL_LATENCY_P50_GAP_MS)];

    /// Every figure of the findings part shown and not checked, by name: none.
    pub const SHOWN: &[(&str, Reference)] = &[];
}
