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

use crate::{
    apiserver::{Cluster, ServerOptions},
    cache::shared_informer::{HandlerFuncs, InformerOptions, SharedIndexInformer},
    controller::{
        Context, Controller, Error, Request, Result as ReconcileResult, predicate::Predicate,
    },
    resources::{Widget, WidgetSpec},
};

/// The namespace of the experiment's widget.
pub const NAMESPACE: &str = "default";
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
    fn act(&self) {
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

/// Lets through only updates that switch the widget on (the [`Design::EventOldNew`] filter).
struct SwitchedOn;

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

/// Counters of one hatch process, for the idempotency claim.
#[derive(Default)]
struct HatchCounts {
    status_writes: AtomicU64,
    /// Resource versions our own status writes produced.
    own_rvs: Mutex<Vec<String>>,
    /// Update events whose new object is one of our own status writes.
    own_status_events: AtomicU64,
}

/// The hatch's reconcile: compare the level now with the level recorded, act on a switch-on,
/// record what was acted on (and the generation seen, as `observedGeneration`).
async fn hatch_reconcile(
    api: Api<Widget>,
    actions: Arc<Actions>,
    counts: Arc<HatchCounts>,
    req: Request,
    ctx: Context<Widget>,
) -> Result<ReconcileResult, Error> {
    let Some(w) = ctx.get(&req) else {
        return Ok(ReconcileResult::done());
    };
    let now = enabled(&w);
    let generation = w.metadata.generation;
    let status = w.status.clone().unwrap_or_default();
    let up_to_date = recorded(&w) == Some(now) && status.observed_generation == generation;
    if up_to_date {
        return Ok(ReconcileResult::done()); // our own status write comes back here
    }
    tokio::time::sleep(WORK).await; // the reconcile's own work, before it acts and records
    if now && recorded(&w) != Some(true) {
        actions.act();
    }
    let patch = serde_json::json!({ "status": {
        "message": format!("acted on enabled={now}"),
        "observedGeneration": generation,
    }});
    let written = api
        .patch_status(&req.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(Error::retry)?;
    counts.status_writes.fetch_add(1, Ordering::SeqCst);
    if let Some(rv) = written.metadata.resource_version {
        counts.own_rvs.lock().push(rv);
    }
    Ok(ReconcileResult::done())
}

/// One controller process.
struct Process {
    tasks: Vec<JoinHandle<()>>,
    controller: Controller<Widget>,
}

impl Process {
    fn start(
        design: Design,
        client: &kube::Client,
        actions: Arc<Actions>,
        counts: Arc<HatchCounts>,
    ) -> Process {
        let api: Api<Widget> = Api::namespaced(client.clone(), NAMESPACE);
        let informer = Arc::new(SharedIndexInformer::new(
            api.clone(),
            InformerOptions::new(Duration::ZERO),
        ));
        let builder = Controller::builder(format!("{design:?}"));
        let controller = match design {
            Design::StatusHatch => {
                let c = counts.clone();
                informer
                    .add_event_handler(HandlerFuncs::new().on_update(move |_, new: Arc<Widget>| {
                        let rv = new.metadata.resource_version.clone().unwrap_or_default();
                        if c.own_rvs.lock().contains(&rv) {
                            c.own_status_events.fetch_add(1, Ordering::SeqCst);
                        }
                    }))
                    .expect("a fresh informer accepts handlers");
                builder.build(&informer, move |req, ctx| {
                    hatch_reconcile(api.clone(), actions.clone(), counts.clone(), req, ctx)
                })
            }
            Design::MemoryLastSeen => {
                let last_seen: Arc<Mutex<HashMap<Request, bool>>> = Arc::default();
                builder.build(&informer, move |req: Request, ctx: Context<Widget>| {
                    let (actions, last_seen) = (actions.clone(), last_seen.clone());
                    async move {
                        if let Some(w) = ctx.get(&req) {
                            let now = enabled(&w);
                            let before = last_seen.lock().insert(req, now).unwrap_or(false);
                            if now && !before {
                                actions.act();
                            }
                        }
                        Ok(ReconcileResult::done())
                    }
                })
            }
            Design::EventOldNew => builder.with_predicate(SwitchedOn).build(
                &informer,
                move |_: Request, _: Context<Widget>| {
                    let actions = actions.clone();
                    async move {
                        actions.act(); // only switch-on events get here
                        Ok(ReconcileResult::done())
                    }
                },
            ),
        }
        .expect("a named controller on a fresh informer builds");
        let c = controller.clone();
        let inf = informer.clone();
        let tasks = vec![
            tokio::spawn(async move {
                let _ = c.run(futures::future::pending()).await;
            }),
            tokio::spawn(async move { inf.run(futures::future::pending()).await }),
        ];
        Process { tasks, controller }
    }

    fn reconciles(&self) -> u64 {
        self.controller.metrics().reconciles()
    }

    fn kill(self) {
        self.controller.abort();
        for t in &self.tasks {
            t.abort();
        }
    }
}

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
    crate::lab::rig::paused(run_async(design))
}

/// Long enough for any reconcile to finish, and its status event to come back.
const SETTLE: Duration = Duration::from_secs(1);
/// How long a hatch reconcile works before it acts and records: it leaves a window in which
/// the server holds a change the controller has not yet observed.
const WORK: Duration = Duration::from_millis(100);

async fn set_annotation(api: &Api<Widget>, on: bool) {
    let patch = serde_json::json!({ "metadata": { "annotations": { ENABLED: on.to_string() } } });
    api.patch(OBJECT, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patching the annotation");
}

async fn run_async(design: Design) -> Run {
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
    api.create(&PostParams::default(), &w)
        .await
        .expect("creating the widget");
    let actions = Arc::new(Actions::default());
    let counts = Arc::new(HatchCounts::default());
    let start = || Process::start(design, &client, actions.clone(), counts.clone());
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
                    cluster.drop_next_events(1);
                    set_annotation(&api, *on).await;
                }
                Op::SpecChange => {
                    let patch = serde_json::json!({ "spec": { "color": colors.next() } });
                    api.patch(OBJECT, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .expect("patching the spec");
                }
                Op::Restart => {
                    dead_reconciles += process.reconciles();
                    process.kill();
                    process = start();
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
    Run {
        design,
        actions_per_step: per_step,
        correct,
        reconciles,
        status_writes: counts.status_writes.load(Ordering::SeqCst),
        own_status_events: counts.own_status_events.load(Ordering::SeqCst),
    }
}

/// The widget as the server holds it at one moment of [`generations`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Moment {
    /// What just happened.
    pub after: &'static str,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `status.observedGeneration`.
    pub observed_generation: Option<i64>,
    /// The annotation's level.
    pub enabled: bool,
    /// The level the hatch recorded.
    pub recorded: Option<bool>,
}

/// The `observedGeneration` parallel: the hatch running, the widget read from the server right
/// after each write and again once the controller has caught up.
pub fn generations() -> Vec<Moment> {
    crate::lab::rig::paused(async {
        let cluster = Cluster::new(ServerOptions::default());
        let client = cluster.in_process_client();
        let api: Api<Widget> = Api::namespaced(client.clone(), NAMESPACE);
        let spec = WidgetSpec {
            replicas: 1,
            color: Some("red".into()),
        };
        api.create(&PostParams::default(), &Widget::new(OBJECT, spec))
            .await
            .expect("creating the widget");
        let moment = |after: &'static str| {
            let api = api.clone();
            async move {
                let w = api.get(OBJECT).await.expect("reading the widget");
                Moment {
                    after,
                    generation: w.metadata.generation,
                    observed_generation: w.status.as_ref().and_then(|s| s.observed_generation),
                    enabled: enabled(&w),
                    recorded: recorded(&w),
                }
            }
        };
        let mut out = vec![moment("create, before any controller runs").await];
        let process = Process::start(Design::StatusHatch, &client, Arc::default(), Arc::default());
        tokio::time::sleep(SETTLE).await;
        out.push(moment("the controller's first reconcile").await);
        let patch = serde_json::json!({ "spec": { "color": "green" } });
        api.patch(OBJECT, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patching the spec");
        out.push(moment("a spec change, before the reconcile").await);
        tokio::time::sleep(SETTLE).await;
        out.push(moment("the reconcile of the spec change").await);
        set_annotation(&api, true).await;
        out.push(moment("the annotation flip, before the reconcile").await);
        tokio::time::sleep(SETTLE).await;
        out.push(moment("the reconcile of the flip").await);
        process.kill();
        out
    })
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

/// Runs all three designs and lines their actions up step by step.
pub fn table() -> (Vec<Row>, [Run; 3]) {
    let runs = [
        run(Design::StatusHatch),
        run(Design::MemoryLastSeen),
        run(Design::EventOldNew),
    ];
    let rows = timeline()
        .iter()
        .enumerate()
        .map(|(i, s)| Row {
            step: s.what,
            expected: s.expected,
            status_hatch: runs[0].actions_per_step[i],
            memory_last_seen: runs[1].actions_per_step[i],
            event_old_new: runs[2].actions_per_step[i],
        })
        .collect();
    (rows, runs)
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

/// Runs the table, checks it and records the chapter's snapshot.
pub fn experiment() {
    let (rows, runs) = table();
    check(&runs);
    crate::book::snap::yaml("ch08_flips", &rows, vec![]);
    crate::book::snap::yaml("ch08_hatch_run", &runs[0], vec![]);
    let moments = generations();
    check_generations(&moments);
    crate::book::snap::yaml("ch08_generations", &moments, vec![]);
}

/// Checks the `observedGeneration` parallel: a spec change leaves `observedGeneration` behind
/// until the reconcile; the controller's own status write bumps nothing; an annotation flip
/// moves no generation at all, so only the hatch's own record shows it.
pub fn check_generations(m: &[Moment]) {
    let at = |i: usize| &m[i];
    assert_eq!(
        at(2).generation,
        at(1).generation.map(|g| g + 1),
        "spec change bumps"
    );
    assert_eq!(
        at(2).observed_generation,
        at(1).generation,
        "status lags the spec"
    );
    assert_eq!(
        at(3).observed_generation,
        at(3).generation,
        "the reconcile caught up"
    );
    assert_eq!(
        at(3).generation,
        at(2).generation,
        "a status write bumps no generation"
    );
    assert_eq!(
        at(4).generation,
        at(3).generation,
        "an annotation bumps no generation"
    );
    assert_eq!((at(4).enabled, at(4).recorded), (true, Some(false)));
    assert_eq!((at(5).enabled, at(5).recorded), (true, Some(true)));
}
