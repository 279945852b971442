//! Chapter 14's experiments ("On a real API server"): the embedded API server held to a real
//! kube-apiserver v1.37.2 on etcd v3.7.0 (`cargo run -- cluster up`), request by request
//! ([`conformance`]), and the book's real-clock experiments run on both: the write-to-reconcile
//! latency ([`latency`]), chapter 06's and 11's storms ([`storms`]), the cost of listing
//! 10,000 objects with and without the watch cache ([`lists`]), chapter 05's resourceVersion
//! check and compaction ([`versions`]), and chapter 04's relists ([`relists`]).
//!
//! Every experiment here needs the real tier ([`crate::lab::rig::real`]): without a real server
//! (or without the `tls` feature) it prints one line naming the command that enables it and
//! returns; under `CI=true` a missing server fails.

pub mod conformance;
pub mod latency;
pub mod lists;
pub mod relists;
pub mod storms;
pub mod versions;

use std::{path::PathBuf, time::Duration};

use crate::lab::rig::{self, Backend, real::RealServer};

/// The folder of the real tier's band bases: one `NAME.tsv` per band (see
/// [`crate::kit::basis`]).
pub fn basis_dir() -> PathBuf {
    crate::repo().join("book/src/lab/real_server/basis")
}

/// Writes in one latency run, 20 ms apart.
pub const LATENCY_WRITES: u64 = 200;
/// The gap between the latency run's writes: longer than a reconcile, so each write is
/// reconciled on its own.
pub const LATENCY_GAP: Duration = Duration::from_millis(20);

/// One round of every banded real-tier run on `real` (and the embedded server beside it):
/// each band's values, by band name. `cargo run --features tls -- real-basis` appends them to
/// the basis files.
pub fn basis_round(real: &RealServer) -> Vec<(&'static str, f64)> {
    let mut out = Vec::new();
    for (prefix, backend) in [
        ("EMBEDDED", Backend::Http),
        ("REAL_SERVER", Backend::Kubeconfig(real.kubeconfig.clone())),
    ] {
        let l = rig::real(latency::run(&backend, LATENCY_WRITES, LATENCY_GAP))
            .unwrap_or_else(|e| panic!("latency on {prefix}: {e}"));
        assert_eq!(l.lost(), 0, "{prefix}: an event was lost");
        let names: [&'static str; 4] = match prefix {
            "EMBEDDED" => [
                "EMBEDDED_EVENT_P50_MS",
                "EMBEDDED_EVENT_P99_MS",
                "EMBEDDED_RECONCILE_P50_MS",
                "EMBEDDED_RECONCILE_P99_MS",
            ],
            _ => [
                "REAL_SERVER_EVENT_P50_MS",
                "REAL_SERVER_EVENT_P99_MS",
                "REAL_SERVER_RECONCILE_P50_MS",
                "REAL_SERVER_RECONCILE_P99_MS",
            ],
        };
        out.push((names[0], l.event_percentile(50.0)));
        out.push((names[1], l.event_percentile(99.0)));
        out.push((names[2], l.reconcile_percentile(50.0)));
        out.push((names[3], l.reconcile_percentile(99.0)));
    }
    let storms = storms::run(&real.kubeconfig);
    storms.check_durable().unwrap_or_else(|e| panic!("{e}"));
    out.extend(storms.values());
    out
}
