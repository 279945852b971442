//! Chapter 10's table: every chapter module's bands and shown figures, as
//! [`crate::lab::MODULES`] lists them, and the experiment that records it.

use super::pinned::Pinned;
use crate::kit::basis::{self, Basis};

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
        let regimes: Vec<String> = b
            .regimes
            .iter()
            .map(|r| {
                r.to_string()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        table.push_str(&format!(
            "- **`{}`** ({}, {kind}): {}. Accepts {}{width} ({rule}). Basis `{}`: {runs}; {}.\n",
            b.name,
            b.chapter,
            b.claim,
            b.accepts,
            b.basis,
            regimes.join("; ")
        ));
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
