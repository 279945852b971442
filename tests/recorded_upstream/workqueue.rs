//! Workqueue and rate-limiter scenarios (client-go `util/workqueue`).

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use controlloop::workqueue::{
    InMemoryMetrics, MetricsProvider, Queue as WorkQueue, QueueConfig, RateLimiter,
    RateLimitingQueue, default_controller_rate_limiter,
};

use crate::{SECOND, WEB, compare, compare_each, go_duration, paused, settle, within};

// ---------------------------------------------------------------------------------------
// Workqueue and rate limiters
// ---------------------------------------------------------------------------------------

/// 100,000 adds coalesce to one item; adds while held only mark it dirty (depth counts dirty,
/// len does not); done puts it back once.
#[test]
fn workqueue_coalescing() {
    let lines = paused(async {
        let metrics = InMemoryMetrics::new();
        let provider: Arc<dyn MetricsProvider> = metrics.clone();
        let q = WorkQueue::with_config(QueueConfig {
            name: "coalescing".into(),
            metrics_provider: Some(provider),
        })
        .expect("inside a runtime");
        let mut lines = Vec::new();
        let mut step = |what: &str, q: &WorkQueue<&str>| {
            let m = metrics.snapshot("coalescing").expect("a named queue");
            lines.push(format!(
                "{what}: len {}, depth {}, adds {}",
                q.len(),
                m.depth,
                m.adds
            ));
        };
        for _ in 0..100_000 {
            q.add(WEB);
        }
        step("100000 adds of default/web", &q);
        let item = within(SECOND, "first get", q.get()).await.expect("queued");
        step(&format!("get -> {item}"), &q);
        for _ in 0..200 {
            q.add(WEB);
        }
        step("200 adds while it is held", &q);
        q.done(&WEB);
        step("done", &q);
        let item = within(SECOND, "second get", q.get())
            .await
            .expect("requeued");
        step(&format!("get -> {item}"), &q);
        q.done(&WEB);
        step("done", &q);
        q.shut_down();
        let last = within(SECOND, "get after shutdown", q.get()).await;
        lines.push(format!("shut down, get: shutdown {}", last.is_none()));
        lines
    });
    compare_each(
        &[
            "workqueue_coalescing",
            "client_go_v0.37_workqueue_coalescing",
            "client_go_v0.38_workqueue_coalescing",
        ],
        lines,
    );
}

/// Forget is not done: the key stays held, adds only mark it dirty, a get waits until a late
/// done. Upstream waits 500 ms of real time for that get; here it is virtual time. The
/// recorded fact is durable either way: the get cannot return before the done.
#[test]
fn workqueue_forget_without_done() {
    let lines = paused(async {
        let q = RateLimitingQueue::new(default_controller_rate_limiter());
        let key = WEB.to_string();
        q.add(key.clone());
        let item = within(SECOND, "get", q.get()).await.expect("queued");
        let mut lines = vec![format!("add, get -> {item}")];
        q.add_rate_limited(key.clone());
        q.forget(&key);
        lines.push(format!(
            "add_rate_limited, forget: num_requeues {}, len {}",
            q.num_requeues(&key),
            q.len()
        ));
        for _ in 0..100 {
            q.add(key.clone());
        }
        lines.push(format!("100 adds: len {}", q.len()));
        let waiting = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        lines.push(format!(
            "get within 500ms: returned {}",
            waiting.is_finished()
        ));
        q.done(&key);
        let got = within(5 * SECOND, "the get the late done releases", waiting)
            .await
            .expect("get task")
            .expect("the key");
        lines.push(format!("late done: the waiting get -> {got}"));
        q.done(&got);
        q.shut_down();
        lines
    });
    compare_each(
        &[
            "workqueue_forget_without_done",
            "client_go_v0.37_workqueue_forget_without_done",
            "client_go_v0.38_workqueue_forget_without_done",
        ],
        lines,
    );
}

/// A limiter that remembers the last delay it handed out.
struct Recording<L> {
    inner: L,
    last: Arc<Mutex<Duration>>,
}

impl<T, L: RateLimiter<T>> RateLimiter<T> for Recording<L> {
    fn when(&self, item: &T) -> Duration {
        let d = self.inner.when(item);
        *self.last.lock().unwrap() = d;
        d
    }
    fn forget(&self, item: &T) {
        self.inner.forget(item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        self.inner.num_requeues(item)
    }
}

/// Done without forget keeps the failure count, so the next failure backs off as the fourth,
/// not the first; forget resets it.
#[test]
fn workqueue_done_without_forget() {
    let lines = paused(async {
        let last = Arc::new(Mutex::new(Duration::ZERO));
        let q = RateLimitingQueue::new(Recording {
            inner: default_controller_rate_limiter::<String>(),
            last: last.clone(),
        });
        let key = WEB.to_string();
        let mut lines = Vec::new();
        let get = |q: &RateLimitingQueue<String>| {
            let q = q.clone();
            async move {
                within(2000 * SECOND, "the requeued key", q.get())
                    .await
                    .expect("not shut down")
            }
        };
        q.add(key.clone());
        for what in [
            "failure 1",
            "failure 2",
            "failure 3",
            "success",
            "next failure",
            "success, forget",
            "next failure",
        ] {
            let item = get(&q).await;
            match what {
                "success" => {
                    q.done(&item);
                    lines.push(format!(
                        "success, done without forget: num_requeues {}",
                        q.num_requeues(&key)
                    ));
                    q.add(key.clone());
                }
                "success, forget" => {
                    q.forget(&item);
                    q.done(&item);
                    lines.push(format!(
                        "success, forget and done: num_requeues {}",
                        q.num_requeues(&key)
                    ));
                    q.add(key.clone());
                }
                _ => {
                    q.add_rate_limited(item.clone());
                    q.done(&item);
                    let d = *last.lock().unwrap();
                    lines.push(format!(
                        "{what}: add_rate_limited delay {}, done; num_requeues {}",
                        go_duration(d),
                        q.num_requeues(&key)
                    ));
                }
            }
        }
        q.shut_down();
        lines
    });
    compare_each(
        &[
            "workqueue_done_without_forget",
            "client_go_v0.37_workqueue_done_without_forget",
            "client_go_v0.38_workqueue_done_without_forget",
        ],
        lines,
    );
}

/// The default controller limiter for 25 failures of one item.
#[test]
fn rate_limiter_default() {
    let lines = paused(async {
        let l = default_controller_rate_limiter::<&str>();
        let mut lines = Vec::new();
        let mut first = 0;
        for i in 1..=25 {
            let d = l.when(&WEB);
            if d == Duration::from_secs(1000) && first == 0 {
                first = i;
            }
            lines.push(format!("failure {i}: {}", go_duration(d)));
        }
        lines.push(format!("first failure at the 1000s ceiling: {first}"));
        lines.push(format!("num_requeues: {}", l.num_requeues(&WEB)));
        lines
    });
    compare_each(
        &[
            "rate_limiter_default",
            "client_go_v0.37_rate_limiter_default",
            "client_go_v0.38_rate_limiter_default",
        ],
        lines,
    );
}

/// The first failure of 120 fresh items back to back: the shared bucket. Upstream's side
/// reserves at one frozen instant; here the paused clock does not move between calls.
#[test]
fn rate_limiter_bucket_120() {
    let lines = paused(async {
        let l = default_controller_rate_limiter::<String>();
        (1..=120)
            .map(|i| {
                let d = l.when(&format!("default/obj-{i:03}"));
                format!("item {i:03}: {}", go_duration(d))
            })
            .collect()
    });
    compare_each(
        &[
            "rate_limiter_bucket_120",
            "client_go_v0.37_rate_limiter_bucket_120",
            "client_go_v0.38_rate_limiter_bucket_120",
        ],
        lines,
    );
}

/// client-go v0.38's pausable queue: two getters on a paused queue, adds while paused, a
/// resume (both getters wake; what they received is sorted, as the recorder sorts it), a
/// shutdown while paused with an item queued, and whether the wrapping queues pause.
#[test]
fn workqueue_pause() {
    let lines = paused(async {
        let q = WorkQueue::<String>::new();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let getter = |q: &WorkQueue<String>| {
            let (q, tx) = (q.clone(), tx.clone());
            tokio::spawn(async move {
                let item = q.get().await.unwrap_or_else(|| "shutdown".into());
                let _ = tx.send(item);
            });
        };
        let mut received = async || {
            settle().await;
            let mut out = Vec::new();
            while let Ok(item) = rx.try_recv() {
                out.push(item);
            }
            out.sort();
            out
        };
        let mut lines = Vec::new();
        q.add("a".into());
        q.pause();
        getter(&q);
        getter(&q);
        let got = received().await;
        lines.push(format!(
            "add a, pause, two gets: received [{}], len {}",
            got.join(" "),
            q.len()
        ));
        q.add("b".into());
        q.add("a".into());
        let got = received().await;
        lines.push(format!(
            "add b, add a while paused: received [{}], len {}",
            got.join(" "),
            q.len()
        ));
        q.resume();
        let first = received().await;
        lines.push(format!(
            "resume: received [{}], len {}",
            first.join(" "),
            q.len()
        ));
        for item in &first {
            q.done(item);
        }
        q.add("c".into());
        q.pause();
        getter(&q);
        let got = received().await;
        lines.push(format!(
            "done, add c, pause, a get: received [{}], len {}",
            got.join(" "),
            q.len()
        ));
        q.shut_down();
        let got = received().await;
        lines.push(format!(
            "shut down while paused: received [{}], len {}",
            got.join(" "),
            q.len()
        ));
        // Pausable: each wrapper's get waits while paused with an item queued.
        let rl = RateLimitingQueue::<String>::new(default_controller_rate_limiter());
        let dl = controlloop::workqueue::DelayingQueue::<String>::new();
        let mut pausable = Vec::new();
        for q in [&**rl, &*dl] {
            q.add("x".into());
            q.pause();
            pausable.push(
                within(SECOND, "a get on a paused queue", async {
                    tokio::time::timeout(SECOND, q.get()).await.is_err()
                })
                .await,
            );
            q.shut_down();
        }
        lines.push(format!(
            "Pausable: NewTypedRateLimitingQueue {}, NewTypedDelayingQueue {}",
            pausable[0], pausable[1]
        ));
        lines
    });
    compare("client_go_v0.38_workqueue_pause", lines);
}
