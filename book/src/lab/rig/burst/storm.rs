//! One storm, run: the cluster prepared, the controller started and settled, the writes, the
//! wait for quiet, and the report.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use tokio::time::Instant;

use super::{
    error::BurstError,
    params::{Clock, Params, Variant},
    report::Report,
    variants::{Counters, Running, start_channel_of_keys, start_debounced, start_first_payload},
};
use crate::lab::rig::{
    self, Backend, Burst, Fixture, Informer, OBJECT, Observation, Recorder, Storm, set_value,
    value_of,
};
use controlloop::controller::{Context, Controller, ReconcileResult, Request};

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
