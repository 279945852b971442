//! The write-storm experiment: write one object many times, quickly, and count what a
//! controller behind an informer and a workqueue does about it.
//!
//! ```text
//!  writer ──patch value=1..=N, `gap` apart──► API server ──watch──► informer ──► controller
//!                                                                     │ cache      │ queue of keys
//!                                                                     ▼            ▼
//!                                            reconciler reads value ◄─ cache ─── worker × `workers`
//!                                            then "works" for `cost` (a tokio sleep)
//! ```
//!
//! One run gives a [`Report`]: the writes and the span they took, the events the controller
//! heard and the keys it queued, the reconciles they collapsed into, what each reconcile
//! observed, and how long after the last write the controller had acted on the final value.
//!
//! Two clocks ([`Clock`]):
//! - **virtual**: tokio's paused clock on a current-thread runtime, with the embedded server
//!   in-process. Sleeps take no real time and fire in a fixed order, so every number is exact
//!   and the same on every run and every machine.
//! - **real**: a two-thread runtime and real sleeps, any [`Backend`]. The numbers depend on
//!   the machine and are pinned as bands.
//!
//! Three subjects ([`Variant`]): the faithful [`Controller`], and two deliberately broken
//! designs that the chapter uses to show its detectors firing.
//!
//! ```
//! use std::time::Duration;
//! use controlloop::lab::burst::{self, Params};
//!
//! let report = burst::run(&Params::essay().writes(20)).unwrap();
//! assert_eq!(report.final_observed, Some(20)); // it ended on the last value written
//! assert!(report.reconciles < 20); // ...in fewer reconciles than writes
//! ```

pub mod bands;
pub mod ch06;
mod report;
pub mod sweeps;
mod variants;

use std::time::Duration;

use tokio::time::Instant;

use crate::lab::rig;

pub use crate::controller::Controller;
pub use crate::lab::rig::{Backend, Burst, Fixture, Observation, Recorder, RigError, Target};
pub use report::{Report, Table, millis as report_millis};
pub use variants::{Running, Variant};

/// Which clock a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Clock {
    /// tokio's paused clock: exact, deterministic. Needs [`Backend::InProcess`].
    Virtual,
    /// The machine's clock.
    Real,
}

/// The parameters of one write storm.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Params {
    /// How many writes (values `1..=writes`).
    pub writes: u64,
    /// The wait between two writes.
    pub gap: Duration,
    /// How long one reconcile works (a tokio sleep).
    pub cost: Duration,
    /// The controller's `max_concurrent_reconciles`.
    pub workers: usize,
    /// Virtual or real time.
    pub clock: Clock,
    /// Where the cluster is.
    pub backend: Backend,
    /// Which controller design runs.
    pub variant: Variant,
}

impl Params {
    /// The essay's run: 200 writes 1 ms apart, a 20 ms reconciler, one worker; here under
    /// virtual time against the embedded server in-process.
    pub fn essay() -> Self {
        Params {
            writes: 200,
            gap: Duration::from_millis(1),
            cost: Duration::from_millis(20),
            workers: 1,
            clock: Clock::Virtual,
            backend: Backend::InProcess,
            variant: Variant::Level,
        }
    }
    /// With `n` writes.
    pub fn writes(mut self, n: u64) -> Self {
        self.writes = n;
        self
    }
    /// With this gap between writes.
    pub fn gap(mut self, d: Duration) -> Self {
        self.gap = d;
        self
    }
    /// With this reconcile cost.
    pub fn cost(mut self, d: Duration) -> Self {
        self.cost = d;
        self
    }
    /// With `n` workers.
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n;
        self
    }
    /// Under the real clock, over HTTP to the embedded server.
    pub fn real(mut self) -> Self {
        self.clock = Clock::Real;
        self.backend = Backend::Http;
        self
    }
    /// Against this backend.
    pub fn backend(mut self, b: Backend) -> Self {
        self.backend = b;
        self
    }
    /// With this controller design.
    pub fn variant(mut self, v: Variant) -> Self {
        self.variant = v;
        self
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum BurstError {
    /// Virtual time needs everything in-process: a socket under a paused clock makes the
    /// clock jump while a request is on the wire.
    #[error("the virtual clock needs the in-process backend, not {0:?}")]
    VirtualNeedsInProcess(Backend),
    /// No writes, so nothing to measure.
    #[error("a burst needs at least one write")]
    NoWrites,
    /// Setting up the cluster failed.
    #[error(transparent)]
    Rig(#[from] RigError),
    /// A write failed.
    #[error("a write failed: {0}")]
    Write(#[from] kube::Error),
    /// Building the controller failed.
    #[error(transparent)]
    Controller(#[from] crate::controller::ControllerError),
    /// The run did not settle in time.
    #[error("{0}")]
    Stalled(String),
}

/// Runs one storm on a runtime of its own (paused current-thread for [`Clock::Virtual`],
/// two worker threads for [`Clock::Real`]).
pub fn run(params: &Params) -> Result<Report, BurstError> {
    match params.clock {
        Clock::Virtual => {
            if params.backend != Backend::InProcess {
                return Err(BurstError::VirtualNeedsInProcess(params.backend.clone()));
            }
            rig::paused(run_async(params))
        }
        Clock::Real => rig::real(run_async(params)),
    }
}

/// Runs one storm on the current runtime (whose clock must match `params.clock`).
pub async fn run_async(params: &Params) -> Result<Report, BurstError> {
    if params.writes == 0 {
        return Err(BurstError::NoWrites);
    }
    let mut fixture = rig::Fixture::new(&params.backend).await?;
    fixture.target.create(rig::OBJECT, 0).await?;
    let recorder = Recorder::new();
    let running = Running::start(params, &fixture.informer, recorder.clone())?;
    fixture.run_informer();
    // Settle on the initial value 0 before the storm starts.
    let settle_limit = Duration::from_secs(30);
    wait_until(settle_limit, || {
        recorder.observations().last().map(|o| o.value) == Some(Some(0)) && running.idle(&recorder)
    })
    .await
    .map_err(|_| BurstError::Stalled("the initial reconcile of value 0 never finished: informer not synced, or controller not started?".into()))?;
    let before = running.counters();
    let seen_before = recorder.observations().len();

    let burst = rig::write_burst(
        &fixture.target.api(),
        rig::OBJECT,
        params.writes,
        params.gap,
    )
    .await?;

    // Quiet: every event heard, nothing queued, nothing running — twice in a row.
    let limit = settle_limit + (params.cost + Duration::from_millis(5)) * params.writes as u32;
    let quiet_for = params.cost + Duration::from_millis(2);
    let mut last_quiet: Option<Instant> = None;
    wait_until(limit, || {
        let quiet = running.counters().events - before.events >= params.writes
            && running.idle(&recorder);
        match (quiet, last_quiet) {
            (false, _) => {
                last_quiet = None;
                false
            }
            (true, None) => {
                last_quiet = Some(Instant::now());
                false
            }
            (true, Some(t)) => Instant::now() - t >= quiet_for,
        }
    })
    .await
    .map_err(|_| {
        BurstError::Stalled(format!(
            "no quiet after the burst within {limit:?}: events lost on the watch, or a key never released?"
        ))
    })?;
    let after = running.counters();
    let final_in_cache = fixture
        .informer
        .indexer()
        .get_by_key(&format!("{}/{}", rig::NAMESPACE, rig::OBJECT))
        .and_then(|cm| rig::value_of(&cm));
    running.shutdown().await;
    fixture.stop().await;

    let observed: Vec<Observation> = recorder.observations()[seen_before..].to_vec();
    Ok(Report::new(
        params,
        &burst,
        after.events - before.events,
        after.keys - before.keys,
        &observed,
        final_in_cache,
        recorder.max_in_flight(),
    ))
}

/// Polls `done` every millisecond until it holds, or fails after `limit`.
async fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> Result<(), ()> {
    tokio::time::timeout(limit, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .map_err(|_| ())
}
