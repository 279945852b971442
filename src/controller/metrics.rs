//! A controller's counters: the `controller_runtime_*` metrics of one controller. Follows
//! controller-runtime's `pkg/internal/controller/metrics/metrics.go` and where
//! `pkg/internal/controller/controller.go` increments them (v0.22.5, v0.24.1 and v0.25.3).
//!
//! # Invariants
//! 1. `reconcile_total` (the four result counters) counts every reconcile that returned,
//!    recovered panics included (as errors); an unrecovered panic is not a result.
//! 2. `panics` counts every reconciler panic, recovered or not (upstream increments
//!    `ReconcilePanics` before it looks at `RecoverPanic`, at both tags).
//! 3. `timeouts` counts reconciles that returned after *their own* deadline cancelled them,
//!    and only under a release that has the metric (v0.24).
//!
//! # Concurrency
//! Every counter is an atomic, updated without a lock; a [`MetricsSnapshot`] is not atomic
//! across counters.
//!
//! # Differences from upstream
//! - No histogram (`reconcile_time_seconds`) and no `max_concurrent_reconciles` gauge.
//! - Two counters of the port's own: `events` and `enqueued`, for the book's experiments.

use std::sync::atomic::{AtomicU64, Ordering};

use super::reconcile::Outcome;

/// The `result` label of upstream's `controller_runtime_reconcile_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum ResultLabel {
    /// No error, nothing asked.
    Success,
    /// No error, `requeue_after > 0`.
    RequeueAfter,
    /// No error, `requeue` set.
    Requeue,
    /// Any error, terminal or not.
    Error,
}

/// Counters a controller keeps (upstream's `controller_runtime_*` metrics for one
/// controller). Read them with [`ControllerMetrics::snapshot`].
#[derive(Debug, Default)]
pub struct ControllerMetrics {
    pub(crate) events: AtomicU64,
    pub(crate) enqueued: AtomicU64,
    success: AtomicU64,
    requeue_after: AtomicU64,
    requeue: AtomicU64,
    errors: AtomicU64,
    terminal_errors: AtomicU64,
    panics: AtomicU64,
    timeouts: AtomicU64,
    pub(crate) active_workers: AtomicU64,
}

/// A copy of a controller's counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct MetricsSnapshot {
    /// Informer callbacks that reached the controller (before predicates).
    pub events: u64,
    /// Requests the handler added to the queue (after predicates; before coalescing).
    pub enqueued: u64,
    /// `reconcile_total{result="success"}`.
    pub success: u64,
    /// `reconcile_total{result="requeue_after"}`.
    pub requeue_after: u64,
    /// `reconcile_total{result="requeue"}`.
    pub requeue: u64,
    /// `reconcile_errors_total` (= `reconcile_total{result="error"}`), terminal ones included.
    pub errors: u64,
    /// `terminal_reconcile_errors_total`.
    pub terminal_errors: u64,
    /// `reconcile_panics_total`: every panic, recovered or not (keeps I2).
    pub panics: u64,
    /// `reconcile_timeouts_total` (v0.24; always 0 under v0.22, which has no such metric).
    pub timeouts: u64,
    /// `active_workers`: reconciles running now.
    pub active_workers: u64,
}

impl MetricsSnapshot {
    /// Every reconcile that finished, whatever its result.
    pub fn reconciles(&self) -> u64 {
        self.success + self.requeue_after + self.requeue + self.errors
    }
}

impl ControllerMetrics {
    /// The counters now.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let l = |c: &AtomicU64| c.load(Ordering::SeqCst);
        MetricsSnapshot {
            events: l(&self.events),
            enqueued: l(&self.enqueued),
            success: l(&self.success),
            requeue_after: l(&self.requeue_after),
            requeue: l(&self.requeue),
            errors: l(&self.errors),
            terminal_errors: l(&self.terminal_errors),
            panics: l(&self.panics),
            timeouts: l(&self.timeouts),
            active_workers: l(&self.active_workers),
        }
    }

    /// One reconcile's result (keeps I1).
    pub(crate) fn record(&self, label: ResultLabel, outcome: &Outcome) {
        let c = match label {
            ResultLabel::Success => &self.success,
            ResultLabel::RequeueAfter => &self.requeue_after,
            ResultLabel::Requeue => &self.requeue,
            ResultLabel::Error => &self.errors,
        };
        c.fetch_add(1, Ordering::SeqCst);
        if matches!(outcome, Err(e) if e.is_terminal()) {
            self.terminal_errors.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A reconciler panicked, whatever happens next (keeps I2).
    pub(crate) fn panicked(&self) {
        self.panics.fetch_add(1, Ordering::SeqCst);
    }

    /// A reconcile returned after its own deadline cancelled it (keeps I3; the caller checks
    /// the release).
    pub(crate) fn timed_out(&self) {
        self.timeouts.fetch_add(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::ReconcileError;

    #[test]
    fn a_recovered_panic_is_an_error_result_and_the_panic_is_counted_apart() {
        let m = ControllerMetrics::default();
        m.panicked();
        m.record(
            ResultLabel::Error,
            &Err(ReconcileError::Panic("boom".into())),
        );
        m.record(ResultLabel::Error, &Err(ReconcileError::terminal("bad")));
        let s = m.snapshot();
        assert_eq!((s.panics, s.errors, s.terminal_errors), (1, 2, 1));
        assert_eq!(s.reconciles(), 2);
    }
}
