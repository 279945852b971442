//! The priority queue's metrics: client-go's seven workqueue metrics, with depth per priority
//! when the provider can record it, and an in-memory provider that does.
//!
//! Follows controller-runtime v0.25.3 (the same at v0.24.1), `pkg/controller/priorityqueue/metrics.go`
//! (`defaultQueueMetrics`) and `pkg/internal/metrics/workqueue.go`
//! (`MetricsProviderWithPriority`, `DepthMetricWithPriority`).
//!
//! # Model
//!
//! | metric | recorded when | differs from the client-go queue |
//! |---|---|---|
//! | depth (per priority) | +1 when a key enters `ready`, −1 on get, moved on a priority raise of a ready key | counts ready keys, locked ones included; waiting keys are not counted |
//! | adds | a key enters `ready` (new, made ready by an add, or promoted by time) | not counted for a key that only waits |
//! | latency | get: seconds since the key first entered `ready` | |
//! | work duration | done: seconds since get | |
//! | unfinished work, longest running | every 500 ms until shutdown | |
//! | retries | an add with a non-zero delay (after rate limiting) | zero delays are not counted |
//!
//! So at all times, per priority, depth equals the number of ready entries at that priority
//! (`tests/priorityqueue_model.rs` checks it after every step).
//!
//! # Concurrency
//!
//! `PriorityQueueMetrics` lives inside the queue's lock (upstream adds a map lock because
//! its 500 ms loop reads without the queue's lock; here the loop takes the queue's lock).
//!
//! # Differences from upstream
//!
//! - The provider's kind is an enum the caller chooses ([`Provider`]), not a type assertion.
//! - No provider means no metrics (upstream defaults to its Prometheus provider). The
//!   Prometheus provider's cap of 25 distinct priority labels (then
//!   `"exceeded_cardinality_limit"`) is a property of that provider and is not ported.

use std::{
    collections::{BTreeMap, HashMap},
    hash::Hash,
    sync::{Arc, Mutex},
};

use tokio::time::Instant;

use super::core::{Observer, Priority};
use crate::workqueue::InMemoryMetrics;
use crate::workqueue::{
    CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, QueueMetricsSnapshot,
    SettableGaugeMetric,
};

/// A depth gauge with one series per priority (upstream's `DepthMetricWithPriority`).
pub trait DepthMetricWithPriority: Send + Sync {
    /// Adds one at `priority`.
    fn inc(&self, priority: Priority);
    /// Subtracts one at `priority`.
    fn dec(&self, priority: Priority);
}

/// A provider that can also make a per-priority depth metric
/// (upstream's `MetricsProviderWithPriority`).
pub trait MetricsProviderWithPriority: MetricsProvider {
    /// The depth of the queue called `name`, per priority.
    fn new_depth_metric_with_priority(&self, name: &str) -> Arc<dyn DepthMetricWithPriority>;
}

/// Where a priority queue's metrics go.
#[derive(Clone)]
pub enum Provider {
    /// A workqueue provider: depth is one gauge, whatever the priority.
    Plain(Arc<dyn MetricsProvider>),
    /// A provider with a per-priority depth (what controller-runtime's own provider is).
    WithPriority(Arc<dyn MetricsProviderWithPriority>),
}

enum Depth {
    Plain(Arc<dyn GaugeMetric>),
    WithPriority(Arc<dyn DepthMetricWithPriority>),
}

/// The metrics of one named queue plus the bookkeeping behind latency and work duration
/// (upstream's `defaultQueueMetrics`).
pub(crate) struct PriorityQueueMetrics<T> {
    depth: Depth,
    adds: Arc<dyn CounterMetric>,
    latency: Arc<dyn HistogramMetric>,
    work_duration: Arc<dyn HistogramMetric>,
    unfinished_work_seconds: Arc<dyn SettableGaugeMetric>,
    longest_running_processor: Arc<dyn SettableGaugeMetric>,
    retries: Arc<dyn CounterMetric>,
    /// When each key not yet handed out first entered `ready`.
    add_times: HashMap<T, Instant>,
    /// When each held key was handed out.
    processing_start_times: HashMap<T, Instant>,
}

impl<T: Eq + Hash + Clone> PriorityQueueMetrics<T> {
    pub(crate) fn new(provider: &Provider, name: &str) -> Self {
        let (base, depth): (&dyn MetricsProvider, Depth) = match provider {
            Provider::Plain(p) => (p.as_ref(), Depth::Plain(p.new_depth_metric(name))),
            Provider::WithPriority(p) => (
                p.as_ref(),
                Depth::WithPriority(p.new_depth_metric_with_priority(name)),
            ),
        };
        PriorityQueueMetrics {
            depth,
            adds: base.new_adds_metric(name),
            latency: base.new_latency_metric(name),
            work_duration: base.new_work_duration_metric(name),
            unfinished_work_seconds: base.new_unfinished_work_seconds_metric(name),
            longest_running_processor: base.new_longest_running_processor_seconds_metric(name),
            retries: base.new_retries_metric(name),
            add_times: HashMap::new(),
            processing_start_times: HashMap::new(),
        }
    }

    /// The key left the queue's hands (upstream's `done`; a no-op for a key never handed out).
    pub(crate) fn done(&mut self, key: &T, now: Instant) {
        if let Some(start) = self.processing_start_times.remove(key) {
            self.work_duration.observe((now - start).as_secs_f64());
        }
    }

    pub(crate) fn update_unfinished_work(&self, now: Instant) {
        let mut total = 0.0;
        let mut oldest = 0.0_f64;
        for start in self.processing_start_times.values() {
            let age = (now - *start).as_secs_f64();
            total += age;
            oldest = oldest.max(age);
        }
        self.unfinished_work_seconds.set(total);
        self.longest_running_processor.set(oldest);
    }

    /// The metric calls of one core operation, at `now`.
    pub(crate) fn at(&mut self, now: Instant) -> Recording<'_, T> {
        Recording { metrics: self, now }
    }
}

/// [`PriorityQueueMetrics`] as the core's [`Observer`], for one operation at one instant.
pub(crate) struct Recording<'a, T> {
    metrics: &'a mut PriorityQueueMetrics<T>,
    now: Instant,
}

impl<T: Eq + Hash + Clone> Observer<T> for Recording<'_, T> {
    fn add(&mut self, key: &T, priority: Priority) {
        let m = &mut *self.metrics;
        m.adds.inc();
        match &m.depth {
            Depth::Plain(g) => g.inc(),
            Depth::WithPriority(g) => g.inc(priority),
        }
        m.add_times.entry(key.clone()).or_insert(self.now);
    }

    fn get(&mut self, key: &T, priority: Priority) {
        let m = &mut *self.metrics;
        match &m.depth {
            Depth::Plain(g) => g.dec(),
            Depth::WithPriority(g) => g.dec(priority),
        }
        m.processing_start_times.insert(key.clone(), self.now);
        if let Some(added) = m.add_times.remove(key) {
            m.latency.observe((self.now - added).as_secs_f64());
        }
    }

    fn update_depth(&mut self, old: Priority, new: Priority) {
        // Upstream moves the key only on a per-priority gauge; a plain gauge is unchanged.
        if let Depth::WithPriority(g) = &self.metrics.depth {
            g.dec(old);
            g.inc(new);
        }
    }

    fn retry(&mut self) {
        self.metrics.retries.inc();
    }
}

/// What [`InMemoryPriorityMetrics`] recorded for one queue.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct PriorityMetricsSnapshot {
    /// Depth per priority. A priority appears once it has been touched, and stays (at 0), as in
    /// upstream's test fake: `{0: 0}` after one add and one get.
    pub depth: BTreeMap<Priority, i64>,
    /// The six other metrics. Its own `depth` is the plain gauge, which moves only when the
    /// provider is given as [`Provider::Plain`].
    pub base: QueueMetricsSnapshot,
}

/// A provider that keeps every queue's metrics in memory, depth per priority, for tests and
/// chapters to read. The six other metrics are an [`InMemoryMetrics`]'s.
#[derive(Default)]
pub struct InMemoryPriorityMetrics {
    base: InMemoryMetrics,
    depth: Arc<Mutex<BTreeMap<String, BTreeMap<Priority, i64>>>>,
}

impl InMemoryPriorityMetrics {
    /// An empty provider, shared so that queues and readers can hold it.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// What the queue called `name` has recorded, if it exists.
    pub fn snapshot(&self, name: &str) -> Option<PriorityMetricsSnapshot> {
        let base = self.base.snapshot(name)?;
        let depth = self.depth.lock().expect("depth map poisoned");
        Some(PriorityMetricsSnapshot {
            depth: depth.get(name).cloned().unwrap_or_default(),
            base,
        })
    }
}

struct DepthSeries {
    all: Arc<Mutex<BTreeMap<String, BTreeMap<Priority, i64>>>>,
    name: String,
}

impl DepthSeries {
    fn add(&self, priority: Priority, delta: i64) {
        let mut all = self.all.lock().expect("depth map poisoned");
        *all.entry(self.name.clone())
            .or_default()
            .entry(priority)
            .or_insert(0) += delta;
    }
}

impl DepthMetricWithPriority for DepthSeries {
    fn inc(&self, priority: Priority) {
        self.add(priority, 1);
    }
    fn dec(&self, priority: Priority) {
        self.add(priority, -1);
    }
}

impl MetricsProvider for InMemoryPriorityMetrics {
    /// A plain depth gauge in the base record (the priority queue asks for the per-priority one
    /// instead when given this provider as [`Provider::WithPriority`]).
    fn new_depth_metric(&self, name: &str) -> Arc<dyn GaugeMetric> {
        self.base.new_depth_metric(name)
    }
    fn new_adds_metric(&self, name: &str) -> Arc<dyn CounterMetric> {
        self.base.new_adds_metric(name)
    }
    fn new_latency_metric(&self, name: &str) -> Arc<dyn HistogramMetric> {
        self.base.new_latency_metric(name)
    }
    fn new_work_duration_metric(&self, name: &str) -> Arc<dyn HistogramMetric> {
        self.base.new_work_duration_metric(name)
    }
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Arc<dyn SettableGaugeMetric> {
        self.base.new_unfinished_work_seconds_metric(name)
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Arc<dyn SettableGaugeMetric> {
        self.base.new_longest_running_processor_seconds_metric(name)
    }
    fn new_retries_metric(&self, name: &str) -> Arc<dyn CounterMetric> {
        self.base.new_retries_metric(name)
    }
}

impl MetricsProviderWithPriority for InMemoryPriorityMetrics {
    fn new_depth_metric_with_priority(&self, name: &str) -> Arc<dyn DepthMetricWithPriority> {
        // Upstream's fake starts every queue with an empty map: `{}` before any add.
        self.depth
            .lock()
            .expect("depth map poisoned")
            .insert(name.to_owned(), BTreeMap::new());
        Arc::new(DepthSeries {
            all: self.depth.clone(),
            name: name.to_owned(),
        })
    }
}
