//! Chapter 10's experiment: every tolerance band the book's experiments pin, in one table.
//!
//! A run-specific number is checked against a [`Band`] whose basis says how it was measured.
//! The bands live next to the experiments that check them (each chapter module's `BANDS`,
//! listed in [`crate::lab::MODULES`]); this module lists them all, so that the chapter "What
//! varies, and what was not verified" prints the table from the same constants the checks use,
//! and a moved band shows up there as a snapshot diff.

use std::fmt::Display;

use crate::kit::band::Band;

/// One pinned band, for the table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Pinned {
    /// The constant's name.
    pub name: &'static str,
    /// The chapter whose experiment checks it.
    pub chapter: &'static str,
    /// The accepted range, as `[lo..=hi]`.
    pub accepts: String,
    /// How it was chosen.
    pub basis: &'static str,
}

/// A chapter's bands, named, as the table shows them.
pub fn pinned<T: Display + Copy>(
    bands: &[(&'static str, Band<T>)],
    chapter: &'static str,
) -> Vec<Pinned> {
    bands
        .iter()
        .map(|&(name, band)| Pinned {
            name,
            chapter,
            accepts: band.to_string(),
            basis: band.basis,
        })
        .collect()
}

/// Every band, in chapter order: each chapter module's bands, as [`crate::lab::MODULES`] lists
/// them.
pub fn all() -> Vec<Pinned> {
    crate::lab::MODULES
        .iter()
        .flat_map(|m| (m.bands)(m.chapter))
        .collect()
}

/// Chapter 10's table of every band: its name, the chapter that checks it, what it accepts
/// and its basis. The chapter shows this body.
pub fn table() -> String {
    // book: ch10_bands
    let mut table = String::new();
    for b in all() {
        table.push_str(&format!(
            "{} ({})\n  accepts {}\n  basis: {}\n",
            b.name, b.chapter, b.accepts, b.basis
        ));
    }
    table
    // book: end ch10_bands
}

/// Records chapter 10's band table (the `cargo run` experiment).
pub fn experiment() {
    crate::kit::snap::text("ch10_bands", table());
}
