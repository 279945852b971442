//! Chapter 06's storm against the rest of a controller's initial list: what the priority queue
//! (controller-runtime v0.24's and v0.25's default) does to low-priority keys while one object is written
//! again and again.
//!
//! Follows controller-runtime v0.24.1: `pkg/handler/eventhandler.go` (an initial-list create is
//! added at `LowPriority`, a change at 0) and `pkg/controller/priorityqueue/priorityqueue.go`
//! (the ready key with the highest priority is handed out first). Under v0.22 the same
//! controller builds client-go's FIFO rate-limiting queue.
//!
//! The function [`beside_the_list`] is chapter 06's block, verbatim; [`storm_and_initial_list`]
//! runs it on the embedded server or on this crate's fake.

use std::{fmt::Write as _, future::Future, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use tokio::time::Instant;

use super::BurstError;
use crate::lab::rig::{
    self, Backend, ESSAY, Fixture, NAMESPACE, OBJECT, Running, Storm, let_tasks_run, set_value,
    value_of,
};
use controlloop::cache::{InformerOptions, ListerWatcher, SharedIndexInformer};
use controlloop::controller::{
    Context, Controller, EnqueueRequestForObject, Event, EventHandler, QueueKind, ReconcileResult,
    Release, Request, priority_when_unchanged, priorityqueue::Priority,
};
use controlloop::fake::{FakeClientset, FakeListerWatcher};

/// What one release's controller did with the storm and the rest of its initial list.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StormAndList {
    /// The queue the release built.
    pub queue: QueueKind,
    /// Where the objects lived: resourceVersions stamped on every write, or none.
    pub objects: Objects,
    /// How long after the first reconcile started the storm's first write came.
    #[serde(skip)]
    pub delay: Duration,
    /// The storm's writes, gap and reconcile cost.
    pub storm: Storm,
    /// When the last write was acknowledged, in ms after the first.
    pub storm_ms: u64,
    /// Reconciles of the storm's object that started while the storm lasted.
    pub storm_object_during: usize,
    /// Reconciles of the other objects that started while the storm lasted.
    pub others_during: usize,
    /// When each other object was first reconciled, in ms after the storm began, earliest
    /// first.
    pub others_first_ms: Vec<u64>,
    /// The value the storm's object's last reconcile read.
    pub storm_object_final: Option<u64>,
    /// Every request the controller's handler added, in order, with the priority it asked for.
    #[serde(skip)]
    pub adds: Vec<Add>,
    /// Every reconcile, in order of starting, by object.
    #[serde(skip)]
    pub order: Vec<String>,
}

impl StormAndList {
    /// The run as the chapter snapshots it.
    pub fn summary(&self) -> String {
        let Storm { writes, gap, cost } = self.storm;
        let rvs = match self.objects {
            Objects::Server => "stamped on every write (the embedded API server)",
            Objects::Fake => "none (this crate's fake, as client-go's leaves them)",
        };
        let mut s = String::new();
        let _ = writeln!(s, "queue: {:?}; resourceVersions: {rvs}", self.queue);
        let _ = writeln!(
            s,
            "storm: {writes} writes to {OBJECT}, {} ms apart, over {} ms; {} ms per reconcile, \
             one worker",
            gap.as_millis(),
            self.storm_ms,
            cost.as_millis()
        );
        let _ = writeln!(
            s,
            "reconciles started during the storm: {OBJECT} {}, the {} other objects {}",
            self.storm_object_during,
            self.others_first_ms.len(),
            self.others_during
        );
        let _ = writeln!(
            s,
            "the other objects' first reconciles, ms after the storm began: {:?}",
            self.others_first_ms
        );
        let _ = writeln!(
            s,
            "{OBJECT}'s last reconcile read {}",
            self.storm_object_final
                .map_or("none".into(), |v| v.to_string())
        );
        s
    }
}

/// Where the storm's objects live, and so what an update's resourceVersions say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Objects {
    /// The embedded API server: every write gets a fresh resourceVersion, so a write's update
    /// is a change (priority 0).
    Server,
    /// client-go's fake clientset (the port's): no resourceVersions, so every update's old and
    /// new versions are equal and the handler adds it at `LOW_PRIORITY`, as a resync.
    Fake,
}

/// The objects listed beside the storm's one.
pub const OTHERS: usize = 5;

/// One reconcile: which object, when it started, the value it read.
#[derive(Debug, Clone)]
pub struct Reconcile(pub String, pub Instant, pub Option<u64>);

/// A handler that adds what `EnqueueRequestForObject` adds, and notes each add with the
/// priority the controller's source gives it ([`priority_when_unchanged`]).
pub struct NotingAdds(pub Arc<Mutex<Vec<Add>>>);

/// One add the handler made: the request's name and the priority it asked for.
pub type Add = (String, Option<Priority>);

impl EventHandler<ConfigMap> for NotingAdds {
    fn handle(&self, event: &Event<ConfigMap>, enqueue: &mut dyn FnMut(Request)) {
        let priority = priority_when_unchanged(event);
        EnqueueRequestForObject.handle(event, &mut |request| {
            self.0.lock().push((request.name.clone(), priority));
            enqueue(request);
        });
    }
}

/// The names of the initial list: the others, then the storm's object.
pub fn listed() -> Vec<String> {
    let others = (0..OTHERS).map(|i| format!("other-{i}"));
    others.chain([OBJECT.to_owned()]).collect()
}

/// [`beside_the_list`] with the objects on `objects`: the embedded API server (resourceVersions
/// stamped on every write, as any server's) or the port's client-go fake (none).
pub async fn storm_and_initial_list(
    release: Release,
    objects: Objects,
    delay: Duration,
) -> Result<StormAndList, BurstError> {
    match objects {
        Objects::Server => {
            let cluster = Fixture::new(&Backend::InProcess).await?;
            for name in listed() {
                cluster.target.create(&name, 0).await?;
            }
            let api = cluster.target.api();
            let write = |value| {
                let api = api.clone();
                async move { Ok(set_value(&api, OBJECT, value).await.map(drop)?) }
            };
            let informer = cluster.informer.clone();
            let run = beside_the_list(release, objects, delay, informer, write).await;
            cluster.stop().await;
            run
        }
        Objects::Fake => {
            let fake = FakeClientset::new();
            for name in listed() {
                fake.create(NAMESPACE, &rig::object(&name, 0))?;
            }
            let lw = FakeListerWatcher::new(fake.clone(), Some(NAMESPACE));
            let informer = SharedIndexInformer::new(lw, InformerOptions::new(Duration::ZERO));
            let write = |value| {
                let fake = fake.clone();
                async move {
                    Ok(fake
                        .update(NAMESPACE, &rig::object(OBJECT, value))
                        .map(drop)?)
                }
            };
            beside_the_list(release, objects, delay, Arc::new(informer), write).await
        }
    }
}

// book: ch06_storm_and_initial_list
/// Five objects and the storm's one exist before the controller starts, so all six come from
/// its informer's initial list; `delay` after the first reconcile starts, one of them is
/// written 200 times, 1 ms apart, behind a 20 ms reconciler and one worker (the essay's storm).
pub async fn beside_the_list<L, W, F>(
    release: Release,
    objects: Objects,
    delay: Duration,
    informer: Arc<SharedIndexInformer<ConfigMap, L>>,
    write: W,
) -> Result<StormAndList, BurstError>
where
    L: ListerWatcher<ConfigMap>,
    W: Fn(u64) -> F,
    F: Future<Output = Result<(), BurstError>>,
{
    let Storm { writes, gap, cost } = ESSAY;
    let log: Arc<Mutex<Vec<Reconcile>>> = Arc::default();
    let adds = Arc::default();
    let seen = log.clone();
    let reconcile = move |request: Request, ctx: Context<ConfigMap>| {
        let value = ctx.get(&request).and_then(|cm| value_of(&cm));
        seen.lock()
            .push(Reconcile(request.name, Instant::now(), value));
        async move {
            tokio::time::sleep(cost).await;
            Ok(ReconcileResult::done())
        }
    };
    let controller = Controller::builder("storm-and-list")
        .release(release) // v0.22: client-go's FIFO queue; v0.24 and v0.25: the priority queue
        .with_handler(NotingAdds(Arc::clone(&adds))) // EnqueueRequestForObject, noting each add
        .build(&informer, reconcile)?;
    let (queue, watch) = (controller.queue().clone(), controller.clone());
    let running = Running::start(&informer, &controller);
    while {
        let_tasks_run().await; // what has started by now has logged itself
        log.lock().is_empty()
    } {
        tokio::time::sleep(Duration::from_millis(1)).await; // until the first reconcile starts
    }
    if !delay.is_zero() {
        tokio::time::sleep(delay).await; // the storm begins this long after it
    }
    let started = Instant::now();
    for value in 1..=writes {
        let_tasks_run().await; // a reconcile that ends now reads the cache before this write
        write(value).await?; // an event: a change at priority 0 if the resourceVersion moved
        if value < writes {
            tokio::time::sleep(gap).await;
        }
    }
    let storm_ms = started.elapsed().as_millis() as u64;
    let read_last = |log: &[Reconcile]| log.iter().rfind(|r| r.0 == OBJECT).and_then(|r| r.2);
    while read_last(&log.lock()) != Some(writes)
        || queue.len() + queue.waiting_len() > 0
        || watch.metrics().active_workers > 0
    {
        tokio::time::sleep(Duration::from_millis(1)).await; // until every key is reconciled
    }
    running.stop().await;

    let log = log.lock().clone();
    let ms = |r: &Reconcile| r.1.saturating_duration_since(started).as_millis() as u64;
    let during = |name: &str| {
        log.iter()
            .filter(|r| r.0 == name && ms(r) < storm_ms)
            .count()
    };
    let others: Vec<String> = listed().into_iter().filter(|n| n != OBJECT).collect();
    let first = |name: &str| log.iter().find(|r| r.0 == name).map(ms);
    let mut others_first_ms: Vec<u64> = others.iter().filter_map(|o| first(o)).collect();
    others_first_ms.sort();
    let run = StormAndList {
        queue: queue.kind(),
        objects,
        delay,
        storm: ESSAY,
        storm_ms,
        storm_object_during: during(OBJECT),
        others_during: others.iter().map(|o| during(o)).sum(),
        others_first_ms,
        storm_object_final: read_last(&log),
        adds: adds.lock().clone(),
        order: log.iter().map(|r| r.0.clone()).collect(),
    };
    // Every release: every object is reconciled, and the storm's one ends on the last write.
    assert_eq!(run.others_first_ms.len(), OTHERS, "{release}");
    assert_eq!(run.storm_object_final, Some(writes), "{release}");
    match (run.queue, objects) {
        // FIFO: the storm's object goes to the back after each reconcile, behind the others.
        (QueueKind::RateLimiting, _) => assert_eq!(run.others_during, OTHERS, "{release}"),
        // Priority, resourceVersions moving: each write raises it to 0 while the others wait
        // at `LOW_PRIORITY` (-100), so it is handed out again every time, and none of them runs
        // until the storm is over.
        (QueueKind::Priority, Objects::Server) => assert_eq!(run.others_during, 0, "{release}"),
        // Priority, no resourceVersions: every update is an unchanged object to the handler,
        // added at `LOW_PRIORITY` like the list, so the queue is FIFO again.
        (QueueKind::Priority, Objects::Fake) => {
            assert_eq!(run.others_during, OTHERS, "{release}")
        }
    }
    Ok(run)
}
// book: end ch06_storm_and_initial_list
