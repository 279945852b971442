//! From a write to its watch event, and to the reconcile that acts on it: the same writes on
//! the embedded server and on a real one, in one run, as distributions.

use std::{sync::Arc, time::Duration};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{WatchEvent, WatchParams};
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::lab::rig::{
    self, Backend, Fixture, Recorder,
    burst::{BurstError, Running},
    set_value, value_of,
};
use controlloop::controller::{Context, Controller, ReconcileResult, Request};

/// The object the latency runs write: the storms' own, so that `default` on a real server
/// only ever holds that one (kube-runtime's storm reconciles every object it lists there).
pub const LATENCY_OBJECT: &str = rig::OBJECT;

/// What one latency run measured, on one server.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Latency {
    /// Writes issued (values `1..=writes`).
    pub writes: u64,
    /// For each value written, ms from sending its write to its event arriving on a watch of
    /// the object; `None` if no event with that value ever came.
    pub to_event_ms: Vec<Option<f64>>,
    /// For each value written, ms from sending its write to the start of the first reconcile
    /// that read it (or a newer value) from the cache.
    pub to_reconcile_ms: Vec<Option<f64>>,
    /// Reconciles after the initial one.
    pub reconciles: u64,
}

impl Latency {
    /// Values whose event never came.
    pub fn lost(&self) -> usize {
        self.to_event_ms.iter().filter(|v| v.is_none()).count()
    }

    /// The `p`-th percentile (0..=100, nearest rank) of the event latencies, ms.
    pub fn event_percentile(&self, p: f64) -> f64 {
        percentile(&self.to_event_ms, p)
    }

    /// The `p`-th percentile of the reconcile latencies, ms.
    pub fn reconcile_percentile(&self, p: f64) -> f64 {
        percentile(&self.to_reconcile_ms, p)
    }
}

/// The `p`-th percentile (nearest rank) of the values present, ms; `NaN` if none.
pub fn percentile(values: &[Option<f64>], p: f64) -> f64 {
    let mut v: Vec<f64> = values.iter().flatten().copied().collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

/// `writes` writes `gap` apart to [`LATENCY_OBJECT`] on `backend` (real clock), watched by a
/// watch of its own that timestamps every event's arrival, and by an informer and a controller
/// (one worker, a reconcile that costs nothing) that timestamp every reconcile's start.
// book: ch14_fn_latency
pub async fn time_writes(
    backend: &Backend,
    writes: u64,
    gap: Duration,
) -> Result<Latency, BurstError> {
    let mut cluster = Fixture::new(backend).await?;
    cluster.target.create(LATENCY_OBJECT, 0).await?;
    // A watch of its own on the object: when each value's event arrives on the wire.
    let heard: Arc<Mutex<Vec<(u64, Instant)>>> = Arc::default();
    let from = cluster.target.api().get(LATENCY_OBJECT).await?;
    let params = WatchParams::default().fields(&format!("metadata.name={LATENCY_OBJECT}"));
    let rv = from.metadata.resource_version.unwrap_or_default();
    let stream = cluster.target.api().watch(&params, &rv).await?;
    let h = heard.clone();
    let watching = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(Ok(event)) = stream.next().await {
            if let WatchEvent::Modified(cm) = event {
                h.lock().extend(value_of(&cm).map(|v| (v, Instant::now())));
            }
        }
    });
    let log = Recorder::new();
    let seen = log.clone();
    let reconcile = move |request: Request, ctx: Context<ConfigMap>| {
        let log = seen.clone();
        async move {
            let value = ctx.get(&request).and_then(|cm| value_of(&cm));
            log.act(value, Duration::ZERO).await; // records when it started and what it read
            Ok(ReconcileResult::done())
        }
    };
    let controller = Controller::builder("latency")
        .with_predicate(rig::Named(LATENCY_OBJECT))
        .build(&cluster.informer, reconcile)?;
    let running = Running::controller(controller);
    cluster.run_informer();
    let limit = Duration::from_secs(60);
    rig::settle(limit, Duration::ZERO, "the initial reconcile", || {
        log.last_value() == Some(Some(0)) && running.idle(&log)
    })
    .await?;
    let before = log.observations().len();
    let api = cluster.target.api();
    let mut sent = Vec::new();
    for value in 1..=writes {
        sent.push(Instant::now());
        set_value(&api, LATENCY_OBJECT, value).await?;
        tokio::time::sleep(gap).await;
    }
    let last = writes;
    rig::settle(
        limit,
        Duration::from_millis(50),
        "every write heard and reconciled (an event lost?)",
        || {
            heard.lock().iter().any(|&(v, _)| v == last)
                && log.last_value() == Some(Some(last))
                && running.idle(&log)
        },
    )
    .await?;
    watching.abort();
    running.shutdown().await;
    cluster.stop().await;
    let heard = heard.lock().clone();
    let observed = log.observations()[before..].to_vec();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let to_event_ms = (1..=writes)
        .map(|v| {
            heard
                .iter()
                .find(|&&(h, _)| h == v)
                .map(|&(_, at)| ms(at - sent[v as usize - 1]))
        })
        .collect();
    let to_reconcile_ms = (1..=writes)
        .map(|v| {
            let t = sent[v as usize - 1];
            observed
                .iter()
                .filter(|o| o.started >= t && o.value.is_some_and(|x| x >= v))
                .map(|o| ms(o.started - t))
                .reduce(f64::min)
        })
        .collect();
    Ok(Latency {
        writes,
        to_event_ms,
        to_reconcile_ms,
        reconciles: observed.len() as u64,
    })
}
// book: end ch14_fn_latency
