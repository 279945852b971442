//! Every band chapter 18's reconciler that burns CPU pins. Each band's runs are its file,
//! `book/bases/NAME.tsv` (`cargo run -- measure cpu`: the sweep of [`super::cpu::pairs`], the
//! controller on two threads, sleeping and burning, at every cost), and the band is the rule of
//! its kind over them ([`crate::kit::basis::RULE`]). One band holds both reconcilers: the claim
//! it checks is that the burning one lands where the sleeping one does.

use crate::kit::band::{Band, Reference};

/// reconciles / `min(writes, span / cost + 1)` (chapter 06's law), every run of the sweep.
pub const CPU_RECONCILE_RATIO: Band<f64> = Band::law(
    0.532,
    1.227,
    "with the controller on two threads, a reconcile that burns CPU follows chapter 06's law as \
     one that sleeps does",
    "book/bases/cpu_reconcile_ratio.tsv",
);
/// From sending a write to the informer's second handler hearing its value: the median of the
/// 200 writes, ms. An upper bound.
pub const CPU_EVENT_P50_MS: Band<f64> = Band::at_most(
    2.71,
    "the informer's handlers hear a write within milliseconds while a reconcile burns CPU",
    "book/bases/cpu_event_p50_ms.tsv",
);
/// The same, the 99th percentile, ms. An upper bound.
pub const CPU_EVENT_P99_MS: Band<f64> = Band::at_most(
    115.984,
    "no write waits for the informer as long as a burning reconcile would make it wait on one \
     thread",
    "book/bases/cpu_event_p99_ms.tsv",
);
/// From sending a write to the start of the first reconcile that read it (or a later value):
/// the median of the 200 writes, in reconcile costs. An upper bound.
pub const CPU_RECONCILE_P50_PER_COST: Band<f64> = Band::at_most(
    3.274,
    "a write is reconciled within about one reconcile's cost",
    "book/bases/cpu_reconcile_p50_per_cost.tsv",
);
/// The share of the 200 values the second handler heard while a reconcile was running, where
/// the process may use two CPUs or more (its runs: every regime but one-core). A lower bound: a
/// share has no upper end above 1.
pub const CPU_HEARD_DURING_RECONCILE: Band<f64> = Band::at_least(
    0.42,
    "the informer goes on hearing writes while a reconcile runs",
    "book/bases/cpu_heard_during_reconcile.tsv",
);

/// The same share, measured with the process pinned to one CPU: shown, not checked. The two
/// runtime threads then share one CPU, and a reconcile that burns it can keep the informer's
/// thread from running: the claim of [`CPU_HEARD_DURING_RECONCILE`] needs two CPUs, and is not
/// checked where the process may use one ([`super::cpu::check`]).
pub const CPU_HEARD_DURING_RECONCILE_ONE_CORE: Reference = Reference::new(
    "on one CPU, the share of values heard while a reconcile ran",
    "nothing on one CPU: there the claim does not hold (chapter 18 shows the runs); on two, \
     CPU_HEARD_DURING_RECONCILE",
    "book/bases/cpu_heard_during_reconcile_one_core.tsv",
);

/// The same five quantities on the real control plane (`cargo run --features tls -- measure
/// cpu_real`: the 20 ms storm sleeping and then burning, the writer and the informer on
/// kube-apiserver): bands of their own, for a write there costs what kube-apiserver and etcd
/// cost on the same two cores.
pub const REAL_CPU_RECONCILE_RATIO: Band<f64> = Band::law(
    0.67,
    1.341,
    "on kube-apiserver too, a burning reconcile on two threads follows chapter 06's law",
    "book/bases/real_cpu_reconcile_ratio.tsv",
);
/// The median write-to-handler latency on the real control plane, ms. An upper bound.
pub const REAL_CPU_EVENT_P50_MS: Band<f64> = Band::at_most(
    11.956,
    "kube-apiserver's watch delivers a write within milliseconds while a reconcile burns",
    "book/bases/real_cpu_event_p50_ms.tsv",
);
/// Its 99th percentile, ms. An upper bound.
pub const REAL_CPU_EVENT_P99_MS: Band<f64> = Band::at_most(
    145.29,
    "no write on kube-apiserver waits as long as a burning reconcile would make it wait on one \
     thread",
    "book/bases/real_cpu_event_p99_ms.tsv",
);
/// The median write-to-reconcile latency on the real control plane, in reconcile costs. An
/// upper bound.
pub const REAL_CPU_RECONCILE_P50_PER_COST: Band<f64> = Band::at_most(
    1.942,
    "on kube-apiserver, a write is reconciled within about one reconcile's cost",
    "book/bases/real_cpu_reconcile_p50_per_cost.tsv",
);
/// The share of values heard while a reconcile ran, on the real control plane. A lower bound.
pub const REAL_CPU_HEARD_DURING_RECONCILE: Band<f64> = Band::at_least(
    0.477,
    "on kube-apiserver, the informer goes on hearing writes while a reconcile runs",
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

/// Every figure shown and not checked, by name.
pub const SHOWN: &[(&str, Reference)] = &[(
    "CPU_HEARD_DURING_RECONCILE_ONE_CORE",
    CPU_HEARD_DURING_RECONCILE_ONE_CORE,
)];
