//! The claims table: one row per claim of the book, filled by the run that checked it.
//!
//! `cargo run` ends with one table, every claim a row: the claim, its chapter, the essay's
//! figure if the essay gave one, this run's figure (exact, or with the band it was checked
//! against) and a verdict. An experiment adds its row with one call, after its asserts have
//! passed, so the figure is always the one this run produced:
//!
//! ```
//! use controlloop_book::kit::claims::{self, Row, Verdict};
//!
//! let reconciles = 11; // what the run counted, and asserted
//! claims::record(Row::exact("A storm collapses", "06", "ch06_essay_virtual", reconciles));
//! let rows = claims::take();
//! assert_eq!(rows[0].verdict, Verdict::Holds);
//! assert_eq!(rows[0].this_run.to_string(), "11");
//! ```
//!
//! A row whose run failed is never recorded; the command adds a failing row in its place
//! (naming the snapshot to review) and exits non-zero.

use std::{fmt, sync::Mutex};

use super::band::InBand;

/// This run's figure for a claim.
#[derive(Debug, Clone, PartialEq)]
pub enum Figure {
    /// A durable figure, asserted exactly.
    Exact(String),
    /// A run-specific figure and the band it was checked against (and found in).
    Banded {
        /// What the run measured.
        value: String,
        /// The band, `[lo..=hi]`.
        band: String,
    },
    /// A run-specific figure shown beside its reference runs and not checked.
    Shown {
        /// What the run measured.
        value: String,
        /// The reference runs, as printed.
        reference: String,
    },
}

impl fmt::Display for Figure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Figure::Exact(v) => f.write_str(v),
            Figure::Banded { value, band } => write!(f, "{value} in {band}"),
            Figure::Shown { value, reference } => write!(f, "{value} ({reference})"),
        }
    }
}

/// What the row says about its claim.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The claim held on this run (a banded figure: inside its band), and, where the essay
    /// gave a figure, it agrees with this run's.
    Holds,
    /// The claim held on this run, but the essay's figure cannot be held against it: the
    /// reason says why (and where the figure lies among this book's runs).
    NotComparable(String),
    /// The claim did not hold, or its result changed: what to review.
    Moved(String),
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Holds => f.write_str("holds"),
            Verdict::NotComparable(why) => write!(f, "not comparable: {why}"),
            Verdict::Moved(review) => write!(f, "**moved**: review {review}"),
        }
    }
}

/// One claim, as this run found it.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The claim, as the book makes it.
    pub claim: String,
    /// The chapter that runs it (`"06"`).
    pub chapter: &'static str,
    /// The essay's figure for it, as the essay states it.
    pub essay: Option<&'static str>,
    /// This run's figure.
    pub this_run: Figure,
    /// The verdict.
    pub verdict: Verdict,
    /// The snapshot that shows the run (for a band's row, the band's file of runs).
    pub snapshot: &'static str,
}

impl Row {
    /// A durable claim that held, with the exact figure this run asserted.
    pub fn exact(
        claim: impl Into<String>,
        chapter: &'static str,
        snapshot: &'static str,
        figure: impl fmt::Display,
    ) -> Row {
        Row {
            claim: claim.into(),
            chapter,
            essay: None,
            this_run: Figure::Exact(figure.to_string()),
            verdict: Verdict::Holds,
            snapshot,
        }
    }

    /// A run-specific figure that was checked against its band and found inside.
    pub fn banded<T: fmt::Display + Copy>(
        claim: impl Into<String>,
        chapter: &'static str,
        snapshot: &'static str,
        checked: InBand<T>,
    ) -> Row {
        Row {
            this_run: Figure::Banded {
                value: checked.value().to_string(),
                band: checked.band().to_string(),
            },
            ..Row::exact(claim, chapter, snapshot, "")
        }
    }

    /// The same row, beside the essay's figure for it.
    pub fn essay(self, figure: &'static str) -> Row {
        Row {
            essay: Some(figure),
            ..self
        }
    }

    /// The same row, its essay figure not comparable with this run's, for `why`.
    pub fn not_comparable(self, why: impl Into<String>) -> Row {
        Row {
            verdict: Verdict::NotComparable(why.into()),
            ..self
        }
    }

    /// Whether the row counts as a failure (its claim moved).
    pub fn failed(&self) -> bool {
        matches!(self.verdict, Verdict::Moved(_))
    }
}

static ROWS: Mutex<Vec<Row>> = Mutex::new(Vec::new());

/// Adds `row` to this run's table. Call it after the asserts and band checks that back it.
pub fn record(row: Row) {
    ROWS.lock().unwrap_or_else(|e| e.into_inner()).push(row);
}

/// Every row recorded so far, in the order recorded; the table starts empty again.
pub fn take() -> Vec<Row> {
    std::mem::take(&mut *ROWS.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The rows as a Markdown table (the site's page and the command's output).
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| claim | chapter | the essay | this run | verdict |\n|---|---|---|---|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.claim,
            r.chapter,
            r.essay.unwrap_or(""),
            r.this_run,
            r.verdict
        ));
    }
    out
}

/// The one-line summary under the table: how many durable claims held, how many run-specific
/// figures fell inside their bands, how many were shown and not checked, how many essay figures
/// could not be compared, and how many rows moved.
pub fn summary(rows: &[Row]) -> String {
    let banded = |r: &Row| matches!(r.this_run, Figure::Banded { .. });
    let shown = rows
        .iter()
        .filter(|r| matches!(r.this_run, Figure::Shown { .. }))
        .count();
    let (runs, durable): (Vec<&Row>, Vec<&Row>) = rows
        .iter()
        .filter(|r| !matches!(r.this_run, Figure::Shown { .. }))
        .partition(|r| banded(r));
    let held = |v: &[&Row]| v.iter().filter(|r| !r.failed()).count();
    let mut out = format!(
        "{} of {} durable claims hold; {} of {} run-specific figures inside their bands",
        held(&durable),
        durable.len(),
        held(&runs),
        runs.len(),
    );
    if shown > 0 {
        out.push_str(&format!(
            "; {shown} figures shown beside their reference runs"
        ));
    }
    let apart = rows
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::NotComparable(_)))
        .count();
    if apart > 0 {
        out.push_str(&format!("; {apart} essay figures not comparable"));
    }
    let moved = rows.iter().filter(|r| r.failed()).count();
    if moved > 0 {
        out.push_str(&format!("; {moved} moved"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kit::band::Band;

    #[test]
    fn the_summary_counts_durable_banded_apart_and_moved_rows() {
        let band = Band::law(10u64, 40, "unit", "unit");
        let rows = vec![
            Row::exact("a", "01", "s", 0),
            Row::banded("b", "06", "s", band.check("b", 24)).essay("about 24"),
            Row::banded("c", "01", "s", band.check("c", 12))
                .essay("148,497")
                .not_comparable("the harnesses differ"),
            Row {
                verdict: Verdict::Moved("snapshots/s.snap.new".into()),
                ..Row::exact("d", "02", "s", "?")
            },
        ];
        assert_eq!(
            summary(&rows),
            "1 of 2 durable claims hold; 2 of 2 run-specific figures inside their bands; \
             1 essay figures not comparable; 1 moved"
        );
        let table = markdown(&rows);
        assert!(
            table.contains("| b | 06 | about 24 | 24 in [10..=40] | holds |"),
            "{table}"
        );
        assert!(
            table.contains("| **moved**: review snapshots/s.snap.new |"),
            "{table}"
        );
    }
}
