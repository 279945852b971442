//! Chapter 17's experiments: the first write a reconciler makes. A stale update and its 409,
//! client-go's `RetryOnConflict` under a write storm, chapter 08's status record reading its own
//! previous write from a cache that is behind it, the three remedies, and server-side apply
//! (refused by the embedded server; two managers on a real kube-apiserver in [`apply`]).
//!
//! Follows client-go v0.37.2 `util/retry/util.go` for the retry ([`controlloop::retry`]);
//! kubernetes/kubernetes v1.37.2 `pkg/controller/controller_utils.go` (`ControllerExpectations`)
//! for the expectations pattern. The stale cache is the embedded server's watch delay
//! ([`Cluster::delay_watch_events`]): a write is answered at once and its event reaches
//! watchers later.
//!
//! ```text
//!  t0 switch-on ─► server ──(watch delay D)──► informer cache ─► reconcile: act, write status
//!  t0+5..15 ms spec changes ───────────────────┘    ▲                    │
//!                                                   └─(D)── status event ┘
//!  a reconcile between the status write and its event reads a cache without the record
//! ```
//!
//! Everything runs under tokio's paused clock against the embedded server in-process: every
//! count and every instant is exact and repeats exactly.
//!
//! # Invariants
//! 1. Every design of [`stale_cache`] runs the same writes at the same instants on a fresh
//!    cluster, and its actions are counted in chapter 08's [`Actions`] log.
//! 2. A storm's writers all start at the same instant and each increments the counter by one
//!    per successful write: a final value below the successes is a lost update.
//!
//! # Differences from upstream
//! - The expectations here are one resourceVersion per key (the write the controller waits to
//!   hear), without upstream's five-minute expiry; `ControllerExpectations` counts expected
//!   creations and deletions and gives up waiting after `ExpectationsTimeout`.

use std::{
    collections::HashMap,
    fmt::Write as _,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use serde::Serialize;
use tokio::time::Instant;

pub mod apply;
pub mod status_predicate;
pub use status_predicate::ch17_status_predicate;

use crate::lab::designs::status_record::{
    Actions, ENABLED, OBJECT, RecordCounts, Start, WORK, enabled, recorded, set_annotation,
    start_record,
};
use crate::lab::rig::{self, Informer, NAMESPACE, Running, object, value_of, within};
use crate::lab::rig::{Widget, WidgetSpec};
use controlloop::{
    apiserver::{Cluster, ServerOptions},
    cache::{InformerOptions, SharedIndexInformer},
    controller::{
        Context, Controller, EnqueueRequestForObject, Event, EventHandler, ReconcileError,
        ReconcileResult, Request,
    },
    retry::{Backoff, DEFAULT_BACKOFF, DEFAULT_RETRY, is_conflict, retry_on_conflict_seeded},
};

/// The watch delay of the stale-cache runs: three times the status record's reconcile cost ([`WORK`]).
pub const DELAY: Duration = Duration::from_millis(300);
/// What follows the switch-on: `count` spec changes, each `gap` after the one before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FollowUps {
    /// How the chapter's table names it.
    pub name: &'static str,
    /// Spec changes.
    pub count: usize,
    /// The wait before each.
    #[serde(skip)]
    pub gap: Duration,
}

/// One spec change 150 ms after the switch-on: after the first reconcile has written its
/// record (at 100 ms without a delay), inside the window while that record's event is still
/// on its way (with [`DELAY`]).
pub const AFTER: FollowUps = FollowUps {
    name: "1 change at +150 ms",
    count: 1,
    gap: Duration::from_millis(150),
};

/// Three spec changes 5 ms apart: on the server while the first reconcile works, so its key
/// is dirty when it returns.
pub const DURING: FollowUps = FollowUps {
    name: "3 changes at +5, +10, +15 ms",
    count: 3,
    gap: Duration::from_millis(5),
};

/// How long each stale-cache run goes on after the switch-on.
pub const RUN_FOR: Duration = Duration::from_secs(5);
/// A bound on every wait of a run (virtual time).
const LIMIT: Duration = Duration::from_secs(60);

fn api_status(e: &kube::Error) -> Option<&kube::core::Status> {
    match e {
        kube::Error::Api(s) => Some(s),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// A stale update

/// What the server answered one write, as the chapter prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Answer {
    /// The HTTP status (200 for a success).
    pub code: u16,
    /// The Status's reason (empty on success).
    pub reason: String,
    /// The Status's message (empty on success).
    pub message: String,
}

impl Answer {
    /// The answer `r` stands for.
    pub fn of_result<T>(r: &Result<T, kube::Error>) -> Answer {
        match r {
            Ok(_) => Answer {
                code: 200,
                reason: String::new(),
                message: String::new(),
            },
            Err(e) => {
                let s = api_status(e);
                Answer {
                    code: s.map_or(0, |s| s.code),
                    reason: s.map(|s| s.reason.clone()).unwrap_or_default(),
                    message: s.map_or_else(|| e.to_string(), |s| s.message.clone()),
                }
            }
        }
    }
}

/// The stale update and its two endings: the 409, and the write without a resourceVersion
/// that succeeds and erases the other writer's change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stale {
    /// `replace` with the copy read before another writer's change.
    pub stale_replace: Answer,
    /// The same copy with `metadata.resourceVersion` removed.
    pub unconditional_replace: Answer,
    /// The value the other writer set, and the value left after the unconditional write.
    pub other_wrote: u64,
    /// What is stored at the end.
    pub stored: u64,
}

/// Reads a ConfigMap, lets another writer change it, then writes the stale copy back.
pub async fn stale_update(api: &Api<ConfigMap>) -> Stale {
    let pp = PostParams::default();
    api.create(&pp, &object("c", 0))
        .await
        .expect("a fresh ConfigMap");
    // book: ch17_stale
    let mut mine = api.get("c").await.expect("reading it"); // resourceVersion r
    let other = serde_json::json!({ "data": { "value": "1" } });
    api.patch("c", &PatchParams::default(), &Patch::Merge(&other))
        .await
        .expect("another writer's change"); // the object is at r+1 now
    mine.data = Some([("value".to_owned(), "2".to_owned())].into());
    let stale = api.replace("c", &pp, &mine).await; // carries r: 409 Conflict
    mine.metadata.resource_version = None; // no precondition: last write wins
    let unconditional = api.replace("c", &pp, &mine).await; // succeeds, erasing the "1"
    // book: end ch17_stale
    let stored = value_of(&api.get("c").await.expect("reading it back")).unwrap_or(0);
    Stale {
        stale_replace: Answer::of_result(&stale),
        unconditional_replace: Answer::of_result(&unconditional),
        other_wrote: 1,
        stored,
    }
}

/// Runs [`stale_update`] on a fresh embedded server.
pub fn stale() -> Stale {
    rig::paused(async {
        let api = Api::namespaced(
            Cluster::new(ServerOptions::default()).in_process_client(),
            NAMESPACE,
        );
        stale_update(&api).await
    })
}

/// Chapter 17: a stale update gets 409; without the precondition it erases a write.
pub fn ch17_stale_update() {
    let s = stale();
    assert_eq!(s.stale_replace.code, 409);
    assert_eq!(s.stale_replace.reason, "Conflict");
    assert_eq!(s.unconditional_replace.code, 200);
    assert_eq!(
        s.stored, 2,
        "the unconditional write erased the other writer's 1"
    );
    crate::kit::snap::yaml("ch17_stale_update", &s, vec![]);
}

// ---------------------------------------------------------------------------------------------
// A write storm under RetryOnConflict

/// One storm: `writers` clients increment one counter at the same instant, each once, each
/// inside `retry_on_conflict`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StormRow {
    /// Concurrent writers.
    pub writers: u64,
    /// Which backoff (`DefaultRetry` or `DefaultBackoff`).
    pub backoff: &'static str,
    /// Writers whose increment landed.
    pub succeeded: u64,
    /// Writers that gave up with the last 409.
    pub gave_up: u64,
    /// Read-modify-write attempts, all writers together.
    pub attempts: u64,
    /// 409s answered.
    pub conflicts: u64,
    /// The counter at the end.
    pub stored: u64,
    /// Virtual milliseconds from the start to the last writer's return.
    pub took_ms: u64,
}

/// How a writer writes: faithfully (read again on every attempt, write with the
/// resourceVersion read), or broken (no precondition: every write succeeds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Writes {
    /// `get`, increment, `replace` with the resourceVersion read.
    Conditional,
    /// **Broken**: the same, with the resourceVersion removed before the `replace`.
    Unconditional,
}

/// Runs one storm on a fresh embedded server.
pub async fn storm(writers: u64, backoff: Backoff, name: &'static str, writes: Writes) -> StormRow {
    let api: Api<ConfigMap> = Api::namespaced(
        Cluster::new(ServerOptions::default()).in_process_client(),
        NAMESPACE,
    );
    let pp = PostParams::default();
    api.create(&pp, &object("n", 0))
        .await
        .expect("a fresh counter");
    let (attempts, conflicts) = (AtomicU64::new(0), AtomicU64::new(0));
    let start = Instant::now();
    let (attempts_, conflicts_, api, pp) = (&attempts, &conflicts, &api, &pp);
    let one = |writer: u64| async move {
        let (attempts, conflicts) = (attempts_, conflicts_);
        // book: ch17_retry
        retry_on_conflict_seeded(backoff, writer, || async {
            // seeded jitter: repeats exactly
            attempts.fetch_add(1, Ordering::SeqCst);
            let mut counter = api.get("n").await?; // read again on every attempt
            let next = value_of(&counter).unwrap_or(0) + 1;
            counter.data = Some([("value".to_owned(), next.to_string())].into());
            if writes == Writes::Unconditional {
                counter.metadata.resource_version = None; // broken: no precondition
            }
            let written = api.replace("n", pp, &counter).await;
            if written.as_ref().is_err_and(is_conflict) {
                conflicts.fetch_add(1, Ordering::SeqCst);
            }
            written
        })
        .await
        // book: end ch17_retry
    };
    let results = within(
        LIMIT,
        "a storm of retrying writers (a retry that never ends?)",
        futures::future::join_all((0..writers).map(one)),
    )
    .await;
    let took_ms = start.elapsed().as_millis() as u64;
    let succeeded = results.iter().filter(|r| r.is_ok()).count() as u64;
    let gave_up = results
        .iter()
        .filter(|r| r.as_ref().is_err_and(is_conflict))
        .count() as u64;
    assert_eq!(succeeded + gave_up, writers, "only 409s may end a writer");
    let stored = value_of(&api.get("n").await.expect("reading the counter")).unwrap_or(0);
    StormRow {
        writers,
        backoff: name,
        succeeded,
        gave_up,
        attempts: attempts.into_inner(),
        conflicts: conflicts.into_inner(),
        stored,
        took_ms,
    }
}

/// The writer counts the storm table sweeps.
pub const WRITERS: [u64; 5] = [1, 2, 4, 8, 16];

/// The storm table: [`WRITERS`] against `DefaultRetry` and `DefaultBackoff`.
pub fn storms(writes: Writes) -> Vec<StormRow> {
    rig::paused(async {
        let mut rows = Vec::new();
        for (backoff, name) in [
            (DEFAULT_RETRY, "DefaultRetry"),
            (DEFAULT_BACKOFF, "DefaultBackoff"),
        ] {
            for n in WRITERS {
                rows.push(storm(n, backoff, name, writes).await);
            }
        }
        rows
    })
}

/// The storm's claims: no update is lost (the counter equals the successes), every attempt
/// that did not land was a 409, and under `DefaultRetry`, whose jitter stays inside one tick
/// of the clock, the writers move in rounds with one winner each: `min(writers, 5)` land,
/// after `sum(writers - i, i < 5)` attempts.
pub fn check_storms(rows: &[StormRow]) {
    for r in rows {
        assert_eq!(
            r.stored, r.succeeded,
            "a lost update: {} writes succeeded but the counter says {}",
            r.succeeded, r.stored
        );
        assert_eq!(
            r.conflicts,
            r.attempts - r.succeeded,
            "every other attempt is a 409"
        );
        if r.backoff == "DefaultRetry" {
            let rounds = r.writers.min(5);
            let attempts: u64 = (0..rounds).map(|i| r.writers - i).sum();
            let got = (r.succeeded, r.attempts);
            assert_eq!(got, (rounds, attempts), "one winner per round: {r:?}");
        }
    }
}

/// The storm table as the chapter prints it.
pub fn storms_table(rows: &[StormRow]) -> String {
    let mut out = String::from(
        "| backoff | writers | landed | gave up (409) | attempts | 409s | counter | took (virtual ms) |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            r.backoff,
            r.writers,
            r.succeeded,
            r.gave_up,
            r.attempts,
            r.conflicts,
            r.stored,
            r.took_ms
        );
    }
    out
}

/// Chapter 17: what a write storm costs under `RetryOnConflict`.
pub fn ch17_retry_storm() {
    let rows = storms(Writes::Conditional);
    check_storms(&rows);
    crate::kit::snap::text("ch17_retry_storm", storms_table(&rows));
}

// ---------------------------------------------------------------------------------------------
// A cache behind the controller's own write

/// How the status record guards against reading a cache that is behind its own last write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Remedy {
    /// Chapter 08's status record as it is: read the cache, act, write the record.
    None,
    /// Write the record first, with the cached resourceVersion as a precondition; act only if
    /// the server took it (a 409 is retried through the queue).
    Precondition,
    /// Keep the object each status write returned, and read it instead of the cache until the
    /// cache has heard that write.
    Response,
    /// After a status write, expect its event: skip the key's reconciles until the event
    /// arrives (the expectations pattern).
    Expectations,
}

impl Remedy {
    /// Every design, in the order the chapter's table shows them.
    pub const ALL: [Remedy; 4] = [
        Remedy::None,
        Remedy::Precondition,
        Remedy::Response,
        Remedy::Expectations,
    ];

    /// How this design's controller is built.
    pub fn start(self) -> Start {
        match self {
            Remedy::None => start_record,
            Remedy::Precondition => start_precondition,
            Remedy::Response => start_response,
            Remedy::Expectations => start_expectations,
        }
    }
}

/// The record a status record writes: the level acted on and the generation seen.
pub fn record(now: bool, generation: Option<i64>) -> serde_json::Value {
    serde_json::json!({
        "message": format!("acted on enabled={now}"),
        "observedGeneration": generation,
    })
}

/// Whether `w`'s record already covers its level and generation (the status record's early return).
pub fn up_to_date(w: &Widget) -> bool {
    let observed = w.status.as_ref().and_then(|s| s.observed_generation);
    recorded(w) == Some(enabled(w)) && observed == w.metadata.generation
}

/// [`Remedy::Precondition`]: claim the action with a conditional status write, then act.
// book: ch17_precondition
pub async fn precondition_reconcile(
    api: Api<Widget>,
    actions: Arc<Actions>,
    request: Request,
    ctx: Context<Widget>,
) -> Result<ReconcileResult, ReconcileError> {
    let Some(widget) = ctx.get(&request) else {
        return Ok(ReconcileResult::done());
    };
    if up_to_date(&widget) {
        return Ok(ReconcileResult::done());
    }
    tokio::time::sleep(WORK).await; // the reconcile's own work
    let now = enabled(&widget);
    let patch = serde_json::json!({
        "metadata": { "resourceVersion": widget.metadata.resource_version }, // the copy we read
        "status": record(now, widget.metadata.generation),
    });
    api.patch_status(
        &request.name,
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(ReconcileError::retry)?; // 409 if the cache was behind: retried via the queue
    if now && recorded(&widget) != Some(true) {
        actions.act(); // the server took our claim: nobody else acted on this copy
    }
    Ok(ReconcileResult::done())
}
// book: end ch17_precondition

/// [`Remedy::Precondition`]'s controller.
pub fn start_precondition(
    informer: &Informer<Widget>,
    api: &Api<Widget>,
    actions: Arc<Actions>,
    _: Arc<RecordCounts>,
) -> Controller<Widget> {
    let api = api.clone();
    Controller::builder("record-precondition")
        .build(informer, move |request, ctx| {
            precondition_reconcile(api.clone(), actions.clone(), request, ctx)
        })
        .expect("a named controller on a fresh informer builds")
}

/// What the status record does once it has decided to: work, act on a switch-on its record has not
/// seen, and write the record; returns the write's response.
// book: ch17_act_and_record
pub async fn act_and_record(
    api: &Api<Widget>,
    actions: &Actions,
    widget: &Widget,
) -> Result<Widget, ReconcileError> {
    tokio::time::sleep(WORK).await; // the reconcile's own work
    let now = enabled(widget);
    if now && recorded(widget) != Some(true) {
        actions.act(); // the launch notice
    }
    let patch = serde_json::json!({ "status": record(now, widget.metadata.generation) });
    let name = widget.metadata.name.as_deref().unwrap_or_default();
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(ReconcileError::retry)
}
// book: end ch17_act_and_record

/// Per key, the object a status write of ours returned, until the cache has heard it.
pub type Written = Arc<Mutex<HashMap<String, Arc<Widget>>>>;

/// An event handler that first lets `heard` see each event's new object, then enqueues as
/// [`EnqueueRequestForObject`] does: a handler that updates bookkeeping before the request
/// can run, as the ReplicaSet controller's handlers lower expectations before they enqueue.
pub struct HearThenEnqueue<F>(pub F);

impl<F: Fn(&Widget) + Send + Sync> EventHandler<Widget> for HearThenEnqueue<F> {
    fn handle(&self, event: &Event<Widget>, enqueue: &mut dyn FnMut(Request)) {
        match event {
            Event::Update { new: Some(new), .. } => (self.0)(new),
            Event::Create { object, .. } => (self.0)(object),
            _ => {}
        }
        EnqueueRequestForObject.handle(event, enqueue);
    }
}

fn rv(w: &Widget) -> Option<&str> {
    w.metadata.resource_version.as_deref()
}

/// [`Remedy::Response`]: read the write's response until the cache has caught up with it.
// book: ch17_response
pub async fn response_reconcile(
    api: Api<Widget>,
    actions: Arc<Actions>,
    written: Written,
    request: Request,
    ctx: Context<Widget>,
) -> Result<ReconcileResult, ReconcileError> {
    let Some(cached) = ctx.get(&request) else {
        return Ok(ReconcileResult::done());
    };
    let ours = written.lock().get(&request.name).cloned();
    let widget = ours.unwrap_or(cached); // our last write is newer than a cache that lacks it
    if up_to_date(&widget) {
        return Ok(ReconcileResult::done());
    }
    let response = act_and_record(&api, &actions, &widget).await?; // as the status record does
    written.lock().insert(request.name, Arc::new(response)); // what the server now holds
    Ok(ReconcileResult::done())
}
// book: end ch17_response

/// [`Remedy::Response`]'s controller: its handler forgets a kept response once the cache has
/// heard it.
pub fn start_response(
    informer: &Informer<Widget>,
    api: &Api<Widget>,
    actions: Arc<Actions>,
    _: Arc<RecordCounts>,
) -> Controller<Widget> {
    let (api, written): (_, Written) = (api.clone(), Arc::default());
    let heard = written.clone();
    Controller::builder("record-response")
        .with_handler(HearThenEnqueue(move |new: &Widget| {
            let mut kept = heard.lock();
            let name = new.metadata.name.clone().unwrap_or_default();
            if kept.get(&name).is_some_and(|w| rv(w) == rv(new)) {
                kept.remove(&name); // the cache has it now
            }
        }))
        .build(informer, move |request, ctx| {
            response_reconcile(api.clone(), actions.clone(), written.clone(), request, ctx)
        })
        .expect("a named controller on a fresh informer builds")
}

/// Per key, the resourceVersion of a status write of ours whose event has not arrived.
pub type Expected = Arc<Mutex<HashMap<String, String>>>;

/// [`Remedy::Expectations`]: while our own write's event is on its way, do nothing.
// book: ch17_expectations
pub async fn expectations_reconcile(
    api: Api<Widget>,
    actions: Arc<Actions>,
    expected: Expected,
    request: Request,
    ctx: Context<Widget>,
) -> Result<ReconcileResult, ReconcileError> {
    if expected.lock().contains_key(&request.name) {
        return Ok(ReconcileResult::done()); // our write's event will bring the key back
    }
    let Some(widget) = ctx.get(&request) else {
        return Ok(ReconcileResult::done());
    };
    if up_to_date(&widget) {
        return Ok(ReconcileResult::done());
    }
    let response = act_and_record(&api, &actions, &widget).await?; // as the status record does
    let rv = response.metadata.resource_version.unwrap_or_default();
    expected.lock().insert(request.name, rv); // until the handler hears it
    Ok(ReconcileResult::done())
}
// book: end ch17_expectations

/// [`Remedy::Expectations`]'s controller: its handler lowers the expectation when the
/// awaited event arrives, then enqueues.
pub fn start_expectations(
    informer: &Informer<Widget>,
    api: &Api<Widget>,
    actions: Arc<Actions>,
    _: Arc<RecordCounts>,
) -> Controller<Widget> {
    let (api, expected): (_, Expected) = (api.clone(), Arc::default());
    let heard = expected.clone();
    Controller::builder("record-expectations")
        .with_handler(HearThenEnqueue(move |new: &Widget| {
            let mut waiting = heard.lock();
            let name = new.metadata.name.clone().unwrap_or_default();
            if waiting.get(&name).map(String::as_str) == rv(new) {
                waiting.remove(&name); // observed: the next reconcile reads a cache that has it
            }
        }))
        .build(informer, move |request, ctx| {
            expectations_reconcile(api.clone(), actions.clone(), expected.clone(), request, ctx)
        })
        .expect("a named controller on a fresh informer builds")
}

/// One design's stale-cache run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StaleRun {
    /// The design.
    pub remedy: Remedy,
    /// The writes after the switch-on.
    pub follow: &'static str,
    /// The watch delay, in milliseconds.
    pub delay_ms: u64,
    /// Launch notices sent for the one switch-on (a correct controller sends 1).
    pub notices: u64,
    /// Reconciles after the switch-on.
    pub reconciles: u64,
    /// Status writes the server took after the switch-on.
    pub status_writes: u64,
    /// Status writes it refused with 409.
    pub conflicts: u64,
    /// Virtual milliseconds from the switch-on until the server's record says "acted on
    /// enabled=true" at the widget's final generation.
    pub recorded_after_ms: u64,
}

/// Runs `remedy`'s controller through the switch-on and its follow-ups with a watch `delay`.
pub async fn stale_cache_async(remedy: Remedy, follow: FollowUps, delay: Duration) -> StaleRun {
    let cluster = rig::widget_cluster().await;
    let api: Api<Widget> = Api::namespaced(cluster.in_process_client(), NAMESPACE);
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
    let informer = Arc::new(SharedIndexInformer::new(
        api.clone(),
        InformerOptions::new(Duration::ZERO),
    ));
    let actions = Arc::new(Actions::default());
    let controller = (remedy.start())(&informer, &api, actions.clone(), Arc::default());
    let running = Running::start(&informer, &controller);
    tokio::time::sleep(Duration::from_secs(1)).await; // listed, and "acted on enabled=false"
    let (before, reconciled) = (actions.count(), controller.metrics().reconciles());
    cluster.clear_requests();
    // book: ch17_stale_cache
    cluster.delay_watch_events(delay); // every event reaches the informer `delay` late
    let t0 = Instant::now();
    set_annotation(&api, true).await; // the one switch-on: one notice is right
    for color in ["green", "blue", "amber"].into_iter().take(follow.count) {
        tokio::time::sleep(follow.gap).await;
        let patch = Patch::Merge(serde_json::json!({ "spec": { "color": color } }));
        let changed = api.patch(OBJECT, &PatchParams::default(), &patch).await;
        changed.expect("a spec change"); // a new generation, its event on the way
    }
    // book: end ch17_stale_cache
    let recorded_after_ms = within(
        LIMIT,
        "the record never caught up (a lost reconcile?)",
        async {
            loop {
                let now = api.get(OBJECT).await.expect("reading the widget");
                if recorded(&now) == Some(true) && up_to_date(&now) {
                    return t0.elapsed().as_millis() as u64;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        },
    )
    .await;
    tokio::time::sleep_until(t0 + RUN_FOR).await;
    running.stop().await;
    let status_patches = |code: u16| {
        cluster
            .requests()
            .iter()
            .filter(|r| r.method == "PATCH" && r.path.ends_with("/status") && r.status == code)
            .count() as u64
    };
    StaleRun {
        remedy,
        follow: follow.name,
        delay_ms: delay.as_millis() as u64,
        notices: actions.count() - before,
        reconciles: controller.metrics().reconciles() - reconciled,
        status_writes: status_patches(200),
        conflicts: status_patches(409),
        recorded_after_ms,
    }
}

/// Every design, after [`AFTER`] and [`DURING`], without a watch delay and with [`DELAY`].
pub fn stale_cache() -> Vec<StaleRun> {
    rig::paused(async {
        let mut runs = Vec::new();
        for follow in [AFTER, DURING] {
            for delay in [Duration::ZERO, DELAY] {
                for remedy in Remedy::ALL {
                    runs.push(stale_cache_async(remedy, follow, delay).await);
                }
            }
        }
        runs
    })
}

/// The stale-cache claims: every remedy sends one notice in every run; chapter 08's status record
/// sends one only when nothing reaches its key between its status write and that write's
/// event (a change after the record, without a delay), and more than one otherwise.
pub fn check_stale_cache(runs: &[StaleRun]) {
    for r in runs {
        let window_empty = r.follow == AFTER.name && r.delay_ms == 0;
        if r.remedy == Remedy::None && !window_empty {
            assert!(
                r.notices > 1,
                "the status record behind a stale cache sent {} notice(s), not a duplicate: {r:?}",
                r.notices
            );
        } else {
            assert_eq!(
                r.notices, 1,
                "{:?} ({}, a {} ms watch delay) sent {} notices for one switch-on",
                r.remedy, r.follow, r.delay_ms, r.notices
            );
        }
    }
}

/// The stale-cache table as the chapter prints it.
pub fn stale_cache_table(runs: &[StaleRun]) -> String {
    let mut out = String::from(
        "| after the switch-on | watch delay (ms) | design | notices | reconciles | status writes | 409s | recorded after (ms) |\n\
         |---|---:|---|---:|---:|---:|---:|---:|\n",
    );
    for r in runs {
        let _ = writeln!(
            out,
            "| {} | {} | {:?} | {} | {} | {} | {} | {} |",
            r.follow,
            r.delay_ms,
            r.remedy,
            r.notices,
            r.reconciles,
            r.status_writes,
            r.conflicts,
            r.recorded_after_ms
        );
    }
    out
}

/// Chapter 17: the status record acts twice behind a stale cache; each remedy, and its cost.
pub fn ch17_stale_cache() {
    let runs = stale_cache();
    check_stale_cache(&runs);
    crate::kit::snap::text("ch17_stale_cache", stale_cache_table(&runs));
}

// ---------------------------------------------------------------------------------------------
// Server-side apply

/// What the embedded server answers a server-side apply of a `Widget`.
pub fn apply_refused() -> Answer {
    rig::paused(async {
        let api: Api<Widget> =
            Api::namespaced(rig::widget_cluster().await.in_process_client(), NAMESPACE);
        let w = Widget::new(
            OBJECT,
            WidgetSpec {
                replicas: 1,
                color: Some("red".into()),
            },
        );
        // book: ch17_apply
        let params = PatchParams::apply("lab-manager").force(); // a field manager, forced
        let applied = api.patch(OBJECT, &params, &Patch::Apply(&w)).await;
        // book: end ch17_apply
        Answer::of_result(&applied)
    })
}

/// Chapter 17: the embedded server refuses server-side apply with a Status that says why.
pub fn ch17_apply_refused() {
    let a = apply_refused();
    assert_eq!(a.code, 415);
    assert!(a.message.contains("apply"), "{}", a.message);
    crate::kit::snap::yaml("ch17_apply_refused", &a, vec![]);
}
