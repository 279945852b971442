//! The experiments of chapter 11's three parts ("What carries over to kube-rs: the write
//! storm", "What differs on kube-rs", "What running kube-rs found"), shared by the chapters'
//! doctests and `cargo run`. Each function runs both runtimes, checks what must hold, records
//! its snapshot and returns what it measured; the chapters show each body first.

use std::{fmt::Write as _, time::Duration};

use super::{
    Log, Runtime, bands, ch11,
    drift::{self, Drift, HOUR, Remedy, StatusStorm},
    findings::{self, Rounding, Waiters},
    semantics::{self, RelistGap, retry_delays},
    storm::{self, Design, Knobs},
};
use crate::{
    kit::band::OutOfBand,
    kit::basis::{self, Basis},
    kit::measured,
    kit::snap,
    lab::{
        burst::{
            self, Clock, Params, Report, report_millis,
            sweeps::{Sweep, check_claims, expected_reconciles, reconcile_ratio},
        },
        resync::{Read, Setup},
        rig,
    },
};
use controlloop::controller::Release;

const SEC: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

/// Storms side by side, one row per (label, report).
pub fn storm_table(rows: &[(&str, &Report)]) -> String {
    let mut out = format!(
        "{:<14} {:>6} {:>3} {:>4} {:>5} {:>6} {:>10} {:>8} {:>8} {:>5} {:>8} {:>7}\n",
        "runtime",
        "writes",
        "gap",
        "cost",
        "slots",
        "events",
        "reconciles",
        "expected",
        "collapse",
        "final",
        "converge",
        "max/key"
    );
    for (label, r) in rows {
        let _ = writeln!(
            out,
            "{:<14} {:>6} {:>3} {:>4} {:>5} {:>6} {:>10} {:>8} {:>8} {:>5} {:>8} {:>7}",
            label,
            r.writes_issued,
            r.gap.as_millis(),
            r.cost.as_millis(),
            r.workers,
            r.events_delivered,
            r.reconciles,
            round3(expected_reconciles(r)),
            r.collapse,
            r.final_observed.map_or("none".into(), |v| v.to_string()),
            report_millis(r.converge),
            r.max_concurrent_reconciles_of_one_key
        );
    }
    out
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The essay's storm under virtual time on both runtimes; snapshot `ch11_storm_virtual`.
pub fn storm_virtual() -> (Report, Report) {
    let ours = burst::run(&Params::essay()).expect("ours");
    let kube = storm::run(&Params::essay(), Knobs::default()).expect("kube-runtime");
    for r in [&ours, &kube] {
        check_claims(r).expect("durable claims");
    }
    snap::text(
        "ch11_storm_virtual",
        storm_table(&[("controlloop", &ours), ("kube-runtime", &kube)]),
    );
    (ours, kube)
}

/// The three sweeps under virtual time on both runtimes: every run's durable claims hold on
/// each side. Snapshot `ch11_sweeps_virtual` (reconciles side by side).
pub fn sweeps_virtual() -> Vec<(Report, Report)> {
    // book: ch11_sweeps_virtual
    let mut pairs = vec![];
    for sweep in Sweep::ALL {
        for p in sweep.params(Clock::Virtual) {
            let ours = burst::run(&p).expect("ours"); // chapter 06's storm
            let kube = storm::run(&p, Knobs::default()).expect("kube-runtime"); // the storm above
            for r in [&ours, &kube] {
                check_claims(r).unwrap_or_else(|e| panic!("{sweep:?} {p:?}: {e}"));
            }
            pairs.push((ours, kube));
        }
    }
    // book: end ch11_sweeps_virtual
    snap::text("ch11_sweeps_virtual", sweeps_text(&pairs));
    pairs
}

/// The sweeps' pairs (ours, kube-runtime), as printed: one row per run, in the order
/// [`sweeps_virtual`] makes them (each sweep's runs, sweep by sweep).
pub fn sweeps_text(pairs: &[(Report, Report)]) -> String {
    let sweeps = Sweep::ALL
        .into_iter()
        .flat_map(|s| s.params(Clock::Virtual).into_iter().map(move |_| s));
    let mut out = format!(
        "{:<6} {:>6} {:>3} {:>4} {:>8} {:>12} {:>12}\n",
        "sweep", "writes", "gap", "cost", "expected", "controlloop", "kube-runtime"
    );
    for (sweep, (ours, kube)) in sweeps.zip(pairs) {
        let _ = writeln!(
            out,
            "{:<6} {:>6} {:>3} {:>4} {:>8} {:>12} {:>12}",
            format!("{sweep:?}").to_lowercase(),
            ours.writes_issued,
            ours.gap.as_millis(),
            ours.cost.as_millis(),
            round3(expected_reconciles(ours)),
            ours.reconciles,
            kube.reconciles
        );
    }
    out
}

/// The per-object check at four slots: this crate's 4 workers, kube-runtime's concurrency 4,
/// and kube-runtime with a reconciler that detaches its work (broken). Snapshot
/// `ch11_one_at_a_time`, with what the durable checks say about each run.
pub fn one_at_a_time() -> Vec<(&'static str, Report)> {
    // book: ch11_one_at_a_time
    let four = Params::essay().workers(4); // the essay's storm, four slots
    let detached = Knobs {
        design: Design::DetachedWork, // the reconciler spawns its work and returns at once
        ..Knobs::default()
    };
    let runs = vec![
        // chapter 06's storm: `.max_concurrent_reconciles(four.workers)`
        ("controlloop", burst::run(&four).expect("ours")),
        // the storm above: `Config::default().concurrency(four.workers as u16)`
        (
            "kube-runtime",
            storm::run(&four, Knobs::default()).expect("kube"),
        ),
        ("kube, detached", storm::run(&four, detached).expect("kube")),
    ];
    // book: end ch11_one_at_a_time
    snap::text("ch11_one_at_a_time", one_at_a_time_text(&runs));
    runs
}

/// The four-slot runs, as printed: the storm table, then what the per-object count and the
/// durable checks say about each run.
pub fn one_at_a_time_text(runs: &[(&str, Report)]) -> String {
    let rows: Vec<(&str, &Report)> = runs.iter().map(|(l, r)| (*l, r)).collect();
    let mut out = storm_table(&rows);
    for (label, r) in runs {
        let verdict = match (r.max_concurrent_reconciles_of_one_key, check_claims(r)) {
            (1, Ok(())) => "one at a time; every claim holds".to_owned(),
            (n, claims) => format!(
                "{n} at once{}",
                claims.err().map_or(String::new(), |e| format!("; {e}"))
            ),
        };
        let _ = writeln!(out, "{label}: {verdict}");
    }
    out
}

/// kube-runtime's storm with a debounce, beside none; snapshot `ch11_debounce`.
pub fn debounce() -> Vec<(String, Report)> {
    // book: ch11_debounce
    let mut runs = vec![];
    for ms in [0, 5] {
        let knobs = Knobs {
            debounce: ms * MS, // the storm above: `Config::default().debounce(knobs.debounce)`
            ..Knobs::default()
        };
        let run = storm::run(&Params::essay(), knobs).expect("kube-runtime");
        runs.push((format!("debounce {ms} ms"), run));
    }
    // book: end ch11_debounce
    snap::text("ch11_debounce", debounce_text(&runs));
    runs
}

/// The debounce runs, as printed: the storm table, then the values each run reconciled.
pub fn debounce_text(runs: &[(String, Report)]) -> String {
    let rows: Vec<(&str, &Report)> = runs.iter().map(|(l, r)| (l.as_str(), r)).collect();
    let mut out = storm_table(&rows);
    for (label, r) in runs {
        let _ = writeln!(out, "{label}: observed {:?}", r.observed);
    }
    out
}

/// The essay's storm under the real clock over HTTP on both runtimes, then kube-runtime's
/// three sweeps (at once, each with its own server). Snapshot `ch11_storm_real`: bands only.
pub fn storm_real() -> (Report, Report, Vec<Report>) {
    // book: ch11_storm_real
    let essay = Params::essay().real(); // the real clock, over HTTP
    let ours = burst::run(&essay).expect("ours, real clock"); // chapter 06's storm
    let kube = storm::run(&essay, Knobs::default()).expect("kube, real clock"); // the storm above
    let handles: Vec<_> = Sweep::ALL
        .iter()
        .map(|&s| {
            std::thread::spawn(move || {
                s.params(Clock::Real) // each sweep on a thread, each run on a server of its own
                    .iter()
                    .map(|p| storm::run(p, Knobs::default()).expect("kube-runtime sweep"))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let sweeps: Vec<Report> = handles
        .into_iter()
        .flat_map(|h| h.join().expect("a real-clock sweep panicked"))
        .collect();
    // book: end ch11_storm_real
    storm_real_record(&ours, &kube, &sweeps);
    (ours, kube, sweeps)
}

/// Checks the real-clock runs (every event delivered, the last value reconciled, the same-run
/// laws and bounds: panics otherwise), records snapshot `ch11_storm_real` (bands and reference
/// runs only) and this run's figures.
pub fn storm_real_record(ours: &Report, kube: &Report, sweeps: &[Report]) {
    let mut out = String::new();
    for (label, r, reference) in [
        ("controlloop", ours, burst::bands::REAL_ESSAY_RECONCILES),
        ("kube-runtime", kube, bands::KUBE_REAL_ESSAY_RECONCILES),
    ] {
        let _ = writeln!(
            out,
            "essay, {label}: {} writes, {} events, final {:?}; reconciles {}",
            r.writes_issued,
            r.events_delivered,
            r.final_observed,
            reference.show(r.reconciles),
        );
    }
    let _ = writeln!(
        out,
        "\nkube-runtime sweeps\n{:>6} {:>3} {:>4} {:>6} {:>20} {:>14} {:>5}",
        "writes", "gap", "cost", "events", "reconciles/expected", "collapse", "final"
    );
    assert!(kube.ended_on_final_value() && kube.events_delivered == kube.writes_issued);
    for r in sweeps {
        assert_eq!(
            r.events_delivered, r.writes_issued,
            "an event was lost: {r:?}"
        );
        assert!(
            r.ended_on_final_value(),
            "did not end on the last value: {r:?}"
        );
        let ratio = round3(r.reconciles as f64 / expected_reconciles(r));
        let collapse = if r.cost <= r.gap {
            let band = bands::KUBE_REAL_COLLAPSE_AT_OR_BELOW_GAP;
            if r.behind_in_fact() {
                // As chapter 06's sweeps: a cheap reconcile whose median run outlasted the
                // writes' mean interval was behind after all, so it merged, and the bound
                // (whose claim is about a reconciler that keeps up) does not apply.
                assert!(
                    r.collapse > 1.0,
                    "behind in fact, yet nothing merged: {r:?}"
                );
                band.to_string()
            } else {
                band.check("collapse", r.collapse).to_string()
            }
        } else {
            assert!(r.collapse > 1.0, "behind, yet nothing merged: {r:?}");
            "> 1 (asserted)".to_owned()
        };
        let _ = writeln!(
            out,
            "{:>6} {:>3} {:>4} {:>6} {:>20} {:>14} {:>5}",
            r.writes_issued,
            r.gap.as_millis(),
            r.cost.as_millis(),
            r.events_delivered,
            bands::KUBE_REAL_RECONCILE_RATIO
                .check("reconciles / expected", ratio)
                .to_string(),
            collapse,
            r.final_observed.map_or("none".into(), |v| v.to_string())
        );
    }
    snap::text("ch11_storm_real", out);
    let mut m = String::from("| run | controlloop | kube-runtime |\n|---|---|---|\n");
    let _ = writeln!(
        m,
        "| essay storm, reconciles | {} | {} |",
        ours.reconciles, kube.reconciles
    );
    for r in sweeps {
        let _ = writeln!(
            m,
            "| sweep {} writes, {} ms gap, {} ms cost: reconciles (collapse) | | {} ({}) |",
            r.writes_issued,
            r.gap.as_millis(),
            r.cost.as_millis(),
            r.reconciles,
            r.collapse
        );
    }
    let _ = measured::record("ch11_storm_real", m);
}

/// The drift table: one row per (label, run).
pub fn drift_table(rows: &[(&str, &Drift)]) -> String {
    let mut out = format!(
        "{:<36} {:>10} {:<18} {:>15} {}\n",
        "controller", "reconciles", "colours read", "first blue (h)", "requests at 10/20/30 h"
    );
    for (label, d) in rows {
        let _ = writeln!(
            out,
            "{:<36} {:>10} {:<18} {:>15} {:?}",
            label,
            d.reconciles,
            d.colors_read.join(", "),
            d.first_hour_blue_read
                .map_or("never".into(), |h| h.to_string()),
            d.requests_at_10_20_30h
        );
    }
    out
}

/// The resync chapter's drift on both runtimes; snapshot `ch11_drift`.
pub fn drift() -> Vec<(&'static str, Drift)> {
    // book: ch11_drift
    let requeue_live = Setup {
        requeue_after: Some(HOUR), // ReconcileResult::requeue_after(1 h)...
        read: Read::Live,          // ...reading the live object
        ..Setup::faithful()
    };
    let rows = vec![
        // chapter 04's `timeline`: its faithful controller, then with `requeue_live`
        (
            "controlloop: resync 10 h",
            drift::controlloop(Setup::faithful()),
        ),
        (
            "controlloop: requeue_after 1 h + GET",
            drift::controlloop(requeue_live),
        ),
        // the block above, once per `remedy`
        (
            "kube: await_change",
            drift::kube_runtime(Remedy::AwaitChange),
        ),
        (
            "kube: reconcile_all_on every 10 h",
            drift::kube_runtime(Remedy::ReconcileAllOn10h),
        ),
        (
            "kube: requeue(1 h), store's object",
            drift::kube_runtime(Remedy::Requeue1hStore),
        ),
        (
            "kube: requeue(1 h) + GET",
            drift::kube_runtime(Remedy::Requeue1hLive),
        ),
    ];
    // book: end ch11_drift
    let view: Vec<(&str, &Drift)> = rows.iter().map(|(l, d)| (*l, d)).collect();
    snap::text("ch11_drift", drift_table(&view));
    rows
}

/// What the status storm did, as printed.
pub fn status_storm_text(s: &StatusStorm) -> String {
    let mut out = format!(
        "{} status writes and 1 spec change to one Widget\n",
        s.status_writes
    );
    for rt in Runtime::both() {
        let _ = writeln!(
            out,
            "{:<17}  generation predicate: {:>3} reconciles   no predicate: {:>3}",
            rt.name(),
            s.count(rt, "generation"),
            s.count(rt, "no predicate")
        );
    }
    out
}

/// The status-write storm; snapshot `ch11_status_storm`.
pub fn status_storm() -> StatusStorm {
    let s = drift::status_storm(20);
    snap::text("ch11_status_storm", status_storm_text(&s));
    s
}

/// The pending-requeue run, both variants; snapshot `ch11_requeue`.
pub fn requeue() -> (Log, Log) {
    let once = semantics::requeue_pending(false);
    let always = semantics::requeue_pending(true);
    snap::text("ch11_requeue", requeue_text(&once, &always));
    (once, always)
}

/// The two pending-requeue logs, as printed.
pub fn requeue_text(once: &Log, always: &Log) -> String {
    format!(
        "requeue 10 s on the first reconcile only; a write at 1 s:\n{}\n\
         requeue 10 s on every reconcile; a write at 1 s:\n{}",
        once.render(SEC, " s"),
        always.render(SEC, " s")
    )
}

/// The backoff run, as printed.
pub fn backoff_text(log: &Log) -> String {
    let mut out = String::from("six failures, then success; delay before each retry (ms):\n");
    for release in Release::ALL {
        let rt = Runtime::Controlloop(release);
        let _ = writeln!(out, "{:<30} {:?}", rt.name(), retry_delays(log, rt, "run"));
    }
    for (label, note) in [("error_policy", "run"), ("user-built", "built: run")] {
        let delays = retry_delays(log, Runtime::KubeRuntime, note);
        let _ = writeln!(out, "{:<30} {delays:?}", format!("kube-runtime, {label}"));
    }
    out
}

/// The error-backoff run; snapshot `ch11_error_backoff`.
pub fn backoff() -> Log {
    let log = semantics::error_backoff(6);
    snap::text("ch11_error_backoff", backoff_text(&log));
    log
}

/// The deleted-object run; snapshot `ch11_deleted`.
pub fn deleted() -> Log {
    let log = semantics::deleted();
    snap::text("ch11_deleted", log.render(SEC, " s"));
    log
}

/// The relist-gap run, as printed: notes before and after the 410, each group sorted
/// (kube-runtime's backoff is jittered, so its times are not printed, and the order in which
/// it reconciles objects due at the same instant is not fixed: its maps use random hashing).
pub fn relist_gap_text(g: &RelistGap) -> String {
    let mut out = format!("relists after the 410: {}\n", g.relists);
    for rt in Runtime::both() {
        let (before, after): (Vec<_>, Vec<_>) =
            g.log.entries(rt).into_iter().partition(|(t, _)| *t < SEC);
        let notes = |v: Vec<(Duration, String)>| {
            let mut n: Vec<String> = v.into_iter().map(|(_, n)| n).collect();
            n.sort();
            n.join(" | ")
        };
        let _ = writeln!(
            out,
            "{:<17}  before: {}\n{:<17}  after:  {}",
            rt.name(),
            notes(before),
            "",
            notes(after)
        );
    }
    out
}

/// The relist-gap run; snapshot `ch11_relist_gap`.
pub fn relist_gap() -> RelistGap {
    let g = semantics::relist_gap();
    snap::text("ch11_relist_gap", relist_gap_text(&g));
    g
}

/// Three waiters on each side; snapshot `ch11_wait_until_ready`.
pub fn waiters() -> Waiters {
    let w = findings::waiters(3);
    snap::text("ch11_wait_until_ready", waiters_text(&w));
    w
}

/// The waiters' count, as printed.
pub fn waiters_text(w: &Waiters) -> String {
    let stuck = w.stuck();
    format!(
        "{} tasks wait on each side\nkube-runtime `Store::wait_until_ready` woke: {}\n\
         controlloop `SharedIndexInformer::wait_synced` woke: {}\ncheck: {}\n",
        w.waiting,
        w.kube_runtime_woken,
        w.controlloop_woken,
        if stuck.is_empty() {
            "every waiter woke".to_owned()
        } else {
            stuck.join("; ")
        }
    )
}

/// Writes at sub-millisecond offsets under the paused clock, this crate's controller at each
/// release; snapshot `ch11_scheduler_ms`.
pub fn rounding() -> Vec<Rounding> {
    let rows = findings::rounding(&[0, 250, 500, 999], &Release::ALL);
    snap::text("ch11_scheduler_ms", rounding_text(&rows));
    rows
}

/// The rounding rows, as printed (one column per release raced, then kube-runtime).
pub fn rounding_text(rows: &[Rounding]) -> String {
    let mut out = format!("{:>16}", "write at (µs)");
    for (release, _) in rows.first().map_or(&[][..], |r| &r.controlloop_us[..]) {
        let _ = write!(out, " {:>22}", format!("controlloop {release} (µs)"));
    }
    let _ = writeln!(out, " {:>20}", "kube-runtime (µs)");
    for r in rows {
        let _ = write!(out, "{:>16}", format!("k ms + {}", r.offset_us));
        for (_, us) in &r.controlloop_us {
            let _ = write!(out, " {us:>22}");
        }
        let _ = writeln!(out, " {:>20}", r.kube_runtime_us);
    }
    out
}

/// A percentile (nearest rank) of `values`, in ms.
pub fn percentile_ms(values: &[u64], p: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_unstable();
    let i = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i] as f64 / 1000.0
}

/// Write → reconcile start of each row, in µs: this crate's controller (the first release
/// raced), then kube-runtime's.
fn start_latencies_us(rows: &[Rounding]) -> (Vec<u64>, Vec<u64>) {
    let ours = rows.iter().map(|r| r.controlloop_us[0].1).collect();
    (ours, rows.iter().map(|r| r.kube_runtime_us).collect())
}

/// The median write → reconcile start, kube-runtime minus this crate's controller, in ms: the
/// value [`bands::REAL_LATENCY_P50_GAP_MS`] checks.
pub fn median_gap_ms(rows: &[Rounding]) -> f64 {
    let (ours, kube) = start_latencies_us(rows);
    round3(percentile_ms(&kube, 0.5) - percentile_ms(&ours, 0.5))
}

/// `writes` sequential writes under the real clock, both controllers racing on one in-process
/// server; snapshot `ch11_latency_real` (the band of the median gap), and this run's figures.
pub fn latency_real(writes: usize) -> Vec<Rounding> {
    // book: ch11_latency_real
    let plan = vec![None; writes]; // no offsets: the real clock lands where it lands
    let releases = [Release::default()]; // this crate's controller at its default release
    let rows = rig::real(findings::race(plan, &releases, Duration::ZERO)); // no debounce
    // book: end ch11_latency_real
    latency_real_record(&rows);
    rows
}

/// Records snapshot `ch11_latency_real` (the band of the median gap, kube-runtime minus this
/// crate's controller: panics outside it) and this run's percentiles, for the rows of
/// [`latency_real`].
pub fn latency_real_record(rows: &[Rounding]) {
    let writes = rows.len();
    let (ours, kube) = start_latencies_us(rows);
    let gap = median_gap_ms(rows);
    snap::text(
        "ch11_latency_real",
        format!(
            "{writes} writes; median write -> reconcile start, kube-runtime minus controlloop: \
             {} ms\n",
            bands::REAL_LATENCY_P50_GAP_MS.check("median gap (ms)", gap)
        ),
    );
    let _ = measured::record(
        "ch11_latency_real",
        format!(
            "| write → reconcile start ({writes} writes) | p50 | p99 |\n|---|---|---|\n\
             | controlloop | {} ms | {} ms |\n| kube-runtime | {} ms | {} ms |\n",
            percentile_ms(&ours, 0.5),
            percentile_ms(&ours, 0.99),
            percentile_ms(&kube, 0.5),
            percentile_ms(&kube, 0.99)
        ),
    );
}

/// One band fired by a broken variant: which run, and the check's message.
#[derive(Debug, Clone)]
pub struct Fired {
    /// The run that broke it.
    pub run: &'static str,
    /// What the check said.
    pub error: OutOfBand,
}

impl Fired {
    /// Whether the value lay above the band (rather than below).
    pub fn above(&self) -> bool {
        self.error.above()
    }

    /// The line the snapshot keeps: the run, the quantity, the side and the band (never the
    /// value or the margin, which are this run's).
    pub fn line(&self) -> String {
        let e = &self.error;
        format!(
            "{}: {} {} {} ({})",
            self.run,
            e.what,
            e.side_word(),
            e.band,
            e.basis
        )
    }
}

/// kube-runtime's three storm bands, each checked on a run of a broken variant under the real
/// clock: a reconciler that detaches its work (the essay's storm, and at 100 ms a reconcile),
/// and a 50 ms debounce where the reconciler would keep up. Each check must fail. Snapshot
/// `ch11_storm_bands_fire` (sides and bands), and this run's values.
pub fn storm_bands_fire() -> Vec<Fired> {
    // book: ch11_storm_bands_fire
    let essay = Params::essay().real();
    let detached = Knobs {
        design: Design::DetachedWork, // the runner believes each object free at once
        ..Knobs::default()
    };
    let debounced = Knobs {
        debounce: 50 * MS, // collapse on purpose
        ..Knobs::default()
    };
    let at_20ms = storm::run(&essay, detached).expect("detached, 20 ms");
    let at_100ms = storm::run(&essay.clone().cost(100 * MS), detached).expect("detached");
    let free = storm::run(&essay.clone().cost(Duration::ZERO), debounced).expect("debounced");
    // Each `fires` panics if its run lands inside the band: every band must reject its run.
    let fired = [
        (
            "detached work, 20 ms reconciles",
            bands::KUBE_REAL_RECONCILE_RATIO
                .fires("reconciles / expected", reconcile_ratio(&at_20ms)),
        ),
        (
            "detached work, 100 ms reconciles",
            bands::KUBE_REAL_RECONCILE_RATIO
                .fires("reconciles / expected", reconcile_ratio(&at_100ms)),
        ),
        (
            "debounce 50 ms, free reconciles",
            bands::KUBE_REAL_COLLAPSE_AT_OR_BELOW_GAP.fires("collapse", free.collapse),
        ),
    ];
    // book: end ch11_storm_bands_fire
    storm_bands_record(fired)
}

/// The three bands of [`storm_bands_fire`], each fired by its run, which must lie above it:
/// records snapshot `ch11_storm_bands_fire` (sides and bands) and this run's values.
pub fn storm_bands_record(fired: [(&'static str, OutOfBand); 3]) -> Vec<Fired> {
    let fired: Vec<Fired> = fired
        .into_iter()
        .map(|(run, error)| Fired { run, error })
        .collect();
    assert!(fired.iter().all(Fired::above), "{fired:?}");
    let lines: Vec<String> = fired.iter().map(Fired::line).collect();
    snap::text("ch11_storm_bands_fire", lines.join("\n"));
    let values: Vec<String> = fired
        .iter()
        .map(|f| {
            let e = &f.error;
            format!("| {} | {} | {} ({}) |", f.run, e.what, e.value, e.margin)
        })
        .collect();
    let table = format!(
        "| run | quantity | value |\n|---|---|---|\n{}\n",
        values.join("\n")
    );
    let _ = measured::record("ch11_storm_bands_fire", table);
    fired
}

/// The latency band on a race whose kube-runtime controller has a 10 ms debounce: the median
/// gap lies above [`bands::REAL_LATENCY_P50_GAP_MS`]. Snapshot `ch11_latency_fires`.
pub fn latency_band_fires(writes: usize) -> Fired {
    // book: ch11_latency_fires
    let plan = vec![None; writes];
    let releases = [Release::default()];
    let debounced = rig::real(findings::race(plan, &releases, 10 * MS)); // kube-runtime waits
    let gap = ch11::median_gap_ms(&debounced);
    let error = bands::REAL_LATENCY_P50_GAP_MS.fires("median gap (ms)", gap);
    // book: end ch11_latency_fires
    let fired = Fired {
        run: "kube-runtime with a 10 ms debounce",
        error,
    };
    assert!(fired.above(), "{fired:?}");
    snap::text("ch11_latency_fires", fired.line());
    let _ = measured::record(
        "ch11_latency_fires",
        format!("median gap with the debounce: {gap} ms"),
    );
    fired
}

/// The median of a basis's runs.
fn median(b: &Basis) -> f64 {
    let mut v: Vec<f64> = b.runs.iter().map(|r| r.value).collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Collapse where the reconciler keeps up, as both runtimes' committed runs have it (the files
/// of the two bands): kube-runtime's median lies above ours. Snapshot `ch11_collapse_bases`.
pub fn collapse_bases() -> String {
    // book: ch11_collapse_bases
    let ours = Basis::read("real_collapse_at_or_below_gap.tsv").expect("chapter 06's runs");
    let kube = Basis::read("kube_real_collapse_at_or_below_gap.tsv").expect("kube-runtime's");
    assert!(median(&kube) > median(&ours)); // kube-runtime merges more events
    // book: end ch11_collapse_bases
    let line = |name: &str, b: &Basis| {
        format!(
            "{name:<13} {:>4} runs, median {}, {}",
            b.runs.len(),
            basis::show(median(b)),
            b.span()
        )
    };
    let text = format!(
        "collapse at cost 0 and 1 ms, gap 1 ms, real clock (the bands' files)\n{}\n{}\n",
        line("controlloop", &ours),
        line("kube-runtime", &kube)
    );
    snap::text("ch11_collapse_bases", &text);
    text
}

/// The first part's experiments under virtual time (the `cargo run` experiment `ch11_storm`).
pub fn ch11_storm() {
    storm_virtual();
    sweeps_virtual();
    one_at_a_time();
    debounce();
}

/// The first part's experiments under the real clock (`ch11_storm_real`).
pub fn ch11_storm_real() {
    storm_real();
    collapse_bases();
    storm_bands_fire();
}

/// The second part's experiments (`ch11_semantics`).
pub fn ch11_semantics() {
    drift();
    status_storm();
    requeue();
    backoff();
    deleted();
    relist_gap();
}

/// The third part's experiments under virtual time (`ch11_findings`), and the table of every
/// claim on both runtimes.
pub fn ch11_findings() {
    waiters();
    rounding();
    super::claims::table();
}

/// The third part's experiments under the real clock (`ch11_findings_real`).
pub fn ch11_findings_real() {
    latency_real(200);
    latency_band_fires(100);
}
