//! Chapter 06's experiments ("The deduplication you rely on isn't always on"), shared by the
//! chapter's doctests and `cargo run`. Each function runs, checks the durable
//! claims, records its snapshot and returns what it measured, so the chapter can assert more on
//! top. Every storm runs through [`super::run`], whose body for the faithful controller is the
//! chapter's first block.

use std::{fmt::Write as _, time::Duration};

use super::{
    Clock, Params, Report, Variant, bands,
    priority::{Objects, StormAndList, storm_and_initial_list},
    sweeps::{self, ClaimFailed, Sweep, check_claims, rows_table, sweep_snapshot},
};
use crate::kit::{measured, recorded::Recording, snap};
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
    let run = |r| storm_and_initial_list(r, Objects::Server, Duration::ZERO);
    let runs: Vec<StormAndList> = Release::ALL
        .iter()
        .map(|&r| rig::paused(run(r)).expect("the storm and the list"))
        .collect();
    snap::text("ch06_storm_and_initial_list", storm_and_list_text(&runs));
    let fake = storm_and_initial_list(Release::default(), Objects::Fake, Duration::ZERO);
    let fake = rig::paused(fake).expect("the storm and the list, on the fake");
    snap::text("ch06_storm_and_list_fake", fake.summary());
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

/// The real-clock essay run as the chapter pins it: the exact values, the band of the same-run
/// law the reconcile count was checked against, and the count's reference runs (shown, not
/// checked). Panics if a durable claim or the law fails.
pub fn essay_real_text(r: &Report) -> String {
    check_claims(r).expect("durable claims, and the law REAL_RECONCILE_RATIO");
    let law =
        bands::REAL_RECONCILE_RATIO.check("reconciles / expected", sweeps::reconcile_ratio(r));
    format!(
        "{} writes, {} ms apart, {} ms per reconcile, {} worker(s), real clock, over HTTP\n\
         events heard {} (= writes)\n\
         reconciles / min(writes, span / cost + 1) in {law}\n\
         reconciles: {}\n\
         final: written {}, in the cache {}, last acted on {}\n",
        r.writes_issued,
        r.gap.as_millis(),
        r.cost.as_millis(),
        r.workers,
        r.events_delivered,
        bands::REAL_ESSAY_RECONCILES.show(r.reconciles),
        r.final_written,
        show(r.final_in_cache),
        show(r.final_observed),
    )
}

fn show(v: Option<u64>) -> String {
    v.map_or("none".into(), |v| v.to_string())
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
        Variant::Level | Variant::Debounced => panic!("{v:?} has no detector run"),
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

/// The essay's figures for the storm, as it reports them (chapter 06 quotes each): about 24
/// reconciles for [`ESSAY`], over a span of 458 ms, a collapse of 8.3 times; its sweeps'
/// counts in [`sweeps::COSTS_MS`], [`sweeps::WRITES`] and [`sweeps::GAPS_MS`] order. Typed in: they are the essay's,
/// and nothing here can run it.
pub const ESSAY_RECONCILES: u64 = 24;
/// The span of the essay's 200 writes, in ms.
pub const ESSAY_SPAN_MS: u64 = 458;
/// The essay's collapse, events per reconcile.
pub const ESSAY_COLLAPSE: f64 = 8.3;
/// The essay's cost sweep, reconciles per cost of [`sweeps::COSTS_MS`].
pub const ESSAY_COST_ROWS: [u64; 7] = [200, 200, 90, 46, 24, 11, 6];
/// The essay's write-count sweep, reconciles per count of [`sweeps::WRITES`].
pub const ESSAY_WRITE_ROWS: [u64; 4] = [13, 24, 48, 91];
/// The essay's gap sweep, reconciles per gap of [`sweeps::GAPS_MS`].
pub const ESSAY_GAP_ROWS: [u64; 4] = [13, 24, 58, 106];
/// The values the essay's reconciles read, in order, as it prints them.
pub const ESSAY_OBSERVED: &str = "[1 10 19 … 200]";
/// How many of the storm's 200 intermediate values the essay's reconciles never read.
pub const ESSAY_NEVER_OBSERVED: u64 = 176;

/// What produced a column's figures: the controller's code, the cluster it wrote to and
/// heard from, and the clock. A figure is compared with the essay's only where the harness is
/// the essay's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Harness {
    /// The column, as the table heads it.
    pub column: &'static str,
    /// The column, in a verdict.
    pub short: &'static str,
    /// The controller's code.
    pub controller: &'static str,
    /// What the writes went into, and the events came out of.
    pub cluster: &'static str,
    /// The clock the storm ran on.
    pub clock: &'static str,
}

impl Harness {
    /// The parts of the harness `self` and `other` do not share: "code", "cluster", "clock".
    fn differences(&self, other: &Harness) -> Vec<&'static str> {
        [
            ("code", self.controller, other.controller),
            ("cluster", self.cluster, other.cluster),
            ("clock", self.clock, other.clock),
        ]
        .into_iter()
        .filter(|(_, a, b)| a != b)
        .map(|(what, _, _)| what)
        .collect()
    }

    /// Whether `self` ran the same code, on the same cluster, on the same clock as `other`.
    fn same_as(&self, other: &Harness) -> bool {
        self.differences(other).is_empty()
    }
}

/// The essay's harness, as it describes its run.
pub const ESSAY_HARNESS: Harness = Harness {
    column: "the essay",
    short: "the essay's",
    controller: "client-go",
    cluster: "client-go's fake clientset",
    clock: "Go's real clock",
};
/// The harness of each column the essay table holds against the essay, in column order.
pub const COLUMN_HARNESSES: [Harness; 3] = [
    Harness {
        column: "client-go v0.37.2, virtual clock (recorded)",
        short: "the recording's",
        controller: "client-go",
        cluster: "client-go's fake clientset",
        clock: "Go's virtual clock (synctest)",
    },
    Harness {
        column: "this crate, virtual clock",
        short: "this crate's under virtual time",
        controller: "this crate",
        cluster: "the embedded server, in process",
        clock: "tokio's paused clock",
    },
    Harness {
        column: "this crate, real clock",
        short: "this crate's under the real clock",
        controller: "this crate",
        cluster: "the embedded server, over HTTP",
        clock: "the real clock",
    },
];

/// The verdict on one row: "matches" or "does not match" where a column ran the essay's
/// harness; otherwise "not comparable", with what differs in the nearest column's harness (the
/// one sharing most of the essay's), and whether the virtual-clock columns happen to give the
/// essay's figure all the same.
pub fn essay_verdict(essay: &str, cells: [&str; 3]) -> String {
    let same = COLUMN_HARNESSES
        .iter()
        .zip(cells)
        .find(|(h, _)| h.same_as(&ESSAY_HARNESS));
    if let Some((_, cell)) = same {
        return if cell == essay {
            "matches"
        } else {
            "does not match"
        }
        .into();
    }
    let nearest = COLUMN_HARNESSES
        .iter()
        .min_by_key(|h| h.differences(&ESSAY_HARNESS).len())
        .expect("three columns");
    let mut v = format!(
        "not comparable: the nearest harness ({}) differs in its {}",
        nearest.short,
        nearest.differences(&ESSAY_HARNESS).join(", ")
    );
    if cells[..2].iter().all(|c| *c == essay) {
        v.push_str("; both virtual-clock columns give the essay's figure");
    }
    v
}

/// One row of the law computed on a source's own figures: the storm, its span, what the law
/// predicts, the count the source reports, and the verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct LawRow {
    /// Whose figures.
    pub source: String,
    /// The reconcile's cost, in ms.
    pub cost_ms: u64,
    /// The span of the writes, in ms.
    pub span_ms: f64,
    /// `min(writes, span / cost + 1)`.
    pub predicted: f64,
    /// The count the source reports.
    pub reconciles: u64,
}

impl LawRow {
    /// `reconciles / predicted`, to 0.001.
    pub fn ratio(&self) -> f64 {
        (self.reconciles as f64 / self.predicted * 1000.0).round() / 1000.0
    }

    /// "matches" where the ratio lies in the law's band ([`bands::REAL_RECONCILE_RATIO`], the
    /// band the book checks its own real-clock storms against), "does not match" otherwise.
    pub fn verdict(&self) -> &'static str {
        if bands::REAL_RECONCILE_RATIO.contains(self.ratio()) {
            "matches"
        } else {
            "does not match"
        }
    }
}

// book: ch06_essay_law
/// The book's law on the essay's own figures: its one span (458 ms, given for its storm) and
/// its cost sweep, which changes only the reconciler's cost, so every row keeps that span.
pub fn essay_law() -> Vec<LawRow> {
    let writes = ESSAY.writes as f64;
    let span = ESSAY_SPAN_MS as f64;
    let mut rows = vec![];
    for (&cost, &reconciles) in sweeps::COSTS_MS.iter().zip(&ESSAY_COST_ROWS) {
        let predicted = match cost {
            0 => writes, // no cost: nothing to wait behind, every write its own reconcile
            _ => (span / cost as f64 + 1.0).min(writes),
        };
        rows.push(LawRow {
            source: "the essay".into(),
            cost_ms: cost,
            span_ms: span,
            predicted,
            reconciles,
        });
    }
    rows
}
// book: end ch06_essay_law

/// The same law on one of this book's runs or recordings: `source`'s span, cost and count.
pub fn law_row(source: &str, span_ms: f64, cost_ms: u64, writes: u64, reconciles: u64) -> LawRow {
    LawRow {
        source: source.into(),
        cost_ms,
        span_ms,
        predicted: (span_ms / cost_ms as f64 + 1.0).min(writes as f64),
        reconciles,
    }
}

/// The rows as a Markdown table (snapshot `ch06_essay_law`), with the band the verdict uses.
pub fn law_markdown(rows: &[LawRow]) -> String {
    let mut t = format!(
        "| whose figures | cost | span of the writes | min(writes, span / cost + 1) | reconciles | reconciles / prediction | verdict (band {}) |\n|---|---|---|---|---|---|---|\n",
        bands::REAL_RECONCILE_RATIO
    );
    for r in rows {
        let _ = writeln!(
            t,
            "| {} | {} ms | {} ms | {:.2} | {} | {} | {} |",
            r.source,
            r.cost_ms,
            r.span_ms,
            r.predicted,
            r.reconciles,
            r.ratio(),
            r.verdict()
        );
    }
    t
}

/// The law on every source's own figures: the essay's cost sweep ([`essay_law`]), client-go's
/// recorded storm (read from [`RECORDED_ESSAY`]) and `port`, this crate's virtual run of the
/// essay's storm. Snapshot `ch06_essay_law`.
pub fn essay_law_table(port: &Report) -> String {
    let rec = Recording::read(RECORDED_ESSAY);
    let mut rows = essay_law();
    rows.push(law_row(
        "client-go v0.37.2, virtual clock (recorded)",
        rec.number_after("span", "span"),
        ESSAY.cost.as_millis() as u64,
        ESSAY.writes,
        rec.number_after("events heard", "reconciles") as u64,
    ));
    rows.push(law_row(
        "this crate, virtual clock",
        super::report_millis(port.burst_span),
        port.cost.as_millis() as u64,
        port.writes_issued,
        port.reconciles,
    ));
    let table = law_markdown(&rows);
    snap::text("ch06_essay_law", table.clone());
    table
}

/// The recording chapter 06's essay table reads client-go's figures from: client-go alone,
/// at the release the crate follows.
pub const RECORDED_ESSAY: &str = "client_go_v0.37_storm_essay";
/// The recording of the three sweeps on client-go alone.
pub const RECORDED_SWEEPS: &str = "client_go_v0.37_storm_sweeps";

/// One row of the essay table: what the figure is, and a cell per source.
struct EssayRow {
    figure: String,
    essay: String,
    recorded: String,
    port: String,
    real: String,
}

/// Every figure the essay gives, each beside client-go's under virtual time (read from
/// [`RECORDED_ESSAY`] and [`RECORDED_SWEEPS`] when this runs), this crate's under virtual time
/// (`cost`, `writes`, `gap`: the three virtual sweeps) and, in the last column, this crate's
/// under the real clock from `real` (the essay's storm and the three real sweeps), or the band
/// that holds it when `real` is `None`.
fn essay_rows(
    cost: &[Report],
    writes: &[Report],
    gap: &[Report],
    real: Option<(&Report, &[Vec<Report>])>,
) -> Vec<EssayRow> {
    let essay = cost
        .iter()
        .find(|r| r.cost == ESSAY.cost)
        .expect("the cost sweep holds the essay's storm");
    assert_eq!(
        (essay.writes_issued, essay.gap),
        (ESSAY.writes, ESSAY.gap),
        "the cost sweep's 20 ms row is the essay's storm"
    );
    let rec = Recording::read(RECORDED_ESSAY);
    let sweeps = Recording::read(RECORDED_SWEEPS);
    let real_essay = real.map(|(r, _)| r);
    let band_or = |band: String, value: &dyn Fn(&Report) -> String| real_essay.map_or(band, value);
    let values = |r: &Report| {
        let shown: Vec<String> = r.observed.iter().map(|v| show(*v)).collect();
        shown.join(", ")
    };
    let mut rows = vec![
        EssayRow {
            figure: format!(
                "reconciles: {} writes, {} ms apart, {} ms reconciler",
                ESSAY.writes,
                ESSAY.gap.as_millis(),
                ESSAY.cost.as_millis()
            ),
            essay: format!("about {ESSAY_RECONCILES}"),
            recorded: format!("{}", rec.number_after("events heard", "reconciles")),
            port: essay.reconciles.to_string(),
            real: band_or(bands::REAL_ESSAY_RECONCILES.to_string(), &|r| {
                r.reconciles.to_string()
            }),
        },
        EssayRow {
            figure: "span of the writes".into(),
            essay: format!("{ESSAY_SPAN_MS} ms"),
            recorded: format!("{} ms", rec.number_after("span", "span")),
            port: format!("{} ms", super::report_millis(essay.burst_span)),
            real: band_or(
                format!(
                    "ms per write beyond the gap: {}",
                    bands::REAL_WRITE_OVERHEAD_MS
                ),
                &|r| format!("{:.0} ms", super::report_millis(r.burst_span)),
            ),
        },
        EssayRow {
            figure: "collapse (events per reconcile)".into(),
            essay: format!("{ESSAY_COLLAPSE}×"),
            recorded: format!("{}×", rec.number_after("events heard", "collapse")),
            port: format!("{}×", essay.collapse),
            real: band_or("follows the count".into(), &|r| {
                format!("{:.1}×", r.collapse)
            }),
        },
        EssayRow {
            figure: "values the reconciles read, in order".into(),
            essay: ESSAY_OBSERVED.into(),
            recorded: rec.after("observed, in order: ").to_owned(),
            port: values(essay),
            real: band_or("ends on the last".into(), &|r| values(r)),
        },
        EssayRow {
            figure: format!("of the {} values written, never read", ESSAY.writes),
            essay: ESSAY_NEVER_OBSERVED.to_string(),
            recorded: rec
                .after("never observed: ")
                .split(' ')
                .next()
                .unwrap_or_default()
                .to_owned(),
            port: essay.never_observed.to_string(),
            real: band_or("follows the count".into(), &|r| {
                r.never_observed.to_string()
            }),
        },
    ];
    let real_sweeps = real.map(|(_, s)| s);
    for (k, (title, essay_rows, port, label)) in [
        ("cost sweep:", &ESSAY_COST_ROWS[..], cost, "cost"),
        (
            "write-count sweep:",
            &ESSAY_WRITE_ROWS[..],
            writes,
            "writes",
        ),
        ("gap sweep:", &ESSAY_GAP_ROWS[..], gap, "gap"),
    ]
    .into_iter()
    .enumerate()
    {
        let recorded = sweeps.table(title);
        assert_eq!(recorded.len(), port.len(), "{title} has the port's rows");
        for (i, r) in port.iter().enumerate() {
            let what = match label {
                "cost" => format!("reconciles at cost {} ms", r.cost.as_millis()),
                "writes" => format!("reconciles for {} writes", r.writes_issued),
                _ => format!("reconciles at gap {} ms", r.gap.as_millis()),
            };
            let real = match real_sweeps {
                Some(s) => s[k][i].reconciles.to_string(),
                None => format!("ratio band {}", bands::REAL_RECONCILE_RATIO),
            };
            rows.push(EssayRow {
                figure: what,
                essay: essay_rows[i].to_string(),
                recorded: recorded[i][5].clone(), // the table's `reconciles` column
                port: r.reconciles.to_string(),
                real,
            });
        }
    }
    rows
}

/// The rows as a Markdown table under `header`'s last column.
fn essay_markdown(rows: &[EssayRow], last: &str) -> String {
    let [recorded, port, _] = COLUMN_HARNESSES.map(|h| h.column);
    let mut t = format!(
        "| figure | the essay | {recorded} | {port} | {last} | verdict |\n|---|---|---|---|---|---|\n"
    );
    for r in rows {
        let verdict = essay_verdict(&r.essay, [&r.recorded, &r.port, &r.real]);
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {verdict} |",
            r.figure, r.essay, r.recorded, r.port, r.real
        );
    }
    t.push('\n');
    for h in std::iter::once(&ESSAY_HARNESS).chain(&COLUMN_HARNESSES) {
        let _ = writeln!(
            t,
            "- {}: {}, on {}, {}.",
            h.column, h.controller, h.cluster, h.clock
        );
    }
    t
}

/// The essay's figures beside client-go's and this crate's, as a Markdown table (snapshot
/// `ch06_essay_vs_book`): the essay's, client-go's under virtual time read from the recordings
/// when this runs, this crate's under virtual time from the three sweeps, and the band that
/// holds this crate's under the real clock ([`essay_real_measured`] writes this run's values).
pub fn essay_table(cost: &[Report], writes: &[Report], gap: &[Report]) -> String {
    let rows = essay_rows(cost, writes, gap, None);
    essay_markdown(&rows, "this crate, real clock (band)")
}

/// The same table with this run's real-clock values (`essay`: the essay's storm under the real
/// clock; `sweeps`: the three real sweeps, in [`Sweep::ALL`] order), written beside the
/// snapshot for the site (`chapters/measured/ch06_essay_vs_book.md`). Runs the three virtual
/// sweeps again for the other columns.
pub fn essay_real_measured(essay: &Report, sweeps: &[Vec<Report>]) {
    let virtual_ = |s: Sweep| s.run(Clock::Virtual, |_| {});
    let (cost, writes, gap) = (
        virtual_(Sweep::Cost),
        virtual_(Sweep::Writes),
        virtual_(Sweep::Gap),
    );
    let rows = essay_rows(&cost, &writes, &gap, Some((essay, sweeps)));
    let table = essay_markdown(&rows, "this crate, real clock (this run)");
    measured::record("ch06_essay_vs_book", table).expect("record the measured values");
}

/// Everything the chapter shows under virtual time (the `cargo run` experiment).
pub fn ch06_virtual() {
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
    let storm = cost
        .iter()
        .find(|r| r.cost == ESSAY.cost)
        .expect("the cost sweep holds the essay's storm");
    essay_law_table(storm);
    below_gap_virtual();
    for v in [Variant::FirstPayload, Variant::ChannelOfKeys] {
        detector(v);
    }
}

/// How many times `cargo run` repeats the essay's storm under the real clock.
pub const REAL_ESSAY_REPEATS: usize = 5;

/// Everything the chapter shows under the real clock (the `cargo run` experiment), and this
/// run's measured values beside each banded table.
pub fn ch06_real() {
    let essays: Vec<Report> = (0..REAL_ESSAY_REPEATS).map(|_| essay_real()).collect();
    let counts: Vec<String> = essays.iter().map(|r| r.reconciles.to_string()).collect();
    let essay_note = format!(
        "{}\n{} storms of {} writes, {} ms apart, {} ms per reconcile: reconciles {} \
         ({}; the essay's figure: about {ESSAY_RECONCILES})\n",
        sweeps::measured_table(&essays),
        essays.len(),
        ESSAY.writes,
        ESSAY.gap.as_millis(),
        ESSAY.cost.as_millis(),
        counts.join(", "),
        bands::REAL_ESSAY_RECONCILES,
    );
    measured::record("ch06_essay_real", essay_note).expect("record the measured values");
    let all = real_sweeps();
    essay_real_measured(&essays[0], &all);
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
