//! Chapter 16's relist gap: a widget deleted while no watch is open, so no watch ever carries
//! the delete, against three controllers that each own an external resource per widget.
//!
//! ```text
//!  1 s: every watch answered 410 ─► each reflector backs off, then lists again
//!  1.01 s: the widget deleted        (no watch open: the delete is never an event)
//!  the new list lacks it ─► Replace ─► a Delete delta with a DeletedFinalStateUnknown tombstone
//!  (with a finalizer the delete only marked it: the list brings it back, marked, as an update)
//! ```
//!
//! Each design runs alone on a fresh embedded server, in-process, under tokio's paused clock.
//!
//! # Invariants
//! 1. The two designs without a finalizer share one reconcile ([`reconcile_level`]): a widget
//!    in the cache has its external resource, a widget gone has none; only their delete
//!    handlers differ. [`Gap::Finalizer`] runs chapter 16's finalizer reconcile.
//! 2. Every handler call is counted by the same listener ([`Heard`]) before any design sees it.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use kube::{
    ResourceExt,
    api::{Api, DeleteParams, PostParams},
};
use serde::Serialize;
use tokio::task::JoinHandle;

use super::{Crash, OBJECT, World, fresh, reconcile};
use crate::lab::rig::Widget;
use crate::lab::rig::{Informer, Process, Subject};
use controlloop::{
    cache::{DeletedObject, ResourceEventHandler},
    controller::{Context, Controller, ReconcileError, ReconcileResult, Request},
    workqueue::{RateLimitingQueue, default_controller_rate_limiter},
};

/// The three controllers of the relist gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Gap {
    /// controller-runtime's default handler (`EnqueueRequestForObject`): a tombstone's key
    /// becomes a request like any delete's; no finalizer.
    Controller,
    /// A client-go handler that queues only a delete carrying the object, so a tombstone
    /// reaches it and is dropped (the type check of a delete handler with no tombstone
    /// branch); no finalizer. A deliberately broken variant.
    DropsTombstones,
    /// chapter 16's finalizer reconcile on controller-runtime's default handler: the delete only
    /// marks the widget.
    Finalizer,
}

/// What one design did across the gap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GapRun {
    /// The design.
    pub design: Gap,
    /// What the informer handed its handlers after the 410: deletes from a watch event,
    /// tombstones, updates.
    pub heard: HeardCounts,
    /// Lists of widgets after the first.
    pub relists: usize,
    /// Cleanups of the external resource.
    pub cleanups: u64,
    /// Whether the external resource is still there 60 s after the delete.
    pub resource_left: bool,
    /// Whether the widget is still stored on the server then.
    pub widget_left: bool,
}

/// Handler calls, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct HeardCounts {
    /// `on_update`.
    pub updates: u64,
    /// `on_delete` with the object from a watch event.
    pub deletes: u64,
    /// `on_delete` with a `DeletedFinalStateUnknown` tombstone.
    pub tombstones: u64,
}

/// A listener on the informer: counts every handler call (keeps I2).
#[derive(Default)]
pub struct Heard {
    updates: AtomicU64,
    deletes: AtomicU64,
    tombstones: AtomicU64,
}

impl Heard {
    /// The calls counted so far.
    pub fn counts(&self) -> HeardCounts {
        HeardCounts {
            updates: self.updates.load(Ordering::SeqCst),
            deletes: self.deletes.load(Ordering::SeqCst),
            tombstones: self.tombstones.load(Ordering::SeqCst),
        }
    }
}

/// Registers a counting view of `heard` on `informer`.
fn listen(informer: &Informer<Widget>, heard: &Arc<Heard>) {
    struct Listener(Arc<Heard>);
    impl ResourceEventHandler<Widget> for Listener {
        fn on_add(&self, _: Arc<Widget>, _: bool) {}
        fn on_update(&self, _: Arc<Widget>, _: Arc<Widget>) {
            self.0.updates.fetch_add(1, Ordering::SeqCst);
        }
        fn on_delete(&self, deleted: DeletedObject<Widget>) {
            let count = match deleted.is_tombstone() {
                true => &self.0.tombstones,
                false => &self.0.deletes,
            };
            count.fetch_add(1, Ordering::SeqCst);
        }
    }
    informer
        .add_event_handler(Listener(heard.clone()))
        .expect("a fresh informer accepts handlers");
}

/// The request for `w`.
fn key(w: &Widget) -> Request {
    Request::new(w.namespace().unwrap_or_default(), w.name_any())
}

// book: ch16_level_cleanup
/// The level reconcile of the two designs without a finalizer: a widget in the cache has
/// its external resource; a widget the cache no longer holds has none, so clean it up.
pub fn reconcile_level(world: &World, cached: Option<Arc<Widget>>) {
    match cached {
        Some(_) => world.exists.store(true, Ordering::SeqCst),
        None if world.exists.swap(false, Ordering::SeqCst) => {
            world.calls.fetch_add(1, Ordering::SeqCst); // the cleanup
        }
        None => {} // nothing to clean up
    }
}
// book: end ch16_level_cleanup

// book: ch16_drops_tombstones
/// The broken client-go handler: it queues the key of every add and update, and of a delete
/// only when the delete carries the object. A tombstone is not one, so it is dropped.
struct KeysOfObjects(RateLimitingQueue<Request>);

impl ResourceEventHandler<Widget> for KeysOfObjects {
    fn on_add(&self, w: Arc<Widget>, _: bool) {
        self.0.add(key(&w));
    }
    fn on_update(&self, _: Arc<Widget>, w: Arc<Widget>) {
        self.0.add(key(&w));
    }
    fn on_delete(&self, deleted: DeletedObject<Widget>) {
        if let DeletedObject::Object(w) = deleted {
            self.0.add(key(&w));
        } // a DeletedObject::Tombstone falls through: the delete is lost
    }
}
// book: end ch16_drops_tombstones

impl Gap {
    /// Every design, in the chapter's order.
    pub const ALL: [Gap; 3] = [Gap::Controller, Gap::DropsTombstones, Gap::Finalizer];

    /// Its row title.
    pub fn title(self) -> &'static str {
        match self {
            Gap::Controller => "controller-runtime's handler, no finalizer",
            Gap::DropsTombstones => "a handler that drops tombstones, no finalizer",
            Gap::Finalizer => "controller-runtime's handler, a finalizer",
        }
    }
}

/// A design as a [`Process`] runs it, with its world and its listener.
pub struct GapSubject {
    design: Gap,
    world: Arc<World>,
    heard: Arc<Heard>,
}

impl GapSubject {
    /// `design`, driving `world`, its handler calls counted in `heard`.
    pub fn new(design: Gap, world: &Arc<World>, heard: &Arc<Heard>) -> Self {
        GapSubject {
            design,
            world: world.clone(),
            heard: heard.clone(),
        }
    }
}

/// What a started design keeps: its controller, or its queue.
pub enum GapStarted {
    /// A controller-runtime controller.
    Controller(Controller<Widget>),
    /// The client-go design's queue.
    Queue(RateLimitingQueue<Request>),
}

impl Subject for GapSubject {
    type Started = GapStarted;

    fn start(
        &self,
        informer: &Arc<Informer<Widget>>,
        api: &Api<Widget>,
        tasks: &mut Vec<JoinHandle<()>>,
    ) -> GapStarted {
        listen(informer, &self.heard);
        let world = self.world.clone();
        let controller = match self.design {
            Gap::DropsTombstones => {
                let queue = RateLimitingQueue::new(default_controller_rate_limiter());
                informer
                    .add_event_handler(KeysOfObjects(queue.clone()))
                    .expect("a fresh informer accepts handlers");
                let (q, inf) = (queue.clone(), informer.clone());
                tasks.push(tokio::spawn(async move {
                    while let Some(claim) = q.claim().await {
                        let cached = inf.indexer().get_by_key(&claim.item().key());
                        reconcile_level(&world, cached);
                        claim.forget();
                    }
                }));
                return GapStarted::Queue(queue);
            }
            Gap::Controller => Controller::builder("gap").build(
                informer,
                move |request: Request, ctx: Context<Widget>| {
                    reconcile_level(&world, ctx.get(&request));
                    async { Ok::<_, ReconcileError>(ReconcileResult::done()) }
                },
            ),
            Gap::Finalizer => {
                let (api, crash) = (api.clone(), Arc::new(Crash::default()));
                Controller::builder("gap").build(informer, move |request, ctx| {
                    reconcile(
                        api.clone(),
                        world.clone(),
                        crash.clone(),
                        true,
                        request,
                        ctx,
                    )
                })
            }
        };
        let controller = controller.expect("a named controller on a fresh informer builds");
        let c = controller.clone();
        tasks.push(tokio::spawn(async move {
            let _ = c.run(futures::future::pending()).await;
        }));
        GapStarted::Controller(controller)
    }

    fn kill(started: &GapStarted) {
        match started {
            GapStarted::Controller(c) => c.abort(),
            GapStarted::Queue(q) => q.shut_down(),
        }
    }

    fn shutdown(started: &GapStarted) {
        match started {
            GapStarted::Controller(c) => c.shutdown(),
            GapStarted::Queue(q) => q.shut_down(),
        }
    }
}

/// Whether a request was a list of widgets: a plain LIST, or a streaming list.
fn is_list(r: &controlloop::apiserver::RequestRecord) -> bool {
    r.method == "GET"
        && r.path.ends_with("/widgets")
        && (!r.is_watch() || r.query.contains("sendInitialEvents=true"))
}

/// Runs `design` across the gap on a fresh embedded server: the widget created and reconciled
/// (its external resource made), every watch answered 410 at 1 s, the widget deleted 10 ms
/// later while no watch is open, then 60 s.
pub async fn across_the_gap(design: Gap) -> GapRun {
    let (cluster, api, w) = fresh().await;
    let (world, heard) = (Arc::new(World::default()), Arc::new(Heard::default()));
    let subject = GapSubject::new(design, &world, &heard);
    // book: ch16_gap
    let process = Process::start(&subject, &api);
    api.create(&PostParams::default(), &w)
        .await
        .expect("a new widget");
    tokio::time::sleep(Duration::from_secs(1)).await; // reconciled: its resource exists
    assert!(
        world.exists.load(Ordering::SeqCst),
        "{design:?}: no resource made"
    );
    let before = heard.counts();
    cluster.expire_watches(); // 410 on every open watch: the informer relists
    tokio::time::sleep(Duration::from_millis(10)).await;
    let deleted = api.delete(OBJECT, &DeleteParams::default()).await;
    deleted.expect("the delete"); // no watch is open to carry it
    tokio::time::sleep(Duration::from_secs(60)).await;
    // book: end ch16_gap
    let after = heard.counts();
    let lists = cluster.requests().iter().filter(|r| is_list(r)).count();
    let widget_left = api.get_opt(OBJECT).await.expect("reading the widget");
    process.kill();
    GapRun {
        design,
        heard: HeardCounts {
            updates: after.updates - before.updates,
            deletes: after.deletes - before.deletes,
            tombstones: after.tombstones - before.tombstones,
        },
        relists: lists.saturating_sub(1),
        cleanups: world.calls.load(Ordering::SeqCst),
        resource_left: world.exists.load(Ordering::SeqCst),
        widget_left: widget_left.is_some(),
    }
}

/// The three runs as the chapter's table.
pub fn gap_table(runs: &[GapRun]) -> String {
    let mut out = String::from(
        "| controller | after the 410: updates · deletes · tombstones heard | relists | cleanups | external resource left | widget left |\n|---|---|---|---|---|---|\n",
    );
    for r in runs {
        let yes = |b: bool| if b { "yes" } else { "no" };
        out += &format!(
            "| {} | {} · {} · {} | {} | {} | {} | {} |\n",
            r.design.title(),
            r.heard.updates,
            r.heard.deletes,
            r.heard.tombstones,
            r.relists,
            r.cleanups,
            yes(r.resource_left),
            yes(r.widget_left),
        );
    }
    out
}

/// Each design across the gap: the two faithful ones checked ([`check_gap`]); the check
/// shown failing on the one that drops tombstones; the table recorded.
pub fn ch16_relist_gap() {
    let runs = Gap::ALL.map(|d| crate::lab::rig::paused(across_the_gap(d)));
    check_gap(&runs[0]);
    check_gap(&runs[2]);
    let broken = crate::lab::rig::catch_quietly(|| check_gap(&runs[1]));
    let message = broken.expect_err("the check fires on the design that drops tombstones");
    assert!(message.contains("left behind"), "{message}");
    crate::kit::snap::text("ch16_relist_gap", gap_table(&runs));
}

/// What surviving the gap means for `run`: no watch carried the delete in the gap, the
/// informer listed once more, the widget is gone from the server, the external resource was
/// cleaned up exactly once and is not left behind. Without a finalizer the delete arrives as
/// the relist's tombstone; with one, the delete in the gap only marked the widget, the relist
/// brought it back marked, and the one delete a watch carries is the server's, after the
/// finalizer went. Panics naming the design and what broke.
pub fn check_gap(run: &GapRun) {
    let (d, heard) = (run.design.title(), run.heard);
    assert_eq!(run.relists, 1, "{d}: one relist after the 410");
    assert!(!run.widget_left, "{d}: the widget is still stored");
    match run.design {
        Gap::Controller | Gap::DropsTombstones => {
            assert_eq!(heard.deletes, 0, "{d}: a watch carried the delete");
            assert_eq!(heard.tombstones, 1, "{d}: no tombstone from the relist");
        }
        Gap::Finalizer => {
            assert_eq!(heard.tombstones, 0, "{d}: the delete did more than mark it");
            assert!(
                heard.updates >= 1,
                "{d}: the relist did not bring it back marked"
            );
            assert_eq!(
                heard.deletes, 1,
                "{d}: the server's delete after the finalizer"
            );
        }
    }
    assert!(
        !run.resource_left,
        "{d}: the external resource is left behind"
    );
    assert_eq!(run.cleanups, 1, "{d}: cleanups");
}
