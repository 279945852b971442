//! Chapter 11's table: one row per claim of the book, what this crate's port and kube-runtime
//! did when it was run, and the snapshot that shows the run. Every cell but the claim is
//! computed from a run, so a kube-runtime release that changes a behaviour changes this table
//! (snapshot `ch11_claims`), not only the snapshot the row points to.

use std::{fmt::Write as _, time::Duration};

use super::{
    Runtime,
    drift::{self, Remedy},
    semantics::{self, retry_delays},
    storm::{self, Knobs},
};
use crate::{
    kit::snap,
    lab::{
        burst::{
            self, Clock, Params, Report,
            sweeps::{Sweep, check_claims},
        },
        resync::{Read, Setup},
    },
};
use controlloop::controller::Release;

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The book's claim, and the chapter that makes it.
    pub claim: &'static str,
    /// What the run showed for this crate's port.
    pub controlloop: String,
    /// What the run showed for kube-runtime.
    pub kube_runtime: String,
    /// Whether the two runs agree on the claim.
    pub carries_over: bool,
    /// The snapshot (chapter 11's parts) that shows the run.
    pub evidence: &'static str,
}

fn storm_cell(r: &Report) -> String {
    format!(
        "{} events → {} reconciles, last read {}",
        r.events_delivered,
        r.reconciles,
        r.final_observed.map_or("none".into(), |v| v.to_string())
    )
}

/// A cell for this crate's controller at each release: `v0.22: …; v0.24: …`.
fn per_release(cell: impl Fn(Runtime) -> String) -> String {
    let cells: Vec<String> = Release::ALL
        .iter()
        .map(|&r| format!("{r}: {}", cell(Runtime::Controlloop(r))))
        .collect();
    cells.join("; ")
}

/// Runs every virtual-time experiment the table needs and builds its rows.
pub fn rows() -> Vec<Row> {
    let mut rows = vec![];
    let essay = Params::essay();

    let ours = burst::run(&essay).expect("ours");
    let kube = storm::run(&essay, Knobs::default()).expect("kube-runtime");
    rows.push(Row {
        claim: "A storm collapses into a few reconciles that act on the last value (06, 07)",
        controlloop: storm_cell(&ours),
        kube_runtime: storm_cell(&kube),
        carries_over: check_claims(&ours).is_ok()
            && check_claims(&kube).is_ok()
            && ours.observed == kube.observed,
        evidence: "ch11_storm_virtual",
    });

    let (mut same, mut total, mut ok) = (0, 0, true);
    for sweep in Sweep::ALL {
        for p in sweep.params(Clock::Virtual) {
            let (o, k) = (
                burst::run(&p).expect("ours"),
                storm::run(&p, Knobs::default()).expect("kube"),
            );
            ok &= check_claims(&o).is_ok() && check_claims(&k).is_ok();
            same += usize::from(o.reconciles == k.reconciles);
            total += 1;
        }
    }
    let within = |ok: bool| {
        if ok {
            format!("{total} of {total} runs within 1 of the formula")
        } else {
            "a run left the formula".to_owned()
        }
    };
    rows.push(Row {
        claim: "No collapse below the gap; reconciles ≈ min(writes, span / cost + 1) (06)",
        controlloop: within(ok),
        kube_runtime: format!("{}; {same} of {total} counts equal to ours", within(ok)),
        carries_over: ok,
        evidence: "ch11_sweeps_virtual",
    });

    let four = Params::essay().workers(4);
    let o = burst::run(&four).expect("ours");
    let k = storm::run(&four, Knobs::default()).expect("kube");
    let at_once = |r: &Report| {
        format!(
            "at most {} at once, 4 slots",
            r.max_concurrent_reconciles_of_one_key
        )
    };
    rows.push(Row {
        claim: "No two reconciles of one object run at once (01, 07)",
        controlloop: at_once(&o),
        kube_runtime: at_once(&k),
        carries_over: o.max_concurrent_reconciles_of_one_key == 1
            && k.max_concurrent_reconciles_of_one_key == 1,
        evidence: "ch11_one_at_a_time",
    });

    let distinct = {
        let mut seen: Vec<Report> = vec![];
        for _ in 0..5 {
            let r = storm::run(&essay, Knobs::default()).expect("kube");
            if !seen.contains(&r) {
                seen.push(r);
            }
        }
        seen.len()
    };
    rows.push(Row {
        claim: "Under virtual time a run is exact and repeats (00, 05)",
        controlloop: "the same report every run".into(),
        kube_runtime: format!("{distinct} distinct report(s) in 5 runs"),
        carries_over: distinct == 1,
        evidence: "ch11_storm_virtual",
    });

    let log = semantics::error_backoff(6);
    let kr = retry_delays(&log, Runtime::KubeRuntime, "run");
    rows.push(Row {
        claim: "Errors back off per key, doubling until forget (02)",
        controlloop: per_release(|rt| {
            format!("retries after {:?} ms", retry_delays(&log, rt, "run"))
        }),
        kube_runtime: format!("error_policy: retries after {kr:?} ms; no Forget, no Done"),
        carries_over: Release::ALL
            .iter()
            .all(|&r| retry_delays(&log, Runtime::Controlloop(r), "run") == kr),
        evidence: "ch11_error_backoff",
    });

    let once = semantics::requeue_pending(false);
    let secs = |rt| once.times(rt, Duration::from_secs(1));
    let kr = secs(Runtime::KubeRuntime);
    rows.push(Row {
        claim: "A new trigger leaves a pending requeue_after in place (04)",
        controlloop: per_release(|rt| format!("reconciles at {:?} s", secs(rt))),
        kube_runtime: format!("reconciles at {kr:?} s"),
        carries_over: Release::ALL
            .iter()
            .all(|&r| secs(Runtime::Controlloop(r)) == kr),
        evidence: "ch11_requeue",
    });

    let faithful = drift::controlloop(Setup::faithful());
    let kube_bulk = drift::kube_runtime(Remedy::ReconcileAllOn10h);
    rows.push(Row {
        claim: "A periodic replay of the cache cannot see a missed change (04)",
        controlloop: format!("resync 10 h read {}", faithful.colors_read.join(", ")),
        kube_runtime: format!(
            "no resync; reconcile_all_on 10 h read {}",
            kube_bulk.colors_read.join(", ")
        ),
        carries_over: faithful.colors_read == kube_bulk.colors_read
            && !faithful.colors_read.contains(&"blue".to_owned()),
        evidence: "ch11_drift",
    });

    let remedy = drift::controlloop(Setup {
        requeue_after: Some(drift::HOUR),
        read: Read::Live,
        ..Setup::faithful()
    });
    let kube_live = drift::kube_runtime(Remedy::Requeue1hLive);
    let blue = |d: &drift::Drift| {
        d.first_hour_blue_read
            .map_or("never".into(), |h| format!("hour {h}"))
    };
    rows.push(Row {
        claim: "A per-object requeue that reads the live object catches the drift (04)",
        controlloop: format!("requeue_after 1 h + GET: blue at {}", blue(&remedy)),
        kube_runtime: format!("Action::requeue(1 h) + GET: blue at {}", blue(&kube_live)),
        // Each catches it within one period after its own lost write.
        carries_over: [
            (&remedy, drift::OURS_LOST_WRITE_HOUR),
            (&kube_live, drift::KUBE_SILENT_WRITE_HOUR),
        ]
        .iter()
        .all(|(d, lost)| {
            d.first_hour_blue_read
                .is_some_and(|h| h > *lost && h <= lost + 1.0)
        }),
        evidence: "ch11_drift",
    });

    let storm = drift::status_storm(20);
    let passes = |rt| {
        format!(
            "{} of {} reconciles pass",
            storm.count(rt, "generation"),
            storm.count(rt, "no predicate")
        )
    };
    rows.push(Row {
        claim: "A generation predicate drops status-only updates (04, 08)",
        controlloop: format!("GenerationChanged: {}", passes(Runtime::ours())),
        kube_runtime: format!(
            "predicate_filter(generation): {}",
            passes(Runtime::KubeRuntime)
        ),
        carries_over: storm.count(Runtime::ours(), "generation")
            == storm.count(Runtime::KubeRuntime, "generation"),
        evidence: "ch11_status_storm",
    });

    let del = semantics::deleted();
    let gone = |rt| del.notes(rt).iter().filter(|n| n.ends_with("gone")).count();
    rows.push(Row {
        claim: "A deleted object is reconciled once more, and finds nothing (controller-runtime)",
        controlloop: per_release(|rt| format!("{} reconciles found it gone", gone(rt))),
        kube_runtime: format!(
            "{} reconciles; its pending requeue ends as ObjectNotFound",
            gone(Runtime::KubeRuntime)
        ),
        carries_over: gone(Runtime::KubeRuntime) > 0
            && Release::ALL
                .iter()
                .all(|&r| gone(Runtime::Controlloop(r)) > 0),
        evidence: "ch11_deleted",
    });

    let gap = semantics::relist_gap();
    let after_gone = |rt| {
        gap.log
            .entries(rt)
            .iter()
            .any(|(t, n)| *t >= Duration::from_secs(1) && n.ends_with("gone"))
    };
    let (cl, kr) = (
        after_gone(Runtime::ours()),
        after_gone(Runtime::KubeRuntime),
    );
    let said = |b: bool| {
        if b {
            "reconciled: the relist inferred the delete".to_owned()
        } else {
            "not reconciled: the object left the store silently".to_owned()
        }
    };
    rows.push(Row {
        claim: "A delete missed in a relist gap still reaches the controller (03)",
        controlloop: said(cl),
        kube_runtime: said(kr),
        carries_over: cl == kr,
        evidence: "ch11_relist_gap",
    });
    rows
}

/// The rows as a Markdown table (the page includes the snapshot as Markdown).
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| claim (chapter) | controlloop | kube-runtime 5.0.0 | carries over | evidence |\n\
         |---|---|---|---|---|\n",
    );
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | `{}` |",
            r.claim,
            r.controlloop,
            r.kube_runtime,
            if r.carries_over { "yes" } else { "**no**" },
            r.evidence
        );
    }
    out
}

/// Runs the rows, snapshots the table as `ch11_claims`, and adds each row to this run's
/// claims table ([`crate::kit::claims`]): what kube-runtime did, and whether it carries over.
pub fn table() -> Vec<Row> {
    let rows = rows();
    snap::text("ch11_claims", markdown(&rows));
    for r in &rows {
        let verdict = if r.carries_over {
            "carries over"
        } else {
            "differs"
        };
        crate::kit::claims::record(crate::kit::claims::Row::exact(
            format!("On kube-runtime 5.0.0: {}", r.claim),
            "11",
            r.evidence,
            format!("{verdict}: {}", r.kube_runtime),
        ));
    }
    rows
}
