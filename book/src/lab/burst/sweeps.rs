//! The sweeps chapter 06 runs, and the durable claims checked on every run.
//!
//! Each sweep varies one parameter of the essay's run ([`crate::lab::rig::ESSAY`], one
//! worker) and runs under both clocks, each run through [`super::run`]. Virtual-time rows are
//! pinned exactly ([`rows_table`]). Real-clock rows are pinned through the bands in
//! [`super::bands`] ([`real_table`]); this run's values go to the site beside them
//! ([`measured_table`]).

use std::{collections::BTreeMap, fmt::Write as _, time::Duration};

use super::{Clock, Params, Report, bands};
pub use crate::lab::rig::burst::{
    converge_overhead_ms, expected_reconciles, millis, reconcile_ratio, round3, write_overhead_ms,
};

/// The reconcile costs of the cost sweep, in ms.
pub const COSTS_MS: [u64; 7] = [0, 1, 5, 10, 20, 50, 100];
/// The write counts of the write-count sweep (at 20 ms).
pub const WRITES: [u64; 4] = [100, 200, 400, 800];
/// The gaps of the gap sweep, in ms (at 20 ms).
pub const GAPS_MS: [u64; 4] = [0, 1, 4, 8];

/// Under virtual time, reconciles stay within this many of `min(writes, span / cost + 1)`.
pub const VIRTUAL_TOLERANCE: f64 = 1.0;

/// One of the three sweeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Sweep {
    /// Reconcile cost over [`COSTS_MS`].
    Cost,
    /// Write count over [`WRITES`].
    Writes,
    /// Gap over [`GAPS_MS`].
    Gap,
}

impl Sweep {
    /// All three.
    pub const ALL: [Sweep; 3] = [Sweep::Cost, Sweep::Writes, Sweep::Gap];

    /// The runs of this sweep under `clock` (real: over HTTP to the embedded server).
    pub fn params(self, clock: Clock) -> Vec<Params> {
        let ms = Duration::from_millis;
        let base = match clock {
            Clock::Virtual => Params::essay(),
            Clock::Real => Params::essay().real(),
        };
        match self {
            Sweep::Cost => COSTS_MS.iter().map(|&c| base.clone().cost(ms(c))).collect(),
            Sweep::Writes => WRITES.iter().map(|&w| base.clone().writes(w)).collect(),
            Sweep::Gap => GAPS_MS.iter().map(|&g| base.clone().gap(ms(g))).collect(),
        }
    }

    /// Runs the sweep, calling `progress` after each run.
    pub fn run(self, clock: Clock, mut progress: impl FnMut(&Report)) -> Vec<Report> {
        self.params(clock)
            .iter()
            .map(|p| {
                let r = super::run(p).unwrap_or_else(|e| panic!("burst {p:?} failed: {e}"));
                progress(&r);
                r
            })
            .collect()
    }
}

/// A durable claim that did not hold for one run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClaimFailed {
    /// Cost below gap, yet some events were merged.
    #[error(
        "cost {cost_ms} ms < gap {gap_ms} ms, yet collapse = {collapse} (expected exactly 1.0)"
    )]
    CollapsedBelowGap {
        /// The cost.
        cost_ms: u64,
        /// The gap.
        gap_ms: u64,
        /// The collapse measured.
        collapse: f64,
    },
    /// Cost above the gap and more than one write, yet nothing was merged.
    #[error("cost {cost_ms} ms > gap {gap_ms} ms, yet collapse = 1.0: the queue merged nothing")]
    NoCollapseWhenBehind {
        /// The cost.
        cost_ms: u64,
        /// The gap.
        gap_ms: u64,
    },
    /// The reconcile count left its tolerance around `min(writes, span / cost + 1)`.
    #[error("{reconciles} reconciles vs expected {expected:.2}: outside the tolerance ({why})")]
    OffTheFormula {
        /// Reconciles measured.
        reconciles: u64,
        /// `min(writes, span / cost + 1)`.
        expected: f64,
        /// Which tolerance.
        why: String,
    },
    /// The controller did not end on the last value written.
    #[error("final observed value {observed:?} != final written value {written}")]
    WrongFinalValue {
        /// What the last reconcile acted on.
        observed: Option<u64>,
        /// The last value written.
        written: u64,
    },
}

/// Checks the durable claims on one run: under virtual time collapse is exactly 1.0 when
/// cost < gap (under the real clock events sometimes arrive together; see
/// [`bands::REAL_COLLAPSE_AT_OR_BELOW_GAP`]); it is above 1.0 when cost > gap; the reconcile
/// count is near [`expected_reconciles`] (virtual: within [`VIRTUAL_TOLERANCE`]; real: its
/// ratio in [`bands::REAL_RECONCILE_RATIO`]); the last reconcile acted on the last value
/// written.
pub fn check_claims(r: &Report) -> Result<(), ClaimFailed> {
    let (cost_ms, gap_ms) = (r.cost.as_millis() as u64, r.gap.as_millis() as u64);
    if r.clock == Clock::Virtual && r.cost < r.gap && r.collapse != 1.0 {
        return Err(ClaimFailed::CollapsedBelowGap {
            cost_ms,
            gap_ms,
            collapse: r.collapse,
        });
    }
    if r.cost > r.gap && r.writes_issued > 1 && r.collapse <= 1.0 {
        return Err(ClaimFailed::NoCollapseWhenBehind { cost_ms, gap_ms });
    }
    let expected = expected_reconciles(r);
    let off = match r.clock {
        Clock::Virtual => ((r.reconciles as f64 - expected).abs() > VIRTUAL_TOLERANCE)
            .then(|| format!("virtual: within {VIRTUAL_TOLERANCE}")),
        Clock::Real => {
            let ratio = r.reconciles as f64 / expected;
            bands::REAL_RECONCILE_RATIO
                .try_check("reconciles / expected", round3(ratio))
                .err()
                .map(|e| e.to_string())
        }
    };
    if let Some(why) = off {
        return Err(ClaimFailed::OffTheFormula {
            reconciles: r.reconciles,
            expected,
            why,
        });
    }
    if !r.ended_on_final_value() {
        return Err(ClaimFailed::WrongFinalValue {
            observed: r.final_observed,
            written: r.final_written,
        });
    }
    Ok(())
}

/// Spans within this fraction of each other are one span to [`reconciles_follow_span`].
pub const SAME_SPAN: f64 = 0.1;

/// Runs grouped by (events, cost in ms), each as (span in ms, reconciles) sorted by span.
pub type SpanGroups = BTreeMap<(u64, u64), Vec<(f64, u64)>>;

/// Among runs with the same number of events and the same cost, a longer span gave more
/// reconciles: the count follows the span, not the events. Returns the groups it compared
/// (events, cost in ms) → reconciles by span, and fails if a group is not increasing. Two
/// spans closer than [`SAME_SPAN`] (relative) count as one span and are not ordered: under the
/// real clock back-to-back writes can take as long as writes 1 ms apart.
pub fn reconciles_follow_span(reports: &[Report]) -> Result<SpanGroups, String> {
    let mut groups = SpanGroups::new();
    for r in reports {
        groups
            .entry((r.events_delivered, r.cost.as_millis() as u64))
            .or_default()
            .push((millis(r.burst_span), r.reconciles));
    }
    groups.retain(|_, v| v.len() > 1);
    for ((events, cost), runs) in &mut groups {
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        runs.dedup();
        if runs
            .windows(2)
            .any(|w| w[1].0 > w[0].0 * (1.0 + SAME_SPAN) && w[1].1 <= w[0].1)
        {
            return Err(format!(
                "{events} events at {cost} ms: reconciles do not grow with the span: {runs:?}"
            ));
        }
    }
    Ok(groups)
}

/// The virtual-time rows of `reports` as a fixed-width text table: every value exact.
pub fn rows_table(reports: &[Report]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>6} {:>4} {:>5} {:>6} {:>8} {:>10} {:>8} {:>8} {:>6} {:>11}",
        "writes",
        "gap",
        "cost",
        "events",
        "span ms",
        "reconciles",
        "expected",
        "collapse",
        "final",
        "converge ms"
    );
    for r in reports {
        assert_eq!(
            r.clock,
            Clock::Virtual,
            "rows_table prints exact values only"
        );
        let _ = writeln!(
            out,
            "{} {:>8} {:>10} {:>8} {:>8} {:>6} {:>11}",
            row_head(r),
            millis(r.burst_span),
            r.reconciles,
            round3(expected_reconciles(r)),
            r.collapse,
            final_of(r),
            millis(r.converge),
        );
    }
    out
}

/// The first four columns of every table row: writes, gap, cost, events.
fn row_head(r: &Report) -> String {
    format!(
        "{:>6} {:>4} {:>5} {:>6}",
        r.writes_issued,
        r.gap.as_millis(),
        r.cost.as_millis(),
        r.events_delivered
    )
}

fn final_of(r: &Report) -> String {
    r.final_observed.map_or("none".into(), |v| v.to_string())
}

/// The real-clock rows of one sweep, checked against the bands (panics outside one), as the
/// shortest text that carries the claim: the durable values per row, each band once.
pub fn real_table(reports: &[Report]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "every row: events = writes and final = the last value written (exact), and\n  \
         {:<53} in {}\n  {:<53} {}\n  {:<53} in {}\n\
         (reconcile: the larger of the cost and the median reconcile's duration; behind in fact:\n\
         that median outlasted the writes' mean interval)",
        "reconciles / min(writes, span / reconcile + 1)",
        bands::REAL_RECONCILE_RATIO,
        "ms a write took beyond the gap (span / writes - gap)",
        bands::REAL_WRITE_OVERHEAD_MS,
        "ms from the last write to quiet, beyond one cost",
        bands::REAL_CONVERGE_OVERHEAD_MS,
    );
    let _ = writeln!(
        out,
        "{:>6} {:>4} {:>5} {:>6} {:>6}  collapse (events / reconciles)",
        "writes", "gap", "cost", "events", "final"
    );
    for r in reports {
        assert_eq!(
            r.clock,
            Clock::Real,
            "real_table prints bands for real-clock runs"
        );
        assert_eq!(
            r.events_delivered, r.writes_issued,
            "an event was lost: {r:?}"
        );
        assert!(r.ended_on_final_value(), "ended on a stale value: {r:?}");
        bands::REAL_RECONCILE_RATIO.check("reconciles / expected", reconcile_ratio(r));
        bands::REAL_WRITE_OVERHEAD_MS.show(write_overhead_ms(r));
        bands::REAL_CONVERGE_OVERHEAD_MS.check("converge - cost (ms)", converge_overhead_ms(r));
        let collapse = if r.cost > r.gap {
            assert!(r.collapse > 1.0, "behind, yet nothing merged: {r:?}");
            "> 1 (cost above the gap)".to_owned()
        } else {
            if r.behind_in_fact() {
                // A cheap reconcile whose sleep woke late: behind after all, so it collapsed.
                assert!(
                    r.collapse > 1.0,
                    "behind in fact, yet nothing merged: {r:?}"
                );
            } else {
                bands::REAL_COLLAPSE_AT_OR_BELOW_GAP.check("collapse", r.collapse);
            }
            format!(
                "in {} unless behind in fact, then > 1",
                bands::REAL_COLLAPSE_AT_OR_BELOW_GAP
            )
        };
        let _ = writeln!(out, "{} {:>6}  {collapse}", row_head(r), final_of(r));
    }
    out
}

/// This run's values for the same rows as [`real_table`], as a Markdown table for
/// [`crate::kit::measured::record`].
pub fn measured_table(reports: &[Report]) -> String {
    let mut out = String::from(
        "| writes | gap ms | cost ms | median reconcile ms | span ms | ms per write beyond the gap \
         | reconciles | min(writes, span / reconcile + 1) | reconciles / that | collapse \
         | ms to quiet beyond one cost |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in reports {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.2} | {:.1} | {:.2} | {} | {:.1} | {:.2} | {:.2} | {:.1} |",
            r.writes_issued,
            r.gap.as_millis(),
            r.cost.as_millis(),
            millis(r.median_reconcile),
            millis(r.burst_span),
            write_overhead_ms(r),
            r.reconciles,
            expected_reconciles(r),
            reconcile_ratio(r),
            r.collapse,
            converge_overhead_ms(r),
        );
    }
    out
}

/// The snapshot name of a sweep's table.
pub fn sweep_snapshot(sweep: Sweep, clock: Clock) -> String {
    let s = match sweep {
        Sweep::Cost => "cost",
        Sweep::Writes => "writes",
        Sweep::Gap => "gap",
    };
    let c = match clock {
        Clock::Virtual => "virtual",
        Clock::Real => "real",
    };
    format!("ch06_{s}_sweep_{c}")
}
