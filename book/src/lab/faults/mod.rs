//! Chapter 12's fault matrix: every fault a real cluster produces, injected into one write
//! storm, against the level-triggered controller and chapter 07's edge-triggered one.
//!
//! No upstream file: the faults are the ones client-go's reflector and controller-runtime's
//! controller are written to survive (client-go v0.36.3 `tools/cache/reflector.go`: a watch
//! that closes, a 410 on resume, a throttled or failing server; controller-runtime v0.24.1
//! `pkg/internal/controller/controller.go`: a reconciler that errors or panics, a stop in the
//! middle of work). The two designs are [`crate::lab::designs::trigger`]'s, armed with [`Hooks`] at the two
//! places a fault can reach a controller's own code.
//!
//! The level design's column in the six rows a fake clientset can play (events dropped,
//! reconciler panics, reconciler errors, status-write storm, shutdown, restart) is recorded on
//! controller-runtime v0.22.5, v0.24.1 and v0.25.3 (`upstream/recorded/
//! controller_runtime_vX_fault_matrix.txt`); `book/tests/recorded_upstream.rs` runs
//! [`run_async`] on each release's queues, and [`run_on_fake`] over the port's fake clientset
//! (no resourceVersions, as the recordings' first section), and compares every [`Outcome`] it
//! prints with them.
//!
//! ```text
//!  writer: 4 widgets × 50 writes, 1 ms apart ──► API server (in-process) ──watch──► informer
//!          └ at write 125: the fault ──────────┘      ▲ list on 410 / restart      │ handler
//!                                                     └────────────────────────────┤
//!             world (replicas per widget) ◄── reconcile ◄── queue ◄────────────────┘
//!  then: wait until the cache has heard every write and nothing is queued, delayed, dirty,
//!  processing or running; compare the world with the last value written to each widget
//! ```
//!
//! Each design runs alone on its own cluster, so the server's request log counts its lists.
//! Everything but [`Fault::SlowHandler`] runs under tokio's paused clock, so those rows are
//! exact and repeat exactly; the slow handler blocks its thread, which only the real clock
//! can show, and its run-specific numbers are bands.
//!
//! # Invariants
//! 1. Both designs see the same writes, drive the same kind of [`Downstream`], call the same
//!    [`Hooks`] at the same places, and retry a failure or a panic with `add_rate_limited`.
//! 2. Every await in a run is bounded: writes and waits by `Setup::limit`
//!    ([`within`](crate::lab::rig::within)), quiescence by the same deadline.
//! 3. A crashed process is restarted at once and counted; a killed or crashed process loses its
//!    informer, queue and workers; only the cluster and the world survive.
//!
//! # Concurrency
//! One runtime per run; each process's informer, controller and workers are tokio tasks. The
//! hooks are atomics and `parking_lot` mutexes, never held across an await.
//!
//! # Differences from upstream
//! - A crashed process restarts at once, without a kubelet's back-off.
//! - A restarted API server keeps its data but refuses every earlier revision
//!   ([`Cluster::restart`](controlloop::apiserver::Cluster::restart)), so every informer relists; a
//!   kube-apiserver's new watch cache refuses only revisions older than its first list.

pub mod bands;
pub mod hooks;
pub mod on_fake;
pub mod storm;

use std::{collections::BTreeMap, fmt, time::Duration};

use serde::Serialize;

use crate::lab::designs::trigger::{Config, Design, Downstream};
use controlloop::controller::{QueueKind, Release};

pub use crate::lab::designs::trigger::{Backlog, Backoff};
pub use hooks::{Hooks, INJECTED, quiet_injected_panics};
pub use on_fake::{FakeSource, run_on_fake};
pub use storm::{
    DROPPED, HANDLER_DELAY, NAMESPACE, Node, OUTAGE, RETRY_AFTER, STATUS_WRITES, Writer, converged,
    faulty_write, is_list, last_reconcile, run_async, widget,
};

/// The faults of the matrix, one row each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Fault {
    /// Every watch is closed, cleanly, in the middle of the burst.
    WatchClosed,
    /// Ten writes are stored but their events are never sent.
    EventsDropped,
    /// A write no watch hears of, then history compacted past it: the resumed watch gets 410.
    HistoryCompacted,
    /// The API server restarts with its data kept: every watch cut, old revisions refused.
    ServerRestarted,
    /// Three requests answered 429 with `Retry-After`, then three answered 500.
    Throttled,
    /// A write stored with no event at all, to a widget nobody writes again.
    SilentWrite,
    /// The event handler takes 5 ms per event (real clock).
    SlowHandler,
    /// Every third reconcile panics.
    ReconcilerPanics,
    /// Every reconcile fails for 100 ms, then they succeed again.
    ReconcilerErrors,
    /// The event handler panics once: the informer crashes, the process restarts.
    HandlerPanics,
    /// 400 status writes, back to back.
    StatusStorm,
    /// The controller is shut down gracefully, and starts again after the burst.
    ShutdownMidBurst,
    /// The controller process is killed and starts again at once.
    ControllerRestart,
    /// 10,000 widgets, 16 workers, two writes each, back to back.
    Scale,
}

impl Fault {
    /// Every fault, in the chapter's order.
    pub const ALL: [Fault; 14] = [
        Fault::WatchClosed,
        Fault::EventsDropped,
        Fault::HistoryCompacted,
        Fault::ServerRestarted,
        Fault::Throttled,
        Fault::SilentWrite,
        Fault::SlowHandler,
        Fault::ReconcilerPanics,
        Fault::ReconcilerErrors,
        Fault::HandlerPanics,
        Fault::StatusStorm,
        Fault::ShutdownMidBurst,
        Fault::ControllerRestart,
        Fault::Scale,
    ];

    /// The name its snapshot and its test carry.
    pub fn name(self) -> &'static str {
        match self {
            Fault::WatchClosed => "watch_closed_mid_burst",
            Fault::EventsDropped => "events_dropped",
            Fault::HistoryCompacted => "history_compacted",
            Fault::ServerRestarted => "server_restarted",
            Fault::Throttled => "throttled_then_failing",
            Fault::SilentWrite => "silent_write",
            Fault::SlowHandler => "slow_event_handler",
            Fault::ReconcilerPanics => "reconciler_panics",
            Fault::ReconcilerErrors => "reconciler_errors_then_recovers",
            Fault::HandlerPanics => "event_handler_panics",
            Fault::StatusStorm => "status_write_storm",
            Fault::ShutdownMidBurst => "shutdown_mid_burst",
            Fault::ControllerRestart => "controller_restart_mid_burst",
            Fault::Scale => "ten_thousand_objects",
        }
    }

    /// Its row title in the chapter's table.
    pub fn title(self) -> &'static str {
        match self {
            Fault::WatchClosed => "watch closed mid-burst",
            Fault::EventsDropped => "10 events dropped",
            Fault::HistoryCompacted => "history compacted (resume gets 410)",
            Fault::ServerRestarted => "API server restarted, data kept",
            Fault::Throttled => "429 with Retry-After, then 500s",
            Fault::SilentWrite => "a silent write, no event",
            Fault::SlowHandler => "slow event handler (real clock)",
            Fault::ReconcilerPanics => "reconciler panics every third call",
            Fault::ReconcilerErrors => "reconciler errors for 100 ms",
            Fault::HandlerPanics => "event handler panics",
            Fault::StatusStorm => "status-write storm",
            Fault::ShutdownMidBurst => "shutdown mid-burst",
            Fault::ControllerRestart => "controller restart mid-burst",
            Fault::Scale => "10,000 objects × 16 workers",
        }
    }

    /// The storm it runs in.
    pub fn setup(self) -> Setup {
        match self {
            Fault::SlowHandler => Setup::real(),
            Fault::Scale => Setup::scale(),
            _ => Setup::matrix(),
        }
    }

    /// The most relists the level design may make under this fault: one where the fault
    /// takes the watch's history or the process's cache away, none where it does not.
    pub fn relist_bound(self) -> u64 {
        match self {
            Fault::HistoryCompacted
            | Fault::ServerRestarted
            | Fault::SilentWrite
            | Fault::HandlerPanics
            | Fault::ShutdownMidBurst
            | Fault::ControllerRestart => 1,
            Fault::Throttled => 3, // the relist after the first 500, and two 500s on it
            _ => 0,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.title())
    }
}

/// One storm: how many widgets, how many writes, how fast, how costly a reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Setup {
    /// Widgets; the writes go to them in consecutive blocks.
    pub objects: usize,
    /// Writes: values `1..=writes`.
    pub writes: u64,
    /// Wait between writes.
    pub gap: Duration,
    /// Cost of one reconcile (one command to the world).
    pub cost: Duration,
    /// Workers per controller.
    pub workers: usize,
    /// The backoff both designs retry with.
    pub backoff: Backoff,
    /// The controller-runtime release the level design's controller follows (its queue).
    #[serde(skip)]
    pub release: Release,
    /// Whether the level design's controller builds the priority queue (`None`: the
    /// release's default).
    pub priority_queue: Option<bool>,
    /// How long nothing may happen before a run counts as quiet.
    pub quiet: Duration,
    /// The bound on every wait of the run.
    pub limit: Duration,
}

impl Setup {
    /// The essay's storm (200 writes, 1 ms apart, a 20 ms reconcile, one worker) spread over
    /// four widgets, 50 writes each.
    pub fn matrix() -> Setup {
        Setup {
            objects: 4,
            writes: 200,
            gap: Duration::from_millis(1),
            cost: Duration::from_millis(20),
            workers: 1,
            backoff: Backoff::ControllerDefault,
            release: Release::V0_22, // the rate-limiting queue, beside the edge design's
            priority_queue: None,
            quiet: Duration::from_secs(1),
            limit: Duration::from_secs(600),
        }
    }

    /// [`Setup::matrix`] on the real clock: a shorter quiet window.
    pub fn real() -> Setup {
        Setup {
            quiet: Duration::from_millis(300),
            limit: Duration::from_secs(120),
            ..Setup::matrix()
        }
    }

    /// 10,000 widgets, two writes each back to back, 16 workers.
    pub fn scale() -> Setup {
        Setup {
            objects: 10_000,
            writes: 20_000,
            gap: Duration::ZERO,
            workers: 16,
            limit: Duration::from_secs(3600),
            ..Setup::matrix()
        }
    }

    /// The widget write `value` goes to: consecutive blocks, one per widget.
    pub fn object_of(&self, value: u64) -> usize {
        ((value - 1) * self.objects as u64 / self.writes) as usize
    }

    /// How the designs' controllers are set up in this storm: its workers, release and
    /// backoff.
    pub fn design(&self) -> Config {
        Config {
            workers: self.workers,
            release: self.release,
            backoff: Some(self.backoff),
            priority_queue: self.priority_queue,
        }
    }

    /// The write the fault comes with: in the middle of the third block of four.
    pub fn fault_point(&self) -> u64 {
        self.writes * 5 / 8
    }
}

/// A widget whose world does not run what was last written to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Wrong {
    /// The widget.
    pub widget: String,
    /// The last value written.
    pub written: i32,
    /// What the world runs; `None` if nothing.
    pub runs: Option<i32>,
}

impl Wrong {
    /// Every widget of `last` whose replicas in `world` differ from the last written.
    pub fn all(last: &BTreeMap<String, i32>, world: &Downstream) -> Vec<Wrong> {
        last.iter()
            .filter_map(|(name, &written)| {
                let runs = world.replicas(&format!("{}/{name}", storm::NAMESPACE));
                (runs != Some(written)).then(|| Wrong {
                    widget: name.clone(),
                    written,
                    runs,
                })
            })
            .collect()
    }
}

impl fmt::Display for Wrong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.runs {
            Some(n) => write!(f, "{} runs {n}, written {}", self.widget, self.written),
            None => write!(f, "{} runs nothing, written {}", self.widget, self.written),
        }
    }
}

/// How one design came out of one fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// The design.
    pub design: Design,
    /// Widgets wrong after quiescence.
    pub wrong: Vec<Wrong>,
    /// For [`Fault::SilentWrite`]: widgets wrong before the relist that ends the run.
    pub wrong_before_relist: Option<usize>,
    /// Whether the run got quiet within its limit.
    pub quiet: bool,
    /// What the queue held after quiescence.
    pub left_in_queue: Backlog,
    /// What a graceful shutdown left in the stopped process's queue.
    pub left_at_shutdown: Option<Backlog>,
    /// Lists after the first (a restarted process's first list included).
    pub relists: u64,
    /// Processes started after the first.
    pub restarts: u64,
    /// Events heard from the first write on.
    pub events: u64,
    /// Reconciles started from the first write on (failed and panicked ones included).
    pub reconciles: u64,
    /// The same-key detector: most commands for one widget running at once.
    pub max_holders_per_key: u32,
    /// The queue the design's controller built (the edge design's is client-go's).
    pub queue: QueueKind,
    /// Reconciles the outage failed (before their command).
    pub failed: u64,
    /// Reconciles that panicked.
    pub panicked: u64,
    /// Commands the world ran from the first write on (a killed process's included).
    pub commands: u64,
    /// Commands that started while another command for the same widget ran.
    pub overlapping: u64,
    /// How long after the writes (the last one's gap included) any widget's world value last
    /// changed; zero if none changed after them.
    pub converged: Duration,
    /// How long after the writes the last reconcile ran (its end, or its start if it never
    /// ended); zero if none ran after them.
    pub last_reconcile: Duration,
}

impl Outcome {
    /// "ends right", or which widgets end wrong.
    pub fn verdict(&self) -> String {
        let healed = match self.wrong_before_relist {
            Some(n) if self.wrong.is_empty() => format!(" after the relist ({n} wrong before)"),
            _ => String::new(),
        };
        let overlap = match self.max_holders_per_key {
            0 | 1 => String::new(),
            n => format!("; {n} reconciles of one widget at once"),
        };
        let verdict = match (self.quiet, self.wrong.as_slice()) {
            (false, _) => "never quiet".to_owned(),
            (true, []) => format!("ends right{healed}"),
            (true, [one]) => format!("ends wrong: {one}"),
            (true, [first, ..]) => {
                format!("ends wrong: {} widgets, e.g. {first}", self.wrong.len())
            }
        };
        verdict + &overlap
    }
}

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
                Box::new(move || crate::lab::rig::paused(storm::run_async(design, fault, setup)))
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
