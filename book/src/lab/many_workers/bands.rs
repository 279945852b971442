//! Every band chapter 18's reconciler that burns CPU pins. Each band's runs are its file,
//! `book/bases/NAME.tsv` (`cargo run -- measure cpu`: the sweep of [`super::cpu::pairs`], the
//! controller on two threads, sleeping and burning, at every cost), and the band is the rule
//! over them ([`crate::kit::basis::RULE`]). One band holds both reconcilers: the claim it
//! checks is that the burning one lands where the sleeping one does.

use crate::kit::band::Band;

/// reconciles / `min(writes, span / cost + 1)` (chapter 06's ratio), every run of the sweep.
pub const CPU_RECONCILE_RATIO: Band<f64> =
    Band::new(0.297, 2.17, "book/bases/cpu_reconcile_ratio.tsv");
/// From sending a write to the informer's second handler hearing its value: the median of the
/// 200 writes, ms.
pub const CPU_EVENT_P50_MS: Band<f64> = Band::new(0.179, 2.466, "book/bases/cpu_event_p50_ms.tsv");
/// The same, the 99th percentile, ms.
pub const CPU_EVENT_P99_MS: Band<f64> =
    Band::new(0.365, 115.984, "book/bases/cpu_event_p99_ms.tsv");
/// From sending a write to the start of the first reconcile that read it (or a later value):
/// the median of the 200 writes, in reconcile costs.
pub const CPU_RECONCILE_P50_PER_COST: Band<f64> =
    Band::new(0.213, 2.164, "book/bases/cpu_reconcile_p50_per_cost.tsv");
/// The share of the 200 values the second handler heard while a reconcile was running.
pub const CPU_HEARD_DURING_RECONCILE: Band<f64> =
    Band::new(0.42, 1.99, "book/bases/cpu_heard_during_reconcile.tsv");

/// The same five quantities on the real control plane (`cargo run --features tls -- measure
/// cpu_real`: the 20 ms storm sleeping and then burning, the writer and the informer on
/// kube-apiserver): bands of their own, for a write there costs what kube-apiserver and etcd
/// cost on the same two cores.
pub const REAL_CPU_RECONCILE_RATIO: Band<f64> =
    Band::new(0.446, 2.016, "book/bases/real_cpu_reconcile_ratio.tsv");
/// The median write-to-handler latency on the real control plane, ms.
pub const REAL_CPU_EVENT_P50_MS: Band<f64> =
    Band::new(0.799, 9.832, "book/bases/real_cpu_event_p50_ms.tsv");
/// Its 99th percentile, ms.
pub const REAL_CPU_EVENT_P99_MS: Band<f64> =
    Band::new(2.157, 145.29, "book/bases/real_cpu_event_p99_ms.tsv");
/// The median write-to-reconcile latency on the real control plane, in reconcile costs.
pub const REAL_CPU_RECONCILE_P50_PER_COST: Band<f64> = Band::new(
    0.288,
    1.546,
    "book/bases/real_cpu_reconcile_p50_per_cost.tsv",
);
/// The share of values heard while a reconcile ran, on the real control plane.
pub const REAL_CPU_HEARD_DURING_RECONCILE: Band<f64> = Band::new(
    0.477,
    1.99,
    "book/bases/real_cpu_heard_during_reconcile.tsv",
);

/// Every band above, by name.
pub const BANDS: &[(&str, Band<f64>)] = &[
    ("CPU_RECONCILE_RATIO", CPU_RECONCILE_RATIO),
    ("CPU_EVENT_P50_MS", CPU_EVENT_P50_MS),
    ("CPU_EVENT_P99_MS", CPU_EVENT_P99_MS),
    ("CPU_RECONCILE_P50_PER_COST", CPU_RECONCILE_P50_PER_COST),
    ("CPU_HEARD_DURING_RECONCILE", CPU_HEARD_DURING_RECONCILE),
    ("REAL_CPU_RECONCILE_RATIO", REAL_CPU_RECONCILE_RATIO),
    ("REAL_CPU_EVENT_P50_MS", REAL_CPU_EVENT_P50_MS),
    ("REAL_CPU_EVENT_P99_MS", REAL_CPU_EVENT_P99_MS),
    (
        "REAL_CPU_RECONCILE_P50_PER_COST",
        REAL_CPU_RECONCILE_P50_PER_COST,
    ),
    (
        "REAL_CPU_HEARD_DURING_RECONCILE",
        REAL_CPU_HEARD_DURING_RECONCILE,
    ),
];
