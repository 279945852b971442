//! What a reconciler gets besides its request: a view of the cache, and a cancellation signal
//! with an optional deadline. The Rust shape of the `context.Context` controller-runtime passes
//! to `Reconcile` (`pkg/internal/controller/controller.go`, `Controller.Reconcile` and
//! `reconcileHandler`).
//!
//! ```text
//!  controller token ── cancelled by shutdown(), run's stop future, or dropping run
//!        └─ child token, one per reconcile ── also cancelled at the deadline
//!              (ReconciliationTimeout), which is recorded as DeadlineExceeded
//! ```
//!
//! A cancelled context never stops a reconcile by itself: the reconciler sees
//! [`Context::cancelled`] resolve and chooses what to return, and its return value is handled
//! as any other (upstream: `ctx.Done()` closes, the reconciler returns, `reconcileHandler`
//! decides). That is also why no reconcile is aborted at an `.await` when the controller stops.
//!
//! # Invariants
//! 1. [`Context::err`] is `None` until the token is cancelled, then fixed for good:
//!    `DeadlineExceeded` if the deadline cancelled it first, else `Canceled`.
//! 2. A reconcile never sees the event that caused it (controller I3): the only view of the
//!    object is the informer's indexer.
//!
//! # Concurrency
//! The token is tokio-util's `CancellationToken` (cheap to clone, safe to await from any
//! task). The deadline flag is an atomic set before the token is cancelled, so any task that
//! sees the cancellation also sees why (keeps I1).
//!
//! # Differences from upstream
//! - No reconcile ID or logger in the context.
//! - A reconciler that creates its own deadline derives a child token
//!   ([`CancellationToken::child_token`]) and a timer of its own; cancelling it does not touch
//!   this context, as in Go.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Request;
use crate::cache::{Object, Store};

/// Why a reconcile's context was cancelled (Go's `ctx.Err()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, thiserror::Error)]
pub enum ContextError {
    /// The controller is shutting down (`context.Canceled`).
    #[error("context canceled")]
    Canceled,
    /// The reconcile ran past the controller's reconciliation timeout
    /// (`context.DeadlineExceeded`).
    #[error("context deadline exceeded")]
    DeadlineExceeded,
}

/// What a reconciler can see besides the request: the informer's cache, which worker it runs
/// on, and whether it should stop. There is deliberately no event in here (keeps I2).
pub struct Context<K> {
    pub(crate) indexer: Store<K>,
    pub(crate) worker: usize,
    pub(crate) token: CancellationToken,
    pub(crate) deadline: Option<Instant>,
    /// Set (before the token is cancelled) when the deadline fired first (keeps I1).
    pub(crate) deadline_exceeded: Arc<AtomicBool>,
}

impl<K> Clone for Context<K> {
    fn clone(&self) -> Self {
        Context {
            indexer: self.indexer.clone(),
            worker: self.worker,
            token: self.token.clone(),
            deadline: self.deadline,
            deadline_exceeded: self.deadline_exceeded.clone(),
        }
    }
}

impl<K> Context<K> {
    /// A context for one reconcile: a child of the controller's token, with an optional
    /// deadline that [`Context::expire`] enforces.
    pub(crate) fn new(
        indexer: Store<K>,
        worker: usize,
        parent: &CancellationToken,
        deadline: Option<Instant>,
    ) -> Self {
        Context {
            indexer,
            worker,
            token: parent.child_token(),
            deadline,
            deadline_exceeded: Arc::default(),
        }
    }

    /// The deadline fired: cancel, recording `DeadlineExceeded` unless the controller had
    /// cancelled first (keeps I1).
    pub(crate) fn expire(&self) {
        if !self.token.is_cancelled() {
            self.deadline_exceeded.store(true, Ordering::SeqCst);
        }
        self.token.cancel();
    }

    /// Which worker (0-based) runs this reconcile.
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// Resolves once the reconcile should stop: the controller is shutting down or the
    /// reconciliation timeout has passed (Go's `<-ctx.Done()`).
    pub async fn cancelled(&self) {
        self.token.cancelled().await
    }

    /// Whether [`Context::cancelled`] has resolved.
    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Why the context is cancelled; `None` while it is not (Go's `ctx.Err()`, keeps I1).
    pub fn err(&self) -> Option<ContextError> {
        if !self.token.is_cancelled() {
            None
        } else if self.deadline_exceeded.load(Ordering::SeqCst) {
            Some(ContextError::DeadlineExceeded)
        } else {
            Some(ContextError::Canceled)
        }
    }

    /// When the reconciliation timeout cancels this reconcile; `None` without a timeout (Go's
    /// `ctx.Deadline()`).
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The token itself, to hand to code that takes a `CancellationToken` or to derive a
    /// child for a shorter deadline of the reconciler's own.
    pub fn cancellation_token(&self) -> &CancellationToken {
        &self.token
    }
}

impl<K: Object> Context<K> {
    /// The object the request names, as the cache holds it *now*; `None` if it is gone.
    pub fn get(&self, request: &Request) -> Option<Arc<K>> {
        self.indexer.get_by_key(&request.key())
    }
    /// The whole cache, for reconcilers that read other objects.
    pub fn indexer(&self) -> &Store<K> {
        &self.indexer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn ctx(parent: &CancellationToken) -> Context<ConfigMap> {
        Context::new(Store::new(), 0, parent, None)
    }

    #[test]
    fn err_says_why_and_the_first_cause_wins() {
        let parent = CancellationToken::new();
        let c = ctx(&parent);
        assert_eq!(c.err(), None);
        c.expire();
        parent.cancel();
        assert_eq!(c.err(), Some(ContextError::DeadlineExceeded));

        let parent = CancellationToken::new();
        let c = ctx(&parent);
        parent.cancel();
        c.expire(); // the deadline comes after the shutdown: still Canceled
        assert_eq!(c.err(), Some(ContextError::Canceled));
    }

    #[test]
    fn a_reconcilers_own_child_token_does_not_cancel_the_context() {
        let parent = CancellationToken::new();
        let c = ctx(&parent);
        c.cancellation_token().child_token().cancel();
        assert!(!c.is_cancelled());
        assert_eq!(
            ContextError::DeadlineExceeded.to_string(),
            "context deadline exceeded"
        );
    }
}
