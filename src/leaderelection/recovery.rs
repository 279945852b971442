//! `Recovery`: a leader that could not renew in time stops leading but keeps trying to renew
//! the lease it held, and leads again if it can. Follows kubernetes/client-go v0.38.0-beta.0
//! `tools/leaderelection/leaderelection.go` (`renewWithRecovery`, `recoverLease`,
//! `tryRecover`, `notifyStoppedLeading`); chosen with
//! [`LeaderElectionConfig::recovery`](super::LeaderElectionConfig::recovery).
//!
//! ```text
//!  leading ─ renew poll (tryRecover every retry_period, up to renew_deadline) ─ renewed ─► leading
//!     │ failed for renew_deadline, or the lease seen lost
//!     ▼
//!  gate closed, "stopped leading", on_stopped_leading ─► recovering: tryRecover every
//!  retry_period ─ renewed ─► gate open, "resumed leading" ─► leading
//!               ─ another holder, or no Lease, or the deadline passed ─► the run ends
//!  the run ends (or `stop`) ─► gate closed ─► release (if release_on_cancel) ─► token cancelled
//! ```
//!
//! # Invariants
//! 1. A recovering elector never creates the Lease nor takes it from another holder: it
//!    writes only over a record naming it (`tryRecover`, module invariant I6).
//! 2. The write gate is closed whenever the elector does not lead: from the failed renewal
//!    until a recovery succeeds, and before any release.
//! 3. `on_stopped_leading` is called once per loss of leadership; the leading token is
//!    cancelled only when the run ends.
//!
//! # Differences from upstream
//! - No metrics (`leaderOff`/`leaderOn`), as in the rest of the port.
//! - An attempt in flight when the recovery deadline passes or the run is stopped is dropped
//!   with its request (in Go its context is cancelled and it fails).

use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

use super::elector::LeaderElector;
use super::lock::ResourceLock;
use super::state::Renewal;

impl<L: ResourceLock> LeaderElector<L> {
    /// The renew loop under `Recovery` (`renewWithRecovery`): as the renew loop, but a poll
    /// that fails or sees the lease lost closes the gate and calls `on_stopped_leading`, then
    /// recovers (keeps I2, I3); the run ends only when the recovery fails or `ctx` is
    /// cancelled, after the release if `release_on_cancel`, with the gate closed first.
    pub(super) async fn renew_with_recovery(&self, ctx: &CancellationToken) {
        let renewing = ctx.child_token();
        let mut leading = true;
        loop {
            if renewing.is_cancelled() {
                break;
            }
            let renewed = self.poll_renew(&renewing, true).await == Renewal::Renewed;
            self.maybe_report_transition();
            if !renewed {
                tracing::info!(target: "controlloop::leaderelection", lock = %self.lock.describe(), "failed to renew lease");
                leading = false;
                self.gate.close();
                self.lock.record_event("stopped leading");
                if renewing.is_cancelled() {
                    break;
                }
                self.notify_stopped_leading();
                if !self.recover_lease(&renewing).await {
                    break;
                }
                leading = true;
                self.leading_again();
                self.gate.open();
                self.lock.record_event("resumed leading");
                tracing::info!(target: "controlloop::leaderelection", lock = %self.lock.describe(), "successfully recovered lease");
            }
            tokio::select! {
                biased;
                () = renewing.cancelled() => break,
                () = sleep(self.config.retry_period) => {}
            }
        }
        if leading {
            // Stopped between two renewals.
            self.lock.record_event("stopped leading");
        }
        if self.config.release_on_cancel {
            // The lease is usually still this elector's (a recovery that ran out of time): give
            // it up, gated writes stopped first. A lease that changed hands is left alone.
            self.gate.close();
            self.release().await;
        }
    }

    /// `recoverLease`: an attempt now, then one every retry period after the previous one
    /// ended, each within `renew_deadline`, until one renews (true) or sees the lease lost, or
    /// the recovery deadline passes, or `ctx` is cancelled (false).
    async fn recover_lease(&self, ctx: &CancellationToken) -> bool {
        tracing::info!(target: "controlloop::leaderelection", lock = %self.lock.describe(), "attempting to recover leader lease");
        let deadline = self.config.recovery.flatten().map(|d| Instant::now() + d);
        let expired = async {
            match deadline {
                Some(at) => sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(expired);
        loop {
            if ctx.is_cancelled() || deadline.is_some_and(|at| Instant::now() >= at) {
                return false;
            }
            let attempt = tokio::time::timeout(self.config.renew_deadline, self.try_recover());
            let outcome = tokio::select! {
                biased;
                () = ctx.cancelled() => Renewal::Failed,
                () = &mut expired => Renewal::Failed,
                outcome = attempt => outcome.unwrap_or(Renewal::Failed),
            };
            self.maybe_report_transition();
            match outcome {
                Renewal::Renewed => return true,
                Renewal::Lost => {
                    tracing::info!(target: "controlloop::leaderelection", lock = %self.lock.describe(), "giving up on recovering leader lease");
                    return false;
                }
                Renewal::Failed => {}
            }
            tokio::select! {
                biased;
                () = ctx.cancelled() => return false,
                () = &mut expired => return false,
                () = sleep(self.config.retry_period) => {}
            }
        }
    }

    /// `tryRecover`: renews the lease only if this elector still holds it, never creating or
    /// taking it (keeps I1): the fast path while its lease is valid, else a read; a 404 or
    /// another holder is `Lost`.
    pub(super) async fn try_recover(&self) -> Renewal {
        let (now, wall) = self.clock.now();
        self.observed.lock().record_attempt(now);
        // 1. The fast path: an update from the record observed last, conditional on its
        // resourceVersion; a Lease that changed hands fails here and is read below.
        let fast = self.observed.lock().fast_path(now, wall);
        if let Some(record) = fast {
            match self.lock.update(record.clone()).await {
                Ok(()) => {
                    self.observed.lock().set(record, Instant::now());
                    return Renewal::Renewed;
                }
                Err(e) => {
                    tracing::debug!(target: "controlloop::leaderelection", lock = %self.lock.describe(), error = %e, "failed to update lease optimistically, falling back to slow path");
                }
            }
        }
        // 2. Read the record; never create it.
        let (old, raw) = match self.lock.get().await {
            Ok(read) => read,
            Err(e) if e.is_not_found() => {
                tracing::info!(target: "controlloop::leaderelection", lock = %self.lock.describe(), "lease lock was deleted");
                return Renewal::Lost;
            }
            Err(e) => {
                tracing::warn!(target: "controlloop::leaderelection", lock = %self.lock.describe(), error = %e, "error retrieving lease lock");
                return Renewal::Failed;
            }
        };
        // 3. and 4. Observe it; renew only a lease this elector still holds.
        let renewal = {
            let mut o = self.observed.lock();
            o.observe_read(old.clone(), raw, Instant::now());
            o.recovery_renewal(&old, wall)
        };
        let Some(record) = renewal else {
            tracing::info!(target: "controlloop::leaderelection", lock = %self.lock.describe(), holder = %old.holder_identity, "lease lock changed holder");
            return Renewal::Lost;
        };
        if self.write(record).await {
            Renewal::Renewed
        } else {
            Renewal::Failed
        }
    }
}
