//! The table `cargo run` ends with: every claim of the book a row, each filled by this run.
//!
//! Rows come from four places, never from typed results:
//! - what the experiments recorded themselves ([`kit::claims::record`]) after their asserts;
//! - for chapters whose experiments do not record rows yet, what they already record: a durable
//!   figure read from the snapshot the experiment just checked (or, if it changed, from the
//!   `.snap.new` it left), listed in [`DERIVED`];
//! - one row per band the run checked, with every value this run found inside it
//!   ([`kit::band::checked`]) and, where the essay gave a figure for the same quantity, that
//!   figure and whether it can be held against the band ([`ESSAY_FIGURES`]);
//! - one failing row per experiment that failed, naming the snapshots it left to review.

use std::{collections::BTreeSet, fs};

use crate::{
    kit::{
        self,
        claims::{Figure, Row, Verdict},
        snap,
    },
    lab::{self, bands::Pinned},
    press::Experiment,
};

/// A durable row derived from a snapshot an experiment records.
pub struct Derived {
    /// The claim, as the chapter makes it.
    pub claim: &'static str,
    /// The chapter (`"01"`).
    pub chapter: &'static str,
    /// The experiment (its registry name) whose run checked the snapshot.
    pub experiment: &'static str,
    /// The snapshot.
    pub snapshot: &'static str,
    /// The figure, read from the snapshot's body; `None` if the body no longer has it.
    pub figure: fn(&str) -> Option<String>,
}

/// The line of `body` that starts with `prefix`, split on whitespace after it.
fn cells<'a>(body: &'a str, prefix: &str) -> Option<Vec<&'a str>> {
    let line = body.lines().find(|l| l.trim_start().starts_with(prefix))?;
    Some(
        line.trim_start()[prefix.len()..]
            .split_whitespace()
            .collect(),
    )
}

/// The value of the first `key: value` line of `body`.
fn field<'a>(body: &'a str, key: &str) -> Option<&'a str> {
    body.lines()
        .find_map(|l| l.trim_start().strip_prefix(key)?.strip_prefix(": "))
        .map(str::trim)
}

/// The rows derived from chapters 01 to 08, 12 and 13, until their experiments record their own.
pub const DERIVED: &[Derived] = &[
    Derived {
        claim: "100,000 adds of one key are one piece of work (len, depth)",
        chapter: "01",
        experiment: "ch01_coalescing",
        snapshot: "ch01_coalescing",
        figure: |b| {
            let c = cells(b, "100000 adds of default/web")?;
            Some(format!("len {}, depth {}", c.first()?, c.get(1)?))
        },
    },
    Derived {
        claim: "A key that changes while it is held waits beside the list: len 0, depth 1",
        chapter: "01",
        experiment: "ch01_coalescing",
        snapshot: "ch01_coalescing",
        figure: |b| {
            let c = cells(b, "200 adds while the worker holds it")?;
            Some(format!("len {}, depth {}", c.first()?, c.get(1)?))
        },
    },
    Derived {
        claim: "Fixed schedule: the queue hands no held key to a second worker; a channel and a \
                queue without its processing set do",
        chapter: "01",
        experiment: "ch01_contention_virtual",
        snapshot: "ch01_contention_virtual",
        figure: |b| {
            let last = |p| cells(b, p).and_then(|c| c.last().map(|v| v.to_string()));
            Some(format!(
                "violations: queue {}, without processing set {}, channel {}",
                last("queue  ")?,
                last("queue without processing set")?,
                last("channel")?
            ))
        },
    },
    Derived {
        claim: "Real clock: the queue hands no held key to a second worker, on every run",
        chapter: "01",
        experiment: "ch01_contention_real",
        snapshot: "ch01_contention_real",
        figure: |b| Some(format!("{} violations", field(b, "violations")?)),
    },
    Derived {
        claim: "Forget without Done: no worker sees the key again",
        chapter: "02",
        experiment: "ch02_forget_without_done",
        snapshot: "ch02_forget_without_done",
        figure: |b| {
            Some(format!(
                "a get within 500 ms: {}",
                field(b, "get_within_500ms")?
            ))
        },
    },
    Derived {
        claim: "Done without Forget: the next failure, a day later, waits as the next in the streak",
        chapter: "02",
        experiment: "ch02_done_without_forget",
        snapshot: "ch02_done_without_forget",
        figure: |b| {
            let without = cells(b, "done, no forget")?;
            let with = cells(b, "done and forget")?;
            Some(format!(
                "{} without forget, {} with",
                without.get(1)?,
                with.get(1)?
            ))
        },
    },
    Derived {
        claim: "RealFIFO hands out one delta per pop; DeltaFIFO an object's deltas at once",
        chapter: "03",
        experiment: "ch03_interleave",
        snapshot: "ch03_interleave_pops",
        figure: |b| {
            let pops = |p| cells(b, p).and_then(|c| c.iter().rev().nth(1).map(|n| n.to_string()));
            Some(format!(
                "DeltaFIFO {} pops, RealFIFO {} pops",
                pops("DeltaFIFO")?,
                pops("RealFIFO")?
            ))
        },
    },
    Derived {
        claim: "A resync sends the API server no request",
        chapter: "04",
        experiment: "ch04_faithful",
        snapshot: "ch04_resync_counts",
        figure: |b| {
            let after = b.split("requests_within_1s_of_each_resync_tick:").nth(1)?;
            let n: Vec<&str> = after
                .lines()
                .skip(1) // the rest of the key's own line
                .map_while(|l| l.trim().strip_prefix("- "))
                .collect();
            (!n.is_empty()).then(|| format!("requests at the resync ticks: {}", n.join(", ")))
        },
    },
    Derived {
        claim: "On the fake clientset a resourceVersion tells no update from another",
        chapter: "05",
        experiment: "ch05_checks",
        snapshot: "ch05_checks",
        figure: |b| {
            Some(format!(
                "{} of {} updates indistinguishable",
                field(b, "rv_indistinguishable")?,
                field(b, "updates")?
            ))
        },
    },
    Derived {
        claim: "200 writes, 1 ms apart, 20 ms reconciler (virtual time): a few reconciles, the \
                last on the last value",
        chapter: "06",
        experiment: "ch06_virtual",
        snapshot: "ch06_essay_virtual",
        figure: |b| {
            let heard = cells(b, "events heard")?;
            let last = cells(b, "final:")?;
            Some(format!(
                "{} events, {} reconciles, last acted on {}",
                heard.first()?.trim_end_matches(','),
                heard.get(5)?,
                last.last()?
            ))
        },
    },
    Derived {
        claim: "The book's law on the essay's own figures (its 458 ms span, its cost sweep): \
                reconciles / min(writes, span / cost + 1) inside REAL_RECONCILE_RATIO",
        chapter: "06",
        experiment: "ch06_virtual",
        snapshot: "ch06_essay_law",
        figure: |b| {
            let essay: Vec<&str> = b
                .lines()
                .filter(|l| l.starts_with("| the essay |"))
                .collect();
            let matching = essay.iter().filter(|l| l.ends_with("| matches |")).count();
            (!essay.is_empty()).then(|| format!("{matching} of {} rows match", essay.len()))
        },
    },
    Derived {
        claim: "An edge-triggered design pays a reconcile per event; the level design collapses",
        chapter: "07",
        experiment: "edge",
        snapshot: "ch07_dedup",
        figure: |b| {
            let level = b.split("level:").nth(1)?;
            let edge = b.split("edge:").nth(1)?;
            Some(format!(
                "reconciles: level {}, edge {}",
                field(level, "reconciles")?,
                field(edge, "reconciles")?
            ))
        },
    },
    Derived {
        claim: "A status write moves metadata.generation only without the status subresource",
        chapter: "08",
        experiment: "status_record",
        snapshot: "ch08_generation_rules",
        figure: |b| {
            let c = cells(b, "a status write")?;
            Some(format!(
                "generation {} with /status, {} without",
                c.first()?,
                c.get(1)?
            ))
        },
    },
    Derived {
        claim: "On a runtime of one thread, no value reaches the informer's handler while a \
                reconcile that burns CPU runs",
        chapter: "18",
        experiment: "ch18_cpu",
        snapshot: "ch18_cpu_one_thread",
        figure: |b| {
            let heard = field(b, "values heard while a reconcile ran")?;
            Some(format!("{heard} values heard while a reconcile burned"))
        },
    },
];

/// The essay's figure for a quantity the book checks or shows under the real clock, and why its
/// harness differs from the book's. Its verdict is never taken from a band: the figure is placed
/// among the book's runs ([`kit::basis::Basis::beside`]) and judged by the harness, "not
/// comparable" where the harnesses differ.
pub struct EssayFigure {
    /// The band's (or shown figure's) name.
    pub band: &'static str,
    /// The essay's figure, as it states it.
    pub figure: &'static str,
    /// The figure in the unit of the book's runs.
    pub value: f64,
    /// How the essay's harness differs from the book's (every essay figure's does).
    pub why: &'static str,
}

/// The essay's figures that measure a quantity the book checks or shows under the real clock.
pub const ESSAY_FIGURES: &[EssayFigure] = &[
    EssayFigure {
        band: "QUEUE_RECONCILES_PER_ADD",
        figure: "148,497 of 320,000 adds",
        value: 148_497.0 / 320_000.0,
        why: "the harnesses differ: Go under its race detector, with more work per reconcile",
    },
    EssayFigure {
        band: "CHANNEL_VIOLATIONS",
        figure: "21,940",
        value: 21_940.0,
        why: "the harnesses differ: Go under its race detector, with more work per reconcile",
    },
    EssayFigure {
        band: "REAL_ESSAY_RECONCILES",
        figure: "about 24 (client-go's fake clientset)",
        value: lab::burst::ch06::ESSAY_RECONCILES as f64,
        why: "the harnesses differ: the essay's writes went into client-go's fake clientset, with \
              no HTTP path and no real resourceVersions",
    },
];

/// The verdict on an essay figure: where it lies among the runs of `basis`, and why the
/// harnesses make it not comparable.
pub fn essay_verdict(e: &EssayFigure, basis: &'static str) -> Verdict {
    let place = kit::basis::Basis::of_file(basis)
        .map(|b| b.beside(e.value))
        .unwrap_or_else(|err| err.to_string());
    Verdict::NotComparable(format!(
        "{}; {place}",
        e.why.trim_start_matches("the harnesses differ: ")
    ))
}

/// What each band's row claims.
fn band_claim(name: &str) -> &'static str {
    match name {
        "REAL_US" => "Ten virtual one-second sleeps take microseconds of real time (µs)",
        "QUEUE_RECONCILES_PER_ADD" => "Real clock: the queue's reconciles per add (shown)",
        "CHANNEL_VIOLATIONS" => "Real clock: a channel hands held keys to a second worker",
        "REAL_RECONCILE_RATIO" => "Real clock: reconciles / min(writes, span / cost + 1)",
        "REAL_COLLAPSE_AT_OR_BELOW_GAP" => "Real clock: collapse where the reconciler keeps up",
        "REAL_ESSAY_RECONCILES" => "Real clock: 200 writes, 1 ms apart, 20 ms → reconciles",
        "REAL_WRITE_OVERHEAD_MS" => "Real clock: ms a write costs beyond its gap",
        "REAL_CONVERGE_OVERHEAD_MS" => "Real clock: ms from the last write to quiet, beyond a cost",
        "KUBE_REAL_RECONCILE_RATIO" => {
            "kube-runtime, real clock: reconciles / min(writes, span / cost + 1)"
        }
        "KUBE_REAL_COLLAPSE_AT_OR_BELOW_GAP" => {
            "kube-runtime, real clock: collapse where the reconciler keeps up"
        }
        "KUBE_REAL_ESSAY_RECONCILES" => "kube-runtime, real clock: the essay's storm → reconciles",
        "REAL_LATENCY_P50_GAP_MS" => {
            "Real clock: kube-runtime's median write → reconcile, minus this crate's (ms)"
        }
        "SLOW_HANDLER_RECONCILES" => {
            "Real clock: the level design's reconciles behind a slow handler"
        }
        "EMBEDDED_EVENT_P50_MS" => {
            "Real clock, embedded server: median ms from a write to its event"
        }
        "EMBEDDED_RECONCILE_P50_MS" => {
            "Real clock, embedded server: median ms from a write to its reconcile"
        }
        "REAL_SERVER_EVENT_P50_MS" => "kube-apiserver: median ms from a write to its event",
        "REAL_SERVER_RECONCILE_P50_MS" => "kube-apiserver: median ms from a write to its reconcile",
        "REAL_SERVER_ESSAY_RECONCILES" => {
            "kube-apiserver: 200 writes, 1 ms apart, 20 ms → reconciles"
        }
        "REAL_SERVER_KUBE_ESSAY_RECONCILES" => {
            "kube-apiserver, kube-runtime: the essay's storm → reconciles"
        }
        "REAL_SERVER_RECONCILE_RATIO" => {
            "kube-apiserver: reconciles / min(writes, span / cost + 1)"
        }
        "REAL_SERVER_WRITE_OVERHEAD_MS" => "kube-apiserver: ms a write costs beyond its gap",
        "REAL_SERVER_CONVERGE_OVERHEAD_MS" => {
            "kube-apiserver: ms from the last write to quiet, beyond a cost"
        }
        "REAL_SERVER_COLLAPSE_AT_OR_BELOW_GAP" => {
            "kube-apiserver: collapse where the reconciler keeps up"
        }
        "CPU_RECONCILE_RATIO" => {
            "Real clock, sleeping or burning reconcile: reconciles / min(writes, span / cost + 1)"
        }
        "CPU_EVENT_P50_MS" => {
            "Real clock, sleeping or burning reconcile: median ms from a write to its event"
        }
        "CPU_EVENT_P99_MS" => {
            "Real clock, sleeping or burning reconcile: 99th-percentile ms, write to event"
        }
        "CPU_RECONCILE_P50_PER_COST" => {
            "Real clock, sleeping or burning reconcile: median write → reconcile, in costs"
        }
        "CPU_HEARD_DURING_RECONCILE" => {
            "Real clock, sleeping or burning reconcile: share of events heard while one runs"
        }
        "REAL_CPU_RECONCILE_RATIO" => {
            "kube-apiserver, sleeping or burning reconcile: reconciles / min(writes, span / cost + 1)"
        }
        "REAL_CPU_EVENT_P50_MS" => {
            "kube-apiserver, sleeping or burning reconcile: median ms from a write to its event"
        }
        "REAL_CPU_EVENT_P99_MS" => {
            "kube-apiserver, sleeping or burning reconcile: 99th-percentile ms, write to event"
        }
        "REAL_CPU_RECONCILE_P50_PER_COST" => {
            "kube-apiserver, sleeping or burning reconcile: median write → reconcile, in costs"
        }
        "REAL_CPU_HEARD_DURING_RECONCILE" => {
            "kube-apiserver, sleeping or burning reconcile: share of events heard while one runs"
        }
        "REAL_LEASE_TAKEOVER_AFTER_CRASH_MS" => {
            "kube-apiserver's Leases: ms from the leader's crash to the next leader"
        }
        "REAL_LEASE_TAKEOVER_AFTER_RELEASE_MS" => {
            "kube-apiserver's Leases: ms from the leader's release to the next leader"
        }
        "CPU_HEARD_DURING_RECONCILE_ONE_CORE" => {
            "One CPU, burning reconcile on two threads: share of events heard while one runs"
        }
        _ => "a band without a claim row (add it to press::claims)",
    }
}

/// The chapter number of a chapter file (`"06-deduplication.md"` → `"06"`).
fn number(file: &str) -> &str {
    file.get(..2).unwrap_or(file)
}

/// The body of `name` as this run left it (its `.snap.new` if the run changed it), and whether
/// it changed.
fn this_run(name: &str) -> Option<(String, bool)> {
    let path = snap::path(name);
    let fresh = path.with_extension("snap.new");
    let (raw, moved) = match fs::read_to_string(&fresh) {
        Ok(raw) => (raw, true),
        Err(_) => (fs::read_to_string(&path).ok()?, false),
    };
    Some((
        raw.splitn(4, '\n').nth(3).unwrap_or_default().to_owned(),
        moved,
    ))
}

/// The snapshots of chapter `chapter` that this run left as `.snap.new`, as paths to review.
fn left_to_review(chapter: &str) -> Vec<String> {
    let prefix = format!("ch{chapter}_");
    let mut out: Vec<String> = fs::read_dir(snap::SNAPSHOT_DIR)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(&prefix) && n.ends_with(".snap.new"))
        .map(|n| format!("snapshots/{n}"))
        .collect();
    out.sort();
    out
}

/// One row per band that this run checked: every value it found inside, with the band.
fn band_rows(bands: &[Pinned]) -> Vec<Row> {
    let checked = kit::band::checked();
    let mut rows = vec![];
    for b in bands {
        let values: Vec<&kit::band::Checked> =
            checked.iter().filter(|c| c.basis == b.basis).collect();
        let Some(first) = values.first() else {
            continue; // not checked in this run (an experiment not chosen)
        };
        let numbers: Vec<f64> = values.iter().filter_map(|c| c.value.parse().ok()).collect();
        let (min, max) = numbers
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            });
        let value = match values.len() {
            1 => first.value.clone(),
            n => format!(
                "{n} checks, {}..={}",
                kit::basis::show(min),
                kit::basis::show(max)
            ),
        };
        let mut row = Row {
            claim: band_claim(b.name).to_owned(),
            chapter: number(b.chapter),
            essay: None,
            this_run: match b.kind {
                Some(_) => Figure::Banded {
                    value,
                    band: first.band.clone(),
                },
                None => Figure::Shown {
                    value,
                    reference: first.band.clone(),
                },
            },
            verdict: Verdict::Holds,
            snapshot: b.basis,
        };
        if let Some(e) = ESSAY_FIGURES.iter().find(|e| e.band == b.name) {
            row.essay = Some(e.figure);
            row.verdict = essay_verdict(e, b.basis);
        }
        rows.push(row);
    }
    rows
}

/// Every row of this run's table, in chapter order: `ran` is each experiment that ran and
/// whether it passed; `recorded` the rows experiments recorded themselves.
pub fn table(ran: &[(&Experiment, bool)], recorded: Vec<Row>) -> Vec<Row> {
    let passed: BTreeSet<&str> = ran
        .iter()
        .filter(|(_, ok)| *ok)
        .map(|(e, _)| e.name)
        .collect();
    let mut rows = recorded;
    for d in DERIVED.iter().filter(|d| passed.contains(d.experiment)) {
        let (figure, verdict) = match this_run(d.snapshot) {
            Some((body, false)) => match (d.figure)(&body) {
                Some(f) => (f, Verdict::Holds),
                None => (
                    "not in the snapshot".to_owned(),
                    Verdict::Moved(format!("snapshots/{}.snap (press::claims)", d.snapshot)),
                ),
            },
            Some((body, true)) => (
                (d.figure)(&body).unwrap_or_default(),
                Verdict::Moved(format!("snapshots/{}.snap.new", d.snapshot)),
            ),
            None => (
                "no snapshot".to_owned(),
                Verdict::Moved(format!("snapshots/{}.snap", d.snapshot)),
            ),
        };
        rows.push(Row {
            claim: d.claim.to_owned(),
            chapter: d.chapter,
            essay: None,
            this_run: Figure::Exact(figure),
            verdict,
            snapshot: d.snapshot,
        });
    }
    rows.extend(band_rows(&lab::bands::all()));
    for (e, _) in ran.iter().filter(|(_, ok)| !*ok) {
        let review = left_to_review(number(e.chapter));
        let review = if review.is_empty() {
            format!("the failure of `{}` printed above", e.name)
        } else {
            review.join(", ")
        };
        rows.push(Row {
            verdict: Verdict::Moved(review),
            ..Row::exact(
                "every claim of this experiment",
                number(e.chapter),
                e.name,
                "failed",
            )
        });
    }
    rows.sort_by(|a, b| a.chapter.cmp(b.chapter));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every derived row reads its figure from the committed snapshot: a row whose snapshot
    /// lost the line it reads would only show up as "moved" under `cargo run`.
    #[test]
    fn every_derived_row_finds_its_figure_in_its_snapshot() {
        for d in DERIVED {
            let body = snap::stored(d.snapshot).unwrap_or_else(|| panic!("{}", d.snapshot));
            let figure = (d.figure)(&body);
            assert!(figure.is_some(), "{}: no figure in {}", d.claim, d.snapshot);
        }
        let experiments: BTreeSet<&str> = crate::press::experiments().map(|e| e.name).collect();
        for d in DERIVED {
            assert!(experiments.contains(d.experiment), "{}", d.experiment);
        }
    }

    #[test]
    fn the_figure_readers_fire_on_a_snapshot_that_changed_shape() {
        let coalescing = DERIVED[0].figure;
        assert_eq!(
            coalescing("100000 adds of default/web   1   1\n").as_deref(),
            Some("len 1, depth 1")
        );
        assert_eq!(coalescing("100000 adds, another layout\n"), None);
    }

    #[test]
    fn every_band_has_a_claim() {
        for b in lab::bands::all() {
            assert!(
                !band_claim(b.name).starts_with("a band without"),
                "{}",
                b.name
            );
        }
    }
}
