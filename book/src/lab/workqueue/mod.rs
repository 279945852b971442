//! The workqueue experiments of chapters 01 ("Two small sets do all the work") and 02
//! ("Forget is not Done").
//!
//! Follows client-go v0.36.3 `util/workqueue` (`queue.go`, `rate_limiting_queue.go`,
//! `default_rate_limiters.go`) as the port in [`controlloop::workqueue`] does; the experiments drive
//! that port through its public API only.
//!
//! # Model: the page shows the code that runs
//!
//! Every experiment here is the code a chapter block shows, verbatim. A chapter block carries a
//! hidden line `# // book: NAME`; the crate holds the same lines between `// book: NAME` and
//! `// book: end NAME`, and `book/tests/book_layout.rs` fails (with a diff) if the two differ. So
//! `cargo test` runs the block as a doctest, `cargo run` runs the crate's copy
//! (registered in [`mod@crate::press::chapters`]), both record the same snapshots, and neither can
//! drift from what the page shows. The bodies import the crate as `controlloop`, as a reader's
//! copy would.
//!
//! - [`coalescing`]: chapter 01's walk through the two sets.
//! - [`contention`]: chapter 01's same-key harness (16 workers, 64 keys), its detector, the
//!   deterministic run under virtual time and the real-clock run with its bands.
//! - [`backoff`]: chapter 02's runs of `forget`, `done` and the default rate limiter.
//! - [`cycles`]: the task of `book/benches/workqueue.rs`'s multi-task rows, tested here.
//!
//! # Invariants
//!
//! 1. A region between `// book: NAME` markers is shown, line for line, by a chapter block
//!    (checked by `book/tests/book_layout.rs`).
//! 2. Every durable claim an experiment makes is an `assert!` in the region itself, so the page
//!    shows the check and both runs make it.
//!
//! # Concurrency
//!
//! The virtual-time experiments run on [`crate::lab::rig::paused`] (one thread, paused clock):
//! their schedules are fixed, so their results are exact. Only the real-clock contention run
//! uses two threads, and it pins its run-specific numbers through [`bands`].
//!
//! # Differences from upstream
//!
//! None in behaviour: these are experiments, not ports. The contention harness follows the
//! shape of the client-go figures it is compared with (16 workers, 64 keys, 320,000 adds, a
//! channel of 1024), with tokio tasks where Go has goroutines.

pub mod backoff;
pub mod bands;
pub mod coalescing;
pub mod contention;
pub mod cycles;

pub use backoff::{
    ch02_bucket, ch02_default_limiter, ch02_done_without_forget, ch02_forget_without_done,
};
pub use coalescing::{ch01_coalescing, ch01_controller_queue};
pub use contention::{ch01_contention_real, ch01_contention_virtual, ch01_essay};

use std::time::Duration;

/// Prints a duration the way a person reads a backoff: `5ms`, `2.56s`, `16m40s`.
pub fn human(d: Duration) -> String {
    if d < Duration::from_secs(60) {
        return format!("{d:?}");
    }
    let minutes = d.as_secs() / 60;
    let rest = d - Duration::from_secs(minutes * 60);
    if rest.is_zero() {
        format!("{minutes}m")
    } else {
        format!("{minutes}m{rest:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_prints_backoffs_as_people_read_them() {
        assert_eq!(human(Duration::from_millis(5)), "5ms");
        assert_eq!(human(Duration::from_millis(2560)), "2.56s");
        assert_eq!(human(Duration::from_secs(1000)), "16m40s");
        assert_eq!(human(Duration::from_secs(1020)), "17m");
        assert_eq!(human(Duration::from_millis(1_310_715)), "21m50.715s");
    }
}
