//! Chapter 00's band: the real time ten virtual sleeps take.

use crate::kit::band::{Band, Reference};

// book: ch00_band
/// The real µs that ten virtual one-second sleeps take: an upper bound, the rule over the runs
/// in its file.
pub const REAL_US: Band<u128> = Band::at_most(
    32_344,
    "ten one-second sleeps on the paused clock take a few milliseconds of real time at most",
    "book/bases/real_us.tsv",
);
// book: end ch00_band

/// Every band above, by name (chapter 10's table).
pub const BANDS: &[(&str, Band<u128>)] = &[("REAL_US", REAL_US)];

/// Every figure shown and not checked, by name: none.
pub const SHOWN: &[(&str, Reference)] = &[];
