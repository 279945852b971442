//! The workqueue experiments of chapters 01 ("Two small sets do all the work") and 02
//! ("Forget is not Done").
//!
//! Each `chNN_*` function runs one experiment, asserts its durable claims, records its
//! snapshots and returns its report, so the chapter and `cargo run --release` run the same
//! thing. Virtual-time experiments build a paused current-thread runtime and are exact; the
//! contention harness runs in real time on two worker threads and pins its run-specific
//! numbers through bands.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU32, AtomicU64, Ordering::SeqCst},
    },
    time::Duration,
};

use serde::Serialize;

use crate::{
    band::{Band, InBand},
    snap,
    workqueue::{
        InMemoryMetrics, MetricsProvider, Queue, QueueConfig, RateLimitingQueue,
        default_controller_rate_limiter, rate_limiter::RateLimiter,
    },
};

/// A current-thread runtime on tokio's paused clock: timers fire in virtual time.
pub fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime")
}

/// Waits at most `limit` (virtual time on a paused clock) for `fut`, naming the suspected
/// deadlock if it does not finish.
pub async fn within<F: std::future::Future>(limit: Duration, what: &str, fut: F) -> F::Output {
    tokio::time::timeout(limit, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} hung for {limit:?}"))
}

// ---------------------------------------------------------------------------------------
// Chapter 01: coalescing
// ---------------------------------------------------------------------------------------

/// One step of the coalescing walk-through: what was done and what the queue then showed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// What the step did.
    pub step: String,
    /// `len()` afterwards: items waiting to be handed out.
    pub len: usize,
    /// The depth metric afterwards: the size of the dirty set.
    pub depth: i64,
}

/// 100,000 adds of one key, a worker holding it while 200 more arrive, then done and a drain.
pub fn ch01_coalescing() -> Vec<Step> {
    paused_runtime().block_on(async {
        let metrics = InMemoryMetrics::new();
        let provider: Arc<dyn MetricsProvider> = metrics.clone();
        let queue = Queue::with_config(QueueConfig {
            name: "ch01".into(),
            metrics_provider: Some(provider),
        })
        .expect("inside a runtime");
        let mut steps = Vec::new();
        let mut note = |step: &str, queue: &Queue<&str>| {
            let depth = metrics.snapshot("ch01").expect("named queue").depth;
            steps.push(Step {
                step: step.into(),
                len: queue.len(),
                depth,
            });
        };
        for _ in 0..100_000 {
            queue.add("default/web");
        }
        note("100000 adds of default/web", &queue);
        let claim = within(Duration::from_secs(1), "first get", queue.claim())
            .await
            .expect("queued");
        note("a worker claims it", &queue);
        for _ in 0..200 {
            queue.add("default/web");
        }
        note("200 adds while the worker holds it", &queue);
        claim.done();
        note("the worker calls done", &queue);
        let again = within(Duration::from_secs(1), "second get", queue.claim())
            .await
            .expect("requeued by done");
        assert_eq!(*again, "default/web");
        note("a second get takes it", &queue);
        again.done();
        note("done again", &queue);
        queue.shut_down();
        let last = within(Duration::from_secs(1), "get after shutdown", queue.get()).await;
        assert_eq!(last, None, "two gets drained 100,200 adds");
        let m = metrics.snapshot("ch01").expect("named queue");
        assert_eq!(m.adds, 2, "only two adds entered the dirty set");
        let lens: Vec<usize> = steps.iter().map(|s| s.len).collect();
        assert_eq!(lens, [1, 0, 0, 1, 0, 0]);
        snap::yaml("ch01_coalescing", &steps, vec![]);
        steps
    })
}

// ---------------------------------------------------------------------------------------
// Chapter 01: the contention harness
// ---------------------------------------------------------------------------------------

/// What the contention harness hands keys out with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// The workqueue.
    Queue,
    /// The workqueue with its processing set removed (deliberately broken).
    QueueWithoutProcessingSet,
    /// A tokio mpsc channel of 1024, its receiver shared by the workers.
    Channel,
}

/// The harness's shape: client-go's figures used 16 workers, 64 keys, 320,000 adds.
pub const WORKERS: usize = 16;
/// Keys, added round-robin.
pub const KEYS: usize = 64;
/// Adds by the one producer.
pub const ADDS: u64 = 320_000;
/// The channel variant's buffer.
pub const CHANNEL_CAPACITY: usize = 1024;

/// One run of the harness.
#[derive(Debug, Clone, Serialize)]
pub struct ContentionRun {
    /// What handed the keys out.
    pub variant: Variant,
    /// Adds made by the producer.
    pub adds: u64,
    /// Reconciles the workers ran.
    pub reconciles: u64,
    /// Times a worker took a key another worker still held.
    pub violations: u64,
    /// Wall time of the whole run.
    pub wall: Duration,
}

/// Per-key holder counts: the same-key detector.
struct Detector {
    holders: Vec<AtomicU32>,
    violations: AtomicU64,
    reconciles: AtomicU64,
}

impl Detector {
    /// A no-op reconcile of `key` that yields to the scheduler once while holding it (a real
    /// reconcile awaits the API server). Flags the key if another worker holds it too.
    async fn reconcile(&self, key: usize) {
        if self.holders[key].fetch_add(1, SeqCst) > 0 {
            self.violations.fetch_add(1, SeqCst);
        }
        tokio::task::yield_now().await;
        self.holders[key].fetch_sub(1, SeqCst);
        self.reconciles.fetch_add(1, SeqCst);
    }
}

/// Runs the harness once: one producer thread adds `ADDS` keys round-robin over `KEYS`, then
/// shuts down (or closes the channel); `WORKERS` tasks on a two-thread runtime take keys,
/// reconcile, and release them.
pub fn contention(variant: Variant) -> ContentionRun {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("a two-thread runtime");
    let detector = Arc::new(Detector {
        holders: (0..KEYS).map(|_| AtomicU32::new(0)).collect(),
        violations: AtomicU64::new(0),
        reconciles: AtomicU64::new(0),
    });
    let start = std::time::Instant::now();
    rt.block_on(async {
        let mut workers = Vec::new();
        let producer = match variant {
            Variant::Queue | Variant::QueueWithoutProcessingSet => {
                let queue = if variant == Variant::Queue {
                    Queue::new()
                } else {
                    Queue::without_processing_set()
                };
                for _ in 0..WORKERS {
                    let (queue, detector) = (queue.clone(), detector.clone());
                    workers.push(tokio::spawn(async move {
                        while let Some(claim) = queue.claim().await {
                            detector.reconcile(*claim).await;
                        }
                    }));
                }
                std::thread::spawn(move || {
                    for i in 0..ADDS {
                        queue.add(i as usize % KEYS);
                    }
                    queue.shut_down();
                })
            }
            Variant::Channel => {
                let (tx, rx) = tokio::sync::mpsc::channel::<usize>(CHANNEL_CAPACITY);
                let rx = Arc::new(tokio::sync::Mutex::new(rx));
                for _ in 0..WORKERS {
                    let (rx, detector) = (rx.clone(), detector.clone());
                    workers.push(tokio::spawn(async move {
                        loop {
                            let next = rx.lock().await.recv().await;
                            let Some(key) = next else { break };
                            detector.reconcile(key).await;
                        }
                    }));
                }
                std::thread::spawn(move || {
                    for i in 0..ADDS {
                        tx.blocking_send(i as usize % KEYS).expect("workers alive");
                    }
                })
            }
        };
        for w in workers {
            within(Duration::from_secs(120), "a worker", w)
                .await
                .expect("worker panicked");
        }
        producer.join().expect("producer panicked");
    });
    ContentionRun {
        variant,
        adds: ADDS,
        reconciles: detector.reconciles.load(SeqCst),
        violations: detector.violations.load(SeqCst),
        wall: start.elapsed(),
    }
}
