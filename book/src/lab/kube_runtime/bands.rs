//! Every band chapter 11's real-clock runs pin. Chapter 10 lists them from [`STORM`] and
//! [`FINDINGS`], beside
//! the write-storm bands of chapter 06 that they mirror. Each band's runs are its file,
//! `book/bases/NAME.tsv` (`cargo run -- measure kube`, `… measure latency`), and the band is
//! the rule over them ([`crate::kit::basis::RULE`]).

use crate::kit::band::Band;

/// kube-runtime, real clock: reconciles / `min(writes, span / cost + 1)` over its sweeps.
pub const KUBE_REAL_RECONCILE_RATIO: Band<f64> =
    Band::new(0.337, 2.23, "book/bases/kube_real_reconcile_ratio.tsv");
/// kube-runtime, real clock: events / reconciles where the cost is at most the gap.
pub const KUBE_REAL_COLLAPSE_AT_OR_BELOW_GAP: Band<f64> = Band::new(
    0.502,
    2.684,
    "book/bases/kube_real_collapse_at_or_below_gap.tsv",
);
/// kube-runtime, real clock: the essay's storm (200 writes, 1 ms, 20 ms, one slot).
pub const KUBE_REAL_ESSAY_RECONCILES: Band<u64> =
    Band::new(13, 112, "book/bases/kube_real_essay_reconciles.tsv");
/// Real clock, in-process: median write → reconcile start, kube-runtime minus this crate, ms.
pub const REAL_LATENCY_P50_GAP_MS: Band<f64> =
    Band::new(0.65, 5.358, "book/bases/real_latency_p50_gap_ms.tsv");

/// The storm part's bands, by name (the `f64` view of integer bands).
pub const STORM: &[(&str, Band<f64>)] = &[
    ("KUBE_REAL_RECONCILE_RATIO", KUBE_REAL_RECONCILE_RATIO),
    (
        "KUBE_REAL_COLLAPSE_AT_OR_BELOW_GAP",
        KUBE_REAL_COLLAPSE_AT_OR_BELOW_GAP,
    ),
    (
        "KUBE_REAL_ESSAY_RECONCILES",
        Band::new(
            KUBE_REAL_ESSAY_RECONCILES.lo as f64,
            KUBE_REAL_ESSAY_RECONCILES.hi as f64,
            KUBE_REAL_ESSAY_RECONCILES.basis,
        ),
    ),
];

/// The findings part's band.
pub const FINDINGS: &[(&str, Band<f64>)] = &[("REAL_LATENCY_P50_GAP_MS", REAL_LATENCY_P50_GAP_MS)];
