//! controller-runtime's priority queue tests (`pkg/controller/priorityqueue/priorityqueue_test.go`
//! at v0.24.1), rewritten by hand against the port. Each test names the upstream test it
//! follows: a ginkgo `It("…")` of `Describe("Controllerworkqueue")`, or a `TestXxx` function.
//!
//! How upstream's machinery maps here:
//! - `synctest.Test` and its bubble's clock → a current-thread runtime with tokio's paused
//!   clock; `forwardQueueTimeBy(d)` → `tokio::time::advance(d)`.
//! - `synctest.Wait()` ("every other goroutine is durably blocked") → [`settle`].
//! - `fakeMetricsProvider` (depth as `map[priority]count`) → [`InMemoryPriorityMetrics`].
//! - Upstream's `tick` hooks assert the timer is set for exactly the item's delay; here the
//!   same claim is checked from outside: not handed out 1 ms before, handed out at the delay.
//! - `btreeInteractionValidator` (no tree insert or delete may break the trees) → the core's
//!   invariant P1, checked in debug builds after every mutation.
//!
//! Every await that could hang has a timeout naming what it suspects. Randomised tests print
//! their seed; set `PRIORITYQUEUE_SEED` to replay one.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};

use controlloop::{
    controller::priorityqueue::{
        AddOpts, InMemoryPriorityMetrics, Opts, PriorityMetricsSnapshot, PriorityQueue, Provider,
    },
    workqueue::{ItemExponentialFailureRateLimiter, RateLimiter},
};
use rand::{RngExt, SeedableRng, rngs::StdRng};
use tokio::{task::JoinHandle, time::advance};

const MS: Duration = Duration::from_millis(1);
const HANG: Duration = Duration::from_secs(24 * 3600);

type Metrics = Arc<InMemoryPriorityMetrics>;

/// upstream's `newQueue()`: a queue called "test" with the fake metrics provider.
fn new_queue<T: Eq + std::hash::Hash + Clone + Send + Sync + 'static>()
-> (PriorityQueue<T>, Metrics) {
    new_queue_with(None)
}

fn new_queue_with<T: Eq + std::hash::Hash + Clone + Send + Sync + 'static>(
    rate_limiter: Option<Arc<dyn RateLimiter<T>>>,
) -> (PriorityQueue<T>, Metrics) {
    let metrics = InMemoryPriorityMetrics::new();
    let opts = Opts {
        rate_limiter,
        metrics_provider: Some(Provider::WithPriority(metrics.clone())),
    };
    let q = PriorityQueue::with_opts("test", opts).expect("inside a runtime");
    (q, metrics)
}

fn snapshot(m: &Metrics) -> PriorityMetricsSnapshot {
    m.snapshot("test")
        .expect("the queue registered its metrics")
}

/// upstream's closing checks: `metrics.depth["test"]` (a `map[priority]count`), `adds` and,
/// where upstream checks it, `retries`.
fn expect_metrics(m: &Metrics, d: &[(i64, i64)], adds: u64, retries: Option<u64>) {
    let s = snapshot(m);
    assert_eq!(s.depth, depth(d), "depth per priority");
    assert_eq!(s.base.adds, adds, "adds");
    if let Some(retries) = retries {
        assert_eq!(s.base.retries, retries, "retries");
    }
}

/// The depth map, written as upstream's `map[int]int{…}` literals are.
fn depth(pairs: &[(i64, i64)]) -> BTreeMap<i64, i64> {
    pairs.iter().copied().collect()
}

fn priority(p: i64) -> AddOpts {
    AddOpts {
        priority: Some(p),
        ..AddOpts::default()
    }
}

fn after(d: Duration) -> AddOpts {
    AddOpts {
        after: d,
        ..AddOpts::default()
    }
}

async fn get<T: Eq + std::hash::Hash + Clone>(q: &PriorityQueue<T>) -> (T, i64) {
    tokio::time::timeout(HANG, q.get_with_priority())
        .await
        .expect("GetWithPriority hung: a ready key was never handed out (lost wake-up?)")
        .expect("GetWithPriority reported shutdown")
}

/// upstream's `synctest.Wait()`: let every other task run until it blocks. Each yield lets the
/// runtime poll its timers and run every woken task once; a yield never moves the paused
/// clock. Sixteen rounds cover the longest chain here (timer → timer task → getter → test).
async fn settle() {
    for _ in 0..16 {
        tokio::task::yield_now().await;
    }
}

/// A getter running in its own task, as upstream's `go func() { q.GetWithPriority() … }()`.
fn spawn_get<T: Eq + std::hash::Hash + Clone + Send + Sync + 'static>(
    q: &PriorityQueue<T>,
    n: usize,
) -> JoinHandle<Vec<(T, i64)>> {
    let q = q.clone();
    tokio::spawn(async move {
        let mut got = Vec::with_capacity(n);
        for _ in 0..n {
            got.push(get(&q).await);
        }
        got
    })
}

async fn join<T>(h: JoinHandle<T>) -> T {
    tokio::time::timeout(HANG, h)
        .await
        .expect("the getter never finished: its key was never handed out")
        .expect("the getter panicked")
}

fn seed() -> u64 {
    let seed = std::env::var("PRIORITYQUEUE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            now.expect("the clock is after 1970").as_nanos() as u64
        });
    println!("seed: {seed} (replay with PRIORITYQUEUE_SEED={seed})");
    seed
}

#[tokio::test(start_paused = true)]
async fn it_returns_an_item() {
    let (q, m) = new_queue();
    q.add_with_opts(AddOpts::default(), ["foo"]);
    assert_eq!(get(&q).await.0, "foo");
    expect_metrics(&m, &[(0, 0)], 1, Some(0));
}

#[tokio::test(start_paused = true)]
async fn it_returns_items_in_order() {
    let (q, m) = new_queue();
    q.add_with_opts(AddOpts::default(), ["foo"]);
    q.add_with_opts(AddOpts::default(), ["bar"]);
    assert_eq!(get(&q).await.0, "foo");
    assert_eq!(get(&q).await.0, "bar");
    expect_metrics(&m, &[(0, 0)], 2, None);
}

#[tokio::test(start_paused = true)]
async fn it_doesnt_return_an_item_that_is_currently_locked() {
    let (q, m) = new_queue();
    q.add_with_opts(AddOpts::default(), ["foo"]);
    assert_eq!(get(&q).await.0, "foo");
    q.add_with_opts(AddOpts::default(), ["foo"]);
    q.add_with_opts(AddOpts::default(), ["bar"]);
    assert_eq!(get(&q).await.0, "bar");
    expect_metrics(&m, &[(0, 1)], 3, None);
}

#[tokio::test(start_paused = true)]
async fn it_returns_an_item_as_soon_as_its_unlocked() {
    let (q, m) = new_queue();
    q.add_with_opts(AddOpts::default(), ["foo"]);
    assert_eq!(get(&q).await.0, "foo");
    q.add_with_opts(AddOpts::default(), ["foo"]);
    q.add_with_opts(AddOpts::default(), ["bar"]);
    assert_eq!(get(&q).await.0, "bar");
    q.add_with_opts(AddOpts::default(), ["baz"]);
    q.done(&"foo");
    assert_eq!(get(&q).await.0, "foo", "foo was queued before baz");
    expect_metrics(&m, &[(0, 1)], 4, None);
}

#[tokio::test(start_paused = true)]
async fn it_de_duplicates_items() {
    let (q, m) = new_queue();
    q.add_with_opts(AddOpts::default(), ["foo"]);
    q.add_with_opts(AddOpts::default(), ["foo"]);
    assert_eq!(q.len(), 1);
    assert_eq!(q.locked_len(), 0);
    expect_metrics(&m, &[(0, 1)], 1, None);
}

#[tokio::test(start_paused = true)]
async fn it_enqueues_a_locked_item() {
    let (q, m) = new_queue();
    q.add_with_opts(AddOpts::default(), ["foo"]);
    assert_eq!(q.len(), 1);
    assert_eq!(get(&q).await, ("foo", 0));
    q.add_with_opts(AddOpts::default(), ["foo"]);
    assert_eq!(q.len(), 1, "the re-added key counts while it is held");
    q.done(&"foo");
    assert_eq!(get(&q).await, ("foo", 0));
    expect_metrics(&m, &[(0, 0)], 2, None);
}

#[tokio::test(start_paused = true)]
async fn it_retains_the_highest_priority() {
    let (q, m) = new_queue();
    q.add_with_opts(priority(1), ["foo"]);
    q.add_with_opts(priority(2), ["foo"]);
    assert_eq!(get(&q).await, ("foo", 2));
    assert_eq!(q.len(), 0);
    expect_metrics(&m, &[(1, 0), (2, 0)], 1, None);
}

#[tokio::test(start_paused = true)]
async fn it_will_not_decrease_the_priority() {
    let (q, m) = new_queue();
    q.add_with_opts(priority(2), ["foo"]);
    q.add_with_opts(priority(1), ["foo"]);
    assert_eq!(get(&q).await, ("foo", 2));
    assert_eq!(q.len(), 0);
    expect_metrics(&m, &[(2, 0)], 1, None);
}

#[tokio::test(start_paused = true)]
async fn it_gets_pushed_to_the_front_if_the_priority_increases() {
    let (q, m) = new_queue();
    q.add_with_opts(AddOpts::default(), ["foo"]);
    q.add_with_opts(AddOpts::default(), ["bar"]);
    q.add_with_opts(AddOpts::default(), ["baz"]);
    q.add_with_opts(priority(1), ["baz"]);
    assert_eq!(get(&q).await, ("baz", 1));
    assert_eq!(q.len(), 2);
    expect_metrics(&m, &[(0, 2), (1, 0)], 3, None);
}

#[tokio::test(start_paused = true)]
async fn it_retains_the_lowest_after_duration() {
    let (q, m) = new_queue();
    q.add_with_opts(after(Duration::ZERO), ["foo"]);
    q.add_with_opts(after(Duration::from_secs(3600)), ["foo"]);
    assert_eq!(get(&q).await, ("foo", 0));
    assert_eq!(q.len(), 0);
    expect_metrics(&m, &[(0, 0)], 1, None);
}

#[tokio::test(start_paused = true)]
async fn it_doesnt_include_non_ready_items_in_len() {
    let (q, m) = new_queue();
    q.add_with_opts(after(Duration::from_secs(60)), ["foo"]);
    q.add_with_opts(AddOpts::default(), ["baz"]);
    q.add_with_opts(after(Duration::from_secs(60)), ["bar"]);
    q.add_with_opts(AddOpts::default(), ["bal"]);
    assert_eq!(q.len(), 2);
    assert_eq!(snapshot(&m).depth, depth(&[(0, 2)]));
}

/// It("Get from priority queue might get stuck when the priority queue is shut down")
#[tokio::test(start_paused = true)]
async fn it_get_does_not_get_stuck_when_the_queue_is_shut_down() {
    let (q, _) = new_queue();
    q.add("baz");
    q.shut_down();
    q.add_with_opts(after(Duration::from_secs(1)), ["foo"]);
    for _ in 0..2 {
        let got = tokio::time::timeout(HANG, q.get_with_priority())
            .await
            .expect("GetWithPriority hung after shutdown");
        assert_eq!(
            got, None,
            "shutdown is reported at once, baz is not drained"
        );
    }
}

/// It("returns many items"): draining a large queue with many getters (upstream once
/// panicked deleting from the tree while walking it).
#[tokio::test(start_paused = true)]
async fn it_returns_many_items() {
    let (q, _) = new_queue::<String>();
    let mut rng = StdRng::seed_from_u64(seed());
    for _ in 0..20 {
        for i in 0..1000 {
            let rn: i64 = rng.random_range(0..100);
            let opts = if rn < 10 {
                after(Duration::from_millis(rn as u64))
            } else {
                priority(rn)
            };
            q.add_with_opts(opts, [format!("foo{i}")]);
        }
        let workers: Vec<_> = (0..100)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move {
                    for _ in 0..10 {
                        let (key, _) = get(&q).await;
                        q.done(&key);
                    }
                })
            })
            .collect();
        for w in workers {
            join(w).await;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn it_updates_metrics_correctly_for_an_item_that_gets_initially_added_with_after_and_then_without()
 {
    let (q, m) = new_queue();
    q.add_with_opts(after(Duration::from_secs(3600)), ["foo"]);
    assert_eq!(q.len(), 0);
    assert_eq!(snapshot(&m).depth, depth(&[]));
    q.add_with_opts(AddOpts::default(), ["foo"]);
    assert_eq!(q.len(), 1);
    assert_eq!(snapshot(&m).depth, depth(&[(0, 1)]));
    assert_eq!(get(&q).await.0, "foo");
    assert_eq!(q.len(), 0);
    assert_eq!(snapshot(&m).depth, depth(&[(0, 0)]));
}

#[tokio::test(start_paused = true)]
async fn it_updates_metrics_correctly_when_an_item_with_after_is_re_added_with_higher_priority_and_no_after()
 {
    let (q, m) = new_queue();
    let waiting = AddOpts {
        after: Duration::from_secs(3600),
        priority: Some(0),
        ..AddOpts::default()
    };
    q.add_with_opts(waiting, ["foo"]);
    assert_eq!(q.len(), 0);
    assert_eq!(snapshot(&m).depth, depth(&[]));
    q.add_with_opts(priority(1), ["foo"]);
    assert_eq!(q.len(), 1);
    assert_eq!(snapshot(&m).depth, depth(&[(1, 1)]));
    assert_eq!(get(&q).await, ("foo", 1));
    assert_eq!(q.len(), 0);
    let d = snapshot(&m).depth;
    assert_eq!(d.get(&1), Some(&0));
    assert!(d.values().all(|&v| v == 0), "depth {d:?}");
}

#[tokio::test(start_paused = true)]
async fn it_follows_fifo_order_in_the_new_priority_queue_when_item_priority_changes() {
    let (q, _) = new_queue();
    q.add_with_opts(priority(0), ["foo"]);
    q.add_with_opts(priority(1), ["bar"]);
    q.add_with_opts(priority(1), ["foo"]);
    assert_eq!(q.len(), 2);
    assert_eq!(get(&q).await, ("bar", 1));
    assert_eq!(q.len(), 1);
    assert_eq!(get(&q).await, ("foo", 1));
    assert_eq!(q.len(), 0);
}

/// TestFuzzPriorityQueue: many producers and consumers; every key handed out carries the
/// highest priority asked for since it was last handed out, no key is handed out twice at
/// once, and no depth goes negative. Upstream fuzzes random strings; here keys come from 50,
/// so that merges and re-adds while locked actually happen.
#[tokio::test(start_paused = true)]
async fn test_fuzz_priority_queue() {
    let rng = Arc::new(Mutex::new(StdRng::seed_from_u64(seed())));
    let in_queue = Arc::new(tokio::sync::Mutex::new(HashMap::<String, i64>::new()));
    let handed_out = Arc::new(Mutex::new(HashSet::<String>::new()));
    let (q, m) = new_queue::<String>();
    let mut tasks = vec![];
    for _ in 0..10 {
        let (q, rng, in_queue) = (q.clone(), rng.clone(), in_queue.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..1000 {
                let (opts, key) = {
                    let mut rng = rng.lock().unwrap();
                    let opts = AddOpts {
                        // upstream: "if opts.After > 100ms { opts.After = 10ms }"
                        after: Duration::from_millis(rng.random_range(0..=100)),
                        rate_limited: false,
                        priority: rng.random_bool(0.7).then(|| rng.random_range(-1000..1000)),
                    };
                    (opts, format!("key-{}", rng.random_range(0..50)))
                };
                let mut in_queue = in_queue.lock().await;
                q.add_with_opts(opts, [key.clone()]);
                let asked = opts.priority.unwrap_or(0);
                let e = in_queue.entry(key).or_insert(asked);
                *e = (*e).max(asked);
                drop(in_queue);
                tokio::task::yield_now().await;
            }
        }));
    }
    for _ in 0..100 {
        let (q, m, in_queue, handed_out) =
            (q.clone(), m.clone(), in_queue.clone(), handed_out.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let mut in_queue = in_queue.lock().await;
                if in_queue.is_empty() {
                    return;
                }
                let (key, p) = get(&q).await;
                let expected = in_queue.remove(&key);
                drop(in_queue);
                assert_eq!(Some(p), expected, "priority of {key}");
                assert!(
                    handed_out.lock().unwrap().insert(key.clone()),
                    "{key} handed out more than once"
                );
                let s = snapshot(&m);
                assert!(s.depth.values().all(|&d| d >= 0), "negative depth {s:?}");
                tokio::task::yield_now().await;
                handed_out.lock().unwrap().remove(&key);
                q.done(&key);
            }
        }));
    }
    for t in tasks {
        join(t).await;
    }
}

#[tokio::test(start_paused = true)]
async fn test_item_is_only_returned_after_after_has_passed() {
    let (q, m) = new_queue();
    let getter = spawn_get(&q, 1);
    q.add_with_opts(after(Duration::from_secs(1)), ["foo"]);
    settle().await;
    assert!(!getter.is_finished());
    advance(Duration::from_secs(1) - MS).await;
    settle().await;
    assert!(!getter.is_finished(), "handed out before its delay");
    advance(MS).await;
    settle().await;
    assert!(getter.is_finished(), "not handed out at its delay");
    assert_eq!(join(getter).await, [("foo", 0)]);
    expect_metrics(&m, &[(0, 0)], 1, Some(1));
}

#[tokio::test(start_paused = true)]
async fn test_high_priority_item_that_became_ready_is_returned_before_low_priority_item() {
    let (q, m) = new_queue();
    let low = AddOpts {
        priority: Some(-100),
        ..AddOpts::default()
    };
    let high_later = AddOpts {
        after: Duration::from_secs(1),
        priority: Some(0),
        ..AddOpts::default()
    };
    q.add_with_opts(low, ["foo"]);
    q.add_with_opts(high_later, ["prio"]);
    settle().await;
    advance(Duration::from_secs(1)).await;
    settle().await;
    assert_eq!(get(&q).await, ("prio", 0));
    expect_metrics(&m, &[(-100, 1), (0, 0)], 2, Some(1));
}

#[tokio::test(start_paused = true)]
async fn test_item_is_returned_as_soon_as_possible() {
    let (q, m) = new_queue();
    let getter = spawn_get(&q, 1);
    settle().await; // the getter is blocked
    q.add_with_opts(AddOpts::default(), ["foo"]);
    settle().await;
    assert!(getter.is_finished());
    assert_eq!(join(getter).await, [("foo", 0)]);
    expect_metrics(&m, &[(0, 0)], 1, None);
}

#[tokio::test(start_paused = true)]
async fn test_waiting_item_is_returned_right_after_read_without_after() {
    let (q, m) = new_queue();
    let getter = spawn_get(&q, 1);
    settle().await;
    q.add_with_opts(after(Duration::from_secs(60)), ["foo"]);
    settle().await;
    assert!(!getter.is_finished());
    q.add_with_opts(AddOpts::default(), ["foo"]);
    settle().await;
    assert!(getter.is_finished());
    assert_eq!(join(getter).await, [("foo", 0)]);
    expect_metrics(&m, &[(0, 0)], 1, None);
}

#[tokio::test(start_paused = true)]
async fn test_multiple_items_with_after_are_returned_in_correct_order() {
    let (q, m) = new_queue();
    let getter = spawn_get(&q, 2);
    q.add_with_opts(after(Duration::from_secs(1)), ["foo"]);
    q.add_with_opts(after(200 * MS), ["bar"]);
    settle().await;
    assert!(!getter.is_finished());
    advance(Duration::from_secs(1)).await;
    settle().await;
    assert!(getter.is_finished());
    assert_eq!(join(getter).await, [("bar", 0), ("foo", 0)]);
    expect_metrics(&m, &[(0, 0)], 2, None);
}

#[tokio::test(start_paused = true)]
async fn test_get_from_priority_queue_is_unblocked_on_shutdown() {
    let (q, _) = new_queue::<&str>();
    let getter = {
        let q = q.clone();
        tokio::spawn(async move { q.get_with_priority().await })
    };
    settle().await;
    assert!(!getter.is_finished());
    q.shut_down();
    settle().await;
    assert!(getter.is_finished(), "shutdown did not unblock the getter");
    assert_eq!(join(getter).await, None);
}

/// TestItemsAreInludedInLenAndMetricsOnceTheyAreReady (sic)
#[tokio::test(start_paused = true)]
async fn test_items_are_included_in_len_and_metrics_once_they_are_ready() {
    let (q, m) = new_queue();
    for _round in 0..2 {
        // The second round catches state left behind by the first.
        q.add_with_opts(after(500 * MS), ["foo"]);
        q.add_with_opts(AddOpts::default(), ["baz"]);
        q.add_with_opts(after(500 * MS), ["bar"]);
        q.add_with_opts(AddOpts::default(), ["bal"]);
        settle().await;
        assert_eq!(q.len(), 2);
        assert_eq!(snapshot(&m).depth, depth(&[(0, 2)]));

        advance(Duration::from_secs(1)).await;
        settle().await;
        assert_eq!(q.len(), 4);
        assert_eq!(snapshot(&m).depth, depth(&[(0, 4)]));

        for _ in 0..4 {
            let (key, _) = get(&q).await;
            q.done(&key);
        }
        assert_eq!(q.len(), 0);
        assert_eq!(snapshot(&m).depth, depth(&[(0, 0)]));
    }
}

#[tokio::test(start_paused = true)]
async fn test_metrics_are_updated_for_item_whose_requeue_after_expired_that_gets_added_again_without_requeue_after()
 {
    let (q, m) = new_queue();
    q.add_with_opts(after(50 * MS), ["foo"]);
    settle().await;
    advance(50 * MS).await;
    settle().await;
    assert_eq!(q.len(), 1);
    assert_eq!(snapshot(&m).depth, depth(&[(0, 1)]));

    q.add_with_opts(AddOpts::default(), ["foo"]);
    assert_eq!(q.len(), 1);
    assert_eq!(snapshot(&m).depth, depth(&[(0, 1)]));

    assert_eq!(get(&q).await.0, "foo");
    assert_eq!(q.len(), 0);
    assert_eq!(snapshot(&m).depth, depth(&[(0, 0)]));
}

#[tokio::test(start_paused = true)]
async fn test_when_adding_multiple_items_with_ratelimit_true_they_dont_affect_each_other() {
    let limiter = Arc::new(ItemExponentialFailureRateLimiter::new(
        5 * MS,
        Duration::from_secs(1000),
    ));
    let (q, m) = new_queue_with::<&str>(Some(limiter.clone()));
    let getter = spawn_get(&q, 2);
    // After 7 failures, the next When("bar") is 5 ms · 2^7 = 640 ms.
    for _ in 0..7 {
        limiter.when(&"bar");
    }
    let limited = AddOpts {
        rate_limited: true,
        ..AddOpts::default()
    };
    q.add_with_opts(limited, ["foo", "bar"]);
    settle().await;
    assert!(!getter.is_finished());

    advance(5 * MS).await;
    settle().await;
    assert_eq!(q.locked_len(), 1, "foo was handed out at 5 ms");
    assert!(!getter.is_finished(), "bar was handed out before 640 ms");

    advance(635 * MS).await;
    settle().await;
    assert!(getter.is_finished(), "bar was not handed out at 640 ms");
    assert_eq!(join(getter).await, [("foo", 0), ("bar", 0)]);
    expect_metrics(&m, &[(0, 0)], 2, Some(2));
}

/// TestHighPriorityItemsAreReturnedBeforeLowPriorityItemMultipleTimes, for `after` = 0 and
/// 1 s. Upstream's third case, −1 s, cannot be written with a `Duration`; upstream treats it
/// as no delay, which is the 0 case.
#[tokio::test(start_paused = true)]
async fn test_high_priority_items_are_returned_before_low_priority_item_multiple_times() {
    const PER_PRIORITY: usize = 1000;
    let levels = [
        ("high", 10),
        ("upperMiddle", 5),
        ("middle", 0),
        ("lowMiddle", -5),
        ("low", -10),
    ];
    for delay in [Duration::ZERO, Duration::from_secs(1)] {
        let (q, m) = new_queue::<String>();
        for i in 0..PER_PRIORITY {
            for (name, p) in levels {
                let opts = AddOpts {
                    after: delay,
                    priority: Some(p),
                    ..AddOpts::default()
                };
                q.add_with_opts(opts, [format!("{name}-{i}")]);
            }
        }
        settle().await;
        if !delay.is_zero() {
            advance(delay).await;
            settle().await;
        }
        for (name, p) in levels {
            for i in 0..PER_PRIORITY {
                assert_eq!(get(&q).await, (format!("{name}-{i}"), p), "after={delay:?}");
            }
        }
        let all = 5 * PER_PRIORITY as u64;
        let retries = if delay.is_zero() { 0 } else { all };
        let levels_at_zero = [(-10, 0), (-5, 0), (0, 0), (5, 0), (10, 0)];
        expect_metrics(&m, &levels_at_zero, all, Some(retries));
    }
}
