//! Chapter 07's two designs, once: the level-triggered [`Controller`] (a queue of keys) and the
//! edge-triggered one (a queue of [`Payload`]s), as a [`Process`] runs them.
//!
//! Each design calls its [`Hooks`] at the two places a fault can reach a controller's own code:
//! first thing in a reconcile, and first thing in the event handler. Chapter 07 runs both
//! unarmed ([`NoFaults`]) at controller-runtime's defaults ([`Config::default`]); chapter 12's
//! fault matrix ([`crate::lab::faults`]) arms the hooks, and pins the release and the backoff.
//!
//! # Invariants
//! 1. Both designs drive a [`Downstream`], call the same [`Hooks`] at the same two places, and
//!    retry a failed command (or a panicked reconcile) through `add_rate_limited`.
//! 2. Unarmed, a design is exactly chapter 07's: the hooks do nothing, and [`Config::default`]
//!    leaves the controller's release and each design's backoff at their defaults.

use std::{
    panic::AssertUnwindSafe,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use futures::FutureExt;
use kube::api::Api;
use serde::Serialize;
use tokio::task::JoinHandle;

use super::{Change, Command, Design, Downstream, Payload, Unavailable};
use crate::lab::rig::Widget;
use crate::lab::rig::{Informer, Process, Subject};
use controlloop::{
    cache::{DeletedObject, ListerWatcher, ResourceEventHandler, SharedIndexInformer},
    controller::{
        Context, Controller, Event, QueueKind, ReconcileError, ReconcileResult, Release, Request,
        RequestQueue, predicate::Predicate,
    },
    workqueue::{
        DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY, ItemExponentialFailureRateLimiter, MaxOfRateLimiter,
        RateLimitingQueue, default_controller_rate_limiter,
    },
};

/// The two places a fault can reach a design's own code. Chapter 07's designs are unarmed
/// ([`NoFaults`]); chapter 12 arms `faults::Hooks`, which panics, fails or blocks here.
pub trait Hooks: Send + Sync {
    /// Called first thing in every reconcile of either design: may panic, or fail as an
    /// outage of the world would.
    fn reconcile(&self) -> Result<(), Unavailable>;
    /// Called first thing in every event handler call of either design: may block its
    /// thread, or panic.
    fn event(&self);
}

/// No fault armed: chapter 07's designs.
pub struct NoFaults;

impl Hooks for NoFaults {
    fn reconcile(&self) -> Result<(), Unavailable> {
        Ok(())
    }
    fn event(&self) {}
}

/// Hooks that arm nothing ([`NoFaults`]), for chapter 07's designs.
pub fn unarmed() -> Arc<dyn Hooks> {
    Arc::new(NoFaults)
}

/// The backoff a design retries a failed reconcile with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum Backoff {
    /// client-go's default controller limiter, controller-runtime v0.22's default: the larger
    /// of a per-item exponential backoff (5 ms to 1000 s) and one token bucket shared by all
    /// items (10 per second, burst 100).
    #[default]
    ControllerDefault,
    /// The per-item exponential backoff alone, controller-runtime v0.24's and v0.25's default
    /// with its priority queue (v0.25.3 `pkg/controller/controller.go`).
    PerItem,
}

impl Backoff {
    /// A limiter of this kind.
    pub fn limiter<T>(self) -> MaxOfRateLimiter<T>
    where
        T: Eq + std::hash::Hash + Clone + Send + Sync + 'static,
    {
        match self {
            Backoff::ControllerDefault => default_controller_rate_limiter(),
            Backoff::PerItem => MaxOfRateLimiter::new(vec![Box::new(
                ItemExponentialFailureRateLimiter::new(DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY),
            )]),
        }
    }
}

/// How a design's controller is set up: what chapter 12 pins, and chapter 07 leaves at
/// controller-runtime's defaults ([`Config::default`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Config {
    /// Workers per controller (0 is raised to 1).
    pub workers: usize,
    /// The controller-runtime release the level design's controller follows (its queue);
    /// v0.25 by default.
    pub release: Release,
    /// The backoff both designs retry with. `None`: each design's default, the release's
    /// for the level controller, [`Backoff::ControllerDefault`] for the payload queue.
    pub backoff: Option<Backoff>,
    /// Whether the level controller builds controller-runtime's priority queue (upstream
    /// `UsePriorityQueue`). `None`: the release's default.
    pub priority_queue: Option<bool>,
}

impl Config {
    /// controller-runtime's defaults, with `n` workers per controller.
    pub fn workers(n: usize) -> Config {
        Config {
            workers: n,
            ..Config::default()
        }
    }
}

/// The level design's handler hook: a predicate that calls [`Hooks::event`] for every event
/// and lets it through.
pub struct Heard(pub Arc<dyn Hooks>);

impl Predicate<Widget> for Heard {
    fn matches(&self, _event: &Event<Widget>) -> bool {
        self.0.event();
        true
    }
}

// book: ch07_level
/// The level-triggered controller: the builder's default handler queues the key
/// (`EnqueueRequestForObject`), the reconciler reads the level from the cache and sets the
/// downstream to it. A failure goes back rate-limited, and a panic is recovered into an error
/// (controller-runtime's default).
pub fn start_level(
    informer: &SharedIndexInformer<Widget, impl ListerWatcher<Widget>>, // a server, or a fake
    downstream: Arc<Downstream>,
    hooks: Arc<dyn Hooks>,
    config: Config,
) -> Controller<Widget> {
    let mut level = Controller::builder("level")
        .release(config.release) // which controller-runtime's queue
        .max_concurrent_reconciles(config.workers)
        .with_predicate(Heard(hooks.clone())); // the handler's hook: slow, or panics
    if let Some(backoff) = config.backoff {
        level = level.with_rate_limiter(backoff.limiter()); // else the release's default
    }
    if let Some(on) = config.priority_queue {
        level = level.use_priority_queue(on); // else the release's queue
    }
    level
        .build(informer, move |request: Request, ctx: Context<Widget>| {
            let (downstream, hooks) = (downstream.clone(), hooks.clone());
            async move {
                hooks.reconcile().map_err(ReconcileError::retry)?; // panics, or fails in an outage
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

/// The edge design's informer handler: turns each callback into a [`Payload`] and queues it.
pub struct QueuePayloads {
    /// Where each payload goes.
    pub queue: RateLimitingQueue<Payload>,
    /// How many events the handler heard.
    pub heard: Arc<AtomicU64>,
    /// The handler's hook, called first for every event.
    pub hooks: Arc<dyn Hooks>,
}

// book: ch07_edge_handler
impl QueuePayloads {
    fn push(&self, object: &Widget, change: Change) {
        self.hooks.event(); // the handler's hook: slow, or panics
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

// book: ch07_edge_worker
/// The edge design's worker: take a payload, apply its change, retry it rate-limited on
/// failure or on a panic (as controller-runtime recovers a reconciler's). The claim releases
/// the payload (`done`) whatever happens.
pub async fn edge_worker(
    queue: RateLimitingQueue<Payload>,
    downstream: Arc<Downstream>,
    hooks: Arc<dyn Hooks>,
) {
    while let Some(claim) = queue.claim().await {
        let payload = claim.item().clone();
        let command = match payload.change {
            Change::Created { replicas } => Command::CreateIfAbsent(replicas),
            Change::Updated { to, .. } => Command::Set(to),
            Change::Deleted => Command::Delete,
        };
        let apply = async {
            hooks.reconcile()?; // panics, or fails in an outage
            downstream.run(&payload.request.key(), command).await
        };
        match AssertUnwindSafe(apply).catch_unwind().await {
            Ok(Ok(())) => claim.forget(),
            Ok(Err(Unavailable)) | Err(_) => claim.add_rate_limited(), // a panic is retried too
        }
    }
}
// book: end ch07_edge_worker

// book: ch07_edge
/// The edge-triggered design: its handler queues each event's [`Payload`], and
/// `config.workers` [`edge_worker`]s apply the change each one carries. Returns the queue,
/// the count of events heard, and the workers' tasks.
pub fn start_edge(
    informer: &Informer<Widget>,
    downstream: Arc<Downstream>,
    hooks: Arc<dyn Hooks>,
    config: Config,
) -> (
    RateLimitingQueue<Payload>,
    Arc<AtomicU64>,
    Vec<JoinHandle<()>>,
) {
    let backoff = config.backoff.unwrap_or_default(); // client-go's default controller limiter
    let queue = RateLimitingQueue::new(backoff.limiter());
    let heard = Arc::new(AtomicU64::new(0));
    let handler = QueuePayloads {
        queue: queue.clone(),
        heard: heard.clone(),
        hooks: hooks.clone(),
    };
    informer
        .add_event_handler(handler)
        .expect("a fresh informer accepts handlers");
    let worker = || edge_worker(queue.clone(), downstream.clone(), hooks.clone());
    let workers = (0..config.workers.max(1))
        .map(|_| tokio::spawn(worker()))
        .collect();
    (queue, heard, workers)
}
// book: end ch07_edge

/// One of the two designs as a [`Process`] runs it: the world it drives, its hooks and its
/// setup.
#[derive(Clone)]
pub struct Armed {
    /// Which design.
    pub design: Design,
    /// The world it drives.
    pub downstream: Arc<Downstream>,
    /// Where faults reach its code.
    pub hooks: Arc<dyn Hooks>,
    /// How its controller is set up.
    pub config: Config,
}

impl Design {
    /// This design with `workers` workers, unarmed, at controller-runtime's defaults, driving
    /// `downstream`: chapter 07's.
    pub fn unarmed(self, downstream: &Arc<Downstream>, config: Config) -> Armed {
        self.armed(downstream, unarmed(), config)
    }

    /// This design with `hooks` and `config`, driving `downstream`.
    pub fn armed(
        self,
        downstream: &Arc<Downstream>,
        hooks: Arc<dyn Hooks>,
        config: Config,
    ) -> Armed {
        Armed {
            design: self,
            downstream: downstream.clone(),
            hooks,
            config,
        }
    }
}

/// A started design: the level design's controller, or the edge design's queue and the count
/// of events its handler heard.
pub enum Running {
    /// The level-triggered controller.
    Level(Controller<Widget>),
    /// The edge-triggered design's queue, and the events it heard.
    Edge(RateLimitingQueue<Payload>, Arc<AtomicU64>),
}

// book: ch07_process
impl Subject for Armed {
    type Started = Running;

    fn start(
        &self,
        informer: &Arc<Informer<Widget>>,
        _: &Api<Widget>,
        tasks: &mut Vec<JoinHandle<()>>,
    ) -> Running {
        let (downstream, hooks) = (self.downstream.clone(), self.hooks.clone());
        match self.design {
            Design::Level => {
                let controller = start_level(informer, downstream, hooks, self.config);
                let c = controller.clone();
                tasks.push(tokio::spawn(async move {
                    let _ = c.run(futures::future::pending()).await;
                }));
                Running::Level(controller)
            }
            Design::Edge => {
                let (queue, heard, workers) = start_edge(informer, downstream, hooks, self.config);
                tasks.extend(workers);
                Running::Edge(queue, heard)
            }
        }
    }

    fn kill(running: &Running) {
        match running {
            Running::Level(c) => c.abort(),
            Running::Edge(q, _) => q.shut_down(), // the payloads still queued: gone
        }
    }

    fn shutdown(running: &Running) {
        match running {
            Running::Level(c) => c.shutdown(), // its workers finish their reconciles
            Running::Edge(q, _) => q.shut_down(), // its workers finish what the queue holds
        }
    }
}
// book: end ch07_process

impl Running {
    /// Informer callbacks this controller has heard.
    pub fn events(&self) -> u64 {
        match self {
            Running::Level(c) => c.metrics().events,
            Running::Edge(_, heard) => heard.load(Ordering::SeqCst),
        }
    }

    /// What its queue holds now.
    pub fn backlog(&self) -> Backlog {
        match self {
            Running::Level(c) => Backlog::of_requests(c.queue()),
            Running::Edge(q, _) => Backlog::of(q),
        }
    }

    /// The queue its controller built: the release's for the level design, client-go's
    /// rate-limiting queue of payloads for the edge design.
    pub fn queue_kind(&self) -> QueueKind {
        match self {
            Running::Level(c) => c.queue().kind(),
            Running::Edge(..) => QueueKind::RateLimiting,
        }
    }

    /// Reconciles running now (the level controller's gauge; the edge's are its held items).
    pub fn running(&self) -> usize {
        match self {
            Running::Level(c) => c.metrics().active_workers as usize,
            Running::Edge(q, _) => q.processing_len(),
        }
    }
}

impl Process<Armed> {
    /// Informer callbacks this process has heard.
    pub fn events(&self) -> u64 {
        self.started().events()
    }

    /// Nothing queued, delayed, dirty, held or running.
    pub fn idle(&self) -> bool {
        self.started().backlog().total() + self.started().running() == 0
    }
}

/// What a design's queue holds: every item anywhere in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Backlog {
    /// Waiting to be handed out.
    pub queued: usize,
    /// Waiting out a delay (`add_after`, `add_rate_limited`).
    pub delayed: usize,
    /// In the dirty set.
    pub dirty: usize,
    /// In the processing set.
    pub processing: usize,
}

impl Backlog {
    fn of<T: Eq + std::hash::Hash + Clone + Send + Sync + 'static>(
        q: &RateLimitingQueue<T>,
    ) -> Self {
        Backlog {
            queued: q.len(),
            delayed: q.waiting_len(),
            dirty: q.dirty_len(),
            processing: q.processing_len(),
        }
    }

    /// A controller's queue, whichever release built it. controller-runtime v0.24's priority
    /// queue has no dirty set: a key re-added while held is counted as ready (`len`), and the
    /// held keys are its locked ones.
    fn of_requests(q: &RequestQueue) -> Self {
        match q {
            RequestQueue::RateLimiting(q) => Self::of(q),
            RequestQueue::Priority(q) => Backlog {
                queued: q.len(),
                delayed: q.waiting_len(),
                dirty: 0,
                processing: q.locked_len(),
            },
        }
    }

    /// Items anywhere in the queue.
    pub fn total(&self) -> usize {
        self.queued + self.delayed + self.dirty + self.processing
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use controlloop::workqueue::RateLimiter;

    /// The two settings are the limiters controller-runtime v0.22.5 and v0.24.1 hand an
    /// unconfigured controller (`upstream/recorded/controller_runtime_v0.2{2,4}_default_limiter.txt`):
    /// 120 fresh requests back to back wait 5 ms each with the per-item backoff alone, and
    /// the 101st waits for the shared bucket with the controller default.
    #[test]
    fn the_two_backoffs_are_v0_22s_and_v0_24s_default_limiters() {
        let fresh = |b: Backoff| -> Vec<Duration> {
            let l = b.limiter::<String>();
            (1..=120)
                .map(|i| l.when(&format!("default/obj-{i:03}")))
                .collect()
        };
        let five = Duration::from_millis(5);
        assert!(fresh(Backoff::PerItem).iter().all(|d| *d == five));
        let bucketed = fresh(Backoff::ControllerDefault);
        assert!(bucketed[..100].iter().all(|d| *d == five));
        assert!(
            bucketed[100] >= Duration::from_millis(90),
            "{:?}",
            bucketed[100]
        );
        let one = Backoff::PerItem.limiter::<String>();
        let delays: Vec<Duration> = (0..20).map(|_| one.when(&"w".to_string())).collect();
        assert_eq!(
            (delays[0], delays[1], delays[17]),
            (five, 2 * five, 5 * 2u32.pow(17) * Duration::from_millis(1))
        );
        assert_eq!(delays[18], Duration::from_secs(1000), "capped at 1000 s");
    }

    /// Unarmed, a design is chapter 07's (keeps I2): hooks that do nothing, controller-runtime
    /// v0.25 with its own default limiter for the level controller, and client-go's default
    /// controller limiter for the payload queue.
    #[test]
    fn the_default_config_is_controller_runtimes_defaults() {
        let c = Config::workers(2);
        assert_eq!((c.workers, c.release, c.backoff), (2, Release::V0_25, None));
        assert_eq!(c.priority_queue, None);
        assert_eq!(c.backoff.unwrap_or_default(), Backoff::ControllerDefault);
        assert_eq!(NoFaults.reconcile(), Ok(()));
    }
}
