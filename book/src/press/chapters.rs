//! The chapter registry: every chapter of the book, and the experiments each one shows.
//!
//! One `chapters!` entry per chapter gives three things at once:
//! - a doctest module (`book::chapters::doctests::chNN_…`) whose documentation is the chapter's
//!   Markdown, so `cargo test` compiles and runs every Rust block in it and names each test after
//!   the chapter file and line;
//! - the chapter's [`Experiment`]s, functions at the root of its experiment module in
//!   [`crate::lab`], which `cargo run` runs before it builds the site (they record the same
//!   snapshots the chapter checks, and this run's measured values);
//! - the list `book/tests/book_layout.rs` holds against `chapters/`, `chapters/SUMMARY.md` and
//!   the lab's own list of chapter modules ([`crate::lab::MODULES`]).

use crate::lab;

/// One experiment a chapter shows.
#[derive(Clone, Copy)]
pub struct Experiment {
    /// A short stable name, used on the command line (`cargo run -- run NAME`): the name of
    /// the function at the root of the chapter's experiment module that runs it.
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
    /// Its experiment module in [`crate::lab`], which `cargo run` runs the experiments of;
    /// `None` for a chapter that runs none.
    pub lab: Option<&'static str>,
    /// The experiments `cargo run` runs for it, in order: functions at the root of its
    /// experiment module.
    pub experiments: &'static [Experiment],
}

/// Declares the chapters: `module = "file.md" in lab_module [ name, … ]`, each `name` a
/// function at the root of `lab::lab_module`, which `cargo run -- run name` runs; a chapter
/// that runs no experiment is `module = "file.md" []`.
macro_rules! chapters {
    ($( $module:ident = $file:literal $(in $lab:ident)? [ $( $exp:ident ),* $(,)? ] ),* $(,)?) => {
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
                    lab: chapters!(@lab $($lab)?),
                    experiments: chapters!(@runs $file, $($lab)? ; $( $exp ),*),
                },
            )*]
        }
    };
    (@lab $lab:ident) => { Some(stringify!($lab)) };
    (@lab) => { None };
    (@runs $file:literal, $lab:ident ; $( $exp:ident ),*) => {
        &[$(
            Experiment {
                name: stringify!($exp),
                chapter: $file,
                run: lab::$lab::$exp,
            },
        )*]
    };
    (@runs $file:literal, ;) => { &[] };
}

chapters! {
    ch00_introduction = "00-introduction.md" in intro [
        ch00_virtual_time,
    ],
    ch03_realfifo = "03-realfifo.md" in fifo [
        ch03_interleave,
        ch03_double_delete,
        ch03_check_fires,
        ch03_ghost,
        ch03_gate_table,
        ch03_env_override,
        ch03_queue_depth,
        ch03_early_pop,
        ch03_on_138,
    ],
    ch04_resync = "04-resync.md" in resync [
        ch04_faithful,
        ch04_generation_changed,
        ch04_no_predicate,
        ch04_owned,
        ch04_lost_writes,
        ch04_relists,
        ch04_remedy,
        ch04_sync_rule,
        ch04_detectors,
    ],
    ch01_two_small_sets = "01-two-small-sets.md" in workqueue [
        ch01_coalescing,
        ch01_controller_queue,
        ch01_contention_virtual,
        ch01_contention_real,
        ch01_essay,
    ],
    ch02_forget_is_not_done = "02-forget-is-not-done.md" in workqueue [
        ch02_forget_without_done,
        ch02_default_limiter,
        ch02_bucket,
        ch02_done_without_forget,
    ],
    ch06_deduplication = "06-deduplication.md" in burst [
        ch06_virtual,
        ch06_real,
    ],
    ch07_edge_triggered_bill = "07-edge-triggered-bill.md" in edge [
        edge,
    ],
    ch08_where_the_rule_is_written = "08-where-the-rule-is-written.md" in status_record [
        status_record,
    ],
    ch12_watches_are_the_optimisation = "12-watches-are-the-optimisation.md" in faults [
        faults,
    ],
    ch17_first_write = "17-first-write.md" in first_write [
        ch17_stale_update,
        ch17_retry_storm,
        ch17_stale_cache,
        ch17_status_predicate,
        ch17_apply_refused,
    ],
    ch16_deletion = "16-deletion.md" in deletion [
        ch16_finalizers,
        ch16_relist_gap,
    ],
    ch15_the_second_replica = "15-the-second-replica.md" in second_replica [
        ch15_without_election,
        ch15_with_election,
        ch15_no_fencing,
        ch15_release_after_outage,
        ch15_recovery,
    ],
    ch18_many_workers = "18-many-workers.md" in many_workers [
        ch18_sweep,
        ch18_serialisation,
        ch18_starvation,
        ch18_cpu,
    ],
    ch19_testing_your_own_controller = "19-testing-your-own-controller.md" in own_controller [
        ch19_in_process,
        ch19_real,
        ch19_mock,
    ],
    ch09_spoken_drills = "09-spoken-drills.md" in drills [
        ch09_drills,
    ],
    ch05_method = "05-method.md" in method [
        ch05_checks,
        ch05_with_resync,
        ch05_overflow,
        ch05_lost_delete,
    ],
    ch10_what_varies = "10-what-varies.md" in bands [
        ch10_bands,
    ],
    ch13_when_upstream_moves = "13-when-upstream-moves.md" in moved [
        ch13_moved,
    ],
    ch14_on_a_real_api_server = "14-on-a-real-api-server.md" in real_server [
        ch14_latency,
        ch14_storms,
        ch14_lists,
        ch14_rv_check,
        ch14_compaction,
        ch14_relists,
    ],
    ch11_what_carries_over_to_kube_rs = "11-what-carries-over-to-kube-rs.md" in kube_runtime [
        ch11_storm,
        ch11_storm_real,
    ],
    ch11_what_differs_on_kube_rs = "11-what-differs-on-kube-rs.md" in kube_runtime [
        ch11_semantics,
    ],
    ch11_what_running_kube_rs_found = "11-what-running-kube-rs-found.md" in kube_runtime [
        ch11_findings,
        ch11_findings_real,
    ],
    ch97_the_embedded_server = "97-the-embedded-server.md" in real_server [
        ch97_conformance,
    ],
    ch98_claim_by_claim = "98-claim-by-claim.md" [],
    ch99_what_it_costs = "99-what-it-costs.md" [],
}

/// Every experiment of every chapter, in chapter order.
pub fn experiments() -> impl Iterator<Item = &'static Experiment> {
    chapters().iter().flat_map(|c| c.experiments.iter())
}
