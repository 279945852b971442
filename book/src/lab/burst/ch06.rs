//! Chapter 06's experiments ("The deduplication you rely on isn't always on"), shared by the
//! chapter's doctests and `cargo run`. Each function runs, checks the durable
//! claims, records its snapshot and returns what it measured, so the chapter can assert more on
//! top. Every storm runs through [`super::run`], whose body for the faithful controller is the
//! chapter's first block.

use std::{fmt::Write as _, time::Duration};

use super::{
    Clock, Params, Report, Variant, bands,
    priority::{StormAndList, storm_and_initial_list},
    sweeps::{self, ClaimFailed, Sweep, check_claims, rows_table},
};
use crate::kit::{measured, snap};
use crate::lab::rig::{self, ESSAY};
use controlloop::controller::Release;

/// The essay's run under virtual time; snapshot `ch06_essay_virtual`.
pub fn essay_virtual() -> Report {
    let r = super::run(&Params::essay()).expect("the essay's run");
    check_claims(&r).expect("durable claims");
    snap::text("ch06_essay_virtual", r.summary());
    r
}

/// The essay's storm on each controller-runtime release, under virtual time: the durable
/// claims hold on both, and so does every count (one key, one worker: the rate-limiting
/// queue and the priority queue hand it out at the same moments). Snapshot
/// `ch06_essay_releases`.
pub fn essay_releases() -> Vec<(Release, Report)> {
    let runs: Vec<(Release, Report)> = Release::ALL
        .iter()
        .map(|&r| {
            (
                r,
                super::run(&Params::essay().release(r)).expect("the essay's run"),
            )
        })
        .collect();
    snap::text("ch06_essay_releases", releases_text(&runs));
    runs
}

/// The essay's storm on each release as the chapter pins it: one line per release. Panics
/// unless the durable claims hold on every run and the runs agree on every count.
pub fn releases_text(runs: &[(Release, Report)]) -> String {
    let counts = |r: &Report| {
        (
            r.events_delivered,
            r.keys_added,
            r.reconciles,
            r.observed.clone(),
        )
    };
    let mut t = String::new();
    for (release, r) in runs {
        check_claims(r).expect("durable claims");
        assert_eq!(
            counts(r),
            counts(&runs[0].1),
            "{release}: the releases disagree"
        );
        let _ = writeln!(
            t,
            "{release} ({:?} queue): events heard {}, keys queued {}, reconciles {}, \
             last acted on {}",
            release.queue_kind(),
            r.events_delivered,
            r.keys_added,
            r.reconciles,
            r.final_observed.map_or("none".into(), |v| v.to_string()),
        );
    }
    t
}

/// The storm beside the rest of the initial list, on each release; snapshot
/// `ch06_storm_and_initial_list`.
pub fn storm_and_list() -> Vec<StormAndList> {
    let runs: Vec<StormAndList> = Release::ALL
        .iter()
        .map(|&r| rig::paused(storm_and_initial_list(r)).expect("the storm and the list"))
        .collect();
    snap::text("ch06_storm_and_initial_list", storm_and_list_text(&runs));
    runs
}

/// Both releases' runs as the chapter pins them.
pub fn storm_and_list_text(runs: &[StormAndList]) -> String {
    runs.iter()
        .map(StormAndList::summary)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The essay's run under the real clock, over HTTP: checks its bands and records snapshot
/// `ch06_essay_real` (bands only).
pub fn essay_real() -> Report {
    let r = super::run(&Params::essay().real()).expect("the essay's run, real clock");
    snap::text("ch06_essay_real", essay_real_text(&r));
    r
}

/// The real-clock essay run as the chapter pins it: the exact values, and the band the
/// reconcile count fell in. Panics if a durable claim or the band fails.
pub fn essay_real_text(r: &Report) -> String {
    check_claims(r).expect("durable claims");
    format!(
        "{} writes, {} ms apart, {} ms per reconcile, {} worker(s), real clock, over HTTP\n\
         events heard {} (= writes), reconciles in {}\n\
         final: written {}, in the cache {}, last acted on {}\n",
        r.writes_issued,
        r.gap.as_millis(),
        r.cost.as_millis(),
        r.workers,
        r.events_delivered,
        bands::REAL_ESSAY_RECONCILES.check("reconciles", r.reconciles),
        r.final_written,
        show(r.final_in_cache),
        show(r.final_observed),
    )
}

fn show(v: Option<u64>) -> String {
    v.map_or("none".into(), |v| v.to_string())
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

/// Runs one virtual-time sweep, checks every run's durable claims and that reconciles follow
/// the span within the sweep, and snapshots its table.
pub fn sweep(sweep: Sweep) -> Vec<Report> {
    let reports = sweep.run(Clock::Virtual, |_| {});
    for r in &reports {
        check_claims(r).unwrap_or_else(|e| panic!("{sweep:?} sweep, virtual: {e}"));
    }
    sweeps::reconciles_follow_span(&reports).expect("reconciles follow the span");
    snap::text(&sweep_snapshot(sweep, Clock::Virtual), rows_table(&reports));
    reports
}

/// The three real-clock sweeps at once, each on its own thread with its own server (as the
/// bands were measured), in [`Sweep::ALL`] order. Checks every run against its bands and
/// records the three banded snapshots.
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
        snap::text(
            &sweep_snapshot(*s, Clock::Real),
            sweeps::real_table(reports),
        );
    }
    all
}

/// The (gap, cost) pairs of the runs below the gap, in ms: every cost below its gap.
pub const BELOW_GAP: [(u64, u64); 6] = [(2, 0), (2, 1), (4, 3), (8, 0), (8, 5), (8, 7)];

/// Virtual-time runs where the reconciler is faster than the writer (cost < gap): every event
/// is its own reconcile. Snapshot `ch06_below_gap_virtual`.
pub fn below_gap_virtual() -> Vec<Report> {
    let ms = Duration::from_millis;
    let reports: Vec<Report> = BELOW_GAP
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

/// The snapshot name of a broken design's detector run.
pub fn detector_snapshot(v: Variant) -> &'static str {
    match v {
        Variant::FirstPayload => "ch06_detector_first_payload",
        Variant::ChannelOfKeys => "ch06_detector_channel_of_keys",
        Variant::Level => panic!("the faithful design has no detector run"),
    }
}

/// A broken design's run through the durable checks: the check that must fail, failing.
/// Panics if every check passed (the detector did not fire).
pub fn detector_text(r: &Report) -> (ClaimFailed, String) {
    let e = check_claims(r).expect_err("a broken design must fail a durable claim");
    let text = format!(
        "{:?}: {} events -> {} reconciles; observed {}\n  detector: {e}\n",
        r.variant,
        r.events_delivered,
        r.reconciles,
        summarise(&r.observed)
    );
    (e, text)
}

/// Runs the broken design `v` under the essay's storm and records its detector snapshot.
pub fn detector(v: Variant) -> (Report, ClaimFailed) {
    let r = super::run(&Params::essay().variant(v)).expect("run");
    let (e, text) = detector_text(&r);
    snap::text(detector_snapshot(v), text);
    (r, e)
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

/// What the essay reports about the storm, as this book quotes it (chapter 06): the only
/// figure is the reconcile count of [`ESSAY`]; for the sweeps it reports the shape only.
pub const ESSAY_RECONCILES: u64 = 24;

/// The essay's figures beside this book's, as a Markdown table (snapshot
/// `ch06_essay_vs_book`): our exact virtual-time values from the three sweeps, our real-clock
/// band, and whether the essay's figure falls inside it, and why.
pub fn essay_table(cost: &[Report], writes: &[Report], gap: &[Report]) -> String {
    let at = |rs: &[Report], f: &dyn Fn(&Report) -> bool| -> Report {
        rs.iter()
            .find(|r| f(r))
            .cloned()
            .expect("the sweep has the row")
    };
    let essay = at(cost, &|r| r.cost == ESSAY.cost);
    assert_eq!(
        (essay.writes_issued, essay.gap, essay.cost),
        (ESSAY.writes, ESSAY.gap, ESSAY.cost),
        "the cost sweep holds the essay's storm"
    );
    let counts = |rs: &[Report], label: &dyn Fn(&Report) -> String| {
        rs.iter()
            .map(|r| format!("{} → {}", label(r), r.reconciles))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let off = cost
        .iter()
        .chain(writes)
        .chain(gap)
        .map(|r| (r.reconciles as f64 - sweeps::expected_reconciles(r)).abs())
        .fold(0.0, f64::max);
    let band = bands::REAL_ESSAY_RECONCILES;
    let inside = band.contains(ESSAY_RECONCILES);
    // The span the essay's count implies through its own formula: (reconciles - 1) x cost.
    let implied_span_ms = (ESSAY_RECONCILES - 1) as u128 * ESSAY.cost.as_millis();
    let mut t = String::new();
    let _ = writeln!(
        t,
        "| the essay reports | this book, virtual clock (exact) | this book, real clock (band) | the essay's figure against our band |"
    );
    let _ = writeln!(t, "|---|---|---|---|");
    let _ = writeln!(
        t,
        "| {} writes, {} ms apart, {} ms reconciler: about {ESSAY_RECONCILES} reconciles | {} | {band} | {} the real-clock band; {} the virtual count, because a count follows the span: {ESSAY_RECONCILES} implies a span of about {implied_span_ms} ms ({:.1} ms per write); virtual time gives {} ms, the real clock over HTTP stretches it |",
        ESSAY.writes,
        ESSAY.gap.as_millis(),
        ESSAY.cost.as_millis(),
        essay.reconciles,
        if inside { "inside" } else { "outside" },
        if essay.reconciles == ESSAY_RECONCILES {
            "equal to"
        } else {
            "unlike"
        },
        implied_span_ms as f64 / ESSAY.writes as f64,
        super::report_millis(essay.burst_span),
    );
    let _ = writeln!(
        t,
        "| reconciles ≈ span / cost + 1 | within {off} of min(writes, span / cost + 1) in all {} runs | reconciles / min(writes, span / cost + 1) in {} | inside: both clocks follow the formula (never more than one reconcile per write) |",
        cost.len() + writes.len() + gap.len(),
        bands::REAL_RECONCILE_RATIO,
    );
    for (what, rs, label) in [
        (
            "cost sweep (0, 1, 5, 10, 20, 50, 100 ms)",
            cost,
            &(|r: &Report| format!("{} ms", r.cost.as_millis())) as &dyn Fn(&Report) -> String,
        ),
        ("write sweep (100 to 800 writes)", writes, &|r: &Report| {
            format!("{}", r.writes_issued)
        }),
        ("gap sweep (gap 0 to gap 8 ms)", gap, &|r: &Report| {
            format!("gap {}", r.gap.as_millis())
        }),
    ] {
        let _ = writeln!(
            t,
            "| {what}: the shape only | {} | the ratio band above, every row | no figure to hold against the band |",
            counts(rs, label),
        );
    }
    t
}

/// Everything the chapter shows under virtual time (the `cargo run` experiment).
pub fn run_virtual() {
    essay_virtual();
    essay_releases();
    storm_and_list();
    assert_eq!(
        repeated_virtual(10).len(),
        1,
        "virtual time must repeat exactly"
    );
    let cost = sweep(Sweep::Cost);
    let writes = sweep(Sweep::Writes);
    let gap = sweep(Sweep::Gap);
    for (s, reports) in Sweep::ALL.iter().zip([&cost, &writes, &gap]) {
        super::plot::sweep_figure(*s, reports)
            .publish()
            .unwrap_or_else(|e| panic!("{e}"));
    }
    snap::text("ch06_essay_vs_book", essay_table(&cost, &writes, &gap));
    below_gap_virtual();
    for v in [Variant::FirstPayload, Variant::ChannelOfKeys] {
        detector(v);
    }
}

/// How many times `cargo run` repeats the essay's storm under the real clock.
pub const REAL_ESSAY_REPEATS: usize = 5;

/// Everything the chapter shows under the real clock (the `cargo run` experiment), and this
/// run's measured values beside each banded table.
pub fn run_real() {
    let essays: Vec<Report> = (0..REAL_ESSAY_REPEATS).map(|_| essay_real()).collect();
    let counts: Vec<String> = essays.iter().map(|r| r.reconciles.to_string()).collect();
    let inside = |n: u64| bands::REAL_ESSAY_RECONCILES.contains(n);
    let essay_note = format!(
        "{}\n{} storms of {} writes, {} ms apart, {} ms per reconcile: reconciles {} \
         (band {}: {}; the essay's figure: about {ESSAY_RECONCILES})\n",
        sweeps::measured_table(&essays),
        essays.len(),
        ESSAY.writes,
        ESSAY.gap.as_millis(),
        ESSAY.cost.as_millis(),
        counts.join(", "),
        bands::REAL_ESSAY_RECONCILES,
        if essays.iter().all(|r| inside(r.reconciles)) {
            "all inside"
        } else {
            "some outside"
        },
    );
    measured::record("ch06_essay_real", essay_note).expect("record the measured values");
    let all = real_sweeps();
    for (s, reports) in Sweep::ALL.iter().zip(&all) {
        let figure = super::plot::sweep_figure(*s, reports)
            .record_measured()
            .expect("record the measured figure");
        measured::record(
            &sweep_snapshot(*s, Clock::Real),
            format!("{}\n{figure}", sweeps::measured_table(reports)),
        )
        .expect("record the measured values");
    }
}
