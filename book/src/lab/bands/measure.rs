//! How a band's runs are measured: each group runs the experiments that check some bands,
//! exactly as `cargo test` runs them but without the bands, and returns the value each band
//! would have checked. `cargo run -- measure GROUP --runs N` appends them to the bands' files
//! (`book/bases/NAME.tsv`) with the build profile, the load and the date.

use std::time::Duration;

use crate::lab::{
    burst::{self, Clock, Params, Report, sweeps},
    faults::{Fault, Row},
    intro, kube_runtime,
    many_workers::cpu,
    rig::{self},
    workqueue::contention::{ADDS, through_channel, through_queue},
};
use controlloop::{controller::Release, workqueue::Queue};

/// A CPU hog: twice as many busy threads as this process may use CPUs, for measuring the
/// `loaded` regime. The threads stop when the hog is dropped, and die with the process (Ctrl-C,
/// SIGTERM), for they are threads of it.
pub struct Hog {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Hog {
    /// Starts `2 × available_parallelism()` threads that spin until the hog is dropped.
    pub fn start() -> Hog {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let n = 2 * std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                })
            })
            .collect();
        Hog { stop, threads }
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One value a band would have checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    /// The band's file, without `.tsv` (the band's name in lower case).
    pub band: &'static str,
    /// What it would have checked.
    pub value: f64,
    /// Which run gave it.
    pub what: String,
}

/// A set of bands measured by one run of their experiments.
pub struct Group {
    /// The name on the command line.
    pub name: &'static str,
    /// What one run of the group runs.
    pub runs: &'static str,
    /// The bands it gives values for (their files, without `.tsv`).
    pub bands: &'static [&'static str],
    /// One run.
    pub run: fn() -> Vec<Value>,
}

/// Every group, in chapter order. Each band is measured by exactly one group.
pub const GROUPS: &[Group] = &[
    Group {
        name: "intro",
        runs: "chapter 00: ten virtual one-second sleeps (`intro::ten_virtual_sleeps`)",
        bands: &["real_us"],
        run: intro_run,
    },
    Group {
        name: "contention",
        runs: "chapter 01: 320,000 adds through the queue, then through the channel \
               (`contention::through_queue`, `through_channel`)",
        bands: &["queue_reconciles_per_add", "channel_violations"],
        run: contention_run,
    },
    Group {
        name: "storms",
        runs: "chapter 06: the essay's storm under the real clock over HTTP, then the three \
               real-clock sweeps at once, each on its own server (`burst::run`, `Sweep::run`); \
               and chapter 11's run of the same essay storm beside kube-runtime's",
        bands: &[
            "real_essay_reconciles",
            "real_reconcile_ratio",
            "real_collapse_at_or_below_gap",
            "real_write_overhead_ms",
            "real_converge_overhead_ms",
        ],
        run: storms_run,
    },
    Group {
        name: "kube",
        runs: "chapter 11: kube-runtime's essay storm under the real clock over HTTP, then its \
               three real-clock sweeps at once (`kube_runtime::storm::run`)",
        bands: &[
            "kube_real_essay_reconciles",
            "kube_real_reconcile_ratio",
            "kube_real_collapse_at_or_below_gap",
        ],
        run: kube_run,
    },
    Group {
        name: "latency",
        runs: "chapter 11: 200 writes 2 ms apart, both controllers on one in-process server, \
               real clock (`findings::race`)",
        bands: &["real_latency_p50_gap_ms"],
        run: latency_run,
    },
    Group {
        name: "faults",
        runs: "chapter 12: the slow event handler's row, both designs, real clock \
               (`faults::Row::run`)",
        bands: &["slow_handler_reconciles"],
        run: faults_run,
    },
    Group {
        name: "cpu",
        runs: "chapter 18: the essay's storm at 5, 20 and 50 ms, the reconcile sleeping and then \
               burning, the controller on two threads, the server and the writer on a runtime \
               of their own (`many_workers::cpu::pairs`)",
        bands: &[
            "cpu_reconcile_ratio",
            "cpu_event_p50_ms",
            "cpu_event_p99_ms",
            "cpu_reconcile_p50_per_cost",
            "cpu_heard_during_reconcile",
            "cpu_heard_during_reconcile_one_core",
        ],
        run: cpu_run,
    },
    Group {
        name: "election",
        runs: "chapter 15: the port's electors on the real control plane's Leases, `a` crashing \
               and then releasing (`second_replica::real::basis_round`; needs `--features tls` \
               and `cluster up`)",
        bands: &[
            "real_lease_takeover_after_crash_ms",
            "real_lease_takeover_after_release_ms",
        ],
        run: election_run,
    },
    Group {
        name: "cpu_real",
        runs: "chapter 18: the essay's storm at 20 ms on the real control plane, the reconcile \
               sleeping and then burning, the controller on two threads \
               (`many_workers::cpu::real_pair`; needs `--features tls` and `cluster up`)",
        bands: &REAL_CPU_FILES,
        run: cpu_real_run,
    },
    Group {
        name: "real",
        runs: "chapter 14: the latency run on the embedded server and on the real control plane, \
               then chapter 06's storm and sweeps and chapter 11's storm on the real one \
               (`real_server::basis_round`; needs `--features tls` and `cluster up`)",
        bands: &[
            "embedded_event_p50_ms",
            "embedded_reconcile_p50_ms",
            "real_server_event_p50_ms",
            "real_server_reconcile_p50_ms",
            "real_server_essay_reconciles",
            "real_server_kube_essay_reconciles",
            "real_server_reconcile_ratio",
            "real_server_write_overhead_ms",
            "real_server_converge_overhead_ms",
            "real_server_collapse_at_or_below_gap",
        ],
        run: real_run,
    },
];

/// The group named `name`.
pub fn group(name: &str) -> Option<&'static Group> {
    GROUPS.iter().find(|g| g.name == name)
}

fn value(band: &'static str, value: f64, what: impl Into<String>) -> Value {
    Value {
        band,
        value,
        what: what.into(),
    }
}

fn intro_run() -> Vec<Value> {
    let (_, real) = intro::ten_virtual_sleeps();
    vec![value(
        "real_us",
        real.as_micros() as f64,
        "ten virtual sleeps",
    )]
}

fn contention_run() -> Vec<Value> {
    let queue = rig::real(through_queue(Queue::new(), ADDS, None, |_| Duration::ZERO));
    let channel = rig::real(through_channel(ADDS, None, |_| Duration::ZERO));
    let per_add = queue.reconciles as f64 / ADDS as f64;
    vec![
        value(
            "queue_reconciles_per_add",
            (per_add * 1e6).round() / 1e6,
            "through_queue",
        ),
        value(
            "channel_violations",
            channel.violations as f64,
            "through_channel",
        ),
    ]
}

fn storm(r: &Report) -> String {
    format!(
        "{} writes, gap {} ms, cost {} ms",
        r.writes_issued,
        r.gap.as_millis(),
        r.cost.as_millis()
    )
}

/// The three real-clock sweeps at once, each on its own thread and server, as chapters 06 and
/// 11 run them; `one` runs one storm.
fn sweeps_at_once(one: fn(&Params) -> Report) -> Vec<Report> {
    let handles: Vec<_> = sweeps::Sweep::ALL
        .iter()
        .map(|&s| std::thread::spawn(move || s.params(Clock::Real).iter().map(one).collect()))
        .collect();
    handles
        .into_iter()
        .flat_map(|h: std::thread::JoinHandle<Vec<Report>>| h.join().expect("a sweep panicked"))
        .collect()
}

fn ours(p: &Params) -> Report {
    burst::run(p).expect("a real-clock storm")
}

fn kube(p: &Params) -> Report {
    kube_runtime::storm::run(p, Default::default()).expect("a kube-runtime real-clock storm")
}

fn storms_run() -> Vec<Value> {
    let essay = Params::essay().real();
    let chapter06 = ours(&essay);
    let mut out = vec![
        value(
            "real_essay_reconciles",
            chapter06.reconciles as f64,
            "chapter 06 essay storm",
        ),
        value(
            "real_reconcile_ratio",
            sweeps::reconcile_ratio(&chapter06),
            "chapter 06 essay storm",
        ),
    ];
    for r in sweeps_at_once(ours) {
        let what = format!("sweep: {}", storm(&r));
        out.push(value(
            "real_reconcile_ratio",
            sweeps::reconcile_ratio(&r),
            &what,
        ));
        out.push(value(
            "real_write_overhead_ms",
            sweeps::write_overhead_ms(&r),
            &what,
        ));
        out.push(value(
            "real_converge_overhead_ms",
            sweeps::converge_overhead_ms(&r),
            &what,
        ));
        if r.cost <= r.gap && !r.behind_in_fact() {
            out.push(value("real_collapse_at_or_below_gap", r.collapse, &what));
        }
    }
    let chapter11 = ours(&essay);
    out.push(value(
        "real_essay_reconciles",
        chapter11.reconciles as f64,
        "chapter 11 essay storm",
    ));
    out
}

fn kube_run() -> Vec<Value> {
    let essay = kube(&Params::essay().real());
    let mut out = vec![value(
        "kube_real_essay_reconciles",
        essay.reconciles as f64,
        "kube-runtime essay storm",
    )];
    for r in sweeps_at_once(kube) {
        let what = format!("kube-runtime sweep: {}", storm(&r));
        out.push(value(
            "kube_real_reconcile_ratio",
            sweeps::reconcile_ratio(&r),
            &what,
        ));
        if r.cost <= r.gap && !r.behind_in_fact() {
            out.push(value(
                "kube_real_collapse_at_or_below_gap",
                r.collapse,
                &what,
            ));
        }
    }
    out
}

fn latency_run() -> Vec<Value> {
    let plan = vec![None; 200];
    let rows = rig::real(kube_runtime::findings::race(
        plan,
        &[Release::default()],
        Duration::ZERO,
    ));
    let gap = kube_runtime::ch11::median_gap_ms(&rows);
    vec![value(
        "real_latency_p50_gap_ms",
        gap,
        "200 writes, 2 ms apart",
    )]
}

fn faults_run() -> Vec<Value> {
    let row = Row::run(Fault::SlowHandler);
    vec![value(
        "slow_handler_reconciles",
        row.level.reconciles as f64,
        "slow event handler, level design",
    )]
}

/// Chapter 18's bands' files, in the order of [`cpu::figures`].
const CPU_FILES: [&str; 5] = [
    "cpu_reconcile_ratio",
    "cpu_event_p50_ms",
    "cpu_event_p99_ms",
    "cpu_reconcile_p50_per_cost",
    "cpu_heard_during_reconcile",
];

fn cpu_run() -> Vec<Value> {
    let mut out = Vec::new();
    for r in cpu::pairs().iter().flat_map(|(s, b)| [s, b]) {
        let what = format!(
            "{:?} at {} ms, two threads",
            r.work,
            r.report.cost.as_millis()
        );
        for (file, (name, v)) in CPU_FILES.iter().zip(cpu::figures(r)) {
            assert_eq!(
                name.to_lowercase(),
                *file,
                "CPU_FILES is in the order of figures"
            );
            // On one CPU the share is another claim's (`cpu::check`): its runs go apart.
            let file = match *file {
                "cpu_heard_during_reconcile" if !cpu::two_cpus() => {
                    "cpu_heard_during_reconcile_one_core"
                }
                file => file,
            };
            out.push(value(file, v, &what));
        }
    }
    out
}

const REAL_CPU_FILES: [&str; 5] = [
    "real_cpu_reconcile_ratio",
    "real_cpu_event_p50_ms",
    "real_cpu_event_p99_ms",
    "real_cpu_reconcile_p50_per_cost",
    "real_cpu_heard_during_reconcile",
];

fn cpu_real_run() -> Vec<Value> {
    use crate::lab::rig::real::{self, Instance};
    let server = real::tier(Instance::Main).unwrap_or_else(|absent| panic!("{absent}"));
    let _only = server.exclusive();
    let mut out = Vec::new();
    for r in cpu::real_pair(&server.kubeconfig) {
        let what = format!("{:?} at 20 ms, two threads, real control plane", r.work);
        for (file, (name, v)) in REAL_CPU_FILES.iter().zip(cpu::figures_real(&r)) {
            assert_eq!(
                name.to_lowercase(),
                *file,
                "REAL_CPU_FILES is in the order of figures"
            );
            out.push(value(file, v, &what));
        }
    }
    out
}

fn election_run() -> Vec<Value> {
    use crate::lab::{
        rig::{
            self, ASIDE, Backend, Target, ensure_namespace,
            real::{self, Instance},
        },
        second_replica::real::basis_round,
    };
    let server = real::tier(Instance::Main).unwrap_or_else(|absent| panic!("{absent}"));
    let [crash, release] = rig::real(async {
        let target = Target::start(&Backend::Kubeconfig(server.kubeconfig.clone()))
            .await
            .expect("the real server");
        ensure_namespace(&target.client(), ASIDE).await?;
        basis_round(target.client(), ASIDE).await
    })
    .expect("two elections");
    vec![
        value(
            "real_lease_takeover_after_crash_ms",
            crash.takeover_ms as f64,
            "a crashes, b takes over",
        ),
        value(
            "real_lease_takeover_after_release_ms",
            release.takeover_ms as f64,
            "a releases, b takes over",
        ),
    ]
}

fn real_run() -> Vec<Value> {
    use crate::lab::{
        real_server,
        rig::real::{self, Instance},
    };
    let server = real::tier(Instance::Main).unwrap_or_else(|absent| panic!("{absent}"));
    real_server::basis_round(&server)
        .into_iter()
        .map(|(name, v)| {
            let basis = real_server::bands::BANDS
                .iter()
                .map(|(n, b)| (*n, b.basis))
                .chain(real_server::bands::SHOWN.iter().map(|(n, r)| (*n, r.basis)))
                .find(|(n, _)| *n == name)
                .map(|(_, basis)| basis)
                .unwrap_or_else(|| panic!("{name}: neither a band nor a reference"));
            let band = basis
                .strip_prefix(crate::kit::basis::PREFIX)
                .and_then(|f| f.strip_suffix(".tsv"))
                .unwrap_or_else(|| panic!("{name}: its basis names no file"));
            value(
                band,
                (v * 1000.0).round() / 1000.0,
                format!("real tier: {name}"),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_band_is_measured_by_exactly_one_group() {
        let mut measured: Vec<&str> = GROUPS
            .iter()
            .flat_map(|g| g.bands.iter().copied())
            .collect();
        let n = measured.len();
        measured.sort_unstable();
        measured.dedup();
        assert_eq!(measured.len(), n, "a band in two groups");
        let mut pinned: Vec<String> = super::super::all()
            .iter()
            .map(|p| p.name.to_lowercase())
            .collect();
        pinned.sort_unstable();
        assert_eq!(measured, pinned);
    }

    #[test]
    fn the_intro_group_gives_its_one_band_a_value() {
        let values = intro_run();
        assert_eq!(values.len(), 1);
        assert_eq!(values[0].band, "real_us");
        assert!(
            values[0].value < 10_000_000.0,
            "ten real seconds: {values:?}"
        );
    }
}
