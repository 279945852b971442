//! Bands derived by one rule from a basis committed as raw data: one file per band, one line
//! per measured run.
//!
//! A [`Band`] written by hand carries its basis as a sentence. The real
//! tier's bands (measured against a real kube-apiserver) are derived instead: the runs they
//! were chosen from are committed as they were measured, and [`derive()`] turns them into the
//! band by [`RULE`], so that widening a band means adding the runs that justify it.
//!
//! A basis file is tab-separated, `#` starts a comment:
//!
//! ```text
//! # value  profile  load  date
//! 31       dev      7.9   2026-12-01
//! 36       dev      11.2  2026-12-01
//! ```
//!
//! ```
//! use controlloop_book::kit::basis;
//!
//! let band = basis::derive("X", "31\tdev\t7.9\t2026-12-01\n36\tdev\t11.2\t2026-12-01\n").unwrap();
//! assert_eq!((band.lo, band.hi), (22.0, 45.0)); // 31..=36, widened by max(5, 36 / 4) = 9
//! assert!(band.basis.starts_with("2 runs (dev profile, load 7.9-11.2, 2026-12-01): 31..=36"));
//! ```

use super::band::Band;

/// The rule every derived band follows, as the basis sentence states it.
pub const RULE: &str = "widened by m = max(max - min, max / 4) each side, the low end not \
                        below 0 when no run was";

/// One measured run.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The measured value.
    pub value: f64,
    /// The build profile (`dev` or `release`).
    pub profile: String,
    /// The 1-minute load average when it ran.
    pub load: f64,
    /// The date (`YYYY-MM-DD`).
    pub date: String,
}

/// Why a basis file could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BasisError {
    /// A line is not `value<TAB>profile<TAB>load<TAB>date`.
    #[error("basis {name}, line {line}: {message}")]
    Line {
        /// The band.
        name: String,
        /// The line number (from 1).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// No runs.
    #[error("basis {0}: no runs; a band needs at least one measured run")]
    Empty(String),
}

/// The runs of a basis file's `text`.
pub fn parse(name: &str, text: &str) -> Result<Vec<Run>, BasisError> {
    let mut runs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let err = |message: String| BasisError::Line {
            name: name.to_owned(),
            line: i + 1,
            message,
        };
        let cells: Vec<&str> = line.split('\t').map(str::trim).collect();
        let [value, profile, load, date] = cells[..] else {
            return Err(err(format!("{} cells, expected 4", cells.len())));
        };
        let value: f64 = value
            .parse()
            .map_err(|_| err(format!("value {value:?} is not a number")))?;
        let load: f64 = load
            .parse()
            .map_err(|_| err(format!("load {load:?} is not a number")))?;
        if !matches!(profile, "dev" | "release") {
            return Err(err(format!("profile {profile:?}: dev or release")));
        }
        if date.len() != 10 || date.as_bytes()[4] != b'-' {
            return Err(err(format!("date {date:?}: YYYY-MM-DD")));
        }
        runs.push(Run {
            value,
            profile: profile.to_owned(),
            load,
            date: date.to_owned(),
        });
    }
    if runs.is_empty() {
        return Err(BasisError::Empty(name.to_owned()));
    }
    Ok(runs)
}

/// The band [`RULE`] gives for the runs of `text`, its basis sentence built from them.
pub fn derive(name: &str, text: &str) -> Result<Band<f64>, BasisError> {
    let runs = parse(name, text)?;
    let (min, max) = runs.iter().fold((f64::MAX, f64::MIN), |(lo, hi), r| {
        (lo.min(r.value), hi.max(r.value))
    });
    let m = (max - min).max(max.abs() / 4.0);
    let mut lo = min - m;
    if min >= 0.0 {
        lo = lo.max(0.0);
    }
    let hi = max + m;
    let (lo, hi) = (round(lo), round(hi));
    let span = |f: fn(&Run) -> String| {
        let mut v: Vec<String> = runs.iter().map(f).collect();
        v.sort();
        v.dedup();
        v.join(", ")
    };
    let (lmin, lmax) = runs.iter().fold((f64::MAX, f64::MIN), |(lo, hi), r| {
        (lo.min(r.load), hi.max(r.load))
    });
    let basis = format!(
        "{} runs ({} profile, load {}-{}, {}): {}..={}; {RULE}",
        runs.len(),
        span(|r| r.profile.clone()),
        lmin,
        lmax,
        span(|r| r.date.clone()),
        min,
        max,
    );
    // A band's basis is a &'static str: a derived one is made once per process and kept.
    Ok(Band::new(lo, hi, Box::leak(basis.into_boxed_str())))
}

/// `x` to three decimals.
fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// A line for a basis file: this run's `value`, the build profile, the load and today's date.
pub fn line(value: f64) -> String {
    let profile = if cfg!(debug_assertions) {
        "dev"
    } else {
        "release"
    };
    let date = jiff::Zoned::now().strftime("%Y-%m-%d").to_string();
    format!("{}\t{profile}\t{}\t{date}\n", round(value), load_average())
}

/// The 1-minute load average (`/proc/loadavg`), or 0 where there is none.
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_line_names_the_band_and_the_line() {
        let e = derive("B", "# c\n1\tdev\t2\t2026-01-01\n2\tdebug\t1\t2026-01-01\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "basis B, line 3: profile \"debug\": dev or release"
        );
        assert_eq!(
            derive("B", "# only a comment\n").unwrap_err(),
            BasisError::Empty("B".into())
        );
        assert!(derive("B", "x\tdev\t1\t2026-01-01").is_err());
    }

    #[test]
    fn one_run_gives_a_quarter_either_side_and_negative_runs_keep_their_low_end() {
        let b = derive("B", "8\tdev\t1\t2026-01-01\n").unwrap();
        assert_eq!((b.lo, b.hi), (6.0, 10.0));
        let b = derive("B", "-4\tdev\t1\t2026-01-01\n4\tdev\t1\t2026-01-01\n").unwrap();
        assert_eq!((b.lo, b.hi), (-12.0, 12.0));
    }
}
