//! The experiments that chapters and the command line run.
//!
//! An [`Experiment`] is the unit `cargo run --release` knows about: it runs the experiment,
//! checks every durable claim, and records its results through [`crate::snap`] exactly as the
//! chapter does. The chapter and the command line call the same function, so the page and the
//! run can never disagree about what was measured.

pub mod bands;
pub mod burst;
pub mod drills;
pub mod edge;
pub mod fifo;
pub mod method;
pub mod resync;
pub mod status_hatch;
pub mod workqueue;

/// One experiment a chapter shows.
#[derive(Clone, Copy)]
pub struct Experiment {
    /// A short stable name, used on the command line (`cargo run --release -- run NAME`).
    pub name: &'static str,
    /// The chapter file (in `chapters/`) that shows its results.
    pub chapter: &'static str,
    /// Runs the experiment, checks its claims and records its snapshots.
    /// Panics (like a failing test) when a claim or a band does not hold.
    pub run: fn(),
}

/// Every experiment the book uses, in chapter order.
pub fn experiments() -> Vec<Experiment> {
    const CH01: &str = "01-two-small-sets.md";
    const CH02: &str = "02-forget-is-not-done.md";
    vec![
        Experiment {
            name: "ch01_coalescing",
            chapter: CH01,
            run: || {
                workqueue::ch01_coalescing();
            },
        },
        Experiment {
            name: "ch01_contention",
            chapter: CH01,
            run: || {
                workqueue::ch01_contention();
            },
        },
        Experiment {
            name: "ch02_forget_without_done",
            chapter: CH02,
            run: || {
                workqueue::ch02_forget_without_done();
            },
        },
        Experiment {
            name: "ch02_default_limiter_table",
            chapter: CH02,
            run: || {
                workqueue::ch02_default_limiter_table();
            },
        },
        Experiment {
            name: "ch02_bucket_120_items",
            chapter: CH02,
            run: || {
                workqueue::ch02_bucket_120_items();
            },
        },
        Experiment {
            name: "ch02_done_without_forget",
            chapter: CH02,
            run: || {
                workqueue::ch02_done_without_forget();
            },
        },
        Experiment {
            name: "fifo",
            chapter: "03-realfifo.md",
            run: fifo::run,
        },
        Experiment {
            name: "resync",
            chapter: "04-resync.md",
            run: resync::experiment,
        },
        Experiment {
            name: "method",
            chapter: "05-method.md",
            run: method::experiment,
        },
        Experiment {
            name: "ch06_virtual",
            chapter: "06-deduplication.md",
            run: burst::ch06::run_virtual,
        },
        Experiment {
            name: "ch06_real",
            chapter: "06-deduplication.md",
            run: burst::ch06::run_real,
        },
        Experiment {
            name: "edge",
            chapter: "07-edge-triggered-bill.md",
            run: edge::experiment,
        },
        Experiment {
            name: "status_hatch",
            chapter: "08-where-the-rule-is-written.md",
            run: status_hatch::experiment,
        },
    ]
}
