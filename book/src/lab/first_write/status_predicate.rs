//! A controller that reacts to status, behind controller-runtime's `GenerationChangedPredicate`
//! (v0.25.3, `pkg/predicate/predicate.go`; the port's [`GenerationChanged`]).
//!
//! ```text
//!  kubelet: status.readyReplicas 1, 2, 3 ─► server (no generation bump) ─► informer ─► predicate ─► handler ─► reconcile
//!  monitor: status.message every minute ──┘                                             │
//!                                                        GenerationChanged drops both ──┘
//! ```
//!
//! The reconciler marks a widget Ready (one notice, counted in a [`World`]) once
//! `status.readyReplicas` reaches `spec.replicas`. Another actor writes that status through
//! the status subresource, which never bumps `metadata.generation`, so a controller filtered by
//! `GenerationChanged` never hears it. Everything runs under tokio's paused clock on the
//! embedded server in-process: every count and instant is exact.

use std::{
    fmt::Write as _,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use kube::api::{Api, Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use serde::Serialize;
use tokio::time::Instant;

use crate::lab::designs::status_record::OBJECT;
use crate::lab::rig::{self, NAMESPACE, Running, within};
use crate::lab::rig::{Widget, WidgetSpec};
use controlloop::{
    cache::{InformerOptions, SharedIndexInformer},
    controller::{
        Context, Controller, EnqueueRequestForObject, Event, EventHandler, ReconcileError,
        ReconcileResult, Request,
        predicate::{BoxPredicate, Funcs, GenerationChanged, Or},
    },
};

/// The replicas the widget asks for: it is Ready when this many are.
pub const REPLICAS: i32 = 3;
/// How long each run goes on after the first status write's clock starts.
pub const HOUR: Duration = Duration::from_secs(3600);
/// The monitor's status write (`status.message`), once a minute.
pub const HEARTBEAT: Duration = Duration::from_secs(60);
/// When the spec change of [`Filter::GenerationThenSpec`] lands.
pub const SPEC_CHANGE_AT: Duration = Duration::from_secs(1830);
/// A bound on every wait of a run (virtual time).
const LIMIT: Duration = Duration::from_secs(7200);

/// The controller's predicate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Filter {
    /// No predicate: every event reaches the handler.
    None,
    /// `GenerationChanged` alone.
    Generation,
    /// `GenerationChanged` alone, and a spec change at [`SPEC_CHANGE_AT`].
    GenerationThenSpec,
    /// `Or(GenerationChanged, readyReplicas changed)`: the status field the controller reads
    /// passes too.
    GenerationOrReady,
}

impl Filter {
    /// Every filter, in the table's order.
    pub const ALL: [Filter; 4] = [
        Filter::None,
        Filter::Generation,
        Filter::GenerationThenSpec,
        Filter::GenerationOrReady,
    ];

    /// How the table names it.
    pub fn name(self) -> &'static str {
        match self {
            Filter::None => "none",
            Filter::Generation => "GenerationChanged",
            Filter::GenerationThenSpec => "GenerationChanged, spec change at 1830 s",
            Filter::GenerationOrReady => "Or(GenerationChanged, readyReplicas changed)",
        }
    }
}

/// The world the controller acts on: the instants (virtual ms after the first status write's
/// clock started) at which it marked each widget Ready.
pub struct World {
    t0: Instant,
    marked: Mutex<Vec<(String, u64)>>,
}

impl World {
    /// A world whose clock starts at `t0`.
    pub fn new(t0: Instant) -> Self {
        World {
            t0,
            marked: Mutex::default(),
        }
    }
    /// Whether `name` was marked Ready.
    pub fn is_marked(&self, name: &str) -> bool {
        self.marked.lock().iter().any(|(n, _)| n == name)
    }
    /// Marks `name` Ready now: the one action.
    pub fn mark_ready(&self, name: &str) {
        let at = self.t0.elapsed().as_millis() as u64;
        self.marked.lock().push((name.to_owned(), at));
    }
    /// Every marking, in order.
    pub fn marked(&self) -> Vec<(String, u64)> {
        self.marked.lock().clone()
    }
}

fn ready_of(w: &Widget) -> i32 {
    w.status.as_ref().map_or(0, |s| s.ready_replicas)
}

/// Marks the widget Ready once its status says every replica is.
// book: ch17_ready_reconcile
pub async fn ready_reconcile(
    world: Arc<World>,
    request: Request,
    ctx: Context<Widget>,
) -> Result<ReconcileResult, ReconcileError> {
    let Some(widget) = ctx.get(&request) else {
        return Ok(ReconcileResult::done());
    };
    let ready = widget.status.as_ref().map_or(0, |s| s.ready_replicas);
    if ready >= widget.spec.replicas && !world.is_marked(&request.name) {
        world.mark_ready(&request.name); // the one action: "it is Ready"
    }
    Ok(ReconcileResult::done())
}
// book: end ch17_ready_reconcile

/// Counts the status-only updates (generation unchanged) it hears, then enqueues as
/// [`EnqueueRequestForObject`] does. Predicates run before a handler, so it hears only what
/// passed them.
pub struct CountStatusOnly(pub Arc<AtomicU64>);

impl EventHandler<Widget> for CountStatusOnly {
    fn handle(&self, event: &Event<Widget>, enqueue: &mut dyn FnMut(Request)) {
        if let Event::Update {
            old: Some(old),
            new: Some(new),
        } = event
            && old.metadata.generation == new.metadata.generation
        {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        EnqueueRequestForObject.handle(event, enqueue);
    }
}

/// The status-change predicate of [`Filter::GenerationOrReady`]: an update whose
/// `status.readyReplicas` moved.
pub fn ready_changed(event: &Event<Widget>) -> bool {
    match event {
        Event::Update {
            old: Some(old),
            new: Some(new),
        } => ready_of(old) != ready_of(new),
        _ => false,
    }
}

/// The controller, configured by `filter`.
pub fn start_ready(
    informer: &crate::lab::rig::Informer<Widget>,
    world: Arc<World>,
    heard: Arc<AtomicU64>,
    filter: Filter,
) -> Controller<Widget> {
    let builder = Controller::builder("mark-ready").with_handler(CountStatusOnly(heard));
    // book: ch17_ready_controller
    let builder = match filter {
        Filter::None => builder,
        Filter::Generation | Filter::GenerationThenSpec => {
            builder.with_predicate(GenerationChanged)
        }
        Filter::GenerationOrReady => builder.with_predicate(Or(vec![
            Arc::new(GenerationChanged) as BoxPredicate<Widget>,
            Arc::new(Funcs(ready_changed)), // passes a readyReplicas change
        ])),
    };
    // book: end ch17_ready_controller
    builder
        .build(informer, move |request, ctx| {
            ready_reconcile(world.clone(), request, ctx)
        })
        .expect("a named controller on a fresh informer builds")
}

/// One run of the ready controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadyRun {
    /// The controller's predicate.
    pub filter: Filter,
    /// Status writes the server took (readiness and heartbeats).
    pub status_writes: u64,
    /// Updates whose generation did not move that the informer delivered to the controller,
    /// before its predicates: the controller's `events` metric less the initial list's create
    /// and, in [`Filter::GenerationThenSpec`], the spec change (no resync, no relist).
    pub status_only_delivered: u64,
    /// Of those, the ones that passed the predicates and reached the handler.
    pub status_only_heard: u64,
    /// Reconciles over the whole run (the initial list's create included).
    pub reconciles: u64,
    /// Virtual ms after the clock started at which the widget was marked Ready (`None`: never,
    /// within [`HOUR`]).
    pub marked_at_ms: Option<u64>,
    /// Markings: a correct controller makes at most one.
    pub markings: usize,
    /// The widget's final generation.
    pub generation: i64,
}

/// Runs the ready controller with `filter` for a virtual hour, while a kubelet writes
/// `status.readyReplicas` 1, 2, 3 a second apart and a monitor writes `status.message` every
/// minute.
pub async fn ready_run_async(filter: Filter) -> ReadyRun {
    let cluster = rig::widget_cluster().await;
    let api: Api<Widget> = Api::namespaced(cluster.in_process_client(), NAMESPACE);
    let spec = WidgetSpec {
        replicas: REPLICAS,
        color: Some("red".into()),
    };
    api.create(&PostParams::default(), &Widget::new(OBJECT, spec))
        .await
        .expect("creating the widget");
    let informer = Arc::new(SharedIndexInformer::new(
        api.clone(),
        InformerOptions::new(Duration::ZERO), // no resync
    ));
    let t0 = Instant::now();
    let world = Arc::new(World::new(t0));
    let heard = Arc::new(AtomicU64::new(0));
    let controller = start_ready(&informer, world.clone(), heard.clone(), filter);
    let running = Running::start(&informer, &controller);
    let monitor = {
        let api = api.clone();
        tokio::spawn(async move {
            let (pp, mut minute) = (PatchParams::default(), 1);
            while HEARTBEAT * minute < HOUR {
                tokio::time::sleep_until(t0 + HEARTBEAT * minute).await;
                let patch = serde_json::json!({ "status": { "message": format!("seen at minute {minute}") } });
                let beat = api.patch_status(OBJECT, &pp, &Patch::Merge(&patch)).await;
                beat.expect("the monitor's status write");
                minute += 1;
            }
        })
    };
    let pp = PatchParams::default();
    // book: ch17_kubelet
    for ready in 1..=REPLICAS {
        tokio::time::sleep_until(t0 + Duration::from_secs(ready as u64)).await;
        let patch = serde_json::json!({ "status": { "readyReplicas": ready } });
        let written = api.patch_status(OBJECT, &pp, &Patch::Merge(&patch)).await;
        written.expect("the kubelet's status write"); // generation unchanged
    }
    // book: end ch17_kubelet
    if filter == Filter::GenerationThenSpec {
        tokio::time::sleep_until(t0 + SPEC_CHANGE_AT).await;
        let patch = Patch::Merge(serde_json::json!({ "spec": { "color": "green" } }));
        let changed = api.patch(OBJECT, &pp, &patch).await;
        changed.expect("a spec change"); // a new generation
    }
    tokio::time::sleep_until(t0 + HOUR).await;
    within(LIMIT, "the monitor never finished its heartbeats", monitor)
        .await
        .expect("the monitor ran");
    running.stop().await;
    let events = controller.metrics().events;
    let widget = api.get(OBJECT).await.expect("reading the widget");
    let status_writes = cluster
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH" && r.path.ends_with("/status") && r.status == 200)
        .count() as u64;
    let marked = world.marked();
    ReadyRun {
        filter,
        status_writes,
        // every event but the initial list's create and the one spec change is status-only
        status_only_delivered: events - 1 - u64::from(filter == Filter::GenerationThenSpec),
        status_only_heard: heard.load(Ordering::SeqCst),
        reconciles: controller.metrics().reconciles(),
        marked_at_ms: marked.first().map(|(_, at)| *at),
        markings: marked.len(),
        generation: widget.metadata.generation.unwrap_or_default(),
    }
}

/// Every filter, each on a fresh server.
pub fn ready_runs() -> Vec<ReadyRun> {
    rig::paused(async {
        let mut runs = Vec::new();
        for filter in Filter::ALL {
            runs.push(ready_run_async(filter).await);
        }
        runs
    })
}

/// The detector: the controller marked the widget Ready, once, within the hour.
pub fn check_marked(run: &ReadyRun) {
    assert!(
        run.marked_at_ms.is_some(),
        "{} never marked the widget Ready within an hour: {} of {} status-only updates reached its handler",
        run.filter.name(),
        run.status_only_heard,
        run.status_only_delivered
    );
    assert_eq!(
        run.markings,
        1,
        "{} marked it Ready more than once",
        run.filter.name()
    );
}

/// The table as the chapter prints it.
pub fn ready_table(runs: &[ReadyRun]) -> String {
    let mut out = String::from(
        "| predicate | status writes | status-only updates delivered | heard by the handler | reconciles | marked Ready at (ms) | final generation |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in runs {
        let at = r
            .marked_at_ms
            .map_or_else(|| "never (1 h)".to_owned(), |ms| ms.to_string());
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.filter.name(),
            r.status_writes,
            r.status_only_delivered,
            r.status_only_heard,
            r.reconciles,
            at,
            r.generation
        );
    }
    out
}

/// Chapter 17: a controller that reacts to status never hears it behind
/// `GenerationChanged`; the remedy's cost in reconciles.
pub fn ch17_status_predicate() {
    let runs = ready_runs();
    for r in runs.iter().filter(|r| r.filter != Filter::Generation) {
        check_marked(r);
    }
    // book: ch17_status_claims
    let row = |f: Filter| runs.iter().find(|r| r.filter == f).unwrap();
    let none = row(Filter::None);
    let dropped = row(Filter::Generation);
    let spec = row(Filter::GenerationThenSpec);
    let remedy = row(Filter::GenerationOrReady);
    for r in &runs {
        assert_eq!(r.status_writes, 3 + 59); // 3 readiness writes, 59 heartbeats
        assert_eq!(r.status_only_delivered, r.status_writes); // each one reached the controller
    }
    assert_eq!((none.status_only_heard, none.reconciles), (62, 63));
    assert_eq!(none.marked_at_ms, Some(3000)); // the third readiness write
    assert_eq!((dropped.status_only_heard, dropped.reconciles), (0, 1));
    assert_eq!(dropped.marked_at_ms, None); // never, within the hour
    assert_eq!((spec.status_only_heard, spec.reconciles), (0, 2));
    assert_eq!(spec.marked_at_ms, Some(1_830_000)); // at the spec change, 30 minutes late
    assert_eq!((remedy.status_only_heard, remedy.reconciles), (3, 4));
    assert_eq!(remedy.marked_at_ms, Some(3000));
    // book: end ch17_status_claims
    crate::kit::snap::text("ch17_status_predicate", ready_table(&runs));
}
