//! Chapter 13's experiments ("When upstream moves"): the book's snapshots that move when the
//! controller follows controller-runtime v0.24 instead of v0.22, each run on both releases and
//! diffed. Each function's body is a chapter block, verbatim.

use crate::kit::moved::{Moved, flat_yaml};
use crate::kit::snap;
use crate::lab::resync::{HOUR, Read, Setup, timeline};
use crate::lab::rig;
use crate::lab::workqueue::backoff::{bucket, default_limiter, forget_without_done};
use crate::lab::workqueue::coalescing::controller_queue;
use controlloop::controller::Release::{V0_22, V0_24};

/// Chapter 01's walk on the controller's queue.
pub fn ch13_walk() -> Moved {
    // book: ch13_walk
    let walk = |release| rig::paused(controller_queue(release));
    let moved = Moved::between("ch01_controller_queue", V0_22, V0_24, walk);
    moved.assert_moved(
        &["200 adds while the worker holds it     0"],
        &["200 adds while the worker holds it     1"],
    );
    snap::text("ch13_walk", moved.diff());
    // book: end ch13_walk
    moved
}

/// Chapter 02's `forget` without `done`.
pub fn ch13_stranded() -> Moved {
    // book: ch13_stranded
    let stranded = |release| flat_yaml(&rig::paused(forget_without_done(release)));
    let moved = Moved::between("ch02_forget_without_done", V0_22, V0_24, stranded);
    moved.assert_moved(
        &["queue: RateLimiting", "len_after_100_adds: 0"],
        &["queue: Priority", "len_after_100_adds: 1"],
    );
    snap::text("ch13_stranded", moved.diff());
    // book: end ch13_stranded
    moved
}

/// Chapter 02's bucket: 120 fresh keys' first failures.
pub fn ch13_bucket() -> Moved {
    // book: ch13_bucket
    let table = |release| rig::paused(async move { bucket(release).0 }); // the limiter's clock
    let moved = Moved::between("ch02_bucket", V0_22, V0_24, table);
    moved.assert_moved(
        &["101  100ms", "102  200ms", "120  2s"],
        &["101  5ms", "102  5ms", "120  5ms"],
    );
    snap::text("ch13_bucket", moved.diff());
    // book: end ch13_bucket
    moved
}

/// Chapter 04's remedy: `RequeueAfter` with a change arriving while the requeue waits.
pub fn ch13_remedy() -> Moved {
    // book: ch13_remedy
    let remedy = |release| {
        let hourly = Setup {
            requeue_after: Some(HOUR),
            release,
            ..Setup::faithful()
        };
        let live = Setup {
            read: Read::Live,
            ..hourly
        };
        let live_only = Setup {
            requeue_after: None,
            ..live
        };
        let rows = [
            ("cache, RequeueAfter 1h", hourly),
            ("server, RequeueAfter 1h", live),
            ("server, no requeue", live_only),
        ];
        let row = |(how, setup): &(&str, Setup)| {
            let reconciled = rig::paused(timeline(*setup)).reconciled().join(", ");
            format!("{how:<24} {reconciled}\n")
        };
        rows.iter().map(row).collect()
    };
    let moved = Moved::between("ch04_remedy", V0_22, V0_24, remedy);
    moved.assert_moved(
        &[
            "cache, RequeueAfter 1h   0 w red, 0.5 w green, 1..=35 w green",
            "server, RequeueAfter 1h  0 w red, 0.5 w green, 1..=21 w green, 22..=35 w blue",
        ],
        &[
            "cache, RequeueAfter 1h   0 w red, 0.5..=34.5 w green",
            "server, RequeueAfter 1h  0 w red, 0.5..=21.5 w green, 22.5..=34.5 w blue",
        ],
    );
    snap::text("ch13_remedy", moved.diff());
    // book: end ch13_remedy
    moved
}

/// Chapter 02's per-key table, which does not move.
pub fn ch13_unmoved() -> Moved {
    let table = |release| rig::paused(async move { default_limiter(release).0 });
    let moved = Moved::between("ch02_default_limiter", V0_22, V0_24, table);
    moved.assert_unchanged();
    moved
}

/// Everything chapter 13 shows (the `cargo run` experiment).
pub fn experiment() {
    ch13_walk();
    ch13_stranded();
    ch13_bucket();
    ch13_remedy();
    ch13_unmoved();
}
