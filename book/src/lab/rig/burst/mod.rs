//! The write storm chapters rerun: write one object many times, quickly, and count what a
//! controller behind an informer and a workqueue does about it. Chapter 06 introduces it
//! ([`crate::lab::burst`] holds its sweeps, claims and figures); chapters 11, 13, 14 and 18 run
//! it again (on kube-runtime, on both releases, on a real server, with many workers).
//!
//! One run ([`run`]) gives a [`Report`] under one of two clocks ([`Clock`]), against the
//! faithful controller or one of chapter 06's deliberately broken designs ([`Variant`]).

mod report;
mod variants;

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use tokio::time::Instant;

use crate::lab::rig::{self, OBJECT, Storm, set_value, value_of};
use controlloop::controller::{Context, ReconcileResult, Release, Request};

pub use crate::lab::rig::{
    Backend, Burst, Fixture, Informer, Observation, Recorder, RigError, Target,
};
pub use controlloop::controller::Controller;
pub use report::{
    Report, Table, converge_overhead_ms, expected_reconciles, millis, reconcile_ratio, round3,
    write_overhead_ms,
};
pub use variants::{
    Counters, DEBOUNCE, Running, StashFirstPayload, Variant, start_channel_of_keys,
    start_debounced, start_first_payload,
};

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
    /// The writes, their gap and the reconcile cost.
    pub storm: Storm,
    /// The controller's `max_concurrent_reconciles`.
    pub workers: usize,
    /// Virtual or real time.
    pub clock: Clock,
    /// Where the cluster is.
    pub backend: Backend,
    /// Which controller design runs.
    pub variant: Variant,
    /// Which controller-runtime release the controller follows (default: the book's, v0.25).
    pub release: Release,
}

impl Params {
    /// The essay's run ([`rig::ESSAY`], one worker); here under virtual time against the
    /// embedded server in-process.
    pub fn essay() -> Self {
        Params {
            storm: rig::ESSAY,
            workers: 1,
            clock: Clock::Virtual,
            backend: Backend::InProcess,
            variant: Variant::Level,
            release: Release::default(),
        }
    }
    /// With `n` writes.
    pub fn writes(mut self, n: u64) -> Self {
        self.storm.writes = n;
        self
    }
    /// With this gap between writes.
    pub fn gap(mut self, d: Duration) -> Self {
        self.storm.gap = d;
        self
    }
    /// With this reconcile cost.
    pub fn cost(mut self, d: Duration) -> Self {
        self.storm.cost = d;
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
    /// Following this controller-runtime release.
    pub fn release(mut self, r: Release) -> Self {
        self.release = r;
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
    /// Setting up the cluster failed, or a wait for quiet ran out of time.
    #[error(transparent)]
    Rig(#[from] RigError),
    /// A write failed.
    #[error("a write failed: {0}")]
    Write(#[from] kube::Error),
    /// Building the controller failed.
    #[error(transparent)]
    Controller(#[from] controlloop::controller::ControllerError),
    /// The fake clientset refused a write.
    #[error("the fake refused a write: {0}")]
    Fake(#[from] controlloop::fake::FakeError),
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

/// Runs one storm of `params.variant` on the current runtime (whose clock must match
/// `params.clock`).
pub async fn run_async(params: &Params) -> Result<Report, BurstError> {
    match params.variant {
        Variant::Level => level_storm(params).await,
        Variant::FirstPayload => broken_storm(params, start_first_payload).await,
        Variant::ChannelOfKeys => broken_storm(params, start_channel_of_keys).await,
        Variant::Debounced => broken_storm(params, start_debounced).await,
    }
}

/// The storm against the faithful controller: the body chapter 06 shows.
pub async fn level_storm(params: &Params) -> Result<Report, BurstError> {
    // book: ch06_storm
    let (mut cluster, log) = prepare(params).await?;
    let Storm { writes, gap, cost } = params.storm;
    let seen = log.clone();
    let reconcile = move |request: Request, ctx: Context<ConfigMap>| {
        let log = seen.clone();
        async move {
            // The level: the object as the informer's indexer holds it now.
            let value = ctx.get(&request).and_then(|cm| value_of(&cm));
            log.act(value, cost).await; // works for `cost`, then logs the value
            Ok(ReconcileResult::done())
        }
    };
    // One worker, as in the essay; the one predicate keeps the storm's object only.
    let controller = Controller::builder("storm")
        .release(params.release) // v0.25 unless a run says otherwise
        .max_concurrent_reconciles(params.workers)
        .with_predicate(rig::Named(OBJECT))
        .build(&cluster.informer, reconcile)?;
    let running = Running::controller(controller);
    let baseline = start_and_settle(&mut cluster, &running, &log).await?; // value 0 reconciled
    let api = cluster.target.api();
    let started = Instant::now();
    for value in 1..=writes {
        set_value(&api, OBJECT, value).await?; // a merge patch: one write, one watch event
        if value < writes {
            tokio::time::sleep(gap).await;
        }
    }
    let burst = Burst {
        issued: writes,
        started,
        finished: Instant::now(),
    };
    let report = measure(params, cluster, running, log, baseline, burst).await?;
    // book: end ch06_storm
    Ok(report)
}

/// How a broken design is started on the storm's informer ([`start_first_payload`],
/// [`start_channel_of_keys`]).
pub type Start = fn(&Params, &Informer, Arc<Recorder>) -> Result<Running, BurstError>;

/// The same storm as [`level_storm`] (the same writes through [`rig::write_burst`], the same
/// wait for quiet, the same report), against a design that `start` builds.
pub async fn broken_storm(params: &Params, start: Start) -> Result<Report, BurstError> {
    let (mut cluster, log) = prepare(params).await?;
    let running = start(params, &cluster.informer, log.clone())?;
    let baseline = start_and_settle(&mut cluster, &running, &log).await?;
    let Storm { writes, gap, .. } = params.storm;
    let burst = rig::write_burst(&cluster.target.api(), OBJECT, writes, gap).await?;
    measure(params, cluster, running, log, baseline, burst).await
}

/// How long the informer may take to sync and the controller to reconcile the first value.
const SETTLE_LIMIT: Duration = Duration::from_secs(30);

/// The cluster with its informer (not yet running), the object at value 0, and an empty log of
/// reconciles: what every storm starts from.
pub async fn prepare(params: &Params) -> Result<(Fixture, Arc<Recorder>), BurstError> {
    if params.storm.writes == 0 {
        return Err(BurstError::NoWrites);
    }
    let fixture = Fixture::new(&params.backend).await?;
    fixture.target.create(OBJECT, 0).await?;
    Ok((fixture, Recorder::new()))
}

/// What a controller had done before the storm: subtracted from what it did by the end.
#[derive(Debug, Clone, Copy)]
pub struct Baseline {
    counters: Counters,
    reconciles: usize,
}

/// Runs the informer and waits until the controller has reconciled the initial value 0 and
/// is idle.
pub async fn start_and_settle(
    cluster: &mut Fixture,
    running: &Running,
    log: &Recorder,
) -> Result<Baseline, BurstError> {
    cluster.run_informer();
    rig::settle(
        SETTLE_LIMIT,
        Duration::ZERO,
        "the initial reconcile of value 0 (informer not synced, or controller not started?)",
        || log.last_value() == Some(Some(0)) && running.idle(log),
    )
    .await?;
    Ok(Baseline {
        counters: running.counters(),
        reconciles: log.observations().len(),
    })
}

/// Waits until every write's event was heard and the controller has been quiet for a
/// reconcile's cost, stops the controller and the cluster, and reports.
pub async fn measure(
    params: &Params,
    cluster: Fixture,
    running: Running,
    log: Arc<Recorder>,
    baseline: Baseline,
    burst: Burst,
) -> Result<Report, BurstError> {
    let Storm { writes, cost, .. } = params.storm;
    let limit = SETTLE_LIMIT + (cost + Duration::from_millis(5)) * writes as u32;
    rig::settle(
        limit,
        cost + Duration::from_millis(2),
        "quiet after the storm (events lost on the watch, or a key never released?)",
        || running.counters().events - baseline.counters.events >= writes && running.idle(&log),
    )
    .await?;
    let after = running.counters();
    let final_in_cache = cluster
        .informer
        .indexer()
        .get_by_key(&format!("{}/{}", rig::NAMESPACE, OBJECT))
        .and_then(|cm| value_of(&cm));
    running.shutdown().await;
    cluster.stop().await;
    let observed: Vec<Observation> = log.observations()[baseline.reconciles..].to_vec();
    Ok(Report::new(
        params,
        &burst,
        after.events - baseline.counters.events,
        after.keys - baseline.counters.keys,
        &observed,
        final_in_cache,
        log.max_in_flight(),
    ))
}
