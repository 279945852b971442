//! The appendix "What it costs", generated from criterion's saved estimates.
//!
//! No upstream file. Every speed figure in the book comes from a criterion benchmark in
//! `book/benches/`; none is typed. `cargo run --release -- costs --run` runs every benchmark
//! (`cargo bench`), then [`collect`] reads the estimates criterion saved under
//! `target/criterion/`, and [`render`] writes them, with the machine, the load and the date of
//! the run, to `chapters/costs/reference-run.md`, which the appendix includes. Without `--run`
//! the command only re-renders whatever estimates are already saved (after a
//! `cargo bench --bench NAME` of your own, say).
//!
//! The upstream queues are measured in the same sitting: `costs --run` also runs the Go
//! benchmark in `upstream/bench` (the same row names, on client-go v0.37.2 and
//! controller-runtime v0.25.3) when a Go toolchain is on `PATH` (see `upstream/README.md` for
//! the module setup), saves its output beside criterion's, and [`parse_go_bench`] reads it back
//! as estimates named after whose code ran: `client-go:ROW` for client-go's workqueue and
//! rate-limiting queue, `controller-runtime:ROW` for controller-runtime's priority queue
//! ([`upstream_of`]).
//!
//! Targets are stated two ways: an absolute ceiling ([`Goal::AtMost`]), and a ratio against a
//! peer measured in the same sitting ([`Goal::FasterThan`]) — the upstream queue on the same
//! row, or kube-runtime's machinery in the same criterion group — which is the only comparison
//! that survives a loaded machine.
//!
//! Beside the peers, the workqueue rows are set against their floor (`book/benches/floor.rs`):
//! one lock, one hash-set insert and remove and one ring-buffer push and pop for the row's kind
//! of key (for an add of a queued key: one hash, one lock, one probe), measured in the same
//! run. The floor is an estimate of what the single-thread path cannot go below, not a target.
//!
//! A missed target is shown with its [`Reason`]: rows of the same run whose summed time, set
//! against the target's peer, says how far the goal was in reach (a floor, a cost upstream's
//! behaviour imposes, the path every drainer shares), and what was tried.
//!
//! By what each part does: [`Estimate`] is one benchmark's result; `targets` states the goals
//! ([`TARGETS`]) and the reasons set beside a missed one, and `verdict` judges a run against
//! them; `criterion` reads criterion's saved estimates, and `upstream` runs the Go benchmark
//! and reads its output; `render` writes the appendix's Markdown, and `reference_run`
//! describes the machine and writes the file.

mod criterion;
#[cfg(test)]
mod fixtures;
mod reference_run;
mod render;
mod targets;
mod upstream;
mod verdict;

use std::{path::PathBuf, time::Duration};

pub use criterion::{collect, collect_since};
pub use reference_run::{REFERENCE_RUN, RunInfo, load_average, write_reference_run};
pub use render::render;
pub use targets::{Goal, Reason, TARGETS, Target};
pub use upstream::{
    CONTROLLER_RUNTIME, UPSTREAM, UPSTREAM_OUTPUT, UPSTREAMS, collect_upstream, parse_go_bench,
    run_upstream_bench, split_upstream, upstream_of,
};
pub use verdict::{Verdict, floor_of, goal_text, judge, key_kind};

/// One benchmark's result, as criterion saved it.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// criterion's id: `group/function[/value]`.
    pub id: String,
    /// The median time of one iteration.
    pub median: Duration,
    /// criterion's 95 % confidence interval of the median.
    pub interval: (Duration, Duration),
    /// Elements per iteration, when the benchmark declared a throughput.
    pub elements: Option<u64>,
}

impl Estimate {
    /// Elements per second at the median, when the benchmark declared a throughput.
    pub fn per_second(&self) -> Option<f64> {
        Some(self.elements? as f64 / self.median.as_secs_f64())
    }
}

/// Why the saved estimates could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CostsError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The upstream benchmark did not build or run; Go's output.
    #[error("upstream/bench (go test -bench) failed:\n{0}")]
    Upstream(String),
    /// A criterion file is not what criterion writes.
    #[error("{path}: not a criterion estimate: {source}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: serde_json::Error,
    },
}

/// A duration in the unit that keeps three significant figures readable.
pub fn time(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    let (v, unit) = if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    let digits = if v < 10.0 {
        2
    } else if v < 100.0 {
        1
    } else {
        0
    };
    format!("{v:.digits$} {unit}")
}
