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
//! By what each part does, from the bottom up: `estimate` is one benchmark's result
//! ([`Estimate`]) and how a time is written ([`time`]), and `error` why a step failed
//! ([`CostsError`]); `targets` states the goals ([`TARGETS`]), the reasons set beside a missed
//! one and the kind of key a row runs with ([`key_kind`]), and `verdict` judges a run against
//! them; `criterion` reads criterion's saved estimates, and `upstream` runs the Go benchmark
//! and reads its output; `reference_run` describes the machine and writes the file, and
//! `render` writes the appendix's Markdown. Each part imports only the parts before it in
//! this list, and this module only declares them and re-exports their names.

mod criterion;
mod error;
mod estimate;
#[cfg(test)]
mod fixtures;
mod reference_run;
mod render;
mod targets;
mod upstream;
mod verdict;

pub use criterion::{collect, collect_since};
pub use error::CostsError;
pub use estimate::{Estimate, time};
pub use reference_run::{REFERENCE_RUN, RunInfo, load_average, write_reference_run};
pub use render::render;
pub use targets::{Goal, Reason, TARGETS, Target, key_kind};
pub use upstream::{
    CONTROLLER_RUNTIME, UPSTREAM, UPSTREAM_OUTPUT, UPSTREAMS, collect_upstream, parse_go_bench,
    run_upstream_bench, split_upstream, upstream_of,
};
pub use verdict::{Verdict, floor_of, goal_text, judge};
