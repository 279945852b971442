//! Chapter 08's three designs of a controller that must act once each time a widget is switched
//! on, which chapters 15 and 17 run too: the status record ([`start_record`]), the last level in
//! memory ([`start_memory`]) and the event's old and new objects ([`start_event`]), each as a
//! [`Process`] runs it ([`Wired`]). Chapter 08's experiment ([`crate::lab::status_record`]) runs
//! them through its timeline.
//!
//! # Differences from upstream
//! The book's `Widget` has no status field for this record, so the status record keeps it in
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

use kube::api::{Api, Patch, PatchParams};
use parking_lot::Mutex;
use serde::Serialize;
use tokio::task::JoinHandle;

use crate::lab::rig::Widget;
use crate::lab::rig::{Informer, Process, Subject};
use controlloop::{
    cache::HandlerFuncs,
    controller::{
        Context, Controller, ReconcileError, ReconcileResult, Request, predicate::Predicate,
    },
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

/// The level the status record last acted on, as recorded in `status.message`; `None` if never.
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
    StatusRecord,
    /// **Broken**: remember the last level seen in memory (false until seen).
    MemoryLastSeen,
    /// **Broken**: act on an update event whose old object is off and new object is on.
    EventOldNew,
}

/// Counters of one controller process, for the idempotency claim.
#[derive(Default)]
pub struct RecordCounts {
    status_writes: AtomicU64,
    /// Resource versions our own status writes produced.
    own_rvs: Mutex<Vec<String>>,
    /// Update events whose new object is one of our own status writes.
    own_status_events: AtomicU64,
}

impl RecordCounts {
    /// Records one status write of ours, by the resourceVersion it produced.
    pub fn wrote(&self, written: &Widget) {
        self.status_writes.fetch_add(1, Ordering::SeqCst);
        if let Some(rv) = &written.metadata.resource_version {
            self.own_rvs.lock().push(rv.clone());
        }
    }

    /// Status writes recorded by [`RecordCounts::wrote`].
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

/// How long a status record reconcile works before it acts and records: it leaves a window in which
/// the server holds a change the controller has not yet observed.
pub const WORK: Duration = Duration::from_millis(100);

/// The status record's reconcile: compare the level now with the level recorded, act on a switch-on,
/// record what was acted on (and the generation seen, as `observedGeneration`).
// book: ch08_record
pub async fn record_reconcile(
    api: Api<Widget>,
    actions: Arc<Actions>,
    counts: Arc<RecordCounts>,
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
// book: end ch08_record

/// How a design's controller is built on a process's informer.
pub type Start =
    fn(&Informer<Widget>, &Api<Widget>, Arc<Actions>, Arc<RecordCounts>) -> Controller<Widget>;

/// [`Design::StatusRecord`]: the controller whose reconciler is [`record_reconcile`].
// book: ch08_start_record
pub fn start_record(
    informer: &Informer<Widget>,
    api: &Api<Widget>,
    actions: Arc<Actions>,
    counts: Arc<RecordCounts>,
) -> Controller<Widget> {
    counts.listen(informer); // counts the update events our own status writes cause
    let api = api.clone();
    Controller::builder("status-record") // no predicate: our own status events come back too
        .build(informer, move |request, ctx| {
            record_reconcile(api.clone(), actions.clone(), counts.clone(), request, ctx)
        })
        .expect("a named controller on a fresh informer builds")
}
// book: end ch08_start_record

/// [`Design::MemoryLastSeen`]: the last level seen, per key, in process memory.
// book: ch08_memory
pub fn start_memory(
    informer: &Informer<Widget>,
    _: &Api<Widget>,
    actions: Arc<Actions>,
    _: Arc<RecordCounts>,
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
    _: Arc<RecordCounts>,
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
            Design::StatusRecord => start_record,
            Design::MemoryLastSeen => start_memory,
            Design::EventOldNew => start_event,
        }
    }
}

/// A design's controller as a [`Process`] runs it: how it is built, and the world's log and the
/// status record's counters, which survive every restart (keeps I2).
pub struct Wired {
    /// Builds the design's controller.
    pub start: Start,
    /// The world's log of actions.
    pub actions: Arc<Actions>,
    /// The status record's status writes, and their events heard.
    pub counts: Arc<RecordCounts>,
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
    /// How many reconciles this process's controller has run.
    pub fn reconciles(&self) -> u64 {
        self.started().metrics().reconciles()
    }
}
// book: end ch08_process

/// Sets the widget's [`ENABLED`] annotation with a merge patch.
pub async fn set_annotation(api: &Api<Widget>, on: bool) {
    let patch = serde_json::json!({ "metadata": { "annotations": { ENABLED: on.to_string() } } });
    api.patch(OBJECT, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patching the annotation");
}
