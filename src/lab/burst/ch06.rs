//! Chapter 06's experiments ("The deduplication you rely on isn't always on"), shared by the
//! chapter's doctests and `cargo run --release`. Each function runs, checks the durable
//! claims, records its snapshot and returns what it measured, so the chapter can assert
//! more on top.

use std::{path::Path, time::Duration};

use super::{
    Clock, Params, Report, Variant, bands,
    sweeps::{self, ClaimFailed, Sweep, check_claims, rows_table},
};
use crate::book::snap;

/// The essay's run under virtual time; snapshot `ch06_essay_virtual`.
pub fn essay_virtual() -> Report {
    let r = super::run(&Params::essay()).expect("the essay's run");
    check_claims(&r).expect("durable claims");
    snap::yaml("ch06_essay_virtual", &r, vec![]);
    r
}

/// The essay's run under the real clock, over HTTP; snapshot `ch06_essay_real` (bands only).
pub fn essay_real() -> Report {
    let r = super::run(&Params::essay().real()).expect("the essay's run, real clock");
    check_claims(&r).expect("durable claims");
    #[derive(serde::Serialize)]
    struct Pinned {
        writes_issued: u64,
        events_delivered: u64,
        reconciles: crate::book::band::InBand<u64>,
        final_written: u64,
        final_in_cache: Option<u64>,
        final_observed: Option<u64>,
    }
    let pinned = Pinned {
        writes_issued: r.writes_issued,
        events_delivered: r.events_delivered,
        reconciles: bands::REAL_ESSAY_RECONCILES.check("reconciles", r.reconciles),
        final_written: r.final_written,
        final_in_cache: r.final_in_cache,
        final_observed: r.final_observed,
    };
    snap::yaml("ch06_essay_real", &pinned, vec![]);
    r
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

/// Runs one sweep, checks every run's durable claims and that reconciles follow the span
/// within the sweep, and snapshots its table.
pub fn sweep(sweep: Sweep, clock: Clock) -> Vec<Report> {
    let reports = sweep.run(clock, |_| {});
    for r in &reports {
        check_claims(r).unwrap_or_else(|e| panic!("{sweep:?} sweep, {clock:?}: {e}"));
    }
    sweeps::reconciles_follow_span(&reports).expect("reconciles follow the span");
    snap::text(&sweep_snapshot(sweep, clock), rows_table(&reports));
    reports
}

/// The three real-clock sweeps at once, each on its own thread with its own server (as the
/// bands were measured), in [`Sweep::ALL`] order.
pub fn real_sweeps() -> Vec<Vec<Report>> {
    let handles: Vec<_> = Sweep::ALL
        .iter()
        .map(|&s| std::thread::spawn(move || s.run(Clock::Real, |_| {})))
        .collect();
    let all: Vec<Vec<Report>> = handles
        .into_iter()
        .map(|h| h.join().expect("a real-clock sweep panicked"))
        .collect();
    for (s, reports) in Sweep::ALL.iter().zip(&all) {
        for r in reports {
            check_claims(r).unwrap_or_else(|e| panic!("{s:?} sweep, real clock: {e}"));
        }
        if *s == Sweep::Gap {
            sweeps::reconciles_follow_span(reports).expect("reconciles follow the span");
        }
        snap::text(&sweep_snapshot(*s, Clock::Real), rows_table(reports));
    }
    all
}

/// Virtual-time runs where the reconciler is faster than the writer (cost < gap): every event
/// is its own reconcile. Snapshot `ch06_below_gap_virtual`.
pub fn below_gap_virtual() -> Vec<Report> {
    let ms = Duration::from_millis;
    let reports: Vec<Report> = [(2, 0), (2, 1), (4, 3), (8, 0), (8, 5), (8, 7)]
        .iter()
        .map(|&(gap, cost)| {
            let r = super::run(&Params::essay().gap(ms(gap)).cost(ms(cost))).expect("run");
            check_claims(&r).expect("durable claims");
            r
        })
        .collect();
    snap::text("ch06_below_gap_virtual", rows_table(&reports));
    reports
}

/// The broken designs, run through the same checks: each check that must fire, fires.
/// Snapshot `ch06_detectors`.
pub fn detectors() -> Vec<(Variant, Report, ClaimFailed)> {
    let out: Vec<(Variant, Report, ClaimFailed)> = [Variant::FirstPayload, Variant::ChannelOfKeys]
        .into_iter()
        .map(|v| {
            let r = super::run(&Params::essay().variant(v)).expect("run");
            let e = check_claims(&r).expect_err("a broken design must fail a durable claim");
            (v, r, e)
        })
        .collect();
    let text: String = out
        .iter()
        .map(|(v, r, e)| {
            format!(
                "{v:?}: {} events -> {} reconciles; observed {}\n  detector: {e}\n",
                r.events_delivered,
                r.reconciles,
                summarise(&r.observed)
            )
        })
        .collect();
    snap::text("ch06_detectors", text);
    out
}

/// The first five and last two observed values, for printing long lists.
fn summarise(values: &[Option<u64>]) -> String {
    let show = |v: &[Option<u64>]| {
        v.iter()
            .map(|x| x.map_or("none".into(), |x| x.to_string()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if values.len() <= 8 {
        format!("[{}]", show(values))
    } else {
        format!(
            "[{}, ... {} more ..., {}]",
            show(&values[..5]),
            values.len() - 7,
            show(&values[values.len() - 2..])
        )
    }
}

/// Runs the essay's virtual-time storm `n` times and returns the distinct reports (one, if
/// virtual time is deterministic).
pub fn repeated_virtual(n: usize) -> Vec<Report> {
    let mut distinct: Vec<Report> = vec![];
    for _ in 0..n {
        let r = super::run(&Params::essay()).expect("run");
        if !distinct.contains(&r) {
            distinct.push(r);
        }
    }
    distinct
}

/// Regenerates the cost-sweep plot from `reports` and compares it with the file the chapter
/// shows; with `write`, rewrites the file instead. Returns whether the file was current.
pub fn cost_plot(reports: &[Report], write: bool) -> std::io::Result<bool> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(sweeps::PLOT_PATH);
    let svg = sweeps::cost_plot_svg(reports);
    let current = std::fs::read_to_string(&path).ok().as_deref() == Some(svg.as_str());
    if write && !current {
        std::fs::create_dir_all(path.parent().expect("a parent folder"))?;
        std::fs::write(&path, svg)?;
    }
    Ok(current)
}

/// Everything the chapter shows under virtual time (the `cargo run` experiment).
pub fn run_virtual() {
    essay_virtual();
    assert_eq!(
        repeated_virtual(10).len(),
        1,
        "virtual time must repeat exactly"
    );
    let cost = sweep(Sweep::Cost, Clock::Virtual);
    cost_plot(&cost, true).expect("write the plot");
    sweep(Sweep::Writes, Clock::Virtual);
    sweep(Sweep::Gap, Clock::Virtual);
    below_gap_virtual();
    detectors();
}

/// Everything the chapter shows under the real clock (the `cargo run` experiment).
pub fn run_real() {
    essay_real();
    real_sweeps();
}
