//! Chapter 16's experiments: a finalizer's whole path on the embedded server, a crash between
//! the cleanup and the finalizer's removal with an idempotent and a non-idempotent cleanup,
//! and a finalizer whose controller is gone.
//!
//! ```text
//!  delete ─► deletionTimestamp set (finalizer held) ─► update event ─► reconcile: cleanup
//!        ─► remove the finalizer ─► the server deletes the object ─► delete event
//! ```
//!
//! Everything runs under tokio's paused clock against the embedded server in-process.
//!
//! # Invariants
//! 1. The outside world ([`World`]) survives a crash: the external resource and the count of
//!    cleanup calls made on it.
//! 2. A crash ([`Crash`]) is armed before the delete; the first cleanup then stops its
//!    reconcile after the cleanup and before the finalizer's removal, and the process is
//!    killed there.

pub mod gap;
pub mod owners;

pub use gap::{Gap, GapRun, across_the_gap, ch16_relist_gap, check_gap, gap_table};

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde::Serialize;

use crate::lab::rig::Widget;
use crate::lab::rig::{Informer, Process, within};
use controlloop::{
    apiserver::Cluster,
    controller::{Context, Controller, ReconcileError, ReconcileResult, Request},
};

/// The widget.
pub const OBJECT: &str = "w";
/// The finalizer the controller holds on every widget.
pub const FINALIZER: &str = "lab.controlloop.dev/cleanup";

/// The outside world: one external resource per widget, and the cleanup calls made.
#[derive(Default)]
pub struct World {
    /// Whether the external resource exists.
    pub exists: AtomicBool,
    /// Cleanup calls made (a non-idempotent cleanup sends something each time).
    pub calls: AtomicU64,
    /// Cleanup calls that found the resource already gone.
    pub already_gone: AtomicU64,
}

/// Arms a crash after the first cleanup (I2).
#[derive(Default)]
pub struct Crash {
    /// Set to crash after the next cleanup; the cleanup clears it.
    pub armed: AtomicBool,
    /// Set once a reconcile stopped at the crash point.
    pub hit: AtomicBool,
}

/// Whether `w` still holds [`FINALIZER`].
pub fn holds_finalizer(w: &Widget) -> bool {
    w.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == FINALIZER))
}

/// The finalizer reconcile (controller-runtime's `controllerutil.AddFinalizer` /
/// `RemoveFinalizer` pattern): add the finalizer to a live widget; on a widget being deleted,
/// clean up, then remove the finalizer. `idempotent` chooses whether the cleanup first looks
/// at the world.
// book: ch16_reconcile
pub async fn reconcile(
    api: Api<Widget>,
    world: Arc<World>,
    crash: Arc<Crash>,
    idempotent: bool,
    request: Request,
    ctx: Context<Widget>,
) -> Result<ReconcileResult, ReconcileError> {
    let Some(widget) = ctx.get(&request) else {
        return Ok(ReconcileResult::done()); // gone: its finalizer already removed
    };
    let pp = PatchParams::default();
    if widget.metadata.deletion_timestamp.is_none() {
        if !holds_finalizer(&widget) {
            let add = serde_json::json!({ "metadata": { "finalizers": [FINALIZER] } });
            api.patch(&request.name, &pp, &Patch::Merge(&add))
                .await
                .map_err(ReconcileError::retry)?;
        }
        world.exists.store(true, Ordering::SeqCst); // the external resource, made once
        return Ok(ReconcileResult::done());
    }
    if !holds_finalizer(&widget) {
        return Ok(ReconcileResult::done()); // another finalizer holds it, not ours
    }
    // The cleanup.
    world.calls.fetch_add(1, Ordering::SeqCst);
    if idempotent && !world.exists.load(Ordering::SeqCst) {
        world.already_gone.fetch_add(1, Ordering::SeqCst); // done before: nothing to do
    }
    world.exists.store(false, Ordering::SeqCst);
    if crash.armed.swap(false, Ordering::SeqCst) {
        crash.hit.store(true, Ordering::SeqCst);
        std::future::pending::<()>().await; // the process dies here, finalizer still held
    }
    let remove = serde_json::json!({ "metadata": { "finalizers": null } });
    api.patch(&request.name, &pp, &Patch::Merge(&remove))
        .await
        .map_err(ReconcileError::retry)?;
    Ok(ReconcileResult::done())
}
// book: end ch16_reconcile

/// What one run did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Run {
    /// The cleanup looked at the world first.
    pub idempotent: bool,
    /// A crash after the first cleanup.
    pub crashed: bool,
    /// Cleanup calls made.
    pub cleanup_calls: u64,
    /// Calls that found the cleanup already done (an idempotent cleanup's second call).
    pub already_gone: u64,
}

/// Runs the finalizer path once: create, let the controller add its finalizer, delete, (crash
/// and restart,) and wait for the widget to go.
pub fn run(idempotent: bool, crash_after_cleanup: bool) -> Run {
    crate::lab::rig::paused(async move {
        let (_cluster, api, w) = fresh().await;
        let world = Arc::new(World::default());
        let crash = Arc::new(Crash::default());
        let start = start(api.clone(), world.clone(), crash.clone(), idempotent);
        let mut process = start();
        api.create(&PostParams::default(), &w)
            .await
            .expect("creating the widget");
        tokio::time::sleep(Duration::from_secs(1)).await;
        crash.armed.store(crash_after_cleanup, Ordering::SeqCst);
        api.delete(OBJECT, &DeleteParams::default())
            .await
            .expect("deleting the widget");
        tokio::time::sleep(Duration::from_secs(1)).await;
        if crash.hit.load(Ordering::SeqCst) {
            process.kill(); // between the cleanup and the removal
            process = start();
        }
        within(Duration::from_secs(60), "the widget never went", async {
            while api
                .get_opt(OBJECT)
                .await
                .expect("reading the widget")
                .is_some()
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
        process.kill();
        Run {
            idempotent,
            crashed: crash_after_cleanup,
            cleanup_calls: world.calls.load(Ordering::SeqCst),
            already_gone: world.already_gone.load(Ordering::SeqCst),
        }
    })
}

/// A fresh embedded server, its widgets' API, and a widget [`OBJECT`] to create on it.
pub async fn fresh() -> (Cluster, Api<Widget>, Widget) {
    crate::lab::rig::fresh_widget(OBJECT).await
}

/// A process factory: a [`Process`] whose controller runs [`reconcile`].
fn start(
    api: Api<Widget>,
    world: Arc<World>,
    crash: Arc<Crash>,
    idempotent: bool,
) -> impl Fn() -> Process<Finalizing> {
    move || {
        let subject = Finalizing {
            world: world.clone(),
            crash: crash.clone(),
            idempotent,
        };
        Process::start(&subject, &api)
    }
}

/// The finalizing controller as a [`Process`] runs it.
pub struct Finalizing {
    world: Arc<World>,
    crash: Arc<Crash>,
    idempotent: bool,
}

impl crate::lab::rig::Subject for Finalizing {
    type Started = Controller<Widget>;

    fn start(
        &self,
        informer: &Arc<Informer<Widget>>,
        api: &Api<Widget>,
        tasks: &mut Vec<tokio::task::JoinHandle<()>>,
    ) -> Controller<Widget> {
        let (api, world, crash, idem) = (
            api.clone(),
            self.world.clone(),
            self.crash.clone(),
            self.idempotent,
        );
        let controller = Controller::builder("finalizer")
            .build(informer, move |request, ctx| {
                reconcile(
                    api.clone(),
                    world.clone(),
                    crash.clone(),
                    idem,
                    request,
                    ctx,
                )
            })
            .expect("a named controller on a fresh informer builds");
        let c = controller.clone();
        tasks.push(tokio::spawn(async move {
            let _ = c.run(futures::future::pending()).await;
        }));
        controller
    }

    fn kill(controller: &Controller<Widget>) {
        controller.abort();
    }

    fn shutdown(controller: &Controller<Widget>) {
        controller.shutdown();
    }
}

/// A widget whose finalizer's controller is gone: deleted while no controller runs, it stays,
/// marked for deletion, for as long as anyone looks (here a virtual hour).
pub fn stuck() -> (bool, bool) {
    crate::lab::rig::paused(async {
        let (_cluster, api, mut w) = fresh().await;
        w.metadata.finalizers = Some(vec![FINALIZER.into()]);
        api.create(&PostParams::default(), &w)
            .await
            .expect("creating the widget");
        api.delete(OBJECT, &DeleteParams::default())
            .await
            .expect("deleting the widget");
        tokio::time::sleep(crate::lab::rig::HOUR).await;
        let left = api.get_opt(OBJECT).await.expect("reading the widget");
        let marked = left
            .as_ref()
            .is_some_and(|w| w.metadata.deletion_timestamp.is_some());
        (left.is_some(), marked)
    })
}

/// Chapter 16's runs, checked and recorded.
pub fn ch16_finalizers() {
    let runs = [
        run(true, false),
        run(false, false),
        run(true, true),
        run(false, true),
    ];
    assert_eq!(runs[0].cleanup_calls, 1, "no crash: one cleanup");
    assert_eq!(runs[1].cleanup_calls, 1, "no crash: one cleanup");
    assert_eq!(
        (runs[2].cleanup_calls, runs[2].already_gone),
        (2, 1),
        "idempotent: the second call finds it done"
    );
    assert_eq!(
        (runs[3].cleanup_calls, runs[3].already_gone),
        (2, 0),
        "not idempotent: it acts twice"
    );
    crate::kit::snap::yaml("ch16_finalizers", &runs, vec![]);
    let (left, marked) = stuck();
    assert!(
        left && marked,
        "a finalizer nobody removes holds the object"
    );
    crate::kit::snap::text(
        "ch16_stuck",
        format!(
            "after a virtual hour with no controller: still there: {left}, marked for deletion: {marked}\n"
        ),
    );
}
