//! This crate's controller machinery against kube-runtime 5.0.0's, in one criterion run, on the
//! same workloads, against the same embedded API server called in-process, on a two-thread
//! runtime with the real clock:
//!
//! - **reflector drain**: 20,000 watch events queued in the server's history (100 ConfigMaps,
//!   200 merge patches each) while the reflectors wait between their list and their watch; then
//!   the watch opens and the time until every event is in the store is measured. One watcher,
//!   and ten at once (each with its own store). Ours: `cache::Reflector` into a
//!   `cache::Store` (the like-for-like of kube-runtime's `reflector(writer, watcher(..))`), and
//!   the whole informer (reflector, RealFIFO, indexer, one counting handler). kube-runtime:
//!   `reflector(writer, watcher(api, Config::default()))`.
//! - **controller throughput**: 10,000 ConfigMaps on the server; from a cold start (the list
//!   included) until every object has been reconciled once by a reconciler that does nothing
//!   but count. Ours: informer + `Controller` with 16 workers, waiting for the cache as
//!   controller-runtime does (a 100 ms poll), and the same with `SyncWait::DoneChecker`, whose
//!   wait ends at the sync; kube-runtime: `Controller::new` with `concurrency(16)`.
//! - **write → reconcile start**: one object, an idle controller; a merge patch is sent and
//!   the time until the reconcile that reads its value starts is measured. Criterion times
//!   single writes; a separate pass of 1,000 sequential writes per runtime gives p50 and p99.
//!
//! Medians of this run, the ratios and the percentiles are written to
//! `chapters/measured/ch11_bench.md` (chapter 11 includes it) and printed.
//!
//! Wall time on a shared machine moves with its load. For a count that does not, run one
//! workload once under callgrind and subtract its twin (see [`once`]):
//!
//! ```text
//! KUBE_RUNTIME_BENCH_ONCE=cold-kube valgrind --tool=callgrind target/release/deps/kube_runtime-…
//! ```

use std::{
    collections::BTreeMap,
    convert::Infallible,
    fmt::Write as _,
    pin::pin,
    sync::{
        Arc, LazyLock,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use controlloop::{
    apiserver::{Cluster, ServerOptions},
    cache::{
        self as lw, HandlerFuncs, InformerOptions, ListerWatcher, Reflector, ReflectorOptions,
        ReflectorStep, ReflectorStore, ReflectorStoreError, SharedIndexInformer, Store,
    },
    controller::{Context, Controller, ReconcileResult as Res, Request, SyncWait},
};
use controlloop_book::lab::rig::{self, value_of};
use criterion::{Criterion, Throughput, criterion_group};
use futures::{StreamExt, TryStreamExt, future::BoxFuture};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams},
    runtime::{
        Controller as KubeController,
        controller::{Action, Config},
        reflector::{self as kreflector, reflector},
        watcher::{self, watcher},
    },
};
use parking_lot::Mutex;
use tokio::sync::{Notify, watch};

const QUEUED: u64 = 20_000;
const DRAIN_OBJECTS: u64 = 100;
const THROUGHPUT_OBJECTS: u64 = 10_000;
const WORKERS: usize = 16;
const LATENCY_WRITES: usize = 1_000;
const LIMIT: Duration = Duration::from_secs(120);

/// Every timed sample of this run, by benchmark name (for the medians and ratios).
static SAMPLES: LazyLock<Mutex<BTreeMap<String, Vec<Duration>>>> = LazyLock::new(Default::default);

fn sample(name: &str, d: Duration) {
    SAMPLES.lock().entry(name.to_owned()).or_default().push(d);
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn cm(name: String) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name),
            ..Default::default()
        },
        ..Default::default()
    }
}

async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {LIMIT:?}"))
}

// ---------------------------------------------------------------------------------------------
// Reflector drain

/// A `cache::Store` that counts what a reflector writes into it.
#[derive(Clone)]
struct Counting {
    store: Store<ConfigMap>,
    applied: Arc<AtomicU64>,
}

impl ReflectorStore<ConfigMap> for Counting {
    fn add(&self, obj: ConfigMap) -> Result<(), ReflectorStoreError> {
        self.store
            .add(Arc::new(obj))
            .map_err(ReflectorStoreError::from)?;
        self.applied.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn update(&self, obj: ConfigMap) -> Result<(), ReflectorStoreError> {
        self.store
            .update(Arc::new(obj))
            .map_err(ReflectorStoreError::from)?;
        self.applied.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn delete(&self, obj: ConfigMap) -> Result<(), ReflectorStoreError> {
        self.store.delete(&obj).map_err(ReflectorStoreError::from)
    }
    fn replace(&self, list: Vec<ConfigMap>, rv: String) -> Result<(), ReflectorStoreError> {
        let list = list.into_iter().map(Arc::new).collect();
        self.store
            .replace(list, &rv)
            .map_err(ReflectorStoreError::from)
    }
    fn resync(&self) -> Result<(), ReflectorStoreError> {
        Ok(())
    }
}

/// Which drainer.
#[derive(Clone, Copy)]
enum Drainer {
    OurReflector,
    OurInformer,
    KubeReflector,
    /// No reflector at all: `Api::list`, then `Api::watch` from its resourceVersion, each event
    /// decoded and dropped. The path both reflectors share (server, transport, decoding).
    BareWatch,
}

/// One drain: `watchers` drainers list, wait, the 20,000 writes happen, then the gate opens and
/// the time until every drainer has applied every event is returned.
async fn drain_once(cluster: &Cluster, drainer: Drainer, watchers: usize) -> Duration {
    let api: Api<ConfigMap> = Api::namespaced(cluster.in_process_client(), "default");
    let (gate_tx, gate) = watch::channel(false);
    let listed = Arc::new(AtomicU64::new(0));
    let listed_notify = Arc::new(Notify::new());
    let mut tasks = vec![];
    for _ in 0..watchers {
        let (api, mut gate, listed, listed_notify) = (
            api.clone(),
            gate.clone(),
            listed.clone(),
            listed_notify.clone(),
        );
        let mark_listed = move || {
            listed.fetch_add(1, Ordering::SeqCst);
            listed_notify.notify_one();
        };
        tasks.push(tokio::spawn(async move {
            match drainer {
                Drainer::KubeReflector => {
                    let (_reader, writer) = kreflector::store::<ConfigMap>();
                    let mut stream =
                        pin!(reflector(writer, watcher(api, watcher::Config::default())));
                    while let Some(ev) = stream.try_next().await.unwrap() {
                        if matches!(ev, watcher::Event::InitDone) {
                            break;
                        }
                    }
                    mark_listed();
                    gate.wait_for(|open| *open).await.unwrap();
                    let mut applied = 0;
                    while applied < QUEUED {
                        if let Some(watcher::Event::Apply(_)) = stream.try_next().await.unwrap() {
                            applied += 1;
                        }
                    }
                }
                Drainer::BareWatch => {
                    let list = api.list(&ListParams::default()).await.unwrap();
                    let rv = list.metadata.resource_version.unwrap_or_default();
                    mark_listed();
                    gate.wait_for(|open| *open).await.unwrap();
                    let mut events = api
                        .watch(&WatchParams::default(), &rv)
                        .await
                        .unwrap()
                        .boxed();
                    let mut decoded = 0;
                    while decoded < QUEUED {
                        if let Some(Ok(WatchEvent::Modified(_))) = events.next().await {
                            decoded += 1;
                        }
                    }
                }
                Drainer::OurReflector => {
                    let store = Counting {
                        store: Store::new(),
                        applied: Arc::new(AtomicU64::new(0)),
                    };
                    let applied = store.applied.clone();
                    let mut r = Reflector::new(api, store, ReflectorOptions::default());
                    while !matches!(r.step().await, ReflectorStep::Listed { .. }) {}
                    applied.store(0, Ordering::SeqCst);
                    mark_listed();
                    gate.wait_for(|open| *open).await.unwrap();
                    while applied.load(Ordering::Relaxed) < QUEUED {
                        r.step().await;
                    }
                }
                Drainer::OurInformer => {
                    let gated = Gated {
                        api,
                        gate: gate.clone(),
                    };
                    let informer = Arc::new(SharedIndexInformer::new(
                        gated,
                        InformerOptions::new(Duration::ZERO),
                    ));
                    let seen = Arc::new(AtomicU64::new(0));
                    let done = Arc::new(Notify::new());
                    let (s, d) = (seen.clone(), done.clone());
                    informer
                        .add_event_handler(HandlerFuncs::new().on_update(
                            move |_, _: Arc<ConfigMap>| {
                                if s.fetch_add(1, Ordering::Relaxed) + 1 == QUEUED {
                                    d.notify_one();
                                }
                            },
                        ))
                        .unwrap();
                    let inf = informer.clone();
                    let running =
                        tokio::spawn(async move { inf.run(futures::future::pending()).await });
                    informer.wait_synced().await;
                    mark_listed();
                    done.notified().await;
                    running.abort();
                }
            }
        }));
    }
    within("every drainer listing", async {
        while listed.load(Ordering::SeqCst) < watchers as u64 {
            listed_notify.notified().await;
        }
    })
    .await;
    queue_events(&api).await;
    let start = Instant::now();
    gate_tx.send_replace(true);
    within("draining 20,000 events", async {
        for t in tasks {
            t.await.unwrap();
        }
    })
    .await;
    start.elapsed()
}

/// The 20,000 events: 200 merge patches to each of the 100 objects.
async fn queue_events(api: &Api<ConfigMap>) {
    let pp = PatchParams::default();
    for round in 0..QUEUED / DRAIN_OBJECTS {
        for i in 0..DRAIN_OBJECTS {
            let patch = serde_json::json!({ "data": { "round": round.to_string() } });
            api.patch(&format!("d{i}"), &pp, &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    }
}

/// `Api<ConfigMap>` whose watch waits for a gate (and which opts out of streaming lists, so the
/// informer lists, then watches from the list's resourceVersion, like the other drainers).
struct Gated {
    api: Api<ConfigMap>,
    gate: watch::Receiver<bool>,
}

impl ListerWatcher<ConfigMap> for Gated {
    fn list(
        &self,
        options: lw::ListOptions,
    ) -> BoxFuture<'static, Result<lw::ListPage<ConfigMap>, lw::LwError>> {
        ListerWatcher::list(&self.api, options)
    }
    fn watch(
        &self,
        options: lw::WatchOptions,
    ) -> BoxFuture<'static, Result<lw::WatchStream<ConfigMap>, lw::LwError>> {
        let (api, mut gate) = (self.api.clone(), self.gate.clone());
        Box::pin(async move {
            let _ = gate.wait_for(|open| *open).await;
            ListerWatcher::watch(&api, options).await
        })
    }
    fn is_watch_list_semantics_unsupported(&self) -> bool {
        true
    }
}

fn drain(c: &mut Criterion) {
    let rt = runtime();
    let cluster = Cluster::new(ServerOptions {
        history: 60_000,
        ..Default::default()
    });
    rt.block_on(async {
        let api: Api<ConfigMap> = Api::namespaced(cluster.in_process_client(), "default");
        for i in 0..DRAIN_OBJECTS {
            api.create(&PostParams::default(), &cm(format!("d{i}")))
                .await
                .unwrap();
        }
    });
    let mut g = c.benchmark_group("reflector_drain_20000_events");
    g.sample_size(10);
    for watchers in [1usize, 10] {
        g.throughput(Throughput::Elements(QUEUED * watchers as u64));
        for (name, drainer) in [
            ("controlloop_reflector", Drainer::OurReflector),
            ("kube_runtime_reflector", Drainer::KubeReflector),
            ("controlloop_informer", Drainer::OurInformer),
            ("bare_watch", Drainer::BareWatch),
        ] {
            let id = format!("{name}/{watchers}_watchers");
            g.bench_function(&id, |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let d = rt.block_on(drain_once(&cluster, drainer, watchers));
                        sample(&id, d);
                        total += d;
                    }
                    total
                })
            });
        }
    }
    g.finish();
}

// ---------------------------------------------------------------------------------------------
// Controller throughput

async fn ours_cold_start(api: &Api<ConfigMap>, wait: SyncWait) -> Duration {
    let start = Instant::now();
    let informer = Arc::new(SharedIndexInformer::new(
        api.clone(),
        InformerOptions::new(Duration::ZERO),
    ));
    let done = Arc::new(AtomicU64::new(0));
    let all = Arc::new(Notify::new());
    let (d, a) = (done.clone(), all.clone());
    let controller = Controller::builder("throughput")
        .max_concurrent_reconciles(WORKERS)
        .sync_wait(wait)
        .build(&informer, move |_req: Request, _ctx: Context<ConfigMap>| {
            if d.fetch_add(1, Ordering::Relaxed) + 1 == THROUGHPUT_OBJECTS {
                a.notify_one();
            }
            async { Ok(Res::done()) }
        })
        .unwrap();
    let inf = informer.clone();
    let informing = tokio::spawn(async move { inf.run(futures::future::pending()).await });
    let c = controller.clone();
    let running = tokio::spawn(async move { c.run(futures::future::pending()).await });
    within("10,000 reconciles (controlloop)", all.notified()).await;
    let elapsed = start.elapsed();
    controller.shutdown();
    let _ = running.await;
    informing.abort();
    elapsed
}

async fn kube_cold_start(api: &Api<ConfigMap>) -> Duration {
    let start = Instant::now();
    let done = Arc::new(AtomicU64::new(0));
    let all = Arc::new(Notify::new());
    let (d, a) = (done.clone(), all.clone());
    let running = tokio::spawn(
        KubeController::new(api.clone(), watcher::Config::default())
            .with_config(Config::default().concurrency(WORKERS as u16))
            .run(
                move |_cm: Arc<ConfigMap>, _: Arc<()>| {
                    if d.fetch_add(1, Ordering::Relaxed) + 1 == THROUGHPUT_OBJECTS {
                        a.notify_one();
                    }
                    async { Ok::<_, Infallible>(Action::await_change()) }
                },
                |_, _, _| Action::await_change(),
                Arc::new(()),
            )
            .for_each(|_| async {}),
    );
    within("10,000 reconciles (kube-runtime)", all.notified()).await;
    let elapsed = start.elapsed();
    running.abort();
    let _ = running.await;
    elapsed
}

fn throughput(c: &mut Criterion) {
    let rt = runtime();
    let cluster = Cluster::new(ServerOptions::default());
    let api: Api<ConfigMap> = rt.block_on(async {
        let api: Api<ConfigMap> = Api::namespaced(cluster.in_process_client(), "default");
        for i in 0..THROUGHPUT_OBJECTS {
            api.create(&PostParams::default(), &cm(format!("o{i}")))
                .await
                .unwrap();
        }
        api
    });
    let mut g = c.benchmark_group("controller_10000_objects_cold_start");
    g.throughput(Throughput::Elements(THROUGHPUT_OBJECTS));
    g.sample_size(10);
    for (name, wait) in [
        ("controlloop_16_workers", SyncWait::Poll),
        ("controlloop_16_workers_done_checker", SyncWait::DoneChecker),
    ] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        let d = rt.block_on(ours_cold_start(&api, wait));
                        sample(name, d);
                        d
                    })
                    .sum()
            })
        });
    }
    g.bench_function("kube_runtime_concurrency_16", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let d = rt.block_on(kube_cold_start(&api));
                    sample("kube_runtime_concurrency_16", d);
                    d
                })
                .sum()
        })
    });
    g.finish();
}

// ---------------------------------------------------------------------------------------------
// Write -> reconcile start

type Started = watch::Receiver<Option<(u64, Instant)>>;

/// An idle controller on one object, of either runtime; returns what its reconciler reports.
async fn latency_rig(cluster: &Cluster, kube: bool) -> (Api<ConfigMap>, Started) {
    let api: Api<ConfigMap> = Api::namespaced(cluster.in_process_client(), "default");
    api.create(&PostParams::default(), &rig::object(rig::OBJECT, 0))
        .await
        .unwrap();
    let (tx, rx) = watch::channel(None);
    if kube {
        tokio::spawn(
            KubeController::new(api.clone(), watcher::Config::default())
                .run(
                    move |cm: Arc<ConfigMap>, _: Arc<()>| {
                        if let Some(v) = value_of(&cm) {
                            tx.send_replace(Some((v, Instant::now())));
                        }
                        async { Ok::<_, Infallible>(Action::await_change()) }
                    },
                    |_, _, _| Action::await_change(),
                    Arc::new(()),
                )
                .for_each(|_| async {}),
        );
    } else {
        let informer = Arc::new(SharedIndexInformer::new(
            api.clone(),
            InformerOptions::new(Duration::ZERO),
        ));
        let controller = Controller::builder("latency")
            .build(&informer, move |req: Request, ctx: Context<ConfigMap>| {
                if let Some(v) = ctx.get(&req).and_then(|cm| value_of(&cm)) {
                    tx.send_replace(Some((v, Instant::now())));
                }
                async { Ok(Res::done()) }
            })
            .unwrap();
        tokio::spawn(async move { informer.run(futures::future::pending()).await });
        tokio::spawn(async move { controller.run(futures::future::pending()).await });
    }
    (api, rx)
}

/// One write of `value`, timed from the send to the start of the reconcile that reads it.
async fn one_write(api: &Api<ConfigMap>, started: &Started, value: u64) -> Duration {
    let mut rx = started.clone();
    let sent = Instant::now();
    rig::set_value(api, rig::OBJECT, value).await.unwrap();
    within("the reconcile of a write", async {
        loop {
            if let Some((v, at)) = *rx.borrow_and_update()
                && v == value
            {
                return at - sent;
            }
            rx.changed().await.unwrap();
        }
    })
    .await
}

fn latency(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("write_to_reconcile_start");
    for (name, kube) in [("controlloop", false), ("kube_runtime", true)] {
        let cluster = Cluster::new(ServerOptions::default());
        let (api, started) = rt.block_on(latency_rig(&cluster, kube));
        rt.block_on(async {
            within("the initial reconcile", async {
                let mut rx = started.clone();
                rx.wait_for(|s| s.is_some()).await.unwrap();
            })
            .await
        });
        let mut value = 0;
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        value += 1;
                        total += one_write(&api, &started, value).await;
                        tokio::time::sleep(Duration::from_millis(1)).await; // idle between writes
                    }
                    total
                })
            })
        });
        // The distribution: 1,000 sequential writes, each after a 1 ms pause.
        let one_thousand: Vec<Duration> = rt.block_on(async {
            let mut v = vec![];
            for _ in 0..LATENCY_WRITES {
                value += 1;
                v.push(one_write(&api, &started, value).await);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            v
        });
        for d in one_thousand {
            sample(&format!("latency_{name}"), d);
        }
    }
    g.finish();
    report();
}

// ---------------------------------------------------------------------------------------------
// The summary

fn pct(samples: &[Duration], p: f64) -> Duration {
    let mut v = samples.to_vec();
    v.sort();
    let i = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

/// Medians of this run's samples, the ratios the targets are stated in, and the latency
/// percentiles; printed, and recorded for chapter 11.
fn report() {
    let s = SAMPLES.lock();
    let med = |k: &str| s.get(k).map(|v| pct(v, 0.5));
    let rate = |k: &str, n: u64| med(k).map(|d| n as f64 / d.as_secs_f64());
    let mut out = String::from(
        "| workload | controlloop | kube-runtime | ratio (target) |\n|---|---|---|---|\n",
    );
    for w in [1u64, 10] {
        let n = QUEUED * w;
        let (o, k, i) = (
            rate(&format!("controlloop_reflector/{w}_watchers"), n),
            rate(&format!("kube_runtime_reflector/{w}_watchers"), n),
            rate(&format!("controlloop_informer/{w}_watchers"), n),
        );
        let floor = rate(&format!("bare_watch/{w}_watchers"), n);
        if let (Some(o), Some(k), Some(i), Some(f)) = (o, k, i, floor) {
            // Wall time per event beyond the shared path (server, transport, decoding), in µs.
            let beyond = |r: f64| 1e6 / r - 1e6 / f;
            let _ = writeln!(
                out,
                "| drain 20,000 events, {w} watcher(s), events/s (median) | reflector {o:.0}; informer {i:.0} | {k:.0} | {:.2}× (≥ 1.5×); informer {:.2}× |",
                o / k,
                i / k
            );
            let _ = writeln!(
                out,
                "| … the shared path alone (bare `Api::watch`, no store): {f:.0} events/s; µs per event beyond it | reflector {:.2}; informer {:.2} | {:.2} | a free reflector: {:.2}× |",
                beyond(o),
                beyond(i),
                beyond(k),
                f / k
            );
        }
    }
    if let (Some(o), Some(k)) = (
        med("controlloop_16_workers"),
        med("kube_runtime_concurrency_16"),
    ) {
        let _ = writeln!(
            out,
            "| 10,000 objects, cold start to all reconciled (median) | {} | {} | {:.2}× (≥ 2×) |",
            ms(o),
            ms(k),
            k.as_secs_f64() / o.as_secs_f64()
        );
        if let Some(d) = med("controlloop_16_workers_done_checker") {
            let _ = writeln!(
                out,
                "| … the same, waiting for the cache with `SyncWait::DoneChecker` (no 100 ms poll) | {} | {} | {:.2}× |",
                ms(d),
                ms(k),
                k.as_secs_f64() / d.as_secs_f64()
            );
        }
    }
    if let (Some(o), Some(k)) = (s.get("latency_controlloop"), s.get("latency_kube_runtime")) {
        let _ = writeln!(
            out,
            "| write → reconcile start, p50 / p99 of {LATENCY_WRITES} writes | {} / {} | {} / {} | p50 ≤ 0.2 ms |",
            ms(pct(o, 0.5)),
            ms(pct(o, 0.99)),
            ms(pct(k, 0.5)),
            ms(pct(k, 0.99))
        );
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let _ = writeln!(
        out,
        "\nOne `cargo bench --bench kube_runtime` run, release build, two-thread runtime, \
         in-process transport; load average at the end: {}.",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!("\n{out}");
    let _ = controlloop_book::kit::measured::record("ch11_bench", &out);
}

// ---------------------------------------------------------------------------------------------
// One run of one workload, for an instruction count (`valgrind --tool=callgrind`), which does
// not move with the machine's load the way wall time does.

/// `KUBE_RUNTIME_BENCH_ONCE=WORKLOAD` runs one workload once and exits; WORKLOAD is
/// `cold-none` / `cold-controlloop` / `cold-kube` (10,000 objects created, then nothing, or one
/// cold start) or `drain-writes` / `drain-bare` / `drain-controlloop` / `drain-kube` (the 20,000
/// writes alone, or drained by one watcher; a `-10` suffix drains with ten, and
/// `drain-informer` / `drain-informer-10` drain with the whole informer).
/// The differences between the counts of a workload and its `none`/`bare` twin are the cost of
/// the runtime alone.
fn once(workload: &str) {
    let rt = runtime();
    rt.block_on(async {
        let cluster = Cluster::new(ServerOptions {
            history: 60_000,
            ..Default::default()
        });
        let api: Api<ConfigMap> = Api::namespaced(cluster.in_process_client(), "default");
        let (objects, prefix) = if workload.starts_with("cold") {
            (THROUGHPUT_OBJECTS, "o")
        } else {
            (DRAIN_OBJECTS, "d")
        };
        for i in 0..objects {
            api.create(&PostParams::default(), &cm(format!("{prefix}{i}")))
                .await
                .unwrap();
        }
        let took = match workload {
            "cold-none" => Duration::ZERO,
            "cold-controlloop" => ours_cold_start(&api, SyncWait::Poll).await,
            "cold-kube" => kube_cold_start(&api).await,
            "drain-writes" => {
                queue_events(&api).await;
                Duration::ZERO
            }
            "drain-bare" => drain_once(&cluster, Drainer::BareWatch, 1).await,
            "drain-controlloop" => drain_once(&cluster, Drainer::OurReflector, 1).await,
            "drain-kube" => drain_once(&cluster, Drainer::KubeReflector, 1).await,
            "drain-bare-10" => drain_once(&cluster, Drainer::BareWatch, 10).await,
            "drain-controlloop-10" => drain_once(&cluster, Drainer::OurReflector, 10).await,
            "drain-kube-10" => drain_once(&cluster, Drainer::KubeReflector, 10).await,
            "drain-informer" => drain_once(&cluster, Drainer::OurInformer, 1).await,
            "drain-informer-10" => drain_once(&cluster, Drainer::OurInformer, 10).await,
            other => panic!("unknown workload {other}"),
        };
        println!("{workload}: {took:?}");
    });
}

criterion_group!(benches, drain, throughput, latency);

fn main() {
    if let Ok(workload) = std::env::var("KUBE_RUNTIME_BENCH_ONCE") {
        once(&workload);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
