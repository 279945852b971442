//! The two controllers of the fault matrix, with the hooks through which a fault reaches a
//! controller's own code, and the process that runs one of them.
//!
//! Both designs are chapter 07's (`lab::edge`): the level-triggered [`Controller`] queues the
//! key and reads the cache; the edge-triggered one queues each event's [`Payload`] and applies
//! the change it carries. They drive the same kind of [`Downstream`], retry a failure with
//! `add_rate_limited`, and call the same [`Hooks`] at the same two places: first thing in a
//! reconcile, and first thing in the event handler.

use std::{
    panic::AssertUnwindSafe,
    sync::{
        Arc, Once,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use futures::FutureExt;
use kube::api::Api;
use parking_lot::Mutex;
use tokio::{task::JoinHandle, time::Instant};

use super::Setup;
use crate::lab::edge::{Change, Command, Design, Downstream, Payload, Unavailable};
use controlloop::{
    cache::{HandlerFuncs, InformerOptions, SharedIndexInformer},
    controller::{
        Context, Controller, Event, ReconcileError, ReconcileResult, Request, RequestQueue,
        predicate::Predicate,
    },
    resources::Widget,
    workqueue::{
        DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY, ItemExponentialFailureRateLimiter, MaxOfRateLimiter,
        RateLimitingQueue, default_controller_rate_limiter,
    },
};

/// Every panic a hook raises starts with this, so [`quiet_injected_panics`] can tell them from
/// real ones.
pub const INJECTED: &str = "injected fault:";

/// The informer a controller process runs: widgets of one namespace, no resync.
pub type Informer = SharedIndexInformer<Widget, Api<Widget>>;

/// The faults armed in a controller's own code. One `Hooks` outlives every process of a run,
/// so a fault armed once stays armed across restarts, and the counters count the whole run.
#[derive(Default)]
pub struct Hooks {
    /// Reconciles started (failed and panicked ones included).
    reconciles: AtomicU64,
    /// Handler calls (events heard).
    events: AtomicU64,
    /// Every `n`-th reconcile from the arming on panics (0: never).
    panic_every: AtomicU64,
    /// The reconcile number the panics count from.
    panic_base: AtomicU64,
    /// The handler call with this number panics, once (0: never).
    handler_panic_at: AtomicU64,
    /// Each handler call blocks its thread this long (a slow handler; real clock only).
    handler_delay: Mutex<Duration>,
    /// The world refuses every command in this window: reconciles fail, then succeed again.
    outage: Mutex<Option<(Instant, Instant)>>,
}

impl Hooks {
    /// No fault armed.
    pub fn new() -> Arc<Self> {
        Arc::new(Hooks::default())
    }

    /// Reconciles started so far.
    pub fn reconciles(&self) -> u64 {
        self.reconciles.load(Ordering::SeqCst)
    }

    /// Events heard so far.
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::SeqCst)
    }

    /// From now on every `n`-th reconcile panics.
    pub fn panic_every(&self, n: u64) {
        self.panic_base.store(self.reconciles(), Ordering::SeqCst);
        self.panic_every.store(n, Ordering::SeqCst);
    }

    /// The next event the handler hears panics (once).
    pub fn panic_on_next_event(&self) {
        self.handler_panic_at
            .store(self.events() + 1, Ordering::SeqCst);
    }

    /// From now on the handler takes `delay` per event.
    pub fn slow_handler(&self, delay: Duration) {
        *self.handler_delay.lock() = delay;
    }

    /// Every reconcile fails from now for `stretch`, then they succeed again.
    pub fn outage(&self, stretch: Duration) {
        let now = Instant::now();
        *self.outage.lock() = Some((now, now + stretch));
    }

    /// Called first thing in every reconcile of either design.
    pub fn reconcile(&self) -> Result<(), Unavailable> {
        let n = self.reconciles.fetch_add(1, Ordering::SeqCst) + 1;
        let every = self.panic_every.load(Ordering::SeqCst);
        let since = n.saturating_sub(self.panic_base.load(Ordering::SeqCst));
        if every > 0 && since.is_multiple_of(every) {
            panic!("{INJECTED} reconcile {n} panics");
        }
        match *self.outage.lock() {
            Some((from, until)) if (from..until).contains(&Instant::now()) => Err(Unavailable),
            _ => Ok(()),
        }
    }

    /// Called first thing in every event handler call of either design.
    pub fn event(&self) {
        let n = self.events.fetch_add(1, Ordering::SeqCst) + 1;
        let delay = *self.handler_delay.lock();
        if !delay.is_zero() {
            std::thread::sleep(delay); // what a slow handler does: it holds its thread
        }
        if self.handler_panic_at.load(Ordering::SeqCst) == n {
            panic!("{INJECTED} event handler panics on event {n}");
        }
    }
}

/// The backoff both designs retry a failed reconcile with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum Backoff {
    /// client-go's default controller limiter, controller-runtime v0.22's default: the larger
    /// of a per-item exponential backoff (5 ms to 1000 s) and one token bucket shared by all
    /// items (10 per second, burst 100).
    #[default]
    ControllerDefault,
    /// The per-item exponential backoff alone, controller-runtime v0.24's default with its
    /// priority queue (v0.24.1 `pkg/controller/controller.go`).
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

/// The level design's handler hook: a predicate that calls [`Hooks::event`] for every event
/// and lets it through.
pub struct Heard(pub Arc<Hooks>);

impl Predicate<Widget> for Heard {
    fn matches(&self, _event: &Event<Widget>) -> bool {
        self.0.event();
        true
    }
}

// book: ch12_level
/// The level-triggered controller: the default handler queues the key; the reconcile reads
/// the widget from the cache and sets the world to it. A failure goes back rate-limited, and a
/// panic is recovered into an error (controller-runtime's default).
pub fn start_level(
    informer: &Informer,
    world: Arc<Downstream>,
    hooks: Arc<Hooks>,
    setup: Setup,
) -> Controller<Widget> {
    Controller::builder("level")
        .release(setup.release) // which controller-runtime's queue
        .max_concurrent_reconciles(setup.workers)
        .with_rate_limiter(setup.backoff.limiter())
        .with_predicate(Heard(hooks.clone())) // the handler's hook: slow, or panics
        .build(informer, move |request: Request, ctx: Context<Widget>| {
            let (world, hooks) = (world.clone(), hooks.clone());
            async move {
                hooks.reconcile().map_err(ReconcileError::retry)?; // panics, or fails in an outage
                let command = match ctx.get(&request) {
                    Some(widget) => Command::Set(widget.spec.replicas), // the level, now
                    None => Command::Delete,
                };
                world
                    .run(&request.key(), command)
                    .await
                    .map_err(ReconcileError::retry)?;
                Ok(ReconcileResult::done())
            }
        })
        .expect("a named controller on a fresh informer builds")
}
// book: end ch12_level

/// The payload an event on `widget` carries (chapter 07's, [`Payload`]).
pub fn payload(widget: &Widget, change: Change) -> Payload {
    let meta = &widget.metadata;
    Payload {
        request: Request::new(
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        ),
        resource_version: meta.resource_version.clone().unwrap_or_default(),
        change,
    }
}

// book: ch12_edge
/// The edge-triggered controller: its handler queues each event's change, and each worker
/// applies the change it claims. A failure or a panic goes back rate-limited, like the level
/// design's.
pub fn start_edge(
    informer: &Informer,
    world: Arc<Downstream>,
    hooks: Arc<Hooks>,
    setup: Setup,
) -> (RateLimitingQueue<Payload>, Vec<JoinHandle<()>>) {
    let queue = RateLimitingQueue::new(setup.backoff.limiter());
    let (q, h) = (queue.clone(), hooks.clone());
    let on_event = move |widget: &Widget, change: Change| {
        h.event(); // the handler's hook: slow, or panics
        q.add(payload(widget, change));
    };
    let (on_add, on_update, on_delete) = (on_event.clone(), on_event.clone(), on_event);
    let handler = HandlerFuncs::new()
        .on_add(move |w: Arc<Widget>, _| {
            let replicas = w.spec.replicas;
            on_add(&w, Change::Created { replicas })
        })
        .on_update(move |old: Arc<Widget>, new: Arc<Widget>| {
            let (from, to) = (old.spec.replicas, new.spec.replicas);
            on_update(&new, Change::Updated { from, to })
        })
        .on_delete(move |gone| {
            if let Some(w) = gone.object() {
                on_delete(w, Change::Deleted)
            }
        });
    informer
        .add_event_handler(handler)
        .expect("a fresh informer accepts handlers");
    let spawn = |_| tokio::spawn(edge_worker(queue.clone(), world.clone(), hooks.clone()));
    let workers = (0..setup.workers.max(1)).map(spawn).collect();
    (queue, workers)
}

async fn edge_worker(queue: RateLimitingQueue<Payload>, world: Arc<Downstream>, hooks: Arc<Hooks>) {
    while let Some(claim) = queue.claim().await {
        let payload = claim.item().clone();
        let command = match payload.change {
            Change::Created { replicas } => Command::CreateIfAbsent(replicas),
            Change::Updated { to, .. } => Command::Set(to),
            Change::Deleted => Command::Delete,
        };
        let apply = async {
            hooks.reconcile()?; // panics, or fails in an outage
            world.run(&payload.request.key(), command).await
        };
        match AssertUnwindSafe(apply).catch_unwind().await {
            Ok(Ok(())) => claim.forget(),
            Ok(Err(Unavailable)) | Err(_) => claim.add_rate_limited(), // a panic is retried too
        }
    }
}
// book: end ch12_edge

/// Installs, once per process, a panic hook that keeps the panics [`Hooks`] raise out of the
/// output (they are expected, and counted) and hands every other panic to the previous hook.
pub fn quiet_injected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied())
                .unwrap_or_default();
            if !message.starts_with(INJECTED) {
                previous(info);
            }
        }));
    });
}

/// What a process's queue holds: every item anywhere in it, and the reconciles running.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
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

enum Queue {
    Level(Controller<Widget>),
    Edge(RateLimitingQueue<Payload>),
}

/// One controller process: an informer, a queue, workers. Killing it loses all three.
pub struct Process {
    informer: Arc<Informer>,
    queue: Queue,
    tasks: Vec<JoinHandle<()>>,
}

impl Process {
    /// Starts a process of `design` on `api`, driving `world`.
    pub fn start(
        design: Design,
        api: &Api<Widget>,
        world: &Arc<Downstream>,
        hooks: &Arc<Hooks>,
        setup: Setup,
    ) -> Process {
        let options = InformerOptions::new(Duration::ZERO);
        let informer = Arc::new(SharedIndexInformer::new(api.clone(), options));
        let (world, hooks) = (world.clone(), hooks.clone());
        let mut tasks = Vec::new();
        let queue = match design {
            Design::Level => {
                let c = start_level(&informer, world, hooks, setup);
                let run = c.clone();
                tasks.push(tokio::spawn(async move {
                    let _ = run.run(futures::future::pending()).await;
                }));
                Queue::Level(c)
            }
            Design::Edge => {
                let (q, workers) = start_edge(&informer, world, hooks, setup);
                tasks.extend(workers);
                Queue::Edge(q)
            }
        };
        let inf = informer.clone();
        tasks.push(tokio::spawn(async move {
            inf.run(futures::future::pending()).await
        }));
        Process {
            informer,
            queue,
            tasks,
        }
    }

    /// Whether an event handler panicked and took the informer down (upstream: the process).
    pub fn crashed(&self) -> bool {
        self.informer.crash().is_some()
    }

    /// The widget its cache holds under `key`.
    pub fn cached(&self, key: &str) -> Option<Arc<Widget>> {
        self.informer.indexer().get_by_key(key)
    }

    /// What its queue holds now.
    pub fn backlog(&self) -> Backlog {
        match &self.queue {
            Queue::Level(c) => Backlog::of_requests(c.queue()),
            Queue::Edge(q) => Backlog::of(q),
        }
    }

    /// Reconciles running now (the level controller's gauge; the edge's are its held items).
    pub fn running(&self) -> usize {
        match &self.queue {
            Queue::Level(c) => c.metrics().active_workers as usize,
            Queue::Edge(q) => q.processing_len(),
        }
    }

    /// Stops it gracefully: the level controller cancels and lets its workers finish
    /// (controller-runtime's shutdown); the edge workers finish what their queue holds. Then
    /// the informer stops. Returns the backlog left behind, which must hold nothing in
    /// processing.
    pub async fn shutdown(self, limit: Duration) -> Backlog {
        match &self.queue {
            Queue::Level(c) => c.shutdown(),
            Queue::Edge(q) => q.shut_down(),
        }
        let (informer, workers) = self.tasks.split_last().expect("an informer task");
        for t in workers {
            crate::lab::rig::within(limit, "a worker never finished after shutdown", async {
                while !t.is_finished() {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
            .await;
        }
        informer.abort();
        self.backlog()
    }

    /// Kills it at once, as a process kill would: reconciles in flight are dropped at their
    /// `.await`, the queue and the cache are gone.
    pub fn kill(self) {
        for t in &self.tasks {
            t.abort();
        }
        match &self.queue {
            Queue::Level(c) => c.abort(),
            Queue::Edge(q) => q.shut_down(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use controlloop::workqueue::RateLimiter;

    fn panics(f: impl FnOnce()) -> bool {
        quiet_injected_panics();
        std::panic::catch_unwind(AssertUnwindSafe(f)).is_err()
    }

    #[test]
    fn every_nth_reconcile_from_the_arming_on_panics() {
        let hooks = Hooks::new();
        assert_eq!(hooks.reconcile(), Ok(()));
        hooks.panic_every(3);
        let pattern: Vec<bool> = (0..6).map(|_| panics(|| drop(hooks.reconcile()))).collect();
        assert_eq!(pattern, [false, false, true, false, false, true]);
        assert_eq!(hooks.reconciles(), 7, "panicked reconciles count too");
    }

    #[test]
    fn the_armed_event_panics_once() {
        let hooks = Hooks::new();
        hooks.event();
        hooks.panic_on_next_event();
        assert!(panics(|| hooks.event()));
        assert!(!panics(|| hooks.event()), "a second time");
        assert_eq!(hooks.events(), 3);
    }

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

    #[test]
    fn an_outage_fails_reconciles_only_while_it_lasts() {
        crate::lab::rig::paused(async {
            let hooks = Hooks::new();
            hooks.outage(Duration::from_millis(100));
            assert_eq!(hooks.reconcile(), Err(Unavailable));
            tokio::time::sleep(Duration::from_millis(99)).await;
            assert_eq!(hooks.reconcile(), Err(Unavailable));
            tokio::time::sleep(Duration::from_millis(1)).await;
            assert_eq!(hooks.reconcile(), Ok(()));
        });
    }
}
