//! The controller: requests, results, events, predicates and handlers, after
//! controller-runtime (`pkg/reconcile`, `pkg/event`, `pkg/predicate`, `pkg/handler`,
//! `pkg/internal/controller`, and the jittered `SyncPeriod` of `pkg/cache`), at v0.25 by
//! default, v0.24 and v0.22 for comparison ([`Release`]).
//!
//! How the parts meet:
//!
//! ```text
//! informer ──on_add/on_update/on_delete──► Event ──predicates──► handler ──► Request ──► queue
//!                                                          (name, namespace only; a priority)
//! ```
//!
//! A worker takes a [`Request`] from the queue, reads the object from the informer's cache and
//! reconciles. The event that caused the request never reaches the reconciler; what does reach
//! it is a [`Context`]: the cache, and a cancellation signal for shutdown and
//! `reconciliation_timeout`.

mod context;
#[allow(clippy::module_inception)] // upstream's layout: pkg/internal/controller/controller.go
mod controller;
mod event;
mod handler;
mod metrics;
pub mod predicate;
pub mod priorityqueue;
mod queue;
mod reconcile;
mod release;
mod source;
mod sync_period;

pub use context::{Context, ContextError};
pub use controller::{Action, Builder, Controller, ControllerError, Reconciler, SyncWait, decide};
pub use event::Event;
pub use handler::{EnqueueRequestForObject, EventHandler, LOW_PRIORITY, priority_when_unchanged};
pub use metrics::{ControllerMetrics, MetricsSnapshot, ResultLabel};
pub use queue::RequestQueue;
pub use reconcile::{Outcome, ReconcileError, ReconcileResult, Request, RequestRef};
pub use release::{QueueKind, Release, SyncGate};
pub use sync_period::{DEFAULT_SYNC_PERIOD, SyncPeriod};
