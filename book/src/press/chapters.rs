//! The chapter registry: every chapter of the book, and the experiments each one shows.
//!
//! One `chapters!` entry per chapter gives three things at once:
//! - a doctest module (`book::chapters::doctests::chNN_…`) whose documentation is the chapter's
//!   Markdown, so `cargo test` compiles and runs every Rust block in it and names each test after
//!   the chapter file and line;
//! - the chapter's [`Experiment`]s, which `cargo run` runs before it builds the site
//!   (they record the same snapshots the chapter checks, and this run's measured values);
//! - the list `book/tests/book_layout.rs` holds against `chapters/` and `chapters/SUMMARY.md`.

use crate::lab;

/// One experiment a chapter shows.
#[derive(Clone, Copy)]
pub struct Experiment {
    /// A short stable name, used on the command line (`cargo run -- run NAME`).
    pub name: &'static str,
    /// The chapter file (in `chapters/`) that shows its results.
    pub chapter: &'static str,
    /// Runs the experiment, checks its claims and records its snapshots.
    /// Panics (like a failing test) when a claim or a band does not hold.
    pub run: fn(),
}

/// One chapter of the book.
#[derive(Clone, Copy)]
pub struct Chapter {
    /// The file in `chapters/`.
    pub file: &'static str,
    /// The doctest module's name.
    pub module: &'static str,
    /// The experiments `cargo run` runs for it, in order.
    pub experiments: &'static [Experiment],
}

/// Declares the chapters: `module = "file.md" [ name => run_fn, … ]`.
macro_rules! chapters {
    ($( $module:ident = $file:literal [ $( $exp:ident => $run:expr ),* $(,)? ] ),* $(,)?) => {
        /// Every chapter, as a doctest module. Only compiled by `cargo test` (rustdoc).
        #[cfg(doctest)]
        pub mod doctests {
            $(
                #[doc = include_str!(concat!("../../../chapters/", $file))]
                pub mod $module {}
            )*
        }

        /// Every chapter of the book, in the order of `chapters/SUMMARY.md`.
        pub fn chapters() -> &'static [Chapter] {
            &[$(
                Chapter {
                    file: $file,
                    module: stringify!($module),
                    experiments: &[$(
                        Experiment { name: stringify!($exp), chapter: $file, run: $run },
                    )*],
                },
            )*]
        }
    };
}

chapters! {
    ch00_introduction = "00-introduction.md" [
        ch00_virtual_time => lab::intro::ch00_virtual_time,
    ],
    ch01_two_small_sets = "01-two-small-sets.md" [
        ch01_coalescing => lab::workqueue::coalescing::ch01_coalescing,
        ch01_controller_queue => lab::workqueue::coalescing::ch01_controller_queue,
        ch01_contention_virtual => lab::workqueue::contention::ch01_contention_virtual,
        ch01_contention_real => lab::workqueue::contention::ch01_contention_real,
        ch01_essay => lab::workqueue::contention::ch01_essay,
    ],
    ch02_forget_is_not_done = "02-forget-is-not-done.md" [
        ch02_forget_without_done => lab::workqueue::backoff::ch02_forget_without_done,
        ch02_default_limiter => lab::workqueue::backoff::ch02_default_limiter,
        ch02_bucket => lab::workqueue::backoff::ch02_bucket,
        ch02_done_without_forget => lab::workqueue::backoff::ch02_done_without_forget,
    ],
    ch03_realfifo = "03-realfifo.md" [
        ch03_interleave => lab::fifo::ch03_interleave,
        ch03_double_delete => lab::fifo::ch03_double_delete,
        ch03_check_fires => lab::fifo::ch03_check_fires,
        ch03_ghost => lab::fifo::ch03_ghost,
        ch03_gate_table => lab::fifo::ch03_gate_table,
        ch03_env_override => lab::fifo::ch03_env_override,
        ch03_queue_depth => lab::fifo::ch03_queue_depth,
        ch03_early_pop => lab::fifo::ch03_early_pop,
    ],
    ch04_resync = "04-resync.md" [
        ch04_faithful => lab::resync::ch04_faithful,
        ch04_generation_changed => lab::resync::ch04_generation_changed,
        ch04_no_predicate => lab::resync::ch04_no_predicate,
        ch04_owned => lab::resync::ch04_owned,
        ch04_lost_writes => lab::resync::ch04_lost_writes,
        ch04_relists => lab::resync::ch04_relists,
        ch04_remedy => lab::resync::ch04_remedy,
        ch04_sync_rule => lab::resync::ch04_sync_rule,
        ch04_detectors => lab::resync::ch04_detectors,
    ],
    ch05_method = "05-method.md" [
        ch05_checks => lab::method::ch05_checks,
        ch05_with_resync => lab::method::ch05_with_resync,
        ch05_overflow => lab::method::ch05_overflow,
    ],
    ch06_deduplication = "06-deduplication.md" [
        ch06_virtual => lab::burst::ch06::run_virtual,
        ch06_real => lab::burst::ch06::run_real,
    ],
    ch07_edge_triggered_bill = "07-edge-triggered-bill.md" [
        edge => lab::edge::experiment,
    ],
    ch08_where_the_rule_is_written = "08-where-the-rule-is-written.md" [
        status_hatch => lab::status_hatch::experiment,
    ],
    ch09_spoken_drills = "09-spoken-drills.md" [
        ch09_drills => lab::drills::experiment,
    ],
    ch10_what_varies = "10-what-varies.md" [
        ch10_bands => lab::bands::experiment,
    ],
    ch11_what_carries_over_to_kube_rs = "11-what-carries-over-to-kube-rs.md" [
        ch11_virtual => lab::kube_runtime::ch11::run_virtual,
        ch11_real => lab::kube_runtime::ch11::run_real,
    ],
    ch12_watches_are_the_optimisation = "12-watches-are-the-optimisation.md" [
        faults => lab::faults::experiment,
    ],
    ch13_when_upstream_moves = "13-when-upstream-moves.md" [
        ch13_moved => lab::moved::experiment,
    ],
    ch99_what_it_costs = "99-what-it-costs.md" [],
}

/// Every experiment of every chapter, in chapter order.
pub fn experiments() -> impl Iterator<Item = &'static Experiment> {
    chapters().iter().flat_map(|c| c.experiments.iter())
}
