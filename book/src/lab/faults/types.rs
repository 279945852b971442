//! What the matrix is made of: the faults, the storm each runs in, and how a design came out
//! of one.

use std::{collections::BTreeMap, fmt, time::Duration};

use serde::Serialize;

use crate::lab::designs::trigger::{Backlog, Backoff, Config, Design, Downstream};
use crate::lab::rig::NAMESPACE;
use controlloop::controller::{QueueKind, Release};

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
                let runs = world.replicas(&format!("{}/{name}", NAMESPACE));
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
