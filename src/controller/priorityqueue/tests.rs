//! The shell's behaviour beyond upstream's own tests (those are in
//! `tests/upstream_controller_runtime_priorityqueue.rs`): the misuse cases, wake-ups, metrics
//! timing, shutdown and the background tasks. Every test runs under tokio's paused clock.

use std::{sync::Arc, time::Duration};

use super::{AddOpts, InMemoryPriorityMetrics, Opts, PriorityQueue, Provider};
use crate::workqueue::{
    InMemoryMetrics, ItemExponentialFailureRateLimiter, MetricsProvider, RateLimiter,
};

const MS: Duration = Duration::from_millis(1);
const HANG: Duration = Duration::from_secs(3600);

/// Awaits `f`, failing with `what` (the suspected deadlock) if it hangs.
async fn within<F: std::future::Future>(f: F, what: &str) -> F::Output {
    tokio::time::timeout(HANG, f)
        .await
        .unwrap_or_else(|_| panic!("hung: {what}"))
}

async fn get(q: &PriorityQueue<&'static str>, what: &str) -> &'static str {
    within(q.get(), what).await.expect("not shut down")
}

/// Lets every other task run until it blocks, without moving the paused clock.
async fn settle() {
    for _ in 0..16 {
        tokio::task::yield_now().await;
    }
}

fn named(provider: Provider) -> PriorityQueue<&'static str> {
    let opts = Opts {
        rate_limiter: None,
        metrics_provider: Some(provider),
    };
    PriorityQueue::with_opts("q", opts).unwrap()
}

/// "Forget is not Done": a worker that forgets but never calls done strands its key. Every
/// later add of it is queued (and counted by `len`), and no worker ever gets it.
#[tokio::test(start_paused = true)]
async fn forget_without_done_strands_the_key_while_len_counts_its_re_adds() {
    let q = PriorityQueue::new("");
    q.add("web");
    assert_eq!(get(&q, "web was queued").await, "web");
    q.forget(&"web"); // the reconcile succeeded... and done is never called
    q.add("web");
    q.add("db");
    assert_eq!(get(&q, "db was queued").await, "db");
    q.done(&"db");
    assert_eq!(q.len(), 1, "web's new entry is ready and counted");
    let stuck = tokio::time::timeout(Duration::from_secs(3600), q.get()).await;
    assert!(stuck.is_err(), "web was handed out although still held");
    assert_eq!((q.len(), q.locked_len()), (1, 1));
}

/// "Done is not Forget": a key that is done but never forgotten keeps its failures, so the
/// next rate-limited add waits longer each time; forget resets it.
#[tokio::test(start_paused = true)]
async fn done_without_forget_keeps_backing_off_and_forget_resets_it() {
    let q = PriorityQueue::new("");
    let mut waits = vec![];
    for round in 0..4 {
        if round == 3 {
            q.forget(&"web");
        }
        let start = tokio::time::Instant::now();
        q.add_rate_limited("web");
        assert_eq!(get(&q, "the rate-limited add was lost").await, "web");
        waits.push(start.elapsed());
        q.done(&"web");
    }
    assert_eq!(waits, [5 * MS, 10 * MS, 20 * MS, 5 * MS]);
    assert_eq!(q.num_requeues(&"web"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_second_shut_down_does_nothing_and_drain_does_not_wait_for_held_keys() {
    let q = PriorityQueue::new("");
    q.add("held");
    get(&q, "held was queued").await;
    q.shut_down_with_drain(); // returns although "held" is never done
    q.shut_down(); // upstream panics here (close of a closed channel)
    assert!(q.shutting_down());
    assert_eq!(within(q.get(), "get after shutdown").await, None);
}

/// Once shut down the limiter is not asked: not for an add made after, nor for one buffered
/// before and flushed after (upstream checks the flag in `AddWithOpts` and again in
/// `lockedAddWithOpts`).
#[tokio::test(start_paused = true)]
async fn the_limiter_is_not_asked_once_shut_down() {
    let limiter = Arc::new(ItemExponentialFailureRateLimiter::new(MS, HANG));
    let opts = Opts {
        rate_limiter: Some(limiter.clone() as Arc<dyn RateLimiter<&'static str>>),
        metrics_provider: None,
    };
    let q = PriorityQueue::with_opts("", opts).unwrap();
    q.add_rate_limited("buffered"); // not flushed yet
    q.shut_down();
    q.add_rate_limited("web");
    settle().await;
    assert_eq!(limiter.num_requeues(&"web"), 0);
    assert_eq!((q.len(), limiter.num_requeues(&"buffered")), (0, 0));
}

/// A getter waiting while the only ready key is held is woken by that key's done.
#[tokio::test(start_paused = true)]
async fn done_wakes_a_getter_waiting_for_a_re_added_key() {
    let q = PriorityQueue::new("");
    q.add("web");
    get(&q, "web was queued").await;
    q.add("web"); // re-added while held: ready, but locked
    let getter = {
        let q = q.clone();
        tokio::spawn(async move { q.get().await })
    };
    settle().await;
    assert!(!getter.is_finished(), "a held key was handed out");
    q.done(&"web");
    settle().await;
    assert!(
        getter.is_finished(),
        "done did not wake the getter (lost wake-up)"
    );
    assert_eq!(
        within(getter, "the woken getter").await.unwrap(),
        Some("web")
    );
}

/// A getter dropped while waiting (a cancelled worker) must not take a wake-up with it.
#[tokio::test(start_paused = true)]
async fn a_cancelled_getter_does_not_swallow_the_wake_up() {
    let q = PriorityQueue::new("");
    let spawn = |q: &PriorityQueue<&'static str>| {
        let q = q.clone();
        tokio::spawn(async move { q.get().await })
    };
    let (first, second) = (spawn(&q), spawn(&q));
    settle().await;
    first.abort();
    settle().await;
    q.add("web");
    settle().await;
    assert!(
        second.is_finished(),
        "the add woke only the cancelled getter"
    );
    assert_eq!(
        within(second, "the woken getter").await.unwrap(),
        Some("web")
    );
}

/// Latency counts from the moment a key became ready, work duration from get to done, and
/// the 500 ms loop stops at shutdown: exact figures under the paused clock.
#[tokio::test(start_paused = true)]
async fn metrics_time_from_ready_to_get_and_from_get_to_done() {
    let m = InMemoryPriorityMetrics::new();
    let q = named(Provider::WithPriority(m.clone()));
    q.add_after("web", 300 * MS);
    tokio::time::sleep(Duration::from_secs(1)).await; // ready at 300 ms, taken at 1 s
    let key = get(&q, "web became ready").await;
    tokio::time::sleep(Duration::from_millis(1200)).await; // held for 1.2 s, past two ticks
    let held = m.snapshot("q").unwrap();
    q.done(&key);
    q.shut_down();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let s = m.snapshot("q").unwrap();
    assert_eq!(s.base.latency, [0.7]);
    assert_eq!(s.base.work_duration, [1.2]);
    assert_eq!(
        held.base.longest_running_processor_seconds, 1.0,
        "the 2 s tick"
    );
    assert_eq!(
        s.base.unfinished_work_updates, 4,
        "ticks at 0.5, 1, 1.5 and 2 s only"
    );
    assert_eq!((s.base.retries, s.base.adds), (1, 1));
}

/// With a plain provider there is one depth gauge: a priority raise does not move it.
#[tokio::test(start_paused = true)]
async fn a_plain_provider_gets_one_depth_gauge() {
    let m = InMemoryMetrics::new();
    let q = named(Provider::Plain(m.clone() as Arc<dyn MetricsProvider>));
    let high = AddOpts {
        priority: Some(5),
        ..AddOpts::default()
    };
    q.add("a");
    q.add_with_opts(high, ["a", "b"]);
    settle().await; // the adds are applied, and counted, when the buffer is flushed
    assert_eq!(m.snapshot("q").unwrap().depth, 2);
    get(&q, "a was queued").await;
    assert_eq!(m.snapshot("q").unwrap().depth, 1);
}

#[tokio::test(start_paused = true)]
async fn the_background_tasks_end_with_the_last_handle() {
    let metrics = tokio::runtime::Handle::current().metrics();
    let before = metrics.num_alive_tasks();
    let q = named(Provider::WithPriority(InMemoryPriorityMetrics::new()));
    q.add_after("later", HANG);
    settle().await;
    assert_eq!(
        metrics.num_alive_tasks(),
        before + 3,
        "flush + timer + metrics loop"
    );
    drop(q);
    tokio::time::sleep(Duration::from_secs(1)).await; // the metrics loop's next tick
    assert_eq!(
        metrics.num_alive_tasks(),
        before,
        "a task outlived its queue"
    );
}

#[tokio::test(start_paused = true)]
async fn a_claim_calls_done_when_dropped_and_requeues_through_the_queue() {
    let q = PriorityQueue::new("");
    q.add("web");
    let (claim, priority) = within(q.claim_with_priority(), "web was queued")
        .await
        .unwrap();
    assert_eq!((*claim, priority), ("web", 0));
    let low = AddOpts {
        priority: Some(-100),
        after: 10 * MS,
        ..AddOpts::default()
    };
    claim.add_with_opts(low);
    claim.forget();
    assert_eq!((q.locked_len(), q.waiting_len()), (1, 1));
    drop(claim);
    assert_eq!(q.locked_len(), 0);
    let requeued = q.claim_with_priority();
    let (again, priority) = within(requeued, "the requeue after 10 ms was lost")
        .await
        .unwrap();
    assert_eq!((*again, priority), ("web", -100));
}

#[test]
fn building_outside_a_runtime_is_an_error() {
    let err = PriorityQueue::<u8>::with_opts("", Opts::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "a priority queue needs a tokio runtime for its background task; build it inside one"
    );
}

/// The add buffer (controller-runtime v0.23+, `AddWithOpts` then `lockedFlushAddBuffer`): a
/// rate-limited add asks the limiter when the buffer is flushed, so a `forget` right after it
/// comes first and the failure is still counted; `len` flushes, as upstream's `Len` does.
#[tokio::test(start_paused = true)]
async fn the_limiter_is_asked_when_the_buffer_is_flushed_not_at_the_add() {
    let q = PriorityQueue::new("");
    q.add("web");
    let key = get(&q, "web was queued").await;
    q.add_rate_limited(key);
    q.forget(&key); // before the flush: nothing to forget yet
    assert_eq!(q.num_requeues(&key), 0, "not flushed yet");
    settle().await; // the flush task runs
    assert_eq!(q.num_requeues(&key), 1, "counted after the forget");

    let q = PriorityQueue::new("");
    q.add("a");
    assert_eq!(q.len(), 1, "len flushes first");
    q.shut_down();
    q.add("b");
    assert_eq!(q.len(), 1, "an add after shutdown is dropped");
}
