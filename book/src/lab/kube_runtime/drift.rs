//! What fills the resync's role in kube-runtime, run against the resync chapter's drift
//! scenario; and kube-runtime's `predicate_filter(predicates::generation)` beside
//! controller-runtime's `GenerationChanged` against a storm of status writes.
//!
//! kube-runtime 5.0.0 has no resync period. Two things come close: `Action::requeue(d)` from
//! the reconciler (per object, like `RequeueAfter`), and `Controller::reconcile_all_on(stream)`
//! (every object in the store, whenever the stream yields, like a resync tick). The timeline is
//! the resync chapter's events on whole hours (see [`controlloop`] for why): Widget `w` at
//! generation 7, red; at hour 1 a spec change to green (generation 8); at hour 21
//! `silent_write` turns it blue on the server and no watch event is sent; stop at hour 35.

use std::{convert::Infallible, sync::Arc, time::Duration};

use futures::StreamExt;
use kube::{
    ResourceExt,
    api::{Api, Patch, PatchParams, PostParams},
    runtime::{
        Controller as KubeController, WatchStreamExt,
        controller::Action,
        predicates,
        reflector::{self, reflector},
        watcher::{self, watcher},
    },
};
use parking_lot::Mutex;
use tokio::time::Instant;

use super::{Log, Runtime};
use crate::lab::rig::{Widget, WidgetSpec};
use crate::lab::{resync::Setup, rig};
use controlloop::{
    apiserver::Cluster,
    cache::{InformerOptions, SharedIndexInformer},
    controller::{Context, Controller, ReconcileResult, Request, predicate::GenerationChanged},
};

/// One virtual hour.
pub const HOUR: Duration = Duration::from_secs(3600);

/// The hour of the lost writes in this crate's side ([`controlloop`]: the resync chapter's
/// timeline).
pub const OURS_LOST_WRITE_HOUR: f64 = 21.5;

/// The hour of [`script`]'s silent write, on kube-runtime's side.
pub const KUBE_SILENT_WRITE_HOUR: f64 = 21.0;

/// How the kube-runtime controller of a drift run is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Remedy {
    /// `Action::await_change()`: reconcile on watch events only.
    AwaitChange,
    /// `reconcile_all_on` a 10-hour tick: the resync look-alike, reading the store.
    ReconcileAllOn10h,
    /// `Action::requeue(1 h)`, reading the object it is handed (the store's copy).
    Requeue1hStore,
    /// `Action::requeue(1 h)`, reading the live object with a GET.
    Requeue1hLive,
}

impl Remedy {
    /// All four, in the order the chapter prints them.
    pub const ALL: [Remedy; 4] = [
        Remedy::AwaitChange,
        Remedy::ReconcileAllOn10h,
        Remedy::Requeue1hStore,
        Remedy::Requeue1hLive,
    ];
}

/// What one drift run saw.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Drift {
    /// Reconciles over the 35 hours.
    pub reconciles: usize,
    /// The colours the reconciler read, without repeats.
    pub colors_read: Vec<String>,
    /// The first virtual hour at which a reconcile read blue.
    pub first_hour_blue_read: Option<f64>,
    /// Requests the server logged within one second of each of the first three resync ticks
    /// (hours 10, 20 and 30 for kube-runtime; P, 2P and 3P for this crate, P jittered).
    pub requests_at_10_20_30h: Vec<usize>,
}

/// The resync chapter's Widget: created red and brought to generation 7.
pub async fn widget(api: &Api<Widget>) -> Widget {
    let pp = PostParams::default();
    let spec = WidgetSpec {
        replicas: 1,
        color: Some("red".into()),
    };
    let mut w = api
        .create(&pp, &Widget::new("w", spec))
        .await
        .expect("create");
    for replicas in 2..=7 {
        w.spec.replicas = replicas;
        w = api.replace("w", &pp, &w).await.expect("bump generation");
    }
    w
}

/// The Widget's colour (`spec.color`, empty if unset).
pub fn color(w: &Widget) -> String {
    w.spec.color.clone().unwrap_or_default()
}

/// Runs the drift timeline against a kube-runtime controller built with `remedy`.
pub fn kube_runtime(remedy: Remedy) -> Drift {
    rig::paused(async move {
        // book: ch11_drift_kube
        let cluster = rig::widget_cluster().await;
        let t0 = Instant::now();
        let api: Api<Widget> = Api::namespaced(cluster.in_process_client(), "default");
        widget(&api).await;
        let reads: Arc<Mutex<Vec<(f64, String)>>> = Arc::default();

        let (reader, writer) = reflector::store::<Widget>();
        let stream = reflector(writer, watcher(api.clone(), watcher::Config::default()))
            .applied_objects()
            .predicate_filter(predicates::generation, Default::default());
        let mut controller = KubeController::for_stream(stream, reader);
        if remedy == Remedy::ReconcileAllOn10h {
            let ticks = futures::stream::unfold((), |()| async {
                tokio::time::sleep(10 * HOUR).await;
                Some(((), ()))
            });
            controller = controller.reconcile_all_on(ticks);
        }
        let (seen, live) = (reads.clone(), api.clone());
        let running = tokio::spawn(
            controller
                .run(
                    move |w: Arc<Widget>, _: Arc<()>| {
                        let (seen, live) = (seen.clone(), live.clone());
                        async move {
                            let read = match remedy {
                                Remedy::Requeue1hLive => live.get(&w.name_any()).await.ok(),
                                _ => Some((*w).clone()),
                            };
                            if let Some(read) = read {
                                let hour = t0.elapsed().as_secs_f64() / 3600.0;
                                seen.lock().push((hour, color(&read)));
                            }
                            Ok::<_, Infallible>(match remedy {
                                Remedy::Requeue1hStore | Remedy::Requeue1hLive => {
                                    Action::requeue(HOUR)
                                }
                                _ => Action::await_change(),
                            })
                        }
                    },
                    |_, _, _| Action::await_change(),
                    Arc::new(()),
                )
                .for_each(|_| async {}),
        );
        let requests_at_10_20_30h = script(&cluster, &api, t0).await;
        running.abort();
        // book: end ch11_drift_kube
        let reads = reads.lock().clone();
        Drift {
            reconciles: reads.len(),
            colors_read: dedup(reads.iter().map(|(_, c)| c.clone())),
            first_hour_blue_read: reads
                .iter()
                .find(|(_, c)| c == "blue")
                .map(|(h, _)| round3(*h)),
            requests_at_10_20_30h,
        }
    })
}

/// This crate's side, from the resync chapter's own experiment (`lab::resync::timeline`) with
/// `setup`: chapter 04's faithful controller (a 10-hour resync, `GenerationChanged`, reading
/// the cache), or one with a one-hour `requeue_after` that reads the live object. That
/// timeline puts its writes on half hours (the change at 0.5 h, the lost writes at 21.5 h);
/// [`script`] puts the same writes on whole hours, because kube-runtime's scheduler lets the
/// 0.5 h trigger replace the pending hourly requeue and would move every later requeue onto
/// the half hours, into the 21.5 h write.
pub fn controlloop(setup: Setup) -> Drift {
    let r = crate::lab::resync::run(setup);
    let of_w: Vec<_> = r.reconciles.iter().filter(|x| x.name == "w").collect();
    Drift {
        reconciles: of_w.len(),
        colors_read: dedup(of_w.iter().map(|x| x.color.clone())),
        first_hour_blue_read: of_w
            .iter()
            .find(|x| x.color == "blue")
            .map(|x| round3(x.at.as_secs_f64() / 3600.0)),
        requests_at_10_20_30h: r.requests_at_resync_ticks.clone(),
    }
}

/// The timeline after the Widget exists: the genuine change at hour 1, the silent write at
/// hour 21, the request counts around hours 10, 20, 30; returns at hour 35.
pub async fn script(cluster: &Cluster, api: &Api<Widget>, t0: Instant) -> Vec<usize> {
    tokio::time::sleep_until(t0 + HOUR).await;
    let mut w = api.get("w").await.expect("get");
    w.spec.color = Some("green".into());
    api.replace("w", &PostParams::default(), &w)
        .await
        .expect("genuine change");
    let mut around = vec![];
    for tick in [10u32, 20, 30] {
        tokio::time::sleep_until(t0 + HOUR * tick - Duration::from_secs(1)).await;
        let before = cluster.requests().len();
        tokio::time::sleep_until(t0 + HOUR * tick + Duration::from_secs(1)).await;
        around.push(cluster.requests().len() - before);
        if tick == 20 {
            tokio::time::sleep_until(t0 + HOUR * 21).await;
            let mut drifted = api.get("w").await.expect("get");
            drifted.spec.color = Some("blue".into());
            cluster.silent_write(&drifted).expect("silent write");
        }
    }
    tokio::time::sleep_until(t0 + HOUR * 35).await;
    around
}

fn dedup(items: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for i in items {
        if out.last() != Some(&i) {
            out.push(i);
        }
    }
    out
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// What a status-write storm did to four controllers on one Widget: each runtime with its
/// generation predicate and without any.
#[derive(Debug, Clone)]
pub struct StatusStorm {
    /// Reconciles, noted `generation` or `no predicate` per runtime.
    pub log: Log,
    /// Status writes in the storm.
    pub status_writes: usize,
}

impl StatusStorm {
    /// Reconciles of `runtime`'s controller noted `note`.
    pub fn count(&self, runtime: Runtime, note: &str) -> usize {
        self.log
            .notes(runtime)
            .iter()
            .filter(|n| *n == note)
            .count()
    }
}

/// A Widget at generation 1 takes `n` status writes 1 ms apart, one spec change, and `n` more
/// status writes. Four controllers watch it: this crate's with `GenerationChanged` and without
/// predicates, kube-runtime's with `predicate_filter(predicates::generation)` and without.
/// Reconciles cost nothing, so no two events collapse.
pub fn status_storm(n: usize) -> StatusStorm {
    rig::paused(async move {
        // book: ch11_status_storm
        let cluster = rig::widget_cluster().await;
        let api: Api<Widget> = Api::namespaced(cluster.in_process_client(), "default");
        let spec = WidgetSpec {
            replicas: 1,
            color: None,
        };
        api.create(&PostParams::default(), &Widget::new("w", spec))
            .await
            .expect("create");
        let log = Log::new();

        // This crate: two controllers on one informer, with and without the predicate.
        let informer = Arc::new(SharedIndexInformer::new(
            api.clone(),
            InformerOptions::new(Duration::ZERO),
        ));
        let mut ours = vec![];
        for (note, filtered) in [("generation", true), ("no predicate", false)] {
            let seen = log.clone();
            let mut builder = Controller::builder(note);
            if filtered {
                builder = builder.with_predicate(GenerationChanged);
            }
            let c = builder
                .build(&informer, move |_req: Request, _ctx: Context<Widget>| {
                    seen.record(Runtime::ours(), note);
                    async { Ok(ReconcileResult::done()) }
                })
                .expect("controller");
            let run = c.clone();
            tokio::spawn(async move { run.run(futures::future::pending()).await });
            ours.push(c);
        }
        let inf = informer.clone();
        let informing = tokio::spawn(async move { inf.run(futures::future::pending()).await });

        // kube-runtime: the same two, each on its own watcher.
        let mut kube = vec![];
        for (note, filtered) in [("generation", true), ("no predicate", false)] {
            let (reader, writer) = reflector::store::<Widget>();
            let applied = reflector(writer, watcher(api.clone(), watcher::Config::default()))
                .applied_objects();
            let stream = if filtered {
                applied
                    .predicate_filter(predicates::generation, Default::default())
                    .boxed()
            } else {
                applied.boxed()
            };
            let seen = log.clone();
            kube.push(log.drive(KubeController::for_stream(stream, reader).run(
                move |_w: Arc<Widget>, _: Arc<()>| {
                    seen.record(Runtime::KubeRuntime, note);
                    async { Ok::<_, Infallible>(Action::await_change()) }
                },
                |_, _, _| Action::await_change(),
                Arc::new(()),
            )));
        }

        tokio::time::sleep(Duration::from_secs(1)).await;
        let pp = PatchParams::default();
        for i in 0..2 * n {
            if i == n {
                let spec = serde_json::json!({ "spec": { "replicas": 2 } });
                api.patch("w", &pp, &Patch::Merge(&spec))
                    .await
                    .expect("spec");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let status = serde_json::json!({ "status": { "readyReplicas": i } });
            api.patch_status("w", &pp, &Patch::Merge(&status))
                .await
                .expect("status");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        for c in ours {
            c.shutdown();
        }
        for k in kube {
            k.abort();
        }
        informing.abort();
        // book: end ch11_status_storm
        StatusStorm {
            log,
            status_writes: 2 * n,
        }
    })
}
