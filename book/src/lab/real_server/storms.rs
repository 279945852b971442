//! The book's real-clock storms on a real kube-apiserver: chapter 06's essay storm and its
//! three sweeps, and chapter 11's essay storm on kube-runtime, each through
//! [`Backend::Kubeconfig`] unchanged. The runs go one after another (one real server, one
//! object), where the embedded server's bands were measured with the three sweeps at once,
//! each on a server of its own.

use std::path::Path;

use crate::lab::{
    burst::sweeps::Sweep,
    kube_runtime::storm::{self as kube_storm, Knobs},
    rig::{
        Backend,
        burst::{
            self, Clock, Params, Report, converge_overhead_ms, expected_reconciles,
            reconcile_ratio, write_overhead_ms,
        },
    },
};

/// Every run of one round on one server.
#[derive(Debug, Clone)]
pub struct Storms {
    /// Chapter 06's essay storm (200 writes, 1 ms apart, 20 ms per reconcile), this crate.
    pub essay: Report,
    /// The same storm on kube-runtime (chapter 11).
    pub kube_essay: Report,
    /// Chapter 06's three sweeps, in [`Sweep::ALL`] order.
    pub sweeps: Vec<Vec<Report>>,
}

/// Runs one round on the cluster of `kubeconfig` (real clock).
pub fn run(kubeconfig: &Path) -> Storms {
    let backend = Backend::Kubeconfig(kubeconfig.to_path_buf());
    // book: ch14_storms
    let essay = Params::essay().real().backend(backend.clone()); // chapter 06's storm, real server
    let ours = burst::run(&essay).expect("the essay's storm on the real server");
    let kube = kube_storm::run(&essay, Knobs::default()).expect("kube-runtime's, the same");
    let sweeps: Vec<Vec<Report>> = Sweep::ALL
        .iter()
        .map(|s| {
            s.params(Clock::Real) // chapter 06's sweeps, one run after another
                .into_iter()
                .map(|p| burst::run(&p.backend(backend.clone())).expect("a sweep's storm"))
                .collect()
        })
        .collect();
    // book: end ch14_storms
    Storms {
        essay: ours,
        kube_essay: kube,
        sweeps,
    }
}

impl Storms {
    /// Every sweep run, in order.
    pub fn sweep_runs(&self) -> impl Iterator<Item = &Report> {
        self.sweeps.iter().flatten()
    }

    /// This round's values for each band it feeds, by band name (one value per run).
    pub fn values(&self) -> Vec<(&'static str, f64)> {
        let mut out = vec![
            ("REAL_SERVER_ESSAY_RECONCILES", self.essay.reconciles as f64),
            (
                "REAL_SERVER_KUBE_ESSAY_RECONCILES",
                self.kube_essay.reconciles as f64,
            ),
        ];
        for r in self.sweep_runs() {
            out.push(("REAL_SERVER_RECONCILE_RATIO", reconcile_ratio(r)));
            out.push(("REAL_SERVER_WRITE_OVERHEAD_MS", write_overhead_ms(r)));
            out.push(("REAL_SERVER_CONVERGE_OVERHEAD_MS", converge_overhead_ms(r)));
            if r.cost <= r.gap && !r.behind_in_fact() {
                out.push(("REAL_SERVER_COLLAPSE_AT_OR_BELOW_GAP", r.collapse));
            }
        }
        out
    }

    /// The durable claims, exact on any server: every write's event heard, the last value
    /// reconciled, and some events merged whenever the reconciles took longer than the writes'
    /// mean interval.
    pub fn check_durable(&self) -> Result<(), String> {
        for r in std::iter::once(&self.essay)
            .chain(std::iter::once(&self.kube_essay))
            .chain(self.sweep_runs())
        {
            let at = format!(
                "{} writes, {} ms gap, {} ms cost",
                r.writes_issued,
                r.gap.as_millis(),
                r.cost.as_millis()
            );
            if r.events_delivered != r.writes_issued {
                return Err(format!(
                    "{at}: {} events for {} writes: an event was lost",
                    r.events_delivered, r.writes_issued
                ));
            }
            if !r.ended_on_final_value() {
                return Err(format!(
                    "{at}: ended on {:?}, not {}",
                    r.final_observed, r.final_written
                ));
            }
            // Behind by the clock, not by the asked numbers: a write to a real server takes
            // several ms, so a 5 ms reconcile can keep up with writes "1 ms apart".
            if r.behind_in_fact() && r.collapse <= 1.0 {
                return Err(format!("{at}: behind in fact, yet nothing merged"));
            }
            if expected_reconciles(r) <= 0.0 {
                return Err(format!("{at}: no span"));
            }
        }
        Ok(())
    }
}
