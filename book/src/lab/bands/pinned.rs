//! One band or shown figure as chapter 10's table has it, read from a chapter module's lists.

use crate::kit::{
    band::{Band, Kind, Reference},
    basis::{Basis, Number, RegimeRuns},
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
