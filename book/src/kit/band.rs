//! Tolerance bands: how a run-specific number is pinned without pinning the number.
//!
//! A durable claim is asserted exactly ("0 same-key violations"). A run-specific number — a
//! reconcile count that depends on scheduling, a wall-clock time — is not: it is checked
//! against a band `[lo..=hi]`, and only the band goes into the snapshot. The snapshot then
//! changes when, and only when, someone moves the band, and that change is reviewed like any
//! other change of a claim.
//!
//! Every band carries its *basis*. For a band the book's experiments check, that is the file
//! of runs it was derived from (`book/bases/NAME.tsv`, see [`crate::kit::basis`]), and the band
//! is the one rule over them; for a band written to illustrate (as below), a sentence. A band
//! without a basis cannot be built.
//!
//! ```
//! use controlloop_book::kit::band::Band;
//!
//! // Measured: 10 runs gave 22..=26 under a parallel `cargo test`; ±10 % margin.
//! const RECONCILES: Band<u64> = Band::new(20, 28, "10 runs: 22..=26, ±10 %");
//! let pinned = RECONCILES.check("reconciles", 24);
//! assert_eq!(pinned.to_string(), "[20..=28]");
//! assert_eq!(pinned.value(), 24);
//! ```
//!
//! Out of band, the check panics and names the quantity, the value and the band:
//!
//! ```should_panic
//! # use controlloop_book::kit::band::Band;
//! # const RECONCILES: Band<u64> = Band::new(20, 28, "10 runs: 22..=26, ±10 %");
//! RECONCILES.check("reconciles", 31); // reconciles = 31 is outside its band [20..=28]
//! ```

use std::fmt;

/// A closed interval a measured value must fall in, with the reason it is that wide.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Band<T> {
    /// Smallest accepted value.
    pub lo: T,
    /// Largest accepted value.
    pub hi: T,
    /// How the band was chosen: the file of runs it was derived from (`book/bases/NAME.tsv`),
    /// or, for an illustration, a sentence.
    pub basis: &'static str,
}

/// A measured value that was found inside its band. It displays and serialises as the band,
/// never as the value, so a snapshot containing it is stable from run to run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InBand<T> {
    band: Band<T>,
    value: T,
}

/// The error for a value outside its band. Its message is the one a failing chapter prints.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{what} = {value} is outside its band [{lo}..={hi}] (band basis: {basis})")]
pub struct OutOfBand {
    /// The quantity that was measured.
    pub what: String,
    /// The measured value, as printed.
    pub value: String,
    /// The band's lower end, as printed.
    pub lo: String,
    /// The band's upper end, as printed.
    pub hi: String,
    /// How the band was chosen.
    pub basis: &'static str,
}

impl<T: PartialOrd + Copy + fmt::Display> Band<T> {
    /// A band `[lo..=hi]`. `basis` says how it was chosen from measurement.
    ///
    /// # Panics
    /// In const context, fails to compile; otherwise panics if `basis` is empty.
    pub const fn new(lo: T, hi: T, basis: &'static str) -> Self {
        assert!(
            !basis.is_empty(),
            "a band needs a basis: say how it was measured"
        );
        Band { lo, hi, basis }
    }

    /// Whether `value` lies in `[lo..=hi]`.
    pub fn contains(&self, value: T) -> bool {
        self.lo <= value && value <= self.hi
    }

    /// Checks `value`, returning it wrapped or an [`OutOfBand`] error naming `what`. A value
    /// found inside is noted for this run's claims table ([`checked`]).
    pub fn try_check(&self, what: &str, value: T) -> Result<InBand<T>, OutOfBand> {
        if self.contains(value) {
            note(self.basis, self.to_string(), value.to_string());
            Ok(InBand { band: *self, value })
        } else {
            Err(OutOfBand {
                what: what.to_owned(),
                value: value.to_string(),
                lo: self.lo.to_string(),
                hi: self.hi.to_string(),
                basis: self.basis,
            })
        }
    }

    /// Checks `value` and panics with the [`OutOfBand`] message if it is outside.
    #[track_caller]
    pub fn check(&self, what: &str, value: T) -> InBand<T> {
        match self.try_check(what, value) {
            Ok(v) => v,
            Err(e) => panic!("{e}"),
        }
    }

    /// The other half of a band: shows that it can tell. `value` comes from a broken variant,
    /// and the band must reject it; the error is what [`check`](Self::check) would have
    /// panicked with. Panics if `value` is inside, for then the band did not fire.
    ///
    /// Every band the experiments pin is shown firing in its chapter this way, and a test of
    /// the book (`book/tests/book_layout.rs`) holds every chapter to it.
    ///
    /// ```
    /// # use controlloop_book::kit::band::Band;
    /// const RECONCILES: Band<u64> = Band::new(20, 28, "an illustration");
    /// let fired = RECONCILES.fires("reconciles", 200); // a queue that merges nothing
    /// assert_eq!(fired.to_string(), "reconciles = 200 is outside its band [20..=28] (band basis: an illustration)");
    /// ```
    ///
    /// ```should_panic
    /// # use controlloop_book::kit::band::Band;
    /// # const RECONCILES: Band<u64> = Band::new(20, 28, "an illustration");
    /// RECONCILES.fires("reconciles", 24); // reconciles = 24 is inside its band [20..=28]: the band did not fire
    /// ```
    #[track_caller]
    pub fn fires(&self, what: &str, value: T) -> OutOfBand {
        if self.contains(value) {
            panic!("{what} = {value} is inside its band {self}: the band did not fire");
        }
        match self.try_check(what, value) {
            Err(e) => e,
            Ok(_) => unreachable!("{value} is outside {self}"),
        }
    }
}

/// A value this run found inside a band: the band's basis (which names the band), the band as
/// printed, and the value as printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// The band's basis.
    pub basis: &'static str,
    /// The band, `[lo..=hi]`.
    pub band: String,
    /// The value found inside it.
    pub value: String,
}

static CHECKED: std::sync::Mutex<Vec<Checked>> = std::sync::Mutex::new(Vec::new());

fn note(basis: &'static str, band: String, value: String) {
    let mut all = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
    all.push(Checked { basis, band, value });
}

/// Every value this process found inside a band so far, in order (for the claims table
/// `cargo run` prints: each band's row shows what this run measured against it).
pub fn checked() -> Vec<Checked> {
    CHECKED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

impl<T: fmt::Display> fmt::Display for Band<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}..={}]", self.lo, self.hi)
    }
}

impl<T: Copy> InBand<T> {
    /// The measured value. Use it for further assertions, never for the snapshot.
    pub fn value(&self) -> T {
        self.value
    }

    /// The band the value was found in.
    pub fn band(&self) -> Band<T> {
        self.band
    }
}

impl<T: fmt::Display> fmt::Display for InBand<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.band.fmt(f)
    }
}

impl<T: fmt::Display> serde::Serialize for InBand<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.band)
    }
}

/// An insta redaction that checks a numeric field against `band` and stores the band in its
/// place. Use it when the report struct should stay plain numbers (for the command line),
/// and only the snapshot needs the band.
pub fn redaction(band: Band<f64>) -> insta::internals::Redaction {
    insta::dynamic_redaction(move |value, path| {
        let v = value
            .as_f64()
            .or_else(|| value.as_i64().map(|x| x as f64))
            .or_else(|| value.as_u64().map(|x| x as f64))
            .unwrap_or_else(|| panic!("{path}: a band needs a number, got {value:?}"));
        let what = path.to_string();
        band.check(what.trim_start_matches('.'), v).to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: Band<u64> = Band::new(20, 28, "unit test");

    #[test]
    fn the_ends_are_inside() {
        assert_eq!(B.check("x", 20).value(), 20);
        assert_eq!(B.check("x", 28).value(), 28);
    }

    #[test]
    fn an_out_of_band_value_is_an_error_naming_quantity_value_and_band() {
        let e = B.try_check("reconciles", 31).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("reconciles = 31 is outside its band [20..=28]"),
            "{e}"
        );
        assert!(B.try_check("reconciles", 19).is_err());
    }

    #[test]
    #[should_panic(expected = "reconciles = 31 is outside its band [20..=28]")]
    fn check_panics_out_of_band() {
        B.check("reconciles", 31);
    }

    #[test]
    fn a_value_inside_is_noted_and_one_outside_is_not() {
        const NOTED: Band<u64> = Band::new(1, 2, "unit test: noted");
        NOTED.check("x", 2);
        assert!(NOTED.try_check("x", 3).is_err());
        let noted: Vec<String> = checked()
            .into_iter()
            .filter(|c| c.basis == NOTED.basis)
            .map(|c| format!("{} {}", c.value, c.band))
            .collect();
        assert_eq!(noted, ["2 [1..=2]"]);
    }

    #[test]
    fn fires_returns_the_error_on_either_side_and_notes_nothing() {
        const FIRING: Band<u64> = Band::new(20, 28, "unit test: firing");
        assert_eq!(FIRING.fires("x", 19).value, "19");
        assert_eq!(FIRING.fires("x", 29).lo, "20");
        assert!(checked().iter().all(|c| c.basis != FIRING.basis));
    }

    #[test]
    #[should_panic(expected = "x = 28 is inside its band [20..=28]: the band did not fire")]
    fn fires_panics_when_the_value_is_inside() {
        B.fires("x", 28);
    }

    #[test]
    fn the_snapshot_sees_the_band_not_the_value() {
        let v = B.check("reconciles", 23);
        assert_eq!(serde_json::to_string(&v).unwrap(), "\"[20..=28]\"");
    }
}
