//! The controller designs a storm can run against: the faithful one, and two deliberately
//! broken ones whose only purpose is to make the chapter's detectors fire.

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

use super::{BurstError, Params};
use crate::lab::rig::{OBJECT, Recorder, value_of};
use crate::{
    cache::{
        lister_watcher::ListerWatcher,
        shared_informer::{HandlerFuncs, SharedIndexInformer},
    },
    controller::{
        Controller, Event, Request, Result as ReconcileResult,
        handler::{EnqueueRequestForObject, EventHandler},
    },
};

/// Which controller design a storm runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Variant {
    /// The faithful controller: a queue of keys, the value read from the cache.
    Level,
    /// **Broken**: a plain channel of keys instead of the workqueue. Every event is a
    /// reconcile (no deduplication), and with several workers two of them can hold the object
    /// at once. The value is still read from the cache.
    ChannelOfKeys,
    /// **Broken**: the workqueue (so requests still collapse), but the reconciler acts on the
    /// payload of the event that first queued the key instead of reading the cache. When it is
    /// behind, the events merged into that request are lost, and it can end on a stale value.
    FirstPayload,
}

/// A controller of one [`Variant`], running.
pub enum Running {
    /// [`Variant::Level`] or [`Variant::FirstPayload`]: the real controller.
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
struct StashFirstPayload(Arc<Mutex<HashMap<Request, Option<u64>>>>);

impl EventHandler<ConfigMap> for StashFirstPayload {
    fn handle(&self, event: &Event<ConfigMap>, enqueue: &mut dyn FnMut(Request)) {
        let payload = match event {
            Event::Create { object, .. } | Event::Generic { object } => value_of(object),
            Event::Update { new, .. } => new.as_deref().and_then(value_of),
            Event::Delete { .. } => None,
        };
        if let Some(r) = EnqueueRequestForObject::request_for(event) {
            self.0.lock().entry(r.clone()).or_insert(payload);
            enqueue(r);
        }
    }
}

impl Running {
    /// Builds the variant's controller on `informer` and starts its workers (they wait for
    /// the cache to sync).
    pub fn start<L: ListerWatcher<ConfigMap>>(
        params: &Params,
        informer: &SharedIndexInformer<ConfigMap, L>,
        recorder: Arc<Recorder>,
    ) -> Result<Running, BurstError> {
        let cost = params.cost;
        let builder = Controller::builder("burst").max_concurrent_reconciles(params.workers);
        let controller = match params.variant {
            Variant::Level => builder.build(
                informer,
                move |req: Request, ctx: crate::controller::Context<ConfigMap>| {
                    let recorder = recorder.clone();
                    async move {
                        if req.name == OBJECT {
                            // The level: whatever the cache holds now.
                            let value = ctx.get(&req).and_then(|cm| value_of(&cm));
                            recorder.act(value, cost).await;
                        }
                        Ok(ReconcileResult::done())
                    }
                },
            )?,
            Variant::FirstPayload => {
                let stash = Arc::new(Mutex::new(HashMap::new()));
                let taken = stash.clone();
                builder.with_handler(StashFirstPayload(stash)).build(
                    informer,
                    move |req: Request, _ctx: crate::controller::Context<ConfigMap>| {
                        let recorder = recorder.clone();
                        let payload = taken.lock().remove(&req).flatten();
                        async move {
                            if req.name == OBJECT {
                                recorder.act(payload, cost).await;
                            }
                            Ok(ReconcileResult::done())
                        }
                    },
                )?
            }
            Variant::ChannelOfKeys => return Ok(Self::start_channel(params, informer, recorder)),
        };
        let task = {
            let controller = controller.clone();
            tokio::spawn(async move {
                if let Err(e) = controller.run(futures::future::pending()).await {
                    tracing::error!(error = %e, "burst controller failed");
                }
            })
        };
        Ok(Running::Controller { controller, task })
    }

    fn start_channel<L: ListerWatcher<ConfigMap>>(
        params: &Params,
        informer: &SharedIndexInformer<ConfigMap, L>,
        recorder: Arc<Recorder>,
    ) -> Running {
        let counts: Arc<[AtomicU64; 3]> = Arc::new(Default::default());
        let (tx, rx) = mpsc::unbounded_channel::<Request>();
        let send = move |counts: &[AtomicU64; 3], cm: &ConfigMap| {
            counts[0].fetch_add(1, Ordering::SeqCst);
            let meta = &cm.metadata;
            let r = Request::new(
                meta.namespace.clone().unwrap_or_default(),
                meta.name.clone().unwrap_or_default(),
            );
            counts[1].fetch_add(1, Ordering::SeqCst);
            let _ = tx.send(r);
        };
        let send = Arc::new(send);
        let (c1, c2, s1, s2) = (counts.clone(), counts.clone(), send.clone(), send);
        informer
            .add_event_handler(
                HandlerFuncs::new()
                    .on_add(move |o, _| s1(&c1, &o))
                    .on_update(move |_, n| s2(&c2, &n)),
            )
            .expect("a fresh informer accepts handlers");
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        let indexer = informer.indexer().clone();
        let workers = (0..params.workers.max(1))
            .map(|_| {
                let (rx, counts, indexer, recorder) = (
                    rx.clone(),
                    counts.clone(),
                    indexer.clone(),
                    recorder.clone(),
                );
                let cost = params.cost;
                tokio::spawn(async move {
                    loop {
                        let Some(req) = rx.lock().await.recv().await else {
                            return;
                        };
                        counts[2].fetch_add(1, Ordering::SeqCst);
                        if req.name == OBJECT {
                            let value = indexer.get_by_key(&req.key()).and_then(|cm| value_of(&cm));
                            recorder.act(value, cost).await;
                        }
                    }
                })
            })
            .collect();
        Running::Channel { counts, workers }
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
    pub fn idle(&self, recorder: &Recorder) -> bool {
        let queued = match self {
            Running::Controller { controller, .. } => {
                let q = controller.queue();
                q.len() + q.waiting_len() > 0 || controller.metrics().active_workers > 0
            }
            Running::Channel { counts, .. } => {
                counts[1].load(Ordering::SeqCst) != counts[2].load(Ordering::SeqCst)
            }
        };
        !queued && recorder.in_flight() == 0
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
