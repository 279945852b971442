//! Chapter 06's storm against the rest of a controller's initial list: what the priority queue
//! (controller-runtime v0.24's and v0.25's default) does to low-priority keys while one object is written
//! again and again.
//!
//! Follows controller-runtime v0.24.1: `pkg/handler/eventhandler.go` (an initial-list create is
//! added at `LowPriority`, a change at 0) and `pkg/controller/priorityqueue/priorityqueue.go`
//! (the ready key with the highest priority is handed out first). Under v0.22 the same
//! controller builds client-go's FIFO rate-limiting queue.
//!
//! The function [`storm_and_initial_list`] is chapter 06's block, verbatim.

use std::{fmt::Write as _, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use tokio::time::Instant;

use super::{BurstError, Running};
use crate::lab::rig::{Backend, ESSAY, Fixture, OBJECT, Storm, set_value, value_of};
use controlloop::controller::{Context, Controller, QueueKind, ReconcileResult, Release, Request};

/// What one release's controller did with the storm and the rest of its initial list.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StormAndList {
    /// The queue the release built.
    pub queue: QueueKind,
    /// The storm's writes, gap and reconcile cost.
    pub storm: Storm,
    /// When the last write was acknowledged, in ms after the first.
    pub storm_ms: u64,
    /// Reconciles of the storm's object that started while the storm lasted.
    pub storm_object_during: usize,
    /// Reconciles of the other objects that started while the storm lasted.
    pub others_during: usize,
    /// When each other object was first reconciled, in ms after the storm began.
    pub others_first_ms: Vec<u64>,
    /// The value the storm's object's last reconcile read.
    pub storm_object_final: Option<u64>,
}

impl StormAndList {
    /// The run as the chapter snapshots it.
    pub fn summary(&self) -> String {
        let Storm { writes, gap, cost } = self.storm;
        let mut s = String::new();
        let _ = writeln!(s, "queue: {:?}", self.queue);
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

/// The objects listed beside the storm's one.
pub const OTHERS: usize = 5;

/// One reconcile: which object, when it started, the value it read.
#[derive(Debug, Clone)]
pub struct Reconcile(pub String, pub Instant, pub Option<u64>);

// book: ch06_storm_and_initial_list
/// Five objects and the storm's one exist before the controller starts, so all six come from
/// its informer's initial list; once the controller is reconciling, one of them is written
/// 200 times, 1 ms apart, behind a 20 ms reconciler and one worker (the essay's storm).
pub async fn storm_and_initial_list(release: Release) -> Result<StormAndList, BurstError> {
    let Storm { writes, gap, cost } = ESSAY;
    let mut cluster = Fixture::new(&Backend::InProcess).await?;
    let others: Vec<String> = (0..OTHERS).map(|i| format!("other-{i}")).collect();
    for name in others.iter().map(String::as_str).chain([OBJECT]) {
        cluster.target.create(name, 0).await?;
    }
    let log: Arc<Mutex<Vec<Reconcile>>> = Arc::default();
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
        .release(release) // v0.22: client-go's FIFO queue; v0.24: the priority queue
        .build(&cluster.informer, reconcile)?;
    let (queue, watch) = (controller.queue().clone(), controller.clone());
    cluster.run_informer();
    let running = Running::controller(controller);
    while log.lock().is_empty() {
        tokio::time::sleep(Duration::from_millis(1)).await; // until the first reconcile starts
    }
    let (api, started) = (cluster.target.api(), Instant::now());
    for value in 1..=writes {
        set_value(&api, OBJECT, value).await?; // each write: an event, a change at priority 0
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
    running.shutdown().await;
    cluster.stop().await;

    let log = log.lock().clone();
    let ms = |r: &Reconcile| r.1.saturating_duration_since(started).as_millis() as u64;
    let during = |name: &str| {
        log.iter()
            .filter(|r| r.0 == name && ms(r) < storm_ms)
            .count()
    };
    let first = |name: &str| log.iter().find(|r| r.0 == name).map(ms);
    let run = StormAndList {
        queue: queue.kind(),
        storm: ESSAY,
        storm_ms,
        storm_object_during: during(OBJECT),
        others_during: others.iter().map(|o| during(o)).sum(),
        others_first_ms: others.iter().filter_map(|o| first(o)).collect(),
        storm_object_final: read_last(&log),
    };
    // Both releases: every object is reconciled, and the storm's one ends on the last write.
    assert_eq!(run.others_first_ms.len(), OTHERS, "{release}");
    assert_eq!(run.storm_object_final, Some(writes), "{release}");
    match run.queue {
        // FIFO: the storm's object goes to the back after each reconcile, behind the others.
        QueueKind::RateLimiting => assert_eq!(run.others_during, OTHERS, "{release}"),
        // Priority: each write raises it to 0 while the others wait at `LOW_PRIORITY` (-100),
        // so it is handed out again every time, and none of them runs until the storm is over.
        QueueKind::Priority => assert_eq!(run.others_during, 0, "{release}"),
    }
    Ok(run)
}
// book: end ch06_storm_and_initial_list
