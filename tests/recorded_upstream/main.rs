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

mod cache;
mod controller;
mod features;
mod workqueue;

use std::{future::Future, time::Duration};

use similar::TextDiff;

// ---------------------------------------------------------------------------------------
// The comparison
// ---------------------------------------------------------------------------------------

/// The body of a recorded file: every line but the `# ` header.
pub fn body(recorded: &str) -> String {
    recorded
        .lines()
        .filter(|l| !l.starts_with("# "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Panics with a unified diff (upstream `-`, port `+`) unless the port's lines equal the
/// recorded body.
fn compare_text(name: &str, recorded: &str, port: &[String]) {
    let want = body(recorded);
    let got: String = port.iter().map(|l| format!("{l}\n")).collect();
    if want != got {
        let diff = TextDiff::from_lines(&want, &got)
            .unified_diff()
            .context_radius(3)
            .header("upstream (recorded)", "port")
            .to_string();
        panic!("{name}: the port differs from upstream\n{diff}");
    }
}

/// Compares the port's lines with `upstream/recorded/<name>.txt`.
pub fn compare(name: &str, port: Vec<String>) {
    let path = format!(
        "{}/upstream/recorded/{name}.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let recorded = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    compare_text(name, &recorded, &port);
}

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

/// Go's `time.Duration.String()`: `5ms`, `1.28s`, `1m21.92s`, `16m40s`, `1h0m0s`.
pub fn go_duration(d: Duration) -> String {
    fn frac(v: u128, unit: u128, suffix: &str) -> String {
        let (whole, rem) = (v / unit, v % unit);
        if rem == 0 {
            return format!("{whole}{suffix}");
        }
        let digits = unit.ilog10() as usize;
        let f = format!("{rem:0digits$}");
        format!("{whole}.{}{suffix}", f.trim_end_matches('0'))
    }
    let ns = d.as_nanos();
    match ns {
        0 => "0s".into(),
        1..1_000 => format!("{ns}ns"),
        1_000..1_000_000 => frac(ns, 1_000, "µs"),
        1_000_000..1_000_000_000 => frac(ns, 1_000_000, "ms"),
        _ => {
            let s = frac(ns % 60_000_000_000, 1_000_000_000, "s");
            let minutes = ns / 60_000_000_000;
            match (minutes / 60, minutes % 60) {
                (0, 0) => s,
                (0, m) => format!("{m}m{s}"),
                (h, m) => format!("{h}h{m}m{s}"),
            }
        }
    }
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

/// Runs `f` on a current-thread runtime whose clock is paused (tokio's virtual time), as the
/// Go side runs on a fake or synctest clock.
pub fn paused<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime with a paused clock builds")
        .block_on(f)
}

/// Awaits `fut` for at most `limit` of the runtime's clock; past that, panics naming `what`,
/// the await that is suspected to be deadlocked.
pub async fn within<F: Future>(limit: Duration, what: &str, fut: F) -> F::Output {
    tokio::time::timeout(limit, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} hung for {limit:?}"))
}

pub const WEB: &str = "default/web";
pub const SECOND: Duration = Duration::from_secs(1);
