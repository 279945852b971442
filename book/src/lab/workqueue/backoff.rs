//! Chapter 02's runs: `forget` without `done`, `done` without `forget`, and the default
//! controller rate limiter's delays.
//!
//! Follows client-go v0.37.2 `util/workqueue/rate_limiting_queue.go` and
//! `default_rate_limiters.go` (`DefaultTypedControllerRateLimiter`: the maximum of a per-item
//! exponential limiter, 5 ms doubling to 1000 s, and a shared token bucket of 10 per second with
//! a burst of 100), which controller-runtime v0.22 uses as its default; controller-runtime
//! v0.24's and v0.25's default is their priority queue with the exponential limiter alone. The
//! runs that depend on the controller's queue or limiter take a [`Release`] and run under each.

use std::time::Duration;

use crate as controlloop_book;
use crate::kit::plot::{Figure, Scale, SeriesLabelPosition, plain, seconds};
use controlloop::controller::{QueueKind, Release, Request, RequestQueue};
use controlloop::workqueue::{DEFAULT_BURST, DEFAULT_MAX_DELAY};

/// Chapter 02's first figure: each series' delay by failure number of one key, on a log scale,
/// with the limiter's ceiling and the first failure that reaches it marked. A series is a
/// limiter's delays for failures 1, 2, 3, … (a second limiter draws beside the first).
pub fn limiter_figure(series: &[(&str, &[Duration])]) -> Figure {
    let ceiling = DEFAULT_MAX_DELAY.as_secs_f64();
    let mut figure = Figure::new(
        "ch02_default_limiter",
        "One key failing again and again: its delays (virtual time)",
    )
    .x("failure of the same key", Scale::Linear, plain)
    .y("delay before the retry (log scale)", Scale::Log, seconds)
    .legend(SeriesLabelPosition::LowerRight);
    for (label, delays) in series {
        figure = figure.points(*label, numbered(delays));
    }
    figure = figure.level(
        format!("the ceiling, {} s ({})", plain(ceiling), seconds(ceiling)),
        ceiling,
    );
    let mut marked = Vec::new();
    for (_, delays) in series {
        let first = delays.iter().position(|d| *d >= DEFAULT_MAX_DELAY);
        if let Some(n) = first.map(|i| i + 1).filter(|n| !marked.contains(n)) {
            marked.push(n);
            figure = figure.mark(format!("failure {n}: the first at the ceiling"), n as f64);
        }
    }
    figure
}

/// Chapter 02's second figure: each series' delay for fresh keys that fail once each, back to
/// back, with the end of the default bucket's burst marked.
pub fn bucket_figure(series: &[(&str, &[Duration])]) -> Figure {
    let mut figure = Figure::new(
        "ch02_bucket",
        "Fresh keys failing once each, back to back: their delays (virtual time)",
    )
    .x("key, in the order they failed", Scale::Linear, plain)
    .y("delay before the retry", Scale::Linear, seconds);
    for (label, delays) in series {
        figure = figure.points(*label, numbered(delays));
    }
    figure.mark(
        format!("key {DEFAULT_BURST}: the bucket's burst spent"),
        f64::from(DEFAULT_BURST),
    )
}

/// `delays` as points (n, seconds), n counting from 1.
fn numbered(delays: &[Duration]) -> Vec<(f64, f64)> {
    (1..)
        .zip(delays)
        .map(|(n, d)| (f64::from(n), d.as_secs_f64()))
        .collect()
}

// book: ch02_forget_without_done
/// What a worker that forgot `done` leaves behind.
#[derive(Debug, PartialEq, serde::Serialize)]
pub struct Stranded {
    /// The queue the release builds.
    pub queue: QueueKind,
    /// The key the worker took.
    pub taken: String,
    /// The failures the limiter counts once the queue's tasks have run.
    pub num_requeues_after_forget: usize,
    /// `len` then.
    pub len_after_forget: usize,
    /// `len` after 100 more adds.
    pub len_after_100_adds: usize,
    /// Whether an idle worker got the key within 500 ms.
    pub get_within_500ms: bool,
    /// What the idle worker got once the late `done` came.
    pub after_late_done: Option<String>,
}

/// Forget where done was meant, on the queue a controller of `release` builds.
pub async fn forget_without_done(release: Release) -> Stranded {
    use controlloop_book::lab::rig::{let_tasks_run, within};
    use std::time::Duration;
    let queue = RequestQueue::for_release(release).unwrap(); // v0.22: rate-limiting; v0.24+: priority
    queue.add(Request::new("default", "web"));

    let (key, _) = queue.get_with_priority().await.unwrap(); // a worker takes the key
    queue.add_rate_limited(key.clone()); // its reconcile failed: retry with backoff
    queue.forget(&key); // the wrong call: forget where done was meant

    let_tasks_run().await; // the priority queue applies the add on its own task
    let (num_requeues, len_after_forget) = (queue.num_requeues(&key), queue.len());
    for _ in 0..100 {
        queue.add(key.clone()); // the object changes, a hundred times
    }
    let len = queue.len();
    let waiting = tokio::spawn({
        let queue = queue.clone();
        async move { queue.get_with_priority().await } // an idle worker waits for work
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got_within_500ms = waiting.is_finished();
    // On either queue, no worker ever sees the key again...
    assert!(!got_within_500ms, "{release}");
    // ...and on either, forget did not undo the failure the priority queue counts: it asks
    // its limiter when its task applies the add, after the forget.
    let rate_limiting = queue.kind() == QueueKind::RateLimiting;
    assert_eq!(num_requeues, usize::from(!rate_limiting), "{release}");
    // Only client-go's queue looks idle: the priority queue counts the change it will never
    // hand out.
    assert_eq!(len == 0, rate_limiting, "{release}: len {len}");

    queue.done(&key); // only a late done releases it, and the waiting worker takes it
    let late = within(Duration::from_secs(1), "the get after done", waiting).await;
    let after_late_done = late.unwrap().map(|(key, _)| key.to_string());
    assert_eq!(after_late_done.as_deref(), Some("default/web"));
    Stranded {
        queue: queue.kind(),
        taken: key.to_string(),
        num_requeues_after_forget: num_requeues,
        len_after_forget,
        len_after_100_adds: len,
        get_within_500ms: got_within_500ms,
        after_late_done,
    }
}
// book: end ch02_forget_without_done

/// [`forget_without_done`] on both releases' queues; the book's release is the snapshot
/// (`ch02_forget_without_done`).
pub fn ch02_forget_without_done() {
    controlloop_book::lab::rig::paused(async {
        for release in Release::ALL {
            forget_without_done(release).await;
        }
        let report = forget_without_done(Release::default()).await;
        controlloop_book::kit::snap::yaml("ch02_forget_without_done", &report, vec![]);
    });
}

// book: ch02_default_limiter
/// The delays of one key failing 1000 times in a row, under the limiter a controller of
/// `release` gets when it sets none: the table of the rows where the formula bends, and every
/// delay.
pub fn default_limiter(release: Release) -> (String, Vec<Duration>) {
    use controlloop_book::lab::workqueue::human;
    use std::fmt::Write;
    let limiter = release.default_rate_limiter();
    let delays: Vec<Duration> = (0..1000).map(|_| limiter.when(&"default/web")).collect();

    // Failure n waits 5 ms · 2^(n-1), until that passes the ceiling of 1000 s.
    let ceiling = Duration::from_secs(1000);
    for (n, delay) in (1u32..).zip(&delays) {
        let doubled = Duration::from_millis(5).saturating_mul(1 << (n - 1).min(31));
        assert_eq!(*delay, doubled.min(ceiling), "{release}, failure {n}");
    }
    let first_at_ceiling = delays.iter().position(|d| *d == ceiling).unwrap() + 1;
    assert_eq!(first_at_ceiling, 19);
    assert_eq!(limiter.num_requeues(&"default/web"), 1000);
    let mut table = format!("{:>7}  delay\n", "failure");
    for n in [1, 2, 18, first_at_ceiling, 1000] {
        writeln!(table, "{n:>7}  {}", human(delays[n - 1])).unwrap();
    }
    // How long a key that fails at once every time has waited when it first reaches the ceiling.
    let waited: Duration = delays[..first_at_ceiling - 1].iter().sum();
    writeln!(
        table,
        "waited before failure {first_at_ceiling}: {}",
        human(waited)
    )
    .unwrap();
    (table, delays)
}
// book: end ch02_default_limiter

/// [`default_limiter`] on both releases (the same table); snapshot `ch02_default_limiter`.
pub fn ch02_default_limiter() {
    controlloop_book::lab::rig::paused(async {
        let (table, delays) = default_limiter(Release::V0_22);
        for release in [Release::V0_24, Release::V0_25] {
            assert_eq!(table, default_limiter(release).0, "{release}");
        }
        let series = [("controller-runtime v0.22 default", &delays[..30])];
        limiter_figure(&series).publish().unwrap();
        controlloop_book::kit::snap::text("ch02_default_limiter", table);
    });
}

// book: ch02_bucket
/// The first failure of 120 fresh keys, back to back, under the limiter a controller of
/// `release` gets when it sets none: the table, and every delay.
pub fn bucket(release: Release) -> (String, Vec<Duration>) {
    use controlloop_book::lab::workqueue::human;
    use std::fmt::Write;
    let limiter = release.default_rate_limiter();
    let keys: Vec<String> = (1..=120).map(|i| format!("default/obj-{i:03}")).collect();
    let delays: Vec<Duration> = keys.iter().map(|key| limiter.when(key)).collect();

    for (i, delay) in (1u64..).zip(&delays) {
        let bucket = match release {
            // v0.22 (the rate-limiting queue's limiter): keys 1-100 spend the burst and wait
            // only their own 5 ms; from key 101 on, each waits one token's refill (1/10 s)
            // longer than the key before it.
            Release::V0_22 => Duration::from_millis(100 * i.saturating_sub(100)),
            // v0.24 and v0.25 (the priority queue's): no bucket, so no key waits for another.
            Release::V0_24 | Release::V0_25 => Duration::ZERO,
        };
        assert_eq!(
            *delay,
            bucket.max(Duration::from_millis(5)),
            "{release}, key {i}"
        );
    }
    let mut table = format!("{:>3}  delay\n", "key");
    for i in [1, 100, 101, 102, 120] {
        writeln!(table, "{i:>3}  {}", human(delays[i - 1])).unwrap();
    }
    (table, delays)
}
// book: end ch02_bucket

/// [`bucket`] on both releases; the book's release is the snapshot (`ch02_bucket`).
pub fn ch02_bucket() {
    controlloop_book::lab::rig::paused(async {
        let (_, v0_22) = bucket(Release::V0_22);
        let (table, _) = bucket(Release::default());
        let series = [("controller-runtime v0.22 default", &v0_22[..])];
        bucket_figure(&series).publish().unwrap();
        controlloop_book::kit::snap::text("ch02_bucket", table);
    });
}

/// A success without forget carries the failures forward into the next failure's backoff:
/// the table of failures kept and the next wait, with and without `forget`.
pub async fn done_without_forget() -> String {
    // book: ch02_done_without_forget
    use controlloop::workqueue::{RateLimitingQueue, default_controller_rate_limiter};
    use controlloop_book::lab::rig::within;
    use controlloop_book::lab::workqueue::human;
    use std::time::Duration;
    use tokio::time::Instant;
    const DAY: Duration = Duration::from_secs(24 * 3600);

    // A hand-written worker loop for one object, with or without `forget` after a success.
    async fn run(forget_on_success: bool) -> (usize, Duration) {
        let queue = RateLimitingQueue::new(default_controller_rate_limiter());
        let next = || within(DAY, "the requeued key", queue.claim());
        queue.add("default/web");

        // A dependency is down: twelve reconciles in a row fail, and each requeues with backoff.
        let mut last = Instant::now();
        for n in 1..=12 {
            let claim = next().await.unwrap();
            if n > 1 {
                assert_eq!(last.elapsed(), Duration::from_millis(5 << (n - 2))); // doubles
            }
            last = Instant::now();
            claim.add_rate_limited(); // dropping the claim at the end of the loop is `done`
        }
        // The dependency is back: the thirteenth reconcile succeeds.
        let claim = next().await.unwrap();
        if forget_on_success {
            claim.forget();
        }
        drop(claim); // done
        let failures_kept = queue.num_requeues(&"default/web");

        // A day later the object changes, and its reconcile fails once.
        tokio::time::sleep(DAY).await;
        queue.add("default/web");
        let claim = next().await.unwrap();
        claim.add_rate_limited();
        drop(claim);
        let failed = Instant::now();
        let _retry = next().await.unwrap();
        (failures_kept, failed.elapsed())
    }

    let without_forget = run(false).await;
    let with_forget = run(true).await;
    // Without forget the success kept all twelve failures, and the next one, a day later, waits
    // as the thirteenth in a row would: 5 ms · 2^12. With forget it waits the base 5 ms.
    assert_eq!(without_forget, (12, Duration::from_millis(5 << 12)));
    assert_eq!(with_forget, (0, Duration::from_millis(5)));
    let mut table = String::from("after a success          failures kept  next failure waits\n");
    for (name, (kept, wait)) in [
        ("done, no forget", without_forget),
        ("done and forget", with_forget),
    ] {
        table.push_str(&format!("{name:<24} {kept:>13}  {}\n", human(wait)));
    }
    table
    // book: end ch02_done_without_forget
}

/// [`done_without_forget`], snapshot `ch02_done_without_forget`.
pub fn ch02_done_without_forget() {
    let table = controlloop_book::lab::rig::paused(done_without_forget());
    controlloop_book::kit::snap::text("ch02_done_without_forget", table);
}
