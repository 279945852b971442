//! Chapter 11's experiments: the book's experiments run on kube-runtime 5.0.0 beside this
//! crate's port of client-go and controller-runtime: the same embedded server, the same
//! objects, the same reconciler cost, in the same process. Follows kube-runtime's
//! `controller/mod.rs` (`Controller`, `applier`, `Action`), `scheduler.rs`,
//! `controller/runner.rs`, `reflector/store.rs` and `utils/predicate.rs`; chapter 11 ("What
//! carries over to kube-rs") shows every experiment.
//!
//! How the two controllers differ in shape:
//!
//! ```text
//!  controlloop (client-go + controller-runtime)       kube-runtime
//!  reflector ─► FIFO ─► informer ─► indexer            watcher ─► reflector ─► Store
//!        handlers ─► predicates ─► queue of keys          applied_objects ─► predicate_filter
//!  workers: claim ─► reconcile(Request, cache) ─► done    scheduler (one slot per object, DelayQueue)
//!  result ─► forget / add_after / add_rate_limited        runner (never one object twice at once)
//!  resync: informer timer replaying the cache             reconcile(Arc<K>, ctx) ─► Action
//!                                                         error_policy(obj, err, ctx) ─► Action
//! ```
//!
//! - [`storm`]: the write storm and its sweeps, through [`crate::lab::rig::burst`]'s
//!   parameters and report.
//! - [`semantics`]: requeue, error and deletion semantics, both controllers on one server.
//! - [`drift`]: what fills the resync's role (`Action::requeue`, `reconcile_all_on`) in the
//!   resync chapter's drift scenario, and `predicate_filter` against a status-write storm.
//! - [`findings`]: minimal reproductions of what running kube-runtime turned up.
//! - [`claims`]: the chapter's table, one row per claim of the book, computed from runs.
//!
//! # Invariants
//! 1. Both controllers of an experiment watch the same objects on the same embedded server,
//!    and their reconcilers do the same work: a difference in the log is a difference between
//!    the runtimes, never between the setups. The one exception is named where it is made:
//!    the drift rows take this crate's side from the resync chapter's own runs, whose writes
//!    fall on half hours, and kube-runtime's from [`drift::script`], on whole hours.
//! 2. Virtual-time experiments run on [`crate::lab::rig::paused`] with the server in-process, so
//!    every instant in a [`Log`] is exact and repeats from run to run.
//! 3. Where a run's result is the queue's decision (a requeue pending under a new trigger, the
//!    error backoff, a deleted object's waiting requeue, how soon a worker gets a new key),
//!    this crate's controller runs once per [`Release`] ([`semantics::at_each_release`]) and
//!    logs as `Runtime::Controlloop(release)`; elsewhere it runs at the default release
//!    ([`Runtime::ours`]).
//!
//! # Concurrency
//! A [`Log`] is a `parking_lot::Mutex<Vec<_>>` taken for one push or one copy, never across an
//! await. Each controller runs in its own tokio task; kube-runtime additionally spawns one
//! task per reconcile (`Controller::run`).
//!
//! # Differences from upstream
//! kube-runtime is used as published (no port): these modules only drive it. The one
//! deliberate deviation is [`storm::Design::DetachedWork`], a broken reconciler kept to show the
//! per-object detectors firing.

pub mod bands;
pub mod ch11;
pub mod claims;
pub mod drift;
pub mod findings;
pub mod semantics;
pub mod storm;

pub use ch11::{ch11_findings, ch11_findings_real, ch11_semantics, ch11_storm, ch11_storm_real};

use std::{fmt::Write as _, sync::Arc, time::Duration};

use futures::{Stream, StreamExt};
use kube::runtime::controller;
use parking_lot::Mutex;
use tokio::time::Instant;

use controlloop::controller::Release;

/// Which controller a [`Log`] entry comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Runtime {
    /// This crate's `Controller` (client-go v0.36) following this controller-runtime release.
    Controlloop(Release),
    /// kube-runtime 5.0.0's `Controller`.
    KubeRuntime,
}

impl Runtime {
    /// This crate's controller at its default release (the one an experiment gets when the
    /// queue does not decide its result).
    pub fn ours() -> Runtime {
        Runtime::Controlloop(Release::default())
    }

    /// Ours at the default release, then kube-runtime: the two an experiment compares when the
    /// release does not matter.
    pub fn both() -> [Runtime; 2] {
        [Runtime::ours(), Runtime::KubeRuntime]
    }

    /// The name a table prints: `controlloop v0.24`, `kube-runtime`.
    pub fn name(self) -> String {
        match self {
            Runtime::Controlloop(release) => format!("controlloop {release}"),
            Runtime::KubeRuntime => "kube-runtime".to_owned(),
        }
    }
}

/// What the reconcilers of both controllers did, and when (tokio time since the log began).
#[derive(Debug, Clone)]
pub struct Log {
    t0: Instant,
    entries: Arc<Mutex<Vec<(Runtime, Duration, String)>>>,
}

impl Default for Log {
    fn default() -> Self {
        Self::new()
    }
}

impl Log {
    /// An empty log whose clock starts now.
    pub fn new() -> Log {
        Log {
            t0: Instant::now(),
            entries: Arc::default(),
        }
    }

    /// Notes `what` for `runtime` now; returns how many times `runtime` has noted exactly
    /// `what`, this time included (so a reconciler can tell its first run from later ones).
    pub fn record(&self, runtime: Runtime, what: impl Into<String>) -> usize {
        let what = what.into();
        let mut e = self.entries.lock();
        e.push((runtime, self.t0.elapsed(), what.clone()));
        e.iter()
            .filter(|(r, _, w)| *r == runtime && *w == what)
            .count()
    }

    /// `runtime`'s entries as (time, note), in order.
    pub fn entries(&self, runtime: Runtime) -> Vec<(Duration, String)> {
        self.entries
            .lock()
            .iter()
            .filter(|(r, _, _)| *r == runtime)
            .map(|(_, at, what)| (*at, what.clone()))
            .collect()
    }

    /// When `runtime`'s entries happened, in whole `unit`s (rounded down).
    pub fn times(&self, runtime: Runtime, unit: Duration) -> Vec<u64> {
        self.entries(runtime)
            .iter()
            .map(|(at, _)| (at.as_nanos() / unit.as_nanos()) as u64)
            .collect()
    }

    /// `runtime`'s notes, in order.
    pub fn notes(&self, runtime: Runtime) -> Vec<String> {
        self.entries(runtime).into_iter().map(|(_, n)| n).collect()
    }

    /// The runtimes that noted anything, in table order (this crate's releases, oldest first,
    /// then kube-runtime).
    pub fn runtimes(&self) -> Vec<Runtime> {
        let mut v: Vec<Runtime> = self.entries.lock().iter().map(|(r, _, _)| *r).collect();
        v.sort();
        v.dedup();
        v
    }

    /// One line per runtime: `name  at: note | at: note …`, times in `unit`s with `suffix`.
    pub fn render(&self, unit: Duration, suffix: &str) -> String {
        let mut out = String::new();
        for rt in self.runtimes() {
            let items: Vec<String> = self
                .entries(rt)
                .iter()
                .map(|(at, what)| {
                    let t = at.as_secs_f64() / unit.as_secs_f64();
                    format!("{}{suffix} {what}", trim(t))
                })
                .collect();
            let _ = writeln!(out, "{:<17}  {}", rt.name(), items.join(" | "));
        }
        out
    }

    /// Drives a kube-runtime `Controller::run` stream in a task, noting each error it yields
    /// other than the reconciler's own (which the reconciler notes itself): `ObjectNotFound`
    /// for a request whose object has left the store, and watch errors.
    pub fn drive<T, RE, QE>(
        &self,
        stream: impl Stream<Item = Result<T, controller::Error<RE, QE>>> + Send + 'static,
    ) -> tokio::task::JoinHandle<()>
    where
        RE: std::error::Error + 'static,
        QE: std::error::Error + 'static,
    {
        let log = self.clone();
        tokio::spawn(stream.for_each(move |r| {
            match r {
                Err(controller::Error::ReconcilerFailed(..)) | Ok(_) => {}
                Err(e) => {
                    log.record(Runtime::KubeRuntime, format!("stream error: {e}"));
                }
            }
            async {}
        }))
    }
}

/// Up to three decimals, without trailing zeros.
fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}
