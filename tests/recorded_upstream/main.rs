//! The port held to recordings of the real Go libraries: every scenario in
//! `upstream/recorded/*.txt` was printed by `upstream/record` running client-go v0.36.3 and
//! controller-runtime v0.24.1, or by `upstream/v022` running controller-runtime v0.22.5 on
//! client-go v0.34.3 (versions, Go version and date are each file's `# ` header; how to
//! re-record: `upstream/README.md`). Each test here runs the same scenario on the
//! port's public API, renders it in the same text format, and compares it exactly with the
//! recorded body, header lines skipped. A mismatch fails with a unified diff: `-` is upstream,
//! `+` the port.
//!
//! Where a scenario depends on scheduling (the real-clock waits of the Go side), only its
//! durable part is recorded and compared; the note sits on that test.
//!
//! One module per area: [`workqueue`], [`cache`] (FIFOs, the fake clientset, resync),
//! [`features`], [`controller`] (controller-runtime).

mod batch;
mod cache;
mod controller;
mod features;
mod leaderelection;
mod workqueue;

#[path = "compare.rs"]
mod compare_support;

use std::time::Duration;

pub use compare_support::{
    body, compare, compare_each, compare_text, compare_until, go_duration, paused, settle, within,
};

#[test]
#[should_panic(expected = "-failure 19: 16m40s\n+failure 19: 16m39s")]
fn a_changed_line_fails_with_a_readable_diff() {
    let recorded = "# scenario: x\n# date: 2026-11-30\nfailure 18: 10m55.36s\nfailure 19: 16m40s\n";
    let port = [
        "failure 18: 10m55.36s".to_string(),
        "failure 19: 16m39s".to_string(),
    ];
    compare_text("x", recorded, &port);
}

#[test]
fn header_lines_are_skipped_and_nothing_else() {
    let recorded = "# scenario: x\n# date: 2026-11-30\nline\n#not a header\n";
    assert_eq!(body(recorded), "line\n#not a header\n");
}

#[test]
fn go_durations_print_as_go_prints_them() {
    let cases = [
        (Duration::ZERO, "0s"),
        (Duration::from_millis(5), "5ms"),
        (Duration::from_micros(1500), "1.5ms"),
        (Duration::from_millis(1280), "1.28s"),
        (Duration::from_millis(81_920), "1m21.92s"),
        (Duration::from_secs(1000), "16m40s"),
        (Duration::from_secs(3600), "1h0m0s"),
    ];
    for (d, want) in cases {
        assert_eq!(go_duration(d), want, "{d:?}");
    }
}

pub const WEB: &str = "default/web";
pub const SECOND: Duration = Duration::from_secs(1);
