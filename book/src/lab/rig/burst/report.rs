//! What one storm measured, and how a set of them prints as a table.

use std::{collections::BTreeSet, fmt, time::Duration};

use super::params::{Clock, Params, Variant};
use crate::lab::rig::{Burst, Observation};

/// What one write storm measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Report {
    /// Which design ran.
    pub variant: Variant,
    /// Which clock.
    pub clock: Clock,
    /// Writes acknowledged by the server.
    pub writes_issued: u64,
    /// The gap asked for between writes.
    #[serde(serialize_with = "ms")]
    pub gap: Duration,
    /// The reconcile cost.
    #[serde(serialize_with = "ms")]
    pub cost: Duration,
    /// Workers.
    pub workers: usize,
    /// From the first write sent to the last acknowledged.
    #[serde(serialize_with = "ms")]
    pub burst_span: Duration,
    /// Informer callbacks the controller heard during the storm.
    pub events_delivered: u64,
    /// Keys the controller's handler queued (before the queue merged any).
    pub keys_added: u64,
    /// Reconciles of the object during the storm and until quiet.
    pub reconciles: u64,
    /// `events_delivered / reconciles`: 1.0 means no two events were merged.
    pub collapse: f64,
    /// `span / cost + 1`, the count a reconciler that is always busy would reach; `None` for
    /// a zero cost.
    pub span_over_cost_plus_one: Option<f64>,
    /// The value each reconcile acted on, in order of finishing.
    pub observed: Vec<Option<u64>>,
    /// The last value written.
    pub final_written: u64,
    /// The value in the informer's cache once quiet.
    pub final_in_cache: Option<u64>,
    /// The value the last reconcile acted on.
    pub final_observed: Option<u64>,
    /// Written values that no reconcile ever acted on.
    pub never_observed: u64,
    /// From the last write's acknowledgement to the end of the last reconcile.
    #[serde(serialize_with = "ms")]
    pub converge: Duration,
    /// The most reconciles of the object that ever ran at once (above 1: two writers).
    pub max_concurrent_reconciles_of_one_key: u64,
    /// The median time one reconcile took, start to finish: the cost under virtual time; under
    /// the real clock, the cost plus how late its sleep woke.
    #[serde(serialize_with = "ms")]
    pub median_reconcile: Duration,
}

fn ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(millis(*d))
}

/// A duration in milliseconds, rounded to the microsecond.
pub fn millis(d: Duration) -> f64 {
    (d.as_micros() as f64) / 1000.0
}

impl Report {
    pub(crate) fn new(
        params: &Params,
        burst: &Burst,
        events: u64,
        keys: u64,
        observed: &[Observation],
        final_in_cache: Option<u64>,
        max_in_flight: u64,
    ) -> Self {
        let reconciles = observed.len() as u64;
        let values: Vec<Option<u64>> = observed.iter().map(|o| o.value).collect();
        let seen: BTreeSet<u64> = values.iter().flatten().copied().collect();
        let never_observed = (1..=burst.issued).filter(|v| !seen.contains(v)).count() as u64;
        let last_end = observed.iter().map(|o| o.finished).max();
        let span = burst.span();
        Report {
            variant: params.variant,
            clock: params.clock,
            writes_issued: burst.issued,
            gap: params.storm.gap,
            cost: params.storm.cost,
            workers: params.workers,
            burst_span: span,
            events_delivered: events,
            keys_added: keys,
            reconciles,
            collapse: if reconciles == 0 {
                0.0
            } else {
                round3(events as f64 / reconciles as f64)
            },
            span_over_cost_plus_one: (!params.storm.cost.is_zero())
                .then(|| round3(span.as_secs_f64() / params.storm.cost.as_secs_f64() + 1.0)),
            final_observed: values.last().copied().flatten(),
            observed: values,
            final_written: burst.issued,
            final_in_cache,
            never_observed,
            converge: last_end
                .map(|t| t.saturating_duration_since(burst.finished))
                .unwrap_or_default(),
            max_concurrent_reconciles_of_one_key: max_in_flight,
            median_reconcile: median(observed.iter().map(|o| o.finished - o.started).collect()),
        }
    }

    /// Whether the controller ended on the last value written.
    pub fn ended_on_final_value(&self) -> bool {
        self.final_observed == Some(self.final_written)
    }

    /// Whether the reconciler fell behind the writer in fact: its median reconcile took longer
    /// than the mean interval between two writes (`span / writes`). Under virtual time this is
    /// `cost > gap`; under the real clock a late-waking sleep can make a cheap reconcile slow.
    pub fn behind_in_fact(&self) -> bool {
        self.writes_issued > 1
            && self.median_reconcile.as_secs_f64()
                > self.burst_span.as_secs_f64() / self.writes_issued as f64
    }

    /// `reconciles / (span / cost + 1)`; `None` for a zero cost.
    pub fn reconciles_over_expected(&self) -> Option<f64> {
        self.span_over_cost_plus_one
            .map(|e| round3(self.reconciles as f64 / e))
    }
}

impl Report {
    /// The run as a few lines of text: what ran, what the controller heard and did, what it
    /// ended on. Every value is exact under virtual time (what chapter 06 snapshots).
    pub fn summary(&self) -> String {
        let values: Vec<String> = self
            .observed
            .iter()
            .map(|v| v.map_or("none".into(), |v| v.to_string()))
            .collect();
        let show = |v: Option<u64>| v.map_or("none".into(), |v| v.to_string());
        format!(
            "{} writes, {} ms apart, {} ms per reconcile, {} worker(s), {} clock\n\
             events heard {}, keys queued {}, reconciles {} (collapse {})\n\
             span {} ms; span / cost + 1 = {}\n\
             observed, in order: {}\n\
             never observed: {} of {} values\n\
             final: written {}, in the cache {}, last acted on {}\n\
             converged {} ms after the last write; most reconciles of the object at once: {}\n",
            self.writes_issued,
            millis(self.gap),
            millis(self.cost),
            self.workers,
            match self.clock {
                Clock::Virtual => "virtual",
                Clock::Real => "real",
            },
            self.events_delivered,
            self.keys_added,
            self.reconciles,
            self.collapse,
            millis(self.burst_span),
            self.span_over_cost_plus_one
                .map_or("-".into(), |e| e.to_string()),
            values.join(", "),
            self.never_observed,
            self.writes_issued,
            self.final_written,
            show(self.final_in_cache),
            show(self.final_observed),
            millis(self.converge),
            self.max_concurrent_reconciles_of_one_key,
        )
    }
}

/// The median of `durations`; zero for none.
fn median(mut durations: Vec<Duration>) -> Duration {
    durations.sort();
    durations
        .get(durations.len() / 2)
        .copied()
        .unwrap_or_default()
}

/// Rounds to three decimals, so printed ratios are stable.
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Reports as a plain-text table, one row each, to compare with the essay by eye.
pub struct Table<'a>(pub &'a [Report]);

impl fmt::Display for Table<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:>6} {:>6} {:>7} {:>9} {:>7} {:>10} {:>8} {:>12} {:>7} {:>10}",
            "writes",
            "gap",
            "cost",
            "span",
            "events",
            "reconciles",
            "collapse",
            "span/cost+1",
            "final",
            "converge"
        )?;
        for r in self.0 {
            writeln!(
                f,
                "{:>6} {:>4}ms {:>5}ms {:>7.1}ms {:>7} {:>10} {:>8.2} {:>12} {:>7} {:>8.1}ms",
                r.writes_issued,
                r.gap.as_millis(),
                r.cost.as_millis(),
                millis(r.burst_span),
                r.events_delivered,
                r.reconciles,
                r.collapse,
                r.span_over_cost_plus_one
                    .map_or("-".to_owned(), |e| format!("{e:.1}")),
                r.final_observed
                    .map_or("none".to_owned(), |v| v.to_string()),
                millis(r.converge),
            )?;
        }
        Ok(())
    }
}

/// `min(writes, span / cost + 1)`: how many reconciles a reconciler that starts again as soon
/// as it finishes can fit into the storm (and never more than one per write). `cost` is what a
/// reconcile really took: the larger of the asked cost and the median measured duration, which
/// are equal under virtual time and differ under the real clock by how late a sleep wakes.
pub fn expected_reconciles(r: &Report) -> f64 {
    let cost = r.cost.max(r.median_reconcile);
    if cost.is_zero() {
        return r.writes_issued as f64;
    }
    let fit = round3(r.burst_span.as_secs_f64() / cost.as_secs_f64() + 1.0);
    fit.min(r.writes_issued as f64)
}

/// What one write cost beyond the gap, in ms: `span / writes - gap`.
pub fn write_overhead_ms(r: &Report) -> f64 {
    round3(millis(r.burst_span) / r.writes_issued as f64 - millis(r.gap))
}

/// `reconciles / min(writes, span / cost + 1)`.
pub fn reconcile_ratio(r: &Report) -> f64 {
    round3(r.reconciles as f64 / expected_reconciles(r))
}

/// How long after the last write the last reconcile ended, beyond one reconcile's cost, in ms.
pub fn converge_overhead_ms(r: &Report) -> f64 {
    round3(millis(r.converge) - millis(r.cost))
}
