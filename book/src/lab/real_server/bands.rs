//! Every check the real tier makes. Each band's runs are its file, `book/bases/NAME.tsv`,
//! measured with `cargo run --features tls -- measure real --runs N` against the control plane
//! of `cargo run -- cluster up`, and the band is the rule of its kind over them
//! ([`crate::kit::basis::RULE`]; `book/tests/bases.rs` holds each to it). Chapter 10's table
//! lists them beside the embedded server's.

use crate::kit::band::{Band, Reference};

/// The embedded server, chapter 14's latency run: write to watch event, median, ms. An upper
/// bound.
pub const EMBEDDED_EVENT_P50_MS: Band<f64> = Band::at_most(
    2.974,
    "the embedded server delivers a write's event within a few milliseconds",
    "book/bases/embedded_event_p50_ms.tsv",
);

/// The embedded server, chapter 14's latency run: write to reconcile start, median, ms. An
/// upper bound.
pub const EMBEDDED_RECONCILE_P50_MS: Band<f64> = Band::at_most(
    3.408,
    "on the embedded server, a write is reconciled within a few milliseconds",
    "book/bases/embedded_reconcile_p50_ms.tsv",
);

/// kube-apiserver: events / reconciles of the sweep runs whose cost is at most the gap. An
/// upper bound.
pub const REAL_SERVER_COLLAPSE_AT_OR_BELOW_GAP: Band<f64> = Band::at_most(
    2.03,
    "on kube-apiserver, a reconciler that keeps up merges (almost) nothing",
    "book/bases/real_server_collapse_at_or_below_gap.tsv",
);

/// kube-apiserver: converge − cost, in ms, for every sweep run. An upper bound.
pub const REAL_SERVER_CONVERGE_OVERHEAD_MS: Band<f64> = Band::at_most(
    202.542,
    "on kube-apiserver, the controller is quiet on the last value soon after the last write",
    "book/bases/real_server_converge_overhead_ms.tsv",
);

/// kube-apiserver: the essay's storm (chapter 06), reconciles: shown beside the reference runs;
/// the same-run law [`REAL_SERVER_RECONCILE_RATIO`] carries the claim.
pub const REAL_SERVER_ESSAY_RECONCILES: Reference = Reference::new(
    "the essay's storm on kube-apiserver: reconciles",
    "the same-run law REAL_SERVER_RECONCILE_RATIO, checked on the sweeps of the same round",
    "book/bases/real_server_essay_reconciles.tsv",
);

/// kube-apiserver, chapter 14's latency run: write to watch event, median, ms. An upper bound.
pub const REAL_SERVER_EVENT_P50_MS: Band<f64> = Band::at_most(
    14.274,
    "kube-apiserver delivers a write's event within milliseconds",
    "book/bases/real_server_event_p50_ms.tsv",
);

/// kube-apiserver: chapter 11's storm on kube-runtime, reconciles: shown beside the reference
/// runs.
pub const REAL_SERVER_KUBE_ESSAY_RECONCILES: Reference = Reference::new(
    "kube-runtime's essay storm on kube-apiserver: reconciles",
    "the same-run law REAL_SERVER_RECONCILE_RATIO, checked on the sweeps of the same round",
    "book/bases/real_server_kube_essay_reconciles.tsv",
);

/// kube-apiserver, chapter 14's latency run: write to reconcile start, median, ms. An upper
/// bound.
pub const REAL_SERVER_RECONCILE_P50_MS: Band<f64> = Band::at_most(
    15.5,
    "on kube-apiserver, a write is reconciled within milliseconds",
    "book/bases/real_server_reconcile_p50_ms.tsv",
);

/// kube-apiserver: reconciles / min(writes, span / cost + 1), for every sweep run: a same-run
/// law.
pub const REAL_SERVER_RECONCILE_RATIO: Band<f64> = Band::law(
    0.505,
    1.153,
    "on kube-apiserver, a storm's reconciles follow min(writes, span / cost + 1), with the span \
     and the cost measured in the same run",
    "book/bases/real_server_reconcile_ratio.tsv",
);

/// kube-apiserver: span / writes − gap, in ms, for every sweep run: shown, not checked (the
/// machine's figure; the law divides it out).
pub const REAL_SERVER_WRITE_OVERHEAD_MS: Reference = Reference::new(
    "what a write through kube-apiserver and etcd costs beyond its gap, ms",
    "nothing: it is the machine's figure; the law REAL_SERVER_RECONCILE_RATIO divides it out",
    "book/bases/real_server_write_overhead_ms.tsv",
);

/// Every band above, by name.
pub const BANDS: &[(&str, Band<f64>)] = &[
    ("EMBEDDED_EVENT_P50_MS", EMBEDDED_EVENT_P50_MS),
    ("EMBEDDED_RECONCILE_P50_MS", EMBEDDED_RECONCILE_P50_MS),
    (
        "REAL_SERVER_COLLAPSE_AT_OR_BELOW_GAP",
        REAL_SERVER_COLLAPSE_AT_OR_BELOW_GAP,
    ),
    (
        "REAL_SERVER_CONVERGE_OVERHEAD_MS",
        REAL_SERVER_CONVERGE_OVERHEAD_MS,
    ),
    ("REAL_SERVER_EVENT_P50_MS", REAL_SERVER_EVENT_P50_MS),
    ("REAL_SERVER_RECONCILE_P50_MS", REAL_SERVER_RECONCILE_P50_MS),
    ("REAL_SERVER_RECONCILE_RATIO", REAL_SERVER_RECONCILE_RATIO),
];

/// Every figure shown and not checked, by name.
pub const SHOWN: &[(&str, Reference)] = &[
    ("REAL_SERVER_ESSAY_RECONCILES", REAL_SERVER_ESSAY_RECONCILES),
    (
        "REAL_SERVER_KUBE_ESSAY_RECONCILES",
        REAL_SERVER_KUBE_ESSAY_RECONCILES,
    ),
    (
        "REAL_SERVER_WRITE_OVERHEAD_MS",
        REAL_SERVER_WRITE_OVERHEAD_MS,
    ),
];

/// The band called `name`.
///
/// # Panics
/// If there is none: a band used in code is listed in [`BANDS`].
pub fn band(name: &str) -> Band<f64> {
    BANDS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, b)| *b)
        .unwrap_or_else(|| panic!("no band {name}: add book/bases/NAME.tsv and list it in BANDS"))
}

/// The figure shown and not checked called `name`.
///
/// # Panics
/// If there is none.
pub fn reference(name: &str) -> Reference {
    SHOWN
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, r)| *r)
        .unwrap_or_else(|| panic!("no reference {name}: list it in SHOWN"))
}
