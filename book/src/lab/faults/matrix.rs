//! The matrix run: each fault against both designs, each row checked, and chapter 12's
//! snapshots and measured values recorded.

use serde::Serialize;

use super::{
    bands,
    storm::run_async,
    types::{Fault, Outcome, Setup},
};
use crate::lab::designs::trigger::{Backoff, Design};

/// One fault, both designs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// The fault.
    pub fault: Fault,
    /// The storm it ran in.
    pub setup: Setup,
    /// The level-triggered controller.
    pub level: Outcome,
    /// The edge-triggered controller.
    pub edge: Outcome,
}

impl Row {
    /// Runs both designs through `fault` in its own storm ([`Fault::setup`]).
    pub fn run(fault: Fault) -> Row {
        Row::run_in(fault, fault.setup())
    }

    /// Runs both designs through `fault` in `setup`, each on a fresh runtime: the real clock
    /// for [`Fault::SlowHandler`], a paused one for every other fault.
    pub fn run_in(fault: Fault, setup: Setup) -> Row {
        let one = |design| match fault {
            Fault::SlowHandler => crate::lab::rig::real(run_async(design, fault, setup)),
            _ => crate::lab::rig::paused(run_async(design, fault, setup)),
        };
        Row {
            fault,
            setup,
            level: one(Design::Level),
            edge: one(Design::Edge),
        }
    }

    /// The row as the chapter's table shows it: fault, each design's verdict, relists and
    /// reconciles (level · edge). A real-clock count shows as its band.
    pub fn line(&self) -> String {
        let (l, e) = (&self.level, &self.edge);
        let level_reconciles = match self.fault {
            Fault::SlowHandler => bands::SLOW_HANDLER_RECONCILES
                .check("slow handler: level reconciles", l.reconciles)
                .to_string(),
            _ => l.reconciles.to_string(),
        };
        let backoff = match self.setup.backoff {
            Backoff::ControllerDefault => "",
            Backoff::PerItem => ", per-item backoff only",
        };
        format!(
            "| {}{backoff} | {} | {} | {} · {} | {} · {} |",
            self.fault,
            l.verdict(),
            e.verdict(),
            l.relists,
            e.relists,
            level_reconciles,
            e.reconciles
        )
    }

    /// The level design survived the fault: it got quiet, every widget ends on its last
    /// written value, its queue holds nothing (queued, delayed, dirty or processing), a
    /// graceful shutdown left no key held, its relists are within the fault's bound, and no
    /// two reconciles of one widget ever ran at once. Panics naming the fault and what broke.
    pub fn check(&self) {
        let (f, l) = (self.fault, &self.level);
        assert!(l.quiet, "{f}: the level controller never got quiet");
        assert!(l.wrong.is_empty(), "{f}: level {}", l.verdict());
        let left = l.left_in_queue;
        assert!(left.total() == 0, "{f}: level left {left:?} in its queue");
        let held = l.left_at_shutdown.map_or(0, |b| b.processing);
        assert!(held == 0, "{f}: {held} key(s) still held after shutdown");
        let (relists, bound) = (l.relists, f.relist_bound());
        assert!(
            relists <= bound,
            "{f}: level relisted {relists} times, bound {bound}"
        );
        let holders = l.max_holders_per_key;
        assert!(
            holders == 1,
            "{f}: {holders} level reconciles of one widget at once"
        );
    }
}

/// The errors row again with controller-runtime v0.24's (and v0.25's) default backoff for both designs: the
/// per-item exponential backoff without the shared bucket.
pub fn errors_with_per_item_backoff() -> Row {
    // book: ch12_per_item
    let fault = Fault::ReconcilerErrors;
    let setup = Setup {
        backoff: Backoff::PerItem, // no bucket: each payload backs off on its own
        ..fault.setup()
    };
    let row = Row::run_in(fault, setup);
    row.check(); // the level design survives this one too
    // book: end ch12_per_item
    row
}

/// Every row of the matrix.
pub fn matrix() -> Vec<Row> {
    Fault::ALL.iter().map(|&f| Row::run(f)).collect()
}

/// Runs the whole matrix, checks every row and records each row's snapshot
/// (`ch12_row_NAME`), as chapter 12 shows them, and this run's measured values for the one
/// real-clock row (`measured/ch12_slow_handler.md`); then the errors row with the per-item
/// backoff (`ch12_errors_per_item_backoff`).
///
/// The real-clock row runs first, alone; then the paused rows' designs run two at a time, one
/// per thread, each on its own runtime: under virtual time a run's result does not depend on
/// what else the machine runs, and the matrix takes about half as long on two cores. The rows
/// are the same as [`Row::run`]'s and [`errors_with_per_item_backoff`]'s.
pub fn faults() {
    let slow = Row::run(Fault::SlowHandler);
    // Each design of each paused row is one job; the 10,000-object row's go first, as the
    // longest (so neither thread is left with it at the end).
    let mut paused: Vec<(Fault, Setup)> = Fault::ALL
        .iter()
        .filter(|&&f| f != Fault::SlowHandler)
        .map(|&f| (f, f.setup()))
        .collect();
    paused.sort_by_key(|(f, _)| *f != Fault::Scale);
    let per_item = Setup {
        backoff: Backoff::PerItem,
        ..Fault::ReconcilerErrors.setup()
    };
    paused.push((Fault::ReconcilerErrors, per_item));
    let jobs: Vec<_> = paused
        .iter()
        .flat_map(|&(fault, setup)| {
            [Design::Level, Design::Edge].map(|design| {
                Box::new(move || crate::lab::rig::paused(run_async(design, fault, setup)))
                    as Box<dyn FnOnce() -> Outcome + Send>
            })
        })
        .collect();
    let mut outcomes = in_two_threads(jobs).into_iter();
    let mut rows: Vec<Row> = paused
        .iter()
        .map(|&(fault, setup)| Row {
            fault,
            setup,
            level: outcomes.next().expect("the level design's outcome"),
            edge: outcomes.next().expect("the edge design's outcome"),
        })
        .collect();
    let per_item = rows
        .pop()
        .expect("the errors row with the per-item backoff");
    per_item.check();
    crate::kit::snap::text("ch12_errors_per_item_backoff", per_item.line());
    rows.push(slow);
    rows.sort_by_key(|r| Fault::ALL.iter().position(|&f| f == r.fault));
    for row in rows {
        row.check();
        crate::kit::snap::text(&format!("ch12_row_{}", row.fault.name()), row.line());
        if row.fault == Fault::SlowHandler {
            let measured = format!(
                "| slow event handler | level | edge |\n|---|---|---|\n| reconciles | {} | {} |",
                row.level.reconciles, row.edge.reconciles
            );
            crate::kit::measured::record("ch12_slow_handler", measured)
                .expect("record the measured values");
        }
    }
}

/// Runs `jobs` on two threads, each taking the next job when it finishes one; their results in
/// the jobs' order. A job's panic is raised again here, with its message.
fn in_two_threads<T: Send>(jobs: Vec<Box<dyn FnOnce() -> T + Send + '_>>) -> Vec<T> {
    use std::sync::Mutex;
    let n = jobs.len();
    let queue = Mutex::new(jobs.into_iter().enumerate());
    let results = Mutex::new((0..n).map(|_| None).collect::<Vec<Option<T>>>());
    std::thread::scope(|s| {
        let worker = || {
            loop {
                let next = queue.lock().expect("the job list").next();
                let Some((i, job)) = next else { break };
                let result = job();
                results.lock().expect("the results")[i] = Some(result);
            }
        };
        let threads = [s.spawn(worker), s.spawn(worker)];
        for t in threads {
            if let Err(panic) = t.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
    let results = results.into_inner().expect("the results");
    results
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}
