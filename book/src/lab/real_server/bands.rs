//! Every band the real tier pins. Each band's runs are its file, `book/bases/NAME.tsv`, measured
//! with `cargo run --features tls -- measure real --runs N` against the control plane of
//! `cargo run -- cluster up`, and the band is the book's one rule over them
//! ([`crate::kit::basis::RULE`]; `book/tests/bases.rs` holds each to it). Chapter 10's table
//! lists them beside the embedded server's.

use crate::kit::band::Band;

/// The embedded server, chapter 14's latency run: write to watch event, median, ms.
pub const EMBEDDED_EVENT_P50_MS: Band<f64> =
    Band::new(0.241, 2.51, "book/bases/embedded_event_p50_ms.tsv");

/// The embedded server, chapter 14's latency run: write to reconcile start, median, ms.
pub const EMBEDDED_RECONCILE_P50_MS: Band<f64> =
    Band::new(0.304, 2.75, "book/bases/embedded_reconcile_p50_ms.tsv");

/// kube-apiserver: events / reconciles of the sweep runs whose cost is at most the gap.
pub const REAL_SERVER_COLLAPSE_AT_OR_BELOW_GAP: Band<f64> = Band::new(
    0.5,
    2.01,
    "book/bases/real_server_collapse_at_or_below_gap.tsv",
);

/// kube-apiserver: converge − cost, in ms, for every sweep run.
pub const REAL_SERVER_CONVERGE_OVERHEAD_MS: Band<f64> = Band::new(
    -5.634,
    202.542,
    "book/bases/real_server_converge_overhead_ms.tsv",
);

/// kube-apiserver: the essay's storm (chapter 06), reconciles.
pub const REAL_SERVER_ESSAY_RECONCILES: Band<f64> =
    Band::new(19.0, 218.0, "book/bases/real_server_essay_reconciles.tsv");

/// kube-apiserver, chapter 14's latency run: write to watch event, median, ms.
pub const REAL_SERVER_EVENT_P50_MS: Band<f64> =
    Band::new(0.909, 13.178, "book/bases/real_server_event_p50_ms.tsv");

/// kube-apiserver: chapter 11's storm on kube-runtime, reconciles.
pub const REAL_SERVER_KUBE_ESSAY_RECONCILES: Band<f64> = Band::new(
    19.0,
    196.0,
    "book/bases/real_server_kube_essay_reconciles.tsv",
);

/// kube-apiserver, chapter 14's latency run: write to reconcile start, median, ms.
pub const REAL_SERVER_RECONCILE_P50_MS: Band<f64> =
    Band::new(0.984, 13.43, "book/bases/real_server_reconcile_p50_ms.tsv");

/// kube-apiserver: reconciles / min(writes, span / cost + 1), for every sweep run.
pub const REAL_SERVER_RECONCILE_RATIO: Band<f64> =
    Band::new(0.282, 2.052, "book/bases/real_server_reconcile_ratio.tsv");

/// kube-apiserver: span / writes − gap, in ms, for every sweep run.
pub const REAL_SERVER_WRITE_OVERHEAD_MS: Band<f64> =
    Band::new(1.519, 60.52, "book/bases/real_server_write_overhead_ms.tsv");

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
    ("REAL_SERVER_ESSAY_RECONCILES", REAL_SERVER_ESSAY_RECONCILES),
    ("REAL_SERVER_EVENT_P50_MS", REAL_SERVER_EVENT_P50_MS),
    (
        "REAL_SERVER_KUBE_ESSAY_RECONCILES",
        REAL_SERVER_KUBE_ESSAY_RECONCILES,
    ),
    ("REAL_SERVER_RECONCILE_P50_MS", REAL_SERVER_RECONCILE_P50_MS),
    ("REAL_SERVER_RECONCILE_RATIO", REAL_SERVER_RECONCILE_RATIO),
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
