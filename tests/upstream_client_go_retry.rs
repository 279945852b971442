//! client-go's `util/retry` tests, ported: `TestRetryOnConflict` and
//! `TestRetryOnConflictPreservesContextErrorWithoutLastError` (client-go v0.37.2,
//! `util/retry/util_test.go`), plus the port's one named difference. Under tokio's paused
//! clock, so the waits between attempts take no real time and are exact.

use std::{cell::Cell, time::Duration};

use controlloop::retry::{Backoff, DEFAULT_BACKOFF, DEFAULT_RETRY, on_error, retry_on_conflict};
use kube::core::Status;

fn status(code: u16, reason: &str) -> kube::Error {
    let message = format!("{reason} on test \"other\"");
    kube::Error::Api(Status::failure(&message, reason).with_code(code).boxed())
}

fn conflict() -> kube::Error {
    status(409, "Conflict")
}

fn code(r: &Result<(), kube::Error>) -> Option<u16> {
    match r {
        Err(kube::Error::Api(s)) => Some(s.code),
        _ => None,
    }
}

/// `TestRetryOnConflict`, with `wait.Backoff{Factor: 1.0, Steps: 3}` (no wait, no jitter).
#[tokio::test(start_paused = true)]
async fn retry_on_conflict_returns_the_last_conflict_success_at_once_or_another_error_at_once() {
    let opts = Backoff {
        duration: Duration::ZERO,
        factor: 1.0,
        jitter: 0.0,
        steps: 3,
        cap: Duration::ZERO,
    };
    // never returns: every attempt conflicts, and the conflict comes back
    let tries = Cell::new(0);
    let r = retry_on_conflict(opts, || {
        tries.set(tries.get() + 1);
        async { Err::<(), _>(conflict()) }
    })
    .await;
    assert_eq!((code(&r), tries.get()), (Some(409), 3));
    // returns immediately
    let tries = Cell::new(0);
    let r = retry_on_conflict(opts, || {
        tries.set(tries.get() + 1);
        async { Ok(()) }
    })
    .await;
    assert!(r.is_ok() && tries.get() == 1);
    // returns immediately on error
    let tries = Cell::new(0);
    let r = retry_on_conflict(opts, || {
        tries.set(tries.get() + 1);
        async { Err::<(), _>(status(500, "InternalError")) }
    })
    .await;
    assert_eq!((code(&r), tries.get()), (Some(500), 1));
    // keeps retrying
    let tries = Cell::new(0);
    let r = retry_on_conflict(opts, || {
        let i = tries.get();
        tries.set(i + 1);
        async move { if i < 2 { Err(conflict()) } else { Ok(()) } }
    })
    .await;
    assert!(r.is_ok());
    assert_eq!(tries.get(), 3);
}

/// `TestRetryOnConflictPreservesContextErrorWithoutLastError`: an error that is not retried
/// comes back itself, even when no conflict came first.
#[tokio::test(start_paused = true)]
async fn an_error_that_is_not_retried_is_returned_as_it_is() {
    let r: Result<(), &str> = on_error(
        DEFAULT_BACKOFF,
        |_| false,
        || async { Err("context canceled") },
    )
    .await;
    assert_eq!(r, Err("context canceled"));
}

/// `DefaultRetry`: five attempts, four waits of 10 ms plus at most a tenth, on tokio's clock
/// (each ends on the next millisecond tick: 11 ms).
#[tokio::test(start_paused = true)]
async fn default_retry_makes_five_attempts_about_ten_ms_apart() {
    let start = tokio::time::Instant::now();
    let at = std::cell::RefCell::new(Vec::new());
    let r = retry_on_conflict(DEFAULT_RETRY, || {
        at.borrow_mut().push(start.elapsed());
        async { Err::<(), _>(conflict()) }
    })
    .await;
    assert_eq!(code(&r), Some(409));
    let at = at.into_inner();
    assert_eq!(at.len(), 5);
    for pair in at.windows(2) {
        let wait = pair[1] - pair[0];
        assert!(
            wait >= Duration::from_millis(10) && wait <= Duration::from_millis(11),
            "{wait:?}"
        );
    }
}

/// The port's named difference: `steps` 0 makes one attempt (upstream makes none and returns
/// `wait.ErrWaitTimeout`).
#[tokio::test(start_paused = true)]
async fn a_backoff_without_steps_makes_one_attempt() {
    let tries = Cell::new(0);
    let none = Backoff {
        steps: 0,
        ..DEFAULT_RETRY
    };
    let r = retry_on_conflict(none, || {
        tries.set(tries.get() + 1);
        async { Err::<(), _>(conflict()) }
    })
    .await;
    assert_eq!((code(&r), tries.get()), (Some(409), 1));
}

/// A cap that the factor reaches ends the steps, as apimachinery's `delay` does: the attempt
/// after that wait is not made.
#[tokio::test(start_paused = true)]
async fn a_cap_reached_by_the_factor_ends_the_attempts() {
    let tries = Cell::new(0);
    let capped = Backoff {
        duration: Duration::from_millis(10),
        factor: 10.0,
        jitter: 0.0,
        steps: 5,
        cap: Duration::from_millis(50),
    };
    let r = retry_on_conflict(capped, || {
        tries.set(tries.get() + 1);
        async { Err::<(), _>(conflict()) }
    })
    .await;
    assert_eq!((code(&r), tries.get()), (Some(409), 1));
}

/// The seeded entry point: the same seed gives the same waits (a run under the paused clock
/// repeats exactly); the jitter stays within `[duration, duration * (1 + jitter))`, rounded up
/// to tokio's millisecond.
#[tokio::test(start_paused = true)]
async fn a_seeded_retry_repeats_its_waits_exactly() {
    async fn waits(seed: u64) -> Vec<Duration> {
        let start = tokio::time::Instant::now();
        let at = std::cell::RefCell::new(Vec::new());
        let r = controlloop::retry::retry_on_conflict_seeded(DEFAULT_BACKOFF, seed, || {
            at.borrow_mut().push(start.elapsed());
            async { Err::<(), _>(conflict()) }
        })
        .await;
        assert_eq!(code(&r), Some(409));
        let at = at.into_inner();
        at.windows(2).map(|p| p[1] - p[0]).collect()
    }
    let (a, b) = (waits(7).await, waits(7).await);
    assert_eq!(a, b);
    assert_eq!(a.len(), 3);
    for (wait, base) in a.iter().zip([10u64, 50, 250]) {
        let base = Duration::from_millis(base);
        assert!(
            *wait >= base && *wait <= base + base / 10 + Duration::from_millis(1),
            "{wait:?}"
        );
    }
}
