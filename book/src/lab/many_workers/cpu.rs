//! Chapter 18's reconciler that burns CPU: chapter 06's storm with a reconcile that computes for
//! its cost instead of sleeping, beside the sleeping one, under the real clock.
//!
//! ```text
//!  cluster side: a runtime of its own          the controller: the runtime under test
//!  ┌──────────────────────────────┐            ┌──────────────────────────────────────────┐
//!  │ writer: patch 1..=200, 1 ms  │──HTTP──►   │ informer ─┬─► controller, 1 worker:      │
//!  │ embedded API server          │──watch──►  │           │   reconcile sleeps or burns  │
//!  └──────────────────────────────┘            │           └─► a second handler notes     │
//!                                              │               when each value arrived    │
//!                                              └──────────────────────────────────────────┘
//! ```
//!
//! A tokio task that never awaits holds its runtime thread until it returns; tokio does not
//! preempt it. A reconcile that sleeps gives its thread back at once; one that burns
//! ([`rig::burn`]) keeps it for the whole cost. The server and the writer run on a runtime of
//! their own ([`ClusterSide`]), as a real API server and a real writer are other processes: they
//! share the machine's cores with the controller, never its runtime's threads. The controller
//! runs on [`rig::real()`]'s two worker threads, or on a runtime of one thread ([`one_thread`]),
//! where nothing else of the controller runs while a reconcile burns.
//!
//! # Invariants
//! 1. Every storm runs on a fresh server and runtime, in the order of [`pairs`]: sleeping, then
//!    burning, at each cost.
//! 2. A value is noted as heard during a reconcile when the recorder counted a reconcile in
//!    flight as the second handler ran: between [`rig::Recorder::burn`]'s increment and decrement
//!    there is no await, so on one thread no handler can run in between.

use std::{path::PathBuf, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use parking_lot::Mutex;
use tokio::time::Instant;

use super::bands;
use crate::kit::{band::Band, measured, snap};
use crate::lab::rig::burst::{
    BurstError, Params, Report, Running, measure, prepare, reconcile_ratio, start_and_settle,
};
use crate::lab::rig::{self, Backend, Burst, NAMESPACE, OBJECT, Observation, Storm};
use crate::lab::rig::{set_value, value_of};
use controlloop::apiserver::ApiServer;
use controlloop::cache::HandlerFuncs;
use controlloop::controller::{Context, Controller, ReconcileResult, Request};

/// How a reconcile spends its cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Work {
    /// `tokio::time::sleep(cost)`: the task waits, its thread runs other tasks.
    Sleep,
    /// [`rig::burn`]`(cost)`: the task computes, and holds its thread.
    Burn,
    /// `spawn_blocking(move || burn(cost))`: the computation runs on tokio's blocking pool, and
    /// the task awaits it, so its thread runs other tasks.
    BurnBlocking,
    /// **Broken**: spawns the sleeping work and returns at once, so the queue believes the key
    /// done while the work runs (chapter 11's detached work): nothing merges. Kept to fire the
    /// reconcile-ratio band.
    Detach,
}

/// When one value written reached the informer's second handler.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Heard {
    /// The value.
    pub value: u64,
    /// When the handler ran.
    pub at: Instant,
    /// Whether a reconcile was running at that moment.
    pub during_reconcile: bool,
}

/// One storm of [`cpu_storm`]: chapter 06's report, and the latencies.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CpuRun {
    /// How the reconcile spent its cost.
    pub work: Work,
    /// The controller's runtime threads (set by [`storm`]; 2 until then).
    pub threads: usize,
    /// Chapter 06's report of the storm.
    pub report: Report,
    /// For each value written, ms from sending its write to the second handler hearing it.
    pub to_event_ms: Vec<Option<f64>>,
    /// For each value written, ms from sending its write to the start of the first reconcile
    /// that started after it was sent and read it, or a later value, from the cache.
    pub to_reconcile_ms: Vec<Option<f64>>,
    /// Values heard while a reconcile was running.
    pub heard_during_reconcile: u64,
    /// Values heard.
    pub heard: u64,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl CpuRun {
    /// Turns the stamps of one storm into latencies.
    pub fn new(
        work: Work,
        report: Report,
        sent: &[Instant],
        heard: &[Heard],
        observed: &[Observation],
    ) -> CpuRun {
        let to_event_ms = (1..=sent.len() as u64)
            .map(|v| {
                let t = sent[v as usize - 1];
                heard.iter().find(|h| h.value == v).map(|h| ms(h.at - t))
            })
            .collect();
        let to_reconcile_ms = (1..=sent.len() as u64)
            .map(|v| {
                let t = sent[v as usize - 1];
                observed
                    .iter()
                    .filter(|o| o.started >= t && o.value.is_some_and(|x| x >= v))
                    .map(|o| ms(o.started - t))
                    .reduce(f64::min)
            })
            .collect();
        CpuRun {
            work,
            threads: 2,
            report,
            to_event_ms,
            to_reconcile_ms,
            heard_during_reconcile: heard.iter().filter(|h| h.during_reconcile).count() as u64,
            heard: heard.len() as u64,
        }
    }

    /// The median write-to-event latency, ms.
    pub fn event_p50_ms(&self) -> f64 {
        percentile(&self.to_event_ms, 50.0)
    }

    /// The 99th percentile of the write-to-event latency, ms.
    pub fn event_p99_ms(&self) -> f64 {
        percentile(&self.to_event_ms, 99.0)
    }

    /// The median write-to-reconcile latency, ms.
    pub fn reconcile_p50_ms(&self) -> f64 {
        percentile(&self.to_reconcile_ms, 50.0)
    }

    /// The 99th percentile of the write-to-reconcile latency, ms.
    pub fn reconcile_p99_ms(&self) -> f64 {
        percentile(&self.to_reconcile_ms, 99.0)
    }

    /// The share of the values heard that arrived while a reconcile was running.
    pub fn heard_during_share(&self) -> f64 {
        round3(self.heard_during_reconcile as f64 / self.heard.max(1) as f64)
    }
}

/// Rounds to three decimals.
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The `p`-th percentile (nearest rank) of the values present, rounded to 0.001 ms; `NaN` if
/// none.
pub fn percentile(values: &[Option<f64>], p: f64) -> f64 {
    let mut v: Vec<f64> = values.iter().flatten().copied().collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    round3(v[rank.min(v.len()) - 1])
}

/// Chapter 06's storm ([`crate::lab::rig::burst::level_storm`]) with the reconcile's work chosen by
/// `work`, a second handler on the informer that notes when each value arrived, and the time
/// each write was sent. The chapter shows this body.
pub async fn cpu_storm(
    params: &Params,
    work: Work,
    cluster_side: &ClusterSide,
) -> Result<CpuRun, BurstError> {
    // book: ch18_cpu_storm
    let (mut cluster, log) = prepare(params).await?; // the informer, on the cluster side's server
    let Storm { writes, gap, cost } = params.storm;
    let heard: Arc<Mutex<Vec<Heard>>> = Arc::default();
    let (noted, busy) = (heard.clone(), log.clone());
    let note = move |_, new: Arc<ConfigMap>| {
        let during_reconcile = busy.in_flight() > 0; // a reconcile is running as this runs
        let (at, value) = (Instant::now(), value_of(&new).expect("a value"));
        noted.lock().push(Heard {
            value,
            at,
            during_reconcile,
        });
    };
    let handler = HandlerFuncs::new().on_update(note); // beside the controller's own handler
    let registered = cluster.informer.add_event_handler(handler);
    registered.expect("a fresh informer takes a handler");
    let seen = log.clone();
    let reconcile = move |request: Request, ctx: Context<ConfigMap>| {
        let log = seen.clone();
        async move {
            let value = ctx.get(&request).and_then(|cm| value_of(&cm));
            match work {
                Work::Sleep => log.act(value, cost).await, // waits: its thread runs others
                Work::Burn => log.burn(value, cost),       // computes: holds its thread
                Work::BurnBlocking => log.burn_blocking(value, cost).await, // on another thread
                Work::Detach => drop(tokio::spawn(async move { log.act(value, cost).await })), // broken
            }
            Ok(ReconcileResult::done())
        }
    };
    let controller = Controller::builder("cpu")
        .max_concurrent_reconciles(params.workers) // one, as in the essay
        .with_predicate(rig::Named(OBJECT))
        .build(&cluster.informer, reconcile)?;
    let running = Running::controller(controller);
    let baseline = start_and_settle(&mut cluster, &running, &log).await?;
    let before = log.observations().len();
    let (sent, burst) = cluster_side.write(writes, gap).await?; // 1..=200 on the cluster side
    let report = measure(params, cluster, running, log.clone(), baseline, burst).await?;
    let observed = log.observations()[before..].to_vec();
    // book: end ch18_cpu_storm
    let heard = heard.lock().clone();
    Ok(CpuRun::new(work, report, &sent, &heard, &observed))
}

/// The cluster side of a storm: the storm's writer on a runtime of its own (one worker thread),
/// and the API server it writes to: the embedded one on that runtime, reached over HTTP through
/// a kubeconfig, as a real API server and a real writer are other processes; or a real
/// kube-apiserver ([`ClusterSide::real`]).
pub struct ClusterSide {
    runtime: tokio::runtime::Runtime,
    /// The embedded server, or `None` on a real one.
    server: Option<ApiServer>,
    /// How the writer reaches the server.
    config: kube::Config,
    kubeconfig: PathBuf,
}

impl ClusterSide {
    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("cluster-side")
            .enable_all()
            .build()
            .expect("the cluster side's runtime builds")
    }

    /// The writer, on a runtime of its own, for the real API server `kubeconfig` names (the
    /// real control plane of chapter 14). Needs the book's `tls` feature.
    pub fn real(kubeconfig: PathBuf) -> ClusterSide {
        let runtime = Self::runtime();
        let config = runtime.block_on(async {
            let kc = kube::config::Kubeconfig::read_from(&kubeconfig).expect("a kubeconfig");
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .expect("a client configuration")
        });
        ClusterSide {
            runtime,
            server: None,
            config,
            kubeconfig,
        }
    }

    /// Starts the server on a runtime of its own and writes a kubeconfig for it.
    pub fn start() -> ClusterSide {
        let runtime = Self::runtime();
        let server = runtime
            .block_on(ApiServer::start())
            .expect("the embedded server starts");
        let kubeconfig = std::env::temp_dir().join(format!(
            "controlloop-cluster-side-{}-{}.json",
            std::process::id(),
            server.addr().port()
        ));
        let text = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{ "name": "side", "cluster": { "server": server.url() } }],
            "users": [{ "name": "side", "user": {} }],
            "contexts": [{ "name": "side", "context": { "cluster": "side", "user": "side" } }],
            "current-context": "side",
        });
        std::fs::write(&kubeconfig, text.to_string()).expect("the kubeconfig is written");
        ClusterSide {
            runtime,
            config: server.config(),
            server: Some(server),
            kubeconfig,
        }
    }

    /// The backend a storm's [`Params`] take: the server, through its kubeconfig.
    pub fn backend(&self) -> Backend {
        Backend::Kubeconfig(self.kubeconfig.clone())
    }

    /// Writes the values `1..=writes` to the storm's object from the cluster side, `gap` apart
    /// (no wait after the last); returns when each write was sent, and the burst.
    pub async fn write(
        &self,
        writes: u64,
        gap: Duration,
    ) -> Result<(Vec<Instant>, Burst), kube::Error> {
        let config = self.config.clone();
        let writer = self.runtime.spawn(async move {
            let client = kube::Client::try_from(config)?;
            let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
            let (mut sent, started) = (Vec::new(), Instant::now());
            for value in 1..=writes {
                sent.push(Instant::now());
                set_value(&api, OBJECT, value).await?; // one write, one watch event
                if value < writes {
                    tokio::time::sleep(gap).await;
                }
            }
            let finished = Instant::now();
            let issued = writes;
            Ok((
                sent,
                Burst {
                    issued,
                    started,
                    finished,
                },
            ))
        });
        writer.await.expect("the writer panicked")
    }

    /// Stops the server (an embedded one: a real one is left running) and the runtime. Call it
    /// outside any runtime.
    pub fn stop(self) {
        let ClusterSide {
            runtime,
            server,
            kubeconfig,
            ..
        } = self;
        if let Some(server) = server {
            runtime.block_on(server.shutdown());
            let _ = std::fs::remove_file(kubeconfig); // the one `start` wrote
        }
    }
}

/// Runs `future` on a runtime of one thread with the machine's clock: every task, the
/// reconcile's included, takes turns on it.
pub fn one_thread<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime builds")
        .block_on(future)
}

/// The reconcile costs of the sweep, ms.
pub const COSTS_MS: [u64; 3] = [5, 20, 50];

/// Which runtime the controller runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Threads {
    /// [`rig::real()`]: two worker threads, as CI has two cores.
    Two,
    /// [`one_thread`]: a current-thread runtime.
    One,
}

/// One storm of the essay's writes at `cost_ms`, under the real clock, with the controller on
/// `threads` and the server and writer on a [`ClusterSide`] of their own.
pub fn storm(cost_ms: u64, work: Work, threads: Threads) -> CpuRun {
    storm_on(ClusterSide::start(), cost_ms, work, threads)
}

/// [`storm`] against the cluster side `side`: the embedded server, or a real kube-apiserver
/// ([`ClusterSide::real`]; take the real tier's lock first, for the storm writes the object
/// the other real-clock storms write).
pub fn storm_on(side: ClusterSide, cost_ms: u64, work: Work, threads: Threads) -> CpuRun {
    let params = Params::essay()
        .real()
        .backend(side.backend())
        .cost(Duration::from_millis(cost_ms));
    let run = cpu_storm(&params, work, &side);
    let run = match threads {
        Threads::Two => rig::real(run),
        Threads::One => one_thread(run),
    };
    side.stop();
    let mut run =
        run.unwrap_or_else(|e| panic!("{work:?} at {cost_ms} ms on {threads:?} thread(s): {e}"));
    run.threads = match threads {
        Threads::Two => 2,
        Threads::One => 1,
    };
    run
}

/// At each cost of [`COSTS_MS`], the storm with a sleeping reconcile and then with a burning
/// one, each on its own runtime and server (keeps I1), the controller on two threads.
pub fn pairs() -> Vec<(CpuRun, CpuRun)> {
    // book: ch18_cpu_pairs
    let pairs: Vec<(CpuRun, CpuRun)> = COSTS_MS
        .iter()
        .map(|&cost_ms| {
            let sleep = storm(cost_ms, Work::Sleep, Threads::Two); // a fresh server and runtime
            let burn = storm(cost_ms, Work::Burn, Threads::Two); // for each run
            (sleep, burn)
        })
        .collect();
    // book: end ch18_cpu_pairs
    pairs
}

/// The five banded figures of one run, by band name.
pub fn figures(r: &CpuRun) -> [(&'static str, f64); 5] {
    let cost_ms = r.report.cost.as_secs_f64() * 1000.0;
    [
        ("CPU_RECONCILE_RATIO", reconcile_ratio(&r.report)),
        ("CPU_EVENT_P50_MS", r.event_p50_ms()),
        ("CPU_EVENT_P99_MS", r.event_p99_ms()),
        (
            "CPU_RECONCILE_P50_PER_COST",
            round3(r.reconcile_p50_ms() / cost_ms),
        ),
        ("CPU_HEARD_DURING_RECONCILE", r.heard_during_share()),
    ]
}

/// [`figures`] under the names of the real control plane's bands (`REAL_CPU_…`).
pub fn figures_real(r: &CpuRun) -> [(&'static str, f64); 5] {
    let names = [
        "REAL_CPU_RECONCILE_RATIO",
        "REAL_CPU_EVENT_P50_MS",
        "REAL_CPU_EVENT_P99_MS",
        "REAL_CPU_RECONCILE_P50_PER_COST",
        "REAL_CPU_HEARD_DURING_RECONCILE",
    ];
    let values = figures(r);
    std::array::from_fn(|i| {
        debug_assert_eq!(format!("REAL_{}", values[i].0), names[i]);
        (names[i], values[i].1)
    })
}

/// The 20 ms storm on the real control plane `kubeconfig` names, sleeping and then burning,
/// the controller on two threads: chapter 18's real-plane run, and one round of the bands'
/// files. Take the real tier's lock first.
pub fn real_pair(kubeconfig: &std::path::Path) -> [CpuRun; 2] {
    [Work::Sleep, Work::Burn].map(|work| {
        let side = ClusterSide::real(kubeconfig.to_path_buf()); // the writer; kube-apiserver, etcd
        storm_on(side, 20, work, Threads::Two)
    })
}

/// The band called `name`.
///
/// # Panics
/// If there is none.
pub fn band(name: &str) -> Band<f64> {
    bands::BANDS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, b)| *b)
        .unwrap_or_else(|| panic!("no band {name}"))
}

/// Whether this process may run on two CPUs or more (`available_parallelism`, which follows
/// the process's CPU affinity): the claim that a burning reconcile leaves the informer hearing
/// writes needs a second CPU for the runtime's second thread.
pub fn two_cpus() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
}

/// Checks one figure of a run against its band (panics with the band's message outside it).
/// On a process that may use one CPU only, the share heard during a reconcile is shown beside
/// its one-core runs instead, and one line says so: there the claim does not hold.
pub fn check(name: &str, value: f64) {
    let heard = name.ends_with("CPU_HEARD_DURING_RECONCILE");
    if heard && !two_cpus() {
        let shown = bands::CPU_HEARD_DURING_RECONCILE_ONE_CORE.show(value);
        eprintln!(
            "{name} not checked: this process may use one CPU, and its claim needs two ({shown})"
        );
        return;
    }
    band(name).check(name, value);
}

/// The durable claims of any run, exact: every write's event reached the controller and the
/// second handler, the controller ended on the last value (in the cache too), and no two
/// reconciles of the object ran at once.
pub fn check_durable(r: &CpuRun) {
    let p = &r.report;
    let what = format!("{:?} at {} ms", r.work, p.cost.as_millis());
    assert_eq!(p.events_delivered, p.writes_issued, "{what}: an event lost");
    assert_eq!(
        r.heard, p.writes_issued,
        "{what}: the second handler missed one"
    );
    assert_eq!(
        p.final_observed,
        Some(p.final_written),
        "{what}: final value"
    );
    assert_eq!(p.final_in_cache, Some(p.final_written), "{what}: the cache");
    assert_eq!(
        p.max_concurrent_reconciles_of_one_key, 1,
        "{what}: two at once"
    );
}

/// Checks every run of the sweep: its durable claims, and each figure in its band (panics
/// with the band's message outside one).
pub fn check_pairs(pairs: &[(CpuRun, CpuRun)]) {
    // book: ch18_cpu_check
    for run in pairs.iter().flat_map(|(sleep, burn)| [sleep, burn]) {
        check_durable(run); // every event heard, ended on 200, never two reconciles at once
        for (name, value) in figures(run) {
            check(name, value); // the five figures, each in its band (the share: on two CPUs)
        }
    }
    // book: end ch18_cpu_check
}

/// The sweep as the chapter pins it: the durable values, and each band once.
pub fn pairs_text(pairs: &[(CpuRun, CpuRun)]) -> String {
    let costs: Vec<String> = pairs
        .iter()
        .map(|(s, _)| s.report.cost.as_millis().to_string())
        .collect();
    let mut t = format!(
        "the essay's storm (200 writes, 1 ms apart), one worker, real clock, at costs {} ms;\n\
         the controller on two threads, its reconcile sleeping, then burning\n\
         every run: events heard 200 of 200, last acted on 200, in the cache 200, \
         most reconciles of the object at once 1\n",
        costs.join(", ")
    );
    // The embedded server's bands: the real control plane's (`REAL_CPU_…`) hold other runs.
    for (name, b) in bands::BANDS.iter().filter(|(n, _)| !n.starts_with("REAL_")) {
        t.push_str(&format!("{name} {b}: every run inside\n"));
    }
    t
}

/// This run's values of the sweep, as a Markdown table.
pub fn pairs_measured(runs: &[&CpuRun]) -> String {
    let mut t = String::from(
        "| cost ms | work | threads | reconciles | span ms | ratio | event p50 ms | event p99 ms | reconcile p50 ms | p50/cost | heard in a reconcile |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in runs {
        let f = figures(r);
        let p = &r.report;
        t.push_str(&format!(
            "| {} | {:?} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} of {} |\n",
            p.cost.as_millis(),
            r.work,
            r.threads,
            p.reconciles,
            p.burst_span.as_secs_f64() * 1000.0,
            f[0].1,
            f[1].1,
            f[2].1,
            r.reconcile_p50_ms(),
            f[3].1,
            r.heard_during_reconcile,
            r.heard,
        ));
    }
    t
}

/// The cost of the runs on one thread: the essay's storm.
pub const ONE_THREAD_COST_MS: u64 = 20;

/// The runs on one thread: the burning reconcile, whose durable claims hold, which hears no
/// value while a reconcile runs, and on which every band fires (returns each band's message);
/// then the sleeping one and the one that burns on the blocking pool, inside every band.
pub fn one_thread_runs() -> (CpuRun, [CpuRun; 2], Vec<String>) {
    let one = storm(ONE_THREAD_COST_MS, Work::Burn, Threads::One);
    check_durable(&one);
    assert_eq!(
        one.heard_during_reconcile, 0,
        "heard while the only thread burned"
    );
    let fired = figures(&one)
        .iter()
        .map(|&(name, value)| {
            let band = band(name);
            let fired = rig::catch_quietly(|| band.check(name, value))
                .expect_err(&format!("{name} did not fire on one thread"));
            let prefix = format!("{name} = {value} is outside its band {band}");
            assert!(fired.starts_with(&prefix), "{fired}");
            let above = name != "CPU_HEARD_DURING_RECONCILE"; // that one is 0, below its band
            assert_eq!(band.hi.is_some_and(|hi| value > hi), above, "{name}");
            fired
        })
        .collect();
    let burns = 5.0 * ONE_THREAD_COST_MS as f64;
    assert!(
        one.event_p50_ms() > burns,
        "the median value heard within 5 burns"
    );
    let others = [Work::Sleep, Work::BurnBlocking].map(|work| {
        let r = storm(ONE_THREAD_COST_MS, work, Threads::One);
        check_durable(&r);
        for (name, value) in figures(&r) {
            check(name, value);
        }
        r
    });
    (one, others, fired)
}

/// The runs on one thread as the chapter pins them: their exact values.
pub fn one_thread_text(runs: &[&CpuRun]) -> String {
    let mut t = String::new();
    for r in runs {
        let p = &r.report;
        let (work, heard, bands) = match r.work {
            Work::Burn => (
                "burning",
                format!("{} of {}", r.heard_during_reconcile, r.heard),
                "every one outside",
            ),
            Work::Sleep => ("sleeping", "in its band".to_owned(), "every one inside"),
            Work::BurnBlocking => (
                "burning on the blocking pool",
                "in its band".to_owned(),
                "every one inside",
            ),
            Work::Detach => (
                "detached from its work",
                "in its band".to_owned(),
                "the ratio's outside",
            ),
        };
        t.push_str(&format!(
            "the essay's storm ({} ms), the reconcile {work}, the controller on one thread\n\
             events heard {} of {}, last acted on {}, in the cache {}\n\
             values heard while a reconcile ran: {heard}\n\
             the five bands: {bands}\n",
            p.cost.as_millis(),
            p.events_delivered,
            p.writes_issued,
            p.final_observed.map_or("none".into(), |v| v.to_string()),
            p.final_in_cache.map_or("none".into(), |v| v.to_string()),
        ));
    }
    t
}

/// Chapter 18: the sweep on two threads, checked and recorded; then the runs on one.
pub fn ch18_cpu() {
    let pairs = pairs();
    check_pairs(&pairs);
    snap::text("ch18_cpu", pairs_text(&pairs));
    let runs: Vec<&CpuRun> = pairs.iter().flat_map(|(s, b)| [s, b]).collect();
    measured::record("ch18_cpu", pairs_measured(&runs)).expect("record the measured values");
    let (one, [sleeping, blocking], _) = one_thread_runs();
    let runs = [&one, &sleeping, &blocking];
    snap::text("ch18_cpu_one_thread", one_thread_text(&runs));
    measured::record("ch18_cpu_one_thread", pairs_measured(&runs))
        .expect("record the measured values");
}

/// The durable part of each run, one line each, for a snapshot where no band applies (the real
/// control plane's runs): what was heard, where the storm ended, and how many reconciles of the
/// key ran at once. [`check_durable`] asserts the same.
pub fn durable_text(runs: &[&CpuRun]) -> String {
    let lines: Vec<String> = runs
        .iter()
        .map(|r| {
            let p = &r.report;
            format!(
                "{:?} at {} ms on {} thread(s): {} of {} writes heard by the second handler, \
                 {} delivered, ended on {:?} of {}, at most {} reconcile(s) of the key at once",
                r.work,
                p.cost.as_millis(),
                r.threads,
                r.heard,
                p.writes_issued,
                p.events_delivered,
                p.final_observed,
                p.final_written,
                p.max_concurrent_reconciles_of_one_key
            )
        })
        .collect();
    lines.join("\n")
}
