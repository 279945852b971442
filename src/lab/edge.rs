//! Chapter 07's experiment: one write storm, two controllers side by side — the
//! level-triggered [`Controller`] (a queue of keys) and an edge-triggered one that queues each
//! event's payload — and what the second one loses.
//!
//! No upstream file: the edge-triggered design is the one client-go and controller-runtime
//! avoid. It is built here from the very same parts (the same informer, the same
//! [`RateLimitingQueue`], the same worker loop over the claim API); the only change is what goes
//! into the queue.
//!
//! ```text
//!                          ┌► informer ─► EnqueueRequestForObject ─► queue of Request ─► read the cache,
//!  writer: replicas 1..=N  │                                                              set replicas
//!  ──► API server ─watch───┤
//!                          └► informer ─► the event's payload ─────► queue of Payload ─► apply the change
//!                                                                                        the event carried
//!  each controller drives its own Downstream: the world it manages (replicas per widget)
//! ```
//!
//! Everything runs under tokio's paused clock against the embedded server in-process, so every
//! number in a [`Report`] is exact and the same on every run.
//!
//! # Invariants
//! 1. Both designs see the same writes, pay the same cost per reconcile (one [`Downstream`]
//!    command of `cost` each) and retry a failed command through `add_rate_limited`.
//! 2. The edge design's queue is a real `RateLimitingQueue`: it deduplicates equal items and
//!    never hands one item to two workers. Its payloads are simply never equal (each carries
//!    its event's resourceVersion), so neither guarantee ever applies.
//! 3. A killed controller loses everything in memory (informer cache, queue, workers); only
//!    the cluster and the downstreams survive.
//!
//! # Concurrency
//! One current-thread runtime. The downstream's state is a `parking_lot` mutex, never held
//! across an await; the command's cost is a tokio sleep taken with the lock released, so two
//! workers can be inside one key's command at once — which the same-key detector counts.

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
use tokio::{task::JoinHandle, time::Instant};

use crate::{
    apiserver::{Cluster, ServerOptions},
    cache::shared_informer::{
        DeletedObject, InformerOptions, ResourceEventHandler, SharedIndexInformer,
    },
    controller::{Context, Controller, Error, Request, Result as ReconcileResult},
    resources::{Widget, WidgetSpec},
    workqueue::{RateLimitingQueue, default_controller_rate_limiter},
};

/// The namespace of the experiment's widget.
pub const NAMESPACE: &str = "default";
/// The widget every write goes to.
pub const OBJECT: &str = "w";

/// What an edge-triggered controller queues: the change an event announced.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub enum Change {
    /// The object appeared with this many replicas.
    Created {
        /// `spec.replicas` in the event.
        replicas: i32,
    },
    /// `spec.replicas` went from `from` to `to` (the event's old and new objects).
    Updated {
        /// The old object's replicas.
        from: i32,
        /// The new object's replicas.
        to: i32,
    },
    /// The object went away.
    Deleted,
}

/// One queued event: which object, which version of it, and what changed. Two payloads are
/// equal only if they come from the same event (keeps I2).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Payload {
    /// The object.
    pub request: Request,
    /// The resourceVersion the event carried.
    pub resource_version: String,
    /// What it announced.
    pub change: Change,
}

/// What a reconcile asks the downstream system to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Run exactly this many replicas (create if absent).
    Set(i32),
    /// Create with this many replicas; if it already exists, nothing to do.
    CreateIfAbsent(i32),
    /// Remove.
    Delete,
}

/// The downstream refused a command; retrying later may work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("downstream unavailable, try again")]
pub struct Unavailable;

/// The world a controller manages: replicas per widget key. Every command takes `cost`
/// (a tokio sleep) and counts as one reconcile. It also carries the same-key detector: how many
/// commands for one key ran at the same time.
pub struct Downstream {
    cost: Duration,
    state: Mutex<World>,
}

#[derive(Default)]
struct World {
    replicas: HashMap<String, i32>,
    running: HashMap<String, u32>,
    max_per_key: u32,
    overlapping: u64,
    commands: u64,
    fail_next: u64,
    failures: u64,
    /// `(when, value)` each time [`OBJECT`]'s value changed.
    history: Vec<(Instant, Option<i32>)>,
}

/// Leaves the detector's count for a key when a command ends, even if its task is aborted
/// (a killed controller).
struct Holding<'a> {
    downstream: &'a Downstream,
    key: String,
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        let mut w = self.downstream.state.lock();
        if let Some(n) = w.running.get_mut(&self.key) {
            *n -= 1;
        }
    }
}

impl Downstream {
    /// A world where every command takes `cost`.
    pub fn new(cost: Duration) -> Arc<Self> {
        Arc::new(Downstream {
            cost,
            state: Mutex::new(World::default()),
        })
    }

    /// Runs one command for `key`: waits `cost`, then applies it, unless a failure was armed
    /// with [`Downstream::fail_next`].
    pub async fn run(&self, key: &str, command: Command) -> Result<(), Unavailable> {
        let _holding = {
            let mut w = self.state.lock();
            w.commands += 1;
            let n = w.running.entry(key.to_owned()).or_default();
            *n += 1;
            let n = *n;
            if n > 1 {
                w.overlapping += 1;
            }
            w.max_per_key = w.max_per_key.max(n);
            Holding {
                downstream: self,
                key: key.to_owned(),
            }
        };
        if !self.cost.is_zero() {
            tokio::time::sleep(self.cost).await;
        }
        let mut w = self.state.lock();
        if w.fail_next > 0 {
            w.fail_next -= 1;
            w.failures += 1;
            return Err(Unavailable);
        }
        let before = w.replicas.get(key).copied();
        match command {
            Command::Set(n) => {
                w.replicas.insert(key.to_owned(), n);
            }
            Command::CreateIfAbsent(n) => {
                w.replicas.entry(key.to_owned()).or_insert(n);
            }
            Command::Delete => {
                w.replicas.remove(key);
            }
        }
        let after = w.replicas.get(key).copied();
        if after != before && key.ends_with(&format!("/{OBJECT}")) {
            w.history.push((Instant::now(), after));
        }
        Ok(())
    }

    /// The next `n` commands to finish fail with [`Unavailable`] (a transient outage).
    pub fn fail_next(&self, n: u64) {
        self.state.lock().fail_next = n;
    }

    /// Replicas running for `key` (`namespace/name`), if any.
    pub fn replicas(&self, key: &str) -> Option<i32> {
        self.state.lock().replicas.get(key).copied()
    }

    /// Commands run so far: one per reconcile.
    pub fn commands(&self) -> u64 {
        self.state.lock().commands
    }

    /// The same-key detector: the most commands for one key that ever ran at once.
    pub fn max_holders_per_key(&self) -> u32 {
        self.state.lock().max_per_key
    }

    /// Commands that started while another command for the same key was running.
    pub fn overlapping(&self) -> u64 {
        self.state.lock().overlapping
    }

    fn failures(&self) -> u64 {
        self.state.lock().failures
    }

    /// When [`OBJECT`] last changed value at or after `since`, and to what.
    fn last_change(&self) -> Option<(Instant, Option<i32>)> {
        self.state.lock().history.last().copied()
    }
}

/// The two designs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Design {
    /// controller-runtime's: queue the key, read the level from the cache.
    Level,
    /// Queue the event's payload and apply the change it carries.
    Edge,
}

type Informer = SharedIndexInformer<Widget, Api<Widget>>;

/// The edge design's informer handler: turns each callback into a [`Payload`] and queues it.
struct QueuePayloads {
    queue: RateLimitingQueue<Payload>,
    heard: Arc<AtomicU64>,
}

impl QueuePayloads {
    fn push(&self, object: &Widget, change: Change) {
        self.heard.fetch_add(1, Ordering::SeqCst);
        let meta = &object.metadata;
        self.queue.add(Payload {
            request: Request::new(
                meta.namespace.clone().unwrap_or_default(),
                meta.name.clone().unwrap_or_default(),
            ),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            change,
        });
    }
}

impl ResourceEventHandler<Widget> for QueuePayloads {
    fn on_add(&self, object: Arc<Widget>, _: bool) {
        let replicas = object.spec.replicas;
        self.push(&object, Change::Created { replicas });
    }
    fn on_update(&self, old: Arc<Widget>, new: Arc<Widget>) {
        let (from, to) = (old.spec.replicas, new.spec.replicas);
        self.push(&new, Change::Updated { from, to });
    }
    fn on_delete(&self, deleted: DeletedObject<Widget>) {
        if let Some(object) = deleted.object() {
            self.push(object, Change::Deleted);
        }
    }
}

/// The edge design's worker: take a payload, apply its change, retry it rate-limited on
/// failure. The claim releases the payload (`done`) whatever happens.
async fn edge_worker(queue: RateLimitingQueue<Payload>, downstream: Arc<Downstream>) {
    while let Some(claim) = queue.claim().await {
        let payload = claim.item().clone();
        let command = match payload.change {
            Change::Created { replicas } => Command::CreateIfAbsent(replicas),
            Change::Updated { to, .. } => Command::Set(to),
            Change::Deleted => Command::Delete,
        };
        match downstream.run(&payload.request.key(), command).await {
            Ok(()) => claim.forget(),
            Err(Unavailable) => claim.add_rate_limited(),
        }
    }
}

enum Queue {
    Level(Controller<Widget>),
    Edge(RateLimitingQueue<Payload>, Arc<AtomicU64>),
}

/// One controller process: its informer, its queue, its workers. [`Process::kill`] loses all of
/// it (keeps I3).
pub struct Process {
    queue: Queue,
    tasks: Vec<JoinHandle<()>>,
}

impl Process {
    /// Starts a controller of `design` with `workers` workers against `client`, driving
    /// `downstream`. Its informer lists at once.
    pub fn start(
        design: Design,
        client: &kube::Client,
        downstream: Arc<Downstream>,
        workers: usize,
    ) -> Process {
        let api: Api<Widget> = Api::namespaced(client.clone(), NAMESPACE);
        let informer: Arc<Informer> = Arc::new(SharedIndexInformer::new(
            api,
            InformerOptions::new(Duration::ZERO),
        ));
        let mut tasks = Vec::new();
        let queue = match design {
            Design::Level => {
                let controller = Controller::builder("level")
                    .max_concurrent_reconciles(workers)
                    .build(&informer, move |req: Request, ctx: Context<Widget>| {
                        let downstream = downstream.clone();
                        async move {
                            // The level: whatever the cache holds now.
                            let command = match ctx.get(&req) {
                                Some(w) => Command::Set(w.spec.replicas),
                                None => Command::Delete,
                            };
                            downstream
                                .run(&req.key(), command)
                                .await
                                .map_err(Error::retry)?;
                            Ok(ReconcileResult::done())
                        }
                    })
                    .expect("a named controller on a fresh informer builds");
                let c = controller.clone();
                tasks.push(tokio::spawn(async move {
                    let _ = c.run(futures::future::pending()).await;
                }));
                Queue::Level(controller)
            }
            Design::Edge => {
                let queue = RateLimitingQueue::new(default_controller_rate_limiter());
                let heard = Arc::new(AtomicU64::new(0));
                informer
                    .add_event_handler(QueuePayloads {
                        queue: queue.clone(),
                        heard: heard.clone(),
                    })
                    .expect("a fresh informer accepts handlers");
                for _ in 0..workers.max(1) {
                    tasks.push(tokio::spawn(edge_worker(queue.clone(), downstream.clone())));
                }
                Queue::Edge(queue, heard)
            }
        };
        let inf = informer.clone();
        tasks.push(tokio::spawn(async move {
            inf.run(futures::future::pending()).await
        }));
        Process { queue, tasks }
    }

    /// Informer callbacks this process has heard.
    pub fn events(&self) -> u64 {
        match &self.queue {
            Queue::Level(c) => c.metrics().events,
            Queue::Edge(_, heard) => heard.load(Ordering::SeqCst),
        }
    }

    /// Nothing queued, waiting or running.
    pub fn idle(&self) -> bool {
        match &self.queue {
            Queue::Level(c) => {
                let q = c.queue();
                q.len() + q.waiting_len() == 0 && c.metrics().active_workers == 0
            }
            Queue::Edge(q, _) => q.len() + q.waiting_len() == 0,
        }
    }

    /// Kills the process at once: tasks aborted mid-reconcile, queue and cache gone.
    pub fn kill(self) {
        for t in &self.tasks {
            t.abort();
        }
        match &self.queue {
            Queue::Level(c) => c.abort(),
            Queue::Edge(q, _) => q.shut_down(),
        }
    }
}

/// One storm's setup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Params {
    /// Writes: `spec.replicas` = 1..=writes.
    pub writes: u64,
    /// Wait between writes.
    pub gap: Duration,
    /// Cost of one reconcile (one downstream command).
    pub cost: Duration,
    /// Workers per controller.
    pub workers: usize,
    /// Arm one transient downstream failure, for each design, just before the first write.
    pub fail_first_command: bool,
    /// Kill both controllers right after this write; restart them after the last write.
    pub kill_after_write: Option<u64>,
}

impl Params {
    /// The essay's storm: 200 writes 1 ms apart, a 20 ms reconcile, one worker each.
    pub fn essay() -> Self {
        Params {
            writes: 200,
            gap: Duration::from_millis(1),
            cost: Duration::from_millis(20),
            workers: 1,
            fail_first_command: false,
            kill_after_write: None,
        }
    }
    /// With `n` writes.
    pub fn writes(self, n: u64) -> Self {
        Params { writes: n, ..self }
    }
    /// With `n` workers per controller.
    pub fn workers(self, n: usize) -> Self {
        Params { workers: n, ..self }
    }
    /// With one transient failure of the first command after the burst starts.
    pub fn fail_first_command(self) -> Self {
        Params {
            fail_first_command: true,
            ..self
        }
    }
    /// Killing both controllers after write `k`, restarting them after the burst.
    pub fn kill_after(self, k: u64) -> Self {
        Params {
            kill_after_write: Some(k),
            ..self
        }
    }
}

/// What one design did in one storm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// Informer callbacks heard from the first write on, over all its processes.
    pub events: u64,
    /// Reconciles (downstream commands) from the first write on.
    pub reconciles: u64,
    /// Commands that failed transiently (and were retried).
    pub failures: u64,
    /// The same-key detector: most reconciles of one object running at once (1 is correct).
    pub max_holders_per_key: u32,
    /// Reconciles that started while another one for the same object ran.
    pub overlapping_reconciles: u64,
    /// Replicas the downstream runs at the end.
    pub final_replicas: Option<i32>,
    /// Whether that equals the last value written.
    pub ends_right: bool,
    /// Virtual milliseconds from the last write to the downstream's last change, if it ends
    /// right.
    pub converged_ms_after_last_write: Option<u64>,
}

/// One storm, both designs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The storm.
    pub writes: u64,
    /// Gap between writes, ms.
    pub gap_ms: u64,
    /// Cost of a reconcile, ms.
    pub cost_ms: u64,
    /// Workers per controller.
    pub workers: usize,
    /// Both controllers were killed right after this write and restarted after the last.
    pub killed_after_write: Option<u64>,
    /// The last value written.
    pub last_written: i32,
    /// GETs of the widget the server logged during the whole run: reconciles read the
    /// informer's cache, not the server.
    pub widget_gets: usize,
    /// The level-triggered controller.
    pub level: Outcome,
    /// The edge-triggered controller.
    pub edge: Outcome,
}

/// Runs one storm on a fresh paused-clock runtime.
pub fn run(params: &Params) -> Report {
    crate::lab::rig::paused(run_async(params))
}

/// Runs one storm on the current runtime, whose clock must be paused.
pub async fn run_async(params: &Params) -> Report {
    assert!(params.writes >= 1, "a storm needs at least one write");
    let cluster = Cluster::new(ServerOptions::default());
    let client = cluster.in_process_client();
    let api: Api<Widget> = Api::namespaced(client.clone(), NAMESPACE);
    let spec = WidgetSpec {
        replicas: 0,
        color: None,
    };
    api.create(&PostParams::default(), &Widget::new(OBJECT, spec))
        .await
        .expect("creating the widget on a fresh cluster");
    let key = format!("{NAMESPACE}/{OBJECT}");
    let designs = [Design::Level, Design::Edge];
    let downstreams = designs.map(|_| Downstream::new(params.cost));
    let start =
        |d: usize| Process::start(designs[d], &client, downstreams[d].clone(), params.workers);
    let mut procs: Vec<Option<Process>> = (0..2).map(|d| Some(start(d))).collect();
    let settle = Duration::from_secs(1) + params.cost * 4;
    tokio::time::sleep(settle).await;
    for (d, ds) in downstreams.iter().enumerate() {
        assert_eq!(
            ds.replicas(&key),
            Some(0),
            "{:?} never reconciled the initial widget: informer not synced?",
            designs[d]
        );
    }
    let base: Vec<(u64, u64)> = (0..2)
        .map(|d| {
            (
                procs[d].as_ref().map_or(0, Process::events),
                downstreams[d].commands(),
            )
        })
        .collect();
    let mut dead_events = [0u64; 2];
    if params.fail_first_command {
        downstreams.iter().for_each(|ds| ds.fail_next(1));
    }
    for v in 1..=params.writes {
        let patch = serde_json::json!({ "spec": { "replicas": v } });
        api.patch(OBJECT, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("a merge patch of spec.replicas");
        if params.kill_after_write == Some(v) {
            for (d, p) in procs.iter_mut().enumerate() {
                let p = p.take().expect("killed once");
                dead_events[d] = p.events();
                p.kill();
            }
        }
        if v < params.writes {
            tokio::time::sleep(params.gap).await;
        }
    }
    let last_write = Instant::now();
    for (d, p) in procs.iter_mut().enumerate() {
        if p.is_none() {
            *p = Some(start(d));
        }
    }
    // Long enough for the slowest design to work off one reconcile per write, and its retries.
    let drain = settle + params.cost * (params.writes as u32 + 10);
    tokio::time::sleep(drain).await;
    let last_written = params.writes as i32;
    let outcomes: Vec<Outcome> = (0..2)
        .map(|d| {
            let p = procs[d].as_ref().expect("running");
            assert!(
                p.idle(),
                "{:?} still busy {drain:?} after the burst: a key never released?",
                designs[d]
            );
            let ds = &downstreams[d];
            let final_replicas = ds.replicas(&key);
            let ends_right = final_replicas == Some(last_written);
            let events = if params.kill_after_write.is_some() {
                dead_events[d] - base[d].0 + p.events()
            } else {
                p.events() - base[d].0
            };
            Outcome {
                events,
                reconciles: ds.commands() - base[d].1,
                failures: ds.failures(),
                max_holders_per_key: ds.max_holders_per_key(),
                overlapping_reconciles: ds.overlapping(),
                final_replicas,
                ends_right,
                converged_ms_after_last_write: ds
                    .last_change()
                    .filter(|_| ends_right)
                    .map(|(t, _)| t.saturating_duration_since(last_write).as_millis() as u64),
            }
        })
        .collect();
    for p in procs.into_iter().flatten() {
        p.kill();
    }
    let widget_gets = cluster
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path.ends_with(&format!("/widgets/{OBJECT}")))
        .count();
    let [level, edge]: [Outcome; 2] = outcomes.try_into().expect("two designs");
    Report {
        writes: params.writes,
        gap_ms: params.gap.as_millis() as u64,
        cost_ms: params.cost.as_millis() as u64,
        workers: params.workers,
        killed_after_write: params.kill_after_write,
        last_written,
        widget_gets,
        level,
        edge,
    }
}

/// The four storms chapter 07 shows, each under the name of its snapshot.
pub fn storms() -> [(&'static str, Params); 4] {
    [
        ("ch07_dedup", Params::essay()),
        ("ch07_single_writer", Params::essay().workers(2)),
        ("ch07_order", Params::essay().writes(3).fail_first_command()),
        ("ch07_restart", Params::essay().kill_after(100)),
    ]
}

/// Runs the four [`storms`].
pub fn bill() -> Vec<(&'static str, Report)> {
    storms().iter().map(|(name, p)| (*name, run(p))).collect()
}

/// Runs the chapter's four storms, checks the durable claims and records the snapshots the
/// chapter shows.
pub fn experiment() {
    let bill = bill();
    check(&bill);
    for (name, report) in &bill {
        crate::book::snap::yaml(name, report, vec![]);
    }
}

/// The claims chapter 07 makes about [`bill`]'s storms. Panics on the first that fails.
pub fn check(bill: &[(&'static str, Report)]) {
    let get = |name: &str| &bill.iter().find(|(n, _)| *n == name).expect(name).1;
    let dedup = get("ch07_dedup");
    assert_eq!(
        dedup.edge.reconciles, dedup.writes,
        "edge: one reconcile per event"
    );
    assert!(dedup.level.reconciles < dedup.writes / 4, "level collapses");
    assert!(dedup.level.ends_right && dedup.edge.ends_right);
    let sw = get("ch07_single_writer");
    assert_eq!(sw.level.max_holders_per_key, 1, "level: one writer per key");
    assert!(sw.edge.max_holders_per_key > 1, "edge: the detector fires");
    let order = get("ch07_order");
    assert!(
        order.level.ends_right,
        "level recovers from a transient failure"
    );
    assert!(
        !order.edge.ends_right,
        "edge applies the retried change last"
    );
    let restart = get("ch07_restart");
    assert!(restart.level.ends_right, "level relists and converges");
    assert!(!restart.edge.ends_right, "edge loses its queued payloads");
    for (name, r) in bill {
        assert_eq!(
            r.widget_gets, 0,
            "{name}: a reconcile read the server, not the cache"
        );
    }
}
