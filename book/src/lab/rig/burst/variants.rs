//! The controller designs a storm can run against: the faithful one, and three deliberately
//! broken ones whose only purpose is to make chapter 06's detectors and bands fire. The chapter
//! shows the bodies of [`start_first_payload`], [`StashFirstPayload`]'s handler,
//! [`start_channel_of_keys`] and [`start_debounced`] verbatim.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use tokio::sync::mpsc;

#[cfg(doc)]
use super::params::Variant; // only the docs name it
use super::{error::BurstError, params::Params};
use crate::lab::rig::{self, Informer, OBJECT, Recorder, value_of};
use controlloop::cache::HandlerFuncs;
use controlloop::controller::{
    Context, Controller, EnqueueRequestForObject, Event, EventHandler, ReconcileResult, Request,
};

/// How long [`Variant::Debounced`]'s reconciler waits before it reads the cache.
pub const DEBOUNCE: Duration = Duration::from_millis(10);

/// A controller of one [`Variant`], running.
pub enum Running {
    /// [`Variant::Level`], [`Variant::FirstPayload`] or [`Variant::Debounced`]: the real
    /// controller.
    Controller {
        /// The controller.
        controller: Controller<ConfigMap>,
        /// Its `run` task.
        task: tokio::task::JoinHandle<()>,
    },
    /// [`Variant::ChannelOfKeys`].
    Channel {
        /// Events heard, keys sent, keys received by a worker.
        counts: Arc<[AtomicU64; 3]>,
        /// The workers.
        workers: Vec<tokio::task::JoinHandle<()>>,
    },
}

/// Counters common to every variant.
#[derive(Debug, Clone, Copy)]
pub struct Counters {
    /// Informer callbacks heard.
    pub events: u64,
    /// Keys (or payloads) queued.
    pub keys: u64,
}

/// A handler that remembers the payload of the event that first queued each key, and queues
/// the key (the bug of [`Variant::FirstPayload`]).
pub struct StashFirstPayload(pub Arc<Mutex<HashMap<Request, Option<u64>>>>);

// book: ch06_stash_handler
impl EventHandler<ConfigMap> for StashFirstPayload {
    fn handle(&self, event: &Event<ConfigMap>, enqueue: &mut dyn FnMut(Request)) {
        let payload = match event {
            Event::Create { object, .. } | Event::Generic { object } => value_of(object),
            Event::Update { new, .. } => new.as_deref().and_then(value_of),
            Event::Delete { .. } => None,
        };
        if let Some(request) = EnqueueRequestForObject::request_for(event) {
            // "Saves a cache read": keeps the value of the event that first queued the key.
            self.0.lock().entry(request.clone()).or_insert(payload);
            enqueue(request);
        }
    }
}
// book: end ch06_stash_handler

/// [`Variant::FirstPayload`]: the real controller with [`StashFirstPayload`] as its handler,
/// and a reconciler that acts on the stashed payload.
// book: ch06_first_payload
pub fn start_first_payload(
    params: &Params,
    informer: &Informer,
    log: Arc<Recorder>,
) -> Result<Running, BurstError> {
    let cost = params.storm.cost;
    let stash = Arc::new(Mutex::new(HashMap::new()));
    let taken = stash.clone();
    let controller = Controller::builder("first-payload")
        .max_concurrent_reconciles(params.workers)
        .with_predicate(rig::Named(OBJECT))
        .with_handler(StashFirstPayload(stash))
        .build(informer, move |request: Request, _: Context<ConfigMap>| {
            let log = log.clone();
            let payload = taken.lock().remove(&request).flatten(); // not the cache
            async move {
                log.act(payload, cost).await;
                Ok(ReconcileResult::done())
            }
        })?;
    Ok(Running::controller(controller))
}
// book: end ch06_first_payload

/// [`Variant::Debounced`]: the real controller, with a reconciler that waits [`DEBOUNCE`]
/// before it reads the cache and does its work.
// book: ch06_debounced
pub fn start_debounced(
    params: &Params,
    informer: &Informer,
    log: Arc<Recorder>,
) -> Result<Running, BurstError> {
    let cost = params.storm.cost;
    let reconcile = move |request: Request, ctx: Context<ConfigMap>| {
        let log = log.clone();
        async move {
            // "Let the writes settle": the key stays held, so what arrives meanwhile merges.
            tokio::time::sleep(DEBOUNCE).await;
            let value = ctx.get(&request).and_then(|cm| value_of(&cm));
            log.act(value, cost).await; // the work itself: `cost`, as the faithful one's
            Ok(ReconcileResult::done())
        }
    };
    let controller = Controller::builder("debounced")
        .max_concurrent_reconciles(params.workers)
        .with_predicate(rig::Named(OBJECT))
        .build(informer, reconcile)?;
    Ok(Running::controller(controller))
}
// book: end ch06_debounced

/// [`Variant::ChannelOfKeys`]: the informer's handler sends each event's key down a plain
/// channel; `params.workers` workers receive keys and read the value from the cache.
// book: ch06_channel_of_keys
pub fn start_channel_of_keys(
    params: &Params,
    informer: &Informer,
    log: Arc<Recorder>,
) -> Result<Running, BurstError> {
    let cost = params.storm.cost;
    let counts: Arc<[AtomicU64; 3]> = Arc::default(); // events heard, keys sent, keys received
    let (tx, rx) = mpsc::unbounded_channel::<Request>();
    let (heard, sent) = (counts.clone(), counts.clone());
    let send = move |cm: &ConfigMap| {
        heard[0].fetch_add(1, Ordering::SeqCst);
        if cm.metadata.name.as_deref() == Some(OBJECT) {
            let ns = cm.metadata.namespace.clone().unwrap_or_default();
            sent[1].fetch_add(1, Ordering::SeqCst);
            let _ = tx.send(Request::new(ns, OBJECT)); // every event: its own key, never merged
        }
    };
    let send = Arc::new(send);
    let on_update = send.clone();
    informer
        .add_event_handler(
            HandlerFuncs::new()
                .on_add(move |cm, _| send(&cm))
                .on_update(move |_, cm| on_update(&cm)),
        )
        .expect("a fresh informer accepts handlers");
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let workers = (0..params.workers.max(1))
        .map(|_| {
            let (rx, counts, log) = (rx.clone(), counts.clone(), log.clone());
            let indexer = informer.indexer().clone();
            tokio::spawn(async move {
                loop {
                    let Some(request) = rx.lock().await.recv().await else {
                        return; // the channel closed
                    };
                    counts[2].fetch_add(1, Ordering::SeqCst);
                    let value = indexer
                        .get_by_key(&request.key())
                        .and_then(|cm| value_of(&cm));
                    log.act(value, cost).await;
                }
            })
        })
        .collect();
    Ok(Running::Channel { counts, workers })
}
// book: end ch06_channel_of_keys

impl Running {
    /// Starts `controller`'s workers in a task of their own (they wait for the cache to sync).
    pub fn controller(controller: Controller<ConfigMap>) -> Running {
        let task = {
            let controller = controller.clone();
            tokio::spawn(async move {
                if let Err(e) = controller.run(futures::future::pending()).await {
                    tracing::error!(error = %e, "storm controller failed");
                }
            })
        };
        Running::Controller { controller, task }
    }

    /// Events heard and keys queued so far.
    pub fn counters(&self) -> Counters {
        match self {
            Running::Controller { controller, .. } => {
                let m = controller.metrics();
                Counters {
                    events: m.events,
                    keys: m.enqueued,
                }
            }
            Running::Channel { counts, .. } => Counters {
                events: counts[0].load(Ordering::SeqCst),
                keys: counts[1].load(Ordering::SeqCst),
            },
        }
    }

    /// Nothing queued, nothing waiting, nothing running.
    pub fn idle(&self, log: &Recorder) -> bool {
        let busy = match self {
            Running::Controller { controller, .. } => {
                let q = controller.queue();
                q.len() + q.waiting_len() > 0 || controller.metrics().active_workers > 0
            }
            Running::Channel { counts, .. } => {
                counts[1].load(Ordering::SeqCst) != counts[2].load(Ordering::SeqCst)
            }
        };
        !busy && log.in_flight() == 0
    }

    /// Stops the workers, letting reconciles in flight finish.
    pub async fn shutdown(self) {
        let limit = Duration::from_secs(10);
        match self {
            Running::Controller { controller, task } => {
                controller.shutdown();
                let _ = tokio::time::timeout(limit, task).await;
            }
            Running::Channel { workers, .. } => {
                for w in workers {
                    w.abort();
                }
            }
        }
    }
}
