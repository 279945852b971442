//! Chapter 06's figures: each sweep's reconciles against what it varies, with the formula
//! `min(writes, span / cost + 1)` drawn over them, drawn with [`crate::kit::plot`].
//!
//! A virtual-time sweep is exact, so its figure is committed (`chapters/figures/NAME.svg`,
//! held to the run by [`Figure::publish`]). A real-clock sweep is banded: its figure shades
//! the band each run was checked against ([`bands::REAL_RECONCILE_RATIO`] times the formula)
//! and is written beside this run's measured values ([`Figure::record_measured`]).

use crate::kit::plot::{Figure, Scale, SeriesLabelPosition, plain};

use super::{
    Clock, Report, bands,
    sweeps::millis,
    sweeps::{Sweep, expected_reconciles, sweep_snapshot},
};

/// The figure of one sweep's runs (all under one clock), named after its snapshot.
///
/// The x axis is what the sweep varies: the cost (ordinal: the seven costs evenly spaced,
/// whatever their values — on a linear axis the whole fall would sit in its first twentieth),
/// the writes, or for the gap sweep the span the writes took (the formula is a straight line
/// in the span, so the gap sweep shows it as the law it is).
pub fn sweep_figure(sweep: Sweep, reports: &[Report]) -> Figure {
    let first = reports.first().expect("a sweep has runs");
    let clock = first.clock;
    assert!(
        reports.iter().all(|r| r.clock == clock),
        "one figure, one clock"
    );
    let ms = |d: std::time::Duration| d.as_millis();
    let (what, x_label) = match sweep {
        Sweep::Cost => (
            "reconcile cost",
            format!(
                "reconcile cost; {} writes {} ms apart (ordinal axis: evenly spaced)",
                first.writes_issued,
                ms(first.gap)
            ),
        ),
        Sweep::Writes => (
            "writes",
            format!(
                "writes, {} ms apart; {} ms reconciles",
                ms(first.gap),
                ms(first.cost)
            ),
        ),
        Sweep::Gap => {
            let gaps: Vec<String> = reports.iter().map(|r| ms(r.gap).to_string()).collect();
            (
                "the span",
                format!(
                    "span of the {} writes, ms (gaps {} ms); {} ms reconciles",
                    first.writes_issued,
                    gaps.join(", "),
                    ms(first.cost)
                ),
            )
        }
    };
    let x = |i: usize, r: &Report| match sweep {
        Sweep::Cost => i as f64,
        Sweep::Writes => r.writes_issued as f64,
        Sweep::Gap => millis(r.burst_span),
    };
    let mut runs: Vec<(f64, &Report)> = reports
        .iter()
        .enumerate()
        .map(|(i, r)| (x(i, r), r))
        .collect();
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let scale = match sweep {
        Sweep::Cost => Scale::Ordinal(
            reports
                .iter()
                .map(|r| format!("{} ms", r.cost.as_millis()))
                .collect(),
        ),
        _ => Scale::Linear,
    };
    let (title, points) = match clock {
        Clock::Virtual => ("virtual time", "reconciles"),
        Clock::Real => ("real clock over HTTP, this run", "reconciles, this run"),
    };
    let mut figure = Figure::new(
        sweep_snapshot(sweep, clock).replace("_virtual", ""),
        format!("Reconciles against {what} ({title})"),
    )
    .x(x_label, scale, plain)
    .y("reconciles", Scale::Linear, plain);
    if sweep == Sweep::Cost {
        figure = figure.legend(SeriesLabelPosition::UpperRight);
    }
    if clock == Clock::Real {
        let band = bands::REAL_RECONCILE_RATIO; // a same-run law: both ends
        let (lo, hi) = match band.ends() {
            (Some(lo), Some(hi)) => (lo, hi),
            _ => unreachable!("a law has two ends"),
        };
        figure = figure.band(
            format!("the band: {band} x the formula"),
            runs.iter()
                .map(|&(x, r)| (x, lo * expected_reconciles(r), hi * expected_reconciles(r)))
                .collect(),
        );
    }
    figure
        .points(
            points,
            runs.iter()
                .map(|&(x, r)| (x, r.reconciles as f64))
                .collect(),
        )
        .law(
            "min(writes, span / cost + 1)",
            runs.iter()
                .map(|&(x, r)| (x, expected_reconciles(r)))
                .collect(),
        )
}
