//! Chapter 08's experiment: a controller that must act once each time a widget is switched on
//! (an annotation flips from `"false"` to `"true"`), written three ways, run through one
//! timeline of flips, restarts and dropped watch events.
//!
//! No upstream file: this is the pattern Kubernetes itself uses for `metadata.generation` and
//! `status.observedGeneration`, applied to a field that has no generation of its own.
//!
//! ```text
//!  annotation enabled: "true" ──► reconcile: desired = annotation ──┐ compare ──► act, then record
//!                                            recorded = status ─────┘             "acted on true"
//!                                            (written by the last reconcile that acted)
//! ```
//!
//! The three designs ([`Design`]):
//! - [`Design::StatusRecord`] records, in the object's status, the level it last acted on, and
//!   derives the transition by comparing that record with the current level.
//! - [`Design::MemoryLastSeen`] keeps the last level it saw in process memory (default false).
//! - [`Design::EventOldNew`] acts when an update event's old object says false and its new one
//!   says true (a predicate lets only such events through; the reconciler then acts).
//!
//! Everything runs under tokio's paused clock against the embedded server in-process: every
//! count is exact.
//!
//! # Invariants
//! 1. Every design runs the same [`timeline`] on a fresh cluster, and its actions are counted
//!    in an [`Actions`] log that survives restarts (it is the outside world).
//! 2. A restart kills the controller process (informer, cache, queue, memory) and starts a new
//!    one; only the cluster and the action log survive.
//!
//! # Differences from upstream
//! The book's `Widget` has no status field for this record, so the status record keeps it in
//! `status.message` (`"acted on enabled=true"`). A real CRD would give it a field or a
//! condition of its own.

use std::{sync::Arc, time::Duration};

use kube::api::{Api, Patch, PatchParams, PostParams};
use serde::Serialize;

pub mod generation;

pub use crate::lab::designs::status_record::{
    Actions, Design, ENABLED, NAMESPACE, OBJECT, RecordCounts, Start, SwitchedOn, WORK, Wired,
    enabled, record_reconcile, recorded, set_annotation, start_event, start_memory, start_record,
};
use crate::lab::rig::{self, Process, Widget, WidgetSpec};

/// One thing that happens to the widget or its controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Op {
    /// Set the annotation; the event reaches watchers.
    Set(bool),
    /// Set the annotation; the server drops the event (`drop_next_events(1)`).
    SetDropped(bool),
    /// Change the spec (color), bumping the generation; the event is delivered.
    SpecChange,
    /// Kill the controller process and start a new one.
    Restart,
}

/// One step of the timeline: what happens, and how many actions a correct controller takes.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// What the step is, in words.
    pub what: &'static str,
    /// What happens.
    pub ops: &'static [Op],
    /// Real switch-ons in this step: the actions a correct controller takes.
    pub expected: u64,
}

/// The timeline every design runs. The widget starts switched off.
pub fn timeline() -> Vec<Step> {
    use Op::*;
    let step = |what, ops, expected| Step {
        what,
        ops,
        expected,
    };
    vec![
        step("created switched off", &[], 0),
        step("switched on", &[Set(true)], 1),
        step("controller restarted", &[Restart], 0),
        step("switched off", &[Set(false)], 0),
        step(
            "switched on, event dropped; then a spec change",
            &[SetDropped(true), SpecChange],
            1,
        ),
        step("switched off", &[Set(false)], 0),
        step(
            "switched on, event dropped; then a restart",
            &[SetDropped(true), Restart],
            1,
        ),
    ]
}

/// One design's run through the [`timeline`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Run {
    /// The design.
    pub design: Design,
    /// Actions taken during each step.
    pub actions_per_step: Vec<u64>,
    /// Whether each step's actions equal its expected count.
    pub correct: bool,
    /// Reconciles over the whole run (all processes).
    pub reconciles: u64,
    /// Status writes (the status record only).
    pub status_writes: u64,
    /// Update events whose object is one of this controller's own status writes.
    pub own_status_events: u64,
}

/// Runs one design through the timeline on a fresh paused-clock runtime.
pub fn run(design: Design) -> Run {
    run_with(design, design.start())
}

/// Runs a design whose controller `start` builds through the timeline, on a fresh
/// paused-clock runtime; `design` only names it in the [`Run`].
pub fn run_with(design: Design, start: Start) -> Run {
    crate::lab::rig::paused(run_async(design, start))
}

/// Long enough for any reconcile to finish, and its status event to come back.
pub const SETTLE: Duration = Duration::from_secs(1);

/// Runs `design` (built by `start`) through the [`timeline`]; chapter 08 shows this body.
async fn run_async(design: Design, start: Start) -> Run {
    // book: ch08_timeline
    let cluster = rig::widget_cluster().await;
    let client = cluster.in_process_client();
    let api: Api<Widget> = Api::namespaced(client.clone(), NAMESPACE);
    let mut w = Widget::new(
        OBJECT,
        WidgetSpec {
            replicas: 1,
            color: Some("red".into()),
        },
    );
    w.metadata.annotations = Some([(ENABLED.to_owned(), "false".to_owned())].into());
    let created = api.create(&PostParams::default(), &w).await;
    created.expect("creating the widget");
    let actions = Arc::new(Actions::default()); // the world's log: survives every restart
    let counts = Arc::new(RecordCounts::default()); // status writes, and their events heard
    let wired = Wired {
        start,
        actions: actions.clone(),
        counts: counts.clone(),
    };
    let start = || Process::start(&wired, &api);
    let mut process = start();
    let mut dead_reconciles = 0;
    let mut per_step = Vec::new();
    let mut colors = ["green", "blue"].into_iter().cycle();
    let steps = timeline();
    for step in &steps {
        let before = actions.count();
        for op in step.ops {
            match op {
                Op::Set(on) => set_annotation(&api, *on).await,
                Op::SetDropped(on) => {
                    cluster.drop_next_events(1); // stored, given a resourceVersion, never sent
                    set_annotation(&api, *on).await;
                }
                Op::SpecChange => {
                    let patch = serde_json::json!({ "spec": { "color": colors.next() } });
                    let patched = api
                        .patch(OBJECT, &PatchParams::default(), &Patch::Merge(&patch))
                        .await;
                    patched.expect("patching the spec");
                }
                Op::Restart => {
                    dead_reconciles += process.reconciles();
                    process.kill();
                    process = start(); // a fresh informer lists: creates, no old objects
                }
            }
            tokio::time::sleep(SETTLE).await;
        }
        if step.ops.is_empty() {
            tokio::time::sleep(SETTLE).await;
        }
        per_step.push(actions.count() - before);
    }
    let reconciles = dead_reconciles + process.reconciles();
    process.kill();
    let correct = per_step
        .iter()
        .zip(&steps)
        .all(|(got, s)| *got == s.expected);
    let run = Run {
        design,
        actions_per_step: per_step,
        correct,
        reconciles,
        status_writes: counts.status_writes(),
        own_status_events: counts.own_status_events(),
    };
    // book: end ch08_timeline
    run
}

/// One row of the chapter's table: a step, what a correct controller does, what each design
/// did.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The step.
    pub step: &'static str,
    /// Actions a correct controller takes.
    pub expected: u64,
    /// The status record's actions.
    pub status_record: u64,
    /// The in-memory design's actions.
    pub memory_last_seen: u64,
    /// The event design's actions.
    pub event_old_new: u64,
}

/// Lines the three designs' actions up step by step (runs in [`Design`] order: status record,
/// memory, event).
pub fn rows(runs: &[Run; 3]) -> Vec<Row> {
    timeline()
        .iter()
        .enumerate()
        .map(|(i, s)| Row {
            step: s.what,
            expected: s.expected,
            status_record: runs[0].actions_per_step[i],
            memory_last_seen: runs[1].actions_per_step[i],
            event_old_new: runs[2].actions_per_step[i],
        })
        .collect()
}

/// Runs all three designs and lines their actions up step by step.
pub fn table() -> (Vec<Row>, [Run; 3]) {
    let runs = [
        run(Design::StatusRecord),
        run(Design::MemoryLastSeen),
        run(Design::EventOldNew),
    ];
    (rows(&runs), runs)
}

/// Checks chapter 08's claims: the status record is right at every step, each broken design is wrong
/// at some step, and the status record's own status writes came back as events without an action.
pub fn check(runs: &[Run; 3]) {
    let [record, memory, event] = runs;
    assert!(
        record.correct,
        "the status record missed or repeated an action"
    );
    assert!(!memory.correct, "in-memory last-seen survived a restart?");
    assert!(
        !event.correct,
        "old-vs-new survived a dropped event and a restart?"
    );
    assert!(record.status_writes > 0);
    assert_eq!(
        record.own_status_events, record.status_writes,
        "every status write of ours came back as an event"
    );
}

/// Runs the table and the generation experiments, checks them and records the chapter's
/// snapshots.
pub fn status_record() {
    let (rows, runs) = table();
    check(&runs);
    crate::kit::snap::yaml("ch08_flips", &rows, vec![]);
    crate::kit::snap::yaml("ch08_record_run", &runs[0], vec![]);
    let rules = generation::rules();
    generation::check_rules(&rules);
    crate::kit::snap::text("ch08_generation_rules", generation::rules_table(&rules));
    let loops = generation::loops();
    generation::check_loops(&loops);
    crate::kit::snap::text("ch08_without_status", generation::loops_text(&loops));
}
