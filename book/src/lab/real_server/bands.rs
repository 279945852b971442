//! Every band the real tier pins, each derived by [`crate::kit::basis::RULE`] from its basis:
//! `basis/NAME.tsv`, one line per measured run (value, build profile, load, date), measured
//! with `cargo run --features tls -- real-basis --rounds N --write` against the control plane
//! of `cargo run -- cluster up`. Chapter 10's table lists them beside the embedded server's.

use std::sync::LazyLock;

use crate::kit::{band::Band, basis};

macro_rules! bases {
    ($($name:ident),* $(,)?) => {
        /// Each band's name and its basis file's text.
        pub static BASES: &[(&str, &str)] = &[
            $((stringify!($name), include_str!(concat!("basis/", stringify!($name), ".tsv")))),*
        ];
    };
}

bases!(
    EMBEDDED_EVENT_P50_MS,
    EMBEDDED_EVENT_P99_MS,
    EMBEDDED_RECONCILE_P50_MS,
    EMBEDDED_RECONCILE_P99_MS,
    REAL_SERVER_EVENT_P50_MS,
    REAL_SERVER_EVENT_P99_MS,
    REAL_SERVER_RECONCILE_P50_MS,
    REAL_SERVER_RECONCILE_P99_MS,
    REAL_SERVER_ESSAY_RECONCILES,
    REAL_SERVER_KUBE_ESSAY_RECONCILES,
    REAL_SERVER_RECONCILE_RATIO,
    REAL_SERVER_WRITE_OVERHEAD_MS,
    REAL_SERVER_CONVERGE_OVERHEAD_MS,
    REAL_SERVER_COLLAPSE_AT_OR_BELOW_GAP,
);

/// Every band, derived once per process.
pub static BANDS: LazyLock<Vec<(&'static str, Band<f64>)>> = LazyLock::new(|| {
    BASES
        .iter()
        .map(|&(name, text)| {
            let band = basis::derive(name, text).unwrap_or_else(|e| panic!("{e}"));
            (name, band)
        })
        .collect()
});

/// The band called `name`.
///
/// # Panics
/// If there is none: a band used in code has a basis file.
pub fn band(name: &str) -> Band<f64> {
    BANDS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, b)| *b)
        .unwrap_or_else(|| panic!("no band {name}: add basis/{name}.tsv and list it in bases!"))
}
