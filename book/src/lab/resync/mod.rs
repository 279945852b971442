//! Chapter 04's experiments: what a resync does, what it does not, and what does find a
//! change the watch lost.
//!
//! One Widget on the embedded API server, in-process, one informer with the resync period
//! controller-runtime's cache gives it (its 10-hour `SyncPeriod` times a factor in [0.9, 1.1),
//! drawn per informer: P below), and a [`Controller`] on it, all under tokio's paused clock
//! (35.5 virtual hours take milliseconds, and every timer fires at its exact instant; the writes
//! fall on half hours, so no write shares an instant with an hourly requeue). [`timeline`] is the run; the
//! chapter's first block shows its body, and every later block varies its [`Setup`]:
//!
//! ```text
//!  0      Widget w exists at generation 7, color red; the informer lists it
//!  0.5    a genuine spec change: color green, generation 8
//!  P, 2P, 3P    the resync ticks (P in [9, 11) hours)
//!  21.5   two writes whose watch events are lost: w turns blue (generation 9), w2 appears
//!  32.5   the watch ends, if the setup names a way (closed, closed then 429, expired)
//!  35.5   stop
//! ```
//!
//! The lost events stand for what a real cluster can do to a client: an event dropped by a bug
//! on either side, or the window of a watch that broke and was resumed. A real server sends
//! every event; the embedded one can withhold some
//! ([`Cluster::drop_next_events`](controlloop::apiserver::Cluster::drop_next_events)), which
//! is the only way to make the loss happen on cue.
//!
//! The body of every `pub fn ch04_…` here is a block of `chapters/04-resync.md`, and so is
//! every function such a block defines: each is a region marked `// book: NAME`, which
//! `book/tests/book_layout.rs` holds equal to the chapter's copy. The rest (`parts`) is the rig
//! those blocks stand on: the objects, the counting handler, the report.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use tokio::time::{Instant, sleep_until};

use crate::kit::snap;
use crate::lab::rig;
use crate::lab::rig::Widget;
use controlloop::apiserver::Failure;
use controlloop::cache::{
    HandlerFuncs, InformerOptions, SharedIndexInformer,
    broken::{self, Variant},
};
use controlloop::controller::{
    Context, Controller, Event, ReconcileError, ReconcileResult, Request,
    predicate::{GenerationChanged, Predicate},
};
use controlloop::features::FeatureGates;

mod parts;

pub use parts::*;

// The chapter's blocks, in page order: each `// book:` region is a chapter block's text.

// book: ch04_fn_timeline
/// The whole run: the timeline above, with what `setup` varies.
pub async fn timeline(setup: Setup) -> Report {
    let cluster = rig::widget_cluster().await;
    let t0 = Instant::now();
    let at = move |h: f64| t0 + HOUR.mul_f64(h); // the instant of virtual hour h
    let widgets: Api<Widget> = Api::namespaced(cluster.in_process_client(), "default");
    create_at_generation_7(&widgets, "w", "red").await;

    // The informer, with the resync period the cache gives it (10 hours, jittered), at the
    // gates of Kubernetes 1.minor.
    let period = sync_period(setup.seed).next();
    let gates = FeatureGates::at_minor(setup.minor).unwrap();
    let options = InformerOptions {
        gates,
        ..InformerOptions::new(period)
    };
    let informer = Arc::new(broken::informer(widgets.clone(), options, setup.variant));
    // Beside the controller's handler, one that records what each update carries.
    let updates = Arc::new(Mutex::new(UpdateCounts::default()));
    let u = updates.clone();
    let count = move |old, new| u.lock().count(&old, &new);
    informer
        .add_event_handler(HandlerFuncs::new().on_update(count))
        .unwrap();

    // The reconciler reads w from the cache or from the server, records what it read, and
    // asks to look again after `requeue_after` if the setup says so.
    let reconciles = Arc::new(Mutex::new(Vec::new()));
    let (api, log) = (widgets.clone(), reconciles.clone());
    let reconciler = move |req: Request, ctx: Context<Widget>| {
        let (api, log) = (api.clone(), log.clone());
        async move {
            let w = match setup.read {
                Read::Cache => ctx.get(&req).map(|w| (*w).clone()),
                Read::Live => api
                    .get_opt(&req.name)
                    .await
                    .map_err(ReconcileError::retry)?,
            };
            let seen = Reconcile::new(since(t0), &req, w.as_ref());
            log.lock().push(seen);
            Ok(match setup.requeue_after {
                Some(after) => ReconcileResult::requeue_after(after),
                None => ReconcileResult::done(),
            })
        }
    };
    let mut builder = Controller::builder("widget").release(setup.release);
    if setup.predicate {
        builder = builder.with_predicate(GenerationChanged);
    }
    let controller = builder.build(&informer, reconciler).unwrap();
    let running = Running::start(&informer, &controller);
    let around_ticks = requests_around(&cluster, t0, period);

    sleep_until(at(0.5)).await;
    set_color(&widgets, "w", "green").await; // a spec change: generation 8
    sleep_until(at(21.5)).await;
    cluster.drop_next_events(2); // the next two writes' watch events are lost
    set_color(&widgets, "w", "blue").await; // generation 9
    let w2 = widget("w2", "blue");
    widgets.create(&PostParams::default(), &w2).await.unwrap();
    sleep_until(at(32.5)).await;
    match setup.watch_fault {
        None => {}
        Some(WatchFault::Closed) => cluster.close_watches(),
        Some(WatchFault::ClosedThen429) => {
            cluster.fail_next_requests(2, Failure::TooManyRequests, 0);
            cluster.close_watches();
        }
        Some(WatchFault::Expired) => cluster.expire_watches(),
    }
    sleep_until(at(35.5)).await;
    running.stop().await;
    Report::collect(
        &cluster,
        &informer,
        &updates,
        &reconciles,
        around_ticks,
        period,
    )
    .await
}
// book: end ch04_fn_timeline

/// Chapter 04, "The experiment": the typical controller, and what its 35 hours did.
pub fn ch04_faithful() {
    // book: ch04_faithful
    let report = rig::paused(timeline(Setup::faithful()));
    let u = &report.updates;
    // One genuine change and three resyncs, which hand over the cache's own object, twice.
    assert_eq!((u.total, u.payload_changed, u.old_equals_new), (4, 1, 3));
    assert_eq!(u.same_pointer, 3);
    // Nothing reached the server around the three ticks, and nothing relisted.
    assert_eq!(report.requests_at_resync_ticks, [0, 0, 0]);
    assert_eq!(report.relists, 0);
    // The reconciler ran for the initial list and for the genuine change, never on a resync.
    assert_eq!(report.reconciled(), ["0 w red", "0.5 w green"]);
    snap::yaml("ch04_resync_counts", &report.counts_view(), vec![]);
    // book: end ch04_faithful
}

/// Chapter 04: what `GenerationChanged` says of a resync and of a genuine change.
pub fn ch04_generation_changed() {
    // book: ch04_generation_changed
    let mut w = widget("w", "green");
    w.metadata.generation = Some(7);
    let cached = Arc::new(w.clone());
    // A resync: the cached object as both old and new.
    let resync = Event::Update {
        old: Some(cached.clone()),
        new: Some(cached.clone()),
    };
    // A spec change: the generation moves from 7 to 8.
    w.metadata.generation = Some(8);
    let change = Event::Update {
        old: Some(cached),
        new: Some(Arc::new(w)),
    };
    assert!(!GenerationChanged.matches(&resync));
    assert!(GenerationChanged.matches(&change));
    let verdicts = format!(
        "resync (same object):    {}\ngeneration 7 -> 8:       {}",
        GenerationChanged.matches(&resync),
        GenerationChanged.matches(&change),
    );
    snap::text("ch04_generation_changed", verdicts);
    // book: end ch04_generation_changed
}

/// Chapter 04: the control run, with no predicate on the watch.
pub fn ch04_no_predicate() {
    // book: ch04_no_predicate
    let setup = Setup {
        predicate: false,
        ..Setup::faithful()
    };
    let report = rig::paused(timeline(setup));
    // Every resync tick is now a reconcile, and each reads the cached object again.
    let expected = [
        "0 w red",
        "0.5 w green",
        "P w green",
        "2·P w green",
        "3·P w green",
    ];
    assert_eq!(report.reconciled(), expected);
    assert!(report.period_in_range()); // P, whatever the draw, lies in [9 h, 11 h)
    snap::text("ch04_no_predicate", report.reconciled().join("\n"));
    // book: end ch04_no_predicate
}

// book: ch04_fn_owned_timeline
/// A Widget controller that also watches the ConfigMaps it owns, as `Owns(&ConfigMap{})`
/// does, with no predicate on that watch. Returns when w was reconciled, and the resync
/// period the cache gave the ConfigMap informer.
pub async fn owned_timeline(seed: u64) -> (Vec<Duration>, Duration) {
    let cluster = rig::widget_cluster().await;
    let t0 = Instant::now();
    let widgets: Api<Widget> = Api::namespaced(cluster.in_process_client(), "default");
    let configmaps: Api<ConfigMap> = Api::namespaced(cluster.in_process_client(), "default");
    let w = create_at_generation_7(&widgets, "w", "red").await;
    let config = owned_by(&w, "w-config");
    configmaps
        .create(&PostParams::default(), &config)
        .await
        .unwrap();

    // Both informers come from one cache, which draws each one's resync period.
    let sync = sync_period(seed);
    let widget_options = InformerOptions::new(sync.next());
    let widget_informer = Arc::new(SharedIndexInformer::new(widgets, widget_options));
    let cm_period = sync.next();
    let cm_informer = Arc::new(SharedIndexInformer::new(
        configmaps,
        InformerOptions::new(cm_period),
    ));
    let reconciles = Arc::new(Mutex::new(Vec::new()));
    let log = reconciles.clone();
    let reconciler = move |_req: Request, _ctx: Context<Widget>| {
        log.lock().push(since(t0));
        async { Ok(ReconcileResult::done()) }
    };
    // For(&Widget{}), with GenerationChanged on that watch...
    let controller = Controller::builder("widget")
        .with_predicate(GenerationChanged)
        .build(&widget_informer, reconciler)
        .unwrap();
    // ...and Owns(&ConfigMap{}): every event of an owned ConfigMap enqueues its owner, with
    // no predicate.
    let queue = controller.queue().clone();
    let enqueue_owner = move |cm: Arc<ConfigMap>| {
        if let Some(owner) = controller_of(&cm) {
            queue.add(owner);
        }
    };
    let on_add = enqueue_owner.clone();
    let handler = HandlerFuncs::new()
        .on_add(move |cm, _| on_add(cm))
        .on_update(move |_, cm| enqueue_owner(cm));
    cm_informer.add_event_handler(handler).unwrap();

    let running =
        Running::start(&widget_informer, &controller).and(Running::informer(&cm_informer));
    sleep_until(t0 + 35 * HOUR).await;
    running.stop().await;
    let at = reconciles.lock().clone();
    (at, cm_period)
}
// book: end ch04_fn_owned_timeline

/// Chapter 04: the owned-object watch turns each resync into a reconcile of the owner.
pub fn ch04_owned() {
    // book: ch04_owned
    let (at, period) = rig::paused(owned_timeline(SEED));
    // Hour 0 holds the initial lists' reconciles (one or two, as the two informers race).
    let later = at.into_iter().filter(|t| *t > Duration::from_secs(60));
    let later: Vec<String> = later.map(|t| when(t, period, Some("ConfigMap"))).collect();
    assert_eq!(later, ["P(ConfigMap)", "2·P(ConfigMap)", "3·P(ConfigMap)"]);
    snap::text("ch04_owned", format!("after hour 0: {}", later.join(", ")));
    // book: end ch04_owned
}

/// Chapter 04, "What a resync cannot see": the server and the cache after the lost writes.
pub fn ch04_lost_writes() {
    // book: ch04_lost_writes
    let report = rig::paused(timeline(Setup::faithful()));
    assert_eq!(
        report.on_the_server,
        ["w blue generation 9", "w2 blue generation 1"]
    );
    assert_eq!(report.in_the_cache, ["w green generation 8"]);
    // w2 exists, and nothing in the process ever heard of it.
    assert!(report.reconciles.iter().all(|r| r.name == "w"));
    snap::yaml("ch04_drift", &report.drift_view(), vec![]);
    // book: end ch04_lost_writes
}

/// Chapter 04, "What relists": the three ways the watch can end at hour 32.5.
pub fn ch04_relists() {
    // book: ch04_relists
    let mut table = String::new();
    // Each way the watch can end, with the watch requests the server will refuse.
    let faults = [
        (WatchFault::Closed, 0),
        (WatchFault::ClosedThen429, 2),
        (WatchFault::Expired, 0),
    ];
    for (fault, refused) in faults {
        let setup = Setup {
            watch_fault: Some(fault),
            ..Setup::faithful()
        };
        let report = rig::paused(timeline(setup));
        assert_eq!(report.refused_watches, refused);
        let relisted = report.relists > 0;
        // Only the relist brings the lost writes into the cache, and so to the reconciler.
        assert_eq!(relisted, fault == WatchFault::Expired);
        assert_eq!(report.cached_color == "blue", relisted);
        let relists = report.relists;
        let row = format!("{fault:?}: relists {relists}, refused watches {refused}");
        table += &format!("{row}; {}\n", report.reconciled().join(", "));
    }
    snap::text("ch04_relists", table);
    // book: end ch04_relists
}

/// Chapter 04, "The remedy": `RequeueAfter` with the cached reader, with a live read, and a
/// live read alone.
pub fn ch04_remedy() {
    // book: ch04_remedy
    // The remedy as the essay states it: return RequeueAfter, and read as before, from the cache.
    let hourly = Setup {
        requeue_after: Some(HOUR),
        ..Setup::faithful()
    };
    let cached = rig::paused(timeline(hourly));
    // On the priority queue (v0.24) the change at 0.5 h replaces the requeue waiting for 1 h.
    assert_eq!(cached.reconciled(), ["0 w red", "0.5..=34.5 w green"]);
    // The same, reading the live object from the server.
    let live = rig::paused(timeline(Setup {
        read: Read::Live,
        ..hourly
    }));
    let read_blue = ["0 w red", "0.5..=21.5 w green", "22.5..=34.5 w blue"];
    assert_eq!(live.reconciled(), read_blue);
    // The live read alone, without RequeueAfter: nothing asks the reconciler to look again.
    let live_only = rig::paused(timeline(Setup {
        read: Read::Live,
        ..Setup::faithful()
    }));
    assert_eq!(live_only.reconciled(), ["0 w red", "0.5 w green"]);
    // In all three, the predicate let exactly one update event through.
    for r in [&cached, &live, &live_only] {
        assert_eq!(r.updates.generation_changed_passes, 1);
    }
    let rows = [
        ("cache, RequeueAfter 1h", &cached),
        ("server, RequeueAfter 1h", &live),
        ("server, no requeue", &live_only),
    ];
    let table: String = rows
        .iter()
        .map(|(how, r)| format!("{how:<24} {}\n", r.reconciled().join(", ")))
        .collect();
    snap::text("ch04_remedy", table);
    // book: end ch04_remedy
}

// book: ch04_fn_sync_rule_timeline
/// Two handlers on one informer, one due for resync every 10 hours and one that asked for
/// none; a change at 0.5 h and a relist at 15 h. Returns the updates each handler received.
pub async fn sync_rule_timeline() -> [Vec<String>; 2] {
    let cluster = rig::widget_cluster().await;
    let t0 = Instant::now();
    let at = move |h: f64| t0 + HOUR.mul_f64(h);
    let widgets: Api<Widget> = Api::namespaced(cluster.in_process_client(), "default");
    create_at_generation_7(&widgets, "w", "red").await;
    let options = InformerOptions::new(10 * HOUR);
    let informer = Arc::new(SharedIndexInformer::new(widgets.clone(), options));
    // Two handlers: one with the informer's resync period, one that asked for none.
    let logs = [Arc::new(Mutex::new(vec![])), Arc::new(Mutex::new(vec![]))];
    for (log, resync) in logs.iter().zip([None, Some(Duration::ZERO)]) {
        let log = log.clone();
        let record = move |old, new| log.lock().push(update_label(hours_since(t0), &old, &new));
        let handler = HandlerFuncs::new().on_update(record);
        informer
            .add_event_handler_with_resync(handler, resync)
            .unwrap();
    }
    let running = Running::informer(&informer);
    sleep_until(at(0.5)).await;
    set_color(&widgets, "w", "green").await; // a change: a new resourceVersion
    sleep_until(at(15.0)).await;
    cluster.expire_watches(); // a relist, which lists w unchanged
    sleep_until(at(35.5)).await;
    running.stop().await;
    logs.map(|log| log.lock().clone())
}
// book: end ch04_fn_sync_rule_timeline

/// Chapter 04, "Which updates are a resync".
pub fn ch04_sync_rule() {
    // book: ch04_sync_rule
    let [due, never] = rig::paused(sync_rule_timeline());
    let relist = "15.0003 same resourceVersion, another copy";
    assert_eq!(
        due,
        [
            "0.5 new resourceVersion",
            "10 same object",
            relist,
            "25.0003 same object",
            "35.0003 same object"
        ]
    );
    assert_eq!(never, ["0.5 new resourceVersion"]);
    let shown = format!(
        "resync due every 10h:\n  {}\nno resync:\n  {}\n",
        due.join("\n  "),
        never.join("\n  ")
    );
    snap::text("ch04_sync_rule", shown);
    // book: end ch04_sync_rule
}

// book: ch04_fn_resync_violations
/// The resync claims, as a check that says what it found.
pub fn resync_violations(r: &Report) -> Vec<String> {
    let mut found = vec![];
    let resyncs = r.updates.old_equals_new;
    if resyncs != 3 {
        found.push(format!("expected 3 resync updates, saw {resyncs}"));
    }
    if r.updates.same_pointer != resyncs {
        let shared = r.updates.same_pointer;
        found.push(format!(
            "{shared} of {resyncs} resync updates are the cached object"
        ));
    }
    let at_ticks: usize = r.requests_at_resync_ticks.iter().sum();
    if at_ticks != 0 || r.relists != 0 {
        let relists = r.relists;
        found.push(format!(
            "{at_ticks} requests at the ticks, {relists} relists"
        ));
    }
    found
}
// book: end ch04_fn_resync_violations

/// Chapter 04, "Each check can fail": the checks on the faithful informer and two broken ones.
pub fn ch04_detectors() {
    // book: ch04_detectors
    let mut out = String::new();
    for variant in [
        Variant::Faithful,
        Variant::DeepCopyOnResync,
        Variant::RelistOnResync,
    ] {
        let report = rig::paused(timeline(Setup {
            variant,
            ..Setup::faithful()
        }));
        let found = resync_violations(&report);
        assert_eq!(found.is_empty(), variant == Variant::Faithful, "{found:?}");
        let verdict = match found.is_empty() {
            true => "all claims hold".to_owned(),
            false => found.join("; "),
        };
        out += &format!("{variant:?}: {verdict}\n");
    }
    snap::text("ch04_detectors", out);
    // book: end ch04_detectors
}
