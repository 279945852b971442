//! Retrying a write that lost a race: a read-modify-write run again after a 409 Conflict.
//!
//! Follows client-go v0.37.2 `util/retry/util.go` (`OnError`, `RetryOnConflict`,
//! `DefaultRetry`, `DefaultBackoff`) and the parts of apimachinery v0.37.2
//! `pkg/util/wait/backoff.go` they run on (`Backoff.Step`, `ExponentialBackoff`).
//! controller-runtime has no retry of its own: its users call client-go's
//! `retry.RetryOnConflict` around a `Get` and an `Update` (or a `Patch` with
//! `client.MergeFromWithOptimisticLock`, which carries the resourceVersion it read).
//!
//! ```text
//!  attempt 1 ─ 409 ─► sleep step() ─► attempt 2 ─ 409 ─► … ─► attempt `steps` ─ 409 ─► that 409
//!      │ Ok                               │ other error
//!      ▼                                  ▼
//!    Ok(value)                          that error, at once
//! ```
//!
//! The closure must read the object again on every attempt: a conflict means the copy it
//! wrote from is no longer the stored one, and writing it again conflicts again.
//!
//! ```
//! use controlloop::apiserver::{Cluster, ServerOptions};
//! use controlloop::retry::{DEFAULT_RETRY, retry_on_conflict};
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true)
//! #     .build().unwrap().block_on(async {
//! let cluster = Cluster::new(ServerOptions::default());
//! let api: Api<ConfigMap> = Api::namespaced(cluster.in_process_client(), "default");
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("counter".into());
//! api.create(&PostParams::default(), &cm).await.unwrap();
//! let written = retry_on_conflict(DEFAULT_RETRY, || async {
//!     let mut cm = api.get("counter").await?; // read again on every attempt
//!     cm.data = Some([("value".to_owned(), "1".to_owned())].into());
//!     api.replace("counter", &PostParams::default(), &cm).await // 409 if it moved meanwhile
//! })
//! .await
//! .unwrap();
//! assert_eq!(written.data.unwrap()["value"], "1");
//! # });
//! ```
//!
//! # Invariants
//! 1. The closure runs at most `steps` times (at least once), and never again after it
//!    succeeds or fails with an error the predicate does not retry.
//! 2. Between two attempts the caller sleeps exactly one [`Backoff::step`], on tokio's clock.
//! 3. When every attempt failed with a retriable error, the last of those errors is returned.
//!
//! # Concurrency
//! None of its own: the attempts run one after another on the caller's task.
//!
//! # Differences from upstream
//! - A backoff with `steps` 0 makes one attempt here; upstream makes none and returns
//!   `wait.ErrWaitTimeout` ("timed out waiting for the condition"), an error the caller's
//!   closure never produced. Pinned by `tests/upstream_client_go_retry.rs`.
//! - The jitter is drawn from a generator seeded from the operating system for each call
//!   (upstream: the process's `math/rand`), or from one seeded by the caller ([`on_error_seeded`]). A sleep then lasts at least the jittered delay
//!   and ends on tokio's next millisecond tick: delays that differ by less than a millisecond,
//!   as [`DEFAULT_RETRY`]'s do (10 ms plus up to 10 %), end together when they start
//!   together. Go's timers do not round, so upstream spreads such retries over that
//!   millisecond.
//! - A panic in the closure propagates; upstream's `ExponentialBackoff` re-panics too
//!   (`runConditionWithCrashProtection` handles the crash and panics again).

use std::{future::Future, time::Duration};

use rand::{RngExt, SeedableRng, rngs::StdRng};

/// How long to wait between attempts, and how many: apimachinery's `wait.Backoff`, ported once
/// for the crate (the reflector and the elector wait on the same port).
pub use crate::wait::Backoff;

/// client-go's `retry.DefaultRetry`: "the recommended retry for a conflict where multiple
/// clients are making changes to the same resource": 5 attempts, 10 ms apart, plus up to 10 %.
pub const DEFAULT_RETRY: Backoff = Backoff {
    duration: Duration::from_millis(10),
    factor: 1.0,
    jitter: 0.1,
    steps: 5,
    cap: Duration::ZERO,
};

/// client-go's `retry.DefaultBackoff`: for a client making an unrelated change to an object
/// that controllers manage: 4 attempts, 10, 50 and 250 ms apart, each plus up to 10 %.
pub const DEFAULT_BACKOFF: Backoff = Backoff {
    duration: Duration::from_millis(10),
    factor: 5.0,
    jitter: 0.1,
    steps: 4,
    cap: Duration::ZERO,
};

/// Runs `f` until it succeeds, fails with an error `retriable` rejects, or has run
/// `backoff.steps` times, sleeping one [`Backoff::step`] between attempts (client-go's
/// `retry.OnError`). The jitter is drawn from a generator seeded by the operating system.
/// Keeps I1–I3.
pub async fn on_error<T, E, F, Fut>(
    backoff: Backoff,
    retriable: impl Fn(&E) -> bool,
    f: F,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let seed = rand::make_rng::<StdRng>().random::<u64>();
    on_error_seeded(backoff, seed, retriable, f).await
}

/// As [`on_error`], drawing the jitter from a generator seeded with `seed`: the same seed
/// gives the same waits, so a run under tokio's paused clock repeats exactly. Keeps I1–I3.
pub async fn on_error_seeded<T, E, F, Fut>(
    mut backoff: Backoff,
    seed: u64,
    retriable: impl Fn(&E) -> bool,
    mut f: F,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    if backoff.steps == 0 {
        return f().await; // upstream makes no attempt: see "Differences from upstream"
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut last = None;
    while backoff.steps > 0 {
        match f().await {
            Ok(value) => return Ok(value),
            Err(e) if !retriable(&e) => return Err(e), // keeps I1
            Err(e) => last = Some(e),
        }
        if backoff.steps == 1 {
            break;
        }
        let wait = backoff.step(rng.random::<f64>());
        tokio::time::sleep(wait).await; // keeps I2
    }
    // keeps I3: the loop ran at least once, and only a retriable error keeps it going
    Err(last.expect("at least one attempt failed"))
}

/// Whether `e` is the API server's 409 Conflict (apimachinery's `errors.IsConflict`): a write
/// whose resourceVersion precondition no longer holds.
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 409)
}

/// Runs the read-modify-write `f` again after each 409 Conflict, as [`on_error`] with
/// [`is_conflict`] (client-go's `retry.RetryOnConflict`). `f` must read the object afresh on
/// every attempt and return the write's own error, unwrapped.
pub async fn retry_on_conflict<T, F, Fut>(backoff: Backoff, f: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    on_error(backoff, is_conflict, f).await
}

/// As [`retry_on_conflict`], with the jitter seeded by `seed` (see [`on_error_seeded`]).
pub async fn retry_on_conflict_seeded<T, F, Fut>(
    backoff: Backoff,
    seed: u64,
    f: F,
) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    on_error_seeded(backoff, seed, is_conflict, f).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_retry_waits_ten_ms_plus_at_most_a_tenth_four_times() {
        let mut b = DEFAULT_RETRY;
        let waits: Vec<Duration> = (0..4).map(|_| b.step(0.5)).collect();
        assert_eq!(waits, vec![Duration::from_micros(10_500); 4]);
        assert_eq!(b.steps, 1);
        let mut b = DEFAULT_RETRY;
        assert_eq!(b.step(0.0), Duration::from_millis(10));
        assert!(b.step(0.999_999) < Duration::from_millis(11));
    }

    #[test]
    fn default_backoff_grows_fivefold() {
        let mut b = Backoff {
            jitter: 0.0,
            ..DEFAULT_BACKOFF
        };
        let waits: Vec<u128> = (0..3).map(|_| b.step(0.0).as_millis()).collect();
        assert_eq!(waits, [10, 50, 250]);
    }

    #[test]
    fn a_cap_stops_the_growth_and_the_steps() {
        let mut b = Backoff {
            duration: Duration::from_millis(10),
            factor: 10.0,
            jitter: 0.0,
            steps: 5,
            cap: Duration::from_millis(50),
        };
        assert_eq!(b.step(0.0), Duration::from_millis(10));
        assert_eq!((b.duration, b.steps), (Duration::from_millis(50), 0));
        assert_eq!(b.step(0.0), Duration::from_millis(50)); // no steps left: the wait stays
    }
}
