//! Bases: the runs a real-clock band is derived from, committed as raw data, and the rule of
//! each kind of band that turns them into its ends.
//!
//! A run-specific number is checked against a band. Where the band comes from is not a
//! sentence: it is a file, `book/bases/NAME.tsv`, with one line per measured run, and the band
//! is the rule of its [`Kind`] applied to those lines. The band's `basis` names the file. A
//! test (`book/tests/bases.rs`) holds every committed band equal to the rule over its file, so a
//! band can move only by a reviewed change to its runs, never by retyping its ends, and never
//! to make room for a figure it is later compared with.
//!
//! A line is tab-separated: the value, the build profile (`dev` or `release`), the regime the
//! run was measured in ([`Regime`]), the machine's one-minute load average when the run ended,
//! the date, and what ran (free text). Lines that start with `#` say how the file was measured.
//! `cargo run -- measure GROUP --runs N` appends lines (the experiments run as `cargo test` runs
//! them, without their bands), and records the regime itself:
//!
//! ```
//! use controlloop_book::kit::basis::{Basis, Kind};
//!
//! let basis = Basis::parse(
//!     "example",
//!     "# value\tprofile\tregime\tload\tdate\trun\n\
//!      0.9\tdev\tquiet\t0.2\t2026-12-07\tessay storm\n\
//!      1.1\trelease\tloaded\t4.1\t2026-12-07\tessay storm\n",
//! )
//! .unwrap();
//! assert_eq!(basis.range(), (0.9, 1.1));
//! assert_eq!(basis.derived(Kind::AtMost), (None, Some(2.2))); // max × 2
//! assert_eq!(basis.derived(Kind::Law), (Some(0.703), Some(1.408))); // 2× wide about the middle
//! ```
//!
//! # The rules, and why these
//!
//! - **A same-run law**: the runs' range widened about its geometric middle `m = √(min·max)` to a
//!   width `w` (hi / lo) of [`LAW_WIDTH`], or to [`LAW_MARGIN`] times the runs' own width where
//!   that is more: `[m / √w, m × √w]`. A law divides out what a machine changes (a slower machine
//!   stretches the span and the cost alike), so its runs lie close together in every regime and
//!   its band can be narrow enough to tell.
//! - **An upper bound**: `max × 2`. **A lower bound**: `min / 2`. What moves a latency, a cost
//!   or a share between machines and loads is a rate — how late a sleep wakes, how often a
//!   thread is descheduled — and a rate scales a figure by a factor. The factor holds the runs
//!   of every regime measured, with room, and the open end holds every machine faster or
//!   quieter than the ones measured: no claim asks a latency to be large.
//!
//! Every end is rounded outward, to whole numbers when every run is a whole number, else to
//! 0.001. The runs of every regime count: a bound derived from them holds in each, and chapter
//! 10 shows each regime's runs beside the band.

use std::{fmt, fs, path::PathBuf};

/// The rules, as the page states them.
pub const RULE: &str = "a same-run law: the runs' range widened about its geometric middle to \
                        2× wide (hi / lo), or to 1.25 × the runs' own width where that is more; \
                        an upper bound: max × 2; a lower bound: min / 2; every end rounded \
                        outward (to whole numbers for a basis of whole numbers, else to 0.001)";

/// Which claim a band carries, and so which ends it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Kind {
    /// A same-run law: a ratio of two figures of the same run. Two ends, at most
    /// [`LAW_WIDTH`] apart (hi / lo) unless its chapter says why.
    Law,
    /// An upper bound only: a latency, a cost, a collapse where the reconciler keeps up.
    AtMost,
    /// A lower bound only: a share the claim keeps large.
    AtLeast,
}

impl Kind {
    /// The kind as chapter 10's table names it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Law => "same-run law",
            Kind::AtMost => "upper bound",
            Kind::AtLeast => "lower bound",
        }
    }
}

/// The rule of one kind of band, as chapter 10's table names it.
pub fn rule(kind: Kind) -> &'static str {
    match kind {
        Kind::Law => "the runs' range, widened about its middle to max(2, 1.25 × its width)",
        Kind::AtMost => "max × 2, no lower end",
        Kind::AtLeast => "min / 2, no upper end",
    }
}

/// The factor of a one-sided bound.
pub const FACTOR: f64 = 2.0;

/// The least width (hi / lo) of a same-run law's band, and the most it may have unless its
/// chapter says why.
pub const LAW_WIDTH: f64 = 2.0;

/// How much wider than its runs a same-run law's band is, where the runs span more than
/// [`LAW_WIDTH`] / `LAW_MARGIN`.
pub const LAW_MARGIN: f64 = 1.25;

/// How a run was measured: what else the machine was doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Regime {
    /// Nothing else running: the one-minute load under 0.5 when the run started.
    Quiet,
    /// Under a CPU hog of twice the cores, which `measure --hog` starts and stops itself.
    Loaded,
    /// The process pinned to one CPU (`taskset -c 0 cargo run -- measure …`).
    OneCore,
    /// None of the above: the machine busy with other work (a parallel `cargo test`, a build),
    /// at the load the line records.
    Busy,
}

impl Regime {
    /// Every regime, in the order the table shows them.
    pub const ALL: [Regime; 4] = [Regime::Quiet, Regime::Loaded, Regime::OneCore, Regime::Busy];

    /// The regime as a basis line names it.
    pub fn name(self) -> &'static str {
        match self {
            Regime::Quiet => "quiet",
            Regime::Loaded => "loaded",
            Regime::OneCore => "one-core",
            Regime::Busy => "busy",
        }
    }

    /// The regime a basis line names.
    pub fn parse(name: &str) -> Option<Regime> {
        Regime::ALL.into_iter().find(|r| r.name() == name)
    }

    /// The regime of a run about to start in this process: one core where the process may run
    /// on one CPU only, else loaded where `hog` (the command's own CPU hog) runs, else quiet
    /// where the load is under 0.5, else busy.
    pub fn now(hog: bool) -> Regime {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cpus == 1 {
            Regime::OneCore
        } else if hog {
            Regime::Loaded
        } else if load_average().is_some_and(|l| l < 0.5) {
            Regime::Quiet
        } else {
            Regime::Busy
        }
    }
}

impl fmt::Display for Regime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

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
    /// What else the machine was doing.
    pub regime: Regime,
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
            "{}\t{}\t{}\t{}\t{}\t{}",
            self.value, self.profile, self.regime, self.load, self.date, self.what
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
    /// A line is not `value, profile, regime, load, date, what`.
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
            let [value, profile, regime, load, date, what] = cells[..] else {
                return Err(bad(i + 1, format!("{} cells, want 6", cells.len())));
            };
            let Some(regime) = Regime::parse(regime) else {
                return Err(bad(
                    i + 1,
                    format!("regime {regime:?}, want quiet, loaded, one-core or busy"),
                ));
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
                regime,
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

    /// The rule of `kind` over the runs: the band's ends (`None`: no end on that side).
    pub fn derived(&self, kind: Kind) -> (Option<f64>, Option<f64>) {
        let (min, max) = self.range();
        let (lo, hi) = match kind {
            Kind::Law => {
                let middle = (min * max).sqrt();
                let width = LAW_WIDTH.max(LAW_MARGIN * max / min);
                (Some(middle / width.sqrt()), Some(middle * width.sqrt()))
            }
            Kind::AtMost => (
                None,
                Some(if max >= 0.0 {
                    max * FACTOR
                } else {
                    max / FACTOR
                }),
            ),
            Kind::AtLeast => (
                Some(if min >= 0.0 {
                    min / FACTOR
                } else {
                    min * FACTOR
                }),
                None,
            ),
        };
        let whole = self.whole();
        let down = |x: f64| {
            if whole {
                x.floor()
            } else {
                (x * 1000.0).floor() / 1000.0
            }
        };
        let up = |x: f64| {
            if whole {
                x.ceil()
            } else {
                (x * 1000.0).ceil() / 1000.0
            }
        };
        (lo.map(down), hi.map(up))
    }

    /// Where a figure from elsewhere (an essay's, client-go's) lies among these runs, as the
    /// tables of figures from elsewhere print it: `24: below all 24 runs here (29 to 45)`. It
    /// places the figure; it never judges it (that is the harness's verdict).
    pub fn beside(&self, figure: f64) -> String {
        let (min, max) = self.range();
        let n = self.runs.len();
        let place = if figure < min {
            format!("below all {n} runs here")
        } else if figure > max {
            format!("above all {n} runs here")
        } else {
            format!("within the {n} runs here")
        };
        format!(
            "{}: {place} ({} to {})",
            show((figure * 1e6).round() / 1e6),
            show(min),
            show(max)
        )
    }

    /// `min..=max` of the runs, as printed.
    pub fn span(&self) -> String {
        let (min, max) = self.range();
        format!("{}..={}", show(min), show(max))
    }

    /// One line for chapter 10's table: how many runs, of which profiles, in which regimes,
    /// at which loads, on which dates, and their range.
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

    /// Each regime's runs, for chapter 10's table: the regime, how many runs of each profile,
    /// and their min / median / max. Regimes without runs are left out.
    pub fn regimes(&self) -> Vec<RegimeRuns> {
        Regime::ALL
            .into_iter()
            .filter_map(|regime| {
                let mut values: Vec<f64> = self
                    .runs
                    .iter()
                    .filter(|r| r.regime == regime)
                    .map(|r| r.value)
                    .collect();
                if values.is_empty() {
                    return None;
                }
                values.sort_by(f64::total_cmp);
                let of = |p: &str| {
                    self.runs
                        .iter()
                        .filter(|r| r.regime == regime && r.profile == p)
                        .count()
                };
                Some(RegimeRuns {
                    regime,
                    dev: of("dev"),
                    release: of("release"),
                    min: values[0],
                    median: values[values.len() / 2],
                    max: values[values.len() - 1],
                })
            })
            .collect()
    }
}

/// One regime's runs of a basis ([`Basis::regimes`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RegimeRuns {
    /// The regime.
    pub regime: Regime,
    /// Runs of the dev profile.
    pub dev: usize,
    /// Runs of the release profile.
    pub release: usize,
    /// The smallest run.
    pub min: f64,
    /// The median run (the upper one of an even count).
    pub median: f64,
    /// The largest run.
    pub max: f64,
}

impl fmt::Display for RegimeRuns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let profiles = match (self.dev, self.release) {
            (d, 0) => format!("{d} dev"),
            (0, r) => format!("{r} release"),
            (d, r) => format!("{d} dev + {r} release"),
        };
        write!(
            f,
            "{:<8} {profiles:<18} min {} median {} max {}",
            self.regime.name(),
            show(self.min),
            show(self.median),
            show(self.max)
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
        let digits = if x.abs() < 0.01 { 6 } else { 3 };
        let s = format!("{x:.digits$}");
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
        writeln!(out, "# value\tprofile\tregime\tload\tdate\trun")?;
    }
    for r in runs {
        writeln!(out, "{}", r.line())?;
    }
    Ok(())
}

#[cfg(test)]
impl Basis {
    /// A basis of `values`, each a quiet dev run (for unit tests).
    pub(crate) fn of_values(values: &[f64]) -> Basis {
        let text: String = values
            .iter()
            .map(|v| format!("{v}\tdev\tquiet\t0.3\t2026-12-01\tunit test\n"))
            .collect();
        Basis::parse("unit", &text).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basis(values: &[f64]) -> Basis {
        Basis::of_values(values)
    }

    #[test]
    fn a_bound_doubles_the_largest_or_halves_the_smallest_outward() {
        let b = basis(&[24.0, 37.0, 31.0]);
        assert_eq!(b.derived(Kind::AtMost), (None, Some(74.0)));
        assert_eq!(b.derived(Kind::AtLeast), (Some(12.0), None));
        assert_eq!(
            basis(&[25.0, 29.0]).derived(Kind::AtLeast),
            (Some(12.0), None)
        ); // 12.5 down
        assert_eq!(
            basis(&[0.705, 1.389]).derived(Kind::AtMost),
            (None, Some(2.778))
        );
        assert_eq!(
            basis(&[-0.5, 101.1]).derived(Kind::AtLeast),
            (Some(-1.0), None)
        ); // away from 0
    }

    #[test]
    fn a_law_is_two_wide_about_its_middle_or_a_quarter_wider_than_its_runs() {
        // 0.81..=1.15 spans 1.42×: widened to 2× about √(0.81 × 1.15) = 0.965.
        let (lo, hi) = basis(&[0.81, 1.15]).derived(Kind::Law);
        assert_eq!((lo, hi), (Some(0.682), Some(1.365)));
        // 0.5..=1.5 spans 3×: 3.75× wide.
        let (lo, hi) = basis(&[0.5, 1.5]).derived(Kind::Law);
        let (lo, hi) = (lo.unwrap(), hi.unwrap());
        assert!((hi / lo - 3.75).abs() < 0.01, "{lo} {hi}");
        assert!(lo < 0.5 && hi > 1.5);
    }

    #[test]
    fn malformed_lines_are_refused_with_their_line() {
        let e = Basis::parse("f", "# head\n1\tdev\tquiet\t2\t2026-12-01\n").unwrap_err();
        assert_eq!(e.to_string(), "f:2: 5 cells, want 6");
        let e = Basis::parse("f", "x\tdev\tquiet\t2\t2026-12-01\tr\n").unwrap_err();
        assert_eq!(e.to_string(), "f:1: value \"x\" is not a number");
        let e = Basis::parse("f", "1\tdebug\tquiet\t2\t2026-12-01\tr\n").unwrap_err();
        assert_eq!(e.to_string(), "f:1: profile \"debug\", want dev or release");
        let e = Basis::parse("f", "1\tdev\tcalm\t2\t2026-12-01\tr\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f:1: regime \"calm\", want quiet, loaded, one-core or busy"
        );
        let e = Basis::parse("f", "1\tdev\tquiet\t2\t1 Dec\tr\n").unwrap_err();
        assert_eq!(e.to_string(), "f:1: date \"1 Dec\", want YYYY-MM-DD");
        let e = Basis::parse("f", "# only a header\n").unwrap_err();
        assert_eq!(e.to_string(), "f: no runs");
    }

    #[test]
    fn the_summary_counts_profiles_loads_and_dates_and_the_regimes_split_the_runs() {
        let b = Basis::parse(
            "f",
            "3\tdev\tquiet\t0.2\t2026-11-30\ta\n5\trelease\tloaded\t9\t2026-12-01\tb\n\
             4\tdev\tloaded\t8\t2026-12-01\tb\n",
        )
        .unwrap();
        assert_eq!(
            b.summary(),
            "3 runs (2 dev, 1 release), load 0.2-9, 2026-11-30 to 2026-12-01: 3..=5"
        );
        let regimes: Vec<String> = b.regimes().iter().map(|r| r.to_string()).collect();
        assert_eq!(
            regimes,
            [
                "quiet    1 dev              min 3 median 3 max 3",
                "loaded   1 dev + 1 release  min 4 median 5 max 5",
            ]
        );
    }
}
