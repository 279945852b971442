//! Helpers shared by the controller's tests (`tests/controller.rs`, `tests/faults_controller.rs`
//! and the controller-runtime ports), on top of the crate's own fixture
//! (`controlloop::testing`): a controller over an informer fed by a scripted list-watch
//! source, under tokio's paused clock. The source lists the given ConfigMaps once, then plays
//! one scripted watch, so each test says exactly which events reach the controller and when.
#![allow(dead_code)] // each test file that includes it uses a part of it

use std::{future::Future, sync::Arc, time::Duration};

use controlloop::{
    cache::{
        HandlerPanic, InformerOptions, ListPage, Scripted, ScriptedListerWatcher, ScriptedWatch,
        SharedIndexInformer,
    },
    controller::{Controller, ControllerError, Event, Request, predicate::Predicate},
    klog,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;
use parking_lot::Mutex;
use tokio::task::JoinHandle;

/// The scripted source.
pub type Lw = ScriptedListerWatcher<ConfigMap>;
/// The informer every test uses.
pub type Informer = SharedIndexInformer<ConfigMap, Lw>;

/// Virtual time, so a long bound costs nothing; it only turns a hang into a named failure.
pub const HANG: Duration = Duration::from_secs(3600);

/// A current-thread runtime whose clock is paused: every wait is virtual and exact.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
}

/// Runs `fut` on a [`runtime`] under [`klog::capture`], returning its output and the
/// info-or-higher lines logged meanwhile. Every test of a file that logs should run under it:
/// tracing caches a callsite's interest when the callsite is first hit, and a parallel test
/// hitting it with no subscriber of its own can cache "never" for every thread.
pub fn block_on_capturing<T>(fut: impl Future<Output = T>) -> (T, Vec<String>) {
    klog::capture(|| runtime().block_on(fut))
}

/// ConfigMap `default/name` at resourceVersion `rv`.
pub fn cm(name: &str, rv: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            resource_version: Some(rv.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The request for `default/name`.
pub fn req(name: &str) -> Request {
    Request::new("default", name)
}

/// An informer that lists `names` (at resourceVersion 1), then watches: `watch` plays, and the
/// watch stays open. No resync.
pub fn informer(
    names: &[&str],
    watch: Vec<Scripted<ConfigMap>>,
    policy: HandlerPanic,
) -> Arc<Informer> {
    let options = InformerOptions {
        handler_panic: policy,
        ..InformerOptions::new(Duration::ZERO)
    };
    informer_with(names, watch, options)
}

/// [`informer`] with its options given: a resync period, a panic policy.
pub fn informer_with(
    names: &[&str],
    watch: Vec<Scripted<ConfigMap>>,
    options: InformerOptions,
) -> Arc<Informer> {
    let lw = Lw::new().without_watch_list();
    lw.push_list(Ok(ListPage::new(
        "1",
        names.iter().map(|n| cm(n, "1")).collect(),
    )));
    let mut steps = watch;
    steps.push(Scripted::Hang);
    lw.push_watch(ScriptedWatch::Stream(steps));
    Arc::new(SharedIndexInformer::new(lw, options))
}

/// Runs `c` in a task.
pub fn spawn_run(c: &Controller<ConfigMap>) -> JoinHandle<Result<(), ControllerError>> {
    let c = c.clone();
    tokio::spawn(async move { c.run(futures::future::pending()).await })
}

/// Awaits `fut` for at most [`HANG`] of virtual time; a timeout fails with `hang`, the
/// suspected deadlock.
pub async fn within<T>(hang: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(HANG, fut)
        .await
        .unwrap_or_else(|_| panic!("{hang}"))
}

/// Waits (virtual 1 ms steps, at most [`HANG`]) until `cond` holds.
pub async fn until(hang: &str, mut cond: impl FnMut() -> bool) {
    within(hang, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
}

/// A predicate that panics on the events `when` picks, with "predicate panicked on NAME".
pub struct PanicOn<F>(pub F);

impl<F: Fn(&Event<ConfigMap>) -> bool + Send + Sync> Predicate<ConfigMap> for PanicOn<F> {
    fn matches(&self, event: &Event<ConfigMap>) -> bool {
        if (self.0)(event) {
            let name = match event {
                Event::Create { object, .. }
                | Event::Delete { object, .. }
                | Event::Generic { object } => object.metadata.name.clone(),
                Event::Update { new, .. } => new.as_ref().and_then(|o| o.metadata.name.clone()),
            };
            panic!("predicate panicked on {}", name.unwrap_or_default());
        }
        true
    }
}

/// Whether `event` is the initial-list create of `name`.
pub fn initial_create_of(name: &'static str) -> impl Fn(&Event<ConfigMap>) -> bool {
    move |e| {
        matches!(e, Event::Create { object, is_in_initial_list: true }
            if object.metadata.name.as_deref() == Some(name))
    }
}

/// A log of what reconcilers did, shared with them.
pub type Log<T> = Arc<Mutex<Vec<T>>>;
