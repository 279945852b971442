//! Chapter 10's experiment: every real-clock check the book's experiments make, in one table,
//! each beside the runs it was derived from, regime by regime.
//!
//! A run-specific number is checked against a [`Band`] whose `basis` names a file of runs
//! (`book/bases/NAME.tsv`, [`crate::kit::basis`]), and the band is the rule of its kind
//! ([`basis::RULE`]) over them; a figure no check survives on every machine is shown beside its
//! reference runs ([`Reference`]). Both live next to the experiments that use them (each chapter
//! module's `bands.rs`, with its `BANDS` and `SHOWN`, listed in [`crate::lab::MODULES`]); this
//! module lists them all, so that the chapter "What varies, and what was not verified" prints
//! the table from the same constants the checks use, and a moved band or a new run shows up
//! there as a snapshot diff.
//! [`measure`] runs the experiments that give the runs.

pub mod measure;

use crate::kit::{
    band::{Band, Kind, Reference},
    basis::{self, Basis, Number, RegimeRuns},
};

/// One real-clock check (a band) or shown figure (a reference), for the table.
#[derive(Debug, Clone)]
pub struct Pinned {
    /// The constant's name.
    pub name: &'static str,
    /// The chapter whose experiment checks or shows it.
    pub chapter: &'static str,
    /// The kind of band, or `None` for a figure shown and not checked.
    pub kind: Option<Kind>,
    /// The claim the band carries, or, for a shown figure, what carries its claim instead.
    pub claim: &'static str,
    /// What it accepts, as `[lo..=hi]`, `[..=hi]` or `[lo..]`; `not checked` for a reference.
    pub accepts: String,
    /// Its lower end, if it has one.
    pub lo: Option<f64>,
    /// Its upper end, if it has one.
    pub hi: Option<f64>,
    /// The file of runs it was derived from.
    pub basis: &'static str,
    /// The runs, summarised ([`Basis::summary`]), or why the file could not be read.
    pub runs: Result<String, String>,
    /// Each regime's runs.
    pub regimes: Vec<RegimeRuns>,
    /// Whether the band is the rule over its runs (the error says what the rule gives).
    pub rule: Result<(), String>,
}

impl Pinned {
    /// The width of a two-sided band (hi / lo).
    pub fn width(&self) -> Option<f64> {
        match (self.lo, self.hi) {
            (Some(lo), Some(hi)) if lo > 0.0 => Some(hi / lo),
            _ => None,
        }
    }
}

/// A chapter's bands, named, as the table shows them.
pub fn pinned<T: Number>(bands: &[(&'static str, Band<T>)], chapter: &'static str) -> Vec<Pinned> {
    bands
        .iter()
        .map(|&(name, band)| {
            let runs = Basis::of(&band).map_err(|e| e.to_string());
            let (lo, hi) = band.ends();
            Pinned {
                name,
                chapter,
                kind: Some(band.kind),
                claim: band.claim,
                accepts: band.to_string(),
                lo,
                hi,
                basis: band.basis,
                rule: runs.clone().and_then(|b| b.holds(name, &band)),
                regimes: runs.as_ref().map(Basis::regimes).unwrap_or_default(),
                runs: runs.map(|b| b.summary()),
            }
        })
        .collect()
}

/// A chapter's figures shown and not checked, named, as the table shows them.
pub fn shown(references: &[(&'static str, Reference)], chapter: &'static str) -> Vec<Pinned> {
    references
        .iter()
        .map(|&(name, r)| {
            let runs = Basis::of_file(r.basis).map_err(|e| e.to_string());
            Pinned {
                name,
                chapter,
                kind: None,
                claim: r.carried_by,
                accepts: "not checked".to_owned(),
                lo: None,
                hi: None,
                basis: r.basis,
                rule: runs.as_ref().map(|_| ()).map_err(Clone::clone),
                regimes: runs.as_ref().map(Basis::regimes).unwrap_or_default(),
                runs: runs.map(|b| b.summary()),
            }
        })
        .collect()
}

/// Every band and shown figure, in chapter order: each chapter module's, as
/// [`crate::lab::MODULES`] lists them.
pub fn all() -> Vec<Pinned> {
    crate::lab::MODULES
        .iter()
        .flat_map(|m| (m.bands)(m.chapter))
        .collect()
}

/// Every band (the checks only, no shown figure).
pub fn checks() -> Vec<Pinned> {
    all().into_iter().filter(|p| p.kind.is_some()).collect()
}

/// Chapter 10's table of every check: its name, the chapter, its kind and the claim it
/// carries, what it accepts and how wide that is, its file of runs and each regime's runs.
/// Panics if a band is not the rule over its runs. The chapter shows this body.
pub fn table() -> String {
    // book: ch10_bands
    let mut table = String::new();
    for b in all() {
        b.rule.as_ref().unwrap_or_else(|e| panic!("{e}"));
        let runs = b.runs.as_ref().unwrap_or_else(|e| panic!("{e}"));
        let (kind, rule) = match b.kind {
            Some(kind) => (kind.name(), basis::rule(kind)),
            None => ("shown, not checked", "carried instead by"),
        };
        let width = b
            .width()
            .map_or(String::new(), |w| format!(", {w:.2}× wide"));
        table.push_str(&format!(
            "{} ({}): {kind}\n  claim: {}\n  accepts {}{width} ({rule})\n  basis {}: {runs}\n",
            b.name, b.chapter, b.claim, b.accepts, b.basis
        ));
        for regime in &b.regimes {
            table.push_str(&format!("    {regime}\n"));
        }
    }
    table
    // book: end ch10_bands
}

/// Records chapter 10's band table (the `cargo run` experiment), and adds its claim to this
/// run's claims table: every band is the rule over its file.
pub fn ch10_bands() {
    crate::kit::snap::text("ch10_bands", table()); // panics unless every band is the rule
    let bands = all();
    let checks = bands.iter().filter(|b| b.kind.is_some()).count();
    let runs: usize = bands
        .iter()
        .filter_map(|b| Basis::of_file(b.basis).ok())
        .map(|b| b.runs.len())
        .sum();
    crate::kit::claims::record(crate::kit::claims::Row::exact(
        "Every band is the rule over its committed runs",
        "10",
        "ch10_bands",
        format!(
            "{checks} of {checks} bands, {} figures shown, {runs} runs",
            bands.len() - checks
        ),
    ));
}
