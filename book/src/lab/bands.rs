//! Every tolerance band the book's experiments pin, in one table.
//!
//! A run-specific number is checked against a [`Band`] whose basis says how
//! it was measured. The bands live next to the experiments that check them; this module lists
//! them all, so that the chapter "What varies, and what was not verified" prints the table from
//! the same constants the checks use, and a moved band shows up there as a snapshot diff.

use std::fmt::Display;

use crate::kit::band::Band;

use crate::lab::{burst, faults, kube_runtime, workqueue};

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

fn pinned<T: Display>(name: &'static str, chapter: &'static str, band: Band<T>) -> Pinned {
    Pinned {
        name,
        chapter,
        accepts: band.to_string(),
        basis: band.basis,
    }
}

/// Every band, in chapter order.
pub fn all() -> Vec<Pinned> {
    let mut v: Vec<Pinned> = workqueue::contention::bands::ALL
        .iter()
        .map(|(name, band)| pinned(name, "01-two-small-sets.md", *band))
        .collect();
    v.extend(
        burst::bands::ALL
            .iter()
            .map(|(name, band)| pinned(name, "06-deduplication.md", *band)),
    );
    v.extend(
        kube_runtime::bands::ALL
            .iter()
            .map(|(name, band)| pinned(name, "11-what-carries-over-to-kube-rs.md", *band)),
    );
    v.push(pinned(
        "SLOW_HANDLER_RECONCILES",
        "12-watches-are-the-optimisation.md",
        faults::SLOW_HANDLER_RECONCILES,
    ));
    v
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
