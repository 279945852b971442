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

mod downstream;
mod storm;

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use kube::api::Api;
use serde::Serialize;
use tokio::task::JoinHandle;

use controlloop::{
    cache::{DeletedObject, InformerOptions, ResourceEventHandler, SharedIndexInformer},
    controller::{Context, Controller, ReconcileError, ReconcileResult, Request},
    resources::Widget,
    workqueue::{RateLimitingQueue, default_controller_rate_limiter},
};

pub use downstream::{Command, Downstream, Unavailable};
pub use storm::{Before, Outcome, Params, Report, bill, check, experiment, run, run_async, storms};

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

/// Three updates of one widget, queued as keys and as payloads: how many items each queue
/// holds (chapter 07's first block).
pub fn queue_items() -> String {
    crate::lab::rig::paused(async {
        // book: ch07_queue_items
        let keys = RateLimitingQueue::new(default_controller_rate_limiter());
        let payloads = RateLimitingQueue::new(default_controller_rate_limiter());
        for (rv, (from, to)) in [(10, (0, 1)), (11, (1, 2)), (12, (2, 3))] {
            let request = Request::new("default", "w");
            keys.add(request.clone()); // equal to the one waiting, if any: merged
            let change = Change::Updated { from, to };
            let resource_version = rv.to_string(); // each event's own: never equal
            payloads.add(Payload {
                request,
                resource_version,
                change,
            });
        }
        assert_eq!((keys.len(), payloads.len()), (1, 3));
        format!(
            "three updates of one widget\n  queue of keys:     {} item(s)\n  queue of payloads: {} item(s)",
            keys.len(),
            payloads.len()
        )
        // book: end ch07_queue_items
    })
}

/// The two designs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Design {
    /// controller-runtime's: queue the key, read the level from the cache.
    Level,
    /// Queue the event's payload and apply the change it carries.
    Edge,
}

/// The informer each controller process runs: widgets of [`NAMESPACE`], no resync.
pub type Informer = SharedIndexInformer<Widget, Api<Widget>>;

/// The edge design's informer handler: turns each callback into a [`Payload`] and queues it.
pub struct QueuePayloads {
    queue: RateLimitingQueue<Payload>,
    heard: Arc<AtomicU64>,
}

// book: ch07_edge_handler
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
// book: end ch07_edge_handler

/// The edge design's worker: take a payload, apply its change, retry it rate-limited on
/// failure. The claim releases the payload (`done`) whatever happens.
// book: ch07_edge_worker
pub async fn edge_worker(queue: RateLimitingQueue<Payload>, downstream: Arc<Downstream>) {
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
// book: end ch07_edge_worker

/// The level-triggered controller: the builder's default handler queues the key
/// (`EnqueueRequestForObject`), the reconciler reads the level from the cache and sets the
/// downstream to it; a failure goes back to the queue rate-limited.
// book: ch07_level
pub fn start_level(
    informer: &Informer,
    downstream: Arc<Downstream>,
    workers: usize,
) -> Controller<Widget> {
    Controller::builder("level")
        .max_concurrent_reconciles(workers) // no predicate: every event queues the key
        .build(informer, move |request: Request, ctx: Context<Widget>| {
            let downstream = downstream.clone();
            async move {
                // The level: whatever the cache holds now.
                let command = match ctx.get(&request) {
                    Some(widget) => Command::Set(widget.spec.replicas),
                    None => Command::Delete,
                };
                let key = request.key();
                downstream
                    .run(&key, command)
                    .await
                    .map_err(ReconcileError::retry)?;
                Ok(ReconcileResult::done())
            }
        })
        .expect("a named controller on a fresh informer builds")
}
// book: end ch07_level

/// The edge-triggered design: its handler queues each event's [`Payload`], and `workers`
/// [`edge_worker`]s apply the change each one carries. Returns the queue, the count of events
/// heard, and the workers' tasks.
// book: ch07_edge
pub fn start_edge(
    informer: &Informer,
    downstream: Arc<Downstream>,
    workers: usize,
) -> (
    RateLimitingQueue<Payload>,
    Arc<AtomicU64>,
    Vec<JoinHandle<()>>,
) {
    let queue = RateLimitingQueue::new(default_controller_rate_limiter());
    let heard = Arc::new(AtomicU64::new(0));
    let handler = QueuePayloads {
        queue: queue.clone(),
        heard: heard.clone(),
    };
    informer
        .add_event_handler(handler)
        .expect("a fresh informer accepts handlers");
    let workers = (0..workers.max(1))
        .map(|_| tokio::spawn(edge_worker(queue.clone(), downstream.clone())))
        .collect();
    (queue, heard, workers)
}
// book: end ch07_edge

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

// book: ch07_process
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
            InformerOptions::new(Duration::ZERO), // no resync: only the server's events
        ));
        let mut tasks = Vec::new();
        let queue = match design {
            Design::Level => {
                let controller = start_level(&informer, downstream, workers);
                let c = controller.clone();
                tasks.push(tokio::spawn(async move {
                    let _ = c.run(futures::future::pending()).await;
                }));
                Queue::Level(controller)
            }
            Design::Edge => {
                let (queue, heard, workers) = start_edge(&informer, downstream, workers);
                tasks.extend(workers);
                Queue::Edge(queue, heard)
            }
        };
        let inf = informer.clone();
        tasks.push(tokio::spawn(async move {
            inf.run(futures::future::pending()).await // list (the state now), then watch
        }));
        Process { queue, tasks }
    }

    /// Kills the process at once: tasks aborted mid-reconcile, queue and cache gone.
    pub fn kill(self) {
        for t in &self.tasks {
            t.abort(); // a command in flight is dropped where it stands
        }
        match &self.queue {
            Queue::Level(c) => c.abort(),
            Queue::Edge(q, _) => q.shut_down(), // the payloads still queued: gone
        }
    }
}
// book: end ch07_process

impl Process {
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
}
