//! Workqueue metrics with client-go's meanings, a provider trait, and an in-memory provider.
//!
//! Follows `util/workqueue/metrics.go` (`MetricsProvider`, `defaultQueueMetrics`).
//!
//! # Model
//!
//! A queue with a name and a provider asks the provider for seven metrics once, then records
//! into them from inside its lock:
//!
//! | metric | recorded when | meaning |
//! |---|---|---|
//! | depth | +1 on an add that enters `dirty`, −1 on get | the size of `dirty`, **not** `len()` |
//! | adds | an add that enters `dirty` (also while processing) | adds that were not coalesced |
//! | latency | get | seconds from the first add to get |
//! | work duration | done | seconds from get to done |
//! | unfinished work seconds | every 500 ms, not after shutdown | summed age of held items |
//! | longest running processor | every 500 ms, not after shutdown | age of the oldest held item |
//! | retries | every `add_after`, zero delay included | delayed adds asked for |
//!
//! Time is `tokio::time::Instant`, so under a paused clock every figure is exact.
//!
//! # Concurrency
//!
//! `QueueMetrics` lives inside the queue's lock. The metric objects a provider hands out
//! must be `Send + Sync`; [`InMemoryMetrics`] uses one small mutex per queue.
//!
//! # Differences from upstream
//!
//! - No global provider: a queue records metrics when it has a non-empty name *and* a
//!   provider in its config (upstream: a global, settable once, no-op by default).

use std::{
    collections::{BTreeMap, HashMap},
    hash::Hash,
    sync::Arc,
};

use tokio::time::Instant;

/// A counter (adds, retries).
pub trait CounterMetric: Send + Sync {
    /// Adds one.
    fn inc(&self);
}

/// A gauge that moves by one (depth).
pub trait GaugeMetric: Send + Sync {
    /// Adds one.
    fn inc(&self);
    /// Subtracts one.
    fn dec(&self);
}

/// A gauge that is set (unfinished work, longest running processor).
pub trait SettableGaugeMetric: Send + Sync {
    /// Sets the value.
    fn set(&self, value: f64);
}

/// A distribution of observations in seconds (latency, work duration).
pub trait HistogramMetric: Send + Sync {
    /// Records one observation.
    fn observe(&self, value: f64);
}

/// Makes the metrics of the queue called `name` (client-go's `MetricsProvider`).
pub trait MetricsProvider: Send + Sync {
    /// Depth: the size of the dirty set.
    fn new_depth_metric(&self, name: &str) -> Arc<dyn GaugeMetric>;
    /// Adds that entered the dirty set.
    fn new_adds_metric(&self, name: &str) -> Arc<dyn CounterMetric>;
    /// Seconds from the first add to get.
    fn new_latency_metric(&self, name: &str) -> Arc<dyn HistogramMetric>;
    /// Seconds from get to done.
    fn new_work_duration_metric(&self, name: &str) -> Arc<dyn HistogramMetric>;
    /// Summed age of all held items, updated every 500 ms.
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Arc<dyn SettableGaugeMetric>;
    /// Age of the oldest held item, updated every 500 ms.
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Arc<dyn SettableGaugeMetric>;
    /// Calls to `add_after`.
    fn new_retries_metric(&self, name: &str) -> Arc<dyn CounterMetric>;
}

/// The seven metrics of one queue plus the bookkeeping behind latency and work duration
/// (client-go's `defaultQueueMetrics`).
pub(crate) struct QueueMetrics<T> {
    depth: Arc<dyn GaugeMetric>,
    adds: Arc<dyn CounterMetric>,
    latency: Arc<dyn HistogramMetric>,
    work_duration: Arc<dyn HistogramMetric>,
    unfinished_work_seconds: Arc<dyn SettableGaugeMetric>,
    longest_running_processor: Arc<dyn SettableGaugeMetric>,
    retries: Arc<dyn CounterMetric>,
    /// First add time of each dirty item not yet handed out.
    add_times: HashMap<T, Instant>,
    /// Get time of each held item.
    processing_start_times: HashMap<T, Instant>,
}

impl<T: Eq + Hash + Clone> QueueMetrics<T> {
    pub(crate) fn new(provider: &dyn MetricsProvider, name: &str) -> Self {
        QueueMetrics {
            depth: provider.new_depth_metric(name),
            adds: provider.new_adds_metric(name),
            latency: provider.new_latency_metric(name),
            work_duration: provider.new_work_duration_metric(name),
            unfinished_work_seconds: provider.new_unfinished_work_seconds_metric(name),
            longest_running_processor: provider.new_longest_running_processor_seconds_metric(name),
            retries: provider.new_retries_metric(name),
            add_times: HashMap::new(),
            processing_start_times: HashMap::new(),
        }
    }

    /// An add that entered the dirty set.
    pub(crate) fn add(&mut self, item: &T, now: Instant) {
        self.adds.inc();
        self.depth.inc();
        self.add_times.entry(item.clone()).or_insert(now);
    }

    pub(crate) fn get(&mut self, item: &T, now: Instant) {
        self.depth.dec();
        self.processing_start_times.insert(item.clone(), now);
        if let Some(added) = self.add_times.remove(item) {
            self.latency.observe((now - added).as_secs_f64());
        }
    }

    pub(crate) fn done(&mut self, item: &T, now: Instant) {
        if let Some(start) = self.processing_start_times.remove(item) {
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

    pub(crate) fn retry(&self) {
        self.retries.inc();
    }
}

/// Everything [`InMemoryMetrics`] recorded for one queue.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct QueueMetricsSnapshot {
    /// Current depth (the size of the dirty set).
    pub depth: i64,
    /// Adds that entered the dirty set.
    pub adds: u64,
    /// Every latency observation, in seconds, in order.
    pub latency: Vec<f64>,
    /// Every work-duration observation, in seconds, in order.
    pub work_duration: Vec<f64>,
    /// Last unfinished-work value, in seconds.
    pub unfinished_work_seconds: f64,
    /// Last longest-running-processor value, in seconds.
    pub longest_running_processor_seconds: f64,
    /// How many times the 500 ms loop set the two gauges above.
    pub unfinished_work_updates: u64,
    /// Calls to `add_after`.
    pub retries: u64,
}

/// A provider that keeps every queue's metrics in memory, for chapters and tests to read.
#[derive(Default)]
pub struct InMemoryMetrics {
    queues: std::sync::Mutex<BTreeMap<String, Arc<Record>>>,
}

#[derive(Default)]
struct Record(std::sync::Mutex<QueueMetricsSnapshot>);

impl Record {
    fn with(&self, f: impl FnOnce(&mut QueueMetricsSnapshot)) {
        f(&mut self.0.lock().expect("metrics record poisoned"));
    }
}

impl InMemoryMetrics {
    /// An empty provider, shared so that queues and readers can hold it.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// What the queue called `name` has recorded, if it exists.
    pub fn snapshot(&self, name: &str) -> Option<QueueMetricsSnapshot> {
        let queues = self.queues.lock().expect("metrics map poisoned");
        let record = queues.get(name)?;
        Some(record.0.lock().expect("metrics record poisoned").clone())
    }

    fn record(&self, name: &str) -> Arc<Record> {
        let mut queues = self.queues.lock().expect("metrics map poisoned");
        queues.entry(name.to_owned()).or_default().clone()
    }
}

/// One metric of one queue in [`InMemoryMetrics`]: which field it writes.
struct Field {
    record: Arc<Record>,
    kind: Kind,
}

#[derive(Clone, Copy)]
enum Kind {
    Depth,
    Adds,
    Latency,
    WorkDuration,
    Unfinished,
    Longest,
    Retries,
}

impl CounterMetric for Field {
    fn inc(&self) {
        self.record.with(|m| match self.kind {
            Kind::Adds => m.adds += 1,
            Kind::Retries => m.retries += 1,
            _ => unreachable!("only adds and retries are counters"),
        });
    }
}

impl GaugeMetric for Field {
    fn inc(&self) {
        self.record.with(|m| m.depth += 1);
    }
    fn dec(&self) {
        self.record.with(|m| m.depth -= 1);
    }
}

impl SettableGaugeMetric for Field {
    fn set(&self, value: f64) {
        self.record.with(|m| match self.kind {
            Kind::Unfinished => {
                m.unfinished_work_seconds = value;
                m.unfinished_work_updates += 1;
            }
            Kind::Longest => m.longest_running_processor_seconds = value,
            _ => unreachable!("only the two unfinished-work gauges are settable"),
        });
    }
}

impl HistogramMetric for Field {
    fn observe(&self, value: f64) {
        self.record.with(|m| match self.kind {
            Kind::Latency => m.latency.push(value),
            Kind::WorkDuration => m.work_duration.push(value),
            _ => unreachable!("only latency and work duration are histograms"),
        });
    }
}

impl InMemoryMetrics {
    fn field(&self, name: &str, kind: Kind) -> Arc<Field> {
        Arc::new(Field {
            record: self.record(name),
            kind,
        })
    }
}

impl MetricsProvider for InMemoryMetrics {
    fn new_depth_metric(&self, name: &str) -> Arc<dyn GaugeMetric> {
        self.field(name, Kind::Depth)
    }
    fn new_adds_metric(&self, name: &str) -> Arc<dyn CounterMetric> {
        self.field(name, Kind::Adds)
    }
    fn new_latency_metric(&self, name: &str) -> Arc<dyn HistogramMetric> {
        self.field(name, Kind::Latency)
    }
    fn new_work_duration_metric(&self, name: &str) -> Arc<dyn HistogramMetric> {
        self.field(name, Kind::WorkDuration)
    }
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Arc<dyn SettableGaugeMetric> {
        self.field(name, Kind::Unfinished)
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Arc<dyn SettableGaugeMetric> {
        self.field(name, Kind::Longest)
    }
    fn new_retries_metric(&self, name: &str) -> Arc<dyn CounterMetric> {
        self.field(name, Kind::Retries)
    }
}
