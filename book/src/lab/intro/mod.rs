//! Chapter 00's experiment (the introduction): ten one-second sleeps under tokio's paused
//! clock, and the band that pins the real time they took.
//!
//! No upstream file: this shows the book's own method (virtual time, bands, measured values).
//! The body is the block chapter 00 shows, verbatim (see [`crate::lab::workqueue`] for how the
//! two are held equal).

use crate as controlloop_book;

/// Ten virtual one-second sleeps (snapshot `ch00_virtual_time`, measured values
/// `ch00_virtual_time`).
pub fn ch00_virtual_time() {
    // book: ch00_virtual_time
    use controlloop_book::kit::band::{Band, InBand};
    use std::time::{Duration, Instant as WallClock};

    // Basis: 40 runs on the 2-core machine, half of them beside a `cargo build`, took 11–46 µs of
    // real time (0 ms). The upper end leaves room for a heavily loaded CI machine and stays far
    // below the 10 s that real sleeps would take.
    const REAL_MS: Band<u128> = Band::new(
        0,
        2_000,
        "40 runs: 11..=46 µs; real sleeps would take 10000 ms",
    );

    #[derive(serde::Serialize)]
    struct Report {
        sleeps: u32,
        virtual_elapsed: String,
        real_elapsed_ms: InBand<u128>,
    }

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true) // virtual time
        .build()
        .unwrap();
    let wall = WallClock::now();
    let virtual_elapsed = rt.block_on(async {
        let start = tokio::time::Instant::now();
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        start.elapsed()
    });
    let real = wall.elapsed();

    // Durable: under the paused clock, ten one-second sleeps take exactly ten seconds.
    assert_eq!(virtual_elapsed, Duration::from_secs(10));

    let report = Report {
        sleeps: 10,
        virtual_elapsed: format!("{virtual_elapsed:?}"),
        real_elapsed_ms: REAL_MS.check("real_elapsed_ms", real.as_millis()),
    };
    controlloop_book::kit::snap::yaml("ch00_virtual_time", &report, vec![]);
    let took = format!("Ten virtual one-second sleeps took {real:?} of real time.");
    controlloop_book::kit::measured::record("ch00_virtual_time", took).unwrap();
    // book: end ch00_virtual_time
}
