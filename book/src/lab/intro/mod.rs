//! Chapter 00's experiment (the introduction): ten one-second sleeps under tokio's paused
//! clock, and the band that pins the real time they took.
//!
//! No upstream file: this shows the book's own method (virtual time, bands, measured values).
//! The bodies are the blocks chapter 00 shows, verbatim (see [`crate::lab::workqueue`] for how
//! the two are held equal).

use std::time::Duration;

pub mod bands;

use crate as controlloop_book;

// book: ch00_sleeps
/// Ten one-second sleeps on a runtime whose clock is paused: how long they took on that
/// clock, and how long in real time.
pub fn ten_virtual_sleeps() -> (Duration, Duration) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true) // virtual time
        .build()
        .unwrap();
    let wall = std::time::Instant::now(); // the real clock
    let on_the_paused_clock = rt.block_on(async {
        let start = tokio::time::Instant::now();
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        start.elapsed()
    });
    (on_the_paused_clock, wall.elapsed())
}
// book: end ch00_sleeps

/// Ten virtual one-second sleeps (snapshot `ch00_virtual_time`, measured values
/// `ch00_virtual_time`).
pub fn ch00_virtual_time() {
    // book: ch00_virtual_time
    use controlloop_book::kit::band::InBand;
    use controlloop_book::lab::intro::{bands::REAL_US, ten_virtual_sleeps};
    use std::time::Duration;

    #[derive(serde::Serialize)]
    struct Report {
        sleeps: u32,
        virtual_elapsed: String,
        real_elapsed_us: InBand<u128>,
    }

    let (virtual_elapsed, real) = ten_virtual_sleeps();

    // Durable: under the paused clock, ten one-second sleeps take exactly ten seconds.
    assert_eq!(virtual_elapsed, Duration::from_secs(10));

    let report = Report {
        sleeps: 10,
        virtual_elapsed: format!("{virtual_elapsed:?}"),
        real_elapsed_us: REAL_US.check("real_elapsed_us", real.as_micros()),
    };
    controlloop_book::kit::snap::yaml("ch00_virtual_time", &report, vec![]);
    let took = format!("Ten virtual one-second sleeps took {real:?} of real time.");
    controlloop_book::kit::measured::record("ch00_virtual_time", took).unwrap();
    use controlloop_book::kit::claims::{Row, record};
    let claim = "Ten one-second sleeps on the paused clock take exactly ten seconds";
    record(Row::exact(
        claim,
        "00",
        "ch00_virtual_time",
        &report.virtual_elapsed,
    ));
    // book: end ch00_virtual_time
}
