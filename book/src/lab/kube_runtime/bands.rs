//! Every band chapter 11's real-clock runs pin, with its basis. Chapter 10 lists them from
//! [`ALL`], beside the write-storm bands of chapter 06 that they mirror.
//!
//! Measured with the chapter's own runs: the essay's storm on both runtimes and kube-runtime's
//! three real-clock sweeps (run as the chapter runs them: three sweeps at once, each with its
//! own embedded server over HTTP, dev-profile build), and the write → reconcile race (both
//! controllers on one in-process server, real clock), on the 2-core machine while other builds
//! kept its load average between 3 and 10.

use crate::kit::band::Band;

/// kube-runtime, real clock: reconciles / `min(writes, span / cost + 1)` over its sweeps.
pub const KUBE_REAL_RECONCILE_RATIO: Band<f64> = Band::new(
    0.5,
    2.0,
    "120 kube-runtime sweep storms (8 rounds): 0.705..=1.389 (the same spread as ours: lowest \
     at 5 ms, highest at gap 0); the same band as REAL_RECONCILE_RATIO",
);
/// kube-runtime, real clock: events / reconciles where the cost is at most the gap.
pub const KUBE_REAL_COLLAPSE_AT_OR_BELOW_GAP: Band<f64> = Band::new(
    1.0,
    2.0,
    "16 kube-runtime storms at cost 0 and 1 ms, gap 1 ms: 1.117..=1.389, above ours \
     (1.000..=1.093): every trigger waits for the scheduler's next millisecond, and a write \
     arriving meanwhile merges into it; margin to 2.0",
);
/// kube-runtime, real clock: the essay's storm (200 writes, 1 ms, 20 ms, one slot).
pub const KUBE_REAL_ESSAY_RECONCILES: Band<u64> = Band::new(
    16,
    48,
    "8 kube-runtime essay storms: 24..=29 (ours in the same runs: 25..=29); the same band as \
     REAL_ESSAY_RECONCILES",
);
/// Real clock, in-process: median write → reconcile start, kube-runtime minus this crate, ms.
pub const REAL_LATENCY_P50_GAP_MS: Band<f64> = Band::new(
    0.5,
    5.0,
    "8 races of 200-300 writes, dev-profile build: 1.208..=2.247 ms (ours 0.364..=0.415, kube-runtime \
     1.572..=2.659: one tick, or two); the scheduler's millisecond is the floor, load the ceiling",
);

/// Every band above, by name (the `f64` view of integer bands).
pub const ALL: &[(&str, Band<f64>)] = &[
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
    ("REAL_LATENCY_P50_GAP_MS", REAL_LATENCY_P50_GAP_MS),
];
