//! client-go's workqueue tests (`util/workqueue/*_test.go`, v0.36), rewritten by hand against
//! the port. Each test names the upstream test it follows (client-go v0.36.3,
//! `util/workqueue/queue_test.go`, `delaying_queue_test.go`, `rate_limiting_queue_test.go`,
//! `default_rate_limiters_test.go`). Upstream's fake clock is tokio's paused clock here:
//! every wait is virtual, and every await that could hang has a timeout naming the deadlock.

use std::{sync::Arc, time::Duration};

use controlloop::workqueue::{
    DelayingQueue, InMemoryMetrics, ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter,
    MaxOfRateLimiter, MetricsProvider, Queue, QueueConfig, RateLimiter, RateLimitingQueue,
    WithMaxWaitRateLimiter,
};
use futures::FutureExt;
use tokio::time::{advance, timeout};

const MS: Duration = Duration::from_millis(1);
const HANG: Duration = Duration::from_secs(60);

async fn get<T: Eq + std::hash::Hash + Clone>(q: &Queue<T>, what: &str) -> Option<T> {
    timeout(HANG, q.get())
        .await
        .unwrap_or_else(|_| panic!("get() hung: {what}"))
}

/// Whether a get would block right now.
fn get_blocks<T: Eq + std::hash::Hash + Clone>(q: &Queue<T>) -> bool {
    q.get().now_or_never().is_none()
}

#[derive(Clone, Copy, Debug)]
enum Shutdown {
    Plain,
    WithDrain,
}

async fn shut_down(q: &Queue<usize>, how: Shutdown) {
    match how {
        Shutdown::Plain => q.shut_down(),
        Shutdown::WithDrain => timeout(HANG, q.shut_down_with_drain())
            .await
            .expect("shut_down_with_drain hung: an item never got done()"),
    }
}

/// Spawns `n` consumers that get, yield, and done until shutdown; returns how many items each
/// consumer processed. `readd_once` makes each consumer re-add an item the first time it sees it.
fn consumers(q: &Queue<usize>, n: usize, readd_once: bool) -> Vec<tokio::task::JoinHandle<usize>> {
    (0..n)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move {
                let mut seen = std::collections::HashSet::new();
                let mut processed = 0;
                while let Some(item) = q.get().await {
                    if readd_once && seen.insert(item) {
                        q.add(item); // re-added while processing: goes to dirty only
                    }
                    tokio::task::yield_now().await;
                    q.done(&item);
                    processed += 1;
                }
                processed
            })
        })
        .collect()
}

async fn producers_then_shutdown(how: Shutdown, readd_once: bool) {
    let q = Queue::new();
    let workers = consumers(&q, 10, readd_once);
    let producers: Vec<_> = (0..50)
        .map(|p| {
            let q = q.clone();
            tokio::spawn(async move {
                for _ in 0..50 {
                    q.add(p);
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    for p in producers {
        p.await.unwrap();
    }
    shut_down(&q, how).await;
    q.add(999); // after shutdown: dropped
    let mut processed = 0;
    for w in workers {
        processed += timeout(HANG, w).await.expect("a consumer hung").unwrap();
    }
    assert!(
        processed >= 50,
        "every producer's key was processed at least once"
    );
    assert_eq!(q.len(), 0, "{how:?}: the queue ends empty");
    assert_eq!(
        get(&q, "after shutdown").await,
        None,
        "999 is never returned"
    );
}

/// Item 1, `TestBasic`: 50 producers, 10 consumers, each shutdown mode.
#[tokio::test(start_paused = true)]
async fn basic_many_producers_and_consumers_end_empty_in_both_shutdown_modes() {
    producers_then_shutdown(Shutdown::Plain, false).await;
    producers_then_shutdown(Shutdown::WithDrain, false).await;
}

/// Item 2, `TestAddWhileProcessing`.
#[tokio::test(start_paused = true)]
async fn add_while_processing_still_ends_empty_in_both_shutdown_modes() {
    producers_then_shutdown(Shutdown::Plain, true).await;
    producers_then_shutdown(Shutdown::WithDrain, true).await;
}

/// Item 3, `TestLen`.
#[test]
fn len_does_not_count_a_duplicate_add() {
    let q = Queue::new();
    q.add("foo");
    assert_eq!(q.len(), 1);
    q.add("bar");
    assert_eq!(q.len(), 2);
    q.add("foo");
    assert_eq!(q.len(), 2);
}

/// Item 4, `TestReinsert`.
#[tokio::test(start_paused = true)]
async fn reinsert_during_processing_is_returned_after_done() {
    let q = Queue::new();
    q.add("foo");
    let foo = get(&q, "foo queued").await.unwrap();
    q.add(foo);
    q.done(&foo);
    assert_eq!(get(&q, "foo re-queued by done").await, Some("foo"));
    q.done(&"foo");
    assert_eq!(q.len(), 0);
}

/// Item 5, `TestCollapse` and `TestCollapseWhileProcessing` (the port has no `Touch` hook;
/// what is observable is the collapse and the held key being unavailable).
#[tokio::test(start_paused = true)]
async fn collapse_and_no_second_worker_while_processing() {
    let q = Queue::new();
    q.add("foo");
    q.add("foo");
    assert_eq!(q.len(), 1, "a duplicate add while queued collapses");
    let held = get(&q, "foo queued").await.unwrap();
    q.add("foo");
    assert_eq!(q.len(), 0, "while processing, the add waits in dirty");
    let second = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    advance(Duration::from_secs(5)).await;
    assert!(!second.is_finished(), "a second worker got a held key");
    q.done(&held);
    let got = timeout(HANG, second)
        .await
        .expect("get() hung after done")
        .unwrap();
    assert_eq!(got, Some("foo"));
}

/// Item 6, `TestQueueDrainageUsingShutDownWithDrain`.
#[tokio::test(start_paused = true)]
async fn shut_down_with_drain_waits_for_items_in_flight() {
    let q = Queue::new();
    q.add(1usize);
    q.add(2);
    let a = get(&q, "1").await.unwrap();
    let b = get(&q, "2").await.unwrap();
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain().await }
    });
    advance(Duration::from_secs(5)).await;
    assert!(!drain.is_finished(), "returned with two items in flight");
    q.done(&a);
    advance(Duration::from_secs(5)).await;
    assert!(!drain.is_finished(), "returned with one item in flight");
    q.done(&b);
    timeout(HANG, drain)
        .await
        .expect("drain hung after the last done()")
        .unwrap();
}

/// Item 7, `TestNoQueueDrainageUsingShutDown` and `TestForceQueueShutdownUsingShutDown`.
#[tokio::test(start_paused = true)]
async fn shut_down_does_not_wait_and_releases_a_waiting_drain() {
    let q = Queue::new();
    q.add(1usize);
    let _held = get(&q, "1").await.unwrap();
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain().await }
    });
    advance(Duration::from_secs(5)).await;
    assert!(!drain.is_finished());
    q.shut_down(); // returns at once, with the item still held
    timeout(HANG, drain)
        .await
        .expect("shut_down did not release shut_down_with_drain")
        .unwrap();
}

/// Item 8, `TestQueueDrainageUsingShutDownWithDrainWithDirtyItem`.
#[tokio::test(start_paused = true)]
async fn a_dirty_item_done_after_shutdown_is_still_handed_out() {
    let q = Queue::new();
    q.add(1usize);
    let one = get(&q, "1").await.unwrap();
    q.add(1); // dirty while processing
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain().await }
    });
    advance(MS).await;
    q.done(&one);
    assert_eq!(get(&q, "dirty item after shutdown").await, Some(1));
    assert!(!drain.is_finished(), "drain returned while 1 is held again");
    q.done(&1);
    assert_eq!(get(&q, "shutdown").await, None);
    timeout(HANG, drain).await.expect("drain hung").unwrap();
}

/// `TestQueueDrainageUsingShutDownWithDrainWithDirtyItem` again, for what Go's `Done` does
/// when it re-queues the last held item: it signals, and the drain sees an empty processing
/// set and returns. The port's drain once waited here until the re-queued item's own `done`,
/// and forever if no worker took it. It returns at that moment even though the item is
/// handed out again before the drain's task runs.
#[tokio::test(start_paused = true)]
async fn a_drain_returns_when_the_last_done_requeues_a_dirty_item() {
    let q = Queue::new();
    q.add("foo");
    let gotten = get(&q, "foo").await.unwrap();
    q.add("foo"); // dirty while processing
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain().await }
    });
    advance(MS).await;
    // As upstream: with nothing queued, a get reports the shutdown; the drain is blocked.
    assert_eq!(get(&q, "shut down, nothing queued").await, None);
    assert!(!drain.is_finished(), "returned with foo in flight");
    q.done(&gotten); // processing is empty: the drain is over
    let again = get(&q, "the re-queued foo").await;
    assert_eq!(again, Some("foo"), "done put the dirty item back");
    timeout(HANG, drain)
        .await
        .expect("shut_down_with_drain hung after the done that emptied processing")
        .unwrap();
    q.done(&"foo");
    assert_eq!(get(&q, "shutdown").await, None);
}

/// The same fault with no worker left to take the re-queued item: Go's drain returns; a
/// drain woken only by the last release would wait forever.
#[tokio::test(start_paused = true)]
async fn a_drain_does_not_wait_for_a_requeued_item_nobody_takes() {
    let q = Queue::new();
    q.add(1usize);
    let one = get(&q, "1").await.unwrap();
    q.add(1);
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain().await }
    });
    advance(MS).await;
    q.done(&one);
    timeout(HANG, drain)
        .await
        .expect("shut_down_with_drain waits for an item no worker will take")
        .unwrap();
    assert_eq!(q.len(), 1, "the item is still queued for a getter");
}

/// Item 9, `TestDeduping`: the earliest ready time wins; the item fires once.
#[tokio::test(start_paused = true)]
async fn delaying_deduping_keeps_the_earliest_ready_time() {
    let q = DelayingQueue::new();
    q.add_after("foo", 50 * MS);
    q.add_after("foo", 70 * MS);
    assert_eq!(q.waiting_len(), 1);
    advance(49 * MS).await;
    tokio::task::yield_now().await;
    assert_eq!(q.len(), 0, "fired early");
    advance(MS).await;
    tokio::task::yield_now().await;
    assert_eq!(q.len(), 1, "did not fire at 50 ms");
    let foo = get(&q, "foo").await.unwrap();
    q.done(&foo);
    advance(30 * MS).await;
    tokio::task::yield_now().await;
    assert_eq!(q.len(), 0, "the later 70 ms ready time fired too");

    // An earlier add_after replaces a later one.
    q.add_after("foo", 70 * MS);
    q.add_after("foo", 50 * MS);
    advance(50 * MS).await;
    tokio::task::yield_now().await;
    assert_eq!(q.len(), 1);
    assert_eq!(q.waiting_len(), 0);
}

/// Item 10, `TestAddTwoFireEarly` / `TestCopyShifting`: ready-time order, not add order.
#[tokio::test(start_paused = true)]
async fn delayed_items_come_out_in_ready_time_order() {
    let q = DelayingQueue::new();
    q.add_after("first", Duration::from_secs(1));
    q.add_after("second", 50 * MS);
    q.add_after("third", 20 * MS);
    advance(Duration::from_secs(1)).await;
    tokio::task::yield_now().await;
    let mut order = Vec::new();
    for _ in 0..3 {
        let x = get(&q, "three items due").await.unwrap();
        q.done(&x);
        order.push(x);
    }
    assert_eq!(order, ["third", "second", "first"]);
}

/// Item 11, `TestSimpleQueue`: nothing before the delay, nothing spurious after a heartbeat.
#[tokio::test(start_paused = true)]
async fn simple_delayed_add_fires_once_and_never_again() {
    let q = DelayingQueue::new();
    q.add_after("foo", 50 * MS);
    tokio::task::yield_now().await;
    assert_eq!(q.len(), 0);
    advance(60 * MS).await;
    tokio::task::yield_now().await;
    assert_eq!(q.len(), 1);
    let foo = get(&q, "foo").await.unwrap();
    q.done(&foo);
    advance(Duration::from_secs(11)).await; // past upstream's 10 s heartbeat
    tokio::task::yield_now().await;
    assert_eq!(q.len(), 0, "a spurious add after the heartbeat");
    assert!(get_blocks(&q));
}

/// Item 12, `TestRateLimitingQueue`.
#[tokio::test(start_paused = true)]
async fn rate_limiting_queue_backs_off_and_forget_resets() {
    let q = RateLimitingQueue::new(ItemExponentialFailureRateLimiter::new(
        MS,
        Duration::from_secs(1),
    ));
    q.add_rate_limited("one"); // ready after 1 ms
    q.add_rate_limited("one"); // 2 ms: later, so dropped
    assert_eq!(q.num_requeues(&"one"), 2);
    advance(MS).await;
    tokio::task::yield_now().await;
    assert_eq!(q.len(), 1, "the 1 ms delay did not fire at 1 ms");
    q.forget(&"one");
    assert_eq!(q.num_requeues(&"one"), 0);
    let one = get(&q, "one").await.unwrap();
    q.done(&one);
    q.add_rate_limited("one");
    advance(MS).await;
    tokio::task::yield_now().await;
    assert_eq!(q.len(), 1, "after forget the delay starts again at 1 ms");
}

/// Item 13, `TestItemExponentialFailureRateLimiter`.
#[test]
fn exponential_doubles_per_item_and_forget_resets() {
    let l = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1));
    let delays: Vec<_> = (0..5).map(|_| l.when(&"one")).collect();
    assert_eq!(delays, [MS, 2 * MS, 4 * MS, 8 * MS, 16 * MS]);
    assert_eq!(l.num_requeues(&"one"), 5);
    assert_eq!(l.when(&"two"), MS);
    assert_eq!(l.when(&"two"), 2 * MS);
    assert_eq!(l.num_requeues(&"two"), 2);
    l.forget(&"one");
    assert_eq!(l.num_requeues(&"one"), 0);
    assert_eq!(l.when(&"one"), MS);
}

/// Item 14, `TestItemExponentialFailureRateLimiterOverFlow`.
#[test]
fn exponential_never_overflows_past_its_maximum() {
    let l = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1000));
    for _ in 0..5 {
        l.when(&"one");
    }
    assert_eq!(l.when(&"one"), 32 * MS);
    for _ in 0..1000 {
        l.when(&"overflow1");
    }
    assert_eq!(l.when(&"overflow1"), Duration::from_secs(1000));

    let hours = ItemExponentialFailureRateLimiter::new(
        Duration::from_secs(60),
        Duration::from_secs(1000 * 3600),
    );
    for _ in 0..2 {
        hours.when(&"two");
    }
    assert_eq!(hours.when(&"two"), Duration::from_secs(240));
    for _ in 0..1000 {
        hours.when(&"overflow2");
    }
    assert_eq!(hours.when(&"overflow2"), Duration::from_secs(1000 * 3600));
}

/// Item 15, `TestItemFastSlowRateLimiter`, `TestMaxOfRateLimiter`,
/// `TestWithMaxWaitRateLimiter`.
#[test]
fn fast_slow_max_of_and_max_wait() {
    let fs = ItemFastSlowRateLimiter::new(5 * MS, Duration::from_secs(10), 3);
    let d: Vec<_> = (0..5).map(|_| fs.when(&"one")).collect();
    let slow = Duration::from_secs(10);
    assert_eq!(d, [5 * MS, 5 * MS, 5 * MS, slow, slow]);
    assert_eq!(fs.num_requeues(&"one"), 5);
    fs.forget(&"one");
    assert_eq!(fs.when(&"one"), 5 * MS);

    let max = MaxOfRateLimiter::new(vec![
        Box::new(ItemFastSlowRateLimiter::new(
            5 * MS,
            Duration::from_secs(3),
            3,
        )),
        Box::new(ItemExponentialFailureRateLimiter::new(
            MS,
            Duration::from_secs(1),
        )),
    ]);
    let d: Vec<_> = (0..5).map(|_| max.when(&"one")).collect();
    let three = Duration::from_secs(3);
    assert_eq!(d, [5 * MS, 5 * MS, 5 * MS, three, three]);
    assert_eq!(max.num_requeues(&"one"), 5);
    max.forget(&"one");
    assert_eq!(max.num_requeues(&"one"), 0);
    assert_eq!(max.when(&"one"), 5 * MS);

    let capped = WithMaxWaitRateLimiter::new(
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_secs(60),
            Duration::from_secs(3600),
        )),
        Duration::from_secs(500),
    );
    let d: Vec<_> = (0..5).map(|_| capped.when(&"one")).collect();
    let s = Duration::from_secs;
    assert_eq!(d, [s(60), s(120), s(240), s(480), s(500)]);
    assert_eq!(capped.num_requeues(&"one"), 5);
}

fn metered(name: &str) -> (Queue<&'static str>, Arc<InMemoryMetrics>) {
    let metrics = InMemoryMetrics::new();
    let provider: Arc<dyn MetricsProvider> = metrics.clone();
    let q = Queue::with_config(QueueConfig {
        name: name.into(),
        metrics_provider: Some(provider),
    })
    .unwrap();
    (q, metrics)
}

/// Item 16, `TestMetrics`: latency and work duration on the paused clock; depth counts an item
/// that is dirty while processing.
#[tokio::test(start_paused = true)]
async fn metrics_measure_latency_work_duration_and_depth_counts_dirty() {
    let (q, m) = metered("test");
    q.add("foo");
    assert_eq!(m.snapshot("test").unwrap().depth, 1);
    advance(50 * MS).await;
    let foo = get(&q, "foo").await.unwrap();
    let s = m.snapshot("test").unwrap();
    assert_eq!((s.depth, s.adds, s.latency.clone()), (0, 1, vec![0.05]));
    advance(30 * MS).await;
    for _ in 0..5 {
        q.add("foo"); // dirty while processing
    }
    let s = m.snapshot("test").unwrap();
    assert_eq!(
        (s.adds, s.depth, q.len()),
        (2, 1, 0),
        "depth counts dirty, not len"
    );
    advance(MS).await;
    q.done(&foo);
    assert_eq!(m.snapshot("test").unwrap().work_duration, vec![0.031]);
    let foo = get(&q, "foo again").await.unwrap();
    assert_eq!(m.snapshot("test").unwrap().latency, vec![0.05, 0.001]);

    // Unfinished work: held for 1.2 s, sampled every 500 ms.
    // (sleep, not advance: the paused clock then lets the 500 ms loop run at each tick)
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let s = m.snapshot("test").unwrap();
    assert_eq!(
        s.unfinished_work_updates, 2,
        "the loop has run at 500 and 1000 ms"
    );
    // The loop's ticks are at 500 ms and 1000 ms after the queue was built; `foo` was taken
    // at 81 ms, so at the last tick it had been held 919 ms.
    assert!(
        (s.unfinished_work_seconds - 0.919).abs() < 1e-9,
        "{}",
        s.unfinished_work_seconds
    );
    assert_eq!(
        s.unfinished_work_seconds,
        s.longest_running_processor_seconds
    );
    q.done(&foo);
}

/// Item 17, `TestMetricShutdown`: no unfinished-work updates after shutdown.
#[tokio::test(start_paused = true)]
async fn no_unfinished_work_updates_after_shutdown() {
    let (q, m) = metered("shutdown");
    q.add("foo");
    let _foo = get(&q, "foo").await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let before = m.snapshot("shutdown").unwrap().unfinished_work_updates;
    assert_eq!(before, 2, "updated at 500 ms and 1000 ms");
    q.shut_down();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        m.snapshot("shutdown").unwrap().unfinished_work_updates,
        before
    );
}

// ---------------------------------------------------------------------------------------
// client-go v0.38.0-beta.0 `TestQueuePauseAndResume` (`util/workqueue/queue_test.go`): the
// pausable queue. Upstream's 50 ms "nothing arrived" windows are virtual here.
// ---------------------------------------------------------------------------------------

/// Spawns a worker that gets and dones `n` items, sending each.
fn worker(q: &Queue<String>, n: usize) -> tokio::sync::mpsc::UnboundedReceiver<Option<String>> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let q = q.clone();
    tokio::spawn(async move {
        for _ in 0..n {
            let item = q.get().await;
            if let Some(i) = &item {
                q.done(i);
            }
            let _ = tx.send(item);
        }
    });
    rx
}

/// Nothing arrives on `rx` within 50 ms of virtual time.
async fn nothing_within_50ms<T: std::fmt::Debug>(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<T>,
    while_: &str,
) {
    if let Ok(got) = timeout(50 * MS, rx.recv()).await {
        panic!("received {got:?} {while_}");
    }
}

/// The next thing on `rx`, within a second of virtual time.
async fn next<T>(rx: &mut tokio::sync::mpsc::UnboundedReceiver<T>, what: &str) -> T {
    timeout(Duration::from_secs(1), rx.recv())
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}: a lost wake-up"))
        .expect("the worker is alive")
}

/// A queue that handed out "in-flight" and was then paused, and the item held.
async fn paused_holding_in_flight() -> (Queue<String>, String) {
    let q = Queue::<String>::new();
    q.add("in-flight".into());
    let in_flight = get(&q, "the first get").await.expect("queued");
    q.pause();
    (q, in_flight)
}

/// `TestQueuePauseAndResume`, "Get blocks while paused and unblocks on Resume, Add and Done
/// work while paused".
#[tokio::test(start_paused = true)]
async fn pause_blocks_get_until_resume_while_add_and_done_work() {
    let (q, in_flight) = paused_holding_in_flight().await;
    q.add("in-flight".into());
    q.done(&in_flight);
    q.add("queued-while-paused".into());
    assert_eq!(q.len(), 2, "queue length while paused");
    let mut got = worker(&q, 2);
    nothing_within_50ms(&mut got, "while the queue was paused").await;
    q.resume();
    for want in ["in-flight", "queued-while-paused"] {
        assert_eq!(next(&mut got, want).await.as_deref(), Some(want));
    }
    q.shut_down();
}

/// `TestQueuePauseAndResume`, "ShutDown unblocks a paused Get".
#[tokio::test(start_paused = true)]
async fn shut_down_unblocks_a_paused_get() {
    let q = Queue::<String>::new();
    q.add("item-1".into());
    q.pause();
    let mut got = worker(&q, 1);
    nothing_within_50ms(&mut got, "before the shutdown of a paused queue").await;
    q.shut_down();
    assert_eq!(next(&mut got, "the shutdown").await, None);
}

/// `TestQueuePauseAndResume`, "ShutDownWithDrain on a paused queue waits for in-flight items
/// and does not hand out queued ones".
#[tokio::test(start_paused = true)]
async fn a_drain_of_a_paused_queue_waits_for_held_items_and_hands_out_no_queued_one() {
    let (q, in_flight) = paused_holding_in_flight().await;
    q.add("queued-while-paused".into());
    let mut got = worker(&q, 1);
    let drained = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain().await }
    });
    assert_eq!(next(&mut got, "the worker told to stop").await, None);
    tokio::time::sleep(50 * MS).await;
    assert!(
        !drained.is_finished(),
        "the drain returned with an item in flight"
    );
    q.done(&in_flight);
    timeout(Duration::from_secs(1), drained)
        .await
        .expect("the drain hung after the last done")
        .expect("the drain task");
}

/// `TestQueuePauseAndResume`, "Resume wakes every worker blocked in Get".
#[tokio::test(start_paused = true)]
async fn resume_wakes_every_worker_blocked_in_get() {
    let q = Queue::<String>::new();
    let mut workers: Vec<_> = (0..3).map(|_| worker(&q, 1)).collect();
    tokio::time::sleep(50 * MS).await;
    q.pause();
    for i in 0..3 {
        q.add(format!("item-{i}"));
    }
    tokio::time::sleep(50 * MS).await;
    q.resume();
    for (i, w) in workers.iter_mut().enumerate() {
        let got = next(w, &format!("worker {i} woken by resume")).await;
        assert!(got.is_some(), "worker {i} got a shutdown");
    }
    q.shut_down();
}

/// `TestQueuePauseAndResume`, "rate limiting and delaying queues forward Pause and Resume"
/// (and, for the delaying queue, the Pausable half of "… are Pausable only when the wrapped
/// queue is": the port's wrappers always wrap its own queue, so the other half has no case).
#[tokio::test(start_paused = true)]
async fn rate_limiting_and_delaying_queues_forward_pause_and_resume() {
    let rl = RateLimitingQueue::<String>::new(ItemExponentialFailureRateLimiter::new(MS, HANG));
    let dl = DelayingQueue::<String>::new();
    for q in [&**rl, &*dl] {
        q.add("item".into());
        q.pause();
        let mut got = worker(q, 1);
        nothing_within_50ms(&mut got, "while the wrapping queue was paused").await;
        q.resume();
        assert_eq!(
            next(&mut got, "the get after resume").await.as_deref(),
            Some("item")
        );
        q.shut_down();
    }
}
