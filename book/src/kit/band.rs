//! Real-clock checks: how a run-specific number is held to the claim it carries without
//! pinning the number.
//!
//! A durable claim is asserted exactly ("0 same-key violations"). A number the real clock
//! touches — a reconcile count that depends on scheduling, a latency — is not: it is checked
//! against a [`Band`], and only the band goes into the snapshot. A band states the claim it
//! carries in the one form that holds on every machine where the claim holds:
//!
//! - a **same-run law** ([`Kind::Law`]): a ratio of what the run measured to what the same
//!   run's own measurements predict (reconciles against `min(writes, span / cost + 1)`, with the
//!   span and the cost measured in that run). A machine that is slower stretches both sides of
//!   the ratio alike, so the band is two-sided and narrow;
//! - a **one-sided bound** ([`Kind::AtMost`], [`Kind::AtLeast`]): a latency or a cost has no
//!   lower end (a faster machine is never wrong), a share that the claim keeps large has no
//!   upper end, a collapse where the reconciler keeps up has no lower end;
//! - where nothing survives on every machine, no band at all: the figure is shown beside its
//!   reference runs and not checked ([`Reference`]).
//!
//! Every band carries its claim, in words, and its *basis*: the file of runs it was derived from
//! (`book/bases/NAME.tsv`, see [`crate::kit::basis`]); the band is the rule of its kind over
//! them. A band without a basis cannot be built.
//!
//! ```
//! use controlloop_book::kit::band::Band;
//!
//! const RATIO: Band<f64> = Band::law(0.7, 1.4, "reconciles follow span / cost", "an example");
//! assert_eq!(RATIO.check("reconciles / expected", 1.1).to_string(), "[0.7..=1.4]");
//! const LATENCY: Band<f64> = Band::at_most(5.0, "a write is heard within ms", "an example");
//! assert_eq!(LATENCY.check("p50 ms", 0.02).to_string(), "[..=5]"); // no lower end
//! ```
//!
//! Outside its band, the check panics with a message that says what was measured, the claim the
//! band carries, and what failing it means:
//!
//! ```should_panic
//! # use controlloop_book::kit::band::Band;
//! # const LATENCY: Band<f64> = Band::at_most(5.0, "a write is heard within ms", "an example");
//! LATENCY.check("p50 ms", 9.0); // p50 ms = 9 is outside its band [..=5] (1.8× above its upper end) …
//! ```

use std::fmt;

pub use super::basis::Kind;
use super::basis::{self, Basis, BasisError, Number};

/// The ends a measured value must lie within, the claim they carry, and the runs they were
/// derived from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Band<T> {
    /// Which claim the band carries.
    pub kind: Kind,
    /// Smallest accepted value (none for [`Kind::AtMost`]).
    pub lo: Option<T>,
    /// Largest accepted value (none for [`Kind::AtLeast`]).
    pub hi: Option<T>,
    /// The claim, in a reader's words: what holding the band shows.
    pub claim: &'static str,
    /// The file of runs it was derived from (`book/bases/NAME.tsv`), or, for an illustration,
    /// a sentence.
    pub basis: &'static str,
}

/// A measured value that was found inside its band. It displays and serialises as the band,
/// never as the value, so a snapshot containing it is stable from run to run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InBand<T> {
    band: Band<T>,
    value: T,
}

/// Which end of its band a value left by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Above the upper end.
    Above,
    /// Below the lower end.
    Below,
}

/// The error for a value outside its band. Its message is the one a failing chapter prints:
/// what was measured, the band, how far outside, the claim, and what that means.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "{what} = {value} is outside its band {band} ({margin}). The claim it carries: {claim}. \
     This run measured otherwise: if the experiment is faithful, the claim does not hold on this \
     machine, a finding to report with the run's figures (band basis: {basis})"
)]
pub struct OutOfBand {
    /// The quantity that was measured.
    pub what: String,
    /// The measured value, as printed.
    pub value: String,
    /// The band, as printed (`[lo..=hi]`, `[..=hi]` or `[lo..]`).
    pub band: String,
    /// Which end the value left by.
    pub side: Side,
    /// How far outside, as printed (`2.4× above its upper end`).
    pub margin: String,
    /// The claim the band carries.
    pub claim: &'static str,
    /// How the band was chosen.
    pub basis: &'static str,
}

impl OutOfBand {
    /// Whether the value left by the upper end.
    pub fn above(&self) -> bool {
        self.side == Side::Above
    }

    /// Whether the value left by the lower end.
    pub fn below(&self) -> bool {
        self.side == Side::Below
    }

    /// `above` or `below`.
    pub fn side_word(&self) -> &'static str {
        match self.side {
            Side::Above => "above",
            Side::Below => "below",
        }
    }
}

impl<T: Number> Band<T> {
    /// A same-run law `[lo..=hi]`: the ratio of a figure to what the same run predicts.
    ///
    /// # Panics
    /// In const context, fails to compile; otherwise panics if `claim` or `basis` is empty.
    pub const fn law(lo: T, hi: T, claim: &'static str, basis: &'static str) -> Self {
        Band::of(Kind::Law, Some(lo), Some(hi), claim, basis)
    }

    /// An upper bound `[..=hi]`: a latency, a cost, or a collapse the claim keeps small.
    pub const fn at_most(hi: T, claim: &'static str, basis: &'static str) -> Self {
        Band::of(Kind::AtMost, None, Some(hi), claim, basis)
    }

    /// A lower bound `[lo..]`: a share the claim keeps large.
    pub const fn at_least(lo: T, claim: &'static str, basis: &'static str) -> Self {
        Band::of(Kind::AtLeast, Some(lo), None, claim, basis)
    }

    const fn of(
        kind: Kind,
        lo: Option<T>,
        hi: Option<T>,
        claim: &'static str,
        basis: &'static str,
    ) -> Self {
        assert!(
            !basis.is_empty(),
            "a band needs a basis: say how it was measured"
        );
        assert!(!claim.is_empty(), "a band needs a claim: say what it shows");
        Band {
            kind,
            lo,
            hi,
            claim,
            basis,
        }
    }

    /// The same band with other ends (`None` keeps an end open): for showing how the basis
    /// check refuses a band moved by hand.
    pub fn with_ends(self, lo: Option<T>, hi: Option<T>) -> Self {
        Band { lo, hi, ..self }
    }

    /// Whether `value` lies within the band's ends.
    pub fn contains(&self, value: T) -> bool {
        self.lo.is_none_or(|lo| lo <= value) && self.hi.is_none_or(|hi| value <= hi)
    }

    /// The band's ends as `f64`s.
    pub fn ends(&self) -> (Option<f64>, Option<f64>) {
        (self.lo.map(Number::as_f64), self.hi.map(Number::as_f64))
    }

    /// The width of a two-sided band, hi / lo (`None` for a one-sided band, or a lower end at
    /// or below zero).
    pub fn width(&self) -> Option<f64> {
        match self.ends() {
            (Some(lo), Some(hi)) if lo > 0.0 => Some(hi / lo),
            _ => None,
        }
    }

    /// Checks `value`, returning it wrapped or an [`OutOfBand`] error naming `what`. A value
    /// found inside is noted for this run's claims table ([`checked`]).
    #[allow(
        clippy::result_large_err,
        reason = "the error is built once, when a check fails, and carries the whole message"
    )]
    pub fn try_check(&self, what: &str, value: T) -> Result<InBand<T>, OutOfBand> {
        if self.contains(value) {
            note(self.basis, self.to_string(), value.to_string());
            return Ok(InBand { band: *self, value });
        }
        let v = value.as_f64();
        let (side, end) = match (self.lo, self.hi) {
            (_, Some(hi)) if v > hi.as_f64() => (Side::Above, hi.as_f64()),
            (Some(lo), _) => (Side::Below, lo.as_f64()),
            _ => unreachable!("{value} is outside {self}"),
        };
        let (word, factor) = match side {
            Side::Above => ("above its upper end", v / end),
            Side::Below => ("below its lower end", end / v),
        };
        let margin = if end > 0.0 && v > 0.0 {
            format!("{}× {word}", basis::show((factor * 100.0).round() / 100.0))
        } else {
            format!(
                "{} {word}",
                basis::show(((v - end).abs() * 1000.0).round() / 1000.0)
            )
        };
        Err(OutOfBand {
            what: what.to_owned(),
            value: value.to_string(),
            band: self.to_string(),
            side,
            margin,
            claim: self.claim,
            basis: self.basis,
        })
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
    /// panicked with, its margin how far outside the broken run landed. Panics if `value` is
    /// inside, for then the band did not fire.
    ///
    /// Every band the experiments pin is shown firing in its chapter this way, and a test of
    /// the book (`book/tests/bases.rs`) holds every chapter to it.
    ///
    /// ```
    /// # use controlloop_book::kit::band::Band;
    /// const RECONCILES: Band<u64> = Band::at_most(28, "the queue merges", "an illustration");
    /// let fired = RECONCILES.fires("reconciles", 200); // a queue that merges nothing
    /// assert!(fired.above());
    /// assert_eq!(fired.margin, "7.14× above its upper end");
    /// ```
    ///
    /// ```should_panic
    /// # use controlloop_book::kit::band::Band;
    /// # const RECONCILES: Band<u64> = Band::at_most(28, "the queue merges", "an illustration");
    /// RECONCILES.fires("reconciles", 24); // reconciles = 24 is inside its band [..=28]: the band did not fire
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

/// What ties a band to its basis: reading its runs, and checking its ends are the rule over them.
impl Basis {
    /// Reads the file a band's `basis` names (`book/bases/NAME.tsv`).
    pub fn of<T>(band: &Band<T>) -> Result<Basis, BasisError> {
        Basis::of_file(band.basis)
    }

    /// Checks that `band` is the rule of its kind over these runs, and that a law's runs are
    /// all positive; the error says what the rule gives.
    pub fn holds<T: Number>(&self, name: &str, band: &Band<T>) -> Result<(), String> {
        if band.kind == Kind::Law && self.range().0 <= 0.0 {
            return Err(format!(
                "{name} is a same-run law, but {} holds a run at or below 0",
                band.basis
            ));
        }
        let want = self.derived(band.kind);
        if band.ends() == want {
            Ok(())
        } else {
            let end = |e: Option<f64>| e.map_or(String::new(), basis::show);
            Err(format!(
                "{name} is {band}, but the rule of its kind ({}) over {} ({} runs, {}) gives \
                 [{}..={}]",
                basis::rule(band.kind),
                band.basis,
                self.runs.len(),
                self.span(),
                end(want.0),
                end(want.1)
            ))
        }
    }
}

/// The firings of a chapter's block as a Markdown table for its measured values
/// ([`crate::kit::measured::record`]): each band, the broken run, its value and how far outside
/// it landed. The margins are this run's, so they go beside the snapshot, never into it.
///
/// ```
/// # use controlloop_book::kit::band::{Band, margins};
/// const B: Band<f64> = Band::at_most(2.0, "merges little", "an illustration");
/// let fired = B.fires("collapse", 9.5);
/// let table = margins(&[("B", "a debounced reconciler", &fired)]);
/// assert!(table.contains("| B | a debounced reconciler | 9.5 | 4.75× above its upper end |"));
/// ```
pub fn margins(fired: &[(&str, &str, &OutOfBand)]) -> String {
    let mut out =
        String::from("| band | broken run | value | how far outside |\n|---|---|---:|---|\n");
    for (band, run, e) in fired {
        out.push_str(&format!(
            "| {band} | {run} | {} | {} |\n",
            e.value, e.margin
        ));
    }
    out
}

/// A figure no check survives on every machine (how often the scheduler deschedules a thread
/// at the wrong moment, a count that depends on it): shown beside its reference runs and not
/// checked. The durable half of its claim is carried elsewhere (a fixed schedule, the virtual
/// clock, a same-run law), and the page says where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reference {
    /// What the figure is, in a reader's words.
    pub what: &'static str,
    /// Where the claim is carried instead.
    pub carried_by: &'static str,
    /// The file of reference runs (`book/bases/NAME.tsv`).
    pub basis: &'static str,
}

impl Reference {
    /// A figure shown beside the runs of `basis`; `carried_by` names what checks its claim.
    pub const fn new(what: &'static str, carried_by: &'static str, basis: &'static str) -> Self {
        assert!(!basis.is_empty(), "a reference needs its runs");
        assert!(!carried_by.is_empty(), "say what carries the claim instead");
        Reference {
            what,
            carried_by,
            basis,
        }
    }

    /// Notes this run's `value` for the claims table and returns it for display beside the
    /// reference runs. Never fails: nothing is checked.
    pub fn show<T: Number>(&self, value: T) -> Shown<T> {
        note(self.basis, self.to_string(), value.to_string());
        Shown {
            reference: *self,
            value,
        }
    }
}

/// The reference runs, as printed: `not checked; reference runs 29..=45 (24 runs)`.
impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match basis::Basis::of_file(self.basis) {
            Ok(b) => write!(
                f,
                "not checked; reference runs {} ({} runs)",
                b.span(),
                b.runs.len()
            ),
            Err(e) => write!(f, "not checked; reference runs unreadable: {e}"),
        }
    }
}

/// A figure shown beside its reference runs. It displays and serialises as the reference, never
/// as the value, so a snapshot containing it is stable from run to run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shown<T> {
    reference: Reference,
    value: T,
}

impl<T: Copy> Shown<T> {
    /// This run's value (for the measured values, never the snapshot).
    pub fn value(&self) -> T {
        self.value
    }
}

impl<T> fmt::Display for Shown<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.reference.fmt(f)
    }
}

impl<T> serde::Serialize for Shown<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.reference)
    }
}

/// A value this run found inside a band, or showed beside its reference runs: the basis (which
/// names the band), the band as printed, and the value as printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// The band's basis.
    pub basis: &'static str,
    /// The band, `[lo..=hi]`, or the reference runs.
    pub band: String,
    /// The value found inside it.
    pub value: String,
}

static CHECKED: std::sync::Mutex<Vec<Checked>> = std::sync::Mutex::new(Vec::new());

fn note(basis: &'static str, band: String, value: String) {
    let mut all = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
    all.push(Checked { basis, band, value });
}

/// Every value this process found inside a band (or showed) so far, in order (for the claims
/// table `cargo run` prints: each band's row shows what this run measured against it).
pub fn checked() -> Vec<Checked> {
    CHECKED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

impl<T: fmt::Display> fmt::Display for Band<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.lo, &self.hi) {
            (Some(lo), Some(hi)) => write!(f, "[{lo}..={hi}]"),
            (None, Some(hi)) => write!(f, "[..={hi}]"),
            (Some(lo), None) => write!(f, "[{lo}..]"),
            (None, None) => f.write_str("[..]"),
        }
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

    #[test]
    fn a_band_that_is_not_the_rule_over_its_runs_is_named() {
        let b = Basis::of_values(&[24.0, 37.0]);
        assert!(b.holds("X", &Band::at_most(74u32, "c", "x")).is_ok());
        let e = b.holds("X", &Band::at_most(91u32, "c", "x")).unwrap_err();
        assert_eq!(
            e,
            "X is [..=91], but the rule of its kind (max × 2, no lower end) over x (2 runs, \
             24..=37) gives [..=74]"
        );
        // The same ends under another kind are another band.
        assert!(b.holds("X", &Band::at_least(12u32, "c", "x")).is_ok());
        assert!(b.holds("X", &Band::law(12u32, 74, "c", "x")).is_err());
        // A law needs positive runs.
        let e = Basis::of_values(&[0.0, 3.0])
            .holds("X", &Band::law(0.0, 6.0, "c", "x"))
            .unwrap_err();
        assert!(e.contains("at or below 0"), "{e}");
    }

    const B: Band<u64> = Band::law(20, 28, "unit", "unit test");
    const UP: Band<f64> = Band::at_most(5.0, "unit: small", "unit test");
    const DOWN: Band<f64> = Band::at_least(0.5, "unit: large", "unit test");

    #[test]
    fn the_ends_are_inside_and_a_one_sided_band_has_one_end() {
        assert_eq!(B.check("x", 20).value(), 20);
        assert_eq!(B.check("x", 28).value(), 28);
        assert!(UP.contains(0.0) && UP.contains(5.0) && !UP.contains(5.001));
        assert!(DOWN.contains(1e9) && DOWN.contains(0.5) && !DOWN.contains(0.49));
        assert_eq!(
            (UP.to_string(), DOWN.to_string()),
            ("[..=5]".into(), "[0.5..]".into())
        );
        assert_eq!((B.width(), UP.width()), (Some(1.4), None));
    }

    #[test]
    fn an_out_of_band_value_names_quantity_value_band_margin_and_claim() {
        let e = B.try_check("reconciles", 56).unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("reconciles = 56 is outside its band [20..=28] (2× above its upper end). The claim it carries: unit."),
            "{text}"
        );
        assert!(text.ends_with("(band basis: unit test)"), "{text}");
        let e = DOWN.try_check("share", 0.0).unwrap_err();
        assert!(e.below());
        assert_eq!(e.margin, "0.5 below its lower end");
        assert_eq!(
            UP.try_check("ms", 20.0).unwrap_err().margin,
            "4× above its upper end"
        );
    }

    #[test]
    #[should_panic(expected = "reconciles = 31 is outside its band [20..=28]")]
    fn check_panics_out_of_band() {
        B.check("reconciles", 31);
    }

    #[test]
    fn a_value_inside_is_noted_and_one_outside_is_not() {
        const NOTED: Band<u64> = Band::law(1, 2, "unit", "unit test: noted");
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
        const FIRING: Band<u64> = Band::law(20, 28, "unit", "unit test: firing");
        assert_eq!(FIRING.fires("x", 19).value, "19");
        assert!(FIRING.fires("x", 19).below());
        assert!(FIRING.fires("x", 29).above());
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

    #[test]
    fn a_reference_shows_its_runs_and_never_the_value() {
        const R: Reference = Reference::new(
            "violations",
            "the fixed schedule",
            "book/bases/channel_violations.tsv",
        );
        let shown = R.show(7u64);
        assert_eq!(shown.value(), 7);
        let text = shown.to_string();
        assert!(text.starts_with("not checked; reference runs "), "{text}");
        assert!(!text.contains(" 7 "), "{text}");
        const MISSING: Reference = Reference::new("x", "y", "book/bases/no_such_file.tsv");
        assert!(MISSING.to_string().contains("unreadable"));
    }
}
