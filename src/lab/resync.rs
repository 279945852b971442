//! Chapter 04's experiment: what a resync does, and what it does not.
//!
//! One Widget, one informer with a 10-hour resync period, the embedded API server in-process,
//! all under tokio's paused clock (45 virtual hours take milliseconds, and every timer fires at
//! its exact instant). Timeline, in virtual hours from the start:
//!
//! ```text
//!  0   Widget w exists, generation 7, color red; the informer lists it
//!  1   a genuine spec change: color green, generation 8
//!  10, 20, 30   the resync ticks
//!  21  silent_write: the server's w becomes color blue, with no watch event
//!  35  stop
//! ```
//!
//! A [`Controller`] watches through the informer: its events go through `GenerationChanged` and
//! `EnqueueRequestForObject` into its rate-limiting workqueue, and its reconciler reads the
//! object from the cache.
//! The remedy variant's reconciler also returns a per-object requeue-after of one hour: the
//! queue re-adds the request directly, bypassing the predicates, and that reconciler reads the
//! *live* object through the client, as controller-runtime's uncached `APIReader` does,
//! because the cache cannot contain what the watch never delivered.
//! The controller turns that result into `forget` + `add_after`, as controller-runtime v0.22
//! does.

use std::{sync::Arc, time::Duration};

use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use serde::Serialize;
use tokio::time::Instant;

use crate::apiserver::{Cluster, RequestRecord, ServerOptions};
use crate::cache::shared_informer::{HandlerFuncs, InformerOptions, SharedIndexInformer, Variant};
use crate::controller::{
    Context, Controller, Event, Request, Result as ReconcileResult,
    predicate::{GenerationChanged, Predicate},
};
use crate::resources::{Widget, WidgetSpec};

const HOUR: Duration = Duration::from_secs(3600);

/// What to run.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Setup {
    /// The informer: faithful or one of the broken variants.
    pub variant: Variant,
    /// Whether the reconciler returns a one-hour requeue-after and reads the live object.
    pub requeue_after: bool,
}

impl Setup {
    /// The faithful informer and an event-driven reconciler.
    pub fn faithful() -> Self {
        Self {
            variant: Variant::Faithful,
            requeue_after: false,
        }
    }
}

/// `on_update` calls, counted four ways.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct UpdateCounts {
    /// Every call.
    pub total: u32,
    /// Calls whose old and new objects differ in content.
    pub payload_changed: u32,
    /// Calls whose old and new objects are equal in content.
    pub old_equals_new: u32,
    /// Calls whose old and new are the same `Arc` (`Arc::ptr_eq`).
    pub same_pointer: u32,
    /// Calls `GenerationChanged` lets through.
    pub generation_changed_passes: u32,
}

/// One reconcile: when, what it read, and why it ran.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Reconcile {
    /// Virtual hours since the start.
    pub hour: f64,
    /// The color the reconciler read.
    pub color: String,
}

/// What a run saw.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The FIFO the 1.36 gates selected.
    pub fifo: String,
    /// `on_update` counts.
    pub updates: UpdateCounts,
    /// For each resync tick (10, 20, 30 h): requests the server logged within one second
    /// either side of it.
    pub requests_at_resync_ticks: Vec<usize>,
    /// LIST requests (plain or streaming) the server logged after the initial list.
    pub relists: usize,
    /// Every reconcile, in order.
    pub reconciles: Vec<Reconcile>,
    /// The color on the server at the end.
    pub server_color: String,
    /// The color in the informer's cache at the end.
    pub cached_color: String,
}

/// Content equality through the wire form (`Widget` has no `PartialEq`).
fn same_content(a: &Widget, b: &Widget) -> bool {
    serde_json::to_value(a).ok() == serde_json::to_value(b).ok()
}

fn color(w: &Widget) -> String {
    w.spec.color.clone().unwrap_or_default()
}

fn is_list(r: &RequestRecord) -> bool {
    r.method == "GET"
        && r.path.ends_with("/widgets")
        && (!r.is_watch() || r.query.contains("sendInitialEvents=true"))
}

/// Runs the timeline on a fresh paused-clock runtime.
pub fn run(setup: Setup) -> Report {
    crate::lab::rig::paused(run_async(setup))
}

async fn run_async(setup: Setup) -> Report {
    let t0 = Instant::now();
    let hours = move || (Instant::now() - t0).as_secs_f64() / 3600.0;
    let cluster = Cluster::new(ServerOptions::default());
    let api: Api<Widget> = Api::namespaced(cluster.in_process_client(), "default");
    let pp = PostParams::default();
    let mut w = Widget::new(
        "w",
        WidgetSpec {
            replicas: 1,
            color: Some("red".into()),
        },
    );
    w = api.create(&pp, &w).await.expect("create");
    for replicas in 2..=7 {
        w.spec.replicas = replicas;
        w = api.replace("w", &pp, &w).await.expect("bump generation");
    }
    assert_eq!(w.metadata.generation, Some(7));

    let mut options = InformerOptions::new(10 * HOUR);
    options.variant = setup.variant;
    options.type_name = "*v1.Widget".into();
    let informer = Arc::new(SharedIndexInformer::new(api.clone(), options));
    let fifo = informer.fifo_choice().describe();

    let counts = Arc::new(Mutex::new(UpdateCounts::default()));
    // A counting handler beside the controller's own: it sees exactly what the controller's
    // predicates see, and records what each update carried.
    let c = counts.clone();
    informer
        .add_event_handler(HandlerFuncs::new().on_update(
            move |old: Arc<Widget>, new: Arc<Widget>| {
                let mut c = c.lock();
                c.total += 1;
                if same_content(&old, &new) {
                    c.old_equals_new += 1;
                } else {
                    c.payload_changed += 1;
                }
                if Arc::ptr_eq(&old, &new) {
                    c.same_pointer += 1;
                }
                let ev = Event::Update {
                    old: Some(old),
                    new: Some(new),
                };
                if GenerationChanged.matches(&ev) {
                    c.generation_changed_passes += 1;
                }
            },
        ))
        .expect("informer not stopped");

    // The controller: GenerationChanged, then EnqueueRequestForObject, then the workers. Its
    // reconciler reads the cache, or — for the remedy — the live object, and asks to look
    // again in an hour. controller-runtime turns that result into `forget` + `add_after`,
    // straight into the queue: no informer, no predicate on that path.
    let reconciles = Arc::new(Mutex::new(Vec::new()));
    let reconciler = {
        let (api, reconciles) = (api.clone(), reconciles.clone());
        move |req: Request, ctx: Context<Widget>| {
            let (api, reconciles) = (api.clone(), reconciles.clone());
            async move {
                let seen = if setup.requeue_after {
                    api.get(&req.name).await.ok().map(|w| color(&w))
                } else {
                    ctx.get(&req).map(|w| color(&w))
                };
                if let Some(color) = seen {
                    reconciles.lock().push(Reconcile {
                        hour: hours(),
                        color,
                    });
                }
                Ok(if setup.requeue_after {
                    ReconcileResult::requeue_after(HOUR)
                } else {
                    ReconcileResult::done()
                })
            }
        }
    };
    let controller = Controller::builder("widget")
        .with_predicate(GenerationChanged)
        .build(&informer, reconciler)
        .expect("a named controller on a running informer");

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let inf = informer.clone();
    let running = tokio::spawn(async move {
        inf.run(async {
            let _ = stop_rx.await;
        })
        .await
    });
    let (ctl_stop_tx, ctl_stop_rx) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(async move {
        controller
            .run(async {
                let _ = ctl_stop_rx.await;
            })
            .await
    });

    tokio::time::sleep_until(t0 + HOUR).await;
    let mut w = api.get("w").await.expect("get");
    w.spec.color = Some("green".into());
    let w = api.replace("w", &pp, &w).await.expect("genuine change");
    assert_eq!(w.metadata.generation, Some(8));

    let lists_before = cluster.requests().iter().filter(|r| is_list(r)).count();
    let mut requests_at_resync_ticks = vec![];
    for tick in [10u32, 20, 30] {
        let at = t0 + HOUR * tick;
        tokio::time::sleep_until(at - Duration::from_secs(1)).await;
        let before = cluster.requests().len();
        tokio::time::sleep_until(at + Duration::from_secs(1)).await;
        requests_at_resync_ticks.push(cluster.requests().len() - before);
        if tick == 20 {
            tokio::time::sleep_until(t0 + HOUR * 21).await;
            let mut drifted = (*informer.indexer().get_by_key("default/w").unwrap()).clone();
            drifted.spec.color = Some("blue".into());
            cluster.silent_write(&drifted).expect("silent write");
        }
    }
    tokio::time::sleep_until(t0 + HOUR * 35).await;
    let relists = cluster.requests().iter().filter(|r| is_list(r)).count() - lists_before;
    let _ = stop_tx.send(());
    let _ = ctl_stop_tx.send(());
    worker
        .await
        .expect("controller task")
        .expect("controller ran");
    running.await.expect("informer task");

    let server_color = color(&api.get("w").await.expect("get"));
    let cached_color = color(&informer.indexer().get_by_key("default/w").expect("cached"));
    let updates = counts.lock().clone();
    let reconciles = reconciles.lock().clone();
    Report {
        fifo,
        updates,
        requests_at_resync_ticks,
        relists,
        reconciles,
        server_color,
        cached_color,
    }
}

impl Report {
    /// The first virtual hour at which a reconcile read the drifted color, if any did.
    pub fn first_hour_drift_seen(&self) -> Option<f64> {
        self.reconciles
            .iter()
            .find(|r| r.color == self.server_color && r.color != self.cached_color)
            .map(|r| r.hour)
    }

    /// The colors the reconciler read, without repeats.
    pub fn colors_seen(&self) -> Vec<String> {
        let mut out: Vec<String> = vec![];
        for r in &self.reconciles {
            if out.last() != Some(&r.color) {
                out.push(r.color.clone());
            }
        }
        out
    }

    /// The chapter's durable claims about a resync, checked on this run. Empty when all hold;
    /// otherwise one line per claim that failed.
    pub fn resync_violations(&self) -> Vec<String> {
        let mut v = vec![];
        let resyncs = self.updates.old_equals_new;
        if resyncs != 3 {
            v.push(format!("expected 3 resync updates, saw {resyncs}"));
        }
        if self.updates.same_pointer != resyncs {
            v.push(format!(
                "resync updates are not the cached object: {} of {resyncs} share its pointer",
                self.updates.same_pointer
            ));
        }
        let at_ticks: usize = self.requests_at_resync_ticks.iter().sum();
        if at_ticks != 0 || self.relists != 0 {
            v.push(format!(
                "the resync contacted the server: {at_ticks} requests at the ticks, {} relists",
                self.relists
            ));
        }
        v
    }
}

impl Report {
    /// What chapter 04 snapshots as `ch04_resync_counts`.
    pub fn counts_view(&self) -> serde_json::Value {
        serde_json::json!({
            "fifo": self.fifo,
            "on_update": self.updates,
            "requests_within_1s_of_each_resync_tick": self.requests_at_resync_ticks,
            "relists": self.relists,
        })
    }

    /// What chapter 04 snapshots as `ch04_drift`.
    pub fn drift_view(&self) -> serde_json::Value {
        serde_json::json!({
            "server_color": self.server_color,
            "cached_color_after_the_hour_30_resync": self.cached_color,
            "colors_the_reconciler_read": self.colors_seen(),
        })
    }

    /// What chapter 04 snapshots as `ch04_remedy`.
    pub fn remedy_view(&self) -> serde_json::Value {
        serde_json::json!({
            "updates_through_the_predicate": self.updates.generation_changed_passes,
            "reconciles": self.reconciles.len(),
            "first_hour_the_drift_was_read": self.first_hour_drift_seen(),
            "colors_the_reconciler_read": self.colors_seen(),
        })
    }
}

/// The resync checks on the faithful informer and on the two broken ones, as chapter 04's
/// `ch04_detectors` prints them. Panics if a broken variant passes or the faithful one fails.
pub fn detectors() -> String {
    let mut out = String::new();
    for variant in [
        Variant::Faithful,
        Variant::DeepCopyOnResync,
        Variant::RelistOnResync,
    ] {
        let report = run(Setup {
            variant,
            ..Setup::faithful()
        });
        let v = report.resync_violations();
        assert_eq!(
            v.is_empty(),
            variant == Variant::Faithful,
            "{variant:?}: {v:?}"
        );
        out += &format!("{variant:?}:\n");
        let lines = if v.is_empty() {
            vec!["all claims hold".to_string()]
        } else {
            v
        };
        for line in lines {
            out += &format!("  - {line}\n");
        }
    }
    out
}

/// The `cargo run` entry: chapter 04's claims and snapshots.
pub fn experiment() {
    let r = run(Setup::faithful());
    assert!(
        r.resync_violations().is_empty(),
        "{:?}",
        r.resync_violations()
    );
    assert_eq!(r.updates.generation_changed_passes, 1);
    assert_eq!(
        (r.server_color.as_str(), r.cached_color.as_str()),
        ("blue", "green")
    );
    crate::book::snap::yaml("ch04_resync_counts", &r.counts_view(), vec![]);
    crate::book::snap::yaml("ch04_drift", &r.drift_view(), vec![]);
    let remedy = run(Setup {
        requeue_after: true,
        ..Setup::faithful()
    });
    assert_eq!(remedy.first_hour_drift_seen(), Some(21.0));
    crate::book::snap::yaml("ch04_remedy", &remedy.remedy_view(), vec![]);
    crate::book::snap::text("ch04_detectors", detectors());
}
