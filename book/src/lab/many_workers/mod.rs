//! Chapter 18's experiments: many workers on many keys. A sweep of `MaxConcurrentReconciles`
//! against the number of keys and the reconcile's cost, at both controller-runtime releases;
//! the per-key serialisation detector, on the faithful queue and on one without its
//! processing set; the priority queue's low-priority initial list behind a hot key; and a
//! reconciler that burns CPU instead of sleeping ([`cpu`]).
//!
//! Follows controller-runtime v0.24.1 `pkg/internal/controller/controller.go` (the workers:
//! `MaxConcurrentReconciles` goroutines on one queue) and client-go v0.37.2
//! `util/workqueue/queue.go` (the processing set that keeps a key on one worker).
//!
//! ```text
//!  keys k0000..kNNNN ─► informer ─► queue ─► N workers, each reconcile `cost` (a tokio sleep)
//!    1) the initial list: every key once          service rate = keys / time to drain
//!    2) ROUNDS rounds: every key written again, `cost` apart
//!  a per-key in-flight set: a key taken while already in flight is an overlap
//! ```
//!
//! Everything here runs under tokio's paused clock against the embedded server in-process:
//! every count and every instant is exact. The reconciler that burns CPU ([`cpu`]) is the
//! exception: a burn takes no virtual time, so it runs under the real clock, with its figures
//! in bands ([`bands`]).
//!
//! # Invariants
//! 1. Every point of the sweep runs on a fresh cluster, with the same writes at the same
//!    instants.
//! 2. The in-flight set is updated on the reconcile's task, before and after its work, under
//!    one lock: an overlap is counted exactly when a key starts while it is held.

pub mod bands;
pub mod cpu;

pub use cpu::ch18_cpu;

use std::{
    collections::{HashMap, HashSet},
    fmt::Write as _,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use serde::Serialize;
use tokio::time::Instant;

use crate::kit::plot::{Figure, Scale, SeriesLabelPosition, plain};
use crate::lab::rig::{self, NAMESPACE, Running, object, set_value, within};
use controlloop::{
    apiserver::{Cluster, ServerOptions},
    cache::{InformerOptions, SharedIndexInformer},
    controller::{Context, Controller, ReconcileResult, Release, Request},
    workqueue::{Queue, broken::QueueWithoutProcessingSet},
};

/// A bound on every wait of a run (virtual time).
const LIMIT: Duration = Duration::from_secs(3600);
/// Rounds of writes after the initial list.
pub const ROUNDS: u64 = 1;

/// Which keys are in flight, and how many times one started while it already was.
#[derive(Default)]
pub struct InFlight {
    held: Mutex<HashSet<String>>,
    overlaps: AtomicU64,
    per_key: Mutex<HashMap<String, u64>>,
    done: AtomicU64,
    finished: Mutex<Vec<Instant>>,
}

impl InFlight {
    /// Marks `key` in flight for `cost`, counting an overlap if it already was (keeps I2).
    // book: ch18_in_flight
    pub async fn work(&self, key: &str, cost: Duration) {
        if !self.held.lock().insert(key.to_owned()) {
            self.overlaps.fetch_add(1, Ordering::SeqCst); // two workers on one key
        }
        tokio::time::sleep(cost).await; // the reconcile's work
        self.held.lock().remove(key);
        *self.per_key.lock().entry(key.to_owned()).or_default() += 1;
        self.done.fetch_add(1, Ordering::SeqCst);
        self.finished.lock().push(Instant::now());
    }
    // book: end ch18_in_flight

    /// When the `n`th reconcile finished (counting from 1), if it has.
    pub fn nth_finished(&self, n: usize) -> Option<Instant> {
        self.finished.lock().get(n.wrapping_sub(1)).copied()
    }

    /// Overlaps so far.
    pub fn overlaps(&self) -> u64 {
        self.overlaps.load(Ordering::SeqCst)
    }

    /// Finished reconciles so far.
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::SeqCst)
    }

    /// Reconciles per key, fewest and most.
    pub fn spread(&self) -> (u64, u64) {
        let per_key = self.per_key.lock();
        let min = per_key.values().copied().min().unwrap_or(0);
        let max = per_key.values().copied().max().unwrap_or(0);
        (min, max)
    }
}

/// One point of the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    /// controller-runtime's release.
    pub release: &'static str,
    /// `MaxConcurrentReconciles`.
    pub workers: usize,
    /// Keys (one ConfigMap each).
    pub keys: usize,
    /// One reconcile's cost, in milliseconds.
    pub cost_ms: u64,
    /// Virtual milliseconds until the initial list's reconciles had all finished.
    pub drain_ms: u64,
    /// Reconciles finished per virtual second while draining the initial list.
    pub rate_per_s: f64,
    /// Reconciles over the whole run, per key: fewest and most.
    pub per_key: (u64, u64),
    /// Reconciles over the whole run.
    pub reconciles: u64,
    /// Times a key started while already in flight.
    pub overlaps: u64,
}

fn key(i: usize) -> String {
    format!("k{i:04}")
}

/// Runs one point: `keys` objects, a controller of `workers` workers whose reconcile costs
/// `cost`, the initial list, then [`ROUNDS`] rounds of writes `cost` apart.
pub async fn point(release: Release, workers: usize, keys: usize, cost: Duration) -> Point {
    let cluster = Cluster::new(ServerOptions::default());
    let api: Api<ConfigMap> = Api::namespaced(cluster.in_process_client(), NAMESPACE);
    for i in 0..keys {
        let created = api
            .create(&PostParams::default(), &object(&key(i), 0))
            .await;
        created.expect("a fresh key");
    }
    let informer = Arc::new(SharedIndexInformer::new(
        api.clone(),
        InformerOptions::new(Duration::ZERO),
    ));
    let flight = Arc::new(InFlight::default());
    let f = flight.clone();
    // book: ch18_controller
    let controller = Controller::builder("many")
        .release(release)
        .max_concurrent_reconciles(workers)
        .build(&informer, move |request: Request, _: Context<ConfigMap>| {
            let flight = f.clone();
            async move {
                flight.work(&request.name, cost).await;
                Ok(ReconcileResult::done())
            }
        })
        .expect("a named controller on a fresh informer builds");
    // book: end ch18_controller
    let running = Running::start(&informer, &controller);
    let all = keys as u64;
    within(
        LIMIT,
        "the initial list never drained (a lost key?)",
        async {
            while flight.done() < all {
                tokio::time::sleep(cost).await; // coarse: the instant itself is recorded
            }
        },
    )
    .await;
    let drained = flight
        .nth_finished(keys)
        .expect("the initial list's last reconcile");
    // From the first reconcile's start (it ran `cost`), not from the controller's: the workers
    // start only once the cache-sync wait has seen the informer synced (client-go's
    // `WaitForCacheSync` looks every 100 ms), and that wait is not the queue's.
    let first = flight.nth_finished(1).expect("the first reconcile") - cost;
    let drain_ms = (drained - first).as_millis() as u64;
    for round in 1..=ROUNDS {
        for i in 0..keys {
            set_value(&api, &key(i), round).await.expect("a write");
        }
        tokio::time::sleep(cost).await;
    }
    within(LIMIT, "the rounds never drained (a lost key?)", async {
        while !(controller.queue().is_empty() && controller.metrics().active_workers == 0) {
            tokio::time::sleep(cost).await;
        }
    })
    .await;
    running.stop().await;
    Point {
        release: release.tag(),
        workers,
        keys,
        cost_ms: cost.as_millis() as u64,
        drain_ms,
        rate_per_s: all as f64 * 1000.0 / drain_ms.max(1) as f64,
        per_key: flight.spread(),
        reconciles: flight.done(),
        overlaps: flight.overlaps(),
    }
}

/// The worker counts swept.
pub const WORKERS: [usize; 5] = [1, 2, 4, 8, 16];
/// The key counts swept.
pub const KEYS: [usize; 4] = [1, 16, 256, 4096];
/// The reconcile costs swept: the first at every key count, the second up to 256 keys (a
/// 4,096-key point is the sweep's whole cost in real time).
pub const COSTS: [Duration; 2] = [Duration::from_millis(10), Duration::from_millis(100)];

/// The whole sweep, at both releases.
pub fn sweep() -> Vec<Point> {
    rig::paused(async {
        let mut points = Vec::new();
        for release in Release::ALL {
            for cost in COSTS {
                for keys in KEYS.into_iter().filter(|k| cost == COSTS[0] || *k <= 256) {
                    for workers in WORKERS {
                        points.push(point(release, workers, keys, cost).await);
                    }
                }
            }
        }
        points
    })
}

/// The sweep's claims: no key ever ran on two workers; the initial list drains in exactly
/// `ceil(keys / workers)` reconciles' time (the workers never idle while a key waits), so the
/// service rate is `min(workers, keys) / cost`; and every key is reconciled once for the list
/// and once per round of writes (a round's writes to a key coalesce into one reconcile).
pub fn check_sweep(points: &[Point]) {
    for p in points {
        assert_eq!(p.overlaps, 0, "a key ran on two workers at once: {p:?}");
        let waves = p.keys.div_ceil(p.workers) as u64;
        assert_eq!(
            p.drain_ms,
            waves * p.cost_ms,
            "workers idled while keys waited: {p:?}"
        );
        assert_eq!(
            p.per_key,
            (1 + ROUNDS, 1 + ROUNDS),
            "a key reconciled too often or too seldom: {p:?}"
        );
    }
}

/// The sweep as a Markdown table: one row per cost, key count and worker count where every
/// release gave the same figures (its release column lists them), else one row per release.
pub fn sweep_table(points: &[Point]) -> String {
    let mut out = String::from(
        "| release | cost (ms) | keys | workers | drain (ms) | rate (/s) | per key (min–max) | reconciles | overlaps |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let figures = |p: &Point| {
        format!(
            "{} | {} | {} | {} | {:.1} | {}–{} | {} | {}",
            p.cost_ms,
            p.keys,
            p.workers,
            p.drain_ms,
            p.rate_per_s,
            p.per_key.0,
            p.per_key.1,
            p.reconciles,
            p.overlaps
        )
    };
    let mut seen = Vec::new();
    for p in points {
        let at = (p.cost_ms, p.keys, p.workers);
        if seen.contains(&at) {
            continue;
        }
        seen.push(at);
        let same: Vec<&Point> = points
            .iter()
            .filter(|q| (q.cost_ms, q.keys, q.workers) == at)
            .collect();
        if same.iter().all(|q| figures(q) == figures(p)) {
            let releases: Vec<&str> = same.iter().map(|q| q.release).collect();
            let _ = writeln!(out, "| {} | {} |", releases.join(", "), figures(p));
        } else {
            for q in same {
                let _ = writeln!(out, "| {} | {} |", q.release, figures(q));
            }
        }
    }
    out
}

/// Chapter 18: the sweep, and its figure.
pub fn ch18_sweep() {
    let points = sweep();
    check_sweep(&points);
    crate::kit::snap::text("ch18_sweep", sweep_table(&points));
    rate_figure(&points, 10)
        .publish()
        .expect("the committed figure is this run's");
}

/// A queue workers take keys from: the faithful one, or one without its processing set.
pub trait Held: Clone + Send + Sync + 'static {
    /// Adds `key`.
    fn add(&self, key: String);
    /// Takes a key.
    fn take(&self) -> impl std::future::Future<Output = Option<String>> + Send;
    /// Gives `key` back.
    fn done(&self, key: &str);
}

impl Held for Queue<String> {
    fn add(&self, key: String) {
        Queue::add(self, key);
    }
    async fn take(&self) -> Option<String> {
        self.get().await
    }
    fn done(&self, key: &str) {
        Queue::done(self, &key.to_owned());
    }
}

impl Held for QueueWithoutProcessingSet<String> {
    fn add(&self, key: String) {
        QueueWithoutProcessingSet::add(self, key);
    }
    async fn take(&self) -> Option<String> {
        self.get().await
    }
    fn done(&self, key: &str) {
        QueueWithoutProcessingSet::done(self, &key.to_owned());
    }
}

/// `workers` workers on `queue`; `keys` keys written every millisecond for `cost * 10`;
/// returns the overlaps the in-flight set counted.
pub async fn serialisation<Q: Held>(queue: Q, workers: usize, keys: usize, cost: Duration) -> u64 {
    let flight = Arc::new(InFlight::default());
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (q, f) = (queue.clone(), flight.clone());
        tasks.push(tokio::spawn(async move {
            while let Some(key) = q.take().await {
                f.work(&key, cost).await;
                q.done(&key);
            }
        }));
    }
    let until = Instant::now() + cost * 10;
    while Instant::now() < until {
        for i in 0..keys {
            queue.add(key(i));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tasks.iter().for_each(|t| t.abort());
    flight.overlaps()
}

/// The detector on both queues: 4 workers, 2 keys written every millisecond, 10 ms reconciles.
pub fn serialisation_pair() -> (u64, u64) {
    rig::paused(async {
        let cost = Duration::from_millis(10);
        let faithful = serialisation(Queue::new(), 4, 2, cost).await;
        let broken = serialisation(QueueWithoutProcessingSet::new(), 4, 2, cost).await;
        (faithful, broken)
    })
}

/// Chapter 18: the per-key detector holds on the faithful queue and fires on the broken one.
pub fn ch18_serialisation() {
    let (faithful, broken) = serialisation_pair();
    assert_eq!(faithful, 0);
    assert!(broken > 0, "the broken queue kept every key on one worker");
    crate::kit::snap::yaml(
        "ch18_serialisation",
        &serde_json::json!({ "faithful_overlaps": faithful, "broken_overlaps": broken }),
        vec![],
    );
}

/// How long the hot key is written, once a millisecond, in the starvation runs.
pub const HOT_FOR: Duration = Duration::from_secs(1);
/// Cold keys (in the informer's initial list, never written) in the starvation runs.
pub const COLD: usize = 16;

/// One starvation run: what the cold keys got while a hot key was written every millisecond.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Starved {
    /// controller-runtime's release (v0.24 and v0.25: the priority queue; v0.22: FIFO).
    pub release: &'static str,
    /// `MaxConcurrentReconciles`.
    pub workers: usize,
    /// Cold keys reconciled before the hot writes stopped.
    pub cold_served_during: usize,
    /// Virtual milliseconds until every cold key had been reconciled once.
    pub last_cold_ms: u64,
    /// Reconciles of the hot key.
    pub hot_reconciles: u64,
}

/// [`COLD`] cold keys and one hot key exist before the controller starts; the hot key is then
/// written every millisecond for [`HOT_FOR`]; each reconcile costs 10 ms.
pub async fn starvation(release: Release, workers: usize) -> Starved {
    let cost = Duration::from_millis(10);
    let cluster = Cluster::new(ServerOptions::default());
    let api: Api<ConfigMap> = Api::namespaced(cluster.in_process_client(), NAMESPACE);
    for name in std::iter::once("hot".to_owned()).chain((0..COLD).map(key)) {
        let created = api.create(&PostParams::default(), &object(&name, 0)).await;
        created.expect("a fresh key");
    }
    let informer = Arc::new(SharedIndexInformer::new(
        api.clone(),
        InformerOptions::new(Duration::ZERO),
    ));
    let start = Instant::now();
    let first: Arc<Mutex<HashMap<String, Duration>>> = Arc::default();
    let flight = Arc::new(InFlight::default());
    let (f, seen) = (flight.clone(), first.clone());
    let controller = Controller::builder("starve")
        .release(release)
        .max_concurrent_reconciles(workers)
        .build(&informer, move |request: Request, _: Context<ConfigMap>| {
            let (flight, seen) = (f.clone(), seen.clone());
            async move {
                seen.lock()
                    .entry(request.name.clone())
                    .or_insert(start.elapsed());
                flight.work(&request.name, cost).await;
                Ok(ReconcileResult::done())
            }
        })
        .expect("a named controller on a fresh informer builds");
    let running = Running::start(&informer, &controller);
    // book: ch18_hot
    let mut value = 0;
    while start.elapsed() < HOT_FOR {
        value += 1;
        set_value(&api, "hot", value).await.expect("a hot write"); // priority 0: a change
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // book: end ch18_hot
    let cold = |seen: &HashMap<String, Duration>| seen.keys().filter(|k| *k != "hot").count();
    let cold_served_during = cold(&first.lock());
    within(
        LIMIT,
        "a cold key never reconciled (starved for good?)",
        async {
            while cold(&first.lock()) < COLD {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        },
    )
    .await;
    let last_cold_ms = first
        .lock()
        .iter()
        .filter(|(k, _)| *k != "hot")
        .map(|(_, t)| t.as_millis() as u64)
        .max()
        .unwrap_or(0);
    running.stop().await;
    let hot_reconciles = flight.per_key.lock().get("hot").copied().unwrap_or(0);
    assert_eq!(flight.overlaps(), 0, "a key ran on two workers at once");
    Starved {
        release: release.tag(),
        workers,
        cold_served_during,
        last_cold_ms,
        hot_reconciles,
    }
}

/// Starvation at both releases, for 1, 2 and 4 workers.
pub fn starvations() -> Vec<Starved> {
    rig::paused(async {
        let mut runs = Vec::new();
        for release in Release::ALL {
            for workers in [1, 2, 4] {
                runs.push(starvation(release, workers).await);
            }
        }
        runs
    })
}

/// The starvation table as the chapter prints it.
pub fn starvation_table(runs: &[Starved]) -> String {
    let mut out = String::from(
        "| release | workers | cold keys served while hot | last cold key at (ms) | hot reconciles |\n\
         |---|---:|---:|---:|---:|\n",
    );
    for r in runs {
        let _ = writeln!(
            out,
            "| {} | {} | {} of {COLD} | {} | {} |",
            r.release, r.workers, r.cold_served_during, r.last_cold_ms, r.hot_reconciles
        );
    }
    out
}

/// The starvation claims: under the priority queue (v0.24, v0.25) a single worker serves no cold key
/// while the hot key is written, and two or more serve every one; under v0.22's FIFO queue
/// every cold key is served while the hot key is written, whatever the workers.
pub fn check_starvation(runs: &[Starved]) {
    for r in runs {
        let priority_queue = [Release::V0_24.tag(), Release::V0_25.tag()].contains(&r.release);
        let starved = priority_queue && r.workers == 1;
        let want = if starved { 0 } else { COLD };
        assert_eq!(
            r.cold_served_during, want,
            "{} with {} worker(s): {} of {COLD} cold keys served while the hot key was written",
            r.release, r.workers, r.cold_served_during
        );
    }
}

/// Chapter 18: does a hot key starve the priority queue's initial list, with N workers?
pub fn ch18_starvation() {
    let runs = starvations();
    check_starvation(&runs);
    crate::kit::snap::text("ch18_starvation", starvation_table(&runs));
}

/// Chapter 18's figure: the initial list's service rate against the workers, one series per
/// key count, at v0.24.1, for the given cost.
pub fn rate_figure(points: &[Point], cost_ms: u64) -> Figure {
    let mut figure = Figure::new(
        format!("ch18_rate_{cost_ms}ms"),
        format!("Reconciles per virtual second against workers, {cost_ms} ms reconciles (v0.24.1)"),
    )
    .x("MaxConcurrentReconciles (log scale)", Scale::Log, plain)
    .y("reconciles per second (log scale)", Scale::Log, plain)
    .legend(SeriesLabelPosition::UpperLeft);
    for keys in KEYS {
        let series: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.keys == keys && p.cost_ms == cost_ms && p.release == Release::V0_24.tag())
            .map(|p| (p.workers as f64, p.rate_per_s))
            .collect();
        let label = if keys == 1 {
            "1 key".to_string()
        } else {
            format!("{keys} keys")
        };
        figure = figure.points(label, series);
    }
    let ideal = WORKERS
        .iter()
        .map(|w| (*w as f64, *w as f64 * 1000.0 / cost_ms as f64))
        .collect();
    figure.law("workers / cost", ideal)
}
