//! Bases: the runs a real-clock band is derived from, committed as raw data, and the one rule
//! that turns them into the band.
//!
//! A run-specific number is checked against a [`Band`]. Where the band comes from is not a
//! sentence: it is a file, `book/bases/NAME.tsv`, with one line per measured run, and the band
//! is [`RULE`] applied to those lines. The band's `basis` names the file. A test
//! (`book/tests/bases.rs`) holds every committed band equal to the rule over its file, so a
//! band can move only by a reviewed change to its runs, never by retyping its ends, and never
//! to make room for a figure it is later compared with.
//!
//! A line is tab-separated: the value, the build profile (`dev` or `release`), the machine's
//! one-minute load average when the run ended, the date, and what ran (free text). Lines that
//! start with `#` say how the file was measured. `cargo run -- measure GROUP --runs N` appends
//! lines (the experiments run as `cargo test` runs them, without their bands):
//!
//! ```
//! use controlloop_book::kit::basis::Basis;
//!
//! let basis = Basis::parse(
//!     "example",
//!     "# value\tprofile\tload\tdate\trun\n\
//!      24\tdev\t9.8\t2026-12-01\tessay storm\n\
//!      37\tdev\t11.2\t2026-12-01\tessay storm\n",
//! )
//! .unwrap();
//! assert_eq!(basis.range(), (24.0, 37.0));
//! assert_eq!(basis.derived(), (12.0, 74.0)); // [min / 2, max × 2]
//! ```
//!
//! # The rule, and why this one
//!
//! `[min / 2, max × 2]`: half the smallest run to twice the largest (a negative end moves
//! away from zero by the same factor), rounded outward — to whole numbers when every run is
//! a whole number, else to 0.001. One factor for every band, because what moves a real-clock
//! number between machines and loads is a rate (how late a sleep wakes, how often a thread is
//! descheduled), and a rate scales a count or a time by a factor, not by an offset. The factor
//! has two jobs: hold every faithful run of a machine like the one measured, and leave outside
//! the broken variant each chapter runs against the band. A band is only as wide as its runs:
//! one the rule makes too narrow for another machine or load fails there with its message, and
//! the fix is that machine's runs added to the file, a reviewed change that moves the band.

use std::{fmt, fs, path::PathBuf};

use super::band::Band;

/// The one rule, as the page states it.
pub const RULE: &str = "[min / 2, max × 2], rounded outward (to whole numbers for a basis of \
                        whole numbers, else to 0.001)";

/// The factor of [`RULE`].
pub const FACTOR: f64 = 2.0;

/// The folder of the basis files (`book/bases/`).
pub const BASES_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/bases");

/// The prefix a measured band's `basis` starts with: the file's path from the repository root.
pub const PREFIX: &str = "book/bases/";

/// The `basis` of the band whose runs are in `book/bases/NAME.tsv`.
#[macro_export]
macro_rules! basis_file {
    ($name:literal) => {
        concat!("book/bases/", $name, ".tsv")
    };
}

/// One measured run.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The value the band checks.
    pub value: f64,
    /// `dev` or `release`.
    pub profile: String,
    /// The one-minute load average when the run ended.
    pub load: f64,
    /// `YYYY-MM-DD`.
    pub date: String,
    /// What ran.
    pub what: String,
}

impl Run {
    /// The run as a line of its file.
    pub fn line(&self) -> String {
        format!(
            "{}\t{}\t{}\t{}\t{}",
            self.value, self.profile, self.load, self.date, self.what
        )
    }
}

/// A band's runs, as its file holds them.
#[derive(Debug, Clone, PartialEq)]
pub struct Basis {
    /// The file's name (`NAME.tsv`), for messages.
    pub name: String,
    /// The runs, in the file's order.
    pub runs: Vec<Run>,
}

/// What is wrong with a basis file.
#[derive(Debug, thiserror::Error)]
pub enum BasisError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line is not `value, profile, load, date, what`.
    #[error("{name}:{line}: {why}")]
    Line {
        /// The file.
        name: String,
        /// The line number (1-based).
        line: usize,
        /// What is wrong.
        why: String,
    },
    /// The file holds no run.
    #[error("{0}: no runs")]
    Empty(String),
    /// A band's `basis` names no file under `book/bases/`.
    #[error("the band's basis {0:?} names no file under book/bases/")]
    NotAFile(&'static str),
}

impl Basis {
    /// Parses a basis file's text; `name` is for messages.
    pub fn parse(name: &str, text: &str) -> Result<Basis, BasisError> {
        let bad = |line: usize, why: String| BasisError::Line {
            name: name.to_owned(),
            line,
            why,
        };
        let mut runs = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let cells: Vec<&str> = line.split('\t').collect();
            let [value, profile, load, date, what] = cells[..] else {
                return Err(bad(i + 1, format!("{} cells, want 5", cells.len())));
            };
            let number = |cell: &str, what: &str| {
                cell.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| bad(i + 1, format!("{what} {cell:?} is not a number")))
            };
            if !matches!(profile, "dev" | "release") {
                return Err(bad(
                    i + 1,
                    format!("profile {profile:?}, want dev or release"),
                ));
            }
            let well_formed_date = date.len() == 10
                && date.char_indices().all(|(j, c)| {
                    if j == 4 || j == 7 {
                        c == '-'
                    } else {
                        c.is_ascii_digit()
                    }
                });
            if !well_formed_date {
                return Err(bad(i + 1, format!("date {date:?}, want YYYY-MM-DD")));
            }
            runs.push(Run {
                value: number(value, "value")?,
                profile: profile.to_owned(),
                load: number(load, "load")?,
                date: date.to_owned(),
                what: what.to_owned(),
            });
        }
        if runs.is_empty() {
            return Err(BasisError::Empty(name.to_owned()));
        }
        Ok(Basis {
            name: name.to_owned(),
            runs,
        })
    }

    /// Reads the file a band's `basis` names (`book/bases/NAME.tsv`).
    pub fn of<T>(band: &Band<T>) -> Result<Basis, BasisError> {
        Basis::of_file(band.basis)
    }

    /// Reads the file a `basis` names (`book/bases/NAME.tsv`).
    pub fn of_file(basis: &'static str) -> Result<Basis, BasisError> {
        let file = basis
            .strip_prefix(PREFIX)
            .ok_or(BasisError::NotAFile(basis))?;
        Basis::read(file)
    }

    /// Reads `book/bases/FILE`.
    pub fn read(file: &str) -> Result<Basis, BasisError> {
        let path = PathBuf::from(BASES_DIR).join(file);
        let text = fs::read_to_string(&path).map_err(|source| BasisError::Read {
            path: format!("{PREFIX}{file}"),
            source,
        })?;
        Basis::parse(file, &text)
    }

    /// The smallest and the largest run.
    pub fn range(&self) -> (f64, f64) {
        let values = self.runs.iter().map(|r| r.value);
        let min = values.clone().fold(f64::INFINITY, f64::min);
        (min, values.fold(f64::NEG_INFINITY, f64::max))
    }

    /// Whether every run is a whole number (the band is then a band of whole numbers).
    pub fn whole(&self) -> bool {
        self.runs.iter().all(|r| r.value.fract() == 0.0)
    }

    /// [`RULE`] over the runs: the band's ends.
    pub fn derived(&self) -> (f64, f64) {
        let (min, max) = self.range();
        let lo = if min >= 0.0 {
            min / FACTOR
        } else {
            min * FACTOR
        };
        let hi = if max >= 0.0 {
            max * FACTOR
        } else {
            max / FACTOR
        };
        if self.whole() {
            (lo.floor(), hi.ceil())
        } else {
            (
                (lo * 1000.0).floor() / 1000.0,
                (hi * 1000.0).ceil() / 1000.0,
            )
        }
    }

    /// Checks that `band` is [`RULE`] over these runs; the error says what the rule gives.
    pub fn holds<T: Number>(&self, name: &str, band: &Band<T>) -> Result<(), String> {
        let (lo, hi) = self.derived();
        if band.lo.as_f64() == lo && band.hi.as_f64() == hi {
            Ok(())
        } else {
            Err(format!(
                "{name} is {band}, but the rule over {} ({} runs, {}) gives [{}..={}]",
                band.basis,
                self.runs.len(),
                self.span(),
                show(lo),
                show(hi)
            ))
        }
    }

    /// `min..=max` of the runs, as printed.
    pub fn span(&self) -> String {
        let (min, max) = self.range();
        format!("{}..={}", show(min), show(max))
    }

    /// One line for chapter 10's table: how many runs, their range, profiles, loads and dates.
    pub fn summary(&self) -> String {
        let count = |p: &str| self.runs.iter().filter(|r| r.profile == p).count();
        let profiles = match (count("dev"), count("release")) {
            (d, 0) => format!("{d} dev"),
            (0, r) => format!("{r} release"),
            (d, r) => format!("{d} dev, {r} release"),
        };
        let loads = self.runs.iter().map(|r| r.load);
        let (lo, hi) = (
            loads.clone().fold(f64::INFINITY, f64::min),
            loads.fold(f64::NEG_INFINITY, f64::max),
        );
        let mut dates: Vec<&str> = self.runs.iter().map(|r| r.date.as_str()).collect();
        dates.sort_unstable();
        dates.dedup();
        let dates = match dates[..] {
            [one] => one.to_owned(),
            [first, .., last] => format!("{first} to {last}"),
            [] => unreachable!("a basis has runs"),
        };
        let loads = if lo == hi {
            show(lo)
        } else {
            format!("{}-{}", show(lo), show(hi))
        };
        format!(
            "{} runs ({profiles}), load {loads}, {dates}: {}",
            self.runs.len(),
            self.span()
        )
    }
}

/// A band's number type, as the rule sees it.
pub trait Number: Copy + PartialOrd + fmt::Display {
    /// The value as an `f64` (exact for the counts and times the book bands).
    fn as_f64(self) -> f64;
}

macro_rules! number {
    ($($t:ty),*) => {$(
        impl Number for $t {
            fn as_f64(self) -> f64 {
                self as f64
            }
        }
    )*};
}
number!(u32, u64, u128, i64, f64);

/// A number as the tables print it: whole numbers without a fraction, others to 0.001.
pub fn show(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        let s = format!("{x:.3}");
        s.trim_end_matches('0').to_owned()
    }
}

/// The one-minute load average (`/proc/loadavg`), or `None` where there is none.
pub fn load_average() -> Option<f64> {
    fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The build profile this binary was compiled with, as a basis line names it.
pub fn profile() -> &'static str {
    if cfg!(debug_assertions) {
        "dev"
    } else {
        "release"
    }
}

/// Appends `runs` to `book/bases/FILE` (created with `header` if it does not exist).
pub fn append(file: &str, header: &str, runs: &[Run]) -> std::io::Result<()> {
    use std::io::Write;
    let path = PathBuf::from(BASES_DIR).join(file);
    let fresh = !path.exists();
    let mut out = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    if fresh {
        for line in header.lines() {
            writeln!(out, "# {line}")?;
        }
        writeln!(out, "# value\tprofile\tload\tdate\trun")?;
    }
    for r in runs {
        writeln!(out, "{}", r.line())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basis(values: &[f64]) -> Basis {
        let text: String = values
            .iter()
            .map(|v| format!("{v}\tdev\t3.5\t2026-12-01\tunit test\n"))
            .collect();
        Basis::parse("unit", &text).unwrap()
    }

    #[test]
    fn the_rule_halves_the_smallest_and_doubles_the_largest_outward() {
        assert_eq!(basis(&[24.0, 37.0, 31.0]).derived(), (12.0, 74.0));
        assert_eq!(basis(&[25.0, 29.0]).derived(), (12.0, 58.0)); // 12.5 rounds down
        assert_eq!(basis(&[0.705, 1.389]).derived(), (0.352, 2.778));
        assert_eq!(basis(&[-0.5, 101.1]).derived(), (-1.0, 202.2)); // away from zero
        assert_eq!(basis(&[0.0, 3.0]).derived(), (0.0, 6.0));
    }

    #[test]
    fn a_band_that_is_not_the_rule_over_its_runs_is_named() {
        let b = basis(&[24.0, 37.0]);
        assert!(b.holds("X", &Band::new(12u32, 74u32, "x")).is_ok());
        let e = b.holds("X", &Band::new(16u32, 91u32, "x")).unwrap_err();
        assert_eq!(
            e,
            "X is [16..=91], but the rule over x (2 runs, 24..=37) gives [12..=74]"
        );
    }

    #[test]
    fn malformed_lines_are_refused_with_their_line() {
        let e = Basis::parse("f", "# head\n1\tdev\t2\t2026-12-01\n").unwrap_err();
        assert_eq!(e.to_string(), "f:2: 4 cells, want 5");
        let e = Basis::parse("f", "x\tdev\t2\t2026-12-01\tr\n").unwrap_err();
        assert_eq!(e.to_string(), "f:1: value \"x\" is not a number");
        let e = Basis::parse("f", "1\tdebug\t2\t2026-12-01\tr\n").unwrap_err();
        assert_eq!(e.to_string(), "f:1: profile \"debug\", want dev or release");
        let e = Basis::parse("f", "1\tdev\t2\t1 Dec\tr\n").unwrap_err();
        assert_eq!(e.to_string(), "f:1: date \"1 Dec\", want YYYY-MM-DD");
        let e = Basis::parse("f", "# only a header\n").unwrap_err();
        assert_eq!(e.to_string(), "f: no runs");
    }

    #[test]
    fn the_summary_counts_profiles_loads_and_dates() {
        let b = Basis::parse(
            "f",
            "3\tdev\t4.5\t2026-11-30\ta\n5\trelease\t9\t2026-12-01\tb\n",
        )
        .unwrap();
        assert_eq!(
            b.summary(),
            "2 runs (1 dev, 1 release), load 4.5-9, 2026-11-30 to 2026-12-01: 3..=5"
        );
    }
}
