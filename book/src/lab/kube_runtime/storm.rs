//! The write storm on kube-runtime's `Controller`: the same writer, server, object, reconciler
//! cost and report as [`crate::lab::rig::burst`], with kube-runtime 5.0.0 in place of this crate's
//! controller (`kube-runtime/src/controller/mod.rs`, `Controller::for_stream` + `run`).
//!
//! ```text
//!  writer ──patch value=1..=N──► API server ──watch──► watcher ─► reflector ─► applied_objects
//!                                                                 │ Store          │ (counted)
//!                                                                 ▼                ▼
//!                                     reconciler(Arc<ConfigMap>) ◄─ runner ◄── scheduler
//!                                     "works" for `cost` (a tokio sleep)   (one slot per object)
//! ```
//!
//! The reconciler is handed the object, not a request: kube-runtime's applier reads it from the
//! reflector's store when the reconcile *starts*, so it is the level at that moment, never the
//! payload of the event that triggered it.

use std::{
    convert::Infallible,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use crate::lab::rig::{
    self, Backend, Burst, NAMESPACE, OBJECT, Observation, Recorder, Storm, Target,
    burst::{BurstError, Clock, Params, Report},
    set_value, value_of,
};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::{
    Controller, WatchStreamExt,
    controller::{Action, Config},
    reflector::{self, ObjectRef, Store, reflector},
    watcher::{self, watcher},
};
use tokio::time::Instant;

/// How the kube-runtime controller of a storm is built, beyond [`Params`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Knobs {
    /// `controller::Config::debounce` (default zero).
    pub debounce: Duration,
    /// The faithful reconciler, or the broken one that detaches its work.
    pub design: Design,
}

impl Default for Knobs {
    fn default() -> Self {
        Knobs {
            debounce: Duration::ZERO,
            design: Design::Faithful,
        }
    }
}

/// Which reconciler a kube-runtime storm runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Design {
    /// Does its work inside the reconcile future.
    Faithful,
    /// **Broken**: spawns its work and returns at once, so the runner believes the object is
    /// done while the work still runs. Kept to show the per-object detectors firing.
    DetachedWork,
}

/// Runs one storm against kube-runtime on a runtime of its own (paused current-thread for
/// [`Clock::Virtual`], two threads for [`Clock::Real`]).
pub fn run(params: &Params, knobs: Knobs) -> Result<Report, BurstError> {
    match params.clock {
        Clock::Virtual if params.backend != Backend::InProcess => {
            Err(BurstError::VirtualNeedsInProcess(params.backend.clone()))
        }
        Clock::Virtual => rig::paused(run_async(params, knobs)),
        Clock::Real => rig::real(run_async(params, knobs)),
    }
}

/// Runs one storm against kube-runtime on the current runtime: the body chapter 11 shows.
pub async fn run_async(params: &Params, knobs: Knobs) -> Result<Report, BurstError> {
    // book: ch11_storm
    let Storm { writes, gap, cost } = params.storm;
    if writes == 0 {
        return Err(BurstError::NoWrites);
    }
    let target = Target::start(&params.backend).await?;
    target.create(OBJECT, 0).await?;
    let recorder = Recorder::new(); // when each reconcile ran, and on which value
    let heard = Arc::new(AtomicU64::new(0)); // objects the controller's stream carried
    let design = knobs.design;

    let (reader, writer) = reflector::store::<ConfigMap>();
    let count = heard.clone();
    let stream = reflector(writer, watcher(target.api(), watcher::Config::default()))
        .applied_objects()
        .inspect_ok(move |_| {
            count.fetch_add(1, Ordering::SeqCst);
        });
    let config = Config::default()
        .concurrency(params.workers as u16) // one slot, as in the essay
        .debounce(knobs.debounce); // zero unless a run asks for one
    let controller = Controller::for_stream(stream, reader.clone())
        .with_config(config)
        .run(
            move |cm: Arc<ConfigMap>, recorder: Arc<Recorder>| async move {
                let value = value_of(&cm); // the store's copy when the reconcile started
                match design {
                    Design::Faithful => recorder.act(value, cost).await,
                    Design::DetachedWork => {
                        tokio::spawn(async move { recorder.act(value, cost).await }); // broken
                    }
                }
                Ok::<_, Infallible>(Action::await_change())
            },
            |_, _, _| Action::await_change(),
            recorder.clone(),
        );
    let running = tokio::spawn(controller.for_each(|_| async {}));
    let before = settled(&recorder, &heard).await?; // value 0 reconciled

    let api = target.api();
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
    let report = finish(params, &burst, &heard, before, &reader, &recorder).await;
    running.abort();
    let _ = running.await;
    target.stop().await;
    // book: end ch11_storm
    report
}

/// Where a storm starts from: events heard and reconciles seen once the controller has
/// reconciled the initial value 0 and is idle.
#[derive(Debug, Clone, Copy)]
pub struct Before {
    events: u64,
    reconciles: usize,
}

/// Waits (30 s at most) until the controller has reconciled value 0 and nothing runs.
pub async fn settled(recorder: &Recorder, heard: &AtomicU64) -> Result<Before, BurstError> {
    rig::settle(
        SETTLE,
        Duration::ZERO,
        "kube-runtime never reconciled value 0: store never ready, or the runner held it?",
        || {
            recorder.observations().last().map(|o| o.value) == Some(Some(0))
                && recorder.in_flight() == 0
        },
    )
    .await?;
    Ok(Before {
        events: heard.load(Ordering::SeqCst),
        reconciles: recorder.observations().len(),
    })
}

const SETTLE: Duration = Duration::from_secs(30);

/// Waits until the storm is over — every event heard, nothing running, and nothing started for
/// a reconcile's cost — and reports it.
pub async fn finish(
    params: &Params,
    burst: &Burst,
    heard: &AtomicU64,
    before: Before,
    reader: &Store<ConfigMap>,
    recorder: &Recorder,
) -> Result<Report, BurstError> {
    let Storm { writes, cost, .. } = params.storm;
    let limit = SETTLE + (cost + Duration::from_millis(5)) * writes as u32;
    // kube-runtime shows no queue: a request may sit in the scheduler (a millisecond or two
    // under the real clock, more under load) before it runs. So quiet means: nothing heard,
    // started or running for a reconcile's cost plus a margin (2 ms virtual, 100 ms real).
    let margin = match params.clock {
        Clock::Virtual => Duration::from_millis(2),
        Clock::Real => Duration::from_millis(100),
    };
    let seen = |r: &Recorder| (heard.load(Ordering::SeqCst), r.observations().len());
    let mut last = seen(recorder);
    rig::settle(
        limit,
        cost + margin,
        "kube-runtime never went quiet: events lost, or a request never ran?",
        || {
            let now = seen(recorder);
            let unchanged = now == last;
            last = now;
            unchanged && recorder.in_flight() == 0 && now.0 - before.events >= writes
        },
    )
    .await?;
    let events = heard.load(Ordering::SeqCst) - before.events;
    let final_in_cache = reader
        .get(&ObjectRef::new(OBJECT).within(NAMESPACE))
        .and_then(|cm| value_of(&cm));
    let observed: Vec<Observation> = recorder.observations()[before.reconciles..].to_vec();
    Ok(Report::new(
        params,
        burst,
        events,
        events, // every applied object is one request to the scheduler
        &observed,
        final_in_cache,
        recorder.max_in_flight(),
    ))
}
