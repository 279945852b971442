//! Chapter 10's experiment: every tolerance band the book's experiments pin, in one table,
//! each beside the runs it was derived from.
//!
//! A run-specific number is checked against a [`Band`] whose `basis` names a file of runs
//! (`book/bases/NAME.tsv`, [`crate::kit::basis`]), and the band is the one rule
//! ([`basis::RULE`]) over them. The bands live next to the experiments that check them (each
//! chapter module's `BANDS`, listed in [`crate::lab::MODULES`]); this module lists them all, so
//! that the chapter "What varies, and what was not verified" prints the table from the same
//! constants the checks use, and a moved band or a new run shows up there as a snapshot diff.
//! [`measure`] runs the experiments that give the runs.

pub mod measure;

use crate::kit::{
    band::Band,
    basis::{self, Basis, Number},
};

/// One pinned band, for the table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Pinned {
    /// The constant's name.
    pub name: &'static str,
    /// The chapter whose experiment checks it.
    pub chapter: &'static str,
    /// The accepted range, as `[lo..=hi]`.
    pub accepts: String,
    /// Its lower end.
    pub lo: f64,
    /// Its upper end.
    pub hi: f64,
    /// The file of runs it was derived from.
    pub basis: &'static str,
    /// The runs, summarised ([`Basis::summary`]), or why the file could not be read.
    pub runs: Result<String, String>,
    /// Whether the band is the rule over its runs (the error says what the rule gives).
    pub rule: Result<(), String>,
}

/// A chapter's bands, named, as the table shows them.
pub fn pinned<T: Number>(bands: &[(&'static str, Band<T>)], chapter: &'static str) -> Vec<Pinned> {
    bands
        .iter()
        .map(|&(name, band)| {
            let runs = Basis::of(&band).map_err(|e| e.to_string());
            Pinned {
                name,
                chapter,
                accepts: band.to_string(),
                lo: band.lo.as_f64(),
                hi: band.hi.as_f64(),
                basis: band.basis,
                rule: runs.clone().and_then(|b| b.holds(name, &band)),
                runs: runs.map(|b| b.summary()),
            }
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

/// Chapter 10's table of every band: its name, the chapter that checks it, what it accepts,
/// its file of runs and what they hold. Panics if a band is not the rule over its runs. The
/// chapter shows this body.
pub fn table() -> String {
    // book: ch10_bands
    let mut table = format!("every band is {}\n\n", basis::RULE);
    for b in all() {
        b.rule.as_ref().unwrap_or_else(|e| panic!("{e}"));
        let runs = b.runs.as_ref().unwrap_or_else(|e| panic!("{e}"));
        table.push_str(&format!(
            "{} ({})\n  accepts {}\n  basis {}: {runs}\n",
            b.name, b.chapter, b.accepts, b.basis
        ));
    }
    table
    // book: end ch10_bands
}

/// Records chapter 10's band table (the `cargo run` experiment), and adds its claim to this
/// run's claims table: every band is the rule over its file.
pub fn experiment() {
    crate::kit::snap::text("ch10_bands", table()); // panics unless every band is the rule
    let bands = all();
    let runs: usize = bands
        .iter()
        .filter_map(|b| Basis::of_file(b.basis).ok())
        .map(|b| b.runs.len())
        .sum();
    crate::kit::claims::record(crate::kit::claims::Row::exact(
        "Every band is the rule over its committed runs",
        "10",
        "ch10_bands",
        format!("{0} of {0} bands, {runs} runs", bands.len()),
    ));
}
