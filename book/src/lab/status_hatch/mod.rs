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
//! - [`Design::StatusHatch`] records, in the object's status, the level it last acted on, and
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
//! The book's `Widget` has no status field for this record, so the hatch keeps it in
//! `status.message` (`"acted on enabled=true"`). A real CRD would give it a field or a
//! condition of its own.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use kube::api::{Api, Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use serde::Serialize;
use tokio::task::JoinHandle;

pub mod generation;

use crate::lab::rig::{Informer, Process, Subject};
use controlloop::{
    apiserver::{Cluster, ServerOptions},
    cache::HandlerFuncs,
    controller::{
        Context, Controller, ReconcileError, ReconcileResult, Request, predicate::Predicate,
    },
    resources::{Widget, WidgetSpec},
};

pub use crate::lab::rig::NAMESPACE;

/// The widget.
pub const OBJECT: &str = "w";
/// The annotation whose flip from `"false"` to `"true"` must trigger exactly one action.
pub const ENABLED: &str = "lab.controlloop.dev/enabled";

/// Whether `w` is switched on (its annotation says `"true"`).
pub fn enabled(w: &Widget) -> bool {
    w.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ENABLED))
        .is_some_and(|v| v == "true")
}

/// The level the hatch last acted on, as recorded in `status.message`; `None` if never.
pub fn recorded(w: &Widget) -> Option<bool> {
    match w.status.as_ref()?.message.as_deref()? {
        "acted on enabled=true" => Some(true),
        "acted on enabled=false" => Some(false),
        _ => None,
    }
}

/// The world's record of actions: one entry per action taken.
#[derive(Default)]
pub struct Actions(AtomicU64);

impl Actions {
    /// Takes one action (sends one launch notice).
    pub fn act(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    /// Actions so far.
    pub fn count(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The three ways to write the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Design {
    /// Record the level acted on in status; compare it with the current level.
    StatusHatch,
    /// **Broken**: remember the last level seen in memory (false until seen).
    MemoryLastSeen,
    /// **Broken**: act on an update event whose old object is off and new object is on.
    EventOldNew,
}

/// Counters of one hatch process, for the idempotency claim.
#[derive(Default)]
pub struct HatchCounts {
    status_writes: AtomicU64,
    /// Resource versions our own status writes produced.
    own_rvs: Mutex<Vec<String>>,
    /// Update events whose new object is one of our own status writes.
    own_status_events: AtomicU64,
}

impl HatchCounts {
    /// Records one status write of ours, by the resourceVersion it produced.
    pub fn wrote(&self, written: &Widget) {
        self.status_writes.fetch_add(1, Ordering::SeqCst);
        if let Some(rv) = &written.metadata.resource_version {
            self.own_rvs.lock().push(rv.clone());
        }
    }

    /// Status writes recorded by [`HatchCounts::wrote`].
    pub fn status_writes(&self) -> u64 {
        self.status_writes.load(Ordering::SeqCst)
    }

    /// Update events heard whose new object is one of our own status writes.
    pub fn own_status_events(&self) -> u64 {
        self.own_status_events.load(Ordering::SeqCst)
    }

    /// Counts, on `informer`, the update events that carry one of our own status writes.
    pub fn listen(self: &Arc<Self>, informer: &Informer<Widget>) {
        let counts = self.clone();
        informer
            .add_event_handler(HandlerFuncs::new().on_update(move |_, new: Arc<Widget>| {
                let rv = new.metadata.resource_version.clone().unwrap_or_default();
                if counts.own_rvs.lock().contains(&rv) {
                    counts.own_status_events.fetch_add(1, Ordering::SeqCst);
                }
            }))
            .expect("a fresh informer accepts handlers");
    }
}

/// How long a hatch reconcile works before it acts and records: it leaves a window in which
/// the server holds a change the controller has not yet observed.
pub const WORK: Duration = Duration::from_millis(100);

/// The hatch's reconcile: compare the level now with the level recorded, act on a switch-on,
/// record what was acted on (and the generation seen, as `observedGeneration`).
// book: ch08_hatch
pub async fn hatch_reconcile(
    api: Api<Widget>,
    actions: Arc<Actions>,
    counts: Arc<HatchCounts>,
    request: Request,
    ctx: Context<Widget>,
) -> Result<ReconcileResult, ReconcileError> {
    let Some(widget) = ctx.get(&request) else {
        return Ok(ReconcileResult::done()); // gone: nothing to do
    };
    let now = enabled(&widget); // the level now
    let generation = widget.metadata.generation;
    let status = widget.status.clone().unwrap_or_default();
    if recorded(&widget) == Some(now) && status.observed_generation == generation {
        return Ok(ReconcileResult::done()); // our own status write comes back here
    }
    tokio::time::sleep(WORK).await; // the reconcile's own work, before it acts and records
    if now && recorded(&widget) != Some(true) {
        actions.act(); // a switch-on the record has not seen: the launch notice
    }
    let patch = serde_json::json!({ "status": {
        "message": format!("acted on enabled={now}"),
        "observedGeneration": generation,
    }});
    let written = api
        .patch_status(
            &request.name,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(ReconcileError::retry)?;
    counts.wrote(&written);
    Ok(ReconcileResult::done())
}
// book: end ch08_hatch

/// How a design's controller is built on a process's informer.
pub type Start =
    fn(&Informer<Widget>, &Api<Widget>, Arc<Actions>, Arc<HatchCounts>) -> Controller<Widget>;

/// [`Design::StatusHatch`]: the controller whose reconciler is [`hatch_reconcile`].
// book: ch08_start_hatch
pub fn start_hatch(
    informer: &Informer<Widget>,
    api: &Api<Widget>,
    actions: Arc<Actions>,
    counts: Arc<HatchCounts>,
) -> Controller<Widget> {
    counts.listen(informer); // counts the update events our own status writes cause
    let api = api.clone();
    Controller::builder("status-hatch") // no predicate: our own status events come back too
        .build(informer, move |request, ctx| {
            hatch_reconcile(api.clone(), actions.clone(), counts.clone(), request, ctx)
        })
        .expect("a named controller on a fresh informer builds")
}
// book: end ch08_start_hatch

/// [`Design::MemoryLastSeen`]: the last level seen, per key, in process memory.
// book: ch08_memory
pub fn start_memory(
    informer: &Informer<Widget>,
    _: &Api<Widget>,
    actions: Arc<Actions>,
    _: Arc<HatchCounts>,
) -> Controller<Widget> {
    let last_seen: Arc<Mutex<HashMap<Request, bool>>> = Arc::default();
    Controller::builder("memory-last-seen")
        .build(informer, move |request: Request, ctx: Context<Widget>| {
            let (actions, last_seen) = (actions.clone(), last_seen.clone());
            async move {
                if let Some(widget) = ctx.get(&request) {
                    let now = enabled(&widget);
                    // A key never seen counts as switched off.
                    let before = last_seen.lock().insert(request, now).unwrap_or(false);
                    if now && !before {
                        actions.act();
                    }
                }
                Ok(ReconcileResult::done())
            }
        })
        .expect("a named controller on a fresh informer builds")
}
// book: end ch08_memory

/// Lets through only updates that switch the widget on (the [`Design::EventOldNew`] filter).
pub struct SwitchedOn;

// book: ch08_event
impl Predicate<Widget> for SwitchedOn {
    fn create(&self, _: &Widget, _: bool) -> bool {
        false // a create has no "before", so it is no flip
    }
    fn update(&self, old: Option<&Widget>, new: Option<&Widget>) -> bool {
        matches!((old, new), (Some(o), Some(n)) if !enabled(o) && enabled(n))
    }
    fn delete(&self, _: &Widget, _: bool) -> bool {
        false
    }
}

/// [`Design::EventOldNew`]: the predicate passes only off-to-on updates; the reconciler acts
/// on every request it gets.
pub fn start_event(
    informer: &Informer<Widget>,
    _: &Api<Widget>,
    actions: Arc<Actions>,
    _: Arc<HatchCounts>,
) -> Controller<Widget> {
    Controller::builder("event-old-new")
        .with_predicate(SwitchedOn)
        .build(informer, move |_: Request, _: Context<Widget>| {
            let actions = actions.clone();
            async move {
                actions.act(); // only switch-on events get here
                Ok(ReconcileResult::done())
            }
        })
        .expect("a named controller on a fresh informer builds")
}
// book: end ch08_event

impl Design {
    /// How this design's controller is built.
    pub fn start(self) -> Start {
        match self {
            Design::StatusHatch => start_hatch,
            Design::MemoryLastSeen => start_memory,
            Design::EventOldNew => start_event,
        }
    }
}

/// A design's controller as a [`Process`] runs it: how it is built, and the world's log and the
/// hatch's counters, which survive every restart (keeps I2).
pub struct Wired {
    /// Builds the design's controller.
    pub start: Start,
    /// The world's log of actions.
    pub actions: Arc<Actions>,
    /// The hatch's status writes, and their events heard.
    pub counts: Arc<HatchCounts>,
}

// book: ch08_process
impl Subject for Wired {
    type Started = Controller<Widget>;

    fn start(
        &self,
        informer: &Arc<Informer<Widget>>,
        api: &Api<Widget>,
        tasks: &mut Vec<JoinHandle<()>>,
    ) -> Controller<Widget> {
        let (actions, counts) = (self.actions.clone(), self.counts.clone());
        let controller = (self.start)(informer, api, actions, counts); // the design's controller
        let c = controller.clone();
        tasks.push(tokio::spawn(async move {
            let _ = c.run(futures::future::pending()).await;
        }));
        controller
    }

    fn kill(controller: &Controller<Widget>) {
        controller.abort(); // queue and workers gone; in-memory state with them
    }

    fn shutdown(controller: &Controller<Widget>) {
        controller.shutdown();
    }
}

impl Process<Wired> {
    fn reconciles(&self) -> u64 {
        self.started().metrics().reconciles()
    }
}
// book: end ch08_process

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
    /// Status writes (the hatch only).
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

/// Sets the widget's [`ENABLED`] annotation with a merge patch.
pub async fn set_annotation(api: &Api<Widget>, on: bool) {
    let patch = serde_json::json!({ "metadata": { "annotations": { ENABLED: on.to_string() } } });
    api.patch(OBJECT, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patching the annotation");
}

/// Runs `design` (built by `start`) through the [`timeline`]; chapter 08 shows this body.
async fn run_async(design: Design, start: Start) -> Run {
    // book: ch08_timeline
    let cluster = Cluster::new(ServerOptions::default());
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
    let counts = Arc::new(HatchCounts::default()); // status writes, and their events heard
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
    /// The status hatch's actions.
    pub status_hatch: u64,
    /// The in-memory design's actions.
    pub memory_last_seen: u64,
    /// The event design's actions.
    pub event_old_new: u64,
}

/// Lines the three designs' actions up step by step (runs in [`Design`] order: hatch,
/// memory, event).
pub fn rows(runs: &[Run; 3]) -> Vec<Row> {
    timeline()
        .iter()
        .enumerate()
        .map(|(i, s)| Row {
            step: s.what,
            expected: s.expected,
            status_hatch: runs[0].actions_per_step[i],
            memory_last_seen: runs[1].actions_per_step[i],
            event_old_new: runs[2].actions_per_step[i],
        })
        .collect()
}

/// Runs all three designs and lines their actions up step by step.
pub fn table() -> (Vec<Row>, [Run; 3]) {
    let runs = [
        run(Design::StatusHatch),
        run(Design::MemoryLastSeen),
        run(Design::EventOldNew),
    ];
    (rows(&runs), runs)
}

/// Checks chapter 08's claims: the hatch is right at every step, each broken design is wrong
/// at some step, and the hatch's own status writes came back as events without an action.
pub fn check(runs: &[Run; 3]) {
    let [hatch, memory, event] = runs;
    assert!(
        hatch.correct,
        "the status hatch missed or repeated an action"
    );
    assert!(!memory.correct, "in-memory last-seen survived a restart?");
    assert!(
        !event.correct,
        "old-vs-new survived a dropped event and a restart?"
    );
    assert!(hatch.status_writes > 0);
    assert_eq!(
        hatch.own_status_events, hatch.status_writes,
        "every status write of ours came back as an event"
    );
}

/// Runs the table and the generation experiments, checks them and records the chapter's
/// snapshots.
pub fn experiment() {
    let (rows, runs) = table();
    check(&runs);
    crate::kit::snap::yaml("ch08_flips", &rows, vec![]);
    crate::kit::snap::yaml("ch08_hatch_run", &runs[0], vec![]);
    let rules = generation::rules();
    generation::check_rules(&rules);
    crate::kit::snap::text("ch08_generation_rules", generation::rules_table(&rules));
    let loops = generation::loops();
    generation::check_loops(&loops);
    crate::kit::snap::text("ch08_without_status", generation::loops_text(&loops));
}
